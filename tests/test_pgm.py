"""Our estimation shortcuts against mbi's own code on the same measurements."""

import itertools

import numpy as np
import pytest
from mbi import estimation

from privsyn_fed import pgm


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    names, shape = ["a", "b", "c", "d"], [3, 4, 2, 5]
    domain = pgm.make_domain(names, shape)
    rows = rng.integers(0, 2, size=(300, 4)) * np.array([1, 2, 1, 3])

    def marg(cl):
        idx = np.ravel_multi_index(tuple(rows[:, names.index(c)] for c in cl), [shape[names.index(c)] for c in cl])
        return np.bincount(idx, minlength=int(np.prod([shape[names.index(c)] for c in cl]))).astype(float)

    ms = [((n,), marg((n,)) + rng.normal(0, 3, s), 3.0) for n, s in zip(names, shape)]
    ms += [(("a", "b"), marg(("a", "b")) + rng.normal(0, 2, 12), 2.0), (("b", "c", "d"), marg(("b", "c", "d")), 1.5)]
    return domain, pgm.merge_measurements(ms)


def test_carried_mirror_descent_makes_mbis_iterates(problem):
    """k + 1 carried steps (the first computes the starting marginals) equal k of mbi's steps."""
    from mbi import marginal_loss

    domain, meas = problem
    loss_fn = marginal_loss.from_linear_measurements(meas, domain)
    warm = estimation.MirrorDescent().estimate(domain, meas[:4], iters=50)
    ref_est, our_est = estimation.MirrorDescent(), pgm.CarriedMirrorDescent()
    ref = ref_est._init(domain, loss_fn, 300.0, warm_start=warm)
    ours = our_est._init(domain, loss_fn, 300.0, warm_start=warm)
    ours = our_est._step(ours, loss_fn, 300.0)
    for _ in range(12):
        ref = ref_est._step(ref, loss_fn, 300.0)
        ours = our_est._step(ours, loss_fn, 300.0)
        np.testing.assert_allclose(float(ours.alpha), float(ref.alpha), rtol=1e-12)
        for cl in loss_fn.cliques:
            np.testing.assert_allclose(
                np.asarray(ours.potentials[cl].values), np.asarray(ref.potentials[cl].values), rtol=1e-9, atol=1e-9
            )


def test_carried_mirror_descent_fits_the_same_model_as_mbi(problem):
    domain, meas = problem
    models = [
        est.estimate(domain, meas, iters=1000) for est in (estimation.MirrorDescent(), pgm.CarriedMirrorDescent())
    ]
    ref, ours = (pgm.MarginalReader(m) for m in models)
    for cl in [("a",), ("a", "b"), ("b", "c", "d"), ("a", "d")]:
        np.testing.assert_allclose(ours(cl), ref(cl), rtol=1e-4, atol=1e-3)  # counts of ~300 rows


def test_marginal_reader_matches_mbi_projection(problem):
    domain, meas = problem
    model = estimation.MirrorDescent().estimate(domain, meas, iters=100)
    reader = pgm.MarginalReader(model)
    for k in (1, 2, 3):
        for cl in itertools.combinations(["a", "b", "c", "d"], k):
            np.testing.assert_allclose(reader(cl), np.asarray(model.project(cl).datavector()), rtol=1e-8, atol=1e-8)


def test_expand_potentials_matches_mbi(problem):
    domain, meas = problem
    model = estimation.MirrorDescent().estimate(domain, meas[:5], iters=50)
    cliques = [("a", "b"), ("b", "c", "d"), ("a", "c")]
    ours = pgm.expand_potentials(model.potentials, domain, cliques)
    ref = model.potentials.expand(cliques)
    for cl in cliques:
        np.testing.assert_allclose(np.asarray(ours[cl].values), np.asarray(ref[cl].values))


def test_merged_measurements_weight_by_precision():
    (m,) = pgm.merge_measurements([(("a",), np.array([1.0, 3.0]), 1.0), (("a",), np.array([3.0, 5.0]), 1.0)])
    np.testing.assert_allclose(m.noisy_measurement, [2.0, 4.0])
    assert m.stddev == pytest.approx(1 / np.sqrt(2))


def test_marginal_reader_on_a_peaked_disconnected_model():
    """Potentials of magnitude ~1000 (a product of exponentials would underflow) over a model in
    two unconnected parts: out-of-model marginals still match mbi's variable elimination."""
    import jax.numpy as jnp
    from mbi import CliqueVector, Factor, MarkovRandomField, marginal_oracles

    rng = np.random.default_rng(3)
    domain = pgm.make_domain(["a", "b", "c", "d", "e"], [3, 4, 2, 3, 2])
    cliques = [("a", "b"), ("b", "c"), ("d", "e"), ("a", "c")]
    tables = {
        cl: Factor(domain.project(cl), jnp.asarray(rng.normal(0, 400, domain.project(cl).shape))) for cl in cliques
    }
    potentials = CliqueVector(domain, cliques, tables)
    model = MarkovRandomField(
        potentials=potentials, marginals=marginal_oracles.message_passing_stable(potentials, 1000.0), total=1000.0
    )
    reader = pgm.MarginalReader(model)
    for cl in [("a", "d"), ("b", "e"), ("c", "d", "e"), ("a", "b", "c"), ("e",)]:
        got = reader(cl)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, np.asarray(model.project(cl).datavector()), rtol=1e-6, atol=1e-6)
