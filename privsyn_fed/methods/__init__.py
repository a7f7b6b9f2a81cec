"""Synthesis methods, and the registry of their facts (``METHODS``).

A method decides what to ask the silos for; it reaches them only through an aggregator
(``aggregate.Aggregator``) and releases only through ``mechanisms``. The registry says, for each
method, its options class, how to run it, its threat model, the fewest silos it accepts, whether
it runs over MPC, whether it is a graphical-model (AIM-family) method, and the sensitivity of its
selection score per unit of the largest workload weight. ``api`` and ``cli`` read the registry;
``accounting.audit`` keeps its own table on purpose (an audit must be independent of the code
it checks) and a test compares the two. Modules are imported only when a method is used, so that
reading the registry loads no model code.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class MethodSpec:
    """What the command line, the API and the checks need to know about one method."""

    name: str
    #: Module under ``privsyn_fed.methods`` holding the options class, the runner and the threat model.
    module: str
    options_name: str
    runner_name: str
    min_silos: int
    #: Whether ``--mpc`` can run it (every statistic through the aggregator protocol, none pooled).
    mpc: bool
    #: Whether it fits a graphical model over a workload (AIM family: rounds, workload, ``--model-out``).
    graphical: bool
    #: Whether a trusted curator pools the silos' rows (no aggregator).
    central: bool = False

    def _module(self) -> Any:
        return importlib.import_module(f"{__name__}.{self.module}")

    @property
    def options_class(self) -> type:
        """The method's options dataclass (``validate()``, ``check_schema(schema)``)."""
        return getattr(self._module(), self.options_name)

    @property
    def run(self) -> Callable[..., Any]:
        """Central: ``run(silo, acc, noise, opts, progress)``; federated:
        ``run(agg, acc, noise, opts, seed, progress)`` (``seed`` for public randomness only)."""
        return getattr(self._module(), self.runner_name)

    def threat_model(self, aggregator: Any) -> str:
        """The ledger's threat model for a run over ``aggregator`` (ignored by central methods)."""
        module = self._module()
        return module.THREAT_MODEL if self.central else module.threat_model(aggregator)

    def selection_sensitivity(self, max_weight: float, opts: Any) -> float | None:
        """Sensitivity of the selection score for workload weights up to ``max_weight`` (None:
        the method selects nothing)."""
        fn = getattr(self._module(), "selection_sensitivity", None) if self.graphical else None
        return None if fn is None else float(fn(max_weight, opts))


METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        MethodSpec(
            "aim",
            "aim",
            "AIMOptions",
            "run_aim",
            min_silos=1,
            mpc=False,
            graphical=True,
            central=True,
        ),
        MethodSpec(
            "distaim",
            "distaim",
            "FederatedOptions",
            "run_distaim",
            min_silos=2,
            mpc=True,
            graphical=True,
        ),
        MethodSpec(
            "flaim",
            "flaim",
            "FLAIMOptions",
            "run_flaim",
            min_silos=2,
            mpc=True,
            graphical=True,
        ),
        MethodSpec(
            "fedtda",
            "fedtda",
            "FedTDAOptions",
            "run_fedtda",
            min_silos=1,
            mpc=True,
            graphical=False,
        ),
        MethodSpec(
            "independent",
            "independent",
            "IndependentOptions",
            "run_independent",
            min_silos=1,
            mpc=True,
            graphical=False,
        ),
    )
}
