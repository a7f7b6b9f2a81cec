import json
import math

import opendp.prelude as dp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privsyn_fed.accounting import Accountant, UnitAccountant, cks_delta, epsilon_to_rho, gaussian_entry, rho_to_epsilon
from privsyn_fed.accounting.conversions import cks_rho
from privsyn_fed.audit import audit_ledger, load_ledger
from privsyn_fed.common import BudgetExceeded, InputError

dp.enable_features("contrib")


def test_epsilon_to_rho_matches_the_reference_value():
    # private-pgm's cdp_rho(1, 1e-9) = 0.014973...
    assert epsilon_to_rho(1.0, 1e-9) == pytest.approx(0.014973, abs=1e-6)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.01, 50.0), st.sampled_from([1e-12, 1e-9, 1e-6, 1e-3]))
def test_epsilon_to_rho_is_the_largest_rho_within_epsilon(epsilon, delta):
    rho = epsilon_to_rho(epsilon, delta)
    assert rho_to_epsilon(rho, delta) <= epsilon
    assert rho_to_epsilon(rho * (1 + 1e-9), delta) > epsilon


@pytest.mark.parametrize("rho, delta", [(1e-4, 1e-9), (0.014973, 1e-9), (0.5, 1e-6), (3.0, 1e-5)])
def test_conversion_agrees_with_independent_cks_bound(rho, delta):
    eps = rho_to_epsilon(rho, delta)
    # At OpenDP's epsilon, the CKS delta is (up to rounding) the target delta ...
    assert cks_delta(rho, eps) == pytest.approx(delta, rel=1e-4)
    # ... and a slightly smaller epsilon would need a larger delta.
    assert cks_delta(rho, eps * 0.99) > delta


def test_conversion_is_opendps():
    rho, delta = 0.2, 1e-7
    meas = dp.m.make_gaussian(
        dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1 / math.sqrt(2 * rho)
    )
    assert rho_to_epsilon(rho, delta) == dp.c.make_zCDP_to_approxDP(meas).map(1.0).epsilon(delta)


def test_write_ahead_ledger_is_on_disk_before_release(tmp_path):
    path = tmp_path / "l.json"
    acc = Accountant(1.0, 1e-9, "aim", ledger_path=path)
    assert not path.exists()
    acc.gaussian("marginal(a)", 1.0, 50.0, "curator", sampler="opendp")
    on_disk = json.loads(path.read_text())
    assert on_disk["entries"][0]["rho"] == pytest.approx(1 / (2 * 50.0**2))
    assert on_disk["status"] == "running"
    problems = audit_ledger(on_disk).problems  # the arithmetic adds up; the run has not finished
    assert len(problems) == 1 and "did not complete" in problems[0]


def test_the_ledger_file_is_indented_json_of_the_ledger_after_every_change(tmp_path):
    path = tmp_path / "l.json"
    acc = Accountant(1.0, 1e-9, "aim", ledger_path=path, details={"note": "a\nb", "nested": {"k": [1, 2]}})
    acc.note(schedule={"rounds": 3})
    assert path.read_text() == json.dumps(acc.ledger(), indent=2) + "\n"
    acc.gaussian("marginal(a,\nb)", 1.0, 50.0, "curator", cells=4, parties={"grid": [1.5, {"x": None}]})
    acc.exponential("select", 2.0, 0.01, "curator", round=1)
    acc.finish(rounds=1)
    assert path.read_text() == json.dumps(acc.ledger(), indent=2) + "\n"


def test_charge_over_budget_is_refused_and_not_recorded(tmp_path):
    path = tmp_path / "l.json"
    acc = Accountant(0.1, 1e-9, "aim", ledger_path=path)
    acc.gaussian("q1", 1.0, 300.0, "curator")
    before = path.read_text()
    with pytest.raises(BudgetExceeded):
        acc.gaussian("q2", 1.0, 0.5, "curator")
    assert path.read_text() == before
    assert len(acc.entries) == 1


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.floats(0.01, 100.0)), min_size=1, max_size=30), st.floats(0.05, 5.0))
def test_ledger_never_exceeds_budget_and_sums(charges, epsilon):
    """Property: whatever is asked, accepted charges sum to rho_spent <= rho_budget."""
    acc = Accountant(epsilon, 1e-8, "test")
    for is_gauss, x in charges:
        try:
            if is_gauss:
                acc.gaussian("q", 1.0, x, "curator", sampler="opendp")
            else:
                acc.exponential("s", 1.0, 1.0 / x, "curator", sampler="opendp")
        except BudgetExceeded:
            pass
    assert acc.rho_spent <= acc.rho_budget * (1 + 1e-9)
    assert acc.rho_spent == pytest.approx(sum(e["rho"] for e in acc.entries))
    led = acc.ledger()
    assert led["epsilon"] <= epsilon * (1 + 1e-6)
    problems = audit_ledger(led).problems  # the arithmetic adds up (method "test" never ran)
    assert all(p.startswith(("unknown method", "the run did not complete")) for p in problems), problems


def sample_ledger():
    """A complete AIM ledger as a run writes it: columns a (2 cells) and b (3 cells), the explicit
    workload {(a, b)} (closure weights a: 1, b: 1, (a, b): 2), T = 3 units, one round that spends
    what the 1-ways left."""
    rho, alpha, T = epsilon_to_rho(1.0, 1e-9), 0.9, 3
    options = {"rounds": T, "alpha": alpha, "max_model_size": 80.0, "pgm_iters": 1000, "pgm_tol": 1e-6}
    options |= {"workload_degree": None, "workload_size": 64, "workload_seed": 0, "workload": "explicit"}
    details = {"silos": 1, "columns": ["a", "b"], "column_types": ["categorical"] * 2, "shape": [2, 3]}
    details |= {"noise": "opendp", "options": options, "workload": [["a", "b"]]}
    acc = Accountant(1.0, 1e-9, "aim", threat_model="aim: a trusted curator", details=details)
    sigma = math.sqrt(T / (2 * alpha * rho))
    acc.gaussian("marginal(a)", 1.0, sigma, "curator", sampler="opendp", cells=2)
    acc.gaussian("marginal(b)", 1.0, sigma, "curator", sampler="opendp", cells=3)
    left = acc.remaining
    last = {"sampler": "opendp", "round": 1}
    eps = math.sqrt(8 * (1 - alpha) * left)
    acc.exponential("select among 3 candidate marginals", 2.0, eps, "curator", candidates=3, **last)
    acc.gaussian("marginal(a, b)", 1.0, math.sqrt(1 / (2 * alpha * left)), "curator", cells=6, **last)
    acc.finish(rounds=1, rows=10)
    return json.loads(json.dumps(acc.ledger()))


def test_audit_accepts_an_honest_ledger():
    rep = audit_ledger(sample_ledger())
    assert rep.ok and not rep.warnings


@pytest.mark.parametrize(
    "tamper, fragment",
    [
        (lambda l: l["entries"][0].update(sigma=80.0), "parameters give"),
        (lambda l: l["entries"].pop(1), "out of sequence"),
        (lambda l: l.update(rho_spent=l["rho_spent"] / 2), "entries add up to"),
        (lambda l: l.update(epsilon=l["epsilon"] / 2), "converts to"),
        (lambda l: l["entries"][2].update(epsilon=0.5, rho=0.5**2 / 8), "entries add up to"),
        (lambda l: l.update(rho_budget=1e-6), "more than the budget"),
        (
            lambda l: (l["entries"].pop(), l.update(rho_spent=sum(e["rho"] for e in l["entries"]))),
            "an entry is missing",
        ),
        (lambda l: l["entries"][2].update(sensitivity=1.0), "below the sound value"),
        (
            lambda l: l["entries"][0].update(sensitivity_l2=0.5, rho=0.5**2 / (2 * l["entries"][0]["sigma"] ** 2)),
            "exactly 1",
        ),
        (lambda l: l["entries"][2].update(parallel_over="silos", silos=["x"]), "parallel composition is only valid"),
        (lambda l: l.update(non_private="oracle"), "NOT PRIVATE"),
        (lambda l: l["details"].update(mpc={"debug": True, "provider": "trusted-first-party"}), "DEBUG MPC MODE"),
    ],
)
def test_audit_catches_tampering(tamper, fragment):
    led = sample_ledger()
    tamper(led)
    rep = audit_ledger(led)
    assert not rep.ok
    assert any(fragment in p for p in rep.problems), rep.problems


def test_audit_fails_seeded_and_unfinished_runs():
    led = sample_ledger()
    led.update(seeded=True, status="failed")
    rep = audit_ledger(led)
    assert not rep.ok
    assert any("SEEDED RUN" in p for p in rep.problems) and any("did not complete" in p for p in rep.problems)


def test_load_ledger_rejects_non_json_and_foreign_files(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{oops")
    with pytest.raises(InputError, match="not valid JSON"):
        load_ledger(p)
    p.write_text('{"hello": 1}')
    with pytest.raises(InputError, match="missing field"):
        load_ledger(p)


@pytest.mark.parametrize("suffix", [".html", ".md"])
def test_report_states_the_guarantee_and_lists_the_mechanisms(tmp_path, suffix):
    from privsyn_fed.audit import write_report

    led = sample_ledger()
    path = tmp_path / f"report{suffix}"
    write_report(led, path)
    text = path.read_text()
    assert "add/remove one record" in text and f"({led['epsilon']:.4g}, 1e-09)-differential privacy" in text
    assert "marginal(a, b)" in text and "OK" in text
    if suffix == ".html":
        assert "<svg" in text and "<polyline" in text
    led["entries"][0]["sigma"] = 1.0
    write_report(led, path)
    assert "FAILED" in path.read_text()
    with pytest.raises(InputError, match=".html or .md"):
        write_report(led, tmp_path / "report.pdf")


def test_a_unit_accountant_charges_a_batch_at_the_units_sensitivity_in_one_write(tmp_path):
    path = tmp_path / "l.json"
    acc = Accountant(1.0, 1e-9, "aim", ledger_path=path)
    unit = UnitAccountant(acc, 3.0)
    recorded = unit.charge_all([gaussian_entry(f"q{k}", 1.0, 40.0, "curator") for k in range(2)])
    assert [e["sensitivity_l2"] for e in recorded] == [3.0, 3.0] and [e["step"] for e in recorded] == [1, 2]
    assert math.isclose(unit.rho_spent, 2 / (2 * 40.0**2), rel_tol=1e-12)  # the plan's cost, in row units
    assert json.loads(path.read_text())["entries"] == recorded
    with pytest.raises(BudgetExceeded):  # the second does not fit: neither is recorded
        unit.charge_all([gaussian_entry("q2", 1.0, 40.0, "curator"), gaussian_entry("q3", 1.0, 0.01, "curator")])
    assert len(acc.entries) == 2 and json.loads(path.read_text())["entries"] == recorded


@settings(max_examples=40, deadline=None)
@given(st.floats(1e-3, 100.0), st.floats(-15.0, -1.0))
def test_cks_rho_is_the_bound_inverted(epsilon, log10_delta):
    delta = 10.0**log10_delta
    rho = cks_rho(epsilon, delta)
    # the independent bound's delta at rho is the target (its own bisection, to rounding) ...
    assert cks_delta(rho, epsilon) == pytest.approx(delta, rel=1e-6)
    # ... and OpenDP's largest rho agrees with it
    assert epsilon_to_rho(epsilon, delta) == pytest.approx(rho, rel=1e-12)


@pytest.mark.parametrize("off", [1.0 + 3e-14, 1.0 + 1e-11, 0.9, 2.0])
def test_epsilon_to_rho_without_a_good_start(monkeypatch, off):
    # a start away from the answer: a wider narrow bracket, or at last the wide one, finds it
    from privsyn_fed.accounting import conversions

    for epsilon, delta in [(1.0, 1e-9), (7.3, 1e-6), (0.05, 1e-12)]:
        exact = conversions.cks_rho(epsilon, delta)
        monkeypatch.setattr(conversions, "cks_rho", lambda e, d: exact * off)
        rho = conversions.epsilon_to_rho(epsilon, delta)
        monkeypatch.undo()
        assert rho_to_epsilon(rho, delta) <= epsilon
        assert rho_to_epsilon(rho * (1 + 1e-13), delta) > epsilon
