"""A numeric column's point masses (``"atoms"``) and written precision (``"decimals"``).

``"atoms": [a_1, ..., a_m]`` lists public values that are cells of their own: a value equal to an
atom (after clipping to the bounds, and rounding for an integer column) is counted in the atom's
cell, not in its bin, and that cell decodes to exactly the atom. The cells of a column are its
``n_bins`` bins, then one per atom in ascending order, then the missing cell.

``"decimals": k`` writes every synthetic value rounded to ``k`` places and kept on the grid
``10^-k Z`` inside the bounds, that is in ``[grid_lower, grid_upper]`` with ``grid_lower`` the
smallest multiple of ``10^-k`` at or above ``lower`` and ``grid_upper`` the largest at or below
``upper`` (``grid_bounds``). Under a condition's range the grid is the one inside the range; a range
holding no ``k``-place number leaves its values as drawn.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..common import InputError

#: The most atoms one numeric column may declare.
MAX_ATOMS = 64
#: The most decimal places a numeric column may be written with (a double holds about 15-17 digits).
MAX_DECIMALS = 15


def _finite_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def parse_atoms(spec: dict, lower: float, upper: float, integer: bool, where: str) -> tuple[float, ...]:
    """A numeric column's ``"atoms"``, checked (finite numbers inside ``[lower, upper]``, none twice,
    whole numbers for an integer column, at most ``MAX_ATOMS``) and sorted; ``()`` when not given."""
    if "atoms" not in spec:
        return ()
    raw = spec["atoms"]
    if not isinstance(raw, list) or not all(_finite_number(v) for v in raw):
        raise InputError(f'{where}: "atoms" must be a list of finite numbers (values that are cells of their own)')
    if len(raw) > MAX_ATOMS:
        raise InputError(f'{where}: {len(raw)} "atoms" are more than the {MAX_ATOMS} a column may declare')
    for v in raw:
        if not lower <= v <= upper:
            raise InputError(f"{where}: atom {v!r} is not inside the bounds [{lower:g}, {upper:g}]")
        if integer and v != math.floor(v):
            raise InputError(f"{where}: the atoms of an integer column are whole numbers, not {v!r}")
    values = [float(v) for v in raw]
    if len(set(values)) != len(values):
        dup = next(v for v in raw if values.count(float(v)) > 1)
        raise InputError(f"{where}: atom {dup!r} is listed twice")
    return tuple(sorted(values))


def parse_decimals(
    spec: dict, lower: float, upper: float, integer: bool, atoms: tuple[float, ...], where: str
) -> int | None:
    """A numeric column's ``"decimals"``, checked: a whole number from 0 to ``MAX_DECIMALS`` (only 0 for
    an integer column), with some value of that precision inside the bounds and every atom of at most
    that precision; None when not given."""
    if "decimals" not in spec:
        return None
    k = spec["decimals"]
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_DECIMALS:
        raise InputError(f'{where}: "decimals" must be a whole number from 0 to {MAX_DECIMALS}, not {k!r}')
    if integer and k > 0:
        raise InputError(f'{where}: an integer column is written as whole numbers; drop "decimals" {k} (or give 0)')
    low, high = grid_bounds(lower, upper, k)
    if low > high:
        raise InputError(
            f'{where}: no number with {k} decimals lies inside [{lower:g}, {upper:g}]; give more "decimals"'
        )
    odd = next((a for a in atoms if round(a, k) != a), None)
    if odd is not None:
        raise InputError(f'{where}: atom {odd!r} has more than "decimals" {k} places; round it or give more "decimals"')
    return k


def grid_bounds(lower: float, upper: float, k: int) -> tuple[float, float]:
    """The smallest multiple of ``10^-k`` at or above ``lower`` and the largest at or below ``upper``
    (``lower > upper`` in the result: none lies between)."""
    step = 10.0**-k
    low, high = round(lower, k), round(upper, k)
    if low < lower:
        low = round(low + step, k)
    if high > upper:
        high = round(high - step, k)
    return low, high


def rounded(x: np.ndarray, k: int, lower: float, upper: float) -> np.ndarray:
    """``x`` rounded to ``k`` decimals (``round(x * 10^k) / 10^k``, ties to even: each result is the
    double nearest to a ``k``-place decimal, so it is written with at most ``k`` decimals) and clipped
    onto the grid inside ``[lower, upper]``; ``x`` unchanged where that grid is empty."""
    low, high = grid_bounds(lower, upper, k)
    if low > high:
        return x
    return np.clip(np.round(x, k), low, high)
