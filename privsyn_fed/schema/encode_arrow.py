"""Encoding Arrow batches (the silo reader's fast route, ``tables.read_arrow_chunks``).

The result is ``encode_frame``'s on the same cells: the same codes, clipped counts and values, with
Arrow's compute kernels on whole columns instead of a Python string per cell. Text is stripped of
exactly the characters ``str.strip`` removes; missing texts and categories are looked up with
``is_in`` and ``index_in``; numbers in text are parsed by Arrow only where every present cell is a
plain decimal number (``PLAIN_NUMBER``; Arrow's parse then equals pandas' to the last bit). A column
the kernels do not settle (a category not in the schema, a missing value where none is allowed, a
cell that is not a plain finite number, categories stored as numbers) goes to
``encode.encode_cells`` as ``read_chunks`` would give it, which returns the same result or raises
the same one-line error.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..common import arrow_cells, arrow_text, is_number_type
from .cells import column_cells, missing_tokens
from .encode import category_codes, encode_cells, encode_columns
from .schema import CategoricalColumn, NumericColumn, Schema

#: Every character ``str.strip`` removes (``str.isspace``; the tests check the list against Python's).
WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
#: A plain decimal number, which Arrow and pandas parse alike (checked in the tests).
PLAIN_NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"


def encode_batch(batch: pa.RecordBatch, schema: Schema, source: str, first_row: int) -> tuple:
    """``(codes, clipped, values)`` of a batch holding (at least) the schema's columns, by name."""
    return encode_columns(
        schema, batch.num_rows, lambda col: _encode_column(col, batch.column(col.name), source, first_row)
    )


def constant_column(text: str, n_rows: int) -> pa.Array:
    """``text`` in each of ``n_rows`` cells, stored once (a dictionary array)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n_rows, dtype=np.int32)), pa.array([text]))


def _encode_column(col: NumericColumn | CategoricalColumn, array: pa.Array, source: str, first_row: int) -> tuple:
    if isinstance(col, NumericColumn) and is_number_type(str(array.type)):
        return encode_cells(col, arrow_cells(array), source, first_row)  # floats: no text involved
    settled = _settled(col, array)
    if settled is None:
        return encode_cells(col, column_cells(pd.Series(arrow_cells(array))), source, first_row)
    if isinstance(col, CategoricalColumn):
        return settled, 0, None
    return encode_cells(col, settled, source, first_row)  # finite where present: no error to name


def _settled(col: NumericColumn | CategoricalColumn, array: pa.Array) -> np.ndarray | None:
    """Each cell's code (categorical) or number (numeric, NaN where missing), or None where the column
    is not settled here. Each distinct text is settled once (``_distinct_settled``) and the result
    taken for every cell: a dictionary array's own dictionary, else the array dictionary-encoded."""
    if not (pa.types.is_dictionary(array.type) and array.null_count == 0):
        text = arrow_text(array)
        if text is None:
            return None
        array = pc.dictionary_encode(text)
    distinct = _distinct_settled(col, array.dictionary)
    return None if distinct is None else distinct[array.indices.to_numpy(zero_copy_only=False)]


def _distinct_settled(col: NumericColumn | CategoricalColumn, texts: pa.Array) -> np.ndarray | None:
    """``_settled`` for each of the distinct ``texts``."""
    text = arrow_text(texts)
    if text is None:
        return None
    text = pc.utf8_trim(text, characters=WHITESPACE)
    missing = pc.is_in(text, value_set=pa.array(missing_tokens(col), pa.string()))
    is_missing = missing.to_numpy(zero_copy_only=False)
    if is_missing.any() and not col.missing:
        return None
    if isinstance(col, CategoricalColumn):
        found = pc.index_in(text, value_set=pa.array(list(col.categories), pa.string()))
        codes, bad = category_codes(col, pc.fill_null(found, -1).to_numpy(zero_copy_only=False), is_missing)
        return None if bad.any() else codes
    plain = pc.or_(missing, pc.match_substring_regex(text, PLAIN_NUMBER))
    if not pc.all(plain).as_py():
        return None
    number = pc.cast(pc.if_else(missing, pa.scalar(None, pa.string()), text), pa.float64())
    cells = number.to_numpy(zero_copy_only=False)  # NaN where missing
    return cells if np.isfinite(cells[~is_missing]).all() else None
