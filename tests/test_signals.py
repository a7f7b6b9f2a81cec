"""SIGINT and SIGTERM sent to a real ``privsyn-fed synth`` process at several points of a run.

Each run must stop without writing its CSV, leave its ledger ``failed`` with what it spent, and
leave the budget store settled at exactly that spend. A run killed outright (SIGKILL) cannot do
that; its reservation stays counted in full until ``budget settle`` closes it at its ledger's spend.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from privsyn_fed.accounting import Accountant, entry_rho
from privsyn_fed.accounting.budget_store import BudgetStore

from .conftest import CLI, run_cli, synth_argv


def start_synth(schema_path, silo_paths, tmp_path, method, *extra):
    out = tmp_path / "o.csv"
    err = open(tmp_path / "stderr.txt", "w")
    args = synth_argv(
        method,
        schema=schema_path,
        silos=silo_paths,
        out=out,
        budget_store=tmp_path / "b.db",
        dataset_id="d",
        total_epsilon=5,
    )
    proc = subprocess.Popen([*CLI, *args, *extra], stdout=subprocess.DEVNULL, stderr=err)
    return proc, out, tmp_path / "stderr.txt"


def wait_for(proc, log, text, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text():
            return
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {text!r}: {log.read_text()[-2000:]}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"no {text!r} within {timeout} s")


def ledger_spend(path):
    led = json.loads(path.read_text())
    return led, sum(entry_rho(e) for e in led["entries"])


@pytest.mark.parametrize(
    "sig, method, marker, extra",
    [
        (signal.SIGINT, "aim", "fitting the model", ["--rounds", "80"]),  # inside the first model fit
        (signal.SIGTERM, "aim", "round 2:", ["--rounds", "80"]),  # between rounds
        (signal.SIGTERM, "distaim", "round 1/", ["--rounds", "6"]),  # federated, mid-run
        (signal.SIGINT, "fedtda", "writing 3,000,000 rows", ["--rows", "3000000"]),  # while the CSV is written
        (signal.SIGINT, "distaim", "round 1/", ["--mpc", "--rounds", "4"]),  # parties as processes
    ],
)
def test_a_signal_stops_the_run_with_ledger_and_store_at_its_spend(
    sig, method, marker, extra, schema_path, silo_paths, tmp_path
):
    proc, out, log = start_synth(schema_path, silo_paths, tmp_path, method, *extra)
    wait_for(proc, log, marker)
    proc.send_signal(sig)
    code = proc.wait(timeout=120)
    stderr = log.read_text()
    assert code == 128 + sig, stderr
    assert f"interrupted by {signal.Signals(sig).name}" in stderr and "Traceback" not in stderr
    assert not out.exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".o.csv")]  # no partial file
    led, spent = ledger_spend(out.with_suffix(".ledger.json"))
    assert led["status"] == "failed" and spent > 0 and led["rho_spent"] == pytest.approx(spent)
    run = BudgetStore(tmp_path / "b.db").budget("d").runs[0]
    assert run["status"] == "failed" and run["rho_spent"] == pytest.approx(spent)
    audit = run_cli("audit", out.with_suffix(".ledger.json"))
    assert audit.returncode == 1 and "did not complete" in audit.stdout


def test_a_killed_run_keeps_its_reservation_until_the_custodian_settles_it(schema_path, silo_paths, tmp_path):
    proc, out, log = start_synth(schema_path, silo_paths, tmp_path, "aim", "--rounds", "80")
    wait_for(proc, log, "round 1:")
    proc.send_signal(signal.SIGSTOP)  # held mid-run (still alive) however fast its rounds are
    store = str(tmp_path / "b.db")
    settle = ["budget", "settle", "--budget-store", store, "--run", "1"]
    alive = run_cli(*settle, cwd=tmp_path)
    assert alive.returncode == 2 and "still running" in alive.stderr  # never under a live run
    proc.kill()
    proc.wait()
    run = BudgetStore(store).budget("d").runs[0]
    assert run["status"] == "reserved" and run["rho_spent"] is None  # counted in full meanwhile
    led, spent = ledger_spend(out.with_suffix(".ledger.json"))
    assert led["status"] == "running" and 0 < spent < run["rho_reserved"]
    done = run_cli(*settle, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = BudgetStore(store).budget("d").runs[0]
    assert run["status"] == "abandoned" and run["rho_spent"] == pytest.approx(spent)
    again = run_cli(*settle, cwd=tmp_path)
    assert again.returncode == 2 and "already settled" in again.stderr


def test_settle_refuses_a_ledger_of_another_run(schema_path, silo_paths, tmp_path, capsys):
    store = BudgetStore(tmp_path / "b.db")
    store.reserve("d", epsilon=1, delta=1e-9, method="aim", total_epsilon=5, ledger=str(tmp_path / "x.json"))
    store.db.execute("UPDATE runs SET pid = NULL")  # its process is gone
    other = tmp_path / "other.ledger.json"
    acc = Accountant(1.0, 1e-9, "aim", ledger_path=other, details={"budget_store": {"dataset_id": "d", "run": 9}})
    acc.gaussian("marginal(age)", 1.0, 50.0, "curator")
    acc.finish("failed")
    code, _, err = run_cli(
        "budget", "settle", "--budget-store", tmp_path / "b.db", "--run", "1", "--ledger", other, capsys=capsys
    )
    assert code == 2 and "is not run 1's of" in err and "written for the store None" in err
    assert BudgetStore(tmp_path / "b.db").budget("d").runs[0]["status"] == "reserved"
