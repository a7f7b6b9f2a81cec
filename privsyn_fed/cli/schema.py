"""``privsyn-fed schema``: draft a schema from a table (plain, or under DP), or build one from a data
dictionary."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from ..common import InputError, terminal_text
from .common import (
    add_mpc_args,
    check_budget_options,
    check_mpc_args,
    collusion_cost,
    coordinator_options,
    federation_inputs,
    federation_parties,
    number,
    positive_int,
)
from .schema_help import DICTIONARY_EPILOG, DRAFT_EPILOG
from .schema_rules import add_parser as add_cut_parser
from .schema_rules import run_cut_at_rules


def add_parsers(sub) -> None:
    """Add the ``schema`` command group to ``sub`` (the subcommands of ``privsyn-fed``)."""
    from ..draft_dp import MAX_BOUND_ROWS, MAX_LOST_SHARE
    from ..schema import (
        ATOM_SHARE,
        DEFAULT_BINS,
        DEFAULT_CATEGORICAL_MAX,
        IDENTIFIER_SAMPLE,
        MAX_ATOMS,
        MAX_CODES,
        MAX_DRAFT_DECIMALS,
        UNFOUND_KEY,
        identifiers,
    )

    sc = sub.add_parser(
        "schema",
        help="draft a schema from a table (for review, or under --dp), or build one from a data dictionary",
        description="Write a schema file: drafted from a table's rows (`draft`), from a public data "
        "dictionary in CSV (`from-dictionary`), or with its bins cut where its constraints' ranges end "
        "(`cut-at-rules`).",
    )
    ssub = sc.add_subparsers(dest="schema_command", metavar="ACTION", parser_class=type(sc))
    ssub.required = True
    dr = ssub.add_parser(
        "draft",
        help="draft a schema from a table's rows (NOT private without --dp)",
        description="Draft a schema from the rows of a table (CSV, gzip CSV or Parquet, read in chunks) "
        "for its operator to review. Without --dp the draft is not private.",
        epilog=DRAFT_EPILOG.format(
            k=DEFAULT_CATEGORICAL_MAX,
            rank=MAX_BOUND_ROWS,
            ids=identifiers,
            sample=IDENTIFIER_SAMPLE,
            atom=ATOM_SHARE,
            atoms=MAX_ATOMS,
            codes=MAX_CODES,
            decimals=MAX_DRAFT_DECIMALS,
            lost=MAX_LOST_SHARE,
            unfound=UNFOUND_KEY,
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dr.add_argument(
        "data",
        metavar="DATA",
        nargs="+",
        help="the table: CSV, gzip-compressed CSV or Parquet, or a DuckDB, SQLite, PostgreSQL, MySQL or Spark table "
        "by URL; with --dp several (silos with the same columns), drafted as their union",
    )
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
    dr.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="COL",
        help="leave column COL out of the schema without reading it (repeat for several; with --dp too): an "
        "identifier, free text, or a column not to release; a release then ignores it in the silos",
    )
    dr.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="COL",
        help="draft column COL even if it looks like an identifier (many distinct values: row numbers, ids, "
        "names, or a panel's unit id in the same number of rows each), when it is a real attribute (repeat "
        "for several)",
    )
    dr.add_argument(
        "--force", action="store_true", help="replace --out (and the ledger, unless a budget store references it)"
    )
    dr.add_argument(
        "--edges",
        choices=("uniform", "quantiles"),
        default=None,
        help="a numeric column's bins: of equal width (uniform) or of about equal counts (quantiles; for skewed "
        "columns such as incomes, weights or densities). With --dp the default is uniform, and quantiles reads "
        "the cut points off the noisy histogram its bounds come from, at no further cost. Without --dp the "
        "default cuts at the quantiles only a column whose fullest bin of equal width would hold more than a "
        "quarter of its numbers, and says so",
    )
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
        "--leave-unfound",
        action="store_true",
        help="with --dp: write a column whose bounds or categories the budget did not find as a placeholder "
        f'("{UNFOUND_KEY}") to fill in by hand (the schema will not load until then), instead of refusing the draft',
    )
    dp.add_argument(
        "--total-epsilon",
        type=number,
        metavar="E",
        help="with --budget-store: the dataset's total epsilon (the first time a dataset is used)",
    )
    add_mpc_args(
        dr.add_argument_group("secure computation (with --dp: the silos' union on secret shares)"),
        "with --dp: draft over the silos without pooling them: each DATA becomes its own CrypTen party process "
        "(this process is party 0; with --federation only this host's DATA, the others join with "
        "`privsyn-fed mpc-party --draft`), plus a dealer process; counts are summed on secret shares with every "
        "party's own noise, and each party lists candidate category values from its own rows under its own noise",
        "DATA",
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
    add_cut_parser(ssub)


def spends_budget(args: argparse.Namespace) -> bool:
    """Whether the command releases anything under DP (a ``draft --dp``)."""
    return getattr(args, "schema_command", None) == "draft" and getattr(args, "dp", None) is not None


def run(args: argparse.Namespace) -> int:
    """``schema draft``, ``schema from-dictionary`` or ``schema cut-at-rules``; 0 on success."""
    if args.schema_command == "from-dictionary":
        return run_from_dictionary(args)
    if args.schema_command == "cut-at-rules":
        return run_cut_at_rules(args)
    if args.dp is not None:
        return run_draft_dp(args)
    return run_draft(args)


def _notes(notes: list[str]) -> None:
    for n in notes:
        print(f"privsyn-fed: note: {terminal_text(n)}", file=sys.stderr)


def _summary(columns: list[dict]) -> str:
    kinds = [c["type"] for c in columns]
    return f"{len(columns)} columns ({kinds.count('numeric')} numeric, {kinds.count('categorical')} categorical)"


def run_draft(args: argparse.Namespace) -> int:
    """A plain draft: check the files, read the rows once, write the schema with its warning note."""
    from ..common import Named, check_files, named_files, table_source
    from ..schema import PRIVATE_WARNING, Schema, draft_document, draft_table, plain_note, write_document

    if args.delta is not None or args.ledger or args.budget_store or args.dataset_id or args.total_epsilon is not None:
        raise InputError("--delta, --ledger, --budget-store, --dataset-id and --total-epsilon belong to --dp")
    if args.leave_unfound:
        raise InputError("--leave-unfound belongs to --dp (a draft without it finds every column's domain)")
    if args.mpc or args.federation or args.collusion is not None or args.parties:
        raise InputError("--mpc and its options belong to --dp (a draft without it reads the rows in the clear)")
    if len(args.data) > 1:
        raise InputError(
            f"a draft without --dp reads one table, not {len(args.data)}: draft several silos together with --dp "
            "(their union, released under differential privacy)"
        )
    data, out = table_source(args.data[0]), Path(args.out)
    check_files(named_files([("DATA", args.data[0])]), [(Named("--out", out), "schema")], force=args.force)
    result = draft_table(
        data,
        args.categorical_max,
        args.bins,
        tuple(args.missing_value),
        tuple(args.exclude),
        tuple(args.include),
        args.edges or "auto",
    )
    Schema.from_dict({"columns": result.columns}, source=str(data))  # the draft loads as a schema
    write_document(out, draft_document(result.columns, plain_note(str(data), result.dropped, result.identifiers)))
    print(f"wrote {out}: {_summary(result.columns)} drafted from {data}")
    _notes(result.notes)
    print(f"privsyn-fed: WARNING: {PRIVATE_WARNING.format(source=data)}", file=sys.stderr)
    return 0


def run_draft_dp(args: argparse.Namespace) -> int:
    """A DP draft: every public check and the plan first, then reserve, read, release, write (under
    ``--mpc`` the parties first check the request against their own policies)."""
    from .. import draft_dp
    from ..common import Named, check_distinct, check_files, named_files, read_chunks, table_source
    from ..draft_dp import replay as draft_replay
    from ..schema import check_options
    from .ledger_target import ledger_output

    if args.delta is None:
        raise InputError("--dp needs --delta (e.g. --delta 1e-9)")
    check_budget_options(args, "draft")
    check_options(args.categorical_max, args.bins, tuple(args.missing_value))
    check_mpc_args(args, args.data, "DATA")
    tables, out = [table_source(p) for p in args.data], Path(args.out)
    ledger = Path(args.ledger) if args.ledger else out.with_suffix(".ledger.json")
    stores = [Named("--budget-store", Path(args.budget_store))] if args.budget_store else []
    failed = draft_replay.failed_drafts(ledger) if args.leave_unfound else []  # whose released values a retry reuses
    outputs = [(Named("--out", out), "schema"), *([] if failed else ledger_output(args, ledger))]
    inputs = named_files(("DATA", p) for p in args.data)
    check_files(inputs + federation_inputs(args), outputs, force=args.force, stores=stores)
    check_distinct(inputs)
    names = _common_header(tables)  # headers are public; no row is read
    exclude, include = list(args.exclude or []), list(args.include or [])
    unknown = [c for c in [*exclude, *include] if c not in names]
    if unknown:
        flag = "--exclude" if unknown[0] in exclude else "--include"
        raise InputError(f"{flag} {unknown[0]!r}: not a column of the table's header")
    if set(exclude) & set(include):
        raise InputError(f"--exclude and --include both name {sorted(set(exclude) & set(include))[0]!r}")
    names = [c for c in names if c not in exclude]  # removed before any row is read
    split = None
    if args.mpc:
        from ..accounting import PartiesNoise

        n = federation_parties(args) or len(tables)
        split = PartiesNoise(n, n - 1 if args.collusion is None else args.collusion)
    plan = draft_dp.plan_draft(
        args.dp,
        args.delta,
        names,
        args.categorical_max,
        args.bins,
        args.missing_value,
        split,
        args.edges or "uniform",
        include=include,
        exclude=exclude,
    )
    replay = draft_replay.previous(failed, plan, tables) if failed else None
    if replay is not None:
        kept = [Named("the failed draft's ledger", replay.ledger_path), Named("its values", replay.released_path)]
        check_files(kept, outputs, force=args.force)
        return _replay_draft(plan, replay, out)
    if failed:  # another plan: a new spend, whose ledger is checked as any output
        check_files(inputs, [*outputs, *ledger_output(args, ledger)], force=args.force)
    if not args.mpc:
        from ..draft_dp import LocalAnswers
        from ..noise import OpenDPNoise

        frames = lambda: (c.frame for p in tables for c in read_chunks(p))  # noqa: E731
        return _draft_dp(args, plan, tables, out, ledger, lambda acc: LocalAnswers(frames, plan, acc, OpenDPNoise()))
    from ..mpc import DraftSpec, MPCAnswers, ReleaseTerms, coordinator, read_draft_table

    def log(message: str) -> None:
        print(f"privsyn-fed: {terminal_text(message)}", file=sys.stderr)

    with coordinator(
        None,
        tables,
        log=log,
        **coordinator_options(args),
        release=ReleaseTerms(draft_dp.METHOD, args.dp, args.delta),  # the parties' policies first
        draft=DraftSpec.of(plan),
    ) as agg:

        def answers(acc):
            agg.begin(read_draft_table(tables[0], plan))  # party 0's table, then each party reserves and reads its own
            log(collusion_cost(args, len(tables)))
            acc.details.update(agg.ledger_details(agg.noise), silos=len(agg.silo_names))
            agg.bind_release(acc)
            return MPCAnswers(agg, plan, acc)

        try:
            return _draft_dp(args, plan, agg.silo_names, out, ledger, answers, agg.threat_model)
        finally:
            agg.bind_release(None)  # every party closes its ledger copy with the draft's status


def _draft_dp(args: argparse.Namespace, plan, sources: list, out: Path, ledger: Path, answers, secure: str = "") -> int:
    """Reserve (``--budget-store``), make the draft (from ``answers(accountant)``, a
    ``DraftAnswers``), write the schema and the ledger; nothing is written when it fails, and the ledger
    keeps what was spent, and the values released beside it for a retry (``draft_dp.replay``; ``secure``:
    the secure computation's threat model, over MPC)."""
    from .. import draft_dp
    from ..common import Staged
    from ..draft_dp import replay as draft_replay
    from ..schema import draft_document
    from .ledger_target import used_ledger

    budget: contextlib.AbstractContextManager = contextlib.nullcontext()
    if args.budget_store:
        from ..accounting import reserved

        budget = reserved(
            args.budget_store,
            args.dataset_id,
            epsilon=args.dp,
            delta=args.delta,
            method=draft_dp.METHOD,
            total_epsilon=args.total_epsilon,
            ledger=str(ledger.resolve()),
            keep_existing=not args.force,  # and a ledger the store references, always (``kept_ledger``)
            delta_slack=args.delta - plan.delta_conversion,
        )
    with budget as reservation:
        ledger = used_ledger(ledger, reservation, args.budget_store)
        acc = draft_dp.accountant_for(plan, ledger, secure)
        if reservation is not None:
            reservation.bind(acc)
            acc.details["budget_store"] = reservation.tag()
        staged = Staged()
        try:
            if not args.mpc:
                _refuse_identical([p for p in sources if isinstance(p, Path)])
            kept = draft_replay.KeptAnswers(answers(acc), plan, args.data)
            result = draft_dp.make_draft(kept, plan, acc)
            if result.unfound and not args.leave_unfound:  # after the spend: the ledger is finished as failed
                reusable = kept.keep(ledger, acc, sources)
                raise InputError(draft_dp.unfound_message(plan, result.unfound, str(ledger), reusable))
            final = acc.preview("complete")
            note = draft_dp.dp_note([str(p) for p in sources], final, ledger.name, plan, result.dropped, result.unfound)
            document = draft_document(result.columns, note)
            staged.add(out, lambda fh: _dump(document, fh))
            acc.finish("complete", updated=final["updated"])
            if reservation is not None:
                reservation.settle(acc.rho_spent, "complete", acc.delta_spent)
            staged.publish()
        except BaseException:
            staged.discard()
            if acc.released and acc.status == "running":
                acc.finish("failed")
            raise
    led = acc.ledger()
    names = ", ".join(str(p) for p in sources)
    left = f"; {len(result.unfound)} of them placeholders to fill in" if result.unfound else ""
    how = " on secret shares among their parties" if args.mpc else ""
    print(f"wrote {out}: {_summary(result.columns)}{left}, drafted from {names}{how} under differential privacy")
    print(
        f"wrote {ledger}: epsilon={led['epsilon']:.4f} at delta={led['delta']:.3g} spent (rho {led['rho_spent']:.6g} "
        f"of {led['rho_budget']:.6g}) in {len(led['entries'])} mechanism calls"
    )
    _notes(result.notes)
    print(f"check it with: privsyn-fed audit {ledger}")
    return 0


def _replay_draft(plan, replay, out: Path) -> int:
    """A retry of a failed draft with --leave-unfound: decided again from the values it released
    (``draft_dp.replay``); nothing is reserved, read or spent, and its ledger stays the record of the spend."""
    from .. import draft_dp
    from ..schema import draft_document, write_document

    result, led, sources = replay.decide(plan), replay.ledger, replay.document["sources"]
    note = draft_dp.dp_note(sources, led, replay.ledger_path.name, plan, result.dropped, result.unfound)
    note["dp"]["reused"] = f"the values its failed draft released ({replay.released_path.name}); nothing more was spent"
    write_document(out, draft_document(result.columns, note))
    left = f"; {len(result.unfound)} of them placeholders to fill in" if result.unfound else ""
    how = " on secret shares among their parties" if plan.mpc else ""
    names = ", ".join(sources)
    print(f"wrote {out}: {_summary(result.columns)}{left}, drafted from {names}{how} under differential privacy")
    print(
        f"spent nothing: reused the values released by the failed draft that {replay.ledger_path} records (epsilon="
        f"{led['epsilon']:.4f} at delta={led['delta']:.3g} spent there, in {len(led['entries'])} mechanism calls); "
        "no row was read"
    )
    _notes(result.notes)
    print(f"its spend: privsyn-fed audit {replay.ledger_path}")
    return 0


def _common_header(tables: list) -> list[str]:
    """The columns of the first table, checked, when every table has the same ones (in any order)."""
    from ..common import read_header
    from ..schema import check_header

    names = read_header(tables[0])
    check_header(names, str(tables[0]))
    for path in tables[1:]:
        other = read_header(path)
        check_header(other, str(path))
        lacks = [n for n in names if n not in other]
        extra = [n for n in other if n not in names]
        if lacks or extra:
            what = f"lacks column '{lacks[0]}'" if lacks else f"has column '{extra[0]}'"
            raise InputError(
                f"{path}: {what}, which {tables[0]} {'has' if lacks else 'lacks'}: tables drafted together "
                "need the same columns"
            )
    return names


def _refuse_identical(tables: list[Path]) -> None:
    """Two tables with identical bytes would count every record twice while the draft charges once
    (compared on this machine; nothing about them is released)."""
    from ..common import file_digest

    seen: dict[str, Path] = {}
    for path in tables if len(tables) > 1 else []:
        digest = file_digest(path)
        if digest in seen:
            raise InputError(
                f"{path} and {seen[digest]} have identical contents: every record would count twice while the "
                "draft charges once; give each silo once"
            )
        seen[digest] = path


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
