"""Process entry points: a silo party that follows party 0, and the dealer."""

from __future__ import annotations

import math
import sys

from ..common import InputError, MPCError, first_line
from . import world


def party_main(
    rank: int,
    parties: int,
    rendezvous: str,
    schema_path: str,
    silo_path: str,
    timeout_s: float,
    seed: int | None = None,
) -> int:
    """Load this party's silo, print ``ready``, join, follow party 0 until ``stop``. ``seed``
    makes this party's noise seeded (NOT private; party 0 must be seeded too).

    An input error is raised with its value-free message (``InputError.shareable``): on one
    machine party 0 relays it, and a cell value of this silo must not reach another party.
    """
    from ..schema import Schema
    from ..silo import Silo

    if not 1 <= rank < parties:
        raise InputError(f"--rank must lie in 1..{parties - 1} (party 0 runs `privsyn-fed synth --mpc`)")
    _check_timeout(timeout_s)
    try:
        own = Silo.load(silo_path, Schema.load(schema_path))
    except InputError as exc:
        raise InputError(exc.shareable()) from None
    print("ready", flush=True)
    world.join(world.Membership(rendezvous, parties, rank, timeout_s))
    from .aggregator import serve  # loads torch, which the wait for party 0 (in join) does without

    try:
        serve(own, seed=seed)
    except MPCError as exc:
        print(f"privsyn-fed mpc-party {rank}: error: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        print(
            f"privsyn-fed mpc-party {rank}: error: lost contact with the other parties ({first_line(exc)}); stopping",
            file=sys.stderr,
        )
        return 1
    finally:
        world.leave()
    return 0


def dealer_main(parties: int, rendezvous: str, timeout_s: float) -> int:
    """Reach party 0, join as rank ``parties`` and deal until party 0 says ``terminate``."""
    _check_timeout(timeout_s)
    m = world.Membership(rendezvous, parties, parties, timeout_s)
    world.reach_party0(m)
    world.configure(m)
    from .dealer import run_dealer

    try:
        run_dealer()  # joins (crypten.init) first, then serves until party 0 says stop
    except RuntimeError as exc:
        raise world.cannot_join(m, first_line(exc)) from None
    return 0


def _check_timeout(seconds: float) -> None:
    if not (seconds > 0 and math.isfinite(seconds)):
        raise InputError(f"--timeout must be a positive number of seconds, not {seconds:g}")
