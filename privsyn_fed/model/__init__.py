"""A release's fitted model as a sampler: the junction tree of the graphical models (``factor_tree``),
public conditions on rows (``conditions``), rows kept by rejection (``rejection``) and the samplers of
each kind of model (``samplers``).
The saved file, checked against the release's ledger, is ``privsyn_fed.saved_model``."""

from .archive import LEGACY_FORMAT, MODEL_FORMAT, read_model_archive
from .checks import check_factors, check_total
from .conditions import Condition, conditions_from, parse_where
from .factor_tree import JunctionTree, aligned
from .label import LabelTables
from .rejection import draw_allowed, draw_kept
from .samplers import CopulaModel, GraphicalModel

__all__ = [
    "Condition",
    "CopulaModel",
    "GraphicalModel",
    "JunctionTree",
    "LEGACY_FORMAT",
    "LabelTables",
    "MODEL_FORMAT",
    "aligned",
    "check_factors",
    "check_total",
    "conditions_from",
    "draw_allowed",
    "draw_kept",
    "parse_where",
    "read_model_archive",
]
