"""What kind each cell of a column is, for a DP draft's profile (``draft_dp``, 1.): missing, present
but not a finite number, or a number with ``k`` decimal places.

A number has ``k`` decimal places when ``k`` is the least of ``0..6`` with ``round(x 10^k) / 10^k == x``
in floating point (the float nearest a decimal of ``k`` places: 0.1 has 1, 2.25 has 2, 3 has 0), and
more than 6 otherwise. Each cell is of exactly one kind, so a record adds one to at most one of a
column's ``KINDS`` counts (a whole number, 0 places, to none): the profile's cells per column are those
counts and the capped distinct count, and its L2 sensitivity stays ``sqrt(1 + 2 d)``. The cells are read
as ``schema.draft.ColumnProfile`` reads them (the parser of the numeric encoder).
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from ..schema import MISSING_TOKENS, column_cells

#: The most decimal places the profile tells apart; more fall in one cell.
MAX_DECIMALS = 6
#: A column's exclusive counts in the profile: missing, non-number, then numbers of 1, ..., 6 decimal
#: places and of more than 6 (whole numbers are in none).
KINDS = ("missing", "non_number", *(f"decimals_{k}" for k in range(1, MAX_DECIMALS + 1)), "decimals_more")
#: The profile's cells per column, as the ledger records them (``details.draft.profile_cells``).
PROFILE_CELLS = (*KINDS, "distinct")


def decimal_places(x: np.ndarray) -> np.ndarray:
    """Per finite number, its decimal places (0..``MAX_DECIMALS``), or ``MAX_DECIMALS + 1`` for more."""
    x = np.asarray(x, dtype=float)
    out = np.full(len(x), MAX_DECIMALS + 1, dtype=np.int64)
    todo = np.ones(len(x), dtype=bool)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(MAX_DECIMALS + 1):
            scale = 10.0**k
            hit = todo & (np.round(x * scale) / scale == x)
            out[hit] = k
            todo &= ~hit
    return out


def cell_kinds(series: pd.Series, tokens: Sequence[str]) -> np.ndarray:
    """The counts of ``KINDS`` among the cells of ``series`` (``tokens``: every missing-value token)."""
    cells = column_cells(series)
    if cells.dtype.kind == "f":
        miss = np.isnan(cells)
        x = cells
    else:
        miss = np.isin(cells, list(tokens))
        x = pd.to_numeric(pd.Series(np.where(miss, "nan", cells)), errors="coerce").to_numpy(float)
    present = x[~miss]
    finite = np.isfinite(present)
    places = np.bincount(decimal_places(present[finite]), minlength=MAX_DECIMALS + 2)
    return np.array([int(miss.sum()), int((~finite).sum()), *places[1:]], dtype=np.int64)


class CellKinds:
    """The counts of ``KINDS`` per column over the chunks that pass through ``watch``."""

    def __init__(self, names: Sequence[str], missing_values: Sequence[str] = ()):
        self.names = list(names)
        self.tokens = tuple(MISSING_TOKENS) + tuple(missing_values)
        self.counts = {n: np.zeros(len(KINDS), dtype=np.int64) for n in self.names}

    def watch(self, frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        """Yield ``frames`` unchanged, counting each one's cells."""
        for frame in frames:
            for name in self.names:
                self.counts[name] += cell_kinds(frame[name], self.tokens)
            yield frame


def decimals_from(noisy: Sequence[float], seen: float) -> int | None:
    """A non-integer column's ``"decimals"`` from its noisy counts of numbers with 1..6 and more
    decimal places (post-processing): the largest ``k`` whose count exceeds ``seen``, None when
    the count of more than 6 does (or none does)."""
    counts = list(noisy)
    if counts[-1] > seen:
        return None
    clear = [k for k in range(1, MAX_DECIMALS + 1) if counts[k - 1] > seen]
    return max(clear) if clear else None
