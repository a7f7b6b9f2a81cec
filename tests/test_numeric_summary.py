"""The numeric summary of the quality report and ``evaluate``: a heavy tail shows in the means and
the upper quantiles, a declared atom in its real and synthetic share, an undeclared point mass as
the most common real value."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.evaluation import Sources, build_report, evaluate
from privsyn_fed.evaluation.numeric_summary import numeric_summary
from privsyn_fed.evaluation.utility import numeric_columns

from .conftest import run_cli

SPEND = {"name": "spend", "type": "numeric", "lower": 0, "upper": 10000, "bins": 20}


GROUP = {"name": "group", "type": "categorical", "categories": ["a", "b"]}


def _schema(*columns: dict) -> pf.Schema:
    return pf.Schema.from_dict({"columns": list(columns)})


def _summary(real: pd.DataFrame, syn: pd.DataFrame, schema: pf.Schema) -> dict:
    return numeric_summary(numeric_columns(real, schema), numeric_columns(syn, schema), schema)


def _heavy_tailed(n: int = 2000, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A lognormal real column and a synthetic one whose upper tail is far too heavy."""
    rng = np.random.default_rng(seed)
    real = np.clip(rng.lognormal(5.0, 0.6, n), 0, 10000)
    top = real > np.quantile(real, 0.9)
    syn = np.where(top, np.minimum(10 * real, 10000), real)  # the top tenth ten times too large
    frame = lambda x: pd.DataFrame({"spend": np.round(x, 2), "group": rng.choice(["a", "b"], n)})
    return frame(real), frame(syn)


def test_the_numeric_summary_shows_a_heavy_tail_in_the_mean_and_the_upper_quantiles():
    schema = _schema(SPEND, GROUP)
    real, syn = _heavy_tailed()
    s = _summary(real, syn, schema)["spend"]
    mean_r, mean_s = real["spend"].mean(), syn["spend"].mean()
    assert s["mean"]["real"] == pytest.approx(mean_r) and s["mean"]["synthetic"] == pytest.approx(mean_s)
    assert s["mean"]["ratio"] == pytest.approx(mean_s / mean_r) and s["mean"]["ratio"] > 2
    q = s["quantiles"]
    assert list(q) == ["1%", "5%", "25%", "50%", "75%", "95%", "99%"]
    assert q["99%"]["real"] == pytest.approx(np.quantile(real["spend"], 0.99))
    assert q["99%"]["difference"] > 1000 and abs(q["25%"]["difference"]) < 1e-9  # the tail moved, not the body
    assert "group" not in _summary(real, syn, schema)  # numeric columns only


def test_the_quality_report_and_evaluate_show_both_means(tmp_path, capsys):
    schema = _schema(SPEND, GROUP)
    real, syn = _heavy_tailed()
    ev = evaluate(real, syn, schema, workload_size=None)
    assert ev["numeric"]["spend"]["mean"]["synthetic"] == pytest.approx(syn["spend"].mean())
    page = build_report(real, syn, schema, Sources(["real.csv"], "syn.csv", "schema.json"), evaluation=ev)
    section = page[page.index('<section id="numeric">') :]
    section = section[: section.index("</section>")]
    means = f"{real['spend'].mean():.4g} / {syn['spend'].mean():.4g}"
    assert means in section and "\u00d7" in section  # both means and their ratio
    assert "<b>Not differentially private.</b>" in page.split('<section id="numeric">')[0]  # still labelled
    paths = {}
    for name, frame in (("real", real), ("syn", syn)):
        paths[name] = tmp_path / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    (tmp_path / "schema.json").write_text(json.dumps({"columns": [SPEND, GROUP]}))
    code, text, err = run_cli(
        "evaluate", "--real", paths["real"], "--synthetic", paths["syn"], "--schema", tmp_path / "schema.json",
        "--json", tmp_path / "ev.json", capsys=capsys,
    )  # fmt: skip
    assert code == 0, err
    assert f"'spend' real / synthetic: mean {means}" in text
    saved = json.loads((tmp_path / "ev.json").read_text())["numeric"]["spend"]
    assert saved["quantiles"]["95%"]["synthetic"] == pytest.approx(np.quantile(syn["spend"], 0.95))


def _ceiling(n: int = 1000, seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """60% of real rows at an assay's ceiling (500); the synthetic rows smear it over its bin."""
    rng = np.random.default_rng(seed)
    at = rng.random(n) < 0.6
    real = np.where(at, 500.0, np.round(rng.uniform(0, 500, n), 3))
    syn = np.where(at, np.round(rng.uniform(480, 500, n), 3), real)
    syn[syn == 500.0] = 499.5
    return pd.DataFrame({"assay": real}), pd.DataFrame({"assay": syn})


def test_a_declared_atom_shows_its_real_and_synthetic_share():
    column = {"name": "assay", "type": "numeric", "lower": 0, "upper": 500, "bins": 10, "atoms": [500]}
    schema = _schema(column)
    real, syn = _ceiling()
    s = _summary(real, syn, schema)["assay"]
    share = float((real["assay"] == 500).mean())
    assert s["atoms"] == [{"value": 500.0, "real": share, "synthetic": 0.0, "difference": -share}]
    assert 0.55 < share < 0.65
    page = build_report(real, syn, schema, Sources(["r"], "s", "schema"))
    assert f"atom 500: {share:.1%} / 0.0%" in page
    assert "most common real value 500" not in page  # the atom is shown once


def test_an_undeclared_point_mass_shows_as_the_most_common_real_value():
    schema = _schema({"name": "assay", "type": "numeric", "lower": 0, "upper": 500, "bins": 10})
    real, syn = _ceiling()
    mode = _summary(real, syn, schema)["assay"]["mode"]
    assert mode["value"] == 500.0 and mode["synthetic"] == 0.0 and mode["real"] > 0.55
    page = build_report(real, syn, schema, Sources(["r"], "s", "schema"))
    assert f"most common real value 500: {mode['real']:.1%} / 0.0%" in page
    spread = pd.DataFrame({"assay": np.arange(1000) / 2.0})  # no value holds 5% of the rows
    assert "mode" not in _summary(spread, spread, schema)["assay"]
