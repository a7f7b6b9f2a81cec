"""Values inside a numeric column's bins, shaped by the frequency polygon of the bins' masses.

A bin's values drawn uniformly follow the histogram: a density that is flat inside each bin and
jumps at its edges, biased by ``O(h)`` inside a bin of width ``h``. The frequency polygon joins the
bins' densities at their midpoints instead (bias ``O(h^2)`` for a smooth density; D. W. Scott, "Frequency
polygons", JASA 80, 1985). With a bin's mass ``p_b`` over its length ``L_b`` (an integer column's bin
``[lo, hi]`` spans ``hi - lo + 1`` and holds ``n_b`` whole numbers other than atoms), its density is
``d_b = p_b / n_b`` (``p_b / L_b`` for a real column), and

* at the edge between bins ``b`` and ``b + 1`` the polygon's height is the line between the two
  midpoints there: ``f = d_b + (d_{b+1} - d_b) L_b / (L_b + L_{b+1})``;
* at the column's bounds the end bins' lines are extended: ``f = max(0, 2 d_b - f_inner)``, so that
  an end bin's mean height is ``d_b`` unless clipped.

Inside bin ``b`` the value's position ``t`` in ``[0, 1)`` has the linear density
``a + (b - a) t`` between the bin's two heights ``a`` and ``b``, drawn by inverting its distribution
function (``shaped_unit``); a bin with both heights 0, or a column of one bin, keeps the uniform. Only
where a value falls inside its bin changes: each bin keeps exactly the rows the model drew for it, so
every cell count, and every measure on the cells, is that of the uniform draw. The masses are the
released model's own (post-processing; nothing is read).
"""

from __future__ import annotations

import numpy as np


def polygon_heights(masses: np.ndarray, span: np.ndarray, room: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The polygon's heights ``(a, b)`` at each bin's lower and upper end (module docstring), from the
    bins' masses, spans ``L_b`` and rooms ``n_b`` (``encode.bin_lengths``). Unnormalised: only each
    bin's ratio of the two matters; all ones (the uniform) for one bin or a bin of no (or no finite)
    span; a mass that is not a finite non-negative number counts as 0."""
    p = np.maximum(np.nan_to_num(np.asarray(masses, dtype=float), nan=0.0, posinf=0.0), 0.0)
    if len(p) < 2 or not np.all(span > 0) or not np.all(np.isfinite(span)):
        ones = np.ones(len(p))
        return ones, ones
    d = np.where(room > 0, p / np.where(room > 0, room, 1.0), 0.0)
    inner = d[:-1] + (d[1:] - d[:-1]) * span[:-1] / (span[:-1] + span[1:])
    first = max(0.0, 2 * d[0] - inner[0])
    last = max(0.0, 2 * d[-1] - inner[-1])
    return np.concatenate([[first], inner]), np.concatenate([inner, [last]])


def shaped_unit(a: np.ndarray, b: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The position ``t`` in ``[0, 1)`` with density proportional to ``a + (b - a) t`` at uniform ``u``:
    the root of ``a t + (b - a) t^2 / 2 = u (a + b) / 2``, written ``u (a + b) / (a + sqrt(a^2 + u (b^2
    - a^2)))`` (no cancellation when ``a`` and ``b`` are close); ``u`` itself where ``a`` equals ``b``
    (both 0 included)."""
    a, b, u = _scaled(a, b, u)
    root = np.sqrt(np.maximum(a * a + u * (b * b - a * a), 0.0))
    t = u * (a + b) / np.maximum(a + root, np.finfo(float).tiny)
    return np.clip(t, 0.0, np.nextafter(1.0, 0.0))


def linear_cdf(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The distribution function ``(a t + (b - a) t^2 / 2) / ((a + b) / 2)`` of that density at ``t`` in
    ``[0, 1]`` (``t`` where ``a + b`` is 0); exactly 0 and 1 at the ends, so a whole bin weighs 1."""
    a, b, t = _scaled(a, b, t)
    g = (a * t + (b - a) * t * t / 2) / ((a + b) / 2)
    return np.where(t <= 0, 0.0, np.where(t >= 1, 1.0, np.clip(g, 0.0, 1.0)))


def _scaled(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Heights divided by the larger of the two (the shape is the same, and squares cannot overflow);
    both 1 where both are 0."""
    a, b, x = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float), np.asarray(x, float))
    top = np.maximum(a, b)
    flat = ~(top > 0)
    scale = np.where(flat, 1.0, top)
    return np.where(flat, 1.0, a / scale), np.where(flat, 1.0, b / scale), x
