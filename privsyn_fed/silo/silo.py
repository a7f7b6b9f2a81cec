"""A silo: one party's encoded rows and the only code that reads them.

A silo answers statistic requests (marginal count vectors). What it returns is private; callers
must pass it through a mechanism that charges the ledger before anything leaves the process.
"""

from __future__ import annotations

import logging
from contextlib import closing
from pathlib import Path
from typing import Generator, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from ..common import (
    CHUNK_ROWS,
    TYPED_FORMATS,
    InputError,
    NotArrowReadable,
    arrow_cells,
    checkpoint,
    is_engine_url,
    is_number_type,
    is_text_type,
    parse_engine_url,
    read_arrow_chunks,
    read_chunks,
    read_header,
    read_table,
    stored_types,
    table_format,
    table_name,
)
from ..schema import (
    CategoricalColumn,
    NumericColumn,
    Schema,
    bin_midpoints,
    check_columns,
    constant_column,
    encode_batch,
    encode_frame,
    ignored_note,
)
from .content import ContentSums
from .engine_store import EngineStore
from .identifier_scan import IdentifierScan
from .row_checks import check_site_codes, row_multiset_hash, site_codes_hold
from .rowstore import RowStore
from .spark_store import SparkStore
from .units import keep_mask, new_key, unit_hashes

#: Notes on reading silos (columns not in the schema), for the silo's operator.
log = logging.getLogger("privsyn_fed.silo")


def _encoded_chunks(
    path: str | Path, schema: Schema, source: str, chunk_rows: int, columns: list[str], site, arrow: bool
) -> Generator[tuple[np.ndarray, dict[str, int], np.ndarray, int], None, None]:
    """``(codes, clipped, values, first_row)`` of each chunk of the table: through Arrow
    (``read_arrow_chunks``, ``encode_batch``; ``NotArrowReadable`` where it cannot tell) or pandas
    (``read_chunks``, ``encode_frame``). A ``site`` column the table lacks holds the silo's name."""
    held = site is None or site[0] in columns
    if arrow:
        with closing(read_arrow_chunks(path, chunk_rows, columns=columns)) as batches:
            for batch_chunk in batches:
                checkpoint()  # Ctrl-C or SIGTERM while a large silo is read: stop between chunks
                batch = batch_chunk.batch
                if batch.num_rows == 0:
                    continue
                if not held:
                    batch = batch.append_column(site[0], constant_column(site[1], batch.num_rows))
                yield (*encode_batch(batch, schema, source, batch_chunk.first_row), batch_chunk.first_row)
        return
    for chunk in read_chunks(path, chunk_rows, columns=columns):
        checkpoint()
        if len(chunk.frame) == 0:
            continue
        frame = chunk.frame if held else chunk.frame.assign(**{site[0]: site[1]})
        yield (*encode_frame(frame, schema, source, with_values=True, first_row=chunk.first_row), chunk.first_row)


def _unit_hashes(path: str | Path, unit: str, key: str, source: str, chunk_rows: int) -> np.ndarray:
    """Each row's keyed hash of its privacy unit (``units.unit_hashes``), the unit column read through
    Arrow, or by pandas where Arrow declines (``NotArrowReadable``): the same cells either way."""
    try:
        with closing(read_arrow_chunks(path, chunk_rows, columns=[unit])) as chunks:
            hashes = [
                unit_hashes(pd.Series(arrow_cells(c.batch.column(unit))), key, unit, source, c.first_row)
                for c in chunks
            ]
    except NotArrowReadable:
        hashes = [
            unit_hashes(c.frame[unit], key, unit, source, c.first_row)
            for c in read_chunks(path, chunk_rows, columns=[unit])
        ]
    return np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)


def unit_hashes_of(
    table: str | Path | pd.DataFrame, schema: Schema, unit: str, key: str, name: str, site_column: str | None = None
) -> np.ndarray:
    """Each row's keyed hash of its privacy ``unit`` (``units.unit_hashes``) in a table (its header
    checked first, as ``Silo.load``) or a data frame (named ``name``): the first pass of reading a
    silo by unit, for bounds that span silos (``units.silo_masks``); ``site_column`` as the header
    check's."""
    if isinstance(table, pd.DataFrame):
        check_unit_column([str(c) for c in table.columns], schema, unit, name)
        return unit_hashes(table[unit].reset_index(drop=True), key, unit, name, 1)
    check_table_header(table, schema, unit, site_column)
    return _unit_hashes(table, unit, key, table_name(table), CHUNK_ROWS)


def _read_store(
    path, schema, source, chunk_rows, columns, site, keep, arrow: bool, scan: IdentifierScan | None = None
) -> tuple[RowStore, dict, ContentSums]:
    """The table's rows (those ``keep`` marks, if given) encoded into a sealed ``RowStore``, the
    count of values clipped per numeric column (``_encoded_chunks``) and the content sums of every
    row read; ``scan`` counts every row read too."""
    store = RowStore(schema.shape, numeric_columns(schema))
    clipped = {c.name: 0 for c in schema.columns if isinstance(c, NumericColumn)}
    content = ContentSums(schema, None if site is None else site[0])
    position = 0
    try:
        with closing(_encoded_chunks(path, schema, source, chunk_rows, columns, site, arrow)) as chunks:
            for codes, counts, values, first_row in chunks:
                if site is not None:
                    check_site_codes(codes, schema, site, source, first_row)
                content.add(codes, values)  # every row read, before a unit's bounds
                if scan is not None:
                    scan.add(codes, values)
                if keep is not None:
                    kept = keep[position : position + len(codes)]
                    position += len(codes)
                    codes, values = codes[kept], values[kept]
                store.append(codes, values)
                for col, n in counts.items():
                    clipped[col] += n
    except BaseException:
        store.close()
        raise
    store.seal()
    return store, clipped, content


def _counted_in_engine(path: str | Path, schema: Schema, source: str, site) -> "Silo | None":
    """The silo of an engine's table whose rows stay in the engine and are counted there
    (``EngineStore``), or None where the engine cannot keep them (``EngineStore.open``), or holds no
    row, or a row holds a value the schema refuses or another silo's name: the reader then reads
    the table, to the same silo or its one-line error. Content sums and the identifier scan read
    the encoded rows once, as DuckDB encodes them (``EngineStore.fill``); a Spark table's
    (``SparkStore``) are summed by Spark's workers."""
    table = parse_engine_url(str(path))
    if table.engine not in ("duckdb", "spark"):  # the rows of PostgreSQL, MySQL and SQLite are read and counted here
        return None
    if table.engine == "spark":
        counted = SparkStore.open(table, schema, site, source)
        if counted is None:
            return None
        silo = Silo(source, None, schema, counted.clipped, stores=[counted])
        silo.content, silo.identifiers, silo.site = counted.content, counted.identifiers, site
        return silo
    store = EngineStore.open(table, schema, stored_types(path), site, source)
    if store is None:
        return None
    try:
        scan = IdentifierScan(schema, None if site is None else site[0])
        with closing(store.fill()) as parts:
            for codes, values in parts:
                checkpoint()
                if site is not None and not site_codes_hold(codes, schema, site):
                    store.refused = True  # the reader names the first bad row, whatever its kind
                    break
                scan.add(codes, values)
        if store.count == 0 or store.refused:
            store.close()
            return None
    except BaseException:
        store.close()
        raise
    silo = Silo(source, None, schema, store.clipped(), stores=[store])
    silo.content, silo.identifiers, silo.site = store.content, scan.reasons(), site
    return silo


class Silo:
    """Encoded private rows of one party over a public schema, held in a ``RowStore`` (or several,
    for the curator's pooled silo): statistics are computed part by part, so a silo read from
    disk in chunks needs memory for one part, not for all its rows."""

    def __init__(
        self,
        name: str,
        codes: np.ndarray | None,
        schema: Schema,
        clipped: dict[str, int] | None = None,
        values: np.ndarray | None = None,
        stores: Sequence[RowStore | EngineStore | SparkStore] | None = None,
    ):
        if stores is None:
            codes = np.asarray(codes, dtype=np.int64)
            if codes.ndim != 2 or codes.shape[1] != len(schema.columns):
                raise ValueError("codes must be an (n, d) array over the schema's columns")
            stores = [RowStore.of(codes, values, schema.shape, numeric_columns(schema))]
        self.name = name
        self.schema = schema
        self._stores = list(stores)
        #: Per numeric column, how many values (of the rows read) were clipped to the public bounds. Private:
        #: shown to this silo's operator, never released.
        self.clipped = dict(clipped or {})
        #: ``(column, K)`` when at most K rows per privacy unit were kept (``units``), else None.
        self.unit: tuple[str, int] | None = None
        #: Rows left out by that bound. Private: shown to this silo's operator, never released.
        self.unit_dropped = 0
        #: Rows of units kept in M other silos instead (``units.silo_masks``). Private, as above.
        self.unit_elsewhere = 0
        #: Per-column sums of every row read (``content.ContentSums``), by which a budget store
        #: recognises silos it charged. Private: never released. None for silos built from codes.
        self.content: ContentSums | None = None
        #: ``(group, i, n, M)`` when this silo was read as the ``i``-th of ``n`` silos together (one
        #: ``api.read_silos`` call, named by the token ``group``) so that a unit is kept in at most M of them.
        self.unit_silos: tuple[str, int, int, int] | None = None
        #: ``(column, name)`` when the silo's name is its rows' value of a schema column (``site``), else None.
        self.site: tuple[str, str] | None = None
        #: Schema columns that look like identifiers in the rows read, with why (``identifier_scan``).
        #: Private: shown to this silo's operator as a warning, never released.
        self.identifiers: dict[str, str] = {}

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        path: str | Path,
        schema: Schema,
        chunk_rows: int = CHUNK_ROWS,
        *,
        unit: str | None = None,
        max_rows: int = 1,
        unit_key: str | None = None,
        site: tuple[str, str] | None = None,
        keep: np.ndarray | None = None,
    ) -> "Silo":
        """The silo in the table at ``path`` (CSV, gzip CSV or Parquet), read and encoded ``chunk_rows``
        rows at a time into a ``RowStore``; every check of ``encode_frame`` applies to every chunk,
        with errors naming the file, the row (CSV: its line) and the column. Named by the path.
        Columns the schema does not list are never read; one warning (logger ``privsyn_fed.silo``)
        names them all.

        With a privacy ``unit`` column, a first pass reads that column only and chooses at most
        ``max_rows`` rows per unit (``units.keep_mask``, keyed by ``unit_key``, fresh when None);
        the second keeps only those rows. Every row is still checked. No identifier is kept.
        ``keep``: the rows to keep, chosen already under the unit's bounds (``read_silos``, from
        ``unit_hashes_of``); the first pass is then skipped.

        With a ``site`` ``(column, name)`` (``silo.site``) every row's value of the schema's
        ``column`` is the silo's ``name``: set when the table lacks the column, checked when it has it."""
        source = table_name(path)
        ignored = check_table_header(path, schema, unit, None if site is None else site[0])
        held = site is None or site[0] in read_header(path)
        if ignored:
            log.warning(ignored_note(source, ignored))
        if unit is None and keep is None and is_engine_url(path):
            counted = _counted_in_engine(path, schema, source, site)
            if counted is not None:
                return counted
        if unit is not None and keep is None:
            key = unit_key or new_key()
            keep = keep_mask(_unit_hashes(path, unit, key, source, chunk_rows), max_rows, key)
        columns = schema.names if held else [c for c in schema.names if site is None or c != site[0]]
        try:
            scan = IdentifierScan(schema, None if site is None else site[0])
            store, clipped, content = _read_store(path, schema, source, chunk_rows, columns, site, keep, True, scan)
        except NotArrowReadable:  # the same cells, read by pandas: the same store or the one-line error
            scan = IdentifierScan(schema, None if site is None else site[0])
            store, clipped, content = _read_store(path, schema, source, chunk_rows, columns, site, keep, False, scan)
        if store.count == 0:
            store.close()
            raise InputError(f"{source}: the table has no rows")
        silo = cls(source, None, schema, clipped, stores=[store])
        silo.content = content
        silo.identifiers = scan.reasons()
        silo.site = site
        if unit is not None and keep is not None:
            silo.unit, silo.unit_dropped = (unit, max_rows), int((~keep).sum())
        return silo

    @classmethod
    def from_csv(cls, path: str | Path, schema: Schema) -> "Silo":
        """``load``: kept for code that reads CSV files by this name."""
        return cls.load(path, schema)

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        schema: Schema,
        name: str = "<frame>",
        *,
        unit: str | None = None,
        max_rows: int = 1,
        unit_key: str | None = None,
        site: tuple[str, str] | None = None,
        keep: np.ndarray | None = None,
    ) -> "Silo":
        """Encode a data frame on ``schema`` (``encode_frame``: text cells, or typed columns as a
        user's frame holds them), keeping the clip counts and the clipped numeric values. Columns
        the schema does not list are ignored, with one warning naming them (as ``load``). With a
        privacy ``unit`` column, at most ``max_rows`` rows per unit are kept (as ``load``); with a
        ``site``, its column is set or checked (as ``load``); ``keep`` as ``load``'s."""
        columns = [str(c) for c in df.columns]
        check_unit_column(columns, schema, unit, name)
        if site is not None and site[0] not in columns:
            df, columns = df.assign(**{site[0]: site[1]}), [*columns, site[0]]
        ignored = [c for c in check_columns(columns, schema, name) if c != unit]
        if ignored:
            log.warning(ignored_note(name, ignored))
        codes, clipped, values = encode_frame(df, schema, name, with_values=True)
        content = ContentSums(schema, None if site is None else site[0])
        content.add(codes, values)
        scan = IdentifierScan(schema, None if site is None else site[0])
        scan.add(codes, values)
        if site is not None:
            check_site_codes(codes, schema, site, name, 2)
        if unit is None:
            silo = cls(name, codes, schema, clipped, values)
        else:
            if keep is None:
                key = unit_key or new_key()
                keep = keep_mask(unit_hashes(df[unit].reset_index(drop=True), key, unit, name, 1), max_rows, key)
            silo = cls(name, codes[keep], schema, clipped, None if values is None else values[keep])
            silo.unit, silo.unit_dropped = (unit, max_rows), int((~keep).sum())
        silo.site = site
        silo.content = content
        silo.identifiers = scan.reasons()
        return silo

    @classmethod
    def pooled(cls, silos: Sequence["Silo"], name: str = "pooled") -> "Silo":
        """All rows of several silos in one place: only a trusted curator may do this. The pooled
        silo reads the silos' own stores; nothing is copied."""
        if not silos:
            raise ValueError("no silos to pool")
        return cls(name, None, silos[0].schema, stores=[st for s in silos for st in s._stores])

    # ---- statistics (private outputs) -----------------------------------------------------------
    def _parts(self, with_values: bool = False) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        for store in self._stores:
            yield from store.parts(with_values)

    def marginal(self, clique: Sequence[int]) -> np.ndarray:
        """Count vector ``M_r(D)`` over the cells of ``clique`` (column indices), row-major, int64."""
        return self.marginals([clique])[tuple(clique)]

    def marginals(self, cliques: Iterable[Sequence[int]]) -> dict[tuple[int, ...], np.ndarray]:
        """The marginal of each clique, keyed by the clique as a tuple: the sum over the silo's stores
        of their counts (``RowStore.marginals``: one pass over its parts; ``EngineStore.marginals``:
        counted in the engine)."""
        shape = self.schema.shape
        totals = {tuple(c): np.zeros(int(np.prod([shape[i] for i in c])), dtype=np.int64) for c in cliques}
        for store in self._stores:
            for c, counts in store.marginals(shape, totals).items():
                totals[c] += counts
        return totals

    def parts(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The rows part by part: int64 codes ``(n, d)`` and numeric values ``(n, d)`` (clipped to bounds;
        NaN where missing or categorical; bin midpoints when the silo holds codes only). Private:
        for statistics computed inside this silo, summed over the parts."""
        for codes, values in self._parts(with_values=True):
            codes = codes.astype(np.int64)
            yield codes, values if values is not None else bin_midpoints(codes, self.schema)

    def true_size(self) -> int:
        """The exact row count. Private: use only inside a mechanism or a sensitivity test."""
        return sum(st.count for st in self._stores)

    def rows(self) -> np.ndarray:
        """All encoded rows in one int64 array. Private: for trusted-curator code and tests only
        (a silo larger than memory does not fit in it: statistics use ``parts``)."""
        return np.concatenate([c.astype(np.int64) for c, _ in self._parts()])

    def values(self) -> np.ndarray:
        """All numeric values in one array (as ``parts`` gives them). Private: tests only."""
        return np.concatenate([v for _, v in self.parts()])

    def fingerprint(self) -> tuple[int, int]:
        """``(rows, h)``: ``h`` is the sum of a mixed 64-bit hash of every encoded row, so two silos
        holding the same rows in any order have the same fingerprint. Private: compared inside
        this process to refuse one table given twice, never released."""
        h = sum(_rows_hash(st) for st in self._stores) % 2**64
        return self.true_size(), h

    def with_rows(self, codes: np.ndarray, name: str | None = None) -> "Silo":
        """A silo over other rows of the same schema (used to build neighbouring datasets in tests)."""
        return Silo(name or self.name, codes, self.schema)


def _rows_hash(store) -> int:
    """The sum of the row hashes of one store's rows (a Spark store's, summed by Spark's workers)."""
    if isinstance(store, SparkStore):
        return store.row_hash
    return sum(row_multiset_hash(c) for c, _ in store.parts())


def numeric_columns(schema: Schema) -> list[int]:
    """Indices of the schema's numeric columns."""
    return [j for j, c in enumerate(schema.columns) if isinstance(c, NumericColumn)]


def check_table_header(
    path: str | Path, schema: Schema, unit: str | None = None, site_column: str | None = None
) -> list[str]:
    """The table's header fits ``schema`` (``check_columns``), and so do a Parquet file's stored
    types, and an engine table's (``check_stored_types``): public facts, checked without reading a row. With a privacy
    ``unit`` column, the table must have it (``check_unit_column``); the silo's ``site_column``
    (``silo.site``) it may lack. Returns the table's columns that the schema does not list
    (ignored), the unit column left out."""
    source = table_name(path)
    header = read_header(path)
    check_unit_column(header, schema, unit, source)
    given = header if site_column is None or site_column in header else [*header, site_column]
    ignored = [c for c in check_columns(given, schema, source) if c != unit]
    if table_format(path) in TYPED_FORMATS:
        types = stored_types(path)
        if site_column is not None and site_column not in types:
            types[site_column] = "string"
        check_stored_types(types, schema, source, table_format(path))
    return ignored


def check_unit_column(columns: Sequence[str], schema: Schema, unit: str | None, source: str) -> None:
    """A privacy ``unit`` column (if any) is in the table and is not one of the schema's columns
    (an identifier must never be a model attribute, so never released)."""
    if unit is None:
        return
    if unit in schema.names:
        raise InputError(
            f"{source}: the privacy unit column '{unit}' is also a schema column; an identifier must never be "
            "released, so remove it from the schema"
        )
    if unit not in columns:
        raise InputError(
            f"{source}: no column '{unit}' (the privacy unit); the table's columns are: {', '.join(columns)}"
        )


#: How messages name the formats whose cells are typed.
TYPED_NAMES = {"parquet": "Parquet", "duckdb": "DuckDB", "postgresql": "PostgreSQL", "mysql": "MySQL", "spark": "Spark"}


def check_stored_types(types: dict[str, str], schema: Schema, source: str, fmt: str = "parquet") -> None:
    """Refuse a column stored (in a Parquet file or an engine's table, ``fmt``) with a type that
    cannot hold the schema's column: a numeric column needs numbers; a categorical one text, whole
    numbers or booleans."""
    where = TYPED_NAMES[fmt]
    for col in schema.columns:
        kind = types[col.name]
        if isinstance(col, NumericColumn) and not is_number_type(kind):
            raise InputError(
                f"{source}: column '{col.name}' is stored as {kind} in {where}, but the schema declares it "
                "numeric; store it as a number type, or declare it categorical"
            )
        if isinstance(col, CategoricalColumn) and not is_text_type(kind):
            raise InputError(
                f"{source}: column '{col.name}' is stored as {kind} in {where}, but the schema declares it "
                "categorical; store it as text or whole numbers, or declare it numeric"
            )


def read_csv(path: str | Path) -> pd.DataFrame:
    """A whole table (CSV, gzip CSV or Parquet; ``tables.read_table``) with one-line errors naming the file."""
    return read_table(path)
