"""Independent noisy 1-way marginals: the simplest synthesizer, and the baseline every release
should beat.

The whole budget ``rho`` buys one Gaussian release of every column's 1-way marginal, summed over
the silos. A record is in one cell of each of the ``d`` marginals, so their concatenation has L2
sensitivity ``sqrt(d)`` and ``sigma = sqrt(d / (2 rho))`` per cell (the cost of ``d`` separate
releases of ``rho / d`` each). Everything after is post-processing: the row total is the
inverse-variance mean of the ``d`` noisy sums (variance ``cells_j sigma^2`` each); each noisy
marginal is projected onto the histograms with that total (``projected``: the nearest non-negative
one, not clipped at zero, so the noise of empty cells does not become mass) and is a column
distribution; rows are drawn column by column, independently, and numeric columns are decoded to
values inside their bins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..accounting import Accountant
from ..aggregation import Aggregator
from ..common import Progress, Silent
from ..mechanisms import noisy_sums
from ..model import GraphicalModel
from ..noise import NoiseSource
from ..schema import Schema
from ..silo import MarginalsQuery
from . import core
from .base import FederatedMethod
from .histograms import combined_total, projected


@dataclass
class IndependentOptions:
    """The method has no options: it spends the whole budget on the 1-way marginals."""

    def validate(self) -> None:
        """No options, nothing to check."""

    def check_schema(self, schema: Schema) -> None:
        """Any schema will do."""

    def check_mpc(self) -> None:
        """The 1-ways are one declared query: nothing to refuse over MPC."""


def threat_model(agg: Aggregator) -> str:
    """The ledger's threat model of an independent run over ``agg``."""
    return f"independent: each silo sends its 1-way marginal counts; {agg.threat_model}."


def oneway_sigma(rho: float, n_columns: int) -> float:
    """``sqrt(d / (2 rho))``: the noise of every cell when all ``d`` 1-ways share ``rho``."""
    return math.sqrt(n_columns / (2.0 * rho))


def expected_oneway_error(sigmas: Sequence[float] | None, schema: Schema, total: float, rho: float) -> dict[str, float]:
    """A release's expected mean 1-way total variation distance from its own noise scales and noisy
    total (public): ``TVD_j ~ (1/2) sqrt(2/pi) sigma_j c_j / N`` for column ``j`` with ``c_j`` cells
    (an upper estimate: it ignores the clipping of negative counts), beside the same for this
    method at the budget ``rho`` (``oneway_sigma``), which puts every bit of the budget on the
    1-ways and so has the least 1-way noise any release can have."""
    if not sigmas or not all(math.isfinite(s) for s in sigmas):
        return {}
    cells = np.array(schema.shape, dtype=float)
    scale = 0.5 * math.sqrt(2.0 / math.pi) / max(float(total), 1.0)
    own = float(np.mean(scale * np.asarray(sigmas, dtype=float) * cells))
    base = float(np.mean(scale * oneway_sigma(rho, len(cells)) * cells))
    return {"expected_oneway_tvd": own, "expected_oneway_tvd_independent": base}


def total_estimate(marginals: Sequence[np.ndarray]) -> float:
    """Inverse-variance mean of the noisy sums (each has variance ``cells sigma^2``); at least 1."""
    return combined_total([float(np.sum(m)) for m in marginals], [m.size for m in marginals])


def independent_model(marginals: Sequence[np.ndarray], schema: Schema) -> GraphicalModel:
    """The model of noisy 1-ways: the total is ``total_estimate``, each column's distribution its
    marginal ``projected`` onto that total; rows drawn column by column, independently."""
    total = total_estimate(marginals)
    return GraphicalModel.independent([projected(m, total) for m in marginals], schema, total)


def run_independent(
    agg: Aggregator,
    acc: Accountant,
    noise: NoiseSource,
    opts: IndependentOptions,
    seed: int | None = None,
    progress: Progress | None = None,
) -> core.MethodResult:
    """Every column's noisy 1-way marginal in one Gaussian release (``seed``: unused, the method
    draws no public randomness)."""
    progress = progress or Silent()
    silos = agg.silo_names
    schema = agg.schema
    d = len(schema.columns)
    sigma = oneway_sigma(acc.rho_budget, d)
    requests = [(f"marginal({name})", MarginalsQuery(((j,),)), silos) for j, name in enumerate(schema.names)]
    noisy = noisy_sums(agg, acc, noise, requests, sigma, math.sqrt(d), "every column's 1-way marginal", 0)
    model = independent_model(noisy, schema)
    progress.update(acc.rho_spent / acc.rho_budget, f"released {d} one-way marginals (sigma {sigma:.3g})")
    info = {"sigma": sigma, "oneway_sigmas": [sigma] * d, "traffic": agg.traffic_summary()}
    return core.MethodResult(model, model, 1, [], info)


#: The independent method in the registry.
INDEPENDENT = FederatedMethod(
    "independent", IndependentOptions, min_silos=1, graphical=False, runner=run_independent, threat=threat_model
)
