"""privsyn-fed: differentially private synthetic tabular data from several silos.

import privsyn_fed as pf
result = pf.synthesize(["a.csv", "b.parquet", df_c], schema="schema.json", method="aim", epsilon=1.0, delta=1e-9)
result.data        # a pandas DataFrame
result.to_csv("synthetic.csv")

model = pf.Synthesizer(method="aim", epsilon=1.0, delta=1e-9).fit(["a.csv", "b.csv"], schema="schema.json")
model.sample(100_000, where={"region": "south"})   # no further privacy cost
model.save("release.model")                       # pf.load_model("release.model")
"""

from .api import SynthResult, synthesize
from .common import SOURCE_VERSION, BudgetExceeded, InputError
from .saved_model import ReleasedModel, load_model
from .schema import CategoricalColumn, NumericColumn, Schema
from .silo import Silo
from .synthesizer import Synthesizer

__version__ = SOURCE_VERSION
__all__ = [
    "BudgetExceeded",
    "CategoricalColumn",
    "InputError",
    "NumericColumn",
    "ReleasedModel",
    "Schema",
    "Silo",
    "SynthResult",
    "Synthesizer",
    "load_model",
    "synthesize",
]
