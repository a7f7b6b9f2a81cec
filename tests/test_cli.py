import json

import pytest

from privsyn_fed.cli import main

from .conftest import (
    assert_cli_audit_objects_only_to_the_seed,
    assert_one_line_error,
    make_frame,
    run_cli,
    synth_argv,
)


def assert_input_error(code, err, fragment, out_path):
    assert code == 2, err
    assert_one_line_error(err, fragment)
    assert not out_path.exists()
    assert not out_path.with_suffix(".ledger.json").exists()


def edit_silo(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    "case, fragment",
    [
        ("missing_column", "missing column 'label'"),
        ("unknown_category", "category 'X' is not in the schema"),
        ("non_numeric", "'abc' is not a number"),
        ("missing_value", "missing value"),
        ("empty_silo", "the table has no rows"),
    ],
)
def test_bad_silo_input_exits_2_naming_the_problem(case, fragment, schema_path, silo_paths, tmp_path, capsys):
    bad = silo_paths[1]
    lines = bad.read_text().splitlines()
    header = lines[0].split(",")
    if case == "missing_column":
        bad.write_text("\n".join(",".join(l.split(",")[:-1]) for l in lines) + "\n")
    elif case in ("unknown_category", "non_numeric", "missing_value"):
        row = lines[5].split(",")
        col = {"unknown_category": "sex", "non_numeric": "income", "missing_value": "label"}[case]
        row[header.index(col)] = {"unknown_category": "X", "non_numeric": "abc", "missing_value": ""}[case]
        lines[5] = ",".join(row)
        bad.write_text("\n".join(lines) + "\n")
    else:
        bad.write_text(lines[0] + "\n")
    out = tmp_path / "syn.csv"
    code, _, err = run_cli(*synth_argv(schema=schema_path, silos=silo_paths, out=out, quiet=True), capsys=capsys)
    assert_input_error(code, err, fragment, out)
    assert str(bad) in err
    if case in ("unknown_category", "non_numeric", "missing_value"):
        assert "row 6" in err


@pytest.mark.parametrize(
    "schema_text, fragment",
    [
        ("{bad json", "not valid JSON"),
        ('{"columns": [{"name": "age", "type": "numeric"}]}', 'needs a public "lower" bound'),
    ],
)
def test_bad_schema_exits_2(schema_text, fragment, schema_path, silo_paths, tmp_path, capsys):
    schema_path.write_text(schema_text)
    out = tmp_path / "syn.csv"
    code, _, err = run_cli(*synth_argv(schema=schema_path, silos=silo_paths, out=out, quiet=True), capsys=capsys)
    assert_input_error(code, err, fragment, out)


@pytest.mark.parametrize(
    "eps, delta, fragment",
    [
        ("0", "1e-9", "epsilon must be a positive"),
        ("-1", "1e-9", "epsilon must be a positive"),
        ("1", "0", "delta must lie from 1e-100 up to (not including) 0.1"),
        ("1", "1", "delta must lie from 1e-100 up to (not including) 0.1"),
        ("1", "1.5", "delta must lie from 1e-100 up to (not including) 0.1"),
        ("1", "5e-324", "delta must lie from 1e-100 up to (not including) 0.1"),
    ],
)
def test_bad_budget_exits_2(eps, delta, fragment, schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "syn.csv"
    args = synth_argv(schema=schema_path, silos=silo_paths, out=out, epsilon=eps, delta=delta, quiet=True)
    code, _, err = run_cli(*args, capsys=capsys)
    assert_input_error(code, err, fragment, out)


def test_output_folder_must_exist(schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "no-such-folder" / "syn.csv"
    code, _, err = run_cli(*synth_argv(schema=schema_path, silos=silo_paths, out=out, quiet=True), capsys=capsys)
    assert_input_error(code, err, "does not exist", out)


def test_existing_output_is_not_replaced_without_force(schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "syn.csv"
    out.write_text("earlier release\n")
    code, _, err = run_cli(*synth_argv(schema=schema_path, silos=silo_paths, out=out, quiet=True), capsys=capsys)
    assert code == 2 and "already exists" in err
    assert out.read_text() == "earlier release\n"


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["synth", "--method", "nope"])
    assert exc.value.code == 2


def test_end_to_end_synth_then_audit(schema_path, silo_paths, tmp_path):
    """The installed command, as a user runs it: a CSV and a ledger that audit accepts."""
    out = tmp_path / "syn.csv"
    proc = run_cli(
        *synth_argv(
            schema=schema_path, silos=silo_paths, out=out, quiet=True, seed=3, rounds=10, pgm_iters=200, rows=250
        )
    )
    assert proc.returncode == 0, proc.stderr
    ledger = out.with_suffix(".ledger.json")
    header = out.read_text().splitlines()[0]
    assert header == "age,income,sex,region,label"
    assert len(out.read_text().splitlines()) == 251
    led = json.loads(ledger.read_text())
    assert led["method"] == "aim" and led["seeded"] is True
    audit = run_cli("audit", ledger, timeout=120)
    assert_cli_audit_objects_only_to_the_seed(audit.stdout, audit.returncode)
    led["entries"][0]["sigma"] *= 2
    ledger.write_text(json.dumps(led))
    audit = run_cli("audit", ledger, timeout=120)
    assert audit.returncode == 1 and "PROBLEM" in audit.stdout


def test_clipped_values_are_reported_to_the_operator_not_an_error(schema_path, silo_paths, tmp_path, capsys):
    edit_silo(silo_paths[0], "\n", "\n200,50,F,north,no\n")  # age 200 > upper bound 90
    out = tmp_path / "syn.csv"
    code, _, err = run_cli(
        *synth_argv(schema=schema_path, silos=silo_paths, out=out, quiet=True, seed=1, rounds=10, pgm_iters=100),
        capsys=capsys,
    )
    assert code == 0, err
    assert "1 value(s) of 'age'" in err and "clipped" in err
    assert out.exists()


def test_internal_failure_is_one_line_exit_1_and_leaves_a_failed_ledger(
    schema_path, silo_paths, tmp_path, capsys, monkeypatch
):
    from privsyn_fed.methods import pgm

    def broken(*args, **kwargs):
        raise RuntimeError("model fit diverged")

    monkeypatch.setattr(pgm.ModelFitter, "fit", broken)
    monkeypatch.delenv("PRIVSYN_FED_DEBUG", raising=False)
    out = tmp_path / "syn.csv"
    proc = run_cli(
        *synth_argv(schema=schema_path, silos=silo_paths, out=out, quiet=True, seed=1, rounds=10), capsys=capsys
    )
    assert_one_line_error(proc, "internal error: RuntimeError: model fit diverged", status=1)
    assert not out.exists()
    led = json.loads(out.with_suffix(".ledger.json").read_text())
    assert led["status"] == "failed"
    assert len(led["entries"]) == 5  # the five 1-way measurements were released before the failure


@pytest.mark.parametrize("method, extra", [("flaim", ["--variant", "private"]), ("distaim", [])])
def test_federated_synth_from_silo_files_then_audit(method, extra, schema_path, silo_paths, tmp_path):
    out = tmp_path / f"{method}.csv"
    args = synth_argv(
        method, schema=schema_path, silos=silo_paths, out=out, quiet=True, seed=2, rounds=3, workload_size=4
    )
    proc = run_cli(*args, *extra)
    assert proc.returncode == 0, proc.stderr
    assert "communication: 3 of 3 silos took part" in proc.stdout
    assert out.read_text().splitlines()[0] == "age,income,sex,region,label"
    led = json.loads(out.with_suffix(".ledger.json").read_text())
    assert led["method"] == method and led["status"] == "complete"
    assert led["details"]["traffic"]["bytes_sent_total"] > 0
    audit = run_cli("audit", out.with_suffix(".ledger.json"), timeout=120)
    assert_cli_audit_objects_only_to_the_seed(audit.stdout, audit.returncode)


def test_saved_model_gives_the_holdout_likelihood(schema_path, silo_paths, tmp_path, capsys):
    out, model = tmp_path / "f.csv", tmp_path / "f.model.npz"
    args = synth_argv(
        "flaim",
        schema=schema_path,
        silos=silo_paths,
        out=out,
        quiet=True,
        rounds=2,
        workload_size=3,
        model_out=model,
    )
    code, stdout, err = run_cli(*args, capsys=capsys)
    assert code == 0, err
    hold = tmp_path / "hold.csv"
    make_frame(200, 8).to_csv(hold, index=False)
    report = tmp_path / "eval.json"
    code, stdout, err = run_cli(
        "evaluate",
        "--real",
        silo_paths[0],
        "--synthetic",
        out,
        "--schema",
        schema_path,
        "--holdout",
        hold,
        "--model",
        model,
        "--json",
        report,
        capsys=capsys,
    )
    assert code == 0, err
    nll = json.loads(report.read_text())["nll"]
    assert 0 < nll["median"] <= nll["mean"] * 1.5 and nll["mean"] < 40 and "negative log-likelihood" in stdout
    model.write_bytes(b"not a model")
    code, _, err = run_cli(
        "evaluate",
        "--real",
        silo_paths[0],
        "--synthetic",
        out,
        "--schema",
        schema_path,
        "--holdout",
        hold,
        "--model",
        model,
        capsys=capsys,
    )
    assert code == 2 and "not a privsyn-fed model file (not an .npz archive)" in err


@pytest.mark.parametrize("method", ["flaim", "distaim"])
def test_federated_bad_silo_is_rejected_before_any_spend(method, schema_path, silo_paths, tmp_path, capsys):
    edit_silo(silo_paths[2], "age,", "agee,")
    out = tmp_path / "x.csv"
    code, _, err = run_cli(
        *synth_argv(method, schema=schema_path, silos=silo_paths, out=out, quiet=True, seed=1), capsys=capsys
    )
    assert_input_error(code, err, str(silo_paths[2]), out)


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--method", "flaim", "--sample-rate", "0"], "--sample-rate must lie in (0, 1]"),
        (["--method", "distaim", "--sample-rate", "1.01"], "--sample-rate must lie in (0, 1]"),
        (["--method", "aim", "--variant", "naive"], "--variant applies to --method flaim"),
        (["--method", "distaim", "--local-steps", "2"], "--local-steps applies to --method flaim"),
    ],
)
def test_federated_usage_errors(args, fragment, schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "x.csv"
    method, *extra = args[1:]  # each case opens with --method
    code, _, err = run_cli(
        *synth_argv(method, schema=schema_path, silos=silo_paths, out=out, quiet=True), *extra, capsys=capsys
    )
    assert_input_error(code, err, fragment, out)


def test_federated_methods_need_two_silos(schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "x.csv"
    code, _, err = run_cli(
        *synth_argv("flaim", schema=schema_path, silos=silo_paths[:1], out=out, quiet=True), capsys=capsys
    )
    assert_input_error(code, err, "needs at least 2 silos", out)


def test_oracle_variant_warns_loudly(schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "o.csv"
    args = synth_argv(
        "flaim",
        schema=schema_path,
        silos=silo_paths,
        out=out,
        quiet=True,
        variant="oracle",
        seed=1,
        rounds=1,
        workload_size=2,
    )
    code, _, err = run_cli(*args, capsys=capsys)
    assert code == 0
    assert "NO differential-privacy guarantee" in err
    code, out_text, _ = run_cli("audit", out.with_suffix(".ledger.json"), capsys=capsys)
    assert code == 1 and "NOT PRIVATE" in out_text


def test_fedtda_from_silo_files_then_audit(schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "t.csv"
    args = synth_argv(
        "fedtda",
        schema=schema_path,
        silos=silo_paths,
        out=out,
        quiet=True,
        seed=1,
        split="0.1,0.2,0.3,0.4",
        components=3,
    )
    code, stdout, err = run_cli(*args, capsys=capsys)
    assert code == 0, err
    led = json.loads(out.with_suffix(".ledger.json").read_text())
    assert led["method"] == "fedtda" and len(led["entries"]) == 4
    code, stdout, _ = run_cli("audit", out.with_suffix(".ledger.json"), capsys=capsys)
    assert_cli_audit_objects_only_to_the_seed(stdout, code)
    code, _, err = run_cli(
        *synth_argv("fedtda", schema=schema_path, silos=silo_paths, out=tmp_path / "u.csv", quiet=True, rounds=3),
        capsys=capsys,
    )
    assert code == 2 and "--rounds applies to --method aim or distaim or flaim" in err
    code, _, err = run_cli(
        *synth_argv("fedtda", schema=schema_path, silos=silo_paths, out=tmp_path / "v.csv", quiet=True, split="1,2"),
        capsys=capsys,
    )
    assert code == 2 and "--split" in err
