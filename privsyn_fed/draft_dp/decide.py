"""What a DP draft decides for a column from its noisy profile (``draft_dp``, 1.): post-processing of
released counts only, so nothing here is charged.

* ``missing``: the noisy missing count exceeds the seen level ``SEEN_SIGMAS sigma + 1/2`` (as every
  other profile count must to say such cells exist), not merely zero.
* numbers or text, whole numbers or not: the non-number count, and each count of numbers with 1..6 or
  more decimal places (``cells``), against the same level; ``decimals`` from those counts.
* a **code**: a column of whole numbers whose noisy distinct count is at most ``--categorical-max``
  is drafted as a categorical column (its thresholded histogram of values, 3.), not as numeric.
* an **identifier** (``schema.identifiers``, the plain draft's rule) from the noisy present count
  (rows - missing), the noisy capped distinct count, and for whole numbers the span of the bounds
  histogram's intervals that reach ``T``: left out, unless ``--include`` names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..schema import identifier_note, identifier_reason
from .cells import KINDS, decimals_from


@dataclass(frozen=True)
class ColumnFacts:
    """A column's noisy profile counts (``cells.PROFILE_CELLS``) and the seen level they are read at."""

    rows: int
    missing: int
    non_numbers: int
    decimals: tuple[int, ...]
    distinct: int
    seen: float

    @classmethod
    def of(cls, cells: Sequence[int] | np.ndarray, rows: int, seen: float) -> "ColumnFacts":
        """From the column's ``len(KINDS) + 1`` noisy profile cells."""
        v = [int(c) for c in cells]
        assert len(v) == len(KINDS) + 1
        return cls(rows, v[0], v[1], tuple(v[2:-1]), v[-1], seen)

    @property
    def has_missing(self) -> bool:
        """Missing cells clearly exist: the noisy count exceeds the seen level."""
        return self.missing > self.seen

    @property
    def numbers_only(self) -> bool:
        """No present cell clearly holds anything but a number."""
        return self.non_numbers <= self.seen

    @property
    def whole(self) -> bool:
        """No count of numbers with decimal places exceeds the seen level."""
        return all(c <= self.seen for c in self.decimals)

    @property
    def decimal_places(self) -> int | None:
        """The ``"decimals"`` of a column that is not whole (``cells.decimals_from``)."""
        return None if self.whole else decimals_from(self.decimals, self.seen)

    @property
    def present(self) -> float:
        """The noisy present cells: rows - missing (neither below zero)."""
        return float(max(0, self.rows - max(0, self.missing)))

    @property
    def numbers(self) -> float:
        """The noisy numbers: rows - missing - non-numbers (variance at most ``3 sigma^2``)."""
        return float(max(0, self.rows - max(0, self.missing) - max(0, self.non_numbers)))

    def said(self) -> str:
        """The noisy counts, as the notes show them."""
        non_integers = sum(self.decimals)
        return (
            f"noisy counts: {_shown(self.rows)} rows, {_shown(self.missing)} missing, {_shown(self.non_numbers)} "
            f"non-number, {_shown(non_integers)} non-integer, {_shown(self.distinct)} distinct"
        )


def is_code(facts: ColumnFacts, categorical_max: int) -> bool:
    """A column of whole numbers with at most ``categorical_max`` (noisy) distinct values: drafted
    from its thresholded histogram of values, as a categorical column."""
    return facts.numbers_only and facts.whole and facts.distinct <= categorical_max


def identifier_line(
    name: str,
    facts: ColumnFacts,
    include: Sequence[str],
    *,
    text: bool,
    lo: float | None = None,
    hi: float | None = None,
) -> str | None:
    """The note's line when the shared identifier rule leaves column ``name`` out (from its noisy
    counts and, for whole numbers, the span ``lo``..``hi`` its bounds histogram gives), else None;
    never for a column ``include`` names."""
    if name in include:
        return None
    reason = identifier_reason(facts.present, max(0, facts.distinct), text=text, whole=facts.whole, lo=lo, hi=hi)
    return identifier_note(name, reason, dp=True) if reason else None


def numeric_entry(
    name: str,
    lower: float,
    upper: float,
    facts: ColumnFacts,
    bins: int,
    tokens: Sequence[str],
) -> dict[str, Any]:
    """A numeric schema entry over exactly ``lower``..``upper`` (edges of the public grid, or the whole
    numbers inside them: no rounding beyond the grid), with ``integer``, ``decimals`` and ``missing``
    as the noisy profile decides."""
    spec: dict[str, Any] = {"name": name, "type": "numeric", "lower": lower, "upper": upper, "bins": bins}
    if facts.whole:
        spec["integer"] = True
    elif facts.decimal_places is not None:
        spec["decimals"] = facts.decimal_places
    if facts.has_missing:
        spec["missing"] = True
        if tokens:
            spec["missing_values"] = list(tokens)
    return spec


def _shown(v: float) -> str:
    """A noisy count as text: never below zero (a negative noisy count says "none")."""
    return f"{max(0, round(v)):,}"
