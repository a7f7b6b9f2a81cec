"""Drafting a schema: from a table's private rows (for review), or from a public data dictionary.

A schema is public; a draft read off private rows is not. ``draft_table`` and ``draft_frame`` read
the rows in one streaming pass (``profile``; memory per column: at most ``categorical_max + 1``
distinct values, ``IDENTIFIER_SAMPLE`` hashes and a sketch's counters) and build a schema that
the same rows always pass (``Silo.load`` / ``Silo.from_frame``), by the rules of the release's
own input validation (``encode.column_cells``, ``encode.missing_mask``, the same number parser):

* **missing**: a column is ``"missing": true`` when any cell is missing (one of
  ``schema.MISSING_TOKENS``, a token given in ``missing_values``, or NaN in a typed column);
* **type**: a column with at most ``categorical_max`` distinct present values is categorical
  (categories sorted: numbers by value, then text); one with more is numeric when every present
  value is a finite number, or when all but at most ``MAX_CODES`` distinct codes are, in no more
  cells than the numbers (``ColumnProfile.missing_codes``: ``N`` for "not applicable"), which are
  then its ``missing_values``, said in a note; it is otherwise left out of the schema with a note
  (free-text IDs);
  a column with no present value at all is drafted as the placeholder numeric ``0..0`` with
  ``missing``. Parquet stored types are respected: a floating-point column is never categorical,
  a text column never numeric, and a column of a type no schema reads (timestamps, nulls) is left out;
* **identifiers** (``identifiers.identifier_reason``, on the counts of a column's first
  ``IDENTIFIER_SAMPLE`` present cells): a column of many distinct values for its cells, of text or
  of whole numbers that fill their range (row numbers, a patient's id repeated in a panel, names),
  is left out with a note; a release ignores it in the silos. ``include`` keeps such a column,
  ``exclude`` leaves out a column without reading it;
* **bins**: ``bins`` of equal width, or for a skewed column (``edges``, ``draft_edges``: by default
  where the fullest such bin would hold over a quarter of its numbers) ``"edges"`` at its quantiles,
  its least and greatest values and 0, said in a note;
* **integer**: a numeric column whose every value is a whole number is ``"integer": true``;
* **atoms**: the values of a numeric column that hold at least ``ATOM_SHARE`` of its numbers by the
  lower bound of a Misra--Gries sketch (``heavy_hitters``; a zero income, a detection limit), at most
  ``MAX_ATOMS`` of the commonest, sorted, inside the bounds, are proposed as ``"atoms"``;
* **decimals**: a numeric column that is not integer gets ``"decimals": k``, the most decimal places
  its numbers show (shortest representation), when ``k <= MAX_DRAFT_DECIMALS``;
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

import pandas as pd

from ..common import InputError, OptionError, is_engine_url, is_number_type, is_text_type
from .cells import (
    DEFAULT_BINS,
    MAX_COLUMN_CELLS,
    category_order,
    check_category,
    check_cell_types,
    check_header,
)
from .draft_edges import EDGE_CHOICES, cut_skewed
from .identifiers import identifier_note
from .profile import IDENTIFIER_SAMPLE as IDENTIFIER_SAMPLE
from .profile import MAX_DRAFT_DECIMALS, ColumnProfile, profile_chunks

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
#: A numeric column's value that holds at least this share of its numbers is proposed as an atom.
ATOM_SHARE = 0.05
#: The most atoms proposed for one column (the commonest).
MAX_ATOMS = 8
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


# ---- decisions ---------------------------------------------------------------------------------------
@dataclass
class DraftResult:
    """A drafted schema's entries (``Schema.from_dict({"columns": columns})`` builds it), the notes for its
    operator (private facts included: print them, do not publish them), and the columns left out of it."""

    columns: list[dict[str, Any]]
    notes: list[str]
    dropped: list[str]
    #: The columns of ``dropped`` left out as likely identifiers (``identifiers.identifier_reason``).
    identifiers: list[str] = field(default_factory=list)


def numeric_spec(
    name: str,
    lo: float,
    hi: float,
    integer: bool,
    bins: int,
    missing: bool,
    tokens: Sequence[str],
    atoms: Sequence[float] = (),
    decimals: int | None = None,
) -> dict[str, Any]:
    """A numeric schema entry over ``round_outward(lo, hi)``; ``"atoms"``: those of ``atoms`` inside
    the bounds (when any); ``"decimals"`` when given (never for an integer column)."""
    lower, upper = round_outward(lo, hi, integer)
    spec: dict[str, Any] = {"name": name, "type": "numeric", "lower": lower, "upper": upper, "bins": bins}
    if integer:
        spec["integer"] = True
    inside = sorted(float(a) for a in atoms if lower <= a <= upper)
    if inside:
        spec["atoms"] = inside
    if decimals is not None and not integer:
        spec["decimals"] = int(decimals)
    if missing:
        spec["missing"] = True
    if missing and tokens:
        spec["missing_values"] = list(tokens)
    return spec


def proposed_atoms(p: ColumnProfile) -> list[float]:
    """The values of a profiled column whose Misra--Gries counter (a lower bound of their count)
    is at least ``ATOM_SHARE`` of its numbers: the ``MAX_ATOMS`` commonest, sorted."""
    return p.heavy.frequent(ATOM_SHARE, MAX_ATOMS)


def proposed_decimals(p: ColumnProfile) -> int | None:
    """The decimal places of a profiled column that is not integer, when at most ``MAX_DRAFT_DECIMALS``."""
    return p.decimals if p.non_integers and p.decimals <= MAX_DRAFT_DECIMALS else None


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
    include: bool = False,
) -> tuple[dict[str, Any] | None, str | None]:
    """The schema entry of one profiled column (None: left out) and a note for the operator;
    ``include``: drafted even when it looks like an identifier."""
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
    reason = None if include else p.identifier
    if reason:
        return None, identifier_note(p.name, reason)
    few = not p.saturated and p.distinct_capped <= categorical_max
    if few and can_be_categorical:
        return categorical_spec(p.name, p.counts, missing, tokens), None
    codes = p.missing_codes if can_be_numeric else []
    if (p.non_numbers == 0 or codes) and can_be_numeric:
        said = [_codes_note(p, codes)] if codes else []
        if p.lo < -MAX_DRAFT_BOUND or p.hi > MAX_DRAFT_BOUND:
            said.append(
                f"column '{p.name}': values beyond +-{MAX_DRAFT_BOUND:g} (the widest bounds that stay exact) "
                "will be clipped to the bounds; express the column in larger units"
            )
        note = "; ".join(said) or None
        integer = p.non_integers == 0
        missing, tokens = missing or bool(codes), [*tokens, *codes]
        spec = numeric_spec(p.name, p.lo, p.hi, integer, bins, missing, tokens, proposed_atoms(p), proposed_decimals(p))
        return spec, note
    why = (
        f"stored as {stored_type} in Parquet (text), with" if stored_type is not None and not can_be_numeric else "has"
    )
    return None, (
        f"column '{p.name}' {why} more than {categorical_max} distinct values (--categorical-max), not all "
        "of them numbers: left out of the schema (e.g. free text or IDs; a release ignores it in the silos), "
        "or raise --categorical-max"
    )


def _codes_note(p: ColumnProfile, codes: Sequence[str]) -> str:
    """The note for a numeric column drafted with its non-number codes read as missing."""
    shown = ", ".join(f"{c!r} ({p.codes[c]:,} cells)" for c in codes)
    return (
        f"column '{p.name}': numbers and the code(s) {shown}, drafted as numeric with the code(s) read as "
        "missing (missing_values); if a code stands for a value, give it one in the schema"
    )


def check_options(categorical_max: int, bins: int, missing_values: Sequence[str], edges: str = "auto") -> None:
    """``categorical_max``, ``bins``, ``missing_values`` and ``edges`` are usable (``OptionError``
    naming them as Python does; the command line renames them to its flags)."""
    if edges not in EDGE_CHOICES:
        raise OptionError(f"edges must be one of {', '.join(EDGE_CHOICES)}, not {edges!r}", "edges")
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
    include: Sequence[str] = (),
    edges: str = "auto",
) -> DraftResult:
    """The draft of profiled columns (``decide`` on each; those named in ``include`` are drafted
    even when they look like identifiers; a numeric one's bins by ``edges``, ``draft_edges``)."""
    if profiles and all(p.rows == 0 for p in profiles):
        raise InputError(f"{source}: the table has no rows, so there is nothing to draft a schema from")
    columns, notes, dropped, identifiers = [], [], [], []
    for p in profiles:
        kept = p.name in include
        spec, note = decide(p, categorical_max, bins, missing_values, (stored_types or {}).get(p.name), kept)
        if spec is None:
            dropped.append(p.name)
            reason = None if kept else p.identifier
            if reason and note == identifier_note(p.name, reason):
                identifiers.append(p.name)
        else:
            spec, cut = cut_skewed(edges, p.number_sample, spec, p.lo, p.hi)
            columns.append(spec)
            notes += [cut] if cut else []
        if note:
            notes.append(note)
    if not columns:
        raise InputError(f"{source}: no column could be drafted ({'; '.join(notes)})")
    return DraftResult(columns, notes, dropped, identifiers)


def check_chosen(names: Sequence[str], exclude: Sequence[str], include: Sequence[str], source: str) -> None:
    """Every column named by ``exclude`` and ``include`` (``--exclude`` and ``--include``) is in the
    table's header ``names``, and none is named by both: else ``InputError`` naming the first."""
    for flag, chosen in (("--exclude", exclude), ("--include", include)):
        for name in chosen:
            if name not in names:
                raise InputError(f"{flag} {name}: {source} has no column '{name}' (its columns: {', '.join(names)})")
    both = [n for n in exclude if n in include]
    if both:
        raise InputError(f"column '{both[0]}' is given to both --exclude and --include: keep one")


def excluded_note(name: str) -> str:
    """The note on a column left out unread (``exclude``)."""
    return f"column '{name}' excluded (--exclude): left out of the schema unread, and a release ignores it in the silos"


def _drafted(result: DraftResult, names: Sequence[str], exclude: Sequence[str]) -> DraftResult:
    """``result`` with the ``exclude``d columns among the left out (in the table's order) and noted."""
    if not exclude:
        return result
    order = {n: i for i, n in enumerate(names)}
    gone = [n for n in names if n in exclude]
    dropped = sorted([*result.dropped, *gone], key=order.__getitem__)
    return DraftResult(result.columns, [*map(excluded_note, gone), *result.notes], dropped, result.identifiers)


def draft_table(
    path: str | Path,
    categorical_max: int = DEFAULT_CATEGORICAL_MAX,
    bins: int = DEFAULT_BINS,
    missing_values: Sequence[str] = (),
    exclude: Sequence[str] = (),
    include: Sequence[str] = (),
    edges: str = "auto",
) -> DraftResult:
    """Draft a schema from the table at ``path`` (CSV, gzip CSV or Parquet), read in chunks; the
    columns named in ``exclude`` are never read, those in ``include`` are drafted even when they look
    like identifiers (``check_chosen``); ``edges``: a numeric column's bins (``draft_edges``)."""
    from ..common import TYPED_FORMATS, read_chunks, read_header, stored_types, table_format

    check_options(categorical_max, bins, missing_values, edges)
    source = str(path)
    names = read_header(path)
    check_header(names, source)
    check_chosen(names, exclude, include, source)
    read = [n for n in names if n not in exclude]
    if not read:
        raise InputError(f"{source}: every column is excluded, so there is nothing to draft")
    types = stored_types(path) if table_format(path) in TYPED_FORMATS else None
    frames = (c.frame for c in read_chunks(path, columns=read if exclude else None))
    profiles = profile_chunks(frames, read, categorical_max + 1, missing_values, sample=edges != "uniform")
    result = draft_profiles(profiles, source, categorical_max, bins, missing_values, types, include, edges)
    return _drafted(result, names, exclude)


def draft_frame(
    df: pd.DataFrame,
    categorical_max: int = DEFAULT_CATEGORICAL_MAX,
    bins: int = DEFAULT_BINS,
    missing_values: Sequence[str] = (),
    source: str = "<frame>",
    exclude: Sequence[str] = (),
    include: Sequence[str] = (),
    edges: str = "auto",
) -> DraftResult:
    """Draft a schema from a data frame of any dtypes (as ``Silo.from_frame`` reads it); each note
    is also logged as a warning (logger ``privsyn_fed.schema``), as the command prints it;
    ``exclude``, ``include`` and ``edges`` as ``draft_table``'s."""
    check_options(categorical_max, bins, missing_values, edges)
    names = [str(c) for c in df.columns]
    check_header(names, source)
    check_chosen(names, exclude, include, source)
    frame = df.set_axis(names, axis=1).loc[:, [n not in exclude for n in names]]
    check_cell_types(frame, source)
    read = [str(c) for c in frame.columns]
    if not read:
        raise InputError(f"{source}: every column is excluded, so there is nothing to draft")
    profiles = profile_chunks([frame], read, categorical_max + 1, missing_values, sample=edges != "uniform")
    result = draft_profiles(profiles, source, categorical_max, bins, missing_values, None, include, edges)
    result = _drafted(result, names, exclude)
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
    them that look like identifiers (``identifiers.identifier_reason``)."""
    shown = source if is_engine_url(source) else Path(source).name  # a URL whole: it holds no password
    note: dict[str, Any] = {
        "warning": PRIVATE_WARNING.format(source=shown),
        "privacy": "none: read off private rows",
        "drafted_from": shown,
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
