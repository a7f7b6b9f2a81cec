"""FLAIM (Maddock, Cormode, Maple, KDD 2024): AIM where each sampled silo selects locally.

With budget ``rho``, ``T`` global rounds, ``s`` local steps, ``d`` columns and ``alpha``:
  * ``sigma = sqrt(G / (2 alpha rho))`` with ``G = T (2s - 1) + d`` Gaussian releases (naive,
    oracle) or ``G = T (2s - 1 + d)`` (private: the proxy's 1-ways in rounds 1..T-1 as well);
    ``eps = sqrt(8 (1 - alpha) rho / (T s))``. ``s > 1`` costs ``2s - 1`` Gaussians a round: the
    ``s - 1`` local measurements that steer later local selections are releases too.
  1. every column's 1-way marginal over a fresh client sample is measured; a model is fitted;
  2. each round ``t``: silos are Poisson-sampled at rate ``p``; each sampled silo ``k`` runs the
     exponential mechanism on its own rows with the score
        ``u_k(q) = w_q (||M_q(D_k) - n_k p_q||_1 - sqrt(2/pi) sigma n_q - n_k tau_k(q))``
     (``p_q`` the model's normalised marginal). Adding a record moves the first term by at most
     2 (the cell, and ``n_k``), so the sensitivity is ``2 max w`` (naive); the heterogeneity term
     ``n_k tau_k(q) = (1/|q|) sum_{i in q} ||M_i(D_k) - n_k s_i||_1`` (``s_i`` the server's noisy
     proxy of column ``i``) moves by at most 2 more: ``4 max w`` (private);
  3. the aggregator sums, for each chosen marginal, the counts of the silos that chose it; each
     record is in at most ``s`` of those sums, so their concatenation has L2 sensitivity
     ``sqrt(s)`` and gets ``N(0, sigma^2)`` per cell;
  4. private: sampled silos also send every 1-way (rounds 1..T-1); their noisy sums are added to
     the model ("combine") and update the proxy as a running mean; 1-way candidates are dropped
     ("filter"); every measurement is weighted by its noisy row count (``sigma N_hat / n_hat``).

Variants: ``naive`` (no heterogeneity term, unweighted measurements), ``private`` (AugFLAIM
(Private): all of the above), and ``oracle``, a research baseline with naive's budget split and
weighted measurements whose heterogeneity term uses the **true** pooled marginals,
``n_k tau_k(q) = ||M_q(D_k) - n_k M_q(D)/N||_1``: it is not differentially private, and says so
in its ledger (``non_private``), which makes ``audit`` fail.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import pgm
from ..accounting import Accountant
from ..aggregate import Aggregator
from ..errors import InputError
from ..mechanisms import (NoiseSource, gaussian_mechanism, parallel_exponential_mechanism,
                          parallel_gaussian_mechanism)
from ..progress import Progress, Silent
from . import core
from .aim import problem_for
from .federated import (ClientSampler, Measurement, FederatedOptions, TotalEstimator, default_sample_rate, fit_limit,
                        keep_within_size, measure_initial_oneways, model_payload, normalised, rescale)

VARIANTS = ("naive", "private", "oracle")
ORACLE_WARNING = ("ORACLE VARIANT: the silos' heterogeneity term uses the true pooled marginals, "
                  "which are not protected; this release has NO differential-privacy guarantee "
                  "(a research baseline only)")


@dataclass
class FLAIMOptions(FederatedOptions):
    variant: str = "private"
    local_steps: int = 1               # s

    def validate(self) -> None:
        super().validate()
        if self.variant not in VARIANTS:
            raise InputError(f"--variant must be one of {', '.join(VARIANTS)}, not {self.variant!r}")
        if self.local_steps < 1:
            raise InputError(f"--local-steps must be a positive integer, not {self.local_steps}")


def threat_model(agg: Aggregator) -> str:
    return ("flaim: each sampled silo selects marginals on its own rows (exponential mechanism, run "
            f"locally) and sends the chosen marginals' counts; {agg.threat_model}. Which marginal each "
            "silo chose is visible to the aggregator (it is a DP output).")


def flaim_params(rho: float, rounds: int, local_steps: int, n_columns: int, alpha: float,
                 variant: str) -> tuple[float, float, int]:
    """``(sigma, eps, G)``: ``G`` Gaussians of sensitivity 1 and ``T s`` exponential
    mechanisms (parallel over silos) spend exactly ``rho``."""
    T, s, d = rounds, local_steps, n_columns
    gaussians = T * (2 * s - 1) + (T * d if variant == "private" else d)
    return (math.sqrt(gaussians / (2.0 * alpha * rho)), math.sqrt(8.0 * (1.0 - alpha) * rho / (T * s)),
            gaussians)


def score_sensitivity(max_weight: float, variant: str) -> float:
    """``2 max w`` without the heterogeneity term, ``4 max w`` with it."""
    return (2.0 if variant == "naive" else 4.0) * max_weight


def heterogeneity_gap(local_oneways: Sequence[np.ndarray], proxy: Sequence[np.ndarray],
                      columns: Sequence[int]) -> float:
    """``n_k tau_k(q) = (1/|q|) sum_{i in q} ||M_i(D_k) - n_k s_i||_1`` (count scale); moves by at
    most 2 when a record is added to silo ``k``."""
    gaps = []
    for i in columns:
        m = np.asarray(local_oneways[i], dtype=float)
        gaps.append(float(np.abs(m - m.sum() * proxy[i]).sum()))
    return float(np.mean(gaps))


def local_score(weight: float, local_counts: np.ndarray, model_probs: np.ndarray, sigma: float,
                gap: float = 0.0) -> float:
    """``u_k(q) = w_q (||M_q(D_k) - n_k p_q||_1 - sqrt(2/pi) sigma n_q - gap)``."""
    n_k = float(np.sum(local_counts))
    return core.aim_score(weight, local_counts, n_k * np.asarray(model_probs), sigma) - weight * gap


def run_flaim(agg: Aggregator, acc: Accountant, noise: NoiseSource, opts: FLAIMOptions, rows: int | None,
              sampling_seed: int | None, sample_seed: int | None,
              progress: Progress | None = None) -> core.MethodResult:
    progress = progress or Silent()
    variant, weighted = opts.variant, opts.variant != "naive"
    silos = agg.silo_names
    prob = problem_for(agg.local(silos[0]).schema, opts)
    names, shape, domain = prob.names, prob.shape, prob.domain
    d, T, s = len(names), opts.rounds, opts.local_steps
    rho = acc.rho_budget
    sigma, eps, _ = flaim_params(rho, T, s, d, opts.alpha, variant)
    delta_u = score_sensitivity(max(prob.candidates.values()), variant)
    rate = opts.sample_rate or default_sample_rate(len(silos))
    sampler = ClientSampler(silos, rate, np.random.default_rng(sampling_seed))
    totals = TotalEstimator(len(silos))
    if variant == "oracle":
        acc.mark_non_private(ORACLE_WARNING)
        progress.log(ORACLE_WARNING)

    measurements = measure_initial_oneways(agg, acc, noise, sampler, names, shape, sigma, totals, weighted)
    proxy = [normalised(y) for _, y, _ in measurements]
    proxy_updates = 0
    fitter = pgm.ModelFitter(domain, iters=opts.pgm_iters, tol=opts.pgm_tol or None,
                             known_total=totals.population)
    model = fitter.fit(measurements)
    progress.update(acc.rho_spent / rho, f"measured {d} one-way marginals over sampled silos")
    oracle_probs = _pooled_probs(agg, prob) if variant == "oracle" else None

    dropped_total = 0
    for t in range(1, T + 1):
        proxy_round = variant == "private" and t < T
        round_rho = s * eps ** 2 / 8 + ((2 * s - 1) + (d if proxy_round else 0)) / (2 * sigma ** 2)
        limit = fit_limit(rho, acc.rho_spent + round_rho, opts.max_model_size)
        cands = core.filter_candidates(prob.candidates, pgm.model_cliques(model), domain, limit)
        if variant == "private":
            cands = {q: w for q, w in cands.items() if len(q) > 1} or cands
        keys = list(cands)
        sampled = sampler.draw()
        payload = model_payload(model)
        if variant == "private":
            payload.update({f"proxy:{names[i]}": proxy[i] for i in range(d)})
        agg.broadcast(payload, sampled, round=t)

        reader = pgm.MarginalReader(model)
        probs = {q: normalised(reader(q)) for q in keys}
        picks = _local_selections(agg, acc, noise, fitter, measurements, prob, sampled, keys, cands, probs,
                                  proxy if variant == "private" else None, oracle_probs, sigma, eps,
                                  delta_u, totals, opts, t)

        per_silo = None
        new: list[Measurement] = []
        if proxy_round:
            oneways = _measure_round_oneways(agg, acc, noise, prob, sampled, sigma, t)
            per_silo = _round_rows_per_silo(oneways, shape, sigma, len(sampled))
            n_hat = per_silo * len(sampled)
            for i, y in enumerate(oneways):
                new.append(rescale((names[i],), y, sigma, n_hat, totals.population, weighted))
                proxy[i] = (normalised(y) + proxy_updates * proxy[i]) / (proxy_updates + 1)
            proxy_updates += 1
        chosen = _by_popularity(picks)
        kept, dropped = keep_within_size(chosen, pgm.model_cliques(model), domain, limit)
        dropped_total += len(dropped)
        contributors = {q: [k for k in sampled if q in picks[k]] for q in kept}
        sums = [agg.sum(lambda silo, q=q: silo.marginal(prob.columns(q)), contributors[q], round=t,
                        label=f"marginal({', '.join(q)})") for q in kept]
        noisy = gaussian_mechanism(acc, noise, np.concatenate(sums), sigma=sigma, sensitivity_l2=math.sqrt(s),
                                   query=f"round {t}: sums of the chosen marginals "
                                         + "; ".join("(" + ", ".join(q) + ")" for q in kept),
                                   where=agg.where, round=t, silos=len(sampled))
        for q, y in zip(kept, np.split(noisy, np.cumsum([x.size for x in sums])[:-1])):
            n_hat = totals.estimate(float(y.sum()), y.size, sigma, len(contributors[q]), per_silo)
            new.append(rescale(q, y, sigma, n_hat, totals.population, weighted))
        measurements += new
        model = fitter.fit(measurements)
        progress.update(acc.rho_spent / rho, f"round {t}/{T}: {len(sampled)} silos chose {len(kept)} marginal(s)")

    codes = core.sample_from(model, names, rows, sample_seed)
    progress.log(f"{T} rounds, {len(measurements)} measurements; sampled {len(codes)} rows")
    info = {"variant": variant, "sample_rate": rate, "sigma": sigma, "epsilon_select": eps,
            "score_sensitivity": delta_u, "dropped_for_size": dropped_total,
            "traffic": agg.traffic.summary(silos) if hasattr(agg, "traffic") else None}
    return core.MethodResult(codes, model, T, prob.workload, info)


def _local_selections(agg, acc, noise, fitter, measurements, prob, sampled, keys, cands, probs, proxy,
                      oracle_probs, sigma, eps, delta_u, totals, opts, t) -> dict[str, list[tuple[str, ...]]]:
    """Each sampled silo's ``s`` local selections (never the same marginal twice); for ``s > 1``
    each non-final step's choice is measured locally and refines that silo's copy of the model."""
    s = opts.local_steps
    picks = {k: [] for k in sampled}
    local_probs = {k: probs for k in sampled}
    for step in range(1, s + 1):
        scores, options = {}, {}
        for k in sampled:
            silo = agg.local(k)
            oneways = [silo.marginal([i]) for i in range(len(prob.names))] if proxy is not None else None
            options[k] = [q for q in keys if q not in picks[k]]
            row = []
            for q in options[k]:
                counts = silo.marginal(prob.columns(q))
                if proxy is not None:
                    gap = heterogeneity_gap(oneways, proxy, prob.columns(q))
                elif oracle_probs is not None:
                    gap = float(np.abs(counts - counts.sum() * oracle_probs[q]).sum())
                else:
                    gap = 0.0
                row.append(local_score(cands[q], counts, local_probs[k][q], sigma, gap))
            scores[k] = np.array(row)
        choice = parallel_exponential_mechanism(
            acc, noise, scores, epsilon=eps, sensitivity=delta_u, where="silo", round=t, local_step=step,
            query=f"round {t}, local step {step}: each sampled silo selects among {len(keys)} candidates")
        for k in sampled:
            picks[k].append(options[k][choice[k]])
        if step < s:
            local = parallel_gaussian_mechanism(
                acc, noise, {k: agg.local(k).marginal(prob.columns(picks[k][-1])) for k in sampled},
                sigma=sigma, where="silo", round=t, local_step=step,
                query=f"round {t}, local step {step}: each silo measures its choice for its own model copy")
            for k in sampled:
                q, y = picks[k][-1], local[k]
                n_hat = totals.estimate(float(y.sum()), y.size, sigma, 1)
                local_fit = pgm.ModelFitter(prob.domain, iters=opts.pgm_iters, tol=opts.pgm_tol or None,
                                            known_total=totals.population)
                local_fit.model = fitter.model
                reader = pgm.MarginalReader(local_fit.fit(
                    list(measurements) + [rescale(q, y, sigma, n_hat, totals.population)]))
                local_probs[k] = {c: normalised(reader(c)) for c in keys}
    return picks


def _measure_round_oneways(agg, acc, noise, prob, sampled, sigma, t) -> list[np.ndarray]:
    """Every column's 1-way summed over the round's silos; one record is in each of the ``d``
    sums once, so the concatenation has L2 sensitivity ``sqrt(d)``."""
    d = len(prob.names)
    sums = [agg.sum(lambda silo, i=i: silo.marginal([i]), sampled, round=t, label=f"marginal({prob.names[i]})")
            for i in range(d)]
    noisy = gaussian_mechanism(acc, noise, np.concatenate(sums), sigma=sigma, sensitivity_l2=math.sqrt(d),
                               query=f"round {t}: every column's 1-way marginal over the sampled silos (proxy)",
                               where=agg.where, round=t, silos=len(sampled))
    return np.split(noisy, np.cumsum([x.size for x in sums])[:-1])


def _round_rows_per_silo(oneways: Sequence[np.ndarray], shape: Sequence[int], sigma: float, m: int) -> float:
    """Rows per sampled silo from the round's noisy 1-ways (inverse-variance mean of their sums)."""
    totals = np.array([float(y.sum()) for y in oneways])
    w = 1.0 / np.asarray(shape, dtype=float)
    return max(1.0, float((totals * w).sum() / w.sum()) / m)


def _by_popularity(picks: dict[str, list[tuple[str, ...]]]) -> list[tuple[str, ...]]:
    """Distinct chosen marginals, most often chosen first (ties in sorted order)."""
    counts: dict[tuple[str, ...], int] = {}
    for qs in picks.values():
        for q in qs:
            counts[q] = counts.get(q, 0) + 1
    return sorted(counts, key=lambda q: (-counts[q], q))


def _pooled_probs(agg: Aggregator, prob: core.Problem) -> dict[tuple[str, ...], np.ndarray]:
    """ORACLE ONLY: the true pooled marginals ``M_q(D)/N`` (not private)."""
    out = {}
    for q in prob.candidates:
        total = sum(agg.local(k).marginal(prob.columns(q)) for k in agg.silo_names)
        out[q] = total / max(1, total.sum())
    return out
