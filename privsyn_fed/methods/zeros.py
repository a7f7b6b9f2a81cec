"""Structural zeros: the cells of a schema's public constraints that no allowed row falls in.

A constraint (``schema.constraints``) forbids the rows of a conjunction ``when`` (and, for an
implication, not ``then``). Over the cells of its columns ``C`` a cell is a structural zero when
every row it decodes to is forbidden: every ``when`` column's cell lies wholly inside its value
set and, for an implication, some ``then`` column's cell lies wholly outside its own. A numeric
bin lies wholly inside a set when its ranges (joined where they meet) hold every value the bin
decodes to (weight 1 in ``model.conditions``), wholly outside when none holds any (weight 0); a
bin cut by a range's end is neither, and rejection (``model.rejection``) still removes the
forbidden rows drawn from it (``schema.cut_at_rules`` gives a schema whose bins no range cuts).
The constraints are public, so fitting a model with these cells held at probability 0 is
post-processing of the released measurements; the numpy estimator does it in the final fit
(``core.final_fit``, ``mirror``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from ..model import Condition
from ..schema import Schema, ValueSet, joined_ranges

#: Constraints over more columns than this give no zeros (their cliques would grow the model).
MAX_COLUMNS = 3


def _cover(values: ValueSet, schema: Schema) -> tuple[np.ndarray, np.ndarray]:
    """Per cell of the set's column: whether every value of the cell lies inside the set, and
    whether none does."""
    one = [replace(values, ranges=(r,), categories=(), missing=False) for r in joined_ranges(values)]
    if values.categories or values.missing or not values.ranges:
        one.append(replace(values, ranges=()))
    w = np.array([Condition(v).weights(schema) for v in one])
    return np.asarray((w >= 1.0).any(axis=0)), np.asarray((w <= 0.0).all(axis=0))


def structural_zeros(schema: Schema, names: Sequence[str]) -> list[tuple[tuple[str, ...], np.ndarray]]:
    """``(clique, zero)`` for each column set of at most ``MAX_COLUMNS`` columns (in ``names``'
    order) that the schema's constraints make hold a structural zero: ``zero`` a boolean table over
    the clique's cells (module docstring), the union over the constraints on that set."""
    order = {n: i for i, n in enumerate(names)}
    shape = dict(zip(schema.names, schema.shape))
    found: dict[tuple[str, ...], np.ndarray] = {}
    for con in schema.constraints:
        clique = tuple(sorted(con.columns, key=order.__getitem__))
        if len(clique) > MAX_COLUMNS or any(c not in order for c in clique):
            continue
        grid = np.ones([shape[c] for c in clique], dtype=bool)
        for v in con.when:
            inside, _ = _cover(v, schema)
            grid &= _along(inside, clique.index(v.column), len(clique))
        if con.then is not None:
            escapes = np.zeros_like(grid)
            for v in con.then:
                _, outside = _cover(v, schema)
                escapes |= _along(outside, clique.index(v.column), len(clique))
            grid &= escapes
        if grid.any():
            found[clique] = found[clique] | grid if clique in found else grid
    return list(found.items())


def _along(values: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """``values`` shaped to broadcast along ``axis`` of an ``ndim``-dimensional table."""
    shape = [1] * ndim
    shape[axis] = values.size
    return values.reshape(shape)
