"""Silos in every format (CSV, gzip CSV, Parquet, a pandas frame), read in chunks and spilled to disk:
the same rows give the same statistics, and every bad input is one line naming file, row and column."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError, read_table, table_format
from privsyn_fed.silo import rowstore

from .conftest import make_frame, run_cli, synth_argv


def _stats(silo: pf.Silo) -> dict:
    d = len(silo.schema.columns)
    cliques = [[j] for j in range(d)] + [[0, 2], [1, 3, 4], []]
    return {
        "marginals": [silo.marginal(c).tolist() for c in cliques],
        "fingerprint": silo.fingerprint(),
        "values": np.nan_to_num(silo.values(), nan=-1.0).round(9).tolist(),
        "clipped": silo.clipped,
    }


@pytest.fixture
def frame() -> pd.DataFrame:
    df = make_frame(1000, seed=5)
    df.loc[3, "income"] = 140.0  # clipped to the bound
    return df


def _write_all(df: pd.DataFrame, tmp_path) -> dict:
    paths = {"csv": tmp_path / "t.csv", "gzip": tmp_path / "t.csv.gz", "parquet": tmp_path / "t.parquet"}
    df.to_csv(paths["csv"], index=False)
    with gzip.open(paths["gzip"], "wt") as fh:
        df.to_csv(fh, index=False)
    df.to_parquet(paths["parquet"], row_group_size=128)
    return paths


def test_every_format_and_chunking_gives_the_same_silo(frame, schema, tmp_path, monkeypatch):
    reference = _stats(pf.Silo.from_frame(frame.astype(str), schema, name="ref"))
    assert reference["clipped"]["income"] == 1
    for fmt, path in _write_all(frame, tmp_path).items():
        assert table_format(path) == fmt
        assert _stats(pf.Silo.load(path, schema)) == reference, fmt
        assert _stats(pf.Silo.load(path, schema, chunk_rows=97)) == reference, f"{fmt} in chunks"
    monkeypatch.setattr(rowstore, "SPILL_BYTES", 4096)
    spilled = pf.Silo.load(tmp_path / "t.parquet", schema, chunk_rows=97)
    assert spilled._stores[0].spilled
    assert _stats(spilled) == reference
    assert _stats(pf.Silo.from_frame(frame, schema, name="typed")) == reference  # a user's typed frame


def test_a_spilled_silo_leaves_no_file_behind(frame, schema, tmp_path, monkeypatch):
    spill = tmp_path / "spill"
    spill.mkdir()
    monkeypatch.setattr(rowstore, "SPILL_BYTES", 4096)
    monkeypatch.setattr("tempfile.tempdir", str(spill))
    silo = pf.Silo.load(_write_all(frame, tmp_path)["csv"], schema, chunk_rows=100)
    assert silo._stores[0].spilled and silo.true_size() == 1000
    assert list(spill.iterdir()) == []  # unlinked at creation: no name another process could open


def test_gzip_is_recognised_by_its_bytes_not_its_name(frame, schema, tmp_path):
    path = tmp_path / "plain-name.csv"
    with gzip.open(path, "wt") as fh:
        frame.to_csv(fh, index=False)
    assert pf.Silo.load(path, schema).true_size() == 1000


def test_a_truncated_gzip_is_one_line_naming_the_file(frame, schema, tmp_path):
    path = _write_all(frame, tmp_path)["gzip"]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"t\.csv\.gz: the gzip data is truncated or corrupt after line \d+"):
        pf.Silo.load(path, schema, chunk_rows=100)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda b: b[: len(b) // 2], "cannot read as Parquet"),
        (lambda b: b"PAR1" + bytes(200) + b"PAR1", "cannot read as Parquet"),
        (lambda b: b"", "cannot read as Parquet"),
    ],
)
def test_a_corrupt_parquet_file_is_one_line(frame, schema, tmp_path, damage, message):
    path = _write_all(frame, tmp_path)["parquet"]
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(InputError) as info:
        pf.Silo.load(path, schema)
    assert str(info.value).startswith(f"{path}: {message}") and "\n" not in str(info.value)


def test_a_parquet_column_of_the_wrong_type_names_file_and_column(frame, schema, tmp_path):
    path = tmp_path / "t.parquet"
    frame.assign(age=frame["age"].astype(str)).to_parquet(path)
    with pytest.raises(InputError, match=r"t\.parquet: column 'age' is stored as (large_)?string in Parquet, but"):
        pf.Silo.load(path, schema)
    frame.assign(sex=np.where(frame["sex"] == "F", 0.5, 1.5)).to_parquet(path)
    with pytest.raises(InputError, match=r"t\.parquet: column 'sex' is stored as double in Parquet, but .*categorical"):
        pf.Silo.load(path, schema)


def test_parquet_whole_numbers_and_booleans_are_categories(tmp_path):
    schema = pf.Schema.from_dict(
        {
            "columns": [
                {"name": "code", "type": "categorical", "categories": ["1", "2", "10"], "missing": True},
                {"name": "flag", "type": "categorical", "categories": ["False", "True"]},
            ]
        }
    )
    path = tmp_path / "t.parquet"
    pd.DataFrame({"code": pd.array([1, 10, None, 2], dtype="Int64"), "flag": [True, False, True, True]}).to_parquet(
        path
    )
    silo = pf.Silo.load(path, schema)
    assert silo.marginal([0]).tolist() == [1, 1, 1, 1]
    assert silo.marginal([1]).tolist() == [1, 3]


def test_errors_in_later_chunks_name_the_real_row(frame, schema, tmp_path):
    bad = frame.copy()
    bad["sex"] = bad["sex"].astype(object)
    bad.loc[777, "sex"] = "X"
    paths = _write_all(bad, tmp_path)
    for fmt, row in (("csv", 779), ("gzip", 779), ("parquet", 778)):  # CSV: a line number; Parquet: a row
        with pytest.raises(InputError, match=rf"row {row}, column 'sex': category 'X' is not in the schema"):
            pf.Silo.load(paths[fmt], schema, chunk_rows=100)


def test_a_header_only_table_has_no_rows(schema, tmp_path):
    for path in (tmp_path / "e.csv", tmp_path / "e.parquet"):
        make_frame(5, 0).head(0).to_parquet(path) if path.suffix == ".parquet" else path.write_text(
            "age,income,sex,region,label\n"
        )
        with pytest.raises(InputError, match="the table has no rows"):
            pf.Silo.load(path, schema)


def test_read_table_gives_text_for_csv_and_typed_columns_for_parquet(frame, tmp_path):
    paths = _write_all(frame, tmp_path)
    assert read_table(paths["csv"])["age"].iloc[0] == str(frame["age"].iloc[0])
    assert read_table(paths["parquet"])["age"].iloc[0] == float(frame["age"].iloc[0])


# ---- the API: frames and paths ------------------------------------------------------------------
def test_synthesize_takes_frames_and_paths(schema_path, tmp_path):
    a = make_frame(300, seed=1)
    a["region"] = a["region"].replace("", None)  # a user's frame: None for missing
    a["sex"] = a["sex"].astype("category")
    b = tmp_path / "b.parquet"
    make_frame(300, seed=2).to_parquet(b)
    result = pf.synthesize([a, b], schema=schema_path, method="independent", epsilon=2.0, delta=1e-9, seed=0)
    assert isinstance(result.data, pd.DataFrame)
    assert list(result.data.columns) == ["age", "income", "sex", "region", "label"]
    assert result.ledger["status"] == "complete"


def test_synthesize_checks_frames_as_it_checks_files(schema, schema_path):
    bad = make_frame(50, seed=3)
    bad["age"] = bad["age"].astype(object)  # numbers and one text cell, as a spreadsheet import gives
    bad.loc[7, "age"] = "old"
    with pytest.raises(InputError, match=r"^frame 2: row 9, column 'age': 'old' is not a number"):
        pf.synthesize([make_frame(50, 1), bad], schema=schema, method="independent", epsilon=1.0, delta=1e-9)
    with pytest.raises(InputError, match="need schema="):
        pf.synthesize([make_frame(50, 1), make_frame(50, 2)], method="independent", epsilon=1.0, delta=1e-9)
    with pytest.raises(InputError, match="^epsilon must be"):  # the request is checked before any frame is read
        pf.synthesize([bad, bad], schema=schema, method="independent", epsilon=-1.0, delta=1e-9)


# ---- the command line ---------------------------------------------------------------------------
def test_synth_reads_parquet_and_gzip_silos(schema_path, tmp_path, capsys):
    a, b = tmp_path / "a.parquet", tmp_path / "b.csv.gz"
    make_frame(400, seed=1).to_parquet(a)
    with gzip.open(b, "wt") as fh:
        make_frame(400, seed=2).to_csv(fh, index=False)
    out = tmp_path / "syn.csv"
    args = synth_argv("independent", schema=schema_path, silos=[a, b], out=out, seed=0)
    assert run_cli(*args, capsys=capsys).returncode == 0
    assert len(pd.read_csv(out)) > 0


def test_a_corrupt_silo_is_exit_2_one_line_and_nothing_written(schema_path, tmp_path, capsys):
    good, bad = tmp_path / "a.parquet", tmp_path / "b.parquet"
    make_frame(300, seed=1).to_parquet(good)
    bad.write_bytes(good.read_bytes()[:500])
    out, ledger = tmp_path / "syn.csv", tmp_path / "ledger.json"
    args = synth_argv("independent", schema=schema_path, silos=[good, bad], out=out, ledger=ledger)
    code, _, err = run_cli(*args, capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and f"{bad}: cannot read as Parquet" in err
    assert not out.exists() and not ledger.exists()
    assert json.dumps(sorted(p.name for p in tmp_path.iterdir())) == json.dumps(
        ["a.parquet", "b.parquet", "schema.json"]
    )


def test_a_signal_while_a_silo_is_read_stops_it_between_chunks(frame, schema, tmp_path, monkeypatch):
    import signal

    from privsyn_fed.common import interrupt

    path = _write_all(frame, tmp_path)["csv"]
    monkeypatch.setattr(interrupt, "_received", signal.SIGTERM)
    with pytest.raises(interrupt.Interrupted):
        pf.Silo.load(path, schema, chunk_rows=100)


def test_a_frame_of_complex_numbers_or_infinity_is_named_plainly(schema):
    frame = make_frame(60, seed=2)
    complex_frame = frame.assign(income=frame["income"].astype(complex))
    with pytest.raises(InputError, match=r"frame 1: column 'income' holds complex numbers \(complex128\)"):
        pf.synthesize([complex_frame, make_frame(60, seed=3)], "independent", schema=schema)
    with pytest.raises(InputError, match="column 'income' holds complex numbers"):
        pf.Schema.draft(complex_frame)
    frame.loc[4, "income"] = np.inf
    with pytest.raises(InputError) as info:
        pf.synthesize([frame, make_frame(60, seed=3)], "independent", schema=schema)
    assert "column 'income': inf is not a number" in str(info.value) and "np." not in str(info.value)
