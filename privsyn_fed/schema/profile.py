"""What one streaming pass over a table learns about each column (``profile_chunks``), for a draft.

Per column, over every chunk, with cells read as ``encode.column_cells`` reads them:

* rows, missing cells, present cells that are not numbers, numbers that are not whole, and the
  lowest and highest number;
* the present cells' text and counts, for at most ``cap`` distinct values (a categorical column);
* **identifier sample**: over the first ``IDENTIFIER_SAMPLE`` present cells, how many there are,
  how many distinct values they hold (their unique 64-bit hashes and how often each occurs: at most
  16 bytes a cell) and their lowest and highest number (``identifiers.identifier_reason`` decides on these counts);
* **heavy values**: a Misra--Gries sketch of the numbers (``heavy_hitters``), whose counters are
  lower bounds of the counts of the values that hold a large share;
* **decimals**: the most decimal places the shortest representation of any number shows, read up to
  ``MAX_DRAFT_DECIMALS`` (beyond: ``MAX_DRAFT_DECIMALS + 1``). A float ``x`` shows at most ``k``
  places when rounding it at ``k`` places gives back ``x``;
* with a bounds ``grid``, the numbers counted in its intervals (``draft_dp``).

Private: for the draft, never released as such.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from .cells import MISSING_TOKENS, column_cells, numbers_as_text
from .heavy_hitters import HeavyHitters
from .identifiers import balanced_repeats, identifier_reason

#: Present cells per column whose distinct values are counted for the identifier rule (16 bytes each).
IDENTIFIER_SAMPLE = 200_000
#: Numbers a plain draft keeps of each column, a uniform sample (reservoir sampling, seeded), for
#: the bins of a skewed column (``draft_edges``): 8 bytes each.
EDGE_SAMPLE = 100_000
#: The most distinct non-numbers a column of numbers may hold and still be drafted as numeric, with
#: them read as missing (codes such as ``N`` for "not applicable").
MAX_CODES = 3
#: The most decimal places a draft writes for a numeric column (``"decimals"``); a column whose
#: numbers show more gets none.
MAX_DRAFT_DECIMALS = 6


def decimal_places(x: np.ndarray, start: int = 0, most: int = MAX_DRAFT_DECIMALS) -> int:
    """The most decimal places any number of ``x`` shows (shortest representation), at least ``start``;
    ``most + 1`` when some number shows more than ``most``."""
    x = np.asarray(x, dtype=float)
    k, left = start, x[np.floor(x) != x]  # a whole number shows none
    while len(left) and k <= most:
        with np.errstate(over="ignore", invalid="ignore"):
            left = left[np.round(left, k) != left]
        if len(left):
            k += 1
    return k


@dataclass
class ColumnProfile:
    """What one pass learns about a column (module docstring).

    ``counts`` holds the present cells' text (as a categorical column would read them) and their
    counts, for at most ``cap`` distinct values; ``saturated`` says a value beyond them was seen
    (so ``len(counts) == min(distinct, cap)``). With a sorted ``grid`` of ``m`` edges, ``intervals``
    counts the numbers in each of its ``m + 1`` intervals ``(-inf, g_0), [g_0, g_1), ..., [g_{m-1},
    inf)`` (the bounds histogram of ``draft_dp``)."""

    name: str
    cap: int
    rows: int = 0
    missing: int = 0
    non_numbers: int = 0
    non_integers: int = 0
    numbers: int = 0
    lo: float = math.inf
    hi: float = -math.inf
    counts: dict[str, int] = field(default_factory=dict)
    saturated: bool = False
    #: The present cells that are not numbers, by text, for at most ``MAX_CODES`` distinct ones
    #: (``codes_saturated``: more were seen).
    codes: dict[str, int] = field(default_factory=dict)
    codes_saturated: bool = False
    tokens_seen: set[str] = field(default_factory=set)
    intervals: np.ndarray | None = None
    #: Present cells among the first ``IDENTIFIER_SAMPLE``, and their lowest and highest number.
    sample_present: int = 0
    sample_lo: float = math.inf
    sample_hi: float = -math.inf
    #: The numbers' heavy values (``heavy_hitters``).
    heavy: HeavyHitters = field(default_factory=HeavyHitters, repr=False)
    #: The most decimal places a number shows (``MAX_DRAFT_DECIMALS + 1``: more).
    decimals: int = 0
    #: A uniform sample of the numbers (``EDGE_SAMPLE`` at most), when the profile keeps one.
    number_sample: np.ndarray | None = field(default=None, repr=False)
    _hashes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64), repr=False)
    _hash_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)

    @property
    def present(self) -> int:
        """Cells that are not missing."""
        return self.rows - self.missing

    @property
    def distinct_capped(self) -> int:
        """``min(distinct present values, cap)``."""
        return len(self.counts)

    @property
    def sample_distinct(self) -> int:
        """Distinct values among the sampled present cells (up to 64-bit hash collisions)."""
        return len(self._hashes)

    @property
    def missing_codes(self) -> list[str]:
        """The column's non-numbers when they are a few codes beside its numbers (at most
        ``MAX_CODES`` distinct, in at most as many cells as the numbers): a numeric column's missing
        values, sorted; ``[]`` otherwise."""
        if not self.non_numbers or self.codes_saturated or self.non_numbers > self.numbers:
            return []
        return sorted(self.codes)

    @property
    def identifier(self) -> str | None:
        """Why the column looks like an identifier (``identifiers.identifier_reason`` on the sample:
        text when a present cell is not a number, beyond its ``missing_codes``; whole when every
        number is), or None."""
        lo, hi = (self.sample_lo, self.sample_hi) if self.sample_lo <= self.sample_hi else (None, None)
        return identifier_reason(
            self.sample_present,
            self.sample_distinct,
            text=self.non_numbers > 0 and not self.missing_codes,
            whole=self.non_integers == 0,
            lo=lo,
            hi=hi,
            repeats=balanced_repeats(self._hash_counts),
        )

    def _sample(self, text: np.ndarray, x: np.ndarray) -> None:
        """Add the first present cells (``text``, their numbers ``x``: NaN where not a number) to the
        identifier sample, up to ``IDENTIFIER_SAMPLE``."""
        room = IDENTIFIER_SAMPLE - self.sample_present
        if room <= 0 or not len(text):
            return
        text, x = text[:room], x[:room]
        self.sample_present += len(text)
        h, n = np.unique(pd.util.hash_array(np.asarray(text, dtype=object)), return_counts=True)
        self._hashes, where = np.unique(np.concatenate([self._hashes, h]), return_inverse=True)
        self._hash_counts = np.bincount(where, weights=np.concatenate([self._hash_counts, n])).astype(np.int64)
        x = x[np.isfinite(x)]
        if len(x):
            self.sample_lo = min(self.sample_lo, float(x.min()))
            self.sample_hi = max(self.sample_hi, float(x.max()))

    def _keep(self, numbers: np.ndarray) -> None:
        """Reservoir sampling (Algorithm R, seeded by the count so far): the ``t``-th number seen
        replaces a uniform slot below ``t`` when that slot is below ``EDGE_SAMPLE``."""
        assert self.number_sample is not None
        room = EDGE_SAMPLE - len(self.number_sample)
        if room > 0:
            self.number_sample = np.concatenate([self.number_sample, numbers[:room]])
        rest = numbers[max(room, 0) :]
        if len(rest):
            seen = self.numbers + max(room, 0) + np.arange(1, len(rest) + 1)
            slot = (np.random.default_rng(self.numbers).random(len(rest)) * seen).astype(np.int64)
            hit = slot < EDGE_SAMPLE
            self.number_sample[slot[hit]] = rest[hit]

    def _add_codes(self, cells: np.ndarray) -> bool:
        """Count the present cells that are not numbers (``codes``); whether they pass ``MAX_CODES``
        distinct values."""
        for value, n in pd.Series(cells, dtype=object).value_counts(sort=False).items():
            if value not in self.codes and len(self.codes) == MAX_CODES:
                return True
            self.codes[value] = self.codes.get(value, 0) + int(n)
        return False

    def add(self, series: pd.Series, tokens: Sequence[str], extra: Sequence[str], grid: np.ndarray | None) -> None:
        """Count one chunk of the column (cells read as ``encode.column_cells`` reads them)."""
        cells = column_cells(series)
        self.rows += len(cells)
        if cells.dtype.kind == "f":
            miss = np.isnan(cells)
            x = cells[~miss]
            text = numbers_as_text(x)
        else:
            miss = np.isin(cells, list(tokens))
            for t in extra:
                if t not in self.tokens_seen and bool(np.any(cells == t)):
                    self.tokens_seen.add(t)
            # the parser of encode._encode_numeric, on the same cells
            x = pd.to_numeric(pd.Series(np.where(miss, "nan", cells)), errors="coerce").to_numpy(float)[~miss]
            text = cells[~miss]
        finite = np.isfinite(x)
        numbers = x[finite]
        self.missing += int(miss.sum())
        if self.number_sample is not None:
            self._keep(numbers)
        self.non_numbers += int((~finite).sum())
        if not finite.all() and not self.codes_saturated:
            infinite = np.isinf(x).any() or cells.dtype.kind == "f"  # infinities are numbers, not codes
            self.codes_saturated = bool(infinite) or self._add_codes(text[~finite])
        self.numbers += len(numbers)
        if len(numbers):
            self.lo = min(self.lo, float(numbers.min()))
            self.hi = max(self.hi, float(numbers.max()))
            self.non_integers += int(np.sum(np.floor(numbers) != numbers))
            if self.decimals <= MAX_DRAFT_DECIMALS:
                self.decimals = decimal_places(numbers, self.decimals)
            self.heavy.add(numbers)
            if grid is not None:
                where = np.searchsorted(grid, numbers, side="right")  # interval i holds g_{i-1} <= x < g_i
                self.intervals += np.bincount(where, minlength=len(grid) + 1)
        self._sample(text, x)
        if not self.saturated and len(text):
            for value, n in pd.Series(text, dtype=object).value_counts(sort=False).items():
                if value in self.counts:
                    self.counts[value] += int(n)
                elif len(self.counts) < self.cap:
                    self.counts[value] = int(n)
                else:
                    self.saturated = True
                    break


def profile_chunks(
    frames: Iterable[pd.DataFrame],
    names: Sequence[str],
    cap: int,
    missing_values: Sequence[str] = (),
    grid: np.ndarray | None = None,
    sample: bool = False,
) -> list[ColumnProfile]:
    """One pass over ``frames`` (chunks of one table with columns ``names``): a profile per column;
    ``sample``: each keeps a sample of its numbers (``EDGE_SAMPLE``)."""
    tokens = tuple(MISSING_TOKENS) + tuple(missing_values)
    profiles = [ColumnProfile(n, cap) for n in names]
    for p in profiles if sample else []:
        p.number_sample = np.zeros(0)
    if grid is not None:
        for p in profiles:
            p.intervals = np.zeros(len(grid) + 1, dtype=np.int64)
    for frame in frames:
        for p, name in zip(profiles, names):
            p.add(frame[name], tokens, missing_values, grid)
    return profiles
