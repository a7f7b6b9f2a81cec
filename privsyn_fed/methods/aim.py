"""Central AIM (McKenna et al., PVLDB 2022): the trusted-curator baseline.

One curator holds the pooled rows of every silo. With budget ``rho``, ``T`` and ``alpha = 0.9``:
  0. unless ``T`` is given, release the row total with 1% of ``rho`` and plan ``R`` rounds from it
     (``allocation.plan_aim``): ``T = R + alpha d`` units of the rest;
  0b. with a target column (``--target Y``, a public choice), its 2-way marginal with each of the
     other ``d - 1`` columns is measured first with ``sigma = sqrt((d - 1) / (2 s rho))``, a share ``s``
     (default 0.2) of ``rho``, a column of more than 4 cells on 4 merged groups; the rest plans the
     rounds as below (``target.measure_target``);
  0c. with ``--find-dependence`` (by default, where a rule on the noisy total says it pays), after
     the target's 2-ways: the pairs of columns that depend on each other are found and measured on
     merged bins (``dependence``); the rounds are then planned, as in step 0, on the budget left;
  1. measure every column's 1-way marginal with ``sigma_0 = sqrt(T / (2 alpha rho))`` and fit
     a graphical model (with ``R = 0`` the 1-ways take the whole budget and the run ends here);
  2. each round: apply the final-round rule; keep candidates (the workload's downward closure)
     whose junction tree stays below ``max_model_size * rho_used / rho`` MB; select one with the
     exponential mechanism on ``u_r = w_r (||M_r(D) - M_r(p)||_1 - sqrt(2/pi) sigma n_r)``
     (sensitivity ``max w_r``); measure it with ``N(0, sigma^2)``; refit; halve ``sigma`` and
     double ``eps`` when the model's marginal moved less than the expected noise;
  2b. where the last refit ended at least ``FIT_ALARM`` times further from the measurements than
     their noise explains (millions of rows), fit on, up to ``final_iters`` steps (``core.final_fit``);
  3. sample rows from the model (its noisy total unless a row count is given).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..accounting import Accountant
from ..aggregation import Aggregator
from ..common import OptionError, Progress, Silent
from ..mechanisms import exponential_mechanism, gaussian_mechanism, gaussian_mechanisms
from ..noise import NoiseSource
from ..silo import Silo
from . import allocation, core
from .base import MethodRun, option
from .coarse import coarsen
from .dependence import DependenceOptions, measure_dependence
from .target import TARGET_GROUPS, TargetOptions, measure_target
from .workload import (
    DEFAULT_DEGREE,
    DEFAULT_SIZE,
    DEFAULT_WORKLOAD_SEED,
    declared_workload,
    sample_workload,
    with_target,
)

THREAT_MODEL = (
    "aim: a trusted curator pools every silo's rows and runs AIM; the curator sees all raw "
    "data, everyone else sees only the synthetic output."
)


def selection_sensitivity(max_weight: float, opts: "AIMOptions") -> float:
    """``max w``: one record moves one cell of each candidate's marginal by one."""
    return max_weight


def _all_when_zero(size: int) -> int | None:
    """The command line's ``--workload-size``, where 0 means every marginal (None)."""
    return size or None


@dataclass
class AIMOptions(DependenceOptions, TargetOptions):
    """AIM's options (the federated methods' options extend them); ``rounds`` None plans ``T`` from a
    noisy row total."""

    rounds: int | None = option(
        None,
        "budget split into T rounds; aim anneals and stops when the budget is spent, distaim and flaim run "
        "exactly T global rounds (default: planned from a noisy row total that costs "
        f"{allocation.TOTAL_SHARE:.0%} of the budget: fewer rounds, and stronger 1-ways, when the data are "
        f"small; at most 16 x columns for aim, {allocation.FEDERATED_ROUNDS} for flaim and for distaim with "
        "sampled silos; a planned distaim over every silo in every round anneals as aim does, and so does "
        "a planned private flaim with one local step; the ledger records the plan under details.schedule)",
        flag="--rounds",
        metavar="T",
        group="aim",
        positive=True,
    )
    alpha: float = option(
        0.9,
        "share of each round spent on measurement rather than selection (default {default})",
        flag="--alpha",
        metavar="A",
        group="aim",
    )
    max_model_size: float = option(
        16.0,
        "cap on the graphical model's junction-tree size in MB (default {default}; AIM's paper uses 80); "
        "a refit's time grows with it, and on millions of rows a larger model fits its measurements less "
        "closely in --pgm-iters steps",
        flag="--max-model-size",
        metavar="MB",
        group="aim",
    )
    pgm_iters: int = option(
        300,
        "most mirror-descent iterations per model refit (default {default}; each refit starts at "
        "the step size the previous one reached)",
        flag="--pgm-iters",
        metavar="N",
        group="aim",
        positive=True,
    )
    pgm_tol: float | None = option(
        1e-6,
        "stop a refit early when 50 iterations improve the fit by less than TOL (relative) twice in a row "
        "(default {default}; 0 always runs --pgm-iters)",
        flag="--pgm-tol",
        metavar="TOL",
        group="aim",
    )
    final_iters: int = option(
        4500,
        "most mirror-descent iterations of the final fit, which runs only where the last refit ended "
        "at least 4 times further from the release's measurements than their noise explains (on millions "
        "of rows; default {default}; 0 never runs it)",
        flag="--final-iters",
        metavar="N",
        group="aim",
    )
    workload_degree: int | None = option(
        None,
        f"size of each workload marginal (default {DEFAULT_DEGREE})",
        flag="--workload-degree",
        metavar="K",
        group="workload",
        positive=True,
    )
    workload_size: int | None = option(
        DEFAULT_SIZE,
        "how many K-way marginals to sample (default {default}; 0 means all of them)",
        flag="--workload-size",
        metavar="M",
        group="workload",
        from_flag=_all_when_zero,
    )
    workload_seed: int = option(
        DEFAULT_WORKLOAD_SEED,
        "seed of the (public, data-independent) workload sample (default {default})",
        flag="--workload-seed",
        metavar="S",
        group="workload",
    )
    workload: Sequence[Any] | None = option(
        None,
        "the marginals the release must answer well, instead of the sampled workload: a JSON file (in Python a "
        'list) of column-name lists, where "*" stands for every other column (["PUMA", "*", "*"]: every pair '
        'with PUMA), or objects {"columns": [...], "weight": W} (W a whole number, 1 to 100); public, recorded '
        "in the ledger",
        flag="--workload",
        metavar="FILE",
        group="workload",
    )

    def check_mpc(self) -> None:
        """``find_dependence`` does not run over MPC: the parties answer no marginal on merged bins
        (``release.ReleaseRequest.of`` checks that the method runs over MPC at all)."""
        if self.find_dependence:
            raise OptionError(
                "find_dependence does not run over MPC (the parties answer no marginal on merged bins); "
                "leave it out, or release in-process",
                "find_dependence",
            )

    def validate(self) -> None:
        """Refuse (``OptionError``) ``rounds`` below 1 or above ``MAX_ROUNDS``, ``alpha`` outside (0, 1),
        a ``max_model_size`` not positive or above an eighth of this machine's memory, ``pgm_iters``
        below 1, a negative ``pgm_tol`` or ``final_iters``, ``workload_degree`` below 1, and a negative
        ``workload_seed`` or ``workload_size``."""
        if self.rounds is not None and self.rounds < 1:
            raise OptionError(f"rounds must be a positive integer, not {self.rounds}", "rounds")
        if not 0 < self.alpha < 1:
            raise OptionError(f"alpha must lie in (0, 1), not {self.alpha}", "alpha")
        if not self.max_model_size > 0:
            raise OptionError(f"max_model_size must be positive, not {self.max_model_size}", "max_model_size")
        if self.pgm_iters < 1:
            raise OptionError(f"pgm_iters must be positive, not {self.pgm_iters}", "pgm_iters")
        if self.final_iters < 0:
            raise OptionError(f"final_iters must be 0 or positive, not {self.final_iters}", "final_iters")
        if self.pgm_tol is not None and not self.pgm_tol >= 0:
            raise OptionError(f"pgm_tol must be 0 or positive, not {self.pgm_tol}", "pgm_tol")
        if self.workload_degree is not None and self.workload_degree < 1:
            raise OptionError(f"workload_degree must be positive, not {self.workload_degree}", "workload_degree")
        if self.rounds is not None and self.rounds > MAX_ROUNDS:
            raise OptionError(f"rounds {self.rounds} is more than the {MAX_ROUNDS:,} rounds a run may have", "rounds")
        if self.workload_seed < 0:
            raise OptionError(
                f"workload_seed must be 0 or a positive whole number, not {self.workload_seed}", "workload_seed"
            )
        if self.workload_size is not None and self.workload_size < 0:
            raise OptionError(f"workload_size must be 0 (all) or positive, not {self.workload_size}", "workload_size")
        self.validate_target()
        self.validate_dependence(self.rounds)
        from .pgm import memory_mb, numpy_cells_setting

        numpy_cells_setting()  # a bad $PRIVSYN_FED_NUMPY_CELLS is refused before any budget is spent
        limit = memory_mb() / 8
        if self.max_model_size > limit:
            raise OptionError(
                f"max_model_size {self.max_model_size:g} MB does not fit this machine: a model fit "
                f"holds several copies of the model, so at most {limit:,.0f} MB",
                "max_model_size",
            )

    def check_schema(self, schema) -> None:
        """The checks that need the public schema: the workload, and AIM's 1-way measurements
        (``d`` Gaussians of ``sigma^2 = T / (2 alpha rho)`` cost ``alpha d rho / T``, which must
        leave budget for the rounds: ``T > alpha d``)."""
        check_workload(self, schema)
        d = len(schema.columns)
        T = self.rounds
        if T is not None and self.alpha * d >= T:
            raise OptionError(
                f"rounds {T} is too small for {d} columns: the 1-way measurements alone "
                f"would spend the budget (use at least {int(np.floor(self.alpha * d)) + 1})",
                "rounds",
            )


#: The most rounds a run may have.
MAX_ROUNDS = 100_000


def check_workload(opts: "AIMOptions", schema) -> None:
    """The workload and its candidates must fit in memory: refused before any budget is spent."""
    from .workload import check_size

    d = len(schema.columns)
    if opts.workload is None and opts.workload_degree is not None and opts.workload_degree > d:
        raise OptionError(
            f"workload_degree {opts.workload_degree} is more than the {d} columns of the schema", "workload_degree"
        )
    opts.check_target(schema)
    cliques, weights = workload_of(schema.names, opts)
    check_size(cliques, schema.shape, schema.names, weights)


def workload_of(names: Sequence[str], opts: AIMOptions) -> tuple[list[tuple[int, ...]], list[int] | None]:
    """The workload as column-index cliques and their weights (None: all 1): declared
    (``workload.declared_workload``), or the seeded sample; with a target, plus its 2-ways
    (``workload.with_target``)."""
    weights: list[int] | None = None
    if opts.workload is not None:
        cliques, weights = declared_workload(opts.workload, names)
    else:
        degree = opts.workload_degree or min(DEFAULT_DEGREE, len(names))
        # a size of 0, like None, means every K-way marginal (as on the command line)
        cliques = sample_workload(len(names), degree, opts.workload_size or None, opts.workload_seed)
    if opts.target is not None:
        cliques, weights = with_target(cliques, weights, len(names), list(names).index(opts.target))
    return cliques, None if weights is None or all(w == 1 for w in weights) else weights


def workload_details(schema, opts: AIMOptions) -> dict[str, Any]:
    """The ledger's record of an AIM-family run: its options (a declared workload as ``"explicit"``),
    the workload's cliques by column name and their weights when not all 1 (``workload_of``)."""
    options = {k: v for k, v in vars(opts).items() if k != "workload"}
    if opts.workload is not None:  # given, not sampled: the options say so
        options["workload"] = "explicit"
    cliques, weights = workload_of(schema.names, opts)
    record: dict[str, Any] = {"options": options, "workload": [[schema.names[i] for i in cl] for cl in cliques]}
    if weights is not None:
        record["workload_weights"] = list(weights)
    return record


def problem_for(schema, opts: AIMOptions) -> core.Problem:
    """The run's public ``core.Problem``: the schema's columns, the options' workload
    (``workload_of``) and the structural zeros of the schema's constraints (``zeros``)."""
    from .zeros import structural_zeros

    prob = core.Problem.build(schema.names, schema.shape, *workload_of(schema.names, opts))
    prob.zeros = structural_zeros(schema, prob.names)
    return prob


def run_aim(
    silo: Silo, acc: Accountant, noise: NoiseSource, opts: AIMOptions, progress: Progress | None = None
) -> core.MethodResult:
    """Central AIM (module docstring) on the curator's pooled ``silo``, every release charged to
    ``acc``; returns the fitted model, its sampler, the rounds run and the workload."""
    from . import pgm

    progress = progress or Silent()
    prob = problem_for(silo.schema, opts)
    names, domain, candidates = prob.names, prob.domain, prob.candidates
    d = len(names)
    rho = acc.rho_budget

    def true_marginal(cl: tuple[str, ...]) -> np.ndarray:
        return silo.marginal(prob.columns(cl))

    T: float | None = opts.rounds  # planned: R rounds plus the 1-ways' alpha d units
    planned = None
    if T is None:
        total = gaussian_mechanism(
            acc,
            noise,
            silo.marginal([]),
            sigma=allocation.total_sigma(rho),
            query="total number of rows (plans the schedule)",
            where="curator",
        )

    def measure_pairs(items, sigma: float) -> list[np.ndarray]:
        """Each ``(pair, starts, query)``'s marginal, on merged bins where ``starts`` gives them,
        plus ``N(0, sigma^2)``, charged together."""
        releases = [(query, merged(pair, starts)) for pair, starts, query in items]
        return gaussian_mechanisms(acc, noise, releases, sigma=sigma, where="curator")

    def merged(pair: tuple[str, ...], starts) -> np.ndarray:
        counts = true_marginal(pair)
        return counts if starts is None else coarsen(counts.reshape(prob.cells_of(pair)), starts).ravel()

    target = measure_target(names, prob.shape, opts, acc.remaining, measure_pairs)
    if opts.target is not None:
        acc.note(target_groups=TARGET_GROUPS)

    def measure_oneways(sigma: float, query: str) -> np.ndarray:
        values = np.concatenate([true_marginal((name,)) for name in names])
        return gaussian_mechanism(acc, noise, values, sigma=sigma, query=query, where="curator", sensitivity_l2=d**0.5)

    n_hat = float(total[0]) if T is None else None  # the noisy total the schedule is planned from
    found = measure_dependence(prob, opts, acc, n_hat, measure_oneways, measure_pairs)
    if n_hat is not None:  # planned on what the target's 2-ways and the dependence step leave
        planned = allocation.plan_aim(n_hat, acc.remaining, opts.alpha, d, prob.multiway_cells())
        T = allocation.aim_units(planned, d, opts.alpha)
        acc.note(schedule=allocation.schedule_record(n_hat, rounds=planned, units=T))
    params = core.initial_params(acc.remaining, T, opts.alpha)  # T > alpha d unless planned

    columns = {cl: tuple(prob.columns(cl)) for cl in candidates}
    counts = silo.marginals(columns.values())  # one pass over the rows
    answers = {cl: counts[columns[cl]] for cl in candidates}  # private; used only inside mechanisms

    measurements: list[tuple] = list(target) + found.measurements
    oneways = [(f"marginal({name})", true_marginal((name,))) for name in names]
    ys = gaussian_mechanisms(acc, noise, oneways, sigma=params.sigma, where="curator")
    measurements += [((name,), y, params.sigma) for name, y in zip(names, ys)]
    progress.update(acc.rho_spent / rho, f"measured {d} one-way marginals; fitting the model")
    fitter = pgm.ModelFitter(domain, iters=opts.pgm_iters, tol=opts.pgm_tol or None)
    model = fitter.fit(measurements)
    estimate = pgm.MarginalReader(model)

    t, terminate = 0, planned == 0  # no rounds planned: the 1-ways took the whole budget
    while not terminate:
        t += 1
        last = core.final_round(params, acc.remaining, opts.alpha)
        if last is not None:
            params, terminate = last, True
        size_limit = opts.max_model_size * (acc.rho_spent + params.rho) / rho
        cands = core.filter_candidates(candidates, pgm.model_cliques(model), domain, size_limit)
        keys = list(cands)
        scores = np.array([core.aim_score(cands[cl], answers[cl], estimate(cl), params.sigma) for cl in keys])
        sensitivity = selection_sensitivity(max(cands.values()), opts)
        pick = keys[
            exponential_mechanism(
                acc,
                noise,
                scores,
                epsilon=params.epsilon,
                sensitivity=sensitivity,
                query=f"select among {len(keys)} candidate marginals",
                where="curator",
                round_index=t,
            )
        ]
        y = gaussian_mechanism(
            acc,
            noise,
            answers[pick],
            sigma=params.sigma,
            query=f"marginal({', '.join(pick)})",
            where="curator",
            round_index=t,
        )
        measurements.append((pick, y, params.sigma))
        before = estimate(pick)
        model = fitter.fit(measurements)
        estimate = pgm.MarginalReader(model)
        progress.update(acc.rho_spent / rho, f"round {t}: measured ({', '.join(pick)}), sigma={params.sigma:.1f}")
        if not terminate and core.should_anneal(before, estimate(pick), params.sigma):
            params = params.annealed()
    progress.log(f"{t} rounds, {len(measurements)} measurements")
    model, estimate, fit = core.final_fit(
        fitter, measurements, names, opts.final_iters, progress, prob.zeros, opts.max_model_size
    )
    info = {"oneway_sigmas": core.oneway_sigmas(measurements, names, prob.shape), "fit": fit}
    return core.MethodResult(core.graphical_sampler(model, silo.schema), model, t, prob.workload, info)


class AIM:
    """Central AIM in the registry: a trusted curator runs ``run_aim`` on the silos' pooled rows."""

    name = "aim"
    options_class = AIMOptions
    min_silos = 1
    mpc = False
    graphical = True
    central = True

    def threat_model(self, aggregator: Aggregator | None) -> str:
        """``THREAT_MODEL``: there is no aggregator, the curator sees every row."""
        return THREAT_MODEL

    def selection_sensitivity(self, max_weight: float, opts: AIMOptions) -> float | None:
        """``selection_sensitivity``."""
        return selection_sensitivity(max_weight, opts)

    def ledger_details(self, schema, opts: AIMOptions) -> dict[str, Any]:
        """``workload_details``."""
        return workload_details(schema, opts)

    def run(self, run: MethodRun) -> core.MethodResult:
        """``run_aim`` on the pooled rows of ``run.silos`` (the run's seed is not used: the
        curator's run draws no public randomness)."""
        silo = Silo.pooled(run.silos)
        return run_aim(silo, run.accountant, run.noise, run.options, run.progress)
