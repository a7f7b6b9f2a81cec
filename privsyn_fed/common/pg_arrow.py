"""A PostgreSQL query's rows as Arrow record batches, through ADBC's PostgreSQL driver.

Through psycopg every row of a ``COPY`` costs a Python call. The Arrow project's ADBC driver instead
runs ``COPY (...) TO STDOUT (FORMAT binary)`` in C++ and hands over typed Arrow batches, so no row
passes through Python and the server formats no number as text. The values are the cursor's:
* whole numbers, ``real`` and ``double precision`` come as their bits, NaN and infinities included;
* a ``numeric`` comes as its decimal text, parsed by Arrow to the nearest double, as
  ``float(Decimal)`` gives it;
* a ``boolean`` comes as a boolean;
* text comes as UTF-8 (the session's ``client_encoding``), NULL apart from the empty text.
A column of any other type (a date, an array) is read by the cursor instead (``engines``).

The connection is libpq's own URI, so the password comes from ``PGPASSWORD`` or ``~/.pgpass``, which
libpq reads. The rows are read in one read-only transaction, with synchronised scans off.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

#: The Arrow type each column type (``engines``' names) read this way becomes.
ARROW_TYPES = {
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "float": "float32",
    "double": "float64",
    "decimal128": "float64",
    "bool": "bool",
    "string": "string",
}
#: Seconds libpq waits for the server, unless the URI says (its ``connect_timeout``).
CONNECT_TIMEOUT = 10


def with_connect_timeout(target: str) -> str:
    """The libpq URI ``target`` with ``connect_timeout=CONNECT_TIMEOUT`` added unless it gives one."""
    if "connect_timeout=" in target:
        return target
    return f"{target}{'&' if '?' in target else '?'}connect_timeout={CONNECT_TIMEOUT}"


def arrow_readable(types: Sequence[str]) -> bool:
    """Whether columns of these types (``engines.engine_types``' names), at least one, are read
    through ADBC."""
    return bool(types) and all(kind in ARROW_TYPES for kind in types)


def driver_errors() -> tuple[type[Exception], ...]:
    """The errors the ADBC driver raises (connecting, reading)."""
    import adbc_driver_manager

    return (adbc_driver_manager.Error,)


def pg_batches(target: str, sql: str, names: Sequence[str], types: Sequence[str], chunk_rows: int) -> Iterator:
    """Arrow record batches of ``chunk_rows`` rows (the last shorter) of the query ``sql`` (columns
    ``names`` of ``types``) on the server at libpq URI ``target``."""
    import adbc_driver_postgresql.dbapi as dbapi

    with dbapi.connect(with_connect_timeout(target)) as con, con.cursor() as cur:
        cur.execute("SET TRANSACTION READ ONLY")  # the transaction's first statement
        cur.execute("SET synchronize_seqscans = off")
        cur.execute("SET client_encoding = 'UTF8'")
        cur.execute(sql)
        reader = cur.fetch_record_batch()
        yield from rebatched((_typed(batch, names, types) for batch in reader), chunk_rows)


def _typed(batch: Any, names: Sequence[str], types: Sequence[str]) -> Any:
    """A batch as the reader types it: each column as ``ARROW_TYPES`` says (a ``numeric``'s text,
    which the driver may wrap in an extension type, parsed as doubles), named ``names``."""
    import pyarrow as pa

    columns = []
    for column, kind in zip(batch.columns, types):
        if isinstance(column.type, pa.ExtensionType):
            column = column.storage
        wanted = pa.type_for_alias(ARROW_TYPES[kind])
        columns.append(column if column.type == wanted else column.cast(wanted))
    return pa.RecordBatch.from_arrays(columns, names=list(names))


def rebatched(batches: Iterator, chunk_rows: int) -> Iterator:
    """``batches`` (Arrow record batches of one schema) as batches of ``chunk_rows`` rows, the last
    one shorter: the driver cuts its batches by bytes, and every batch costs its consumer a fixed
    overhead."""
    import pyarrow as pa

    pending: list = []
    held = 0
    for batch in batches:
        pending.append(batch)
        held += batch.num_rows
        if held < chunk_rows:
            continue
        joined = pa.Table.from_batches(pending).combine_chunks()
        whole = held - held % chunk_rows
        yield from joined.slice(0, whole).to_batches(max_chunksize=chunk_rows)
        pending = joined.slice(whole).to_batches() if whole < held else []
        held -= whole
    if held:
        yield from pa.Table.from_batches(pending).combine_chunks().to_batches()
