"""A silo's encoded rows kept in DuckDB, where its table lives, and counted there.

For a silo in DuckDB (``duckdb://``), ``EngineStore`` opens an in-memory DuckDB that attaches the
database file read-only, and ``fill`` encodes every row once, in the engine: each column's cell
(``sql_cells.cell_sql``: the project's own encoding, NULL for a value the schema refuses), each
numeric column's clipped value (``kept_value``) and whether it was clipped (``was_clipped``). The
encoded rows stream back in parts, once, for the silo's checks, content sums and identifier scan;
only the cells stay in the engine, in a table of their own (a byte or two per cell, where the
values and flags would take nine bytes each). Marginals are then ``GROUP BY GROUPING SETS`` over
that table, one scan for any number of cliques, and only count vectors come back; a clique inside
one counted before is summed from it. DuckDB runs on every core and keeps its memory under its
own ``memory_limit`` (``$PRIVSYN_FED_DUCKDB_MEMORY``, else DuckDB's default), spilling beyond it
to a private temporary folder that is removed with the store (``private_folder``: one that a
killed process left is removed when the next store opens).

``parts`` gives the rows in the table's order, as a ``RowStore``'s. Their values, for methods that
need every row's values, are encoded from the table again; a pass whose content sums differ from
the first pass's (the table changed under the release) ends in a one-line error rather than a
statistic of other rows. ``EngineStore.open`` declines (None) a table whose cells the engine might
read otherwise than the reader: a categorical column not stored as text, a numeric one stored as
decimals or not as numbers.
"""

from __future__ import annotations

import weakref
from typing import Any, Generator, Iterator

import numpy as np

from ..common import EngineTable, InputError, PrivateFolder, first_line, private_folder, settings
from ..schema import CategoricalColumn, NumericColumn, Schema
from .content import ContentSums, rows_changed
from .grouped_counts import GroupedCounts
from .rowstore import code_dtype
from .sql_cells import as_double, cell_sql, clipped_value, kept_value, literal, numeric_cell, quoted, was_clipped

#: DuckDB's unsigned integer type of each numpy code type.
CODE_TYPES = {"uint8": "UTINYINT", "uint16": "USMALLINT", "uint32": "UINTEGER", "int64": "BIGINT"}
#: The prefix of a store's spill folder in the temporary directory.
SPILL_PREFIX = "privsyn-fed-engine-"
#: Rows per part that ``parts`` reads back.
PART_ROWS = 1_000_000


class EngineStore(GroupedCounts):
    """A silo's rows encoded in DuckDB (module docstring)."""

    cells = "memory.main.privsyn_cells"
    grouping = "GROUPING"

    def __init__(
        self,
        con: Any,
        schema: Schema,
        table: EngineTable,
        encoded: str,
        source: str,
        skip: str | None,
        folder: PrivateFolder,
    ):
        super().__init__()
        self._con, self.schema, self._encoded, self._source = con, schema, encoded, source
        self._attached = bool(table.target)
        self.numeric = [j for j, c in enumerate(schema.columns) if isinstance(c, NumericColumn)]
        self.dtype = code_dtype(schema.shape)
        #: Rows kept, whether a row held a value the schema refuses (``fill`` then stopped), the
        #: content sums of the rows (``ContentSums``, the silo column ``skip`` left out).
        self.count, self.refused, self.content = 0, False, ContentSums(schema, skip)
        self._clipped = {schema.columns[j].name: 0 for j in self.numeric}
        self._closer = weakref.finalize(self, _close, con, folder)

    @classmethod
    def open(
        cls, table: EngineTable, schema: Schema, types: dict[str, str], site: tuple[str, str] | None, source: str
    ) -> EngineStore | None:
        """An empty store for ``table``'s rows (``types``: its columns' stored types; ``fill`` encodes
        them), or None where the engine is not DuckDB or might read a cell otherwise than the reader
        (module docstring). ``site``: the silo column and the silo's name, the column's cell where the
        table lacks it; ``source``: the silo's name in messages."""
        if table.engine != "duckdb" or not _pushable(schema, types, site):
            return None
        import duckdb

        memory = settings.duckdb_memory_setting()
        folder = private_folder(SPILL_PREFIX)
        try:
            con = duckdb.connect(
                ":memory:", config={"temp_directory": folder.path, **({"memory_limit": memory} if memory else {})}
            )
        except duckdb.Error as exc:
            folder.remove()
            raise InputError(
                f"{settings.DUCKDB_MEMORY_ENV}={memory}: DuckDB refuses it as a memory limit ({first_line(exc)}); "
                "give a size such as 4GB"
            ) from None
        try:
            if table.target:
                con.execute(f"ATTACH {literal(table.target)} AS silo (READ_ONLY)")
                con.execute("USE silo")
            kind = CODE_TYPES[code_dtype(schema.shape).name]
            cells = ", ".join(f"c{j} {kind}" for j in range(len(schema.columns)))
            # in the private in-memory database, which the store's cursors (connections) all see
            con.execute(f"CREATE TABLE memory.main.privsyn_cells ({cells})")
            encoded = _encoded_sql(schema, table.source, types, site)
            return cls(con, schema, table, encoded, source, None if site is None else site[0], folder)
        except BaseException:
            _close(con, folder)
            raise

    def fill(self) -> Generator[tuple[np.ndarray, np.ndarray], None, None]:
        """Encode the table's rows in the engine, part by part: give each part's codes and values
        (as ``parts(with_values=True)``), then keep its cells and count its clipped values and content.
        Stops, with ``refused`` set, at the first part holding a value the schema refuses."""
        d = len(self.schema.columns)
        with self._source_cursor() as cur:  # its own connection: the parts are kept through this one
            for batch in cur.sql(self._encoded).to_arrow_reader(PART_ROWS):
                if any(batch.column(f"c{j}").null_count for j in range(d)):
                    self.refused = True
                    return
                codes, values = self._arrays(batch)
                yield codes, values
                self._con.from_arrow(batch.select([f"c{j}" for j in range(d)])).insert_into(self.cells)
                self.count += batch.num_rows
                self.content.add(codes, values)
                for j in self.numeric:
                    flags = batch.column(f"k{j}").to_numpy(zero_copy_only=False)
                    self._clipped[self.schema.columns[j].name] += int(np.count_nonzero(flags))

    def clipped(self) -> dict[str, int]:
        """Per numeric column, how many present values lay outside its bounds."""
        return dict(self._clipped)

    def parts(self, with_values: bool = False) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """As ``RowStore.parts``: codes ``(n, d)`` and, ``with_values``, values ``(n, d)`` (NaN in the
        categorical columns), in the table's order. Values are encoded from the table again, and the
        pass's content sums checked against ``fill``'s (module docstring)."""
        d = len(self.schema.columns)
        if not with_values:
            names = ", ".join(f"c{j}" for j in range(d))
            with self._con.cursor() as cur:  # its own connection: other queries may run between parts
                for batch in cur.sql(f"SELECT {names} FROM {self.cells}").to_arrow_reader(PART_ROWS):
                    cells = [batch.column(j).to_numpy(zero_copy_only=False) for j in range(d)]
                    yield np.column_stack(cells).astype(self.dtype, copy=False), None
            return
        again = ContentSums(self.schema, self.content.skip)
        with self._source_cursor() as cur:
            for batch in cur.sql(self._encoded).to_arrow_reader(PART_ROWS):
                if any(batch.column(f"c{j}").null_count for j in range(d)):
                    raise rows_changed(self._source)
                codes, values = self._arrays(batch)
                again.add(codes, values)
                yield codes, values
        again.check_same(self.content, self._source)

    def _source_cursor(self) -> Any:
        """A connection of its own, in the attached database where the silo's table is named."""
        cur = self._con.cursor()
        if self._attached:
            cur.execute("USE silo")
        return cur

    def _arrays(self, batch: Any) -> tuple[np.ndarray, np.ndarray]:
        """A part's codes ``(n, d)`` and values ``(n, d)`` (NaN in the categorical columns)."""
        d = len(self.schema.columns)
        codes = np.column_stack([batch.column(f"c{j}").to_numpy(zero_copy_only=False) for j in range(d)])
        values = np.empty((batch.num_rows, d), order="F")  # a column's values contiguous, as they are summed
        for j in range(d):
            values[:, j] = batch.column(f"v{j}").to_numpy(zero_copy_only=False) if j in self.numeric else np.nan
        return codes.astype(self.dtype, copy=False), values

    def _table(self, sql: str) -> Any:
        with self._con.cursor() as cur:
            return cur.sql(sql).to_arrow_table()

    def close(self) -> None:
        """Close the engine and remove its temporary folder."""
        self._closer()


def _close(con: Any, folder: PrivateFolder) -> None:
    con.close()
    folder.remove()


def _pushable(schema: Schema, types: dict[str, str], site: tuple[str, str] | None) -> bool:
    """Whether the engine reads every schema column's cells as the reader does: categorical columns
    stored as text, numeric ones as integers or floats (module docstring)."""
    for col in schema.columns:
        kind = types.get(col.name)
        if kind is None:
            if site is None or col.name != site[0]:
                return False
        elif isinstance(col, CategoricalColumn) and kind not in ("string", "large_string"):
            return False
        elif isinstance(col, NumericColumn) and not kind.startswith(("int", "uint", "float", "double")):
            return False
    return True


def _encoded_sql(schema: Schema, source: str, types: dict[str, str], site: tuple[str, str] | None) -> str:
    """``SELECT`` each column's cell ``c{j}`` (a column the table lacks: the silo's name's cell), and
    for each numeric column its clipped value ``v{j}`` and clipped flag ``k{j}``, from ``source``;
    each numeric value as a double and clipped once a row, in an inner query (``n{j}``, ``x{j}``)."""
    kind = CODE_TYPES[code_dtype(schema.shape).name]
    inner, cells, numbers = [], [], []
    for j, col in enumerate(schema.columns):
        if col.name not in types:  # the silo column, which the table does not hold
            assert isinstance(col, CategoricalColumn) and site is not None
            cells.append(f"CAST({col.categories.index(site[1])} AS {kind}) AS c{j}")
        elif isinstance(col, NumericColumn):
            v = as_double(quoted(col.name))
            inner += [f"{v} AS n{j}", f"{clipped_value(col, v)} AS x{j}"]
            cells.append(f"CAST({numeric_cell(col, f'n{j}', f'x{j}')} AS {kind}) AS c{j}")
            numbers += [f"{kept_value(f'n{j}', f'x{j}')} AS v{j}", f"{was_clipped(col, f'n{j}')} AS k{j}"]
        else:
            inner.append(f"{quoted(col.name)} AS t{j}")
            cells.append(f"CAST({cell_sql(col, f't{j}')} AS {kind}) AS c{j}")
    return f"SELECT {', '.join(cells + numbers)} FROM (SELECT {', '.join(inner) or '1'} FROM {source})"
