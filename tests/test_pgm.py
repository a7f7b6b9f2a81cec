"""Our estimation shortcuts against mbi's own code on the same measurements."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mbi import estimation

from privsyn_fed.methods import compiled, pgm

from .conftest import run_cli, synth_argv


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
    return compiled.mbi_domain(domain), compiled.mbi_measurements(pgm.merge_measurements(ms), domain)


def test_carried_mirror_descent_makes_mbis_iterates(problem):
    """k + 1 carried steps (the first computes the starting marginals) equal k of mbi's steps."""
    from mbi import marginal_loss

    domain, meas = problem
    loss_fn = marginal_loss.from_linear_measurements(meas, domain)
    warm = estimation.MirrorDescent().estimate(domain, meas[:4], iters=50)
    ref_est, our_est = estimation.MirrorDescent(), compiled.CarriedMirrorDescent()
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
        est.estimate(domain, meas, iters=1000) for est in (estimation.MirrorDescent(), compiled.CarriedMirrorDescent())
    ]
    ref, ours = (pgm.MarginalReader(compiled.fitted(m)) for m in models)
    for cl in [("a",), ("a", "b"), ("b", "c", "d"), ("a", "d")]:
        np.testing.assert_allclose(ours(cl), ref(cl), rtol=1e-4, atol=1e-3)  # counts of ~300 rows


def test_marginal_reader_matches_mbi_projection(problem):
    domain, meas = problem
    model = estimation.MirrorDescent().estimate(domain, meas, iters=100)
    reader = pgm.MarginalReader(compiled.fitted(model))
    for k in (1, 2, 3):
        for cl in itertools.combinations(["a", "b", "c", "d"], k):
            np.testing.assert_allclose(reader(cl), np.asarray(model.project(cl).datavector()), rtol=1e-8, atol=1e-8)


def test_expand_potentials_matches_mbi(problem):
    domain, meas = problem
    model = estimation.MirrorDescent().estimate(domain, meas[:5], iters=50)
    cliques = [("a", "b"), ("b", "c", "d"), ("a", "c")]
    ours = compiled.expand_potentials(compiled.fitted(model).potentials, compiled.ours(domain), cliques)
    ref = model.potentials.expand(cliques)
    for cl in cliques:
        np.testing.assert_allclose(np.asarray(ours[cl].values), np.asarray(ref[cl].values))


def test_merged_measurements_weight_by_precision():
    (m,) = pgm.merge_measurements([(("a",), np.array([1.0, 3.0]), 1.0), (("a",), np.array([3.0, 5.0]), 1.0)])
    np.testing.assert_allclose(m.values, [2.0, 4.0])
    assert m.stddev == pytest.approx(1 / np.sqrt(2))


def test_marginal_reader_on_a_peaked_disconnected_model():
    """Potentials of magnitude ~1000 (a product of exponentials would underflow) over a model in
    two unconnected parts: out-of-model marginals still match mbi's variable elimination."""
    import jax.numpy as jnp
    from mbi import CliqueVector, Factor, MarkovRandomField, marginal_oracles

    rng = np.random.default_rng(3)
    domain = compiled.mbi_domain(pgm.make_domain(["a", "b", "c", "d", "e"], [3, 4, 2, 3, 2]))
    cliques = [("a", "b"), ("b", "c"), ("d", "e"), ("a", "c")]
    tables = {
        cl: Factor(domain.project(cl), jnp.asarray(rng.normal(0, 400, domain.project(cl).shape))) for cl in cliques
    }
    potentials = CliqueVector(domain, cliques, tables)
    model = MarkovRandomField(
        potentials=potentials, marginals=marginal_oracles.message_passing_stable(potentials, 1000.0), total=1000.0
    )
    reader = pgm.MarginalReader(compiled.fitted(model))
    for cl in [("a", "d"), ("b", "e"), ("c", "d", "e"), ("a", "b", "c"), ("e",)]:
        got = reader(cl)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, np.asarray(model.project(cl).datavector()), rtol=1e-6, atol=1e-6)


def test_marginal_reader_reads_a_long_tree_from_the_factors_it_needs_only():
    """A chain with a branch, read off only the factors whose subtrees hold the clique's columns:
    every marginal still matches mbi's variable elimination."""
    import jax.numpy as jnp
    from mbi import CliqueVector, Factor, MarkovRandomField, marginal_oracles

    rng = np.random.default_rng(5)
    names = ["a", "b", "c", "d", "e", "f", "g"]
    domain = compiled.mbi_domain(pgm.make_domain(names, [3, 2, 4, 2, 3, 2, 3]))
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f"), ("c", "g")]
    tables = {cl: Factor(domain.project(cl), jnp.asarray(rng.normal(0, 2, domain.project(cl).shape))) for cl in cliques}
    potentials = CliqueVector(domain, cliques, tables)
    model = MarkovRandomField(
        potentials=potentials, marginals=marginal_oracles.message_passing_stable(potentials, 500.0), total=500.0
    )
    reader = pgm.MarginalReader(compiled.fitted(model))
    for cl in [("a", "f"), ("b", "d"), ("g", "f"), ("a", "g", "e"), ("a", "c"), ("f",)]:
        np.testing.assert_allclose(reader(cl), np.asarray(model.project(cl).datavector()), rtol=1e-8, atol=1e-8)
    tree = reader.factorisation()
    assert len(reader._needed(tree, {"a", "b"})) < len(tree.factors)  # the far end of the chain is left out


@pytest.mark.parametrize("seed", range(6))
def test_marginal_reader_eliminates_like_mbi_on_random_models(seed):
    """Random models of 3 to 6 pairwise and triple cliques over 7 columns (trees with branches,
    cycles that the junction tree fills in, forests): every 1-, 2- and 3-way marginal read off the
    factors by variable elimination matches mbi's."""
    import jax.numpy as jnp
    from mbi import CliqueVector, Factor, MarkovRandomField, marginal_oracles

    rng = np.random.default_rng(seed)
    names = list("abcdefg")
    domain = compiled.mbi_domain(pgm.make_domain(names, list(rng.integers(2, 5, len(names)))))
    cliques = sorted(
        {tuple(sorted(rng.choice(names, rng.integers(2, 4), replace=False))) for _ in range(rng.integers(3, 7))}
    )
    tables = {cl: Factor(domain.project(cl), jnp.asarray(rng.normal(0, 2, domain.project(cl).shape))) for cl in cliques}
    potentials = CliqueVector(domain, cliques, tables)
    model = MarkovRandomField(
        potentials=potentials, marginals=marginal_oracles.message_passing_stable(potentials, 800.0), total=800.0
    )
    reader = pgm.MarginalReader(compiled.fitted(model))
    tree = reader.factorisation()
    for k in (1, 2, 3):
        for cl in itertools.combinations(names, k):
            expected = np.asarray(model.project(cl).datavector())
            np.testing.assert_allclose(reader(cl), expected, rtol=1e-7, atol=1e-7)
            greedy = pgm._greedy_contraction(tree, reader._needed(tree, set(cl)), cl).ravel()  # the fallback
            np.testing.assert_allclose(greedy / greedy.sum() * 800.0, expected, rtol=1e-7, atol=1e-7)


def test_elimination_hands_a_large_product_to_the_greedy_contraction(monkeypatch):
    """A clique's column carried up beside a separator larger than every factor: ``eliminate``
    declines (None) and the reader's marginal comes from the greedy contraction, the same values."""
    rng = np.random.default_rng(1)
    domain = pgm.make_domain(["a", "b", "c", "d", "e"], [5, 6, 7, 4, 6])
    cliques = [("a", "b", "c"), ("b", "c", "d"), ("d", "e")]
    model = pgm.ModelFitter(domain, iters=50).fit([(cl, rng.random(domain.size(cl)) * 50, 1.0) for cl in cliques])
    reader = pgm.MarginalReader(model)
    tree = reader.factorisation()
    clique = ("a", "e")
    assert pgm.eliminate(tree, reader._needed(tree, set(clique)), clique) is not None
    plain = reader(clique)
    monkeypatch.setattr(pgm, "ELIMINATION_CELLS", 1)  # now only the largest factor bounds a product
    assert pgm.eliminate(tree, reader._needed(tree, set(clique)), clique) is None
    np.testing.assert_allclose(pgm.MarginalReader(model)(clique), plain, rtol=1e-10)


@pytest.mark.parametrize("seed", range(4))
def test_kept_messages_give_the_same_bits_as_eliminating_afresh(seed):
    """A reader keeps factors' messages for later cliques (``pgm.Memo``): every 1-, 2- and 3-way
    marginal of a random model, read in random order, is bit for bit what a fresh elimination gives."""
    rng = np.random.default_rng(seed)
    names = list("abcdefgh")
    domain = pgm.make_domain(names, [int(n) for n in rng.integers(2, 6, len(names))])
    cliques = {tuple(sorted(rng.choice(names, rng.integers(2, 4), replace=False))) for _ in range(7)}
    meas = [(cl, rng.random(domain.size(cl)) * 40, 1.0) for cl in sorted(cliques)]
    meas += [((a,), rng.random(domain.size((a,))) * 40, 1.0) for a in names]
    model = pgm.ModelFitter(domain, iters=50).fit(meas)
    reader = pgm.MarginalReader(model)
    tree = reader.factorisation()
    reads = [cl for k in (1, 2, 3) for cl in itertools.combinations(names, k)]
    for k in rng.permutation(len(reads)):
        clique = reads[k]
        needed = reader._needed(tree, set(clique))
        kept = pgm.eliminate(tree, needed, clique, reader._memo or pgm.Memo(tree))
        fresh = pgm.eliminate(tree, needed, clique)
        assert (kept is None) == (fresh is None)
        if fresh is not None:
            assert np.array_equal(kept, fresh)
        reader(clique)
    assert reader._memo is not None and reader._memo.kept  # messages were kept and taken


def test_a_kept_message_over_a_lower_limit_declines_as_afresh(monkeypatch):
    """Messages kept under the default size limit, some built through products larger than every
    factor: once the limit is the largest factor, each read declines (None) exactly where
    eliminating afresh does, and otherwise gives the same bits."""
    rng = np.random.default_rng(0)
    names = list("abcdef")
    domain = pgm.make_domain(names, [6, 5, 4, 3, 3, 2])
    cliques = [("a", "f"), ("c", "d"), ("c", "f"), ("d", "e"), ("d", "f")]
    model = pgm.ModelFitter(domain, iters=20).fit([(cl, rng.random(domain.size(cl)) * 50, 1.0) for cl in cliques])
    reader = pgm.MarginalReader(model)
    tree = reader.factorisation()
    memo = pgm.Memo(tree)
    reads = [cl for k in (2, 3) for cl in itertools.combinations(names, k)]
    for clique in reads:
        pgm.eliminate(tree, reader._needed(tree, set(clique)), clique, memo)
    largest = max(table.size for _, table in tree.factors)
    assert any(peak > largest for _, _, peak in memo.kept.values())  # the case under test occurs
    monkeypatch.setattr(pgm, "ELIMINATION_CELLS", 1)
    declined = 0
    for clique in reads:
        needed = reader._needed(tree, set(clique))
        fresh, kept = pgm.eliminate(tree, needed, clique), pgm.eliminate(tree, needed, clique, memo)
        assert (fresh is None) == (kept is None)
        declined += fresh is None
        if fresh is not None:
            assert np.array_equal(fresh, kept)
    assert declined
    # a kept message whose subtree built a product over the reading's limit declines the read,
    # as eliminating afresh would have stopped at that product
    monkeypatch.setattr(pgm, "ELIMINATION_CELLS", 1 << 16)
    clique = ("c", "d", "e")
    key = next(k for k in memo.kept if k[1] == frozenset(clique))
    cols, table, _ = memo.kept[key]
    assert pgm.eliminate(tree, reader._needed(tree, set(clique)), clique, memo) is not None
    memo.kept[key] = (cols, table, (1 << 16) + 1)
    assert pgm.eliminate(tree, reader._needed(tree, set(clique)), clique, memo) is None


def test_elimination_takes_the_optimised_path_for_large_products(monkeypatch):
    """The same marginals whichever einsum each product takes (the plain loop or the optimised one)."""
    rng = np.random.default_rng(0)
    domain = pgm.make_domain(["a", "b", "c", "d"], [6, 5, 7, 4])
    meas = [(cl, rng.random(domain.size(cl)) * 50, 1.0) for cl in [("a", "b"), ("b", "c"), ("c", "d")]]
    model = pgm.ModelFitter(domain, iters=50).fit(meas)
    plain = [pgm.MarginalReader(model)(cl) for cl in [("a", "d"), ("a", "c", "d")]]
    monkeypatch.setattr(pgm, "OPTIMISED_EINSUM", 1)
    optimised = [pgm.MarginalReader(model)(cl) for cl in [("a", "d"), ("a", "c", "d")]]
    for x, y in zip(plain, optimised):
        np.testing.assert_allclose(x, y, rtol=1e-10)


def test_the_compilation_cache_is_opt_in_and_private_to_the_user(tmp_path, monkeypatch):
    """The persistent cache holds code this process runs: off unless a folder is named, a folder
    others can write is refused, and a folder of one's own is created private (0700)."""
    import os
    import stat

    import jax

    try:
        monkeypatch.delenv(compiled.CACHE_ENV, raising=False)
        assert compiled.compilation_cache() is None and not jax.config.jax_enable_compilation_cache
        monkeypatch.setenv(compiled.CACHE_ENV, "off")
        assert compiled.compilation_cache() is None and not jax.config.jax_enable_compilation_cache
        own = tmp_path / "own" / "jax"
        monkeypatch.setenv(compiled.CACHE_ENV, str(own))
        assert compiled.compilation_cache() == own and jax.config.jax_enable_compilation_cache
        assert stat.S_IMODE(own.stat().st_mode) == 0o700
        shared = tmp_path / "shared"
        shared.mkdir()
        os.chmod(shared, 0o777)
        monkeypatch.setenv(compiled.CACHE_ENV, str(shared))
        assert compiled.compilation_cache() is None and not jax.config.jax_enable_compilation_cache
    finally:
        monkeypatch.undo()
        compiled.compilation_cache()  # back to this process's setting


def test_with_a_cache_a_repeated_release_compiles_nothing_new(schema_path, silo_paths, tmp_path):
    """``PRIVSYN_FED_JAX_CACHE``: the first release fills the cache, and a second process making the
    same (seeded) release finds every program the first one compiled, so the cache gains no entry.
    (``PRIVSYN_FED_NUMPY_CELLS=0`` fits every model with mbi: this small a model is otherwise fitted
    in numpy and compiles nothing.)
    (On this small model the programs do not depend on Python's string hashing; the misses that
    fixing it avoids appear on Adult's larger junction trees and are measured in benchmarks/.)"""
    import os

    cache = tmp_path / "jax-cache"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    env["PRIVSYN_FED_JAX_CACHE"] = str(cache)
    env[pgm.NUMPY_CELLS_ENV] = "0"

    def release(k: int) -> None:
        out = tmp_path / f"o{k}.csv"
        args = synth_argv(schema=schema_path, silos=silo_paths, out=out, seed=3, rows=50, rounds=30, quiet=True)
        run_cli(*args, env=env, check=True, timeout=300)

    release(1)
    first = {p.name for p in cache.iterdir() if p.is_file()}
    assert len(first) > 5  # the refit programs were written
    release(2)
    assert {p.name for p in cache.iterdir() if p.is_file()} == first


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 3), st.booleans())
def test_logsumexp_is_scipys(seed, ndim, with_infinities):
    from scipy.special import logsumexp as scipys

    rng = np.random.default_rng(seed)
    x = rng.normal(0, 300, size=tuple(rng.integers(1, 5, ndim)))
    if with_infinities:
        x[rng.random(x.shape) < 0.5] = -np.inf
    np.testing.assert_allclose(pgm.logsumexp(x), scipys(x), rtol=1e-12)
    for axis in [0, tuple(range(ndim)), tuple(range(1, ndim)) or 0]:
        np.testing.assert_allclose(pgm.logsumexp(x, axis=axis), scipys(x, axis=axis), rtol=1e-12)
