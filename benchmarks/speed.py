"""Speed table: every method's wall time, peak memory and workload error on Adult and CPS1988.

    .venv/bin/python benchmarks/speed.py [--tables adult,cps1988,adult-small] [--methods aim,...]
                                         [--seeds 1] [--smartnoise PYTHON]

Each table (Adult: 48,842 rows, 15 columns; CPS1988: 28,155 rows, 7 columns; adult-small: 6,500 of
Adult's rows and 10 of its columns, seed 0) is split IID into 5 silo CSVs. Every release is one
`privsyn-fed synth` process at epsilon 1, delta 1e-9, with its default (planned) schedule, except
DistAIM and FLAIM, which run T = 10 global rounds; its wall time and peak memory are that process's
own, so they include start-up (imports, reading the silos) and writing the CSV; repetition ``k`` runs
with ``--seed k`` (from 1), so two versions meet the same noise where they make the same calls. Workload error: 64
seeded three-way marginals, ``||M_r(D)/|D| - M_r(S)/|S|||_1`` averaged (between 0 and 2), on the
encoded bins.

``--smartnoise PYTHON`` (the python of a virtual environment with smartnoise-synth) adds
smartnoise-synth's AIM on the same rows in the same run, and the table reports our AIM's time and
error as ratios to it. Compilation is cold in every process unless ``PRIVSYN_FED_JAX_CACHE`` names
a persistent cache folder (``privsyn_fed.methods.compiled.compilation_cache``). The table is written to
``benchmarks/out/speed.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from aim_adult import timed  # noqa: E402
from small_tables import load  # noqa: E402
from workload_error import workload_error  # noqa: E402

import privsyn_fed as pf  # noqa: E402
from privsyn_fed.methods import sample_workload  # noqa: E402

OUT = HERE / "out" / "speed"
METHODS = ("aim", "distaim", "flaim", "fedtda", "independent")
#: adult-small: a 6,500-row, 10-column table (Adult's rows, seed 0).
SMALL_ROWS = 6_500
SMALL_COLUMNS = (
    "age",
    "workclass",
    "education",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "hours-per-week",
    "income",
)


def load_table(table: str) -> tuple[pd.DataFrame, pf.Schema]:
    """The rows (as text) and the public schema of ``table``."""
    if table != "adult-small":
        return load(table)
    df, schema = load("adult")
    raw = schema.to_dict()
    raw["columns"] = [c for c in raw["columns"] if c["name"] in SMALL_COLUMNS]
    rows = df.sample(n=SMALL_ROWS, random_state=0)[list(SMALL_COLUMNS)]
    return rows, pf.Schema.from_dict(raw)


SILOS = 5
FEDERATED_ROUNDS = 10


def silo_files(table: str, df: pd.DataFrame, schema: pf.Schema) -> tuple[list[Path], Path]:
    """The table split IID into ``SILOS`` CSVs (seed 0), and its schema file."""
    folder = OUT / table
    folder.mkdir(parents=True, exist_ok=True)
    schema_path = folder / "schema.json"
    schema_path.write_text(json.dumps(schema.to_dict(), indent=2))
    order = np.random.default_rng(0).permutation(len(df))
    paths = []
    for k, part in enumerate(np.array_split(order, SILOS)):
        paths.append(folder / f"silo_{k}.csv")
        df.iloc[part].to_csv(paths[-1], index=False)
    return paths, schema_path


def release(table: str, method: str, rep: int, paths: list[Path], schema_path: Path, timeout: float):
    """One `synth` process: ``(wall seconds, peak MB, exit status, synthetic CSV)``."""
    out = OUT / table / f"{method}-{rep}.csv"
    cmd = [sys.executable, "-m", "privsyn_fed", "synth", "--method", method, "--schema", str(schema_path)]
    cmd += [arg for p in paths for arg in ("--silo", str(p))]
    cmd += ["--epsilon", "1", "--delta", "1e-9", "--out", str(out), "--force", "--quiet", "--seed", str(rep + 1)]
    if method in ("distaim", "flaim"):
        cmd += ["--rounds", str(FEDERATED_ROUNDS)]
    wall, peak, rc = timed(cmd, out.with_suffix(".log"), timeout)
    return wall, peak, rc, out


def smartnoise(python: str, table: str, rep: int, real: pf.Silo, schema: pf.Schema, timeout: float):
    """smartnoise-synth's AIM on the same rows (as codes): ``(wall, peak MB, exit status, codes)``."""
    codes_csv = OUT / table / "codes.csv"
    pd.DataFrame(real.rows(), columns=schema.names).to_csv(codes_csv, index=False)
    out = OUT / table / f"smartnoise-{rep}.csv"
    cmd = [python, str(HERE / "smartnoise_aim.py"), str(codes_csv), str(out), "1", "1e-9", "3", "64"]
    wall, peak, rc = timed(cmd, out.with_suffix(".log"), timeout)
    codes = pd.read_csv(out)[schema.names].to_numpy() if rc == 0 else None
    return wall, peak, rc, codes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", default="adult,cps1988,adult-small")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--seeds", type=int, default=1, help="repetitions of each release")
    ap.add_argument("--smartnoise", help="python executable of a venv with smartnoise-synth")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds before a run is stopped")
    args = ap.parse_args()

    rows = []
    for table in args.tables.split(","):
        df, schema = load_table(table)
        paths, schema_path = silo_files(table, df, schema)
        real = pf.Silo.from_frame(df, schema, name=table)
        workload = sample_workload(len(schema.columns), 3, 64, seed=0)
        for rep in range(args.seeds):
            for method in args.methods.split(","):
                wall, peak, rc, out = release(table, method, rep, paths, schema_path, args.timeout)
                err = workload_error(real, pf.Silo.from_csv(out, schema), workload) if rc == 0 else float("nan")
                rows.append(
                    {
                        "table": table,
                        "method": method,
                        "run": rep,
                        "seconds": wall,
                        "peak_mb": peak,
                        "error": err,
                        "exit": rc,
                    }
                )
                print(rows[-1], flush=True)
            if args.smartnoise:
                wall, peak, rc, codes = smartnoise(args.smartnoise, table, rep, real, schema, args.timeout)
                err = workload_error(real, pf.Silo("sn", codes, schema), workload) if rc == 0 else float("nan")
                rows.append(
                    {
                        "table": table,
                        "method": "smartnoise-aim",
                        "run": rep,
                        "seconds": wall,
                        "peak_mb": peak,
                        "error": err,
                        "exit": rc,
                    }
                )
                print(rows[-1], flush=True)

    runs = pd.DataFrame(rows)
    stats = runs.groupby(["table", "method"], sort=False).agg(
        seconds=("seconds", "mean"),
        seconds_sd=("seconds", "std"),
        peak_mb=("peak_mb", "max"),
        error=("error", "mean"),
        error_sd=("error", "std"),
        runs=("run", "count"),
    )
    lines = [
        "| table | method | wall time (s) | peak memory (MB) | workload error | runs | time, error vs smartnoise AIM |",
        "|---|---|---|---|---|---|---|",
    ]
    for (table, method), s in stats.iterrows():
        ratio = ""
        if method == "aim" and (table, "smartnoise-aim") in stats.index:
            sn = stats.loc[(table, "smartnoise-aim")]
            ratio = f"{s.seconds / sn.seconds:.2f}x, {s.error / sn.error:.2f}x"
        sd = lambda v: "" if np.isnan(v) else f" ± {v:.3g}"  # noqa: E731
        lines.append(
            f"| {table} | {method} | {s.seconds:.1f}{sd(s.seconds_sd)} | {s.peak_mb:.0f} | "
            f"{s.error:.3f}{sd(s.error_sd)} | {int(s.runs)} | {ratio} |"
        )
    text = "\n".join(lines) + "\n"
    OUT.mkdir(parents=True, exist_ok=True)
    (HERE / "out" / "speed.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
