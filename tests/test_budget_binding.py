"""A budget store's spends are bound to their runs and to the data: ``budget settle`` takes only
the run's own ledger (its store, dataset, run and token) and never counts below it; the store
recognises silos it charged, and refuses them under another dataset id unless told they differ."""

from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

from privsyn_fed.accounting import Accountant
from privsyn_fed.accounting.budget_store import BudgetStore
from privsyn_fed.accounting.fingerprints import digests, same_silo
from privsyn_fed.common import InputError

from .conftest import assert_one_line_error, make_frame, run_cli, synth_argv

# ---- settling binds to its run ------------------------------------------------------------------


def _stale_run(tmp_path, name, spend_sigma=None, ledger_name=None):
    """Run 1 of dataset 'd' in store ``name``, its process gone; its ledger (charged once at
    ``spend_sigma`` when given) as the run's accountant writes it."""
    store = BudgetStore(tmp_path / name)
    ledger = tmp_path / (ledger_name or f"{name}.ledger.json")
    reservation = store.reserve("d", epsilon=1, delta=1e-9, method="aim", total_epsilon=5, ledger=str(ledger))
    store.db.execute("UPDATE runs SET pid = NULL")  # its process is gone
    acc = Accountant(1.0, 1e-9, "aim", ledger_path=ledger, details={"budget_store": reservation.tag()})
    reservation.bind(acc)
    if spend_sigma is not None:
        acc.gaussian("marginal(age)", 1.0, spend_sigma, "curator")
    acc.note()
    return store, reservation, ledger, acc


def _settle(store_path, ledger, capsys):
    return run_cli("budget", "settle", "--budget-store", store_path, "--run", "1", "--ledger", ledger, capsys=capsys)


def test_the_opening_ledger_carries_the_runs_token(tmp_path):
    store, reservation, ledger, _ = _stale_run(tmp_path, "a.db")
    tag = json.loads(ledger.read_text())["details"]["budget_store"]
    assert tag["token"] == reservation.token == store.run(1)["token"] and len(tag["token"]) == 32
    assert tag["path"] == str(store.path) and tag["dataset_id"] == "d" and tag["run"] == 1


def test_settle_refuses_a_ledger_written_for_another_store(tmp_path, capsys):
    """Two stores, each with run 1 of dataset 'd': B's ledger cannot settle A's run (it used to,
    at B's small spend while A's own ledger recorded more)."""
    a, _, a_ledger, _ = _stale_run(tmp_path, "a.db", spend_sigma=10.0)
    _, _, b_ledger, _ = _stale_run(tmp_path, "b.db", spend_sigma=60.0)
    code, _, err = _settle(tmp_path / "a.db", b_ledger, capsys)
    assert code == 2 and err.count("\n") == 1
    assert "is not run 1's of" in err and "written for the store" in err and "b.db" in err
    assert BudgetStore(tmp_path / "a.db").run(1)["status"] == "reserved"  # counted in full meanwhile
    code, _, err = _settle(tmp_path / "a.db", a_ledger, capsys)
    assert code == 0, err
    own = json.loads(a_ledger.read_text())["rho_spent"]
    assert BudgetStore(tmp_path / "a.db").run(1)["rho_spent"] == pytest.approx(own)


@pytest.mark.parametrize(
    "field,value,fragment",
    [
        ("token", "0" * 32, "its token is not the one the store drew"),
        ("run", 2, "its run is 2, not 1"),
        ("dataset_id", "other", "its dataset_id is 'other', not 'd'"),
    ],
)
def test_settle_names_the_field_that_differs(field, value, fragment, tmp_path, capsys):
    _, _, ledger, _ = _stale_run(tmp_path, "a.db", spend_sigma=10.0)
    forged = json.loads(ledger.read_text())
    forged["details"]["budget_store"][field] = value
    path = tmp_path / "forged.ledger.json"
    path.write_text(json.dumps(forged))
    code, _, err = _settle(tmp_path / "a.db", path, capsys)
    assert code == 2 and fragment in err and err.count("\n") == 1
    assert BudgetStore(tmp_path / "a.db").run(1)["status"] == "reserved"


def test_settle_never_counts_below_the_runs_own_ledger(tmp_path, capsys):
    """A copy of the run's ledger taken before its last charge settles at what the run's own
    ledger (the file the store recorded) says, not at the copy's smaller spend."""
    _, _, ledger, acc = _stale_run(tmp_path, "a.db", spend_sigma=20.0)
    early = tmp_path / "early-copy.ledger.json"
    early.write_text(ledger.read_text())
    acc.gaussian("marginal(income)", 1.0, 12.0, "curator")
    acc.note()
    later = json.loads(ledger.read_text())["rho_spent"]
    assert later > json.loads(early.read_text())["rho_spent"]
    code, _, err = _settle(tmp_path / "a.db", early, capsys)
    assert code == 0, err
    assert BudgetStore(tmp_path / "a.db").run(1)["rho_spent"] == pytest.approx(later)


def test_a_release_ledger_names_its_runs_token(tmp_path, schema_path, silo_paths):
    proc, out = _release(tmp_path, schema_path, silo_paths, "d", "out.csv")
    assert proc.returncode == 0, proc.stderr
    tag = json.loads(out.with_suffix(".ledger.json").read_text())["details"]["budget_store"]
    assert tag["token"] == BudgetStore(tmp_path / "s.db").run(1)["token"]


# ---- a budget tied to the data ------------------------------------------------------------------


def _release(tmp_path, schema_path, silos, dataset, out_name, **extra):
    out = tmp_path / out_name
    argv = synth_argv(
        "independent",
        schema=schema_path,
        silos=silos,
        out=out,
        budget_store=tmp_path / "s.db",
        dataset_id=dataset,
        total_epsilon=3,
        **extra,
    )
    return run_cli(*argv), out


def test_the_same_silos_under_a_new_dataset_id_are_refused(tmp_path, schema_path, silo_paths):
    first, _ = _release(tmp_path, schema_path, silo_paths, "clinics", "a.csv")
    assert first.returncode == 0, first.stderr
    again, out = _release(tmp_path, schema_path, silo_paths, "clinics-v2", "b.csv")
    assert_one_line_error(again, "already charged these rows under dataset 'clinics'", "--new-dataset")
    assert not out.exists() and not out.with_suffix(".ledger.json").exists()
    runs = BudgetStore(tmp_path / "s.db").budget("clinics-v2").runs
    assert [(r["status"], r["rho_spent"], r["ledger"]) for r in runs] == [("rejected", 0.0, None)]
    said, out = _release(tmp_path, schema_path, silo_paths, "clinics-v2", "c.csv", new_dataset=True)
    assert said.returncode == 0, said.stderr
    assert "--new-dataset said the data differ" in said.stderr
    shown = run_cli("budget", "show", "--budget-store", tmp_path / "s.db", "--dataset-id", "clinics-v2").stdout
    assert "said new (--new-dataset) though its silos matched 'clinics'" in shown


def test_a_copy_is_recognised_whatever_its_row_order_format_or_extra_columns(tmp_path, schema_path, silo_paths):
    first, _ = _release(tmp_path, schema_path, silo_paths[:1], "clinics", "a.csv")
    assert first.returncode == 0, first.stderr
    frame = pd.read_csv(silo_paths[0]).sample(frac=1.0, random_state=3)
    frame["note"] = "x"  # a column the schema does not list
    copy = tmp_path / "copy.parquet"
    frame.to_parquet(copy, index=False)
    again, _ = _release(tmp_path, schema_path, [copy], "renamed", "b.csv")
    assert again.returncode == 2 and "under dataset 'clinics'" in again.stderr.splitlines()[-1]  # after a note
    other = tmp_path / "other.csv"
    make_frame(400, seed=77).to_csv(other, index=False)  # other people's rows: a dataset of its own
    fresh, _ = _release(tmp_path, schema_path, [other], "renamed", "c.csv")
    assert fresh.returncode == 0, fresh.stderr


def test_the_store_keeps_keyed_digests_only(tmp_path, schema_path, silo_paths):
    first, _ = _release(tmp_path, schema_path, silo_paths, "clinics", "a.csv")
    assert first.returncode == 0, first.stderr
    db = sqlite3.connect(tmp_path / "s.db")
    rows = [json.loads(t) for (t,) in db.execute("SELECT digests FROM silo_digests")]
    assert len(rows) == 3 and all(set(r) == {"rows", "columns"} for r in rows)
    values = [v for r in rows for v in (r["rows"], *r["columns"].values())]
    # no row count or sum in the clear: every recorded value is a 128-bit keyed digest in hex
    assert all(isinstance(v, str) and len(v) == 32 and int(v, 16) >= 0 for v in values)
    key = db.execute("SELECT value FROM meta WHERE key='content_key'").fetchone()[0]
    assert len(bytes.fromhex(key)) == 32
    sums = {"age": 5, "sex": 9}
    assert digests(b"k" * 32, 10, sums) != digests(b"j" * 32, 10, sums)  # unlinkable across stores


def test_matching_needs_the_same_rows_and_every_shared_column():
    key = b"k" * 32
    a = digests(key, 10, {"age": 1, "sex": 2, "label": 3})
    assert same_silo(a, digests(key, 10, {"age": 1, "sex": 2}))  # a column dropped from the schema
    assert not same_silo(a, digests(key, 10, {"age": 1, "sex": 5, "label": 3}))
    assert not same_silo(a, digests(key, 11, {"age": 1, "sex": 2, "label": 3}))
    assert not same_silo(a, digests(key, 10, {"age": 1, "region": 4}))  # one shared column is not enough


def test_new_dataset_needs_a_store(tmp_path, schema_path, silo_paths):
    argv = synth_argv("independent", schema=schema_path, silos=silo_paths, out=tmp_path / "o.csv", new_dataset=True)
    assert_one_line_error(run_cli(*argv), "--new-dataset", "--budget-store")


def test_a_refused_silo_leaves_the_store_as_it_was(tmp_path, schema_path, silo_paths):
    first, _ = _release(tmp_path, schema_path, silo_paths, "clinics", "a.csv")
    assert first.returncode == 0, first.stderr
    db = sqlite3.connect(tmp_path / "s.db")
    before = db.execute("SELECT COUNT(*) FROM silo_digests").fetchone()[0]
    again, _ = _release(tmp_path, schema_path, silo_paths, "other", "b.csv")
    assert again.returncode == 2
    assert db.execute("SELECT COUNT(*) FROM silo_digests").fetchone()[0] == before
    with pytest.raises(InputError, match="no dataset 'nope'"):
        BudgetStore(tmp_path / "s.db").budget("nope")
