"""The public domain a release is stated over: column types, bounds, bins and categories.

The schema is public information. Nothing in it may be read off private rows without saying so:
``Schema.draft`` (and ``privsyn-fed schema draft``, module ``draft``) drafts one from a table for
its operator to review, with a warning that its bounds and categories are not private;
``privsyn-fed schema draft --dp`` (module ``draft_dp``) releases them under differential privacy,
charged to a ledger; ``privsyn-fed schema from-dictionary`` builds one from a public data
dictionary. A schema file may carry top-level keys besides ``"columns"``: a draft's ``"_draft"``
note loads with it, and one that is not a DP draft's marks the schema ``private_draft`` (a release
refuses it) through every round trip (``to_dict``/``from_dict``, ``save``/``load``, JSON) until the
note is deleted or ``reviewed()`` is called; other keys are ignored. A DP draft's placeholder column
(``draft.UNFOUND_KEY``) is refused until it is filled in.

Domain sizes: a numeric column has ``n_bins`` cells, then one per ``atoms`` value (module
``numeric_keys``), plus one when ``missing`` is allowed; a categorical column has ``len(categories)``
cells (plus one when ``missing`` is allowed). The missing cell, when present, is always the last one.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..common import InputError, parse_json, parse_yaml
from .cells import DEFAULT_BINS, MAX_ABS_BOUND, MAX_COLUMN_CELLS, check_category, check_column_name
from .draft import (
    DEFAULT_CATEGORICAL_MAX,
    DP_DRAFT_PRIVACY,
    DRAFT_NOTE_KEY,
    UNFOUND_KEY,
    draft_frame,
    plain_note,
    plain_numbers,
    warn_private,
    write_document,
)
from .numeric_keys import parse_atoms, parse_decimals

if TYPE_CHECKING:
    from .constraints import Constraint


@dataclass(frozen=True)
class NumericColumn:
    """A numeric column with public bounds ``[lower, upper]`` cut into ``bins`` uniform bins, or at
    public ``edges`` (interior cut points ``e_1 < ... < e_{B-1}``: bin ``k`` holds ``e_k <= x <
    e_{k+1}``, with ``e_0 = lower`` and the last bin closed at ``upper``), or on a ``log`` scale
    (``bins`` bins of equal width in ``log(1 + x - lower)``).

    For ``integer`` columns the ``m = upper - lower + 1`` whole numbers are split into
    ``min(bins, m)`` bins: value ``lower + k`` falls in bin ``floor(k * bins / m)``, so every
    bin holds at least one whole number and decoding never leaves the integers; their edges are
    whole numbers (a log scale's rounded up, the repeats dropped).

    ``atoms`` (sorted) are public values with cells of their own after the bins (cell
    ``first_atom_cell + i`` holds the values equal to ``atoms[i]``); ``decimals`` rounds the
    synthetic values to that many places (module ``numeric_keys``).
    """

    name: str
    lower: float
    upper: float
    bins: int = DEFAULT_BINS
    integer: bool = False
    missing: bool = False
    missing_values: tuple[str, ...] = ()
    type: str = field(default="numeric", init=False)
    edges: tuple[float, ...] | None = None
    scale: str = "linear"
    atoms: tuple[float, ...] = ()
    decimals: int | None = None

    @property
    def cuts(self) -> np.ndarray | None:
        """The interior cut points of bins that are not uniform (``edges``, or the log scale's), or None."""
        if self.edges is not None:
            return np.asarray(self.edges, dtype=float)
        if self.scale != "log" or self.upper == self.lower:
            return None
        span = math.log1p(self.upper - self.lower)
        cuts = self.lower + np.expm1(span * np.arange(1, self.bins) / self.bins)
        if self.integer:
            cuts = np.unique(np.ceil(cuts))
            cuts = cuts[(cuts > self.lower) & (cuts <= self.upper)]
        return cuts

    @functools.cached_property
    def n_bins(self) -> int:
        """Bins of the encoded domain: one more than the cut points where bins are not uniform;
        ``min(bins, m)`` for an integer column, else 1 when ``lower == upper`` and ``bins`` otherwise
        (kept once computed: the column is frozen, and every marginal's shape reads it)."""
        cuts = self.cuts
        if cuts is not None:
            return len(cuts) + 1
        if self.integer:
            return min(self.bins, self.whole_numbers)
        return 1 if self.upper == self.lower else self.bins

    @property
    def whole_numbers(self) -> int:
        """``m = upper - lower + 1`` for an integer column, in exact integer arithmetic."""
        return int(self.upper) - int(self.lower) + 1

    @property
    def first_atom_cell(self) -> int:
        """The cell of ``atoms[0]``: the one after the bins (``n_bins``)."""
        return self.n_bins

    @property
    def missing_cell(self) -> int:
        """The cell after the bins and the atoms, ``n_bins + len(atoms)``: the missing cell when
        ``missing`` (and then the last one)."""
        return self.n_bins + len(self.atoms)

    @property
    def size(self) -> int:
        """Cells of the encoded domain: ``n_bins + len(atoms)``, plus the missing cell when ``missing``."""
        return self.missing_cell + (1 if self.missing else 0)

    def to_dict(self) -> dict[str, Any]:
        """The column as a schema-file entry (``integer``, ``missing``, ``missing_values``, ``atoms`` and
        ``decimals`` only when set)."""
        d: dict[str, Any] = {
            "name": self.name,
            "type": "numeric",
            "lower": self.lower,
            "upper": self.upper,
            "bins": self.bins,
        }
        if self.integer:
            d["integer"] = True
        if self.edges is not None:
            d["edges"] = [int(e) if self.integer else e for e in self.edges]
            del d["bins"]
        if self.scale != "linear":
            d["scale"] = self.scale
        if self.missing:
            d["missing"] = True
        if self.missing_values:
            d["missing_values"] = list(self.missing_values)
        if self.atoms:
            d["atoms"] = [int(a) if self.integer else a for a in self.atoms]
        if self.decimals is not None:
            d["decimals"] = self.decimals
        return d


@dataclass(frozen=True)
class CategoricalColumn:
    """A categorical column whose full list of categories is public.

    ``unknown`` (optional) names a declared category that values outside the list map to;
    without it such a value is an input error.
    """

    name: str
    categories: tuple[str, ...]
    missing: bool = False
    unknown: str | None = None
    missing_values: tuple[str, ...] = ()
    type: str = field(default="categorical", init=False)

    @property
    def size(self) -> int:
        """Cells of the encoded domain: ``len(categories)``, plus the missing cell when ``missing``."""
        return len(self.categories) + (1 if self.missing else 0)

    def to_dict(self) -> dict[str, Any]:
        """The column as a schema-file entry (``missing``, ``unknown`` and ``missing_values`` only when
        set)."""
        d: dict[str, Any] = {"name": self.name, "type": "categorical", "categories": list(self.categories)}
        if self.missing:
            d["missing"] = True
        if self.unknown is not None:
            d["unknown"] = self.unknown
        if self.missing_values:
            d["missing_values"] = list(self.missing_values)
        return d


Column = NumericColumn | CategoricalColumn


@dataclass(frozen=True)
class Schema:
    """An ordered list of columns; the synthetic CSV has exactly these columns in this order."""

    columns: tuple[Column, ...]
    source: str = "<schema>"
    #: Drafted from private rows and not yet reviewed (a file whose ``"_draft"`` note is not that of a DP
    #: draft, or ``Schema.draft``): a release refuses it, since its bounds and categories were read off rows.
    private_draft: bool = False
    #: Public constraints: combinations of values that never occur (``constraints``); every release is
    #: conditioned on them.
    constraints: tuple[Constraint, ...] = ()
    #: The ``"_draft"`` note of a private draft as read (``to_dict`` writes it back; None: a generated one).
    draft_note: Any = field(default=None, compare=False, repr=False)

    @property
    def names(self) -> list[str]:
        """The column names, in schema order."""
        return [c.name for c in self.columns]

    @property
    def shape(self) -> list[int]:
        """Number of cells of each column's encoded domain."""
        return [c.size for c in self.columns]

    def column(self, name: str) -> Column:
        """The column named ``name``; ``KeyError`` when there is none."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The schema as a schema file's JSON object (``from_dict`` reads it back); ``"constraints"`` only
        when there are some; a private draft's ``"_draft"`` note first."""
        d: dict[str, Any] = {"columns": [c.to_dict() for c in self.columns]}
        if self.constraints:
            d["constraints"] = [c.to_dict() for c in self.constraints]
        if self.private_draft:  # the note goes wherever the schema goes: only a review removes it
            note = self.draft_note if self.draft_note is not None else plain_note(self.source, ())
            d = {DRAFT_NOTE_KEY: note, **d}
        return d

    def save(self, path: str | Path) -> None:
        """Write ``to_dict()`` to a schema file atomically: YAML by extension ``.yaml``/``.yml``, else JSON
        (whole-number floats as integers); ``load`` reads it back, a private draft's note included."""
        save_document(path, plain_numbers(self.to_dict()))

    @classmethod
    def draft(
        cls,
        df: Any,
        categorical_max: int | None = None,
        bins: int = DEFAULT_BINS,
        missing_values: tuple[str, ...] | list[str] = (),
        exclude: tuple[str, ...] | list[str] = (),
        include: tuple[str, ...] | list[str] = (),
    ) -> "Schema":
        """Draft a schema from a data frame's rows (any dtypes), as ``privsyn-fed schema draft`` does
        without ``--dp`` (rules in ``privsyn_fed.schema.draft``); ``draft.draft_frame`` also returns the notes.
        ``exclude`` leaves columns out unread; ``include`` keeps columns the identifier rule would leave
        out (``schema.identifiers``).

        NOT PRIVATE: the bounds and categories are read off the rows. A ``draft.PrivateDraftWarning``
        says so, and a release refuses the schema (``private_draft``) until it has been reviewed: its
        bounds and categories replaced with public knowledge, then ``reviewed()``."""
        k = DEFAULT_CATEGORICAL_MAX if categorical_max is None else categorical_max
        result = draft_frame(
            df, categorical_max=k, bins=bins, missing_values=tuple(missing_values), exclude=exclude, include=include
        )
        warn_private("the data frame")
        schema = cls.from_dict({"columns": result.columns}, source="<drafted from a data frame>")
        return dataclasses.replace(schema, private_draft=True, draft_note=plain_note("a data frame", result.dropped))

    @classmethod
    def load(cls, path: str | Path) -> "Schema":
        """Read a JSON (or YAML, by extension ``.yaml``/``.yml``) schema file and validate it."""
        return cls.from_dict(read_document(path), source=str(path))

    @classmethod
    def from_dict(cls, raw: Any, source: str = "<schema>") -> "Schema":
        """Validate a parsed schema (an object with a list under ``"columns"`` and optionally one under
        ``"constraints"``, module ``constraints``; a draft's ``"_draft"`` note sets ``private_draft`` unless it
        is a DP draft's; other top-level keys are ignored) and build it; ``InputError`` names the first
        fault, prefixed by ``source``."""
        if not isinstance(raw, dict) or not isinstance(raw.get("columns"), list):
            raise InputError(f'{source}: a schema is an object with a list under "columns"')
        if not raw["columns"]:
            raise InputError(f"{source}: the schema has no columns")
        columns, seen = [], set()
        for i, spec in enumerate(raw["columns"]):
            col = _parse_column(spec, i, source)
            if col.name in seen:
                raise InputError(f"{source}: column '{col.name}' is declared twice")
            seen.add(col.name)
            columns.append(col)
        note = raw.get(DRAFT_NOTE_KEY)
        private = note is not None and not (isinstance(note, dict) and note.get("privacy") == DP_DRAFT_PRIVACY)
        from .constraints import parse_constraints

        constraints = parse_constraints(raw.get("constraints"), columns, source)
        return cls(
            tuple(columns), source, private_draft=private, constraints=constraints, draft_note=note if private else None
        )

    def reviewed(self) -> "Schema":
        """This schema marked as reviewed: its bounds and categories now come from public knowledge (what
        deleting a draft file's ``"_draft"`` note says); ``to_dict`` then writes no note."""
        return dataclasses.replace(self, private_draft=False, draft_note=None)


def read_document(path: str | Path) -> Any:
    """A schema file's parsed document (JSON, or YAML by extension ``.yaml``/``.yml``), not yet checked."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: schema file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read schema file ({exc})") from None
    yaml = path.suffix.lower() in (".yaml", ".yml")
    return parse_yaml(text, path, "schema") if yaml else parse_json(text, path, "schema")


def save_document(path: str | Path, document: dict[str, Any]) -> None:
    """Write a schema file's ``document`` atomically: YAML by extension ``.yaml``/``.yml``, else JSON."""
    from ..common import write_atomic

    if Path(path).suffix.lower() in (".yaml", ".yml"):
        import yaml

        write_atomic(path, lambda fh: yaml.safe_dump(document, fh, sort_keys=False, allow_unicode=True))
    else:
        write_document(path, document)


def _parse_column(spec: Any, index: int, source: str) -> Column:
    if not isinstance(spec, dict):
        raise InputError(f"{source}: column #{index + 1} is not an object")
    name = spec.get("name")
    _refuse_yaml_literal(name, '"name"', f"{source}: column #{index + 1}", source, nulls=False)
    if name is None or name == "":
        raise InputError(f'{source}: column #{index + 1} has no "name"')
    if not isinstance(name, str):
        raise InputError(f'{source}: column #{index + 1}: "name" must be text, not {name!r}')
    check_column_name(name, index, source)
    where = f"{source}: column '{name}'"
    if UNFOUND_KEY in spec:  # a DP draft's placeholder (``--leave-unfound``)
        what = "bounds" if spec.get("type") == "numeric" else "categories"
        raise InputError(
            f'{where}: a placeholder: the DP draft did not find its {what} (its "{UNFOUND_KEY}" says why); fill '
            f'them in from public knowledge, then delete "{UNFOUND_KEY}"'
        )
    kind = spec.get("type")
    known = {"name", "type", "missing", "missing_values"}
    missing = spec.get("missing", False)
    if not isinstance(missing, bool):
        raise InputError(f'{where}: "missing" must be true or false, not {missing!r}')
    missing_values = spec.get("missing_values", [])
    for v in missing_values if isinstance(missing_values, list) else []:
        _refuse_yaml_literal(v, '"missing_values" entry', where, source)
    if not isinstance(missing_values, list) or not all(isinstance(v, str) for v in missing_values):
        raise InputError(f'{where}: "missing_values" must be a list of strings')
    for v in missing_values:
        check_category(v, '"missing_values" entry', where)
    if kind == "numeric":
        known |= {"lower", "upper", "bins", "integer", "edges", "scale", "atoms", "decimals"}
        _reject_unknown_keys(spec, known, where)
        for key in ("lower", "upper"):
            if key not in spec:
                raise InputError(f'{where}: numeric column needs a public "{key}" bound')
            v = spec[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise InputError(f'{where}: "{key}" must be a finite number, not {v!r}')
            if abs(v) > MAX_ABS_BOUND:
                raise InputError(
                    f'{where}: "{key}" {v!r} is beyond +-2^53 (9,007,199,254,740,992), where '
                    "numbers are no longer exact; express the column in larger units"
                )
        lower, upper = float(spec["lower"]), float(spec["upper"])
        if lower > upper:
            raise InputError(f'{where}: "lower" ({spec["lower"]}) is above "upper" ({spec["upper"]})')
        bins = spec.get("bins", DEFAULT_BINS)
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
            raise InputError(f'{where}: "bins" must be a positive integer, not {bins!r}')
        if bins > MAX_COLUMN_CELLS:
            raise InputError(f'{where}: "bins" {bins} is more than the {MAX_COLUMN_CELLS:,} cells a column may have')
        integer = spec.get("integer", False)
        if not isinstance(integer, bool):
            raise InputError(f'{where}: "integer" must be true or false, not {integer!r}')
        if integer and (lower != math.floor(lower) or upper != math.floor(upper)):
            raise InputError(
                f"{where}: an integer column needs whole-number bounds, not [{spec['lower']}, {spec['upper']}]"
            )
        edges, scale = checked_edges(spec, lower, upper, integer, where), spec.get("scale", "linear")
        if scale not in ("linear", "log"):
            raise InputError(f'{where}: "scale" must be "linear" or "log", not {scale!r}')
        if scale == "log" and edges is not None:
            raise InputError(f'{where}: give "edges" or a "log" scale, not both')
        if edges is not None:
            if "bins" in spec and spec["bins"] != len(edges) + 1:
                raise InputError(f'{where}: {len(edges)} "edges" make {len(edges) + 1} bins, not "bins" {bins}')
            bins = len(edges) + 1
        atoms = parse_atoms(spec, lower, upper, integer, where)
        decimals = parse_decimals(spec, lower, upper, integer, atoms, where)
        return NumericColumn(
            name, lower, upper, bins, integer, missing, tuple(missing_values), edges, scale, atoms, decimals
        )
    if kind == "categorical":
        known |= {"categories", "unknown"}
        _reject_unknown_keys(spec, known, where)
        cats = spec.get("categories")
        if not isinstance(cats, list) or not cats:
            raise InputError(f'{where}: categorical column needs a non-empty "categories" list')
        for c in cats:
            _refuse_yaml_literal(c, "category", where, source)
        cats = [str(c) if isinstance(c, (int, float)) and not isinstance(c, bool) else c for c in cats]
        odd = next((c for c in cats if not isinstance(c, str)), None)
        if odd is not None:
            raise InputError(f"{where}: categories must be strings or numbers, not {odd!r}")
        for c in cats:
            check_category(c, "category", where)
        if len(cats) > MAX_COLUMN_CELLS:
            raise InputError(
                f"{where}: {len(cats):,} categories are more than the {MAX_COLUMN_CELLS:,} cells a column may have"
            )
        if len(set(cats)) != len(cats):
            dup = next(c for c in cats if cats.count(c) > 1)
            raise InputError(f"{where}: category {dup!r} is listed twice")
        if missing and "" in cats:
            raise InputError(
                f'{where}: the empty category "" cannot be told apart from a missing value, which '
                'is written as an empty cell; rename the category or drop "missing"'
            )
        unknown = spec.get("unknown")
        _refuse_yaml_literal(unknown, '"unknown" category', where, source, nulls=False)
        if unknown is not None and unknown not in cats:
            raise InputError(f'{where}: "unknown" category {unknown!r} is not in the categories list')
        return CategoricalColumn(name, tuple(cats), missing, unknown, tuple(missing_values))
    raise InputError(f'{where}: "type" must be "numeric" or "categorical", not {kind!r}')


def checked_edges(spec: dict, lower: float, upper: float, integer: bool, where: str) -> tuple[float, ...] | None:
    """A numeric column's public ``"edges"`` (interior cut points), checked: finite numbers, strictly
    increasing, strictly inside ``(lower, upper]`` (whole numbers for an integer column, so that every
    bin holds one), at most ``MAX_COLUMN_CELLS`` bins; None when not given."""
    if "edges" not in spec:
        return None
    raw = spec["edges"]
    if not isinstance(raw, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in raw
    ):
        raise InputError(f'{where}: "edges" must be a list of finite numbers (the cut points between bins)')
    if len(raw) + 1 > MAX_COLUMN_CELLS:
        raise InputError(f'{where}: {len(raw)} "edges" make more than the {MAX_COLUMN_CELLS:,} cells a column may have')
    if any(b <= a for a, b in zip(raw, raw[1:])):
        raise InputError(f'{where}: "edges" must increase strictly, not {raw!r}')
    if integer and any(v != math.floor(v) for v in raw):
        bad = next(v for v in raw if v != math.floor(v))
        raise InputError(
            f'{where}: the "edges" of an integer column are whole numbers (a bin starts at each), not {bad!r}'
        )
    inside = (lambda v: lower < v <= upper) if integer else (lambda v: lower < v < upper)
    outside = [v for v in raw if not inside(v)]
    if outside:
        raise InputError(f"{where}: edge {outside[0]!r} is not inside the bounds [{lower:g}, {upper:g}]")
    return tuple(float(v) for v in raw)


def _refuse_yaml_literal(value: Any, what: str, where: str, source: str, nulls: bool = True) -> None:
    """In a YAML schema, refuse a boolean (or, with ``nulls``, a null) where text belongs, saying how
    to keep it as text: YAML 1.1 reads unquoted yes/no, on/off and true/false as booleans and
    null, ~ or an empty item as null."""
    if Path(source).suffix.lower() not in (".yaml", ".yml"):
        return
    if isinstance(value, bool):
        words = "yes, on and true" if value else "no, off and false"
        raise InputError(
            f"{where}: {what} {value} is a YAML boolean (YAML reads unquoted {words} as {value}); "
            f"quote it (for example '{words.split(',')[0]}') to keep it as text"
        )
    if value is None and nulls:
        raise InputError(
            f"{where}: a {what} is null (YAML reads unquoted null, ~ and an empty item as no value); "
            "quote it ('null') to keep it as text"
        )


def _reject_unknown_keys(spec: dict, known: set[str], where: str) -> None:
    extra = sorted(set(spec) - known)
    if extra:
        raise InputError(f"{where}: unknown key {extra[0]!r} (allowed: {', '.join(sorted(known))})")
