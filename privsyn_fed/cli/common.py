"""Pieces every command shares: the one-line-error parser, argument types, error reporting."""

from __future__ import annotations

import argparse

from ..common import MPC_TIMEOUT_S as DEFAULT_MPC_TIMEOUT


class Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (exit status 2)."""

    def error(self, message: str):  # noqa: D401
        """Exit with status 2 and the usage error on one line."""
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def positive_int(text: str) -> int:
    """A whole number of at least 1 (an argparse type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


MAX_SEED = 2**63 - 17
"""The largest seed (as ``api.check_seed``): seeds of batches and parties are derived from it by adding."""


def seed_arg(text: str) -> int:
    """A seed: a whole number from 0 to ``MAX_SEED`` (an argparse type)."""
    stripped = text.strip()
    if not stripped.isdigit() or len(stripped) > len(str(MAX_SEED)) or int(stripped) > MAX_SEED:
        shown = text if len(text) <= 30 else f"{text[:30]}... ({len(text)} characters)"
        raise argparse.ArgumentTypeError(f"{shown!r} is not a seed: a whole number from 0 to 2^63 - 17")
    return int(stripped)


def number(text: str) -> float:
    """A real number (an argparse type)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def rendezvous(text: str) -> str:
    """The type of the retired ``--rendezvous tcp://HOST:PORT``: always refused, pointing to ``--federation``."""
    raise argparse.ArgumentTypeError(
        "replaced by --federation FILE --cert CERT.pem --key KEY.pem: every MPC connection is TLS 1.3 "
        "with mutual authentication, there is no plain-TCP mode (certificates: `privsyn-fed federation init`)"
    )


def host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[V6ADDR]:PORT``) as ``(host, port)`` (an argparse type)."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"must look like HOST:PORT, not {text!r}")
    return host, int(port)


def add_federation_args(p) -> None:
    """``--federation``, ``--cert``, ``--key``, ``--listen`` (a parser or an argument group)."""
    p.add_argument(
        "--federation",
        metavar="FILE",
        help="the federation file (JSON: members by rank with their roles, organisations, hosts and "
        "ports, and the federation's CA); every connection is TLS 1.3 with mutual authentication",
    )
    p.add_argument("--cert", metavar="CERT.pem", help="with --federation: this member's certificate (names its role)")
    p.add_argument("--key", metavar="KEY.pem", help="with --federation: this member's private key (mode 0600)")
    p.add_argument(
        "--listen",
        type=host_port,
        metavar="HOST:PORT",
        help="with --federation: listen here instead of on the file's address for this member (behind NAT)",
    )
    p.add_argument("--rendezvous", type=rendezvous, help=argparse.SUPPRESS)


def federation_inputs(args: argparse.Namespace) -> list:
    """The files ``--federation``, ``--cert`` and ``--key`` name, as ``Named`` inputs for ``check_files``."""
    from pathlib import Path

    from ..common import Named

    given = (("--federation", args.federation), ("--cert", args.cert), ("--key", args.key))
    return [Named(option, Path(value)) for option, value in given if value]


def federation_parties(args: argparse.Namespace) -> int | None:
    """The number of silo parties ``--federation`` names (None without it); ``InputError`` for a bad file."""
    if not getattr(args, "federation", None):
        return None
    from pathlib import Path

    from ..common import Named, check_input
    from ..mpc import load_federation as load

    check_input(Named("--federation", Path(args.federation)))
    return load(args.federation).parties


def federation_sites(args: argparse.Namespace) -> list[str] | None:
    """The sites ``--federation`` lists (a federation of sites and compute servers), else None."""
    if not getattr(args, "federation", None):
        return None
    from pathlib import Path

    from ..common import Named, check_input
    from ..mpc import load_federation as load

    check_input(Named("--federation", Path(args.federation)))
    sites = load(args.federation).sites
    return None if sites is None else sites.names


def servers_layout(args: argparse.Namespace) -> bool:
    """Whether the release runs over sites and compute servers (``--servers``, or a federation
    file that lists sites)."""
    return bool(getattr(args, "mpc", False)) and (
        getattr(args, "servers", None) is not None or federation_sites(args) is not None
    )


def mpc_parties(args: argparse.Namespace, silos: int) -> int:
    """The CrypTen parties of an ``--mpc`` run: the compute servers of sites and servers, else the
    silo parties (the federation file's, or one per silo file given)."""
    if getattr(args, "servers", None) is not None:
        return int(args.servers)
    return federation_parties(args) or silos


def federation_access(args: argparse.Namespace):
    """What ``--federation``, ``--cert``, ``--key`` and ``--listen`` give (``mpc.world.Access``)."""
    from ..mpc import Access

    return Access(args.federation, args.cert, args.key, args.listen)


def add_membership_args(p: argparse.ArgumentParser) -> None:
    """How a party or the dealer of a multi-host MPC release joins the others."""
    add_federation_args(p)
    p.add_argument(
        "--parties",
        type=positive_int,
        metavar="N",
        help="number of silo parties (the dealer is extra); checked against the federation file",
    )
    p.add_argument(
        "--mpc-timeout",
        type=number,
        default=DEFAULT_MPC_TIMEOUT,
        metavar="SECONDS",
        help=f"how long to wait for the others before giving up (default {DEFAULT_MPC_TIMEOUT:g}; as "
        "`synth --mpc-timeout`)",
    )
    p.add_argument("--timeout", type=number, dest="mpc_timeout", help=argparse.SUPPRESS)  # the former name


def check_budget_options(args: argparse.Namespace, what: str) -> None:
    """``--budget-store``, ``--dataset-id`` and ``--total-epsilon`` go together and are well formed
    (``what``: the run that draws on the store, for the message); ``InputError`` if not."""
    from ..accounting import MAX_EPSILON, check_dataset_id
    from ..common import InputError

    if (args.dataset_id or args.total_epsilon is not None) and not args.budget_store:
        raise InputError("--dataset-id and --total-epsilon need --budget-store")
    if getattr(args, "new_dataset", False) and not args.budget_store:
        raise InputError("--new-dataset speaks of the budget store's datasets: give --budget-store too")
    if args.budget_store and not args.dataset_id:
        raise InputError(f"--budget-store needs --dataset-id (the dataset this {what} draws on)")
    if args.dataset_id is not None:
        check_dataset_id(args.dataset_id)
    if args.total_epsilon is not None and not 0 < args.total_epsilon <= MAX_EPSILON:
        raise InputError(f"--total-epsilon must be a positive number up to {MAX_EPSILON:g}, not {args.total_epsilon:g}")


def one_line(exc: BaseException) -> str:
    """The exception's message and its notes (what could not be recorded) on one line, control
    characters (a name's escape sequence) shown escaped (``terminal_text``)."""
    from ..common import terminal_text

    parts = [str(exc)] + list(getattr(exc, "__notes__", []))
    return terminal_text("; ".join(" ".join(p.split()) for p in parts if p.strip()))


def add_mpc_args(m, mpc_help: str, silos: str) -> None:
    """``--mpc`` (``mpc_help``), the federation's options, ``--parties``, ``--collusion`` and
    ``--mpc-timeout`` (a parser or an argument group); ``silos`` names the option of the silo files."""
    m.add_argument("--mpc", action="store_true", help=mpc_help)
    add_federation_args(m)  # --federation FILE --cert --key [--listen]: with --mpc across machines
    m.add_argument(
        "--parties",
        type=positive_int,
        metavar="N",
        help="with --federation: the number of silo parties (the dealer is extra), checked against the file",
    )
    m.add_argument(
        "--collusion",
        type=int,
        metavar="T",
        help="with --mpc: how many colluding parties the noise must withstand (1..N-1, default N-1). "
        "Each party adds noise of variance sigma^2/(N-T), so the N-T parties outside any such "
        "coalition carry the guarantee alone; with every party honest the noise's standard "
        "deviation is sqrt(N/(N-T)) times the planned one (x1.73 for N=3, T=2)",
    )
    m.add_argument(
        "--mpc-timeout",
        type=number,
        default=DEFAULT_MPC_TIMEOUT,
        metavar="SECONDS",
        help=f"how long a party waits for the others before giving up (default {DEFAULT_MPC_TIMEOUT:g})",
    )


def collusion_cost(args: argparse.Namespace, silos: int) -> str:
    """What ``--collusion`` costs in accuracy, said before the run starts (``silos``: the silo files
    given, without ``--federation``)."""
    import math

    from ..accounting import PartiesNoise

    n = mpc_parties(args, silos)
    split = PartiesNoise(n, n - 1 if args.collusion is None else args.collusion)
    who, whose = ("compute server", "compute servers'") if servers_layout(args) else ("party", "parties'")
    return (
        f"every {who} adds its own noise, enough that the {split.honest} outside any coalition of up to "
        f"{split.collusion} (--collusion) carry the guarantee; with all {n} honest the measurements' "
        f"noise is x{split.accuracy_cost():.2f} the planned standard deviation, and each selection's "
        f"x{math.sqrt(split.selection_parties):.2f} ({split.selection_parties} {whose} Gumbels"
        + ("; the same whatever the number of sites)" if who != "party" else ")")
    )


def check_mpc_args(args: argparse.Namespace, silos: list, option: str) -> None:
    """The options of ``add_mpc_args`` agree with each other and with the ``silos`` files (given as
    ``option``); ``InputError`` naming the first that does not."""
    from ..common import InputError, require_mpc

    servers, superlink = getattr(args, "servers", None), getattr(args, "superlink", None)
    if not args.mpc:
        if args.federation or args.cert or args.key or args.parties or args.collusion is not None or servers:
            raise InputError("--federation, --cert, --key, --parties, --servers and --collusion belong to --mpc")
        if superlink:
            raise InputError("--superlink belongs to --mpc with --federation (a federation file that lists the sites)")
        return
    require_mpc("--mpc")  # before any file is read or written
    if servers_layout(args):
        _check_servers_args(args, silos, option)
        return
    if superlink:
        raise InputError("--superlink goes with --federation (a federation file that lists the sites)")
    if args.federation:
        if len(silos) != 1:
            raise InputError(
                f"with --federation, give only this host's {option}; the others join with `privsyn-fed mpc-party`"
            )
        if args.parties and args.parties != federation_parties(args):
            raise InputError(
                f"--parties {args.parties}, but {args.federation} has {federation_parties(args)} silo parties"
            )
    elif args.cert or args.key or args.listen:
        raise InputError("--cert, --key and --listen go with --federation (a release across machines)")
    elif args.parties and args.parties != len(silos):
        raise InputError(
            f"--parties {args.parties} but {len(silos)} {option} files; on one machine each "
            f"{option} is one party, so leave --parties out"
        )
    if not 0 < args.mpc_timeout < float("inf"):
        raise InputError(f"--mpc-timeout must be a positive number of seconds, not {args.mpc_timeout:g}")
    n = federation_parties(args) or len(silos)
    if n < 2:
        raise InputError(f"--mpc needs at least two silo parties, not {n} (one {option} per party on this machine)")
    if args.collusion is not None and not 1 <= args.collusion < n:
        raise InputError(
            f"--collusion {args.collusion}: with {n} parties the threshold lies in 1..{n - 1} (every party "
            "knows its own noise and sees the release, and one party's noise must stay outside the coalition)"
        )


def _check_servers_args(args: argparse.Namespace, silos: list, option: str) -> None:
    """The options of a release over sites and compute servers agree with each other."""
    from ..common import InputError

    if args.federation:
        if args.servers is not None:
            raise InputError(f"--servers: {args.federation} names the compute servers (its members)")
        if silos:
            raise InputError(
                f"{args.federation} lists sites: party 0 is a compute server and reads no {option}; each site "
                "joins with `privsyn-fed site run`"
            )
    elif args.cert or args.key or args.listen:
        raise InputError("--cert, --key and --listen go with --federation (a release across machines)")
    elif not silos:
        raise InputError(f"--servers runs one site per {option} on this machine: give at least one {option}")
    if getattr(args, "superlink", None) and not args.federation:
        raise InputError("--superlink goes with --federation (a federation file that lists the sites)")
    if getattr(args, "superlink", None):
        from ..common import require_agent

        require_agent("--superlink")
    if args.parties:
        raise InputError("--parties counts silo parties; with sites and servers leave it out")
    n = mpc_parties(args, len(silos))
    if n < 2:
        raise InputError(f"--servers {n}: at least two compute servers hold the shares")
    if args.collusion is not None and not 1 <= args.collusion < n:
        raise InputError(
            f"--collusion {args.collusion}: with {n} compute servers the threshold lies in 1..{n - 1} (one "
            "server's noise must stay outside the coalition)"
        )
    if not 0 < args.mpc_timeout < float("inf"):
        raise InputError(f"--mpc-timeout must be a positive number of seconds, not {args.mpc_timeout:g}")
    for option, value in (("--site-wait", args.site_wait), ("--approval-wait", args.approval_wait)):
        if not 0 < value < float("inf"):
            raise InputError(f"{option} must be a positive number of seconds, not {value:g}")


def coordinator_options(args: argparse.Namespace) -> dict:
    """What ``add_mpc_args``' options tell ``mpc.launch.coordinator``: the federation and this member's
    credentials, the parties, the collusion threshold and the timeout."""
    return {
        "federation": args.federation,
        "cert": args.cert,
        "key": args.key,
        "listen": args.listen,
        "parties": args.parties,
        "collusion": args.collusion,
        "timeout_s": args.mpc_timeout,
    }
