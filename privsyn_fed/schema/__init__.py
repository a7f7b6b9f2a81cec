"""The public domain a release is stated over: column types, bounds, bins and categories
(``schema``), how cells are read (``cells``), rows to integer codes and back (``encode``), and schema
drafts from a table or a data dictionary (``draft``, ``dictionary``)."""

from .cells import DEFAULT_BINS, check_header, numbers_as_text
from .constraints import Constraint, forbidden, violation_report, violations
from .dictionary import dictionary_columns
from .draft import (
    DEFAULT_CATEGORICAL_MAX,
    DP_DRAFT_PRIVACY,
    MAX_DRAFT_BOUND,
    PRIVATE_WARNING,
    UNFOUND_KEY,
    ColumnProfile,
    PrivateDraftWarning,
    category_order,
    check_options,
    draft_document,
    draft_table,
    numeric_spec,
    plain_note,
    plain_numbers,
    profile_chunks,
    write_document,
)
from .encode import (
    bin_edges,
    bin_midpoints,
    check_columns,
    decode_codes,
    encode_frame,
    ignored_note,
    numeric_bin,
    numeric_histogram,
    refined,
)
from .rejection import draw_allowed
from .schema import CategoricalColumn, NumericColumn, Schema

__all__ = [
    "CategoricalColumn",
    "ColumnProfile",
    "Constraint",
    "DEFAULT_BINS",
    "DEFAULT_CATEGORICAL_MAX",
    "DP_DRAFT_PRIVACY",
    "MAX_DRAFT_BOUND",
    "NumericColumn",
    "PRIVATE_WARNING",
    "PrivateDraftWarning",
    "Schema",
    "UNFOUND_KEY",
    "bin_edges",
    "bin_midpoints",
    "category_order",
    "check_columns",
    "check_header",
    "check_options",
    "decode_codes",
    "dictionary_columns",
    "draft_document",
    "draft_table",
    "draw_allowed",
    "encode_frame",
    "forbidden",
    "ignored_note",
    "numbers_as_text",
    "numeric_bin",
    "numeric_histogram",
    "numeric_spec",
    "plain_note",
    "plain_numbers",
    "profile_chunks",
    "refined",
    "violation_report",
    "violations",
    "write_document",
]
