"""``--method independent``: every column's noisy 1-way marginal with the whole budget."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privsyn_fed as pf
from privsyn_fed.audit import audit_ledger
from privsyn_fed.methods.independent import oneway_sigma, total_estimate
from privsyn_fed.silo import MarginalsQuery

from .conftest import SCHEMA, assert_audit_objects_only_to_the_seed, make_frame, run_cli, synth_argv


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 60), st.integers(0, 10_000), st.integers(0, 10_000))
def test_one_record_moves_the_released_vector_by_exactly_sqrt_d(n, seed, pick):
    """D and D plus one record: the concatenated 1-ways differ by one in one cell of each of the d
    marginals, so by sqrt(d) in L2 -- the sensitivity the ledger charges."""
    schema = pf.Schema.from_dict(SCHEMA)
    d = pf.Silo.from_frame(make_frame(n, seed), schema)
    extra = make_frame(1, pick)
    d_plus = pf.Silo.from_frame(pd.concat([make_frame(n, seed), extra]), schema)
    query = MarginalsQuery(tuple((j,) for j in range(len(schema.columns))))
    diff = query(d_plus) - query(d)
    assert np.linalg.norm(diff) == pytest.approx(math.sqrt(len(schema.columns)))
    assert set(np.unique(diff)) <= {0, 1}


def test_the_ledger_is_one_gaussian_that_spends_the_budget_and_audits(schema, silo_paths):
    silos = [pf.Silo.from_csv(p, schema) for p in silo_paths]
    result = pf.synthesize(silos, "independent", 1.0, 1e-9)
    led = result.ledger
    (entry,) = led["entries"]
    d = len(schema.columns)
    assert entry["sensitivity_l2"] == pytest.approx(math.sqrt(d))
    assert entry["sigma"] == pytest.approx(oneway_sigma(led["rho_budget"], d))
    assert led["rho_spent"] == pytest.approx(led["rho_budget"], rel=1e-12)
    assert audit_ledger(led).ok, audit_ledger(led).problems
    entry["sensitivity_l2"], entry["rho"] = 1.0, 1.0 / (2 * entry["sigma"] ** 2)
    led["rho_spent"] = entry["rho"]
    led["epsilon"] = pf.accounting.rho_to_epsilon(entry["rho"], led["delta"])
    assert any("below the sound value sqrt(5)" in p for p in audit_ledger(led).problems)
    assert list(result.data.columns) == schema.names


def test_with_a_large_budget_the_columns_match_and_the_columns_are_independent(schema):
    frame = make_frame(4000, 7)
    result = pf.synthesize([pf.Silo.from_frame(frame, schema)], "independent", 500.0, 1e-9, rows=20_000, seed=3)
    syn = result.data
    assert_audit_objects_only_to_the_seed(result.ledger)
    for col in ("sex", "label"):
        real = frame[col].value_counts(normalize=True)
        assert (syn[col].value_counts(normalize=True) - real).abs().max() < 0.02
    assert syn["age"].between(18, 90).all() and syn["income"].between(0, 100).all()
    # income depends on age in the real rows, not in an independent release
    assert abs(np.corrcoef(frame["age"], frame["income"])[0, 1]) > 0.4
    assert abs(np.corrcoef(syn["age"].astype(float), syn["income"].astype(float))[0, 1]) < 0.05


def test_the_total_is_the_inverse_variance_mean_of_the_noisy_sums():
    marginals = [np.array([10, 20]), np.array([5, 5, 5, 5, 5, 5])]  # sums 30 and 30
    assert total_estimate(marginals) == pytest.approx(30.0)
    skewed = [np.array([100]), np.array([0] * 99)]
    assert total_estimate(skewed) == pytest.approx(100 * 1.0 / (1.0 + 1 / 99))
    assert total_estimate([np.array([-50, -3])]) == 1.0


def test_options_of_other_methods_are_refused(schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "o.csv"
    args = synth_argv("independent", schema=schema_path, silos=silo_paths[:1], out=out, rounds=3)
    code, _, err = run_cli(*args, capsys=capsys)
    assert code == 2
    assert "--rounds applies to --method aim or distaim or flaim, not independent" in err
    assert not out.exists() and not out.with_suffix(".ledger.json").exists()


def test_over_mpc_the_one_ways_are_one_secure_noisy_sum(schema_path, silo_paths, tmp_path):
    out = tmp_path / "o.csv"
    run = run_cli(
        *synth_argv("independent", schema=schema_path, silos=silo_paths, out=out, quiet=True, mpc=True), timeout=300
    )
    assert run.returncode == 0, run.stderr
    led = json.loads(out.with_suffix(".ledger.json").read_text())
    (entry,) = led["entries"]
    assert entry["where"] == "mpc" and "fixed_point" not in entry  # integer counts: no rounding
    audit = run_cli("audit", out.with_suffix(".ledger.json"))
    assert audit.returncode == 0, audit.stdout
    assert list(pd.read_csv(out).columns) == [c["name"] for c in SCHEMA["columns"]]


def test_evaluate_reports_a_release_beside_the_baseline(schema_path, silo_paths, tmp_path, capsys):
    base, release = tmp_path / "base.csv", tmp_path / "rel.csv"
    common = {"schema": schema_path, "silos": silo_paths, "quiet": True, "seed": 4}
    assert run_cli(*synth_argv("independent", out=base, **common), capsys=capsys).returncode == 0
    assert run_cli(*synth_argv("fedtda", out=release, **common), capsys=capsys).returncode == 0
    real = tmp_path / "real.csv"
    pd.concat([pd.read_csv(p) for p in silo_paths]).to_csv(real, index=False)
    report = tmp_path / "e.json"
    args = [
        "evaluate",
        "--real",
        real,
        "--synthetic",
        release,
        "--schema",
        schema_path,
        "--baseline",
        base,
        "--json",
        report,
    ]
    code, out, _ = run_cli(*args, capsys=capsys)
    assert code == 0
    assert "workload error" in out and "(baseline " in out and "the baseline" in out
    saved = json.loads(report.read_text())
    assert saved["baseline"]["file"] == str(base) and "error" in saved["baseline"]["workload"]


def test_the_ledger_states_the_expected_one_way_error_and_synth_warns_on_little_data(tmp_path, capsys):
    """On 150 rows a fixed split that gives the 1-ways half the budget, on refined bins, is
    materially worse than the independent method and synth says so; the planned split is not."""
    from .conftest import SCHEMA as schema_dict

    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps(schema_dict))
    small = tmp_path / "small.csv"
    make_frame(150, 2).to_csv(small, index=False)
    led = {}
    for name, method, split in (
        ("independent", "independent", None),
        ("planned", "fedtda", None),
        ("fixed", "fedtda", "0.05,0.2,0.35,0.4"),
    ):
        out = tmp_path / f"{name}.csv"
        args = synth_argv(method, schema=schema_path, silos=[small], out=out, quiet=True, split=split)
        code, _, err = run_cli(*args, capsys=capsys)
        assert code == 0
        led[name] = json.loads(out.with_suffix(".ledger.json").read_text())["details"]
        assert ("warning: expected 1-way error" in err) == (name == "fixed")
    assert led["independent"]["expected_oneway_tvd"] == pytest.approx(
        led["independent"]["expected_oneway_tvd_independent"]
    )
    assert led["fixed"]["expected_oneway_tvd"] > led["fixed"]["expected_oneway_tvd_independent"] + 0.01
    assert led["planned"]["expected_oneway_tvd"] < led["fixed"]["expected_oneway_tvd"]
