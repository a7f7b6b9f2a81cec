"""The numpy mirror descent (``methods.mirror``) against mbi's compiled one on the same problems, and
its step in two halves on two threads (``methods.halves``) against one thread."""

import itertools
import multiprocessing
import threading

import numpy as np
import pytest

from privsyn_fed.methods import clique_tree, compiled, flat_sums, halves, mirror, pgm
from privsyn_fed.methods.graphical import Measurement

NAMES, SHAPE = ["a", "b", "c", "d", "e"], [3, 4, 2, 5, 3]


def _problem(cliques, seed=0, noise=2.0):
    """Noisy marginals of 400 correlated rows over ``cliques`` (one-ways first), merged as mbi takes them."""
    rng = np.random.default_rng(seed)
    domain = pgm.make_domain(NAMES, SHAPE)
    base = rng.integers(0, 2, size=(400, 1))
    rows = (base + rng.integers(0, 3, size=(400, len(NAMES)))) % np.array(SHAPE)

    def marg(cl):
        cols = [NAMES.index(c) for c in cl]
        idx = np.ravel_multi_index(tuple(rows[:, i] for i in cols), [SHAPE[i] for i in cols])
        return np.bincount(idx, minlength=int(np.prod([SHAPE[i] for i in cols]))).astype(float)

    ms = [((n,), marg((n,)) + rng.normal(0, 3.0, s), 3.0) for n, s in zip(NAMES, SHAPE)]
    ms += [(cl, marg(cl) + rng.normal(0, noise, marg(cl).size), noise) for cl in cliques]
    return domain, pgm.merge_measurements(ms)


#: A cycle a-b-c-a (the junction tree joins it into one node), a clique given out of domain order,
#: a measurement nested in a larger one, and column e on its own: a forest of two trees.
CLIQUES = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "c", "b"), ("b", "d")]


def _loss(domain, meas, model) -> float:
    plan = mirror.Plan(domain, meas)
    return plan.loss(plan.flatten([model.marginals[c] for c in plan.cliques]))[0]


def _mbi(domain, meas, **kwargs):
    """mbi's compiled estimator on the same problem, its model as ours."""
    md, mm = compiled.mbi_domain(domain), compiled.mbi_measurements(meas, domain)
    return compiled.fitted(compiled.CarriedMirrorDescent().estimate(md, mm, **kwargs))


def test_the_first_block_makes_mbis_iterates():
    """50 steps (one block) warm-started from a smaller model: the potentials, marginals and total
    match the compiled estimator's to rounding."""
    domain, meas = _problem(CLIQUES)
    warm = _mbi(domain, meas[:5], iters=50)
    ref = _mbi(domain, meas, iters=50, warm_start=warm)
    ours = mirror.NumpyMirrorDescent().estimate(domain, meas, iters=50, warm_start=warm)
    assert ours.cliques == ref.cliques
    assert ours.total == pytest.approx(ref.total, rel=1e-12)  # mbi's minimum-variance total
    for cl in ref.cliques:
        np.testing.assert_allclose(ours.potentials[cl], ref.potentials[cl], atol=1e-9)
        np.testing.assert_allclose(ours.marginals[cl], ref.marginals[cl], atol=1e-8)


@pytest.mark.parametrize("seed", [0, 1])
def test_it_reaches_mbis_objective(seed):
    """Run to convergence, both reach the same loss (relative 1e-6) and marginals within 0.05 of a
    count out of 400 rows, although line-search decisions made on rounding may differ late."""
    domain, meas = _problem(CLIQUES, seed=seed)
    ref = _mbi(domain, meas, iters=2000, tol=1e-9)
    ours = mirror.NumpyMirrorDescent().estimate(domain, meas, iters=2000, tol=1e-9)
    assert _loss(domain, meas, ours) == pytest.approx(_loss(domain, meas, ref), rel=1e-6)
    start = mirror.NumpyMirrorDescent().estimate(domain, meas, iters=50)
    assert _loss(domain, meas, ours) < _loss(domain, meas, start)  # it did optimise
    for cl in ref.cliques:
        np.testing.assert_allclose(ours.marginals[cl], ref.marginals[cl], atol=0.05)


def test_its_marginals_are_the_models():
    """The marginals returned are those of the potentials returned (mbi's own message passing on
    them), summing to the total, and consistent where cliques overlap."""
    from mbi import marginal_oracles

    domain, meas = _problem(CLIQUES, seed=2)
    model = mirror.NumpyMirrorDescent().estimate(domain, meas, iters=300)
    potentials = compiled.expand_potentials(model.potentials, domain, model.cliques)
    ref = marginal_oracles.message_passing_stable(potentials, model.total)
    for cl in model.cliques:
        np.testing.assert_allclose(model.marginals[cl], np.asarray(ref[cl].values), rtol=1e-9, atol=1e-9)
        assert model.marginals[cl].sum() == pytest.approx(model.total)
    ab, dcb = model.marginals[("a", "b")], model.marginals[("d", "c", "b")]
    np.testing.assert_allclose(ab.sum(axis=0), dcb.sum(axis=(0, 1)), rtol=1e-9)


def test_the_fitter_gives_the_same_model_either_way(monkeypatch):
    """``ModelFitter`` round after round (warm starts across estimators included): numpy for every
    model, mbi for every model, and numpy for small models then mbi once the model outgrows
    ``NUMPY_CELLS``, all reach the same marginals."""
    domain, meas = _problem(CLIQUES, seed=3)
    one_ways, rounds = meas[:5], meas[5:]
    as_triples = [(m.clique, m.values, m.stddev) for m in meas]
    results = {}
    for name, cells in [("numpy", 10**9), ("mbi", 0), ("switch", 60)]:
        monkeypatch.setattr(pgm, "NUMPY_CELLS", cells)
        fitter = pgm.ModelFitter(domain, iters=1000, tol=1e-8)
        for k in (0, 2, len(rounds)):  # the last model's junction tree has more than 60 cells
            model = fitter.fit(as_triples[: len(one_ways) + k])
        results[name] = pgm.MarginalReader(model)
    for cl in [("a", "b"), ("b", "c", "d"), ("a", "d"), ("e",)]:
        for name in ("mbi", "switch"):
            np.testing.assert_allclose(results["numpy"](cl), results[name](cl), atol=0.05)


def test_a_plan_routes_nested_measurements_into_their_clique():
    """A measurement inside another clique is not a loss clique of its own; its gradient lands in
    the smallest loss clique holding it, as mbi's ``project`` reads it."""
    domain, meas = _problem(CLIQUES)
    plan = mirror.Plan(domain, meas)
    assert ("b", "d") not in plan.cliques and ("d", "c", "b") in plan.cliques
    assert plan.cells == sum(int(np.prod(s)) for s in plan.node_shapes)
    # the gradient of a residual on (b, d) alone lands in (d, c, b), constant over c
    (at,) = [i for i, m in enumerate(meas) if m.clique == ("b", "d")]
    start = sum(m.values.size for m in meas[:at])
    residual = np.zeros(plan.y.size)
    residual[start + 1 * 5 + 3] = 1.0  # b = 1, d = 3 (the measurement's own order)
    grad = plan.tables(np.bincount(plan.loss_cell, weights=residual[plan.measured_cell], minlength=plan.offsets[-1]))
    k = plan.cliques.index(("d", "c", "b"))
    expected = np.zeros((5, 2, 4))
    expected[3, :, 1] = 1.0
    np.testing.assert_array_equal(grad[k], expected)
    assert all(not g.any() for i, g in enumerate(grad) if i != k)


def test_the_limit_is_read_from_the_environment(monkeypatch):
    from privsyn_fed.common import InputError

    domain = pgm.make_domain(NAMES, SHAPE)
    monkeypatch.delenv(pgm.NUMPY_CELLS_ENV, raising=False)
    assert pgm.ModelFitter(domain).numpy_cells == pgm.NUMPY_CELLS
    monkeypatch.setenv(pgm.NUMPY_CELLS_ENV, "0")
    assert pgm.ModelFitter(domain).numpy_cells == 0
    for bad in ("-1", "1e5", "many"):
        monkeypatch.setenv(pgm.NUMPY_CELLS_ENV, bad)
        with pytest.raises(InputError, match=pgm.NUMPY_CELLS_ENV):
            pgm.ModelFitter(domain)


def test_a_bad_limit_is_refused_before_any_budget_is_spent(monkeypatch, tmp_path):
    import privsyn_fed as pf
    from privsyn_fed.common import InputError

    from .conftest import SCHEMA, make_frame

    monkeypatch.setenv(pgm.NUMPY_CELLS_ENV, "lots")
    ledger = tmp_path / "l.json"
    with pytest.raises(InputError, match=pgm.NUMPY_CELLS_ENV):
        pf.synthesize([make_frame(100, 1)], "aim", 1.0, 1e-9, schema=pf.Schema.from_dict(SCHEMA), ledger_path=ledger)
    assert not ledger.exists()


def test_junction_tree_cells_are_mbis_model_size():
    """Random models (trees, forests, cycles, isolated columns, nested and repeated cliques): the
    cells counted without mbi's objects are mbi's ``hypothetical_model_size``."""
    from mbi import junction_tree

    rng = np.random.default_rng(5)
    for _ in range(200):
        d = int(rng.integers(2, 11))
        names = [f"c{i}" for i in range(d)]
        domain = pgm.make_domain(names, [int(n) for n in rng.integers(2, 20, d)])
        cliques = [
            tuple(rng.choice(names, size=int(rng.integers(1, min(4, d) + 1)), replace=False))
            for _ in range(int(rng.integers(0, 9)))
        ]
        mb = junction_tree.hypothetical_model_size(compiled.mbi_domain(domain), cliques)
        assert clique_tree.junction_tree_cells(domain, cliques) == round(mb * 2**20 / 8), cliques
        assert pgm.hypothetical_size_mb(domain, cliques) == pytest.approx(mb, rel=1e-12)


def test_cells_with_each_candidate_are_the_cells_of_the_model_with_it():
    """The graph joined once and each candidate added to a copy: the same cells as joining the
    model's cliques and the candidate afresh, and the base graph left as it was."""
    rng = np.random.default_rng(6)
    for _ in range(100):
        d = int(rng.integers(2, 11))
        names = [f"c{i}" for i in range(d)]
        domain = pgm.make_domain(names, [int(n) for n in rng.integers(2, 20, d)])

        def some(count: int) -> list[tuple[str, ...]]:
            return [
                tuple(rng.choice(names, size=int(rng.integers(1, min(4, d) + 1)), replace=False)) for _ in range(count)
            ]

        model, candidates = some(int(rng.integers(0, 9))), some(12)
        got = list(clique_tree.cells_with_each(domain, model, candidates))
        assert got == [clique_tree.junction_tree_cells(domain, model + [c]) for c in candidates]


def test_peaked_potentials_give_mbis_marginals():
    """Potentials of magnitude ~1000 on a cycle and a separate column (products of exponentials
    underflow, so the messages fall back to log space): the marginals are still mbi's."""
    from mbi import CliqueVector, Factor, marginal_oracles

    rng = np.random.default_rng(3)
    domain = pgm.make_domain(NAMES, SHAPE)
    cliques = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "e")]
    ms = [Measurement(cl, np.zeros(domain.size(cl)), 1.0) for cl in cliques]
    plan = mirror.Plan(domain, ms)
    for scale in (1.0, 400.0):
        theta = [rng.normal(0, scale, s) for s in plan.shapes]
        got = plan.tables(plan.marginals(plan.flatten(theta), 1000.0))
        md = compiled.mbi_domain(domain)
        tables = {c: Factor(md.project(c), t) for c, t in zip(plan.cliques, theta)}
        potentials = CliqueVector(md, plan.cliques, tables)
        ref = marginal_oracles.message_passing_stable(potentials, 1000.0)
        for c, mu in zip(plan.cliques, got):
            assert np.all(np.isfinite(mu))
            np.testing.assert_allclose(mu, np.asarray(ref[c].values), rtol=1e-6, atol=1e-6)


def test_a_fit_without_measurements_is_the_uniform_model():
    """As mbi's estimator: no cliques, a total of 1, every marginal uniform."""
    model = pgm.ModelFitter(pgm.make_domain(["a", "b"], [2, 3]), iters=50).fit([])
    assert model.cliques == [] and model.total == 1.0
    np.testing.assert_allclose(pgm.MarginalReader(model)(("a", "b")), np.full(6, 1 / 6))


def test_a_belief_too_small_to_scale_is_redone_in_log_space_without_a_warning():
    """Messages that are tiny but not zero can leave a belief whose sum is subnormal, so that
    ``total / z`` overflows: the step is redone in log space, silently, and gives mbi's marginals."""
    import warnings

    domain = pgm.make_domain(["a", "b", "c"], [2, 2, 2])
    ms = [Measurement(("a", "b"), np.zeros(4), 1.0), Measurement(("b", "c"), np.zeros(4), 1.0)]
    plan = mirror.Plan(domain, ms)
    low = -715.0  # exp(low) is about 1e-311: subnormal, above zero
    theta = {("a", "b"): np.array([[0.0, low], [0.0, low]]), ("b", "c"): np.array([[low, low], [0.0, 0.0]])}
    flat = plan.flatten([theta[c] for c in plan.cliques])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = plan.marginals(flat, 1000.0)
    np.testing.assert_allclose(got, plan.log_marginals(flat, 1000.0), rtol=1e-9)
    assert np.all(np.isfinite(got))


def test_a_carried_step_size_gives_the_same_iterates_in_both_estimators():
    """Started at 8 times mbi's first step, the numpy and the compiled estimator make the same 50
    steps and end at the same step size, which is reported as a multiple of mbi's first step."""
    domain, meas = _problem(CLIQUES, seed=2)
    warm = _mbi(domain, meas[:5], iters=50)
    theirs, their_growth = compiled.estimate(
        domain, meas, warm, iters=50, tol=None, known_total=None, callback_fn=lambda _: None, growth=8.0
    )
    estimator = mirror.NumpyMirrorDescent()
    ours = estimator.estimate(domain, meas, iters=50, warm_start=warm, growth=8.0)
    for cl in theirs.cliques:
        np.testing.assert_allclose(ours.potentials[cl], theirs.potentials[cl], atol=1e-9)
    assert estimator.last_growth == pytest.approx(their_growth, rel=1e-9)
    plain = mirror.NumpyMirrorDescent()
    plain.estimate(domain, meas, iters=50, warm_start=warm)
    assert plain.last_growth != pytest.approx(estimator.last_growth)  # the start did matter


def test_refits_from_the_carried_step_size_fit_better_at_equal_steps():
    """Round after round of 100 steps, the fitter that starts each refit where the previous step
    size ended reaches a lower loss than one restarted at mbi's first step each time."""
    domain, meas = _problem(CLIQUES, seed=4, noise=0.5)
    triples = [(m.clique, m.values, m.stddev) for m in meas]
    losses = {}
    for carried in (True, False):
        fitter = pgm.ModelFitter(domain, iters=100)
        for k in range(5, len(triples) + 1):
            if not carried:
                fitter.growth = 1.0
            model = fitter.fit(triples[:k])
        assert (fitter.growth > 1.0) is True
        losses[carried] = _loss(domain, meas, model)
    assert losses[True] < losses[False]


needs_two_cores = pytest.mark.skipif(halves.cores() < 2, reason="one core here: nothing runs on a second thread")


def _random_problems(count: int):
    rng = np.random.default_rng(1)
    for seed in range(count):
        pairs = list(itertools.combinations("abcde", 2))
        cliques = [pairs[k] for k in rng.permutation(len(pairs))[: rng.integers(2, 7)]]
        yield _problem(cliques, seed=seed)


@needs_two_cores
def test_a_step_in_two_halves_gives_one_threads_bits(monkeypatch):
    """Every product, exponential, message and node sum split in two (the split forced down to one
    cell) gives exactly one thread's marginals, and a whole fit exactly one thread's model."""
    rng = np.random.default_rng(0)
    monkeypatch.setattr(flat_sums, "SPARSE_CELLS", 1)  # every sum a sparse product, which splits by rows
    for domain, meas in _random_problems(12):
        monkeypatch.setattr(halves, "SPLIT_CELLS", 10**12)
        one = mirror.Plan(domain, meas)
        fit_one = mirror.NumpyMirrorDescent().estimate(domain, meas, iters=150)
        monkeypatch.setattr(halves, "SPLIT_CELLS", 1)
        two = mirror.Plan(domain, meas)
        fit_two = mirror.NumpyMirrorDescent().estimate(domain, meas, iters=150)
        assert one.cut is None and two.cut is not None
        assert any(m.middle for m in two.messages) and two._into_nodes.halves is not None and two.halfway is not None
        for _ in range(3):
            theta = rng.normal(0, 3, int(one.offsets[-1]))
            assert np.array_equal(one.marginals(theta, 400.0), two.marginals(theta, 400.0))
        for clique in fit_one.cliques:
            assert np.array_equal(fit_one.potentials[clique], fit_two.potentials[clique])
            assert np.array_equal(fit_one.marginals[clique], fit_two.marginals[clique])


@needs_two_cores
def test_the_first_half_runs_on_the_helper_and_the_helper_never_waits_on_itself():
    here = threading.get_ident()
    first, second = halves.both(threading.get_ident, threading.get_ident)
    assert second == here and first != here
    # called from the helper thread, both halves run there, one after the other (no deadlock)
    nested = halves.helper().submit(halves.both, threading.get_ident, threading.get_ident).result(timeout=10)
    assert nested == (first, first)


def test_a_failing_half_waits_for_the_other_before_it_raises():
    finished = []

    def slow() -> None:
        threading.Event().wait(0.2)
        finished.append(True)

    def fail() -> None:
        raise ValueError("the second half failed")

    with pytest.raises(ValueError, match="second half"):
        halves.both(slow, fail)
    assert finished == [True]


def _in_child(queue) -> None:
    queue.put(halves.both(lambda: 1, lambda: 2))


@needs_two_cores
@pytest.mark.filterwarnings("ignore:os.fork")  # JAX's warning about its own threads: the child uses none
def test_a_forked_child_starts_its_own_helper():
    """A child forked after the helper started inherits the pool but not its thread; it starts its own
    rather than waiting forever on a thread that is not there."""
    halves.both(lambda: 0, lambda: 0)  # the parent's helper is running
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_in_child, args=(queue,))
    child.start()
    child.join(timeout=30)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0 and queue.get(timeout=5) == (1, 2)


def test_blas_is_held_to_one_thread_inside_a_split_fit_and_restored_after():
    """While a fit works in halves, BLAS runs on one thread (its idle threads would spin on the
    helper's core); its own setting comes back after."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    before = [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]
    with halves.one_blas_thread():
        inside = [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]
    after = [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]
    assert inside and set(inside) == {1}
    assert after == before


def test_cell_map_is_the_projections_flat_index():
    """On random tables and column subsets in any order (none, some, all), every cell's index in
    the projection is numpy's ``ravel_multi_index`` of its coordinates there."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        d = int(rng.integers(1, 6))
        shape = [int(x) for x in rng.integers(1, 6, d)]
        names = list("abcdef"[:d])
        onto = [names[i] for i in rng.permutation(d)[: rng.integers(0, d + 1)]]
        onto_shape = [shape[names.index(a)] for a in onto]
        grid = np.indices(shape).reshape(d, -1)
        expected = (
            np.ravel_multi_index([grid[names.index(a)] for a in onto], onto_shape)
            if onto
            else np.zeros(grid.shape[1], dtype=np.intp)
        )
        assert np.array_equal(flat_sums.cell_map(names, shape, onto, onto_shape), expected)


def test_waves_cover_the_schedule_and_no_sum_reads_a_node_its_wave_already_changed():
    """Every message in exactly one wave, in the schedule's order; within a wave no sender is the
    receiver of an earlier message (its sums can all be taken first), and each wave ends only
    where the next message would break that."""
    for domain, meas in _random_problems(12):
        plan = mirror.Plan(domain, meas)
        runs = plan.waves
        assert runs[0][0] == 0 and runs[-1][1] == len(plan.messages)
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(runs, runs[1:]))
        for first, end in runs:
            received = [m.receiver.start for m in plan.messages[first:end]]
            for k in range(first, end):
                assert plan.messages[k].sender.start not in received[: k - first]
            if end < len(plan.messages):
                assert plan.messages[end].sender.start in received


def test_messages_one_by_one_give_the_waves_bits_and_find_the_same_empty_cells():
    """Where nothing is split, ``send`` passes the messages one by one and looks for an empty cell
    once at the end: the same beliefs, bit for bit, as wave by wave, and False exactly where a
    message has an empty cell (potentials of scale 400 underflow some), without a warning."""
    import warnings

    from privsyn_fed.methods import messages

    rng = np.random.default_rng(5)
    verdicts = []
    for domain, meas in _random_problems(12):
        plan = mirror.Plan(domain, meas)
        assert plan.runs is None and len(plan.waves) > 1
        for scale in (1.0, 400.0):
            theta = rng.normal(0, scale, int(plan.offsets[-1]))
            waves, one = plan.shifted(theta), plan.shifted(theta)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                ok = messages.send(one, plan.messages, None)
            assert ok == messages.send(waves, plan.messages, plan.waves)
            if ok:
                assert np.array_equal(one, waves)
            verdicts.append(ok)
    assert any(verdicts) and not all(verdicts)
