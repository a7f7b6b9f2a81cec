"""A declared category equal to a missing token: the declared category wins, and the empty category
cannot also be missing."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from .conftest import assert_one_line_error, run_cli, synth, synth_argv


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
