"""A table's cells: how one is read (a number, or text), which stand for a missing value, and how
many cells a column's domain may have. Shared by the schema, the encoder of a silo's rows and the
drafter of a schema, so that a drafted schema reads its rows exactly as a release does."""

from __future__ import annotations

import math
import re
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ..common import InputError

DEFAULT_BINS = 32
#: The most cells (bins or categories) one column may have, and the widest bounds: within
#: ``+-2^53`` every whole number is exact in floating point, so bins and whole numbers stay exact.
MAX_COLUMN_CELLS = 100_000
MAX_ABS_BOUND = float(2**53)
#: Strings read as a missing value in an input CSV (a column may add its own with ``missing_values``).
MISSING_TOKENS = ("", "NA", "N/A", "NaN", "nan", "null", "NULL", "None")
#: Control characters (and the line and paragraph separators): no column name or category may hold one.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def text_fault(text: str) -> str | None:
    """Why ``text`` can never be matched as a column name, a category or a missing-value token, or
    None: cells and headers are read without surrounding white space, and none may hold a control
    character (it would also reach a terminal or a report raw)."""
    if text != text.strip():
        return "has leading or trailing white space, which cells never have (they are read without it)"
    control = CONTROL.search(text)
    if control is not None:
        return f"holds the control character {control.group()!r}, which no name or category may hold"
    return None


def check_category(value: str, what: str, where: str) -> None:
    """``InputError`` (``where``: the source and column) when ``value`` has a ``text_fault``."""
    fault = text_fault(value)
    if fault is not None:
        raise InputError(f"{where}: {what} {value!r} {fault}")


def category_order(values: Iterable[str]) -> list[str]:
    """Categories sorted: those that read as numbers by value (then as text), then the rest as text."""

    def key(v: str):
        try:
            x = float(v)
        except ValueError:
            x = math.nan
        return (0, x, v) if math.isfinite(x) else (1, 0.0, v)

    return sorted(values, key=key)


def check_column_name(name: str, index: int, source: str) -> None:
    """A name a table's header can match: not blank, without surrounding spaces (headers are read
    without them); ``InputError`` naming ``source`` and the column (``index`` counts from 0)."""
    if not name.strip():
        raise InputError(f"{source}: column #{index + 1}: the name {name!r} is blank")
    if name != name.strip():
        raise InputError(
            f"{source}: column {name!r}: the name has leading or trailing spaces, which never match a CSV header "
            "(headers are read without them); remove them"
        )
    control = CONTROL.search(name)
    if control is not None:
        raise InputError(f"{source}: column {name!r}: the name {text_fault(name)}")


def check_header(names: Sequence[str], source: str) -> None:
    """Every name of a table's header can be a schema's column (``check_column_name``), none twice."""
    seen: set[str] = set()
    for i, name in enumerate(names):
        check_column_name(name, i, source)
        if name in seen:
            raise InputError(f"{source}: column '{name}' appears twice")
        seen.add(name)


def check_cell_types(df: pd.DataFrame, source: str) -> None:
    """Refuse a data frame column whose cells are neither real numbers nor text (complex numbers)."""
    for name, dtype in df.dtypes.items():
        if pd.api.types.is_complex_dtype(dtype):
            raise InputError(f"{source}: column '{name}' holds complex numbers ({dtype}); give real numbers or text")


def shown(cell: object) -> str:
    """A cell as a message quotes it: a number as Python writes it (``inf``, ``1e+300``), text quoted."""
    if isinstance(cell, (float, np.floating)):
        return repr(float(cell))
    return repr(str(cell))


def column_cells(series: pd.Series) -> np.ndarray:
    """A column's cells as ``encode_frame`` reads them: floats (NaN where missing) for a column of
    numbers (plain or nullable ints and floats, not booleans); otherwise text stripped of surrounding
    white space, with ``""`` for a missing cell (None, NaN, ``pd.NA``, ``NaT``) and booleans as
    ``True``/``False`` (as pandas writes them to CSV)."""
    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype):
        return series.astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    missing = series.isna().to_numpy()
    if missing.any():
        series = series.astype(object).where(~missing, "")
    if not pd.api.types.is_string_dtype(series.dtype) or series.dtype == object:
        series = series.astype(str)
    return series.str.strip().to_numpy(dtype=object)


def missing_mask(col, text: np.ndarray) -> np.ndarray:
    """Cells that stand for a missing value: one of the missing tokens or the column's own
    ``missing_values``, unless the schema declares that very text as a category (a declared
    category always wins, so a category named ``NA`` or ``None`` is never read as missing)."""
    return pd.Index(missing_tokens(col), dtype=object).get_indexer(text) >= 0


def missing_tokens(col) -> list[str]:
    """The texts that stand for a missing value in ``col`` (``missing_mask``), each once (a column's
    ``missing_values`` may repeat a default token, and an index of them must be unique)."""
    categories = col.categories if col.type == "categorical" else ()
    return [t for t in dict.fromkeys(MISSING_TOKENS + col.missing_values) if t not in categories]


def numbers_as_text(x: np.ndarray) -> np.ndarray:
    """Numbers as category text: whole numbers without a decimal point (``3.0`` -> ``"3"``), others
    as Python writes them, ``""`` for NaN."""
    out = np.empty(len(x), dtype=object)
    nan = np.isnan(x)
    whole = ~nan & (np.floor(x) == x) & (np.abs(x) < 2.0**63)
    out[nan] = ""
    out[whole] = x[whole].astype(np.int64).astype(str)
    rest = ~nan & ~whole
    out[rest] = [repr(float(v)) for v in x[rest]]
    return out
