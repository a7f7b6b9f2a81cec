"""Several silos drafted as their union, charged once, with every sensitivity checked on D and D
plus one record in one silo; silo files that cannot be drafted together are refused before any
reservation."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privsyn_fed import draft_dp
from privsyn_fed.accounting.budget_store import BudgetStore
from privsyn_fed.audit import audit_ledger, load_ledger
from privsyn_fed.draft_dp.cells import CellKinds
from privsyn_fed.schema import UNFOUND_KEY, profile_chunks
from privsyn_fed.schema.draft import DRAFT_NOTE_KEY

from .conftest import assert_one_line_error, run_cli

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


def test_draft_help_names_leave_unfound_and_the_union(capsys):
    from privsyn_fed.cli import main

    with pytest.raises(SystemExit):
        main(["schema", "draft", "--help"])
    text = capsys.readouterr().out
    assert "--leave-unfound" in text and "union" in text and f'"{UNFOUND_KEY}"' in text
    assert math.isclose(draft_dp.MAX_LOST_SHARE, 0.1) and "10%" in text
