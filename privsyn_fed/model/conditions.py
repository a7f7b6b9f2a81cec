"""Public conditions on a released model's rows (``sample --where``, ``model.sample(where=...)``).

A condition names, per column, the values a row must take, written as a schema's constraints write
them (``schema.constraints.ValueSet``): categories (or the missing value), or for a numeric column
one number or one inclusive range. Over the model's cells it is the weight ``w(cell)``: 1 or 0 for a
category or the missing cell; for a numeric bin, the share of the bin's values inside the range:
values are drawn inside their bin along the model's frequency polygon (``schema.bin_shape``), so
``w = G(t1) - G(t0)`` with ``G`` the bin's distribution function and ``t0..t1`` the range's positions
in the bin (``schema.range_positions``: by length, or by an integer column's whole numbers other than
its atoms; the uniform's share where no shape is given); for an atom's cell, 1 or 0 as the atom lies
inside the range or not. Conditioning the model on ``w`` and then drawing each value from ``G``
between ``t0`` and ``t1`` gives exactly the model's rows given the condition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..common import InputError
from ..schema import (
    BinShape,
    CategoricalColumn,
    NumericColumn,
    Schema,
    ValueSet,
    column_values,
    parse_values,
    range_positions,
    shape_cdf,
    uniform_shape,
)

#: The command line's separator between alternatives: ``region=north|south``.
EITHER = "|"
#: The command line's word for the missing value.
MISSING = "(missing)"


@dataclass(frozen=True)
class Condition:
    """One column's allowed values (``values``)."""

    values: ValueSet

    @property
    def column(self) -> str:
        """The column's name."""
        return self.values.column

    @property
    def range(self) -> tuple[float, float] | None:
        """A numeric column's inclusive range (``None`` for a categorical column or the missing value)."""
        return self.values.ranges[0] if self.values.ranges else None

    def describe(self) -> str:
        """The condition in words (``region = south``, ``age in 30..40``)."""
        return self.values.describe()

    def weights(self, schema: Schema, shape: BinShape | None = None) -> np.ndarray:
        """``w`` over the column's cells (module docstring); a numeric bin's share of the range under
        ``shape`` where given (``schema.bin_shape``), else the uniform's."""
        col = self.values.col
        w = np.zeros(col.size)
        if col.missing and self.values.missing:
            w[-1] = 1.0
        if isinstance(col, CategoricalColumn):
            for c in self.values.categories:
                w[col.categories.index(c)] = 1.0
            return w
        if self.range is None:
            return w
        low, high = self.range
        atoms = np.asarray(col.atoms, dtype=float)
        w[col.first_atom_cell : col.missing_cell] = (atoms >= low) & (atoms <= high)
        t0, t1 = range_positions(col, low, high)
        shape = uniform_shape(col.n_bins) if shape is None else shape
        w[: col.n_bins] = shape_cdf(shape, t1) - shape_cdf(shape, t0)
        return w

    def holds(self, frame: pd.DataFrame) -> np.ndarray:
        """Whether each row of a decoded table meets the condition."""
        return self.values.holds(column_values(self.values.col, frame[self.column]))


def parse_where(items: Sequence[str], schema: Schema) -> list[Condition]:
    """``COLUMN=VALUE`` strings of the command line as conditions; ``InputError`` names the one at fault."""
    conditions: list[Condition] = []
    for item in items:
        column, sep, text = item.partition("=")
        if not sep or not column:
            raise InputError(f"--where {item!r}: write COLUMN=VALUE (or COLUMN=LO..HI for a numeric column)")
        conditions.append(condition_for(schema, column, text, where=f"--where {item!r}"))
    return checked(conditions)


def conditions_from(where: Mapping[str, Any] | Sequence[str] | str | None, schema: Schema) -> list[Condition]:
    """The API's ``where``: a mapping ``{column: value}`` where the value is a category, a number, a
    ``(low, high)`` tuple (``None`` for an open end), a list of categories, or ``None`` (the missing
    value); or command-line strings. ``InputError`` names the column at fault."""
    if where is None:
        return []
    if isinstance(where, Mapping):
        return checked([condition_for(schema, str(c), v, where=f"where[{c!r}]") for c, v in where.items()])
    return parse_where([where] if isinstance(where, str) else list(where), schema)


def condition_for(schema: Schema, column: str, value: Any, *, where: str) -> Condition:
    """One column's condition from a command-line string or an API value (``conditions_from``)."""
    if column not in schema.names:
        raise InputError(f"{where}: no column {column!r} in the schema (columns: {', '.join(schema.names)})")
    col = schema.columns[schema.names.index(column)]
    values = parse_values(_items(col, value), col, where)
    if len(values.ranges) > 1:
        raise InputError(f"{where}: a numeric column takes one number or one range LO..HI")
    if isinstance(col, NumericColumn) and values.ranges and values.missing:
        raise InputError(f"{where}: a numeric column takes a range or the missing value, not both")
    if (
        isinstance(col, NumericColumn)
        and not col.integer
        and values.ranges
        and values.ranges[0][0] == values.ranges[0][1]
        and values.ranges[0][0] not in col.atoms
    ):
        raise InputError(
            f"{where}: a single value of the continuous column {column!r} has probability 0; give a range LO..HI "
            '(or declare the value among the column\'s "atoms")'
        )
    return Condition(values)


def checked(conditions: list[Condition]) -> list[Condition]:
    """Refuse two conditions on one column."""
    seen: set[str] = set()
    for c in conditions:
        if c.column in seen:
            raise InputError(f"two conditions on column {c.column!r}: give one (values joined with '{EITHER}')")
        seen.add(c.column)
    return conditions


def _items(col: Any, value: Any) -> Any:
    """A condition's value as the schema's value lists write it: ``(low, high)`` as ``"LO..HI"``,
    ``(missing)`` as ``None``, and on the command line ``A|B`` as a list (unless it is a category)."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(col, NumericColumn):
        low, high = ("" if v is None else repr(float(v)) for v in value)
        return f"{low}..{high}"
    if isinstance(value, (list, tuple, set, frozenset)):
        return [None if v == MISSING else v for v in value]
    if isinstance(value, str):
        if value == MISSING:
            return None
        if EITHER in value and not (isinstance(col, CategoricalColumn) and value in col.categories):
            return [None if v == MISSING else v for v in value.split(EITHER)]
    return value
