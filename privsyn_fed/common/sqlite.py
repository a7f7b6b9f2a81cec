"""Tables in a SQLite database file, read with Python's own ``sqlite3`` module (no extra to install).

A SQLite silo is ``sqlite://PATH?table=T`` or ``sqlite://PATH?query=SQL`` (``engines``; what follows
``sqlite://`` is the file, so ``sqlite:///data/x.db`` is absolute and ``sqlite://x.db`` relative).
The file is opened read-only (``mode=ro``, and ``PRAGMA query_only``), so neither a release nor a
query can change it; a database that another process holds locked is waited for ``BUSY_SECONDS``.

SQLite types each value, not each column: a column declared ``INTEGER`` may hold text. So its
cells are read as a CSV's are, each value checked as it comes: within a batch, a column whose
values are all integers (or NULL) comes back as 64-bit integers, one whose values are all numbers
as doubles, and any other as text, its numbers written as a CSV export writes them (integers in
full, doubles as Python's shortest text that reads back as the same double), so that the reader
parses them as it parses a CSV's cells. A BLOB is refused, naming its row and column. Rows are
numbered from 1 in the order SQLite returns them (a table's: its rowid order, as SQLite scans it;
a query's: its own).
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from typing import Iterator, Protocol, Sequence
from urllib.parse import quote

import numpy as np

from .errors import InputError, one_line
from .interrupt import checkpoint

#: How long a read waits for a database that another process holds locked.
BUSY_SECONDS = 10.0


class EngineTable(Protocol):
    """What this module reads of ``engines.EngineTable`` (a Protocol: ``engines`` imports this module)."""

    @property
    def target(self) -> str:
        """The database file."""

    @property
    def source(self) -> str:
        """The rows' SQL source: the quoted table, or the query in parentheses."""


@contextmanager
def sqlite_connection(t: EngineTable) -> Iterator[sqlite3.Connection]:
    """A read-only connection to ``t``'s database file; ``InputError`` naming ``t`` when there is no
    such file or it is not a SQLite database."""
    if not os.path.isfile(t.target):
        raise InputError(f"{t}: no SQLite database file {t.target!r}")
    uri = "file:" + quote(os.path.abspath(t.target)) + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, timeout=BUSY_SECONDS, check_same_thread=False)
    except sqlite3.Error as exc:
        raise InputError(f"{t}: cannot open the SQLite database ({one_line(exc)})") from None
    try:
        con.execute("PRAGMA query_only = 1")
        yield con
    finally:
        con.close()


def sqlite_names(t: EngineTable) -> list[str]:
    """The names of ``t``'s columns, in order; ``InputError`` for a file that is not a SQLite
    database, a missing table or a query SQLite refuses."""
    with sqlite_connection(t) as con:
        try:
            cur = con.execute(f"SELECT * FROM {t.source} LIMIT 0")
        except sqlite3.Error as exc:
            raise InputError(f"{t}: SQLite cannot read the rows ({one_line(exc)})") from None
        return [d[0] for d in cur.description or []]


def sqlite_batches(t: EngineTable, chunk_rows: int, names: Sequence[str]) -> Iterator:
    """``(record batch, first row)`` of ``t``'s rows with the columns ``names``, at most ``chunk_rows``
    rows a batch (module docstring); a safe point between batches."""
    import pyarrow as pa

    select = ", ".join('"' + n.replace('"', '""') + '"' for n in names) or "1"
    row = 1
    with sqlite_connection(t) as con:
        try:
            cur = con.execute(f"SELECT {select} FROM {t.source}")
            while rows := cur.fetchmany(chunk_rows):
                checkpoint()
                cells = np.array(rows, dtype=object).reshape(len(rows), -1)  # one Python object a cell, by column
                arrays = [_array(cells[:, i], t, name, row) for i, name in enumerate(names)]
                yield pa.RecordBatch.from_arrays(arrays, names=list(names)), row
                row += len(rows)
        except sqlite3.Error as exc:
            raise InputError(f"{t}: SQLite failed near row {row} ({one_line(exc)})") from None


def _array(values: np.ndarray, t: EngineTable, name: str, first_row: int):
    """One column of a batch's values (an object array) as an Arrow array (module docstring): Arrow's
    own reading where the values are all integers, all numbers or all text; text otherwise."""
    import pyarrow as pa

    try:
        array = pa.array(values, from_pandas=False)  # int64, double, string, or null where all are NULL
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        array = None  # numbers and text mixed
    if array is not None and not pa.types.is_binary(array.type):
        return array
    blob = next((i for i, v in enumerate(values) if isinstance(v, bytes)), None)
    if blob is not None:
        where = f"{t}: row {first_row + blob}, column '{name}'"
        raise InputError(f"{where}: holds binary data (a BLOB); store it as text or as a number")
    return pa.array([v if v is None or isinstance(v, str) else repr(v) for v in values], pa.string())
