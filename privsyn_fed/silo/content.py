"""What a silo holds, as a budget store recognises it: one order-independent 64-bit sum per column.

For a categorical column ``c`` the sum is ``sum over rows of h(c, label)``, for a numeric column
``sum over rows of mix(bits(value) ^ h(c))`` (the value clipped to the schema's bounds; a missing
value as NaN), ``h`` a SHA-256-derived 64-bit hash and ``mix`` splitmix64's finaliser, all modulo
2^64; with the number of rows. The sums are taken over every row read, before a privacy unit's
bounds choose which rows a release keeps, so the same table gives the same sums in every release,
whatever the row order, the file format or the chunking. Private: a budget store keeps only a keyed
digest of them (``accounting.fingerprints``), never the sums; nothing here is released.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ..common import InputError
from ..schema import CategoricalColumn, Schema
from .units import _mix


def _h(*parts: str) -> np.uint64:
    digest = hashlib.sha256("\x1f".join(("privsyn-fed content", *parts)).encode()).digest()
    return np.uint64(int.from_bytes(digest[:8], "little"))


@dataclass
class ContentSums:
    """The running sums of one silo (module docstring), over ``schema``'s columns but ``skip`` (the
    silo column, whose values are the silo's name rather than its data)."""

    schema: Schema
    skip: str | None = None
    rows: int = 0
    sums: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._labels: dict[int, np.ndarray] = {}
        for j, col in enumerate(self.schema.columns):
            if isinstance(col, CategoricalColumn) and col.name != self.skip:
                cells = self.schema.shape[j]
                self._labels[j] = np.array([_h(col.name, _label(col, k)) for k in range(cells)], dtype=np.uint64)
        self._salts = {j: _h(c.name) for j, c in enumerate(self.schema.columns)}
        self.sums = {c.name: 0 for c in self.schema.columns if c.name != self.skip}

    def add(self, codes: np.ndarray, values: np.ndarray | None) -> None:
        """Add a chunk's encoded ``codes`` ``(n, d)`` and ``values`` ``(n, d)`` (NaN where none)."""
        self.rows += len(codes)
        with np.errstate(over="ignore"):
            for j, col in enumerate(self.schema.columns):
                if col.name == self.skip:
                    continue
                if j in self._labels:
                    counts = np.bincount(codes[:, j], minlength=len(self._labels[j])).astype(np.uint64)
                    part = int((counts * self._labels[j]).sum(dtype=np.uint64))
                else:
                    column = np.full(len(codes), np.nan) if values is None else values[:, j]
                    bits = np.ascontiguousarray(column, dtype=np.float64).view(np.uint64)
                    part = int(_mix(bits ^ self._salts[j]).sum(dtype=np.uint64))
                self.sums[col.name] = (self.sums[col.name] + part) % 2**64

    def check_same(self, first: ContentSums, source: str) -> None:
        """Stop, in one line naming ``source``, where these sums of a later pass over a silo's rows
        are not ``first``'s: the rows changed between two reads of one release."""
        if (self.rows, self.sums) != (first.rows, first.sums):
            raise rows_changed(source)


def rows_changed(source: str) -> InputError:
    """The one-line error of a silo whose rows changed between two reads of one release."""
    return InputError(
        f"{source}: its rows changed between two reads of this release (the table was written to, or the "
        "query gives other rows each time it runs); release again from rows that hold still"
    )


def _label(col: CategoricalColumn, code: int) -> str:
    """The text a categorical code stands for (the schema's category, or its missing and unknown cells)."""
    categories = list(col.categories)
    if code < len(categories):
        return str(categories[code])
    return f"\x00cell {code - len(categories)}"  # missing or unknown: past the categories, in the schema's order
