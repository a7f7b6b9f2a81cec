"""Fed-TDA (Duan et al.) with every released statistic differentially private: a Gaussian copula
over mode-normalised numeric columns and ICDM-encoded categorical columns.

Budget ``rho`` split between four releases, each one Gaussian mechanism over the sum across silos
(``split`` as given, or planned: 1% of ``rho`` on the total and the rest by ``allocation.plan_fedtda``):
  1. the row total ``N`` (sensitivity 1);
  2. every categorical column's histogram, jointly (L2 sensitivity ``sqrt(n_d)``);
  3. every numeric column's histogram, jointly (``sqrt(n_c)``), on its public bins each split in
     ``refine`` (at most 4, planned from the rows; whole-number columns at most one bin per value),
     so the copula can place point masses (Adult's zero capital gains) within a schema bin. Every
     histogram is projected onto the nearest one whose total is the inverse-variance combination of
     the noisy total and the histograms' sums; counts of split bins below ``threshold`` (2) sigma are
     set to zero, and the server fits a 1-D Gaussian mixture to each numeric histogram (weighted EM
     on the bin centres, a fixed number of iterations, components below weight 0.005 pruned): all
     post-processing;
  4. the upper triangle of ``sum_rows x x^T`` of the silos' encoded rows, whose norm is clipped to
     ``B = norm_factor sqrt(l)``: one record changes it by ``x x^T``, of Frobenius norm at most
     ``B^2``, the L2 sensitivity of the released vector.
Each silo encodes its own rows with the public parameters of steps 2 and 3 (a row of ``l = 2 n_c +
n_d`` coordinates): a categorical value, and a numeric value's mixture component (drawn from its
posterior; "missing" is one more component), become ``Phi^-1(u)`` with ``u`` uniform on the
category's interval of the ICDM (categories ordered by noisy frequency, ascending, ties by
position; mixture components by their means, so that the code grows with the value; trimmed by
``lambda`` at both ends); a numeric value ``c`` in component ``t`` also becomes
``a = Phi^-1(F_t(c))``, its mode-specific normalisation by the component's share of the noisy
histogram (``ModeCDF``; ``|a| <= Phi^-1(1 - lambda)``). The research code's
``(c - mu_t) / (4 sigma_t)`` assumes every mode is Gaussian and smears the point masses of columns
such as Adult's capital gains across bins. Each coordinate is then ``N(0, 1)`` by construction (up
to the noise in the histograms), so the sum of the rows is not released (its expectation is 0)
and the noisy second moment over ``N_hat`` estimates the copula's correlation: unit diagonal,
off-diagonal entries hard-thresholded at the universal threshold ``sqrt(2 ln p)`` times their
noise (none kept once that reaches 1), zero between a value's code and its component's code (they
are independent by construction); it is symmetrised, its eigenvalues are clamped and it is
factorised (Cholesky, with a growing ridge if needed). Synthesis draws ``z ~ N(0, R)`` and
inverts every encoding exactly: numeric values are real numbers inside the schema's bounds (whole
numbers for integer columns), categorical values are schema categories.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
from scipy.special import ndtr, ndtri

from .. import allocation
from ..accounting import Accountant
from ..aggregate import Aggregator, traffic_summary
from ..encode import bin_edges
from ..errors import InputError
from ..mechanisms import NoiseSource
from ..progress import Progress, Silent
from ..queries import MarginalsQuery, NumericHistogramQuery, SecondMomentsQuery
from ..schema import CategoricalColumn, NumericColumn, Schema
from . import core
from .federated import combined_total, noisy_sums, projected


NON_PRIVATE_WARNING = ("NON-PRIVATE TEST MODE: fedtda ran with exact statistics and no noise; this "
                       "release has NO differential-privacy guarantee (for testing the method only)")
MIN_WEIGHT = 0.005
EM_ITERATIONS = 200


@dataclass
class FedTDAOptions:
    split: Sequence[float] | None = None   # shares of rho (total, categorical, numeric, covariance); default planned
    components: int = 5             # most mixture components per numeric column
    norm_factor: float = 2.0        # encoded rows are clipped to norm norm_factor * sqrt(l)
    icdm_lambda: float = 1e-4       # ICDM trims [0, 1] to [lambda, 1 - lambda]
    threshold: float = 2.0          # noisy numeric-histogram counts below threshold x sigma count as empty
    refine: int = 4                 # each schema bin is split in this many for the numeric histograms
    non_private: bool = False       # exact statistics, no noise, no guarantee (testing only)

    def validate(self) -> None:
        if self.split is not None:
            if len(self.split) != 4 or any(not (0 <= x < math.inf) for x in self.split) or not sum(self.split) > 0:
                raise InputError(f"--split needs four non-negative shares (total, categorical, numeric, "
                                 f"covariance), not {list(self.split)}")
            if min(self.split[0], self.split[3]) <= 0:
                raise InputError("--split: the total and the covariance need a positive share")
        if self.refine not in (1, 2, 4):
            raise InputError(f"refine must be 1, 2 or 4, not {self.refine}")
        if self.components < 1:
            raise InputError(f"--components must be at least 1, not {self.components}")
        if not self.norm_factor > 0:
            raise InputError("norm_factor must be positive")
        if not 0 < self.icdm_lambda < 0.5:
            raise InputError(f"icdm_lambda must lie in (0, 0.5), not {self.icdm_lambda}")

    def check_schema(self, schema: Schema) -> None:
        """The released second moments have ``l (l + 1) / 2`` cells for ``l = n_cat + 2 n_num``
        coordinates; refused before any budget is spent when they would not fit in memory."""
        from ..workload import MAX_CANDIDATE_CELLS
        n_num = sum(isinstance(c, NumericColumn) for c in schema.columns)
        n_cat = len(schema.columns) - n_num
        shares = self.split or (1.0, 1.0, 1.0, 1.0)
        for count, share, family in ((n_cat, shares[1], "categorical"), (n_num, shares[2], "numeric")):
            if count and not share > 0:
                raise InputError(f"--split gives the {family} histograms no budget, but the schema has {count} "
                                 f"{family} column(s); give them a positive share")
        width = len(schema.columns) + n_num
        if width * (width + 1) // 2 > MAX_CANDIDATE_CELLS:
            raise InputError(f"fedtda's copula over {width} coordinates has too many second moments; "
                             "use fewer columns")


def threat_model(agg: Aggregator) -> str:
    return ("fedtda: each silo sends its row count, its histograms and the sum of outer products of its "
            f"locally encoded rows; {agg.threat_model}.")


# ---- ICDM ---------------------------------------------------------------------------------------

@dataclass
class ICDM:
    """Categories laid out on ``[lam, 1 - lam]`` in ``order`` (default: by probability, ascending,
    ties by position); category ``j`` owns ``[lo_j, hi_j)`` of length ``(1 - 2 lam) p_j``; its code
    is ``Phi^-1(u)`` with ``u`` uniform there (so even a tiny category keeps its own interval)."""

    probs: np.ndarray
    lam: float = 1e-4
    order: np.ndarray | None = None
    lo: np.ndarray = field(init=False)
    hi: np.ndarray = field(init=False)

    def __post_init__(self):
        p = np.asarray(self.probs, dtype=float)
        order = (np.lexsort((np.arange(len(p)), p)) if self.order is None
                 else np.asarray(self.order, dtype=np.int64))
        cum = np.concatenate([[0.0], np.cumsum(p[order])])
        cum = self.lam + (1.0 - 2.0 * self.lam) * cum / cum[-1]     # laid out on [lam, 1 - lam]
        self.lo, self.hi = np.empty(len(p)), np.empty(len(p))
        self.lo[order], self.hi[order] = cum[:-1], cum[1:]
        self._order, self._cum = order, cum

    def encode(self, index: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        u = self.lo[index] + rng.random(len(index)) * (self.hi[index] - self.lo[index])
        return ndtri(u)

    def decode(self, x: np.ndarray) -> np.ndarray:
        """The category whose interval holds ``Phi(x)`` (compared in x space: ``Phi`` is monotone)."""
        pos = np.searchsorted(ndtri(self._cum).astype(x.dtype), x, side="right") - 1
        return self._order[np.clip(pos, 0, len(self._order) - 1)]


# ---- numeric columns: mixtures from noisy histograms ---------------------------------------------

@dataclass
class Mixture:
    weights: np.ndarray
    means: np.ndarray
    sds: np.ndarray

    def posterior(self, x: np.ndarray) -> np.ndarray:
        z = (x[:, None] - self.means) / self.sds
        logp = np.log(self.weights) - np.log(self.sds) - 0.5 * z ** 2
        logp -= logp.max(axis=1, keepdims=True)
        p = np.exp(logp)
        return p / p.sum(axis=1, keepdims=True)


def fit_mixture(col: NumericColumn, counts: np.ndarray, components: int) -> Mixture:
    """Weighted 1-D EM on the bin centres with weights ``max(count, 0)`` (a fixed number of
    iterations); each bin also contributes its within-bin variance ``width^2 / 12``."""
    lo, hi = bin_edges(col)
    centres = (lo + hi) / 2.0
    width = np.where(hi > lo, hi - lo, 0.0) + (1.0 if col.integer else 0.0)
    span = max(col.upper - col.lower, 1.0 if col.integer else 0.0)
    floor = max(span / 1000.0, 1e-9) if span > 0 else 1.0
    w = np.clip(np.asarray(counts, dtype=float), 0.0, None)
    if w.sum() <= 0 or span == 0:
        return Mixture(np.ones(1), np.array([(col.lower + col.upper) / 2.0]), np.array([max(span / 4.0, floor)]))
    k = int(min(components, np.count_nonzero(w)))
    cdf = np.cumsum(w) / w.sum()
    means = centres[np.minimum(np.searchsorted(cdf, (np.arange(k) + 0.5) / k), len(centres) - 1)].astype(float)
    sds = np.full(k, max(span / (2.0 * k), floor))
    weights = np.full(k, 1.0 / k)
    within = width ** 2 / 12.0
    for _ in range(EM_ITERATIONS):
        r = Mixture(weights, means, sds).posterior(centres) * w[:, None]
        mass = r.sum(axis=0) + 1e-12
        weights = mass / mass.sum()
        means = (r * centres[:, None]).sum(axis=0) / mass
        var = (r * ((centres[:, None] - means) ** 2 + within[:, None])).sum(axis=0) / mass
        sds = np.sqrt(np.maximum(var, floor ** 2))
    keep = weights >= MIN_WEIGHT
    return Mixture(weights[keep] / weights[keep].sum(), means[keep], sds[keep])


# ---- the copula ---------------------------------------------------------------------------------

@dataclass
class ModeCDF:
    """Mode-specific normalisation of one numeric column from its noisy histogram and mixture.

    ``mass[b, t]`` is bin ``b``'s noisy count (floored at zero, plus a tiny floor) shared among the
    components by their responsibilities at the bin centre. A value in bin ``b`` joins component
    ``t`` with probability ``mass[b, t] / sum_t mass[b, t]`` and is normalised by that component's
    CDF, linear inside each bin: ``a = Phi^-1(F_t(c))``, clamped to ``[lam, 1 - lam]`` (so
    ``|a| <= Phi^-1(1 - lam)``, 3.72 for the default). Decoding inverts ``F_t`` exactly; whole
    numbers are spread over ``[k, k + 1)`` before encoding and floored after decoding.
    """

    col: NumericColumn
    mass: np.ndarray
    lam: float

    def __post_init__(self):
        lo, hi = bin_edges(self.col)
        self.lo = lo.astype(float)
        self.width = (hi - lo + (1.0 if self.col.integer else 0.0)).astype(float)
        self.cum = np.vstack([np.zeros(self.mass.shape[1]), np.cumsum(self.mass, axis=0)])   # (B+1, T)

    @property
    def components(self) -> int:
        return self.mass.shape[1]

    def encode(self, x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``(component, a)`` for values ``x`` (inside the bounds)."""
        from ..encode import numeric_bin
        b = numeric_bin(self.col, x)
        share = self.mass[b] / self.mass[b].sum(axis=1, keepdims=True)
        t = (share.cumsum(axis=1) > rng.random(len(x))[:, None]).argmax(axis=1)
        pos = x + (rng.random(len(x)) if self.col.integer else 0.0)
        frac = np.clip((pos - self.lo[b]) / np.where(self.width[b] > 0, self.width[b], 1.0), 0.0, 1.0)
        u = (self.cum[b, t] + frac * self.mass[b, t]) / self.cum[-1, t]
        return t, ndtri(np.clip(u, self.lam, 1 - self.lam))

    def decode(self, t: np.ndarray, a: np.ndarray) -> np.ndarray:
        target = ndtr(a) * self.cum[-1, t]
        # one search over every component's CDF laid end to end (component k shifted by k * shift)
        bins = len(self.lo)
        shift = float(self.cum[-1].max()) * 2.0 + 1.0
        stacked = (self.cum + np.arange(self.components) * shift).T.ravel()
        pos = np.searchsorted(stacked, target + t * shift, side="right") - 1 - t * (bins + 1)
        b = np.clip(pos, 0, bins - 1)
        frac = np.clip((target - self.cum[b, t]) / self.mass[b, t], 0.0, 1.0)
        out = self.lo[b] + frac * self.width[b]
        if self.col.integer:
            out = np.floor(out)
        return np.clip(out, self.col.lower, self.col.upper)


def mode_cdf(col: NumericColumn, counts: np.ndarray, mix: Mixture, lam: float) -> ModeCDF:
    lo, hi = bin_edges(col)
    resp = mix.posterior((lo + hi) / 2.0)
    w = np.clip(np.asarray(counts, dtype=float), 0.0, None)
    mass = (w + max(w.sum(), 1.0) * 1e-6)[:, None] * resp + 1e-12
    return ModeCDF(col, mass, lam)


@dataclass
class Encoding:
    """The public parameters every silo encodes its rows with."""

    schema: Schema
    icdm: list[ICDM]                  # per column: categories, or mixture components (+ missing)
    modes: list[ModeCDF | None]       # per numeric column (None for categorical)
    bound: float                      # rows are clipped to this L2 norm

    @property
    def width(self) -> int:
        return sum(2 if m is not None else 1 for m in self.modes)

    def value_coordinates(self) -> list[int]:
        """Coordinates of the numeric columns' values; each is followed by its component's code."""
        out, k = [], 0
        for mode in self.modes:
            if mode is not None:
                out.append(k)
            k += 2 if mode is not None else 1
        return out

    def public_arrays(self) -> dict[str, np.ndarray]:
        """What the server sends every silo so that it can encode its rows."""
        out = {}
        for j, name in enumerate(self.schema.names):
            out[f"{name}:icdm"] = np.concatenate([self.icdm[j].probs, self.icdm[j]._order])
            if self.modes[j] is not None:
                out[f"{name}:modes"] = self.modes[j].mass
        return out

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The encoding as a JSON header and arrays (it travels to MPC parties with its query)."""
        header = {"bound": self.bound, "lam": [c.lam for c in self.icdm],
                  "bins": [None if m is None else m.col.bins for m in self.modes],
                  "mode_lam": [None if m is None else m.lam for m in self.modes]}
        arrays = {}
        for j, c in enumerate(self.icdm):
            arrays[f"{j}:probs"] = np.asarray(c.probs, dtype=np.float64)
            arrays[f"{j}:order"] = np.asarray(c._order, dtype=np.int64)
            if self.modes[j] is not None:
                arrays[f"{j}:mass"] = np.asarray(self.modes[j].mass, dtype=np.float64)
        return header, arrays

    @classmethod
    def from_wire(cls, schema: Schema, header: dict, arrays: dict[str, np.ndarray]) -> "Encoding":
        import dataclasses
        icdm, modes = [], []
        for j, col in enumerate(schema.columns):
            icdm.append(ICDM(arrays[f"{j}:probs"], float(header["lam"][j]), arrays[f"{j}:order"]))
            bins = header["bins"][j]
            modes.append(None if bins is None else
                         ModeCDF(dataclasses.replace(col, bins=int(bins)), arrays[f"{j}:mass"],
                                 float(header["mode_lam"][j])))
        return cls(schema, icdm, modes, float(header["bound"]))

    def encode(self, codes: np.ndarray, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``(n, l)`` encoded rows, each clipped to L2 norm ``bound`` (runs inside a silo)."""
        cols = []
        for j, col in enumerate(self.schema.columns):
            mode = self.modes[j]
            if mode is None:
                cols.append(self.icdm[j].encode(codes[:, j], rng))
                continue
            x = values[:, j]
            missing = np.isnan(x)
            comp = np.full(len(x), mode.components)                  # "missing" is the last component
            a = np.zeros(len(x))
            if (~missing).any():
                comp[~missing], a[~missing] = mode.encode(x[~missing], rng)
            cols += [a, self.icdm[j].encode(comp, rng)]
        rows = np.stack(cols, axis=1)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows * np.minimum(1.0, self.bound / np.maximum(norms, 1e-300))

    def decode(self, z: np.ndarray) -> pd.DataFrame:
        out, k = {}, 0
        for j, col in enumerate(self.schema.columns):
            mode = self.modes[j]
            if mode is None:
                idx = self.icdm[j].decode(z[:, k])
                k += 1
                cats = np.array(list(col.categories) + [None], dtype=object)
                out[col.name] = pd.Series(cats[idx], dtype=object)
                continue
            comp = self.icdm[j].decode(z[:, k + 1])
            missing = comp >= mode.components
            v = mode.decode(np.where(missing, 0, comp), z[:, k])
            k += 2
            series = pd.Series(v.astype(np.int64), dtype="Int64") if col.integer else pd.Series(v, dtype="Float64")
            series[missing] = pd.NA
            out[col.name] = series
        return pd.DataFrame(out, columns=self.schema.names)


def repair_correlation(s: np.ndarray, eta: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    """A symmetric positive-definite matrix with unit diagonal near ``s``, and its Cholesky factor
    (post-processing): symmetrise, clamp eigenvalues to ``eta`` times their mean (at least
    ``eta``), rescale to unit diagonal, factorise, adding a growing ridge if that fails."""
    s = (np.asarray(s, dtype=float) + np.asarray(s, dtype=float).T) / 2.0
    if not np.all(np.isfinite(s)):
        s = np.eye(len(s))
    vals, vecs = np.linalg.eigh(s)
    floor = eta * max(float(np.mean(np.abs(vals))), 1.0)
    s = (vecs * np.maximum(vals, floor)) @ vecs.T
    d = np.sqrt(np.diag(s))
    r = s / np.outer(d, d)
    r = (r + r.T) / 2.0
    np.fill_diagonal(r, 1.0)
    ridge = eta
    while True:
        try:
            return r, np.linalg.cholesky(r)
        except np.linalg.LinAlgError:
            r = (r + ridge * np.eye(len(r))) / (1.0 + ridge)
            ridge *= 2.0


def correlation_estimate(s: np.ndarray, t: float) -> np.ndarray:
    """The copula's correlation from a noisy second moment of standard normal coordinates: unit
    diagonal (each coordinate is ``N(0, 1)`` by construction), off-diagonal entries kept where
    ``|x| > t`` and zero elsewhere (hard thresholding: a kept correlation is not shrunk), and none
    at all when ``t >= 1`` (no correlation can then be told from noise). With ``t`` a multiple of
    the noise of one entry, correlations the noise could explain are dropped instead of becoming
    spurious dependence in the copula (post-processing)."""
    out = np.where(np.abs(s) > t, s, 0.0) if t < 1 else np.zeros_like(s)
    np.fill_diagonal(out, 1.0)
    return out


def universal_threshold(width: int) -> float:
    """``sqrt(2 ln p)`` for the ``p = l (l - 1) / 2`` off-diagonal entries of an ``l x l`` matrix (at least 1)."""
    return math.sqrt(2.0 * math.log(max(width * (width - 1) / 2.0, math.e / 2.0)))


def upper(m: np.ndarray) -> np.ndarray:
    return m[np.triu_indices(len(m))]


def from_upper(v: np.ndarray, n: int) -> np.ndarray:
    m = np.zeros((n, n))
    m[np.triu_indices(n)] = v
    return m + np.triu(m, 1).T


# ---- the run ------------------------------------------------------------------------------------

@dataclass
class FedTDAModel:
    encoding: Encoding
    factor: np.ndarray          # Cholesky factor of the copula correlation
    total: float                # noisy row total

    def sample(self, rows: int, seed: int | None) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        width = self.factor.shape[0]
        # computed transposed so that each coordinate (a column of z) is contiguous for decoding
        z = (self.factor.astype(np.float32) @ rng.standard_normal((width, rows), dtype=np.float32)).T
        return self.encoding.decode(z)


def refined(col: NumericColumn, factor: int) -> NumericColumn:
    """The column with each public bin split in ``factor`` (integer columns: at most one bin per value)."""
    import dataclasses
    return dataclasses.replace(col, bins=col.bins * factor)


def numeric_histogram(col: NumericColumn, values: np.ndarray) -> np.ndarray:
    """Counts of a silo's values on ``col``'s bins, then the missing count if ``col`` allows it."""
    from ..encode import numeric_bin
    present = ~np.isnan(values)
    counts = np.bincount(numeric_bin(col, values[present]), minlength=col.n_bins).astype(np.int64)
    return np.append(counts, np.int64((~present).sum())) if col.missing else counts


def split_rho(rho: float, split: Sequence[float], n_cat: int, n_num: int) -> list[float]:
    """Shares of ``rho`` for (total, categorical, numeric, covariance); an absent family's share
    goes to the others in proportion."""
    shares = [split[0], split[1] if n_cat else 0.0, split[2] if n_num else 0.0, split[3]]
    total = sum(shares)
    return [rho * s / total for s in shares]


def run_fedtda(agg: Aggregator, acc: Accountant, noise: NoiseSource, opts: FedTDAOptions,
               encode_seed: int | None,
               progress: Progress | None = None) -> core.MethodResult:
    progress = progress or Silent()
    silos = agg.silo_names
    schema = agg.local(silos[0]).schema
    names = schema.names
    cat = [j for j, c in enumerate(schema.columns) if isinstance(c, CategoricalColumn)]
    num = [j for j, c in enumerate(schema.columns) if isinstance(c, NumericColumn)]
    exact = opts.non_private
    if exact:
        acc.mark_non_private(NON_PRIVATE_WARNING)
        progress.log(NON_PRIVATE_WARNING)
    width = len(cat) + 2 * len(num)
    bound = opts.norm_factor * math.sqrt(width)

    def release(requests, sensitivity, rho_part, query):
        """Each request summed over the silos; released jointly as one Gaussian mechanism of
        L2 sensitivity ``sensitivity`` with ``rho_part`` (no noise in the non-private test mode)."""
        if exact:
            return [agg.sum(fn, silos, round=0, label=label) for label, fn in requests], 0.0
        sigma = sensitivity / math.sqrt(2.0 * rho_part)
        return noisy_sums(agg, acc, noise, [(label, fn, silos) for label, fn in requests], sigma,
                          sensitivity, query, 0), sigma

    planned = opts.split is None         # the rest planned from the noisy total (allocation.plan_fedtda)
    if planned:
        rho_n = allocation.TOTAL_SHARE * acc.rho_budget
    else:
        rho_n, rho_cat, rho_num, rho_cov = split_rho(acc.rho_budget, opts.split, len(cat), len(num))
    (n_sum,), sigma_n = release([("rows", MarginalsQuery(((),)))], 1.0, rho_n,
                                "total number of rows" + (" (plans the schedule)" if planned else ""))
    n_hat = max(1.0, float(n_sum[0]))
    refine = opts.refine
    if planned:
        plan = allocation.plan_fedtda(n_hat, acc.remaining, [schema.shape[j] for j in num], len(cat), bound,
                                      opts.refine)
        rho_cat, rho_num, rho_cov, refine = plan.rho_cat, plan.rho_num, plan.rho_cov, plan.refine
        acc.note(schedule=allocation.schedule_record(n_hat, **plan.record()))
    fine = {j: refined(schema.columns[j], refine) for j in num}
    hist_cat, sigma_cat = release([(names[j], MarginalsQuery(((j,),))) for j in cat], math.sqrt(len(cat)), rho_cat,
                                  "every categorical column's histogram") if cat else ([], 0.0)
    hist_num, sigma_num = release([(names[j], NumericHistogramQuery(j, refine)) for j in num],
                                  math.sqrt(len(num)), rho_num, f"every numeric column's histogram on its public "
                                  f"bins (each schema bin split in {refine})") if num else ([], 0.0)
    if not exact:         # the total, and the sum of every histogram, estimate the rows: combined
        n_hat = combined_total([n_hat] + [float(h.sum()) for h in hist_cat + hist_num],
                               [sigma_n ** 2] + [h.size * sigma_cat ** 2 for h in hist_cat]
                               + [h.size * sigma_num ** 2 for h in hist_num])
    # the nearest histograms with that total; counts of refined bins below threshold x sigma cannot
    # be told from empty ones: treat them as empty
    cut = opts.threshold * sigma_num if refine > 1 else 0.0
    hist_num = [np.where(h < cut, 0.0, h) for h in (projected(h, n_hat) * n_hat for h in hist_num)]
    progress.update(acc.rho_spent / acc.rho_budget, "released the total and the column histograms")

    icdm: list[ICDM | None] = [None] * len(names)
    modes: list[ModeCDF | None] = [None] * len(names)
    for j, h in zip(cat, hist_cat):
        icdm[j] = ICDM(_probabilities(h, n_hat), opts.icdm_lambda)
    for j, h in zip(num, hist_num):
        col = fine[j]
        mix = fit_mixture(col, h[:col.n_bins], opts.components)
        modes[j] = mode_cdf(col, h[:col.n_bins], mix, opts.icdm_lambda)
        comp_mass = modes[j].cum[-1]
        missing = [max(float(h[col.n_bins]), 0.0)] if col.missing else []
        # components in the order of their means (then "missing"), so the code is monotone in the value
        order = np.concatenate([np.argsort(mix.means, kind="stable"), np.arange(len(missing)) + len(comp_mass)])
        icdm[j] = ICDM(_probabilities(np.concatenate([comp_mass, missing]), n_hat), opts.icdm_lambda, order)
    encoding = Encoding(schema, icdm, modes, bound)
    agg.broadcast(encoding.public_arrays(), silos, round=0)

    (g,), sigma_cov = release([("second moments of encoded rows", SecondMomentsQuery(encoding, encode_seed))],
                              encoding.bound ** 2, rho_cov, f"upper triangle of the sum of x x^T of the encoded rows "
                              f"(rows clipped to norm {encoding.bound:.4g})")
    # the universal threshold: pure noise survives in none of the p entries with high probability
    corr = correlation_estimate(from_upper(g, width) / n_hat, universal_threshold(width) * sigma_cov / n_hat)
    for k in encoding.value_coordinates():     # a value's code is uniform given its component: no correlation
        corr[k, k + 1] = corr[k + 1, k] = 0.0
    _, factor = repair_correlation(corr)
    model = FedTDAModel(encoding, factor, n_hat)
    progress.log(f"copula over {width} coordinates")
    info = {"coordinates": width, "components": {names[j]: modes[j].components for j in num},
            "oneway_sigmas": _oneway_sigmas(schema, fine, rho_cat, rho_num, exact),
            "traffic": traffic_summary(agg)}
    return core.MethodResult(model, model, 1, [], info)


def _oneway_sigmas(schema: Schema, fine: dict, rho_cat: float, rho_num: float, exact: bool) -> list[float]:
    """Per column, the noise per schema cell of its released histogram: ``sqrt(n_cat / (2 rho_cat))``
    for a categorical column; for a numeric one ``sqrt(n_num / (2 rho_num))`` per refined bin, and a
    schema bin sums ``refined bins / schema bins`` of them (thresholding aside)."""
    if exact:
        return [0.0] * len(schema.columns)
    n_cat = sum(isinstance(c, CategoricalColumn) for c in schema.columns)
    n_num = len(schema.columns) - n_cat
    out = []
    for j, col in enumerate(schema.columns):
        if isinstance(col, CategoricalColumn):
            out.append(math.sqrt(n_cat / (2.0 * rho_cat)))
        else:
            out.append(math.sqrt(n_num / (2.0 * rho_num) * fine[j].n_bins / col.n_bins))
    return out


def _probabilities(counts: np.ndarray, n_hat: float) -> np.ndarray:
    """The nearest histogram with total ``n_hat`` (``projected``) plus a small floor (so every
    category keeps an interval), normalised."""
    c = projected(counts, n_hat) * n_hat + max(n_hat, 1.0) * 1e-6
    return c / c.sum()
