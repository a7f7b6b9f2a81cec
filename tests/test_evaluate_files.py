"""``evaluate`` over several real files: the union of every real and holdout file, a note on the
columns it ignores, the file at fault named, a file or one-file option given twice refused."""

from __future__ import annotations

import json

import pytest

from .conftest import assert_one_line_error, make_frame, run_cli


@pytest.fixture
def tables(tmp_path):
    paths = {}
    for name, n, seed in (("a", 120, 1), ("b", 90, 2), ("c", 60, 3), ("syn", 100, 4), ("h1", 50, 5), ("h2", 40, 6)):
        paths[name] = tmp_path / f"{name}.csv"
        make_frame(n, seed).to_csv(paths[name], index=False)
    return paths


def evaluate_argv(schema_path, tables, *extra):
    reals = [x for k in "abc" for x in ("--real", tables[k])]
    return ["evaluate", *reals, "--synthetic", tables["syn"], "--schema", schema_path, "--workload-size", 4, *extra]


def test_evaluate_takes_the_union_of_every_real_and_holdout_file(schema_path, tables, tmp_path, capsys):
    out = tmp_path / "eval.json"
    holdouts = ["--holdout", tables["h1"], "--holdout", tables["h2"]]
    code, stdout, err = run_cli(*evaluate_argv(schema_path, tables, *holdouts, "--json", out), capsys=capsys)
    assert code == 0, err
    assert stdout.splitlines()[0] == (
        "compared 270 real rows (the union of 3 files) with 100 synthetic rows; holdout 90 rows (the union of 2 files)"
    )
    report = json.loads(out.read_text())
    assert report["rows"] == {"real": 270, "synthetic": 100, "holdout": 90}
    assert report["files"]["real"] == [str(tables[k]) for k in "abc"]


def test_evaluate_notes_the_columns_of_a_real_file_it_ignores(schema_path, tables, capsys):
    make_frame(120, 1).assign(zip="02134", ssn="x").to_csv(tables["a"], index=False)
    code, stdout, err = run_cli(*evaluate_argv(schema_path, tables), capsys=capsys)
    assert code == 0, err
    assert f"privsyn-fed: note: {tables['a']} (--real): columns not in the schema, ignored: 'zip', 'ssn'" in err
    assert stdout.startswith("compared 270 real rows")


def test_evaluate_names_the_real_file_at_fault(schema_path, tables, capsys):
    lines = tables["b"].read_text().splitlines()
    lines[4] = lines[4].replace(",F,", ",X,").replace(",M,", ",X,")
    tables["b"].write_text("\n".join(lines) + "\n")
    run = run_cli(*evaluate_argv(schema_path, tables), capsys=capsys)
    assert_one_line_error(run, f"{tables['b']} (--real): row 5, column 'sex'")
    assert not run.stdout


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--synthetic", "other.csv"], "--synthetic given twice"),
        (["--schema", "other.json"], "--schema given twice"),
        (["--json", "x.json", "--json", "y.json"], "--json given twice"),
    ],
)
def test_evaluate_refuses_a_one_file_option_given_twice(extra, fragment, schema_path, tables, capsys):
    with pytest.raises(SystemExit) as exc:
        run_cli(*evaluate_argv(schema_path, tables, *extra), capsys=capsys)
    assert exc.value.code == 2
    assert_one_line_error(capsys.readouterr().err, fragment)


def test_evaluate_refuses_a_real_file_given_twice_or_also_as_holdout(schema_path, tables, capsys):
    run = run_cli(*evaluate_argv(schema_path, tables, "--real", tables["a"]), capsys=capsys)
    assert_one_line_error(run, "given twice as --real")
    run = run_cli(*evaluate_argv(schema_path, tables, "--holdout", tables["c"]), capsys=capsys)
    assert_one_line_error(run, "--holdout", "is the same file as --real")
