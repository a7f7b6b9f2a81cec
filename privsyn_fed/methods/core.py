"""The select-measure-estimate steps shared by the AIM family (AIM, DistAIM, FLAIM).

All of it operates on public quantities (the model, the candidate set, the budget) plus the
private statistic the caller passes in for scoring; the caller's mechanism charges the ledger.
The graphical model (``pgm``) is imported where it is used, so that reading the registry of
methods loads no model code (and mbi and JAX are loaded only for models too large for numpy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..silo import SQRT_2_OVER_PI, aim_score  # noqa: F401  (part of the AIM family's steps)
from .workload import downward_closure


@dataclass
class RoundParams:
    """Noise scale of one measurement and epsilon of one selection."""

    sigma: float
    epsilon: float

    @property
    def rho(self) -> float:
        """Cost of one round: one Gaussian (L2 sensitivity 1) and one exponential mechanism."""
        return 1.0 / (2.0 * self.sigma**2) + self.epsilon**2 / 8.0

    def annealed(self) -> "RoundParams":
        """AIM's annealing: ``sigma / 2`` and ``2 eps``, so one round costs four times as much."""
        return RoundParams(self.sigma / 2.0, self.epsilon * 2.0)


def initial_params(rho: float, rounds: float, alpha: float) -> RoundParams:
    """AIM's start: ``sigma = sqrt(T / (2 alpha rho))``, ``eps = sqrt(8 (1 - alpha) rho / T)``;
    one round then costs exactly ``rho / T``."""
    return RoundParams(math.sqrt(rounds / (2.0 * alpha * rho)), math.sqrt(8.0 * (1.0 - alpha) * rho / rounds))


def final_round(params: RoundParams, remaining: float, alpha: float) -> RoundParams | None:
    """AIM's final-round rule: when less than two rounds' cost is left, spend all of it now
    (``last_round``); else ``None``."""
    if remaining < 2.0 * params.rho:
        return last_round(remaining, alpha)
    return None


def last_round(remaining: float, alpha: float) -> RoundParams:
    """One round that spends ``remaining``: ``sigma = sqrt(1 / (2 alpha rem))``, ``eps = sqrt(8 (1 - alpha) rem)``."""
    return RoundParams(math.sqrt(1.0 / (2.0 * alpha * remaining)), math.sqrt(8.0 * (1.0 - alpha) * remaining))


def filter_candidates(
    candidates: dict[tuple[str, ...], float], model_cliques: Sequence[tuple[str, ...]], domain, size_limit_mb: float
) -> dict[tuple[str, ...], float]:
    """Keep a candidate if the model with it stays within ``size_limit_mb`` (junction-tree size),
    or if the current model already covers it (a free clique)."""
    from ..common import checkpoint
    from . import pgm
    from .clique_tree import cells_with_each

    free = pgm.covered_cliques(model_cliques)
    sizes = cells_with_each(domain, model_cliques, (cl for cl in candidates if frozenset(cl) not in free))
    kept = {}
    for i, (cl, w) in enumerate(candidates.items()):
        if i % 1024 == 1023:  # a safe point: no charge is under way while candidates are filtered
            checkpoint()
        if frozenset(cl) in free or pgm.cells_mb(next(sizes)) <= size_limit_mb:  # the next one not free
            kept[cl] = w
    return kept


def should_anneal(before: np.ndarray, after: np.ndarray, sigma: float) -> bool:
    """AIM's annealing test (post-processing): the model's marginal moved by at most the
    expected L1 norm of the measurement noise."""
    return sums_should_anneal([(before, after, sigma)])


def sums_should_anneal(changes: Sequence[tuple[np.ndarray, np.ndarray, float]]) -> bool:
    """Annealing FLAIM's test over a round's ``c`` sums ``(M_q before, M_q after, sigma_q)``, each
    measured with ``sigma_q = sigma sqrt(c)`` (post-processing): the model's marginals moved in all
    by at most the expected L1 noise of measurements at the round's ``sigma`` on their cells,
    ``sum_q ||M'_q - M_q||_1 <= sqrt(2/pi) sum_q (sigma_q / sqrt(c)) n_q``; with ``c = 1`` AIM's
    test. A round that measured nothing does not anneal."""
    if not changes:
        return False
    moved = sum(float(np.abs(after - before).sum()) for before, after, _ in changes)
    noise = sum(sigma * before.size for before, _, sigma in changes) / math.sqrt(len(changes))
    return moved <= SQRT_2_OVER_PI * noise


@dataclass
class Problem:
    """The public set-up of a run: columns, domain, workload and candidate marginals.

    ``candidates`` is the workload's downward closure with AIM's weights ``w_r = sum_s c_s |r & s|``
    (``c_s``: a declared marginal's weight, else 1); ``zeros`` the schema's structural zeros
    (``methods.zeros``), which the model is fitted with.
    """

    names: list[str]
    shape: list[int]
    domain: Any
    workload: list[tuple[str, ...]]
    candidates: dict[tuple[str, ...], float]
    zeros: list[tuple[tuple[str, ...], np.ndarray]] = field(default_factory=list)

    @classmethod
    def build(
        cls,
        names: Sequence[str],
        shape: Sequence[int],
        workload: Sequence[Sequence[int]],
        weights: Sequence[int] | None = None,
    ) -> "Problem":
        """The problem of a workload of column-index cliques (with ``weights``, or all 1): the workload
        in column names and its downward closure with AIM's weights as the candidates."""
        from . import pgm

        names = list(names)
        cliques = [tuple(cl) for cl in workload]
        candidates = {tuple(names[i] for i in cl): w for cl, w in downward_closure(cliques, weights).items()}
        return cls(
            names,
            list(shape),
            pgm.make_domain(names, shape),
            [tuple(names[i] for i in cl) for cl in workload],
            candidates,
        )

    def columns(self, clique: Sequence[str]) -> list[int]:
        """Column indices of a clique given by names."""
        return [self.names.index(c) for c in clique]

    def cells(self, clique: Sequence[str]) -> int:
        """Cells of the marginal over ``clique`` (column names)."""
        return math.prod(int(self.shape[i]) for i in self.columns(clique))

    def cells_of(self, clique: Sequence[str]) -> list[int]:
        """Each column's cells, for the columns of ``clique`` (names), in its order."""
        return [int(self.shape[i]) for i in self.columns(clique)]

    def multiway_cells(self) -> list[int]:
        """Cells of every candidate over two or more columns (what a round may measure)."""
        return [self.cells(q) for q in self.candidates if len(q) > 1]


@dataclass
class MethodResult:
    """What a method's runner returns: the sampler, the fitted model, the rounds run, the workload
    (column-name cliques) and run details (``info``)."""

    #: Draws the synthetic rows (``output.TableSampler``); its ``total`` is the noisy row count.
    sampler: Any
    #: The fitted model (the graphical model of the AIM family), for likelihoods.
    model: object
    rounds: int
    workload: list[tuple[str, ...]]
    info: dict[str, Any] = field(default_factory=dict)


def oneway_sigmas(measurements, names: Sequence[str], shape: Sequence[int]) -> list[float]:
    """Per column, the noise (standard deviation per cell, in counts) of its 1-way marginal as
    every measurement containing it determines it. A measurement over ``r`` with ``c_r`` cells
    and noise ``sigma_r`` sums ``c_r / c_j`` of its cells into each cell of column ``j``, so the
    precisions add: ``1 / s_j^2 = sum_r c_j / (c_r sigma_r^2)``. A marginal on merged bins
    (``coarse``) does not determine a column's own cells and is left out. Public: noise scales only."""
    precision = np.zeros(len(names))
    index = {n: i for i, n in enumerate(names)}
    for clique, _, sigma, *merged in measurements:
        if merged:
            continue
        cells = float(np.prod([shape[index[c]] for c in clique]))
        for c in clique:
            precision[index[c]] += shape[index[c]] / (cells * float(sigma) ** 2)
    return [float(p**-0.5) if p > 0 else math.inf for p in precision]


def graphical_sampler(model: Any, schema: Any) -> Any:
    """The fitted mbi model as the release's sampler: its junction tree (``model.GraphicalModel``),
    whose rows are decoded to values inside the schema's bins."""
    from ..model import GraphicalModel
    from . import pgm

    return GraphicalModel(pgm.MarginalReader(model).factorisation(), schema)


def final_fit(
    fitter: Any,
    measurements: Sequence[tuple],
    names: Sequence[str],
    steps: int,
    progress: Any,
    zeros: Sequence[tuple[tuple[str, ...], np.ndarray]] = (),
    max_model_size: float | None = None,
):
    """The final mirror descent (ALGORITHMS.md, AIM step 6). With the schema's structural zeros
    (``zeros``, ``methods.zeros``), the model is first refitted from where it ended with their
    cells held at probability 0 (``fitter.iters`` steps; the rounds fit without them, whose
    cliques would grow every refit's model), those whose cliques keep its junction tree within
    ``max_model_size`` MB (8 bytes a cell; ``pgm.ModelFitter.fitting_zeros``). Then, only where
    the fit ended far from the release's own measurements: while ``fit_check``'s ``model`` sum is
    at least ``FIT_ALARM`` times the noise's expectation (a model fitted to consistent measurements
    sits near 1 times), the fit goes on for ``fitter.iters`` more steps from where it ended, at most
    ``steps`` in all, and stops sooner when a block brings the sum down by less than a fiftieth
    (measurements that disagree with each other, which more steps cannot fit). Post-processing of
    released values: it spends nothing. Returns the model, its ``pgm.MarginalReader`` and its fit
    (``fit_check.fit_against_independent``)."""
    from . import fit_check, pgm

    model = fitter.model
    if zeros:
        fitter.zeros = list(zeros)
        fitter.zero_cells = None if max_model_size is None else int(max_model_size * 2**20 / 8)
        model = fitter.fit(measurements)
        progress.log(
            f"final fit: the structural zeros of {len(fitter.held)} of {len(zeros)} column sets held at probability 0"
        )
        left = [" x ".join(c) for c, _ in zeros if all(c != h for h, _ in fitter.held)]
        if left:
            progress.log(
                f"final fit: not held (their columns together would grow the model past its size limit; rejection "
                f"still removes the forbidden rows, and --max-model-size makes room): {', '.join(left)}"
            )
    reader = pgm.MarginalReader(model)
    fit = fit_check.fit_against_independent(reader, measurements, names)
    done = 0
    while done < steps and fit["measurements"] and fit["model"] >= fit_check.FIT_ALARM * fit["noise"]:
        block = min(fitter.iters, steps - done)
        progress.log(
            f"final fit: the model is {fit['model'] / fit['noise']:,.1f} times further from its measurements "
            f"than their noise explains; {block} more steps"
        )
        model = fitter.fit(measurements, iters=block)
        reader, before = pgm.MarginalReader(model), fit["model"]
        fit = fit_check.fit_against_independent(reader, measurements, names)
        done += block
        if fit["model"] > 0.98 * before:
            break
    return model, reader, fit
