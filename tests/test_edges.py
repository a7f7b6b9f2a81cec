"""What a mistake or a failure does to a release: real files, the real command line.

No input, mistake or failure may (1) make a record count more often than the ledger says,
(2) destroy or corrupt a file the user did not name as an output, (3) spend budget on a request
that could never succeed, or (4) leave the budget store or a ledger misstating what was spent.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3

import pandas as pd
import pytest

from privsyn_fed.accounting.budget_store import BudgetStore

from .conftest import assert_one_line_error, make_frame, run_cli, synth_argv


def synth(schema_path, silos, out, method="fedtda", seed=3, **options):
    """The synth command line of most tests here: fedtda unless another method is named, quiet, seeded."""
    return synth_argv(method, schema=schema_path, silos=silos, out=out, quiet=True, seed=seed, **options)


def snapshot(folder):
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


# ---- outputs that alias each other or an input (finding 1) ----------------------------------------


@pytest.mark.parametrize(
    "case",
    [
        "report=out",
        "ledger=out-by-symlink",
        "store=out",
        "out=silo",
        "out=schema",
        "out=silo-hardlink",
        "report=silo-symlink",
        "store=silo",
        "ledger=schema",
    ],
)
def test_synth_refuses_outputs_that_alias_inputs_or_each_other(case, schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "syn.csv"
    options = {"force": True}
    (tmp_path / "sub").mkdir()
    if case == "report=out":
        out = tmp_path / "syn.md"
        options["report"] = tmp_path / "sub" / ".." / "syn.md"
    elif case == "ledger=out-by-symlink":
        (tmp_path / "link.json").symlink_to(out)
        options["ledger"] = tmp_path / "link.json"
    elif case == "store=out":
        options.update(budget_store=out, dataset_id="d", total_epsilon=2)
    elif case == "out=silo":
        out = silo_paths[0]
    elif case == "out=schema":
        out = schema_path
    elif case == "out=silo-hardlink":
        out = tmp_path / "hard.csv"
        os.link(silo_paths[1], out)
    elif case == "report=silo-symlink":
        (tmp_path / "r.html").symlink_to(tmp_path / "sub" / ".." / silo_paths[0].name)
        options["report"] = tmp_path / "r.html"
    elif case == "store=silo":
        options.update(budget_store=silo_paths[1], dataset_id="d", total_epsilon=2)
    elif case == "ledger=schema":
        options["ledger"] = schema_path
    before = snapshot(tmp_path)
    proc = run_cli(*synth(schema_path, silo_paths, out, **options), capsys=capsys)
    assert_one_line_error(proc, "is the same file as")
    assert snapshot(tmp_path) == before


def test_report_path_of_the_wrong_kind_is_refused_before_anything_is_read(schema_path, silo_paths, tmp_path, capsys):
    proc = run_cli(*synth(schema_path, silo_paths, tmp_path / "o.csv", report=tmp_path / "r.txt"), capsys=capsys)
    assert_one_line_error(proc, "the report is written as .html or .md")


def test_evaluate_and_audit_outputs_never_replace_inputs(schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "syn.csv"
    assert run_cli(*synth(schema_path, silo_paths, out), capsys=capsys).returncode == 0
    before = snapshot(tmp_path)
    # evaluate --json pointed at its own --real file, with and without --force
    for force in ([], ["--force"]):
        proc = run_cli(
            "evaluate",
            "--real",
            silo_paths[0],
            "--synthetic",
            out,
            "--schema",
            schema_path,
            "--json",
            silo_paths[0],
            *force,
            capsys=capsys,
        )
        assert_one_line_error(proc, "already exists" if not force else "is the same file as")
    # audit --report pointed at the ledger it reads
    ledger = tmp_path / "syn.ledger.json"
    (tmp_path / "alias.md").symlink_to(ledger)
    code, _, err = run_cli("audit", ledger, "--report", tmp_path / "alias.md", "--force", capsys=capsys)
    assert code == 2 and "is the same file as" in err
    # an existing report is replaced only with --force
    report = tmp_path / "r.md"
    report.write_text("keep me")
    before = snapshot(tmp_path)
    proc = run_cli("audit", ledger, "--report", report, capsys=capsys)
    assert_one_line_error(proc, "already exists")
    assert snapshot(tmp_path) == before
    assert run_cli("audit", ledger, "--report", report, "--force", capsys=capsys).returncode in (0, 1)
    assert "keep me" not in report.read_text()


def test_outputs_in_a_read_only_folder_are_refused_before_any_reservation(schema_path, silo_paths, tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    store = tmp_path / "b.db"
    try:
        args = synth(schema_path, silo_paths, locked / "o.csv", budget_store=store, dataset_id="d", total_epsilon=2)
        proc = run_cli(*args, capsys=capsys)
    finally:
        locked.chmod(0o700)
    assert_one_line_error(proc, "is not writable")
    assert not store.exists()


# ---- one silo under two names (finding 2) ------------------------------------------------------


@pytest.mark.parametrize("spelling", ["absolute", "dotdot", "symlink", "hardlink", "identical-string"])
def test_one_silo_under_two_names_is_refused(spelling, schema_path, silo_paths, tmp_path, capsys):
    first = silo_paths[0]
    (tmp_path / "sub").mkdir()
    second = {
        "absolute": lambda: first.resolve(),
        "dotdot": lambda: tmp_path / "sub" / ".." / first.name,
        "symlink": lambda: (tmp_path / "l.csv").symlink_to(first) or tmp_path / "l.csv",
        "hardlink": lambda: os.link(first, tmp_path / "h.csv") or tmp_path / "h.csv",
        "identical-string": lambda: first,
    }[spelling]()
    out = tmp_path / "o.csv"
    proc = run_cli(*synth(schema_path, [first, second, silo_paths[1]], out), capsys=capsys)
    assert_one_line_error(proc, "same file")
    assert not out.exists() and not out.with_suffix(".ledger.json").exists()


def test_one_silo_twice_under_mpc_is_refused_before_any_party_starts(schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "o.csv"
    proc = run_cli(*synth(schema_path, [silo_paths[0], silo_paths[0]], out, mpc=True), capsys=capsys)
    assert_one_line_error(proc, "given twice as --silo")


def test_silos_with_identical_contents_need_the_flag_that_names_the_risk(schema_path, silo_paths, tmp_path, capsys):
    copy = tmp_path / "copy.csv"
    shutil.copyfile(silo_paths[0], copy)
    store = tmp_path / "b.db"
    out = tmp_path / "o.csv"
    args = synth(schema_path, [silo_paths[0], copy], out, budget_store=store, dataset_id="d", total_epsilon=3)
    proc = run_cli(*args, capsys=capsys)
    assert_one_line_error(proc, "identical contents")
    assert "--allow-identical-silos" in proc.stderr and not out.exists()
    run_row = BudgetStore(store).budget("d").runs[0]
    assert run_row["status"] == "rejected" and run_row["rho_spent"] == 0.0  # nothing was spent
    code, _, err = run_cli(*synth(schema_path, [silo_paths[0], copy], out, allow_identical_silos=True), capsys=capsys)
    assert code == 0, err


# ---- partition --force replaces the folder as a whole (finding 3) ---------------------------------


def test_partition_force_leaves_no_stale_client_files(tmp_path, capsys):
    data = tmp_path / "data.csv"
    make_frame(800, 0).to_csv(data, index=False)
    out = tmp_path / "clients"
    split = ["partition", data, "--scheme", "iid", "--out", out]
    assert run_cli(*split, "--clients", "5", capsys=capsys).returncode == 0
    assert run_cli(*split, "--clients", "3", "--force", capsys=capsys).returncode == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == ["client_000.csv", "client_001.csv", "client_002.csv", "manifest.json"]
    total = sum(len(pd.read_csv(out / f)) for f in files if f.endswith(".csv"))
    assert total == 800  # every record in exactly one client file
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftovers


def test_partition_force_never_replaces_a_folder_of_other_files_or_its_own_input(tmp_path, capsys):
    data = tmp_path / "data.csv"
    make_frame(50, 0).to_csv(data, index=False)
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    before = snapshot(tmp_path)
    proc = run_cli("partition", data, "--clients", "2", "--scheme", "iid", "--out", tmp_path, "--force", capsys=capsys)
    assert_one_line_error(proc, "lies inside --out")
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("keep")
    before = snapshot(tmp_path)
    proc = run_cli("partition", data, "--clients", "2", "--scheme", "iid", "--out", other, "--force", capsys=capsys)
    assert_one_line_error(proc, "which partition did not write")
    assert snapshot(tmp_path) == before
    # the table to split, as one of the client files of the folder being replaced
    clients = tmp_path / "clients"
    assert (
        run_cli("partition", data, "--clients", "2", "--scheme", "iid", "--out", clients, capsys=capsys).returncode == 0
    )
    proc = run_cli(
        "partition",
        clients / "client_000.csv",
        "--clients",
        "2",
        "--scheme",
        "iid",
        "--out",
        clients,
        "--force",
        capsys=capsys,
    )
    assert_one_line_error(proc, "lies inside --out")


# ---- a declared category equal to a missing token (finding 4) -------------------------------------


def test_declared_categories_win_over_missing_tokens(tmp_path, capsys):
    schema = {
        "columns": [
            {"name": "region", "type": "categorical", "categories": ["NA", "None", "null", "north"], "missing": True},
            {"name": "x", "type": "numeric", "lower": 0, "upper": 10, "bins": 4},
        ]
    }
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps(schema))
    regions = ["NA"] * 300 + ["None"] * 200 + ["null"] * 100 + ["north"] * 150 + [""] * 50
    silo = tmp_path / "s.csv"
    pd.DataFrame({"region": regions, "x": [1.0] * 800}).to_csv(silo, index=False)
    out = tmp_path / "o.csv"
    args = synth_argv("fedtda", schema=schema_path, silos=[silo], out=out, epsilon=50, quiet=True, rows=4000, seed=1)
    assert run_cli(*args, capsys=capsys).returncode == 0
    column = pd.read_csv(out, dtype=str, keep_default_na=False)["region"]
    shares = column.value_counts(normalize=True)
    assert shares["NA"] == pytest.approx(300 / 800, abs=0.05)
    assert shares["None"] == pytest.approx(200 / 800, abs=0.05)
    assert shares[""] == pytest.approx(50 / 800, abs=0.03)  # only the truly missing cells are blank


def test_the_empty_category_cannot_also_be_missing(tmp_path, capsys):
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(
        json.dumps({"columns": [{"name": "c", "type": "categorical", "categories": ["", "a"], "missing": True}]})
    )
    silo = tmp_path / "s.csv"
    silo.write_text("c\na\n")
    proc = run_cli(*synth(schema_path, [silo], tmp_path / "o.csv"), capsys=capsys)
    assert_one_line_error(proc, "cannot be told apart from a missing value")


# ---- requests that could never succeed are refused before the reservation (findings 7, 8) ---------


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


@pytest.mark.parametrize(
    "column, fragment",
    [
        (
            {"name": "x", "type": "numeric", "lower": 0, "upper": 1, "bins": 1_000_000_000},
            "more than the 100,000 cells",
        ),
        ({"name": "x", "type": "numeric", "lower": -1.7e308, "upper": 1.7e308}, "beyond +-2^53"),
        ({"name": "x", "type": "numeric", "lower": 0, "upper": 1e18, "integer": True}, "beyond +-2^53"),
    ],
)
def test_schemas_that_cannot_be_binned_are_refused(column, fragment, tmp_path, capsys):
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps({"columns": [column]}))
    silo = tmp_path / "s.csv"
    silo.write_text("x\n0\n")
    assert_one_line_error(run_cli(*synth(schema_path, [silo], tmp_path / "o.csv"), capsys=capsys), fragment)


def test_whole_numbers_up_to_2_to_the_53_are_binned_exactly():
    import numpy as np

    from privsyn_fed.schema import NumericColumn, bin_edges, numeric_bin

    col = NumericColumn("id", 0.0, float(2**53), bins=50_000, integer=True)
    values = np.array([0, 1, 2**52 + 12345, 2**53 - 1, 2**53, 180_143_985_094_819], dtype=float)
    bins = numeric_bin(col, values)
    m = 2**53 + 1
    assert bins.tolist() == [int(v) * 50_000 // m for v in values]  # exact integer arithmetic
    lo, hi = bin_edges(col)
    assert np.all(lo[bins] <= values) and np.all(values <= hi[bins])
    assert lo[0] == 0 and hi[-1] == 2**53 and np.all(lo[1:] == hi[:-1] + 1)  # no whole number lost


def test_a_tiny_epsilon_still_gives_a_release(schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "o.csv"
    code, _, err = run_cli(*synth(schema_path, silo_paths, out, epsilon="1e-12", rows=50), capsys=capsys)
    assert code == 0, err
    assert len(pd.read_csv(out)) == 50


def test_the_default_row_count_is_capped():
    from privsyn_fed.methods.output import DEFAULT_MAX_ROWS, default_rows

    assert default_rows(3.2e12) == DEFAULT_MAX_ROWS
    assert default_rows(float("inf")) == DEFAULT_MAX_ROWS
    assert default_rows(-5e9) == 1 and default_rows(812.4) == 812


def test_large_outputs_are_drawn_in_chunks_with_bounded_memory(schema, silo_paths):
    from privsyn_fed import Silo, synthesize
    from privsyn_fed.methods.output import CHUNK_ROWS

    silos = [Silo.from_csv(p, schema) for p in silo_paths]
    result = synthesize(silos, "fedtda", 1.0, 1e-9, rows=2 * CHUNK_ROWS + 7, seed=1)
    sizes = [len(c) for c in result.output.chunks()]
    assert max(sizes) <= CHUNK_ROWS and sum(sizes) == 2 * CHUNK_ROWS + 7
    first = next(result.output.chunks())
    assert first.equals(next(result.output.chunks()))  # the same rows every time they are read


# ---- a failed settle never records a spent run as free (finding 6) --------------------------------


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


def test_the_api_refuses_the_same_rows_under_two_silo_objects(schema):
    from privsyn_fed import Silo, synthesize
    from privsyn_fed.common import InputError

    frame = make_frame(200, 4)
    shuffled = frame.sample(frac=1.0, random_state=1)  # the same rows in another order
    silos = [Silo.from_frame(frame, schema, name="a"), Silo.from_frame(shuffled, schema, name="b")]
    with pytest.raises(InputError, match="hold the same rows"):
        synthesize(silos, "fedtda", 1.0, 1e-9)
    one_more = pd.concat([shuffled, frame.iloc[:1]])  # a neighbouring table is not refused
    assert synthesize([silos[0], Silo.from_frame(one_more, schema, name="c")], "fedtda", 1.0, 1e-9, rows=5)
    assert synthesize(silos, "fedtda", 1.0, 1e-9, rows=5, allow_identical_silos=True)
