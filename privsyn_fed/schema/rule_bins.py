"""Bins that the schema's constraints do not cut.

A constraint's range ``lo..hi`` on a numeric column divides the column's values at ``lo`` and just
above ``hi``. A bin holding values on both sides of such a point is partly forbidden by the
constraint: it gives no structural zero (``methods.zeros``), and rejection thins the allowed rows
drawn from it (a bin of ages 13..15 under "if age is at most 14 then no income" keeps a third of
the model's earners there, where all of them are 15). ``cut_bins`` lists those points;
``cut_at_rules`` gives the column cut points there too, so that each of its bins lies wholly
inside or wholly outside every range the constraints name. In an integer column a range's end
points are its first whole number and the one after its last, atoms left out (they have cells of
their own); in a real column ``lo`` and ``hi``, since a bin's share of a range (``model.conditions``) is
0 or 1 only when neither lies inside it: ``hi`` itself may open the next bin, and a range of one point
cuts nothing. The bins already there are kept; a column whose bins were uniform or on a log
scale is given as their cut points (``edges``) plus the new ones.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .constraints import ValueSet
from .encode import bin_edges
from .schema import NumericColumn, Schema


class Cut(NamedTuple):
    """A point ``at`` where a constraint divides the values of ``column``'s bin ``low..high``."""

    column: str
    at: float
    low: float
    high: float
    constraint: str


def joined_ranges(values: ValueSet) -> list[tuple[float, float]]:
    """The set's ranges joined where they overlap or, in an integer column, abut."""
    step = 1.0 if isinstance(values.col, NumericColumn) and values.col.integer else 0.0
    out: list[tuple[float, float]] = []
    for lo, hi in sorted(values.ranges):
        if out and lo <= out[-1][1] + step:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def cut_bins(schema: Schema) -> list[Cut]:
    """Every point inside a bin where a constraint's range begins or ends (module docstring), each
    once, in the schema's column order and then by value."""
    found: dict[tuple[str, float], Cut] = {}
    for con in schema.constraints:
        for values in con.when + (con.then or ()):
            col = values.col
            if not isinstance(col, NumericColumn):
                continue
            lo_edges, hi_edges = bin_edges(col)
            for lo, hi in joined_ranges(values):
                for at in _ends(lo, hi, col):
                    if not (col.lower < at <= col.upper if col.integer else col.lower < at < col.upper):
                        continue  # a cut point lies inside the bounds (``schema.checked_edges``)
                    b = int(np.searchsorted(lo_edges, at, side="right")) - 1
                    if _divides(col, float(lo_edges[b]), float(hi_edges[b]), at) and (col.name, at) not in found:
                        found[(col.name, at)] = Cut(col.name, at, float(lo_edges[b]), float(hi_edges[b]), con.label)
    order = {name: i for i, name in enumerate(schema.names)}
    return sorted(found.values(), key=lambda c: (order[c.column], c.at))


def divided_note(schema: Schema) -> str | None:
    """One line naming the bins the schema's constraints divide (``cut_bins``), or None."""
    cuts = cut_bins(schema)
    if not cuts:
        return None
    shown = ", ".join(f"{c.column} {c.low:g}..{c.high:g} at {c.at:g}" for c in cuts[:3])
    more = f" and {len(cuts) - 3} more" if len(cuts) > 3 else ""
    return (
        f"the constraints divide {len(cuts)} bin(s) ({shown}{more}): rows drawn there that break a rule are "
        "dropped, thinning the values the rule allows; `privsyn-fed schema cut-at-rules` (in Python "
        "`privsyn_fed.schema.cut_at_rules`) gives the schema with those bins cut"
    )


def _divides(col: NumericColumn, low: float, high: float, at: float) -> bool:
    """Whether the bin ``low..high`` holds values on both sides of ``at``: lengths in a real column,
    whole numbers that are not atoms (which have cells of their own) in an integer one."""
    if not col.integer:
        return low < at < high
    atoms = np.asarray(col.atoms, dtype=float)

    def held(a: float, b: float) -> int:
        return int(b - a + 1) - int(((atoms >= a) & (atoms <= b)).sum()) if b >= a else 0

    return held(low, at - 1) > 0 and held(at, high) > 0


def _ends(lo: float, hi: float, col: NumericColumn) -> tuple[float, ...]:
    """Where a range ``lo..hi`` divides a column's values (module docstring): in an integer column
    at its first whole number that is not an atom and after its last (atoms have cells of their
    own); none where it holds no such number (integer) or no length (real)."""
    if not col.integer:
        return (lo, hi) if lo < hi else ()
    first, last = (math.ceil(lo) if math.isfinite(lo) else lo), (math.floor(hi) if math.isfinite(hi) else hi)
    while first <= last and first in col.atoms:
        first += 1
    while last >= first and last in col.atoms:
        last -= 1
    return (float(first), float(last) + 1.0) if first <= last else ()


def cut_at_rules(schema: Schema) -> Schema:
    """``schema`` with each numeric column's bins also cut at ``cut_bins``' points (module
    docstring); the schema itself where no constraint cuts a bin."""
    cuts = cut_bins(schema)
    return Schema.from_dict(cut_document(schema.to_dict(), schema, cuts), source=schema.source) if cuts else schema


def cut_document(document: dict, schema: Schema, cuts: list[Cut]) -> dict:
    """A schema file's ``document`` (of ``schema``) with the columns ``cuts`` names given as cut
    points: their bins' plus the cuts; every other key and column as it was."""
    out = dict(document)
    out["columns"] = []
    for spec in document["columns"]:
        new = [c.at for c in cuts if c.column == spec["name"]]
        if new:
            col = schema.column(spec["name"])
            assert isinstance(col, NumericColumn)
            points = sorted({*bin_edges(col)[0][1:].tolist(), *new})
            spec = {k: v for k, v in spec.items() if k not in ("bins", "scale")}
            spec["edges"] = [int(v) for v in points] if col.integer else points
        out["columns"].append(spec)
    return out
