"""What a new user meets first: silos with columns the schema does not use, identifiers in a draft,
category order, a quiet API, files replaced unasked, option errors in the wrong language, and what
the guarantee means for a table with several rows per person."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError, OptionError, read_chunks

from .conftest import SCHEMA, assert_one_line_error, make_frame, run_cli, synth_argv

ROOT = Path(__file__).resolve().parents[1]


def with_extras(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with an ID column first and a free-text column last, neither in the schema."""
    out = df.copy()
    out.insert(0, "patient_id", [f"P{i:05d}" for i in range(len(df))])
    out["notes"] = "free text, with a comma"
    return out


def ignored_notes(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "privsyn_fed.silo" and "ignored" in r.getMessage()]


# ---- 1. columns the schema does not list -----------------------------------------------------------
def test_columns_not_in_the_schema_are_ignored_with_one_note(schema, tmp_path, caplog):
    df = make_frame(60, seed=3)
    plain, extra = tmp_path / "plain.csv", tmp_path / "extra.csv"
    df.to_csv(plain, index=False)
    with_extras(df).to_csv(extra, index=False)
    with caplog.at_level(logging.WARNING, logger="privsyn_fed"):
        silo = pf.Silo.load(extra, schema)
    assert silo.fingerprint() == pf.Silo.load(plain, schema).fingerprint()
    (note,) = ignored_notes(caplog)
    assert str(extra) in note and "'patient_id', 'notes'" in note
    # the readers never hand the other columns on
    assert [list(c.frame.columns) for c in read_chunks(extra, columns=schema.names)] == [list(df.columns)]

    # a frame: also a column no schema could read (complex numbers) is passed over
    caplog.clear()
    frame = with_extras(df).assign(z=np.ones(len(df), dtype=complex))
    with caplog.at_level(logging.WARNING, logger="privsyn_fed"):
        assert pf.Silo.from_frame(frame, schema, name="f").fingerprint() == silo.fingerprint()
    assert ignored_notes(caplog) == ["f: columns not in the schema, ignored (never read): 'patient_id', 'notes', 'z'"]


def test_a_parquet_column_of_an_unreadable_type_is_never_read(schema, tmp_path):
    pytest.importorskip("pyarrow")
    df = make_frame(40, seed=4)
    path = tmp_path / "s.parquet"
    df.assign(seen=pd.Timestamp("2024-01-01")).to_parquet(path)
    assert pf.Silo.load(path, schema).true_size() == 40


def test_missing_columns_are_named_together(schema, tmp_path):
    path = tmp_path / "bad.csv"
    make_frame(5, seed=1).drop(columns=["sex", "label"]).assign(zip=1).to_csv(path, index=False)
    with pytest.raises(InputError) as info:
        pf.Silo.load(path, schema)
    assert str(info.value) == f"{path}: missing columns 'sex', 'label' (the schema declares them)"


def test_the_command_notes_ignored_columns_once_per_silo(schema_path, tmp_path, capsys):
    silos = []
    for k in range(2):
        silos.append(tmp_path / f"s{k}.csv")
        with_extras(make_frame(80, seed=k)).to_csv(silos[-1], index=False)
    out = tmp_path / "syn.csv"
    code, _, err = run_cli(
        *synth_argv("independent", schema=schema_path, silos=silos, out=out, quiet=True), capsys=capsys
    )
    assert code == 0, err
    notes = [line for line in err.splitlines() if "ignored" in line]
    assert notes == [
        f"privsyn-fed: note: {s}: columns not in the schema, ignored (never read): 'patient_id', 'notes'" for s in silos
    ]
    assert list(pd.read_csv(out).columns) == [c["name"] for c in SCHEMA["columns"]]
    # a missing column is still refused, in one line, before anything is spent
    make_frame(20, seed=5).drop(columns=["label", "age"]).to_csv(silos[1], index=False)
    proc = run_cli(*synth_argv("independent", schema=schema_path, silos=silos, out=tmp_path / "b.csv"), capsys=capsys)
    assert_one_line_error(proc, str(silos[1]), "missing columns 'age', 'label'")


def test_an_mpc_party_reads_its_silo_alike(schema, tmp_path, caplog):
    from privsyn_fed.mpc.party_session import PartySession

    path = tmp_path / "party.csv"
    with_extras(make_frame(30, seed=2)).to_csv(path, index=False)
    session = PartySession(schema, str(path), 1, 3, channel=object())  # no connection: only its silo
    with caplog.at_level(logging.WARNING, logger="privsyn_fed"):
        assert session._load().true_size() == 30
    assert len(ignored_notes(caplog)) == 1


# ---- 2. and 3. drafts: identifiers, category order ----------------------------------------------------
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


def test_numeric_categories_sort_as_numbers_in_python_and_on_the_command_line(tmp_path, capsys):
    from privsyn_fed.schema.draft import draft_frame

    df = pd.DataFrame({"n": [10, 2, 1, 2] * 5, "t": ["10", "2", "b", "a"] * 5})
    python = {c["name"]: c["categories"] for c in draft_frame(df).columns}
    data, out = tmp_path / "t.csv", tmp_path / "s.json"
    df.to_csv(data, index=False)
    assert run_cli("schema", "draft", data, "--out", out, capsys=capsys).returncode == 0
    cli = {c["name"]: c["categories"] for c in json.loads(out.read_text())["columns"]}
    assert python == cli == {"n": ["1", "2", "10"], "t": ["2", "10", "a", "b"]}


# ---- 4. and 5. a talking API that keeps files -------------------------------------------------------------
def test_the_api_logs_and_calls_back_and_prints_nothing(schema, capsys, caplog):
    calls = []
    silos = [make_frame(100, seed=k) for k in range(2)]
    with caplog.at_level(logging.INFO, logger="privsyn_fed"):
        result = pf.synthesize(silos, "independent", schema=schema, rows=5, progress=lambda f, m: calls.append((f, m)))
    assert result.rows == 5
    assert calls and all(0 < f <= 1 + 1e-9 and isinstance(m, str) for f, m in calls)
    assert any(r.name == "privsyn_fed.progress" and r.levelno == logging.INFO for r in caplog.records)
    out, err = capsys.readouterr()
    assert out == "" and err == ""
    with pytest.raises(OptionError, match="^progress must be"):
        pf.synthesize(silos, "independent", schema=schema, progress="yes")


def test_the_api_replaces_no_file_unless_asked(schema, tmp_path):
    ledger, csv = tmp_path / "run.ledger.json", tmp_path / "run.csv"
    ledger.write_text("keep")
    silos = [make_frame(60, seed=k) for k in range(2)]
    missing = tmp_path / "not-there.csv"
    with pytest.raises(InputError) as info:  # refused before any silo is read
        pf.synthesize([missing, missing], "independent", schema=schema, ledger_path=ledger)
    assert str(info.value) == f"{ledger}: already exists (ledger_path); pass overwrite=True to replace it"
    assert ledger.read_text() == "keep"
    result = pf.synthesize(silos, "independent", schema=schema, rows=5, ledger_path=ledger, overwrite=True)
    assert json.loads(ledger.read_text())["status"] == "complete"
    csv.write_text("keep")
    with pytest.raises(InputError, match="run.csv: already exists; pass overwrite=True"):
        result.to_csv(csv)
    assert csv.read_text() == "keep"
    result.to_csv(csv, overwrite=True)
    assert len(pd.read_csv(csv)) == 5


# ---- 6. option errors in the caller's language ----------------------------------------------------------
BAD_VALUES = [-1, 0, 2, 2.5, 10**9, 1e300, math.nan, "bogus", [["nowhere"]], True, None]


def test_every_method_option_error_names_the_python_argument(schema):
    from privsyn_fed.api import prepare
    from privsyn_fed.methods import METHODS

    for method, spec in METHODS.items():
        for f in dataclasses.fields(spec.options_class):
            refused = 0
            for value in BAD_VALUES:
                try:
                    prepare(method, schema, 3, epsilon=1.0, delta=1e-9, **{f.name: value})
                except InputError as exc:
                    refused += 1
                    assert "--" not in str(exc), (method, f.name, value, str(exc))
                    if isinstance(exc, OptionError):
                        assert f.name in exc.names and f.name in str(exc), (method, f.name, str(exc))
            assert refused, (method, f.name)
    for name, value in [("epsilon", -1), ("delta", 2), ("rows", -3), ("seed", -1)]:
        with pytest.raises(OptionError, match=f"^{name} ") as info:
            prepare("aim", schema, 3, **{"epsilon": 1.0, "delta": 1e-9, name: value})
        assert "--" not in str(info.value)


def test_draft_and_budget_errors_name_the_python_argument(tmp_path):
    from privsyn_fed.accounting.budget_store import BudgetStore

    for kwargs, name in [({"categorical_max": -1}, "categorical_max"), ({"bins": 0}, "bins")]:
        with pytest.raises(OptionError, match=f"^{name} ") as info:
            pf.Schema.draft(pd.DataFrame({"a": [1, 2]}), **kwargs)
        assert "--" not in str(info.value)
    store = BudgetStore(tmp_path / "b.db")
    with pytest.raises(OptionError, match="total_epsilon") as info:
        store.reserve("d", epsilon=1.0, delta=1e-9, method="aim")
    assert "--" not in str(info.value)
    store.reserve("d", epsilon=0.1, delta=1e-9, method="aim", total_epsilon=2.0).settle(0.0, "rejected")
    with pytest.raises(OptionError, match="^delta must be 1e-09") as info:
        store.reserve("d", epsilon=0.1, delta=1e-8, method="aim")
    assert info.value.renamed(lambda n: "--" + n).startswith("--delta must be 1e-09")


# ---- 7. several rows per person -------------------------------------------------------------------------------
@pytest.mark.parametrize("doc", ["README.md", "SECURITY.md"])
def test_the_docs_say_what_the_guarantee_means_for_several_rows_per_person(doc):
    text = " ".join((ROOT / doc).read_text().split())
    assert "group privacy" in text and "rows per person" in text
