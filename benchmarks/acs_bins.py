"""What shaped bins and a declared workload buy on NIST's ACS excerpts: AIM on the MA or TX excerpt
with the numeric columns binned in equal widths (the data dictionary's bounds, ``uniform``), against
the same schema with the cut points a DP draft proposes at its noisy quantiles (``schema draft --dp
--edges quantiles``, whose budget is reported beside the release's; ``shaped``), and that schema
with the metric's own workload declared (``--workload`` of every pair with PUMA; ``workload``).
Score: SDNist v2.3's k-marginal (``evaluate --kmarginal``), higher is better.

    python benchmarks/acs_bins.py --state ma --epsilon 1 --draft-epsilon 0.5 --seeds 2

The excerpts are read from ``../shared/data/nist-acs-excerpts`` beside the checkout (``--excerpts``).
INDP is left out (271 industry codes; the k-marginal ignores it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
EXCERPTS = ROOT.parent / "shared" / "data" / "nist-acs-excerpts"
NUMERIC = ("AGEP", "NOC", "NPF", "DENSITY", "PINCP", "POVPIP", "PWGTP", "WGTP")
SKIP = ("INDP",)
#: Numeric columns whose cut points the DP draft proposes (the skewed ones; AGEP and the counts of
#: children and family members are fine in equal widths).
SHAPED = ("DENSITY", "PINCP", "POVPIP", "PWGTP", "WGTP")


def dictionary_schema(folder: Path, state: str) -> dict:
    """The schema from the public data dictionary alone: its codes, its bounds, 'N' as missing."""
    d = json.loads((folder / "data_dictionary.json").read_text())
    prefix = {"ma": "25-", "tx": "48-"}[state]
    columns = []
    for name, entry in d.items():
        if name in SKIP:
            continue
        values = entry.get("values", {})
        missing = "N" in values
        extra = {"missing": True, "missing_values": ["N"]} if missing else {}
        if name in NUMERIC:
            lo, hi = values["min"], values["max"]
            lo = min([lo] + [float(k) for k in values if k not in ("min", "max", "N")])
            hi = max([hi] + [float(k) for k in values if k not in ("min", "max", "N")])
            whole = name != "DENSITY"
            columns.append({"name": name, "type": "numeric", "lower": lo, "upper": hi, "integer": whole, **extra})
        else:
            codes = [k for k in values if k != "N"]
            if name == "PUMA":
                codes = [k for k in codes if k.startswith(prefix)]
            columns.append({"name": name, "type": "categorical", "categories": codes, **extra})
    return {"columns": columns}


def run(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "privsyn_fed", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"privsyn-fed {' '.join(args)}: {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def kmarginal(real: Path, syn: Path, schema: Path, out: Path) -> float:
    run(
        "evaluate", "--real", str(real), "--synthetic", str(syn), "--schema", str(schema), "--kmarginal",
        "--json", str(out), "--force",
    )  # fmt: skip
    return float(json.loads(out.read_text())["kmarginal"]["score"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state", choices=("ma", "tx"), default="ma")
    ap.add_argument("--epsilon", type=float, default=1.0, help="the release's epsilon")
    ap.add_argument("--draft-epsilon", type=float, default=0.5, help="the DP draft's epsilon (its own ledger)")
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--bins", type=int, default=32)
    ap.add_argument("--seeds", type=int, default=2, help="releases per schema (unseeded noise; the mean is reported)")
    ap.add_argument("--method", default="aim")
    ap.add_argument("--excerpts", type=Path, default=EXCERPTS)
    ap.add_argument(
        "--configs", nargs="+", choices=("uniform", "shaped", "workload"), default=["uniform", "shaped", "workload"]
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        w = Path(tmp)
        real = pd.read_csv(args.excerpts / f"{args.state}2019.csv", dtype=str).drop(columns=list(SKIP))
        real_path = w / "real.csv"
        real.to_csv(real_path, index=False)
        uniform = dictionary_schema(args.excerpts, args.state)
        for c in uniform["columns"]:
            if c["type"] == "numeric":
                c["bins"] = args.bins
        (w / "uniform.json").write_text(json.dumps(uniform))
        run(
            "schema", "draft", str(real_path), "--out", str(w / "draft.json"), "--dp", str(args.draft_epsilon),
            "--delta", str(args.delta), "--bins", str(args.bins), "--edges", "quantiles", "--missing-value", "N",
            "--leave-unfound",
        )  # fmt: skip
        drafted = {c["name"]: c for c in json.loads((w / "draft.json").read_text())["columns"]}
        shaped = json.loads(json.dumps(uniform))
        for c in shaped["columns"]:
            cuts = drafted.get(c["name"], {}).get("edges")
            if c["name"] in SHAPED and cuts:
                inside = [e for e in cuts if c["lower"] < e < c["upper"] or c.get("integer") and e == c["upper"]]
                c.pop("bins", None)
                c["edges"] = inside
        (w / "shaped.json").write_text(json.dumps(shaped))
        (w / "workload.json").write_text(json.dumps([["PUMA", "*", "*"]]))
        print(f"{args.state.upper()} excerpt, {len(real)} rows, {args.method} at epsilon {args.epsilon}:")
        for name in args.configs:
            schema = w / ("uniform.json" if name == "uniform" else "shaped.json")
            workload = ["--workload", str(w / "workload.json")] if name == "workload" else []
            scores, seconds = [], []
            for s in range(args.seeds):
                out = w / f"{name}-{s}.csv"
                start = time.monotonic()
                run(
                    "synth", "--method", args.method, "--schema", str(schema), "--silo", str(real_path),
                    "--epsilon", str(args.epsilon), "--delta", str(args.delta), "--out", str(out), "--quiet",
                    *workload,
                )  # fmt: skip
                seconds.append(time.monotonic() - start)
                scores.append(kmarginal(real_path, out, schema, w / f"{name}-{s}.json"))
            bins = {c["name"]: len(c["edges"]) + 1 for c in shaped["columns"] if "edges" in c}
            what = f"cut points of a DP draft at epsilon {args.draft_epsilon} {bins}" if name != "uniform" else ""
            print(
                f"  {name:8s} k-marginal {sum(scores) / len(scores):6.1f} ({', '.join(f'{v:.1f}' for v in scores)}), "
                f"{sum(seconds) / len(seconds):.0f} s per release {what}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
