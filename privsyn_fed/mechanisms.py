"""The mechanism layer: the one place where privacy costs are charged.

Every function here charges the accountant first (which refuses a charge beyond the budget and
writes the ledger before anything is released), then asks a noise backend for the noisy result:
``noise.NoiseSource`` for values in the clear (central AIM), the aggregator for sums over silos and
for what each silo computes on its own rows, a pool's storage for DistAIM's pooled answers. The
backend reports what the ledger must record about it (sampler, where the noise comes from,
fixed-point rounding); a backend that rounds (secret shares) grows the noise so that the charged
cost is the planned one.

Gaussian mechanism: ``values + N(0, sigma^2 I)`` with L2 sensitivity ``D`` costs ``D^2 / (2 sigma^2)``.
Exponential mechanism: with utility ``u`` of sensitivity ``D``, sampling ``P[r] ~ exp(eps u_r / (2 D))``
is the Gumbel-max of ``u_r + Gumbel(2 D / eps)``; it is ``eps``-DP and ``eps^2/8``-zCDP.
Parallel composition: a mechanism each silo runs on its own (disjoint) rows costs what one costs.
Noise the parties draw themselves and sum (a backend's ``parties_noise``, under MPC) is costed by
``accounting.distributed``: each party's Gaussian sigma is chosen so that the sum over the parties
outside any tolerated coalition costs the planned rho; a selection costs what one exponential
mechanism costs.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence, TypeVar

import numpy as np

from .accounting import Accountant, PartiesNoise, gaussian_entry
from .aggregation import Aggregator, Clique, Pool
from .noise import NoiseSource, add_gaussian
from .silo import Query

#: What the silos' own thresholded lists come back as (``local_thresholded_values``).
Listed = TypeVar("Listed")
#: ``(ledger label, query, silos)``: one sum over the silos that answer it.
SumRequest = tuple[str, Query, Sequence[str]]


def _round(round_index: int | None) -> dict[str, int]:
    return {} if round_index is None else {"round": int(round_index)}


def _gaussian_entry(
    parties: PartiesNoise | None,
    query: str,
    sensitivity_l2: float,
    sigma: float,
    where: str,
    cells: int,
    grid: float = 1.0,
    **fields: Any,
) -> tuple[dict[str, Any], float]:
    """The ledger entry of a Gaussian release planned at ``sigma``, and the sigma the backend draws
    with: ``sigma`` itself, or each party's (``parties.party_sigma``, on the backend's ``grid``)
    when the parties draw and sum it."""
    if parties is None:
        return gaussian_entry(query, sensitivity_l2, sigma, where, cells=cells, **fields), sigma
    each = parties.party_sigma(sensitivity_l2, sigma, cells, grid)
    return gaussian_entry(query, sensitivity_l2, each, where, cells=cells, **fields, **parties.fields(grid)), each


def _finite_scores(scores: np.ndarray, who: str = "") -> np.ndarray:
    scores = np.asarray(scores, dtype=float)
    if scores.size == 0 or not np.all(np.isfinite(scores)):
        raise ValueError(f"{who}exponential mechanism needs a non-empty vector of finite scores")
    return scores


# ---- values in the clear (the trusted curator) ------------------------------------------------


def gaussian_mechanism(
    acc: Accountant,
    noise: NoiseSource,
    values: np.ndarray,
    *,
    sigma: float,
    query: str,
    where: str,
    sensitivity_l2: float = 1.0,
    round_index: int | None = None,
    **extra: Any,
) -> np.ndarray:
    """Release ``values + N(0, sigma^2 I)``; integer input gets the discrete Gaussian.

    Charges ``sensitivity_l2^2 / (2 sigma^2)`` first; the caller states the sensitivity.
    """
    fields = {"sensitivity_l2": sensitivity_l2, **_round(round_index), **extra}
    return gaussian_mechanisms(acc, noise, [(query, values)], sigma=sigma, where=where, **fields)[0]


def gaussian_mechanisms(
    acc: Accountant,
    noise: NoiseSource,
    releases: Sequence[tuple[str, np.ndarray]],
    *,
    sigma: float,
    where: str,
    sensitivity_l2: float = 1.0,
    **extra: Any,
) -> list[np.ndarray]:
    """``gaussian_mechanism`` of each ``(query, values)``, charged together first
    (``Accountant.charge_all``: one durable write, or none charged)."""
    arrays = [np.asarray(values) for _, values in releases]
    fields = [{"sampler": noise.name, "cells": int(values.size), **extra} for values in arrays]
    acc.charge_all([gaussian_entry(q, sensitivity_l2, sigma, where, **f) for (q, _), f in zip(releases, fields)])
    return [add_gaussian(noise, values, sigma) for values in arrays]


def threshold_delta(sigma: float, threshold: float) -> float:
    """``erfc((tau - 2) / (sigma sqrt 2)) / 2``: a bound on ``P(1 + Z >= tau)``, ``Z ~ N_Z(0, sigma^2)``,
    the probability that a value held by one record passes the threshold ``tau`` (>= 2)."""
    return 0.5 * math.erfc((threshold - 2.0) / (sigma * math.sqrt(2.0)))


def _charge_thresholded(
    acc: Accountant, query: str, sigma: float, threshold: float, where: str, **fields: Any
) -> dict[str, Any]:
    """Charge a Gaussian histogram of sensitivity 1 whose values are listed when their noisy count
    reaches ``threshold`` (at least 1): ``1 / (2 sigma^2)`` and ``delta' = threshold_delta(sigma,
    threshold)``."""
    if not threshold >= 1:
        raise ValueError(f"a threshold below 1 lets absent values pass, not {threshold!r}")
    return acc.gaussian(
        query, 1.0, sigma, where, threshold=float(threshold), delta=threshold_delta(sigma, threshold), **fields
    )


def thresholded_counts(
    acc: Accountant,
    noise: NoiseSource,
    counts: np.ndarray,
    *,
    sigma: float,
    threshold: float,
    query: str,
    where: str,
    **extra: Any,
) -> np.ndarray:
    """``count + N_Z(0, sigma^2)`` of the values whose noisy count reaches ``threshold`` (>= 2), and 0
    for the others: a histogram over values the rows themselves name, so a value held by one record
    may appear at all.

    Charges ``1 / (2 sigma^2)`` (one record adds one to one value's count) and ``delta' =
    threshold_delta(sigma, threshold)`` first. Conditioned on a value held by one record not passing
    (probability ``1 - delta'``), the noisy counts of the values present on both neighbours are a
    Gaussian mechanism and the rest is post-processing, so the passing counts may be released too.
    The number of values is private and not recorded.
    """
    _charge_thresholded(acc, query, sigma, threshold, where, sampler=noise.name, **extra)
    counts = np.asarray(counts, dtype=np.int64)
    noisy = np.asarray(noise.gaussian_counts(counts, sigma) if len(counts) else counts, dtype=np.int64)
    return np.where(noisy >= threshold, noisy, 0)


def exponential_mechanism(
    acc: Accountant,
    noise: NoiseSource,
    scores: np.ndarray,
    *,
    epsilon: float,
    sensitivity: float,
    query: str,
    where: str,
    round_index: int | None = None,
    **extra: Any,
) -> int:
    """Index ``r`` drawn with probability proportional to ``exp(epsilon * scores[r] / (2 sensitivity))``.

    Charges ``epsilon^2 / 8`` first.
    """
    scores = _finite_scores(scores)
    acc.exponential(
        query,
        sensitivity,
        epsilon,
        where,
        sampler=noise.name,
        candidates=int(scores.size),
        **_round(round_index),
        **extra,
    )
    return noise.noisy_argmax(scores, 2.0 * sensitivity / epsilon)


# ---- sums over silos ------------------------------------------------------------------------


def noisy_sums(
    agg: Aggregator,
    acc: Accountant,
    noise: NoiseSource,
    requests: Sequence[SumRequest],
    sigma: float,
    sensitivity_l2: float,
    query: str,
    round_index: int,
) -> list[np.ndarray]:
    """For each ``(label, query, silos)``, ``sum_{k in silos} query(silo_k)``; all released
    together as one Gaussian mechanism: ``N(0, sigma^2)`` per cell, with the caller's L2
    sensitivity of the concatenation (``sqrt(number of sums one record can be in)`` for counts).

    The aggregator adds the noise (on secret shares under MPC, where requests over different silos
    travel as one masked batch). Its rounding of real answers adds ``agg.rounding_l2`` to the
    sensitivity, and sigma grows in proportion, so the cost stays ``sensitivity_l2^2 / (2 sigma^2)``.
    """
    return _sums(agg, acc, noise, [(requests, sensitivity_l2, query)], sigma, round_index)[0]


def noisy_sum_each(
    agg: Aggregator,
    acc: Accountant,
    noise: NoiseSource,
    requests: Sequence[SumRequest],
    *,
    sigma: float,
    round_index: int,
) -> list[np.ndarray]:
    """``noisy_sum`` of each ``(label, query, silos)`` (its own Gaussian mechanism, L2 sensitivity 1),
    all charged together first (``Accountant.charge_all``: one durable write, or none charged)."""
    groups = [([request], 1.0, request[0]) for request in requests]
    return [parts[0] for parts in _sums(agg, acc, noise, groups, sigma, round_index)]


def _sums(agg: Aggregator, acc: Accountant, noise: NoiseSource, groups, sigma: float, round_index: int) -> list:
    """``noisy_sums`` of each ``(requests, sensitivity_l2, query)`` in ``groups``, charged together."""
    entries, plans = [], []
    for requests, sensitivity_l2, query in groups:
        silos = len({k for _, _, among in requests for k in among})
        request, among = agg.batch([(q, among) for _, q, among in requests])
        slack = agg.rounding_l2(request)
        grown = sigma * (sensitivity_l2 + slack) / sensitivity_l2
        fixed_point = {"fixed_point": {"sensitivity_planned": sensitivity_l2, "rounding_l2": slack}} if slack else {}
        entry, drawn = _gaussian_entry(
            agg.parties_noise,
            query,
            sensitivity_l2 + slack,
            grown,
            agg.where,
            request.size(agg.schema),
            agg.noise_grid(request),
            round=round_index,
            silos=silos,
            **agg.noise_fields(noise),
            **fixed_point,
        )
        entries.append(entry)
        plans.append((request, among, drawn))
    acc.charge_all(entries)
    out = []
    for (requests, _, query), (request, among, drawn) in zip(groups, plans):
        noisy = agg.noisy_sum(request, among, sigma=drawn, noise=noise, round_index=round_index, label=query)
        out.append(np.split(noisy, np.cumsum([q.size(agg.schema) for _, q, _ in requests])[:-1]))
    return out


def noisy_sum(
    agg: Aggregator,
    acc: Accountant,
    noise: NoiseSource,
    request: Query,
    among: Sequence[str],
    *,
    sigma: float,
    query: str,
    round_index: int,
) -> np.ndarray:
    """``sum_{k in among} request(silo_k) + N(0, sigma^2)`` with L2 sensitivity 1 (``noisy_sums``)."""
    return noisy_sum_each(agg, acc, noise, [(query, request, among)], sigma=sigma, round_index=round_index)[0]


def exact_sums_in_a_non_private_run(
    acc: Accountant, agg: Aggregator, requests: Sequence[SumRequest]
) -> list[np.ndarray]:
    """The exact sums, for a run whose ledger already declares it non-private (a test mode or a
    research oracle); refused otherwise. Nothing is charged: such a release has no guarantee."""
    if acc.non_private is None:
        raise PermissionError("exact sums are only for runs whose ledger is marked non-private")
    return [agg.open_exact_sum_for_checks(q, among, label=label) for label, q, among in requests]


# ---- each silo on its own rows (parallel composition) ----------------------------------------


def local_exponential_mechanism(
    agg: Aggregator,
    acc: Accountant,
    noise: NoiseSource,
    scores: Mapping[str, Query],
    *,
    epsilon: float,
    sensitivity: float,
    query: str,
    round_index: int,
    **extra: Any,
) -> dict[str, int]:
    """Each silo ``k`` runs the exponential mechanism on its own scores ``scores[k]`` (a query it
    answers on its own rows). The silos hold disjoint records, so by parallel composition the
    whole set costs what one costs: ``epsilon^2 / 8``, charged once with ``parallel_over: silos``."""
    acc.exponential(
        query,
        sensitivity,
        epsilon,
        "silo",
        parallel_over="silos",
        silos=sorted(scores),
        round=round_index,
        **agg.noise_fields(noise, local=True),
        **extra,
    )
    return agg.local_select(scores, scale=2.0 * sensitivity / epsilon, noise=noise, round_index=round_index)


def local_gaussian_mechanism(
    agg: Aggregator,
    acc: Accountant,
    noise: NoiseSource,
    answers: Mapping[str, Query],
    *,
    sigma: float,
    query: str,
    round_index: int,
    sensitivity_l2: float = 1.0,
    **extra: Any,
) -> dict[str, np.ndarray]:
    """``answers[k](silo_k) + N(0, sigma^2 I)`` for each silo ``k`` on its own rows; charged once
    (``sensitivity_l2^2 / (2 sigma^2)``, parallel composition over disjoint silos)."""
    acc.gaussian(
        query,
        sensitivity_l2,
        sigma,
        "silo",
        parallel_over="silos",
        silos=sorted(answers),
        round=round_index,
        **agg.noise_fields(noise, local=True),
        **extra,
    )
    return agg.local_noisy_answers(answers, sigma=sigma, noise=noise, round_index=round_index)


def parties_noisy_sum(
    agg: Aggregator,
    acc: Accountant,
    noise: NoiseSource,
    open_sum: Callable[[float], np.ndarray],
    *,
    sigma: float,
    sensitivity_l2: float,
    cells: int,
    query: str,
    **extra: Any,
) -> np.ndarray:
    """A vector that every silo's party computes on its own rows, summed on secret shares with every
    party's own noise and opened to party 0 (``open_sum(each party's sigma)`` runs the exchange): a
    Gaussian mechanism of L2 sensitivity ``sensitivity_l2`` at ``sigma``, charged first (as
    ``noisy_sums``, for vectors that are not declared queries of a schema: a DP schema draft's)."""
    entry, drawn = _gaussian_entry(
        agg.parties_noise,
        query,
        sensitivity_l2,
        sigma,
        agg.where,
        cells,
        silos=len(agg.silo_names),
        **agg.noise_fields(noise),
        **extra,
    )
    acc.charge(entry)
    return open_sum(drawn)


def local_thresholded_values(
    agg: Aggregator,
    acc: Accountant,
    noise: NoiseSource,
    gather: Callable[[], Listed],
    *,
    sigma: float,
    threshold: float,
    query: str,
    **extra: Any,
) -> Listed:
    """Each silo lists the values of its own rows whose count plus ``N_Z(0, sigma^2)`` reaches
    ``threshold`` (``thresholded_counts``, in its own process; ``gather()`` runs it and returns what
    the lists give). The silos hold disjoint records, so the set costs what one list costs:
    ``1 / (2 sigma^2)`` and ``threshold_delta(sigma, threshold)``, charged once with ``parallel_over:
    silos``."""
    _charge_thresholded(
        acc,
        query,
        sigma,
        threshold,
        "silo",
        parallel_over="silos",
        silos=list(agg.silo_names),
        sampler=f"each silo's own: {noise.name}",
        **extra,
    )
    return gather()


# ---- DistAIM's pool ------------------------------------------------------------------------------


def pooled_exponential_mechanism(
    acc: Accountant,
    pool: Pool,
    noise: NoiseSource,
    cands: Mapping[Clique, float],
    model_marginals: Mapping[Clique, np.ndarray],
    *,
    sigma: float,
    epsilon: float,
    sensitivity: float,
    query: str,
    round_index: int,
    draws: int = 1,
) -> list[Clique]:
    """``draws`` independent exponential mechanisms on AIM's scores of the pooled answers
    (``pool.storage`` scores against ``N_t p_r``), each charged ``epsilon^2 / 8``, also where several
    parties each add a Gumbel (``accounting.distributed``). A storage that samples on a fixed-point
    grid samples at a smaller epsilon so that ``epsilon`` covers its rounding, and reports how in the
    ledger fields it returns."""
    if not cands:
        raise ValueError("exponential mechanism needs a non-empty set of candidates")
    parties = pool.storage.parties_noise
    scale, fields = pool.storage.selection(epsilon, sensitivity, noise)
    fields = {**fields, **(parties.fields() if parties else {})}
    for _ in range(draws):
        acc.exponential(query, sensitivity, epsilon, pool.where, round=round_index, candidates=len(cands), **fields)
    keys = list(cands)
    picks = pool.storage.select(pool, cands, model_marginals, sigma=sigma, scale=scale, noise=noise, draws=draws)
    return [keys[i] for i in picks]


def pooled_gaussian_mechanism(
    acc: Accountant, pool: Pool, noise: NoiseSource, q: Clique, *, sigma: float, query: str, round_index: int
) -> np.ndarray:
    """The pooled marginal ``A_q + N(0, sigma^2 I)`` (L2 sensitivity 1)."""
    cells = pool.cells(q)
    entry, drawn = _gaussian_entry(
        pool.storage.parties_noise,
        query,
        1.0,
        sigma,
        pool.where,
        int(cells.size),
        round=round_index,
        silos=len(pool.seen),
        **pool.storage.measurement_fields(noise),
    )
    acc.charge(entry)
    return pool.storage.measure(cells, drawn, noise)


def gaussian_sigma(sensitivity_l2: float, rho: float) -> float:
    """The ``sigma`` at which a Gaussian of this L2 sensitivity costs ``rho``: ``D / sqrt(2 rho)``."""
    return sensitivity_l2 / math.sqrt(2.0 * rho)


# ---- a party's own account of the steps it answers (MPC) ----------------------------------------


def party_gaussian_step(
    acc: Accountant,
    parties: PartiesNoise,
    query: str,
    *,
    sensitivity_l2: float,
    sigma: float,
    cells: int,
    grid: float = 1.0,
    **fields: Any,
) -> dict[str, Any]:
    """Charge a silo party's own accountant for its rows' part in a Gaussian release on secret
    shares: every party adds ``N_Z(0, sigma^2)`` on ``grid`` and the ``parties.honest`` outside any
    tolerated coalition carry the guarantee (``accounting.distributed``), at the L2 sensitivity the
    party derived for one of its own records. The party answers only after this returns:
    ``BudgetExceeded`` (nothing recorded) when the step does not fit its budget, ``ValueError`` when
    ``sigma`` is below the bound's half grid step."""
    return acc.gaussian(query, sensitivity_l2, sigma, "mpc", cells=int(cells), **fields, **parties.fields(grid))


def party_thresholded_step(
    acc: Accountant, query: str, *, sigma: float, threshold: float, **fields: Any
) -> dict[str, Any]:
    """Charge a silo party's own accountant for a thresholded histogram of its rows' values drawn in
    its own process (``thresholded_counts``): ``1 / (2 sigma^2)`` and its ``threshold_delta``."""
    return _charge_thresholded(acc, query, sigma, threshold, "silo", **fields)


def party_exponential_step(
    acc: Accountant, query: str, *, sensitivity: float, epsilon: float, where: str, **fields: Any
) -> dict[str, Any]:
    """Charge a silo party's own accountant for a selection over its rows, ``epsilon^2 / 8``:
    on secret shares (``where`` mpc, ``epsilon`` covering the Gumbels' rounding) or in the party's
    own process (``where`` silo). ``BudgetExceeded`` (nothing recorded) when it does not fit."""
    return acc.exponential(query, sensitivity, epsilon, where, **fields)
