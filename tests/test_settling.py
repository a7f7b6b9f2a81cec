"""How a run's reservation settles when it fails: a failed settle never records a spent run as
free, a run rejected or failing before any charge gives its reservation back and leaves no ledger,
and a run killed between its reservation and its first charge settles at zero."""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import subprocess
import time

import pytest

from privsyn_fed.accounting.budget_store import BudgetStore

from .conftest import CLI, assert_one_line_error, make_frame, run_cli, synth, synth_argv


def _store_run(store):
    return BudgetStore(store).budget("d").runs[-1]


@pytest.mark.parametrize("failure", ["ledger-final-write", "store-settle-locked", "csv-disk-full"])
def test_failures_at_commit_keep_ledger_and_store_in_one_state(
    failure, schema_path, silo_paths, tmp_path, capsys, monkeypatch
):
    from privsyn_fed import api
    from privsyn_fed.accounting import budget_store
    from privsyn_fed.accounting import ledger as ledger_mod

    store = tmp_path / "b.db"
    out = tmp_path / "o.csv"
    if failure == "ledger-final-write":
        original = ledger_mod.Accountant.finish

        def finish(self, status="complete", **details):
            if status == "complete":
                raise OSError(errno.ENOSPC, "No space left on device", str(self.ledger_path))
            return original(self, status, **details)

        monkeypatch.setattr(ledger_mod.Accountant, "finish", finish)
    elif failure == "store-settle-locked":

        def settle(self, run, rho_spent, status):
            raise sqlite3.OperationalError("database is locked")

        monkeypatch.setattr(budget_store.BudgetStore, "settle", settle)
    else:

        def write_csv(self, fh):
            fh.write("age,income\n")
            raise OSError(errno.ENOSPC, "No space left on device", str(out))

        monkeypatch.setattr(api.SynthResult, "write_csv", write_csv)
    proc = run_cli(
        *synth(schema_path, silo_paths, out, budget_store=store, dataset_id="d", total_epsilon=3), capsys=capsys
    )
    assert_one_line_error(proc, status=1)
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".o.csv")]
    led = json.loads(out.with_suffix(".ledger.json").read_text())
    assert led["status"] in ("failed", "running") and led["rho_spent"] > 0
    row = _store_run(store)
    if failure == "store-settle-locked":
        # the store could not be written at all: the run stays counted at its whole reservation
        assert row["status"] == "reserved" and row["rho_spent"] is None
        assert "budget settle" in proc.stderr
    else:
        assert row["status"] == "failed" and row["rho_spent"] == pytest.approx(led["rho_spent"])


def test_a_run_rejected_before_any_mechanism_gives_its_reservation_back(schema_path, silo_paths, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text(silo_paths[0].read_text().replace(",south,", ",mars,", 1))
    store = tmp_path / "b.db"
    out = tmp_path / "o.csv"
    args = synth(schema_path, [bad, silo_paths[1]], out, budget_store=store, dataset_id="d", total_epsilon=3)
    assert_one_line_error(run_cli(*args, capsys=capsys), "'mars'")
    row = _store_run(store)
    assert row["status"] == "rejected" and row["rho_spent"] == 0.0
    assert not out.with_suffix(".ledger.json").exists()


def test_a_failure_before_any_charge_leaves_no_ledger_and_no_spend(
    schema_path, silo_paths, tmp_path, capsys, monkeypatch
):
    import dataclasses

    from privsyn_fed.methods import METHODS

    def broken(*args, **kwargs):
        raise RuntimeError("the method broke before measuring anything")

    store = tmp_path / "b.db"
    out = tmp_path / "o.csv"
    args = synth(schema_path, silo_paths, out, budget_store=store, dataset_id="d", total_epsilon=3)
    with monkeypatch.context() as m:
        m.setitem(METHODS, "fedtda", dataclasses.replace(METHODS["fedtda"], runner=broken))
        code, _, err = run_cli(*args, capsys=capsys)
    assert code == 1 and "broke before measuring" in err
    assert not out.exists() and not out.with_suffix(".ledger.json").exists()
    assert _store_run(store)["status"] == "rejected" and _store_run(store)["rho_spent"] == 0.0
    assert run_cli(*args, capsys=capsys).returncode == 0  # the same command, corrected, runs without --force


def _runs(store):
    return BudgetStore(store, create=False).budget("d").runs


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
