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
function (``shaped_unit``); a bin with both heights 0, or a column of one bin, keeps the uniform.

**A long tail's outer bins** (``tail_rates``). A bin's line starts at the higher of its two
heights ``h``; where the bin's own density ``d_b`` is under half of it (``2 d_b < h``), every line from
that height holds more than the bin's mass, and the polygon's shape, which only keeps the two heights'
ratio, spreads the bin's values across it. In a long tail's outer bin (a weight's or an income's,
from its ``(bins - 1) / bins`` quantile to its greatest value) the values sit near the bin's inner
edge instead: drawn along the line (clipped at 0 at the column's end, a triangle over the whole
bin) NIST's national excerpt's weights came out with 99th percentiles 2.4 times the real ones. So a bin of
``2 d_b < h`` whose height falls towards an end of the column, with at most ``TAIL_MASS`` of the
bins' mass from it to that end, is drawn from the exponential density that meets the polygon at its
higher edge and holds the bin's mass: ``h exp(-k x)`` at the share ``x`` of the bin from that edge,
with ``(1 - e^-k) / k = d_b / h`` (one root ``k > 1.59`` for a ratio under 1/2; ``tail_rate``): on a
half-line the maximum-entropy density of a given mean, here cut at the bin's far edge. ``BinShape`` keeps each bin's
heights and its signed rate ``s``: the position's density is ``exp(s t)`` where ``s`` is not 0
(``-k`` from the lower edge, ``k`` from the upper one). Other bins keep their lines: a valley
between two fuller bins in the body of a column is more often the noise in a small release's masses.

Only where a value falls inside its bin changes: each bin keeps exactly the rows the model drew for
it, so every cell count, and every measure on the cells, is that of the uniform draw. The masses are
the released model's own (post-processing; nothing is read).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: A tail's bin whose density is under this share of its higher polygon height is drawn
#: exponentially (module docstring): no line from that height holds the bin's mass.
TAIL_RATIO = 0.5
#: A bin is in a tail when at most this share of the bins' mass lies from it to the column's end.
TAIL_MASS = 0.25


class BinShape(NamedTuple):
    """Each bin's polygon heights at its lower and upper end, and the signed rate ``s`` of a long tail's
    bin (``exp(s t)`` at position ``t``; 0 where the heights apply)."""

    low: np.ndarray
    high: np.ndarray
    tail: np.ndarray

    def at(self, cells: np.ndarray) -> "BinShape":
        """The shapes of the bins ``cells`` (one per drawn value)."""
        return BinShape(self.low[cells], self.high[cells], self.tail[cells])


def uniform_shape(bins: int) -> BinShape:
    """Flat bins: every value's position uniform in its bin."""
    return BinShape(np.ones(bins), np.ones(bins), np.zeros(bins))


def bin_shape(masses: np.ndarray, span: np.ndarray, room: np.ndarray) -> BinShape:
    """The polygon's heights (``polygon_heights``), with a long tail's bins drawn exponentially
    (``tail_rates``)."""
    a, b = polygon_heights(masses, span, room)
    if not _polygon_applies(masses, span):
        return BinShape(a, b, np.zeros(len(a)))
    return BinShape(a, b, tail_rates(masses, room, a, b))


def _masses(masses: np.ndarray) -> np.ndarray:
    """The bins' masses as floats, a mass that is not a finite non-negative number taken as 0."""
    return np.maximum(np.nan_to_num(np.asarray(masses, dtype=float), nan=0.0, posinf=0.0), 0.0)


def _polygon_applies(masses: np.ndarray, span: np.ndarray) -> bool:
    """Whether the polygon has heights to give: two bins or more, every span finite and positive."""
    return len(masses) >= 2 and bool(np.all(span > 0)) and bool(np.all(np.isfinite(span)))


def tail_rates(masses: np.ndarray, room: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each bin's signed rate (module docstring): ``-k`` for a bin of the upper tail whose height falls
    upwards, ``k`` for one of the lower tail whose height falls downwards, where its density is under
    ``TAIL_RATIO`` of its higher height; else 0."""
    p = _masses(masses)
    total = p.sum()
    high = np.maximum(a, b)
    filled = (np.asarray(room) > 0) & (p > 0) & (high > 0)
    ratio = np.where(filled, p / np.where(filled, room, 1.0) / np.where(filled, high, 1.0), 1.0)
    upper = (np.cumsum(p[::-1])[::-1] <= TAIL_MASS * total) & (a > b)
    lower = (np.cumsum(p) <= TAIL_MASS * total) & (b > a)
    tail = (ratio < TAIL_RATIO * (1 - 1e-9)) & (upper | lower)
    return np.where(tail, np.where(lower, 1.0, -1.0) * tail_rate(np.where(tail, ratio, TAIL_RATIO)), 0.0)


def tail_rate(ratio):
    """The root ``k > 0`` of ``(1 - e^-k) / k = ratio`` for each ``ratio`` in ``(0, 1)``: the function
    falls from 1 at 0 towards ``1 / k``, so the root lies in ``(0, 1 / ratio]``; found by bisection."""
    ratio = np.asarray(ratio, dtype=float)
    lo, hi = np.zeros_like(ratio), 1.0 / ratio
    for _ in range(100):
        mid = (lo + hi) / 2
        above = -np.expm1(-mid) / mid > ratio
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return (lo + hi) / 2


def shape_cdf(shape: BinShape, t: np.ndarray) -> np.ndarray:
    """The distribution function at positions ``t`` in ``[0, 1]`` under each value's ``shape``
    (``BinShape.at``): the linear density's (``linear_cdf``), or ``(e^(s t) - 1) / (e^s - 1)``."""
    t = np.asarray(t, dtype=float)
    out = linear_cdf(shape.low, shape.high, t)
    tail = shape.tail != 0
    if np.any(tail):
        s, x = np.broadcast_arrays(shape.tail, t)
        out = np.where(tail, _exp_cdf(np.where(tail, s, -1.0), x), out)
    return out


def shape_unit(shape: BinShape, u: np.ndarray) -> np.ndarray:
    """The position in ``[0, 1)`` with ``shape_cdf`` equal to the uniform ``u``."""
    out = shaped_unit(shape.low, shape.high, u)
    tail = shape.tail != 0
    if np.any(tail):
        s, x = np.broadcast_arrays(shape.tail, np.asarray(u, dtype=float))
        out = np.where(tail, _exp_unit(np.where(tail, s, -1.0), x), out)
    return np.clip(out, 0.0, np.nextafter(1.0, 0.0))


def _exp_cdf(s: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``(e^(s t) - 1) / (e^s - 1)`` for ``s < 0``; for ``s > 0`` its mirror ``1 - F_{-s}(1 - t)``
    (no overflow either way)."""
    k = -np.abs(s)
    x = np.where(s < 0, t, 1.0 - t)
    g = np.expm1(k * x) / np.expm1(k)
    return np.clip(np.where(s < 0, g, 1.0 - g), 0.0, 1.0)


def _exp_unit(s: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The inverse of ``_exp_cdf``: ``log(1 + u (e^s - 1)) / s``, mirrored for ``s > 0``."""
    k = -np.abs(s)
    v = np.where(s < 0, u, 1.0 - u)
    with np.errstate(divide="ignore"):  # log(0) at u = 1 where e^s is 0: t is then 1 (clipped below it)
        t = np.log1p(v * np.expm1(k)) / k
    return np.where(s < 0, t, 1.0 - t)


def polygon_heights(masses: np.ndarray, span: np.ndarray, room: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The polygon's heights ``(a, b)`` at each bin's lower and upper end (module docstring), from the
    bins' masses, spans ``L_b`` and rooms ``n_b`` (``encode.bin_lengths``). Unnormalised: only each
    bin's ratio of the two matters; all ones (the uniform) for one bin or a bin of no (or no finite)
    span; a mass that is not a finite non-negative number counts as 0."""
    p = _masses(masses)
    if not _polygon_applies(p, span):
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
