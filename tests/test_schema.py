import json

import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError

from .conftest import run_cli


def write(tmp_path, text, name="s.json"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_loads_columns_in_order(schema):
    assert schema.names == ["age", "income", "sex", "region", "label"]
    # age: 73 whole numbers in 8 bins; income 6 bins; region has a missing cell.
    assert schema.shape == [8, 6, 2, 4, 2]


def test_integer_column_with_fewer_values_than_bins_gets_one_bin_per_value(tmp_path):
    s = pf.Schema.from_dict({"columns": [{"name": "k", "type": "numeric", "lower": 0, "upper": 4, "integer": True}]})
    assert s.shape == [5]


def test_yaml_schema(tmp_path, schema_dict):
    import yaml

    p = write(tmp_path, yaml.safe_dump(schema_dict), "s.yaml")
    assert pf.Schema.load(p).to_dict() == pf.Schema.from_dict(schema_dict).to_dict()


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("{not json", "not valid JSON"),
        ('{"columns": []}', "no columns"),
        ('{"columns": [{"name": "x", "type": "numeric", "upper": 3}]}', 'needs a public "lower" bound'),
        ('{"columns": [{"name": "x", "type": "numeric", "lower": 5, "upper": 3}]}', "above"),
        ('{"columns": [{"name": "x", "type": "numeric", "lower": 0, "upper": 3, "bins": 0}]}', "bins"),
        ('{"columns": [{"name": "x", "type": "categorical", "categories": []}]}', "non-empty"),
        ('{"columns": [{"name": "x", "type": "categorical", "categories": ["a", "a"]}]}', "listed twice"),
        ('{"columns": [{"name": "x", "type": "text"}]}', '"type" must be'),
        (
            '{"columns": [{"name": "x", "type": "categorical", "categories": ["a"]},'
            ' {"name": "x", "type": "categorical", "categories": ["b"]}]}',
            "declared twice",
        ),
        (
            '{"columns": [{"name": "x", "type": "categorical", "categories": ["a"], "unknown": "z"}]}',
            "not in the categories",
        ),
        ('{"columns": [{"name": "x", "type": "numeric", "lower": 0, "upper": 1, "bnis": 3}]}', "unknown key 'bnis'"),
    ],
)
def test_bad_schema_names_file_and_problem(tmp_path, text, fragment):
    p = write(tmp_path, text)
    with pytest.raises(InputError) as err:
        pf.Schema.load(p)
    msg = str(err.value)
    assert str(p) in msg and fragment in msg
    assert "\n" not in msg


def test_missing_schema_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        pf.Schema.load(tmp_path / "nope.json")


def test_round_trip_to_dict(schema):
    again = pf.Schema.from_dict(json.loads(json.dumps(schema.to_dict())))
    assert again.to_dict() == schema.to_dict()


def test_numeric_categories_sort_as_numbers_in_python_and_on_the_command_line(tmp_path, capsys):
    from privsyn_fed.schema.draft import draft_frame

    df = pd.DataFrame({"n": [10, 2, 1, 2] * 5, "t": ["10", "2", "b", "a"] * 5})
    python = {c["name"]: c["categories"] for c in draft_frame(df).columns}
    data, out = tmp_path / "t.csv", tmp_path / "s.json"
    df.to_csv(data, index=False)
    assert run_cli("schema", "draft", data, "--out", out, capsys=capsys).returncode == 0
    cli = {c["name"]: c["categories"] for c in json.loads(out.read_text())["columns"]}
    assert python == cli == {"n": ["1", "2", "10"], "t": ["2", "10", "a", "b"]}
