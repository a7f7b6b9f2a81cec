"""Structural zeros: the cells of a schema's public constraints that no allowed row falls in.

A constraint (``schema.constraints``) forbids the rows of a conjunction ``when`` (and, for an
implication, not ``then``). An implication whose ``then`` names several columns forbids
``when and not t`` for each of its parts ``t`` (``not (t1 and t2) = not t1 or not t2``), so each
part gives zeros over the ``when`` columns and its own column alone: smaller cliques, which keep
the final model smaller. Over the cells of such a column set ``C`` a cell is a structural zero
when every row it decodes to is forbidden: every ``when`` column's cell lies wholly inside its
value set and, for an implication's part, its column's cell lies wholly outside its own. A
numeric bin lies wholly inside a set when its ranges (joined where they meet) hold every value the
bin decodes to (weight 1 in ``model.conditions``), wholly outside when none holds any (weight 0);
a bin cut by a range's end is neither, and rejection (``model.rejection``) still removes the
forbidden rows drawn from it (``schema.cut_at_rules`` gives a schema whose bins no range cuts).
A column set of more than ``MAX_CELLS`` cells gives no zeros (no model of the default size could
hold its clique); the final fit holds the sets whose cliques keep its model within the method's
``max_model_size`` (``core.final_fit``). The constraints are public, so fitting a model with these
cells held at probability 0 is post-processing of the released measurements.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

import numpy as np

from ..model import Condition
from ..schema import Schema, ValueSet, joined_ranges

#: A column set of more cells than this gives no zeros: 2^24, eight times the default model size.
MAX_CELLS = 1 << 24


def _cover(values: ValueSet, schema: Schema) -> tuple[np.ndarray, np.ndarray]:
    """Per cell of the set's column: whether every value of the cell lies inside the set, and
    whether none does."""
    one = [replace(values, ranges=(r,), categories=(), missing=False) for r in joined_ranges(values)]
    if values.categories or values.missing or not values.ranges:
        one.append(replace(values, ranges=()))
    w = np.array([Condition(v).weights(schema) for v in one])
    return np.asarray((w >= 1.0).any(axis=0)), np.asarray((w <= 0.0).all(axis=0))


def forbidden_parts(schema: Schema) -> list[tuple[tuple[ValueSet, ...], ValueSet | None]]:
    """Each constraint as ``(when, part)`` pairs, each forbidding ``when and not part``: a ``forbid``
    constraint one pair with ``part`` None (``when`` alone), an implication one per ``then`` set."""
    out: list[tuple[tuple[ValueSet, ...], ValueSet | None]] = []
    for con in schema.constraints:
        out += [(con.when, None)] if con.then is None else [(con.when, t) for t in con.then]
    return out


def structural_zeros(schema: Schema, names: Sequence[str]) -> list[tuple[tuple[str, ...], np.ndarray]]:
    """``(clique, zero)`` for each column set (in ``names``' order, of at most ``MAX_CELLS`` cells)
    that the schema's constraints make hold a structural zero: ``zero`` a boolean table over the
    clique's cells (module docstring), the union over the constraints' parts on that set."""
    order = {n: i for i, n in enumerate(names)}
    shape = dict(zip(schema.names, schema.shape))
    found: dict[tuple[str, ...], np.ndarray] = {}
    for when, part in forbidden_parts(schema):
        columns = {v.column for v in when + (() if part is None else (part,))}
        if not columns <= order.keys() or math.prod(shape[c] for c in columns) > MAX_CELLS:
            continue
        clique = tuple(sorted(columns, key=order.__getitem__))
        grid = np.ones([shape[c] for c in clique], dtype=bool)
        for v in when:
            inside, _ = _cover(v, schema)
            grid &= _along(inside, clique.index(v.column), len(clique))
        if part is not None:
            _, outside = _cover(part, schema)
            grid &= _along(outside, clique.index(part.column), len(clique))
        if grid.any():
            found[clique] = found[clique] | grid if clique in found else grid
    return list(found.items())


def _along(values: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """``values`` shaped to broadcast along ``axis`` of an ``ndim``-dimensional table."""
    shape = [1] * ndim
    shape[axis] = values.size
    return values.reshape(shape)
