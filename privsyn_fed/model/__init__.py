"""A release's fitted model as a sampler: the junction tree of the graphical models (``junction``),
public conditions on rows (``conditions``) and the samplers of each kind of model (``released``).
The saved file, checked against the release's ledger, is ``privsyn_fed.saved_model``."""

from .conditions import Condition, conditions_from, parse_where
from .released import CopulaModel, GraphicalModel

__all__ = [
    "Condition",
    "CopulaModel",
    "GraphicalModel",
    "conditions_from",
    "parse_where",
]
