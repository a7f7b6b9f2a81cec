"""What every layer uses: one-line input errors (``errors``), atomic writes (``fileio``), JSON files
read with one-line errors (``jsonfile``), path
checks (``paths``), tables read in chunks (``tables``), SIGINT/SIGTERM at safe points (``interrupt``),
progress (``progress``), environment settings (``settings``) and faces that give some names on first
use (``lazy``)."""

from . import settings
from .csv_text import write_frame
from .engines import (
    EngineTable,
    beside,
    check_engine_url,
    is_engine_url,
    named_files,
    parse_engine_url,
    table_source,
)
from .errors import BudgetExceeded, InputError, MPCError, OptionError, first_line
from .escaping import markdown_text, terminal_text
from .extras import require_agent, require_engines, require_mpc
from .fileio import SHAREABLE, Staged, write_atomic, write_folder
from .interrupt import Interrupted, checkpoint, deferred_signals, received
from .jsonfile import MAX_NESTING, MAX_NUMBER_CHARS, parse_json, parse_yaml, read_json
from .lazy import lazy_names
from .paths import (
    Named,
    check_distinct,
    check_files,
    check_identical_contents,
    check_input,
    check_name_fits,
    check_output,
    check_regular,
    check_store,
    file_digest,
    same_file,
    special_kind,
)
from .private_folder import PrivateFolder, private_folder
from .progress import Progress, ProgressCallback, Silent, notes_on_stderr
from .settings import JAX_CACHE_ENV, MPC_TIMEOUT_S, SOURCE_VERSION, jax_cache_setting, package_version
from .spark import collected, frames_as_tables, is_spark_frame, spark_error, spark_errors, spark_frame
from .tables import (
    CHUNK_ROWS,
    TYPED_FORMATS,
    NotArrowReadable,
    arrow_cells,
    arrow_text,
    delimiter_hint,
    is_number_type,
    is_text_type,
    read_arrow_chunks,
    read_chunks,
    read_header,
    read_table,
    stored_types,
    table_format,
    table_name,
)

__all__ = [
    "BudgetExceeded",
    "CHUNK_ROWS",
    "InputError",
    "Interrupted",
    "JAX_CACHE_ENV",
    "MPC_TIMEOUT_S",
    "MAX_NESTING",
    "MAX_NUMBER_CHARS",
    "MPCError",
    "Named",
    "NotArrowReadable",
    "OptionError",
    "PrivateFolder",
    "Progress",
    "ProgressCallback",
    "SHAREABLE",
    "SOURCE_VERSION",
    "Silent",
    "Staged",
    "arrow_cells",
    "arrow_text",
    "check_distinct",
    "check_files",
    "check_identical_contents",
    "check_input",
    "check_name_fits",
    "check_output",
    "check_regular",
    "check_store",
    "checkpoint",
    "deferred_signals",
    "delimiter_hint",
    "file_digest",
    "first_line",
    "is_number_type",
    "is_text_type",
    "lazy_names",
    "jax_cache_setting",
    "markdown_text",
    "notes_on_stderr",
    "package_version",
    "stored_types",
    "parse_json",
    "parse_yaml",
    "private_folder",
    "read_arrow_chunks",
    "read_chunks",
    "read_header",
    "read_json",
    "read_table",
    "received",
    "require_agent",
    "require_mpc",
    "require_engines",
    "frames_as_tables",
    "collected",
    "spark_error",
    "spark_errors",
    "spark_frame",
    "is_spark_frame",
    "same_file",
    "settings",
    "special_kind",
    "table_format",
    "table_name",
    "TYPED_FORMATS",
    "EngineTable",
    "is_engine_url",
    "check_engine_url",
    "beside",
    "table_source",
    "named_files",
    "parse_engine_url",
    "terminal_text",
    "write_atomic",
    "write_frame",
    "write_folder",
]
