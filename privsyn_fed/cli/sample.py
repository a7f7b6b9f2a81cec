"""``privsyn-fed sample``: more rows from a saved release's model, optionally given public values.

Sampling a released model is post-processing of the release: it reads no silo, spends nothing and
writes no ledger entry, whatever the number of rows, the seed or the conditions.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path

from ..common import Named, check_files
from .common import positive_int, seed_arg

EPILOG = """\
examples:
  privsyn-fed sample release.model --rows 1000000 --out more.csv
  privsyn-fed sample release.model --rows 5000 --out south.csv --where region=south --where age=30..40

conditions (--where, repeatable, one per column; all must hold):
  COLUMN=VALUE     a category, or a whole number of an integer column
  COLUMN=A|B       any of several categories
  COLUMN=LO..HI    a numeric range, inclusive (LO.. or ..HI leave an end open)
  COLUMN=(missing) the missing value
Rows are drawn from the model's distribution given the conditions: exactly for the graphical and
independent models, by rejection from the copula for fedtda. A condition the model gives
probability 0 is refused. When the model expects fewer than one row of the real table to meet
the conditions (their probability times the release's noisy row count), a warning on stderr says
so: the rows drawn are then the model's extrapolation, not a reflection of real rows.

The model file was checked against its ledger when loaded: a file whose ledger does not audit, or
does not describe this model, is refused."""


def add_parser(sub) -> None:
    """Add the command's parser to ``sub`` (the subcommands of ``privsyn-fed``)."""
    sp = sub.add_parser(
        "sample",
        help="draw more rows from a saved release's model (spends nothing)",
        description="Draw synthetic rows from a model saved by `synth --model-out`, any number of "
        "times, optionally given public values of some columns. Post-processing of the release: no "
        "silo is read, no budget is spent and no ledger entry is written.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sp.add_argument("model", metavar="MODEL", help="the model file written by `synth --model-out`")
    sp.add_argument("--rows", type=positive_int, required=True, metavar="N", help="how many rows to draw")
    sp.add_argument("--out", required=True, metavar="OUT.csv", help="where to write the rows (CSV)")
    sp.add_argument(
        "--seed",
        type=seed_arg,
        metavar="S",
        help="seed these draws (reproducible rows); the release's own noise is not affected, so the rows "
        "are as private as the release",
    )
    sp.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="COLUMN=VALUE",
        help="draw rows given this public value or range of a column (repeatable; see below)",
    )
    sp.add_argument("--force", action="store_true", help="replace OUT if it exists (never the model)")
    sp.add_argument("--quiet", action="store_true", help="print nothing but errors and warnings")


def run(args: argparse.Namespace) -> int:
    """Load and check the model, condition it, write the rows; 0 on success."""
    from ..common import Staged
    from ..methods.output import CHUNK_ROWS, SyntheticRows, check_rows, constrained, write_csv
    from ..model import parse_where
    from ..saved_model import improbable_warning, load_model

    out = Path(args.out)
    check_rows(args.rows)
    check_files([Named("MODEL", Path(args.model))], [(Named("--out", out), "CSV")], force=args.force)
    model = load_model(args.model)
    conditions = parse_where(args.where, model.schema)
    sampler = model.given(conditions)
    warning = improbable_warning(model.total, sampler.probability, args.rows, conditions)  # saved_model's rule
    seed = secrets.randbits(63) if args.seed is None else args.seed
    rows = SyntheticRows(constrained(sampler, model.schema), args.rows, seed)

    show = not args.quiet and args.rows > CHUNK_ROWS

    def shown():
        done = 0
        for part in rows.chunks():
            yield part
            done += len(part)
            if show:
                print(f"privsyn-fed: {done:,} of {args.rows:,} rows drawn", file=sys.stderr, flush=True)

    staged = Staged()
    try:
        staged.add(out, lambda fh: write_csv(shown(), fh))
    except BaseException:
        staged.discard()
        raise
    staged.publish()
    if warning is not None:
        print(f"privsyn-fed: warning: {warning}", file=sys.stderr)
    if not args.quiet:
        _report(args, model, sampler, conditions)
    return 0


def _report(args: argparse.Namespace, model, sampler, conditions) -> None:
    led = model.ledger or {}
    given = ""
    if conditions:
        how = "estimated from draws" if model.kind == "copula" else "exact"
        text = " and ".join(c.describe() for c in conditions)
        given = f" given {text} (probability {sampler.probability:.3g} under the model, {how})"
    print(f"wrote {args.out}: {args.rows:,} rows from {args.model}{given}")
    print(
        f"no budget spent and no ledger entry: the rows are post-processing of the {model.method} release "
        f"of epsilon={led.get('epsilon', float('nan')):.4g} at delta={led.get('delta', float('nan')):g}"
    )
    if args.seed is not None:
        print(
            f"--seed {args.seed} fixes these draws only; the release's noise was drawn when it was made, "
            "so seeded rows are as private as the release"
        )
