"""Fed-TDA: exact encodings and inverses, covariance repair, the clipped second-moment
sensitivity, the ledger, the non-private test mode, awkward columns."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privsyn_fed as pf
from privsyn_fed.audit import audit_ledger
from privsyn_fed.schema import NumericColumn, numeric_bin
from privsyn_fed.silo import ICDM, Encoding, fit_mixture, mode_cdf, repair_correlation
from privsyn_fed.silo.copula import upper

from .conftest import SCHEMA, assert_audit_objects_only_to_the_seed, make_frame


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.001, 10), min_size=1, max_size=12), st.integers(0, 2**31))
def test_icdm_encode_then_decode_is_the_identity(weights, seed):
    p = np.array(weights) / sum(weights)
    icdm = ICDM(p, 1e-4)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(p), 500)
    assert np.array_equal(icdm.decode(icdm.encode(idx, rng)), idx)


def test_icdm_orders_by_frequency_ascending_ties_by_position():
    icdm = ICDM(np.array([0.5, 0.2, 0.2, 0.1]))
    assert list(icdm._order) == [3, 1, 2, 0]
    assert icdm.lo[3] == pytest.approx(1e-4) and icdm.hi[0] == pytest.approx(1 - 1e-4)


def test_icdm_codes_are_standard_normal_when_lambda_is_small():
    from scipy.stats import kstest

    p = np.array([0.1, 0.3, 0.6])
    rng = np.random.default_rng(1)
    idx = rng.choice(3, size=20000, p=p)
    assert kstest(ICDM(p, 1e-9).encode(idx, rng), "norm").pvalue > 0.01


def one_numeric_schema(lower=0.0, upper=100.0, integer=False, missing=False):
    return pf.Schema.from_dict(
        {
            "columns": [
                {
                    "name": "x",
                    "type": "numeric",
                    "lower": lower,
                    "upper": upper,
                    "bins": 16,
                    "integer": integer,
                    "missing": missing,
                }
            ]
        }
    )


@pytest.mark.parametrize("integer", [False, True])
def test_mode_specific_normalisation_inverts_exactly(integer):
    schema = one_numeric_schema(integer=integer)
    col = schema.columns[0]
    rng = np.random.default_rng(0)
    x = np.concatenate([np.zeros(400), rng.normal(30, 5, 300), rng.normal(70, 8, 300)]).clip(0, 100)
    x = np.round(x) if integer else x
    counts = np.bincount(numeric_bin(col, x), minlength=col.n_bins) + rng.normal(0, 3, col.n_bins)
    mode = mode_cdf(col, counts, fit_mixture(col, counts, 3), 1e-9)
    t, a = mode.encode(x, rng)
    assert np.abs(a).max() <= 6.0
    assert np.allclose(mode.decode(t, a), x, atol=1e-6)
    enc = Encoding(schema, [ICDM(np.append(mode.cum[-1], 1e-9), 1e-9, np.arange(mode.components + 1))], [mode], 1e6)
    z = enc.encode(np.zeros((len(x), 1), dtype=np.int64), x[:, None], rng)
    assert np.allclose(enc.decode(z)["x"].to_numpy(dtype=float), x, atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 8))
def test_repaired_correlation_is_symmetric_positive_definite_with_unit_diagonal(seed, n):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, n))
    noisy = a @ a.T / n + rng.normal(0, rng.uniform(0.01, 3), size=(n, n))  # asymmetric, maybe indefinite
    r, chol = repair_correlation(noisy)
    assert np.allclose(r, r.T) and np.allclose(np.diag(r), 1.0)
    assert np.linalg.eigvalsh(r).min() > 0
    assert np.allclose(chol @ chol.T, r)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 50))
def test_second_moment_sum_moves_by_at_most_b_squared(seed, n):
    """Adding one record adds x x^T to sum_rows x x^T; with rows clipped to norm B the released
    upper triangle moves by at most B^2 in L2 (the sensitivity the ledger records)."""
    schema = pf.Schema.from_dict(SCHEMA)
    silo = pf.Silo.from_frame(make_frame(n + 1, seed % 1000), schema)
    rng = np.random.default_rng(seed)
    enc = _encoding_for(schema, bound=3.0)
    d_rows = enc.encode(silo.rows()[:n], silo.values()[:n], np.random.default_rng(1))
    x = enc.encode(silo.rows()[n:], silo.values()[n:], rng)
    assert np.linalg.norm(x) <= 3.0 + 1e-9
    g_d = upper(d_rows.T @ d_rows)
    full = np.vstack([d_rows, x])
    assert np.linalg.norm(upper(full.T @ full) - g_d) <= 9.0 + 1e-9


def _encoding_for(schema, bound):
    icdm, modes = [], []
    for col in schema.columns:
        if isinstance(col, NumericColumn):
            mode = mode_cdf(col, np.ones(col.n_bins), fit_mixture(col, np.ones(col.n_bins), 3), 1e-4)
            modes.append(mode)
            icdm.append(ICDM(np.ones(mode.components + 1) / (mode.components + 1)))
        else:
            modes.append(None)
            icdm.append(ICDM(np.ones(col.size) / col.size))
    return Encoding(schema, icdm, modes, bound)


@pytest.fixture(scope="module")
def frames():
    return [make_frame(3000, s) for s in range(3)]


def test_ledger_has_one_entry_per_statistic_family_and_totals(frames):
    schema = pf.Schema.from_dict(SCHEMA)
    silos = [pf.Silo.from_frame(f, schema, name=f"s{i}") for i, f in enumerate(frames)]
    result = pf.synthesize(silos, "fedtda", 1.0, 1e-6, seed=2)
    led = result.ledger
    assert [e["sensitivity_l2"] for e in led["entries"]][:3] == pytest.approx([1.0, math.sqrt(3), math.sqrt(2)])
    width = 3 + 2 * 2
    assert led["entries"][3]["sensitivity_l2"] == pytest.approx((2.0 * math.sqrt(width)) ** 2)
    assert led["rho_spent"] == pytest.approx(led["rho_budget"], rel=1e-9)
    assert_audit_objects_only_to_the_seed(led)
    data = result.data
    assert list(data.columns) == schema.names
    assert data["age"].dropna().between(18, 90).all() and (data["age"].dropna() % 1 == 0).all()
    assert data["income"].dropna().between(0, 100).all()
    assert len(np.unique(data["income"].dropna())) > 1000  # real values, not bin midpoints
    assert set(data["sex"]) <= {"F", "M"} and set(data["label"]) <= {"no", "yes"}
    assert 8000 < len(data) < 10000


def test_non_private_mode_reproduces_the_correlations(frames):
    schema = pf.Schema.from_dict(SCHEMA)
    silos = [pf.Silo.from_frame(f, schema, name=f"s{i}") for i, f in enumerate(frames)]
    result = pf.synthesize(silos, "fedtda", 1.0, 1e-6, seed=3, non_private=True, rows=20000)
    assert "NON-PRIVATE TEST MODE" in result.ledger["non_private"] and not audit_ledger(result.ledger).ok
    real, syn = pd.concat(frames), result.data
    corr = lambda df: np.corrcoef(df["age"].astype(float), df["income"].astype(float))[0, 1]
    assert abs(corr(syn) - corr(real)) < 0.15
    for col, value in (("label", "yes"), ("sex", "M")):
        assert abs((syn[col] == value).mean() - (real[col] == value).mean()) < 0.02
    assert abs(syn["region"].isna().mean() - (real["region"] == "").mean()) < 0.02
    # the label still depends on income
    gap = lambda df: (
        df.loc[df.label == "yes", "income"].astype(float).mean()
        - df.loc[df.label == "no", "income"].astype(float).mean()
    )
    assert gap(syn) > 0.5 * gap(real)


def test_degenerate_columns_do_not_divide_by_zero():
    schema = pf.Schema.from_dict(
        {
            "columns": [
                {"name": "const", "type": "numeric", "lower": 5, "upper": 5},
                {"name": "one", "type": "categorical", "categories": ["only"]},
                {"name": "x", "type": "numeric", "lower": 0, "upper": 10, "integer": True},
            ]
        }
    )
    df = pd.DataFrame({"const": [5] * 50, "one": ["only"] * 50, "x": np.arange(50) % 11})
    with np.errstate(all="raise"):
        result = pf.synthesize([pf.Silo.from_frame(df, schema)], "fedtda", 1.0, 1e-6, seed=1, rows=200)
    assert (result.data["const"] == 5).all() and (result.data["one"] == "only").all()
    assert result.data["x"].between(0, 10).all()


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.floats(-10, 110)), min_size=0, max_size=40),
    st.one_of(st.none(), st.floats(-10, 110)),
    st.sampled_from([1, 4, 8]),
    st.booleans(),
)
def test_refined_numeric_histogram_moves_one_cell_for_one_record(values, extra, refine, integer):
    """One record adds one to one cell (a bin or the missing cell): L2 sensitivity 1 per column."""
    from privsyn_fed.schema import numeric_histogram, refined

    col = refined(one_numeric_schema(integer=integer, missing=True).columns[0], refine)
    clip = lambda v: np.nan if v is None else float(np.clip(np.round(v) if integer else v, 0, 100))
    x = np.array([clip(v) for v in values], dtype=float)
    diff = numeric_histogram(col, np.append(x, clip(extra))) - numeric_histogram(col, x)
    assert diff.sum() == 1 and np.abs(diff).sum() == 1
