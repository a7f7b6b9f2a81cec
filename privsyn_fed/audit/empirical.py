"""Empirical privacy check: run a mechanism many times on neighbouring datasets ``D`` and
``D' = D + canary`` and lower-bound the epsilon it really has.

A mechanism ``M`` that is ``(eps, delta)``-DP satisfies, for every event ``S`` and both orders of
``D`` and ``D'``, ``P[M(D') in S] <= e^eps P[M(D) in S] + delta``. So for a threshold event
``S = {statistic >= t}`` (or its complement), ``eps >= log((P[M(D') in S] - delta) / P[M(D) in S])``.
The trials are split in two: the first half picks the event (threshold, direction, order) that
looks most revealing, the second half measures its two probabilities, each bounded by a one-sided
Clopper-Pearson interval at level ``(1 - confidence) / 2`` (Bonferroni), so the reported lower
bound holds with probability at least ``confidence``. A correct implementation stays at or below
its claimed epsilon; one that leaks more (a wrong sensitivity, noise scaled wrongly) is caught
once its true epsilon is far enough above the claim for the number of trials.

Mechanisms (each runs the library's own code with the noise calibrated from the claimed budget):
  * ``gaussian``: a count query (``D`` has count 0, ``D'`` count 1) through ``gaussian_mechanism``
    with ``sigma = 1 / sqrt(2 rho)``, ``rho = epsilon_to_rho(epsilon, delta)``; statistic: the
    noisy count;
  * ``exponential``: ``exponential_mechanism`` over 100 candidates whose scores move by the full
    sensitivity in opposite directions (``D``: all 0; ``D'``: candidate 0 up, the rest down);
    statistic: whether candidate 0 is chosen;
  * ``aim-round``: AIM's selection on a small table and the same table plus a canary record, with
    the AIM score (``scores.aim_score``) against a uniform model, at the full round budget;
    statistic: whether the marginal whose score the canary raised most is chosen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..accounting import Accountant, epsilon_to_rho

MECHANISMS = ("gaussian", "exponential", "aim-round")


@dataclass
class EmpiricalResult:
    """What ``empirical_check`` found: the claim, the trials, the lower bound on epsilon and the
    event that gave it."""

    mechanism: str
    epsilon_claimed: float
    delta: float
    trials: int
    confidence: float
    epsilon_lower_bound: float
    event: str
    rate_d: float  # P[event] on the dataset in the denominator (second half)
    rate_d_prime: float  # P[event] on the other one

    @property
    def consistent(self) -> bool:
        """The lower bound does not exceed the claim (no evidence of a leak)."""
        return self.epsilon_lower_bound <= self.epsilon_claimed


def clopper_pearson(k: int, n: int, level: float) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds: ``P[p >= lo] >= 1 - level`` and ``P[p <= hi] >= 1 - level``."""
    from scipy.stats import beta  # here: scipy.stats takes most of a second to import, and a release needs none

    lo = 0.0 if k == 0 else float(beta.ppf(level, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - level, k + 1, n - k))
    return lo, hi


def _events(first: np.ndarray, second: np.ndarray):
    """Candidate threshold events on the pooled statistics: (name, indicator function)."""
    values = np.unique(np.concatenate([first, second]))
    if len(values) > 200:
        values = np.unique(np.quantile(values, np.linspace(0, 1, 201)))
    for t in values:
        yield f"statistic >= {t:.6g}", (lambda x, t=t: x >= t)
        yield f"statistic < {t:.6g}", (lambda x, t=t: x < t)


def epsilon_lower_bound(
    stat_d: np.ndarray, stat_d_prime: np.ndarray, delta: float, confidence: float = 0.95
) -> tuple[float, str, float, float]:
    """``(eps_lb, event, rate in the denominator, rate in the numerator)`` from two samples."""
    n = min(len(stat_d), len(stat_d_prime)) // 2
    a1, a2 = stat_d[:n], stat_d[n : 2 * n]
    b1, b2 = stat_d_prime[:n], stat_d_prime[n : 2 * n]

    def estimate(p_num: float, p_den: float) -> float:
        return math.log((p_num - delta) / p_den) if p_num > delta and p_den > 0 else -math.inf

    best, choice = -math.inf, None
    for name, event in _events(a1, b1):
        pa, pb = event(a1).mean(), event(b1).mean()
        for order, (num, den) in (("D' over D", (pb, pa)), ("D over D'", (pa, pb))):
            # a conservative selection score: the bound this event would give on the first half
            k_num, k_den = int(round(num * n)), int(round(den * n))
            lo, _ = clopper_pearson(k_num, n, 0.05)
            _, hi = clopper_pearson(k_den, n, 0.05)
            value = estimate(lo, hi)
            if value > best:
                best, choice = value, (name, event, order)
    if choice is None:
        return 0.0, "none", 0.0, 0.0
    name, event, order = choice
    pa, pb = event(a2), event(b2)
    num, den = (pb, pa) if order == "D' over D" else (pa, pb)
    level = (1 - confidence) / 2
    lo, _ = clopper_pearson(int(num.sum()), n, level)
    _, hi = clopper_pearson(int(den.sum()), n, level)
    return max(0.0, estimate(lo, hi)), f"{name} ({order})", float(den.mean()), float(num.mean())


# ---- the mechanisms, run through the library's own code -----------------------------------------


def _scratch(epsilon: float, delta: float) -> Accountant:
    """An accountant for one trial of an exponential mechanism run at ``epsilon`` (pure DP; its
    zCDP cost ``epsilon^2 / 8`` can exceed the zCDP equivalent of an ``(epsilon, delta)`` claim)."""
    return Accountant(4.0 * epsilon + 2.0, delta, "empirical-check")


Runner = Callable[[bool, int], np.ndarray]


def gaussian_runner(epsilon: float, delta: float, noise) -> Runner:
    """The count query through ``gaussian_mechanism`` with the noise source ``noise``."""
    from ..mechanisms import gaussian_mechanism

    sigma = 1.0 / math.sqrt(2.0 * epsilon_to_rho(epsilon, delta))

    def run(neighbour: bool, trials: int) -> np.ndarray:
        # one call on ``trials`` copies of the count = ``trials`` independent runs of the mechanism
        acc = Accountant(epsilon, delta, "empirical-check")
        count = np.full(trials, 1 if neighbour else 0, dtype=np.int64)
        return gaussian_mechanism(acc, noise, count, sigma=sigma, query="count", where="check").astype(float)

    return run


def exponential_runner(
    epsilon: float, delta: float, noise, sensitivity_factor: float = 1.0, candidates: int = 100
) -> Runner:
    """Selection through ``exponential_mechanism``; ``sensitivity_factor`` < 1 simulates a bug
    (a declared sensitivity smaller than the true one)."""
    from ..mechanisms import exponential_mechanism

    true_sensitivity = 1.0
    base = np.zeros(candidates)
    moved = np.full(candidates, -true_sensitivity)
    moved[0] = true_sensitivity

    def run(neighbour: bool, trials: int) -> np.ndarray:
        scores = moved if neighbour else base
        out = np.empty(trials)
        for i in range(trials):
            acc = _scratch(epsilon, delta)
            out[i] = (
                exponential_mechanism(
                    acc,
                    noise,
                    scores,
                    epsilon=epsilon,
                    query="select",
                    where="check",
                    sensitivity=true_sensitivity * sensitivity_factor,
                )
                == 0
            )
        return out

    return run


def aim_round_runner(epsilon: float, delta: float, noise, seed: int = 0) -> Runner:
    """AIM's selection (score ``scores.aim_score``, sensitivity ``max w``) on a small table vs the
    same table plus a canary, against a uniform model, with the whole budget on selection."""
    from ..mechanisms import exponential_mechanism
    from ..methods import downward_closure
    from ..silo import aim_score

    rng = np.random.default_rng(seed)
    shape = [3, 3, 2]
    rows = np.stack([rng.integers(0, k, 60) for k in shape], axis=1)
    canary = np.array([[2, 2, 1]])
    cands = downward_closure([(0, 1, 2), (0, 1)])
    keys = list(cands)
    sigma = 5.0

    def scores(data: np.ndarray) -> np.ndarray:
        out = []
        for cl in keys:
            dims = [shape[i] for i in cl]
            counts = np.bincount(
                np.ravel_multi_index(tuple(data[:, i] for i in cl), dims), minlength=int(np.prod(dims))
            )
            uniform = np.full(counts.size, len(data) / counts.size)
            out.append(aim_score(cands[cl], counts, uniform, sigma))
        return np.array(out)

    base, moved = scores(rows), scores(np.vstack([rows, canary]))
    target = int(np.argmax(moved - base))
    sensitivity = max(cands.values())

    def run(neighbour: bool, trials: int) -> np.ndarray:
        s = moved if neighbour else base
        out = np.empty(trials)
        for i in range(trials):
            acc = _scratch(epsilon, delta)
            out[i] = (
                exponential_mechanism(
                    acc, noise, s, epsilon=epsilon, sensitivity=sensitivity, query="select", where="check"
                )
                == target
            )
        return out

    return run


def runner_for(mechanism: str, epsilon: float, delta: float, noise) -> Runner:
    """The runner of ``mechanism`` (one of ``MECHANISMS``) calibrated to the claim, with ``noise``."""
    if mechanism == "gaussian":
        return gaussian_runner(epsilon, delta, noise)
    if mechanism == "exponential":
        return exponential_runner(epsilon, delta, noise)
    if mechanism == "aim-round":
        return aim_round_runner(epsilon, delta, noise)
    raise ValueError(f"unknown mechanism {mechanism!r}")


def empirical_check(
    mechanism: str, run: Runner, epsilon: float, delta: float, trials: int, confidence: float = 0.95
) -> EmpiricalResult:
    """Run ``run`` ``trials`` times on ``D`` and on ``D'`` and lower-bound the epsilon
    (``epsilon_lower_bound``)."""
    stat_d, stat_d_prime = run(False, trials), run(True, trials)
    eps_lb, event, rate_d, rate_dp = epsilon_lower_bound(stat_d, stat_d_prime, delta, confidence)
    return EmpiricalResult(mechanism, epsilon, delta, trials, confidence, eps_lb, event, rate_d, rate_dp)
