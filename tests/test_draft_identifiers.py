"""Identifiers in a plain schema draft and in a release's silos; --exclude and --include; the atoms,
decimals and missing flags a plain draft proposes."""

from __future__ import annotations

import json
import logging
import string

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privsyn_fed as pf
from privsyn_fed.common import InputError
from privsyn_fed.schema.draft import (
    ATOM_SHARE,
    DRAFT_NOTE_KEY,
    MAX_ATOMS,
    MAX_DRAFT_DECIMALS,
    draft_frame,
    draft_table,
)
from privsyn_fed.schema.heavy_hitters import HeavyHitters
from privsyn_fed.schema.profile import decimal_places

from .conftest import run_cli, synth_argv

IDENTIFIERS = ["row", "patient_id", "surname"]
ATTRIBUTES = ["age", "days", "income", "lab", "plan"]


def panel(patients: int = 500, visits: int = 4, seed: int = 0) -> pd.DataFrame:
    """A panel of ``patients`` x ``visits`` rows: row numbers, a patient id repeated per visit, a surname
    column of mostly distinct strings, and ordinary attributes."""
    rng = np.random.default_rng(seed)
    n = patients * visits
    letters = np.array(list(string.ascii_lowercase))
    return pd.DataFrame(
        {
            "row": np.arange(1, n + 1),
            "patient_id": np.repeat(np.arange(1, patients + 1), visits),
            "surname": ["".join(rng.choice(letters, 7)).title() for _ in range(n)],
            "age": rng.integers(18, 91, n),
            "days": rng.integers(4, 108, n),
            "income": np.round(rng.lognormal(10.5, 0.7, n)).astype(np.int64),  # dollars
            "lab": np.round(rng.normal(5.5, 1.2, n), 1),
            "plan": rng.choice(["P1", "P2", "P3", "P4", "P5"], n),
        }
    )


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return panel()


def names(result) -> list[str]:
    return [c["name"] for c in result.columns]


def spec(result, name: str) -> dict:
    return next(c for c in result.columns if c["name"] == name)


# ---- the identifier rule -------------------------------------------------------------------------------
def test_row_numbers_repeated_ids_and_surnames_are_left_out_and_attributes_kept(table, caplog):
    with caplog.at_level(logging.WARNING, logger="privsyn_fed.schema"):
        result = draft_frame(table)
    assert result.identifiers == result.dropped == IDENTIFIERS
    assert names(result) == ATTRIBUTES
    notes = [r.getMessage() for r in caplog.records if "looks like an identifier" in r.getMessage()]
    assert len(notes) == 3
    assert "about 500 distinct values in 2,000 cells" in notes[1] and "--include patient_id" in notes[1]
    assert "of text" in notes[2]
    assert spec(result, "plan")["type"] == "categorical"
    assert spec(result, "income")["type"] == "numeric" and spec(result, "income")["integer"] is True


def test_a_shuffled_panel_and_a_text_id_are_still_identifiers(table):
    shuffled = table.sample(frac=1.0, random_state=3).reset_index(drop=True)
    shuffled["visit_code"] = [f"V{p:04d}-{v}" for p, v in zip(shuffled["patient_id"], shuffled.index % 4)]
    assert draft_frame(shuffled).identifiers == [*IDENTIFIERS, "visit_code"]


def test_too_few_rows_or_values_are_never_identifiers(table):
    small = table.head(90)  # fewer than MIN_IDENTIFIER_ROWS present cells
    assert draft_frame(small).identifiers == []
    few = panel(patients=150, visits=4)  # 150 distinct ids: fewer than MIN_IDENTIFIER_DISTINCT
    assert "patient_id" not in draft_frame(few).identifiers
    assert "patient_id" in draft_frame(panel(patients=250, visits=4)).identifiers


def test_sparse_whole_numbers_and_measures_are_not_identifiers():
    rng = np.random.default_rng(5)
    n = 3000
    df = pd.DataFrame(
        {
            "record": rng.choice(10**9, n, replace=False),  # distinct, but far sparser than ids packed in a range
            "weight_g": np.round(rng.normal(3400, 500, n), 2),  # distinct, but not whole
            "id": np.arange(n) * 3,  # whole numbers filling a third of their range
        }
    )
    result = draft_frame(df)
    assert result.identifiers == [] and names(result) == ["record", "weight_g", "id"]


def test_noisy_counts_with_more_values_than_their_span_holds_are_not_identifiers():
    """A DP draft of a measure (2 decimals, 0.21..13.5) whose noisy counts showed no decimals: 678 noisy
    distinct values in bounds 2..3 are not whole numbers filling 2..3, so not ids; ids 1..1000 still are,
    and so are noisy counts up to twice their span."""
    from privsyn_fed.draft_dp.decide import ColumnFacts, identifier_line
    from privsyn_fed.schema.identifiers import identifier_reason

    decimals = (120, 50, 24, 0, 0, 0, 0)  # each below the seen level
    noisy = ColumnFacts(rows=1583, missing=240, non_numbers=0, decimals=decimals, distinct=678, seen=600)
    assert noisy.whole and identifier_line("income", noisy, [], text=False, lo=2, hi=3) is None
    ids = ColumnFacts(rows=1000, missing=0, non_numbers=0, decimals=(0,) * 7, distinct=1000, seen=30)
    assert "looks like an identifier" in identifier_line("id", ids, [], text=False, lo=1, hi=1000)
    assert identifier_reason(1000, 1990, text=False, whole=True, lo=1, hi=1000) is not None
    assert identifier_reason(1000, 2010, text=False, whole=True, lo=1, hi=1000) is None


def test_a_column_with_missing_cells_counts_its_present_ones(table):
    df = table[["patient_id", "age"]].astype({"patient_id": object}).copy()
    df.loc[df.index % 2 == 0, "patient_id"] = ""  # half missing: 2 visits a patient present
    result = draft_frame(df)
    assert result.identifiers == ["patient_id"]


# ---- the command line ----------------------------------------------------------------------------------
def test_the_command_leaves_identifiers_out_with_one_note_each(table, tmp_path):
    data, out = tmp_path / "panel.csv", tmp_path / "schema.json"
    table.to_csv(data, index=False)
    proc = run_cli("schema", "draft", data, "--out", out)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "looks like an identifier" in ln]
    assert [ln.split("'")[1] for ln in lines] == IDENTIFIERS
    assert all(ln.startswith("privsyn-fed: note: column '") for ln in lines)
    doc = json.loads(out.read_text())
    assert doc[DRAFT_NOTE_KEY]["left_out"] == doc[DRAFT_NOTE_KEY]["likely_identifiers"] == IDENTIFIERS
    assert [c["name"] for c in doc["columns"]] == ATTRIBUTES
    assert names(draft_table(data)) == ATTRIBUTES


def test_exclude_and_include_on_the_command_line(table, tmp_path, capsys):
    data, out = tmp_path / "panel.csv", tmp_path / "schema.json"
    table.to_csv(data, index=False)
    proc = run_cli(
        "schema",
        "draft",
        data,
        "--out",
        out,
        "--exclude",
        "surname",
        "--exclude",
        "plan",
        "--include",
        "patient_id",
        capsys=capsys,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    drafted = {c["name"]: c for c in doc["columns"]}
    assert list(drafted) == ["patient_id", "age", "days", "income", "lab"]
    assert drafted["patient_id"] == {
        "name": "patient_id",
        "type": "numeric",
        "lower": 0,
        "upper": 500,
        "bins": 32,
        "integer": True,
    }
    note = doc[DRAFT_NOTE_KEY]
    assert note["left_out"] == ["row", "surname", "plan"] and note["likely_identifiers"] == ["row"]
    excluded = [ln for ln in proc.stderr.splitlines() if "(--exclude)" in ln]
    assert len(excluded) == 2 and "column 'surname' excluded" in excluded[0]
    flagged = [ln.split("'")[1] for ln in proc.stderr.splitlines() if "looks like an identifier" in ln]
    assert flagged == ["row"]  # patient_id kept, surname unread


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--exclude", "nurse"], "--exclude nurse"),
        (["--include", "Age"], "--include Age"),
        (["--exclude", "age", "--include", "age"], "column 'age' is given to both"),
    ],
)
def test_unknown_or_contradictory_columns_exit_2_with_one_line(table, tmp_path, capsys, flags, named):
    data, out = tmp_path / "panel.csv", tmp_path / "schema.json"
    table.head(200).to_csv(data, index=False)
    proc = run_cli("schema", "draft", data, "--out", out, *flags, capsys=capsys)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and lines[0].startswith("privsyn-fed: error: ")
    assert not out.exists()


def test_exclude_reads_nothing_of_the_column(table, tmp_path):
    data = tmp_path / "panel.csv"
    bad = table.head(300).assign(remark=np.where(np.arange(300) % 2 == 0, "ok", "bell\x07"))
    bad.to_csv(data, index=False)
    with pytest.raises(InputError, match="control character"):  # read, the column cannot be drafted
        draft_table(data)
    result = draft_table(data, exclude=["remark", "surname"])
    assert "remark" not in names(result) and result.dropped == ["row", "surname", "remark"]
    assert result.identifiers == ["row"]  # 75 patient ids: too few to tell
    assert sum("excluded (--exclude)" in n for n in result.notes) == 2
    with pytest.raises(InputError, match="every column is excluded"):
        draft_table(data, exclude=list(bad.columns))
    with pytest.raises(InputError, match="^--include nobody: "):
        draft_frame(table, include=["nobody"])


def test_include_in_python_drafts_the_id(table):
    result = draft_frame(table, include=["row", "surname"])
    assert result.identifiers == ["patient_id"]
    assert "row" in names(result)
    assert "surname" not in names(result)  # kept from the identifier rule, but text of many values: free text
    assert any("more than 50 distinct values" in n for n in result.notes)


def test_schema_draft_takes_exclude_and_include(table):
    """``pf.Schema.draft`` passes ``exclude`` and ``include`` through, as the command's flags."""
    import warnings

    import privsyn_fed as pf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the draft's NOT PRIVATE warning
        schema = pf.Schema.draft(table, include=["row"], exclude=["age"])
    assert "row" in schema.names and "age" not in schema.names and "patient_id" not in schema.names


# ---- atoms and decimals ------------------------------------------------------------------------------------
def test_atoms_are_values_holding_a_share_of_the_numbers():
    rng = np.random.default_rng(7)
    n = 5000
    income = np.round(rng.lognormal(10, 0.8, n))
    income[: int(0.3 * n)] = 0  # zero income
    income[int(0.3 * n) : int(0.36 * n)] = 20000  # a round common value (6%)
    income[int(0.36 * n) : int(0.39 * n)] = 12345  # 3%: under ATOM_SHARE
    lab = np.round(rng.normal(2.0, 0.5, n), 2)
    lab[:600] = 0.05  # a detection limit (12%)
    df = pd.DataFrame({"income": rng.permutation(income), "lab": rng.permutation(lab), "age": rng.integers(0, 99, n)})
    result = draft_frame(df)
    assert spec(result, "income")["atoms"] == [0.0, 20000.0]
    assert spec(result, "lab")["atoms"] == [0.05]
    assert "atoms" not in spec(result, "age")  # no age holds 5% of the rows
    assert spec(result, "lab")["decimals"] == 2 and "decimals" not in spec(result, "income")
    assert ATOM_SHARE == 0.05


def test_heavy_hitter_counters_are_lower_bounds_within_the_error():
    rng = np.random.default_rng(11)
    x = np.concatenate([np.full(700, 1.5), np.full(300, -2.0), rng.normal(0, 10, 9000)])
    rng.shuffle(x)
    sketch = HeavyHitters(k=16)
    for chunk in np.array_split(x, 37):
        sketch.add(chunk)
    assert len(sketch.values) <= 16 and sketch.n == len(x)
    counts = dict(zip(sketch.values.tolist(), sketch.counts.tolist()))
    for value, true in ((1.5, 700), (-2.0, 300)):
        assert true - sketch.error() <= counts.get(value, 0) <= true
    assert sketch.frequent(0.05, MAX_ATOMS) == [1.5]  # 7% sure; 3% not
    assert sketch.frequent(0.01, 1) == [1.5]  # the commonest only


def test_at_most_max_atoms_are_proposed_inside_the_bounds():
    values = np.repeat(np.arange(12) * 1.25, 100)  # 12 values of 8.3% each
    spread = np.linspace(100.0, 200.0, 200)  # more than --categorical-max distinct values
    result = draft_frame(pd.DataFrame({"x": np.concatenate([values, spread])}))
    atoms = spec(result, "x")["atoms"]
    assert len(atoms) == MAX_ATOMS and atoms == sorted(atoms)
    assert set(atoms) <= set(np.arange(12) * 1.25)


def test_decimals_are_the_most_places_shown_up_to_the_limit():
    assert decimal_places(np.array([1.0, 2.5, 0.125, 3.1])) == 3
    assert decimal_places(np.array([0.1 + 0.2])) == MAX_DRAFT_DECIMALS + 1  # 0.30000000000000004
    assert decimal_places(np.array([1.005, 12.34])) == 3
    assert decimal_places(np.array([7.0, -3.0])) == 0
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"fine": rng.normal(0, 1, 300), "k": np.round(rng.uniform(0, 9, 300), 4)})
    result = draft_frame(df)
    assert "decimals" not in spec(result, "fine") and spec(result, "k")["decimals"] == 4


# ---- missing ----------------------------------------------------------------------------------------------
def test_missing_is_set_only_when_a_cell_is_missing(tmp_path):
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"full": rng.integers(0, 100, 400).astype(str), "gappy": rng.integers(0, 100, 400).astype(str)})
    df.loc[17, "gappy"] = "NA"
    data = tmp_path / "t.csv"
    df.to_csv(data, index=False)
    for result in (draft_table(data), draft_frame(df)):
        assert "missing" not in spec(result, "full")
        assert spec(result, "gappy")["missing"] is True


# ---- a release warns --------------------------------------------------------------------------------------
def test_a_release_warns_about_an_identifier_in_the_schema(table, tmp_path, capsys):
    schema = {
        "columns": [
            {"name": "patient_id", "type": "numeric", "lower": 0, "upper": 500, "integer": True},
            {"name": "surname", "type": "categorical", "categories": sorted(set(table["surname"]))},
            {"name": "age", "type": "numeric", "lower": 0, "upper": 100, "integer": True},
            {"name": "plan", "type": "categorical", "categories": ["P1", "P2", "P3", "P4", "P5"]},
        ]
    }
    schema_path, out = tmp_path / "schema.json", tmp_path / "synthetic.csv"
    schema_path.write_text(json.dumps(schema))
    silos = [tmp_path / "north.csv", tmp_path / "south.csv"]
    table.iloc[:1000].to_csv(silos[0], index=False)
    table.iloc[1000:].to_csv(silos[1], index=False)
    proc = run_cli(*synth_argv("independent", schema=schema_path, silos=silos, out=out, quiet=True), capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    warned = [ln for ln in proc.stderr.splitlines() if "looks like an identifier" in ln]
    assert len(warned) == 4  # patient_id and surname, in each silo
    assert sum("column 'patient_id' of silo" in ln and "north.csv" in ln for ln in warned) == 1
    assert all("can repeat real ids: leave it out of the schema" in ln for ln in warned)
    assert not any("'age'" in ln or "'plan'" in ln for ln in warned)


def test_a_release_of_attributes_only_does_not_warn(table, caplog):
    import privsyn_fed as pf

    schema = pf.Schema.from_dict(
        {
            "columns": [
                {"name": "age", "type": "numeric", "lower": 0, "upper": 100, "integer": True},
                {"name": "income", "type": "numeric", "lower": 0, "upper": 10**6, "integer": True},
                {"name": "lab", "type": "numeric", "lower": 0, "upper": 20},
                {"name": "plan", "type": "categorical", "categories": ["P1", "P2", "P3", "P4", "P5"]},
            ]
        }
    )
    with caplog.at_level(logging.WARNING, logger="privsyn_fed"):
        pf.synthesize([table.iloc[:1000], table.iloc[1000:]], "independent", schema=schema, rows=5)
    assert not any("looks like an identifier" in r.getMessage() for r in caplog.records)
    with_id = pf.Schema.from_dict(
        {"columns": [*schema.to_dict()["columns"], {"name": "row", "type": "numeric", "lower": 0, "upper": 2000}]}
    )
    with caplog.at_level(logging.WARNING, logger="privsyn_fed"):
        pf.synthesize([table.iloc[:1000], table.iloc[1000:]], "independent", schema=with_id, rows=5)
    assert sum("column 'row' of silo" in r.getMessage() for r in caplog.records) == 2


def test_an_mpc_party_warns_its_own_operator(table, tmp_path, capsys):
    import privsyn_fed as pf
    from privsyn_fed.mpc.party_session import PartySession

    schema = pf.Schema.from_dict(
        {
            "columns": [
                {"name": "patient_id", "type": "numeric", "lower": 0, "upper": 500, "integer": True},
                {"name": "age", "type": "numeric", "lower": 0, "upper": 100, "integer": True},
            ]
        }
    )
    path = tmp_path / "party.csv"
    table.to_csv(path, index=False)
    session = PartySession(schema, str(path), 1, 3, channel=object())  # no connection: only its silo
    assert session._load().identifiers.keys() == {"patient_id"}
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "looks like an identifier" in ln]
    assert len(lines) == 1 and lines[0].startswith("privsyn-fed mpc-party 1: warning for this silo's operator: ")


# ---- a draft leaves out likely identifiers with a note ------------------------------------------------
def id_table(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "record": np.arange(5000, 5000 + n),  # whole numbers packed as IDs are
            "name": [f"person {i}" for i in range(n)],
            "age": rng.integers(18, 90, n),
            "weight": rng.normal(70, 10, n),  # distinct, but measures
            "salary": rng.integers(10_000, 900_000, n),  # distinct, but spread far wider than the rows
            "code": rng.choice(["1", "2", "10", "x"], n),
        }
    )


def test_draft_leaves_out_likely_identifiers_with_a_note(tmp_path, capsys, caplog):
    from privsyn_fed.schema.draft import DRAFT_NOTE_KEY, PrivateDraftWarning, draft_frame

    df = id_table()
    with caplog.at_level(logging.WARNING, logger="privsyn_fed.schema"):
        result = draft_frame(df)
    assert result.identifiers == result.dropped == ["record", "name"]
    assert [c["name"] for c in result.columns] == ["age", "weight", "salary", "code"]
    assert sum("looks like an identifier" in r.getMessage() for r in caplog.records) == 2
    with pytest.warns(PrivateDraftWarning):
        assert pf.Schema.draft(df).names == ["age", "weight", "salary", "code"]
    assert "record" in draft_frame(df.head(30)).columns[0]["name"]  # too few rows to tell

    data, out = tmp_path / "t.csv", tmp_path / "schema.json"
    df.to_csv(data, index=False)
    code, _, err = run_cli("schema", "draft", data, "--out", out, capsys=capsys)
    assert code == 0, err
    assert sum("looks like an identifier" in line for line in err.splitlines()) == 2
    note = json.loads(out.read_text())[DRAFT_NOTE_KEY]
    assert note["left_out"] == note["likely_identifiers"] == ["record", "name"]


def test_a_balanced_panel_s_sparse_id_is_an_identifier_and_a_measure_is_not():
    """``Ecdat::Males``' shape: 545 men, 8 years each, ids spread thinly over 13..12548 (neither a
    fifth of the rows nor dense in their span). Each id in exactly 8 rows marks a unit id; whole
    numbers repeated unevenly (dollars), a measure repeated 8 times, or a period packed in its range
    are attributes."""
    from privsyn_fed.schema.identifiers import BALANCED_SHARE, balanced_repeats

    rng = np.random.default_rng(8)
    men, years = 545, 8
    ids = np.sort(rng.choice(np.arange(13, 12549), men, replace=False))
    df = pd.DataFrame(
        {
            "nr": np.repeat(ids, years),
            "code": np.repeat([f"M{i:05d}" for i in ids], years),
            "year": np.tile(np.arange(1980, 1980 + years), men),
            "wage_dollars": np.round(rng.lognormal(9, 0.6, men * years)).astype(np.int64),
            "height_cm": np.repeat(np.round(rng.normal(176, 7, men), 1), years),
        }
    )
    df["day"] = np.tile(np.arange(1, men + 1), years)  # a period packed in 1..545, 8 rows each
    result = draft_frame(df)
    assert result.identifiers == ["nr"]  # a text code and a packed day number are not taken this way
    assert names(result) == ["year", "wage_dollars", "height_cm", "day"]  # 545 codes: too many categories
    notes = " ".join(result.notes)
    assert "nearly each in exactly 8 rows" in notes and "--include nr" in notes
    # an unbalanced panel: one man in ten missing a year still leaves 90% of the ids at 8 rows
    assert BALANCED_SHARE > 0.9
    counts = np.full(men, years)
    counts[::10] -= 1
    assert balanced_repeats(counts) is None
    counts[::10] += 1
    counts[:5] = 3  # under 5% of the ids elsewhere
    assert balanced_repeats(counts) == years
    assert balanced_repeats(np.ones(300, dtype=int)) == 1 and balanced_repeats(np.zeros(0, dtype=int)) is None


def test_values_in_pairs_are_not_taken_for_a_panel_id():
    from privsyn_fed.schema.identifiers import MIN_REPEATS, identifier_reason

    assert MIN_REPEATS == 3
    sparse = dict(text=False, whole=True, lo=10_000, hi=9_000_000)
    assert identifier_reason(19_584, 9_269, repeats=2, **sparse) is None
    assert "exactly 3 rows" in identifier_reason(3_000, 1_000, repeats=3, **sparse)
    assert identifier_reason(3_000, 500, repeats=6, text=True, whole=False) is None  # text under a fifth
    assert identifier_reason(4_000, 500, repeats=8, text=False, whole=True, lo=1, hi=500) is None  # packed


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.integers(1, 40), min_size=1, max_size=6),
    st.integers(1, 30),
    st.integers(0, 119),
)
def test_a_silo_s_identifier_scan_is_the_same_in_any_chunks(seed, cuts, sample, fraction_at):
    """The scan, fed a silo's rows in chunks, gives what one pass over them gives: its sample the
    first present cells, and a number not whole seen anywhere, before or after the sample fills (a
    column is passed over once both are settled)."""
    from privsyn_fed.silo import identifier_scan

    rng = np.random.default_rng(seed)
    n = 120
    values = rng.integers(0, 50, n).astype(float)
    values[rng.random(n) < 0.2] = np.nan
    values[fraction_at] += 0.5 if not np.isnan(values[fraction_at]) else 0.0
    frame = pd.DataFrame({"x": values, "g": rng.choice(["a", "b", "c", ""], n)})
    schema = pf.Schema.from_dict(
        {
            "columns": [
                {"name": "x", "type": "numeric", "lower": 0, "upper": 50, "bins": 5, "missing": True},
                {"name": "g", "type": "categorical", "categories": ["a", "b", "c"], "missing": True},
            ]
        }
    )
    codes, _, encoded = pf.schema.encode_frame(frame, schema, "t", with_values=True)
    old = identifier_scan.IDENTIFIER_SAMPLE
    identifier_scan.IDENTIFIER_SAMPLE = sample
    try:
        whole, chunked = identifier_scan.IdentifierScan(schema), identifier_scan.IdentifierScan(schema)
        whole.add(codes, encoded)
        for part in np.split(np.arange(n), np.cumsum(cuts)[np.cumsum(cuts) < n]):
            chunked.add(codes[part], encoded[part])
    finally:
        identifier_scan.IDENTIFIER_SAMPLE = old
    assert (chunked.sampled, chunked.whole, chunked.lo, chunked.hi) == (whole.sampled, whole.whole, whole.lo, whole.hi)
    assert all(np.array_equal(chunked._seen[j], whole._seen[j]) for j in whole.columns)
    assert chunked.reasons() == whole.reasons()
