"""Process entry points: a silo party that follows party 0, and the dealer."""

from __future__ import annotations

import math
import sys

from ..common import InputError, MPCError, first_line, terminal_text
from . import world


def party_main(
    rank: int | None,
    parties: int | None,
    access: world.Access,
    schema_path: str | None,
    silo_path: str,
    timeout_s: float,
    seed: int | None = None,
    *,
    policy_path: str | None = None,
    ledger_path: str | None = None,
    force: bool = False,
    checks: bool = False,
    silo_name: str | None = None,
) -> int:
    """Check this member's federation file and certificate (whose role gives the rank; ``rank``
    and ``parties``, if given, must agree), its schema, policy (``policy_path``, ``--policy``) and
    ledger copy's place (``ledger_path``, ``--ledger``; ``force`` replaces it), print ``ready``,
    join, and follow party 0 until ``stop`` (``party_session``): the silo is read only once the
    release's request passed this party's policy and its budget was reserved. ``seed`` makes this
    party's noise seeded (NOT private; party 0 must be seeded too); ``checks`` also answers exact
    sums outside a release (``--non-private-checks``: tests and demonstrations only). ``silo_name``
    (``--silo NAME=TABLE``, else the file's name) is the silo's value in a release's silo column.

    An input error is raised with its value-free message (``InputError.shareable``): party 0
    relays it, and a cell value of this silo must not reach another party. A refused release
    exits with status 2 and the reason on one line. Without ``schema_path`` (``--draft``) the party
    drafts a schema with party 0 (``mpc.draft``): its policy must then accept ``schema-draft``.
    """
    from pathlib import Path

    from ..common import check_input, named_files
    from ..schema import Schema
    from .aggregator import schema_fingerprint
    from .party_store import check_ledger_target, default_ledger_folder
    from .policy import check_store_agrees, load_policy

    _check_timeout(timeout_s)
    m = world.membership(access, rank=rank, parties=parties, timeout_s=timeout_s)
    if not 1 <= m.rank < m.parties:
        raise InputError(
            f"--cert {access.cert}: names {m.federation.role(m.rank)}; `mpc-party` runs party-1 .. "
            f"party-{m.parties - 1} (party 0 runs `privsyn-fed synth --mpc`, the dealer `mpc-dealer`)"
        )
    rank = m.rank
    schema = None
    try:
        if schema_path is not None:
            schema = Schema.load(schema_path)
            m.federation.check_schema(schema_fingerprint(schema), schema_path)
    except InputError as exc:
        raise InputError(exc.shareable()) from None
    for item in named_files([("--silo", silo_path)]):  # not opened: read only after the policy round
        check_input(item, "silo")
    policy = load_policy(policy_path) if policy_path else None
    if policy is not None:
        check_store_agrees(policy)
    ledger = Path(ledger_path) if ledger_path else None
    check_ledger_target(ledger, silo_path, force)
    print("ready", flush=True)  # its arguments are checked; its silo is read once a release is accepted
    if policy is not None and schema is None and "schema-draft" not in policy.methods:
        raise InputError(f"{policy.source}: field 'methods' does not list schema-draft, so --draft would refuse it")
    what = f"schema sha256 {schema_fingerprint(schema)}" if schema is not None else "drafting a schema (--draft)"
    print(
        f"party {rank}: {what}; policy {policy.source if policy else 'none'}; "
        f"ledger copies {ledger or str(default_ledger_folder(silo_path)) + '/'}"
        + ("; NON-PRIVATE CHECKS: exact sums answered outside a release" if checks else ""),
        flush=True,
    )
    world.join(m)
    from .party_session import PartySession  # loads torch, which the wait in join does without

    session = PartySession(
        schema, silo_path, rank, m.parties, seed=seed, policy=policy, ledger=ledger, checks=checks, silo_name=silo_name
    )
    return _serve(session, f"mpc-party {rank}", "parties")


def _serve(session, who: str, others: str) -> int:
    """Serve ``session`` until party 0 stops it; its exit status, with one line on stderr for a
    refused release (2), an error (1) or lost contact (1). Leaves the MPC world in any case."""
    from .party_session import PartyRefusal, serve

    try:
        return serve(session)
    except PartyRefusal as exc:
        print(f"privsyn-fed {who}: refused the release: {terminal_text(exc)}", file=sys.stderr)
        return 2
    except MPCError as exc:
        print(f"privsyn-fed {who}: error: {terminal_text(exc)}", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        print(
            f"privsyn-fed {who}: error: lost contact with the other {others} ({first_line(exc)}); "
            f"stopping ({session.note})",
            file=sys.stderr,
        )
        return 1
    finally:
        world.leave()


def dealer_main(parties: int | None, access: world.Access, timeout_s: float) -> int:
    """Join as the dealer (the certificate must name ``dealer``) and deal until party 0 says
    ``terminate``; 1 if a party stops first."""
    _check_timeout(timeout_s)
    m = world.membership(access, parties=parties, timeout_s=timeout_s)
    if m.rank != m.parties:
        raise InputError(f"--cert {access.cert}: names {m.federation.role(m.rank)}; `mpc-dealer` runs the dealer")
    world.join(m)
    from .dealer import run_dealer

    try:
        run_dealer()  # seeds the parties' generators, then serves until party 0 says stop
    except MPCError:
        raise
    except RuntimeError as exc:
        print(
            f"privsyn-fed mpc-dealer: error: lost contact with the parties ({first_line(exc)}); stopping",
            file=sys.stderr,
        )
        return 1
    finally:
        world.leave()
    return 0


def _check_timeout(seconds: float) -> None:
    if not (seconds > 0 and math.isfinite(seconds)):
        raise InputError(f"--mpc-timeout must be a positive number of seconds, not {seconds:g}")


def server_main(
    access: world.Access,
    schema_path: str,
    timeout_s: float,
    seed: int | None = None,
    *,
    policy_path: str | None = None,
    ledgers: str | None = None,
) -> int:
    """Join a federation of sites and servers as compute server ``party-j`` (``j >= 1``): check the
    federation file (it must list sites), the certificate, the schema and the policy, print
    ``ready``, join, and follow party 0 (``server_session``) until it stops. The server holds no silo:
    it opens only the shares sites sealed for it, and only inside noisy sums."""
    from pathlib import Path

    from ..schema import Schema
    from .aggregator import schema_fingerprint
    from .policy import load_policy

    _check_timeout(timeout_s)
    m = world.membership(access, timeout_s=timeout_s)
    if m.federation.sites is None:
        raise InputError(
            f"--federation {access.federation}: lists no sites; a compute server serves a federation of sites "
            "(its file's 'sites'), a silo party runs `privsyn-fed mpc-party`"
        )
    if not 1 <= m.rank < m.parties:
        raise InputError(
            f"--cert {access.cert}: names {m.federation.role(m.rank)}; `mpc-server` runs party-1 .. "
            f"party-{m.parties - 1} (party 0 runs `privsyn-fed synth --mpc`, the dealer `mpc-dealer`)"
        )
    schema = Schema.load(schema_path)
    m.federation.check_schema(schema_fingerprint(schema), schema_path)
    policy = load_policy(policy_path) if policy_path else None
    folder = Path(ledgers) if ledgers else Path(f"server-{m.rank}.ledgers")
    print("ready", flush=True)
    print(f"server {m.rank}: schema sha256 {schema_fingerprint(schema)}; ledger copies {folder}/", flush=True)
    world.join(m)
    from .server_session import ServerSession

    session = ServerSession(
        schema,
        m.rank,
        m.parties,
        credentials=(access.cert, access.key),
        ca_pem=m.federation.ca_pem,
        federation=m.federation.name,
        ledgers=folder,
        seed=seed,
        policy=policy,
    )
    return _serve(session, f"mpc-server {m.rank}", "servers")
