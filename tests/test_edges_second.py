"""Edges of the newer surfaces, as a user meets them: a header checked before any budget is reserved,
a run killed between its reservation and its first charge, and one-line messages for malformed
names, ids, values and options. Real files, real processes and signals, a real SQLite store."""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import time

import numpy as np
import pytest

import privsyn_fed as pf
from privsyn_fed.accounting.budget_store import BudgetStore
from privsyn_fed.common import InputError

from .conftest import CLI, assert_one_line_error, make_frame, run_cli, synth_argv

DP_STORE = ["--dp", "1", "--delta", "1e-9", "--dataset-id", "d", "--total-epsilon", "3"]


def _parquet(path, names):
    """A Parquet file of 300 rows, a column of ages and one of letters, under ``names`` (which may repeat)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    columns = [pa.array(rng.integers(17, 90, 300)), pa.array(rng.choice(["a", "b"], 300))]
    pq.write_table(pa.Table.from_arrays(columns, names=names), path)
    return path


def _runs(store):
    return BudgetStore(store, create=False).budget("d").runs


# ---- checks that need no row run before the reservation -------------------------------------------


@pytest.mark.parametrize(
    "names, fragment",
    [
        (["age ", "x"], "column 'age ': the name has leading or trailing spaces"),
        ([" ", "x"], "column #1: the name ' ' is blank"),
        (["x", "x"], "column 'x' appears twice"),
    ],
)
def test_a_dp_draft_refuses_a_bad_header_before_it_reserves(names, fragment, tmp_path, capsys):
    data, store = _parquet(tmp_path / "t.parquet", names), tmp_path / "bs.db"
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


# ---- a run killed between its reservation and its first charge ------------------------------------


def _wait_for_reservation(proc, store, ledger, timeout=60.0):
    """Poll until the store has committed run 1 and its opening ledger is on disk."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if store.exists() and ledger.exists():
            try:
                with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
                    if db.execute("SELECT COUNT(*) FROM runs WHERE id = 1").fetchone()[0]:
                        return
            except sqlite3.OperationalError:  # being created or written
                pass
        time.sleep(0.005)
    raise AssertionError("the run never reserved its budget")


def test_a_run_killed_before_its_first_charge_settles_at_zero(schema_path, tmp_path, capsys):
    silo, store, ledger = tmp_path / "big.csv", tmp_path / "b.db", tmp_path / "o.ledger.json"
    make_frame(200_000, seed=1).to_csv(silo, index=False)  # long enough to read that it is caught reading
    argv = synth_argv("independent", schema=schema_path, silos=[silo], out=tmp_path / "o.csv", quiet=True)
    argv += ["--budget-store", str(store), "--dataset-id", "d", "--total-epsilon", "3"]
    proc = subprocess.Popen([*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_reservation(proc, store, ledger)
        os.kill(proc.pid, signal.SIGSTOP)
        opening = json.loads(ledger.read_text())
        assert opening["status"] == "running" and opening["entries"] == [] and opening["rho_spent"] == 0
        token = BudgetStore(store).run(1)["token"]
        assert opening["details"]["budget_store"] == {"path": str(store), "dataset_id": "d", "run": 1, "token": token}
        settle = ("budget", "settle", "--budget-store", store, "--run", "1")
        assert_one_line_error(run_cli(*settle, capsys=capsys), "run 1 is still running")
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert _runs(store)[0]["status"] == "reserved"  # counted in full until settled
    code, out, err = run_cli(*settle, capsys=capsys)
    assert code == 0 and "settled run 1 of dataset 'd' at rho 0 " in out, err
    run = _runs(store)[0]
    assert run["status"] == "abandoned" and run["rho_spent"] == 0
    assert BudgetStore(store).budget("d").rho_committed == 0
    code, out, _ = run_cli("audit", ledger, capsys=capsys)
    assert code == 1 and "FAILED" in out and "records no mechanism, so nothing had been spent" in out


def test_a_run_that_charges_nothing_puts_back_the_ledger_it_was_replacing(schema_path, silo_paths, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    frame = make_frame(50, seed=5)
    frame.loc[7, "sex"] = "X"  # a row error: found only once the rows are read, after the reservation
    frame.to_csv(bad, index=False)
    ledger, store = tmp_path / "o.ledger.json", tmp_path / "b.db"
    ledger.write_text('{"an": "earlier ledger"}\n')
    argv = synth_argv(schema=schema_path, silos=[silo_paths[0], bad], out=tmp_path / "o.csv", quiet=True, force=True)
    run = run_cli(*argv, "--budget-store", store, "--dataset-id", "d", "--total-epsilon", "3", capsys=capsys)
    assert_one_line_error(run, "category 'X' is not in the schema")
    assert ledger.read_text() == '{"an": "earlier ledger"}\n'
    run = _runs(store)[0]
    assert run["status"] == "rejected" and run["rho_spent"] == 0


def test_a_draft_reservation_killed_at_once_settles_at_zero_with_its_delta(tmp_path, capsys):
    store, ledger = tmp_path / "b.db", tmp_path / "d.ledger.json"
    BudgetStore(store).reserve(
        "d", epsilon=1.0, delta=1e-6, method="schema-draft", total_epsilon=2.0, delta_slack=4e-7, ledger=str(ledger)
    )
    with sqlite3.connect(store) as db:
        db.execute("UPDATE runs SET pid = NULL")  # its process is gone
    code, _, err = run_cli("budget", "settle", "--budget-store", store, "--run", "1", capsys=capsys)
    assert code == 0, err
    run = BudgetStore(store).run(1)
    assert (run["status"], run["rho_spent"], run["delta_slack"]) == ("abandoned", 0, 0)


# ---- messages and small crashes ----------------------------------------------------------------------


def test_a_delta_too_small_to_split_is_refused_with_the_range(tmp_path, capsys):
    data = _parquet(tmp_path / "t.parquet", ["age", "x"])
    run = run_cli(
        "schema", "draft", data, "--out", tmp_path / "t.json", "--dp", "1", "--delta", "5e-324", capsys=capsys
    )
    assert_one_line_error(run, "--delta must lie from 1e-100 up to (not including) 0.1", "not 5e-324")
    run = run_cli(
        "audit", "--empirical", "--mechanism", "gaussian", "--epsilon", "1", "--delta", "5e-324", capsys=capsys
    )
    assert_one_line_error(run, "--delta must lie from 1e-100")


def test_a_dictionary_may_list_as_many_categories_as_a_column_may_have(tmp_path, capsys):
    def dictionary(n):
        path = tmp_path / f"dict{n}.csv"
        cats = "|".join(f"c{i:06d}" for i in range(n))
        path.write_text(f"name,type,categories\ncode,categorical,{cats}\n")
        return path

    limit = csv.field_size_limit()
    code, out, err = run_cli(
        "schema", "from-dictionary", dictionary(100_000), "--out", tmp_path / "s.json", capsys=capsys
    )
    assert code == 0, err
    assert len(pf.Schema.load(tmp_path / "s.json").column("code").categories) == 100_000
    run = run_cli("schema", "from-dictionary", dictionary(100_001), "--out", tmp_path / "t.json", capsys=capsys)
    assert_one_line_error(run, "100,001 categories are more than the 100,000 cells a column may have")
    assert csv.field_size_limit() == limit  # the reader's limit is the module's again


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


@pytest.mark.parametrize("bad_id", ["d\nrun 9: aim, epsilon 0", "d\tx", "d\x1b[2J", " "])
def test_a_dataset_id_must_be_printable(bad_id, schema_path, silo_paths, tmp_path, capsys):
    store = tmp_path / "b.db"
    argv = synth_argv(schema=schema_path, silos=silo_paths, out=tmp_path / "o.csv", quiet=True)
    run = run_cli(*argv, "--budget-store", store, "--dataset-id", bad_id, "--total-epsilon", "3", capsys=capsys)
    assert_one_line_error(run, "--dataset-id")
    assert not store.exists()


def test_budget_show_prints_an_id_of_an_older_store_on_its_own_line(tmp_path, capsys):
    store = tmp_path / "b.db"
    BudgetStore(store).reserve("d", epsilon=1.0, delta=1e-9, method="aim", total_epsilon=3.0).settle(0.0, "rejected")
    with sqlite3.connect(store) as db:  # written before ids were checked
        db.execute("UPDATE datasets SET id = ? WHERE id = 'd'", ("d\nrun 9: fake",))
        db.execute("UPDATE runs SET dataset = ?", ("d\nrun 9: fake",))
    code, out, err = run_cli("budget", "show", "--budget-store", store, capsys=capsys)
    assert code == 0, err
    assert [line.split(":")[0] for line in out.splitlines()] == ["dataset 'd\\nrun 9", "  run 1"]
    run = run_cli("budget", "show", "--budget-store", store, "--dataset-id", "d\nrun 9: fake", capsys=capsys)
    assert_one_line_error(run, "a dataset id must be printable text")


def test_an_output_name_too_long_for_the_file_system_is_refused_before_anything_runs(
    schema_path, silo_paths, tmp_path, capsys
):
    long = "x" * 245 + ".csv"  # fits alone, not with the temporary name it is written under
    store = tmp_path / "b.db"
    argv = synth_argv(schema=schema_path, silos=silo_paths, out=tmp_path / long, quiet=True)
    run = run_cli(*argv, "--ledger", tmp_path / "l.json", "--budget-store", store, "--dataset-id", "d",
                  "--total-epsilon", "3", capsys=capsys)  # fmt: skip
    assert_one_line_error(run, "the name is too long for the file system")
    assert not store.exists() and not (tmp_path / "l.json").exists()
    run = run_cli("partition", silo_paths[0], "--clients", "2", "--scheme", "iid", "--out", tmp_path / ("y" * 300),
                  capsys=capsys)  # fmt: skip
    assert_one_line_error(run, "the name is too long for the file system")
