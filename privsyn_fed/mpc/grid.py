"""The fixed-point grids of values on shares, and the ledger's words for who draws what; no torch.

* Counts are shared as integers; real answers (Fed-TDA's second moments) on the grid
  ``2^-REAL_BITS``, so a record moves a silo's rounded answer by its exact change plus at most one
  grid step per cell (``grid_rounding_l2``).
* DistAIM's scores are AIM's times ``2^SCORE_BITS`` (``secure``).
"""

from __future__ import annotations

import math

import numpy as np

#: Fractional bits of real answers (Fed-TDA's second moments) on shares.
REAL_BITS = 16
#: Fractional bits of the integer scores (``u_r`` is AIM's score times ``2^SCORE_BITS``).
SCORE_BITS = 16

#: The ledger's sampler of a choice each silo's own process makes.
LOCAL_SAMPLER = "each silo's own OpenDP noisy max"

COLLUSION = (
    "additive secret sharing among the n parties: any coalition of up to n-1 parties sees only "
    "uniformly random shares; every party adds its own DP noise, so the noise of the n-t parties "
    "outside a coalition of up to t carries the guarantee; the dealer (a separate process that sees "
    "no data and deals no noise) must collude with no party, or the shares could be unmasked"
)

SERVERS_COLLUSION = (
    "each site splits its answers into additive shares, one per compute server, each encrypted end to "
    "end for its server: any coalition of up to S-1 servers sees only uniformly random shares; every "
    "server adds its own DP noise, so the noise of the S-t servers outside a coalition of up to t "
    "carries the guarantee; the dealer (a separate process that sees no data and deals no noise) must "
    "collude with no server, or the shares could be unmasked"
)


def grid_rounding_l2(q, schema) -> float:
    """Extra L2 sensitivity from rounding a real answer to the grid ``2^-REAL_BITS``: a record moves
    one silo's rounded answer by its exact change plus at most one grid step per cell (0 for counts)."""
    return math.sqrt(q.size(schema)) * math.ldexp(1.0, -REAL_BITS) if q.real else 0.0


def to_ring(q, value) -> np.ndarray:
    """An answer as ring integers: counts as they are, real answers on the ``2^-REAL_BITS`` grid."""
    value = np.asarray(value)
    return np.rint(np.ldexp(value.astype(float), REAL_BITS)).astype(np.int64) if q.real else value.astype(np.int64)
