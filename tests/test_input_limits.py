"""Hostile values in the documents and options a user gives: every JSON (and YAML) input is read by one
reader that refuses deep nesting and overlong numbers in one line; seeds out of range and overlong
store paths are one line too; a column's ``missing_values`` may repeat a default token; names and
categories that no cell can match (surrounding white space, control characters) are refused where
they enter."""

from __future__ import annotations

import csv
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.common import MAX_NESTING, MAX_NUMBER_CHARS, InputError, parse_json, parse_yaml
from privsyn_fed.mpc.federation import load as load_federation
from privsyn_fed.mpc.policy import load_policy

from .conftest import CLI, SCHEMA, assert_one_line_error, make_frame, run_cli, synth_argv

DEEP = '{"a": [' * 50_000 + "]}" * 50_000  # deeper than any parser's stack
LONG = "1" * 5_000  # more digits than Python converts to an integer
HOSTILE = {"deep": DEEP, "long number": LONG, "long real": "0." + "5" * 5_000}
#: Each JSON input and a document holding ``%s`` in one of its fields.
FIELDS = {
    "schema": '{"columns": %s}',
    "yaml schema": "columns: %s\n",
    "workload": '[["age", "sex"], %s]',
    "ledger": '{"format": "privsyn-fed-ledger", "epsilon_budget": %s}',
    "federation": '{"federation": "f", "members": %s}',
    "policy": '{"max_epsilon": %s, "max_delta": 1e-6, "methods": ["flaim"]}',
    "model metadata": '{"method": "independent", "schema": %s}',
}


def _silos(tmp_path: Path) -> tuple[Path, list[Path]]:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    silos = []
    for i in range(2):
        silos.append(tmp_path / f"silo{i}.csv")
        make_frame(120, seed=i).to_csv(silos[-1], index=False)
    return schema, silos


def _refused(kind: str, text: str, tmp_path: Path, capsys) -> str:
    """The one line with which the input ``kind`` holding ``text`` is refused (exit 2 on the command line)."""
    schema, silos = _silos(tmp_path)
    path = tmp_path / ("doc.yaml" if kind == "yaml schema" else "doc.json")
    path.write_text(text)
    if kind == "policy":
        with pytest.raises(InputError) as caught:
            load_policy(path)
        return assert_one_line_error(str(caught.value), str(path))
    if kind in ("schema", "yaml schema"):
        argv = ["evaluate", "--real", silos[0], "--synthetic", silos[1], "--schema", path]
    elif kind == "workload":
        argv = synth_argv(schema=schema, silos=silos, out=tmp_path / "o.csv", seed=1, workload=path, quiet=True)
    elif kind == "ledger":
        argv = ["audit", path]
    elif kind == "federation":
        argv = ["federation", "show", path]
    else:
        model = tmp_path / "m.model"
        with open(model, "wb") as fh:
            np.savez(fh, meta=np.array(text))
        argv = ["sample", model, "--rows", "1", "--out", tmp_path / "o.csv"]
    return assert_one_line_error(run_cli(*argv, capsys=capsys), str(path if kind != "model metadata" else model))


@pytest.mark.parametrize("kind", sorted(FIELDS))
@pytest.mark.parametrize("hostile", sorted(HOSTILE))
@pytest.mark.parametrize("where", ["whole document", "in a field"])
def test_every_json_input_refuses_deep_nesting_and_long_numbers_in_one_line(kind, hostile, where, tmp_path, capsys):
    value = HOSTILE[hostile]
    text = value if where == "whole document" else FIELDS[kind] % value
    line = _refused(kind, text, tmp_path, capsys)
    if hostile == "deep":
        assert "nested too deeply" in line, line
    elif kind != "model metadata":  # the model reader says what it could not read in its own words
        assert f"more than {MAX_NUMBER_CHARS}" in line, line


def test_the_limits_are_the_stated_ones():
    inside = "[" * MAX_NESTING + "]" * MAX_NESTING
    assert parse_json(inside, "f", "x") is not None and parse_yaml(inside, "f", "x") is not None
    for parse in (parse_json, parse_yaml):
        with pytest.raises(InputError, match=f"nested too deeply: more than {MAX_NESTING} levels"):
            parse("[" + inside + "]", "f", "x")
        assert parse("[" + "9" * MAX_NUMBER_CHARS + "]", "f", "x") == [int("9" * MAX_NUMBER_CHARS)]
        with pytest.raises(InputError, match=f"a number of {MAX_NUMBER_CHARS + 1} characters"):
            parse("[" + "9" * (MAX_NUMBER_CHARS + 1) + "]", "f", "x")
    assert parse_yaml("a: &x [1]\nb: *x\n", "f", "x") == {"a": [1], "b": [1]}


def test_no_file_is_parsed_outside_the_one_reader():
    """Only the reader parses JSON or YAML; the MPC wire formats between parties have their own limits."""
    root = Path(pf.__file__).parent
    wire = {"common/jsonfile.py", "mpc/tagged.py", "mpc/world.py", "mpc/draft.py", "mpc/wire.py"}
    parsers = re.compile(r"json\.loads?\((?!json\.dumps)|yaml\.(?:safe_|full_|unsafe_)?load(?:_all)?\(")
    readers = [p.relative_to(root).as_posix() for p in root.rglob("*.py") if parsers.search(p.read_text())]
    assert set(readers) <= wire, sorted(set(readers) - wire)


def test_a_deep_federation_file_is_one_line(tmp_path):
    path = tmp_path / "fed.json"
    path.write_text(DEEP)
    with pytest.raises(InputError, match="nested too deeply") as caught:
        load_federation(path)
    assert_one_line_error(str(caught.value), str(path))


# ---- seeds and store paths ------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", ["-1", str(2**64), "1" * 5_000, "1.5"])
def test_a_seed_out_of_range_is_one_line_on_every_command(seed, tmp_path):
    schema, silos = _silos(tmp_path)
    commands = [
        ["sample", tmp_path / "m.model", "--rows", "5", "--out", tmp_path / "o.csv", "--seed", seed],
        ["partition", silos[0], "--clients", "2", "--scheme", "iid", "--out", tmp_path / "parts", "--seed", seed],
        ["evaluate", "--real", silos[0], "--synthetic", silos[1], "--schema", schema, "--workload-seed", seed],
        ["mpc-demo", "--seed", seed],
    ]
    for argv in commands:
        proc = subprocess.run([*CLI, *map(str, argv)], capture_output=True, text=True, timeout=120)
        assert_one_line_error(proc, "seed", "a whole number from 0 to 2^63 - 17")
    argv = synth_argv(schema=schema, silos=silos, out=tmp_path / "o.csv", seed=seed)  # checked by the API
    assert_one_line_error(subprocess.run([*CLI, *map(str, argv)], capture_output=True, text=True), "--seed")


def test_a_budget_store_path_too_long_for_the_file_system_is_one_line(tmp_path):
    for store in ("s" * 5_000, ("d" * 200 + "/") * 25 + "b.db"):
        policy = tmp_path / "policy.json"
        fields = {"max_epsilon": 1, "max_delta": 1e-6, "methods": ["flaim"], "schema_sha256": "0" * 64}
        store_spec = {"path": store, "dataset_id": "d", "total_epsilon": 3}
        policy.write_text(json.dumps({**fields, "budget_store": store_spec}))
        with pytest.raises(InputError) as caught:
            load_policy(policy)
        line = assert_one_line_error(str(caught.value), "budget_store.path", "too long for the file system")
        assert len(line) < 400


# ---- a missing-value token given again ------------------------------------------------------------------
def _na_schema(tmp_path: Path, constraints: list | None = None) -> tuple[Path, list[Path]]:
    spec = json.loads(json.dumps(SCHEMA))
    spec["columns"][3]["missing_values"] = ["NA", "NA", "unknown"]  # a default token, and one twice
    schema, silos = _silos(tmp_path)
    schema.write_text(json.dumps({**spec, "constraints": constraints} if constraints else spec))
    assert pf.Schema.load(schema).columns[3].missing_values == ("NA", "NA", "unknown")
    return schema, silos


def test_missing_values_repeating_a_token_let_evaluate_read_the_tables(tmp_path, capsys):
    schema, silos = _na_schema(tmp_path)
    code, _, err = run_cli("evaluate", "--real", silos[0], "--synthetic", silos[1], "--schema", schema, capsys=capsys)
    assert code == 0, err


def test_missing_values_repeating_a_token_let_a_release_meet_a_constraint_on_the_column(tmp_path, capsys):
    schema, silos = _na_schema(tmp_path, [{"forbid": {"region": ["east"], "sex": ["F"]}}])
    out = tmp_path / "r.csv"
    code, _, err = run_cli(*synth_argv("independent", schema=schema, silos=silos, out=out, quiet=True), capsys=capsys)
    assert code == 0, err
    rows = pd.read_csv(out, keep_default_na=False)
    assert not ((rows["region"] == "east") & (rows["sex"] == "F")).any()


def test_missing_values_repeating_a_token_let_sample_draw_given_the_column(tmp_path, capsys):
    schema, silos = _na_schema(tmp_path)
    model, out = tmp_path / "m.model", tmp_path / "o.csv"
    argv = synth_argv("independent", schema=schema, silos=silos, out=out, quiet=True, model_out=model)
    code, _, err = run_cli(*argv, capsys=capsys)
    assert code == 0, err
    drawn = tmp_path / "w.csv"
    code, _, err = run_cli("sample", model, "--rows", "20", "--out", drawn, "--where", "region=south", capsys=capsys)
    assert code == 0, err
    assert set(pd.read_csv(drawn)["region"]) == {"south"}


# ---- names and categories that no cell matches ----------------------------------------------------------
ODD = ["y ", " y", "\x0bvt", "a\x07b", "a\nb", "\x1b[31mred", "a\u2028b"]


@pytest.mark.parametrize("odd", ODD)
def test_a_category_no_cell_can_match_is_refused_naming_column_and_value(odd, tmp_path):
    spec = json.loads(json.dumps(SCHEMA))
    spec["columns"][4]["categories"] = ["no", odd]
    with pytest.raises(InputError) as caught:
        pf.Schema.from_dict(spec, source="s.json")
    assert_one_line_error(str(caught.value), "s.json: column 'label'", repr(odd))
    spec = json.loads(json.dumps(SCHEMA))
    spec["columns"][3]["missing_values"] = [odd]
    with pytest.raises(InputError, match="missing_values"):
        pf.Schema.from_dict(spec, source="s.json")


@pytest.mark.parametrize("odd", ODD)
def test_a_column_name_no_header_can_match_is_refused(odd, tmp_path):
    spec = json.loads(json.dumps(SCHEMA))
    spec["columns"][0]["name"] = odd
    with pytest.raises(InputError) as caught:
        pf.Schema.from_dict(spec, source="s.json")
    assert_one_line_error(str(caught.value), "s.json: column", repr(odd))


def test_a_data_dictionary_and_a_draft_refuse_such_a_category(tmp_path, capsys):
    dictionary = tmp_path / "dict.csv"
    dictionary.write_text('name,type,min,max,categories\nflag,categorical,,,"a|b\x07c"\n')
    run = run_cli("schema", "from-dictionary", dictionary, "--out", tmp_path / "s.json", capsys=capsys)
    assert_one_line_error(run, "'flag'", repr("b\x07c"))
    table = tmp_path / "t.csv"
    table.write_text("flag,n\n" + "".join(f'"{v}",{i}\n' for i, v in enumerate(["a", "b\x07c", "a", " d "] * 5)))
    run = run_cli("schema", "draft", table, "--out", tmp_path / "d.json", capsys=capsys)
    assert_one_line_error(run, "column 'flag'", repr("b\x07c"))
    assert not (tmp_path / "d.json").exists()


def test_a_dp_draft_never_lists_such_a_value(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text("flag\n" + "".join(f'"{v}"\n' for v in ["a", "b\x07c", "d"] * 3000))
    out = tmp_path / "d.json"
    run = run_cli("schema", "draft", table, "--out", out, "--dp", "4", "--delta", "1e-6", capsys=capsys)
    assert run.returncode == 0, run.stderr
    flag = pf.Schema.load(out).columns[0]
    assert "a" in flag.categories and "d" in flag.categories and "b\x07c" not in flag.categories


def test_a_dictionary_may_list_as_many_categories_as_a_column_may_have(tmp_path, capsys):
    def dictionary(n):
        path = tmp_path / f"dict{n}.csv"
        cats = "|".join(f"c{i:06d}" for i in range(n))
        path.write_text(f"name,type,categories\ncode,categorical,{cats}\n")
        return path

    limit = csv.field_size_limit()
    code, out, err = run_cli(
        "schema", "from-dictionary", dictionary(100_000), "--out", tmp_path / "s.json", capsys=capsys
    )
    assert code == 0, err
    assert len(pf.Schema.load(tmp_path / "s.json").column("code").categories) == 100_000
    run = run_cli("schema", "from-dictionary", dictionary(100_001), "--out", tmp_path / "t.json", capsys=capsys)
    assert_one_line_error(run, "100,001 categories are more than the 100,000 cells a column may have")
    assert csv.field_size_limit() == limit  # the reader's limit is the module's again


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
