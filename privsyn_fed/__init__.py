"""privsyn-fed: differentially private synthetic tabular data from several silos.

import privsyn_fed as pf
result = pf.synthesize(["a.csv", "b.parquet", df_c], schema="schema.json", method="aim", epsilon=1.0, delta=1e-9)
result.data        # a pandas DataFrame
result.to_csv("synthetic.csv")
"""

from .api import SynthResult, synthesize
from .common import BudgetExceeded, InputError
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
