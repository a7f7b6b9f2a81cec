"""SILO: the only code that reads private rows. A silo's table encoded on the schema (``silo``),
kept compact and spilled to disk (``rowstore``), and the declared statistics it answers (``queries``)
with the silo-side computations behind them (``scores``, ``copula``, ``copula_encoding``)."""

from .copula import (
    ICDM,
    ModeCDF,
    correlation_estimate,
    fit_mixture,
    from_upper,
    mode_cdf,
    repair_correlation,
    universal_threshold,
)
from .copula_encoding import Encoding
from .queries import (
    ConcatQuery,
    LocalScoresQuery,
    MarginalsQuery,
    MaskedQuery,
    NumericHistogramQuery,
    Query,
    SecondMomentsQuery,
    answer,
    concat,
    from_wire,
)
from .scores import SQRT_2_OVER_PI, aim_score
from .silo import Silo, check_table_header, marginal_counts, read_csv

__all__ = [
    "ConcatQuery",
    "Encoding",
    "ICDM",
    "LocalScoresQuery",
    "MarginalsQuery",
    "MaskedQuery",
    "ModeCDF",
    "NumericHistogramQuery",
    "Query",
    "SQRT_2_OVER_PI",
    "SecondMomentsQuery",
    "Silo",
    "aim_score",
    "answer",
    "check_table_header",
    "concat",
    "correlation_estimate",
    "fit_mixture",
    "from_upper",
    "from_wire",
    "marginal_counts",
    "mode_cdf",
    "read_csv",
    "repair_correlation",
    "universal_threshold",
]
