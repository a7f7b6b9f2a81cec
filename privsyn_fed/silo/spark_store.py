"""A silo's encoded rows kept in Spark, where its table lives, and counted there.

For a Spark silo (``spark://``, or a Spark data frame) read without a privacy unit, Spark's Python
workers encode every row with the reader's own code (``encode_batch`` on the same Arrow batches,
so the cells are the reader's by construction) into a persisted data frame of cells: each
column's code ``c{j}``, in the narrowest of Spark's integer types that holds it (``CELL_TYPES``;
a byte a cell on most schemas, where each numeric value would take eight more). After its cells
each partition adds one row ``s``, its summary: its rows, content sums, clipped counts, the sum of
its rows' hashes, and each column's first ``IDENTIFIER_SAMPLE`` present cells; merged here in
partition order, they are what one pass over every row in that order gives. Marginals are counted
by Spark (``GroupedCounts``: ``GROUPING SETS``, ``grouping_id``); only count vectors and the
summaries come back.

A row the schema refuses (or a silo column holding another silo's name) stops Spark's job:
``open`` then declines (None), and the reader reads the table, to the one-line error that names
the row. ``parts`` reads the cells back; a method that needs every row's values has them encoded
from the table again, and that pass's content sums are checked against the first pass's (a table
that changed under the release ends in a one-line error rather than a statistic of other rows)."""

from __future__ import annotations

import json
import secrets
import weakref
from contextlib import suppress
from typing import Any, Iterator

import numpy as np

from ..common import EngineTable, InputError, collected, parse_json, spark_error, spark_errors, spark_frame
from ..schema import IDENTIFIER_SAMPLE, CategoricalColumn, NumericColumn, Schema, constant_column, encode_batch
from .content import ContentSums, rows_changed
from .grouped_counts import GroupedCounts
from .identifier_scan import IdentifierScan
from .row_checks import check_site_codes, row_multiset_hash
from .rowstore import code_dtype

#: Spark's signed integer types for the cells, narrowest first, and each one's Spark name.
CELL_TYPES = ("int8", "int16", "int32")
SPARK_TYPES = {"int8": "tinyint", "int16": "smallint", "int32": "int", "float64": "double"}
#: What a worker's error says when a row read again is one the schema refuses.
ROWS_CHANGED = "privsyn-fed: a row read again is one the schema refuses"


class SparkStore(GroupedCounts):
    """A silo's rows encoded and counted in Spark (module docstring)."""

    grouping = "grouping_id"
    keys_first = True

    def __init__(self, cells: Any, values: Any, schema: Schema, summary: dict, source: str):
        """``cells``: the persisted cells; ``values``: the rows encoded again, with their values (a
        plan Spark runs only where ``parts`` needs them)."""
        super().__init__()
        self.frame, self._values, self.schema = cells, values, schema
        self.source = source
        self.numeric = [j for j, c in enumerate(schema.columns) if isinstance(c, NumericColumn)]
        self.dtype = code_dtype(schema.shape)
        self.count = summary["rows"]
        self.clipped: dict[str, int] = summary["clipped"]
        self.content: ContentSums = summary["content"]
        self.identifiers: dict[str, str] = summary["identifiers"]
        self.row_hash: int = summary["hash"]
        self.cells = f"privsyn_fed_cells_{secrets.token_hex(6)}"
        self.frame.createOrReplaceTempView(self.cells)
        self._closer = weakref.finalize(self, _drop, cells, self.cells)

    @classmethod
    def open(cls, table: EngineTable, schema: Schema, site: tuple[str, str] | None, source: str) -> SparkStore | None:
        """The store of a Spark table's rows, or None where a row stops the encoding (module docstring)
        or the table holds none. ``site``: the silo column and the silo's name, as ``Silo.load``'s."""
        from pyspark import StorageLevel

        frame = spark_frame(table, schema.names)
        encoded = frame.mapInArrow(_encoder(schema, site, source), _ddl(schema, with_values=False))
        encoded = encoded.persist(StorageLevel.MEMORY_AND_DISK)
        cells = None
        try:
            try:
                summaries = encoded.where("s IS NOT NULL").select("s").collect()
            except spark_errors():
                return None  # the reader reads the table and names what stopped it
            parts = [parse_json(r.s, source, "a Spark partition's summary") for r in summaries]
            summary = _merged(schema, site, sorted(parts, key=lambda p: p["part"]))
            if summary["rows"] == 0:
                return None
            # The cells alone, copied from the encoded rows' cache, which is then let go: a column of
            # summaries, null in every row but one a partition, would cost more than the cells.
            cells = encoded.where("s IS NULL").drop("s").persist(StorageLevel.MEMORY_AND_DISK)
            try:
                cells.count()
            except spark_errors() as exc:
                raise InputError(f"{source}: Spark failed keeping the silo's cells ({spark_error(exc)})") from None
        except BaseException:  # a Spark error, Ctrl-C or SIGTERM: nothing of the silo stays cached
            _unpersist(cells)
            raise
        finally:
            _unpersist(encoded)
        values = frame.mapInArrow(_value_encoder(schema, site, source), _ddl(schema, with_values=True))
        return cls(cells, values, schema, summary, source)

    def _table(self, sql: str) -> Any:
        try:
            return self.frame.sparkSession.sql(sql).toArrow()
        except spark_errors() as exc:
            raise InputError(f"{self.source}: Spark failed counting the silo ({spark_error(exc)})") from None

    def parts(self, with_values: bool = False) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """As ``RowStore.parts``: codes ``(n, d)`` and, ``with_values``, values ``(n, d)`` (NaN in the
        categorical columns), in partition order. Values are encoded from the table again, and the
        pass's content sums checked against the first pass's (module docstring)."""
        d = len(self.schema.columns)
        names = [f"c{j}" for j in range(d)] + ([f"v{j}" for j in self.numeric] if with_values else [])
        again = ContentSums(self.schema, self.content.skip) if with_values else None
        try:
            for batch in collected((self._values if with_values else self.frame).select(*names), 1_000_000):
                codes, values = _arrays(batch, d, self.numeric, with_values)
                codes = codes.astype(self.dtype, copy=False)
                if again is not None and values is not None:
                    again.add(codes, values)
                yield codes, values
        except spark_errors() as exc:
            if with_values and ROWS_CHANGED in str(exc):
                raise rows_changed(self.source) from None
            raise InputError(
                f"{self.source}: Spark failed reading the silo's cells back ({spark_error(exc)})"
            ) from None
        if again is not None:
            again.check_same(self.content, self.source)

    def close(self) -> None:
        """Drop the cells' view and let Spark free them (also when the store is collected)."""
        self._closer()


def _drop(cells: Any, view: str) -> None:
    with suppress(*spark_errors()):  # Spark may have stopped first
        cells.sparkSession.catalog.dropTempView(view)
    _unpersist(cells)


def _unpersist(frame: Any) -> None:
    """Let Spark free ``frame``'s cache (none: nothing to do; Spark may have stopped first)."""
    if frame is not None:
        with suppress(*spark_errors()):
            frame.unpersist()


def _arrays(batch: Any, d: int, numeric: list[int], with_values: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """A batch of cells as codes ``(n, d)`` and (``with_values``) values ``(n, d)``, NaN where categorical."""
    codes = np.column_stack([batch.column(f"c{j}").to_numpy(zero_copy_only=False) for j in range(d)])
    if not with_values:
        return codes, None
    values = np.full((batch.num_rows, d), np.nan)
    for j in numeric:
        values[:, j] = batch.column(f"v{j}").to_numpy(zero_copy_only=False)
    return codes, values


def _ddl(schema: Schema, with_values: bool) -> str:
    """The encoded rows' Spark schema: each column's code ``c{j}`` (``CELL_TYPES``) and the summary
    ``s``; or, ``with_values``, the codes and each numeric column's value ``v{j}``."""
    columns = [f"{kind}{j} {SPARK_TYPES[t]}" for kind, j, t in _kinds(schema, with_values)]
    return ", ".join(columns if with_values else [*columns, "s string"])


def _kinds(schema: Schema, with_values: bool) -> list[tuple[str, int, str]]:
    """The encoded rows' columns, as ``(kind, column index, numpy type)``: codes ``c`` in the narrowest
    signed type that holds every cell, values ``v`` as doubles."""
    widest = max(schema.shape, default=1) - 1
    cell = next(t for t in CELL_TYPES if widest <= np.iinfo(t).max)
    numeric = [j for j, c in enumerate(schema.columns) if isinstance(c, NumericColumn)]
    return [("c", j, cell) for j in range(len(schema.columns))] + (
        [("v", j, "float64") for j in numeric] if with_values else []
    )


def _encoder(schema: Schema, site: tuple[str, str] | None, source: str):
    """The function Spark's workers run on each partition's Arrow batches: the reader's encoding
    (``encode_batch``; a silo column the table lacks holds the silo's name) as batches of cells (``s``
    null), then one row of the partition's summary in JSON (``s``; module docstring)."""
    numeric = [j for j, c in enumerate(schema.columns) if isinstance(c, NumericColumn)]
    skip = None if site is None else site[0]
    kinds = _kinds(schema, with_values=False)
    names = [*_names(kinds), "s"]

    def encode(batches: Iterator) -> Iterator:
        import pyarrow as pa
        from pyspark import TaskContext

        content, scan = ContentSums(schema, skip), IdentifierScan(schema, skip)
        firsts: dict[int, list] = {j: [] for j in scan.columns}
        whole = dict.fromkeys(scan.columns, True)
        clipped = {schema.columns[j].name: 0 for j in numeric}
        row_hash = 0
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            codes, batch_clipped, values = _encoded(batch, schema, site, source)
            content.add(codes, values)
            row_hash = (row_hash + row_multiset_hash(codes)) % 2**64
            for name, k in batch_clipped.items():
                clipped[name] += int(k)
            for j in scan.columns:
                present = scan.present(j, codes, values)
                if present is not None:
                    whole[j] = whole[j] and present[1]
                    room = IDENTIFIER_SAMPLE - sum(len(c) for c in firsts[j])
                    if room > 0:
                        firsts[j].append(present[0][:room].tolist())
            yield pa.RecordBatch.from_arrays([*_columns(codes, values, kinds), pa.nulls(n, pa.string())], names=names)
        summary = {
            "part": TaskContext.get().partitionId(),
            "rows": content.rows,
            "sums": content.sums,
            "clipped": clipped,
            "hash": row_hash,
            "firsts": {j: [x for c in firsts[j] for x in c] for j in scan.columns},
            "whole": whole,
        }
        empty = [pa.nulls(1, pa.from_numpy_dtype(np.dtype(t))) for _, _, t in kinds]
        yield pa.RecordBatch.from_arrays([*empty, pa.array([json.dumps(summary)])], names=names)

    return encode


def _value_encoder(schema: Schema, site: tuple[str, str] | None, source: str):
    """The function Spark's workers run for ``parts`` with values: each batch's codes and numeric
    values, as ``_encoder`` encodes them, and nothing else. A row the schema now refuses raises
    ``ROWS_CHANGED``: the first pass took every row."""
    kinds = _kinds(schema, with_values=True)

    def encode(batches: Iterator) -> Iterator:
        import pyarrow as pa

        for batch in batches:
            if batch.num_rows == 0:
                continue
            try:
                codes, _, values = _encoded(batch, schema, site, source)
            except InputError:
                raise RuntimeError(ROWS_CHANGED) from None
            yield pa.RecordBatch.from_arrays(_columns(codes, values, kinds), names=_names(kinds))

    return encode


def _encoded(batch: Any, schema: Schema, site: tuple[str, str] | None, source: str) -> tuple:
    """A batch's codes, clipped counts and values (``encode_batch``); a silo column the table lacks
    holds the silo's name, and one it holds must hold that name."""
    if site is not None and site[0] not in batch.schema.names:
        batch = batch.append_column(site[0], constant_column(site[1], batch.num_rows))
    codes, clipped, values = encode_batch(batch, schema, source, 1)
    if site is not None:
        check_site_codes(codes, schema, site, source, 1)
    return codes, clipped, values


def _columns(codes: np.ndarray, values: np.ndarray, kinds: list[tuple[str, int, str]]) -> list:
    """The Arrow columns of ``kinds`` (``_kinds``) from a batch's codes and values."""
    import pyarrow as pa

    return [pa.array((codes if kind == "c" else values)[:, j].astype(t)) for kind, j, t in kinds]


def _names(kinds: list[tuple[str, int, str]]) -> list[str]:
    """The cells' column names: ``c{j}`` (codes) and ``v{j}`` (numeric values)."""
    return [f"{kind}{j}" for kind, j, _ in kinds]


def _merged(schema: Schema, site: tuple[str, str] | None, parts: list[dict]) -> dict:
    """The partitions' summaries (in partition order) as the silo's: rows, clipped counts, content
    sums, row hash and identifier reasons, as one pass over the rows in that order gives them."""
    skip = None if site is None else site[0]
    content, scan = ContentSums(schema, skip), IdentifierScan(schema, skip)
    clipped = {c.name: 0 for c in schema.columns if isinstance(c, NumericColumn)}
    row_hash = 0
    for part in parts:
        content.rows += part["rows"]
        for name, value in part["sums"].items():
            content.sums[name] = (content.sums[name] + value) % 2**64
        for name, n in part["clipped"].items():
            clipped[name] += n
        row_hash = (row_hash + part["hash"]) % 2**64
        for j in scan.columns:
            text = isinstance(schema.columns[j], CategoricalColumn)
            cells = np.array(part["firsts"][str(j)], dtype=np.int64 if text else np.float64)
            scan.add_cells(j, cells, part["whole"][str(j)])
    return {
        "rows": content.rows,
        "clipped": clipped,
        "content": content,
        "identifiers": scan.reasons(),
        "hash": row_hash,
    }
