"""Shared fixtures: a small mixed schema and generated silos written as real CSV files."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf

SCHEMA = {
    "columns": [
        {"name": "age", "type": "numeric", "lower": 18, "upper": 90, "bins": 8, "integer": True},
        {"name": "income", "type": "numeric", "lower": 0, "upper": 100.0, "bins": 6},
        {"name": "sex", "type": "categorical", "categories": ["F", "M"]},
        {"name": "region", "type": "categorical", "categories": ["north", "south", "east"], "missing": True},
        {"name": "label", "type": "categorical", "categories": ["no", "yes"]},
    ]
}


def make_frame(n: int, seed: int) -> pd.DataFrame:
    """Correlated toy rows: income depends on age and sex, label on income."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 91, n)
    sex = rng.choice(["F", "M"], n)
    income = np.clip(20 + 0.6 * (age - 18) + np.where(sex == "M", 10, 0) + rng.normal(0, 10, n), 0, 100)
    region = rng.choice(["north", "south", "east", ""], n, p=[0.4, 0.3, 0.2, 0.1])
    label = np.where(income + rng.normal(0, 10, n) > 55, "yes", "no")
    return pd.DataFrame({"age": age, "income": income.round(2), "sex": sex, "region": region, "label": label})


def assert_audit_objects_only_to_the_seed(ledger: dict) -> None:
    """Tests seed their noise to be reproducible; the audit must fail such a ledger for that reason
    and for no other."""
    from privsyn_fed.audit import audit_ledger

    problems = audit_ledger(ledger).problems
    assert len(problems) == 1 and problems[0].startswith("SEEDED RUN"), problems


def assert_cli_audit_objects_only_to_the_seed(stdout: str, returncode: int) -> None:
    """The same through `privsyn-fed audit`: exit 1 and one PROBLEM line, the seeded run."""
    problems = [line for line in stdout.splitlines() if line.startswith("PROBLEM")]
    assert returncode == 1 and len(problems) == 1 and "SEEDED RUN" in problems[0], stdout


@pytest.fixture
def schema_dict():
    return json.loads(json.dumps(SCHEMA))


@pytest.fixture
def schema(tmp_path) -> pf.Schema:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    return pf.Schema.load(path)


@pytest.fixture
def schema_path(tmp_path):
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    return path


@pytest.fixture
def silo_paths(tmp_path):
    paths = []
    for k, n in enumerate([400, 300, 300]):
        p = tmp_path / f"silo{k}.csv"
        make_frame(n, seed=k).to_csv(p, index=False)
        paths.append(p)
    return paths
