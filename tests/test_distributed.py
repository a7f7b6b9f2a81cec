"""Noise the parties draw themselves: the published bound on sums of discrete Gaussians, the split
of a planned sigma over the honest parties, and selections with several parties' Gumbel noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privsyn_fed.accounting import entry_rho
from privsyn_fed.accounting.distributed import PartiesNoise, distributed_gaussian_rho, kls_tau
from privsyn_fed.audit.arithmetic import _cost
from privsyn_fed.mpc.noise import rounded_gumbel_pmf


def _log_pmf_of_sum(sigma: float, parties: int, half_width: int) -> tuple[np.ndarray, np.ndarray]:
    """Integers ``k`` and ``log P[Z = k]`` for ``Z`` the sum of ``parties`` independent ``N_Z(0, sigma^2)``."""
    k = np.arange(-half_width, half_width + 1)
    one = np.exp(-(k.astype(float) ** 2) / (2 * sigma**2))
    one /= one.sum()
    total = one
    for _ in range(parties - 1):
        total = np.convolve(total, one)[half_width : half_width + len(k)]
    return k, np.log(np.maximum(total, 1e-300))


def _renyi(log_p: np.ndarray, shift: int, alpha: float) -> float:
    """``D_alpha(Z || Z + shift)`` from ``log P[Z = k]`` on a centred grid (terms beyond it are negligible)."""
    lp, lq = log_p[shift:], log_p[:-shift]  # P[Z = k] and P[Z + shift = k] = P[Z = k - shift]
    keep = (lp > -600) & (lq > -600)
    terms = alpha * lp[keep] + (1 - alpha) * lq[keep]
    top = terms.max()
    return float((top + math.log(np.exp(terms - top).sum())) / (alpha - 1))


@pytest.mark.parametrize("sigma", [0.55, 0.8, 1.5, 3.0])
@pytest.mark.parametrize("parties", [2, 3])
def test_the_published_bound_covers_the_exact_renyi_divergence_of_summed_discrete_gaussians(sigma, parties):
    """D_alpha(Z || Z + Delta) computed exactly on the integers, for neighbours one record apart
    (Delta = 1) and two (Delta = 2), never exceeds alpha Delta^2 / (2 k s^2) + tau."""
    k, log_p = _log_pmf_of_sum(sigma, parties, half_width=int(60 * sigma * parties) + 40)
    for shift in (1, 2):
        for alpha in (1.5, 2.0, 4.0, 16.0):
            exact = _renyi(log_p, shift, alpha)
            bound = alpha * shift**2 / (2 * parties * sigma**2) + kls_tau(sigma, parties)
            assert exact <= bound * (1 + 1e-9), (sigma, parties, shift, alpha, exact, bound)


def test_pretending_the_sum_is_one_discrete_gaussian_understates_its_cost():
    """At a small per-party sigma the sum's divergence exceeds alpha Delta^2 / (2 k s^2): the tau
    term is needed (the test above has power)."""
    sigma, parties, alpha = 0.55, 2, 16.0
    _, log_p = _log_pmf_of_sum(sigma, parties, half_width=200)
    assert _renyi(log_p, 1, alpha) > alpha / (2 * parties * sigma**2)
    assert kls_tau(sigma, parties) > 0 and kls_tau(sigma, 1) == 0


@pytest.mark.parametrize("parties, collusion", [(3, 2), (3, 1), (4, 1), (5, 1), (2, 1)])
@pytest.mark.parametrize("sigma", [1.3, 4.0, 250.0])
def test_each_partys_sigma_spends_the_planned_rho_and_no_more(parties, collusion, sigma):
    split = PartiesNoise(parties, collusion)
    cells, sensitivity = 400, 1.0
    each = split.party_sigma(sensitivity, sigma, cells)
    planned = sensitivity**2 / (2 * sigma**2)
    spent = distributed_gaussian_rho(sensitivity, each, split.honest, cells)
    assert spent <= planned * (1 + 1e-12) and spent >= planned * (1 - 1e-9)
    assert each >= sigma / math.sqrt(split.honest) * (1 - 1e-12)
    if split.honest == 1:
        assert each == sigma  # one honest party: its own exact discrete Gaussian
    # the ledger and the audit (two implementations) agree on the recorded entry's cost
    entry = {
        "mechanism": "gaussian",
        "sensitivity_l2": sensitivity,
        "sigma": each,
        "cells": cells,
        "distributed": split.fields()["distributed"],
    }
    assert math.isclose(entry_rho(entry), _cost(entry), rel_tol=1e-12)
    assert math.isclose(split.accuracy_cost(), math.sqrt(parties / split.honest))


def test_a_split_below_the_bounds_reach_adds_more_noise_and_costs_less():
    """Below half a grid step per party the bound does not apply: each party adds half a step, and
    the release costs less than planned (what the ledger records)."""
    alone = PartiesNoise(3, 2)  # one honest party
    each = alone.party_sigma(1.0, 0.3, 10)
    assert each == 0.5 and distributed_gaussian_rho(1.0, each, alone.honest, 10) < 1.0 / (2 * 0.3**2)
    # with three honest parties at that scale the tau term dominates: more noise, at most the plan
    split = PartiesNoise(4, 1)
    each = split.party_sigma(1.0, 0.6, 10)
    assert each > 0.6 and distributed_gaussian_rho(1.0, each, split.honest, 10) <= 1.0 / (2 * 0.6**2) * (1 + 1e-12)
    # on the grid of real sums (2^-16) the same sigma is 2^16 grid steps: split as planned
    grid = 2.0**-16
    each = split.party_sigma(1.0, 0.6, 10, grid)
    assert math.isclose(each, 0.6 / math.sqrt(3), rel_tol=1e-12)
    assert math.isclose(distributed_gaussian_rho(1.0, each, split.honest, 10, grid), 1.0 / (2 * 0.6**2))
    entry = {"mechanism": "gaussian", "sensitivity_l2": 1.0, "sigma": each, "cells": 10, **split.fields(grid)}
    assert entry["distributed"]["grid"] == grid and math.isclose(entry_rho(entry), _cost(entry), rel_tol=1e-12)


def test_a_split_without_an_honest_party_is_refused():
    for parties, collusion in ((3, 3), (3, 0), (1, 0)):
        with pytest.raises(ValueError, match="collusion threshold"):
            PartiesNoise(parties, collusion)
    with pytest.raises(ValueError, match="at least"):
        distributed_gaussian_rho(1.0, 0.4, 2, 10)


def _cdf_of(pmf: np.ndarray) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(pmf)])  # cdf[i] = P[N < lo + i]


def _selection_probabilities(u: np.ndarray, noise_pmf: np.ndarray, lo: int, offsets: np.ndarray) -> np.ndarray:
    """Exact ``P[r wins]`` of ``argmax_r (u_r + c_r + N_r) R + r`` (ties to the higher index) for
    independent integer noises ``N_r`` with pmf ``noise_pmf`` on ``lo, lo+1, ...`` and known
    constants ``c_r`` (a coalition's own draws)."""
    R, support = len(u), lo + np.arange(len(noise_pmf))
    cdf = _cdf_of(noise_pmf)
    v = u + offsets

    def below(s, bound):  # P[N_s <= bound], elementwise over bound
        idx = np.clip(bound - lo + 1, 0, len(noise_pmf))
        return cdf[idx]

    out = np.zeros(R)
    for r in range(R):
        total = noise_pmf.copy()
        for s in range(R):
            if s != r:  # s loses iff v_s + N_s < v_r + x, or equal and s < r
                total = total * below(s, v[r] + support - v[s] - (1 if s > r else 0))
        out[r] = total.sum()
    return out


def _renyi_of_outcomes(p: np.ndarray, q: np.ndarray, alpha: float) -> float:
    return float(math.log(np.sum(p**alpha * q ** (1 - alpha))) / (alpha - 1))


def test_a_selection_with_several_partys_gumbels_costs_what_one_exponential_mechanism_costs():
    """Exact selection probabilities on the integers, for scores one record apart (each moves by at
    most Delta), an honest party's rounded Gumbel of scale b, another party's, and a coalition's
    known draws or none: every Renyi divergence is within the exponential mechanism's zCDP bound
    alpha (eps + 4/b)^2 / 8, eps = 2 Delta / b (rounding included)."""
    b, delta = 3.0, 2
    ks = np.arange(-30, 400)
    gumbel = rounded_gumbel_pmf(ks, b)
    two = np.convolve(gumbel, gumbel)
    epsilon = 2 * delta / b + 4 / b
    rng = np.random.default_rng(5)
    closest = 0.0
    for noise, lo in ((gumbel, -30), (two, -60)):
        for _ in range(40):
            u = rng.integers(0, 12, size=4)
            neighbour = u + rng.integers(-delta, delta + 1, size=4)
            offsets = rng.integers(-6, 7, size=4) * rng.integers(0, 2)  # a coalition's known draws, or none
            p = _selection_probabilities(u, noise, lo, offsets)
            q = _selection_probabilities(neighbour, noise, lo, offsets)
            assert math.isclose(p.sum(), 1.0, rel_tol=1e-9) and math.isclose(q.sum(), 1.0, rel_tol=1e-9)
            for alpha in (1.5, 2.0, 8.0, 32.0):
                bound = alpha * epsilon**2 / 8
                divergence = _renyi_of_outcomes(p, q, alpha)
                assert divergence <= bound * (1 + 1e-9), (alpha, divergence, bound)
                closest = max(closest, divergence / bound)
    assert closest > 0.1  # neighbours come near the bound (0.16 of it): the check has power
