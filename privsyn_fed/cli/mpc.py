"""The secure-computation commands: ``mpc-demo``, ``mpc-party``, ``mpc-server`` and ``mpc-dealer``."""

from __future__ import annotations

import argparse

from ..common import require_mpc
from .common import add_membership_args, federation_access, federation_inputs, number, positive_int, seed_arg


def add_parsers(sub) -> None:
    """Add the command's parser to ``sub`` (the subcommands of ``privsyn-fed``)."""
    md = sub.add_parser(
        "mpc-demo",
        help="watch the parties compute on secret shares (generated data)",
        description="Start silo parties and a dealer as separate processes on this machine, "
        "give each generated rows, and run DistAIM's secure sum, select and measure "
        "on secret shares. Prints what one party holds next to what is opened, "
        "checks the opened sum against the plaintext sum, and reports wall time, "
        "communication rounds and bytes per party.",
    )
    md.add_argument("--parties", type=positive_int, default=3, metavar="N", help="silo parties (default 3)")
    md.add_argument("--rows", type=positive_int, default=2000, metavar="N", help="rows per party (default 2000)")
    md.add_argument("--rounds", type=positive_int, default=3, metavar="T", help="DistAIM rounds (default 3)")
    md.add_argument("--epsilon", type=number, default=1.0, metavar="E", help="privacy budget (default 1)")
    md.add_argument(
        "--seed", type=seed_arg, default=0, metavar="S", help="seed of the generated data (the noise is always fresh)"
    )

    mp = sub.add_parser(
        "mpc-party",
        help="run one silo party of an MPC release on this host",
        description="Join an MPC release as silo party RANK (1..N-1) and follow party 0 (the host "
        "running `synth --mpc --federation`). The release's request is checked against this party's "
        "--policy and its own budget store before this host's silo table is read; every step is costed "
        "by this party and refused beyond its budget. Only secret shares of its answers leave this "
        "process, over TLS 1.3 with mutual authentication.",
    )
    mp.add_argument(
        "--rank", type=int, metavar="K", help="this party's rank, 1..N-1 (default: the role its --cert names)"
    )
    add_membership_args(mp)
    what = mp.add_mutually_exclusive_group(required=True)
    what.add_argument("--schema", metavar="SCHEMA", help="the public schema (same as party 0's)")
    what.add_argument(
        "--draft",
        action="store_true",
        help="draft a schema with party 0 (`schema draft --dp E --delta D --mpc`) instead of a release over "
        "one: this silo's facts are summed on secret shares and its candidate category values listed under "
        "this party's own noise; the policy must list the method schema-draft",
    )
    mp.add_argument(
        "--silo",
        required=True,
        metavar="TABLE",
        help="this party's table: CSV, gzip CSV or Parquet, or a DuckDB, SQLite, PostgreSQL, MySQL or Spark table "
        "by URL; NAME=TABLE names the silo for a release with a silo column (default: the file's name without its "
        "extensions)",
    )
    mp.add_argument(
        "--seed",
        type=seed_arg,
        metavar="S",
        help="seeded noise for tests and demos: NOT private; party 0 must use --seed too",
    )
    mp.add_argument(
        "--policy",
        metavar="POLICY.json",
        help="what this party accepts per release: max_epsilon, max_delta, methods, schema_sha256, and "
        "optionally min_collusion and its own budget_store (path, dataset_id, total_epsilon); a request "
        'outside it is refused before the silo is read (SECURITY.md, "A party\'s own policy"). Without '
        "it, any request over this party's schema is accepted, each step still costed against that "
        "release's own budget",
    )
    mp.add_argument(
        "--ledger",
        metavar="LEDGER.json",
        help="this party's own ledger copy of the release (what it answered, with the noise it "
        "enforced; `privsyn-fed audit` checks it); the party then serves one release. Default: a new "
        "file per release in the folder TABLE.ledgers/ beside the silo",
    )
    mp.add_argument("--force", action="store_true", help="replace --ledger if it already exists")
    mp.add_argument(
        "--non-private-checks",
        action="store_true",
        help="tests and demonstrations only: also answer exact sums (no noise) and steps outside a "
        "release, without accounting; never an exact sum during a release",
    )

    sv = sub.add_parser(
        "mpc-server",
        help="run one compute server of a federation of sites",
        description="Join a federation of sites and compute servers as server party-J (1..S-1; party 0 is "
        "the host running `synth --mpc --federation`). A server holds no silo: each site seals one "
        "additive share of each answer for each server, and this server opens only its own, only to sum "
        "them on secret shares; it adds its own noise and costs every step in its own ledger copy, "
        "refusing one beyond the release's budget. The federation file must list the sites.",
    )
    add_membership_args(sv)
    sv.add_argument("--schema", required=True, metavar="SCHEMA", help="the public schema (same as party 0's)")
    sv.add_argument(
        "--seed", type=seed_arg, metavar="S", help="seeded noise for tests and demos: NOT private; party 0 too"
    )
    sv.add_argument(
        "--policy", metavar="POLICY.json", help="what this server accepts per release (as `mpc-party --policy`)"
    )
    sv.add_argument(
        "--ledgers",
        metavar="FOLDER",
        help="where this server writes its ledger copy of each release (default server-J.ledgers/ here)",
    )

    dl = sub.add_parser(
        "mpc-dealer",
        help="run the dealer (trusted third party) of an MPC release",
        description="Join an MPC release as the dealer (rank N): it deals CrypTen's correlated "
        "randomness for multiplications and comparisons as secret shares; it sees no "
        "data and deals no noise (each party draws its own). It must collude with no "
        "party: run it on a host that no silo party controls.",
    )
    add_membership_args(dl)


def _check_inputs(args: argparse.Namespace, *given: tuple[str, str | None]) -> None:
    """The federation's files and ``given`` (option, path) exist and are regular files, before any is read."""

    from ..common import check_files, named_files

    named = named_files((option, value) for option, value in given if value)
    check_files(federation_inputs(args) + named, [], force=False)


def run_party(args: argparse.Namespace) -> int:
    """``mpc-party``: run this host's silo party until party 0 stops; its exit status."""
    require_mpc("mpc-party")
    from ..mpc import party_main
    from ..silo import silo_names

    [(silo_name, args.silo)] = silo_names([args.silo])
    _check_inputs(args, ("--schema", args.schema), ("--silo", args.silo), ("--policy", args.policy))
    return party_main(
        args.rank,
        args.parties,
        federation_access(args),
        args.schema,
        args.silo,
        args.mpc_timeout,
        args.seed,
        policy_path=args.policy,
        ledger_path=args.ledger,
        force=args.force,
        checks=args.non_private_checks,
        silo_name=silo_name,
    )


def run_server(args: argparse.Namespace) -> int:
    """``mpc-server``: run this host's compute server until party 0 stops; its exit status."""
    require_mpc("mpc-server")
    from ..mpc import server_main

    _check_inputs(args, ("--schema", args.schema), ("--policy", args.policy))
    return server_main(
        federation_access(args), args.schema, args.mpc_timeout, args.seed, policy_path=args.policy, ledgers=args.ledgers
    )


def run_dealer(args: argparse.Namespace) -> int:
    """``mpc-dealer``: run the dealer until party 0 ends the run; its exit status."""
    require_mpc("mpc-dealer")
    from ..mpc import dealer_main

    _check_inputs(args)
    return dealer_main(args.parties, federation_access(args), args.mpc_timeout)


def run_demo_command(args: argparse.Namespace) -> int:
    """``mpc-demo``: run the demonstration (``mpc_demo.run_demo``); its exit status."""
    require_mpc("mpc-demo")
    from .mpc_demo import run_demo

    return run_demo(parties=args.parties, rows=args.rows, rounds=args.rounds, epsilon=args.epsilon, seed=args.seed)
