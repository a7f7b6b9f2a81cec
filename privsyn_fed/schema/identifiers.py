"""Columns that look like identifiers: one rule for the plain draft, the DP draft and a release.

A column is taken for an identifier (a row number, a person's id even when it repeats a few times
in a panel, a name or free text) when, over at least ``MIN_IDENTIFIER_ROWS`` present cells, its
distinct values number at least ``MIN_IDENTIFIER_DISTINCT`` and at least ``IDENTIFIER_SHARE`` of the
present cells, and

* it holds text (not every present value is a number), or
* its numbers are whole, spread thinly (under ``DENSE_SHARE`` of their range) and nearly all occur
  the same number of times ``k >= MIN_REPEATS`` (at least ``BALANCED_SHARE`` of them exactly ``k`` times,
  ``repeats``): a balanced panel's unit id, one row per unit and period, whatever its share
  (``Ecdat::Males``' ``nr``: 545 men, 8 rows each, over 13..12548), or a value constant within each
  unit that singles it out. A panel's period (dates, days of the year) also repeats once per unit,
  but as text or packed in its range, so neither is taken this way; only the plain draft counts
  this, or
* its numbers are all whole and fill at least ``DENSE_SHARE`` of the whole numbers between its
  lowest and highest value (``distinct >= DENSE_SHARE (hi - lo + 1)``): values drawn inside such a
  range are mostly real ids. Numbers that are not whole are measures, never identifiers; sparse
  whole numbers (random record numbers, incomes in dollars) are not taken either. Nor is a column
  with more than ``(hi - lo + 1) / DENSE_SHARE`` distinct values: whole numbers inside ``lo..hi``
  cannot be so many, so its numbers are not all whole or not all inside (a DP draft's noisy counts
  can fail to show a measure's decimals, and its bounds can hold only the bulk of the values: a
  measure of 431 values with 2 decimals in 0.21..13.5 gave 678 noisy distinct values and bounds
  2..3 at ``--dp 0.3``).

The plain draft reads the counts off the rows (over its sample), the DP draft reads its noisy,
charged counts and bounds (post-processing), and a release reads its silos' cells for the
operator's warning only. ``--include COL`` keeps a column the rule would leave out;
``--exclude COL`` leaves out one it would keep.
"""

from __future__ import annotations

import numpy as np

#: Present cells a column needs before the rule is applied.
MIN_IDENTIFIER_ROWS = 100
#: Distinct values a column needs before it can be taken for an identifier (no measure in whole
#: units of a common kind -- ages, days, blood pressures -- has so many).
MIN_IDENTIFIER_DISTINCT = 200
#: Share of the present cells that the distinct values must reach (ids repeated up to five times).
IDENTIFIER_SHARE = 0.2
#: Share of the whole numbers of its range that an identifier's distinct values fill.
DENSE_SHARE = 0.5
#: Share of a panel id's distinct values that occur exactly the same number of times.
BALANCED_SHARE = 0.95
#: The fewest rows each of a panel id's values must have (a pair of rows per value is too common:
#: a state's population repeated for two sexes in ``causaldata::abortion``).
MIN_REPEATS = 3


def identifier_reason(
    present: float,
    distinct: float,
    *,
    text: bool,
    whole: bool,
    lo: float | None = None,
    hi: float | None = None,
    repeats: int | None = None,
) -> str | None:
    """Why a column with ``present`` cells and ``distinct`` values looks like an identifier (words for
    the operator), or None. ``text``: some present value is not a number; ``whole``: every number is
    whole; ``lo``/``hi``: its lowest and highest number (needed for whole numbers); ``repeats``: the
    ``k`` that ``balanced_repeats`` found, where it was counted."""
    if present < MIN_IDENTIFIER_ROWS or distinct < MIN_IDENTIFIER_DISTINCT:
        return None
    many = f"about {round(distinct):,} distinct values in {round(present):,} cells"
    sparse = whole and not text and lo is not None and hi is not None and distinct < DENSE_SHARE * (hi - lo + 1)
    if repeats is not None and repeats >= MIN_REPEATS and sparse:
        return (
            f"{many}, nearly each in exactly {repeats} rows: a panel's unit id, or a value that singles each unit "
            "out; synth --privacy-unit protects each unit's rows together"
        )
    if distinct < IDENTIFIER_SHARE * present:
        return None
    if text:
        return f"{many} of text (names, free text or ids)"
    if not whole or lo is None or hi is None or hi < lo:
        return None
    if DENSE_SHARE * (hi - lo + 1) <= distinct <= (hi - lo + 1) / DENSE_SHARE:
        return f"{many}, whole numbers filling {min(1.0, distinct / (hi - lo + 1)):.0%} of {lo:g}..{hi:g} (ids)"
    return None


def balanced_repeats(counts: np.ndarray) -> int | None:
    """The number of times ``k`` that at least ``BALANCED_SHARE`` of the distinct values occur
    (``counts``: each distinct value's count), or None when no ``k`` is so common."""
    if not len(counts):
        return None
    values, times = np.unique(counts, return_counts=True)
    top = int(np.argmax(times))
    return int(values[top]) if times[top] >= BALANCED_SHARE * len(counts) else None


def identifier_note(name: str, reason: str, dp: bool = False) -> str:
    """The one line that says a draft left column ``name`` out as an identifier."""
    counts = "noisy counts" if dp else "its rows"
    return (
        f"column '{name}' looks like an identifier ({reason}, from {counts}): left out of the schema, and a "
        f"release ignores it in the silos; if it is a real attribute, draft again with --include {name}"
    )
