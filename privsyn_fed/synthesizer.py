"""The object API: fit once under the budget, then sample as often as needed.

    synth = pf.Synthesizer(method="aim", epsilon=1.0, delta=1e-9, rounds=30)
    model = synth.fit(["a.csv", "b.csv"], schema="schema.json", ledger_path="release.ledger.json")
    rows = model.sample(100_000)                          # a pandas DataFrame
    south = model.sample(5_000, where={"region": "south", "age": (30, 40)})
    model.save("release.model")                           # later: pf.load_model("release.model")

``fit`` is one release (``pf.synthesize``), charged to its ledger; everything after it is
post-processing of that release and spends nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from .common import InputError, OptionError
from .saved_model import ReleasedModel


class Synthesizer:
    """A release's settings (``method``, ``epsilon``, ``delta``, the method's options as keyword
    arguments); ``fit`` releases the model, ``sample`` draws from it."""

    def __init__(self, method: str = "aim", epsilon: float = 1.0, delta: float = 1e-9, **options: Any):
        from .accounting import check_budget_args
        from .methods import METHODS
        from .release import method_options

        if method not in METHODS:
            raise OptionError(f"method must be one of {', '.join(METHODS)}, not {method!r}", "method")
        check_budget_args(epsilon, delta)
        method_options(method, options)  # every check that needs no schema, now
        self.method, self.epsilon, self.delta, self.options = method, epsilon, delta, dict(options)
        #: The released model, once ``fit`` has run.
        self.model: ReleasedModel | None = None
        #: The release (rows drawn by default, ledger, details), once ``fit`` has run.
        self.result: Any = None

    def fit(
        self,
        silos: Sequence[Any],
        schema: Any = None,
        *,
        ledger_path: str | Path | None = None,
        **release: Any,
    ) -> ReleasedModel:
        """Release the model of the silos' union under (epsilon, delta)-DP and return it
        (``model.ReleasedModel``: ``sample``, ``save``, ``ledger``). ``release`` takes
        ``pf.synthesize``'s other keyword arguments (``seed``, ``progress``, ``overwrite``,
        ``rows``, ...). A second ``fit`` is a second release, charged again."""
        from .api import synthesize

        self.result = synthesize(
            silos,
            self.method,
            self.epsilon,
            self.delta,
            schema=schema,
            ledger_path=ledger_path,
            **release,
            **self.options,
        )
        self.model = self.result.model
        return self.model

    def sample(self, n: int, seed: int | None = None, where: Any = None) -> pd.DataFrame:
        """``n`` rows of the fitted model (``ReleasedModel.sample``): no further privacy cost."""
        if self.model is None:
            raise InputError("fit the synthesizer first (Synthesizer.fit), or load a saved model (pf.load_model)")
        return self.model.sample(n, seed=seed, where=where)

    @property
    def ledger(self) -> dict[str, Any] | None:
        """The fitted release's ledger."""
        return None if self.model is None else self.model.ledger

    def save(self, path: str | Path, overwrite: bool = False) -> None:
        """Save the fitted model (``ReleasedModel.save``)."""
        if self.model is None:
            raise InputError("fit the synthesizer first (Synthesizer.fit): there is no model to save")
        self.model.save(path, overwrite=overwrite)
