"""Requests that could never succeed are refused in one line before the budget is reserved, in this
process and in the installed command."""

from __future__ import annotations

import json

import pytest

from .conftest import assert_one_line_error, parquet_table, run_cli, synth


@pytest.mark.parametrize(
    "method, options, fragment",
    [
        ("aim", {"rows": "2000000000"}, "more than the 1,000,000,000 rows"),
        ("fedtda", {"epsilon": "1e300"}, "--epsilon must be a positive number up to 1000"),
        ("aim", {"rounds": "3"}, "--rounds 3 is too small for 5 columns"),
        ("aim", {"workload_degree": "9"}, "--workload-degree 9 is more than the 5 columns"),
        ("aim", {"seed": "-1"}, "--seed must be a whole number"),
        ("aim", {"alpha": "1"}, "--alpha must lie in (0, 1)"),
        ("aim", {"pgm_tol": "nan"}, "--pgm-tol must be 0 or positive"),
        ("distaim", {"final_iters": "-1"}, "--final-iters must be 0 or positive"),
        ("aim", {"max_model_size": "1e12"}, "does not fit this machine"),
        ("aim", {"workload_seed": "-1"}, "--workload-seed must be 0 or a positive whole number"),
        ("fedtda", {"split": "0.1,0.2,inf,0.3"}, "--split needs four non-negative shares"),
        ("distaim", {"mpc": True, "mpc_timeout": "0"}, "--mpc-timeout must be a positive number"),
        ("fedtda", {"split": "0.1,0,0.5,0.4"}, "--split gives the categorical histograms no budget"),
        ("aim", {"delta": "0.5"}, "--delta must lie from 1e-100 up to (not including) 0.1"),
    ],
)
def test_infeasible_requests_are_refused_before_the_budget_is_reserved(
    method, options, fragment, schema_path, silo_paths, tmp_path, capsys
):
    store = tmp_path / "b.db"
    out = tmp_path / "o.csv"
    args = synth(schema_path, silo_paths, out, method, budget_store=store, dataset_id="d", total_epsilon=5, **options)
    assert_one_line_error(run_cli(*args, capsys=capsys), fragment)
    assert not out.exists() and not out.with_suffix(".ledger.json").exists()
    assert not store.exists()  # not even the store was touched


def test_a_workload_too_large_for_memory_is_refused_up_front(tmp_path, capsys):
    cols = [{"name": f"c{i}", "type": "categorical", "categories": [str(k) for k in range(300)]} for i in range(3)]
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps({"columns": cols}))
    silo = tmp_path / "s.csv"
    silo.write_text("c0,c1,c2\n1,2,3\n")
    proc = run_cli(*synth(schema_path, [silo], tmp_path / "o.csv", "aim"), capsys=capsys)
    assert_one_line_error(proc, "cells, more than 10,000,000")


@pytest.mark.parametrize("case", ["report-is-the-csv", "silo-by-symlink", "rows-too-many", "rounds-too-few"])
def test_refusals_as_a_user_meets_them(case, schema_path, silo_paths, tmp_path):
    """The installed command in a real process: exit 2, one line, nothing written, store untouched."""
    out = tmp_path / "o.md"
    options = {
        "report-is-the-csv": {"report": out},
        "silo-by-symlink": {"silo": tmp_path / "link.csv"},
        "rows-too-many": {"rows": "2000000000"},
        "rounds-too-few": {"method": "aim", "rounds": "3"},
    }[case]
    (tmp_path / "link.csv").symlink_to(silo_paths[0])
    store = tmp_path / "b.db"
    args = synth(schema_path, silo_paths, out, budget_store=store, dataset_id="d", total_epsilon=3, **options)
    assert_one_line_error(run_cli(*args, timeout=120), "error:")
    assert not out.exists() and not store.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["link.csv", "schema.json", "silo0.csv", "silo1.csv", "silo2.csv"]
    )


def test_a_delta_too_small_to_split_is_refused_with_the_range(tmp_path, capsys):
    data = parquet_table(tmp_path / "t.parquet", ["age", "x"])
    run = run_cli(
        "schema", "draft", data, "--out", tmp_path / "t.json", "--dp", "1", "--delta", "5e-324", capsys=capsys
    )
    assert_one_line_error(run, "--delta must lie from 1e-100 up to (not including) 0.1", "not 5e-324")
    run = run_cli(
        "audit", "--empirical", "--mechanism", "gaussian", "--epsilon", "1", "--delta", "5e-324", capsys=capsys
    )
    assert_one_line_error(run, "--delta must lie from 1e-100")
