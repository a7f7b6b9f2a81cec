"""The synthetic rows of a release, drawn from the fitted model in chunks.

Sampling is post-processing of the release's noisy statistics. Rows are drawn ``CHUNK_ROWS`` at
a time, each chunk from its own seed derived from the release's sampling seed, so the same rows
come out however often they are read, and memory stays bounded by one chunk whatever the row
count: a CSV of ``MAX_ROWS`` rows is written without ever holding more than one chunk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Protocol

import numpy as np
import pandas as pd

from .errors import InputError
from .interrupt import checkpoint

#: The most rows one release may have (``--rows``).
MAX_ROWS = 1_000_000_000
#: The most rows a release has by default (its noisy total, capped here: post-processing; a tiny
#: epsilon can make the noisy total absurdly large). ``--rows`` asks for up to ``MAX_ROWS``.
DEFAULT_MAX_ROWS = 10_000_000
#: Rows drawn and written at a time.
CHUNK_ROWS = 500_000


class TableSampler(Protocol):
    """A fitted model that draws synthetic rows (schema columns, schema order)."""

    #: The model's noisy estimate of the number of rows.
    total: float

    def sample(self, rows: int, seed: int) -> pd.DataFrame: ...


def check_rows(rows: int | None) -> None:
    if rows is None:
        return
    if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 1:
        raise InputError(f"rows must be a positive whole number, not {rows!r}")
    if rows > MAX_ROWS:
        raise InputError(f"--rows {rows} is more than the {MAX_ROWS:,} rows one release may have")


def default_rows(total: float) -> int:
    """The noisy total as a row count, between 1 and ``DEFAULT_MAX_ROWS``."""
    if not math.isfinite(total):
        return DEFAULT_MAX_ROWS if total > 0 else 1
    return int(min(DEFAULT_MAX_ROWS, max(1, round(total))))


def min_csv_bytes(rows: int, columns: int) -> int:
    """A lower bound on a CSV's size: every cell at least one character or separator."""
    return rows * max(1, columns) * 2


@dataclass
class SyntheticRows:
    """``count`` rows from ``sampler``, drawn in chunks from seeds derived from ``seed``."""

    sampler: TableSampler
    count: int
    seed: int

    def chunks(self) -> Iterator[pd.DataFrame]:
        sizes = [CHUNK_ROWS] * (self.count // CHUNK_ROWS)
        if self.count % CHUNK_ROWS:
            sizes.append(self.count % CHUNK_ROWS)
        seeds = np.random.SeedSequence(self.seed).generate_state(len(sizes), dtype=np.uint64)
        for n, s in zip(sizes, seeds):
            checkpoint()
            yield self.sampler.sample(n, int(s) % 2**63)

    def frame(self) -> pd.DataFrame:
        parts = list(self.chunks())
        return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
