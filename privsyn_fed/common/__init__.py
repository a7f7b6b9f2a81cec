"""What every layer uses: one-line input errors (``errors``), atomic writes (``fileio``), JSON files
read with one-line errors (``jsonfile``), path
checks (``paths``), tables read in chunks (``tables``), SIGINT/SIGTERM at safe points (``interrupt``),
progress (``progress``) and environment settings (``settings``)."""

from .errors import BudgetExceeded, InputError, MPCError, OptionError, first_line
from .fileio import Staged, write_atomic
from .interrupt import Interrupted, checkpoint, deferred_signals, received
from .jsonfile import MAX_NESTING, MAX_NUMBER_CHARS, parse_json, parse_yaml, read_json
from .paths import (
    Named,
    check_distinct,
    check_files,
    check_identical_contents,
    check_input,
    check_name_fits,
    check_regular,
    check_store,
    same_file,
)
from .progress import Progress, ProgressCallback, Silent, notes_on_stderr
from .settings import JAX_CACHE_ENV, jax_cache_setting
from .tables import (
    CHUNK_ROWS,
    delimiter_hint,
    is_number_type,
    is_text_type,
    parquet_types,
    read_chunks,
    read_header,
    read_table,
    table_format,
)

__all__ = [
    "BudgetExceeded",
    "CHUNK_ROWS",
    "InputError",
    "Interrupted",
    "JAX_CACHE_ENV",
    "MPCError",
    "Named",
    "OptionError",
    "Progress",
    "ProgressCallback",
    "Silent",
    "Staged",
    "check_distinct",
    "check_files",
    "check_identical_contents",
    "check_input",
    "check_name_fits",
    "check_regular",
    "check_store",
    "checkpoint",
    "deferred_signals",
    "delimiter_hint",
    "first_line",
    "is_number_type",
    "is_text_type",
    "jax_cache_setting",
    "notes_on_stderr",
    "parquet_types",
    "read_chunks",
    "read_header",
    "read_table",
    "received",
    "same_file",
    "table_format",
    "write_atomic",
    "read_json",
    "parse_json",
    "parse_yaml",
    "MAX_NESTING",
    "MAX_NUMBER_CHARS",
]
