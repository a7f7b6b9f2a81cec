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

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
EXCERPTS = ROOT.parent / "shared" / "data" / "nist-acs-excerpts"
NUMERIC = ("AGEP", "NOC", "NPF", "DENSITY", "PINCP", "POVPIP", "PWGTP", "WGTP")
SKIP = ("INDP",)
#: Numeric columns whose cut points the DP draft proposes (the skewed ones; AGEP and the counts of
#: children and family members are fine in equal widths).
SHAPED = ("DENSITY", "PINCP", "POVPIP", "PWGTP", "WGTP")
#: Each state excerpt's PUMA codes begin with its state's FIPS code.
STATE_PUMAS = {"ma": "25-", "tx": "48-"}


def dictionary_schema(folder: Path, state: str) -> dict:
    """The schema from the public data dictionary alone: its codes, its bounds, 'N' as missing; a
    numeric column's coded values beside its range (POVPIP's 501, "income above 5 x poverty line";
    WGTP's 0, "group quarters"; NOC's 0) are atoms, reproduced exactly."""
    d = json.loads((folder / "data_dictionary.json").read_text())
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
            coded = sorted(float(k) for k in values if k not in ("min", "max", "N"))
            extra |= {"atoms": coded} if coded else {}
            columns.append({"name": name, "type": "numeric", "lower": lo, "upper": hi, "integer": whole, **extra})
        else:
            codes = [k for k in values if k != "N"]
            if name == "PUMA" and state in STATE_PUMAS:
                codes = [k for k in codes if k.startswith(STATE_PUMAS[state])]
            elif name == "PUMA":  # the national excerpt: the dictionary's 20 PUMAs outside MA and TX
                codes = [k for k in codes if not k.startswith(tuple(STATE_PUMAS.values()))]
            columns.append({"name": name, "type": "categorical", "categories": codes, **extra})
    return {"columns": columns}


def _if_then(group: str, name: str, when: dict, then: dict) -> tuple[str, bool, dict]:
    return group, True, {"name": name, "if": when, "then": then}


def _forbid(group: str, name: str, cells: dict, declared: bool = True) -> tuple[str, bool, dict]:
    return group, declared, {"name": name, "forbid": cells}


#: SDNist v2.3's consistency rules (``sdnist/metrics/inconsistency.py``) as public constraints, each
#: with its group (``age`` or ``housing``) and whether a release declares it: all but ``child_NOC``
#: (children under 10 have no NOC), which a tenth of the excerpts' own rows break. The number of
#: children must stay below the family's size (``too_many_children``) is one constraint per size.
#: SDNist's work rules test INDP (left out here) and incomes above 3,000,000 (beyond the dictionary's
#: largest, 1,341,000), so none of them can fire.
RULES = [
    *[_if_then("age", f"child_{c}", {"AGEP": "..14"}, {c: None}) for c in ("DVET", "MSP", "PINCP", "PINCP_DECILE")],
    _if_then("age", "child_INDP_CAT", {"AGEP": "..14"}, {"INDP_CAT": None}),
    _forbid("age", "child_phd", {"AGEP": "..14", "EDU": ["12"]}),
    _forbid("age", "child_NOC", {"AGEP": "..9", "NOC": "0.."}, declared=False),
    _if_then("age", "toddler_DPHY", {"AGEP": "..4"}, {"DPHY": None}),
    _if_then("age", "toddler_DREM", {"AGEP": "..4"}, {"DREM": None}),
    _forbid("age", "toddler_diploma", {"AGEP": "..4", "EDU": [str(k) for k in range(5, 13)]}),
    _if_then("age", "infant_EDU", {"AGEP": "..2"}, {"EDU": None}),
    *[_forbid("housing", f"too_many_children_{k}", {"NPF": k, "NOC": f"{k}.."}) for k in range(2, 20)],
    _if_then("housing", "gq_family", {"HOUSING_TYPE": ["2", "3"]}, {"NOC": None, "NPF": None}),
    _if_then("housing", "gq_own", {"HOUSING_TYPE": ["2", "3"]}, {"OWN_RENT": "0"}),
    _forbid("housing", "house_OWN_RENT", {"HOUSING_TYPE": "1", "OWN_RENT": "0"}),
    _forbid("housing", "house_NOC", {"HOUSING_TYPE": "1", "NOC": None}),
]


def with_rules(schema: dict, declared_only: bool = True) -> dict:
    """``schema`` with SDNist's consistency rules (``RULES``) as its constraints: those a release
    declares, or all of them (to measure a table with)."""
    rules = [rule for _, declared, rule in RULES if declared or not declared_only]
    return {**schema, "constraints": rules}


def inconsistency_rates(schema: dict, frame: pd.DataFrame) -> dict[str, float]:
    """Per group of ``RULES`` (every rule, declared or not), the share of ``frame``'s rows that
    break at least one of its rules, as SDNist reports them."""
    import privsyn_fed as pf
    from privsyn_fed.schema import violations

    broken = violations(pf.Schema.from_dict(with_rules(schema, declared_only=False)), frame)
    groups = np.array([group for group, _, _ in RULES])
    return {g: float(broken[:, groups == g].any(axis=1).mean()) for g in ("age", "housing")}


def run(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "privsyn_fed", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"privsyn-fed {' '.join(args)}: {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def evaluated(real: Path, syn: Path, schema: Path, out: Path) -> dict:
    """``evaluate --kmarginal``'s JSON: the k-marginal score, pMSE and unique exact matches among it."""
    run(
        "evaluate", "--real", str(real), "--synthetic", str(syn), "--schema", str(schema), "--kmarginal",
        "--json", str(out), "--force",
    )  # fmt: skip
    return json.loads(out.read_text())


def kmarginal(real: Path, syn: Path, schema: Path, out: Path) -> float:
    return float(evaluated(real, syn, schema, out)["kmarginal"]["score"])


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
