"""Steps shared by the federated members of the AIM family (DistAIM, FLAIM).

* ``ClientSampler``: Poisson client sampling at rate ``p``, redrawn until non-empty. It uses
  only its own random generator (never the data), so which silos take part reveals nothing.
* ``TotalEstimator``: row totals come from noise, never from true counts. The sum of a noisy
  marginal over ``c`` cells estimates the rows behind it with variance ``c sigma^2``; for large
  marginals over few silos that is worse than useless, so it is combined (inverse-variance) with
  the estimate ``m * N_hat / K`` from the number ``m`` of silos that contributed, whose standard
  deviation is taken as ``sqrt(m) * N_hat / K`` (silo sizes assumed to vary by about their mean).
  Both inputs are DP outputs or public, so this is post-processing.
* ``measure_target_twoways``: with a target column, its 2-ways summed over every silo before the
  rounds are planned (``target.measure_target``).
* ``measure_dependence_sums``: with ``--find-dependence``, the dependence step's releases summed
  over every silo (``dependence``).
* ``measure_initial_oneways``: DistAIM and FLAIM start from every column's 1-way marginal, each
  summed over a fresh client sample and measured with ``N(0, sigma^2)`` (sensitivity 1 each).
* ``rescale``: a measurement over ``n_hat`` rows is scaled to the population estimate ``N_hat``:
  ``(N_hat / n_hat) y`` with standard deviation ``sigma N_hat / n_hat``. The model's total is
  fixed to ``N_hat`` (the rescaled measurements' own sums are not exactly ``N_hat``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..accounting import Accountant
from ..aggregation import Aggregator
from ..common import OptionError
from ..mechanisms import exact_sums_in_a_non_private_run, noisy_sum, noisy_sum_each, noisy_sums
from ..noise import NoiseSource
from ..silo import MarginalsQuery
from . import allocation
from .aim import AIMOptions, check_workload
from .allocation import FEDERATED_ROUNDS, default_sample_rate  # noqa: F401  (shared by DistAIM and FLAIM)
from .base import option
from .coarse import MeasurePairs, MergedMarginalQuery
from .core import Problem
from .dependence import Found, measure_dependence
from .target import TARGET_GROUPS, measure_target

Measurement = tuple[tuple[str, ...], np.ndarray, float]


@dataclass
class FederatedOptions(AIMOptions):
    """Options of DistAIM and FLAIM: AIM's, with ``rounds`` the ``T`` global rounds (planned, at most
    ``FEDERATED_ROUNDS``, when not given), and the client sample rate ``p``."""

    sample_rate: float | None = option(
        None,
        "probability that a silo takes part in a round, in (0, 1] (default: 1 below "
        f"{allocation.MANY_SILOS} silos, {allocation.MANY_SILOS_RATE:g} from {allocation.MANY_SILOS} silos on); "
        "sampling never looks at the data (Poisson, public randomness); with sites and servers, a site "
        "absent when sampled is skipped",
        flag="--sample-rate",
        aliases=("--participation",),
        metavar="P",
        group="federated",
    )

    def validate(self) -> None:
        """AIM's checks; also refuse a ``sample_rate`` outside (0, 1]."""
        super().validate()
        if self.sample_rate is not None and not 0 < self.sample_rate <= 1:
            raise OptionError(f"sample_rate must lie in (0, 1], not {self.sample_rate}", "sample_rate")

    def check_schema(self, schema) -> None:
        """The workload's checks (the federated budget split is feasible for every ``T``)."""
        check_workload(self, schema)


class ClientSampler:
    """Poisson sampling of silos: each takes part independently with probability ``rate``."""

    def __init__(self, names: Sequence[str], rate: float, rng: np.random.Generator):
        self.names = list(names)
        self.rate = rate
        self.rng = rng

    def draw(self) -> list[str]:
        """One Poisson sample of silo names (in the given order), redrawn until it is non-empty."""
        while True:
            keep = self.rng.random(len(self.names)) < self.rate
            if keep.any():
                return [n for n, k in zip(self.names, keep) if k]


class TotalEstimator:
    """Noisy row totals combined with a prior from the number of contributing silos."""

    def __init__(self, n_silos: int, per_silo: float | None = None):
        self.n_silos = n_silos
        self.per_silo = per_silo  # estimated mean rows per silo (set from the 1-ways)

    @property
    def population(self) -> float:
        """The population estimate ``N_hat = max(1, per_silo K)`` (``per_silo`` must be set)."""
        return max(1.0, self.per_silo * self.n_silos)

    def estimate(
        self, noisy_sum: float, cells: int, sigma: float, contributors: int, per_silo: float | None = None
    ) -> float:
        """Inverse-variance combination of ``noisy_sum`` (variance ``cells sigma^2``) and
        ``contributors * per_silo`` (variance ``contributors per_silo^2``); at least 1."""
        c = self.per_silo if per_silo is None else per_silo
        v_noise = cells * sigma**2
        if c is None or c <= 0:
            return max(1.0, noisy_sum)
        prior, v_prior = contributors * c, contributors * c**2
        est = (noisy_sum / v_noise + prior / v_prior) / (1.0 / v_noise + 1.0 / v_prior)
        return max(1.0, est)


def rescale(
    clique: tuple[str, ...], y: np.ndarray, sigma: float, n_hat: float, population: float, weighted: bool = True
) -> Measurement:
    """``(N_hat / n_hat) y`` with standard deviation ``sigma N_hat / n_hat`` (``sigma`` when the
    measurement weighting is off, as in NaiveFLAIM)."""
    factor = population / n_hat
    return clique, np.asarray(y, dtype=float) * factor, (sigma * factor if weighted else sigma)


def measure_initial_oneways(
    agg: Aggregator,
    acc: Accountant,
    noise: NoiseSource,
    sampler: ClientSampler,
    names: Sequence[str],
    shape: Sequence[int],
    sigma: float,
    totals: TotalEstimator,
    weighted: bool = True,
) -> list[Measurement]:
    """Each column's 1-way marginal over a fresh client sample, plus ``N(0, sigma^2)``.

    Sets ``totals.per_silo`` (mean noisy rows per sampled silo) and returns the measurements
    rescaled to the population estimate.
    """
    draws = [sampler.draw() for _ in names]
    requests = [
        (f"marginal({name})", MarginalsQuery(((i,),)), among) for i, (name, among) in enumerate(zip(names, draws))
    ]
    ys = noisy_sum_each(agg, acc, noise, requests, sigma=sigma, round_index=0)  # charged together
    raw = [((name,), y, len(among)) for name, y, among in zip(names, ys, draws)]
    # rows per silo: inverse-variance mean of the per-column estimates (variance ~ cells sigma^2 / m^2)
    est = np.array([float(y.sum()) / m for _, y, m in raw])
    w = np.array([m**2 / (shape[i] * sigma**2) for i, (_, _, m) in enumerate(raw)])
    totals.per_silo = max(1.0, float((est * w).sum() / w.sum()))
    out = []
    for i, (clique, y, m) in enumerate(raw):
        n_hat = totals.estimate(float(y.sum()), shape[i], sigma, m)
        out.append(rescale(clique, y, sigma, n_hat, totals.population, weighted))
    return out


def measure_target_twoways(
    agg: Aggregator, acc: Accountant, noise: NoiseSource, prob, opts: AIMOptions
) -> list[Measurement]:
    """With a target: each of its 2-ways summed over every silo plus ``N(0, sigma^2)``
    (``target.measure_target``; sensitivity 1 each, on merged bins unless ``agg.secure``), at the
    population's scale; else nothing."""

    groups = None if agg.secure else TARGET_GROUPS
    if opts.target is not None and groups is not None:
        acc.note(target_groups=groups)
    return measure_target(prob.names, prob.shape, opts, acc.remaining, pair_sums(agg, acc, noise, prob), groups)


def measure_dependence_sums(
    agg: Aggregator, acc: Accountant, noise: NoiseSource, prob, opts: AIMOptions, n_hat: float | None
) -> Found:
    """``dependence.measure_dependence`` on sums over every silo (the grouping 1-ways as one sum of
    L2 sensitivity ``sqrt(d)``, each pair's ``coarse.MergedMarginalQuery``), at the population's
    scale; over MPC (``agg.secure``) the rule never runs the step."""
    d = len(prob.names)

    def oneways(sigma: float, query: str) -> np.ndarray:
        request = MarginalsQuery(tuple((i,) for i in range(d)))
        return noisy_sums(agg, acc, noise, [(query, request, agg.silo_names)], sigma, math.sqrt(d), query, 0)[0]

    return measure_dependence(prob, opts, acc, n_hat, oneways, pair_sums(agg, acc, noise, prob), secure=agg.secure)


def pair_sums(agg: Aggregator, acc: Accountant, noise: NoiseSource, prob) -> MeasurePairs:
    """``measure_pairs`` on sums over every silo: each ``(pair, starts, query)``'s marginal summed
    (``coarse.MergedMarginalQuery`` where ``starts`` merges bins) plus ``N(0, sigma^2)``,
    sensitivity 1 each, all charged together (``mechanisms.noisy_sum_each``)."""

    def measure(items, sigma: float) -> list[np.ndarray]:
        requests = []
        for pair, starts, query in items:
            columns = tuple(prob.columns(pair))
            request = MarginalsQuery((columns,)) if starts is None else MergedMarginalQuery(columns, starts)
            requests.append((query, request, agg.silo_names))
        return noisy_sum_each(agg, acc, noise, requests, sigma=sigma, round_index=0)

    return measure


def planning_total(agg: Aggregator, acc: Accountant, noise: NoiseSource) -> float:
    """The row total over every silo, released with ``allocation.TOTAL_SHARE`` of the budget
    (sensitivity 1), from which a federated schedule is planned."""
    y = noisy_sum(
        agg,
        acc,
        noise,
        MarginalsQuery(((),)),
        agg.silo_names,
        sigma=allocation.total_sigma(acc.rho_budget),
        query="total number of rows (plans the schedule)",
        round_index=0,
    )
    return float(y[0])


def rows_per_silo(oneways: Sequence[np.ndarray], shape: Sequence[int], m: int) -> float:
    """Rows per sampled silo from a round's noisy 1-ways over ``m`` silos (the inverse-variance
    mean of their sums, over ``m``)."""
    totals = np.array([float(y.sum()) for y in oneways])
    w = 1.0 / np.asarray(shape, dtype=float)
    return max(1.0, float((totals * w).sum() / w.sum()) / m)


def measure_sums(
    agg: Aggregator,
    acc: Accountant,
    noise: NoiseSource,
    requests: Sequence[tuple[tuple[str, ...], Sequence[str]]],
    prob,
    sigma: float,
    round_index: int,
    query: str,
    sensitivity_l2: float = 1.0,
) -> list[np.ndarray]:
    """For each ``(clique, silos)`` request, the marginal summed over those silos (``noisy_sums``)."""
    return noisy_sums(
        agg,
        acc,
        noise,
        [(f"marginal({', '.join(q)})", MarginalsQuery((tuple(prob.columns(q)),)), among) for q, among in requests],
        sigma,
        sensitivity_l2,
        query,
        round_index,
    )


def model_payload(model) -> dict[str, np.ndarray]:
    """What the server sends a silo so it can evaluate the model: its clique potentials."""
    return {"|".join(cl): np.asarray(table) for cl, table in model.potentials.items()}


def normalised(table: np.ndarray) -> np.ndarray:
    """``max(x, 0)`` scaled to sum to one (uniform when nothing is positive)."""
    pos = np.clip(np.asarray(table, dtype=float), 0.0, None)
    total = pos.sum()
    return pos / total if total > 0 else np.full(pos.shape, 1.0 / pos.size)


def fit_limit(rho_budget: float, rho_after: float, max_model_size: float) -> float:
    """AIM's junction-tree size cap, ramped by the share of the budget spent."""
    return max_model_size * min(1.0, rho_after / rho_budget)


def keep_within_size(
    picks: Sequence[tuple[str, ...]], model_cliques: Sequence[tuple[str, ...]], domain, limit_mb: float
) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """Greedily keep picks (in the given order) while the model stays below ``limit_mb``; the
    others are dropped before they are measured (their selection was already paid for)."""
    from . import pgm

    kept: list[tuple[str, ...]] = []
    dropped: list[tuple[str, ...]] = []
    cliques = list(model_cliques)
    for q in picks:
        if pgm.hypothetical_size_mb(domain, cliques + kept + [q]) <= limit_mb or not kept:
            kept.append(q)
        else:
            dropped.append(q)
    return kept, dropped


def oracle_pooled_marginals(agg: Aggregator, acc: Accountant, prob: Problem) -> dict[tuple[str, ...], np.ndarray]:
    """FLAIM's ORACLE ONLY: the true pooled marginals ``M_q(D)/N`` of every candidate (not private;
    the ledger says so)."""
    totals = exact_sums_in_a_non_private_run(
        acc,
        agg,
        [
            (f"oracle: marginal({', '.join(q)})", MarginalsQuery((tuple(prob.columns(q)),)), agg.silo_names)
            for q in prob.candidates
        ],
    )
    return {q: total / max(1, total.sum()) for q, total in zip(prob.candidates, totals)}
