"""A release's warning that a schema column of a silo looks like an identifier.

A schema that lists a row number, a patient's id or a name lets a synthetic table repeat real ids.
While a silo is read (every row, before a privacy unit's bounds), ``IdentifierScan`` counts, per
schema column but the silo column, over its first ``IDENTIFIER_SAMPLE`` present cells: how many
there are and how many distinct values they hold, and for a numeric column their lowest and
highest value (clipped to the schema's bounds) and whether every value read is whole; a categorical
column counts as text, its distinct values the categories seen. ``identifiers.identifier_reason``
decides, as in a draft. Memory: at most ``IDENTIFIER_SAMPLE`` values per numeric column, one flag per
category. The result is private: it is shown to the silo's operator, never released, and changes
nothing in the release.
"""

from __future__ import annotations

import math

import numpy as np

from ..schema import IDENTIFIER_SAMPLE, CategoricalColumn, Schema, identifier_reason


class IdentifierScan:
    """The identifier counts of one silo's schema columns (module docstring); ``skip``: the silo column."""

    def __init__(self, schema: Schema, skip: str | None = None):
        self.schema = schema
        self.columns = [j for j, c in enumerate(schema.columns) if c.name != skip]
        self.sampled = dict.fromkeys(self.columns, 0)
        self.whole = dict.fromkeys(self.columns, True)
        self.lo = dict.fromkeys(self.columns, math.inf)
        self.hi = dict.fromkeys(self.columns, -math.inf)
        self._seen: dict[int, np.ndarray] = {}
        for j in self.columns:
            col = schema.columns[j]
            if isinstance(col, CategoricalColumn):
                self._seen[j] = np.zeros(len(col.categories), dtype=bool)
            else:
                self._seen[j] = np.zeros(0, dtype=float)

    def add(self, codes: np.ndarray, values: np.ndarray | None) -> None:
        """Add a chunk's encoded ``codes`` ``(n, d)`` and numeric ``values`` ``(n, d)`` (NaN where missing)."""
        for j in self.columns:
            text = isinstance(self.schema.columns[j], CategoricalColumn)
            if self.sampled[j] >= IDENTIFIER_SAMPLE and (text or not self.whole[j]):
                continue  # its sample is full, and nothing else can change: text, or a number not whole seen
            present = self.present(j, codes, values)
            if present is not None:
                self.add_cells(j, *present)

    def present(self, j: int, codes: np.ndarray, values: np.ndarray | None) -> tuple[np.ndarray, bool] | None:
        """Column ``j``'s present cells of a chunk, in order (a category's code, a number's value), and
        whether every one of them is whole (numbers; True for text); None for numbers without values."""
        col = self.schema.columns[j]
        if isinstance(col, CategoricalColumn):
            cells = codes[:, j]
            return cells[cells < len(col.categories)], True  # present: not the missing cell
        if values is None:
            return None
        cells = values[:, j][~np.isnan(values[:, j])]
        return cells, bool(np.all(np.floor(cells) == cells))

    def add_cells(self, j: int, cells: np.ndarray, whole: bool) -> None:
        """Add column ``j``'s next present cells (``present``), the rows in order: the first
        ``IDENTIFIER_SAMPLE`` of the silo are sampled; ``whole`` covers every cell, sampled or not."""
        col = self.schema.columns[j]
        if not isinstance(col, CategoricalColumn):
            self.whole[j] = self.whole[j] and whole
        room = IDENTIFIER_SAMPLE - self.sampled[j]
        if room <= 0 or not len(cells):
            return
        cells = cells[:room]
        self.sampled[j] += len(cells)
        if isinstance(col, CategoricalColumn):
            self._seen[j][cells] = True
        else:
            self._seen[j] = np.union1d(self._seen[j], cells)
            self.lo[j] = min(self.lo[j], float(cells.min()))
            self.hi[j] = max(self.hi[j], float(cells.max()))

    def reasons(self) -> dict[str, str]:
        """Per schema column that looks like an identifier, why (``identifier_reason``), in schema order."""
        out = {}
        for j in self.columns:
            col = self.schema.columns[j]
            text = isinstance(col, CategoricalColumn)
            distinct = int(self._seen[j].sum()) if text else len(self._seen[j])
            lo, hi = (self.lo[j], self.hi[j]) if self.lo[j] <= self.hi[j] else (None, None)
            reason = identifier_reason(self.sampled[j], distinct, text=text, whole=self.whole[j], lo=lo, hi=hi)
            if reason:
                out[col.name] = reason
        return out


def identifier_warning(silo: str, column: str, reason: str) -> str:
    """The operator's warning about a schema column of ``silo`` that looks like an identifier."""
    return (
        f"column '{column}' of silo {silo} looks like an identifier ({reason}); a synthetic table drawn from it "
        "can repeat real ids: leave it out of the schema (private; not released)"
    )
