"""The shared budget store: reserve before reading, settle after, refuse what does not fit,
serialise concurrent runs, keep crashed reservations, reject foreign files untouched."""

import hashlib
import multiprocessing as mp
import os
import sqlite3

import pytest

from privsyn_fed import BudgetExceeded, InputError
from privsyn_fed.accounting import epsilon_to_rho
from privsyn_fed.accounting.budget_store import BudgetStore
from privsyn_fed.cli import main

from .conftest import assert_one_line_error, run_cli, synth_argv


def test_reserve_settle_and_refuse(tmp_path):
    store = BudgetStore(tmp_path / "b.db")
    first = store.reserve("adult", epsilon=1.0, delta=1e-9, method="aim", total_epsilon=2.0)
    budget = store.budget("adult")
    assert budget.rho_committed == pytest.approx(epsilon_to_rho(1.0, 1e-9))  # the whole reservation
    first.settle(0.5 * first.rho, "complete")
    assert store.budget("adult").rho_committed == pytest.approx(0.5 * first.rho)
    with pytest.raises(BudgetExceeded, match="no silo was read"):
        store.reserve("adult", epsilon=2.0, delta=1e-9, method="aim")
    with pytest.raises(InputError, match="delta"):
        store.reserve("adult", epsilon=0.1, delta=1e-6, method="aim")
    with pytest.raises(InputError, match="total epsilon 2"):
        store.reserve("adult", epsilon=0.1, delta=1e-9, method="aim", total_epsilon=3.0)
    with pytest.raises(InputError, match="total_epsilon"):
        store.reserve("other", epsilon=0.1, delta=1e-9, method="aim")
    # zCDP composition: the series of admitted runs never exceeds the total
    while True:
        try:
            store.reserve("adult", epsilon=0.3, delta=1e-9, method="aim")
        except BudgetExceeded:
            break
    assert store.budget("adult").rho_committed <= epsilon_to_rho(2.0, 1e-9) * (1 + 1e-9)


def _contend(path, barrier, results):
    store = BudgetStore(path)
    barrier.wait()
    try:
        store.reserve("d", epsilon=1.0, delta=1e-9, method="aim")
        results.put("ok")
    except BudgetExceeded:
        results.put("refused")


def test_two_concurrent_runs_cannot_both_take_the_last_budget(tmp_path):
    path = tmp_path / "b.db"
    store = BudgetStore(path)
    store.reserve("d", epsilon=1.0, delta=1e-9, method="aim", total_epsilon=1.6).settle(
        epsilon_to_rho(1.0, 1e-9), "complete"
    )  # what is left fits one more epsilon-1 run at most
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_contend, args=(path, barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    outcomes = sorted(results.get(timeout=5) for _ in procs)
    assert outcomes == ["ok", "refused"]


def _reserve_then_crash(path):
    BudgetStore(path).reserve("d", epsilon=1.0, delta=1e-9, method="aim", total_epsilon=1.2)
    os._exit(3)  # dies between reserve and settle


def test_a_crashed_run_keeps_its_reservation(tmp_path):
    path = tmp_path / "b.db"
    p = mp.get_context("spawn").Process(target=_reserve_then_crash, args=(path,))
    p.start()
    p.join(60)
    assert p.exitcode == 3
    budget = BudgetStore(path).budget("d")
    assert budget.runs[0]["status"] == "reserved"
    assert budget.rho_committed == pytest.approx(epsilon_to_rho(1.0, 1e-9))
    with pytest.raises(BudgetExceeded):
        BudgetStore(path).reserve("d", epsilon=1.0, delta=1e-9, method="aim")


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_foreign_or_corrupt_files_are_rejected_untouched(tmp_path, capsys):
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not sqlite" * 100)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE patients (name TEXT)")
    for path in (corrupt, foreign):
        before = _digest(path)
        assert main(["budget", "show", "--budget-store", str(path)]) == 2
        assert "not a privsyn-fed budget store" in capsys.readouterr().err
        assert _digest(path) == before


def test_budget_show_and_unknown_dataset(tmp_path, capsys):
    path = tmp_path / "b.db"
    BudgetStore(path).reserve("adult", epsilon=0.5, delta=1e-9, method="flaim", total_epsilon=2.0)
    assert main(["budget", "show", "--budget-store", str(path)]) == 0
    out = capsys.readouterr().out
    assert "dataset adult: total epsilon 2" in out and "flaim" in out and "not settled" in out
    assert main(["budget", "show", "--budget-store", str(path), "--dataset-id", "nope"]) == 2
    assert "no dataset 'nope'" in capsys.readouterr().err
    assert main(["budget", "show", "--budget-store", str(tmp_path / "missing.db")]) == 2


def test_synth_draws_on_the_store_and_is_refused_before_reading_silos(schema_path, silo_paths, tmp_path, capsys):
    store = tmp_path / "b.db"
    common = {
        "schema": schema_path,
        "quiet": True,
        "seed": 1,
        "workload_size": 2,
        "budget_store": store,
        "dataset_id": "toy",
    }
    first = tmp_path / "a.csv"
    args = synth_argv("flaim", silos=silo_paths[:2], out=first, total_epsilon=1.2, rounds=3, **common)
    assert run_cli(*args, capsys=capsys).returncode == 0
    budget = BudgetStore(store).budget("toy")
    assert budget.runs[0]["status"] == "complete"
    assert budget.runs[0]["rho_spent"] == pytest.approx(epsilon_to_rho(1.0, 1e-9))
    # the second run would exceed the total: refused before its silo (here one with a bad row) is read
    bad = tmp_path / "bad.csv"
    bad.write_text(silo_paths[2].read_text().replace(",F,", ",X,", 1))
    second = tmp_path / "b.csv"
    code, _, err = run_cli(*synth_argv("aim", silos=[bad], out=second, **common), capsys=capsys)
    assert code == 1
    assert "refused" in err and "no silo was read" in err and "'X'" not in err
    assert not second.exists() and not second.with_suffix(".ledger.json").exists()
    # a run rejected for bad input after reserving gives its reservation back (nothing released)
    third = tmp_path / "c.csv"
    args = synth_argv("aim", silos=[bad], out=third, epsilon=0.1, **common)
    code, _, err = run_cli(*args, capsys=capsys)
    assert code == 2
    assert "'X'" in err
    runs = BudgetStore(store).budget("toy").runs
    assert [r["status"] for r in runs] == ["complete", "rejected"] and runs[1]["rho_spent"] == 0.0


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
