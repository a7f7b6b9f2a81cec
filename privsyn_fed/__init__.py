"""privsyn-fed: differentially private synthetic tabular data from several silos.

import privsyn_fed as pf
schema = pf.Schema.load("schema.json")
silos = [pf.Silo.load(p, schema) for p in ["a.csv", "b.csv"]]
result = pf.synthesize(silos, method="aim", epsilon=1.0, delta=1e-9)
result.to_csv("synthetic.csv")
"""

from .api import SynthResult, synthesize
from .errors import BudgetExceeded, InputError
from .schema import CategoricalColumn, NumericColumn, Schema
from .silo import Silo

__version__ = "0.1.0"
__all__ = [
    "BudgetExceeded",
    "CategoricalColumn",
    "InputError",
    "NumericColumn",
    "Schema",
    "Silo",
    "SynthResult",
    "synthesize",
]
