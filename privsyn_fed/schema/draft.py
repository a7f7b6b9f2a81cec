"""Drafting a schema: from a table's private rows (for review), or from a public data dictionary.

A schema is public; a draft read off private rows is not. ``draft_table`` and ``draft_frame`` read
the rows in one streaming pass (memory: at most ``categorical_max + 1`` distinct values per column)
and build a schema that the same rows always pass (``Silo.load`` / ``Silo.from_frame``), by the
rules of the release's own input validation (``encode.column_cells``, ``encode.missing_mask``,
the same number parser):

* **missing**: a column is ``"missing": true`` when any cell is missing (one of
  ``schema.MISSING_TOKENS``, a token given in ``missing_values``, or NaN in a typed column);
* **type**: a column with at most ``categorical_max`` distinct present values is categorical
  (categories sorted: numbers by value, then text); one with more is numeric when every present
  value is a finite number, and is otherwise left out of the schema with a note (free-text IDs);
  a column with no present value at all is drafted as the placeholder numeric ``0..0`` with
  ``missing``. Parquet stored types are respected: a floating-point column is never categorical,
  a text column never numeric, and a column of a type no schema reads (timestamps, nulls) is left out;
* **identifiers**: a column of at least ``MIN_IDENTIFIER_ROWS`` present values, one distinct value
  per row (checked over its first ``IDENTIFIER_SAMPLE`` values), is left out with a note like a
  column of free text, when it holds text, or whole numbers packed as IDs are (a range of less than
  twice the rows); a release ignores such a column in its silos;
* **integer**: a numeric column whose every value is a whole number is ``"integer": true``;
* **bounds** (``round_outward``): ``[min, max]`` widened to multiples of ``10^e``, the largest power
  of ten not above ``max - min`` (whole numbers for an integer column): 17..90 gives 10..90,
  0.13..0.97 gives 0.1..1, 1..99 gives 0..100; beyond ``+-MAX_DRAFT_BOUND`` values are clipped.

The draft document (``draft_document``) carries a top-level ``"_draft"`` note, which
``Schema.from_dict`` ignores (the schema loads as is) and which says that the bounds and category
lists must be replaced by public knowledge, or released with DP (``draft_dp``), before sharing.

A data dictionary (public facts) becomes a schema in ``dictionary``.
"""

from __future__ import annotations

import decimal
import logging
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from ..common import InputError, OptionError, is_number_type, is_text_type
from .cells import (
    DEFAULT_BINS,
    MAX_COLUMN_CELLS,
    MISSING_TOKENS,
    category_order,
    check_category,
    check_cell_types,
    check_header,
    column_cells,
    numbers_as_text,
)

#: The top-level key of a drafted schema's note (``Schema.from_dict`` reads no other key than "columns" and
#: this one), and the note's ``"privacy"`` when the draft was made under DP (``draft_dp``); any other note
#: marks the schema as read off private rows, which a release refuses until the note is deleted.
DRAFT_NOTE_KEY = "_draft"
DP_DRAFT_PRIVACY = "differential privacy"
#: The key of a column that a DP draft wrote as a placeholder (``--leave-unfound``): its bounds or categories
#: were not found, and ``Schema.from_dict`` refuses the column until they are filled in and the key deleted.
UNFOUND_KEY = "_unfound"
#: A column with at most this many distinct values is categorical (``--categorical-max``).
DEFAULT_CATEGORICAL_MAX = 50
#: Drafted bounds stay within this (a round number below 2^53, where whole numbers stop being exact).
MAX_DRAFT_BOUND = 9e15
#: A column needs this many present values before one distinct value per row marks it an identifier.
MIN_IDENTIFIER_ROWS = 50
#: Values per column checked for repeats (8 bytes each): one distinct value per row among them marks
#: an identifier.
IDENTIFIER_SAMPLE = 200_000
#: The category an all-missing Parquet text column is drafted with (a placeholder to replace).
PLACEHOLDER_CATEGORY = "(none seen)"

PRIVATE_WARNING = (
    "NOT PRIVATE: this schema was drafted from the private rows of {source}; its bounds and category "
    "lists were read off those rows. Before the schema is shared, replace them with public knowledge "
    "(a data dictionary, a code list) or draft it with --dp (bounds and categories released under "
    "differential privacy and charged to a ledger), then delete this note."
)


#: Notes of a draft made in Python (the command prints them itself).
log = logging.getLogger("privsyn_fed.schema")


class PrivateDraftWarning(UserWarning):
    """A schema was drafted from private rows: its bounds and categories are not private."""


# ---- rounding ------------------------------------------------------------------------------------
def round_outward(lo: float, hi: float, integer: bool = False) -> tuple[float, float]:
    """``[lo, hi]`` widened to multiples of ``10^e``, ``e = floor(log10(hi - lo))`` (for ``lo == hi``,
    ``e = floor(log10(|lo|))``; at least 0 for an integer column), clamped to ``+-MAX_DRAFT_BOUND``.
    The result always contains ``[lo, hi]`` (within the clamp): 17..90 -> 10..90, 1..99 -> 0..100."""
    lo, hi = sorted((float(lo), float(hi)))
    lo, hi = max(lo, -MAX_DRAFT_BOUND), min(hi, MAX_DRAFT_BOUND)
    if lo > hi:  # every value lies beyond one clamp
        lo = hi = MAX_DRAFT_BOUND if lo > 0 else -MAX_DRAFT_BOUND
    ref = hi - lo if hi > lo else max(abs(lo), abs(hi))
    if ref == 0:
        return 0.0, 0.0
    e = math.floor(math.log10(ref))
    if integer:
        e = max(e, 0)
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        step = decimal.Decimal(10) ** e
        # the shortest decimals of the floats (0.3, not 0.2999...), then checked in floating point
        k_lo = (decimal.Decimal(repr(lo)) / step).to_integral_value(decimal.ROUND_FLOOR)
        k_hi = (decimal.Decimal(repr(hi)) / step).to_integral_value(decimal.ROUND_CEILING)
        lower, upper = float(k_lo * step), float(k_hi * step)
        while lower > lo:
            k_lo -= 1
            lower = float(k_lo * step)
        while upper < hi:
            k_hi += 1
            upper = float(k_hi * step)
    lower, upper = max(lower, -MAX_DRAFT_BOUND), min(upper, MAX_DRAFT_BOUND)
    if integer:
        lower, upper = float(math.floor(lower)), float(math.ceil(upper))
    return lower, upper


# ---- one streaming pass ----------------------------------------------------------------------------
@dataclass
class ColumnProfile:
    """What one pass learns about a column (private: for the draft, never released as such).

    ``counts`` holds the present cells' text (as a categorical column would read them) and their
    counts, for at most ``cap`` distinct values; ``saturated`` says a value beyond them was seen
    (so ``len(counts) == min(distinct, cap)``). With a sorted ``grid`` of ``m`` edges, ``intervals``
    counts the numbers in each of its ``m + 1`` intervals ``(-inf, g_0), [g_0, g_1), ..., [g_{m-1},
    inf)`` (the bounds histogram of ``draft_dp``)."""

    name: str
    cap: int
    rows: int = 0
    missing: int = 0
    non_numbers: int = 0
    non_integers: int = 0
    numbers: int = 0
    lo: float = math.inf
    hi: float = -math.inf
    counts: dict[str, int] = field(default_factory=dict)
    saturated: bool = False
    tokens_seen: set[str] = field(default_factory=set)
    intervals: np.ndarray | None = None
    #: No present value repeated among the first ``IDENTIFIER_SAMPLE``, and no number that is not
    #: whole (measures are not identifiers).
    distinct: bool = True
    _hashes: np.ndarray | None = field(default=None, repr=False)

    @property
    def present(self) -> int:
        """Cells that are not missing."""
        return self.rows - self.missing

    @property
    def distinct_capped(self) -> int:
        """``min(distinct present values, cap)``."""
        return len(self.counts)

    @property
    def identifier(self) -> bool:
        """One distinct value per row, over at least ``MIN_IDENTIFIER_ROWS`` present values, of text
        or of whole numbers spread over less than twice as many values as rows (IDs, not measures)."""
        if not self.distinct or self.present < MIN_IDENTIFIER_ROWS:
            return False
        return self.non_numbers > 0 or self.hi - self.lo < 2 * self.present

    def _track_repeats(self, text: np.ndarray) -> None:
        """Clear ``distinct`` once a value of ``text`` (present cells) repeats one seen before, or a
        number that is not whole was seen."""
        if self.non_integers:
            self.distinct, self._hashes = False, None
        tracked = 0 if self._hashes is None else len(self._hashes)
        if not self.distinct or tracked >= IDENTIFIER_SAMPLE or not len(text):
            return
        h = np.sort(pd.util.hash_array(np.asarray(text[: IDENTIFIER_SAMPLE - tracked], dtype=object)))
        seen = self._hashes
        repeat = bool((h[1:] == h[:-1]).any())
        if not repeat and seen is not None and len(seen):
            at = np.minimum(np.searchsorted(seen, h), len(seen) - 1)
            repeat = bool((seen[at] == h).any())
        if repeat:
            self.distinct, self._hashes = False, None
        else:
            self._hashes = h if seen is None else np.sort(np.concatenate([seen, h]))

    def add(self, series: pd.Series, tokens: Sequence[str], extra: Sequence[str], grid: np.ndarray | None) -> None:
        """Count one chunk of the column (cells read as ``encode.column_cells`` reads them)."""
        cells = column_cells(series)
        self.rows += len(cells)
        if cells.dtype.kind == "f":
            miss = np.isnan(cells)
            present = cells[~miss]
            finite = np.isfinite(present)
            numbers = present[finite]
            text = numbers_as_text(present)
        else:
            miss = np.isin(cells, list(tokens))
            for t in extra:
                if t not in self.tokens_seen and bool(np.any(cells == t)):
                    self.tokens_seen.add(t)
            # the parser of encode._encode_numeric, on the same cells
            x = pd.to_numeric(pd.Series(np.where(miss, "nan", cells)), errors="coerce").to_numpy(float)
            finite = np.isfinite(x[~miss])
            numbers = x[~miss][finite]
            text = cells[~miss]
        self.missing += int(miss.sum())
        self.non_numbers += int((~finite).sum())
        self.numbers += len(numbers)
        if len(numbers):
            self.lo = min(self.lo, float(numbers.min()))
            self.hi = max(self.hi, float(numbers.max()))
            self.non_integers += int(np.sum(np.floor(numbers) != numbers))
            if grid is not None:
                where = np.searchsorted(grid, numbers, side="right")  # interval i holds g_{i-1} <= x < g_i
                self.intervals += np.bincount(where, minlength=len(grid) + 1)
        self._track_repeats(text)
        if not self.saturated and len(text):
            for value, n in pd.Series(text, dtype=object).value_counts(sort=False).items():
                if value in self.counts:
                    self.counts[value] += int(n)
                elif len(self.counts) < self.cap:
                    self.counts[value] = int(n)
                else:
                    self.saturated = True
                    break


def profile_chunks(
    frames: Iterable[pd.DataFrame],
    names: Sequence[str],
    cap: int,
    missing_values: Sequence[str] = (),
    grid: np.ndarray | None = None,
) -> list[ColumnProfile]:
    """One pass over ``frames`` (chunks of one table with columns ``names``): a profile per column."""
    tokens = tuple(MISSING_TOKENS) + tuple(missing_values)
    profiles = [ColumnProfile(n, cap) for n in names]
    if grid is not None:
        for p in profiles:
            p.intervals = np.zeros(len(grid) + 1, dtype=np.int64)
    for frame in frames:
        for p, name in zip(profiles, names):
            p.add(frame[name], tokens, missing_values, grid)
    return profiles


# ---- decisions ---------------------------------------------------------------------------------------
@dataclass
class DraftResult:
    """A drafted schema's entries (``Schema.from_dict({"columns": columns})`` builds it), the notes for its
    operator (private facts included: print them, do not publish them), and the columns left out of it."""

    columns: list[dict[str, Any]]
    notes: list[str]
    dropped: list[str]
    #: The columns of ``dropped`` left out as likely identifiers (one distinct value per row).
    identifiers: list[str] = field(default_factory=list)


def numeric_spec(
    name: str, lo: float, hi: float, integer: bool, bins: int, missing: bool, tokens: Sequence[str]
) -> dict[str, Any]:
    """A numeric schema entry over ``round_outward(lo, hi)``."""
    lower, upper = round_outward(lo, hi, integer)
    spec: dict[str, Any] = {"name": name, "type": "numeric", "lower": lower, "upper": upper, "bins": bins}
    if integer:
        spec["integer"] = True
    if missing:
        spec["missing"] = True
    if missing and tokens:
        spec["missing_values"] = list(tokens)
    return spec


def categorical_spec(name: str, categories: Iterable[str], missing: bool, tokens: Sequence[str]) -> dict[str, Any]:
    """A categorical schema entry with ``categories`` sorted (``category_order``); ``InputError`` for
    a category no cell can match (``cells.text_fault``)."""
    spec: dict[str, Any] = {"name": name, "type": "categorical", "categories": category_order(categories)}
    for c in spec["categories"]:
        check_category(c, "the value", f"column {name!r}: cannot be drafted as a category")
    if missing:
        spec["missing"] = True
    if missing and tokens:
        spec["missing_values"] = list(tokens)
    return spec


def decide(
    p: ColumnProfile,
    categorical_max: int,
    bins: int,
    missing_values: Sequence[str],
    stored_type: str | None = None,
) -> tuple[dict[str, Any] | None, str | None]:
    """The schema entry of one profiled column (None: left out) and a note for the operator."""
    tokens = [t for t in missing_values if t in p.tokens_seen]
    missing = p.missing > 0
    can_be_numeric = stored_type is None or is_number_type(stored_type)
    can_be_categorical = stored_type is None or is_text_type(stored_type)
    if stored_type is not None and not (can_be_numeric or can_be_categorical):
        return None, (
            f"column '{p.name}' is stored as {stored_type} in Parquet, which no schema column reads: left out "
            "of the schema (store it as numbers or text to draft it; a release ignores it in the silos)"
        )
    if p.present == 0:
        if can_be_numeric:
            return numeric_spec(p.name, 0.0, 0.0, True, bins, True, tokens), (
                f"column '{p.name}': every cell is missing; drafted as the placeholder numeric 0..0 with "
                "missing values: give it its real public domain"
            )
        spec = categorical_spec(p.name, [PLACEHOLDER_CATEGORY], True, tokens)
        return spec, (
            f"column '{p.name}': every cell is missing; drafted with the placeholder category "
            f"{PLACEHOLDER_CATEGORY!r}: give it its real public categories"
        )
    if p.identifier:
        return None, identifier_note(p.name)
    few = not p.saturated and p.distinct_capped <= categorical_max
    if few and can_be_categorical:
        return categorical_spec(p.name, p.counts, missing, tokens), None
    if p.non_numbers == 0 and can_be_numeric:
        note = None
        if p.lo < -MAX_DRAFT_BOUND or p.hi > MAX_DRAFT_BOUND:
            note = (
                f"column '{p.name}': values beyond +-{MAX_DRAFT_BOUND:g} (the widest bounds that stay exact) "
                "will be clipped to the bounds; express the column in larger units"
            )
        return numeric_spec(p.name, p.lo, p.hi, p.non_integers == 0, bins, missing, tokens), note
    why = (
        f"stored as {stored_type} in Parquet (text), with" if stored_type is not None and not can_be_numeric else "has"
    )
    return None, (
        f"column '{p.name}' {why} more than {categorical_max} distinct values (--categorical-max), not all "
        "of them numbers: left out of the schema (e.g. free text or IDs; a release ignores it in the silos), "
        "or raise --categorical-max"
    )


def identifier_note(name: str) -> str:
    """The note on a column left out as a likely identifier."""
    return (
        f"column '{name}' has one distinct value per row, likely an identifier (or free text): left out of "
        "the schema, and a release ignores it in the silos; if it is a real attribute, declare it from public "
        "facts"
    )


def check_options(categorical_max: int, bins: int, missing_values: Sequence[str]) -> None:
    """``categorical_max``, ``bins`` and ``missing_values`` are usable (``OptionError`` naming them
    as Python does; the command line renames them to its flags)."""
    if isinstance(categorical_max, bool) or not isinstance(categorical_max, int) or categorical_max < 0:
        raise OptionError(
            f"categorical_max must be a whole number of at least 0, not {categorical_max!r}", "categorical_max"
        )
    if categorical_max > MAX_COLUMN_CELLS:
        raise OptionError(
            f"categorical_max {categorical_max} is more than the {MAX_COLUMN_CELLS:,} cells a column may have",
            "categorical_max",
        )
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_COLUMN_CELLS:
        raise OptionError(f"bins must be a whole number from 1 to {MAX_COLUMN_CELLS:,}, not {bins!r}", "bins")
    for t in missing_values:
        if not isinstance(t, str) or t != t.strip():
            raise OptionError(
                f"missing_values {t!r}: cells are read without surrounding spaces, so a token must have none",
                "missing_values",
            )


def draft_profiles(
    profiles: Sequence[ColumnProfile],
    source: str,
    categorical_max: int,
    bins: int,
    missing_values: Sequence[str] = (),
    stored_types: dict[str, str] | None = None,
) -> DraftResult:
    """The draft of profiled columns (``decide`` on each)."""
    if profiles and all(p.rows == 0 for p in profiles):
        raise InputError(f"{source}: the table has no rows, so there is nothing to draft a schema from")
    columns, notes, dropped, identifiers = [], [], [], []
    for p in profiles:
        spec, note = decide(p, categorical_max, bins, missing_values, (stored_types or {}).get(p.name))
        if spec is None:
            dropped.append(p.name)
            if p.identifier:
                identifiers.append(p.name)
        else:
            columns.append(spec)
        if note:
            notes.append(note)
    if not columns:
        raise InputError(f"{source}: no column could be drafted ({'; '.join(notes)})")
    return DraftResult(columns, notes, dropped, identifiers)


def draft_table(
    path: str | Path,
    categorical_max: int = DEFAULT_CATEGORICAL_MAX,
    bins: int = DEFAULT_BINS,
    missing_values: Sequence[str] = (),
) -> DraftResult:
    """Draft a schema from the table at ``path`` (CSV, gzip CSV or Parquet), read in chunks."""
    from ..common import parquet_types, read_chunks, read_header, table_format

    check_options(categorical_max, bins, missing_values)
    source = str(path)
    names = read_header(path)
    check_header(names, source)
    types = parquet_types(path) if table_format(path) == "parquet" else None
    frames = (c.frame for c in read_chunks(path))
    profiles = profile_chunks(frames, names, categorical_max + 1, missing_values)
    return draft_profiles(profiles, source, categorical_max, bins, missing_values, types)


def draft_frame(
    df: pd.DataFrame,
    categorical_max: int = DEFAULT_CATEGORICAL_MAX,
    bins: int = DEFAULT_BINS,
    missing_values: Sequence[str] = (),
    source: str = "<frame>",
) -> DraftResult:
    """Draft a schema from a data frame of any dtypes (as ``Silo.from_frame`` reads it); each note
    is also logged as a warning (logger ``privsyn_fed.schema``), as the command prints it."""
    check_options(categorical_max, bins, missing_values)
    names = [str(c) for c in df.columns]
    check_header(names, source)
    check_cell_types(df, source)
    frame = df.set_axis(names, axis=1)
    profiles = profile_chunks([frame], names, categorical_max + 1, missing_values)
    result = draft_profiles(profiles, source, categorical_max, bins, missing_values)
    for note in result.notes:
        log.warning(note)
    return result


def warn_private(source: str) -> None:
    """Warn (``PrivateDraftWarning``) that a schema drafted from ``source`` is not private."""
    warnings.warn(PRIVATE_WARNING.format(source=source), PrivateDraftWarning, stacklevel=3)


# ---- the document ------------------------------------------------------------------------------------
def plain_numbers(value: Any) -> Any:
    """Whole floats as integers (10 rather than 10.0), recursively, for a readable schema file."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    if isinstance(value, list):
        return [plain_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: plain_numbers(v) for k, v in value.items()}
    return value


def draft_document(columns: list[dict[str, Any]], note: dict[str, Any]) -> dict[str, Any]:
    """The schema file of a draft: the ``"_draft"`` note first, then the columns."""
    return {DRAFT_NOTE_KEY: note, "columns": plain_numbers(columns)}


def plain_note(source: str, dropped: Sequence[str], identifiers: Sequence[str] = ()) -> dict[str, Any]:
    """The ``"_draft"`` note of a schema read off private rows: the columns left out, and those of
    them that look like identifiers (one distinct value per row)."""
    note: dict[str, Any] = {
        "warning": PRIVATE_WARNING.format(source=Path(source).name),
        "privacy": "none: read off private rows",
        "drafted_from": Path(source).name,
    }
    if dropped:
        note["left_out"] = list(dropped)
    if identifiers:
        note["likely_identifiers"] = list(identifiers)
    return note


def write_document(path: str | Path, document: dict[str, Any]) -> None:
    """Write a schema document atomically (``fileio.write_atomic``)."""
    import json

    from ..common import write_atomic

    def dump(fh):
        json.dump(document, fh, indent=2, ensure_ascii=False)
        fh.write("\n")

    write_atomic(path, dump)
