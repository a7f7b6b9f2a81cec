"""Process entry points: a silo party that follows party 0, and the dealer."""
from __future__ import annotations

import sys

from ..errors import InputError
from . import world


def party_main(rank: int, parties: int, rendezvous: str, schema_path: str, silo_path: str,
               timeout_s: float) -> int:
    """Load this party's silo, print ``ready``, join, follow party 0 until ``stop``."""
    from ..schema import Schema
    from ..silo import Silo
    from .aggregator import serve

    if not 1 <= rank < parties:
        raise InputError(f"--rank must lie in 1..{parties - 1} (party 0 runs `privsyn-fed synth --mpc`)")
    own = Silo.from_csv(silo_path, Schema.load(schema_path))
    print("ready", flush=True)
    world.join(world.Membership(rendezvous, parties, rank, timeout_s))
    try:
        serve(own)
    except world.MPCError as exc:
        print(f"privsyn-fed mpc-party {rank}: error: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        print(f"privsyn-fed mpc-party {rank}: error: lost contact with the other parties "
              f"({' '.join(str(exc).split())[:300]}); stopping", file=sys.stderr)
        return 1
    finally:
        world.leave()
    return 0


def dealer_main(parties: int, rendezvous: str, timeout_s: float, seed: int | None) -> int:
    from .dealer import run_dealer

    world.configure(world.Membership(rendezvous, parties, parties, timeout_s))
    run_dealer(seed)
    return 0
