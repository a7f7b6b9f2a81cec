"""Reading tables in bounded chunks: CSV (plain or gzip) and Parquet files, and tables in an engine
named by URL (``engines``: DuckDB, PostgreSQL, MySQL, Spark, whose cells are typed as a Parquet file's,
and SQLite, whose values are typed one by one and checked as a CSV's cells are).

Every reader yields ``Chunk``s: a data frame of at most ``chunk_rows`` rows and the number by
which errors call its first row (CSV: the file's line number, the header being line 1; Parquet:
the row's position, from 1). CSV cells stay text (nothing parsed or dropped). Parquet cells keep
their type: numbers as floats with NaN where null, everything else as text with ``""`` where null;
``stored_types`` names each column's stored type so callers can refuse a wrong one.

``read_arrow_chunks`` is the silo reader's fast route: the same cells as Arrow record batches (no
Python object per cell), or ``NotArrowReadable`` wherever Arrow might read other cells than
``read_chunks``; the caller then reads the table with ``read_chunks``.

Failures are ``InputError``s of one line naming the file: not found, a folder, not a regular file
(a FIFO, a socket or a device, refused before it is opened), empty, not parsable, a truncated or
corrupt gzip, a file that is not Parquet, a CSV line longer than ``MAX_LINE_BYTES``. Every reader
passes a safe point (``interrupt.checkpoint``) between chunks, and a CSV reader at every mebibyte
too, so SIGINT or SIGTERM stops a long read.
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generator, Iterator, Sequence

import numpy as np
import pandas as pd

from .engines import engine_batches, engine_types, is_engine_url, parse_engine_url
from .errors import InputError, one_line
from .interrupt import checkpoint
from .paths import check_regular

#: Rows per chunk: text cells take about 100 bytes each in pandas, so a 20-column chunk stays near 200 MB.
CHUNK_ROWS = 100_000
PARQUET_SUFFIXES = (".parquet", ".pq")
GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"
#: Formats whose cells are typed (numbers as numbers), their types checked against the schema's columns.
TYPED_FORMATS = ("parquet", "duckdb", "postgresql", "mysql", "spark")


@dataclass
class Chunk:
    """Rows of a table, with the number errors give to the first of them (``first_row``)."""

    frame: pd.DataFrame
    first_row: int


def table_name(path: str | Path) -> str:
    """How messages name a table: its path, or its URL (which holds no password)."""
    return path if is_engine_url(path) else str(Path(path))  # type: ignore[return-value]


def table_format(path: str | Path) -> str:
    """``"parquet"``, ``"gzip"`` (a gzip-compressed CSV) or ``"csv"``: by the file's first bytes, and
    for a file too short to tell, by its name; an engine's URL: ``"duckdb"``, ``"sqlite"``, ``"postgresql"``,
    ``"mysql"`` or ``"spark"``."""
    if is_engine_url(path):
        return parse_engine_url(str(path)).engine
    path = Path(path)
    head = _head(path)
    if head.startswith(PARQUET_MAGIC) or (not head and path.suffix.lower() in PARQUET_SUFFIXES):
        return "parquet"
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if path.suffix.lower() in PARQUET_SUFFIXES:
        raise InputError(f"{path}: not a Parquet file (it does not start with the Parquet magic bytes)")
    return "csv"


def _head(path: Path) -> bytes:
    check_regular(path)
    try:
        with open(path, "rb", buffering=0) as fh:  # unbuffered: these 4 bytes and no more
            return fh.read(4) or b""
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a table") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_chunks(
    path: str | Path, chunk_rows: int = CHUNK_ROWS, columns: Sequence[str] | None = None
) -> Iterator[Chunk]:
    """The table at ``path`` (CSV, gzip CSV or Parquet), ``chunk_rows`` rows at a time; with
    ``columns``, only those of the table's columns (in the table's order): the others are never
    converted to values (a CSV's are skipped by the parser, a Parquet file's never read)."""
    if is_engine_url(path):
        t = parse_engine_url(str(path))
        yield from _typed_chunks(engine_batches(t, chunk_rows, columns), lambda: _names(engine_types(t), columns))
        return
    path = Path(path)
    if table_format(path) == "parquet":
        yield from _parquet_chunks(path, chunk_rows, columns)
    else:
        yield from _csv_chunks(path, chunk_rows, columns=columns)


def read_table(path: str | Path) -> pd.DataFrame:
    """The whole table at ``path`` (``read_chunks``) as one frame."""
    frames = [c.frame for c in read_chunks(path)]
    if len(frames) == 1:
        return frames[0]
    return pd.concat(frames, ignore_index=True)


def read_header(path: str | Path) -> list[str]:
    """The column names of the table at ``path``, without reading its rows."""
    if is_engine_url(path):
        return list(engine_types(parse_engine_url(str(path))))
    path = Path(path)
    if table_format(path) == "parquet":
        return [f.name for f in _parquet_file(path).schema_arrow]
    return next(_csv_chunks(path, 1, header_only=True)).frame.columns.tolist()


#: Column separators that people use instead of commas, as named in ``delimiter_hint``.
OTHER_DELIMITERS = {";": "semicolons", "\t": "tabs", "|": "'|'"}


def delimiter_hint(header_line: str) -> str:
    """``'; the file seems to separate columns with semicolons ...'`` when the header holds one of
    ``OTHER_DELIMITERS``, else ``''``: added to an error about a file that does not parse as expected."""
    for sep, name in OTHER_DELIMITERS.items():
        if sep in header_line:
            return f"; the file seems to separate columns with {name}, but privsyn-fed reads comma-separated files"
    return ""


# ---- CSV -------------------------------------------------------------------------------------------
#: How every CSV is parsed: cells as text, nothing read as missing, spaces after a comma dropped.
CSV_OPTIONS = {"dtype": str, "keep_default_na": False, "na_filter": False, "skipinitialspace": True}


#: The longest line a CSV may have. A longer one (a file of NUL bytes with no newline) would be held
#: in memory whole before pandas could parse it; it is refused instead.
MAX_LINE_BYTES = 64 << 20
#: The most bytes pandas is given at a time (each read is a safe point).
READ_BYTES = 1 << 20


class _Guarded:
    """A binary file as pandas reads it: a safe point (``checkpoint``) before every block of at most
    ``READ_BYTES``, and an ``InputError`` naming the file and the line once a line is longer than
    ``MAX_LINE_BYTES``."""

    mode = "rb"

    def __init__(self, fh, path: Path, most: int = READ_BYTES):
        self._fh, self._path, self._most = fh, path, most
        self._line, self._run = 1, 0

    def read(self, size: int | None = -1) -> bytes:
        """At most ``size`` (and ``READ_BYTES``, or the reader's own limit) bytes."""
        checkpoint()
        block = self._fh.read(self._most if size is None or size < 0 else min(size, self._most))
        last = block.rfind(b"\n")
        self._run = self._run + len(block) if last < 0 else len(block) - last - 1
        self._line += block.count(b"\n")
        if self._run > MAX_LINE_BYTES:
            raise InputError(
                f"{self._path}: line {self._line} is longer than {MAX_LINE_BYTES >> 20} MiB; not a table of rows"
            )
        return block

    def readable(self) -> bool:
        return True

    @property
    def closed(self) -> bool:
        return self._fh.closed

    def close(self) -> None:
        self._fh.close()


@contextmanager
def _guarded(path: Path, compression: str | None, most: int = READ_BYTES) -> Iterator[_Guarded]:
    """The file (decompressed when ``compression`` is ``"gzip"``) as a ``_Guarded`` reader of at most
    ``most`` bytes a read."""
    with gzip.open(path, "rb") if compression else open(path, "rb") as fh:
        yield _Guarded(fh, path, most)


#: What ends a CSV record (a line end outside quotes) or opens and closes a quoted field.
_RECORD_MARKS = re.compile(rb'["\r\n]')


def _header_record(path: Path, compression: str | None) -> bytes:
    """The CSV's first record (blank lines before it included), read in blocks no longer than what
    was read before it (at least 1 KiB): of the rows after the header, at most about the header's
    own length is read (a federation's party 0 checks its header before any party agreed)."""
    with gzip.open(path, "rb") if compression else open(path, "rb", buffering=0) as raw:
        fh, data, quoted, blank, size = _Guarded(raw, path), bytearray(), False, True, 1 << 10
        while block := fh.read(size):
            seen = 0
            for mark in _RECORD_MARKS.finditer(block):
                blank = blank and mark.start() == seen and mark.group() != b'"'
                seen = mark.end()
                if mark.group() == b'"':
                    quoted = not quoted
                elif not quoted and not blank:
                    return bytes(data + block[: mark.end()])
            blank = blank and seen == len(block)
            data += block
            size = min(max(size, len(data)), READ_BYTES)
        return bytes(data)


def _csv_names(path: Path, compression: str | None) -> list[str]:
    """The header's names as written, stripped (its first record only: pandas would rename a repeated
    name ``a`` to ``a.1``); ``InputError`` for a name that appears twice."""
    first = pd.read_csv(io.BytesIO(_header_record(path, compression)), header=None, nrows=1, **CSV_OPTIONS)
    names = [str(c).strip() for c in first.iloc[0]]
    repeated = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if repeated is not None:
        raise InputError(f"{path}: column '{repeated}' appears twice")
    return names


def _csv_chunks(
    path: Path, chunk_rows: int, header_only: bool = False, columns: Sequence[str] | None = None
) -> Iterator[Chunk]:
    compression = "gzip" if table_format(path) == "gzip" else None
    what = "a gzip-compressed CSV" if compression else "CSV"
    line = 2
    try:
        names = _csv_names(path, compression)
        if header_only:
            yield Chunk(pd.DataFrame(columns=names), line)
            return
        wanted = set(names if columns is None else columns)
        keep = [i for i, n in enumerate(names) if n in wanted]
        usecols = None if columns is None else keep
        with (
            _guarded(path, compression) as fh,
            pd.read_csv(fh, chunksize=chunk_rows, usecols=usecols, **CSV_OPTIONS) as reader,
        ):
            for frame in reader:
                frame.columns = [names[i] for i in keep]
                yield Chunk(frame, line)
                line += len(frame)
                checkpoint()
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: the file is empty (no header, no rows)") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(
            f"{path}: the gzip data is truncated or corrupt after line {line - 1} ({one_line(exc)}); "
            "compress the file again"
        ) from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: {what} is not UTF-8 text near line {line}; save it as UTF-8") from None
    except (pd.errors.ParserError, OSError) as exc:
        raise InputError(
            f"{path}: cannot parse as {what} ({one_line(exc)})" + delimiter_hint(_first_line(path, compression))
        ) from None


def _first_line(path: Path, compression: str | None) -> str:
    try:
        opener = gzip.open if compression else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
            return fh.readline(READ_BYTES)
    except (OSError, EOFError, zlib.error):
        return ""


# ---- Parquet ---------------------------------------------------------------------------------------
def _parquet_file(path: Path):
    import pyarrow
    import pyarrow.parquet as pq

    try:
        # pre_buffer (Arrow's default) caches every row group read until the file is closed: memory
        # grew by the file's size (16.8 GB for a 1e9-row silo); without it, one batch at a time
        return pq.ParquetFile(path, pre_buffer=False)
    except (pyarrow.ArrowException, OSError) as exc:
        raise InputError(f"{path}: cannot read as Parquet ({one_line(exc)})") from None


def stored_types(path: str | Path) -> dict[str, str]:
    """Each column's stored Arrow type, by name (``"int64"``, ``"double"``, ``"string"``, ...), of a
    Parquet file or an engine's table (``TYPED_FORMATS``)."""
    if is_engine_url(path):
        return engine_types(parse_engine_url(str(path)))
    return {f.name: str(f.type) for f in _parquet_file(Path(path)).schema_arrow}


def is_number_type(arrow_type: str) -> bool:
    """Whether an Arrow type (as ``stored_types`` names it) holds plain numbers."""
    return arrow_type.startswith(("int", "uint", "float", "double", "halffloat", "decimal"))


def is_text_type(arrow_type: str) -> bool:
    """Whether an Arrow type holds text, whole numbers or booleans (what a category can be)."""
    return (
        arrow_type in ("string", "large_string", "bool")
        or arrow_type.startswith(("int", "uint"))
        or (arrow_type.startswith("dictionary<") and "values=string" in arrow_type)
        or (arrow_type.startswith("dictionary<") and "values=large_string" in arrow_type)
    )


def _parquet_chunks(path: Path, chunk_rows: int, columns: Sequence[str] | None = None) -> Iterator[Chunk]:
    batches = ((c.batch, c.first_row) for c in _parquet_batches(path, chunk_rows, columns))
    yield from _typed_chunks(batches, lambda: _parquet_names(_parquet_file(path), columns))


def _typed_chunks(batches: Iterator, names) -> Iterator[Chunk]:
    """Frames of typed cells (``arrow_cells``) from ``(record batch, first row)`` pairs; a table
    without rows gives its header (``names()``) as an empty frame."""
    empty = True
    for batch, first_row in batches:
        empty = False
        frame = pd.DataFrame({name: arrow_cells(batch.column(i)) for i, name in enumerate(batch.schema.names)})
        yield Chunk(frame, first_row)
    header = names() if empty else []
    if header:
        yield Chunk(pd.DataFrame({n: pd.Series([], dtype=str) for n in header}), 1)


def _names(types: dict[str, str], columns: Sequence[str] | None) -> list[str]:
    return [n for n in types if columns is None or n in columns]


def _parquet_names(pf, columns: Sequence[str] | None) -> list[str]:
    """The file's columns among ``columns`` (all when None), in the file's order."""
    wanted = set(pf.schema_arrow.names if columns is None else columns)
    return [n for n in pf.schema_arrow.names if n in wanted]


def _parquet_batches(path: Path, chunk_rows: int, columns: Sequence[str] | None) -> Iterator[ArrowChunk]:
    """The Parquet file's record batches (both routes read Parquet through Arrow)."""
    import pyarrow

    pf = _parquet_file(path)
    names = _parquet_names(pf, columns)
    row = 1
    try:
        for batch in pf.iter_batches(batch_size=chunk_rows, columns=None if columns is None else names):
            yield ArrowChunk(batch, row)
            row += batch.num_rows
            checkpoint()
    except (pyarrow.ArrowException, OSError) as exc:
        raise InputError(f"{path}: the Parquet data is corrupt near row {row} ({one_line(exc)})") from None


def arrow_cells(array) -> np.ndarray:
    """An Arrow array as floats (NaN where null) when it holds numbers, whole numbers included (read
    back as text for a categorical column by ``encode_frame``), else as text (``arrow_text``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if is_number_type(str(array.type)):  # whole numbers are exact up to 2^53, the schema's widest bounds
        return pc.cast(array, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    text = arrow_text(array)
    if text is None:
        return np.array([str(v) for v in array.to_pylist()], dtype=object)
    return text.to_numpy(zero_copy_only=False)


def arrow_text(array):
    """An Arrow array of anything but numbers as Arrow text: ``""`` where null, booleans as
    ``True``/``False`` (as pandas writes them), dictionaries decoded; None for numbers and for a type
    Arrow cannot cast to text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = str(array.type)
    if is_number_type(kind):
        return None
    if kind.startswith("dictionary<"):
        array = array.dictionary_decode()
    if str(array.type) == "bool":
        array = pc.if_else(array, "True", "False")
    try:
        text = pc.cast(array, pa.string())
    except pa.ArrowException:
        return None
    return pc.fill_null(text, "")


# ---- Arrow batches: the silo reader's fast route ---------------------------------------------------
class NotArrowReadable(Exception):
    """Arrow cannot give this table's cells exactly as ``read_chunks`` does (a parse error, a cell
    holding a quote, a line over ``ARROW_BLOCK_BYTES``, ...): read it with ``read_chunks`` instead,
    which gives the same cells or the one-line error."""


@dataclass
class ArrowChunk:
    """Rows of a table as an Arrow record batch, with the number errors give to the first of them."""

    batch: Any
    first_row: int


#: Bytes of CSV that Arrow parses at a time (one batch; a longer line is read by ``read_chunks``).
ARROW_BLOCK_BYTES = 4 << 20


def read_arrow_chunks(
    path: str | Path, chunk_rows: int = CHUNK_ROWS, columns: Sequence[str] | None = None
) -> Generator[ArrowChunk, None, None]:
    """``read_chunks`` as Arrow record batches of text cells (CSV: dictionary arrays, each batch's
    distinct texts once) or typed cells (Parquet), columns named as the header names them, without
    a Python object per cell. A CSV gives ``NotArrowReadable`` (at any batch) where Arrow might not
    read the very cells that pandas reads; a Parquet file, read by Arrow on both routes, gives
    ``read_chunks``'s errors. CSV batches hold about ``ARROW_BLOCK_BYTES`` of the file each, Parquet
    batches ``chunk_rows`` rows, an engine's (typed as Parquet) about ``chunk_rows``."""
    if is_engine_url(path):
        for batch, first_row in engine_batches(parse_engine_url(str(path)), chunk_rows, columns):
            yield ArrowChunk(batch, first_row)
        return
    path = Path(path)
    if table_format(path) == "parquet":
        yield from _parquet_batches(path, chunk_rows, columns)
    else:
        yield from _csv_batches(path, columns)


def _csv_batches(path: Path, columns: Sequence[str] | None) -> Iterator[ArrowChunk]:
    """CSV through Arrow's streaming reader, declined wherever pandas' reading (``CSV_OPTIONS``) could
    differ: a header with quotes or line breaks, a single column (pandas skips its blank-looking
    lines), and any cell holding a quote (pandas' ``skipinitialspace`` reads ``a, "b"`` as ``b``)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    compression = "gzip" if table_format(path) == "gzip" else None
    names = _csv_names(path, compression)
    if len(names) < 2 or any(c in n for n in names for c in '"\r\n'):
        raise NotArrowReadable(f"{path}: header")
    wanted = set(names if columns is None else columns)
    keep = [i for i, n in enumerate(names) if n in wanted]
    ids = [str(i) for i in range(len(names))]
    read = pacsv.ReadOptions(column_names=ids, skip_rows=1, block_size=ARROW_BLOCK_BYTES, use_threads=False)
    parse = pacsv.ParseOptions(newlines_in_values=True)
    convert = pacsv.ConvertOptions(
        column_types={i: pa.dictionary(pa.int32(), pa.string()) for i in ids},  # each batch's distinct texts
        include_columns=[ids[i] for i in keep],
        null_values=[],
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    line = 2
    try:
        with (
            _guarded(path, compression, ARROW_BLOCK_BYTES) as fh,
            # closed with the generator: a reader left open until the interpreter exits can abort it
            closing(pacsv.open_csv(fh, read_options=read, parse_options=parse, convert_options=convert)) as reader,
        ):
            for batch in reader:
                checkpoint()
                if any(pc.any(pc.match_substring(c.dictionary, '"')).as_py() for c in batch.columns):
                    raise NotArrowReadable(f"{path}: a cell near line {line} holds a quote")
                yield ArrowChunk(pa.RecordBatch.from_arrays(batch.columns, names=[names[i] for i in keep]), line)
                line += batch.num_rows
    except (pa.ArrowException, InputError, OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise NotArrowReadable(f"{path}: {one_line(exc)}") from None
