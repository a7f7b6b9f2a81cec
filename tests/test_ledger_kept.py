"""Ledgers are never overwritten: a ledger that a budget store references is kept (a new run writes a
numbered file beside it, with --force or without); a rejected run records no ledger; the retry of a
failed DP draft with --leave-unfound reuses the values that draft released and spends nothing."""

import hashlib
import json
import multiprocessing as mp
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privsyn_fed import common, draft_dp
from privsyn_fed.accounting.budget_store import BudgetStore
from privsyn_fed.accounting.kept_ledger import numbered
from privsyn_fed.audit import load_ledger
from privsyn_fed.draft_dp import local as draft_local
from privsyn_fed.draft_dp.replay import released_path
from privsyn_fed.schema import UNFOUND_KEY
from privsyn_fed.schema.draft import DRAFT_NOTE_KEY

from .conftest import assert_one_line_error, run_cli, synth_argv


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ledgers(store: Path) -> list:
    with sqlite3.connect(store) as db:
        return [r[0] for r in db.execute("SELECT ledger FROM runs ORDER BY id")]


def _committed(store: Path, dataset: str) -> float:
    return BudgetStore(store).budget(dataset).rho_committed


# ---- 1. a ledger the store references is never replaced ---------------------------------------
def test_numbered_names():
    assert numbered(Path("d/out.ledger.json"), 2) == Path("d/out.2.ledger.json")
    assert numbered(Path("d/l.json"), 3) == Path("d/l.3.json")
    assert numbered(Path("d/ledger"), 2) == Path("d/ledger.2")
    assert released_path(Path("d/out.ledger.json")) == Path("d/out.draft-released.json")
    assert released_path(Path("d/l.json")) == Path("d/l.draft-released.json")


def test_the_store_numbers_a_referenced_ledger_in_its_reservation(tmp_path):
    store = BudgetStore(tmp_path / "b.db")
    ledger = tmp_path / "x.ledger.json"
    first = store.reserve("d", epsilon=0.1, delta=1e-9, method="aim", total_epsilon=5, ledger=str(ledger))
    assert first.ledger_path == str(ledger.resolve()) and first.kept_run is None
    (tmp_path / "x.2.ledger.json").write_text("not ours\n")  # on disk, though no run's: skipped too
    second = store.reserve("e", epsilon=0.1, delta=1e-9, method="aim", total_epsilon=5, ledger=str(ledger))
    assert second.ledger_path == str(tmp_path / "x.3.ledger.json") and second.kept_run == first.run
    assert json.loads(Path(second.ledger_path).read_text())["details"]["budget_store"]["run"] == second.run
    assert json.loads(ledger.read_text())["details"]["budget_store"]["run"] == first.run  # kept
    assert (tmp_path / "x.2.ledger.json").read_text() == "not ours\n"
    assert _ledgers(tmp_path / "b.db") == [str(ledger.resolve()), second.ledger_path]


def _reserve_same(path, ledger, barrier, results):
    store = BudgetStore(path)
    barrier.wait()
    results.put(store.reserve("d", epsilon=0.1, delta=1e-9, method="aim", ledger=ledger).ledger_path)


def test_two_runs_started_together_never_pick_the_same_ledger(tmp_path):
    path, ledger = tmp_path / "b.db", tmp_path / "x.ledger.json"
    BudgetStore(path).reserve("d", epsilon=0.1, delta=1e-9, method="aim", total_epsilon=5, ledger=str(ledger))
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_reserve_same, args=(path, str(ledger), barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    chosen = sorted(results.get(timeout=5) for _ in procs)
    assert chosen == [str(tmp_path / "x.2.ledger.json"), str(tmp_path / "x.3.ledger.json")]


def test_a_forced_synth_keeps_the_ledger_its_store_references(schema_path, silo_paths, tmp_path, capsys):
    store, out = tmp_path / "S.db", tmp_path / "out.csv"
    common = {"schema": schema_path, "quiet": True, "budget_store": store, "dataset_id": "toy"}
    args = synth_argv("independent", silos=silo_paths[:2], out=out, epsilon=0.5, total_epsilon=5, **common)
    code, _, err = run_cli(*args, capsys=capsys)
    assert code == 0, err
    first, kept = tmp_path / "out.ledger.json", _digest(tmp_path / "out.ledger.json")
    # the same command with --force: out.csv is replaced, the ledger run 1 recorded is not
    extra = ["--force", "--report", tmp_path / "r.md", "--model-out", tmp_path / "m.npz"]
    code, stdout, err = run_cli(*args, *extra, "--quality-report", tmp_path / "q.html", capsys=capsys)
    assert code == 0, err
    second = tmp_path / "out.2.ledger.json"
    line = f"privsyn-fed: {first} is the ledger of run 1 in {store} and is kept; this run's ledger is {second}"
    assert line in err.splitlines()
    assert _digest(first) == kept and second.exists()
    assert f"wrote {second}:" in stdout and f"privsyn-fed audit {second}" in stdout
    assert load_ledger(second)["details"]["budget_store"]["run"] == 2
    assert str(second) in (tmp_path / "q.html").read_text()  # the quality report names the ledger written
    assert not list(tmp_path.glob("*.draft-released.json"))
    # without --force, once out.csv is gone: the ledgers the store references do not stop it, and are kept
    out.unlink()
    code, stdout, err = run_cli(*args, capsys=capsys)
    assert code == 0, err
    third = tmp_path / "out.3.ledger.json"
    assert f"wrote {third}:" in stdout and _digest(first) == kept
    assert _ledgers(store) == [str(p.resolve()) for p in (first, second, third)]
    for ledger in (first, second, third):
        code, audit_out, _ = run_cli("audit", ledger, capsys=capsys)
        assert code == 0 and audit_out.startswith("OK"), audit_out
    code, shown, _ = run_cli("budget", "show", "--budget-store", store, capsys=capsys)
    assert code == 0 and all(f"ledger {p.resolve()}" in shown for p in (first, second, third))


def test_without_a_store_force_still_replaces_a_ledger(schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "out.csv"
    args = synth_argv("independent", schema=schema_path, silos=silo_paths[:1], out=out, quiet=True)
    assert run_cli(*args, capsys=capsys).returncode == 0
    proc = run_cli(*args, capsys=capsys)
    assert_one_line_error(proc, "already exists", "--force")
    code, stdout, _ = run_cli(*args, "--force", capsys=capsys)
    assert code == 0 and f"wrote {tmp_path / 'out.ledger.json'}:" in stdout
    assert not (tmp_path / "out.2.ledger.json").exists()


@pytest.fixture
def dp_table(tmp_path):
    """2,000 rows whose every column --dp 50 finds."""
    rng = np.random.default_rng(7)
    n = 2000
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 91, n),
            "income": rng.uniform(0, 1e5, n).round(2),
            "sex": rng.choice(["F", "M"], n),
            "city": rng.choice(["Austin", "Boston", "Chicago"], n),
        }
    )
    path = tmp_path / "people.csv"
    df.to_csv(path, index=False)
    return path


def test_a_forced_dp_draft_keeps_the_ledger_its_store_references(dp_table, tmp_path, capsys):
    store, out = tmp_path / "S.db", tmp_path / "s.json"
    argv = ["schema", "draft", dp_table, "--out", out, "--dp", "50", "--delta", "1e-6"]
    argv += ["--budget-store", store, "--dataset-id", "people", "--total-epsilon", "200"]
    code, _, err = run_cli(*argv, capsys=capsys)
    assert code == 0, err
    first, kept = tmp_path / "s.ledger.json", _digest(tmp_path / "s.ledger.json")
    code, stdout, err = run_cli(*argv, "--force", capsys=capsys)
    assert code == 0, err
    second = tmp_path / "s.2.ledger.json"
    assert f"{first} is the ledger of run 1 in {store} and is kept; this run's ledger is {second}" in err
    assert _digest(first) == kept and f"wrote {second}:" in stdout and f"privsyn-fed audit {second}" in stdout
    note = json.loads(out.read_text())[DRAFT_NOTE_KEY]
    assert note["dp"]["ledger"] == "s.2.ledger.json" and "audit s.2.ledger.json" in note["note"]
    assert _ledgers(store) == [str(first.resolve()), str(second.resolve())]
    for ledger in (first, second):
        code, audit_out, _ = run_cli("audit", ledger, capsys=capsys)
        assert code == 0 and audit_out.startswith("OK"), audit_out
    code, shown, _ = run_cli("budget", "show", "--budget-store", store, capsys=capsys)
    assert f"ledger {first.resolve()}" in shown and f"ledger {second.resolve()}" in shown


# ---- 2. a rejected run records no ledger --------------------------------------------------------
def test_a_rejected_run_records_no_ledger(schema_path, silo_paths, tmp_path, capsys):
    store = tmp_path / "S.db"
    bad = tmp_path / "bad.csv"
    bad.write_text(silo_paths[0].read_text().replace(",F,", ",X,", 1))  # refused once read: after the reservation
    args = synth_argv("independent", schema=schema_path, silos=[bad], out=tmp_path / "o.csv", quiet=True)
    proc = run_cli(*args, "--budget-store", store, "--dataset-id", "d", "--total-epsilon", "3", capsys=capsys)
    assert_one_line_error(proc, "'X'")
    assert not (tmp_path / "o.ledger.json").exists()
    (run,) = BudgetStore(store).budget("d").runs
    assert run["status"] == "rejected" and run["ledger"] is None
    assert _ledgers(store) == [None]
    code, shown, _ = run_cli("budget", "show", "--budget-store", store, capsys=capsys)
    assert code == 0 and "rejected" in shown and shown.rstrip().endswith("no ledger")
    proc = run_cli("budget", "settle", "--budget-store", store, "--run", "1", capsys=capsys)
    assert_one_line_error(proc, "run 1", "already settled (rejected)", "has no ledger")


# ---- 3. the retry of a failed draft spends nothing ----------------------------------------------
def _no_rows(*args, **kwargs):
    raise AssertionError("a row was read")


def _failed_draft(coarse_table, tmp_path, capsys, *extra):
    out = tmp_path / "s.json"
    argv = ["schema", "draft", coarse_table, "--out", out, "--dp", "3", "--delta", "1e-6", *extra]
    proc = run_cli(*argv, capsys=capsys)
    assert_one_line_error(proc, "--dp 3 did not find", "--leave-unfound", "it spends nothing")
    assert not out.exists()
    return argv


def test_the_retry_of_a_failed_draft_reuses_its_released_values(coarse_table, tmp_path, capsys, monkeypatch):
    store = tmp_path / "S.db"
    argv = _failed_draft(
        coarse_table, tmp_path, capsys, "--budget-store", store, "--dataset-id", "t", "--total-epsilon", "20"
    )
    ledger, values = tmp_path / "s.ledger.json", tmp_path / "s.draft-released.json"
    failed = load_ledger(ledger)
    assert failed["status"] == "failed" and failed["details"]["draft"]["released_sha256"] == _digest(values)
    before, rho, spent = _digest(ledger), _committed(store, "t"), failed["rho_spent"]
    # the retry: no --force, no row read (only the public header), nothing spent
    with monkeypatch.context() as m:
        for module in (common, draft_local):
            m.setattr(module, "read_chunks" if module is common else "profile_chunks", _no_rows)
        code, stdout, err = run_cli(*argv, "--leave-unfound", capsys=capsys)
    assert code == 0, err
    assert "spent nothing" in stdout and f"failed draft that {ledger} records" in stdout
    assert "2 of them placeholders to fill in" in stdout
    assert _digest(ledger) == before and _committed(store, "t") == rho and len(BudgetStore(store).budget("t").runs) == 1
    document = json.loads((tmp_path / "s.json").read_text())
    note = document[DRAFT_NOTE_KEY]
    assert note["dp"]["ledger"] == "s.ledger.json" and note["dp"]["epsilon"] == pytest.approx(failed["epsilon"])
    assert note["unfound"] == ["k", "flag"] and "nothing more was spent" in note["dp"]["reused"]
    columns = {c["name"]: c for c in document["columns"]}
    assert UNFOUND_KEY in columns["k"] and UNFOUND_KEY in columns["flag"] and UNFOUND_KEY not in columns["n"]
    # all but the atoms' share of 'k', whose bounds were not found (so no atoms were sought)
    assert spent == pytest.approx(failed["rho_budget"] * (1 - draft_dp.ATOM_RHO_SHARE * 0.9 / 4))
    # a retry with another plan is a new spend: the store keeps the failed ledger and numbers the new one
    (tmp_path / "s.json").unlink()
    bigger = [a if a != "3" else "4" for a in argv]
    code, stdout, err = run_cli(*bigger, "--leave-unfound", capsys=capsys)
    assert code == 0, err
    assert f"{ledger} is the ledger of run 1 in {store} and is kept" in err
    assert f"wrote {tmp_path / 's.2.ledger.json'}:" in stdout and _digest(ledger) == before
    assert _committed(store, "t") > rho and len(BudgetStore(store).budget("t").runs) == 2


def test_without_a_store_another_plan_needs_force(coarse_table, tmp_path, capsys):
    argv = _failed_draft(coarse_table, tmp_path, capsys)
    proc = run_cli(*[a if a != "3" else "4" for a in argv], "--leave-unfound", capsys=capsys)
    assert_one_line_error(proc, "s.ledger.json: already exists", "--force")
    code, stdout, err = run_cli(*argv, "--leave-unfound", capsys=capsys)  # the same plan: reused, no --force
    assert code == 0 and "spent nothing" in stdout, err


def test_a_tampered_statistics_file_is_refused(coarse_table, tmp_path, capsys):
    store = tmp_path / "S.db"
    argv = _failed_draft(
        coarse_table, tmp_path, capsys, "--budget-store", store, "--dataset-id", "t", "--total-epsilon", "20"
    )
    values = tmp_path / "s.draft-released.json"
    document = json.loads(values.read_text())
    document["values"]["flag"]["passed"] += 1
    values.write_text(json.dumps(document))
    before, rho = _digest(tmp_path / "s.ledger.json"), _committed(store, "t")
    proc = run_cli(*argv, "--leave-unfound", capsys=capsys)
    assert_one_line_error(proc, str(values), "SHA-256 differs", "nothing is reused")
    assert not (tmp_path / "s.json").exists() and _digest(tmp_path / "s.ledger.json") == before
    assert _committed(store, "t") == rho and len(BudgetStore(store).budget("t").runs) == 1
    values.unlink()
    proc = run_cli(*argv, "--leave-unfound", capsys=capsys)
    assert_one_line_error(proc, str(values), "cannot read the values")


def test_the_api_writes_beside_a_ledger_the_store_references(tmp_path):
    """``run_release(ledger_path=p, overwrite=True)`` with a reservation the store numbered writes the
    numbered file and keeps ``p``: the earlier run's record."""
    import privsyn_fed as pf
    from privsyn_fed.accounting.budget_store import reserved
    from privsyn_fed.release import ReleaseRequest, run_release

    from .conftest import SCHEMA, make_frame

    schema = pf.Schema.from_dict(json.loads(json.dumps(SCHEMA)))
    frames = [make_frame(300, seed=1), make_frame(200, seed=2)]
    ledger = tmp_path / "r.ledger.json"
    store = tmp_path / "b.db"
    for _ in range(2):
        with reserved(
            store, "d", epsilon=0.5, delta=1e-9, method="independent", total_epsilon=3, ledger=str(ledger)
        ) as reservation:
            before = ledger.read_bytes() if reservation.kept_run is not None else None
            request = ReleaseRequest.of("independent", 0.5, 1e-9, schema, ["a", "b"])
            result = run_release(request, frames, ledger_path=ledger, overwrite=True, reservation=reservation)
    assert before is not None and ledger.read_bytes() == before  # the first run's ledger, as written
    second = numbered(ledger.resolve(), 2)
    assert load_ledger(second)["details"]["budget_store"]["run"] == 2 == result.ledger["details"]["budget_store"]["run"]
    assert _ledgers(store) == [str(ledger.resolve()), str(second)]


def test_the_retry_reuses_a_draft_whose_row_count_chose_the_coarse_grid(coarse_table, tmp_path, capsys):
    """At --dp 1.5 the fine bounds grid's threshold (40 numbers) passes 5% of the 600 noisy rows (it
    would take 800), so the draft counts on the coarse grid and its ledger records that grid. The
    retry, planned before any row is counted (on the fine grid), still finds the failed draft and
    spends nothing."""
    out = tmp_path / "s.json"
    argv = ["schema", "draft", coarse_table, "--out", out, "--dp", "1.5", "--delta", "1e-6"]
    assert_one_line_error(run_cli(*argv, capsys=capsys), "--dp 1.5 did not find", "it spends nothing")
    ledger = tmp_path / "s.ledger.json"
    fine = draft_dp.plan_draft(1.5, 1e-6, ["n", "k", "flag", "ok"], 50, 32)
    assert load_ledger(ledger)["details"]["draft"]["bounds_grid"] == fine.with_rows(600).record()["bounds_grid"]
    assert fine.with_rows(600).record()["bounds_grid"] != fine.record()["bounds_grid"]
    before = _digest(ledger)
    code, stdout, err = run_cli(*argv, "--leave-unfound", capsys=capsys)
    assert code == 0 and "spent nothing" in stdout, err
    assert _digest(ledger) == before and out.exists()
