"""A silo: one party's encoded rows and the only code that reads them.

A silo answers statistic requests (marginal count vectors). What it returns is private; callers
must pass it through a mechanism that charges the ledger before anything leaves the process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from .encode import delimiter_hint, encode_frame
from .errors import InputError
from .schema import Schema


class Silo:
    """Encoded private rows of one party over a public schema."""

    def __init__(
        self,
        name: str,
        codes: np.ndarray,
        schema: Schema,
        clipped: dict[str, int] | None = None,
        values: np.ndarray | None = None,
    ):
        codes = np.asarray(codes, dtype=np.int64)
        if codes.ndim != 2 or codes.shape[1] != len(schema.columns):
            raise ValueError("codes must be an (n, d) array over the schema's columns")
        self.name = name
        self.schema = schema
        self._codes = codes
        #: Per numeric column, how many values were clipped to the public bounds. Private:
        #: shown to this silo's operator, never released.
        self.clipped = dict(clipped or {})
        #: Numeric values clipped to their bounds, ``(n, d)``, NaN where missing or categorical; None
        #: when the silo was built from codes alone.
        self._values = None if values is None else np.asarray(values, dtype=float)

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path, schema: Schema) -> "Silo":
        """The silo in the table at ``path``: CSV, gzip CSV or Parquet (``tables.read_chunks``)."""
        return cls.from_csv(path, schema)

    @classmethod
    def from_csv(cls, path: str | Path, schema: Schema) -> "Silo":
        """Read the CSV at ``path`` (``read_csv``) and encode it on ``schema``; the silo is named by the
        path."""
        df = read_csv(path)
        return cls.from_frame(df, schema, name=str(Path(path)))

    @classmethod
    def from_frame(cls, df: pd.DataFrame, schema: Schema, name: str = "<frame>") -> "Silo":
        """Encode a table of text cells on ``schema`` (``encode_frame``), keeping the clip counts and
        the clipped numeric values."""
        codes, clipped, values = encode_frame(df, schema, name, with_values=True)
        return cls(name, codes, schema, clipped, values)

    @classmethod
    def pooled(cls, silos: Sequence["Silo"], name: str = "pooled") -> "Silo":
        """All rows of several silos in one place: only a trusted curator may do this."""
        if not silos:
            raise ValueError("no silos to pool")
        schema = silos[0].schema
        values = None
        if all(s._values is not None for s in silos):
            values = np.concatenate([s._values for s in silos])
        return cls(name, np.concatenate([s._codes for s in silos]), schema, values=values)

    # ---- statistics (private outputs) -----------------------------------------------------------
    def marginal(self, clique: Sequence[int]) -> np.ndarray:
        """Count vector ``M_r(D)`` over the cells of ``clique`` (column indices), row-major, int64.

        Computed with one ``bincount`` on the mixed-radix index of the clique's columns.
        """
        return marginal_counts(self._codes, self.schema.shape, clique)

    def marginals(self, cliques: Iterable[Sequence[int]]) -> dict[tuple[int, ...], np.ndarray]:
        """``marginal`` of each clique, keyed by the clique as a tuple."""
        return {tuple(c): self.marginal(c) for c in cliques}

    def true_size(self) -> int:
        """The exact row count. Private: use only inside a mechanism or a sensitivity test."""
        return len(self._codes)

    def rows(self) -> np.ndarray:
        """The encoded rows themselves. Private: for trusted-curator code and tests only."""
        return self._codes

    def values(self) -> np.ndarray:
        """Numeric values of the rows (clipped to bounds; NaN where missing). Private: for
        encodings computed inside this silo. Bin midpoints when the silo holds codes only."""
        if self._values is None:
            from .encode import bin_midpoints

            return bin_midpoints(self._codes, self.schema)
        return self._values

    def fingerprint(self) -> tuple[int, int]:
        """``(rows, h)``: ``h`` is the sum of a mixed 64-bit hash of every encoded row, so two silos
        holding the same rows in any order have the same fingerprint. Private: compared inside
        this process to refuse one table given twice, never released."""
        return len(self._codes), row_multiset_hash(self._codes)

    def with_rows(self, codes: np.ndarray, name: str | None = None) -> "Silo":
        """A silo over other rows of the same schema (used to build neighbouring datasets in tests)."""
        return Silo(name or self.name, codes, self.schema)


def _mix(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser on uint64 (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def row_multiset_hash(codes: np.ndarray) -> int:
    """Order-insensitive hash of the rows of a code array: the sum of one mixed hash per row."""
    with np.errstate(over="ignore"):
        h = np.zeros(len(codes), dtype=np.uint64)
        for j in range(codes.shape[1]):
            h = _mix(h ^ (codes[:, j].astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15 * (j + 1) % 2**64)))
        return int(h.sum(dtype=np.uint64))


def marginal_counts(codes: np.ndarray, shape: Sequence[int], clique: Sequence[int]) -> np.ndarray:
    """Counts of encoded rows over the cells of ``clique`` (row-major, int64): one ``bincount``
    on the mixed-radix index of the clique's columns; the empty clique counts the rows."""
    if not clique:
        return np.array([len(codes)], dtype=np.int64)
    dims = [shape[i] for i in clique]
    index = np.ravel_multi_index(tuple(codes[:, i] for i in clique), dims)
    return np.bincount(index, minlength=int(np.prod(dims))).astype(np.int64)


def read_csv(path: str | Path) -> pd.DataFrame:
    """A CSV as text cells (nothing parsed or dropped), with a one-line error naming the file."""
    path = Path(path)
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False, skipinitialspace=True)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a CSV file") from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: the file is empty (no header, no rows)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise InputError(
            f"{path}: cannot parse as CSV ({' '.join(str(exc).split())})" + delimiter_hint(_first_line(path))
        ) from None
    df.columns = [str(c).strip() for c in df.columns]
    return df


def _first_line(path: Path) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.readline()
    except OSError:
        return ""
