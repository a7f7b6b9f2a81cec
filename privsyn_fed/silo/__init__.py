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
from .identifier_scan import identifier_warning
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
from .reading import SiloLike, read_silos
from .rowstore import marginal_counts
from .scores import SQRT_2_OVER_PI, aim_score
from .silo import Silo, check_table_header, read_csv
from .site import check_silo_column, default_silo_name, silo_names, site_record

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
    "SiloLike",
    "aim_score",
    "answer",
    "check_silo_column",
    "check_table_header",
    "concat",
    "correlation_estimate",
    "default_silo_name",
    "fit_mixture",
    "from_upper",
    "from_wire",
    "identifier_warning",
    "marginal_counts",
    "mode_cdf",
    "read_csv",
    "read_silos",
    "repair_correlation",
    "silo_names",
    "site_record",
    "universal_threshold",
]
