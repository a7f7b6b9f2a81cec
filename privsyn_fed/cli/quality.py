"""``privsyn-fed synth --quality-report``: after a committed release, the quality report of the
synthetic CSV against the silos' rows (the page ``evaluate --report`` writes). It reads the real
rows, so it is NOT differentially private; it never touches the release itself."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..common import InputError, Named
from ..methods import AIMOptions
from ..schema import Schema


def add_arguments(s: argparse.ArgumentParser) -> None:
    """Add the quality report's options to ``synth``'s parser ``s``."""
    q = s.add_argument_group(
        "quality report (computed from the real rows after the release: NOT differentially private)"
    )
    q.add_argument(
        "--quality-report",
        metavar="QUALITY.html",
        help="after the release, write a visual quality report comparing the synthetic CSV with the union of "
        "the silos' rows (read again from the --silo files): the page `privsyn-fed evaluate --report` "
        "writes. It shows facts about real records: handle it like the real data, never hand it out with "
        "the CSV. Not with --mpc (the other silos' rows are not on this machine)",
    )
    q.add_argument(
        "--quality-holdout",
        metavar="HOLDOUT",
        help="real rows NOT given as a --silo (CSV, gzip CSV or Parquet): adds distance to closest record, "
        "and with --quality-label train-on-synthetic/test-on-real ROC-AUC, to --quality-report",
    )
    q.add_argument(
        "--quality-label",
        metavar="COL",
        help="label column for --quality-report's train-on-synthetic/test-on-real ROC-AUC (needs --quality-holdout)",
    )


def check_args(args: argparse.Namespace) -> None:
    """``--quality-report`` and its options: refused under ``--mpc`` and without an ``.html`` name."""
    if not args.quality_report:
        if args.quality_holdout or args.quality_label:
            raise InputError("--quality-holdout and --quality-label belong to --quality-report")
        return
    if args.mpc:
        raise InputError(
            "--quality-report cannot be used with --mpc: the other silos' rows are not on this machine; run "
            "`privsyn-fed evaluate --report` where the real rows may be read"
        )
    from ..evaluation import check_report_path

    check_report_path(args.quality_report, "--quality-report")
    if args.quality_label and not args.quality_holdout:
        raise InputError("--quality-label needs --quality-holdout (the real rows to test the classifier on)")


def inputs(args: argparse.Namespace) -> list[Named]:
    """The holdout table the report reads, if it is a file (checked with the release's inputs; an
    engine's URL is checked as such and read after the release)."""
    from ..common import named_files

    return named_files([("--quality-holdout", args.quality_holdout)]) if args.quality_holdout else []


def outputs(args: argparse.Namespace) -> list[tuple[Named, str]]:
    """The report's file, if any (checked with the release's outputs)."""
    return [(Named("--quality-report", Path(args.quality_report)), "quality report")] if args.quality_report else []


def check_schema(args: argparse.Namespace, schema: Schema) -> None:
    """The label is a schema column, and the holdout's header has the schema's columns (its rows are
    read only after the release)."""
    if args.quality_label is not None and args.quality_label not in schema.names:
        raise InputError(f"--quality-label: column '{args.quality_label}' is not in the schema")
    if args.quality_holdout:
        from ..common import read_header
        from ..schema import check_columns

        check_columns(read_header(args.quality_holdout), schema, f"{args.quality_holdout} (--quality-holdout)")


def write_after_release(args: argparse.Namespace, out: Path, ledger: Path, schema: Schema, options: dict) -> int:
    """After a committed release (``out`` and its ``ledger``, of a method run with ``options``): the
    quality report. A failure here is one line and status 1 (128 + the signal when interrupted);
    the release stays as it is."""
    import os

    from ..common import Interrupted, deferred_signals, received
    from .common import one_line

    done = f"the release is complete ({out}, {ledger})"
    if received() is not None:  # a signal arrived as the release was committed
        print(f"privsyn-fed: quality report not written: interrupted; {done}", file=sys.stderr)
        return 128 + received()
    try:
        with deferred_signals(immediate=True):  # nothing here spends budget: stop at once
            _write(args, out, ledger, schema, options)
    except Interrupted as exc:
        print(f"privsyn-fed: quality report not written: {exc}; {done}", file=sys.stderr)
        return exc.exit_status
    except Exception as exc:
        if os.environ.get("PRIVSYN_FED_DEBUG"):
            raise
        what = "" if isinstance(exc, (InputError, OSError)) else f"{type(exc).__name__}: "
        print(f"privsyn-fed: error: quality report not written ({what}{one_line(exc)}); {done}", file=sys.stderr)
        return 1  # not 2: the release itself went through
    print(
        f"wrote {args.quality_report}: the quality report, a non-private evaluation computed from the real "
        "silo rows (handle it like the real data; never hand it out with the CSV)"
    )
    return 0


def _write(args: argparse.Namespace, out: Path, ledger: Path, schema: Schema, options: dict) -> None:
    """Read the silos' rows, the released CSV and the holdout; build the page and write it atomically."""
    from ..common import read_table
    from ..evaluation import Sources, build_report, read_union, write_report

    real = read_union(args.silo, getattr(args, "silo_column", None), getattr(args, "silo_names", None))
    synthetic = read_table(out)
    holdout = read_table(args.quality_holdout) if args.quality_holdout else None
    sources = Sources(list(args.silo), str(out), str(args.schema), args.quality_holdout)
    sources.extra["Release ledger"] = str(ledger)
    page = build_report(  # evaluate's workload: 3-way marginals, with the release's workload size and seed
        real,
        synthetic,
        schema,
        sources,
        holdout_df=holdout,
        label=args.quality_label,
        workload_size=options.get("workload_size", AIMOptions.workload_size),
        workload_seed=options.get("workload_seed", AIMOptions.workload_seed),
        silo_column=getattr(args, "silo_column", None),
    )
    write_report(args.quality_report, page)
