"""Point masses (``"atoms"``) of a numeric column under DP (``draft_dp``, 2.): the values that one
record holds at most once, counted in a thresholded histogram.

Locally, a numeric column's ``rho_col`` is split: ``1 - ATOM_RHO_SHARE`` to its bounds histogram,
``ATOM_RHO_SHARE`` to a thresholded histogram of its numbers' values (cells of the same number read
alike, "5" and "5.0", are one value): every value's count gets ``N_Z(0, s_a^2)``, ``s_a = 1 /
sqrt(2 ATOM_RHO_SHARE rho_col)`` (sensitivity 1: a record's number is one value), and the values
whose noisy count reaches the integer threshold ``tau_a`` (``threshold_for(s_a, delta_target)``, its
``delta'`` as for categories, 3.) are released with their noisy counts. The domain is the rows' own
values, hence the ``delta'``; a column gets either this histogram or a categories' one, never both,
so the deltas add up as planned. It is released after the bounds, only for a column whose bounds
were found, that is kept, and whose noisy distinct count is at most ``DISTINCT_GUARD``
(``releases_atoms``; post-processing decides all three). The last keeps the values counted in
bounded memory, as for categories: a column with more distinct values than the profile's cap passes
it with probability below ``Phi(-CAP_SIGMAS)``, and is then counted again in full. A column with more
distinct values (a measure of a large table) gets its atoms from the bounds histogram alone, as over
MPC; the values that pass, lie inside the
bounds, fit the column's decimal places and hold at least ``ATOM_SHARE`` of its noisy numbers are
its atoms (the ``MAX_ATOMS`` largest). Over MPC no such histogram is released (each silo would need
its own, as for categories): atoms come from the bounds histogram alone (``bounds.grid_atoms``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..schema import ATOM_SHARE, MAX_ATOMS, ColumnProfile

#: Share of a numeric column's rho that its atoms' thresholded histogram gets (not over MPC).
ATOM_RHO_SHARE = 0.25


def releases_atoms(plan: Any, distinct: float) -> bool:
    """Whether a kept numeric column whose bounds were found gets the atoms' histogram: the plan has
    one (not over MPC) and the column's noisy distinct count is at most ``DISTINCT_GUARD``."""
    from . import DISTINCT_GUARD

    return plan.sigma_atoms is not None and distinct <= DISTINCT_GUARD


def number_counts(p: ColumnProfile) -> tuple[list[float], np.ndarray]:
    """The column's finite numbers and how many present cells hold each (texts of one number merged)."""
    merged: dict[float, int] = {}
    for text, n in p.counts.items():
        try:
            x = float(text)
        except ValueError:
            continue
        if math.isfinite(x):
            x = x + 0.0  # -0.0 and 0.0 are one value
            merged[x] = merged.get(x, 0) + int(n)
    values = sorted(merged)
    return values, np.array([merged[v] for v in values], dtype=np.int64)


def choose_atoms(listed: dict[float, int], numbers: float, spec: dict[str, Any]) -> list[float]:
    """The atoms among the released values ``listed`` (value: noisy count): inside the bounds of
    ``spec``, of its decimal places (whole for an integer column), holding at least ``ATOM_SHARE`` of
    the ``numbers``; the ``MAX_ATOMS`` largest, sorted."""
    places = 0 if spec.get("integer") else spec.get("decimals")
    held = []
    for v, c in listed.items():
        fits = places is None or round(v, places) == v
        if spec["lower"] <= v <= spec["upper"] and fits and c >= ATOM_SHARE * numbers:
            held.append((c, v))
    return sorted(v for _, v in sorted(held, reverse=True)[:MAX_ATOMS])
