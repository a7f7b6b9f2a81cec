"""Output paths a release refuses before anything is read or reserved: outputs that alias an
input or each other, a report path of the wrong kind, a read-only folder, a name too long for the
file system; ``evaluate`` and ``audit`` never replace an input."""

from __future__ import annotations

import os

import pytest

from .conftest import assert_one_line_error, run_cli, snapshot, synth, synth_argv


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
