"""The values that hold a large share of a numeric column, found in bounded memory (Misra--Gries).

``HeavyHitters(k)`` keeps at most ``k`` counters over the numbers it is given, chunk by chunk. A
chunk's exact counts are merged into the counters (a sum per value); when more than ``k`` values
hold a counter, the ``(k+1)``-th largest counter is subtracted from every counter and those left
at zero or below are dropped (the mergeable summary of Agarwal et al., 2012). Hence, over ``n``
numbers, every counter is a lower bound of its value's count, and a value's count exceeds its
counter (0 when it holds none) by at most ``(n - sum of the counters) / (k + 1)``: a value that
holds more than ``n / (k + 1)`` of the numbers always keeps a counter. Memory: ``k`` counters plus
one chunk's distinct values.
"""

from __future__ import annotations

import numpy as np

#: Counters of the sketch: a value's count is under-read by at most ``n / (HEAVY_COUNTERS + 1)``.
HEAVY_COUNTERS = 64


class HeavyHitters:
    """A Misra--Gries summary of the numbers added so far (module docstring)."""

    def __init__(self, k: int = HEAVY_COUNTERS):
        if k < 1:
            raise ValueError("a heavy-hitter sketch needs at least one counter")
        self.k = k
        #: Numbers added so far.
        self.n = 0
        self.values = np.zeros(0, dtype=float)
        self.counts = np.zeros(0, dtype=np.int64)

    def add(self, numbers: np.ndarray) -> None:
        """Merge one chunk of finite numbers into the counters."""
        numbers = np.asarray(numbers, dtype=float)
        if not len(numbers):
            return
        self.n += len(numbers)
        values, counts = np.unique(numbers, return_counts=True)
        merged, where = np.unique(np.concatenate([self.values, values]), return_inverse=True)
        totals = np.zeros(len(merged), dtype=np.int64)
        np.add.at(totals, where, np.concatenate([self.counts, counts]))
        if len(totals) > self.k:
            cut = np.partition(totals, len(totals) - self.k - 1)[len(totals) - self.k - 1]  # (k+1)-th largest
            totals = totals - cut
            kept = totals > 0
            merged, totals = merged[kept], totals[kept]
        self.values, self.counts = merged, totals

    def error(self) -> float:
        """The most by which any value's count exceeds its counter."""
        return (self.n - int(self.counts.sum())) / (self.k + 1)

    def frequent(self, share: float, most: int) -> list[float]:
        """Values whose counter (a lower bound of their count) is at least ``share`` of the numbers: the
        ``most`` with the largest counters, sorted by value."""
        if not self.n:
            return []
        sure = np.flatnonzero(self.counts >= share * self.n)
        top = sure[np.argsort(-self.counts[sure], kind="stable")][:most]
        return sorted(float(v) for v in self.values[top])
