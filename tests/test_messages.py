"""User-facing errors: one line each, naming the file, column or value at fault, with a hint where
the cause is not obvious, and never a private cell value relayed to another MPC party."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

import privsyn_fed as pf
from privsyn_fed.cli import main
from privsyn_fed.common import InputError
from privsyn_fed.mpc.launch import local_federation

from .conftest import CLI, assert_one_line_error, make_frame, run_cli, synth_argv

SECRET = "Jane Doe, HIV+"


def put_cell(path, row: int, column: str, value: str) -> None:
    """Replace one cell of a CSV (row counted as CSV lines, the header being line 1)."""
    import pandas as pd

    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    df.loc[row - 2, column] = value
    df.to_csv(path, index=False)  # pandas quotes the value: it holds a comma


# ---- 1. a party's input error never carries a cell value to party 0 ----------------------------


@pytest.mark.parametrize(
    "column, value, problem",
    [
        ("sex", SECRET, "category 'Jane Doe, HIV+' is not in the schema"),
        ("income", SECRET, "'Jane Doe, HIV+' is not a number"),
    ],
)
def test_a_cell_error_has_a_value_free_form(schema, column, value, problem):
    df = make_frame(20, seed=1).astype(str)
    df.loc[4, column] = value
    with pytest.raises(InputError) as info:
        pf.Silo.from_frame(df, schema, name="b.csv")
    assert str(info.value).startswith(f"b.csv: row 6, column '{column}': {problem}")
    public = info.value.shareable()
    assert public.startswith(f"b.csv: row 6, column '{column}': a value that is not")
    assert SECRET not in public and "Jane" not in public and "not shown to the other parties" in public


#: Party 0 with a declared release: the parties read their silos only once it passed their policies.
PARTY0 = (
    "import sys\n"
    "from privsyn_fed.mpc.launch import coordinator\n"
    "schema, silo, federation, cert, key = sys.argv[1:]\n"
    "with coordinator(schema, [silo], federation=federation, cert=cert, key=key, timeout_s=60,\n"
    "                 release=('fedtda', 1.0, 1e-9)) as agg:\n"
    "    agg.begin()\n"
)


def test_mpc_party_prints_only_the_value_free_form(schema_path, silo_paths, tmp_path):
    put_cell(silo_paths[1], 6, "sex", SECRET)
    fed = local_federation(tmp_path, 2)
    common = ["--mpc-timeout", "60", "--schema", str(schema_path)]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        for argv in (
            CLI + ["mpc-party", *fed.args(1), *common, "--silo", str(silo_paths[1])],
            CLI + ["mpc-dealer", *fed.args(2), "--mpc-timeout", "60"],
            [sys.executable, "-c", PARTY0, str(schema_path), str(silo_paths[0]), *fed.args(0)[1::2]],
        )
    ]
    try:
        out, err = procs[0].communicate(timeout=120)
        for p in procs[1:]:
            p.communicate(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert procs[0].returncode == 2, err
    assert_one_line_error(err, f"{silo_paths[1]}: row 6, column 'sex'")
    assert SECRET not in err + out and "read " not in out  # ready (its arguments checked), never past reading


def test_synth_mpc_relays_a_party_error_without_its_value(schema_path, silo_paths, tmp_path):
    put_cell(silo_paths[1], 6, "sex", SECRET)
    assert f'"{SECRET}"' in silo_paths[1].read_text()
    out = tmp_path / "syn.csv"
    run = run_cli(
        *synth_argv("fedtda", schema=schema_path, silos=silo_paths[:2], out=out, quiet=True, mpc=True), timeout=180
    )
    assert_one_line_error(run, str(silo_paths[1]), "row 6", "column 'sex'")
    assert SECRET not in run.stderr + run.stdout and "Jane" not in run.stderr + run.stdout
    assert not out.exists()


def test_party_0_shows_its_own_value_to_its_own_operator(schema_path, silo_paths, tmp_path, capsys):
    put_cell(silo_paths[0], 6, "sex", "Z")
    out = tmp_path / "syn.csv"
    proc = run_cli(
        *synth_argv("fedtda", schema=schema_path, silos=silo_paths[:2], out=out, quiet=True, mpc=True), capsys=capsys
    )
    assert_one_line_error(proc, "category 'Z' is not in the schema")


# ---- 2. a party or dealer that cannot join: one line, on time -----------------------------------


@pytest.fixture
def lone_federation(tmp_path):
    """A federation of two silo parties and the dealer on loopback of which only one member runs."""
    folder = tmp_path / "fed"
    folder.mkdir(mode=0o700)
    return local_federation(folder, 2)


@pytest.mark.parametrize("command", ["mpc-party", "mpc-dealer"])
def test_a_process_that_cannot_join_says_so_in_one_line_within_its_timeout(
    command, schema_path, silo_paths, lone_federation
):
    rank = 1 if command == "mpc-party" else 2
    args = [*lone_federation.args(rank), "--mpc-timeout", "3"]
    if command == "mpc-party":
        args += ["--schema", str(schema_path), "--silo", str(silo_paths[1])]
    port = lone_federation.federation.members[0].port  # nothing listens there
    start = time.monotonic()
    run = run_cli(command, *args, timeout=60)
    elapsed = time.monotonic() - start
    assert_one_line_error(run, "could not join", f"127.0.0.1:{port}", "within 3 s", status=1)
    assert elapsed < 3 + 12, f"took {elapsed:.1f} s with --mpc-timeout 3"  # 3 s plus start-up on a busy machine


@pytest.mark.parametrize("command", ["mpc-party", "mpc-dealer"])
@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf"])
def test_the_join_timeout_must_be_positive_and_finite(
    command, timeout, schema_path, silo_paths, capsys, lone_federation
):
    rank = 1 if command == "mpc-party" else 2
    args = [command, *lone_federation.args(rank), "--mpc-timeout", timeout]
    if command == "mpc-party":
        args += ["--schema", schema_path, "--silo", silo_paths[1]]
    assert_one_line_error(run_cli(*args, capsys=capsys), "--mpc-timeout must be a positive number of seconds")


# ---- 3. synth --help tells the truth about MPC ---------------------------------------------------


def test_synth_help_describes_mpc(capsys):
    with pytest.raises(SystemExit) as info:
        main(["synth", "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert "not available in this version" not in out
    assert "trusted aggregator" in out and "With --mpc" in out and "secret shares" in out


# ---- 4. YAML booleans and nulls where text belongs ------------------------------------------------


@pytest.mark.parametrize(
    "column, fragment",
    [
        (
            "{name: smoker, type: categorical, categories: [yes, no]}",
            "column 'smoker': category True is a YAML boolean (YAML reads unquoted yes, on and true as True); "
            "quote it (for example 'yes') to keep it as text",
        ),
        (
            "{name: smoker, type: categorical, categories: [a, b, 'off'], unknown: off}",
            "column 'smoker': \"unknown\" category False is a YAML boolean",
        ),
        (
            "{name: smoker, type: categorical, categories: [a, null]}",
            "column 'smoker': a category is null (YAML reads unquoted null, ~ and an empty item as no value); "
            "quote it ('null') to keep it as text",
        ),
        (
            "{name: age, type: numeric, lower: 0, upper: 9, missing: true, missing_values: [no]}",
            "column 'age': \"missing_values\" entry False is a YAML boolean",
        ),
        ("{name: on, type: numeric, lower: 0, upper: 9}", 'column #1: "name" True is a YAML boolean'),
    ],
)
def test_yaml_booleans_and_nulls_get_a_quoting_hint(column, fragment, tmp_path):
    path = tmp_path / "schema.yaml"
    path.write_text(f"columns:\n  - {column}\n")
    with pytest.raises(InputError) as info:
        pf.Schema.load(path)
    assert str(info.value) == f"{path}: {fragment}" or str(info.value).startswith(f"{path}: {fragment}")


def test_a_yaml_boolean_category_from_the_command_line(tmp_path, capsys):
    schema = tmp_path / "schema.yaml"
    schema.write_text("columns:\n  - {name: smoker, type: categorical, categories: [yes, no]}\n")
    silos = [tmp_path / "a.csv", tmp_path / "b.csv"]
    for silo in silos:
        silo.write_text(f"smoker\nyes\nno\n{silo.name}\n")
    proc = run_cli(
        *synth_argv("fedtda", schema=schema, silos=silos, out=tmp_path / "syn.csv", quiet=True), capsys=capsys
    )
    assert_one_line_error(proc, str(schema), "YAML boolean", "quote it")


def test_quoted_yaml_categories_and_json_are_unaffected(tmp_path):
    path = tmp_path / "schema.yaml"
    path.write_text("columns:\n  - {name: smoker, type: categorical, categories: ['yes', 'no'], unknown: 'no'}\n")
    assert pf.Schema.load(path).columns[0].categories == ("yes", "no")
    with pytest.raises(InputError, match="categories must be strings or numbers, not True$"):
        pf.Schema.from_dict({"columns": [{"name": "s", "type": "categorical", "categories": [True]}]}, source="s.json")


# ---- 5. a CSV that is not comma-separated --------------------------------------------------------


@pytest.mark.parametrize("sep, name", [(";", "semicolons"), ("\t", "tabs"), ("|", "'|'")])
def test_another_delimiter_gets_a_hint(sep, name, schema_path, silo_paths, tmp_path, capsys):
    make_frame(30, seed=3).to_csv(silo_paths[1], index=False, sep=sep)
    out = tmp_path / "syn.csv"
    proc = run_cli(*synth_argv("fedtda", schema=schema_path, silos=silo_paths, out=out, quiet=True), capsys=capsys)
    line = assert_one_line_error(proc, str(silo_paths[1]), "missing column")
    assert f"the file seems to separate columns with {name}, but privsyn-fed reads comma-separated files" in line


def test_a_comma_csv_missing_a_column_gets_no_delimiter_hint(schema, tmp_path):
    with pytest.raises(InputError) as info:
        pf.Silo.from_frame(make_frame(10, seed=1).drop(columns="label"), schema, name="b.csv")
    assert str(info.value) == "b.csv: missing column 'label' (the schema declares it)"


def test_a_parser_error_on_a_semicolon_file_gets_the_hint_too(schema, tmp_path):
    from privsyn_fed.common import read_table

    path = tmp_path / "eu.csv"
    path.write_text("age;income\n30;20\n1,2,3;4\n")
    hint = "; the file seems to separate columns with semicolons, but privsyn-fed reads comma-separated files$"
    with pytest.raises(InputError, match=r"cannot parse as CSV .*" + hint):
        read_table(path)
    with pytest.raises(InputError, match=r"missing columns 'age', .*" + hint):  # the header is checked first
        pf.Silo.load(path, schema)


# ---- 6. schema names with surrounding spaces, or blank -------------------------------------------


def test_a_name_with_surrounding_spaces_is_refused(schema_dict, tmp_path, silo_paths, capsys):
    import json

    schema_dict["columns"][0]["name"] = " age "
    path = tmp_path / "spaced.json"
    path.write_text(json.dumps(schema_dict))
    out = tmp_path / "syn.csv"
    proc = run_cli(*synth_argv("fedtda", schema=path, silos=silo_paths, out=out, quiet=True), capsys=capsys)
    line = assert_one_line_error(proc)
    assert line == (
        f"privsyn-fed: error: {path}: column ' age ': the name has leading or trailing spaces, which "
        "never match a CSV header (headers are read without them); remove them"
    )


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("  ", "column #1: the name '  ' is blank"),
        ("", 'column #1 has no "name"'),
        (7, 'column #1: "name" must be text, not 7'),
    ],
)
def test_a_blank_or_odd_name_is_refused(name, fragment, schema_dict):
    schema_dict["columns"][0]["name"] = name
    with pytest.raises(InputError) as info:
        pf.Schema.from_dict(schema_dict, source="s.json")
    assert str(info.value) == f"s.json: {fragment}"
