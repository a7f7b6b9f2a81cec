"""Public constraints: combinations of values that never occur, stated in the schema as public facts.

A constraint names a set ``F`` of forbidden rows as a conjunction of per-column value sets:

* ``{"forbid": {c1: S1, ..., ck: Sk}}`` forbids ``F = {x : x[c1] in S1 and ... and x[ck] in Sk}``;
* ``{"if": {a1: A1, ...}, "then": {b1: B1, ...}}`` forbids the ``if`` part without the ``then`` part:
  ``F = {x : (x[a1] in A1 and ...) and not (x[b1] in B1 and ...)}``.

A row is allowed when it lies in no constraint's ``F``. A value set ``S`` is one item or a list of
items: for a categorical column its categories; for a numeric column numbers and inclusive ranges
``"LO..HI"`` (either end may be left open: ``"..14"``, ``"15.."``); for a column that allows missing
values, ``null`` (or a text the column reads as missing, such as its ``missing_values``) for the
missing value. A range never holds the missing value. An optional ``"name"`` labels the constraint in
messages and reports.

Values are read as a release reads them (``encode``): numbers clipped to the column's bounds and, in
an integer column, rounded to whole numbers; a categorical value outside the list counts as the
column's ``unknown`` category when it has one.

The constraints are public, so conditioning a release on them is post-processing:
``model.rejection.draw_allowed`` draws rows from a model and keeps the allowed ones (rejection sampling),
which spends no budget.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence, Union

import numpy as np
import pandas as pd

from ..common import InputError, checkpoint
from .cells import MISSING_TOKENS, column_cells, missing_mask, numbers_as_text

#: A schema column (``schema.NumericColumn`` or ``schema.CategoricalColumn``; this module sits below
#: ``schema``, which reads its constraints with it, so it knows columns by their ``type``).
Column = Any
#: A ``schema.Schema`` (anything with ``constraints`` and ``source``) or a sequence of ``Constraint``.
Constraints = Union[Any, Sequence["Constraint"]]

#: The keys a constraint may have.
CONSTRAINT_KEYS = ("forbid", "if", "then", "name")


@dataclass(frozen=True)
class ColumnValues:
    """A column's values as a release reads them: category indices (``-1`` for none; categorical)
    or clipped numbers (NaN for a value that is not a number; numeric), and the missing mask."""

    missing: np.ndarray
    codes: np.ndarray | None = None
    categories: tuple[str, ...] = ()
    numbers: np.ndarray | None = None

    @cached_property
    def position(self) -> dict[str, int]:
        """Each category's index in ``categories``."""
        return {c: i for i, c in reversed(list(enumerate(self.categories)))}


@dataclass(frozen=True)
class ValueSet:
    """The values ``x[col]`` may take for a condition to hold: categories (categorical column),
    inclusive ranges ``lo <= x <= hi`` (numeric column; a number is the range ``[x, x]``, an open end
    is infinite), and the missing value when ``missing``. ``written`` keeps the items as the schema
    file writes them (categories as text, numbers, ranges as ``"LO..HI"``, ``None`` for missing)."""

    col: Column
    written: tuple[Any, ...]
    categories: tuple[str, ...] = ()
    ranges: tuple[tuple[float, float], ...] = ()
    missing: bool = False

    @property
    def column(self) -> str:
        """The column's name."""
        return self.col.name

    def describe(self) -> str:
        """``"AGEP in 0..14"``, ``"SEX = 1"``, ``"MSP is missing"`` or ``"C in {a, b, missing}"``."""
        items = ["missing" if w is None else str(w) for w in self.written]
        if len(items) > 1:
            return f"{self.column} in {{{', '.join(items)}}}"
        if self.written[0] is None:
            return f"{self.column} is missing"
        if isinstance(self.written[0], str) and ".." in self.written[0] and self.ranges:
            return f"{self.column} in {items[0]}"
        return f"{self.column} = {items[0]}"

    def holds(self, values: ColumnValues) -> np.ndarray:
        """Rows whose value lies in the set."""
        if values.codes is not None:
            wanted = np.array([values.position[c] for c in self.categories], dtype=np.int64)
            inside = np.isin(values.codes, wanted)
        else:
            x = values.numbers
            inside = np.zeros(len(values.missing), dtype=bool)
            with np.errstate(invalid="ignore"):
                for lo, hi in self.ranges:
                    inside |= (x >= lo) & (x <= hi)
        inside &= ~values.missing
        return inside | values.missing if self.missing else inside


@dataclass(frozen=True)
class Constraint:
    """One public constraint: ``when`` holds and (for an implication) ``then`` does not, the row is
    forbidden; ``then`` is None for a ``forbid`` constraint. ``index`` counts from 1 in the schema."""

    index: int
    when: tuple[ValueSet, ...]
    then: tuple[ValueSet, ...] | None = None
    name: str | None = None

    @property
    def label(self) -> str:
        """``constraint #i``, with its name when it has one."""
        return f"constraint #{self.index}" + (f" ({self.name!r})" if self.name else "")

    @property
    def columns(self) -> list[str]:
        """The columns it names, in order, each once."""
        cols = [v.column for v in self.when + (self.then or ())]
        return list(dict.fromkeys(cols))

    def describe(self) -> str:
        """The rule in words: ``forbid SEX = 1 and PREG = 1``, ``if AGEP in 0..14 then MSP is missing``."""
        when = " and ".join(v.describe() for v in self.when)
        if self.then is None:
            return f"forbid {when}"
        return f"if {when} then " + " and ".join(v.describe() for v in self.then)

    def to_dict(self) -> dict[str, Any]:
        """The constraint as a schema file writes it (``parse_constraints`` reads it back)."""
        d: dict[str, Any] = {"name": self.name} if self.name else {}
        part = {v.column: list(v.written) for v in self.when}
        if self.then is None:
            d["forbid"] = part
        else:
            d["if"] = part
            d["then"] = {v.column: list(v.written) for v in self.then}
        return d

    def broken(self, values: dict[str, ColumnValues]) -> np.ndarray:
        """Rows the constraint forbids, given the values of its columns."""
        bad = np.logical_and.reduce([v.holds(values[v.column]) for v in self.when])
        if self.then is not None:
            bad &= ~np.logical_and.reduce([v.holds(values[v.column]) for v in self.then])
        return bad


# ---- parsing ------------------------------------------------------------------------------------


def parse_constraints(raw: Any, columns: Sequence[Column], source: str) -> tuple[Constraint, ...]:
    """Validate the schema's ``"constraints"`` list against its ``columns``; ``InputError`` naming
    ``source``, the constraint and the column or value at fault."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError(f'{source}: "constraints" must be a list of constraints, not {_shown(raw)}')
    by_name = {c.name: c for c in columns}
    parsed = []
    for i, spec in enumerate(raw):
        if i % 256 == 0:
            checkpoint()
        parsed.append(_parse_constraint(spec, i + 1, by_name, source))
    out = tuple(parsed)
    categories: dict[str, ColumnValues] = {}
    for i, c in enumerate(out):
        if i % 256 == 0:
            checkpoint()
        if _forbids_every_row(c, by_name, categories):
            raise InputError(f"{source}: {c.label} ({c.describe()}) forbids every row")
    if out and not _some_row_allowed(out, by_name):
        raise InputError(
            f"{source}: the constraints together forbid every row ({', '.join(c.label for c in out)}); "
            "a release over them could never draw one"
        )
    return out


#: ``_some_row_allowed`` enumerates at most this many combinations of the constrained columns' values.
MAX_COMBINATIONS = 200_000


def _some_row_allowed(constraints: Sequence[Constraint], columns: dict[str, Column]) -> bool:
    """Whether some row of the domain breaks no constraint. Within a column every constraint's
    value sets change membership only at their range ends, so one value per piece between ends
    (each end, each midpoint, each bound; for whole numbers the ends' neighbours) and each category
    (and the missing value) stand for the whole column; every combination of them is checked.
    Beyond ``MAX_COMBINATIONS`` combinations the check is skipped (sampling still enforces them)."""
    involved = list(dict.fromkeys(c for con in constraints for c in con.columns))
    pieces = [_representatives(columns[name], constraints) for name in involved]
    if math.prod(len(p) for p in pieces) > MAX_COMBINATIONS:
        return True
    frame = pd.DataFrame(list(itertools.product(*pieces)), columns=involved)
    values = {name: column_values(columns[name], frame[name]) for name in involved}
    bad = np.zeros(len(frame), dtype=bool)
    for i, con in enumerate(constraints):  # as ``forbidden``, a constraint at a time: no (rows, k) array
        if i % 256 == 0:
            checkpoint()
        bad |= con.broken(values)
    return not bool(bad.all())


def _forbids_every_row(con: Constraint, columns: dict[str, Column], categories: dict[str, ColumnValues]) -> bool:
    """``not _some_row_allowed([con], columns)``, one value set at a time: over the product of its columns'
    representatives, ``when and not then`` holds everywhere exactly when every ``when`` set holds on all
    of its column's representatives and some ``then`` set on none (its sets name distinct columns).
    ``categories`` keeps a categorical column's representatives as read, for the next constraint."""
    involved = con.columns
    pieces = {name: _representatives(columns[name], [con]) for name in involved}
    if math.prod(len(p) for p in pieces.values()) > MAX_COMBINATIONS:
        return False

    def holds(v: ValueSet) -> np.ndarray:
        values = categories.get(v.column) if v.col.type == "categorical" else None
        if values is None and v.col.type != "categorical":  # as ``column_values`` reads floats (NaN: missing)
            x = np.array([math.nan if r is None else r for r in pieces[v.column]], dtype=float)
            values = _numbers_read(v.col, x, np.isnan(x))
        elif values is None:
            frame = pd.DataFrame([(r,) for r in pieces[v.column]], columns=[v.column])
            values = categories[v.column] = column_values(v.col, frame[v.column])
        return v.holds(values)

    if not all(bool(holds(v).all()) for v in con.when):
        return False
    return con.then is None or any(not bool(holds(v).any()) for v in con.then)


def _representatives(col: Column, constraints: Sequence[Constraint]) -> list[Any]:
    """One value of ``col`` for each piece of its domain on which every constraint agrees."""
    out: list[Any] = [None] if col.missing else []
    if col.type == "categorical":
        return list(col.categories) + out
    found = {float(col.lower), float(col.upper)}
    for con in constraints:
        for v in con.when + (con.then or ()):
            if v.column == col.name:
                found.update(e for r in v.ranges for e in r if math.isfinite(e))
    ends = sorted(e for e in found if col.lower <= e <= col.upper)
    points = set(ends) | {(a + b) / 2 for a, b in zip(ends, ends[1:])}
    if col.integer:
        points = {float(k) for e in points for k in (math.floor(e), math.ceil(e), math.floor(e) - 1, math.ceil(e) + 1)}
        points = {p for p in points if col.lower <= p <= col.upper}
    return sorted(points) + out


def _parse_constraint(spec: Any, index: int, columns: dict[str, Column], source: str) -> Constraint:
    where = f"{source}: constraint #{index}"
    if not isinstance(spec, dict):
        raise InputError(f'{where}: a constraint is an object with "forbid", or "if" and "then", not {_shown(spec)}')
    extra = sorted(str(k) for k in set(spec) - set(CONSTRAINT_KEYS))
    if extra:
        raise InputError(f"{where}: unknown key {extra[0]!r} (allowed: {', '.join(CONSTRAINT_KEYS)})")
    name = spec.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise InputError(f'{where}: "name" must be a non-empty text, not {_shown(name)}')
    if name:
        where += f" ({name!r})"
    if "forbid" in spec:
        if "if" in spec or "then" in spec:
            raise InputError(f'{where}: give either "forbid" or "if" with "then", not both')
        return Constraint(index, _parse_part(spec["forbid"], "forbid", columns, where, source), None, name)
    if "if" not in spec and "then" not in spec:
        raise InputError(f'{where}: a constraint needs "forbid", or "if" and "then"')
    if "if" not in spec or "then" not in spec:
        given, needed = ("if", "then") if "if" in spec else ("then", "if")
        raise InputError(f'{where}: "{given}" needs "{needed}" (the rule is: if these values, then those)')
    when = _parse_part(spec["if"], "if", columns, where, source)
    then = _parse_part(spec["then"], "then", columns, where, source)
    return Constraint(index, when, then, name)


def _parse_part(part: Any, key: str, columns: dict[str, Column], where: str, source: str) -> tuple[ValueSet, ...]:
    if not isinstance(part, dict) or not part:
        raise InputError(
            f'{where}: "{key}" must map one or more column names to their values, e.g. '
            f'{{"AGEP": "0..14"}}, not {_shown(part)}'
        )
    out = []
    for column, items in part.items():
        if column not in columns:
            raise InputError(f'{where}: "{key}" names column {column!r}, which is not in the schema')
        out.append(parse_values(items, columns[column], f"{where}, column '{column}'", source))
    return tuple(out)


def parse_values(items: Any, col: Column, where: str, source: str = "") -> ValueSet:
    """One column's values as a schema file or a condition writes them (one item or a list: categories,
    numbers, ``"LO..HI"`` ranges, ``None`` or a missing token); ``InputError`` names the item at fault."""
    items = items if isinstance(items, list) else [items]
    if not items:
        raise InputError(f"{where}: the list of values is empty")
    written: list[Any] = []
    categories: list[str] = []
    ranges: list[tuple[float, float]] = []
    missing = False
    for item in items:
        if isinstance(item, bool):
            yaml = source.lower().endswith((".yaml", ".yml"))
            hint = "; YAML reads unquoted yes, no, on, off, true and false as booleans: quote it" if yaml else ""
            raise InputError(f"{where}: {item} is not a value of the column{hint}")
        if item is None or (isinstance(item, str) and _reads_as_missing(item, col)):
            if not col.missing:
                raise InputError(
                    f"{where}: {_shown(item)} stands for a missing value, but the column does not allow missing "
                    'values (declare "missing": true)'
                )
            missing, entry = True, None
        elif col.type == "categorical":
            entry = _category(item, col, where)
            categories.append(entry)
        else:
            entry, lo, hi = _numbers(item, col, where)
            ranges.append((lo, hi))
        if entry not in written:
            written.append(entry)
    return ValueSet(col, tuple(written), tuple(dict.fromkeys(categories)), tuple(ranges), missing)


def _reads_as_missing(text: str, col: Column) -> bool:
    """``text`` is read as a missing value in this column (as ``cells.missing_mask`` reads cells)."""
    text = text.strip()
    if text not in MISSING_TOKENS and text not in col.missing_values:  # no missing token: not missing
        return False
    return bool(missing_mask(col, np.array([text], dtype=object))[0])


def _category(item: Any, col: Column, where: str) -> str:
    if isinstance(item, (int, float)):
        item = str(item)  # as the schema reads a category written as a number
    if not isinstance(item, str):
        raise InputError(f"{where}: {_shown(item)} is not a category (give categories as text)")
    if item not in col.categories:
        cats = list(col.categories)
        shown = ", ".join(repr(c) for c in cats[:10]) + (", ..." if len(cats) > 10 else "")
        raise InputError(f"{where}: category {item!r} is not in the schema (categories: {shown})")
    return item


def _numbers(item: Any, col: Column, where: str) -> tuple[Any, float, float]:
    """A numeric item as ``(written, lo, hi)``: a number ``x`` is ``[x, x]``, ``"LO..HI"`` a range."""
    lower, upper = col.lower, col.upper
    if isinstance(item, (int, float)):
        x = float(item)
        if not math.isfinite(x):
            raise InputError(f"{where}: {_shown(item)} is not a finite number")
        if not lower <= x <= upper:
            raise InputError(f"{where}: {_number_text(x)} lies outside the column's bounds [{_bounds(col)}]")
        if col.integer and x != math.floor(x):
            raise InputError(f"{where}: {_number_text(x)} is not a whole number, and the column is integer")
        return (int(x) if x == math.floor(x) and abs(x) < 2**53 else x), x, x
    if not isinstance(item, str):
        raise InputError(f'{where}: {_shown(item)} is not a number or a range such as "0..14"')
    if ".." not in item:
        x = _parse_number(item.strip(), item, where)
        return _numbers(x, col, where)
    lo_text, _, hi_text = (t.strip() for t in item.partition(".."))
    lo = -math.inf if lo_text == "" else _parse_number(lo_text, item, where)
    hi = math.inf if hi_text == "" else _parse_number(hi_text, item, where)
    if lo > hi:
        raise InputError(f"{where}: range {item!r} is empty (its lower end is above its upper end)")
    if hi < lower or lo > upper:
        raise InputError(f"{where}: range {item!r} lies outside the column's bounds [{_bounds(col)}]")
    text = ("" if lo == -math.inf else _number_text(lo)) + ".." + ("" if hi == math.inf else _number_text(hi))
    return text, lo, hi


def _parse_number(text: str, item: str, where: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise InputError(f'{where}: {item!r} is not a number or a range such as "0..14"') from None
    if not math.isfinite(x):
        raise InputError(f"{where}: {item!r} holds {text!r}, which is not a finite number")
    return x


def _number_text(x: float) -> str:
    return str(int(x)) if x == math.floor(x) and abs(x) < 2**53 else repr(x)


def _bounds(col: Column) -> str:
    return f"{_number_text(col.lower)}, {_number_text(col.upper)}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ---- rows -------------------------------------------------------------------------------------------


def constraints_of(constraints: Constraints) -> tuple[tuple[Constraint, ...], str]:
    """The constraints, and the name of the schema file that states them (for messages)."""
    found = getattr(constraints, "constraints", None)
    if found is not None:
        return tuple(found), str(getattr(constraints, "source", "<schema>"))
    return tuple(constraints), "<schema>"


def column_values(col: Column, series: pd.Series) -> ColumnValues:
    """Read one column of a table (decoded values, text cells or typed cells) as a release reads it."""
    cells = column_cells(series)
    if col.type == "categorical":
        if cells.dtype.kind == "f":
            missing = np.isnan(cells)
            cells = numbers_as_text(cells)
        else:
            missing = missing_mask(col, cells)
        codes = pd.Index(col.categories, dtype=object).get_indexer(cells).astype(np.int64)
        if col.unknown is not None:
            codes[(codes < 0) & ~missing] = col.categories.index(col.unknown)
        return ColumnValues(missing, codes=codes, categories=col.categories)
    if cells.dtype.kind == "f":
        return _numbers_read(col, cells, np.isnan(cells))
    missing = missing_mask(col, cells)
    x = pd.to_numeric(pd.Series(np.where(missing, "nan", cells), dtype=object), errors="coerce").to_numpy(float)
    return _numbers_read(col, x, missing)


def _numbers_read(col: Column, x: np.ndarray, missing: np.ndarray) -> ColumnValues:
    """A numeric column's numbers (NaN: not a number) as a release reads them: clipped, and rounded in
    an integer column."""
    x = np.clip(x, col.lower, col.upper)
    if col.integer:
        x = np.rint(x)
    return ColumnValues(missing, numbers=x)


def violations(constraints: Constraints, frame: pd.DataFrame, source: str = "table") -> np.ndarray:
    """An ``(n, k)`` boolean array: row ``i`` of ``frame`` breaks constraint ``j`` (``constraints``: a
    ``Schema`` or its ``constraints``); ``source`` names the frame in errors."""
    found, _ = constraints_of(constraints)
    values = {}
    for c in found:
        for v in c.when + (c.then or ()):
            if v.column in values:
                continue
            if v.column not in frame.columns:
                raise InputError(f"{source}: column '{v.column}' (named by {c.label}) is not in the table")
            values[v.column] = column_values(v.col, frame[v.column])
    if not found:
        return np.zeros((len(frame), 0), dtype=bool)
    return np.stack([c.broken(values) for c in found], axis=1)


def forbidden(constraints: Constraints, frame: pd.DataFrame) -> np.ndarray:
    """Rows of ``frame`` (decoded values, as a synthetic CSV holds them, or text cells) that break at
    least one constraint: ``x in F_1 or ... or x in F_k``."""
    return np.asarray(violations(constraints, frame).any(axis=1))


def violation_report(constraints: Constraints, tables: dict[str, pd.DataFrame]) -> list[dict[str, Any]]:
    """Per constraint, its label, its rule and, per named table, the rows that break it and their share."""
    found, _ = constraints_of(constraints)
    counts = {k: violations(found, df, k).sum(axis=0) for k, df in tables.items()}
    out = []
    for j, c in enumerate(found):
        entry: dict[str, Any] = {"constraint": c.label, "rule": c.describe()}
        for k, df in tables.items():
            entry[k] = {"rows": int(counts[k][j]), "share": float(counts[k][j]) / max(1, len(df))}
        out.append(entry)
    return out
