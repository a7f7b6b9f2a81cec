"""Schema drafts as a new user meets them: a private draft keeps its flag through every round trip;
a DP draft never releases a column it did not find (refused after the spend, which the ledger keeps,
or written as a placeholder that no schema reader accepts); several silos are drafted as their
union, charged once, with every sensitivity checked on D and D plus one record in one silo."""

import json
import math
import re
import warnings
from itertools import chain

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privsyn_fed as pf
from privsyn_fed import draft_dp
from privsyn_fed.accounting.budget_store import BudgetStore
from privsyn_fed.audit import audit_ledger, load_ledger
from privsyn_fed.common import InputError
from privsyn_fed.draft_dp.cells import PROFILE_CELLS, CellKinds
from privsyn_fed.schema import UNFOUND_KEY, PrivateDraftWarning, profile_chunks
from privsyn_fed.schema.draft import DRAFT_NOTE_KEY

from .conftest import assert_one_line_error, run_cli


# ---- 1. a private draft stays one ---------------------------------------------------------------
def _private_draft():
    df = pd.DataFrame({"age": [23, 35, 47, 51, 62], "sex": ["F", "M", "F", "F", "M"]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivateDraftWarning)
        return df, pf.Schema.draft(df)


def _refused(schema, df):
    with pytest.raises(InputError, match="drafted from private rows"):
        pf.synthesize([df], schema=schema, method="independent", epsilon=1.0, delta=1e-9)


def test_a_private_draft_keeps_its_flag_through_every_round_trip(tmp_path):
    df, drafted = _private_draft()
    assert drafted.private_draft and drafted.to_dict()[DRAFT_NOTE_KEY]["privacy"].startswith("none")
    trips = {
        "dict": pf.Schema.from_dict(drafted.to_dict()),
        "json text": pf.Schema.from_dict(json.loads(json.dumps(drafted.to_dict()))),
    }
    for name in ("s.json", "s.yaml"):
        drafted.save(tmp_path / name)
        trips[name] = pf.Schema.load(tmp_path / name)
    (tmp_path / "dumped.json").write_text(json.dumps(drafted.to_dict()))  # what a user writes by hand
    trips["json.dumps to a file"] = pf.Schema.load(tmp_path / "dumped.json")
    trips["twice"] = pf.Schema.from_dict(pf.Schema.from_dict(drafted.to_dict()).to_dict())
    for name, schema in trips.items():
        assert schema.private_draft, name
        assert schema.to_dict() == drafted.to_dict(), name  # the note itself, unchanged
        assert schema.reviewed().to_dict() == drafted.reviewed().to_dict(), name
    _refused(trips["json.dumps to a file"], df)
    # only a review clears it: reviewed(), or the note deleted from the file
    reviewed = drafted.reviewed()
    assert not reviewed.private_draft and DRAFT_NOTE_KEY not in reviewed.to_dict()
    assert not pf.Schema.from_dict(reviewed.to_dict()).private_draft
    document = json.loads((tmp_path / "s.json").read_text())
    del document[DRAFT_NOTE_KEY]
    assert not pf.Schema.from_dict(document).private_draft


def test_a_dp_drafts_note_does_not_mark_it_private_nor_travel_into_the_fingerprint():
    note = {"privacy": "differential privacy", "note": "reviewed under DP"}
    schema = pf.Schema.from_dict(
        {DRAFT_NOTE_KEY: note, "columns": [{"name": "a", "type": "categorical", "categories": ["x"]}]}
    )
    assert not schema.private_draft and DRAFT_NOTE_KEY not in schema.to_dict()


# ---- 2. a DP draft never releases a column it did not find ---------------------------------------
class ExactNoise:
    """No noise at all, for decisions on known counts (with ``below_zero``, the profile's missing and
    non-integer counts far below zero): every mechanism is still charged. Not private; tests only."""

    name = "exact (tests only)"
    seeded = True

    def __init__(self, below_zero: bool = False):
        self.below_zero, self.calls = below_zero, 0

    def gaussian_counts(self, counts, sigma):
        self.calls += 1
        out = np.asarray(counts, dtype=np.int64).copy()
        if self.below_zero and self.calls == 1:
            w = len(PROFILE_CELLS)  # per column: missing, non-number, 1..6 and more decimal places, distinct
            out[1::w] -= 1000  # missing, per column
            for cell in range(2, w - 1):
                out[1 + cell :: w] -= 1000  # numbers with decimal places (non-integer), per column
        return out

    def gaussian_reals(self, values, sigma):
        return np.asarray(values, dtype=float)

    def noisy_argmax(self, scores, scale):
        return int(np.argmax(scores))


def _exact_draft(frame: pd.DataFrame, epsilon: float = 3.0, below_zero: bool = False):
    plan = draft_dp.plan_draft(epsilon, 1e-6, list(frame.columns), 50, 32)
    acc = draft_dp.accountant_for(plan)
    return plan, draft_dp.release_draft(lambda: iter([frame.astype(str)]), plan, acc, ExactNoise(below_zero))


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
        assert (lost.name, lost.release) == ("c", release) and fragment in lost.why, (name, lost)
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


@pytest.fixture
def coarse_table(tmp_path):
    """600 rows where epsilon 3 finds 'n' and 'ok' but not 'k' (one value) nor 'flag' (one category),
    whatever the noise (every margin is more than five standard deviations)."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(
        {
            "n": rng.integers(10, 20, 600),
            "k": [7.5] * 598 + [8.5] * 2,  # not whole numbers: numeric (a code would be categorical)
            "flag": ["a"] * 598 + ["b"] * 2,
            "ok": rng.choice(["x", "y", "z"], 600),
        }
    )
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    return path


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


# ---- 3. several silos, drafted as their union ---------------------------------------------------
CELL = st.sampled_from(["a", "b", "", "NA", "7", "2.5", "x1", "inf", "-3"])


@st.composite
def silos_and_record(draw):
    d = draw(st.integers(1, 3))
    silos = [
        [[draw(CELL) for _ in range(d)] for _ in range(draw(st.integers(0, 6)))] for _ in range(draw(st.integers(1, 3)))
    ]
    return [f"c{j}" for j in range(d)], silos, [draw(CELL) for _ in range(d)], draw(st.integers(0, len(silos) - 1))


def _union_vector(names, silos, cap):
    """The union's profile vector: its profiles and its counts of each kind of cell (``draft_dp.cells``)."""
    frames = [pd.DataFrame(rows, columns=names, dtype=object) for rows in silos if rows]
    if not frames:
        frames = [pd.DataFrame({n: pd.Series([], dtype=object) for n in names})]
    kinds = CellKinds(names)
    profiles = profile_chunks(kinds.watch(iter(frames)), names, cap)
    return draft_dp.profile_vector(profiles, [kinds.counts[n] for n in names])


def _union(names, silos, cap, grid=None):
    frames = [pd.DataFrame(rows, columns=names, dtype=object) for rows in silos if rows]
    if not frames:
        frames = [pd.DataFrame({n: pd.Series([], dtype=object) for n in names})]
    return profile_chunks(iter(frames), names, cap, grid=grid)


@settings(max_examples=120, deadline=None)
@given(silos_and_record())
def test_one_record_in_one_silo_moves_the_unions_releases_as_one_table_allows(case):
    """The union's profile (sensitivity sqrt(1 + 2d)), bounds histograms and value counts (sensitivity
    1 each) on D and on D plus one record in one silo; and each count of the union is the sum of the
    silos' own counts, so a sum across silos keeps every sensitivity."""
    names, silos, record, where = case
    grown = [rows + [record] if i == where else rows for i, rows in enumerate(silos)]
    grid, d = draft_dp.BOUNDS_GRID, len(names)
    before, after = _union(names, silos, 5, grid), _union(names, grown, 5, grid)
    diff = _union_vector(names, grown, 5) - _union_vector(names, silos, 5)
    assert diff[0] == 1 and np.linalg.norm(diff) <= draft_dp.profile_sensitivity(d) + 1e-12
    for p, q in zip(before, after):
        assert np.abs(q.intervals - p.intervals).sum() <= 1
    uncapped = _union(names, silos, 2**62), _union(names, grown, 2**62)
    for p, q in zip(*uncapped):
        moved = [q.counts.get(v, 0) - p.counts.get(v, 0) for v in set(p.counts) | set(q.counts)]
        assert sorted(moved)[-1:] in ([], [0], [1]) and sum(moved) <= 1 and min(moved, default=0) >= 0
    # the union's counts are the sums of the silos' own
    each = [_union(names, [rows], 2**62, grid) for rows in silos]
    for j, p in enumerate(_union(names, silos, 2**62, grid)):
        assert np.array_equal(p.intervals, sum(e[j].intervals for e in each))
        assert (p.rows, p.missing, p.non_numbers, p.non_integers) == tuple(
            sum(getattr(e[j], k) for e in each) for k in ("rows", "missing", "non_numbers", "non_integers")
        )
        for v, c in p.counts.items():
            assert c == sum(e[j].counts.get(v, 0) for e in each)


@pytest.fixture
def three_silos(tmp_path):
    """Three silos of 400 rows; the region 'west' is held by the third alone."""
    rng = np.random.default_rng(5)
    paths = []
    for i, regions in enumerate((["north", "east"], ["north", "east"], ["west"])):
        frame = pd.DataFrame({"age": rng.integers(20, 60, 400), "region": rng.choice(regions, 400)})
        frame = frame[["region", "age"]] if i == 1 else frame  # the same columns, in another order
        path = tmp_path / f"silo{i}.{'parquet' if i == 2 else 'csv'}"
        frame.to_parquet(path, index=False) if i == 2 else frame.to_csv(path, index=False)
        paths.append(path)
    return paths


def test_several_silos_are_drafted_as_their_union_charged_once(three_silos, tmp_path, capsys):
    out = tmp_path / "s.json"
    code, stdout, err = run_cli(
        "schema", "draft", *three_silos, "--out", out, "--dp", "3", "--delta", "1e-6", capsys=capsys
    )
    assert code == 0, err
    document = json.loads(out.read_text())
    region = next(c for c in document["columns"] if c["name"] == "region")
    assert region["categories"] == ["east", "north", "west", "(other)"]  # 'west' is one silo's alone
    assert document[DRAFT_NOTE_KEY]["drafted_from"] == ["silo0.csv", "silo1.csv", "silo2.parquet"]
    ledger = load_ledger(tmp_path / "s.ledger.json")
    releases = [e for e in ledger["entries"] if not e["query"].startswith("atoms of ")]  # a numeric column's atoms
    assert audit_ledger(ledger).ok and len(releases) == 3  # one profile, one release per column (and its atoms)
    assert ledger["rho_spent"] <= ledger["rho_budget"] * (1 + 1e-9)
    assert abs(ledger["details"]["draft"]["profile"][0] - 1200) < 6 * ledger["entries"][0]["sigma"]
    assert all(str(p) in stdout for p in three_silos)


def test_silo_files_that_cannot_be_drafted_together_are_refused_before_any_reservation(three_silos, tmp_path, capsys):
    out, store = tmp_path / "s.json", tmp_path / "b.db"
    dp = ["--out", out, "--dp", "3", "--delta", "1e-6", "--budget-store", store, "--dataset-id", "d"]
    odd = tmp_path / "odd.csv"
    pd.DataFrame({"age": [30], "town": ["x"]}).to_csv(odd, index=False)
    proc = run_cli("schema", "draft", three_silos[0], odd, *dp, "--total-epsilon", "9", capsys=capsys)
    assert_one_line_error(proc, str(odd), "lacks column 'region'", "the same columns")
    proc = run_cli("schema", "draft", three_silos[0], three_silos[0], *dp, "--total-epsilon", "9", capsys=capsys)
    assert_one_line_error(proc, "same file, given twice as DATA")
    assert not store.exists() and not out.exists()  # nothing reserved
    twin = tmp_path / "twin.csv"
    twin.write_bytes(three_silos[0].read_bytes())
    proc = run_cli("schema", "draft", three_silos[0], twin, *dp, "--total-epsilon", "9", capsys=capsys)
    assert_one_line_error(proc, "identical contents", "count twice")
    (run,) = BudgetStore(store).budget("d").runs
    assert run["status"] == "rejected" and run["rho_spent"] == 0  # refused before any release
    assert not out.exists() and not (tmp_path / "s.ledger.json").exists()
    proc = run_cli("schema", "draft", *three_silos, "--out", out, capsys=capsys)
    assert_one_line_error(proc, "reads one table, not 3", "--dp")
    proc = run_cli("schema", "draft", three_silos[0], "--out", out, "--leave-unfound", capsys=capsys)
    assert_one_line_error(proc, "--leave-unfound belongs to --dp")
    assert not out.exists()


def test_help_names_the_new_options(capsys):
    from privsyn_fed.cli import main

    with pytest.raises(SystemExit):
        main(["schema", "draft", "--help"])
    text = capsys.readouterr().out
    assert "--leave-unfound" in text and "union" in text and f'"{UNFOUND_KEY}"' in text
    assert math.isclose(draft_dp.MAX_LOST_SHARE, 0.1) and "10%" in text
