import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privsyn_fed as pf
from privsyn_fed.methods import core
from privsyn_fed.methods.workload import downward_closure, sample_workload

from .conftest import assert_audit_objects_only_to_the_seed


def test_initial_params_make_each_round_cost_rho_over_t():
    p = core.initial_params(0.015, 80, 0.9)
    assert p.rho == pytest.approx(0.015 / 80)
    assert 1 / (2 * p.sigma**2) == pytest.approx(0.9 * 0.015 / 80)


def test_final_round_spends_exactly_what_is_left():
    p = core.initial_params(0.015, 80, 0.9)
    assert core.final_round(p, 3 * p.rho, 0.9) is None
    last = core.final_round(p, 1.5 * p.rho, 0.9)
    assert last.rho == pytest.approx(1.5 * p.rho)
    assert 1 / (2 * last.sigma**2) == pytest.approx(0.9 * 1.5 * p.rho)


def test_workload_sample_is_seeded_and_closure_weights():
    w = sample_workload(6, 3, 5, seed=1)
    assert w == sample_workload(6, 3, 5, seed=1) and len(w) == 5 and len(set(w)) == 5
    assert sample_workload(4, 3, 64) == [(0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3)]
    closure = downward_closure([(0, 1, 2), (1, 2, 3)])
    assert closure[(1, 2)] == 4 and closure[(0,)] == 1 and closure[(1, 2, 3)] == 5


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**31), st.floats(0.5, 50), st.integers(1, 6), st.data())
def test_aim_score_sensitivity_holds_for_an_added_record(n, seed, sigma, weight, data):
    """Property: |u_r(D + x) - u_r(D)| <= w_r, the sensitivity the exponential mechanism uses."""
    rng = np.random.default_rng(seed)
    cells = data.draw(st.integers(1, 12))
    counts = np.bincount(rng.integers(0, cells, n), minlength=cells).astype(np.int64)
    model = rng.uniform(0, 2 * n / cells, cells)  # public model marginal
    extra = np.zeros(cells, dtype=np.int64)
    extra[data.draw(st.integers(0, cells - 1))] = 1
    u, u_plus = (core.aim_score(weight, c, model, sigma) for c in (counts, counts + extra))
    assert abs(u_plus - u) <= weight + 1e-9


def small_silos(schema, silo_paths):
    return [pf.Silo.from_csv(p, schema) for p in silo_paths]


@pytest.fixture(scope="module")
def seeded_run(tmp_path_factory):
    from tests.conftest import SCHEMA, make_frame

    schema = pf.Schema.from_dict(SCHEMA)
    silos = [pf.Silo.from_frame(make_frame(n, k).astype(str), schema, f"s{k}") for k, n in enumerate([500, 400])]
    ledger = tmp_path_factory.mktemp("aim") / "ledger.json"
    result = pf.synthesize(silos, "aim", 2.0, 1e-6, seed=7, ledger_path=ledger, rounds=12, pgm_iters=300)
    return schema, silos, result, ledger


def test_aim_spends_the_whole_budget_and_the_ledger_audits(seeded_run):
    schema, _, result, ledger_path = seeded_run
    led = result.ledger
    assert led["rho_spent"] == pytest.approx(led["rho_budget"], rel=1e-9)
    assert led["epsilon"] == pytest.approx(2.0, rel=1e-6)
    assert led["seeded"] is True and led["status"] == "complete"
    assert_audit_objects_only_to_the_seed(led)
    gauss = [e for e in led["entries"] if e["mechanism"] == "gaussian"]
    em = [e for e in led["entries"] if e["mechanism"] == "exponential"]
    assert len(gauss) == len(schema.columns) + len(em) == len(schema.columns) + result.info["rounds"]
    assert all(e["sensitivity_l2"] == 1.0 for e in gauss)
    assert ledger_path.exists()


def test_aim_output_follows_the_schema(seeded_run):
    schema, _, result, _ = seeded_run
    df = result.data
    assert list(df.columns) == schema.names
    assert 700 <= len(df) <= 1100  # noisy total of 900 rows
    assert df["age"].between(18, 90).all() and (df["age"] == df["age"].round()).all()
    assert df["income"].between(0, 100).all()
    assert set(df["sex"]) <= {"F", "M"} and set(df["label"]) <= {"no", "yes"}
    assert set(df["region"].dropna()) <= {"north", "south", "east"}


def test_aim_learns_the_correlation_it_was_given(seeded_run):
    """Income rises with age in the input; the synthetic data keeps the sign of that trend."""
    _, _, result, _ = seeded_run
    df = result.data
    assert np.corrcoef(df["age"].astype(float), df["income"].astype(float))[0, 1] > 0.2


def test_seeded_runs_are_reproducible(seeded_run):
    _, silos, result, _ = seeded_run
    again = pf.synthesize(silos, "aim", 2.0, 1e-6, seed=7, rounds=12, pgm_iters=300)
    assert again.data.equals(result.data)


def test_too_few_rounds_for_the_columns_is_an_input_error(seeded_run):
    _, silos, _, _ = seeded_run
    with pytest.raises(pf.InputError, match="^rounds 2 is too small"):
        pf.synthesize(silos, "aim", 1.0, 1e-6, seed=1, rounds=2)


def test_a_huge_workload_marginal_is_refused_without_wrapping_around():
    """60,000^4 cells overflow int64; the size check counts in Python integers and refuses it."""
    from privsyn_fed.common import InputError
    from privsyn_fed.methods.workload import check_size

    with pytest.raises(InputError, match="cells"):
        check_size([(0, 1, 2, 3)], [60_000] * 4, ["a", "b", "c", "d"])


def test_a_workload_size_of_zero_means_every_marginal_in_the_api_too():
    from privsyn_fed.methods.aim import AIMOptions, workload_of

    names = [f"c{i}" for i in range(6)]
    every, weights = workload_of(names, AIMOptions(workload_size=None, workload_degree=2))
    assert len(every) == 15 and weights is None
    assert workload_of(names, AIMOptions(workload_size=0, workload_degree=2))[0] == every
