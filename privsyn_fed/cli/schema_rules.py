"""``privsyn-fed schema cut-at-rules``: a schema's numeric bins cut where its constraints' ranges end."""

from __future__ import annotations

import argparse
from pathlib import Path

CUT_EPILOG = """\
example:
  privsyn-fed schema cut-at-rules schema.json --out schema-cut.json

A constraint such as {"if": {"AGEP": "..14"}, "then": {"PINCP": [null]}} forbids part of a bin
that holds ages 13 to 15: the release can then neither hold that part at probability 0 nor keep
the bin's allowed rows (rejection drops the earners drawn at 13 or 14 and keeps a third of them,
where all of them are 15). The new schema cuts such a bin where each range begins and just
after it ends (here at 15), keeping every other cut point: bins as drafted or declared, plus
these. A uniform or log-scale column is written as its cut points ("edges"); every other column
and key (a draft's note included) is written as it was. Nothing is read but the schema; `synth`
names the bins its schema's constraints divide.
"""


def add_parser(ssub) -> None:
    """Add ``cut-at-rules`` to the ``schema`` actions ``ssub``."""
    cr = ssub.add_parser(
        "cut-at-rules",
        help="write a schema whose numeric bins are also cut where its constraints' ranges begin and end",
        description="Write SCHEMA with every numeric bin that a constraint's range divides cut at that point, "
        "so that each bin is wholly allowed or wholly forbidden by every constraint.",
        epilog=CUT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cr.add_argument("schema", metavar="SCHEMA", help="the schema with its constraints (JSON or YAML)")
    cr.add_argument(
        "--out", required=True, metavar="SCHEMA.json", help="where to write the new schema (YAML if it ends in .yaml)"
    )
    cr.add_argument("--force", action="store_true", help="replace --out if it exists")


def run_cut_at_rules(args: argparse.Namespace) -> int:
    """Write the schema cut at its rules (``schema.cut_at_rules``) and say which bins were cut."""
    from ..common import Named, check_files
    from ..schema import Schema, cut_bins, cut_document, read_document, save_document

    path, out = Path(args.schema), Path(args.out)
    check_files([Named("SCHEMA", path)], [(Named("--out", out), "schema")], force=args.force)
    document = read_document(path)
    schema = Schema.from_dict(document, source=str(path))
    cuts = cut_bins(schema)
    new = cut_document(document, schema, cuts)  # every other key kept: a draft's note, the constraints
    Schema.from_dict(new, source=f"{path} with its bins cut at the rules")  # still a schema: within every limit
    save_document(out, new)  # YAML by extension, else JSON
    if not cuts:
        print(f"wrote {out}: no constraint divides a bin of {path}; the schema is unchanged")
        return 0
    columns = list(dict.fromkeys(c.column for c in cuts))
    print(f"wrote {out}: {len(cuts)} bin(s) of {', '.join(columns)} cut where the constraints' ranges end")
    for c in cuts:
        print(f"  {c.column}: bin {c.low:g}..{c.high:g} cut at {c.at:g} ({c.constraint})")
    return 0
