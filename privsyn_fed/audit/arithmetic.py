"""The arithmetic of a ledger: each entry's cost recomputed here from its own parameters
(``D^2 / (2 sigma^2)`` or ``eps^2 / 8``; sigma, sensitivity and epsilon must be positive), the step
numbers, the total (``rho_spent``), the budget (``rho_budget`` is what ``epsilon_budget`` gives),
and the (epsilon, delta) conversion, checked against OpenDP and against an independent
implementation of the same bound (``cks_delta``).

Approximate zCDP (a DP schema draft, method ``schema-draft``): an entry may carry its own ``delta``
with its ``threshold`` (a Gaussian histogram over an unknown domain that lists the values whose
noisy count reaches the threshold): its delta is recomputed here as
``erfc((threshold - 2) / (sigma sqrt 2)) / 2``; rho then converts at ``delta_conversion`` and the
ledger's ``delta`` must be ``delta_conversion`` plus the entries' deltas, within ``delta_budget``.
"""

from __future__ import annotations

import math
from typing import Any

from ..accounting import cks_delta, rho_to_epsilon
from .findings import AuditReport

REL_TOL = 1e-9
#: The counts an entry may record, and the least each may be.
COUNTS = {"cells": 0, "candidates": 1, "round": 0, "local_step": 1}
#: ``rho_budget`` converts back to ``epsilon_budget`` to this relative precision.
BUDGET_TOL = 1e-8


def _square(x: float) -> float:
    return float(x) * float(x)  # inf rather than OverflowError


def _close(a: float, b: float, tol: float = REL_TOL) -> bool:
    return math.isclose(a, b, rel_tol=tol, abs_tol=1e-15)


def _cost(e: dict[str, Any]) -> float:
    """An entry's zCDP cost from its own parameters, computed here (not by the accountant), without
    overflow: ``D^2 / (2 sigma^2)`` or ``eps^2 / 8``; ``inf`` when it does not fit in a float. Noise
    summed from the parties' own draws (``distributed``): a selection still costs ``eps^2 / 8`` (a
    mixture of exponential mechanisms, ``accounting.distributed``); Gaussians over ``d`` cells with
    ``k = parties - collusion`` honest parties each drawing ``N_Z(0, s^2)`` cost
    ``D^2 / (2 k s^2) + d tau``, ``tau = 10 sum_{j<k} exp(-2 pi^2 s^2 j / (j+1))`` (Kairouz, Liu and
    Steinke 2021); ``inf`` (fails) for an invalid split or a sigma that is not positive."""
    if e["mechanism"] == "exponential":
        eps = float(e["epsilon"])
        return eps * eps / 8.0
    split = e.get("distributed")
    if not float(e["sigma"]) > 0:
        return math.inf
    ratio = float(e["sensitivity_l2"]) / float(e["sigma"])
    if not split:
        return 0.5 * ratio * ratio
    grid = float(split.get("grid", 1.0))  # the noise's lattice step: the bound is in its units
    honest, s, d = split["parties"] - split["collusion"], float(e["sigma"]) / grid, e.get("cells")
    if not (1 <= honest <= split["parties"] and s >= 0.5 and isinstance(d, int) and d >= 1):
        return math.inf
    tau = 10.0 * sum(math.exp(-2.0 * (math.pi * s) ** 2 * j / (j + 1.0)) for j in range(1, honest))
    return 0.5 * ratio * ratio / honest + d * tau


def _effective_sigma(e: dict[str, Any]) -> float:
    """The sigma of one Gaussian with this entry's sensitivity and cost (``sigma`` itself unless
    the parties drew the noise): what a planned schedule is checked against."""
    if not e.get("distributed"):
        return float(e["sigma"])
    cost = _cost(e)
    return float(e["sensitivity_l2"]) / math.sqrt(2.0 * cost) if cost > 0 else math.inf


def _planned_noise(e: dict[str, Any], sigma: float) -> bool:
    """Whether the entry's noise is the planned ``sigma``: exactly, or for noise the parties drew,
    at least it (each party adds at least half a grid step, which can exceed a tiny plan)."""
    if e.get("distributed"):
        return _effective_sigma(e) >= sigma * (1 - 1e-9)
    return _close(float(e["sigma"]), sigma, 1e-9)


def threshold_delta(sigma: float, threshold: float) -> float:
    """``erfc((tau - 2) / (sigma sqrt 2)) / 2``: a bound on the probability that a value held by one
    record passes the threshold ``tau`` of a histogram with discrete Gaussian noise of scale
    ``sigma``, ``P(1 + Z >= tau) <= P(N(0, sigma^2) >= tau - 2)`` (recomputed here, independently of
    ``privsyn_fed.draft_dp``)."""
    return 0.5 * math.erfc((float(threshold) - 2.0) / (float(sigma) * math.sqrt(2.0)))


def _conversion_delta(ledger: dict[str, Any], rep: AuditReport) -> float:
    """The delta at which rho converts: the ledger's ``delta``, or for approximate zCDP (entries with
    their own ``delta``) ``delta_conversion``, after checking that ``delta`` is it plus the entries'
    deltas (each recomputed from its sigma and threshold) and within ``delta_budget``."""
    delta = float(ledger["delta"])
    own = [(i, e) for i, e in enumerate(ledger["entries"]) if "delta" in e or "threshold" in e]
    for i, e in own:
        label = f"entry {i + 1} ({e['query']})"
        if e["mechanism"] != "gaussian" or "delta" not in e or "threshold" not in e:
            rep.problems.append(f"{label}: only a thresholded Gaussian histogram carries a delta and a threshold")
        elif not float(e["threshold"]) >= 2 or not float(e["sigma"]) > 0:
            rep.problems.append(f"{label}: a histogram threshold is at least 2, not {e['threshold']!r}")
        elif not float(e["delta"]) >= threshold_delta(e["sigma"], e["threshold"]) * (1 - 1e-9):
            rep.problems.append(
                f"{label}: recorded delta {e['delta']:.6g} is below what its threshold {e['threshold']:g} "
                f"and sigma {e['sigma']:g} give ({threshold_delta(e['sigma'], e['threshold']):.6g})"
            )
    if "delta_conversion" not in ledger:
        if own:
            rep.problems.append(
                "entries carry their own delta, but the ledger does not record the delta its rho converts "
                "at (delta_conversion)"
            )
        return delta
    conversion = float(ledger["delta_conversion"])
    spent = sum(float(e.get("delta", 0.0)) for _, e in own)
    if not 0 < conversion < 1:
        rep.problems.append(f"delta_conversion {conversion!r} is not in (0, 1)")
        return delta
    if not _close(delta, conversion + spent):
        rep.problems.append(
            f"delta {delta:.8g} is not delta_conversion {conversion:.8g} plus the entries' deltas {spent:.8g}"
        )
    budget = ledger.get("delta_budget")
    if budget is None or delta > float(budget) * (1 + REL_TOL):
        rep.problems.append(f"delta {delta:.8g} is not within the recorded delta_budget {budget}")
    return conversion


def _check_arithmetic(ledger: dict[str, Any], rep: AuditReport) -> float:
    """Each entry's step number, its counts (``COUNTS``) and its cost, the total against
    ``rho_spent`` and the budget, and the (epsilon, delta) conversion against OpenDP and the CKS
    bound. Returns the recomputed total."""
    total = 0.0
    for i, e in enumerate(ledger["entries"]):
        mech = e["mechanism"]
        label = f"entry {i + 1} (step {e['step']}, {e['query']})"
        if e["step"] != i + 1:
            rep.problems.append(f"{label}: step number {e['step']} out of sequence (expected {i + 1})")
        low = [k for k, least in COUNTS.items() if k in e and not e[k] >= least]
        if low:
            rep.problems.append(f"{label}: {low[0]} {e[low[0]]!r} is not a count of at least {COUNTS[low[0]]}")
        params = ("sensitivity_l2", "sigma") if mech == "gaussian" else ("sensitivity", "epsilon")
        bad = [k for k in params if not e[k] > 0]
        if bad:
            rep.problems.append(f"{label}: {bad[0]} must be positive, not {e[bad[0]]!r}")
            continue
        expected = _cost(e)
        if not _close(float(e["rho"]), expected):
            rep.problems.append(f"{label}: recorded rho {e['rho']:.6g} but its parameters give {expected:.6g}")
        total += expected
    rho_spent, rho_budget = float(ledger["rho_spent"]), float(ledger["rho_budget"])
    delta, epsilon = _conversion_delta(ledger, rep), float(ledger["epsilon"])
    if not _close(rho_spent, total):
        rep.problems.append(f"rho_spent is {rho_spent:.8g} but the entries add up to {total:.8g}")
    if total > rho_budget * (1 + REL_TOL):
        rep.problems.append(f"the entries spend {total:.8g}, more than the budget rho_budget={rho_budget:.8g}")
    if not 0 < delta < 1:
        rep.problems.append(f"delta {delta!r} is not in (0, 1)")
    elif rho_budget < 0:
        rep.problems.append(f"rho_budget {rho_budget!r} is negative")
    elif not math.isfinite(rho_to_epsilon(total, delta)):
        rep.problems.append(f"the entries spend rho {total:.8g}, which no finite epsilon covers")
    else:
        eps_opendp = rho_to_epsilon(total, delta)
        if not _close(epsilon, eps_opendp, 1e-6):
            rep.problems.append(
                f"epsilon {epsilon:.8g} is not what rho={total:.8g} converts to at delta={delta:g} ({eps_opendp:.8g})"
            )
        try:
            agrees = total == 0 or cks_delta(total, eps_opendp) <= delta * (1 + 1e-6)
        except (OverflowError, ValueError, ZeroDivisionError):
            agrees = False
        if not agrees:
            rep.problems.append("OpenDP's conversion disagrees with the independent CKS bound")
        _check_budget(ledger, rho_budget, delta, rep)
    return total


def _check_budget(ledger: dict[str, Any], rho_budget: float, delta: float, rep: AuditReport) -> None:
    """``rho_budget`` is what the declared ``epsilon_budget`` gives at the conversion's delta: the
    largest rho whose conversion does not exceed it, so that ``rho_budget`` converts back to
    ``epsilon_budget`` (up to float rounding)."""
    eb = ledger.get("epsilon_budget")
    if eb is None:
        rep.problems.append("the ledger does not record its epsilon_budget, so its rho_budget cannot be checked")
    elif not rho_budget > 0 or not float(eb) > 0:
        rep.problems.append(f"rho_budget {rho_budget!r} and epsilon_budget {eb!r} must be positive")
    elif not _close(rho_to_epsilon(rho_budget, delta), float(eb), BUDGET_TOL):
        rep.problems.append(
            f"epsilon_budget {eb!r} is not what rho_budget {rho_budget:.8g} converts to at delta={delta:g} "
            f"({rho_to_epsilon(rho_budget, delta):.8g})"
        )
