"""A column's cells as SQL, so that an engine (DuckDB, PostgreSQL) counts marginals where the rows
live and only count vectors come back.

``cell_sql(col, ref)`` is an SQL expression whose value is the cell of each row exactly as
``schema.encode`` gives it for the same value:
* a numeric column: missing (NULL, NaN) -> ``missing_cell``; infinite -> NULL (a row the release
  must refuse); else the value clipped to ``[lower, upper]``; an atom's value (rounded half to even
  first for an integer column) -> its cell; else its bin: with cut points, the number of cuts at or
  below the value (a binary search of ``CASE``s on the cut array itself, never a division, so an
  edge value lands where ``searchsorted`` puts it); an integer column's equal-width bin
  ``min(((round(x) - lower) * B) // m, B - 1)`` in exact integers (64-bit where they hold it); a
  real column's ``min(floor((x - lower) / (upper - lower) * B), B - 1)`` in doubles, the same
  operations in the same order as numpy's, so IEEE arithmetic gives the same bin;
* a categorical column: text stripped as ``str.strip`` strips it, looked up once: a missing token
  -> the missing cell; a category -> its index; any other text -> the ``unknown`` category's index,
  or NULL (a row the release must refuse).
``numeric_cell``, ``kept_value`` and ``was_clipped`` give a numeric cell, its clipped value and
whether it was clipped from the value as a double and clipped (``as_double``, ``clipped_value``),
so that a query can compute those two once a row.
``marginal_sql(schema, clique, source)`` counts the cells of one clique (``GROUP BY``), and
``counts_from_rows`` turns the engine's ``(cells..., count)`` rows into the row-major count vector
``Silo.marginal`` gives. ``DUCKDB`` and ``POSTGRES`` differ in how they round half to even
(PostgreSQL's ``round(double)`` does), their wide integers and integer division, how they test for
NaN and infinity, and how they trim and look text up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from ..schema import WHITESPACE, CategoricalColumn, NumericColumn, Schema, missing_tokens


@dataclass(frozen=True)
class Dialect:
    """What an engine calls: rounding half to even, a wide integer type, integer division, tests for NaN
    and infinity, trimming, and looking a text up in a list."""

    round_even: str  # "{x}" rounded half to even
    wide: str  # an integer type that holds (x - lower) * bins
    div: str  # "{a}" divided by "{b}", rounded down (both non-negative)
    isnan: str  # "{x}" is NaN
    isinf: str  # "{x}" is infinite
    trim: str  # "{x}" without the characters "{chars}" at either end
    position: str  # the place (from 1) of "{x}" among the texts "{items}", NULL where absent
    pick: str  # the "{i}"-th (from 1) of the integers "{items}", NULL where "{i}" is NULL


DUCKDB = Dialect(
    "ROUND_EVEN({x}, 0)",
    "HUGEINT",
    "({a} // {b})",
    "isnan({x})",
    "isinf({x})",
    "trim({x}, {chars})",
    "list_position([{items}], {x})",
    "list_extract([{items}], {i})",
)
POSTGRES = Dialect(
    "round({x})",
    "NUMERIC",
    "div({a}, {b})",
    "({x} = 'NaN'::float8)",
    "({x} IN ('Infinity'::float8, '-Infinity'::float8))",
    "btrim({x}, {chars})",
    "array_position(ARRAY[{items}]::text[], {x})",
    "(ARRAY[{items}]::int[])[{i}]",
)


def quoted(name: str) -> str:
    """An SQL identifier in double quotes."""
    return '"' + name.replace('"', '""') + '"'


def literal(value: float | str) -> str:
    """An exact SQL literal: a double by its shortest round-trip text, or a quoted string."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return f"CAST('{float(value)!r}' AS DOUBLE PRECISION)"


def cell_sql(col: NumericColumn | CategoricalColumn, ref: str, dialect: Dialect = DUCKDB) -> str:
    """The SQL expression of the cell of ``ref`` (a column reference) in ``col`` (module docstring)."""
    if isinstance(col, CategoricalColumn):
        return _categorical(col, ref, dialect)
    v = as_double(ref)
    return numeric_cell(col, v, clipped_value(col, v), dialect)


def as_double(ref: str) -> str:
    """``ref`` (a numeric column) as a double, NULL where it is NULL."""
    return f"CAST({ref} AS DOUBLE PRECISION)"


def clipped_value(col: NumericColumn, v: str) -> str:
    """The double ``v`` clipped to ``[lower, upper]`` (meaningless where ``v`` is NULL or NaN)."""
    return f"least(greatest({v}, {literal(col.lower)}), {literal(col.upper)})"


def numeric_cell(col: NumericColumn, v: str, x: str, d: Dialect = DUCKDB) -> str:
    """The cell of a numeric column's value: ``v`` the value as a double (``as_double``), ``x`` it
    clipped (``clipped_value``), each an expression or the name of a column holding it."""
    missing = str(col.missing_cell) if col.missing else "NULL"
    return (
        f"(CASE WHEN {v} IS NULL OR {d.isnan.format(x=v)} THEN {missing} "
        f"WHEN {d.isinf.format(x=v)} THEN NULL ELSE {_numeric_cell(col, x, d)} END)"
    )


def kept_value(v: str, x: str, d: Dialect = DUCKDB) -> str:
    """The value ``encode`` keeps of a numeric cell: ``x`` (clipped), NaN where ``v`` is missing."""
    return f"(CASE WHEN {v} IS NULL OR {d.isnan.format(x=v)} THEN CAST('NaN' AS DOUBLE PRECISION) ELSE {x} END)"


def was_clipped(col: NumericColumn, v: str, d: Dialect = DUCKDB) -> str:
    """Whether a present, finite ``v`` lies outside ``[lower, upper]`` (``encode``'s clipped count)."""
    return (
        f"({v} IS NOT NULL AND NOT {d.isnan.format(x=v)} AND NOT {d.isinf.format(x=v)} "
        f"AND ({v} < {literal(col.lower)} OR {v} > {literal(col.upper)}))"
    )


def _numeric_cell(col: NumericColumn, x: str, d: Dialect) -> str:
    value = d.round_even.format(x=x) if col.integer else x
    bin_ = _bin(col, x, d)
    if not col.atoms:
        return bin_
    atoms = " ".join(f"WHEN {value} = {literal(a)} THEN {col.first_atom_cell + i}" for i, a in enumerate(col.atoms))
    return f"(CASE {atoms} ELSE {bin_} END)"


def _bin(col: NumericColumn, x: str, d: Dialect) -> str:
    cuts = col.cuts
    if cuts is not None and len(cuts) == 0:
        return "0"
    if cuts is not None:
        value = d.round_even.format(x=x) if col.integer else x
        return _cut_search([float(c) for c in cuts], value, 0, len(cuts))
    B = col.n_bins
    if col.integer:
        wide = "BIGINT" if col.whole_numbers * B < 2**62 else d.wide  # (x - lower) * B in 64 bits when it fits
        k = f"(CAST({d.round_even.format(x=x)} AS {wide}) - {int(col.lower)})"
        return f"CAST(least({d.div.format(a=f'{k} * {B}', b=col.whole_numbers)}, {B - 1}) AS BIGINT)"
    if col.upper == col.lower:
        return "0"
    span = f"({literal(col.upper)} - {literal(col.lower)})"
    scaled = f"(({x} - {literal(col.lower)}) / {span} * {B})"
    return f"CAST(least(greatest(floor({scaled}), 0), {B - 1}) AS BIGINT)"


def _cut_search(cuts: list[float], value: str, lo: int, hi: int) -> str:
    """The number of ``cuts`` at or below ``value``, known to lie in ``[lo, hi]``: a binary search
    of nested ``CASE``s, ``log2`` comparisons a row."""
    if lo == hi:
        return str(lo)
    mid = (lo + hi) // 2
    below, above = _cut_search(cuts, value, lo, mid), _cut_search(cuts, value, mid + 1, hi)
    return f"(CASE WHEN {value} < {literal(cuts[mid])} THEN {below} ELSE {above} END)"


def _categorical(col: CategoricalColumn, ref: str, d: Dialect) -> str:
    """The text compared as it stands with the missing tokens and the categories (stripped texts,
    so an exact match is the stripped text's match); any other text that starts or ends with white
    space stripped as ``str.strip`` strips it and looked up once (stripping is the slow part). A
    token gives the missing cell, a category its index, other text the ``unknown`` category's; -1
    (then NULL) marks a cell the schema refuses."""
    raw = f"CAST({ref} AS VARCHAR)"
    tokens = missing_tokens(col)
    missing = len(col.categories) if col.missing else -1
    pairs = [*((t, missing) for t in tokens), *((c, i) for i, c in enumerate(col.categories))]
    labels = ", ".join(literal(t) for t, _ in pairs)
    codes = ", ".join(str(c) for _, c in pairs)
    other = -1 if col.unknown is None else col.categories.index(col.unknown)
    text = d.trim.format(x=raw, chars=literal(WHITESPACE))
    stripped = f"nullif(coalesce({d.pick.format(items=codes, i=d.position.format(items=labels, x=text))}, {other}), -1)"
    exact = " ".join(f"WHEN {raw} = {literal(t)} THEN {'NULL' if c < 0 else c}" for t, c in pairs)
    ws = literal(WHITESPACE)
    padded = f"(strpos({ws}, left({raw}, 1)) > 0 OR strpos({ws}, right({raw}, 1)) > 0)"  # '' counts as padded
    unpadded = "NULL" if other < 0 else str(other)  # no match as it stands, and nothing to strip
    return (
        f"(CASE WHEN {ref} IS NULL THEN {'NULL' if missing < 0 else missing} {exact} "
        f"WHEN {padded} THEN {stripped} ELSE {unpadded} END)"
    )


def marginal_sql(schema: Schema, clique: Sequence[int], source: str, dialect: Dialect = DUCKDB) -> str:
    """``SELECT c0, c1, ..., count(*) FROM source GROUP BY ...``: the cells of ``clique`` (column
    indices) counted by the engine; ``source`` is a table reference or a parenthesised query."""
    cells = [
        f"{cell_sql(schema.columns[j], quoted(schema.columns[j].name), dialect)} AS c{k}" for k, j in enumerate(clique)
    ]
    keys = ", ".join(str(k + 1) for k in range(len(clique)))
    return f"SELECT {', '.join(cells)}, count(*) AS n FROM {source} GROUP BY {keys}"


def counts_from_rows(schema: Schema, clique: Sequence[int], rows: Iterable[Sequence]) -> np.ndarray:
    """The row-major count vector over ``clique``'s cells from an engine's ``(cells..., count)`` rows;
    ``ValueError`` for a row with no cell (NULL: a value the schema refuses)."""
    shape = tuple(schema.shape[j] for j in clique)
    out = np.zeros(int(np.prod(shape)), dtype=np.int64)
    for row in rows:
        cells, n = row[:-1], row[-1]
        if any(c is None for c in cells):
            raise ValueError("a row has a value the schema refuses")
        out[np.ravel_multi_index(tuple(int(c) for c in cells), shape)] += int(n)
    return out
