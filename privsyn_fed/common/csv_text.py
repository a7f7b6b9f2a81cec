"""A frame's CSV text, byte for byte pandas' ``to_csv(index=False, na_rep="")``, written by Arrow.

pandas formats every cell in Python's ``csv`` writer: about 3 s a million rows of Adult's 15
columns, a tenth of a 20M-row release. Arrow's CSV writer (``pyarrow.csv.write_csv``) takes a
quarter of that, and writes the same bytes when it is given what pandas would write:

* whole numbers (numpy or pandas' nullable integers) as Arrow integers: both write them in decimal;
* float64 as the text numpy's ``astype(str)`` gives, the shortest repr (``3.0``, ``1e-07``), which is
  what pandas writes; NaN as a null;
* text as it stands, nulls (``None``, ``NaN``, ``NA``) written empty, as ``na_rep=""`` writes them;
* no quotes (``quoting_style="none"``), which is what pandas' minimal quoting does to a value
  holding none of ``,`` ``"`` ``\\r`` ``\\n``.

Anything else (a value that needs quotes, booleans, dates, categoricals, mixed objects, a single
column, whose empty cell pandas quotes) is written by pandas itself. The header is pandas' always.
"""

from __future__ import annotations

import io
from typing import Any, TextIO

import numpy as np
import pandas as pd

#: A text value holding one of these bytes needs quotes in pandas' minimal quoting (no byte of a
#: character beyond ASCII is one of them in UTF-8).
NEEDS_QUOTES = np.zeros(256, dtype=bool)
NEEDS_QUOTES[[ord(c) for c in ',"\r\n']] = True


def write_frame(part: pd.DataFrame, fh: TextIO, header: bool) -> None:
    """``part.to_csv(fh, index=False, header=header, na_rep="")``, through Arrow where its bytes are
    the same (module docstring)."""
    arrays = _arrow_columns(part) if part.shape[1] > 1 else None
    if arrays is None:
        part.to_csv(fh, index=False, header=header, na_rep="")
        return
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    if header:
        part.iloc[:0].to_csv(fh, index=False, header=True)
    table = pa.Table.from_arrays(arrays, names=[str(c) for c in part.columns])
    options = pa_csv.WriteOptions(include_header=False, quoting_style="none")
    raw = getattr(fh, "buffer", None)
    if raw is not None and str(getattr(fh, "encoding", "")).lower().replace("-", "") == "utf8":
        fh.flush()  # the text layer's header first, then Arrow's bytes straight into the file
        pa_csv.write_csv(table, raw, options)
        return
    buffer = io.BytesIO()
    pa_csv.write_csv(table, buffer, options)
    fh.write(buffer.getvalue().decode("utf-8"))


def _arrow_columns(part: pd.DataFrame) -> list[Any] | None:
    """Each column as the Arrow array whose CSV text is pandas' (module docstring), or None when
    some column is not one Arrow writes the same."""
    import pyarrow as pa

    arrays = []
    for _, column in part.items():
        dtype = column.dtype
        if dtype == np.float64:
            values = column.to_numpy()
            arrays.append(pa.array(values.astype(str), mask=np.isnan(values)))
        elif pd.api.types.is_integer_dtype(dtype):
            arrays.append(pa.array(column, from_pandas=True))
        elif dtype is np.dtype(object) or isinstance(dtype, pd.StringDtype):
            try:
                text = pa.array(column, from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                return None
            if pa.types.is_null(text.type):
                text = text.cast(pa.string())
            if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type)):
                return None
            if _needs_quotes(text):
                return None
            arrays.append(text)
        else:
            return None
    return arrays


def _needs_quotes(text: Any) -> bool:
    """Whether some value of the Arrow text array ``text`` holds a byte of ``NEEDS_QUOTES``: a look
    at the bytes of its values, end to end."""
    offsets_buffer, data = text.buffers()[1:3]
    if data is None:
        return False
    import pyarrow as pa

    offset_type = np.int64 if pa.types.is_large_string(text.type) else np.int32
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[text.offset : text.offset + len(text) + 1]
    values = np.frombuffer(data, dtype=np.uint8)[offsets[0] : offsets[-1]]
    return bool(NEEDS_QUOTES[values].any())
