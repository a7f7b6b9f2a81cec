"""A DP schema draft of a patient panel: identifiers left out from noisy counts, a plan code drafted as
categories, ``missing`` only where the noisy count clears the seen level, bounds that fit the grid's
intervals, decimal places from the profile; every ledger passes ``privsyn-fed audit``."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privsyn_fed import draft_dp
from privsyn_fed.audit import audit_ledger, load_ledger
from privsyn_fed.audit.draft_plan import bounds_threshold as audit_threshold
from privsyn_fed.common import InputError
from privsyn_fed.draft_dp.bounds import numeric_column
from privsyn_fed.draft_dp.cells import KINDS, PROFILE_CELLS, CellKinds, decimal_places, decimals_from
from privsyn_fed.draft_dp.decide import ColumnFacts
from privsyn_fed.draft_dp.grid import BOUNDS_GRID, COARSE_GRID
from privsyn_fed.schema import UNFOUND_KEY, profile_chunks

from .conftest import ExactNoise, assert_one_line_error, run_cli

W = len(PROFILE_CELLS)
SYLLABLES = ["ka", "lo", "mi", "ra", "ten", "vo", "shu", "bel", "dor", "fin", "gra", "hal", "ish", "jun", "ker"]
PLAN_CODES = [3, 19, 27, 41, 63]


def panel(seed: int = 7) -> pd.DataFrame:
    """500 patients x 4 visits: a row number, dense patient ids, mostly unique surnames, a 5-valued plan
    code, a sex, whole day counts 4..107, a lab value of 1 decimal, a spending zero in 20% of rows; no
    column has a missing value."""
    rng = np.random.default_rng(seed)
    patients, visits = 500, 4
    n = patients * visits
    names = ["".join(rng.choice(SYLLABLES, 4)).title() for _ in range(patients)]
    days = rng.integers(4, 108, n)
    days[:2] = [4, 107]
    return pd.DataFrame(
        {
            "row": np.arange(1, n + 1),
            "patient_id": np.repeat(np.arange(1, patients + 1), visits),
            "surname": np.repeat(names, visits),
            "plan": rng.choice(PLAN_CODES, n, p=[0.3, 0.25, 0.2, 0.15, 0.1]),
            "sex": rng.choice(["F", "M"], n),
            "days": days,
            "lab": np.round(rng.normal(5.0, 1.2, n), 1),
            "spend": np.where(rng.random(n) < 0.2, 0.0, np.round(rng.lognormal(4, 1, n), 2)),
        }
    )


@pytest.fixture(scope="module")
def panel_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("panel") / "panel.csv"
    panel().to_csv(path, index=False)
    return path


def _draft(data, out, *extra, epsilon="8"):
    """``schema draft --dp`` at epsilon 8, delta 1e-6: the profile's noise has sigma about 8.5, so
    every decision asserted below has a margin of more than five standard deviations."""
    code, stdout, err = run_cli("schema", "draft", data, "--out", out, "--dp", epsilon, "--delta", "1e-6", *extra)
    assert code == 0, err
    ledger_path = out.with_suffix(".ledger.json")
    assert run_cli("audit", ledger_path).returncode == 0
    ledger = load_ledger(ledger_path)
    assert audit_ledger(ledger).ok, audit_ledger(ledger).problems
    return json.loads(out.read_text()), ledger, err


@pytest.fixture(scope="module")
def drafted(panel_csv):
    return _draft(panel_csv, panel_csv.with_name("s.json"))


def test_identifiers_are_left_out_from_noisy_counts_and_nothing_is_spent_on_text(drafted):
    document, ledger, err = drafted
    assert document["_draft"]["left_out"] == ["row", "patient_id", "surname"]
    assert ledger["details"]["draft"]["identifiers"] == ["row", "patient_id", "surname"]
    released = [e.get("column") for e in ledger["entries"][1:]]
    assert "surname" not in released  # decided from the profile alone
    assert released.count("row") == 1 and released.count("patient_id") == 1  # their bounds only
    for name in ("row", "patient_id", "surname"):
        assert f"column '{name}' looks like an identifier" in err and f"--include {name}" in err


def test_a_plan_code_of_five_values_is_drafted_as_its_categories(drafted):
    document, ledger, _ = drafted
    plan = next(c for c in document["columns"] if c["name"] == "plan")
    assert plan["type"] == "categorical" and plan["categories"] == [str(v) for v in PLAN_CODES] + ["(other)"]
    (entry,) = [e for e in ledger["entries"] if e.get("column") == "plan"]
    assert entry["query"].startswith("categories of 'plan'") and "threshold" in entry


def test_columns_without_missing_values_are_not_drafted_missing(drafted):
    document, _, _ = drafted
    assert [c["name"] for c in document["columns"] if c.get("missing")] == []


def test_bounds_fit_the_values_and_are_short_decimals(drafted, panel_csv):
    document, _, _ = drafted
    cols = {c["name"]: c for c in document["columns"]}
    days, lab, spend = cols["days"], cols["lab"], cols["spend"]
    # about 19 rows per day: the grid's intervals [4, 4.1), ..., [100, 110) give 4..109, not 0..200
    assert days["integer"] and 4 <= days["lower"] <= 6 and days["upper"] == 109
    assert "decimals" not in days
    assert lab["decimals"] == 1 and 0 < lab["lower"] < 5 < lab["upper"] < 10
    # the upper bound is where the noisy count of the tail above runs out: 199.99 to 249.99 over repeated
    # runs (268 rows lie above 150, so a bound below it would cut far more than the noise moves it)
    assert spend["decimals"] == 2 and spend["lower"] == 0 and spend["upper"] >= 150
    assert spend["atoms"] == [0]  # zero in 20% of rows: [0, 0.001) holds no other 2-decimal number
    assert "atoms" not in days  # about 1% of rows each
    for value in (lab["lower"], lab["upper"], spend["upper"]):  # multiples of 10^-decimals inside the grid
        assert len(re.sub(r"[-.]", "", repr(float(value))).strip("0")) <= 6
    assert not re.search(r"\d\.\d{7,}", json.dumps(document["columns"]))  # no 17-digit floats


def test_exclude_is_never_read_and_include_keeps_an_identifier(panel_csv, tmp_path):
    out = tmp_path / "s.json"
    document, ledger, err = _draft(panel_csv, out, "--exclude", "row", "--include", "patient_id")
    assert "row" not in ledger["details"]["columns"] and "row" not in [e.get("column") for e in ledger["entries"]]
    assert ledger["details"]["draft"]["exclude"] == ["row"] and ledger["details"]["draft"]["include"] == ["patient_id"]
    assert ledger["details"]["draft"]["identifiers"] == ["surname"]
    pid = next(c for c in document["columns"] if c["name"] == "patient_id")
    assert pid["integer"] and pid["upper"] >= 490
    assert "'patient_id' looks like an identifier" not in err
    # the audit checks what the ledger records about them
    ledger["details"]["draft"]["identifiers"] = ["patient_id", "surname"]
    assert any("--include keeps" in p for p in audit_ledger(ledger).problems)
    bad = ["schema", "draft", panel_csv, "--out", tmp_path / "y.json", "--dp", "8", "--delta", "1e-6"]
    assert_one_line_error(run_cli(*bad, "--exclude", "nobody"), "--exclude 'nobody'", "header")
    assert not (tmp_path / "y.json").exists() and not (tmp_path / "y.ledger.json").exists()


def test_the_audit_checks_that_a_code_got_categories(drafted, tmp_path):
    _, ledger, _ = drafted
    j = ledger["details"]["columns"].index("plan")
    ledger = json.loads(json.dumps(ledger))
    ledger["details"]["draft"]["profile"][1 + W * j + W - 1] = 10**6  # too many distinct values for a code
    problems = audit_ledger(ledger).problems
    assert any("missing: bounds of 'plan'" in p and "unexpected: categories of 'plan'" in p for p in problems)


# ---- the rules on known counts --------------------------------------------------------------------
def _exact(frame: pd.DataFrame, epsilon: float = 3.0, **options):
    plan = draft_dp.plan_draft(epsilon, 1e-6, list(frame.columns), 50, 32, **options)
    acc = draft_dp.accountant_for(plan)
    return plan, draft_dp.make_draft(lambda: iter([frame.astype(str)]), plan, acc, ExactNoise())


def test_missing_is_drafted_only_where_the_noisy_count_clears_the_seen_level():
    n = 600
    plan = draft_dp.plan_draft(3.0, 1e-6, ["few", "many", "lab"], 50, 32)
    seen = draft_dp.SEEN_SIGMAS * plan.profile_sd + 0.5
    few = math.floor(seen)  # positive, but within the noise
    many = math.ceil(seen) + 1
    frame = pd.DataFrame(
        {
            "few": [["x", "y"][i % 2] for i in range(n - few)] + [""] * few,
            "many": [["x", "y"][i % 2] for i in range(n - many)] + [""] * many,
            "lab": [f"{v:.1f}" for v in np.linspace(1, 9, n - few)] + [""] * few,
        }
    )
    _, result = _exact(frame)
    cols = {c["name"]: c for c in result.columns}
    assert not cols["few"].get("missing") and cols["many"]["missing"] and not cols["lab"].get("missing")


def test_a_whole_number_column_of_few_values_is_a_code_and_of_many_is_numeric():
    n = 1200  # 20 rows of each count 0..59, above the bounds threshold 17
    frame = pd.DataFrame({"code": [3, 19, 27, 41, 63, 63] * (n // 6), "count": list(range(60)) * (n // 60)})
    _, result = _exact(frame)
    cols = {c["name"]: c for c in result.columns}
    assert cols["code"]["categories"] == ["3", "19", "27", "41", "63", "(other)"]
    assert cols["count"]["type"] == "numeric" and (cols["count"]["lower"], cols["count"]["upper"]) == (0, 59)
    kinds = [e["query"].split(" of ")[0] for e in result.accountant.entries[1:]]
    assert kinds == ["categories", "bounds", "atoms"]  # the code's values; the count's bounds, then atoms


def test_decimal_places_of_numbers():
    x = np.array([0.1, 2.25, 3.0, 1.15, 1e20, 0.1234567, -7.5, 0.30000000000000004, 123.456789, -0.000001])
    assert decimal_places(x).tolist() == [1, 2, 0, 2, 0, 7, 1, 7, 6, 6]
    assert decimals_from([500, 3, 0, 0, 0, 0, 0], 10) == 1
    assert decimals_from([500, 300, 0, 0, 20, 0, 0], 10) == 5
    assert decimals_from([500, 300, 0, 0, 0, 0, 90], 10) is None  # more than 6 places: no rounding key
    assert decimals_from([3, 0, 0, 0, 0, 0, 0], 10) is None


def test_decimals_are_drafted_for_a_numeric_column():
    n = 600
    frame = pd.DataFrame({"lab": [f"{v:.1f}" for v in np.linspace(1, 9, n)], "dose": np.linspace(0, 1, n).round(3)})
    _, result = _exact(frame)
    cols = {c["name"]: c for c in result.columns}
    assert cols["lab"]["decimals"] == 1 and cols["dose"]["decimals"] == 3
    # about 7 rows per value: the coarse intervals [1, 2), ..., [8, 9) pass, [9, 10) with 4 does not; the
    # bounds are the 1-decimal numbers inside them
    assert (cols["lab"]["lower"], cols["lab"]["upper"]) == (1.0, 8.9)


CELL = st.one_of(
    st.integers(-1000, 1000),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.sampled_from(["a", "", "NA", "7", "2.5", "0.125", "1.1234567", "-3.25", "inf", "1e400", "0.000001"]),
)


@st.composite
def table_and_record(draw):
    d = draw(st.integers(1, 4))
    rows = [[draw(CELL) for _ in range(d)] for _ in range(draw(st.integers(0, 10)))]
    return [f"c{j}" for j in range(d)], rows, [draw(CELL) for _ in range(d)], draw(st.integers(1, 6))


def _vector(names, rows, cap):
    cells = [[str(v) for v in r] for r in rows]
    frame = pd.DataFrame(cells, columns=names, dtype=object) if rows else pd.DataFrame({n: [] for n in names})
    kinds = CellKinds(names)
    profiles = profile_chunks(kinds.watch([frame.astype(object)]), names, cap)
    return draft_dp.profile_vector(profiles, [kinds.counts[n] for n in names])


@settings(max_examples=200, deadline=None)
@given(table_and_record())
def test_the_profile_with_decimal_places_still_has_sensitivity_sqrt_1_plus_2d(case):
    """A record is in at most one of a column's missing, non-number and decimal-place cells (a whole
    number in none), and adds at most one distinct value: D and D plus one record differ by a vector of
    0s and 1s with a 1 for the rows, at most one among each column's exclusive cells and one for its
    distinct count, so its L2 norm is at most sqrt(1 + 2 d)."""
    names, rows, extra, cap = case
    d = len(names)
    diff = _vector(names, rows + [extra], cap) - _vector(names, rows, cap)
    assert diff[0] == 1 and set(np.unique(diff)) <= {0, 1}
    per_column = diff[1:].reshape(d, W)
    assert np.all(per_column[:, : len(KINDS)].sum(axis=1) <= 1)
    assert np.linalg.norm(diff) <= draft_dp.profile_sensitivity(d) + 1e-12


# ---- the grid ---------------------------------------------------------------------------------------
def test_the_grid_has_two_significant_digits_and_the_coarse_grid_within_it():
    pos = BOUNDS_GRID[BOUNDS_GRID > 0]
    assert len(BOUNDS_GRID) == 3403 and pos[0] == 0.001 and pos[-1] == 9e15
    assert all(len(repr(float(g)).replace("e+", "e").split("e")[0].replace(".", "").strip("0")) <= 2 for g in pos)
    assert set(COARSE_GRID) <= set(BOUNDS_GRID)
    i = int(np.searchsorted(BOUNDS_GRID, 107, side="right"))
    assert draft_dp.interval_edges(i) == (100.0, 110.0)


def _facts(plan, numbers: int) -> ColumnFacts:
    seen = draft_dp.SEEN_SIGMAS * plan.profile_sd + 0.5
    return ColumnFacts(numbers, 0, 0, (0,) * 7, 10**4, seen)


def test_numbers_spread_thinly_over_fine_intervals_are_bounded_on_the_coarse_grid():
    """Every fine interval from 100 to 1000 holds T - 1 numbers, so none passes; each coarse interval
    holds 10 (T - 1), which passes the coarse threshold (post-processing of the same release)."""
    plan = draft_dp.plan_draft(3.0, 1e-6, ["c"], 50, 32)
    noisy = np.zeros(len(BOUNDS_GRID) + 1)
    lo, hi = (int(np.searchsorted(BOUNDS_GRID, v, side="right")) for v in (100, 1000))
    noisy[lo:hi] = plan.bound_rows - 1
    b = numeric_column(plan, "c", noisy, _facts(plan, int(noisy.sum())), [])
    assert b.unfound is None and (b.spec["lower"], b.spec["upper"]) == (100, 999) and "coarse grid" in b.note
    noisy[lo] = plan.bound_rows  # one fine interval passes: its bounds lose most numbers, so coarse again
    b = numeric_column(plan, "c", noisy, _facts(plan, int(noisy.sum())), [])
    assert b.unfound is None and "coarse grid" in b.note


def test_a_single_value_is_not_found_on_the_coarse_grid_either():
    plan = draft_dp.plan_draft(3.0, 1e-6, ["c"], 50, 32)
    noisy = np.zeros(len(BOUNDS_GRID) + 1)
    noisy[int(np.searchsorted(BOUNDS_GRID, 7, side="right"))] = 500
    b = numeric_column(plan, "c", noisy, _facts(plan, 500), [])
    assert b.unfound is not None and "only the value 7" in b.unfound.why


def test_the_audit_accepts_a_ledger_of_the_coarse_grid_and_its_profile(tmp_path):
    """A ledger as drafts wrote it before the fine grid and the decimal places: four profile cells per
    column and 344 intervals, recorded so."""
    frame = pd.DataFrame({"lab": [f"{v:.1f}" for v in np.linspace(1, 9, 600)], "sex": ["F", "M"] * 300})
    _, result = _exact(frame)
    acc = result.accountant
    acc.finish("complete")
    ledger = acc.ledger()
    assert audit_ledger(ledger).ok, audit_ledger(ledger).problems
    draft = ledger["details"]["draft"]
    old = [draft["profile"][0]]
    for j in range(2):
        cells = draft["profile"][1 + W * j : 1 + W * (j + 1)]
        old += [cells[0], cells[1], sum(cells[2:-1]), cells[-1]]
    draft.update(profile=old, bounds_grid={"edges": 343, "lowest": -9e15, "highest": 9e15})
    for key in ("profile_cells", "codes"):
        del draft[key]
    ledger["entries"][0]["cells"] = 1 + 4 * 2
    bounds = next(e for e in ledger["entries"] if "min_count" in e)
    bounds.update(cells=344, min_count=audit_threshold(bounds["sigma"], 344))
    draft["bounds_threshold"] = bounds["min_count"]
    assert audit_ledger(ledger).ok, audit_ledger(ledger).problems
    bounds["cells"] = 3404  # the coarse grid's ledger with the fine grid's histogram
    assert any("grid's 344" in p for p in audit_ledger(ledger).problems)


def test_include_and_exclude_name_columns_of_the_header():
    with pytest.raises(InputError, match="--include 'x'"):
        draft_dp.plan_draft(3.0, 1e-6, ["a", "b"], 50, 32, include=["x"])
    plan = draft_dp.plan_draft(3.0, 1e-6, ["a"], 50, 32, include=["a"], exclude=["b"])
    assert plan.record()["include"] == ["a"] and plan.record()["exclude"] == ["b"]


def test_on_secret_shares_a_code_is_drafted_as_categories_and_exclude_reaches_every_party(tmp_path):
    """Two silos of the panel on secret shares: the same decisions from the summed noisy profile."""
    frame = panel()[["row", "plan", "lab", "sex"]]
    silos = [tmp_path / "a.csv", tmp_path / "b.csv"]
    frame.iloc[:1000].to_csv(silos[0], index=False)
    frame.iloc[1000:].to_csv(silos[1], index=False)
    out = tmp_path / "s.json"
    argv = ["schema", "draft", *silos, "--out", out, "--dp", "8", "--delta", "1e-6", "--mpc", "--exclude", "row"]
    run = run_cli(*argv, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    cols = {c["name"]: c for c in json.loads(out.read_text())["columns"]}
    assert list(cols) == ["plan", "lab", "sex"]
    assert cols["plan"]["categories"] == [str(v) for v in PLAN_CODES] + ["(other)"] and cols["lab"]["decimals"] == 1
    ledger = load_ledger(out.with_suffix(".ledger.json"))
    assert ledger["details"]["draft"]["exclude"] == ["row"] and "row" not in ledger["details"]["columns"]
    assert [e["query"].split(" of ")[0] for e in ledger["entries"] if e.get("column") == "plan"] == [
        "categories",
        "counts",
    ]
    assert audit_ledger(ledger).ok, audit_ledger(ledger).problems


# ---- atoms ------------------------------------------------------------------------------------------
def test_a_point_mass_anywhere_is_released_as_an_atom_and_the_audit_checks_its_place():
    """501 in 20% of 1,000 rows (the code of a capped value) and 0 in 20%: a thresholded histogram of
    the column's numbers, charged with its delta, lists them; values of about 1% each are not atoms."""
    rng = np.random.default_rng(3)
    x = rng.integers(100, 200, 1000)
    x[:200], x[200:400] = 501, 0
    _, result = _exact(pd.DataFrame({"povpip": x, "sex": rng.choice(["F", "M"], 1000)}))
    (col,) = [c for c in result.columns if c["name"] == "povpip"]
    assert col["atoms"] == [0, 501] and col["integer"]
    acc = result.accountant
    (entry,) = [e for e in acc.entries if e["query"].startswith("atoms of 'povpip'")]
    plan = draft_dp.plan_draft(3.0, 1e-6, ["povpip", "sex"], 50, 32)
    assert entry["threshold"] == plan.atom_threshold and entry["delta"] > 0 and entry["where"] == "silo"
    assert entry["sigma"] == pytest.approx(plan.sigma_atoms)
    acc.finish("complete")
    ledger = acc.ledger()
    assert audit_ledger(ledger).ok, audit_ledger(ledger).problems
    moved = json.loads(json.dumps(ledger))
    moved["entries"][1], moved["entries"][2] = moved["entries"][2], moved["entries"][1]  # atoms before bounds
    assert any("right after its bounds" in p for p in audit_ledger(moved).problems)
    cheaper = json.loads(json.dumps(ledger))
    cheaper["details"]["draft"]["atoms"] = {"rho_share": 0.5}
    assert any("details.draft.atoms" in p for p in audit_ledger(cheaper).problems)


@settings(max_examples=150, deadline=None)
@given(table_and_record())
def test_the_histogram_of_numbers_moves_by_one_count_for_one_record(case):
    """Texts of one number merge into one value, so a record adds one to at most one value's count."""
    from privsyn_fed.draft_dp.atoms import number_counts

    names, rows, extra, cap = case
    name = names[0]

    def counts(rs):
        cells = [[str(v) for v in r] for r in rs]
        frame = pd.DataFrame(cells, columns=names, dtype=object) if rs else pd.DataFrame({n: [] for n in names})
        (p,) = profile_chunks([frame.astype(object)], [name], 2**62)
        values, n = number_counts(p)
        return dict(zip(values, n.tolist()))

    before, after = counts(rows), counts(rows + [extra])
    moved = [after.get(v, 0) - before.get(v, 0) for v in set(before) | set(after)]
    assert sum(moved) <= 1 and all(m in (0, 1) for m in moved)


class FewDistinct(ExactNoise):
    """Exact counts, but the profile's distinct counts 100 lower: a column of 60 whole numbers looks
    like a code (tests only)."""

    def gaussian_counts(self, counts, sigma):
        out = super().gaussian_counts(counts, sigma)
        if self.calls == 1:
            out[W::W] -= 100  # the distinct count, per column
        return out


def test_a_code_with_more_values_than_categorical_max_is_bounded_by_the_values_that_passed():
    frame = pd.DataFrame({"n": list(range(10, 70)) * 20, "ok": ["x", "y"] * 600}).astype(str)
    plan = draft_dp.plan_draft(3.0, 1e-6, list(frame.columns), 50, 32)
    acc = draft_dp.accountant_for(plan)
    result = draft_dp.make_draft(lambda: iter([frame]), plan, acc, FewDistinct())
    (n,) = [c for c in result.columns if c["name"] == "n"]
    assert n["type"] == "numeric" and n["integer"] and (n["lower"], n["upper"]) == (10, 69)
    assert "60 values passed the threshold, more than --categorical-max 50" in " ".join(result.notes)
    assert [e["query"].split(" of ")[0] for e in acc.entries[1:]] == ["categories", "categories"]
    acc.finish("complete")
    assert audit_ledger(acc.ledger()).ok, audit_ledger(acc.ledger()).problems


def test_a_column_of_more_distinct_values_than_the_guard_gets_its_atoms_from_the_bounds_alone():
    """Spending of 2 decimals over 20,000 rows (about 14,000 distinct values, beyond DISTINCT_GUARD),
    zero in a quarter: no histogram of its values is released (its values are never all held in
    memory), and the zero still comes out as an atom, from the fine grid's interval [0, 0.001)."""
    rng = np.random.default_rng(11)
    n = 20_000
    spend = np.round(rng.uniform(1, 500, n), 2)
    spend[: n // 4] = 0.0
    _, result = _exact(pd.DataFrame({"spend": spend}))
    assert len(np.unique(spend)) > draft_dp.DISTINCT_GUARD
    (col,) = result.columns
    assert col["atoms"] == [0] and col["decimals"] == 2
    assert not [e for e in result.accountant.entries if e["query"].startswith("atoms of ")]
    result.accountant.finish("complete")
    assert audit_ledger(result.accountant.ledger()).ok


def test_a_thin_tail_in_a_small_table_is_bounded_on_the_coarse_grid_and_audits():
    """3,000 incomes around 22,000 at epsilon 0.15: the fine grid's threshold is more than 5% of the
    noisy rows, so the histogram is released on the coarse grid (the fine counts summed before the
    noise, one release at the planned cost), whose intervals [10000, 20000) to [40000, 50000) each
    hold enough numbers; the ledger records the coarse grid and its threshold, and audits."""
    rng = np.random.default_rng(5)
    income = np.round(rng.lognormal(10, 0.5, 3000))
    plan, result = _exact(pd.DataFrame({"income": income}), epsilon=0.15)
    assert plan.grid == "fine" and plan.bound_rows > draft_dp.plan.FINE_GRID_SHARE * len(income)
    coarse = plan.with_rows(len(income))
    assert coarse.grid == "coarse" and coarse.bound_rows < plan.bound_rows
    (col,) = result.columns
    assert UNFOUND_KEY not in col and (col["lower"], col["upper"]) == (10000, 49999)
    (bounds,) = [e for e in result.accountant.entries if e["query"].startswith("bounds of")]
    assert bounds["min_count"] == coarse.bound_rows and "344" in bounds["query"]
    draft = result.accountant.details["draft"]
    assert draft["bounds_grid"]["edges"] == len(COARSE_GRID) and draft["bounds_threshold"] == coarse.bound_rows
    result.accountant.finish("complete")
    assert audit_ledger(result.accountant.ledger()).ok, audit_ledger(result.accountant.ledger()).problems
    big = coarse.with_rows(10**9)
    assert big.grid == "coarse" and plan.with_rows(100 * plan.bound_rows).grid == "fine"
