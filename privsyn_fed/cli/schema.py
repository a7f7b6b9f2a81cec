"""``privsyn-fed schema``: draft a schema from a table (plain, or under DP), or build one from a data
dictionary."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from ..common import InputError
from .common import check_budget_options, number, positive_int

DRAFT_EPILOG = """\
examples:
  privsyn-fed schema draft data.csv --out schema.json
  privsyn-fed schema draft data.parquet --out schema.json --categorical-max 20 --bins 16
  privsyn-fed schema draft data.csv --out schema.json --dp 1 --delta 1e-9
  privsyn-fed schema from-dictionary dictionary.csv --out schema.json

how a draft is made (one streaming pass over the rows):
  type      a column with at most K distinct values (--categorical-max, default {k}) is categorical,
            categories sorted; with more it is numeric if every value is a number, else it is left
            out with a note (free text, IDs: remove it from the tables before synth)
  bounds    [min, max] widened to multiples of the largest power of ten not above max - min
            (17..90 -> 10..90, 1..99 -> 0..100); whole numbers for an integer column
  integer   every value of a numeric column is a whole number
  missing   a cell is one of "", NA, N/A, NaN, nan, null, NULL, None or a --missing-value

WITHOUT --dp THE DRAFT IS NOT PRIVATE: its bounds and category lists are read off the rows. It
says so in its "_draft" note; replace them with public knowledge (a data dictionary, a code list)
or draft with --dp before sharing the schema.

with --dp EPSILON --delta DELTA every fact read from the rows is released under differential
privacy and charged to a ledger (default: the schema's name with .ledger.json; check it with
privsyn-fed audit): a noisy profile of the columns (one Gaussian: rows, and per column missing,
non-number, non-integer and distinct cells); for each numeric column a noisy histogram over the
intervals between round numbers (0, +-1, 2, 5 x 10^k), whose outermost intervals with enough
values give the bounds; for each text column its values whose noisy count passes a threshold,
plus a catch-all category (thresholded Gaussian histogram: approximate DP, its delta recorded in
the ledger). Under --dp a column of numbers is always numeric (a whole-number column of a small
range gets a bin per value) and --categorical-max bounds the categories released for a text
column. A budget so small that an interval would need more than {rank:,} rows to be found is
refused before anything is read or reserved, naming the epsilon needed. Module
privsyn_fed.draft_dp states each sensitivity.""".replace("%%", "%")

DICTIONARY_EPILOG = """\
a data dictionary is a CSV file with one row per column of the table:
  name,type,min,max,categories,bins,integer,missing,missing_values,description
  age,numeric,0,120,,,true,,,Age in years
  income,numeric,0,1000000,,16,,true,N,Yearly income (N: not applicable)
  sex,categorical,,,F|M,,,,,
  region,categorical,,,north|south|east|west,,,true,,
name and type (numeric or categorical) are required; a numeric column needs min and max, a
categorical one its categories separated by '|'. bins (default --bins), integer and missing
(true/false, yes/no, 1/0) and missing_values ('|'-separated tokens read as missing; they imply
missing) are optional; description, label, notes, comment and source columns are ignored.
The dictionary is public knowledge, so the schema it gives may be shared as is."""


def add_parsers(sub) -> None:
    """Add the ``schema`` command group to ``sub`` (the subcommands of ``privsyn-fed``)."""
    from ..draft_dp import MAX_BOUND_ROWS
    from ..schema import DEFAULT_BINS, DEFAULT_CATEGORICAL_MAX

    sc = sub.add_parser(
        "schema",
        help="draft a schema from a table (for review, or under --dp), or build one from a data dictionary",
        description="Write a schema file: drafted from a table's rows (`draft`), or from a public data "
        "dictionary in CSV (`from-dictionary`).",
    )
    ssub = sc.add_subparsers(dest="schema_command", metavar="ACTION", parser_class=type(sc))
    ssub.required = True
    dr = ssub.add_parser(
        "draft",
        help="draft a schema from a table's rows (NOT private without --dp)",
        description="Draft a schema from the rows of a table (CSV, gzip CSV or Parquet, read in chunks) "
        "for its operator to review. Without --dp the draft is not private.",
        epilog=DRAFT_EPILOG.format(k=DEFAULT_CATEGORICAL_MAX, rank=MAX_BOUND_ROWS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dr.add_argument("data", metavar="DATA", help="the table: CSV, gzip-compressed CSV or Parquet")
    dr.add_argument("--out", required=True, metavar="SCHEMA.json", help="where to write the draft schema")
    dr.add_argument(
        "--categorical-max",
        type=int,
        default=DEFAULT_CATEGORICAL_MAX,
        metavar="K",
        help=f"a column with more than K distinct values is numeric when its values are numbers, else it is "
        f"left out (default {DEFAULT_CATEGORICAL_MAX})",
    )
    dr.add_argument(
        "--bins",
        type=positive_int,
        default=DEFAULT_BINS,
        metavar="B",
        help=f"bins of a numeric column (default {DEFAULT_BINS})",
    )
    dr.add_argument(
        "--missing-value",
        action="append",
        default=[],
        metavar="TOKEN",
        help="also read TOKEN as a missing value (repeat for several; written to the columns' missing_values)",
    )
    dr.add_argument("--force", action="store_true", help="replace --out (and the ledger) if they exist")
    dp = dr.add_argument_group("differential privacy (the draft may then be shared after review)")
    dp.add_argument("--dp", type=number, metavar="EPSILON", help="release the draft under (EPSILON, --delta)-DP")
    dp.add_argument("--delta", type=number, metavar="D", help="with --dp: the delta of the guarantee, e.g. 1e-9")
    dp.add_argument(
        "--ledger",
        metavar="LEDGER.json",
        help="with --dp: the privacy ledger (default: --out with suffix .ledger.json)",
    )
    dp.add_argument(
        "--budget-store",
        metavar="STORE.db",
        help="with --dp: draw the epsilon from this budget store (reserved before any row is read)",
    )
    dp.add_argument("--dataset-id", metavar="ID", help="with --budget-store: the dataset whose budget this draws on")
    dp.add_argument(
        "--total-epsilon",
        type=number,
        metavar="E",
        help="with --budget-store: the dataset's total epsilon (the first time a dataset is used)",
    )
    fd = ssub.add_parser(
        "from-dictionary",
        help="build a schema from a data dictionary in CSV (public knowledge)",
        description="Build a schema from a data dictionary in CSV: one row per column with its public "
        "type, bounds or categories.",
        epilog=DICTIONARY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fd.add_argument("dictionary", metavar="DICT.csv", help="the data dictionary (CSV, UTF-8)")
    fd.add_argument("--out", required=True, metavar="SCHEMA.json", help="where to write the schema")
    fd.add_argument(
        "--bins",
        type=positive_int,
        default=DEFAULT_BINS,
        metavar="B",
        help=f"bins of a numeric column without its own (default {DEFAULT_BINS})",
    )
    fd.add_argument("--force", action="store_true", help="replace --out if it exists")


def spends_budget(args: argparse.Namespace) -> bool:
    """Whether the command releases anything under DP (a ``draft --dp``)."""
    return getattr(args, "schema_command", None) == "draft" and getattr(args, "dp", None) is not None


def run(args: argparse.Namespace) -> int:
    """``schema draft`` or ``schema from-dictionary``; 0 on success."""
    if args.schema_command == "from-dictionary":
        return run_from_dictionary(args)
    if args.dp is not None:
        return run_draft_dp(args)
    return run_draft(args)


def _notes(notes: list[str]) -> None:
    for n in notes:
        print(f"privsyn-fed: note: {n}", file=sys.stderr)


def _summary(columns: list[dict]) -> str:
    kinds = [c["type"] for c in columns]
    return f"{len(columns)} columns ({kinds.count('numeric')} numeric, {kinds.count('categorical')} categorical)"


def run_draft(args: argparse.Namespace) -> int:
    """A plain draft: check the files, read the rows once, write the schema with its warning note."""
    from ..common import Named, check_files
    from ..schema import PRIVATE_WARNING, Schema, draft_document, draft_table, plain_note, write_document

    if args.delta is not None or args.ledger or args.budget_store or args.dataset_id or args.total_epsilon is not None:
        raise InputError("--delta, --ledger, --budget-store, --dataset-id and --total-epsilon belong to --dp")
    data, out = Path(args.data), Path(args.out)
    check_files([Named("DATA", data)], [(Named("--out", out), "schema")], force=args.force)
    result = draft_table(data, args.categorical_max, args.bins, tuple(args.missing_value))
    Schema.from_dict({"columns": result.columns}, source=str(data))  # the draft loads as a schema
    write_document(out, draft_document(result.columns, plain_note(str(data), result.dropped)))
    print(f"wrote {out}: {_summary(result.columns)} drafted from {data}")
    _notes(result.notes)
    print(f"privsyn-fed: WARNING: {PRIVATE_WARNING.format(source=data)}", file=sys.stderr)
    return 0


def run_draft_dp(args: argparse.Namespace) -> int:
    """A DP draft: every public check and the plan first, then reserve, read, release, write."""
    from .. import draft_dp
    from ..common import Named, Staged, check_files, read_chunks, read_header
    from ..schema import check_header, check_options, draft_document

    if args.delta is None:
        raise InputError("--dp needs --delta (e.g. --delta 1e-9)")
    check_budget_options(args, "draft")
    check_options(args.categorical_max, args.bins, tuple(args.missing_value))
    data, out = Path(args.data), Path(args.out)
    ledger = Path(args.ledger) if args.ledger else out.with_suffix(".ledger.json")
    stores = [Named("--budget-store", Path(args.budget_store))] if args.budget_store else []
    outputs = [(Named("--out", out), "schema"), (Named("--ledger" if args.ledger else "the ledger", ledger), "ledger")]
    check_files([Named("DATA", data)], outputs, force=args.force, stores=stores)
    names = read_header(data)  # the header is public; no row is read
    check_header(names, str(data))
    plan = draft_dp.plan_draft(args.dp, args.delta, names, args.categorical_max, args.bins, args.missing_value)
    budget: contextlib.AbstractContextManager = contextlib.nullcontext()
    if args.budget_store:
        from ..accounting.budget_store import reserved

        budget = reserved(
            args.budget_store,
            args.dataset_id,
            epsilon=args.dp,
            delta=args.delta,
            method=draft_dp.METHOD,
            total_epsilon=args.total_epsilon,
            ledger=str(ledger.resolve()),
            delta_slack=args.delta - plan.delta_conversion,
        )
    with budget as reservation:
        acc = draft_dp.accountant_for(plan, ledger)
        if reservation is not None:
            reservation.bind(acc)
            acc.details["budget_store"] = {
                "path": str(reservation.store.path),
                "dataset_id": reservation.dataset,
                "run": reservation.run,
            }
        staged = Staged()
        try:
            result = draft_dp.release_draft(lambda: (c.frame for c in read_chunks(data)), plan, acc)
            final = acc.preview("complete")
            document = draft_document(
                result.columns, draft_dp.dp_note(str(data), final, ledger.name, plan, result.dropped)
            )
            staged.add(out, lambda fh: _dump(document, fh))
            acc.finish("complete")
            if reservation is not None:
                reservation.settle(acc.rho_spent, "complete", acc.delta_spent)
            staged.publish()
        except BaseException:
            staged.discard()
            if acc.released and acc.status == "running":
                acc.finish("failed")
            raise
    led = acc.ledger()
    print(f"wrote {out}: {_summary(result.columns)} drafted from {data} under differential privacy")
    print(
        f"wrote {ledger}: epsilon={led['epsilon']:.4f} at delta={led['delta']:.3g} spent (rho {led['rho_spent']:.6g} "
        f"of {led['rho_budget']:.6g}) in {len(led['entries'])} mechanism calls"
    )
    _notes(result.notes)
    print(f"check it with: privsyn-fed audit {ledger}")
    return 0


def _dump(document: dict, fh) -> None:
    import json

    json.dump(document, fh, indent=2, ensure_ascii=False)
    fh.write("\n")


def run_from_dictionary(args: argparse.Namespace) -> int:
    """Build a schema from a data dictionary in CSV and write it."""
    from ..common import Named, check_files
    from ..schema import dictionary_columns, plain_numbers, write_document

    path, out = Path(args.dictionary), Path(args.out)
    check_files([Named("DICT.csv", path)], [(Named("--out", out), "schema")], force=args.force)
    columns = dictionary_columns(path, args.bins)
    write_document(out, {"columns": plain_numbers(columns)})
    print(f"wrote {out}: {_summary(columns)} from the data dictionary {path}")
    return 0
