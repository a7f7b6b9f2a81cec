"""Structural zeros (``methods.zeros``): exactly the cells every value of which a public constraint
forbids; a model fitted with them keeps (about) no mass there, and a release keeps the rows that
rejection alone would have thinned out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.methods import core, pgm
from privsyn_fed.methods.clique_tree import junction_tree_cells
from privsyn_fed.methods.zeros import structural_zeros
from privsyn_fed.schema import bin_edges, violations

SCHEMA = {
    "columns": [
        {"name": "age", "type": "numeric", "lower": 0, "upper": 89, "bins": 9, "integer": True},
        {"name": "job", "type": "categorical", "categories": ["clerk", "farmer", "teacher"], "missing": True},
        {"name": "region", "type": "categorical", "categories": ["north", "south", "east"]},
        {"name": "pay", "type": "numeric", "lower": 0, "upper": 100.0, "bins": 4},
    ],
    "constraints": [
        {"if": {"age": "..9"}, "then": {"job": None}, "name": "no job under 10"},
        {"forbid": {"age": "..14", "region": "east"}},  # age's second bin (10..19) only partly
        {"forbid": {"pay": ["30..60", "60..80"], "job": "clerk"}},  # pay's bin 25..50 only partly
        {"forbid": {"age": "..9", "job": "farmer", "region": "north", "pay": "..30"}},  # four columns
    ],
}


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(0, 90, n)
    job = np.where(age < 10, "", rng.choice(["clerk", "farmer", "teacher", ""], n, p=[0.3, 0.3, 0.3, 0.1]))
    region = np.where(age < 15, rng.choice(["north", "south"], n), rng.choice(["north", "south", "east"], n))
    pay = np.where(job == "clerk", rng.uniform(0, 29, n), rng.uniform(0, 100, n)).round(1)
    return pd.DataFrame({"age": age, "job": job, "region": region, "pay": pay})


def _values(col, cell: int) -> list:
    """Every value a cell of the test schema's columns decodes to (whole numbers of an integer bin,
    a fine grid of a continuous one), as a table reads it."""
    if isinstance(col, pf.schema.CategoricalColumn):
        return [""] if col.missing and cell == col.size - 1 else [col.categories[cell]]
    lo, hi = (float(e[cell]) for e in bin_edges(col))
    if col.integer:
        return [str(v) for v in range(int(lo), int(hi) + 1)]
    return [f"{v:.3f}" for v in np.linspace(lo, hi, 201)[:-1]]  # a bin holds its lower edge, not its upper


def test_the_zeros_are_the_cells_all_of_whose_values_a_constraint_forbids():
    """Brute force over every cell of each clique: a cell is a zero exactly when every row decoded
    from it breaks one of the constraints on those columns (the others held at allowed values)."""
    schema = pf.Schema.from_dict(SCHEMA)
    zeros = dict(structural_zeros(schema, schema.names))
    assert sorted(zeros) == [("age", "job"), ("age", "job", "region", "pay"), ("age", "region"), ("job", "pay")]
    allowed = {"age": "50", "job": "teacher", "region": "south", "pay": "90"}
    for clique, zero in zeros.items():
        cols = [schema.columns[schema.names.index(c)] for c in clique]
        own = [c for c in schema.constraints if set(c.columns) == set(clique)]
        for cell in np.ndindex(*zero.shape):
            grid = np.meshgrid(*[_values(c, k) for c, k in zip(cols, cell)], indexing="ij")
            frame = pd.DataFrame({**allowed, **{c: g.ravel() for c, g in zip(clique, grid)}})
            broken = violations(own, frame).any(axis=1)
            assert zero[cell] == broken.all(), (clique, cell)
    assert zeros[("age", "job")].sum() == 3 and zeros[("age", "region")].sum() == 1
    assert zeros[("job", "pay")].sum() == 1  # clerk in pay's bin 50..75, inside 30..60 and 60..80 joined
    assert zeros[("age", "job", "region", "pay")].sum() == 1  # pay's bin 0..25 inside ..30


def test_an_implication_of_several_columns_gives_zeros_over_each_of_them_with_its_conditions():
    """``if region = east then job = teacher and pay in 50..``: its zeros lie over (job, region) and
    (region, pay), the smaller cliques, and together they forbid exactly what the rule forbids over
    all three columns: east with another job, or with pay in a bin below 50."""
    doc = {
        "columns": SCHEMA["columns"],
        "constraints": [{"if": {"region": "east"}, "then": {"job": "teacher", "pay": "50.."}}],
    }
    schema = pf.Schema.from_dict(doc)
    zeros = dict(structural_zeros(schema, schema.names))
    assert sorted(zeros) == [("job", "region"), ("region", "pay")]
    east = schema.columns[2].categories.index("east")
    assert np.flatnonzero(zeros[("job", "region")][:, east]).tolist() == [0, 1, 3]  # clerk, farmer, missing
    assert np.flatnonzero(zeros[("region", "pay")][east]).tolist() == [0, 1]  # pay's bins 0..25 and 25..50
    assert zeros[("job", "region")].sum() == 3 and zeros[("region", "pay")].sum() == 2
    union = zeros[("job", "region")][:, :, None] | zeros[("region", "pay")][None, :, :]
    job, region, pay = np.meshgrid(*(np.arange(n) for n in schema.shape[1:]), indexing="ij")
    assert (union == ((region == east) & ((job != 2) | (pay < 2)))).all()


def test_a_rule_over_too_many_cells_gives_no_zeros(monkeypatch):
    """A column set of more than ``MAX_CELLS`` cells gives no zeros: no model could hold its clique."""
    schema = pf.Schema.from_dict(SCHEMA)
    monkeypatch.setattr("privsyn_fed.methods.zeros.MAX_CELLS", 9 * 4 * 3 * 4 - 1)
    assert ("age", "job", "region", "pay") not in dict(structural_zeros(schema, schema.names))


@pytest.mark.parametrize("method", ["aim", "distaim"])
def test_a_release_fitted_with_zeros_keeps_the_rows_rejection_would_thin_out(method):
    """At epsilon 0.2 the plan runs two rounds, so the model is nearly the product of the 1-ways:
    drawing from it and rejecting the forbidden rows keeps children only where the product gives
    them no job (2% of the rows are children then, against 11% in the table). Fitted with the zeros
    it keeps their share within 0.03, and no row breaks a constraint."""
    schema = pf.Schema.from_dict(SCHEMA)
    real = _frame(6000, 1)
    silos = [
        pf.Silo.from_frame(real.iloc[:3000], schema, name="a"),
        pf.Silo.from_frame(real.iloc[3000:], schema, name="b"),
    ]
    result = pf.synthesize(silos, method, 0.2, 1e-9, seed=3, rows=6000, find_dependence=False)
    rows = result.data
    assert not violations(schema, rows.astype(str).replace({"<NA>": ""})).any()
    share = lambda f: float((pd.to_numeric(f["age"]) < 10).mean())  # noqa: E731
    assert abs(share(rows) - share(real)) < 0.03, (share(rows), share(real))


def _oneways_and_zeros(seed: int):
    schema = pf.Schema.from_dict(SCHEMA)
    real = pf.Silo.from_frame(_frame(6000, seed), schema, name="a")
    names = schema.names
    measurements = [((c,), real.marginal((j,)).astype(float), 1.0) for j, c in enumerate(names)]
    return pgm.make_domain(names, schema.shape), measurements, structural_zeros(schema, names)


@pytest.mark.parametrize("numpy_cells", [None, 0], ids=["numpy", "compiled"])
def test_a_model_fitted_with_zeros_puts_no_mass_on_them_and_still_fits_its_measurements(numpy_cells):
    """Exact 1-ways of the test table and the schema's zeros: the fitted model's mass on the zeros is
    below 1e-9 of its total and its 1-ways stay within 1% of the measured ones, whichever estimator
    fits it (mbi's compiled one holds them as its ``Constraint``s)."""
    domain, measurements, zeros = _oneways_and_zeros(2)
    fitter = pgm.ModelFitter(domain, iters=2000, zeros=zeros, numpy_cells=numpy_cells)
    fitter.zero_cells = 10**6
    reader = pgm.MarginalReader(fitter.fit(measurements))
    assert len(fitter.held) == len(zeros)
    for clique, zero in zeros:
        assert reader(clique).reshape(zero.shape)[zero].sum() < 1e-9 * reader.total, clique
    for clique, y, _ in measurements:
        assert np.abs(reader(clique) - y).sum() < 0.01 * y.sum(), clique


def test_both_estimators_fit_the_same_model_with_zeros():
    """The same measurements and zeros, 300 steps from the same start: mbi's compiled estimator
    (the zeros as ``Constraint``s, folded as -inf) and the numpy one (the zeros' potentials held at
    ``ZERO_LOG``) reach the same marginals, and their potentials give the zeros the same value."""
    domain, measurements, zeros = _oneways_and_zeros(4)
    measurements = [(c, y + np.random.default_rng(5).normal(0, 20, y.size), 20.0) for c, y, _ in measurements]
    fits = []
    for numpy_cells in (None, 0):
        fitter = pgm.ModelFitter(domain, iters=300, zeros=zeros, numpy_cells=numpy_cells)
        fitter.zero_cells = 10**6
        fits.append(fitter.fit(measurements))
    ours, theirs = fits
    assert sorted(ours.cliques) == sorted(theirs.cliques)
    for clique in ours.cliques:
        np.testing.assert_allclose(ours.marginals[clique], theirs.marginals[clique], rtol=1e-6, atol=1e-6)
        held = ours.potentials[clique] == -50.0
        assert held.any() and (theirs.potentials[clique][held] == -50.0).all(), clique


def test_zeros_beyond_the_numpy_estimator_are_held_within_the_model_size_limit():
    """The zeros are held only where ``zero_cells`` (the method's model size limit, which
    ``final_fit`` sets from MB; ``numpy_cells`` when unset) leaves room for their cliques, whichever
    estimator then fits the model."""
    domain, measurements, zeros = _oneways_and_zeros(2)
    fitter = pgm.ModelFitter(domain, zeros=zeros, numpy_cells=10)
    assert fitter.fitting_zeros([m[0] for m in measurements]) == []
    fitter.zero_cells = 10**6
    assert len(fitter.fitting_zeros([m[0] for m in measurements])) == len(zeros)
    fitter.zero_cells = 30  # the 1-ways' 20 cells: (job, pay) makes 28, (age, job) or (age, region) more
    assert [c for c, _ in fitter.fitting_zeros([m[0] for m in measurements])] == [("job", "pay")]
    # a release's final fit: the limit is its --max-model-size (30 cells of 8 bytes here)
    fitter = pgm.ModelFitter(domain, iters=50, numpy_cells=10**6)
    fitter.fit(measurements)
    lines: list[str] = []
    progress = type("Lines", (), {"log": lambda self, line: lines.append(line)})()
    core.final_fit(fitter, measurements, list(domain.attributes), 0, progress, zeros, 30 * 8 / 2**20)
    assert [c for c, _ in fitter.held] == [("job", "pay")]
    assert "not held" in lines[-1] and "age x job, age x region" in lines[-1] and "--max-model-size" in lines[-1]


def test_where_not_every_zero_fits_the_fitter_holds_the_larger_of_its_two_greedy_choices():
    """Measured (b, d) and (b, e), a limit of 80 junction-tree cells: taking the set with the most zero
    cells first, (d, e), makes the tree a triangle that leaves room for nothing else; taking at each
    step the set that grows the tree least holds (b, c) and (a, b), two sets, and the fitter keeps
    those. With room for all three it holds all three."""
    domain = pgm.make_domain(list("abcde"), [4] * 5)
    one_cell = np.zeros((4, 4), dtype=bool)
    one_cell[0, 3] = True
    zeros = [(("d", "e"), np.eye(4, dtype=bool)), (("b", "c"), one_cell), (("a", "b"), one_cell)]
    fitter = pgm.ModelFitter(domain, zeros=zeros)
    fitter.zero_cells = 80
    measured = [("b", "d"), ("b", "e")]
    assert [c for c, _ in fitter.fitting_zeros(measured)] == [("b", "c"), ("a", "b")]
    assert junction_tree_cells(domain, measured + [("d", "e"), ("b", "c")]) > 80  # the largest first: one set
    fitter.zero_cells = 10**6
    assert [c for c, _ in fitter.fitting_zeros(measured)] == [c for c, _ in zeros]
