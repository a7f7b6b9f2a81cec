"""What one party contributes to a step over MPC: its answer to a declared query as ring integers
(reals on the ``2^-REAL_BITS`` grid), its own noisy local choice, an opened sum decoded, a noise scale
in grid units, and its traffic. Party 0 (``aggregator``), the other parties (``party_session``) and the
compute servers (``servers``, ``server_session``) share them."""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ..aggregation import check_declared
from ..common import MPCError
from ..noise import OpenDPNoise
from ..silo import Query, Silo, answer
from . import world
from .grid import REAL_BITS, to_ring


def traffic_row(channel: world.Channel) -> list[float]:
    """This party's traffic: CrypTen's rounds and bytes, the command channel's bytes and broadcasts."""
    t = world.traffic()
    return [float(t["rounds"]), float(t["bytes"]), float(channel.bytes), float(channel.broadcasts)]


def one_query(queries: Mapping[str, Query], label: str) -> Query:
    """The one declared query every silo is sent (over MPC all parties answer the same)."""
    distinct = {id(q) for q in queries.values()}
    if len(distinct) != 1:
        raise MPCError(f"{label}: over MPC every silo is sent the same query")
    return check_declared(next(iter(queries.values())), label)


def ring_answer(q, own: Silo, me: int, ranks: list[int]) -> np.ndarray | None:
    """This party's answer as ring integers (reals on the ``2^-REAL_BITS`` grid), if it contributes."""
    if me not in ranks:
        return None
    return to_ring(q, answer(q, own, me))


def local_choice(q, own: Silo, me: int, ranks: list[int], scale: float) -> float:
    """This party's own noisy argmax of its scores at ``scale`` (-1 when it does not take part)."""
    if me not in ranks:
        return -1.0
    return float(OpenDPNoise().noisy_argmax(np.asarray(q(own), dtype=float), scale))


def decode(q, opened: np.ndarray | None) -> np.ndarray | None:
    """An opened sum as numbers: reals back from the ``2^-REAL_BITS`` grid."""
    if opened is None or not q.real:
        return opened
    return np.ldexp(opened.astype(float), -REAL_BITS)


def grid_sigma(q, sigma: float) -> float:
    """A noise scale in grid units: ``sigma 2^REAL_BITS`` for real answers."""
    return math.ldexp(sigma, REAL_BITS) if q.real else sigma
