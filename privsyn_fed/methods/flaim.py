"""FLAIM (Maddock, Cormode, Maple, KDD 2024): AIM where each sampled silo selects locally.

With budget ``rho``, ``T`` global rounds, ``s`` local steps, ``d`` columns and ``alpha``:
  * ``sigma = sqrt(G / (2 alpha rho))`` with ``G = T (2s - 1) + d`` Gaussian releases, or
    ``G = T (2s - 1 + d)`` for private with sampled silos (``p < 1``: the proxy's 1-ways in rounds
    1..T-1 as well);
    ``eps = sqrt(8 (1 - alpha) rho / (T s))``. ``s > 1`` costs ``2s - 1`` Gaussians a round: the
    ``s - 1`` local measurements that steer later local selections are releases too.
  0. unless ``T`` is given, the row total is released with 1% of ``rho`` and ``T`` (at most 10)
     is planned from it (``allocation.plan_flaim``); ``rho`` is then what is left; with ``T = 0``
     the 1-ways take all of it (``sigma = sqrt(d / (2 rho))``) and the run ends after step 1;
  0b. with a target column (``--target Y``, a public choice), its 2-way marginal with each of the
     other ``d - 1`` columns is summed over every silo and measured first with
     ``sigma = sqrt((d - 1) / (2 s rho))``, a share ``s`` (default 0.2) of ``rho``; the rest plans
     the rounds as below (``target.measure_target``);
  0c. with ``--find-dependence`` (by default where the rule on the noisy total says it pays, as
     for DistAIM; never over MPC) the most dependent pairs are found and measured on merged bins,
     summed over every silo (``dependence``), and ``T`` is planned on the budget left;
  1. every column's 1-way marginal over a fresh client sample is measured; a model is fitted;
  2. each round ``t``: silos are Poisson-sampled at rate ``p``; each sampled silo ``k`` runs the
     exponential mechanism on its own rows with the score
        ``u_k(q) = w_q (||M_q(D_k) - n_k p_q||_1 - sqrt(2/pi) sigma n_q - n_k tau_k(q))``
     (``p_q`` the model's normalised marginal; with a silo column, its slice of the silo's own
     value, and ``n_q`` that slice's cells: ``silo.LocalScoresQuery``). Adding a record moves the
     first term by at most 2 (the cell, and ``n_k``), so the sensitivity is ``2 max w`` (naive); the
     heterogeneity term
     ``n_k tau_k(q) = (1/|q|) sum_{i in q} ||M_i(D_k) - n_k s_i||_1`` (``s_i`` the server's noisy
     proxy of column ``i``) moves by at most 2 more: ``4 max w`` (private);
  3. naive and oracle (the paper's aggregation): the aggregator sums, for each chosen marginal,
     the counts of the silos that chose it; each record is in at most ``s`` of those sums, so
     their concatenation has L2 sensitivity ``sqrt(s)`` and gets ``N(0, sigma^2)`` per cell.
     Private: each of the ``c`` chosen marginals is summed over every sampled silo that chose
     (unbiased where silos differ, and over more rows); a record is in all ``c`` sums, L2
     sensitivity ``sqrt(c)``, measured with ``sigma sqrt(c / s)``: the same round cost
     ``s / (2 sigma^2)``, and at most ``sigma sqrt(m)`` on the rows of ``m`` silos where a sum
     over one silo's rows had ``sigma``;
  4. private: with ``p < 1`` sampled silos also send every 1-way (rounds 1..T-1); their noisy
     sums are added to the model ("combine") and update the proxy as a running mean (with
     ``p = 1`` the initial 1-ways, over every silo, are the proxy throughout); 1-way candidates
     are dropped ("filter"); every measurement is weighted by its noisy row count
     (``sigma N_hat / n_hat``);
  5. private with its rounds planned, every silo in every round and one local step follows AIM's
     schedule instead of ``T`` fixed rounds (``allocation.flaim_anneals``): ``R`` rounds planned for
     ``N_hat / sqrt(K)`` rows (``allocation.plan_flaim_annealed``), AIM's ``R + alpha d`` units and
     start (``core.initial_params``); a round then costs exactly AIM's, it anneals (``sigma / 2``,
     ``2 eps``) when its sums moved the model by at most their expected noise
     (``core.sums_should_anneal``), and the round that finds under two rounds' cost left spends it all.

Variants: ``naive`` (no heterogeneity term, unweighted measurements), ``private`` (AugFLAIM
(Private): all of the above), and ``oracle``, a research baseline with naive's budget split and
weighted measurements whose heterogeneity term uses the **true** pooled marginals,
``n_k tau_k(q) = ||M_q(D_k) - n_k M_q(D)/N||_1``: it is not differentially private, and says so
in its ledger (``non_private``), which makes ``audit`` fail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..accounting import Accountant
from ..aggregation import Aggregator
from ..common import OptionError, Progress, Silent
from ..mechanisms import local_exponential_mechanism, local_gaussian_mechanism
from ..noise import NoiseSource
from ..silo import LocalScoresQuery, MarginalsQuery
from . import allocation, core
from .aim import problem_for, workload_details
from .base import FederatedMethod, option
from .federated import (
    FEDERATED_ROUNDS,
    ClientSampler,
    FederatedOptions,
    Measurement,
    TotalEstimator,
    default_sample_rate,
    fit_limit,
    keep_within_size,
    measure_dependence_sums,
    measure_initial_oneways,
    measure_sums,
    measure_target_twoways,
    model_payload,
    normalised,
    oracle_pooled_marginals,
    planning_total,
    rescale,
    rows_per_silo,
)

VARIANTS = ("naive", "private", "oracle")
ORACLE_WARNING = (
    "ORACLE VARIANT: the silos' heterogeneity term uses the true pooled marginals, "
    "which are not protected; this release has NO differential-privacy guarantee "
    "(a research baseline only)"
)


@dataclass
class FLAIMOptions(FederatedOptions):
    """FLAIM's options: the federated ones, the ``variant`` (``naive``, ``private`` or ``oracle``) and
    ``s`` local steps."""

    variant: str = option(
        "private",
        "flaim only (default {default}): naive = local AIM scores; private = AugFLAIM with a DP heterogeneity "
        "proxy, filter-and-combine and measurement weighting; oracle = uses the true pooled marginals, NOT "
        "private, research baseline only",
        flag="--variant",
        group="federated",
        choices=VARIANTS,
    )
    local_steps: int = option(
        1,
        "flaim only: selections per sampled silo per round (default {default}); S > 1 costs 2S - 1 Gaussian "
        "releases per round, not S",
        flag="--local-steps",
        metavar="S",
        group="federated",
        positive=True,
    )

    def validate(self) -> None:
        """The federated checks; also refuse an unknown ``variant`` and ``local_steps`` below 1."""
        super().validate()
        if self.variant not in VARIANTS:
            raise OptionError(f"variant must be one of {', '.join(VARIANTS)}, not {self.variant!r}", "variant")
        if self.local_steps < 1:
            raise OptionError(f"local_steps must be a positive integer, not {self.local_steps}", "local_steps")

    def check_mpc(self) -> None:
        """Over MPC a silo's process only answers declared queries: one local step, a private variant,
        no dependence step (``AIMOptions.check_mpc``)."""
        super().check_mpc()
        if self.local_steps > 1 or self.variant == "oracle":
            raise OptionError(
                "flaim over MPC runs one local step with variant naive or private "
                "(local_steps > 1 refits the model inside each silo; oracle is not private)",
                "variant",
                "local_steps",
            )


def threat_model(agg: Aggregator) -> str:
    """The ledger's threat model of a FLAIM run over ``agg``."""
    return (
        "flaim: each sampled silo selects marginals on its own rows (exponential mechanism, run "
        f"locally) and sends the chosen marginals' counts; {agg.threat_model}. Which marginal each "
        "silo chose is visible to the aggregator (it is a DP output)."
    )


def flaim_params(
    rho: float, rounds: int, local_steps: int, n_columns: int, alpha: float, proxy_rounds: bool
) -> tuple[float, float, int]:
    """``(sigma, eps, G)``: ``G`` Gaussians of sensitivity 1 and ``T s`` exponential
    mechanisms (parallel over silos) spend exactly ``rho`` (``T = 0``: the 1-ways alone)."""
    T, s = rounds, local_steps
    eps = math.sqrt(8.0 * (1.0 - alpha) * rho / (T * s)) if T else 0.0
    return (
        allocation.flaim_sigma(rho, T, s, n_columns, alpha, proxy_rounds),
        eps,
        allocation.flaim_gaussians(T, s, n_columns, proxy_rounds),
    )


def score_sensitivity(max_weight: float, variant: str) -> float:
    """``2 max w`` without the heterogeneity term, ``4 max w`` with it."""
    return (2.0 if variant == "naive" else 4.0) * max_weight


def pooled_sums_noise(chosen: int, local_steps: int, sigma: float) -> tuple[float, float]:
    """``(sqrt(c), sigma sqrt(c / s))`` for the sums of ``c`` chosen marginals, each over every silo
    that chose: a record is in all ``c``, which together cost ``c / (2 sigma^2 c / s) = s / (2
    sigma^2)``, the round's planned ``s`` unit releases."""
    c = max(1, chosen)
    return math.sqrt(c), sigma * math.sqrt(c / local_steps)


def selection_sensitivity(max_weight: float, opts: FLAIMOptions) -> float:
    """``score_sensitivity`` for the options' variant."""
    return score_sensitivity(max_weight, opts.variant)


def run_flaim(
    agg: Aggregator,
    acc: Accountant,
    noise: NoiseSource,
    opts: FLAIMOptions,
    sampling_seed: int | None,
    progress: Progress | None = None,
) -> core.MethodResult:
    """FLAIM (module docstring) over ``agg``, every release charged to ``acc`` (``FLAIMRun``);
    ``sampling_seed`` seeds client sampling (public randomness only)."""
    return FLAIMRun(agg, acc, noise, opts, sampling_seed, progress or Silent()).run()


class FLAIMRun:
    """One FLAIM release: the server's state (model, proxy, measurements) across rounds."""

    def __init__(
        self,
        agg: Aggregator,
        acc: Accountant,
        noise: NoiseSource,
        opts: FLAIMOptions,
        sampling_seed: int | None,
        progress: Progress,
    ):
        self.agg, self.acc, self.noise, self.opts, self.progress = agg, acc, noise, opts, progress
        self.variant = opts.variant
        self.weighted = opts.variant != "naive"
        self.pooled_sums = allocation.flaim_pooled_sums(opts.variant)
        self.schema = agg.schema
        self.prob = problem_for(self.schema, opts)
        self.delta_u = score_sensitivity(max(self.prob.candidates.values()), self.variant)
        self.rate = opts.sample_rate or default_sample_rate(len(agg.silo_names))
        self.proxy_rounds = allocation.flaim_proxy_rounds(opts.variant, self.rate)
        self.rounds = opts.rounds
        self.sigma = self.eps = 0.0
        self.sampler = ClientSampler(agg.silo_names, self.rate, np.random.default_rng(sampling_seed))
        self.totals = TotalEstimator(len(agg.silo_names))
        self.measurements: list[Measurement] = []
        self.before_rounds: list[Measurement] = []
        self.proxy: list[np.ndarray] = []
        self.proxy_updates = 0
        self.dropped = 0
        self.anneals = allocation.flaim_anneals(opts.rounds, self.rate, opts.local_steps, opts.variant)
        self.settled = False  # whether the last round's sums passed the annealing test

    def plan(self) -> None:
        """``T`` as given, or planned from a noisy total (``allocation.plan_flaim``); then sigma and eps
        from the budget left (annealing: AIM's units and start)."""
        opts, acc, d = self.opts, self.acc, len(self.prob.names)
        n_hat = planning_total(self.agg, acc, self.noise) if self.rounds is None else None
        self.before_rounds = measure_target_twoways(self.agg, acc, self.noise, self.prob, opts)
        self.before_rounds += measure_dependence_sums(self.agg, acc, self.noise, self.prob, opts, n_hat).measurements
        cells, k = self.prob.multiway_cells(), len(self.agg.silo_names)
        if self.anneals:  # step 5
            self.rounds = allocation.plan_flaim_annealed(n_hat, acc.remaining, opts.alpha, d, cells, k)
            units = allocation.aim_units(self.rounds, d, opts.alpha)
            acc.note(schedule=allocation.schedule_record(n_hat, rounds=self.rounds, units=units, anneals=True))
            start = core.initial_params(acc.remaining, units, opts.alpha)
            self.sigma, self.eps = start.sigma, start.epsilon
            return
        if n_hat is not None:  # planned on what the target's 2-ways and the dependence step leave
            self.rounds = allocation.plan_flaim(
                n_hat,
                acc.remaining,
                opts.alpha,
                d,
                cells,
                FEDERATED_ROUNDS,
                opts.local_steps,
                self.variant,
                k,
                self.rate,
            )
            acc.note(schedule=allocation.schedule_record(n_hat, rounds=self.rounds))
        self.sigma, self.eps, _ = flaim_params(
            acc.remaining, self.rounds, opts.local_steps, d, opts.alpha, self.proxy_rounds
        )

    def run(self) -> core.MethodResult:
        """The release: the plan, the initial 1-ways and model, then ``T`` global rounds (the oracle
        variant first marks its ledger non-private)."""
        from . import pgm

        prob, opts, acc = self.prob, self.opts, self.acc
        if self.variant == "oracle":
            acc.mark_non_private(ORACLE_WARNING)
            self.progress.warn(ORACLE_WARNING)
        self.plan()
        self.measurements = measure_initial_oneways(
            self.agg, acc, self.noise, self.sampler, prob.names, prob.shape, self.sigma, self.totals, self.weighted
        )
        self.proxy = [normalised(y) for _, y, _ in self.measurements]
        self.measurements += self.before_rounds
        self.fitter = pgm.ModelFitter(
            prob.domain,
            iters=opts.pgm_iters,
            tol=opts.pgm_tol or None,
            known_total=self.totals.population,
        )
        model = self.fitter.fit(self.measurements)
        self.progress.update(acc.rho_spent / acc.rho_budget, f"measured {len(prob.names)} one-way marginals")
        self.oracle_probs = oracle_pooled_marginals(self.agg, acc, prob) if self.variant == "oracle" else None
        if self.anneals:
            model = self.annealed_rounds(model)
        else:
            for t in range(1, self.rounds + 1):
                model = self.global_round(t, model)
        self.progress.log(f"{self.rounds} rounds, {len(self.measurements)} measurements")
        model, _, fit = core.final_fit(
            self.fitter, self.measurements, prob.names, opts.final_iters, self.progress, prob.zeros, opts.max_model_size
        )
        info = {
            "variant": self.variant,
            "sample_rate": self.rate,
            "sigma": self.sigma,
            "epsilon_select": self.eps,
            "score_sensitivity": self.delta_u,
            "dropped_for_size": self.dropped,
            "oneway_sigmas": core.oneway_sigmas(self.measurements, prob.names, prob.shape),
            "fit": fit,
            "traffic": self.agg.traffic_summary(),
        }
        return core.MethodResult(core.graphical_sampler(model, self.schema), model, self.rounds, prob.workload, info)

    def annealed_rounds(self, model):
        """Step 5's rounds; ``self.rounds`` then counts those run."""
        params, alpha, t, terminate = core.RoundParams(self.sigma, self.eps), self.opts.alpha, 0, self.rounds == 0
        while not terminate:
            t += 1
            last = core.final_round(params, self.acc.remaining, alpha)
            if last is not None:
                params, terminate = last, True
            self.sigma, self.eps = params.sigma, params.epsilon
            model = self.global_round(t, model)
            if not terminate and self.settled:
                params = params.annealed()
        self.rounds = t
        return model

    def global_round(self, t: int, model):
        """Global round ``t``: sample, select locally, aggregate with noise, refit."""
        from . import pgm

        prob, opts, acc, s, d = self.prob, self.opts, self.acc, self.opts.local_steps, len(self.prob.names)
        proxy_round = self.proxy_rounds and t < self.rounds
        round_rho = s * self.eps**2 / 8 + ((2 * s - 1) + (d if proxy_round else 0)) / (2 * self.sigma**2)
        limit = fit_limit(acc.rho_budget, acc.rho_spent + round_rho, opts.max_model_size)
        cands = core.filter_candidates(prob.candidates, pgm.model_cliques(model), prob.domain, limit)
        if self.variant == "private":  # "filter": no 1-way candidates
            cands = {q: w for q, w in cands.items() if len(q) > 1} or cands
        sampled = self.sampler.draw()
        payload = model_payload(model)
        if self.variant == "private":
            payload.update({f"proxy:{prob.names[i]}": self.proxy[i] for i in range(d)})
        self.agg.broadcast(payload, sampled, round_index=t)
        reader = pgm.MarginalReader(model)
        picks = self.select_locally(t, sampled, cands, {q: normalised(reader(q)) for q in cands})

        new: list[Measurement] = []
        per_silo = None
        if proxy_round:  # "combine" and the proxy update
            oneways = measure_sums(
                self.agg,
                self.acc,
                self.noise,
                [((name,), sampled) for name in prob.names],
                prob,
                self.sigma,
                t,
                f"round {t}: every column's 1-way marginal over the sampled silos (proxy)",
                sensitivity_l2=math.sqrt(d),
            )  # one record is in each of the d sums
            per_silo = rows_per_silo(oneways, prob.shape, len(sampled))
            for i, y in enumerate(oneways):
                new.append(
                    rescale(
                        (prob.names[i],), y, self.sigma, per_silo * len(sampled), self.totals.population, self.weighted
                    )
                )
                self.proxy[i] = (normalised(y) + self.proxy_updates * self.proxy[i]) / (self.proxy_updates + 1)
            self.proxy_updates += 1
        kept, dropped = keep_within_size(_by_popularity(picks), pgm.model_cliques(model), prob.domain, limit)
        self.dropped += len(dropped)
        if self.pooled_sums:  # every silo that made a choice is in every sum
            answered = [k for k in sampled if picks[k]]
            contributors = {q: answered for q in kept}
            sensitivity, sigma = pooled_sums_noise(len(kept), s, self.sigma)
        else:
            contributors = {q: [k for k in sampled if q in picks[k]] for q in kept}
            sensitivity, sigma = math.sqrt(s), self.sigma
        sums = measure_sums(
            self.agg,
            self.acc,
            self.noise,
            [(q, contributors[q]) for q in kept],
            prob,
            sigma,
            t,
            f"round {t}: sums of the chosen marginals " + "; ".join("(" + ", ".join(q) + ")" for q in kept),
            sensitivity_l2=sensitivity,
        )
        for q, y in zip(kept, sums):
            n_hat = self.totals.estimate(float(y.sum()), y.size, sigma, len(contributors[q]), per_silo)
            new.append(rescale(q, y, sigma, n_hat, self.totals.population, self.weighted))
        self.measurements += new
        model = self.fitter.fit(self.measurements)
        if self.anneals:
            after = pgm.MarginalReader(model)
            rescaled = new[len(new) - len(kept) :]
            self.settled = core.sums_should_anneal([(reader(q), after(q), m[2]) for q, m in zip(kept, rescaled)])
        self.progress.update(
            acc.rho_spent / acc.rho_budget,
            f"round {t}{'' if self.anneals else f'/{self.rounds}'}: {len(sampled)} silos chose {len(kept)} marginal(s)",
        )
        return model

    def select_locally(self, t: int, sampled: list[str], cands: dict, probs: dict) -> dict[str, list[tuple[str, ...]]]:
        """Each sampled silo's ``s`` selections (never the same marginal twice); for ``s > 1`` each
        non-final step's choice is measured locally and refines that silo's copy of the model."""
        s = self.opts.local_steps
        picks: dict[str, list[tuple[str, ...]]] = {k: [] for k in sampled}
        local_probs = {k: probs for k in sampled}
        for step in range(1, s + 1):
            options = {k: [q for q in cands if q not in picks[k]] for k in sampled}
            queries = {k: self.scores_query(options[k], cands, local_probs[k]) for k in sampled}
            if step == 1:  # every silo has the same options and model: one query for all
                queries = dict.fromkeys(sampled, queries[sampled[0]])
            choice = local_exponential_mechanism(
                self.agg,
                self.acc,
                self.noise,
                queries,
                epsilon=self.eps,
                sensitivity=self.delta_u,
                round_index=t,
                local_step=step,
                query=f"round {t}, local step {step}: each sampled silo selects among {len(cands)} candidates",
            )
            for k in sampled:  # a site absent when asked (sites and servers) chose nothing
                if k in choice:
                    picks[k].append(options[k][choice[k]])
            if step < s:
                local_probs = self.refine_local_models(t, step, sampled, picks, cands)
        return picks

    def scores_query(self, options: list[tuple[str, ...]], cands: dict, probs: dict) -> "LocalScoresQuery":
        """The declared query by which a silo scores ``options``: their columns, weights and model
        marginals, ``sigma``, and the proxy (private) or the true pooled marginals (oracle)."""
        return LocalScoresQuery(
            tuple(tuple(self.prob.columns(q)) for q in options),
            tuple(float(cands[q]) for q in options),
            tuple(np.ravel(probs[q]) for q in options),
            self.sigma,
            tuple(self.proxy) if self.variant == "private" else None,
            None if self.oracle_probs is None else tuple(self.oracle_probs[q] for q in options),
        )

    def refine_local_models(self, t: int, step: int, sampled: list[str], picks: dict, cands: dict) -> dict:
        """Each silo measures its latest choice with ``N(0, sigma^2)`` (a release, charged once by
        parallel composition) and refits its own copy of the model with it."""
        from . import pgm

        local = local_gaussian_mechanism(
            self.agg,
            self.acc,
            self.noise,
            {k: MarginalsQuery((tuple(self.prob.columns(picks[k][-1])),)) for k in sampled},
            sigma=self.sigma,
            round_index=t,
            local_step=step,
            query=f"round {t}, local step {step}: each silo measures its choice for its own model copy",
        )
        out = {}
        for k in sampled:
            q, y = picks[k][-1], local[k]
            n_hat = self.totals.estimate(float(y.sum()), y.size, self.sigma, 1)
            fitter = pgm.ModelFitter(
                self.prob.domain,
                iters=self.opts.pgm_iters,
                tol=self.opts.pgm_tol or None,
                known_total=self.totals.population,
            )
            fitter.model, fitter.growth = self.fitter.model, self.fitter.growth
            reader = pgm.MarginalReader(
                fitter.fit(self.measurements + [rescale(q, y, self.sigma, n_hat, self.totals.population)])
            )
            out[k] = {c: normalised(reader(c)) for c in cands}
        return out


def _by_popularity(picks: dict[str, list[tuple[str, ...]]]) -> list[tuple[str, ...]]:
    """Distinct chosen marginals, most often chosen first (ties in sorted order)."""
    counts: dict[tuple[str, ...], int] = {}
    for qs in picks.values():
        for q in qs:
            counts[q] = counts.get(q, 0) + 1
    return sorted(counts, key=lambda q: (-counts[q], q))


#: FLAIM in the registry.
FLAIM = FederatedMethod(
    "flaim",
    FLAIMOptions,
    min_silos=2,
    graphical=True,
    runner=run_flaim,
    threat=threat_model,
    selection=selection_sensitivity,
    details=workload_details,
)
