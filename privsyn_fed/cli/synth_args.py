"""``privsyn-fed synth``'s command line: its parser, with every method option's flag as the option's
dataclass field describes it (``methods.base.option``), and the method options a command gives."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing

from ..common import InputError
from ..methods import METHODS
from . import quality
from .common import add_mpc_args, number, positive_int
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
dealer process: only noisy statistics and selected indices are opened (docs/mpc.md, "Secure
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
        "chunks (a silo larger than memory is fine), or a table or query in DuckDB, SQLite, PostgreSQL, MySQL or "
        "Spark by URL (duckdb://PATH?table=T, sqlite://PATH?table=T, postgresql://USER@HOST/DB?table=T, "
        "mysql://USER@HOST/DB?table=T, spark://local[N]?table=T); repeat "
        "for each silo. NAME=TABLE names "
        "the silo (default: the file's name without its extensions, or the table's). Needed, except as "
        "party 0 of a federation file that lists sites (party 0 is then a compute server and holds no silo)",
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


def method_options_given(args: argparse.Namespace) -> dict:
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
