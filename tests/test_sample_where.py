"""``sample --where`` and ``ReleasedModel.sample(where=...)`` warn when the model expects under one
real row meeting the condition."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.model import parse_where
from privsyn_fed.saved_model import ImprobableConditionWarning, improbable_warning

from .conftest import run_cli, synth_argv

SAMPLE_SCHEMA = {
    "columns": [
        {"name": "age", "type": "numeric", "lower": 0, "upper": 999, "bins": 10, "integer": True},
        {"name": "kind", "type": "categorical", "categories": ["common", "rare"]},
    ]
}


@pytest.fixture
def saved_model(tmp_path, capsys):
    """A model saved by ``synth --model-out`` (unseeded: ``sample`` refuses a seeded release) from 2,000
    rows: ages uniform on 0..999 (one age is about a hundredth of its bin), 1% of them 'rare'."""
    rng = np.random.default_rng(4)
    n = 2000
    frame = pd.DataFrame({"age": rng.integers(0, 1000, n), "kind": np.where(np.arange(n) % 100 == 0, "rare", "common")})
    (tmp_path / "schema.json").write_text(json.dumps(SAMPLE_SCHEMA))
    frame.to_csv(tmp_path / "rows.csv", index=False)
    model = tmp_path / "release.model"
    argv = synth_argv(
        "aim", schema=tmp_path / "schema.json", silos=[tmp_path / "rows.csv"], out=tmp_path / "syn.csv",
        epsilon=8.0, model_out=model,
    )  # fmt: skip
    code, _, err = run_cli(*argv, "--quiet", capsys=capsys)
    assert code == 0, err
    return model


def test_sample_warns_when_the_model_expects_under_one_real_row(tmp_path, saved_model, capsys):
    out = tmp_path / "few.csv"
    code, text, err = run_cli(
        "sample", saved_model, "--rows", "2000", "--out", out, "--where", "kind=rare", "--where", "age=333",
        "--seed", "2", capsys=capsys,
    )  # fmt: skip
    assert code == 0, err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1, err
    assert "the model expects about" in warnings[0] and "rows drawn are extrapolated from the model" in warnings[0]
    assert "the 2,000 rows drawn" in warnings[0] and len(pd.read_csv(out)) == 2000
    code, _, err = run_cli(
        "sample", saved_model, "--rows", "50", "--out", tmp_path / "many.csv", "--where", "kind=common",
        "--seed", "2", capsys=capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "warning" not in err


def test_the_python_api_warns_as_the_command_does(saved_model):
    """``ReleasedModel.sample(where=...)`` gives the same warning as a Python warning, and none for a
    common condition."""
    import warnings

    model = pf.load_model(saved_model)
    with pytest.warns(ImprobableConditionWarning, match="rows drawn are extrapolated from the model"):
        rows = model.sample(300, seed=1, where=["kind=rare", "age=333"])
    assert len(rows) == 300 and set(rows["kind"]) == {"rare"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ImprobableConditionWarning)
        assert len(model.sample(50, seed=1, where=["kind=common"])) == 50


def test_the_warning_is_the_expected_count_below_one_row():
    schema = pf.Schema.from_dict(SAMPLE_SCHEMA)
    where = parse_where(["kind=rare"], schema)
    line = improbable_warning(2000.0, 0.0002, 500, where)
    assert line is not None and "about 0.4 rows with kind = rare" in line and "about 2,000 rows" in line
    assert improbable_warning(2000.0, 0.0005, 500, where) is None  # one row expected: no warning
    assert improbable_warning(0.5, 1.0, 500, []) is None  # no condition: nothing extrapolated by it
