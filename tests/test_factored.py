"""Large junction-tree nodes kept as their factors (``methods.factored``) against built tables."""

import numpy as np
import pytest

from privsyn_fed.methods import factored, halves, mirror, pgm
from privsyn_fed.methods.graphical import Measurement

#: The loss cliques of a late model of an Adult AIM release: triangulation joins them into a node of
#: 362,880 cells that holds three loss cliques of 368 cells in all.
ADULT_SIZES = {
    "age": 32, "workclass": 9, "fnlwgt": 32, "education": 16, "education-num": 16, "marital-status": 7,
    "occupation": 15, "relationship": 6, "race": 5, "sex": 2, "capital-gain": 32, "capital-loss": 32,
    "hours-per-week": 32, "native-country": 42, "income": 2,
}  # fmt: skip
ADULT_CLIQUES = [
    ("age", "marital-status", "income"), ("age", "workclass"), ("capital-gain", "income"),
    ("capital-loss", "income"), ("education", "education-num"), ("education", "income"),
    ("education", "occupation"), ("education", "relationship"), ("education-num", "marital-status"),
    ("education-num", "sex"), ("fnlwgt",), ("marital-status", "occupation", "sex"), ("marital-status", "race"),
    ("native-country",), ("occupation", "hours-per-week"), ("occupation", "income"), ("occupation", "race"),
    ("relationship", "hours-per-week"), ("relationship", "race"), ("race", "sex"), ("sex", "hours-per-week", "income"),
    ("workclass", "education-num"), ("workclass", "hours-per-week"), ("workclass", "income"),
    ("workclass", "marital-status"), ("workclass", "race"), ("workclass", "relationship"),
]  # fmt: skip


def _einsum(terms, tables, onto):
    labels = {a: k for k, a in enumerate(dict.fromkeys(a for t in terms for a in t))}
    operands = [x for t, table in zip(terms, tables) for x in (table, [labels[a] for a in t])]
    return np.einsum(*operands, [labels[a] for a in onto])


def test_a_contraction_is_the_sum_of_its_tables_product():
    """Random tables over random columns (sizes 1 to 4; a column in one table only, in several,
    summed or kept; the result in any order, or a single number): numpy's einsum's values; a
    result's column that no table holds repeats them along it."""
    rng = np.random.default_rng(0)
    columns = list("abcdefgh")
    sizes = {a: int(n) for a, n in zip(columns, rng.integers(1, 5, len(columns)))}
    sizes["h"] = 3
    for _ in range(300):
        terms = [tuple(rng.choice(columns[:-1], rng.integers(1, 4), replace=False)) for _ in range(rng.integers(1, 6))]
        used = list(dict.fromkeys(a for t in terms for a in t))
        onto = tuple(rng.permutation(used)[: rng.integers(0, len(used) + 1)])
        tables = [rng.random([sizes[a] for a in t]) for t in terms]
        got = factored.Contraction(terms, sizes, onto)(*tables)
        assert got.shape == tuple(sizes[a] for a in onto)
        np.testing.assert_allclose(got, _einsum(terms, tables, onto), rtol=1e-12)
        at = int(rng.integers(0, len(onto) + 1))
        wider = factored.Contraction(terms, sizes, onto[:at] + ("h",) + onto[at:])(*tables)
        for k in range(3):
            np.testing.assert_allclose(np.take(wider, k, axis=at), got, rtol=1e-12)


def _plans(domain, cliques):
    ms = [Measurement(c, np.zeros(domain.size(c)), 1.0) for c in cliques]
    return mirror.Plan(domain, ms), mirror.Plan(domain, ms, factor=False)


def test_adults_fill_in_node_is_kept_as_factors_with_the_same_marginals():
    """On the Adult model's cliques the 362,880-cell node is factored and every other node built;
    the marginals equal the built plan's to rounding, for random potentials."""
    domain = pgm.make_domain(list(ADULT_SIZES), list(ADULT_SIZES.values()))
    plan, every = _plans(domain, ADULT_CLIQUES)
    assert plan.factors is not None
    assert [domain.size(plan.factors.nodes[n].columns) for n in plan.factors.nodes] == [362_880]
    assert plan.cells == every.cells - 362_880
    rng = np.random.default_rng(0)
    for scale in (0.5, 3.0):
        theta = rng.normal(0, scale, int(plan.offsets[-1]))
        np.testing.assert_allclose(plan.marginals(theta, 48_842.0), every.marginals(theta, 48_842.0), rtol=1e-11)


def _random_model(seed):
    rng = np.random.default_rng(seed)
    names = list("abcdefg")
    domain = pgm.make_domain(names, [int(n) for n in rng.integers(2, 6, len(names))])
    cliques = sorted({tuple(rng.choice(names, rng.integers(2, 4), replace=False)) for _ in range(rng.integers(3, 8))})
    return domain, cliques, rng


@pytest.mark.parametrize("seed", range(8))
def test_factored_nodes_give_the_built_plans_marginals_and_fits(monkeypatch, seed):
    """Every node that holds a loss clique factored, but the smallest (random models: trees,
    cycles filled in, forests; potentials of scale 0.5 to 4): the built plan's marginals to
    rounding, and a fit of 100 steps its model."""
    monkeypatch.setattr(factored, "FACTOR_CELLS", 1)
    monkeypatch.setattr(factored, "PASS_FLOPS", 1e12)
    domain, cliques, rng = _random_model(seed)
    plan, every = _plans(domain, cliques)
    assert plan.factors is not None and plan.nodes
    for scale in (0.5, 4.0):
        theta = rng.normal(0, scale, int(plan.offsets[-1]))
        np.testing.assert_allclose(plan.marginals(theta, 1000.0), every.marginals(theta, 1000.0), rtol=1e-10)
    assert plan._every is None  # no step needed the built plan
    meas = [Measurement(c, rng.random(domain.size(c)) * 100, 2.0) for c in cliques]
    fits = []
    for factor_cells in (1, 10**12):
        monkeypatch.setattr(factored, "FACTOR_CELLS", factor_cells)
        fits.append(mirror.NumpyMirrorDescent().estimate(domain, meas, iters=100))
    for clique in fits[0].cliques:
        np.testing.assert_allclose(fits[0].marginals[clique], fits[1].marginals[clique], rtol=1e-7)


def test_a_factored_step_that_underflows_is_redone_on_the_built_plan():
    """Potentials of scale 400 make a message with an empty cell: the step is redone on the plan
    with every node built (in log space there), and gives its marginals."""
    domain = pgm.make_domain(list(ADULT_SIZES), list(ADULT_SIZES.values()))
    plan, every = _plans(domain, ADULT_CLIQUES)
    theta = np.random.default_rng(3).normal(0, 400.0, int(plan.offsets[-1]))
    got = plan.marginals(theta, 1000.0)
    assert plan._every is not None
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, every.log_marginals(theta, 1000.0), rtol=1e-9, atol=1e-12)


def test_a_factored_step_gives_the_same_bits_with_its_reads_on_the_helper_or_here(monkeypatch):
    """The factored node's marginals are read on this thread while the helper reads the built
    nodes' (two cores), or both here (one core): the same bits."""
    domain = pgm.make_domain(list(ADULT_SIZES), list(ADULT_SIZES.values()))
    plan, _ = _plans(domain, ADULT_CLIQUES)
    theta = np.random.default_rng(1).normal(0, 1.0, int(plan.offsets[-1]))
    two = plan.marginals(theta, 48_842.0)
    monkeypatch.setattr(halves, "helper", lambda: None)
    assert np.array_equal(plan.marginals(theta, 48_842.0), two)
