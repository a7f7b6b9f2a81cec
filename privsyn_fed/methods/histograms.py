"""Post-processing of noisy histograms, shared by the federated methods, the independent method and
the dependence screen: the nearest distribution with a given total, and one row total from several
noisy estimates of it."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def combined_total(estimates: Sequence[float], variances: Sequence[float]) -> float:
    """Inverse-variance mean of independent noisy estimates of one row total (e.g. the sums of
    several noisy histograms, each with variance ``cells sigma^2``); at least 1. Post-processing."""
    w = 1.0 / np.asarray(variances, dtype=float)
    return max(1.0, float((w * np.asarray(estimates, dtype=float)).sum() / w.sum()))


def projected(table: np.ndarray, total: float) -> np.ndarray:
    """The distribution nearest a noisy histogram: the Euclidean projection of ``table`` onto
    ``{x >= 0, sum x = total}`` (``max(table - c, 0)`` with the shift ``c`` that makes it sum to
    ``total``; Norm-Sub in PrivSyn), scaled to sum to one. Unlike clipping at zero it does not
    turn the noise of empty cells into mass; it is the maximum-likelihood histogram under
    Gaussian noise with the given total. Post-processing."""
    y = np.asarray(table, dtype=float).ravel()
    total = max(float(total), 1e-12)
    top = np.sort(y)[::-1]
    shifts = (np.cumsum(top) - total) / np.arange(1, y.size + 1)
    k = int(np.nonzero(top - shifts > 0)[0][-1])
    x = np.clip(y - shifts[k], 0.0, None)
    return (x / x.sum()).reshape(np.shape(table))
