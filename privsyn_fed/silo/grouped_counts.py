"""Marginals counted by an engine over a table of a silo's cells (``c0``, ``c1``, ... one column
per schema column): ``GROUP BY GROUPING SETS``, one scan for any number of cliques, only count
vectors back: one ``GROUP BY`` of the union of their columns where its cells are few, else one set
per group of columns covering them (``column_groups``), each clique summed here from its set's
counts; a clique inside a column set counted before is summed from it. ``EngineStore``
(DuckDB) and ``SparkStore`` (Spark) name their table and the engine's grouping function."""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

from .column_groups import covering_groups, summed

#: Cliques whose columns together have at most this many cells are counted in one ``GROUP BY`` of
#: those columns and summed here (an engine's ``GROUPING SETS`` may scan once per set: Spark's does).
JOINT_CELLS = 1 << 22


class GroupedCounts:
    """The counting part of a store whose cells live in an engine (module docstring)."""

    #: The engine's table of cells, and its function that numbers a row's grouping set.
    cells: str
    grouping: str
    count: int
    #: Whether ``GROUP BY`` names its columns before ``GROUPING SETS`` (Spark: the grouping function's
    #: arguments must then list the grouping columns in the order it takes them from there).
    keys_first: bool = False

    def __init__(self) -> None:
        self._counted: dict[tuple[int, ...], np.ndarray] = {}

    def _table(self, sql: str) -> Any:
        """The Arrow table of an SQL query's rows."""
        raise NotImplementedError

    def marginals(self, shape: Sequence[int], cliques: Iterable[Sequence[int]]) -> dict[tuple[int, ...], np.ndarray]:
        """The count vector of each clique (row-major over its cells, in its own column order): those
        inside a column set counted before summed from it, the others in one ``GROUPING SETS`` scan."""
        wanted = {tuple(c) for c in cliques}
        missing = sorted({tuple(sorted(c)) for c in wanted if c and self._inside(tuple(sorted(c))) is None})
        if missing:
            self._count(shape, missing)
        return {c: self._answer(shape, c) for c in wanted}

    def _inside(self, columns: tuple[int, ...]) -> tuple[int, ...] | None:
        if columns in self._counted:
            return columns
        return next((k for k in self._counted if set(columns) <= set(k)), None)

    def _count(self, shape: Sequence[int], sets: list[tuple[int, ...]]) -> None:
        used = sorted({j for s in sets for j in s})
        if len(sets) > 1 and math.prod(shape[j] for j in used) <= JOINT_CELLS:
            sets = [tuple(used)]  # one GROUP BY of every column used; each set is summed from it
        elif len(sets) > 1:  # fewer, wider sets (``column_groups``), each clique summed from one
            sets = covering_groups(sets, shape)
        grouping = ", ".join("(" + ", ".join(f"c{j}" for j in s) + ")" for s in sets)
        keys = ", ".join(f"c{j}" for j in used)
        group_by = f"{keys} GROUPING SETS" if self.keys_first else "GROUPING SETS"
        sql = (
            f"SELECT {keys}, {self.grouping}({keys}) AS g, count(*) AS n FROM {self.cells} "
            f"GROUP BY {group_by} ({grouping})"
        )
        result = self._table(sql)
        g = result.column("g").to_numpy()
        n = result.column("n").to_numpy().astype(np.int64)
        columns = {j: result.column(f"c{j}").fill_null(0).to_numpy().astype(np.int64) for j in used}
        for s in sets:  # GROUPING's bit for a column is 1 where the set leaves it out, first column highest
            mask = sum(1 << (len(used) - 1 - used.index(j)) for j in used if j not in s)
            rows = g == mask
            dims = [shape[j] for j in s]
            out = np.zeros(int(np.prod(dims)), dtype=np.int64)
            np.add.at(out, np.ravel_multi_index(tuple(columns[j][rows] for j in s), dims), n[rows])
            self._counted[s] = out

    def _answer(self, shape: Sequence[int], clique: tuple[int, ...]) -> np.ndarray:
        if not clique:
            return np.array([self.count], dtype=np.int64)
        source = self._inside(tuple(sorted(clique)))
        assert source is not None
        return summed(self._counted[source], source, shape, clique)
