"""A schema from a data dictionary in CSV: public facts, one row per column.

Columns ``name,type,min,max,categories`` (``categories`` separated by ``|``), optional ``bins``,
``edges`` (a numeric column's cut points between bins, ``|``-separated), ``scale`` (``linear`` or
``log``), ``integer``, ``atoms`` (a numeric column's values that are cells of their own,
``|``-separated), ``decimals`` (the places a numeric column's synthetic values are rounded to),
``missing`` and ``missing_values`` (``|``-separated); ``description``, ``label``,
``notes``, ``comment`` and ``source`` columns are ignored. Every row is checked as a schema entry,
so an error names the file, the line and the dictionary's column.
"""

from __future__ import annotations

import csv
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..common import InputError, OptionError
from .cells import DEFAULT_BINS, MAX_COLUMN_CELLS
from .schema import Schema

DICTIONARY_FIELDS = (
    "name",
    "type",
    "min",
    "max",
    "categories",
    "bins",
    "edges",
    "scale",
    "integer",
    "atoms",
    "decimals",
    "missing",
    "missing_values",
)
DICTIONARY_IGNORED = ("description", "label", "notes", "comment", "source")
#: What separates categories (and missing values) in one cell of a data dictionary.
CATEGORY_SEPARATOR = "|"
_TRUE, _FALSE = ("true", "yes", "y", "1"), ("false", "no", "n", "0", "")


def read_dictionary(path: str | Path, bins: int = DEFAULT_BINS) -> Schema:
    """A schema from a data dictionary in CSV (see the module docstring); ``InputError`` naming the
    file, the line and the dictionary's column for a missing or malformed field."""
    return Schema.from_dict({"columns": dictionary_columns(path, bins)}, source=str(path))


def dictionary_columns(path: str | Path, bins: int = DEFAULT_BINS) -> list[dict[str, Any]]:
    """The schema entries of a data dictionary in CSV, each checked by ``Schema.from_dict``."""
    path = Path(path)
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_COLUMN_CELLS:
        raise OptionError(f"bins must be a whole number from 1 to {MAX_COLUMN_CELLS:,}, not {bins!r}", "bins")
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh, _field_limit(os.fstat(fh.fileno()).st_size):
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                raise InputError(f"{path}: the data dictionary is empty (no header)")
            header = [h.strip().lower() for h in header]
            _check_dictionary_header(path, header)
            rows = []
            start = reader.line_num + 1
            for row in reader:
                line, start = start, reader.line_num + 1
                if not any(cell.strip() for cell in row):
                    continue
                if len(row) > len(header):
                    raise InputError(
                        f"{path}: line {line}: {len(row)} fields but the header names {len(header)}; quote a "
                        "cell that holds a comma"
                    )
                cells = {h: (row[i].strip() if i < len(row) else "") for i, h in enumerate(header)}
                rows.append((line, cells))
    except FileNotFoundError:
        raise InputError(f"{path}: data dictionary not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a data dictionary") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: the data dictionary is not UTF-8 text; save it as UTF-8 CSV") from None
    except csv.Error as exc:
        raise InputError(f"{path}: cannot parse as CSV ({exc})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not rows:
        raise InputError(f"{path}: the data dictionary has a header but no rows (one row per column)")
    columns: list[dict[str, Any]] = []
    lines: dict[str, int] = {}
    for line, cells in rows:
        spec = _dictionary_spec(path, line, cells, bins)
        Schema.from_dict({"columns": [spec]}, source=f"{path}: line {line}")
        if spec["name"] in lines:
            first = lines[spec["name"]]
            raise InputError(
                f"{path}: line {line}, column 'name': '{spec['name']}' is already declared on line {first}"
            )
        lines[spec["name"]] = line
        columns.append(spec)
    return columns


@contextmanager
def _field_limit(size: int) -> Iterator[None]:
    """Let a cell be as long as the file (``size`` bytes) while the block reads it: a categories cell
    may list ``MAX_COLUMN_CELLS`` categories, beyond the csv module's default limit."""
    before = csv.field_size_limit()
    csv.field_size_limit(max(before, size + 1))
    try:
        yield
    finally:
        csv.field_size_limit(before)


def _check_dictionary_header(path: Path, header: list[str]) -> None:
    known = set(DICTIONARY_FIELDS) | set(DICTIONARY_IGNORED)
    for h in header:
        if h not in known:
            raise InputError(
                f"{path}: line 1: unknown column {h!r} (the columns are {', '.join(DICTIONARY_FIELDS)}; "
                f"{', '.join(DICTIONARY_IGNORED)} are ignored)"
            )
    if len(set(header)) != len(header):
        dup = next(h for h in header if header.count(h) > 1)
        raise InputError(f"{path}: line 1: column {dup!r} appears twice")
    for h in ("name", "type"):
        if h not in header:
            raise InputError(f"{path}: line 1: the header has no '{h}' column (needed: name, type)")


def _dictionary_spec(path: Path, line: int, cells: dict[str, str], bins: int) -> dict[str, Any]:
    """One dictionary row as a schema entry; errors name the file, the line and the field."""

    def fault(key: str, problem: str) -> InputError:
        return InputError(f"{path}: line {line}, column '{key}': {problem}")

    def get(key: str) -> str:
        return cells.get(key, "")

    def flag(key: str) -> bool:
        v = get(key).lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
        raise fault(key, f"{get(key)!r} is not true or false")

    def listed(key: str) -> list[str]:
        items = [v.strip() for v in get(key).split(CATEGORY_SEPARATOR)]
        if any(v == "" for v in items):
            raise fault(key, f"an empty item in {get(key)!r} (items are separated by '{CATEGORY_SEPARATOR}')")
        return items

    name = get("name")
    if not name:
        raise fault("name", "the column has no name")
    kind = get("type").lower()
    if kind not in ("numeric", "categorical"):
        raise fault("type", f"column '{name}': the type must be numeric or categorical, not {get('type')!r}")
    spec: dict[str, Any] = {"name": name, "type": kind}
    if kind == "numeric":
        for key, to in (("min", "lower"), ("max", "upper")):
            text = get(key)
            if not text:
                raise fault(key, f"numeric column '{name}' needs a {key}")
            try:
                value = float(text)
            except ValueError:
                raise fault(key, f"column '{name}': {text!r} is not a number") from None
            spec[to] = int(value) if value.is_integer() and abs(value) <= 2**53 else value
        if get("bins"):
            try:
                spec["bins"] = int(get("bins"))
            except ValueError:
                raise fault("bins", f"column '{name}': {get('bins')!r} is not a whole number") from None
        elif not get("edges"):
            spec["bins"] = bins
        if get("edges"):
            try:
                cuts = [float(v) for v in listed("edges")]
            except ValueError:
                raise fault("edges", f"column '{name}': {get('edges')!r} is not numbers separated by '|'") from None
            spec["edges"] = [int(v) if v.is_integer() and abs(v) <= 2**53 else v for v in cuts]
        if get("atoms"):
            try:
                atoms = [float(v) for v in listed("atoms")]
            except ValueError:
                raise fault("atoms", f"column '{name}': {get('atoms')!r} is not numbers separated by '|'") from None
            spec["atoms"] = [int(v) if v.is_integer() and abs(v) <= 2**53 else v for v in atoms]
        if get("decimals"):
            try:
                spec["decimals"] = int(get("decimals"))
            except ValueError:
                raise fault("decimals", f"column '{name}': {get('decimals')!r} is not a whole number") from None
        if get("scale"):
            spec["scale"] = get("scale").lower()
        if flag("integer"):
            spec["integer"] = True
        if get("categories"):
            raise fault("categories", f"numeric column '{name}' has no categories (use min and max)")
    else:
        if not get("categories"):
            raise fault("categories", f"categorical column '{name}' needs its categories, separated by '|'")
        spec["categories"] = listed("categories")
        for key in ("min", "max", "bins", "edges", "scale", "atoms", "decimals"):
            if get(key):
                raise fault(key, f"categorical column '{name}' takes no {key}")
        if flag("integer"):
            raise fault("integer", f"categorical column '{name}' cannot be integer")
    if flag("missing") or (not get("missing") and get("missing_values")):
        spec["missing"] = True
    if get("missing_values"):
        spec["missing_values"] = listed("missing_values")
    return spec
