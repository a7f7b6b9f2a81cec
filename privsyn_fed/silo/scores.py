"""Quality scores of candidate marginals (numpy only: silos compute them on their own rows).

* ``aim_score``: AIM's ``u_r = w_r (||M_r(D) - M_r(p)||_1 - sqrt(2/pi) sigma n_r)``.
* ``heterogeneity_gap`` and ``local_score``: FLAIM's score of a marginal on one silo's rows,
  ``u_k(q) = w_q (||M_q(D_k) - n_k p_q||_1 - sqrt(2/pi) sigma n_q - n_k tau_k(q))``.
* ``site_slice``: ``p_q`` given the silo's own value of the silo column, for a marginal with it.
Their sensitivities are stated where a mechanism uses them (``methods.aim``, ``methods.flaim``).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def aim_score(weight: float, true_marginal: np.ndarray, model_marginal: np.ndarray, sigma: float) -> float:
    """``u_r = w_r (||M_r(D) - M_r(p)||_1 - sqrt(2/pi) sigma n_r)``; sensitivity ``w_r`` under
    add/remove (one record moves one cell of ``M_r(D)`` by one)."""
    n_r = true_marginal.size
    return weight * (float(np.abs(true_marginal - model_marginal).sum()) - SQRT_2_OVER_PI * sigma * n_r)


def heterogeneity_gap(
    local_oneways: Sequence[np.ndarray], proxy: Sequence[np.ndarray], columns: Sequence[int]
) -> float:
    """``n_k tau_k(q) = (1/|q|) sum_{i in q} ||M_i(D_k) - n_k s_i||_1`` (count scale); moves by at
    most 2 when a record is added to silo ``k``."""
    gaps = []
    for i in columns:
        m = np.asarray(local_oneways[i], dtype=float)
        gaps.append(float(np.abs(m - m.sum() * proxy[i]).sum()))
    return float(np.mean(gaps))


def local_score(
    weight: float, local_counts: np.ndarray, model_probs: np.ndarray, sigma: float, gap: float = 0.0
) -> float:
    """``u_k(q) = w_q (||M_q(D_k) - n_k p_q||_1 - sqrt(2/pi) sigma n_q - gap)``."""
    n_k = float(np.sum(local_counts))
    return aim_score(weight, local_counts, n_k * np.asarray(model_probs), sigma) - weight * gap


def site_part(values: np.ndarray, shape: Sequence[int], axis: int, code: int) -> np.ndarray:
    """The cells of a marginal over ``shape`` where the silo column (``axis``) holds the silo's own
    ``code``, raveled."""
    return np.take(np.asarray(values, dtype=float).reshape(tuple(shape)), code, axis=axis).ravel()


def site_slice(probs: np.ndarray, shape: Sequence[int], axis: int, code: int) -> np.ndarray:
    """The model's marginal over ``shape`` given that the silo column (``axis``) holds the silo's
    own ``code``: its slice of that value, summing to one. A silo's rows all hold its code, so it
    compares them with that slice, on that slice's cells only (public: the model and the silo's
    name): its score's noise term counts the cells a measurement adds on the silo's slice, not on
    the other values', which the silo's rows cannot reach. ``n_k`` times it still sums to ``n_k``:
    the sensitivity is unchanged."""
    part = np.clip(site_part(probs, shape, axis, code), 0.0, None)
    total = part.sum()
    return part / total if total > 0 else np.full(part.size, 1.0 / max(1, part.size))
