"""zCDP <-> (epsilon, delta).

A mechanism that is rho-zCDP is (epsilon, delta)-DP for every epsilon with
``delta >= min_{alpha > 1} exp((alpha-1)(alpha*rho - epsilon)) / (alpha-1) * (1 - 1/alpha)^alpha``
(Canonne, Kamath and Steinke 2020). ``rho_to_epsilon`` asks OpenDP's ``make_zCDP_to_approxDP``
for this conversion; ``cks_delta`` is an independent implementation of the same bound that the
audit and the tests use to cross-check it.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Callable

# OpenDP's modules one by one: ``opendp.prelude`` also imports its optional extras (scikit-learn,
# about 0.6 s of every process's start-up)
from opendp import combinators, measurements
from opendp.domains import atom_domain
from opendp.metrics import absolute_distance
from opendp.mod import OpenDPException, enable_features

enable_features("contrib")


@lru_cache(maxsize=4096)
def rho_to_epsilon(rho: float, delta: float) -> float:
    """Smallest epsilon such that rho-zCDP implies (epsilon, delta)-DP (via OpenDP)."""
    _check_delta(delta)
    if rho < 0:
        raise ValueError("rho must be non-negative")
    if rho == 0:
        return 0.0
    if math.isinf(rho):
        return math.inf
    # A Gaussian mechanism with sensitivity 1 and scale 1/sqrt(2 rho) is exactly rho-zCDP.
    meas = measurements.make_gaussian(
        atom_domain(T=float, nan=False), absolute_distance(T=float), scale=1.0 / math.sqrt(2.0 * rho)
    )
    try:
        return float(combinators.make_zCDP_to_approxDP(meas).map(1.0).epsilon(delta))
    except OpenDPException:  # OpenDP refuses values it cannot bound (overflow): no finite epsilon
        return math.inf


def epsilon_to_rho(epsilon: float, delta: float, iterations: int = 80) -> float:
    """Largest rho whose conversion at ``delta`` does not exceed ``epsilon``, to a relative 1e-14.

    A bracket ``lo^2 <= rho < hi^2`` in ``s = sqrt(rho)``, where the conversion is nearly linear,
    narrowed by regula falsi with the Illinois rule (bisection where a step leaves the bracket) to
    5e-15, then by bisection to a few ulps, or until a conversion is ``epsilon`` exactly. The
    bracket (``_bracket``) is first a narrow one around the bound's own answer (``cks_rho``), which
    OpenDP's conversion agrees with to about 1e-15: two conversions confirm a bracket of 4e-15 and
    a few bisect it (a wide bracket took about twenty conversions, 50 ms, before bisecting)."""
    _check_delta(delta)
    if not epsilon > 0:
        raise ValueError("epsilon must be positive")
    if math.isinf(epsilon):
        return math.inf

    def excess(s: float) -> float:
        return rho_to_epsilon(s * s, delta) - epsilon

    lo, f_lo, hi, f_hi = _bracket(excess, epsilon, delta)
    reached, side = f_lo == 0, 0
    for _ in range(iterations):
        if reached or hi - lo <= 4 * math.ulp(hi):
            break
        s = (lo + hi) / 2  # within 5e-15, where OpenDP's conversion moves in steps: bisection
        if hi - lo > 5e-15 * hi and math.isfinite(f_hi):
            s = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
            s = s if lo < s < hi else (lo + hi) / 2
        f_s = excess(s)
        if f_s <= 0:
            lo, f_lo, reached = s, f_s, f_s == 0
            f_hi = f_hi / 2 if side == -1 else f_hi
            side = -1
        else:
            hi, f_hi = s, f_s
            f_lo = f_lo / 2 if side == 1 else f_lo
            side = 1
    if not math.isclose(rho_to_epsilon(lo * lo, delta), epsilon, rel_tol=1e-2):  # OpenDP's grid at tiny rho
        raise ValueError(f"no zCDP budget converts to epsilon {epsilon:g} at delta {delta:g}")
    return lo * lo


#: The narrow brackets tried around ``cks_rho``'s answer (relative half-widths in ``sqrt(rho)``).
NARROW_BRACKETS = (2e-15, 1e-13, 1e-10, 1e-6)


def _bracket(excess: Callable[[float], float], epsilon: float, delta: float) -> tuple[float, float, float, float]:
    """``(lo, excess(lo), hi, excess(hi))`` with ``excess(lo) <= 0 < excess(hi)``: the narrowest of
    ``NARROW_BRACKETS`` around ``sqrt(cks_rho)`` that OpenDP confirms, else the wide one from the
    simple bound's ``s = sqrt(L + epsilon) - sqrt(L)``, ``L = log(1/delta)`` (``rho + 2 sqrt(rho L)
    = epsilon``; from ``s = 0`` where OpenDP does not confirm it is below) to ``s^2 = epsilon + 1``."""
    s = math.sqrt(cks_rho(epsilon, delta))
    for width in NARROW_BRACKETS:
        lo, hi = s * (1 - width), s * (1 + width)
        f_lo = excess(lo)
        if f_lo <= 0:
            f_hi = excess(hi)
            if f_hi > 0:
                return lo, f_lo, hi, f_hi
    log_inv = -math.log(delta)
    lo = math.sqrt(log_inv + epsilon) - math.sqrt(log_inv)
    f_lo = excess(lo)
    if f_lo > 0:
        lo, f_lo = 0.0, -epsilon
    hi = math.sqrt(epsilon + 1.0)  # rho-zCDP => (rho + 2 sqrt(rho log(1/delta)), delta), so rho < epsilon
    return lo, f_lo, hi, excess(hi)


def cks_rho(epsilon: float, delta: float, iterations: int = 120) -> float:
    """The largest rho whose Canonne-Kamath-Steinke delta at ``epsilon`` is at most ``delta``
    (independent of OpenDP). At order ``a`` the bound is ``delta`` where
    ``rho(a) = ((log delta - a log(1 - 1/a) + log(a - 1)) / (a - 1) + epsilon) / a``, and the
    bound at ``rho`` is its smallest over ``a``, so the answer is the largest ``rho(a)``: a golden
    section search over ``log(a - 1)`` in [-20, 30]."""

    def rho_at(t: float) -> float:
        a = 1.0 + math.exp(t)
        return ((math.log(delta) - a * math.log1p(-1.0 / a) + math.log(a - 1.0)) / (a - 1.0) + epsilon) / a

    golden = (math.sqrt(5.0) - 1.0) / 2.0
    lo, hi = -20.0, 30.0
    x1, x2 = hi - golden * (hi - lo), lo + golden * (hi - lo)
    f1, f2 = rho_at(x1), rho_at(x2)
    for _ in range(iterations):
        if f1 < f2:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + golden * (hi - lo)
            f2 = rho_at(x2)
        else:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - golden * (hi - lo)
            f1 = rho_at(x1)
    return max(f1, f2, 0.0)


def cks_delta(rho: float, epsilon: float) -> float:
    """The Canonne-Kamath-Steinke delta for rho-zCDP at ``epsilon`` (independent of OpenDP).

    The exponent ``(a-1)(a rho - eps) + a log(1 - 1/a) - log(a-1)`` is convex in ``a``; its
    derivative is ``(2a - 1) rho - eps + log(1 - 1/a)``, so bisection on the derivative finds
    the minimiser.
    """
    if rho == 0:
        return 0.0
    lo, hi = 1.0 + 1e-9, (epsilon + 1.0) / (2.0 * rho) + 2.0
    for _ in range(200):
        a = (lo + hi) / 2
        if (2 * a - 1) * rho - epsilon + math.log1p(-1.0 / a) < 0:
            lo = a
        else:
            hi = a
    a = (lo + hi) / 2
    log_delta = (a - 1) * (a * rho - epsilon) + a * math.log1p(-1.0 / a) - math.log(a - 1)
    return min(1.0, math.exp(log_delta))


def _check_delta(delta: float) -> None:
    if not 0 < delta < 1:
        raise ValueError("delta must lie in (0, 1)")
