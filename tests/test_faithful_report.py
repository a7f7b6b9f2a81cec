"""Reports that say what a release keeps: numeric means, quantiles and point masses in the quality
report and ``evaluate``; ``sample --where``'s warning on an improbable condition; the privacy
report's words on the silo column and on rows a per-unit bound left out."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.audit.report import render_report
from privsyn_fed.audit.scope import joint_marginals
from privsyn_fed.evaluation import Sources, build_report, evaluate
from privsyn_fed.evaluation.numeric_summary import numeric_summary
from privsyn_fed.evaluation.utility import numeric_columns
from privsyn_fed.model import parse_where
from privsyn_fed.saved_model import ImprobableConditionWarning, improbable_warning

from .conftest import run_cli, synth_argv

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


# ---- sample --where ------------------------------------------------------------------------------------
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


# ---- the privacy report --------------------------------------------------------------------------------
SITES = ("north", "south")
SITE_SCHEMA = {
    "columns": [
        {"name": "site", "type": "categorical", "categories": list(SITES)},
        {"name": "age", "type": "numeric", "lower": 0, "upper": 100, "bins": 10, "integer": True},
        {"name": "sick", "type": "categorical", "categories": ["y", "n"]},
    ]
}


def _sites(with_person: bool) -> dict[str, pd.DataFrame]:
    frames = {}
    for k, site in enumerate(SITES):
        rng = np.random.default_rng(k)
        n = 400
        frame = pd.DataFrame({"age": rng.integers(20 + 30 * k, 50 + 30 * k, n), "sick": rng.choice(["y", "n"], n)})
        if with_person:
            frame.insert(0, "person", np.arange(n) // 3)  # three rows per person
        frames[site] = frame
    return frames


def _report(tmp_path, method: str, **options) -> str:
    result = pf.synthesize(
        _sites("privacy_unit" in options), method, 2.0, 1e-9, schema=pf.Schema.from_dict(SITE_SCHEMA), seed=3,
        silo_column="site", **options,
    )  # fmt: skip
    return render_report(result.ledger, tmp_path / "privacy.md")


def test_the_privacy_report_says_rows_a_per_unit_bound_left_out(tmp_path):
    text = _report(tmp_path, "independent", privacy_unit="person", max_rows_per_unit=2)
    line = next(x for x in text.splitlines() if "Rows left out by the unit bound" in x)
    assert "at most 2 row(s) per unit ('person')" in line
    assert "describes the bounded table" in line and "per-person totals" in line
    assert "shown only to each silo's operator" in line and "not part of the release" in line
    plain = _report(tmp_path, "independent")
    assert "Rows left out" not in plain and "bounded table" not in plain


def test_the_privacy_report_says_what_the_silo_column_keeps(tmp_path):
    text = _report(tmp_path, "independent")
    line = next(x for x in text.splitlines() if "Silo column" in x)
    assert "each silo's one-way marginal (its share of the rows) only" in line
    assert "measured no marginal of the column with another column" in line
    assert "every distribution within a silo comes from the model's fit" in line
    result = pf.synthesize(
        _sites(False), "aim", 4.0, 1e-9, schema=pf.Schema.from_dict(SITE_SCHEMA), seed=3, silo_column="site"
    )
    joint = joint_marginals(result.ledger, "site")
    assert joint and all("site" in m.split(", ") and "," in m for m in joint)
    aim = render_report(result.ledger, tmp_path / "aim.md")
    assert "the marginals it measured together with the column" in aim
    assert "it does not keep every distribution within a silo" in aim
    assert all(f"({m})" in aim for m in joint)
