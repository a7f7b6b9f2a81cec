"""DistAIM (FLAIM paper, Algorithm 3): AIM's select and measure on a pool of the silos' answers.

With budget ``rho``, ``T`` rounds, ``d`` columns and ``alpha``:
``sigma = sqrt((T + d) / (2 alpha rho))``, ``eps = sqrt(8 (1 - alpha) rho / T)``.
  0. unless ``T`` is given, the row total is released with 1% of ``rho`` and ``T`` (at most 10;
     AIM's plan when the run anneals, below) is planned from it (``allocation.plan_distaim``);
     ``rho`` is then what is left; with ``T = 0`` the 1-ways take all of it
     (``sigma = sqrt(d / (2 rho))``) and the run ends after step 1;
  0b. with a target column (``--target Y``, a public choice), its 2-way marginal with each of the
     other ``d - 1`` columns is summed over every silo and measured first with
     ``sigma = sqrt((d - 1) / (2 s rho))``, a share ``s`` (default 0.2) of ``rho``; the rest plans
     the rounds as below (``target.measure_target``);
  0c. with ``--find-dependence`` (by default, where a rule on the noisy total says it pays; never
     over MPC), the pairs of columns that depend on each other are found and measured on merged
     bins, summed over every silo (``dependence``); ``T`` is then planned on the budget left;
  1. every column's 1-way marginal over a fresh client sample is measured; a model is fitted;
  2. each round: silos are Poisson-sampled; a sampled silo not seen before contributes its
     answers to every candidate marginal once, and the pool ``A_r`` (held by the aggregator; secret
     shares in MPC) grows; AIM's final-round rule and size filter apply; the exponential
     mechanism selects on ``u_r = w_r (||A_r - N_t p_r||_1 - sqrt(2/pi) sigma n_r)`` where
     ``N_t`` is the pool's true size (it never leaves the aggregator) and ``p_r`` the model's
     normalised marginal: a record added to the pool moves ``A_r`` by one cell and ``N_t p_r`` by
     ``p_r``, so the sensitivity is ``2 max w``; ``A_r + N(0, sigma^2)`` is measured and rescaled
     by its noisy row count; the model is refitted.
  3. after exactly ``T`` rounds, rows are sampled from the model.
With a planned schedule and every silo in every round (sample rate 1, the default below 100
silos), the pool holds every silo from round 1, so each round answers on the union, as central
AIM's curator does: the run then follows AIM's schedule (``allocation.plan_aim``: ``R`` rounds,
``T = R + alpha d`` units, ``sigma = sqrt(T / (2 alpha rho))``, ``eps = sqrt(8 (1 - alpha) rho / T)``),
anneals as AIM does (``sigma / 2`` and ``2 eps`` when the model's marginal moved less than the
expected noise) and ends by AIM's final-round rule; the ledger records ``anneals`` in
``details.schedule``. Otherwise (``T`` given, or silos sampled) there is no annealing: a round's
measurement covers only the silos pooled so far, so at the population's scale it is noisy and
AIM's test would halve sigma almost every round and end the run after a few rounds; round ``T``
spends whatever is left.
Once pooled, a record is in every later answer, so client sampling gives no amplification: the
accounting is central AIM's.
"""

from __future__ import annotations

import math

import numpy as np

from ..accounting import Accountant
from ..aggregation import Aggregator
from ..common import Progress, Silent
from ..mechanisms import pooled_exponential_mechanism, pooled_gaussian_mechanism
from ..noise import NoiseSource
from . import allocation, core
from .aim import problem_for, workload_details
from .base import FederatedMethod
from .federated import (
    FEDERATED_ROUNDS,
    ClientSampler,
    FederatedOptions,
    TotalEstimator,
    default_sample_rate,
    fit_limit,
    measure_dependence_sums,
    measure_initial_oneways,
    measure_target_twoways,
    normalised,
    planning_total,
    rescale,
)


def threat_model(agg: Aggregator) -> str:
    """The ledger's threat model of a DistAIM run over ``agg``."""
    return (
        "distaim: each silo contributes its answers to every candidate marginal once, when first sampled; "
        f"{agg.threat_model}. Selection and measurement run on the pooled answers."
    )


def selection_sensitivity(max_weight: float, opts: FederatedOptions) -> float:
    """``2 max w``: a pooled record moves ``A_r`` by one cell and ``N_t p_r`` by ``p_r``."""
    return 2.0 * max_weight


def distaim_params(rho: float, rounds: int, n_columns: int, alpha: float) -> core.RoundParams:
    """``sigma = sqrt((T + d) / (2 alpha rho))``, ``eps = sqrt(8 (1 - alpha) rho / T)``: the ``d``
    initial 1-ways and ``T`` rounds spend exactly ``rho`` (``T = 0``: the 1-ways alone)."""
    eps = math.sqrt(8.0 * (1.0 - alpha) * rho / rounds) if rounds else 0.0
    return core.RoundParams(allocation.distaim_sigma(rho, rounds, n_columns, alpha), eps)


def planned_schedule(
    n_hat: float, rho: float, alpha: float, d: int, cells: list[int], anneals: bool
) -> tuple[int, float]:
    """The planned rounds ``R`` and units ``T``: AIM's plan and ``T = R + alpha d`` when the run
    anneals; else ``allocation.plan_distaim`` (at most ``FEDERATED_ROUNDS``) with ``T = R``."""
    if anneals:
        rounds = allocation.plan_aim(n_hat, rho, alpha, d, cells)
    else:
        rounds = allocation.plan_distaim(n_hat, rho, alpha, d, cells, FEDERATED_ROUNDS)
    return rounds, allocation.aim_units(rounds, d, alpha) if anneals else float(rounds)


def run_distaim(
    agg: Aggregator,
    acc: Accountant,
    noise: NoiseSource,
    opts: FederatedOptions,
    sampling_seed: int | None,
    progress: Progress | None = None,
) -> core.MethodResult:
    """DistAIM (module docstring) over ``agg``, every release charged to ``acc``; ``sampling_seed``
    seeds client sampling (public randomness only)."""
    from . import pgm

    progress = progress or Silent()
    silos = agg.silo_names
    schema = agg.schema
    prob = problem_for(schema, opts)
    names, shape, domain = prob.names, prob.shape, prob.domain
    d, T, rho = len(names), opts.rounds, acc.rho_budget
    rate = opts.sample_rate or default_sample_rate(len(silos))
    anneals = T is None and rate == 1.0  # AIM's schedule: the pool is the union from round 1
    n_hat = planning_total(agg, acc, noise) if T is None else None
    target = measure_target_twoways(agg, acc, noise, prob, opts)
    found = measure_dependence_sums(agg, acc, noise, prob, opts, n_hat)
    if n_hat is not None:  # planned on what the target's 2-ways and the dependence step leave
        T, units = planned_schedule(n_hat, acc.remaining, opts.alpha, d, prob.multiway_cells(), anneals)
        annealing = {"units": units, "anneals": True} if anneals else {}
        acc.note(schedule=allocation.schedule_record(n_hat, rounds=T, **annealing))
    assert T is not None  # given, or planned from the noisy total
    if anneals:
        params = core.initial_params(acc.remaining, units, opts.alpha)
    else:
        params = distaim_params(acc.remaining, T, d, opts.alpha)
    sampler = ClientSampler(silos, rate, np.random.default_rng(sampling_seed))
    totals = TotalEstimator(len(silos))

    measurements = (
        target
        + found.measurements
        + measure_initial_oneways(agg, acc, noise, sampler, names, shape, params.sigma, totals)
    )
    fitter = pgm.ModelFitter(domain, iters=opts.pgm_iters, tol=opts.pgm_tol or None, known_total=totals.population)
    model = fitter.fit(measurements)
    reader = pgm.MarginalReader(model)
    progress.update(acc.rho_spent / rho, f"measured {d} one-way marginals over sampled silos")
    pool = agg.pool({q: prob.columns(q) for q in prob.candidates})

    t, terminate = 0, T == 0
    while not terminate:
        t += 1
        if anneals:  # AIM's rule: the last round is the one that finds less than two rounds' cost left
            last = core.final_round(params, acc.remaining, opts.alpha)
        else:  # round T spends what is left
            last = core.last_round(acc.remaining, opts.alpha) if t == T else None
        if last is not None:
            params, terminate = last, True
        new = pool.add(sampler.draw(), round_index=t)
        limit = fit_limit(rho, acc.rho_spent + params.rho, opts.max_model_size)
        cands = core.filter_candidates(prob.candidates, pgm.model_cliques(model), domain, limit)
        (pick,) = pooled_exponential_mechanism(
            acc,
            pool,
            noise,
            cands,
            {q: normalised(reader(q)) for q in cands},
            sigma=params.sigma,
            epsilon=params.epsilon,
            sensitivity=selection_sensitivity(max(cands.values()), opts),
            round_index=t,
            query=f"select among {len(cands)} candidate marginals (pooled)",
        )
        y = pooled_gaussian_mechanism(
            acc,
            pool,
            noise,
            pick,
            sigma=params.sigma,
            round_index=t,
            query=f"marginal({', '.join(pick)}) over the pool",
        )
        n_hat = totals.estimate(float(y.sum()), y.size, params.sigma, len(pool.seen))
        measurements.append(rescale(pick, y, params.sigma, n_hat, totals.population))
        before = reader(pick)
        model = fitter.fit(measurements)
        reader = pgm.MarginalReader(model)
        progress.update(
            acc.rho_spent / rho,
            f"round {t}{'' if anneals else f'/{T}'}: {len(new)} new silo(s), pool of {len(pool.seen)}; "
            f"measured ({', '.join(pick)})",
        )
        measured_sigma = measurements[-1][2]  # the rescaled measurement's noise
        if anneals and not terminate and core.should_anneal(before, reader(pick), measured_sigma):
            params = params.annealed()
    progress.log(f"{t} rounds, pool of {len(pool.seen)} of {len(silos)} silos")
    model, _, fit = core.final_fit(
        fitter, measurements, names, opts.final_iters, progress, prob.zeros, opts.max_model_size
    )
    info = {
        "sample_rate": rate,
        "pooled_silos": len(pool.seen),
        "oneway_sigmas": core.oneway_sigmas(measurements, names, prob.shape),
        "fit": fit,
        "traffic": agg.traffic_summary(),
    }
    return core.MethodResult(core.graphical_sampler(model, schema), model, t, prob.workload, info)


#: DistAIM in the registry.
DISTAIM = FederatedMethod(
    "distaim",
    FederatedOptions,
    min_silos=2,
    graphical=True,
    runner=run_distaim,
    threat=threat_model,
    selection=selection_sensitivity,
    details=workload_details,
)
