"""A PostgreSQL table's rows through ``COPY ... TO STDOUT (FORMAT csv)``, parsed by Arrow.

A server-side cursor hands every value to Python (about 2.8 us a row of six columns); ``COPY``
sends the rows as CSV text, which Arrow's CSV reader types in C++ (about 1.3 us a row, most of it
psycopg handing over one row's text at a time). The values are the ones the cursor gives:
PostgreSQL writes numbers in their shortest exact form (``extra_float_digits`` at least 1), so a
``float8`` or ``float4`` parses back to the same value, a ``numeric`` to the double nearest its
decimal text (as ``float(Decimal)``), ``NaN`` and ``Infinity`` included; a ``bool`` is ``t`` or
``f``; a NULL is an empty unquoted field and an empty text ``""``. Columns of any other type (dates,
arrays, ...) are read by the cursor, whose text of them Python formats (``engines``).
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

#: The Arrow type each column type this route reads is parsed as (``engines``' names).
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
#: Bytes of CSV text handed to Arrow at a time.
READ_BYTES = 1 << 20


def copy_readable(types: Sequence[str]) -> bool:
    """Whether columns of these types (``engines.engine_types``' names), at least one, are read
    through ``COPY``."""
    return bool(types) and all(kind in ARROW_TYPES for kind in types)


def copy_batches(con: Any, sql: str, names: Sequence[str], types: Sequence[str], chunk_rows: int) -> Iterator:
    """Arrow record batches of ``chunk_rows`` rows (the last shorter) of the query ``sql`` (columns
    ``names`` of ``types``) through ``COPY (sql) TO STDOUT (FORMAT csv)`` on the psycopg connection
    ``con``. libpq hands over whole rows, so the text is parsed about ``READ_BYTES`` at a time."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    con.execute("SET client_encoding = 'UTF8'")
    con.execute("SET extra_float_digits = 1")  # the shortest text that reads back to the same number
    read = pacsv.ReadOptions(column_names=list(names), use_threads=False)
    parse = pacsv.ParseOptions(newlines_in_values=True, ignore_empty_lines=False)  # one column's NULL: ""
    convert = pacsv.ConvertOptions(
        column_types={n: pa.type_for_alias(ARROW_TYPES[k]) for n, k in zip(names, types)},
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
        true_values=["t"],
        false_values=["f"],
    )

    def parsed(text: bytes) -> Iterator:
        yield from pacsv.read_csv(pa.py_buffer(text), read, parse, convert).to_batches()

    def blocks(copy: Any) -> Iterator:
        held = bytearray()  # extended in place: holding psycopg's row buffers instead costs twice the time
        for data in copy:
            held += data
            if len(held) >= READ_BYTES:
                yield from parsed(bytes(held))
                held.clear()
        if held:
            yield from parsed(bytes(held))

    with con.cursor() as cur, cur.copy(f"COPY ({sql}) TO STDOUT (FORMAT csv)") as copy:
        yield from rebatched(blocks(copy), chunk_rows)


def rebatched(batches: Iterator, chunk_rows: int) -> Iterator:
    """``batches`` (Arrow record batches of one schema) as batches of ``chunk_rows`` rows, the last
    one shorter: Arrow's CSV reader cuts its batches by bytes, and every batch costs its consumer
    a fixed overhead."""
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
