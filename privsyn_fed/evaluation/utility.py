"""Utility and disclosure measures of a synthetic table against the real one (not private: run by
whoever may see the real data, e.g. on a benchmark's public table).

* ``workload_error``: mean over a seeded workload of 3-way marginals of
  ``|| M_r(real)/|real| - M_r(syn)/|syn| ||_1`` (between 0 and 2), on the schema's bins;
* per column: total variation distance between the binned distributions, and for numeric
  columns the Kolmogorov-Smirnov statistic on the values;
* per pair: correlation similarity ``1 - |r_real - r_syn| / 2`` (Pearson, numeric pairs) and
  contingency similarity ``1 - TV`` of the binned 2-way table (other pairs);
* ``fidelity``: mean Jensen-Shannon distance over categorical columns and mean Wasserstein
  distance over numeric columns scaled to [0, 1] by their bounds (the Fed-TDA paper's measures);
* ``tstr``: ROC-AUC on a real holdout of a gradient-boosted tree trained on the synthetic rows
  (train on synthetic, test on real), beside the same model trained on the real rows;
* ``dcr``: distance to closest record of synthetic rows, to the real (training) rows and to the
  holdout; a generator that copies training rows sits much closer to them than to the holdout;
* ``nll``: mean negative log-likelihood (nats) of the holdout rows under the method's model (its
  exact likelihood: cells the model believes nearly empty cost many nats);
* ``constraints`` (a schema with public constraints): per constraint, the real and the synthetic
  rows that break it (``schema.constraints.violation_report``);
* ``kmarginal`` (asked for, or a schema with a ``PUMA`` column): SDNist v2.3's k-marginal score,
  0 to 1000, overall and per PUMA (``kmarginal.kmarginal_score``), with two more of its measures,
  ``pmse`` and ``unique_exact_matches`` (``sdnist_measures``);
* ``numeric``: per numeric column, the mean, quantiles and point-mass shares, real against
  synthetic (``numeric_summary.numeric_summary``);
* ``per_silo`` (with a silo column): each silo's share of the rows, mean total variation and
  workload error within it (``per_silo.per_silo``).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np
import pandas as pd

from ..common import InputError, Progress, checkpoint
from ..methods import sample_workload, workload_count
from ..schema import NumericColumn, Schema, encode_frame, numbers_as_text
from ..silo import marginal_counts
from .numeric_summary import numeric_summary


def as_text(df: pd.DataFrame) -> pd.DataFrame:
    """Values as CSV text (missing as empty), as the encoder reads files. Floating-point columns (a
    Parquet file's numbers) write whole numbers without a decimal point (``3.0`` as ``3``), so a
    category stored as a number reads as the schema's ``"3"``."""
    out = df.astype(object).where(df.notna(), "").astype(str)
    for name in df.columns:
        if pd.api.types.is_float_dtype(df[name].dtype):
            out[name] = numbers_as_text(df[name].to_numpy(dtype=float, na_value=np.nan))
    return out


def encode(df: pd.DataFrame, schema: Schema, source: str) -> np.ndarray:
    """The table's values encoded on ``schema`` (an ``(n, d)`` code array); ``source`` names it in
    errors."""
    return encode_frame(as_text(df), schema, source)[0]


def marginal_shares(codes: np.ndarray, shape: list[int], clique) -> np.ndarray:
    """The share of encoded rows in each cell of ``clique`` (column indices), row-major; sums to 1."""
    counts = marginal_counts(codes, shape, list(clique)).astype(float)
    return counts / max(1.0, counts.sum())


_marginal = marginal_shares

#: The most 3-way marginals an evaluation's workload may hold (all of them over up to 182 columns).
MAX_EVALUATION_WORKLOAD = 1_000_000
#: Seconds of a long evaluation between two progress lines (none for an evaluation this short).
PROGRESS_SECONDS = 5.0


class Steps:
    """Called once per step of a long loop: a safe point each time (SIGINT and SIGTERM stop there)
    and, every ``PROGRESS_SECONDS``, a line on ``progress``: what is measured, steps done of all."""

    def __init__(self, progress: Progress | None, what: str, total: int):
        self.progress, self.what, self.total = progress, what, total
        self.start = self.due = time.monotonic()
        self.due += PROGRESS_SECONDS

    def __call__(self, done: int) -> None:
        """A safe point, ``done`` steps into the loop, and the progress line when one is due."""
        checkpoint()
        if self.progress is None or time.monotonic() < self.due:
            return
        elapsed = time.monotonic() - self.start
        share = done / max(1, self.total)
        self.progress.log(f"{self.what}: {done:,} of {self.total:,} ({share:.0%}), {elapsed:.0f}s")
        self.due = time.monotonic() + PROGRESS_SECONDS


def evaluation_workload(schema: Schema, size: int | None = 64, seed: int = 0) -> list[tuple[int, ...]]:
    """The seeded workload of 3-way marginals (fewer columns: one marginal of them all) that
    ``evaluate`` scores; ``size`` None means all of them, refused (``InputError``) beyond
    ``MAX_EVALUATION_WORKLOAD``, counted before any is listed."""
    count = workload_count(len(schema.names), 3, size)
    if count > MAX_EVALUATION_WORKLOAD:
        raise InputError(
            f"the evaluation workload would hold {count:,} 3-way marginals, more than the "
            f"{MAX_EVALUATION_WORKLOAD:,} an evaluation scores; give a workload size of at most that"
        )
    return sample_workload(len(schema.names), 3, size, seed)


def marginal_errors(
    real: np.ndarray, synthetic: np.ndarray, shape: list[int], workload, progress: Progress | None = None
) -> np.ndarray:
    """``|| M_r(real)/|real| - M_r(syn)/|syn| ||_1`` (between 0 and 2) of each marginal ``r`` of
    ``workload``, in order, on encoded rows (a long workload shows its progress: ``Steps``)."""
    step = Steps(progress, "workload marginals", len(workload))
    out = []
    for n, c in enumerate(workload):
        step(n)
        out.append(np.abs(_marginal(real, shape, c) - _marginal(synthetic, shape, c)).sum())
    return np.array(out)


def workload_error(
    real: np.ndarray, synthetic: np.ndarray, shape: list[int], workload, progress: Progress | None = None
) -> float:
    """Mean over ``workload`` of ``|| M_r(real)/|real| - M_r(syn)/|syn| ||_1`` (between 0 and 2), on
    encoded rows."""
    return float(np.mean(marginal_errors(real, synthetic, shape, workload, progress)))


def cramers_v(codes: np.ndarray, shape: list[int], i: int, j: int) -> float:
    """Bias-corrected Cramer's V (Bergsma 2013) between columns ``i`` and ``j`` of encoded rows, on
    the schema's bins (missing is a cell like any other): 0 when they are independent, 1 when one
    determines the other; NaN when either is constant or there are fewer than 2 rows."""
    table = marginal_counts(codes, shape, [i, j]).reshape(shape[i], shape[j]).astype(float)
    table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
    n = table.sum()
    r, k = table.shape
    if r < 2 or k < 2 or n < 2:
        return float("nan")
    expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / n
    phi2 = float(((table - expected) ** 2 / expected).sum()) / n
    phi2 = max(0.0, phi2 - (k - 1) * (r - 1) / (n - 1))
    rc, kc = r - (r - 1) ** 2 / (n - 1), k - (k - 1) ** 2 / (n - 1)
    scale = min(kc - 1, rc - 1)
    return float(min(1.0, np.sqrt(phi2 / scale))) if scale > 0 else float("nan")


def association_matrix(codes: np.ndarray, shape: list[int]) -> np.ndarray:
    """``cramers_v`` of every pair of columns, as a symmetric ``(d, d)`` matrix with NaN on the
    diagonal."""
    d = len(shape)
    out = np.full((d, d), np.nan)
    for i, j in itertools.combinations(range(d), 2):
        out[i, j] = out[j, i] = cramers_v(codes, shape, i, j)
    return out


def numeric_columns(df: pd.DataFrame, schema: Schema) -> dict[str, pd.Series]:
    """Each numeric column's values as floats (NaN where missing), parsed once."""
    return {
        c.name: pd.to_numeric(as_text(df[[c.name]])[c.name], errors="coerce")
        for c in schema.columns
        if isinstance(c, NumericColumn)
    }


def _present(values: pd.Series) -> np.ndarray:
    x = values.to_numpy(dtype=float)
    return x[np.isfinite(x)]


def column_tv(real: np.ndarray, syn: np.ndarray, shape: list[int], j: int) -> float:
    """The total variation distance between column ``j``'s binned distributions in two code arrays."""
    return 0.5 * float(np.abs(_marginal(real, shape, [j]) - _marginal(syn, shape, [j])).sum())


def column_shapes(real_num, syn_num, real, syn, schema: Schema) -> dict[str, dict[str, float]]:
    """Per column, the total variation distance between the binned distributions (``tv``) and, for a
    numeric column with values on both sides, the two-sample Kolmogorov-Smirnov statistic (``ks``)."""
    from scipy.stats import ks_2samp

    out, shape = {}, schema.shape
    for j, col in enumerate(schema.columns):
        entry = {"tv": column_tv(real, syn, shape, j)}
        if isinstance(col, NumericColumn):
            a, b = _present(real_num[col.name]), _present(syn_num[col.name])
            if len(a) and len(b):
                entry["ks"] = float(ks_2samp(a, b).statistic)
        out[col.name] = entry
    return out


def fidelity(real_num, syn_num, real, syn, schema: Schema) -> dict[str, float | None]:
    """The Fed-TDA paper's fidelity measures: mean Jensen-Shannon distance (base 2) between the
    category distributions of the categorical columns, and mean Wasserstein distance between the
    numeric columns' values scaled to [0, 1] by their public bounds."""
    from scipy.spatial.distance import jensenshannon
    from scipy.stats import wasserstein_distance

    jsd, wd, shape = [], [], schema.shape
    for j, col in enumerate(schema.columns):
        if isinstance(col, NumericColumn):
            a, b = _present(real_num[col.name]), _present(syn_num[col.name])
            span = col.upper - col.lower
            if len(a) and len(b):
                wd.append(0.0 if span == 0 else wasserstein_distance((a - col.lower) / span, (b - col.lower) / span))
        else:
            jsd.append(float(jensenshannon(_marginal(real, shape, [j]), _marginal(syn, shape, [j]), 2.0)))
    return {"jsd": float(np.mean(jsd)) if jsd else None, "wd": float(np.mean(wd)) if wd else None}


def pair_trends(real_num, syn_num, real, syn, schema: Schema, progress: Progress | None = None) -> dict[str, float]:
    """Mean correlation similarity ``1 - |r_real - r_syn| / 2`` over numeric pairs whose Pearson
    coefficient is defined on both sides, and mean contingency similarity ``1 - TV`` of the binned
    2-way tables over the other pairs; ``None`` when there is no such pair. A long loop over the
    pairs shows its progress on ``progress`` (``Steps``)."""
    corr, cont, shape = [], [], schema.shape
    numeric = {c.name for c in schema.columns if isinstance(c, NumericColumn)}
    d = len(schema.columns)
    step = Steps(progress, "column pairs", d * (d - 1) // 2)
    for n, (i, j) in enumerate(itertools.combinations(range(d), 2)):
        step(n)
        a, b = schema.columns[i].name, schema.columns[j].name
        if a in numeric and b in numeric:
            r = [_pearson(num[a], num[b]) for num in (real_num, syn_num)]
            if all(np.isfinite(r)):
                corr.append(1.0 - abs(r[0] - r[1]) / 2.0)
        else:
            tv = 0.5 * np.abs(_marginal(real, shape, [i, j]) - _marginal(syn, shape, [i, j])).sum()
            cont.append(1.0 - float(tv))
    return {
        "correlation_similarity": float(np.mean(corr)) if corr else None,
        "contingency_similarity": float(np.mean(cont)) if cont else None,
    }


def _pearson(x: pd.Series, y: pd.Series) -> float:
    ok = x.notna() & y.notna()
    if ok.sum() < 3 or x[ok].std() == 0 or y[ok].std() == 0:
        return float("nan")
    return float(np.corrcoef(x[ok], y[ok])[0, 1])


def tstr_auc(train: np.ndarray, test: np.ndarray, schema: Schema, label: str, seed: int = 0) -> float | None:
    """ROC-AUC on ``test`` of a gradient-boosted tree fitted to ``train`` (encoded rows)."""
    j = schema.names.index(label)
    return label_auc(test[:, j], label_probabilities(train, test, schema, label, seed))


def label_probabilities(train: np.ndarray, test: np.ndarray, schema: Schema, label: str, seed: int = 0) -> np.ndarray:
    """``P(label = c | row)`` for each ``test`` row (rows) and each of the label's cells ``c``
    (columns), from a gradient-boosted tree fitted to ``train``: 0 for a cell ``train`` lacks, and
    a constant predictor where ``train`` holds one cell only."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    j = schema.names.index(label)
    features = [i for i in range(len(schema.names)) if i != j]
    categorical = [not isinstance(schema.columns[i], NumericColumn) for i in features]
    y_train = train[:, j]
    out = np.zeros((len(test), schema.shape[j]))
    seen = np.unique(y_train)
    if len(seen) < 2:
        out[:, seen] = 1.0
        return out
    clf = HistGradientBoostingClassifier(categorical_features=np.array(categorical), random_state=seed, max_iter=200)
    clf.fit(train[:, features], y_train)
    out[:, clf.classes_] = clf.predict_proba(test[:, features])
    return out


def label_auc(y: np.ndarray, proba: np.ndarray) -> float | None:
    """ROC-AUC of ``proba`` (``label_probabilities``) for the label's cells ``y``: of the higher
    cell's probability where ``y`` holds two cells, one-against-rest over the cells ``y`` holds
    (renormalised over them) where more; None where ``y`` holds one cell only."""
    from sklearn.metrics import roc_auc_score

    classes = np.unique(y)
    if len(classes) < 2:
        return None
    if len(classes) == 2:
        return float(roc_auc_score(y == classes[1], proba[:, classes[1]]))
    full = proba[:, classes] / np.maximum(proba[:, classes].sum(axis=1, keepdims=True), 1e-12)
    return float(roc_auc_score(y, full, multi_class="ovr", labels=classes))


def _features(codes: np.ndarray, schema: Schema) -> np.ndarray:
    """Numeric bins scaled to [0, 1]; other columns one-hot (so a mismatch costs 1)."""
    parts = []
    for j, col in enumerate(schema.columns):
        if isinstance(col, NumericColumn):
            parts.append(codes[:, [j]] / max(1, schema.shape[j] - 1))
        else:
            parts.append(np.eye(schema.shape[j])[codes[:, j]] / np.sqrt(2.0))
    return np.hstack(parts)


def dcr_distances(
    real: np.ndarray, holdout: np.ndarray, syn: np.ndarray, schema: Schema, rows: int = 2000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Distances from up to ``rows`` synthetic rows to the nearest training row and to the nearest
    holdout row (both sets cut to the same size), on numeric bins scaled to [0, 1] and one-hot
    categories: ``(to training, to holdout)``, one entry per synthetic row drawn."""
    from sklearn.neighbors import NearestNeighbors

    rng = np.random.default_rng(seed)
    pick = lambda a, n: a[rng.choice(len(a), size=min(n, len(a)), replace=False)]
    n_ref = min(len(real), len(holdout))
    train_ref, hold_ref = pick(real, n_ref), pick(holdout, n_ref)
    query = _features(pick(syn, rows), schema)
    d_train = NearestNeighbors(n_neighbors=1).fit(_features(train_ref, schema)).kneighbors(query)[0][:, 0]
    d_hold = NearestNeighbors(n_neighbors=1).fit(_features(hold_ref, schema)).kneighbors(query)[0][:, 0]
    return d_train, d_hold


def distance_to_closest_record(
    real: np.ndarray, holdout: np.ndarray, syn: np.ndarray, schema: Schema, rows: int = 2000, seed: int = 0
) -> dict[str, float]:
    """``dcr_distances`` summarised: their medians, the share of synthetic rows closer to training
    (ties count half) and the share at distance 0 from a training row."""
    d_train, d_hold = dcr_distances(real, holdout, syn, schema, rows, seed)
    closer = float(np.mean(d_train < d_hold) + 0.5 * np.mean(d_train == d_hold))
    return {
        "median_to_train": float(np.median(d_train)),
        "median_to_holdout": float(np.median(d_hold)),
        "share_closer_to_train": closer,
        "exact_copies_of_train": float(np.mean(d_train == 0)),
    }


def holdout_nll(model: Any, holdout: np.ndarray, schema: Schema) -> dict[str, float]:
    """Mean and median ``-log p(x)`` (nats) of encoded holdout rows under a release's graphical or
    independent model (``model.ReleasedModel``, its ``JunctionTree``, or a ``FittedModel``), which
    must be over the schema's columns and bins. A mean far above the median means a few rows fall
    in cells the model believes nearly empty."""
    from ..common import InputError
    from ..model import GraphicalModel, JunctionTree

    model = getattr(model, "sampler", model)  # a saved_model.ReleasedModel: its sampler
    if isinstance(model, GraphicalModel):
        model = model.tree
    if isinstance(model, JunctionTree):
        fact = model
    elif hasattr(model, "potentials"):
        from ..methods.pgm import MarginalReader

        fact = MarginalReader(model).factorisation()
    else:
        raise InputError("model: the holdout likelihood needs a graphical or independent model")
    size = dict(zip(schema.names, schema.shape))
    for clique, table in fact.factors:
        for attr, n in zip(clique, table.shape):
            if size.get(attr) != n:
                raise InputError(f"model: column '{attr}' with {n} cells does not match the schema")
    nll = -fact.log_likelihood(holdout, schema.names)
    return {"mean": float(nll.mean()), "median": float(np.median(nll))}


def evaluate(
    real_df: pd.DataFrame,
    syn_df: pd.DataFrame,
    schema: Schema,
    *,
    holdout_df: pd.DataFrame | None = None,
    label: str | None = None,
    workload_size: int | None = 64,
    workload_seed: int = 0,
    model: Any = None,
    seed: int = 0,
    kmarginal: bool | None = None,
    silo_column: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """All the measures above as a JSON-ready dict (``tstr``, ``dcr``, ``nll`` need a holdout;
    ``kmarginal``: True or False to ask for the k-marginal score or not, None for it when the
    schema has a ``PUMA`` column; ``per_silo`` with a ``silo_column``). A long evaluation shows its
    progress on ``progress`` (a line every ``PROGRESS_SECONDS``)."""
    real = encode(real_df, schema, "real")
    syn = encode(syn_df, schema, "synthetic")
    shape = schema.shape
    real_num, syn_num = numeric_columns(real_df, schema), numeric_columns(syn_df, schema)
    workload = evaluation_workload(schema, workload_size, workload_seed)
    report: dict[str, Any] = {
        "rows": {"real": int(len(real)), "synthetic": int(len(syn))},
        "workload": {
            "degree": min(3, len(schema.names)),
            "size": len(workload),
            "seed": workload_seed,
            "error": workload_error(real, syn, shape, workload, progress),
        },
        "columns": column_shapes(real_num, syn_num, real, syn, schema),
        "pairs": pair_trends(real_num, syn_num, real, syn, schema, progress),
        "fidelity": fidelity(real_num, syn_num, real, syn, schema),
        "numeric": numeric_summary(real_num, syn_num, schema),
    }
    cols = report["columns"].values()
    report["mean_tv"] = float(np.mean([c["tv"] for c in cols]))
    ks = [c["ks"] for c in cols if "ks" in c]
    report["mean_ks"] = float(np.mean(ks)) if ks else None
    if schema.constraints:
        from ..schema import violation_report

        report["constraints"] = violation_report(schema, {"real": real_df, "synthetic": syn_df})
    if silo_column is not None:
        from .per_silo import per_silo

        def within(r: np.ndarray, s: np.ndarray, others: list[int]) -> dict[str, float | None]:
            """The silo's other columns' mean 1-way total variation and its workload error (None
            where either side has no rows)."""
            if not len(r) or not len(s):
                return {"mean_tv": None, "workload_error": None}
            tvs = [column_tv(r, s, shape, k) for k in others]
            return {
                "mean_tv": float(np.mean(tvs)) if tvs else 0.0,
                "workload_error": workload_error(r, s, shape, workload),
            }

        report["per_silo"] = {"column": silo_column, "silos": per_silo(real, syn, schema, silo_column, within)}
    if kmarginal or (kmarginal is None and "PUMA" in schema.names):
        from .kmarginal import kmarginal_score
        from .sdnist_measures import pmse, unique_exact_matches

        report["kmarginal"] = kmarginal_score(real_df[schema.names], syn_df[schema.names])
        report["pmse"] = pmse(real_df[schema.names], syn_df[schema.names], seed)
        report["unique_exact_matches"] = unique_exact_matches(real_df[schema.names], syn_df[schema.names])
    if holdout_df is not None:
        hold = encode(holdout_df, schema, "holdout")
        report["rows"]["holdout"] = int(len(hold))
        if label is not None:
            report["tstr"] = {
                "label": label,
                "auc_synthetic": tstr_auc(syn, hold, schema, label, seed),
                "auc_real": tstr_auc(real, hold, schema, label, seed),
            }
        report["dcr"] = distance_to_closest_record(real, hold, syn, schema, seed=seed)
        if model is not None:
            report["nll"] = holdout_nll(model, hold, schema)
    return report
