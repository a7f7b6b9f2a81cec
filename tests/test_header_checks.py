"""A table's header is checked before any budget is reserved: a DP draft's and every silo's, and a
CSV header that repeats a name is refused by every command."""

from __future__ import annotations

import pytest

from .conftest import assert_one_line_error, make_frame, parquet_table, run_cli, synth_argv

DP_STORE = ["--dp", "1", "--delta", "1e-9", "--dataset-id", "d", "--total-epsilon", "3"]


@pytest.mark.parametrize(
    "names, fragment",
    [
        (["age ", "x"], "column 'age ': the name has leading or trailing spaces"),
        ([" ", "x"], "column #1: the name ' ' is blank"),
        (["x", "x"], "column 'x' appears twice"),
    ],
)
def test_a_dp_draft_refuses_a_bad_header_before_it_reserves(names, fragment, tmp_path, capsys):
    data, store = parquet_table(tmp_path / "t.parquet", names), tmp_path / "bs.db"
    run = run_cli(
        "schema", "draft", data, "--out", tmp_path / "t.json", "--budget-store", store, *DP_STORE, capsys=capsys
    )
    assert_one_line_error(run, str(data), fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]  # no store, no ledger, no schema


def test_synth_checks_every_silos_header_before_it_reserves(schema_path, silo_paths, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    make_frame(50, seed=9).drop(columns="label").to_csv(bad, index=False)
    store = tmp_path / "b.db"
    argv = synth_argv(schema=schema_path, silos=[*silo_paths, bad], out=tmp_path / "o.csv", quiet=True)
    run = run_cli(*argv, "--budget-store", store, "--dataset-id", "d", "--total-epsilon", "3", capsys=capsys)
    assert_one_line_error(run, str(bad), "missing column 'label'")
    assert not store.exists() and not (tmp_path / "o.ledger.json").exists()


def test_a_csv_header_that_repeats_a_name_is_refused_everywhere(schema_path, silo_paths, tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text("a,a,b\n1,2,3\n4,5,6\n")
    run = run_cli("schema", "draft", table, "--out", tmp_path / "t.json", capsys=capsys)
    assert_one_line_error(run, f"{table}: column 'a' appears twice")
    silo = tmp_path / "twice.csv"
    frame = make_frame(50, seed=4)
    frame.insert(1, "sex ", frame["sex"])  # read as 'sex' once its spaces are stripped
    frame.to_csv(silo, index=False)
    argv = synth_argv(schema=schema_path, silos=[silo_paths[0], silo], out=tmp_path / "o.csv", quiet=True)
    assert_one_line_error(run_cli(*argv, capsys=capsys), f"{silo}: column 'sex' appears twice")
