"""A silo's encoded rows kept in DuckDB, where its table lives, and counted there.

For a silo in DuckDB (``duckdb://``), ``EngineStore`` opens an in-memory DuckDB that attaches the
database file read-only and encodes every row once, in the engine, into a table of its own: each
column's cell (``sql_cells.cell_sql``: the project's own encoding, NULL for a value the schema
refuses), each numeric column's clipped value (``value_sql``) and whether it was clipped
(``clipped_sql``). Marginals are then ``GROUP BY GROUPING SETS`` over that table, one scan for
any number of cliques, and only count vectors come back; a clique inside one counted before is
summed from it. DuckDB runs on every core and keeps its memory under its own ``memory_limit``
(``$PRIVSYN_FED_DUCKDB_MEMORY``, else DuckDB's default), spilling beyond it to a private
temporary folder that is removed with the store (``private_folder``: one that a killed process
left is removed when the next store opens).

It holds the same rows as a ``RowStore`` would (``parts`` reads them back in the table's order),
so the silo's checks, content sums and identifier scan are computed from them as for a file.
``EngineStore.open`` declines (None) a table whose cells the engine might read otherwise than the
reader: a categorical column not stored as text, a numeric one stored as decimals or not as
numbers.
"""

from __future__ import annotations

import weakref
from typing import Any, Iterator

import numpy as np

from ..common import EngineTable, InputError, PrivateFolder, first_line, private_folder, settings
from ..schema import CategoricalColumn, NumericColumn, Schema
from .grouped_counts import GroupedCounts
from .rowstore import code_dtype
from .sql_cells import cell_sql, clipped_sql, literal, quoted, value_sql

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

    def __init__(self, con: Any, schema: Schema, folder: PrivateFolder):
        super().__init__()
        self._con, self.schema = con, schema
        self.numeric = [j for j, c in enumerate(schema.columns) if isinstance(c, NumericColumn)]
        self.dtype = code_dtype(schema.shape)
        self.count = int(self._one("SELECT count(*) FROM memory.main.privsyn_cells")[0])
        self._closer = weakref.finalize(self, _close, con, folder)

    @classmethod
    def open(cls, table: EngineTable, schema: Schema, types: dict[str, str], site: tuple[str, str] | None):
        """The store of ``table``'s rows (``types``: its columns' stored types), or None where the
        engine is not DuckDB or might read a cell otherwise than the reader (module docstring).
        ``site``: the silo column and the silo's name, the column's cell where the table lacks it."""
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
            # in the private in-memory database, which the store's cursors (connections) all see
            con.execute(f"CREATE TABLE memory.main.privsyn_cells AS {_encoded_sql(schema, table.source, types, site)}")
            return cls(con, schema, folder)
        except BaseException:
            _close(con, folder)
            raise

    def refused(self) -> bool:
        """Whether a row holds a value the schema refuses (a cell with no code)."""
        d = len(self.schema.columns)
        where = " OR ".join(f"c{j} IS NULL" for j in range(d))
        return self._one(f"SELECT count(*) FROM (SELECT 1 FROM memory.main.privsyn_cells WHERE {where} LIMIT 1)")[0] > 0

    def clipped(self) -> dict[str, int]:
        """Per numeric column, how many present values lay outside its bounds."""
        if not self.numeric:
            return {}
        sums = ", ".join(f"count(*) FILTER (WHERE k{j})" for j in self.numeric)
        row = self._one(f"SELECT {sums} FROM memory.main.privsyn_cells")
        return {self.schema.columns[j].name: int(n) for j, n in zip(self.numeric, row)}

    def parts(self, with_values: bool = False) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """As ``RowStore.parts``: codes ``(n, d)`` and, ``with_values``, values ``(n, d)`` (NaN in the
        categorical columns), in the table's order."""
        d = len(self.schema.columns)
        names = [f"c{j}" for j in range(d)] + ([f"v{j}" for j in self.numeric] if with_values else [])
        with self._con.cursor() as cur:  # its own connection: other queries may run between parts
            yield from self._read(
                cur.sql(f"SELECT {', '.join(names)} FROM memory.main.privsyn_cells").to_arrow_reader(PART_ROWS),
                with_values,
            )

    def _read(self, reader, with_values: bool) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        d = len(self.schema.columns)
        for batch in reader:
            codes = np.column_stack([batch.column(j).to_numpy(zero_copy_only=False) for j in range(d)])
            codes = codes.astype(self.dtype, copy=False)
            values = None
            if with_values:
                values = np.full((batch.num_rows, d), np.nan)
                for k, j in enumerate(self.numeric):
                    values[:, j] = batch.column(d + k).to_numpy(zero_copy_only=False)
            yield codes, values

    def _table(self, sql: str) -> Any:
        with self._con.cursor() as cur:
            return cur.sql(sql).to_arrow_table()

    def _one(self, sql: str) -> tuple:
        with self._con.cursor() as cur:
            return cur.execute(sql).fetchall()[0]

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
    for each numeric column its clipped value ``v{j}`` and clipped flag ``k{j}``, from ``source``."""
    kind = CODE_TYPES[code_dtype(schema.shape).name]
    out = []
    for j, col in enumerate(schema.columns):
        if col.name not in types:  # the silo column, which the table does not hold
            assert isinstance(col, CategoricalColumn) and site is not None
            out.append(f"CAST({col.categories.index(site[1])} AS {kind}) AS c{j}")
            continue
        out.append(f"CAST({cell_sql(col, quoted(col.name))} AS {kind}) AS c{j}")
    for j, col in enumerate(schema.columns):
        if isinstance(col, NumericColumn):
            out += [f"{value_sql(col, quoted(col.name))} AS v{j}", f"{clipped_sql(col, quoted(col.name))} AS k{j}"]
    return f"SELECT {', '.join(out)} FROM {source}"
