"""The budgets a release may state: ``0 < epsilon <= MAX_EPSILON`` and ``MIN_DELTA <= delta <
MAX_DELTA``. Within them the zCDP conversions (``conversions``) have a meaningful, finite answer."""

from __future__ import annotations

from ..common import OptionError

#: The largest epsilon and delta a release may state (the conversions are exact up to them).
MAX_EPSILON = 1000.0
MAX_DELTA = 0.1
#: The smallest delta: far below any useful one, and its shares (a DP draft splits delta among its
#: columns' thresholds) stay normal floating-point numbers.
MIN_DELTA = 1e-100


def check_budget_args(epsilon: float, delta: float) -> None:
    """``0 < epsilon <= MAX_EPSILON`` and ``MIN_DELTA <= delta < MAX_DELTA``; ``OptionError`` otherwise."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0 < epsilon <= MAX_EPSILON:
        raise OptionError(f"epsilon must be a positive number up to {MAX_EPSILON:g}, not {epsilon!r}", "epsilon")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not MIN_DELTA <= delta < MAX_DELTA:
        raise OptionError(
            f"delta must lie from {MIN_DELTA:g} up to (not including) {MAX_DELTA:g} (use far less than one "
            f"over the number of rows, e.g. 1e-9), not {delta!r}",
            "delta",
        )
