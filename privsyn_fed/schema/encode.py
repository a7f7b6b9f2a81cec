"""Raw values <-> integer codes on the schema's public domain.

Encoding (runs inside a silo, on private rows):
  * numeric ``x`` is clipped to ``[lower, upper]`` and mapped to bin
    ``min(B - 1, floor((x - lower) / (upper - lower) * B))``; integer columns round ``x`` to the
    nearest whole number ``lower + k`` and use bin ``floor(k * B / m)`` (see ``NumericColumn``);
    a value equal to one of the column's ``atoms`` goes to that atom's cell instead (``numeric_cell``);
  * a categorical value maps to its index in the schema's list (or to the ``unknown`` category);
  * a missing value maps to the column's last cell when the schema allows it.
Values are read as text and stripped of surrounding white space.

Decoding (post-processing of private output, so ordinary numpy randomness is fine): a numeric
bin becomes a value drawn inside the bin, uniformly or along given polygon heights (``bin_shape``;
for integer columns a whole number of the bin other than its atoms; a bin of atoms only gives its
lowest value), which never leaves the schema's bounds; an atom's cell becomes exactly the atom. A
column with ``decimals`` then has its values rounded onto that grid inside the bounds
(``numeric_keys.rounded``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

import numpy as np
import pandas as pd

from ..common import InputError, delimiter_hint
from .bin_shape import BinShape, shape_cdf, shape_unit, uniform_shape
from .cells import check_cell_types, column_cells, missing_mask, numbers_as_text, shown
from .numeric_keys import rounded
from .schema import CategoricalColumn, NumericColumn, Schema


def check_columns(header: list[str], schema: Schema, source: str) -> list[str]:
    """Reject a table that lacks any of the schema's columns (one error naming them all) or repeats
    a name; return its other columns, in its order: they are ignored (``ignored_note``)."""
    seen = set()
    for name in header:
        if name in seen:
            raise InputError(f"{source}: column '{name}' appears twice")
        seen.add(name)
    missing = [name for name in schema.names if name not in seen]
    if missing:
        raise InputError(
            f"{source}: missing column{'s' if len(missing) > 1 else ''} {quoted(missing)} (the schema declares "
            f"{'them' if len(missing) > 1 else 'it'})" + delimiter_hint(",".join(header))
        )
    declared = set(schema.names)
    return [name for name in header if name not in declared]


def quoted(names: list[str]) -> str:
    """``'a', 'b', 'c'``."""
    return ", ".join(f"'{n}'" for n in names)


def ignored_note(source: str, names: list[str]) -> str:
    """The note that a table's columns ``names``, not in the schema, are ignored."""
    s = "s" if len(names) > 1 else ""
    return f"{source}: column{s} not in the schema, ignored (never read): {quoted(names)}"


def cell_error(source: str, row: int, column: str, problem: str, public: str, fix: str = "") -> InputError:
    """An error about one cell: ``problem`` may quote the cell's value (for this host's operator);
    ``public`` says the same without it, for the message an MPC party relays to party 0."""
    where = f"{source}: row {row}, column '{column}'"
    return InputError(
        f"{where}: {problem}" + (f" ({fix})" if fix else ""),
        public=f"{where}: {public} ({fix + '; ' if fix else ''}the value itself is not shown to the other parties)",
    )


def encode_frame(df: pd.DataFrame, schema: Schema, source: str, with_values: bool = False, first_row: int = 2):
    """Encode a table; returns ``(codes, clipped)`` (``with_values``: also ``values``).

    Cells are text, or typed as a user's data frame or a Parquet file holds them (``column_cells``).
    ``codes`` is an ``(n, d)`` int64 array in schema column order; ``clipped`` counts, per numeric
    column, the values that lay outside the public bounds (private: for the silo's operator only);
    ``values`` is an ``(n, d)`` float array of the numeric values clipped to their bounds (NaN for
    missing values and for categorical columns). Errors call the frame's first row ``first_row``
    (the default 2 makes them CSV line numbers, the header being line 1).
    """
    ignored = set(check_columns([str(c) for c in df.columns], schema, source))
    if ignored:  # columns not in the schema are never read
        df = df.loc[:, [str(c) not in ignored for c in df.columns]]
    check_cell_types(df, source)
    if len(df) == 0:
        raise InputError(f"{source}: the table has no rows")
    codes, clipped, values = encode_columns(
        schema, len(df), lambda col: encode_cells(col, column_cells(df[col.name]), source, first_row)
    )
    return (codes, clipped, values) if with_values else (codes, clipped)


def encode_columns(schema: Schema, n_rows: int, encode_one) -> tuple[np.ndarray, dict[str, int], np.ndarray]:
    """``(codes, clipped, values)`` of ``n_rows`` rows, column by column: ``encode_one(col)`` gives a
    column's ``encode_cells`` result."""
    codes = np.empty((n_rows, len(schema.columns)), dtype=np.int64)
    values = np.full((n_rows, len(schema.columns)), np.nan)
    clipped: dict[str, int] = {}
    for j, col in enumerate(schema.columns):
        codes[:, j], n_clipped, x = encode_one(col)
        if isinstance(col, NumericColumn):
            clipped[col.name], values[:, j] = n_clipped, x
    return codes, clipped, values


def encode_cells(
    col: NumericColumn | CategoricalColumn, cells: np.ndarray, source: str, first_row: int
) -> tuple[np.ndarray, int, np.ndarray | None]:
    """One column's ``(codes, clipped, values)`` from its cells as ``column_cells`` reads them (floats
    with NaN where missing, or stripped text); ``values`` (NaN where missing) only for a numeric
    column. ``InputError`` naming the row (``first_row`` is the first cell's) and column."""
    if isinstance(col, CategoricalColumn) and cells.dtype.kind == "f":
        cells = numbers_as_text(cells)
    is_missing = np.isnan(cells) if cells.dtype.kind == "f" else missing_mask(col, cells)
    if is_missing.any() and not col.missing:
        row = int(np.argmax(is_missing))
        raise InputError(
            f"{source}: row {row + first_row}, column '{col.name}': missing value "
            f'(declare "missing": true in the schema to allow it)'
        )
    if isinstance(col, NumericColumn):
        codes, n_clipped, x = _encode_numeric(col, cells, is_missing, source, first_row)
        return codes, n_clipped, np.where(is_missing, np.nan, x)
    return _encode_categorical(col, cells, is_missing, source, first_row), 0, None


def _encode_numeric(
    col: NumericColumn, cells: np.ndarray, is_missing: np.ndarray, source: str, first_row: int
) -> tuple[np.ndarray, int, np.ndarray]:
    if cells.dtype.kind == "f":
        values = cells
    else:
        values = pd.to_numeric(pd.Series(np.where(is_missing, "nan", cells), dtype=object), errors="coerce").to_numpy(
            float
        )
    bad = ~is_missing & ~np.isfinite(values)
    if bad.any():
        row = int(np.argmax(bad))
        raise cell_error(
            source, row + first_row, col.name, f"{shown(cells[row])} is not a number", "a value that is not a number"
        )
    present = ~is_missing
    n_clipped = int(np.sum(present & ((values < col.lower) | (values > col.upper))))
    x = np.clip(np.where(present, values, col.lower), col.lower, col.upper)
    codes = numeric_cell(col, x)
    if col.missing:
        codes[is_missing] = col.missing_cell
    return codes, n_clipped, x


def numeric_cell(col: NumericColumn, x: np.ndarray) -> np.ndarray:
    """Cell of values already clipped to the column's bounds: ``first_atom_cell + i`` for a value
    equal to ``atoms[i]`` (rounded to a whole number first for an integer column), else its bin
    (``numeric_bin``)."""
    codes = numeric_bin(col, x)
    if col.atoms:
        atoms = np.asarray(col.atoms)
        v = np.rint(x) if col.integer else np.asarray(x, dtype=float)
        i = np.minimum(np.searchsorted(atoms, v), len(atoms) - 1)
        hit = atoms[i] == v
        codes[hit] = col.first_atom_cell + i[hit]
    return codes


def numeric_bin(col: NumericColumn, x: np.ndarray) -> np.ndarray:
    """Bin index of values already clipped to the column's bounds (at public cut points: the number
    of cut points at or below the value)."""
    cuts = col.cuts
    if cuts is not None:
        values = np.rint(x) if col.integer else np.asarray(x, dtype=float)
        return np.searchsorted(cuts, values, side="right").astype(np.int64)
    B = col.n_bins
    if col.integer:
        m = col.whole_numbers
        k = np.rint(x).astype(np.int64) - int(col.lower)  # exact: no float difference
        return np.minimum(_times_over(k, B, m), B - 1)
    if col.upper == col.lower:
        return np.zeros(len(x), dtype=np.int64)
    scaled = (x - col.lower) / (col.upper - col.lower) * B
    return np.clip(np.floor(scaled), 0, B - 1).astype(np.int64)


def _encode_categorical(
    col: CategoricalColumn, text: np.ndarray, is_missing: np.ndarray, source: str, first_row: int
) -> np.ndarray:
    raw = pd.Index(col.categories, dtype=object).get_indexer(text)
    codes, bad = category_codes(col, raw, is_missing)
    if bad.any():
        row = int(np.argmax(bad))
        raise cell_error(
            source,
            row + first_row,
            col.name,
            f"category {text[row]!r} is not in the schema",
            "a value that is not in the schema's categories",
            'declare it, or set "unknown" to a catch-all',
        )
    return codes


def category_codes(col: CategoricalColumn, raw: np.ndarray, is_missing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes from each cell's index among the categories (``raw``, -1 for none): the ``unknown``
    category for other text, the last cell for a missing one; and the cells that have no code."""
    codes = raw.astype(np.int64)
    if col.unknown is not None:
        codes[codes < 0] = col.categories.index(col.unknown)
    bad = (codes < 0) & ~is_missing
    if col.missing:
        codes[is_missing] = len(col.categories)
    return codes, bad


def decode_codes(
    codes: np.ndarray,
    schema: Schema,
    rng: np.random.Generator,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    shapes: Mapping[str, BinShape] | None = None,
) -> pd.DataFrame:
    """Turn an ``(n, d)`` code array into a table of values in schema order: a numeric value inside its
    bin, or inside its bin's part of ``ranges[column]`` (inclusive) where one is given: uniformly, or
    along ``shapes[column]`` (each bin's shape, ``bin_shape``) where given (``decode_numeric``)."""
    codes = np.asarray(codes, dtype=np.int64)
    ranges = ranges or {}
    shapes = shapes or {}
    out = {}
    for j, col in enumerate(schema.columns):
        c = codes[:, j]
        if not np.all((c >= 0) & (c < col.size)):
            raise ValueError(f"code outside the domain of column '{col.name}'")
        missing = c == (col.size - 1) if col.missing else np.zeros(len(c), dtype=bool)
        if isinstance(col, NumericColumn):
            values = decode_numeric(col, np.where(missing, 0, c), rng, ranges.get(col.name), shapes.get(col.name))
            series = pd.Series(values, dtype="Int64" if col.integer else "Float64")
        else:
            cats = np.array(col.categories, dtype=object)
            series = pd.Series(cats[np.where(missing, 0, c)], dtype=object)
        series[missing] = pd.NA
        out[col.name] = series
    return pd.DataFrame(out, columns=schema.names)


def decode_numeric(
    col: NumericColumn,
    c: np.ndarray,
    rng: np.random.Generator,
    within: tuple[float, float] | None = None,
    shape: BinShape | None = None,
) -> np.ndarray:
    """Values of a numeric column's present cells ``c`` (module docstring): each at a position of its
    bin drawn along ``shape`` (``bin_shape``; uniform without), restricted to ``within`` (inclusive)
    where given (``range_positions``: the draw's distribution function taken between the range's two
    positions); int64 for an integer column, else floats."""
    atom = c >= col.first_atom_cell
    b = np.where(atom, 0, c)
    edges = bin_edges(col)
    lo, hi = edges[0][b], edges[1][b]
    ones = np.ones(len(b))
    drawn = (uniform_shape(col.n_bins) if shape is None else shape).at(b)
    u = rng.random(len(b))
    t0, t1 = (np.zeros(len(b)), ones) if within is None else (t[b] for t in range_positions(col, *within))
    if within is not None:
        g0, g1 = shape_cdf(drawn, t0), shape_cdf(drawn, t1)
        u = g0 + u * (g1 - g0)
    t = shape_unit(drawn, u)
    if col.integer:
        values = _whole_number_at(col, lo, hi, t, t0, t1)
    else:
        low, high = (col.lower, col.upper) if within is None else (max(col.lower, within[0]), min(col.upper, within[1]))
        values = np.clip(lo + t * (hi - lo), np.maximum(lo, low), np.minimum(hi, high))
        if col.decimals is not None:
            values = rounded(values, col.decimals, low, high)
    if col.atoms:
        values[atom] = np.asarray(col.atoms)[c[atom] - col.first_atom_cell]
    return values


def range_positions(col: NumericColumn, low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    """Where the inclusive range ``low..high`` begins and ends inside each bin, as positions ``t0 <= t1``
    in ``[0, 1]`` of the bin's room for values: in a real column by length; in an integer column by its
    whole numbers other than atoms (those below the range's first over the bin's count, and those up
    to its last). ``t0 == t1`` where the range misses the bin. A bin of no room (a real bin of width 0,
    an integer bin of atoms only, which decodes to its lowest value) is ``0..1`` when the range holds
    its lowest value, else empty."""
    lo, hi = (np.asarray(e, dtype=float) for e in bin_edges(col))
    holds_lo = ((lo >= low) & (lo <= high)).astype(float)
    if col.integer:
        atoms = np.asarray(col.atoms, dtype=float)
        first = np.maximum(lo, math.ceil(max(low, -(2.0**62))))
        last = np.minimum(hi, math.floor(min(high, 2.0**62)))
        total = bin_lengths(col)[1]
        below = first - lo - _atoms_within(atoms, lo, first - 1)
        upto = np.maximum(last - lo + 1 - _atoms_within(atoms, lo, last), below)
        room = np.where(total > 0, total, 1.0)
        return np.where(total > 0, below / room, 0.0), np.where(total > 0, upto / room, holds_lo)
    width = hi - lo
    room = np.where(width > 0, width, 1.0)
    t0 = np.where(width > 0, np.clip((low - lo) / room, 0.0, 1.0), 0.0)
    t1 = np.where(width > 0, np.clip((high - lo) / room, 0.0, 1.0), holds_lo)
    return t0, np.maximum(t0, t1)


def _atoms_within(atoms: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many of the sorted ``atoms`` lie in each ``[a, b]`` (0 where ``b < a``)."""
    return np.maximum(np.searchsorted(atoms, b, side="right") - np.searchsorted(atoms, a, side="left"), 0)


def _whole_number_at(
    col: NumericColumn, lo: np.ndarray, hi: np.ndarray, t: np.ndarray, t0: np.ndarray, t1: np.ndarray
) -> np.ndarray:
    """The whole number at position ``t`` of ``[lo, hi]`` without the column's atoms: the ``r``-th one,
    ``r = floor(t count)`` kept between the positions ``t0``..``t1`` of a range (``range_positions``),
    is ``lo + r`` moved up past each atom at or below it, atoms taken in ascending order; ``lo`` where
    only atoms lie between."""
    atoms = np.asarray(col.atoms)
    count = hi - lo + 1 - _atoms_within(atoms, lo, hi)
    first, end = np.rint(t0 * count), np.rint(t1 * count)
    k = lo + np.clip(np.floor(t * count), first, np.maximum(end - 1, first))
    for a in atoms:
        k += (a >= lo) & (a <= hi) & (k >= a)
    return np.where(count > 0, k, lo).astype(np.int64)


def bin_lengths(col: NumericColumn) -> tuple[np.ndarray, np.ndarray]:
    """Each bin's span ``L_b`` on the value axis and its room ``n_b`` for values (``bin_shape``): for an
    integer column ``hi - lo + 1`` and the whole numbers in it other than atoms; for a real column
    both ``hi - lo``."""
    lo, hi = (e.astype(float) for e in bin_edges(col))
    if not col.integer:
        return hi - lo, hi - lo
    return hi - lo + 1, hi - lo + 1 - _atoms_within(np.asarray(col.atoms, dtype=float), lo, hi)


def bin_midpoints(codes: np.ndarray, schema: Schema) -> np.ndarray:
    """``(n, d)`` numeric values at the middle of each code's bin, or the atom of an atom's cell (NaN
    for missing/categorical)."""
    out = np.full(codes.shape, np.nan)
    for j, col in enumerate(schema.columns):
        if not isinstance(col, NumericColumn):
            continue
        c = codes[:, j]
        present = c < col.n_bins
        lo, hi = bin_edges(col)
        out[present, j] = (lo[c[present]] + hi[c[present]]) / 2
        atom = (c >= col.first_atom_cell) & (c < col.missing_cell)
        out[atom, j] = np.asarray(col.atoms)[c[atom] - col.first_atom_cell]
    return out


def _times_over(a: np.ndarray, b: int, c: int) -> np.ndarray:
    """``floor(a * b / c)`` exactly, for int64 ``a``: in int64 when ``a * b`` cannot overflow,
    else in Python integers (wide whole-number columns, up to 2^54 values)."""
    if np.abs(a).max(initial=0) * float(b) < 2.0**62:
        return a * b // c
    return (a.astype(object) * b // c).astype(np.int64)


def bin_edges(col: NumericColumn) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper value of each bin (integer columns: the smallest and largest whole number)."""
    cuts = col.cuts
    if cuts is not None:
        lo, hi = np.concatenate([[col.lower], cuts]), np.concatenate([cuts, [col.upper]])
        return (lo, np.concatenate([cuts - 1, [col.upper]])) if col.integer else (lo, hi)
    B = col.n_bins
    b = np.arange(B)
    if col.integer:
        m = col.whole_numbers
        return col.lower + (-_times_over(-b, m, B)), col.lower + (-_times_over(-(b + 1), m, B) - 1)
    if col.upper == col.lower:
        return np.full(B, col.lower), np.full(B, col.upper)
    width = (col.upper - col.lower) / B
    return col.lower + b * width, col.lower + (b + 1) * width


def refined(col: NumericColumn, factor: int) -> NumericColumn:
    """The column with each public bin split in ``factor`` (integer columns: at most one bin per value);
    bins at cut points are split in ``factor`` of equal width (of whole numbers)."""
    if col.cuts is None:
        return dataclasses.replace(col, bins=col.bins * factor)
    lo, hi = bin_edges(col)
    parts = []
    for a, b in zip(lo, hi):
        if col.integer:
            count = int(b) - int(a) + 1
            parts += [a + math.ceil(j * count / factor) for j in range(1, min(factor, count))]
        else:
            parts += [a + (b - a) * j / factor for j in range(1, factor)]
        parts.append(b + 1 if col.integer else b)
    cuts = tuple(float(v) for v in parts[:-1])
    return dataclasses.replace(col, bins=len(cuts) + 1, edges=cuts, scale="linear")


def numeric_histogram(col: NumericColumn, values: np.ndarray) -> np.ndarray:
    """Counts of a silo's values on ``col``'s bins and atoms (``numeric_cell``), then the missing count if
    ``col`` allows it."""
    present = ~np.isnan(values)
    counts = np.bincount(numeric_cell(col, values[present]), minlength=col.missing_cell).astype(np.int64)
    return np.append(counts, np.int64((~present).sum())) if col.missing else counts
