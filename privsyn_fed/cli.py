"""The ``privsyn-fed`` command line.

Exit status: 0 success; 2 bad input or bad usage (one line on stderr naming what is at fault);
1 anything else, including a ledger that fails its audit.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .errors import BudgetExceeded, InputError, MPCError
from .mpc import DEFAULT_TIMEOUT_S as DEFAULT_MPC_TIMEOUT

DESCRIPTION = """\
Differentially private synthetic data from several silos that share a schema.
Every release writes a zCDP privacy ledger that `privsyn-fed audit` re-checks."""

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
answers. With --mpc (distaim, flaim, fedtda, independent) each silo is its own party process, and the noisy
sums (and DistAIM's selection scores) are computed on secret shares among the parties and a
dealer process: only noisy statistics and selected indices are opened (README, "Secure
computation").

sample rate: by default every silo takes part in every round when there are fewer than 100
silos, and each silo takes part with probability 0.1 from 100 silos on (--sample-rate)."""


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (exit status 2)."""

    def error(self, message: str):  # noqa: D401
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _rendezvous(text: str) -> str:
    host, sep, port = text.removeprefix("tcp://").rpartition(":")
    if not text.startswith("tcp://") or not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"must look like tcp://HOST:PORT, not {text!r}")
    return text


def _add_membership_args(p: argparse.ArgumentParser) -> None:
    """Where a party or the dealer of a multi-host MPC release finds the others."""
    p.add_argument("--parties", type=_positive_int, required=True, metavar="N",
                   help="number of silo parties (the dealer is extra)")
    p.add_argument("--rendezvous", type=_rendezvous, required=True, metavar="tcp://HOST:PORT",
                   help="party 0's address")
    p.add_argument("--timeout", type=_float, default=DEFAULT_MPC_TIMEOUT, metavar="SECONDS",
                   help=f"how long to wait for the others (default {DEFAULT_MPC_TIMEOUT:g})")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="privsyn-fed", description=DESCRIPTION,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    s = sub.add_parser("synth", help="release a synthetic CSV of the silos' union",
                       description="Release one synthetic CSV of the union of the silos under "
                                   "(epsilon, delta)-differential privacy, with its privacy ledger.",
                       epilog=SYNTH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("--method", choices=["aim", "distaim", "flaim", "fedtda", "independent"], default="aim",
                   help="synthesis method (default aim: trusted-curator AIM over the pooled rows); "
                        "see below")
    s.add_argument("--schema", required=True, metavar="SCHEMA",
                   help="public schema (JSON or YAML): columns, bounds, bins, categories")
    s.add_argument("--silo", action="append", required=True, metavar="CSV",
                   help="one silo's CSV file with the schema's columns; repeat for each silo")
    s.add_argument("--epsilon", type=_float, required=True, metavar="E", help="privacy budget epsilon (> 0)")
    s.add_argument("--delta", type=_float, required=True, metavar="D", help="privacy budget delta, in (0, 1)")
    s.add_argument("--out", required=True, metavar="OUT.csv", help="where to write the synthetic CSV")
    s.add_argument("--ledger", metavar="LEDGER.json",
                   help="where to write the privacy ledger (default: OUT with suffix .ledger.json)")
    s.add_argument("--rows", type=_positive_int, metavar="N",
                   help="rows to generate (default: the model's noisy estimate of the total)")
    s.add_argument("--seed", type=int, metavar="S",
                   help="reproducible run for tests and demos: noise from a seeded generator. The "
                        "ledger records it and audit fails it; never use it for a real release")
    s.add_argument("--report", metavar="REPORT.html",
                   help="also write a one-page privacy report (.html or .md) to hand out with the CSV: "
                        "the guarantee, threat model, audit verdict, budget chart and mechanisms")
    s.add_argument("--model-out", metavar="MODEL.npz",
                   help="also save the fitted graphical model (post-processing of the release, safe to "
                        "publish with it) for `evaluate --model` (holdout likelihood)")
    s.add_argument("--force", action="store_true",
                   help="replace OUT, LEDGER, --report and --model-out if they already exist (never an input)")
    s.add_argument("--allow-identical-silos", action="store_true",
                   help="accept two --silo files with identical contents. By default they are refused: the same "
                        "records would count twice while the ledger charges once")
    s.add_argument("--quiet", action="store_true", help="no progress display")
    b = s.add_argument_group("shared budget (several releases of one dataset draw on one total)")
    b.add_argument("--budget-store", metavar="STORE.db",
                   help="SQLite budget store (created if absent): the run's epsilon is reserved there "
                        "before any silo is read and refused if the dataset's total would be exceeded")
    b.add_argument("--dataset-id", metavar="ID", help="the dataset whose total budget this run draws on")
    b.add_argument("--total-epsilon", type=_float, metavar="E",
                   help="the dataset's total epsilon (at --delta); required the first time a dataset "
                        "is used, checked against the store afterwards")
    g = s.add_argument_group("workload (public marginal queries the release should answer well)")
    g.add_argument("--workload-degree", type=_positive_int, metavar="K",
                   help="size of each workload marginal (default 3)")
    g.add_argument("--workload-size", type=int, metavar="M",
                   help="how many K-way marginals to sample (default 64; 0 means all of them)")
    g.add_argument("--workload-seed", type=int, metavar="S",
                   help="seed of the (public, data-independent) workload sample (default 0)")
    a = s.add_argument_group("options of the AIM family (aim, distaim, flaim)")
    a.add_argument("--rounds", type=_positive_int, metavar="T",
                   help="budget split into T rounds; aim anneals and stops when the budget is spent, "
                        "distaim and flaim run exactly T global rounds (default: planned from a noisy row "
                        "total that costs 1%% of the budget: fewer rounds, and stronger 1-ways, when the data "
                        "are small; at most 16 x columns for aim and 10 for distaim and flaim; the ledger "
                        "records the plan under details.schedule)")
    a.add_argument("--alpha", type=_float, metavar="A",
                   help="share of each round spent on measurement rather than selection (default 0.9)")
    a.add_argument("--max-model-size", type=_float, metavar="MB",
                   help="cap on the graphical model's junction-tree size in MB (default 80)")
    a.add_argument("--pgm-iters", type=_positive_int, metavar="N",
                   help="most mirror-descent iterations per model refit (default 1000)")
    a.add_argument("--pgm-tol", type=_float, metavar="TOL",
                   help="stop a refit early when 50 iterations improve the fit by less than TOL "
                        "(relative) twice in a row (default 1e-6; 0 always runs --pgm-iters)")
    t = s.add_argument_group("fedtda options")
    t.add_argument("--split", metavar="N,CAT,NUM,COV",
                   help="shares of the budget for the row total, the categorical histograms, the numeric "
                        "histograms and the covariance, e.g. 0.05,0.2,0.35,0.4 (default: planned from a noisy "
                        "row total that costs 1%% of the budget: the histograms get an equal share per column "
                        "and the covariance 40%% where its correlations can be measured, else 5%%)")
    t.add_argument("--components", type=_positive_int, metavar="K",
                   help="most Gaussian-mixture components per numeric column (default 5)")
    t.add_argument("--non-private", action="store_true",
                   help="TEST MODE: exact statistics, no noise, NO privacy guarantee (the ledger says so "
                        "and audit fails it); for checking the method itself")
    f = s.add_argument_group("federated options (distaim, flaim)")
    f.add_argument("--sample-rate", type=_float, metavar="P",
                   help="probability that a silo takes part in a round, in (0, 1] (default: 1 below "
                        "100 silos, 0.1 from 100 silos on); sampling never looks at the data")
    f.add_argument("--variant", choices=["naive", "private", "oracle"],
                   help="flaim only (default private): naive = local AIM scores; private = AugFLAIM "
                        "with a DP heterogeneity proxy, filter-and-combine and measurement weighting; "
                        "oracle = uses the true pooled marginals, NOT private, research baseline only")
    f.add_argument("--local-steps", type=_positive_int, metavar="S",
                   help="flaim only: selections per sampled silo per round (default 1); S > 1 costs "
                        "2S - 1 Gaussian releases per round, not S")

    m = s.add_argument_group("secure computation (distaim, flaim, fedtda, independent)")
    m.add_argument("--mpc", action="store_true",
                   help="compute on secret shares (distaim: the pool, select and measure; flaim, fedtda and independent: "
                        "every noisy sum, with each silo selecting in its own process): each --silo becomes its own "
                        "CrypTen party process (this process is party 0, the coordinator), plus a dealer "
                        "process; only noisy statistics and selected indices are ever opened")
    m.add_argument("--rendezvous", type=_rendezvous, metavar="tcp://HOST:PORT",
                   help="with --mpc across machines: party 0's address; the other parties and the dealer "
                        "are started on their hosts (`privsyn-fed mpc-party`, `mpc-dealer`) and --silo "
                        "names only this host's CSV")
    m.add_argument("--parties", type=_positive_int, metavar="N",
                   help="with --rendezvous: the number of silo parties (the dealer is extra)")
    m.add_argument("--mpc-timeout", type=_float, default=DEFAULT_MPC_TIMEOUT, metavar="SECONDS",
                   help=f"how long a party waits for the others before giving up (default {DEFAULT_MPC_TIMEOUT:g})")

    md = sub.add_parser("mpc-demo", help="watch the parties compute on secret shares (generated data)",
                        description="Start silo parties and a dealer as separate processes on this machine, "
                                    "give each generated rows, and run DistAIM's secure sum, select and measure "
                                    "on secret shares. Prints what one party holds next to what is opened, "
                                    "checks the opened sum against the plaintext sum, and reports wall time, "
                                    "communication rounds and bytes per party.")
    md.add_argument("--parties", type=_positive_int, default=3, metavar="N", help="silo parties (default 3)")
    md.add_argument("--rows", type=_positive_int, default=2000, metavar="N", help="rows per party (default 2000)")
    md.add_argument("--rounds", type=_positive_int, default=3, metavar="T", help="DistAIM rounds (default 3)")
    md.add_argument("--epsilon", type=_float, default=1.0, metavar="E", help="privacy budget (default 1)")
    md.add_argument("--seed", type=int, default=0, metavar="S",
                    help="seed of the generated data (the noise is always fresh)")

    mp = sub.add_parser("mpc-party", help="run one silo party of an MPC release on this host",
                        description="Join an MPC release as silo party RANK (1..N-1): load this host's CSV "
                                    "and follow party 0 (the host running `synth --mpc --rendezvous`). Only "
                                    "secret shares of its answers leave this process.")
    mp.add_argument("--rank", type=int, required=True, metavar="K", help="this party's rank, 1..N-1")
    _add_membership_args(mp)
    mp.add_argument("--schema", required=True, metavar="SCHEMA", help="the public schema (same as party 0's)")
    mp.add_argument("--silo", required=True, metavar="CSV", help="this party's CSV")

    dl = sub.add_parser("mpc-dealer", help="run the dealer (trusted third party) of an MPC release",
                        description="Join an MPC release as the dealer (rank N): it deals CrypTen's correlated "
                                    "randomness and the DP noise as secret shares, and sees no data. It must "
                                    "run on a host that no silo party controls.")
    _add_membership_args(dl)
    dl.add_argument("--seed", type=int, metavar="S", help="seeded noise for tests: NOT private")

    au = sub.add_parser("audit", help="re-check a privacy ledger",
                        description="Recompute every entry of a ledger from its own parameters, the "
                                    "total, the budget and the (epsilon, delta) conversion. Exit 0 when "
                                    "it adds up, 1 with the reasons when it does not.")
    au.add_argument("ledger", metavar="LEDGER.json", nargs="?", help="ledger written by `privsyn-fed synth`")
    au.add_argument("--json", action="store_true", help="print the audit result as JSON")
    au.add_argument("--report", metavar="REPORT.html",
                    help="also write a human-readable report (.html with a chart, or .md)")
    au.add_argument("--force", action="store_true", help="replace --report if it already exists")
    em = au.add_argument_group("empirical check (instead of a ledger): does an implementation leak more "
                               "than it claims?")
    em.add_argument("--empirical", action="store_true",
                    help="run --mechanism many times on D and D plus a canary record and report a "
                         "Clopper-Pearson lower bound on its real epsilon; exit 1 if it exceeds the claim")
    em.add_argument("--mechanism", choices=["gaussian", "exponential", "aim-round"],
                    help="gaussian: a count through the Gaussian mechanism; exponential: a selection "
                         "among 100 candidates; aim-round: AIM's selection on a small table")
    em.add_argument("--epsilon", type=_float, metavar="E", help="the claimed epsilon")
    em.add_argument("--delta", type=_float, default=1e-5, metavar="D", help="the claimed delta (default 1e-5)")
    em.add_argument("--trials", type=_positive_int, metavar="N",
                    help="runs on each dataset (default 200000 for gaussian, 10000 otherwise)")
    em.add_argument("--confidence", type=_float, default=0.95, metavar="C",
                    help="confidence of the lower bound (default 0.95)")

    bu = sub.add_parser("budget", help="show a budget store, or close a stale reservation",
                        description="show: the datasets of a budget store, their total budget, every run that "
                                    "drew on it (reserved, complete, failed, rejected or abandoned) and what is "
                                    "left. settle: close the reservation of a run whose process is gone "
                                    "(killed, or its host lost) at the spend its ledger records, never below it.",
                        epilog="example:\n  privsyn-fed budget settle --budget-store budget.db --run 7",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    bu.add_argument("action", choices=["show", "settle"], help="show, or settle a stale reservation")
    bu.add_argument("--budget-store", required=True, metavar="STORE.db", help="the budget store file")
    bu.add_argument("--dataset-id", metavar="ID", help="show: only this dataset (default: all)")
    bu.add_argument("--json", action="store_true", help="show: print JSON")
    bu.add_argument("--run", type=_positive_int, metavar="N", help="settle: the run to close (see `budget show`)")
    bu.add_argument("--ledger", metavar="LEDGER.json",
                    help="settle: the run's ledger (default: the path the store recorded for it)")
    bu.add_argument("--confirm-stopped", action="store_true",
                    help="settle: the run was started on another host and you have made sure it has stopped")

    pa = sub.add_parser("partition", help="split one table into client CSVs (experiments)",
                        description="Split one table into K client CSVs for experiments, IID or with "
                                    "label, feature or quantity skew, plus manifest.json (rows and label "
                                    "histogram per client). Deterministic for a seed; every row lands in "
                                    "exactly one client and no client is empty. Not a private operation.",
                        epilog="example:\n  privsyn-fed partition adult.csv --clients 100 --scheme cluster "
                               "--label income --out clients/",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    pa.add_argument("data", metavar="DATA.csv", help="the table to split")
    pa.add_argument("--clients", type=_positive_int, required=True, metavar="K", help="number of clients")
    pa.add_argument("--scheme", choices=["iid", "dirichlet", "cluster", "quantity"], required=True,
                    help="iid: random equal split; dirichlet: label skew, client shares of each label "
                         "~ Dir(alpha); cluster: feature skew, one k-means cluster of standardised rows "
                         "per client; quantity: client sizes ~ Dir(alpha)")
    pa.add_argument("--label", metavar="COL", help="label column (needed by dirichlet; histograms in the manifest)")
    pa.add_argument("--alpha", type=_float, default=0.5, metavar="A",
                    help="Dirichlet concentration for dirichlet and quantity (default 0.5; smaller = more skew)")
    pa.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the split (default 0)")
    pa.add_argument("--out", required=True, metavar="DIR", help="folder for client_000.csv ... and manifest.json")
    pa.add_argument("--force", action="store_true",
                    help="replace DIR's client files and manifest from an earlier split, as a whole (DIR must "
                         "hold nothing else)")

    ev = sub.add_parser("evaluate", help="compare a synthetic CSV with the real data",
                        description="Utility and disclosure measures of a synthetic table against the "
                                    "real one: workload error on a seeded workload of 3-way marginals, "
                                    "per-column total variation and Kolmogorov-Smirnov, pairwise "
                                    "correlation and contingency similarity; with --holdout also "
                                    "train-on-synthetic/test-on-real ROC-AUC (--label) and distance to "
                                    "closest record. Reads real data: run it where that is allowed.",
                        epilog="example:\n  privsyn-fed evaluate --real train.csv --synthetic synthetic.csv "
                               "--schema schema.json --holdout test.csv --label income --json eval.json",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ev.add_argument("--real", required=True, metavar="REAL.csv", help="the real rows the release was made from")
    ev.add_argument("--synthetic", required=True, metavar="SYN.csv", help="the synthetic CSV")
    ev.add_argument("--schema", required=True, metavar="SCHEMA", help="the public schema of both")
    ev.add_argument("--holdout", metavar="HOLDOUT.csv", help="real rows NOT used for the release")
    ev.add_argument("--label", metavar="COL", help="label column for train-on-synthetic/test-on-real")
    ev.add_argument("--workload-size", type=int, default=64, metavar="M",
                    help="3-way marginals in the error workload (default 64; 0 means all)")
    ev.add_argument("--workload-seed", type=int, default=0, metavar="S", help="seed of the workload (default 0)")
    ev.add_argument("--model", metavar="MODEL.npz",
                    help="the model saved by `synth --model-out`: adds the holdout negative log-likelihood")
    ev.add_argument("--baseline", metavar="BASELINE.csv",
                    help="another release of the same data to report beside this one, typically "
                         "`synth --method independent` at the same budget: the error a release should beat")
    ev.add_argument("--json", metavar="OUT.json", help="also write the full result as JSON")
    ev.add_argument("--force", action="store_true", help="replace --json if it already exists")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; SIGINT and SIGTERM stop it at the next safe point (``interrupt``)."""
    from .interrupt import deferred_signals

    args = build_parser().parse_args(argv)
    with deferred_signals(immediate=args.command != "synth"):      # only synth spends budget
        return _run(args)


def _one_line(exc: BaseException) -> str:
    """The exception's message and its notes (what could not be recorded) on one line."""
    parts = [str(exc)] + list(getattr(exc, "__notes__", []))
    return "; ".join(" ".join(p.split()) for p in parts if p.strip())


def _run(args: argparse.Namespace) -> int:
    from .interrupt import Interrupted

    commands = {"synth": _synth, "audit": _audit, "partition": _partition, "evaluate": _evaluate,
                "budget": _budget, "mpc-demo": _mpc_demo, "mpc-party": _mpc_party, "mpc-dealer": _mpc_dealer}
    try:
        return commands[args.command](args)
    except InputError as exc:
        print(f"privsyn-fed: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except BudgetExceeded as exc:
        print(f"privsyn-fed: refused: {_one_line(exc)}", file=sys.stderr)
        return 1
    except MPCError as exc:
        print(f"privsyn-fed: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except Interrupted as exc:
        print(f"privsyn-fed: {_one_line(exc)}; no synthetic data was written", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("privsyn-fed: interrupted; the ledger records what was spent", file=sys.stderr)
        return 130
    except OSError as exc:         # the environment: a full disk, a folder made read-only meanwhile
        where = f"{exc.filename}: " if exc.filename else ""
        exc.args = (f"{where}{exc.strerror or exc}",)
        print(f"privsyn-fed: error: {_one_line(exc)} (nothing was released)", file=sys.stderr)
        return 1
    except Exception as exc:  # an internal failure: one line, the ledger keeps what was spent
        if os.environ.get("PRIVSYN_FED_DEBUG"):
            raise
        print(f"privsyn-fed: internal error: {type(exc).__name__}: {_one_line(exc)} "
              "(no output was written; the ledger, if any, records what was spent; set "
              "PRIVSYN_FED_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1


AIM_FAMILY = ("aim", "distaim", "flaim")
#: ``synth`` warns when a release's expected 1-way error exceeds the independent method's by more
#: than this (in mean total variation distance).
ONEWAY_MARGIN = 0.01


def _method_options(args: argparse.Namespace) -> dict:
    """The method options given on the command line; options of another method are usage errors."""
    given = {"rounds": args.rounds, "alpha": args.alpha, "max_model_size": args.max_model_size,
             "pgm_iters": args.pgm_iters, "pgm_tol": args.pgm_tol, "workload_degree": args.workload_degree,
             "workload_size": args.workload_size, "workload_seed": args.workload_seed,
             "sample_rate": args.sample_rate, "variant": args.variant, "local_steps": args.local_steps,
             "split": args.split, "components": args.components, "non_private": args.non_private or None}
    allowed = {"sample_rate": ("distaim", "flaim"), "variant": ("flaim",), "local_steps": ("flaim",),
               "split": ("fedtda",), "components": ("fedtda",), "non_private": ("fedtda",)}
    opts = {}
    for name, value in given.items():
        if value is None:
            continue
        methods = allowed.get(name, AIM_FAMILY)
        if args.method not in methods:
            raise InputError(f"--{name.replace('_', '-')} applies to --method {' or '.join(methods)}, "
                             f"not {args.method}")
        opts[name] = value
    if "workload_size" in opts:
        if opts["workload_size"] < 0:
            raise InputError(f"--workload-size must be 0 (all) or positive, not {opts['workload_size']}")
        opts["workload_size"] = opts["workload_size"] or None
    if "split" in opts:
        try:
            opts["split"] = tuple(float(x) for x in opts["split"].split(","))
        except ValueError:
            raise InputError(f"--split must be four comma-separated numbers, not {args.split!r}") from None
    if args.sample_rate is not None and not 0 < args.sample_rate <= 1:
        raise InputError(f"--sample-rate must lie in (0, 1], not {args.sample_rate:g}")
    return opts


def _synth(args: argparse.Namespace) -> int:
    """Check everything public, reserve, read the silos, run, then commit the files (``api``)."""
    from .api import MAX_EPSILON, prepare, synthesize
    from .interrupt import checkpoint
    from .paths import Named, check_distinct, check_files, check_identical_contents
    from .schema import Schema
    from .silo import Silo

    out = Path(args.out)
    ledger = Path(args.ledger) if args.ledger else out.with_suffix(".ledger.json")
    options = _method_options(args)
    _check_mpc_args(args)
    if args.model_out and args.method not in AIM_FAMILY:
        raise InputError(f"--model-out applies to the graphical-model methods ({', '.join(AIM_FAMILY)})")
    if args.report:
        from .accounting.report import check_report_path
        check_report_path(args.report)
    if (args.dataset_id or args.total_epsilon is not None) and not args.budget_store:
        raise InputError("--dataset-id and --total-epsilon need --budget-store")
    if args.budget_store and not args.dataset_id:
        raise InputError("--budget-store needs --dataset-id (the dataset this release draws on)")
    if args.total_epsilon is not None and not 0 < args.total_epsilon <= MAX_EPSILON:
        raise InputError(f"--total-epsilon must be a positive number up to {MAX_EPSILON:g}, not {args.total_epsilon:g}")
    silo_files = [Named("--silo", Path(p)) for p in args.silo]
    outputs = [(Named("--out", out), "synthetic CSV"),
               (Named("--ledger" if args.ledger else "the ledger", ledger), "ledger")]
    if args.model_out:
        outputs.append((Named("--model-out", Path(args.model_out)), "model"))
    if args.report:
        outputs.append((Named("--report", Path(args.report)), "report"))
    stores = [Named("--budget-store", Path(args.budget_store))] if args.budget_store else []
    check_files([Named("--schema", Path(args.schema)), *silo_files], outputs, force=args.force, stores=stores)
    check_distinct(silo_files)
    schema = Schema.load(args.schema)
    n_silos = args.parties if args.rendezvous else len(args.silo)
    prepare(args.method, schema, n_silos, epsilon=args.epsilon, delta=args.delta, rows=args.rows,
            seed=args.seed, **options)
    if args.rows and _csv_too_large(out, args.rows, len(schema.columns)):
        raise InputError(f"{out}: {_csv_too_large(out, args.rows, len(schema.columns))}; ask for fewer --rows")

    reservation = None
    if args.budget_store:                                   # before any silo is read
        from .accounting.budget_store import BudgetStore
        reservation = BudgetStore(args.budget_store).reserve(
            args.dataset_id, epsilon=args.epsilon, delta=args.delta, method=args.method,
            total_epsilon=args.total_epsilon, ledger=str(ledger.resolve()))
    try:
        checkpoint()
        if not args.rendezvous:         # every silo file is on this machine
            check_identical_contents(silo_files, args.allow_identical_silos)

        def stage(result, final_ledger):
            return _stage_outputs(args, out, schema, result, final_ledger)

        def release(silos, aggregator=None):
            for silo in silos:
                for col, n in silo.clipped.items():
                    if n:
                        print(f"privsyn-fed: note for the operator of {silo.name}: {n} value(s) of '{col}' lay "
                              f"outside the schema's bounds and were clipped (private; not released)",
                              file=sys.stderr)
            return synthesize(silos, args.method, args.epsilon, args.delta, rows=args.rows, seed=args.seed,
                              ledger_path=ledger, progress=not args.quiet, reservation=reservation,
                              aggregator=aggregator, write_outputs=stage,
                              allow_identical_silos=args.allow_identical_silos, **options)

        if args.mpc:
            from .mpc.launch import coordinator
            def log(message):
                if not args.quiet:
                    print(f"privsyn-fed: {message}", file=sys.stderr)

            with coordinator(args.schema, args.silo, rendezvous=args.rendezvous, parties=args.parties,
                             seed=args.seed, timeout_s=args.mpc_timeout, log=log) as agg:
                result = release([agg.own], agg)
                n_silos = len(agg.silo_names)
        else:
            silos = []
            for p in args.silo:                   # every input checked before any spend
                silos.append(Silo.from_csv(p, schema))
                checkpoint()
            result = release(silos)
    except BaseException as exc:
        if reservation is not None and reservation.accountant is None:   # no mechanism ran
            try:
                reservation.fail()
            except Exception as settle_error:
                exc.add_note(f"the budget store could not record that nothing was spent ({settle_error}); "
                             f"run {reservation.run} stays counted at its whole reservation until "
                             f"`privsyn-fed budget settle`")
        raise
    led = result.ledger
    print(f"wrote {out}: {result.rows} rows x {len(schema.columns)} columns "
          f"from {n_silos} silo(s) by {args.method}" + (" over MPC" if args.mpc else ""))
    print(f"wrote {ledger}: epsilon={led['epsilon']:.4f} at delta={led['delta']:g} spent "
          f"(rho {led['rho_spent']:.6g} of {led['rho_budget']:.6g}) in {len(led['entries'])} mechanism calls")
    if args.report:
        print(f"wrote {args.report}: the privacy report to hand out with the CSV")
    if args.model_out:
        print(f"wrote {args.model_out}: the fitted model (for `privsyn-fed evaluate --model`)")
    traffic = result.info.get("traffic")
    if traffic and traffic.get("mpc"):
        print(f"communication: {traffic['parties'][0]['rounds']:.0f} rounds; per party "
              f"{traffic['mean_bytes_sent_per_active_silo'] / 1e6:.1f} MB on average "
              f"(most {traffic['max_bytes_per_silo'] / 1e6:.1f} MB)")
    elif traffic:
        print(f"communication: {traffic['silos_active']} of {traffic['silos']} silos took part; per silo "
              f"{traffic['mean_bytes_sent_per_active_silo'] / 1e6:.3f} MB sent and "
              f"{traffic['mean_bytes_received_per_active_silo'] / 1e6:.3f} MB received on average")
    own, base = (led.get("details", {}).get(k) for k in ("expected_oneway_tvd", "expected_oneway_tvd_independent"))
    if own is not None and base is not None and own > base + ONEWAY_MARGIN:
        print(f"warning: expected 1-way error {own:.3f} (mean total variation) against {base:.3f} for --method "
              "independent at this budget: on this little data the baseline may beat this release; compare "
              "them with `privsyn-fed evaluate --baseline`", file=sys.stderr)
    if led.get("non_private"):
        print(f"WARNING: {led['non_private']}", file=sys.stderr)
    if led["seeded"]:
        print("warning: seeded run: the noise is predictable from the seed; not a private release",
              file=sys.stderr)
    print(f"check it with: privsyn-fed audit {ledger}")
    return 0


def _csv_too_large(out: Path, rows: int, columns: int) -> str | None:
    """Why a CSV of ``rows`` rows cannot fit on the output's disk (at least 2 bytes a cell), or None."""
    import shutil

    from .output import min_csv_bytes
    need, free = min_csv_bytes(rows, columns), shutil.disk_usage(out.parent).free
    if need <= free:
        return None
    return f"{rows:,} rows of {columns} columns need at least {need / 1e9:,.1f} GB, but only {free / 1e9:,.1f} GB is free"


def _stage_outputs(args: argparse.Namespace, out: Path, schema, result, final_ledger):
    """The release's files, written in full under temporary names (published on commit)."""
    from .fileio import Staged

    full = _csv_too_large(out, result.rows, len(schema.columns))
    if full:                         # the row count came from the model's noisy total
        import errno
        raise OSError(errno.ENOSPC, full, str(out))
    if not args.quiet and result.rows > 1_000_000:
        print(f"privsyn-fed: writing {result.rows:,} rows to {out}", file=sys.stderr, flush=True)
    staged = Staged()
    try:
        staged.add(out, result.write_csv)
        if args.model_out:
            from .pgm import MarginalReader
            model = MarginalReader(result.model).factorisation().to_bytes()
            staged.add(args.model_out, lambda fh: fh.write(model), binary=True)
        if args.report:
            from .accounting.report import render_report
            text = render_report(final_ledger, args.report)
            staged.add(args.report, lambda fh: fh.write(text))
    except BaseException:
        staged.discard()
        raise
    return staged


#: Methods whose every statistic can be computed on secret shares.
MPC_METHODS = ("distaim", "flaim", "fedtda", "independent")


def _check_mpc_args(args: argparse.Namespace) -> None:
    if not args.mpc:
        if args.rendezvous or args.parties:
            raise InputError("--rendezvous and --parties belong to --mpc")
        return
    if args.method not in MPC_METHODS:
        raise InputError(f"--mpc runs --method {' or '.join(MPC_METHODS)}; {args.method} over MPC is not available")
    if args.method == "flaim" and ((args.local_steps or 1) > 1 or args.variant == "oracle"):
        raise InputError("flaim over MPC runs one local step with --variant naive or private "
                         "(--local-steps > 1 refits the model inside each silo; oracle is not private)")
    if args.rendezvous:
        if not args.parties or args.parties < 2:
            raise InputError("--rendezvous needs --parties N (at least 2 silo parties)")
        if len(args.silo) != 1:
            raise InputError("with --rendezvous, give only this host's --silo; the others join with "
                             "`privsyn-fed mpc-party`")
    elif args.parties and args.parties != len(args.silo):
        raise InputError(f"--parties {args.parties} but {len(args.silo)} --silo files; on one machine each "
                         "--silo is one party, so leave --parties out")
    if not 0 < args.mpc_timeout < float("inf"):
        raise InputError(f"--mpc-timeout must be a positive number of seconds, not {args.mpc_timeout:g}")


def _mpc_party(args: argparse.Namespace) -> int:
    from .mpc.party import party_main
    return party_main(args.rank, args.parties, args.rendezvous, args.schema, args.silo, args.timeout)


def _mpc_dealer(args: argparse.Namespace) -> int:
    from .mpc.party import dealer_main
    return dealer_main(args.parties, args.rendezvous, args.timeout, args.seed)


def _mpc_demo(args: argparse.Namespace) -> int:
    from .mpc.demo import run_demo
    return run_demo(parties=args.parties, rows=args.rows, rounds=args.rounds, epsilon=args.epsilon, seed=args.seed)


def _audit(args: argparse.Namespace) -> int:
    from .accounting import audit_ledger, load_ledger

    if args.empirical:
        return _empirical(args)
    if args.ledger is None:
        raise InputError("audit needs a LEDGER.json (or --empirical with --mechanism and --epsilon)")
    if args.mechanism or args.epsilon is not None:
        raise InputError("--mechanism and --epsilon belong to --empirical")

    if args.report:
        from .accounting.report import check_report_path
        from .paths import Named, check_files
        check_report_path(args.report)
        check_files([Named("LEDGER", Path(args.ledger))], [(Named("--report", Path(args.report)), "report")],
                    force=args.force)
    ledger = load_ledger(args.ledger)
    report = audit_ledger(ledger)
    if args.report:
        from .accounting.report import write_report
        write_report(ledger, args.report, report)
        print(f"wrote {args.report}", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps({"ok": report.ok, "problems": report.problems, "warnings": report.warnings,
                          "summary": report.summary}, indent=2))
    else:
        s = report.summary
        for w in report.warnings:
            print(f"WARNING: {w}")
        for p in report.problems:
            print(f"PROBLEM: {p}")
        verdict = "OK" if report.ok else "FAILED"
        print(f"{verdict}: {args.ledger}: method {s['method']}, {s['entries']} entries, rho {s['rho_spent']:.6g} "
              f"of {s['rho_budget']:.6g}, epsilon {s['epsilon']:.6g} at delta {s['delta']:g}")
    return 0 if report.ok else 1


def _empirical(args: argparse.Namespace) -> int:
    from .accounting.empirical import empirical_check, runner_for
    from .mechanisms import OpenDPNoise

    if args.ledger is not None:
        raise InputError("--empirical checks a mechanism, not a ledger: leave LEDGER.json out")
    if args.mechanism is None or args.epsilon is None:
        raise InputError("--empirical needs --mechanism and --epsilon")
    check_args = (args.epsilon, args.delta)
    from .api import check_budget_args
    check_budget_args(*check_args)
    if not 0 < args.confidence < 1:
        raise InputError(f"--confidence must lie in (0, 1), not {args.confidence}")
    trials = args.trials or (200_000 if args.mechanism == "gaussian" else 10_000)
    print(f"running {args.mechanism} {trials} times on D and on D plus a canary (OpenDP noise)...", flush=True)
    result = empirical_check(args.mechanism, runner_for(args.mechanism, args.epsilon, args.delta, OpenDPNoise()),
                             args.epsilon, args.delta, trials, args.confidence)
    verdict = "OK" if result.consistent else "LEAK"
    print(f"{verdict}: {args.mechanism}: epsilon >= {result.epsilon_lower_bound:.4f} with {args.confidence:.0%} "
          f"confidence (claimed {args.epsilon:g} at delta {args.delta:g}); most revealing event: {result.event}, "
          f"rates {result.rate_d:.4g} vs {result.rate_d_prime:.4g}")
    if result.consistent:
        print("a lower bound at or below the claim is consistent with it (it cannot prove the claim)")
    return 0 if result.consistent else 1


def _budget(args: argparse.Namespace) -> int:
    from .accounting.budget_store import BudgetStore
    from .accounting.conversions import rho_to_epsilon

    if args.action == "settle":
        return _budget_settle(args)
    if args.run or args.ledger or args.confirm_stopped:
        raise InputError("--run, --ledger and --confirm-stopped belong to `budget settle`")
    store = BudgetStore(args.budget_store, create=False)
    ids = [args.dataset_id] if args.dataset_id else store.datasets()
    budgets = [store.budget(i) for i in ids]
    if args.json:
        print(json.dumps([{"dataset": b.id, "total_epsilon": b.total_epsilon, "delta": b.delta,
                           "rho_total": b.rho_total, "rho_committed": b.rho_committed,
                           "epsilon_committed": b.epsilon_committed, "rho_left": b.rho_left, "runs": b.runs}
                          for b in budgets], indent=2))
        return 0
    if not budgets:
        print(f"{args.budget_store}: no datasets yet")
    for b in budgets:
        left_eps = rho_to_epsilon(b.rho_left, b.delta) if b.rho_left > 0 else 0.0
        print(f"dataset {b.id}: total epsilon {b.total_epsilon:g} at delta {b.delta:g} (rho {b.rho_total:.6g}); "
              f"committed rho {b.rho_committed:.6g} (epsilon {b.epsilon_committed:.4g}); "
              f"left rho {b.rho_left:.6g} (a single further run of up to epsilon {left_eps:.4g})")
        for r in b.runs:
            spent = "all of it (not settled)" if r["rho_spent"] is None else f"{r['rho_spent']:.6g}"
            print(f"  run {r['id']}: {r['method']}, epsilon {r['epsilon']:g}, reserved rho {r['rho_reserved']:.6g}, "
                  f"counted {spent}, {r['status']}, started {r['started']}"
                  + (f", ledger {r['ledger']}" if r["ledger"] else ""))
    return 0


def _budget_settle(args: argparse.Namespace) -> int:
    from .accounting import load_ledger
    from .accounting.budget_store import BudgetStore
    from .paths import Named, check_store

    if args.run is None:
        raise InputError("budget settle needs --run N (the run to close; see `privsyn-fed budget show`)")
    if args.dataset_id or args.json:
        raise InputError("--dataset-id and --json belong to `budget show`")
    check_store(Named("--budget-store", Path(args.budget_store)))
    store = BudgetStore(args.budget_store, create=False)
    run = store.run(args.run)
    path = args.ledger or run["ledger"]
    if not path:
        raise InputError(f"run {args.run} recorded no ledger; give --ledger (the run stays counted at its "
                         "whole reservation meanwhile)")
    ledger = load_ledger(path)
    spent = store.settle_stale(args.run, ledger, str(path), confirm_stopped=args.confirm_stopped)
    print(f"settled run {args.run} of dataset '{run['dataset']}' at rho {spent:.6g} (its ledger's spend; "
          f"it had reserved {run['rho_reserved']:.6g}): abandoned")
    return 0


def _partition(args: argparse.Namespace) -> int:
    from .partition import check_partition_folder, partition, write_partition
    from .paths import Named, check_input
    from .silo import read_csv

    out = Path(args.out)
    check_input(Named("DATA.csv", Path(args.data)))
    check_partition_folder(out, Path(args.data), force=args.force)
    df = read_csv(args.data)
    if args.label is not None and args.label not in df.columns:
        raise InputError(f"{args.data}: label column '{args.label}' is not in the file")
    part = partition(df, args.clients, args.scheme, label=args.label, alpha=args.alpha, seed=args.seed)
    manifest = write_partition(df, part, out, source=str(args.data), scheme=args.scheme, label=args.label,
                               alpha=args.alpha, seed=args.seed)
    sizes = [f["rows"] for f in manifest["files"]]
    print(f"wrote {len(sizes)} client CSVs and manifest.json to {out}: {sum(sizes)} rows, "
          f"client sizes {min(sizes)} to {max(sizes)}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from .evaluate import evaluate
    from .fileio import write_atomic
    from .schema import Schema
    from .silo import read_csv

    from .paths import Named, check_files
    inputs = [Named("--real", Path(args.real)), Named("--synthetic", Path(args.synthetic)),
              Named("--schema", Path(args.schema))]
    inputs += [Named(opt, Path(v)) for opt, v in (("--holdout", args.holdout), ("--model", args.model),
                                                  ("--baseline", args.baseline)) if v]
    outputs = [(Named("--json", Path(args.json)), "evaluation JSON")] if args.json else []
    check_files(inputs, outputs, force=args.force)
    schema = Schema.load(args.schema)
    if args.workload_size < 0:
        raise InputError(f"--workload-size must be 0 (all) or positive, not {args.workload_size}")
    if args.label is not None and args.label not in schema.names:
        raise InputError(f"--label: column '{args.label}' is not in the schema")
    if args.label is not None and args.holdout is None:
        raise InputError("--label needs --holdout (the real rows to test the classifier on)")
    if args.model is not None and args.holdout is None:
        raise InputError("--model needs --holdout (the real rows to compute the likelihood of)")
    model = None
    if args.model is not None:
        from .pgm import Factorisation
        model = Factorisation.load(args.model)
    holdout = read_csv(args.holdout) if args.holdout else None
    real = read_csv(args.real)
    common = dict(holdout_df=holdout, label=args.label, workload_size=args.workload_size or None,
                  workload_seed=args.workload_seed)
    report = evaluate(real, read_csv(args.synthetic), schema, model=model, **common)
    base = None
    if args.baseline:
        base = evaluate(real, read_csv(args.baseline), schema, **common)
        report["baseline"] = {"file": str(args.baseline), **base}

    def show(value, key, digits=4):
        """``value``, and the baseline's beside it when there is one."""
        text = "n/a" if value is None else f"{value:.{digits}f}"
        other = key(base) if base is not None else None
        return text if other is None else f"{text} (baseline {other:.{digits}f})"

    w, p = report["workload"], report["pairs"]
    print(f"workload error {show(w['error'], lambda b: b['workload']['error'])} "
          f"({w['size']} {w['degree']}-way marginals, seed {w['seed']})")
    print(f"mean total variation {show(report['mean_tv'], lambda b: b['mean_tv'])}" + (
        f", mean KS {show(report['mean_ks'], lambda b: b['mean_ks'])}" if report["mean_ks"] is not None else ""))
    for key in ("correlation_similarity", "contingency_similarity"):
        if p[key] is not None:
            print(f"{key.replace('_', ' ')} {show(p[key], lambda b, k=key: b['pairs'][k])}")
    if "tstr" in report:
        t = report["tstr"]
        print(f"ROC-AUC for {t['label']}: trained on synthetic {show(t['auc_synthetic'], lambda b: b['tstr']['auc_synthetic'])}, "
              f"on real {show(t['auc_real'], lambda b: None)}")
    if "dcr" in report:
        d = report["dcr"]
        print(f"distance to closest record: median {d['median_to_train']:.3f} to real, "
              f"{d['median_to_holdout']:.3f} to holdout; {d['share_closer_to_train']:.1%} closer to real")
    if "nll" in report:
        print(f"holdout negative log-likelihood {report['nll']['mean']:.3f} nats per row "
              f"(median {report['nll']['median']:.3f})")
    if base is not None:
        verdict = "better than" if w["error"] < base["workload"]["error"] else "NOT better than"
        print(f"this release is {verdict} the baseline {args.baseline} on workload error")
    if args.json:
        write_atomic(Path(args.json), lambda fh: fh.write(json.dumps(report, indent=2) + "\n"))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
