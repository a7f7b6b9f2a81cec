"""Columns the schema does not list: ignored with one note (once per silo on the command line, alike
at an MPC party), a Parquet column of an unreadable type never read, missing columns named together."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError, read_chunks

from .conftest import SCHEMA, assert_one_line_error, make_frame, run_cli, synth_argv


def with_extras(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with an ID column first and a free-text column last, neither in the schema."""
    out = df.copy()
    out.insert(0, "patient_id", [f"P{i:05d}" for i in range(len(df))])
    out["notes"] = "free text, with a comma"
    return out


def ignored_notes(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "privsyn_fed.silo" and "ignored" in r.getMessage()]


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
