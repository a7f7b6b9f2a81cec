"""Bins users can shape: a numeric column's public cut points (``"edges"``) or a log scale, carried
by the schema, a data dictionary and the encoding every method shares; a DP draft proposes cut points
at its noisy histogram's quantiles at no further cost."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privsyn_fed as pf
from privsyn_fed.audit import audit_ledger, load_ledger
from privsyn_fed.common import InputError
from privsyn_fed.schema import NumericColumn, bin_edges, decode_codes, encode_frame, numeric_bin, refined
from privsyn_fed.silo import ICDM, Encoding, fit_mixture, mode_cdf

from .conftest import assert_one_line_error, run_cli, synth

INCOME = {"name": "income", "type": "numeric", "lower": -9000, "upper": 1341000}


def _column(**spec) -> NumericColumn:
    col = pf.Schema.from_dict({"columns": [{**INCOME, **spec}]}).columns[0]
    assert isinstance(col, NumericColumn)
    return col


COLUMNS = {
    "edges": {"edges": [0, 10000, 25000, 50000, 100000, 250000]},
    "integer edges": {"edges": [0, 10000, 25000, 50000, 100000, 1341000], "integer": True},
    "log": {"scale": "log", "bins": 12},
    "integer log": {"scale": "log", "bins": 12, "integer": True},
}


@pytest.mark.parametrize("kind", COLUMNS)
def test_every_value_falls_in_the_bin_whose_edges_hold_it_and_decodes_back_into_it(kind):
    col = _column(**COLUMNS[kind])
    lo, hi = bin_edges(col)
    assert len(lo) == col.n_bins and np.all(lo <= hi) and lo[0] == col.lower and hi[-1] == col.upper
    if col.integer:
        assert np.all(lo[1:] == hi[:-1] + 1)  # every whole number in exactly one bin
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(col.lower, col.upper, 5000), lo, hi, np.expm1(rng.uniform(0, 14, 5000))])
    x = np.clip(np.rint(x) if col.integer else x, col.lower, col.upper)
    b = numeric_bin(col, x)
    assert np.all((lo[b] <= x) & (x <= hi[b]))
    schema = pf.Schema.from_dict({"columns": [col.to_dict()]})
    codes = np.repeat(np.arange(col.n_bins), 50)[:, None]
    values = decode_codes(codes, schema, rng)["income"].to_numpy(dtype=float)
    assert np.all(numeric_bin(col, values) == codes[:, 0])


def test_a_log_scale_puts_equal_widths_in_log_and_integer_cuts_are_whole_and_distinct():
    col = _column(lower=0, upper=1_000_000, scale="log", bins=6)
    assert np.allclose(np.diff(np.log1p(np.concatenate([[0.0], col.cuts, [1e6]]))), math.log1p(1e6) / 6)
    small = _column(lower=0, upper=20, scale="log", bins=16, integer=True)
    assert small.n_bins < 16 and np.all(small.cuts == np.round(small.cuts)) and len(set(small.cuts)) == len(small.cuts)


@pytest.mark.parametrize("kind", COLUMNS)
def test_refined_bins_nest_inside_the_public_ones(kind):
    col = _column(**COLUMNS[kind])
    fine = refined(col, 4)
    lo, hi = bin_edges(col)
    flo, fhi = bin_edges(fine)
    assert col.n_bins < fine.n_bins <= 4 * col.n_bins
    coarse = numeric_bin(col, (flo + fhi) / 2 if not col.integer else flo)
    assert np.all((lo[coarse] <= flo) & (fhi <= hi[coarse]))  # each fine bin inside one public bin
    again = pf.Schema.from_dict({"columns": [fine.to_dict()]}).columns[0]
    assert again == fine


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ({"edges": [10, 5]}, '"edges" must increase strictly'),
        ({"edges": [-9000, 5]}, "edge -9000 is not inside the bounds"),
        ({"edges": [5, 2e6]}, "edge 2000000.0 is not inside the bounds"),
        ({"edges": [0.5], "integer": True}, 'the "edges" of an integer column are whole numbers'),
        ({"edges": [1, 2], "bins": 5}, '2 "edges" make 3 bins, not "bins" 5'),
        ({"edges": [1], "scale": "log"}, 'give "edges" or a "log" scale, not both'),
        ({"scale": "sqrt"}, '"scale" must be "linear" or "log"'),
        ({"edges": "0|10"}, '"edges" must be a list of finite numbers'),
    ],
)
def test_bad_edges_are_refused_in_one_line_naming_the_column(spec, fragment):
    with pytest.raises(InputError) as info:
        pf.Schema.from_dict({"columns": [{**INCOME, **spec}]})
    assert "column 'income'" in str(info.value) and fragment in str(info.value) and "\n" not in str(info.value)


def test_edges_survive_the_schema_file_and_a_data_dictionary(tmp_path, capsys):
    dictionary = tmp_path / "dict.csv"
    dictionary.write_text(
        "name,type,min,max,edges,scale,integer\n"
        "income,numeric,-9000,1341000,0|10000|25000|50000,,true\n"
        "weight,numeric,1,2000,,log,true\n"
    )
    assert run_cli("schema", "from-dictionary", dictionary, "--out", tmp_path / "s.json", capsys=capsys).returncode == 0
    doc = json.loads((tmp_path / "s.json").read_text())
    income, weight = doc["columns"]
    assert income["edges"] == [0, 10000, 25000, 50000] and "bins" not in income
    assert weight["scale"] == "log" and weight["bins"] == 32
    schema = pf.Schema.load(tmp_path / "s.json")
    assert schema.columns[0].n_bins == 5 and pf.Schema.from_dict(schema.to_dict()).columns == schema.columns
    (tmp_path / "bad.csv").write_text("name,type,min,max,edges\nincome,numeric,0,10,1|x\n")
    run = run_cli("schema", "from-dictionary", tmp_path / "bad.csv", "--out", tmp_path / "b.json", capsys=capsys)
    assert_one_line_error(run, "line 2, column 'edges'", "'1|x' is not numbers separated by '|'")


def test_fedtdas_encoding_travels_with_the_refined_edges():
    col = _column(**COLUMNS["edges"])
    fine = refined(col, 3)
    counts = np.arange(1, fine.n_bins + 1, dtype=float)
    mode = mode_cdf(fine, counts, fit_mixture(fine, counts, 2), 1e-4)
    schema = pf.Schema.from_dict({"columns": [col.to_dict()]})
    enc = Encoding(schema, [ICDM(np.ones(mode.components + 1) / (mode.components + 1))], [mode], 3.0)
    header, arrays = enc.to_wire()
    back = Encoding.from_wire(schema, json.loads(json.dumps(header)), arrays)
    assert back.modes[0].col == fine


def test_a_release_keeps_its_values_in_the_declared_bins(tmp_path):
    rng = np.random.default_rng(5)
    frame = pd.DataFrame(
        {"income": np.round(np.clip(rng.lognormal(10, 1.2, 3000), 0, 1341000)), "g": rng.choice(["a", "b"], 3000)}
    )
    spec = {
        "columns": [
            {**INCOME, **COLUMNS["integer edges"]},
            {"name": "g", "type": "categorical", "categories": ["a", "b"]},
        ]
    }
    schema = pf.Schema.from_dict(spec)
    codes, _ = encode_frame(frame, schema, "frame")
    result = pf.synthesize([frame], "fedtda", 1.0, 1e-9, schema=schema, seed=1, progress=False)
    synthetic = result.data["income"].to_numpy(dtype=float)
    assert np.all(synthetic >= -9000) and np.all(synthetic <= 1341000) and np.all(synthetic == np.round(synthetic))
    real_share = np.bincount(codes[:, 0], minlength=7) / len(codes)
    syn_share = np.bincount(numeric_bin(schema.columns[0], synthetic), minlength=7) / len(synthetic)
    assert np.abs(real_share - syn_share).sum() < 0.2  # the declared bins carry the distribution


# ---- a DP draft's bins at its noisy quantiles ------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(4, 40), st.booleans())
def test_quantile_cuts_lie_strictly_inside_the_bounds_and_increase(seed, bins, integer):
    from privsyn_fed.draft_dp import BOUNDS_GRID
    from privsyn_fed.draft_dp.bounds import quantile_cuts

    rng = np.random.default_rng(seed)
    noisy = rng.normal(0, 5, len(BOUNDS_GRID) + 1)
    first = int(rng.integers(170, 200))
    found = np.arange(first, first + int(rng.integers(1, 40)))
    noisy[found] += rng.lognormal(5, 2, len(found))
    lower, upper = float(BOUNDS_GRID[found[0] - 1]), float(BOUNDS_GRID[min(found[-1], len(BOUNDS_GRID) - 1)])
    spec = {"lower": lower, "upper": upper, "integer": integer}
    cuts = quantile_cuts(noisy, found, spec, bins)
    assert all(b > a for a, b in zip(cuts, cuts[1:]))
    assert all(lower < c < upper or integer and c == upper for c in cuts)
    assert not integer or all(c == int(c) for c in cuts)
    assert len(cuts) <= 2 * bins


def test_a_dp_draft_cuts_a_skewed_column_at_its_noisy_quantiles_at_no_further_cost(tmp_path):
    rng = np.random.default_rng(8)
    data = tmp_path / "t.csv"
    income = np.round(rng.lognormal(10.5, 1.0, 6000))
    # a column of 72 whole numbers would be drafted as a code in one run and not in another (its noisy
    # distinct count against --categorical-max 50): a measure of 1 decimal is numeric in both
    age = rng.uniform(18, 90, 6000).round(1)
    pd.DataFrame({"income": income, "age": age}).to_csv(data, index=False)
    out = tmp_path / "s.json"
    args = ["schema", "draft", data, "--out", out, "--dp", "2", "--delta", "1e-9", "--bins", "16"]
    assert run_cli(*args, "--edges", "quantiles").returncode == 0
    column = next(c for c in json.loads(out.read_text())["columns"] if c["name"] == "income")
    assert "edges" in column and 8 <= len(column["edges"]) + 1 <= 32
    document = json.loads(out.read_text())
    del document["_draft"]
    col = pf.Schema.from_dict(document).columns[0]
    share = np.bincount(numeric_bin(col, np.clip(income, col.lower, col.upper)), minlength=col.n_bins) / len(income)
    assert share.max() < 0.25  # uniform bins over these bounds put most of the rows in one bin
    ledger = load_ledger(out.with_suffix(".ledger.json"))
    assert ledger["details"]["draft"]["edges"] == "quantiles" and audit_ledger(ledger).ok
    plain = run_cli(
        *args[:-6], "--dp", "2", "--delta", "1e-9", "--ledger", tmp_path / "u.json", "--out", tmp_path / "u.json.s"
    )
    assert plain.returncode == 0
    same = load_ledger(tmp_path / "u.json")
    assert math.isclose(same["rho_spent"], ledger["rho_spent"]) and len(same["entries"]) == len(ledger["entries"])
    ledger["details"]["draft"]["edges"] = "deciles"
    assert any("details.draft.edges" in p for p in audit_ledger(ledger).problems)
    for edges, cut in ((["--edges", "quantiles"], True), ([], True), (["--edges", "uniform"], False)):  # plain drafts
        drafted = tmp_path / f"p{len(edges)}{cut}.json"
        proc = run_cli("schema", "draft", data, "--out", drafted, "--bins", "16", *edges)
        assert proc.returncode == 0
        column = next(c for c in json.loads(drafted.read_text())["columns"] if c["name"] == "income")
        assert ("edges" in column) is cut and ("bins" in column) is not cut
        assert ("'income'" in proc.stderr and "at its quantiles" in proc.stderr) is cut


@pytest.mark.parametrize(
    "column, fragment",
    [
        (
            {"name": "x", "type": "numeric", "lower": 0, "upper": 1, "bins": 1_000_000_000},
            "more than the 100,000 cells",
        ),
        ({"name": "x", "type": "numeric", "lower": -1.7e308, "upper": 1.7e308}, "beyond +-2^53"),
        ({"name": "x", "type": "numeric", "lower": 0, "upper": 1e18, "integer": True}, "beyond +-2^53"),
    ],
)
def test_schemas_that_cannot_be_binned_are_refused(column, fragment, tmp_path, capsys):
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps({"columns": [column]}))
    silo = tmp_path / "s.csv"
    silo.write_text("x\n0\n")
    assert_one_line_error(run_cli(*synth(schema_path, [silo], tmp_path / "o.csv"), capsys=capsys), fragment)


def test_whole_numbers_up_to_2_to_the_53_are_binned_exactly():
    import numpy as np

    from privsyn_fed.schema import NumericColumn, bin_edges, numeric_bin

    col = NumericColumn("id", 0.0, float(2**53), bins=50_000, integer=True)
    values = np.array([0, 1, 2**52 + 12345, 2**53 - 1, 2**53, 180_143_985_094_819], dtype=float)
    bins = numeric_bin(col, values)
    m = 2**53 + 1
    assert bins.tolist() == [int(v) * 50_000 // m for v in values]  # exact integer arithmetic
    lo, hi = bin_edges(col)
    assert np.all(lo[bins] <= values) and np.all(values <= hi[bins])
    assert lo[0] == 0 and hi[-1] == 2**53 and np.all(lo[1:] == hi[:-1] + 1)  # no whole number lost
