"""Values inside their bins along the model's frequency polygon (``schema.bin_shape``): the inverse of
the linear distribution function, the polygon of a linear density, values that never leave their bin,
a smooth density followed more closely than by uniform draws, and rows given a range that are
exactly the model's rows inside it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import privsyn_fed as pf
from privsyn_fed.model import GraphicalModel, conditions_from
from privsyn_fed.schema import bin_edges, bin_lengths, decode_codes, numeric_bin
from privsyn_fed.schema.bin_shape import (
    BinShape,
    bin_shape,
    linear_cdf,
    polygon_heights,
    shape_cdf,
    shape_unit,
    shaped_unit,
    tail_rate,
)
from privsyn_fed.schema.draft_edges import quantile_edges

from .test_bins import COLUMNS, _column
from .test_model import _chain, _joint

HEIGHT = st.one_of(st.just(0.0), st.floats(1e-300, 1e300), st.floats(1e-3, 1e3))


@settings(max_examples=300, deadline=None)
@given(a=HEIGHT, b=HEIGHT, u=st.floats(0, 1, exclude_max=True))
def test_the_position_inverts_the_linear_distribution_function(a, b, u):
    """``F(t) = (a t + (b - a) t^2 / 2) / ((a + b) / 2)`` at the drawn ``t`` is ``u`` (``linear_cdf``
    too), for heights from 0 to 1e300; exactly ``u`` when the heights are equal; ``t`` in ``[0, 1)``
    and increasing in ``u``."""
    t = float(shaped_unit(np.array([a]), np.array([b]), np.array([u]))[0])
    assert 0 <= t < 1
    if a == b:  # a flat bin (or no heights): the uniform draw itself
        assert t == u
    else:
        f = (a * t + (b - a) * t * t / 2) / ((a + b) / 2)
        assert f == pytest.approx(u, abs=1e-9)
        assert float(linear_cdf(np.array([a]), np.array([b]), np.array([t]))[0]) == pytest.approx(u, abs=1e-9)
    later = float(shaped_unit(np.array([a]), np.array([b]), np.array([(u + 1) / 2]))[0])
    assert later >= t


@pytest.mark.parametrize("spec", [{"bins": 7}, {"edges": [0.5, 1.0, 3.0, 3.5, 6.0]}])
def test_the_polygon_of_a_linear_density_is_that_density(spec):
    """Masses of ``f(x) = 2 + 3 x`` over bins of equal or unequal width: the heights at every bin's
    ends are ``f`` there (interior edges and both bounds), up to one common factor."""
    column = {"name": "x", "type": "numeric", "lower": 0, "upper": 7, **spec}
    col = pf.Schema.from_dict({"columns": [column]}).columns[0]
    lo, hi = bin_edges(col)
    masses = (2 * (hi - lo) + 1.5 * (hi**2 - lo**2)) / 100
    a, b = polygon_heights(masses, *bin_lengths(col))
    assert np.allclose(a / a[0], (2 + 3 * lo) / 2) and np.allclose(b / a[0], (2 + 3 * hi) / 2)


@pytest.mark.parametrize("kind", COLUMNS)
def test_shaped_values_never_leave_their_bin(kind):
    """Any heights (zeros included): every decoded value encodes back into the bin it was drawn for."""
    col = _column(**COLUMNS[kind])
    rng = np.random.default_rng(5)
    masses = rng.exponential(size=col.n_bins) * (rng.random(col.n_bins) < 0.7)
    masses[[0, -1]] = [1e-3, 1e-4]  # a long tail at both ends: exponential end bins
    shape = bin_shape(masses, *bin_lengths(col))
    assert np.any(shape.tail != 0)
    schema = pf.Schema.from_dict({"columns": [col.to_dict()]})
    codes = np.repeat(np.arange(col.n_bins), 200)[:, None]
    values = decode_codes(codes, schema, rng, shapes={"income": shape})["income"].to_numpy(dtype=float)
    assert np.all(numeric_bin(col, values) == codes[:, 0])


def _triangle_model() -> GraphicalModel:
    """A real column on ``[0, 1]`` in 4 bins holding the masses of the density ``2x``."""
    schema = pf.Schema.from_dict({"columns": [{"name": "x", "type": "numeric", "lower": 0, "upper": 1, "bins": 4}]})
    edges = np.linspace(0, 1, 5)
    return GraphicalModel.independent([np.diff(edges**2)], schema, 40_000.0)


def test_a_smooth_density_is_followed_closer_than_by_uniform_draws():
    """40,000 rows of the density ``2x`` kept as 4 bins (seed 11): the polygon is exact for a linear
    density, so its draws pass a KS test against the CDF ``x^2``; uniform draws inside the same bins
    are off by the histogram's bias (``1/64`` at most)."""
    model = _triangle_model()
    shaped = model.sample(40_000, 11)["x"].to_numpy(dtype=float)
    model.shapes = {}
    uniform = model.sample(40_000, 11)["x"].to_numpy(dtype=float)
    cdf = lambda x: np.clip(x, 0, 1) ** 2  # noqa: E731
    assert stats.kstest(shaped, cdf).pvalue > 0.01
    assert stats.kstest(uniform, cdf).statistic > 0.012 > stats.kstest(shaped, cdf).statistic
    assert np.array_equal(np.digitize(shaped, [0.25, 0.5, 0.75]), np.digitize(uniform, [0.25, 0.5, 0.75]))


def test_a_range_gives_exactly_the_models_rows_inside_it():
    """Given ``x`` in ``0.3..1`` (dividing bin ``[0.25, 0.5)``), the model of density ``2x`` has
    probability ``1 - 0.3^2`` and its rows follow ``2x`` on ``[0.3, 1]``: the condition weighs the divided
    bin by the polygon's share and the draw follows the polygon inside the range."""
    model = _triangle_model()
    (cond,) = conditions_from({"x": (0.3, 1.0)}, model.schema)
    given_x = model.given([cond])
    assert given_x.probability == pytest.approx(1 - 0.09, abs=1e-12)
    x = given_x.sample(40_000, 3)["x"].to_numpy(dtype=float)
    assert x.min() >= 0.3
    assert stats.kstest(x, lambda v: (np.clip(v, 0.3, 1) ** 2 - 0.09) / 0.91).pvalue > 0.01


def test_an_integer_columns_rows_given_a_range_are_its_rows_inside_the_range():
    """Whole numbers 0..40 in 6 bins with the atom 10 and uneven masses: the rows drawn given ``7..23``
    have the value counts of the unconditioned rows that fall in ``7..23`` (chi-square, fixed seeds), and
    the condition's probability is their share."""
    column = {"name": "n", "type": "numeric", "lower": 0, "upper": 40, "bins": 6, "integer": True, "atoms": [10]}
    schema = pf.Schema.from_dict({"columns": [column]})
    masses = np.array([0.05, 0.3, 0.1, 0.25, 0.05, 0.15, 0.1])  # 6 bins, then the atom
    model = GraphicalModel.independent([masses], schema, 1000.0)
    everything = model.sample(400_000, 1)["n"].to_numpy(dtype=np.int64)
    inside = everything[(everything >= 7) & (everything <= 23)]
    (cond,) = conditions_from({"n": (7, 23)}, schema)
    given_n = model.given([cond])
    assert given_n.probability == pytest.approx(len(inside) / len(everything), abs=0.003)
    drawn = given_n.sample(60_000, 2)["n"].to_numpy(dtype=np.int64)
    assert drawn.min() >= 7 and drawn.max() <= 23
    values = np.arange(7, 24)
    table = np.array([[np.sum(inside == v) for v in values], [np.sum(drawn == v) for v in values]])
    assert stats.chi2_contingency(table[:, table.sum(axis=0) > 0]).pvalue > 1e-3


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_columns_marginal_is_the_joints(seed):
    tree, _ = _chain(seed)
    joint = _joint(tree)
    marginals = tree.column_marginals()
    for axis, name in enumerate("ABCD"):
        expected = joint.sum(axis=tuple(k for k in range(4) if k != axis))
        assert np.allclose(marginals[name], expected)


SIGNED_RATE = st.one_of(st.floats(1e-6, 1e6), st.floats(-1e6, -1e-6))


@settings(max_examples=300, deadline=None)
@given(s=SIGNED_RATE, u=st.floats(0, 1, exclude_max=True))
def test_the_position_inverts_the_exponential_distribution_function(s, u):
    """A bin drawn exponentially (density ``exp(s t)``, rates from 1e-6 to 1e6 either way): the drawn
    ``t`` lies in ``[0, 1)``, ``(e^(s t) - 1) / (e^s - 1)`` there is ``u``, and ``t`` grows with ``u``."""
    shape = BinShape(np.ones(1), np.ones(1), np.array([s]))
    t = float(shape_unit(shape, np.array([u]))[0])
    assert 0 <= t < 1
    assert float(shape_cdf(shape, np.array([t]))[0]) == pytest.approx(u, abs=1e-9)
    assert float(shape_unit(shape, np.array([(u + 1) / 2]))[0]) >= t


@settings(max_examples=200, deadline=None)
@given(ratio=st.floats(1e-6, 0.4999))
def test_the_tail_rate_holds_the_bins_mass(ratio):
    """``(1 - e^-k) / k`` at the rate found is the bin's density over its higher height, with ``k``
    above 1.59 (where the line from that height to 0 would hold the mass exactly)."""
    k = tail_rate(ratio)
    assert k > 1.59 and -np.expm1(-k) / k == pytest.approx(ratio, rel=1e-9)


def _pareto_column():
    """100,000 heavy-tailed values (a Pareto tail, seed 7) and a column cut as a plain draft cuts it
    (its 32 quantiles, least and greatest values), with the model of their exact bin masses."""
    rng = np.random.default_rng(7)
    real = np.round((rng.pareto(2.5, 100_000) * 50 + 1) * 100) / 100
    cuts = quantile_edges(real, 0.0, 2 * real.max(), 32, False, real.min(), real.max())
    column = {"name": "w", "type": "numeric", "lower": 0, "upper": float(2 * real.max()), "edges": cuts}
    schema = pf.Schema.from_dict({"columns": [column]})
    counts = np.bincount(numeric_bin(schema.columns[0], real), minlength=schema.columns[0].size).astype(float)
    return real, GraphicalModel.independent([counts / counts.sum()], schema, float(len(real)))


def test_a_long_tails_outer_bin_is_drawn_near_its_inner_edge():
    """The Pareto column above: its outer bin (the 31/32 quantile to the greatest value) holds a 32nd
    of the rows across 94% of the range. The line from the polygon's height there (clipped towards the
    near-empty bin beyond) spread them across it: 99th percentile 1,217 against the real 264, mean 55.7
    against 34.0. The exponential that meets the polygon there and holds the bin's mass keeps both
    within a quarter; every row stays in the bin the model drew for it."""
    real, model = _pareto_column()
    col = model.schema.columns[0]
    shape = model.bin_shapes()["w"]
    masses = model.tree.column_marginals()["w"][: col.n_bins]
    d = masses / bin_lengths(col)[1]
    for cell in np.flatnonzero(shape.tail):  # the exponential meets the polygon at the higher edge
        k = abs(shape.tail[cell])
        high = max(shape.low[cell], shape.high[cell])
        assert d[cell] * k / -np.expm1(-k) == pytest.approx(high, rel=1e-9)
    assert shape.tail[-2] < 0  # the outer bin, decaying from its lower edge
    shaped = model.sample(100_000, 1)["w"].to_numpy(dtype=float)
    model.shapes = {"w": shape._replace(tail=np.zeros_like(shape.tail))}
    lines = model.sample(100_000, 1)["w"].to_numpy(dtype=float)
    assert np.array_equal(numeric_bin(col, shaped), numeric_bin(col, lines))
    p99 = np.percentile(real, 99)
    assert abs(np.percentile(shaped, 99) / p99 - 1) < 0.25 and np.percentile(lines, 99) > 3 * p99
    assert abs(shaped.mean() / real.mean() - 1) < 0.1 and lines.mean() > 1.5 * real.mean()


def test_only_a_tails_bins_are_drawn_exponentially():
    """Bins of width 1: the two lowest (0.1% and 3% of the mass, rising towards the body) decay
    towards the column's lower end, so they are drawn near their upper edges; a valley in the body
    (a twentieth of its neighbours' density, as noise leaves in a small release) and the last bin
    (whose height rises towards the end) keep their lines."""
    masses = np.array([0.001, 0.03, 0.2, 0.2, 0.01, 0.2, 0.2, 0.159])
    ones = np.ones(len(masses))
    shape = bin_shape(masses, ones, ones)
    assert shape.tail[0] > 0 and shape.tail[1] > 0
    assert np.all(shape.tail[2:] == 0)
    shaped = shape_unit(shape.at(np.zeros(20_000, dtype=np.int64)), np.random.default_rng(2).random(20_000))
    assert np.mean(shaped) > 2 / 3  # the triangle rising to the upper edge has its mean at 2/3
