"""The k-marginal score of NIST's SDNist report tool, version 2.3 (``sdnist/metrics/kmarginal.py``
and the binning of ``sdnist/report/dataset``), the headline utility measure of the NIST CRC
benchmark on the ACS data excerpts. Computed from the real rows: not differentially private.

The definition, as SDNist v2.3 computes it:

* **Marginals.** The columns present in both tables, less the group column (``PUMA``) and
  ``exclude`` (``INDP``), sorted by name; every pair of them. With the group column in both
  tables, each marginal is the 3-way joint ``(PUMA, a, b)``, otherwise the 2-way ``(a, b)``.
* **Densities.** Per cell, the count divided by the table's rows, for the real (target) and the
  synthetic (deidentified) rows alike; a cell missing from one table has density 0 there.
* **Score.** Per marginal the L1 distance of the two densities (between 0 and 2);
  ``score = (2 - mean L1) * 500``, between 0 and 1000 (1000: the same densities). SDNist prints
  the score truncated to an integer; here it is kept as a float.
* **Per-group scores** (SDNist's "score in each PUMA"). They come from the same joint 3-way
  densities (over all rows), not from densities recomputed within the group: per marginal and
  group ``g``, ``d_g`` is the sum of the absolute density differences over the cells of ``g``,
  capped at the real density mass of ``g`` (``t_g``, the group's share of the real rows) and
  divided by it; ``score_g = (1 - mean over marginals of min(d_g, t_g) / t_g) * 1000``. Groups with
  real rows are scored; a group only the synthetic rows have counts in the overall score only.

Binning before counting (fitted on the real rows, applied to both tables):

* ``N`` (not applicable, and here also an empty or missing cell) is a code of its own in every
  column; it is never binned.
* ``AGEP``, ``POVPIP``, ``PINCP``, ``PWGTP``, ``WGTP``: values truncated to whole numbers, then 20
  percentile bins: the real values' percentile rank ``p`` (pandas ``rank(pct=True)``, ties
  averaged) gives bin ``floor(20 p)`` (19 for ``p = 1``). A synthetic value goes to the first bin
  whose largest real value is at least it, and to the last bin above them all. SDNist v2.3 checks
  ``POVPIP == "501"`` (income above 5 times the poverty line) as text after its validation step has
  already turned the column into numbers, so 501 is ranked with the other values; this follows
  that behaviour.
* ``DENSITY``: SDNist's fixed log-scale bins: ``m = max + 500`` with ``max`` the data
  dictionary's largest density (52864.7 for the ACS excerpts; ``density_max`` here), edges
  ``0, 150`` and then the 9th to 21st of 21 points spaced evenly in log10 from 10 to ``m``
  (14 bins, right-closed); values below 0 count as 0, values above ``m`` as ``m - 100``. A
  density of exactly 0 goes into the first bin (SDNist's right-closed cut leaves it out).
* Every other column as it is (values compared as text, whole numbers written without a
  decimal point, so ``3`` and ``3.0`` are the same code).

On other tables (not the ACS excerpts), a column whose real values other than ``N`` are all
numbers and take more than 20 distinct values is binned into the same 20 percentile bins
(values not truncated); the other columns are used as they are. SDNist drops rows with a missing
value; here a missing value is the ``N`` code.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..schema import numbers_as_text

#: The version of SDNist whose definition this module follows.
DEFINITION = "SDNist v2.3"
#: Columns SDNist bins into percentiles of the real values.
PERCENTILE_COLUMNS = ("AGEP", "POVPIP", "PINCP", "PWGTP", "WGTP")
#: Percentile bins per binned column.
PERCENTILE_BINS = 20
#: The not-applicable code of the ACS excerpts.
NOT_APPLICABLE = "N"
#: Largest DENSITY in the ACS excerpts' data dictionary (the upper end of SDNist's density bins).
ACS_DENSITY_MAX = 52864.7


def _as_text(values: pd.Series) -> pd.Series:
    """The column as text codes; missing cells and empty text become ``N``."""
    if pd.api.types.is_float_dtype(values.dtype):
        text = pd.Series(numbers_as_text(values.to_numpy(dtype=float, na_value=np.nan)), index=values.index)
    else:
        text = values.astype(object).where(values.notna(), "").astype(str).str.strip()
    return text.where(text != "", NOT_APPLICABLE)


def _numbers(text: pd.Series, column: str, source: str) -> np.ndarray:
    """The values of ``text`` (no ``N`` among them) as floats; a value that is not a number is an error."""
    values = pd.to_numeric(text, errors="coerce")
    bad = text[values.isna()]
    if len(bad):
        raise ValueError(f"k-marginal: {source} column '{column}' has a value that is not a number: {bad.iloc[0]!r}")
    return values.to_numpy(dtype=float)


def percentile_bins(real: np.ndarray, bins: int = PERCENTILE_BINS) -> np.ndarray:
    """The percentile bin of every real value: ``floor(bins * p)`` for the percentile rank ``p``
    (ties averaged, ``p`` in ``(0, 1]``), ``bins - 1`` for ``p = 1``."""
    rank = pd.Series(real).rank(pct=True).to_numpy()
    return np.minimum(np.floor(bins * rank), bins - 1).astype(np.int64)


def apply_percentile_bins(real: np.ndarray, real_bins: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Bins of ``values`` on the bins fitted to ``real``: the first bin whose largest real value is at
    least the value, the last bin for values above them all."""
    labels = np.unique(real_bins)
    upper = np.array([real[real_bins == b].max() for b in labels])
    return labels[np.searchsorted(upper[:-1], values, side="left")]


def density_edges(density_max: float = ACS_DENSITY_MAX) -> np.ndarray:
    """SDNist's DENSITY bin edges (14 right-closed bins)."""
    top = density_max + 500
    points = np.logspace(1.0, math.log10(top), num=PERCENTILE_BINS + 1)
    return np.concatenate([[0.0, 150.0], points[8:]])


def density_bins(values: np.ndarray, density_max: float = ACS_DENSITY_MAX) -> np.ndarray:
    """The DENSITY bin of every value (below 0 counts as 0, above the top as the top minus 100)."""
    top = density_max + 500
    v = np.where(values < 0, 0.0, values)
    v = np.where(v > top, top - 100, v)
    edges = density_edges(density_max)
    return np.clip(np.searchsorted(edges, v, side="left") - 1, 0, len(edges) - 2)


def _bin_column(name: str, real: pd.Series, syn: pd.Series, density_max: float) -> tuple[pd.Series, pd.Series, str]:
    """Both columns as text codes after binning, and how they were binned."""
    real, syn = _as_text(real), _as_text(syn)
    r_na, s_na = real == NOT_APPLICABLE, syn == NOT_APPLICABLE
    if name == "DENSITY":
        how = "density"
    elif name in PERCENTILE_COLUMNS:
        how = "percentile"
    else:
        present = real[~r_na]
        numeric = bool(len(present)) and pd.to_numeric(present, errors="coerce").notna().all()
        if not (numeric and present.nunique() > PERCENTILE_BINS):
            return real, syn, "as is"
        how = "percentile"
    r_val = _numbers(real[~r_na], name, "real")
    s_val = _numbers(syn[~s_na], name, "synthetic")
    if how == "density":
        r_code, s_code = density_bins(r_val, density_max), density_bins(s_val, density_max)
    else:
        if name in PERCENTILE_COLUMNS:  # SDNist reads these as whole numbers
            r_val, s_val = np.trunc(r_val), np.trunc(s_val)
        if len(r_val):
            r_code = percentile_bins(r_val)
            s_code = apply_percentile_bins(r_val, r_code, s_val)
        else:  # no real value to fit bins on: every synthetic value in one bin
            r_code, s_code = r_val.astype(np.int64), np.zeros(len(s_val), dtype=np.int64)
    real, syn = real.copy(), syn.copy()
    real[~r_na] = [f"bin {c}" for c in r_code]
    syn[~s_na] = [f"bin {c}" for c in s_code]
    return real, syn, how


def binned(
    real: pd.DataFrame, synthetic: pd.DataFrame, density_max: float = ACS_DENSITY_MAX
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """Both tables' common columns (sorted) as text codes after SDNist's binning, and per column how
    it was binned (``"percentile"``, ``"density"`` or ``"as is"``)."""
    columns = sorted(set(real.columns) & set(synthetic.columns))
    r_out, s_out, how = {}, {}, {}
    for name in columns:
        r_out[name], s_out[name], how[name] = _bin_column(name, real[name], synthetic[name], density_max)
    return pd.DataFrame(r_out, index=real.index), pd.DataFrame(s_out, index=synthetic.index), how


def kmarginal_score(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    group: str | None = "PUMA",
    exclude: Iterable[str] = ("INDP",),
    density_max: float = ACS_DENSITY_MAX,
) -> dict[str, Any]:
    """SDNist's k-marginal score of ``synthetic`` against ``real`` (see the module's description).

    ``group``: the column every marginal is joined with (and scored within); used when both tables
    have it, otherwise the marginals are 2-way and there are no group scores. ``exclude``: columns
    left out of the marginals. Returns a JSON-ready dict: ``score`` (0 to 1000, higher is better),
    ``group_scores`` (per value of the group column with real rows, same scale), ``marginals`` (how
    many), ``degree`` (3 or 2), ``group``, ``mean_l1``, ``binning`` (per column), ``rows`` and
    ``definition``."""
    if len(real) == 0 or len(synthetic) == 0:
        raise ValueError("k-marginal: both tables need rows")
    r, s, how = binned(real, synthetic, density_max)
    grouped = group if group is not None and group in r.columns else None
    skip = set(exclude) | ({group} if group is not None else set())
    columns = [c for c in r.columns if c not in skip]
    pairs = list(itertools.combinations(columns, 2))
    if not pairs:
        raise ValueError(f"k-marginal: fewer than two columns to pair (columns {columns})")
    n_real, n_syn = len(r), len(s)
    codes: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
    for name in r.columns:
        joint, labels = pd.factorize(pd.concat([r[name], s[name]], ignore_index=True), sort=True)
        codes[name] = (joint[:n_real], joint[n_real:], len(labels))
    if grouped is not None:
        g_real, g_syn, n_groups = codes[grouped]
        g_labels = pd.factorize(pd.concat([r[grouped], s[grouped]], ignore_index=True), sort=True)[1]
        g_share = np.bincount(g_real, minlength=n_groups) / n_real  # real density mass of each group
    else:
        g_real, g_syn, n_groups = np.zeros(n_real, np.int64), np.zeros(n_syn, np.int64), 1
        g_share = np.ones(1)
    l1_total = 0.0
    group_total = np.zeros(n_groups)
    for a, b in pairs:
        a_real, a_syn, n_a = codes[a]
        b_real, b_syn, n_b = codes[b]
        size = n_groups * n_a * n_b
        cell_real = (g_real * n_a + a_real) * n_b + b_real
        cell_syn = (g_syn * n_a + a_syn) * n_b + b_syn
        diff = np.abs(np.bincount(cell_real, minlength=size) / n_real - np.bincount(cell_syn, minlength=size) / n_syn)
        l1_total += float(diff.sum())
        per_group = diff.reshape(n_groups, -1).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            group_total += np.minimum(per_group, g_share) / g_share
    mean_l1 = l1_total / len(pairs)
    group_scores: dict[str, float] = {}
    if grouped is not None:
        for i in np.flatnonzero(g_share > 0):
            group_scores[str(g_labels[i])] = float((1 - group_total[i] / len(pairs)) * 1000)
    return {
        "score": float((2 - mean_l1) * 500),
        "definition": DEFINITION,
        "group": grouped,
        "degree": 3 if grouped is not None else 2,
        "marginals": len(pairs),
        "mean_l1": float(mean_l1),
        "group_scores": group_scores,
        "binning": {c: how[c] for c in columns},
        "rows": {"real": int(n_real), "synthetic": int(n_syn)},
    }
