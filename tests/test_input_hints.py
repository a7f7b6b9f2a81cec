"""Hints for inputs in a form the reader does not expect: YAML booleans and nulls where text
belongs, and a CSV that is not comma-separated."""

from __future__ import annotations

import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError

from .conftest import assert_one_line_error, make_frame, run_cli, synth_argv


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
