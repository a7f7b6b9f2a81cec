"""``privsyn-fed synth``: release one synthetic CSV of the silos' union, with its ledger."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path

from ..common import InputError, Named, check_distinct, check_files, check_identical_contents, read_json
from ..methods import METHODS
from ..schema import Schema
from . import quality
from .common import (
    add_mpc_args,
    check_budget_options,
    check_mpc_args,
    collusion_cost,
    coordinator_options,
    federation_parties,
    federation_sites,
    number,
    positive_int,
    servers_layout,
)
from .ledger_target import ledger_output, used_ledger
from .synth_sites import add_sites_args

#: The graphical-model methods (rounds, workload).
AIM_FAMILY = tuple(name for name, spec in METHODS.items() if spec.graphical)


def _method_fields() -> tuple[dict[str, dataclasses.Field], dict[str, list[str]]]:
    """Every method option by its Python name, in the registry's order (described by the first
    method that has it), and the methods that take each."""
    fields: dict[str, dataclasses.Field] = {}
    taken_by: dict[str, list[str]] = {}
    for method, spec in METHODS.items():
        for f in dataclasses.fields(spec.options_class):
            fields.setdefault(f.name, f)
            taken_by.setdefault(f.name, []).append(method)
    return fields, taken_by


METHOD_OPTIONS, TAKEN_BY = _method_fields()
#: The method options the command line offers (those with a flag).
FLAGGED = {name: f for name, f in METHOD_OPTIONS.items() if "flag" in f.metadata}
#: The help's groups of method options (the options' ``group``), in the order it lists them.
OPTION_GROUPS = {
    "workload": "workload (public marginal queries the release should answer well)",
    "target": "a label to predict (aim, distaim, flaim, fedtda)",
    "aim": f"options of the AIM family ({', '.join(AIM_FAMILY)})",
    "fedtda": "fedtda options",
    "federated": "federated options (distaim, flaim)",
}
#: ``synth`` warns when a release's expected 1-way error exceeds the independent method's by more
#: than this (in mean total variation distance).
ONEWAY_MARGIN = 0.01
#: The methods ``--mpc`` runs.
MPC_METHODS = tuple(name for name, spec in METHODS.items() if spec.mpc)

SYNTH_EPILOG = """\
example:
  privsyn-fed synth --method aim --schema schema.json --silo a.csv --silo b.csv \\
      --epsilon 1 --delta 1e-9 --out synthetic.csv

  privsyn-fed synth --method flaim --variant private --schema schema.json \\
      --silo a.csv --silo b.csv --silo c.csv --epsilon 1 --delta 1e-9 --out synthetic.csv

methods:
  aim      trusted-curator baseline: one curator pools every silo's rows
  distaim  silos send their answers to a trusted aggregator once, when first sampled;
           AIM's select and measure run on the pooled answers
  flaim    federated: each sampled silo selects marginals locally, the aggregator sums and
           adds noise (variant private: AugFLAIM with a private heterogeneity proxy)
  fedtda   federated Gaussian copula: noisy total, noisy column histograms and the noisy
           second moments of rows each silo encodes itself; real numeric values out
  independent  the baseline: the whole budget on every column's noisy 1-way marginal, columns
           drawn independently (no relationships between columns survive)
By default the federated methods use an in-process trusted aggregator that sees each silo's
answers. With --mpc ({mpc_methods}) each silo is its own party process, and the noisy
sums (and DistAIM's selection scores) are computed on secret shares among the parties and a
dealer process: only noisy statistics and selected indices are opened (README, "Secure
computation").

sample rate: by default every silo takes part in every round when there are fewer than 100
silos, and each silo takes part with probability 0.1 from 100 silos on (--sample-rate).

file modes: OUT, the ledger, --model-out and --quality-report are written readable and
writable by you only (mode 0600): nothing leaves your hands until you decide. The privacy
report (--report) is made to be handed out and is written 0644 (less what your umask
removes). Share the CSV once you have checked it: chmod 644 OUT.""".format(mpc_methods=", ".join(MPC_METHODS))


def add_parser(sub) -> None:
    """Add the command's parser to ``sub`` (the subcommands of ``privsyn-fed``)."""
    s = sub.add_parser(
        "synth",
        help="release a synthetic CSV of the silos' union",
        description="Release one synthetic CSV of the union of the silos under "
        "(epsilon, delta)-differential privacy, with its privacy ledger.",
        epilog=SYNTH_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "--method",
        choices=list(METHODS),
        default="aim",
        help="synthesis method (default aim: trusted-curator AIM over the pooled rows); see below",
    )
    s.add_argument(
        "--schema",
        required=True,
        metavar="SCHEMA",
        help="public schema (JSON or YAML): columns, bounds, bins, categories",
    )
    s.add_argument(
        "--silo",
        action="append",
        default=[],
        metavar="TABLE",
        help="one silo's table with the schema's columns: CSV, gzip-compressed CSV or Parquet, read in "
        "chunks (a silo larger than memory is fine); repeat for each silo. NAME=TABLE names the silo "
        "(default: the file's name without its extensions). Needed, except as party 0 of a federation "
        "file that lists sites (party 0 is then a compute server and holds no silo)",
    )
    s.add_argument(
        "--silo-column",
        metavar="COLUMN",
        help="the silo as a column: a categorical column of the schema whose categories are the silos' names; "
        "each silo's rows take its name there (public: every silo knows its own), so the release keeps each "
        "silo's share of the rows and the marginals it measures together with the column (not every "
        "distribution within a silo). The silo tables need not hold the column; where one does, every row must hold "
        "the silo's name",
    )
    s.add_argument("--epsilon", type=number, required=True, metavar="E", help="privacy budget epsilon (> 0)")
    s.add_argument(
        "--delta",
        type=number,
        required=True,
        metavar="D",
        help="privacy budget delta, from 1e-100 up to (not including) 0.1, e.g. 1e-9",
    )
    s.add_argument("--out", required=True, metavar="OUT.csv", help="where to write the synthetic CSV")
    s.add_argument(
        "--ledger",
        metavar="LEDGER.json",
        help="where to write the privacy ledger (default: OUT with suffix .ledger.json)",
    )
    s.add_argument(
        "--rows",
        type=positive_int,
        metavar="N",
        help="rows to generate (default: the model's noisy estimate of the total)",
    )
    s.add_argument(
        "--seed",
        type=int,
        metavar="S",
        help="reproducible run for tests and demos: noise from a seeded generator. The "
        "ledger records it and audit fails it; never use it for a real release",
    )
    s.add_argument(
        "--report",
        metavar="REPORT.html",
        help="also write a one-page privacy report (.html or .md) to hand out with the CSV: the CSV's "
        "name and SHA-256, the date and privsyn-fed version, the guarantee, threat model, audit verdict, "
        "the rounds that ran, budget chart and mechanisms (mode 0644: readable by all)",
    )
    s.add_argument(
        "--model-out",
        metavar="MODEL",
        help="also save the release's model with its ledger, one file (post-processing of the release, "
        "safe to publish with it): `privsyn-fed sample MODEL` draws more rows, or rows given public "
        "values, at no further privacy cost; `evaluate --model` reads its holdout likelihood",
    )
    s.add_argument(
        "--force",
        action="store_true",
        help="replace OUT, LEDGER, --report, --model-out and --quality-report if they already exist (never an "
        "input, nor a ledger the --budget-store references: a numbered one is written beside it)",
    )
    s.add_argument(
        "--allow-identical-silos",
        action="store_true",
        help="accept two --silo files with identical contents. By default they are refused: the same "
        "records would count twice while the ledger charges once",
    )
    s.add_argument("--quiet", action="store_true", help="no progress display")
    u = s.add_argument_group(
        "privacy unit (protect people or accounts, not rows; without it the guarantee is for one row, and a "
        "person with several rows is protected less)"
    )
    u.add_argument(
        "--privacy-unit",
        metavar="COLUMN",
        help="a column of every silo that identifies a person or an account (not a schema column): the "
        "guarantee becomes one for adding or removing a whole unit. The identifier is read inside each "
        "silo only, to bound its rows; it is never a model attribute and never released",
    )
    u.add_argument(
        "--max-rows-per-unit",
        type=positive_int,
        metavar="K",
        help="with --privacy-unit: each silo keeps at most K rows per unit, chosen by a keyed hash of the "
        "unit and the row's position (never by its values; a fresh key each release); every sensitivity "
        "grows K-fold, so the noise does too (default 1)",
    )
    u.add_argument(
        "--max-silos-per-unit",
        type=positive_int,
        metavar="M",
        help="with --privacy-unit: the most silos one unit's rows are kept in; every sensitivity grows "
        "M-fold. In process it is enforced (default 1): a unit found in more silos keeps its rows in M "
        "of them, chosen by a keyed hash of the unit and the silo, and the ledger says 'enforced'. With "
        "--mpc no process sees the other silos' units: it has no default, you declare it, and the ledger "
        "and the privacy report say 'declared'",
    )
    quality.add_arguments(s)
    b = s.add_argument_group("shared budget (several releases of one dataset draw on one total)")
    b.add_argument(
        "--budget-store",
        metavar="STORE.db",
        help="SQLite budget store (created if absent): the run's epsilon is reserved there "
        "before any silo is read and refused if the dataset's total would be exceeded",
    )
    b.add_argument("--dataset-id", metavar="ID", help="the dataset whose total budget this run draws on")
    b.add_argument(
        "--total-epsilon",
        type=number,
        metavar="E",
        help="the dataset's total epsilon (at --delta); required the first time a dataset "
        "is used, checked against the store afterwards",
    )
    b.add_argument(
        "--new-dataset",
        action="store_true",
        help="the store keeps a keyed digest of every silo it charged, and refuses a release whose silos it "
        "charged under another --dataset-id (the same data under a new name would get a fresh total). "
        "Say with this flag that the data really differ; the store records that it was said",
    )
    _add_method_options(s)

    m = s.add_argument_group(f"secure computation ({', '.join(MPC_METHODS)})")
    add_mpc_args(
        m,
        "compute on secret shares (distaim: the pool, select and measure; flaim, fedtda and independent: "
        "every noisy sum, with each silo selecting in its own process): each --silo becomes its own "
        "CrypTen party process (this process is party 0, the coordinator), plus a dealer "
        "process; only noisy statistics and selected indices are ever opened, and every party "
        "adds its own noise",
        "--silo",
    )
    add_sites_args(m)


def _add_method_options(s: argparse.ArgumentParser) -> None:
    """Every method option with a flag, as its options dataclass describes it (``methods.base.option``):
    the flag, the help (with the default), the value's type from the field's (a ``bool`` whose
    default is None takes ``--flag`` and ``--no-flag``). A flag not given is None, so that only
    options given reach the method."""
    groups = {key: s.add_argument_group(title) for key, title in OPTION_GROUPS.items()}
    order = list(OPTION_GROUPS)
    for name, f in sorted(FLAGGED.items(), key=lambda item: order.index(item[1].metadata["group"])):
        meta = f.metadata
        kind = _value_type(name)
        if kind is bool:  # a switch; with the default None (a rule decides), also its --no- form
            extra: dict = {"action": argparse.BooleanOptionalAction if f.default is None else "store_true"}
        else:
            extra = {"type": kind, "metavar": meta["metavar"]}
        if "choices" in meta:
            extra["choices"] = list(meta["choices"])
        elif kind is str and "from_flag" not in meta:  # a file's name, as argparse keeps it
            del extra["type"]
        help_text = meta["help"].replace("%", "%%")
        groups[meta["group"]].add_argument(
            meta["flag"], *meta.get("aliases", ()), dest=name, default=None, help=help_text, **extra
        )


def _value_type(name: str):
    """How the flag of the method option ``name`` reads its value, by the field's type (``X | None``
    as ``X``): a switch for ``bool``, a whole number for ``int`` (at least 1 when ``positive``), a
    number for ``float``, else text (for the field's ``from_flag`` to read)."""
    hint = typing.get_type_hints(METHODS[TAKEN_BY[name][0]].options_class)[name]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = [t for t in typing.get_args(hint) if t is not type(None)]
        hint = kinds[0] if len(kinds) == 1 else str
    if hint is int:
        return positive_int if METHOD_OPTIONS[name].metadata["positive"] else int
    if hint is float:
        return number
    return bool if hint is bool else str


def flag_name(name: str) -> str:
    """What the command line calls the Python argument ``name``: a method option's flag (an option
    without one keeps its name), else ``--`` and the name with dashes (``epsilon``, ``rows``)."""
    if name in METHOD_OPTIONS:
        return METHOD_OPTIONS[name].metadata.get("flag") or name
    if name == "missing_values":  # `schema draft` takes one token per flag
        return "--missing-value"
    return "--" + name.replace("_", "-")


def _method_options(args: argparse.Namespace) -> dict:
    """The method options given on the command line; options of another method are usage errors."""
    given = {name: getattr(args, name) for name in FLAGGED if getattr(args, name) is not None}
    for name in given:
        if args.method not in TAKEN_BY[name]:
            raise InputError(
                f"{FLAGGED[name].metadata['flag']} applies to --method {' or '.join(TAKEN_BY[name])}, not {args.method}"
            )
    opts = {}
    for name, value in given.items():
        read = FLAGGED[name].metadata.get("from_flag")
        opts[name] = read(value) if read is not None else value
    return opts


@dataclass
class Request:
    """A checked ``synth`` request: what it reads and writes, and the method's validated options."""

    out: Path
    ledger: Path
    schema: Schema
    silo_files: list[Named]
    options: dict


def run(args: argparse.Namespace) -> int:
    """Check everything public, reserve, read the silos, run, then commit the files (``api``)."""
    request = _checked(args)
    budget: contextlib.AbstractContextManager = contextlib.nullcontext()
    if args.budget_store:  # before any silo is read
        from ..accounting.budget_store import reserved

        budget = reserved(
            args.budget_store,
            args.dataset_id,
            epsilon=args.epsilon,
            delta=args.delta,
            method=args.method,
            total_epsilon=args.total_epsilon,
            ledger=str(request.ledger.resolve()),
            keep_existing=not args.force,  # and a ledger the store references, always (``kept_ledger``)
            new_dataset=args.new_dataset,
        )
    result, n_silos = _release(args, request, budget)
    _report(args, request, result, n_silos)
    if args.quality_report:
        return quality.write_after_release(args, request.out, request.ledger, request.schema, request.options)
    return 0


def _checked(args: argparse.Namespace) -> Request:
    """Every check that needs no private data: options, files, schema, the method's request."""
    from ..api import prepare
    from ..schema import ignored_note
    from ..silo import check_table_header
    from ..silo.silo import log as silo_log
    from ..silo.site import check_silo_column, silo_names
    from .common import federation_inputs

    if not args.silo and not servers_layout(args):
        raise InputError("--silo TABLE is needed (once per silo)")
    given = any("=" in s for s in args.silo)
    args.silo_names, paths = zip(*silo_names(args.silo)) if args.silo else ((), ())
    args.silo = list(paths)
    if servers_layout(args):  # the sites' names: their certificates name them
        from ..mpc.launch_servers import local_site_names

        args.silo_names = federation_sites(args) or local_site_names(args.silo, args.silo_names if given else None)
    out = Path(args.out)
    ledger = Path(args.ledger) if args.ledger else out.with_suffix(".ledger.json")
    options = _method_options(args)
    check_mpc_args(args, args.silo, "--silo")
    if args.report:
        from ..audit import check_report_path

        check_report_path(args.report)
    quality.check_args(args)
    check_budget_options(args, "release")
    silo_files = [Named("--silo", Path(p)) for p in args.silo]
    outputs = [(Named("--out", out), "synthetic CSV"), *ledger_output(args, ledger)]
    if args.model_out:
        outputs.append((Named("--model-out", Path(args.model_out)), "model"))
    if args.report:
        outputs.append((Named("--report", Path(args.report)), "report"))
    holdout = quality.inputs(args)
    outputs += quality.outputs(args)
    stores = [Named("--budget-store", Path(args.budget_store))] if args.budget_store else []
    workload = [Named("--workload", Path(options["workload"]))] if "workload" in options else []
    inputs = [Named("--schema", Path(args.schema)), *silo_files, *holdout, *federation_inputs(args), *workload]
    check_files(inputs, outputs, force=args.force, stores=stores)
    check_distinct(silo_files + holdout)
    if workload:  # public: the marginals the release must answer well
        options["workload"] = read_json(workload[0].path, "workload", "--workload")
    schema = Schema.load(args.schema)
    # before the headers, which may lack it; across hosts the other parties' names come once they join
    names = None if args.federation and not servers_layout(args) else args.silo_names
    check_silo_column(schema, args.silo_column, names)
    if workload:  # its faults named in the file's words, before anything else is checked against the schema
        from ..common import OptionError
        from ..methods.workload import declared_workload

        try:
            declared_workload(options["workload"], schema.names)
        except OptionError as exc:
            raise InputError(f"{workload[0].path}: {exc}") from None
    from ..accounting.unit import unit_of
    from ..api import check_unit

    n_silos = len(args.silo_names) if servers_layout(args) else federation_parties(args) or len(args.silo)
    check_unit(unit_of(**_unit_args(args), mpc=args.mpc), schema, n_silos, args.mpc)
    # headers are public: checked before the reservation
    ignored = {
        str(silo.path): check_table_header(silo.path, schema, args.privacy_unit, args.silo_column)
        for silo in silo_files
    }
    quality.check_schema(args, schema)
    prepare(
        args.method,
        schema,
        n_silos,
        epsilon=args.epsilon,
        delta=args.delta,
        rows=args.rows,
        seed=args.seed,
        mpc=args.mpc,
        **_unit_args(args),
        silo_column=args.silo_column,
        silo_names=names,
        **options,
    )
    if args.rows and _csv_too_large(out, args.rows, len(schema.columns)):
        raise InputError(f"{out}: {_csv_too_large(out, args.rows, len(schema.columns))}; ask for fewer --rows")
    for path, names in ignored.items():  # once the request passed: for every file, an MPC party's too
        if names:
            silo_log.warning(ignored_note(path, names))
    return Request(out, ledger, schema, silo_files, options)


def _release(args: argparse.Namespace, request: Request, budget: contextlib.AbstractContextManager) -> tuple:
    """Reserve (``budget``), read the silos (or start the MPC parties) and run the release;
    ``(result, number of silos)``. Under ``--mpc`` every party first checks the release's request
    against its own policy: nothing is reserved or read, here or at any party, until all accept."""
    from ..api import synthesize
    from ..common import checkpoint

    checkpoint()

    def identical():
        if not args.federation:  # every silo file is on this machine
            check_identical_contents(request.silo_files, args.allow_identical_silos)

    def stage(result, final_ledger):
        return _stage_outputs(args, request.out, request.schema, result, final_ledger)

    def release(silos, reservation, aggregator=None):
        for silo in silos:
            for col, n in silo.clipped.items():
                if n:
                    print(
                        f"privsyn-fed: note for the operator of {silo.name}: {n} value(s) of '{col}' lay "
                        f"outside the schema's bounds and were clipped (private; not released)",
                        file=sys.stderr,
                    )
            if getattr(silo, "unit_dropped", 0):
                print(
                    f"privsyn-fed: note for the operator of {silo.name}: {silo.unit_dropped} row(s) beyond "
                    f"--max-rows-per-unit were left out (private; not released)",
                    file=sys.stderr,
                )
            if getattr(silo, "unit_elsewhere", 0):
                print(
                    f"privsyn-fed: note for the operator of {silo.name}: {silo.unit_elsewhere} row(s) of units "
                    f"kept in --max-silos-per-unit other silos were left out (private; not released)",
                    file=sys.stderr,
                )
        return synthesize(
            silos,
            args.method,
            args.epsilon,
            args.delta,
            rows=args.rows,
            seed=args.seed,
            ledger_path=request.ledger,
            overwrite=args.force,
            progress=not args.quiet,
            reservation=reservation,
            aggregator=aggregator,
            write_outputs=stage,
            allow_identical_silos=args.allow_identical_silos,
            **_unit_args(args),
            **({"silo_column": args.silo_column} if args.silo_column else {}),
            **request.options,
        )

    from ..accounting.unit import unit_of

    unit = unit_of(args.privacy_unit, args.max_rows_per_unit, args.max_silos_per_unit, args.mpc)
    # across hosts the coordinator asks the other parties for their silos' names (``names`` None)
    site = None if args.silo_column is None else (args.silo_column, None if args.federation else tuple(args.silo_names))
    if servers_layout(args):
        from .synth_sites import release_over_sites

        return release_over_sites(args, request, budget, unit, site, release, _logger(args))
    if args.mpc:
        from ..mpc.launch import coordinator

        log = _logger(args)
        with coordinator(
            args.schema,
            args.silo,
            seed=args.seed,
            log=log,
            **coordinator_options(args),
            release=(
                args.method,
                args.epsilon,
                args.delta,
                unit,
                request.options.get("target"),
                site,
            ),  # policies first
            silo_names=args.silo_names,
        ) as agg:
            with budget as reservation:
                request.ledger = used_ledger(request.ledger, reservation, args.budget_store)
                identical()
                agg.begin()  # party 0's silo, then each party reserves in its own store and reads its own
                log(collusion_cost(args, len(args.silo)))
                return release([agg.own], reservation, agg), len(agg.silo_names)
    with budget as reservation:
        request.ledger = used_ledger(request.ledger, reservation, args.budget_store)
        identical()
        from ..api import read_silos

        sites = None if args.silo_column is None else [(args.silo_column, name) for name in args.silo_names]
        silos = read_silos(
            args.silo, request.schema, unit, args.seed, sites=sites
        )  # every input checked before any spend
        checkpoint()
        return release(silos, reservation), len(silos)


def _logger(args: argparse.Namespace):
    """One line on stderr per message of the run's progress, unless ``--quiet``."""

    def log(message: str) -> None:
        if not args.quiet:
            print(f"privsyn-fed: {message}", file=sys.stderr)

    return log


def _unit_args(args: argparse.Namespace) -> dict:
    """The privacy unit's arguments of ``prepare`` and ``synthesize``."""
    return {
        "privacy_unit": args.privacy_unit,
        "max_rows_per_unit": args.max_rows_per_unit,
        "max_silos_per_unit": args.max_silos_per_unit,
    }


def _report(args: argparse.Namespace, request: Request, result, n_silos: int) -> None:
    """What was written, what it cost, what it sent, and any warning the ledger calls for."""
    from ..audit.dependence import dependence_summary

    led = result.ledger
    print(
        f"wrote {request.out}: {result.rows} rows x {len(request.schema.columns)} columns "
        f"from {n_silos} silo(s) by {args.method}" + (" over MPC" if args.mpc else "")
    )
    print(
        f"wrote {request.ledger}: epsilon={led['epsilon']:.4f} at delta={led['delta']:g} spent "
        f"(rho {led['rho_spent']:.6g} of {led['rho_budget']:.6g}) in {len(led['entries'])} mechanism calls"
        + _rounds_ran(led)
    )
    found = dependence_summary(led)
    if found:
        print(f"dependence step: {found}")
    if args.report:
        print(f"wrote {args.report}: the privacy report to hand out with the CSV")
    if args.model_out:
        print(f"wrote {args.model_out}: the model with its ledger (`privsyn-fed sample {args.model_out} --rows N`)")
    traffic = result.info.get("traffic")
    if traffic and traffic.get("layout") == "sites and servers":
        print(
            f"communication: {traffic['silos_active']} of {traffic['silos']} sites answered, at most "
            f"{traffic['max_bytes_per_site'] / 1e3:.1f} kB per site; at most "
            f"{traffic['max_bytes_per_server'] / 1e6:.1f} MB per compute server"
        )
    elif traffic and traffic.get("mpc"):
        print(
            f"communication: {traffic['parties'][0]['rounds']:.0f} message rounds; per party "
            f"{traffic['mean_bytes_sent_per_active_silo'] / 1e6:.1f} MB on average "
            f"(most {traffic['max_bytes_per_silo'] / 1e6:.1f} MB)"
        )
    elif traffic:
        print(
            f"communication: {traffic['silos_active']} of {traffic['silos']} silos took part; per silo "
            f"{traffic['mean_bytes_sent_per_active_silo'] / 1e6:.3f} MB sent and "
            f"{traffic['mean_bytes_received_per_active_silo'] / 1e6:.3f} MB received on average"
        )
    own, base = (led.get("details", {}).get(k) for k in ("expected_oneway_tvd", "expected_oneway_tvd_independent"))
    if own is not None and base is not None and own > base + ONEWAY_MARGIN:
        print(
            f"warning: expected 1-way error {own:.3f} (mean total variation) against {base:.3f} for --method "
            "independent at this budget: on this little data the baseline may beat this release; compare "
            "them with `privsyn-fed evaluate --baseline`",
            file=sys.stderr,
        )
    if led.get("non_private"):
        print(f"WARNING: {led['non_private']}", file=sys.stderr)
    if led["seeded"]:
        print("warning: seeded run: the noise is predictable from the seed; not a private release", file=sys.stderr)
    print(f"check it with: privsyn-fed audit {request.ledger}")


def _rounds_ran(ledger: dict) -> str:
    """`` over N rounds`` for a ledger that records the rounds that ran (the privacy report's count),
    else nothing."""
    rounds = (ledger.get("details") or {}).get("rounds")
    return f" over {rounds} round{'' if rounds == 1 else 's'}" if isinstance(rounds, int) else ""


def _csv_too_large(out: Path, rows: int, columns: int) -> str | None:
    """Why a CSV of ``rows`` rows cannot fit on the output's disk (at least 2 bytes a cell), or None."""
    import shutil

    from ..methods.output import min_csv_bytes

    need, free = min_csv_bytes(rows, columns), shutil.disk_usage(out.parent).free
    if need <= free:
        return None
    return (
        f"{rows:,} rows of {columns} columns need at least {need / 1e9:,.1f} GB, but only {free / 1e9:,.1f} GB is free"
    )


def _stage_outputs(args: argparse.Namespace, out: Path, schema, result, final_ledger):
    """The release's files, written in full under temporary names (published on commit)."""
    from ..common import Staged

    full = _csv_too_large(out, result.rows, len(schema.columns))
    if full:  # the row count came from the model's noisy total
        import errno

        raise OSError(errno.ENOSPC, full, str(out))
    if not args.quiet and result.rows > 1_000_000:
        print(f"privsyn-fed: writing {result.rows:,} rows to {out}", file=sys.stderr, flush=True)
    staged = Staged()
    try:
        staged.add(out, result.write_csv)
        if args.model_out:
            model = dataclasses.replace(result.model, ledger=final_ledger).to_bytes()
            staged.add(args.model_out, lambda fh: fh.write(model), binary=True)
        if args.report:
            from ..audit import render_report
            from ..audit.report import Subject
            from ..common.fileio import SHAREABLE
            from ..common.paths import file_digest

            subject = Subject(Path(out).name, file_digest(staged.files[0][0]))  # the staged CSV, in full
            text = render_report(final_ledger, args.report, subject=subject)
            staged.add(args.report, lambda fh: fh.write(text), mode=SHAREABLE)
    except BaseException:
        staged.discard()
        raise
    return staged
