"""A DP draft never releases a column it did not find: each way a column goes unfound, caught on
known counts; the draft refused after the spend, which the ledger and the store keep, or written
with placeholders that no schema reader accepts; the audit checks the recorded unfound columns."""

import json
import re
from itertools import chain

import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed import draft_dp
from privsyn_fed.accounting.budget_store import BudgetStore
from privsyn_fed.audit import audit_ledger, load_ledger
from privsyn_fed.common import InputError
from privsyn_fed.draft_dp.cells import KINDS
from privsyn_fed.schema import UNFOUND_KEY
from privsyn_fed.schema.draft import DRAFT_NOTE_KEY

from .conftest import ExactNoise, assert_one_line_error, run_cli


def _exact_draft(frame: pd.DataFrame, epsilon: float = 3.0, below_zero: bool = False):
    plan = draft_dp.plan_draft(epsilon, 1e-6, list(frame.columns), 50, 32)
    acc = draft_dp.accountant_for(plan)
    return plan, draft_dp.make_draft(lambda: iter([frame.astype(str)]), plan, acc, ExactNoise(below_zero))


def _column(values: dict) -> list:
    return list(chain.from_iterable([v] * n for v, n in values.items()))


def test_each_way_a_column_goes_unfound_is_caught_on_known_counts():
    """Exact counts at epsilon 3 over three columns (bounds threshold 19, categories threshold 18); the
    numeric columns hold numbers that are not whole (few whole values would be drafted as a code)."""
    n = 600
    cases = {
        "one value": ({7.5: 598, 8.5: 2}, "bounds", "only the value 7.5"),
        # at a decade's end, so that the coarse grid's [10, 20) (36 numbers) is found clearly holding them too
        "next interval": ({9.95: 300, 10.5: 12, 11.5: 12, 12.5: 12, "": n - 336}, "bounds", "the 3 next to them hold"),
        # one number in each of 100 intervals of the grid
        "nothing": ({g: 1 for g in draft_dp.BOUNDS_GRID[200:300]} | {"": n - 100}, "bounds", "no interval"),
        "one category": ({"a": 590, "b": 10}, "categories", "only 'a'"),
        "no category": ({f"v{i}": 12 for i in range(50)}, "categories", "no value has 18"),
        "mostly other": ({"a": 200, "b": 200} | {f"r{i}": 2 for i in range(100)}, "categories", "would map to"),
    }
    for name, (values, release, fragment) in cases.items():
        frame = pd.DataFrame({"c": _column(values), "ok": ["x", "y"] * (n // 2), "n": list(range(10, 20)) * (n // 10)})
        plan, result = _exact_draft(frame)
        assert (plan.bound_rows, plan.threshold) == (19, 18)
        (lost,) = result.unfound
        assert (lost.name, lost.sought) == ("c", release) and fragment in lost.why, (name, lost)
        spec = next(c for c in result.columns if c["name"] == "c")
        assert UNFOUND_KEY in spec and (release == "categories" or spec["lower"] is None), name
        with pytest.raises(InputError, match=r"column 'c': a placeholder"):
            result.schema
        assert result.accountant.details["draft"]["unfound"] == ["c"]
        assert [c["name"] for c in result.columns] == ["c", "ok", "n"]  # the found ones are drafted as ever
    # the next intervals clearly hold numbers: their least count is the threshold to reach, not coarse
    frame = pd.DataFrame({"c": _column(cases["next interval"][0]), "ok": ["x", "y"] * 300, "n": [1] * n})
    plan, result = _exact_draft(frame)
    lost = next(u for u in result.unfound if u.name == "c")
    assert lost.count == 12 and not lost.coarse and lost.epsilon > 3


def test_values_too_rare_for_any_budget_are_left_out_not_unfound():
    # 180 values over 300 rows: too few distinct values for an identifier, too few rows each to find
    frame = pd.DataFrame({"id": [f"p{i % 180}" for i in range(300)], "ok": ["x", "y"] * 150})
    _, result = _exact_draft(frame)
    assert result.dropped == ["id"] and not result.unfound and "too few for any budget" in result.notes[0]


def test_text_identifiers_are_left_out_from_the_profile_alone():
    frame = pd.DataFrame({"id": [f"p{i}" for i in range(400)], "ok": ["x", "y"] * 200})
    _, result = _exact_draft(frame)
    assert result.dropped == ["id"] and not result.unfound and "looks like an identifier" in result.notes[0]
    assert result.accountant.details["draft"]["identifiers"] == ["id"]
    assert [e["column"] for e in result.accountant.entries[1:]] == ["ok"]  # nothing spent on 'id'


def test_found_columns_stay_found_and_negative_noisy_counts_are_never_shown():
    frame = pd.DataFrame({"n": list(range(10, 20)) * 60, "ok": ["x", "y", "z"] * 200})
    _, result = _exact_draft(frame, below_zero=True)  # noisy missing and non-integer counts far below zero
    assert not result.unfound, result.unfound
    said = " ".join(result.notes)
    assert "noisy counts: 600 rows, 0 missing, 0 non-number, 0 non-integer" in said
    assert re.search(r"-\d", said) is None, said


def test_the_epsilon_named_brings_the_threshold_down_to_the_count():
    plan = draft_dp.plan_draft(3.0, 1e-6, ["a", "b", "c"], 50, 32)
    for release, count in (("bounds", 9), ("categories", 7)):
        need = plan.epsilon_for(release, count)
        assert need > 3
        at = lambda e: draft_dp.plan_draft(e, 1e-6, ["a", "b", "c"], 50, 32)  # noqa: E731
        threshold = lambda p: p.bound_rows if release == "bounds" else p.threshold  # noqa: E731
        assert threshold(at(float(draft_dp._round_up(need)))) <= count < threshold(at(need * 0.97))
    assert plan.epsilon_for("bounds", 1) is None and plan.epsilon_for("categories", None) is None
    assert plan.epsilon_for("categories", 18) == 3.0


def test_a_draft_with_unfound_columns_is_refused_after_the_spend_which_the_ledger_and_store_keep(
    coarse_table, tmp_path, capsys
):
    out, store = tmp_path / "s.json", tmp_path / "b.db"
    argv = ["schema", "draft", coarse_table, "--out", out, "--dp", "3", "--delta", "1e-6"]
    store_args = ["--budget-store", store, "--dataset-id", "d", "--total-epsilon", "10"]
    proc = run_cli(*argv, *store_args, capsys=capsys)
    line = assert_one_line_error(
        proc, "--dp 3 did not find", "'k' (only the value 7.5", "'flag' (only 'a'", "--leave-unfound"
    )
    need = float(line.split("about --dp ")[1].split()[0])
    assert need > 3 and "s.ledger.json records the budget spent" in line and "No schema was written" in line
    assert not out.exists()
    ledger = load_ledger(tmp_path / "s.ledger.json")
    assert ledger["status"] == "failed" and len(ledger["entries"]) == 5
    # all but the atoms' share of 'k', whose bounds were not found (so no atoms were sought)
    unspent = draft_dp.ATOM_RHO_SHARE * (1 - draft_dp.PROFILE_SHARE) * ledger["rho_budget"] / 4
    assert ledger["rho_spent"] == pytest.approx(ledger["rho_budget"] - unspent) and ledger["epsilon"] < 3
    assert ledger["details"]["draft"]["unfound"] == ["k", "flag"]
    problems = audit_ledger(ledger).problems
    assert len(problems) == 1 and "did not complete" in problems[0], problems  # its arithmetic holds
    (run,) = BudgetStore(store).budget("d").runs
    assert run["status"] == "failed" and run["rho_spent"] == pytest.approx(ledger["rho_spent"])


def test_leave_unfound_writes_placeholders_that_no_reader_accepts_until_filled_in(coarse_table, tmp_path, capsys):
    out = tmp_path / "s.json"
    argv = ["schema", "draft", coarse_table, "--out", out, "--dp", "3", "--delta", "1e-6", "--leave-unfound"]
    code, stdout, err = run_cli(*argv, capsys=capsys)
    assert code == 0, err
    assert "2 of them placeholders to fill in" in stdout and "bounds NOT FOUND" in err and "categories NOT FOUND" in err
    document = json.loads(out.read_text())
    assert document[DRAFT_NOTE_KEY]["unfound"] == ["k", "flag"] and "placeholders" in document[DRAFT_NOTE_KEY]["note"]
    ledger = load_ledger(tmp_path / "s.ledger.json")
    assert ledger["status"] == "complete" and audit_ledger(ledger).ok
    assert ledger["details"]["draft"]["unfound"] == ["k", "flag"]
    # every reader refuses the file in one line naming the column ...
    with pytest.raises(InputError, match=r"column 'k': a placeholder: the DP draft did not find its bounds"):
        pf.Schema.load(out)
    synth = ["synth", "--method", "independent", "--schema", out, "--silo", coarse_table, "--epsilon", "1"]
    proc = run_cli(*synth, "--delta", "1e-9", "--out", tmp_path / "o.csv", capsys=capsys)
    assert_one_line_error(proc, "column 'k': a placeholder", UNFOUND_KEY)
    assert not (tmp_path / "o.csv").exists()
    # ... until its bounds and categories are filled in and the keys deleted
    for col in document["columns"]:
        if col.pop(UNFOUND_KEY, None) is not None:
            col.update({"lower": 0, "upper": 10} if col["type"] == "numeric" else {"categories": ["a", "b", "(other)"]})
    out.write_text(json.dumps(document))
    assert pf.Schema.load(out).names == ["n", "k", "flag", "ok"]


@pytest.mark.parametrize(
    "tamper, fragment",
    [
        (lambda u: u.append("nobody"), "names 'nobody'"),
        (lambda u: u.reverse(), "in the table's order"),
        (lambda u: u.append(u[0]), "in the table's order"),
        (lambda u: u.clear(), "not a non-empty list"),
    ],
)
def test_the_audit_checks_the_recorded_unfound_columns(tamper, fragment, coarse_table, tmp_path, capsys):
    out = tmp_path / "s.json"
    argv = ["schema", "draft", coarse_table, "--out", out, "--dp", "3", "--delta", "1e-6", "--leave-unfound"]
    assert run_cli(*argv, capsys=capsys).returncode == 0
    ledger = load_ledger(tmp_path / "s.ledger.json")
    tamper(ledger["details"]["draft"]["unfound"])
    problems = audit_ledger(ledger).problems
    assert any(fragment in p for p in problems), problems


def test_whole_numbers_spread_too_widely_for_bounds_are_named_as_a_possible_identifier():
    """Account numbers of any length (600 whole numbers spread over 15 decades) leave every interval
    of both grids under the threshold: the draft says such whole numbers are often identifiers and
    names --exclude and --privacy-unit for the column. The same spread of numbers that are not whole
    (amounts) is not said to be one."""
    import numpy as np

    numbers = np.floor(10 ** np.random.default_rng(0).uniform(0, 15, 600))
    for values, named in ((numbers, True), (numbers + 0.25, False)):
        _, result = _exact_draft(pd.DataFrame({"nr": values, "ok": ["x", "y"] * 300}))
        (lost,) = result.unfound
        assert (lost.name, lost.sought) == ("nr", "bounds")
        said = "often identifiers" in lost.why and "--exclude nr" in lost.why and "--privacy-unit nr" in lost.why
        assert said == named, lost.why


def test_numbers_the_profiles_noise_hides_get_a_budget_to_try_not_never():
    """A column whose noisy profile counts 60 numbers, under its seen level of 100: the draft cannot
    tell them from none, so it names a larger --dp (halving the threshold, as for any count lost in
    its noise) rather than saying no budget finds them; a column counted at no number at all is
    still said to be beyond any budget."""
    import numpy as np

    from privsyn_fed.draft_dp.bounds import numeric_column
    from privsyn_fed.draft_dp.decide import ColumnFacts

    plan = draft_dp.plan_draft(1.0, 1e-6, ["c", "ok"], 50, 32).with_rows(600)
    empty = np.zeros(len(draft_dp.BOUNDS_GRID) - 1)
    for missing, found_later in ((540, True), (600, False)):
        facts = ColumnFacts(600, missing, 0, (0,) * (len(KINDS) - 2), 60, 100.5)
        lost = numeric_column(plan, "c", empty, facts, []).unfound
        assert lost is not None and "counts no numbers" in lost.why
        assert (lost.epsilon is not None and lost.coarse) == found_later, lost


def test_numbers_with_a_code_beside_them_are_pointed_to_missing_value():
    """A column of 80 numbers (6 cells each) with ``N`` in a fifth of its cells is text to the DP
    draft, which finds only ``N`` among its values; the reason names ``--missing-value N``. A text
    column of words gets no such hint."""
    n = 600
    numbers = [f"{1000 + 7 * (i % 80)}" for i in range(480)]
    frame = pd.DataFrame(
        {
            "income": numbers + ["N"] * 120,
            "words": [f"w{i % 80}" for i in range(480)] + ["N"] * 120,
            "ok": ["x", "y"] * (n // 2),
        }
    )
    _, result = _exact_draft(frame)
    why = {lost.name: lost.why for lost in result.unfound}
    assert set(why) == {"income", "words"}
    assert "only 'N'" in why["income"] and "draft again with --missing-value N (a numeric column)" in why["income"]
    assert "about 480 of its cells are numbers and about 120 are not" in why["income"]
    assert "missing-value" not in why["words"]


def test_numbers_with_a_code_taken_for_a_text_identifier_are_pointed_to_missing_value():
    """500 distinct numbers and ``N`` in a sixth of the cells pass the identifier rule as text (its
    values are never released); the note says what a code among numbers needs. Words get no hint."""
    frame = pd.DataFrame(
        {
            "income": [str(1000 + 7 * i) for i in range(500)] + ["N"] * 100,
            "words": [f"w{i}" for i in range(500)] + ["N"] * 100,
            "ok": ["x", "y"] * 300,
        }
    )
    _, result = _exact_draft(frame)
    notes = {n.split("'")[1]: n for n in result.notes}
    assert result.dropped == ["income", "words"] and not result.unfound
    assert (
        "looks like an identifier" in notes["income"] and "--missing-value TOKEN (a numeric column)" in notes["income"]
    )
    assert "missing-value" not in notes["words"]
