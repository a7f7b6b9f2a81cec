"""Data-size-aware schedules: pure functions of a released noisy total and the public domain."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privsyn_fed as pf
from privsyn_fed.audit import audit_ledger
from privsyn_fed.methods import allocation
from privsyn_fed.methods.histograms import projected
from privsyn_fed.noise import SeededNoise

from .conftest import SCHEMA, make_frame

METHODS = ("aim", "distaim", "flaim", "fedtda")


# ---- the rule ------------------------------------------------------------------------------------

cells = st.lists(st.integers(2, 5000), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(st.floats(1, 1e7), st.floats(1e-5, 10), st.integers(1, 30), st.floats(0.05, 0.95), cells)
def test_planned_aim_rounds_spend_exactly_the_budget_left(n_hat, rho, d, alpha, candidate_cells):
    """``R`` rounds of ``rho / T`` each and ``d`` 1-ways at the rounds' noise cost exactly ``rho``
    (``T = R + alpha d``), whatever the rule planned; and the rule stays within AIM's default."""
    rounds = allocation.plan_aim(n_hat, rho, alpha, d, candidate_cells)
    assert 0 <= rounds <= 16 * d - alpha * d
    units = allocation.aim_units(rounds, d, alpha)
    sigma = allocation.aim_sigma(rho, units, alpha)
    eps = math.sqrt(8 * (1 - alpha) * rho / units)
    spent = d / (2 * sigma**2) + rounds * (1 / (2 * sigma**2) + eps**2 / 8)
    assert spent == pytest.approx(rho, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.floats(1, 1e7), st.floats(1e-5, 10), st.integers(1, 30), cells, st.integers(2, 200))
def test_the_rule_plans_more_rounds_only_with_more_rows_or_budget(n_hat, rho, d, candidate_cells, silos):
    """Monotone: more rows or more budget never plan fewer rounds (for every method)."""
    plans = [
        lambda n, r: allocation.plan_aim(n, r, 0.9, d, candidate_cells),
        lambda n, r: allocation.plan_distaim(n, r, 0.9, d, candidate_cells, 10),
        lambda n, r: allocation.plan_flaim(n, r, 0.9, d, candidate_cells, 10, 1, "private", silos, 1.0),
        lambda n, r: allocation.plan_flaim_annealed(n, r, 0.9, d, candidate_cells, silos),
    ]
    for plan in plans:
        assert plan(n_hat, rho) <= plan(2 * n_hat, rho)
        assert plan(n_hat, rho) <= plan(n_hat, 2 * rho)


@settings(max_examples=200, deadline=None)
@given(st.floats(1, 1e7), st.floats(1e-5, 10), st.integers(1, 30), cells, st.integers(2, 200))
def test_private_flaim_plans_on_the_rows_of_every_silo_of_a_round(n_hat, rho, d, candidate_cells, silos):
    """With every silo in every round, private FLAIM's sums cover all of them (at noise up to
    sigma sqrt(K)) and it measures no proxy rounds: never fewer rounds than naive FLAIM, whose sum
    may cover one silo; with sampled silos its proxy's 1-ways cost every round, and it plans as
    ``sqrt(p K)`` silos' rows at that noise."""
    plan = lambda variant, rate: allocation.plan_flaim(n_hat, rho, 0.9, d, candidate_cells, 10, 1, variant, silos, rate)  # noqa: E731
    assert plan("private", 1.0) >= plan("naive", 1.0)
    sampled = max(1.0, 0.1 * silos)
    sigma = lambda r: allocation.flaim_sigma(rho, r, 1, d, 0.9, True)  # noqa: E731
    rows = n_hat * math.sqrt(sampled) / silos
    assert plan("private", 0.1) == allocation.planned_rounds(rows, candidate_cells, sigma, 10)


@settings(max_examples=200, deadline=None)
@given(st.floats(1, 1e7), st.floats(1e-5, 10), st.integers(1, 30), cells, st.integers(1, 200))
def test_an_annealing_flaim_plans_no_more_rounds_than_aim_over_the_pool(n_hat, rho, d, candidate_cells, silos):
    """A round's sums carry up to ``sigma sqrt(K)``: never more rounds than AIM plans for the pooled
    rows, as many with one silo, and only private FLAIM over every silo with one local step anneals."""
    planned = allocation.plan_flaim_annealed(n_hat, rho, 0.9, d, candidate_cells, silos)
    assert planned <= allocation.plan_aim(n_hat, rho, 0.9, d, candidate_cells)
    if silos == 1:
        assert planned == allocation.plan_aim(n_hat, rho, 0.9, d, candidate_cells)
    assert allocation.flaim_anneals(None, 1.0, 1, "private")
    assert not allocation.flaim_anneals(4, 1.0, 1, "private")  # T given
    assert not allocation.flaim_anneals(None, 0.5, 1, "private")  # sampled silos
    assert not allocation.flaim_anneals(None, 1.0, 2, "private")  # local steps refine local copies
    assert not any(allocation.flaim_anneals(None, 1.0, 1, v) for v in ("naive", "oracle"))


def test_a_round_is_planned_only_while_its_marginal_is_worth_measuring():
    """With one candidate of 10 cells: measurable (expected L1 noise at most a tenth of the rows)
    at R rounds and not at R + 1 for the R the rule returns."""
    rho, d, alpha = 0.015, 5, 0.9
    for n_hat in (50, 300, 3000, 30000, 300000):
        r = allocation.plan_aim(n_hat, rho, alpha, d, [10])
        sigma = lambda k: allocation.aim_sigma(rho, allocation.aim_units(k, d, alpha), alpha)  # noqa: E731
        if r:
            assert math.sqrt(2 / math.pi) * sigma(r) * 10 <= allocation.NOISE_TO_SIGNAL * n_hat
        if r < math.floor(16 * d - alpha * d):
            assert math.sqrt(2 / math.pi) * sigma(r + 1) * 10 > allocation.NOISE_TO_SIGNAL * n_hat
    assert allocation.plan_aim(10, rho, alpha, d, [10]) == 0  # nothing measurable: 1-ways only


@settings(max_examples=100, deadline=None)
@given(
    st.floats(1, 1e7),
    st.floats(1e-5, 10),
    st.lists(st.integers(1, 200), max_size=8),
    st.integers(0, 8),
    st.floats(1, 20),
    st.sampled_from([1, 2, 4]),
)
def test_fedtda_plan_spends_exactly_the_budget_left(n_hat, rho, numeric, n_cat, bound, max_refine):
    if not numeric and not n_cat:
        n_cat = 1
    plan = allocation.plan_fedtda(n_hat, rho, numeric, n_cat, bound, max_refine)
    assert plan.rho_cat + plan.rho_num + plan.rho_cov == pytest.approx(rho, rel=1e-12)
    assert plan.refine in (1, 2, 4) and plan.refine <= max_refine
    assert any(
        plan.rho_cov == pytest.approx(s * rho)
        for s in (allocation.MIN_COVARIANCE_SHARE, allocation.MAX_COVARIANCE_SHARE)
    )
    if numeric and n_cat:  # equal budget per histogram column
        assert plan.rho_cat / n_cat == pytest.approx(plan.rho_num / len(numeric), rel=1e-12)


def test_fedtda_measures_the_covariance_where_its_correlations_can_be_measured():
    plan = lambda n: allocation.plan_fedtda(n, 0.015, [32] * 6, 9, 2 * math.sqrt(21), 4)  # noqa: E731
    small, large = plan(3000), plan(300_000)
    assert small.rho_cov == pytest.approx(allocation.MIN_COVARIANCE_SHARE * 0.015)
    assert large.rho_cov == pytest.approx(allocation.MAX_COVARIANCE_SHARE * 0.015)
    assert small.refine == 1 and large.refine == 4


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-1e4, 1e4), min_size=1, max_size=40), st.floats(0.5, 1e5))
def test_projection_is_the_nearest_histogram_with_the_total(values, total):
    """Non-negative, sums to one, and optimal: ``x = max(y - c, 0)`` for one shift ``c``, which
    is the KKT condition of the Euclidean projection onto ``{x >= 0, sum x = total}``."""
    y = np.array(values)
    p = projected(y, total)
    assert np.all(p >= 0) and p.sum() == pytest.approx(1.0)
    x = p * total
    positive = x > 1e-9 * total
    shift = float(np.mean(y[positive] - x[positive]))
    assert np.allclose(x[positive], y[positive] - shift, atol=1e-6 * max(1.0, np.abs(y).max(), total))
    assert np.all(y[~positive] <= shift + 1e-6 * max(1.0, np.abs(y).max(), total))


# ---- the runs ------------------------------------------------------------------------------------


class FixedTotal:
    """Seeded noise, except that the first release (the planning total) comes out as ``value``:
    the same noisy total for two neighbouring datasets."""

    name = "seeded-numpy"
    seeded = True

    def __init__(self, seed: int, value: int):
        self.inner, self.value, self.first = SeededNoise(seed), value, True

    def gaussian_counts(self, counts, sigma):
        if self.first:
            self.first = False
            return np.array([self.value], dtype=np.int64)
        return self.inner.gaussian_counts(counts, sigma)

    def gaussian_reals(self, values, sigma):
        return self.inner.gaussian_reals(values, sigma)

    def noisy_argmax(self, scores, scale):
        return self.inner.noisy_argmax(scores, scale)


def _silos(schema, frames):
    return [pf.Silo.from_frame(f, schema, name=f"s{k}") for k, f in enumerate(frames)]


@pytest.mark.parametrize("method", METHODS)
def test_neighbouring_datasets_with_the_same_noisy_total_get_the_same_schedule(method, monkeypatch):
    """D and D plus one record, with the planning total released as the same number: the plan and
    the noise of every release are identical, so nothing private but the released total enters."""
    schema = pf.Schema.from_dict(SCHEMA)
    frames = [make_frame(300, 1), make_frame(250, 2)]
    plus = [frames[0], make_frame(251, 2)]  # one more record in the second silo
    ledgers = []
    for data in (frames, plus):
        monkeypatch.setattr("privsyn_fed.release.run.noise_source", lambda seed: FixedTotal(seed, 560))
        ledgers.append(pf.synthesize(_silos(schema, data), method, 1.0, 1e-9, seed=4, rows=10).ledger)
    a, b = ledgers
    assert a["details"]["schedule"] == b["details"]["schedule"]
    assert a["details"]["schedule"]["noisy_total"] == 560
    if method not in ("aim", "distaim"):  # their count of rounds also follows their (data-dependent) annealing
        assert [e.get("sigma") for e in a["entries"]] == [e.get("sigma") for e in b["entries"]]
    assert [e.get("sigma") for e in a["entries"][: 1 + 5]] == [e.get("sigma") for e in b["entries"][: 1 + 5]]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("rows,epsilon", [(60, 0.05), (600, 1.0), (1200, 4.0)])
def test_every_planned_run_spends_its_budget_and_its_schedule_audits(method, rows, epsilon):
    """From a handful of rows at a tiny budget (no rounds: the 1-ways take it all) to many rows at a
    large one, the entries sum to the budget and the audit recomputes the schedule."""
    schema = pf.Schema.from_dict(SCHEMA)
    frames = [make_frame(rows // 2, 5), make_frame(rows - rows // 2, 6)]
    led = pf.synthesize(_silos(schema, frames), method, epsilon, 1e-9, seed=7, rows=10).ledger
    assert led["rho_spent"] == pytest.approx(led["rho_budget"], rel=1e-9)
    assert led["entries"][0]["query"].startswith("total number of rows")
    problems = audit_ledger(led).problems
    assert len(problems) == 1 and problems[0].startswith("SEEDED RUN"), problems
    if method != "fedtda" and rows == 60:
        assert led["details"]["schedule"]["rounds"] == 0
        assert not any(e["mechanism"] == "exponential" for e in led["entries"])


def test_without_rounds_aim_is_the_independent_allocation():
    """No round planned: AIM's 1-ways get sqrt(d / (2 rho_rest)), the independent method's noise."""
    schema = pf.Schema.from_dict(SCHEMA)
    led = pf.synthesize(_silos(schema, [make_frame(40, 3)]), "aim", 0.05, 1e-9, seed=1, rows=10).ledger
    rest = led["rho_budget"] * (1 - allocation.TOTAL_SHARE)
    assert [e["sigma"] for e in led["entries"][1:]] == pytest.approx([math.sqrt(5 / (2 * rest))] * 5)


@pytest.fixture(scope="module")
def planned_ledgers():
    schema = pf.Schema.from_dict(SCHEMA)
    frames = [make_frame(600, 8), make_frame(500, 9)]
    return {m: pf.synthesize(_silos(schema, frames), m, 1.0, 1e-9, seed=2, rows=10).ledger for m in METHODS}


#: A noisy total this many times the recorded one plans another schedule for the test's table.
OTHER_TOTAL = {"aim": 1 / 50, "distaim": 1 / 50, "flaim": 1 / 50, "fedtda": 50}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    "tamper,message",
    [
        (lambda s, m: s.update(noisy_total=s["noisy_total"] * OTHER_TOTAL[m]), "allocation rule gives"),
        (lambda s, m: s.update(noise_to_signal=2.0), "other constants"),
        (lambda s, m: s.pop("noisy_total"), "does not record the noisy total"),
    ],
)
def test_a_schedule_that_does_not_follow_from_its_noisy_total_fails_the_audit(planned_ledgers, method, tamper, message):
    led = copy.deepcopy(planned_ledgers[method])
    tamper(led["details"]["schedule"], method)
    assert any(message in p for p in audit_ledger(led).problems), audit_ledger(led).problems


@pytest.mark.parametrize("method", METHODS)
def test_a_planned_run_without_its_total_or_domain_fails_the_audit(planned_ledgers, method):
    led = copy.deepcopy(planned_ledgers[method])
    led["details"].pop("shape")
    assert any("details.shape" in p for p in audit_ledger(led).problems)
    led = copy.deepcopy(planned_ledgers[method])
    first = led["entries"][0]
    first["sigma"] /= 2
    first["rho"] = 1 / (2 * first["sigma"] ** 2)
    led["rho_spent"] = sum(e["rho"] for e in led["entries"])
    led["epsilon"] = pf.accounting.rho_to_epsilon(led["rho_spent"], led["delta"])
    assert any("starts with the row total" in p for p in audit_ledger(led).problems)


def test_given_rounds_or_split_are_used_as_they_are(schema_dict):
    schema = pf.Schema.from_dict(schema_dict)
    silos = _silos(schema, [make_frame(300, 1), make_frame(300, 2)])
    led = pf.synthesize(silos, "distaim", 1.0, 1e-9, seed=1, rows=10, rounds=3).ledger
    assert "schedule" not in led["details"] and sum(e["mechanism"] == "exponential" for e in led["entries"]) == 3
    led = pf.synthesize(silos, "fedtda", 1.0, 1e-9, seed=1, rows=10, split=(0.05, 0.2, 0.35, 0.4)).ledger
    assert "schedule" not in led["details"] and len(led["entries"]) == 4
    assert led["entries"][0]["rho"] == pytest.approx(0.05 * led["rho_budget"])
