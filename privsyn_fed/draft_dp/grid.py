"""The public grid of a DP draft's bounds histograms (``draft_dp``, 2.) and its threshold.

The grid's edges are 0 and ``+-m 10^k`` for the mantissas ``m = 1.0, 1.1, ..., 9.9`` (``MANTISSA_STEP``)
and ``k = -3..15``, up to ``MAX_DRAFT_BOUND`` (9e15): 1,701 positive edges, 3,403 in all, so 3,404
intervals ``(-inf, g_0), [g_0, g_1), ..., [g_{m-1}, inf)``. An interval spans at most a tenth of its
lower edge (a hundredth at the top of a decade), so bounds fit the values to two significant digits
(4..107 gives 4..110). Each edge is the float nearest its decimal (``float("1.1e-3")``), so bounds are
written as short decimals. The grid is public; ``T`` grows with its number of intervals
(``bounds_threshold``). Drafts before this grid used the mantissas 1..9 (``COARSE_GRID``, 344
intervals); ``audit`` accepts both by the grid a ledger records.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..schema import MAX_DRAFT_BOUND

#: The probability that any empty interval of the bounds histogram passes its threshold (one column).
BOUNDS_FALSE_RATE = 1e-3
#: The step between a decade's mantissas (1.0, 1.1, ..., 9.9).
MANTISSA_STEP = 0.1


def bounds_grid(step: float = MANTISSA_STEP) -> np.ndarray:
    """The sorted public edges: 0 and ``+-m 10^k`` for ``m = 1, 1 + step, ..., < 10`` and ``k = -3..15``,
    at most ``MAX_DRAFT_BOUND``. ``step`` is 0.1 or 1 (the coarse grid of earlier drafts)."""
    per = round(1 / step)  # mantissas per unit: m = j / per for j = per .. 10 per - 1
    digits = len(str(per)) - 1
    pos = sorted({float(f"{j}e{k - digits}") for k in range(-3, 16) for j in range(per, 10 * per)})
    pos = [p for p in pos if p <= MAX_DRAFT_BOUND]
    return np.array([-p for p in reversed(pos)] + [0.0] + pos)


BOUNDS_GRID = bounds_grid()
COARSE_GRID = bounds_grid(1.0)


def grid_record(grid: np.ndarray = BOUNDS_GRID) -> dict[str, Any]:
    """The grid as the ledger records it (``details.draft.bounds_grid``)."""
    out: dict[str, Any] = {"edges": len(grid), "lowest": float(grid[0]), "highest": float(grid[-1])}
    if len(grid) == len(BOUNDS_GRID):
        out["mantissa_step"] = MANTISSA_STEP
    return out


def interval_edges(i: int) -> tuple[float, float]:
    """Lower and upper edge of interval ``i`` of ``BOUNDS_GRID`` (the open ends at +-MAX_DRAFT_BOUND)."""
    lo = float(BOUNDS_GRID[i - 1]) if i > 0 else -MAX_DRAFT_BOUND
    hi = float(BOUNDS_GRID[i]) if i < len(BOUNDS_GRID) else MAX_DRAFT_BOUND
    return lo, hi


def coarse_edges(i: int) -> tuple[float, float]:
    """Lower and upper edge of interval ``i`` of ``COARSE_GRID``."""
    lo = float(COARSE_GRID[i - 1]) if i > 0 else -MAX_DRAFT_BOUND
    hi = float(COARSE_GRID[i]) if i < len(COARSE_GRID) else MAX_DRAFT_BOUND
    return lo, hi


def coarse_index() -> np.ndarray:
    """For each interval of ``BOUNDS_GRID``, the interval of ``COARSE_GRID`` that holds it: every
    coarse edge is a grid edge, so each coarse interval is the union of at most ``PER_COARSE`` of them."""
    lower = np.concatenate([[-np.inf], BOUNDS_GRID])
    return np.searchsorted(COARSE_GRID, lower, side="right")


COARSE_INDEX = coarse_index()
#: The most intervals of ``BOUNDS_GRID`` in one interval of ``COARSE_GRID``.
PER_COARSE = int(np.bincount(COARSE_INDEX).max())


def bounds_threshold(sigma: float, cells: int | None = None) -> int:
    """``T = 1 + ceil(z sigma)``, the least with ``cells P(N(0, sigma^2) >= T - 1) <= BOUNDS_FALSE_RATE``
    over the grid's ``cells`` intervals (``BOUNDS_GRID``'s unless given): a noisy count of an empty
    interval reaches ``T`` with probability at most that (for discrete Gaussian noise, ``P(Z >= T) <=
    P(N >= T - 1)``; for a sum of ``k`` of them at ``sqrt(k)`` times their sigma, likewise)."""
    from scipy.special import erfcinv

    cells = len(BOUNDS_GRID) + 1 if cells is None else cells

    def passes(t: int) -> bool:  # an empty interval reaches t with probability at most the rate
        return cells * 0.5 * math.erfc((t - 1) / (sigma * math.sqrt(2.0))) <= BOUNDS_FALSE_RATE

    t = 1 + math.ceil(sigma * math.sqrt(2.0) * float(erfcinv(2.0 * BOUNDS_FALSE_RATE / cells)))
    while not passes(t):
        t += 1
    while t > 1 and passes(t - 1):
        t -= 1
    return t
