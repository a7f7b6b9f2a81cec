"""Finding dependence on small tables (``--find-dependence``, ``methods.dependence``): marginals on
merged bins (``methods.coarse``) and their sensitivity, the fit through their query, the releases a
run makes and what the ledger records of them, and the audit's refusal of a tampered ledger."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privsyn_fed as pf
from privsyn_fed.accounting import Accountant, epsilon_to_rho
from privsyn_fed.aggregation import InProcessAggregator
from privsyn_fed.audit import audit_ledger
from privsyn_fed.common import BudgetExceeded, OptionError
from privsyn_fed.mechanisms import gaussian_mechanisms
from privsyn_fed.methods import allocation, coarse, dependence
from privsyn_fed.methods.aim import AIMOptions, problem_for, run_aim
from privsyn_fed.methods.distaim import run_distaim
from privsyn_fed.methods.federated import FederatedOptions
from privsyn_fed.methods.flaim import FLAIMOptions
from privsyn_fed.noise import SeededNoise
from privsyn_fed.silo import MarginalsQuery

from .conftest import SCHEMA, assert_audit_objects_only_to_the_seed, make_frame, run_cli, synth_argv

NAMES = [c["name"] for c in SCHEMA["columns"]]


def release(method: str, seed: int | None = None, rows: int = 50, **options):
    frames = [make_frame(500, 1), make_frame(400, 2)]
    return pf.synthesize(frames, method, 1.0, 1e-9, schema=pf.Schema.from_dict(SCHEMA), rows=rows, seed=seed,
                         progress=False, find_dependence=True, pgm_iters=50, **options)  # fmt: skip


# ---- merged bins ---------------------------------------------------------------------------------


def test_groups_are_contiguous_and_differ_in_size_by_at_most_one():
    assert coarse.group_starts(32, 4) == (0, 8, 16, 24)
    assert coarse.group_starts(7, 3) == (0, 2, 4)
    assert coarse.group_sizes(7, (0, 2, 4)) == [2, 2, 3]
    assert coarse.group_starts(2, 4) == (0, 1)  # never more groups than cells


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 4), st.integers(1, 4), st.integers(0, 2**31))
def test_the_numpy_fit_reads_a_merged_marginal_and_its_adjoint(a, b, ka, kb, seed):
    """The numpy fit's query on merged bins, nested in a larger clique with its columns in another
    order, is ``coarsen`` of the marginal, and its gradient is the adjoint: ``<G x, y> = <x, G^T y>``."""
    from privsyn_fed.methods import mirror, pgm

    rng = np.random.default_rng(seed)
    domain = pgm.make_domain(["a", "b", "c"], [a, b, 3])
    starts = (coarse.group_starts(b, kb), coarse.group_starts(a, ka))  # over (b, a)
    ms = pgm.merge_measurements(
        [(("c", "a", "b"), np.zeros(3 * a * b), 1.0), (("b", "a"), np.zeros(coarse.coarse_cells(starts)), 1.0, starts)]
    )
    plan = mirror.Plan(domain, ms)
    x = rng.normal(size=(3, a, b))  # the loss clique (c, a, b)
    y = rng.normal(size=coarse.coarse_cells(starts))
    merged = plan.measured_cell >= 3 * a * b  # the cells of the second measurement
    gx = np.bincount(plan.measured_cell[merged], weights=x.ravel()[plan.loss_cell[merged]], minlength=plan.y.size)
    gx = gx[3 * a * b :]
    np.testing.assert_allclose(gx, coarse.coarsen(x.sum(axis=0).T, starts).ravel())
    gty = np.bincount(plan.loss_cell[merged], weights=y[plan.measured_cell[merged] - 3 * a * b], minlength=x.size)
    assert math.isclose(float(gx @ y), float(x.ravel() @ gty), rel_tol=1e-9, abs_tol=1e-9)


def _silo(rows: pd.DataFrame) -> pf.Silo:
    return pf.Silo.from_frame(rows, pf.Schema.from_dict(SCHEMA), name="s")


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 8), st.integers(1, 6), st.integers(0, 4), st.integers(0, 4))
def test_a_merged_marginal_moves_by_exactly_one_when_a_record_is_added(seed, ka, kb, a, b):
    """Sensitivity 1 in L1 and L2 (add/remove one record): the record is in one merged cell."""
    if a == b:
        b = (a + 1) % 5
    clique = (min(a, b), max(a, b))
    shape = pf.Schema.from_dict(SCHEMA).shape
    starts = tuple(coarse.group_starts(shape[i], k) for i, k in zip(clique, (ka, kb)))
    d = make_frame(60, seed % 1000)
    more = pd.concat([d, make_frame(1, seed % 997 + 1)], ignore_index=True)
    query = coarse.MergedMarginalQuery(clique, starts)
    diff = query(_silo(more)) - query(_silo(d))
    assert np.abs(diff).sum() == 1 and math.isclose(float(np.sqrt((diff**2).sum())), 1.0)
    assert diff.size == query.size(pf.Schema.from_dict(SCHEMA)) == coarse.coarse_cells(starts)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31))
def test_the_grouping_one_ways_move_by_sqrt_d_when_a_record_is_added(seed):
    """Every column's 1-way released together: a record is in one cell of each, so L2 ``sqrt(d)``."""
    d = make_frame(40, seed % 1000)
    more = pd.concat([d, make_frame(1, seed % 991 + 1)], ignore_index=True)
    query = MarginalsQuery(tuple((i,) for i in range(len(NAMES))))
    diff = query(_silo(more)) - query(_silo(d))
    assert math.isclose(float(np.sqrt((diff**2).sum())), math.sqrt(len(NAMES)))


def test_the_numpy_fit_and_mbi_agree_on_a_merged_marginal():
    """The numpy estimator's query on merged bins is mbi's ``BlockQuery``: the same fit."""
    from privsyn_fed.methods import pgm

    rng = np.random.default_rng(3)
    domain = pgm.make_domain(["a", "b"], [6, 4])
    truth = rng.integers(0, 40, size=(6, 4)).astype(float)
    starts = (coarse.group_starts(6, 2), coarse.group_starts(4, 2))
    ms = [
        (("a",), truth.sum(1) + rng.normal(0, 2, 6), 2.0),
        (("b",), truth.sum(0) + rng.normal(0, 2, 4), 2.0),
        (("a", "b"), coarse.coarsen(truth, starts).ravel() + rng.normal(0, 1, 4), 1.0, starts),
    ]
    fits = [pgm.ModelFitter(domain, iters=400, numpy_cells=cells).fit(ms) for cells in (10**6, 0)]
    ab = [pgm.MarginalReader(f)(("a", "b")) for f in fits]
    assert np.allclose(ab[0], ab[1], rtol=1e-3, atol=1e-2)
    # the merged marginal is fitted: the model's merged table is near the measured one
    assert np.abs(coarse.coarsen(ab[0].reshape(6, 4), starts).ravel() - ms[2][1]).sum() < 0.1 * truth.sum()


# ---- the choice ------------------------------------------------------------------------------------


def test_quantile_groups_cut_a_noisy_one_way_at_its_quantiles():
    assert dependence.quantile_starts(np.array([10, 10, 10, 10, 10, 10, 10, 10.0]), 4, 80) == (0, 2, 4, 6)
    assert dependence.quantile_starts(np.array([90, 5, 3, 2.0]), 4, 100) == (0, 1)  # one cell holds most rows
    assert dependence.quantile_starts(np.array([-50, 30, 30, 30.0]), 2, 90) == (0, 3)  # projected first
    assert dependence.valid_starts((0, 1), 4, 2) and not dependence.valid_starts((0, 2, 1), 4, 4)
    assert not dependence.valid_starts((1, 2), 4, 4) and not dependence.valid_starts((0, 1, 2), 4, 2)


def test_dependence_is_the_distance_from_the_margins_product_beyond_the_noise():
    independent = np.outer([30, 70], [40, 60]).astype(float) / 100
    assert math.isclose(dependence.dependence(independent, 0.0), 0.0, abs_tol=1e-9)
    together = np.array([[50.0, 0], [0, 50]])
    assert math.isclose(dependence.dependence(together, 0.0), 100.0)
    assert math.isclose(dependence.dependence(together, 10.0), 100.0 - math.sqrt(2 / math.pi) * 10 * 4)


def test_the_forest_takes_the_most_dependent_pairs_without_a_cycle():
    pairs = [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d"), ("d", "e")]
    scores = [5.0, 4.0, 9.0, 1.0, -1.0]
    assert dependence.spanning_forest(pairs, scores) == [("a", "c"), ("a", "b"), ("c", "d")]
    assert dependence.spanning_forest(pairs, [0.0] * 5) == []


def test_the_screened_pairs_are_every_pair_the_candidates_hold():
    cands = [("a",), ("a", "c"), ("b", "c", "d")]
    assert dependence.screened_pairs(cands, ["a", "b", "c", "d"]) == [("a", "c"), ("b", "c"), ("b", "d"), ("c", "d")]


# ---- a release -------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["aim", "distaim", "flaim"])
def test_a_release_finds_dependence_at_its_planned_shares_and_audits(method):
    led = release(method).ledger
    entries, d, dep = led["entries"], len(NAMES), led["details"]["dependence"]
    p, f = len(dep["pairs"]), len(dep["chosen"])
    assert p == math.comb(d, 2) and 1 <= f <= d - 1  # the workload holds every pair of 5 columns
    rest = led["rho_budget"] - entries[0]["rho"]  # after the planning total
    grouping, screens, pairs = entries[1], entries[2 : 2 + p], entries[2 + p : 2 + p + f]
    assert grouping["query"] == dependence.GROUPING_QUERY and math.isclose(grouping["sensitivity_l2"], math.sqrt(d))
    assert math.isclose(grouping["rho"], dependence.GROUPING_SHARE * rest, rel_tol=1e-9)
    assert math.isclose(sum(e["rho"] for e in screens), 0.15 * rest, rel_tol=1e-9)  # half the default 0.3
    assert math.isclose(sum(e["rho"] for e in pairs), 0.15 * rest, rel_tol=1e-9)
    assert all(e["sensitivity_l2"] == 1 and "on merged bins" in e["query"] for e in screens + pairs)
    assert [e["query"] for e in pairs] == [dependence.measure_query(c) for c in dep["chosen"]]
    # the rounds are planned on what the step leaves (aim and distaim plan as AIM: 2 silos anneal)
    left = rest * (1 - dependence.GROUPING_SHARE - dependence.DEPENDENCE_SHARE)
    cells = problem_for(pf.Schema.from_dict(SCHEMA), AIMOptions()).multiway_cells()
    n_hat = led["details"]["schedule"]["noisy_total"]
    if method == "flaim":  # private flaim, every silo in every round: AIM's schedule on its sums' rows
        planned = allocation.plan_flaim_annealed(n_hat, left, 0.9, d, cells, 2)
    else:
        planned = allocation.plan_aim(n_hat, left, 0.9, d, cells)
    assert led["details"]["schedule"]["rounds"] == planned and dep["rounds_after"] is True
    # the 1-ways and the rounds spend the rest: nothing is left over
    assert math.isclose(sum(e["rho"] for e in entries), led["rho_budget"], rel_tol=1e-9)
    assert dep["chosen"] == [
        list(c) for c in dependence.spanning_forest([tuple(x) for x in dep["pairs"]], dep["scores"])
    ]
    report = audit_ledger(led)
    assert report.ok, report.problems


@pytest.mark.parametrize("method", ["aim", "distaim"])
def test_rounds_follow_the_forest_when_the_budget_left_plans_them(method):
    """At epsilon 4 the budget the step leaves plans rounds on 900 rows: each selects among the
    candidates and measures its choice, after the forest and the 1-ways, and the ledger audits."""
    frames = [make_frame(500, 1), make_frame(400, 2)]
    led = pf.synthesize(frames, method, 4.0, 1e-9, schema=pf.Schema.from_dict(SCHEMA), rows=50,
                        progress=False, find_dependence=True, pgm_iters=50).ledger  # fmt: skip
    queries = [e["query"] for e in led["entries"]]
    selections = [i for i, q in enumerate(queries) if q.startswith("select among")]
    assert led["details"]["schedule"]["rounds"] >= 1 and led["details"]["rounds"] >= 1
    assert len(selections) == led["details"]["rounds"]
    last_pair = max(i for i, q in enumerate(queries) if "on merged bins" in q)
    assert min(selections) > last_pair + len(NAMES)  # after the forest and every column's 1-way
    report = audit_ledger(led)
    assert report.ok, report.problems


def test_a_seeded_release_finds_the_pairs_that_depend_most():
    """``income`` is made from ``age``, and ``label`` from ``income`` (``make_frame``): the screen
    ranks those two pairs first and the forest holds both."""
    led = release("aim", seed=11).ledger
    assert_audit_objects_only_to_the_seed(led)
    dep = led["details"]["dependence"]
    ranked = [dep["pairs"][i] for i in np.argsort(dep["scores"])[::-1]]
    assert sorted(ranked[:2]) == [["age", "income"], ["income", "label"]]
    assert sorted(dep["chosen"][:2]) == [["age", "income"], ["income", "label"]]


def test_options_that_cannot_find_dependence_are_refused():
    with pytest.raises(OptionError, match="leave rounds out"):
        AIMOptions(find_dependence=True, rounds=20).validate()
    with pytest.raises(OptionError, match="which find_dependence False leaves out"):
        AIMOptions(find_dependence=False, dependence_share=0.4).validate()
    AIMOptions(dependence_share=0.4).validate()  # the rule may run the step at that share
    AIMOptions().check_mpc()  # over MPC the rule never runs it
    with pytest.raises(OptionError, match="must lie in"):
        AIMOptions(find_dependence=True, dependence_share=0.95).validate()
    with pytest.raises(OptionError, match="does not run over MPC"):
        AIMOptions(find_dependence=True).check_mpc()
    with pytest.raises(OptionError, match="does not run over MPC"):
        FLAIMOptions(find_dependence=True).check_mpc()
    FLAIMOptions().check_mpc()


# ---- the audit ---------------------------------------------------------------------------------------


def _problems(led: dict) -> str:
    return " | ".join(audit_ledger(led).problems)


def _quieter(led: dict, i: int) -> dict:
    """Entry ``i`` with half its noise and the cost that noise has (the structure's check sees it)."""
    out = copy.deepcopy(led)
    out["entries"][i]["sigma"] /= 2
    out["entries"][i]["rho"] *= 4
    return out


@pytest.mark.parametrize("method", ["aim", "distaim", "flaim"])
def test_the_audit_refutes_a_dependence_release_that_was_tampered_with(method):
    led = release(method).ledger
    dep = led["details"]["dependence"]
    p = len(dep["pairs"])
    assert audit_ledger(led).ok
    rescored = copy.deepcopy(led)  # a score raised: the recorded choice is no longer its forest
    worst = int(np.argmin(dep["scores"]))
    rescored["details"]["dependence"]["scores"][worst] = 1e9
    assert "is not the maximum spanning forest" in _problems(rescored)
    swapped = copy.deepcopy(led)
    swapped["details"]["dependence"]["chosen"] = swapped["details"]["dependence"]["chosen"][::-1]
    if len(dep["chosen"]) > 1:
        assert "is not the maximum spanning forest" in _problems(swapped)
    # (flaim's few planned rounds: a costlier entry may first break its schedule, which the audit then names)
    named = ["find_dependence's share of the budget gives it"]
    named += ["but the allocation rule gives"] if method == "flaim" else []
    screen = _quieter(led, 2)  # a screen quieter than its share gives
    assert any(n in _problems(screen) for n in named)
    measured = _quieter(led, 2 + p)  # a chosen pair quieter than its share gives
    assert any(n in _problems(measured) for n in named)
    grouped = copy.deepcopy(led)
    grouped["details"]["dependence"]["groups"]["age"][0] = [0, 5, 3]
    assert "are not contiguous groups" in _problems(grouped)
    fewer = copy.deepcopy(led)  # fewer groups than the entries' cells say
    fewer["details"]["dependence"]["groups"]["age"][0] = [0]
    assert "on its recorded groups (details.dependence.groups) has" in _problems(fewer)
    rounds = copy.deepcopy(led)  # more rounds than the budget the step leaves plans
    rounds["details"]["schedule"]["rounds"] += 3
    assert "but the allocation rule gives" in _problems(rounds)
    hidden = copy.deepcopy(led)  # the ledger claims no such step, but made its releases
    hidden["details"]["options"]["find_dependence"] = False
    assert "details.dependence is recorded, but neither details.options.find_dependence" in _problems(hidden)
    missing = copy.deepcopy(led)
    del missing["entries"][3]
    assert not audit_ledger(missing).ok
    share = copy.deepcopy(led)  # another share: every later release's noise is off
    share["details"]["options"]["dependence_share"] = 0.5
    assert "find_dependence's share of the budget gives it" in _problems(share)
    constants = copy.deepcopy(led)
    constants["details"]["dependence"]["measure_groups"] = 8
    assert "other constants than this version's rule" in _problems(constants)
    earlier = copy.deepcopy(led)  # the earlier rule planned no rounds after the step
    del earlier["details"]["dependence"]["rounds_after"]
    assert "other constants than this version's rule" in _problems(earlier)


# ---- the rule that decides by default ------------------------------------------------------------


@pytest.mark.parametrize(
    "rows, epsilon, runs",
    [(1_000, 0.5, False), (1_000, 1, False), (3_000, 0.5, False), (1_000, 4, True), (3_000, 1, True),
     (10_000, 0.5, True), (10_000, 1, True), (3_000, 4, True), (10_000, 4, False), (32_561, 1, False),
     (48_842, 1, False)],
)  # fmt: skip
def test_the_rule_runs_the_step_where_it_was_measured_to_pay(rows, epsilon, runs):
    """The sizes and budgets of benchmarks/README.md's grid (delta 1e-9): on where the step beat
    the rounds alone or tied them, off where it lost; never over MPC."""
    rho = epsilon_to_rho(epsilon, 1e-9)
    rule = dependence.auto_rule(rows, rho, secure=False)
    assert rule["on"] is runs and rule["band"] == list(dependence.AUTO_BAND)
    assert math.isclose(rule["signal"], rows * math.sqrt(rho))
    assert dependence.auto_rule(rows, rho, secure=True)["on"] is False


def _default_release(method: str, epsilon: float, **options) -> dict:
    frames = [make_frame(500, 1), make_frame(400, 2)]
    return pf.synthesize(frames, method, epsilon, 1e-9, schema=pf.Schema.from_dict(SCHEMA), rows=50,
                         progress=False, pgm_iters=50, **options).ledger  # fmt: skip


@pytest.mark.parametrize("method", ["aim", "distaim", "flaim"])
def test_by_default_the_rule_decides_from_the_noisy_total_and_the_audit_recomputes_it(method):
    """900 rows: noisy rows x sqrt(rho) is about 400 at epsilon 4 (in the band: the step runs) and
    about 110 at epsilon 1 (below it: it does not); --no-find-dependence leaves it out anyway."""
    on = _default_release(method, 4.0)
    rule, total = on["details"]["dependence_rule"], on["details"]["schedule"]["noisy_total"]
    assert on["details"]["options"]["find_dependence"] is None
    assert rule["on"] is True and math.isclose(rule["signal"], total * math.sqrt(on["rho_budget"]))
    assert on["entries"][1]["query"] == dependence.GROUPING_QUERY and "dependence" in on["details"]
    assert audit_ledger(on).ok, audit_ledger(on).problems
    off = _default_release(method, 1.0)
    assert off["details"]["dependence_rule"]["on"] is False and "dependence" not in off["details"]
    assert not any("merged bins" in e["query"] for e in off["entries"])
    assert audit_ledger(off).ok, audit_ledger(off).problems
    never = _default_release(method, 4.0, find_dependence=False)
    assert "dependence_rule" not in never["details"] and "dependence" not in never["details"]
    assert audit_ledger(never).ok
    given = _default_release(method, 4.0, rounds=6)  # no planning total: the rule cannot decide
    assert "dependence_rule" not in given["details"] and "dependence" not in given["details"]

    flipped = copy.deepcopy(off)  # the rule said off; the ledger claims it said on
    flipped["details"]["dependence_rule"]["on"] = True
    assert "but the rule gives" in _problems(flipped)
    louder = copy.deepcopy(on)  # a signal other than the noisy total gives
    louder["details"]["dependence_rule"]["signal"] *= 10
    assert "but the rule gives" in _problems(louder)
    unrecorded = copy.deepcopy(on)
    del unrecorded["details"]["dependence_rule"]
    unrecorded_problem = (
        "details.dependence is recorded, but neither"  # a flaim ledger without it ran no step (before it)
        if method == "flaim"
        else "does not record the rule's outcome"
    )
    assert unrecorded_problem in _problems(unrecorded)
    secure = copy.deepcopy(on)  # over MPC the rule never runs the step
    secure["details"]["mpc"] = {"parties": 2, "collusion": 1}
    assert "but the rule gives" in _problems(secure)
    smuggled = copy.deepcopy(never)  # a rule record beside an explicit choice
    smuggled["details"]["dependence_rule"] = rule
    assert "the rule decides only" in _problems(smuggled)


def test_the_command_line_runs_the_step_leaves_it_out_or_lets_the_rule_decide(
    schema_path, silo_paths, tmp_path, capsys
):
    """1,000 rows at epsilon 4 lie in the rule's band: the step runs by default and with
    --find-dependence, not with --no-find-dependence; --help names both forms."""
    choices = {"default": {}, "on": {"find_dependence": True}, "off": {}}
    ledgers, said = {}, {}
    for name, options in choices.items():
        out = tmp_path / f"{name}.csv"
        argv = synth_argv(schema=schema_path, silos=silo_paths, out=out, epsilon=4.0, quiet=True, **options)
        run = run_cli(*argv, *(["--no-find-dependence"] if name == "off" else []), capsys=capsys)
        assert run.returncode == 0, run.stderr
        ledgers[name] = json.loads(out.with_suffix(".ledger.json").read_text())
        said[name] = [line for line in run.stdout.splitlines() if line.startswith("dependence step:")]
    assert [ledgers[n]["details"]["options"]["find_dependence"] for n in choices] == [None, True, False]
    assert ledgers["default"]["details"]["dependence_rule"]["on"] is True
    assert "dependence" in ledgers["default"]["details"] and "dependence" in ledgers["on"]["details"]
    assert "dependence" not in ledgers["off"]["details"]
    assert all(audit_ledger(led).ok for led in ledgers.values())
    assert len(said["default"]) == 1 and "the default rule: noisy rows x sqrt(rho) = " in said["default"][0]
    assert len(said["on"]) == 1 and "(--find-dependence)" in said["on"][0] and said["off"] == []
    from privsyn_fed.audit import render_report

    report = render_report(ledgers["default"], tmp_path / "report.md")  # the report to hand out says so too
    assert "Dependence step" in report and "the default rule: noisy rows x sqrt(rho)" in report
    assert "Dependence step" not in render_report(ledgers["off"], tmp_path / "report.md")
    helped = run_cli("synth", "--help")
    assert "--find-dependence, --no-find-dependence" in helped.stdout


def test_a_flaim_ledger_without_the_rules_record_ran_without_the_step():
    """FLAIM before the step: a planned ledger with ``find_dependence`` unset and no
    ``dependence_rule`` audits as a run without it; one that made the step's releases and dropped
    the rule's record does not."""
    off = _default_release("flaim", 1.0)
    assert off["details"]["dependence_rule"]["on"] is False
    older = copy.deepcopy(off)
    del older["details"]["dependence_rule"]
    assert audit_ledger(older).ok, audit_ledger(older).problems
    on = _default_release("flaim", 4.0)
    assert on["details"]["dependence_rule"]["on"] is True
    dropped = copy.deepcopy(on)
    del dropped["details"]["dependence_rule"]
    assert "details.dependence is recorded, but neither" in _problems(dropped)


# ---- the step's pairs are charged together, before the first is drawn ----------------------------


class LedgerWatch(SeededNoise):
    """Seeded noise that reads the ledger on disk before each Gaussian draw: the ``n``-th draw
    needs at least ``n`` Gaussian entries there (write-ahead); ``on_disk`` keeps what it saw."""

    def __init__(self, seed: int, path):
        super().__init__(seed)
        self.path, self.on_disk = path, []

    def _seen(self) -> None:
        entries = json.loads(self.path.read_text())["entries"]
        self.on_disk.append(sum(e["mechanism"] == "gaussian" for e in entries))
        assert self.on_disk[-1] >= len(self.on_disk), "a value was drawn before its charge was on disk"

    def gaussian_counts(self, counts, sigma):
        self._seen()
        return super().gaussian_counts(counts, sigma)

    def gaussian_reals(self, values, sigma):
        self._seen()
        return super().gaussian_reals(values, sigma)


@pytest.mark.parametrize("method", ["aim", "distaim"])
def test_the_screen_is_on_disk_whole_before_its_first_pair_is_drawn(tmp_path, method):
    schema = pf.Schema.from_dict(SCHEMA)
    frames = [make_frame(500, 1), make_frame(400, 2)]
    path = tmp_path / "ledger.json"
    acc = Accountant(1.0, 1e-9, method, ledger_path=path)
    noise = LedgerWatch(3, path)
    opts = {"find_dependence": True, "pgm_iters": 50}
    if method == "aim":
        run_aim(
            pf.Silo.from_frame(pd.concat(frames, ignore_index=True), schema, name="s"), acc, noise, AIMOptions(**opts)
        )
    else:
        silos = [pf.Silo.from_frame(f, schema, name=f"s{k}") for k, f in enumerate(frames)]
        run_distaim(InProcessAggregator(silos), acc, noise, FederatedOptions(**opts), sampling_seed=0)
    p = math.comb(len(NAMES), 2)
    chosen = len(acc.details["dependence"]["chosen"])
    # draws 1 and 2: the planning total and the grouping 1-ways; then the p screens, all charged
    # before the first is drawn, then the chosen pairs, all charged before the first of them
    assert noise.on_disk[2] == 2 + p and noise.on_disk[2 + p] == 2 + p + chosen
    assert len(noise.on_disk) == sum(e["mechanism"] == "gaussian" for e in acc.entries)


def test_a_batch_that_does_not_fit_records_nothing_and_draws_nothing(tmp_path):
    class Exploding(SeededNoise):
        def gaussian_counts(self, counts, sigma):
            raise AssertionError("drawn although the batch was refused")

    path = tmp_path / "ledger.json"
    acc = Accountant(0.1, 1e-9, "aim", ledger_path=path)
    acc.gaussian("q0", 1.0, 300.0, "curator")
    before = path.read_text()
    releases = [(f"q{k}", np.zeros(3, dtype=np.int64)) for k in (1, 2, 3)]
    sigma = 1.0 / math.sqrt(2 * 0.4 * acc.remaining)  # each fits alone, three do not
    with pytest.raises(BudgetExceeded):
        gaussian_mechanisms(acc, Exploding(0), releases, sigma=sigma, where="curator")
    assert path.read_text() == before and len(acc.entries) == 1
    ys = gaussian_mechanisms(acc, SeededNoise(0), releases[:2], sigma=sigma, where="curator")
    assert len(ys) == 2 and [e["step"] for e in acc.entries] == [1, 2, 3]
    assert json.loads(path.read_text())["entries"] == acc.entries
