"""A numeric column's point masses (``"atoms"``) and written precision (``"decimals"``): parsing, cells,
encoding on both routes, decoding, conditions, releases, saved models and data dictionaries."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError
from privsyn_fed.model.conditions import conditions_from
from privsyn_fed.schema import bin_edges, bin_midpoints, decode_codes, encode_frame, numeric_histogram
from privsyn_fed.schema.encode_arrow import encode_batch

from .conftest import assert_audit_objects_only_to_the_seed, assert_one_line_error, run_cli, synth_argv

SPEND = {"name": "spend", "type": "numeric", "lower": 0, "upper": 1000, "bins": 10}
LAB = {"name": "lab", "type": "numeric", "lower": 20, "upper": 60, "bins": 8}
COUNT = {"name": "visits", "type": "numeric", "lower": 0, "upper": 20, "bins": 4, "integer": True}
GROUP = {"name": "group", "type": "categorical", "categories": ["a", "b", "c"]}


def _schema(*columns: dict) -> pf.Schema:
    return pf.Schema.from_dict({"columns": list(columns)}, source="s.json")


# ---- parsing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "column, fragment",
    [
        ({**SPEND, "atoms": [0, 1001]}, "atom 1001 is not inside the bounds [0, 1000]"),
        ({**SPEND, "atoms": [500, 0, 500]}, "atom 500 is listed twice"),
        ({**SPEND, "atoms": [0, "5"]}, '"atoms" must be a list of finite numbers'),
        ({**SPEND, "atoms": 0}, '"atoms" must be a list of finite numbers'),
        ({**SPEND, "atoms": list(range(65))}, '65 "atoms" are more than the 64'),
        ({**COUNT, "atoms": [2.5]}, "atoms of an integer column are whole numbers, not 2.5"),
        ({**SPEND, "decimals": -1}, '"decimals" must be a whole number from 0 to 15, not -1'),
        ({**SPEND, "decimals": 16}, '"decimals" must be a whole number from 0 to 15, not 16'),
        ({**SPEND, "decimals": 1.5}, '"decimals" must be a whole number from 0 to 15, not 1.5'),
        ({**SPEND, "decimals": True}, '"decimals" must be a whole number from 0 to 15, not True'),
        ({**COUNT, "decimals": 2}, 'an integer column is written as whole numbers; drop "decimals" 2'),
        ({**SPEND, "atoms": [0.25], "decimals": 1}, 'atom 0.25 has more than "decimals" 1 places'),
        ({**SPEND, "lower": 0.01, "upper": 0.04, "decimals": 1}, "no number with 1 decimals lies inside"),
    ],
)
def test_bad_atoms_and_decimals_are_one_line_errors_naming_the_column(column, fragment, tmp_path, capsys):
    with pytest.raises(InputError) as info:
        _schema(column)
    message = str(info.value)
    assert "\n" not in message and f"column '{column['name']}'" in message and fragment in message, message
    path = tmp_path / "schema.json"
    path.write_text(json.dumps({"columns": [column, GROUP]}))
    data = tmp_path / "data.csv"
    data.write_text(f"{column['name']},group\n1,a\n")
    proc = run_cli(*synth_argv(schema=path, silos=[data], out=tmp_path / "out.csv"), capsys=capsys)
    assert_one_line_error(proc, f"column '{column['name']}'", fragment)


def test_atoms_are_sorted_and_round_trip_through_the_schema_file(tmp_path):
    schema = _schema({**SPEND, "atoms": [500, 0], "decimals": 2}, {**COUNT, "atoms": [6, 5], "decimals": 0}, GROUP)
    spend, visits = schema.columns[0], schema.columns[1]
    assert spend.atoms == (0.0, 500.0) and spend.decimals == 2
    entry = visits.to_dict()
    assert entry["atoms"] == [5, 6] and all(type(a) is int for a in entry["atoms"]) and entry["decimals"] == 0
    assert "atoms" not in pf.Schema.from_dict({"columns": [SPEND]}).columns[0].to_dict()
    assert "decimals" not in pf.Schema.from_dict({"columns": [SPEND]}).columns[0].to_dict()
    for name in ("s.json", "s.yaml"):
        schema.save(tmp_path / name)
        assert pf.Schema.load(tmp_path / name).columns == schema.columns


def test_cell_layout_is_bins_then_atoms_then_missing():
    schema = _schema({**SPEND, "atoms": [0, 500], "missing": True}, {**LAB, "atoms": [60]})
    spend, lab = schema.columns
    assert (spend.n_bins, spend.first_atom_cell, spend.missing_cell, spend.size) == (10, 10, 12, 13)
    assert (lab.first_atom_cell, lab.missing_cell, lab.size) == (8, 9, 9)
    assert schema.shape == [13, 9]


# ---- encoding and decoding -------------------------------------------------------------------------


def test_atom_values_land_in_their_cells_and_decode_exactly():
    schema = _schema({**SPEND, "atoms": [0, 500], "missing": True}, {**COUNT, "atoms": [5, 6], "missing": True})
    frame = pd.DataFrame(
        {
            "spend": ["0", "500", "499.9", "", "1200", "-3", "0.0", "250"],
            "visits": ["5", "6", "7", "", "5.2", "25", "NA", "0"],
        }
    )
    codes, clipped = encode_frame(frame, schema, "t")
    # spend: atoms 0 and 500 in cells 10 and 11 (-3 clips to 0, an atom); missing last (12)
    assert codes[:, 0].tolist() == [10, 11, 4, 12, 9, 10, 10, 2]
    # visits: 4 bins of {0..5}, {6..10}, {11..15}, {16..20}; atoms 5, 6 in cells 4, 5; 5.2 rounds to 5
    assert codes[:, 1].tolist() == [4, 5, 1, 6, 4, 3, 6, 0]
    assert clipped == {"spend": 2, "visits": 1}
    out = decode_codes(codes, schema, np.random.default_rng(0))
    is_atom = codes[:, 0] >= 10
    assert out["spend"].to_numpy(dtype=float, na_value=np.nan)[is_atom & (codes[:, 0] < 12)].tolist() == [
        0.0,
        500.0,
        0.0,
        0.0,
    ]
    assert out["spend"].isna().tolist() == [False, False, False, True, False, False, False, False]
    assert out["visits"].tolist()[:2] == [5, 6] and out["visits"][4] == 5
    assert out["visits"].isna().tolist() == [False, False, False, True, False, False, True, False]
    again, _ = encode_frame(out, schema, "decoded")
    assert np.array_equal(again, codes)  # the round trip keeps every cell
    mids = bin_midpoints(codes, schema)
    assert mids[0, 0] == 0.0 and mids[1, 0] == 500.0 and np.isnan(mids[3, 0]) and mids[2, 0] == 450.0


def test_the_arrow_route_gives_the_pandas_cells():
    schema = _schema({**SPEND, "atoms": [0, 500], "missing": True}, {**COUNT, "atoms": [5, 20]}, GROUP)
    rng = np.random.default_rng(3)
    n = 500
    spend = np.where(rng.random(n) < 0.3, "0", np.round(rng.uniform(-10, 1100, n), 2).astype(str))
    spend[rng.random(n) < 0.1] = "500"
    spend[rng.random(n) < 0.05] = ""
    visits = rng.choice(["0", "5", "5.0", "7", "19.6", "20", "30"], n)
    frame = pd.DataFrame({"spend": spend, "visits": visits, "group": rng.choice(["a", "b", "c"], n)})
    codes, clipped, values = encode_frame(frame, schema, "t", with_values=True)
    batch = pa.RecordBatch.from_pandas(frame, preserve_index=False)
    a_codes, a_clipped, a_values = encode_batch(batch, schema, "t", 2)
    assert np.array_equal(a_codes, codes) and a_clipped == clipped
    assert np.array_equal(a_values, values, equal_nan=True)
    typed = pa.RecordBatch.from_pandas(frame.assign(visits=frame["visits"].astype(float)), preserve_index=False)
    assert np.array_equal(encode_batch(typed, schema, "t", 2)[0], codes)
    assert (codes[:, 0] == 10).sum() > 100 and (codes[:, 1] == 5).sum() > 50  # atoms met on both routes


def test_histogram_counts_atoms_in_their_cells_and_missing_last():
    col = _schema({**SPEND, "atoms": [0, 500], "missing": True}).columns[0]
    counts = numeric_histogram(col, np.array([0.0, 0.0, 500.0, 1.0, np.nan, 999.0]))
    assert counts.tolist() == [1] + [0] * 8 + [1] + [2, 1] + [1]


def test_integer_bins_never_draw_their_atoms():
    schema = _schema({**COUNT, "atoms": [5, 6, 10]})
    col = schema.columns[0]
    lo, hi = bin_edges(col)
    assert (lo[:2].tolist(), hi[:2].tolist()) == ([0, 6], [5, 10])  # bins {0..5} and {6..10} hold the atoms
    codes = np.repeat([[0], [1]], 20_000, axis=0)
    values = decode_codes(codes, schema, np.random.default_rng(7))["visits"].to_numpy(dtype=np.int64)
    first, second = values[:20_000], values[20_000:]
    assert set(first.tolist()) == {0, 1, 2, 3, 4}  # 5 is an atom: drawn from its own cell only
    assert set(second.tolist()) == {7, 8, 9}  # 6 and 10 are atoms
    for v in (0, 4, 7, 9):  # uniform over the others
        share = np.mean((first if v < 5 else second) == v)
        assert abs(share - (1 / 5 if v < 5 else 1 / 3)) < 0.02
    only_atoms = _schema({**COUNT, "bins": 21, "atoms": [3]})
    drawn = decode_codes(np.full((50, 1), 3), only_atoms, np.random.default_rng(0))["visits"]
    assert set(drawn.tolist()) == {3}  # a bin of atoms only gives its lowest value


def test_decimals_round_inside_the_bounds_and_write_short_text():
    schema = _schema({**LAB, "lower": 20.04, "upper": 59.97, "decimals": 1, "atoms": [59.9]})
    col = schema.columns[0]
    codes = np.concatenate([np.arange(col.size)] * 2000)[:, None]
    out = decode_codes(codes, schema, np.random.default_rng(1))
    v = out["lab"].to_numpy(dtype=float)
    assert v.min() >= 20.1 and v.max() <= 59.9  # the grid inside [20.04, 59.97]
    assert np.all(np.round(v, 1) == v)
    text = io.StringIO()
    out.to_csv(text, index=False)
    cells = text.getvalue().splitlines()[1:]
    assert all(re.fullmatch(r"\d+(\.\d)?", c) for c in cells), [c for c in cells if not re.fullmatch(r"\d+(\.\d)?", c)]


# ---- conditions ------------------------------------------------------------------------------------


def test_a_range_condition_holds_an_atom_exactly_when_its_value_is_inside():
    schema = _schema({**SPEND, "atoms": [0, 500], "missing": True}, {**COUNT, "atoms": [5, 6]})
    (inside,) = conditions_from({"spend": (0, 100)}, schema)
    w = inside.weights(schema)
    assert w[10] == 1.0 and w[11] == 0.0 and w[12] == 0.0 and w[0] == 1.0 and w[1] == 0.0
    (point,) = conditions_from({"spend": 500}, schema)
    assert point.weights(schema)[11] == 1.0 and point.weights(schema)[:10].sum() == 0
    (whole,) = conditions_from({"visits": (3, 8)}, schema)
    w = whole.weights(schema)
    # bin {0..5} without 5: 3, 4 of 0..4; bin {6..10} without 6: 7, 8 of 7..10; atom 5 and 6 inside
    assert w[:2].tolist() == [2 / 5, 2 / 4] and w[4:6].tolist() == [1.0, 1.0]
    codes = np.repeat([[0, 0], [0, 1], [0, 4]], 2000, axis=0)
    drawn = decode_codes(codes, schema, np.random.default_rng(2), {"visits": (3, 8)})["visits"].to_numpy(np.int64)
    assert set(drawn[:2000]) == {3, 4} and set(drawn[2000:4000]) == {7, 8} and set(drawn[4000:]) == {5}


# ---- releases --------------------------------------------------------------------------------------


def _table(n: int = 4000, seed: int = 11) -> pd.DataFrame:
    """Spending that is 0 in a quarter of rows, a lab value at its assay's ceiling (60) in 40%."""
    rng = np.random.default_rng(seed)
    group = rng.choice(["a", "b", "c"], n)
    spend = np.where(rng.random(n) < 0.25, 0.0, np.round(rng.gamma(2.0, 120.0, n), 2))
    lab = np.where(rng.random(n) < 0.4, 60.0, np.round(rng.uniform(20, 60, n), 3))
    return pd.DataFrame({"spend": np.clip(spend, 0, 1000), "lab": lab, "group": group})


def _release(columns: list[dict], tmp_path, method: str = "aim") -> tuple[pd.DataFrame, pd.DataFrame, str]:
    frame = _table()
    schema = _schema(*columns)
    result = pf.synthesize([frame], method, 10.0, 1e-9, schema=schema, seed=5, rows=4000)
    assert_audit_objects_only_to_the_seed(result.ledger)  # a release with atoms audits as any other
    path = tmp_path / f"{method}.csv"
    result.to_csv(path)
    return frame, result.data, path.read_text()


def test_declared_atoms_come_back_at_their_real_share(tmp_path):
    columns = [{**SPEND, "atoms": [0]}, {**LAB, "atoms": [60], "decimals": 1}, GROUP]
    real, syn, text = _release(columns, tmp_path)
    for name, atom, share in (("spend", 0.0, 0.25), ("lab", 60.0, 0.4)):
        real_share = float(np.mean(real[name] == atom))
        syn_share = float(np.mean(syn[name].to_numpy(dtype=float) == atom))
        assert abs(real_share - share) < 0.03
        assert abs(syn_share - real_share) < 0.03, (name, real_share, syn_share)  # stated tolerance: 3 points
    lab_cells = pd.read_csv(io.StringIO(text), dtype=str)["lab"]
    assert lab_cells.str.fullmatch(r"\d+(\.\d)?").all(), lab_cells[~lab_cells.str.fullmatch(r"\d+(\.\d)?")].head()
    assert pd.read_csv(io.StringIO(text), dtype=str)["spend"].str.len().max() > 6  # no decimals: full precision


def test_without_atoms_the_shared_values_vanish(tmp_path):
    real, syn, _ = _release([SPEND, LAB, GROUP], tmp_path)
    assert np.mean(real["spend"] == 0) > 0.2 and np.mean(real["lab"] == 60) > 0.35
    assert np.mean(syn["spend"].to_numpy(dtype=float) == 0) < 0.01  # the defect atoms fix
    assert np.mean(syn["lab"].to_numpy(dtype=float) == 60) < 0.01


def test_fedtda_refuses_atoms_in_one_line(tmp_path, capsys):
    schema = _schema({**SPEND, "atoms": [0]}, LAB, GROUP)
    with pytest.raises(InputError) as info:
        pf.synthesize([_table(200)], "fedtda", 1.0, 1e-9, schema=schema, seed=1)
    message = str(info.value)
    assert "\n" not in message and "column 'spend'" in message and 'remove "atoms"' in message
    schema.save(tmp_path / "schema.json")
    _table(200).to_csv(tmp_path / "rows.csv", index=False)
    argv = synth_argv("fedtda", schema=tmp_path / "schema.json", silos=[tmp_path / "rows.csv"], out=tmp_path / "o.csv")
    assert_one_line_error(run_cli(*argv, capsys=capsys), "column 'spend'", 'declares "atoms"', 'remove "atoms"')
    assert not (tmp_path / "o.csv").exists()
    decimals = _schema(SPEND, {**LAB, "decimals": 1}, GROUP)
    lab = pf.synthesize([_table(800)], "fedtda", 5.0, 1e-9, schema=decimals, seed=1, rows=500).data["lab"]
    assert np.all(np.round(lab.to_numpy(dtype=float), 1) == lab.to_numpy(dtype=float))  # decimals hold there too


def test_a_saved_model_keeps_atoms_and_decimals(tmp_path, capsys):
    schema = _schema({**SPEND, "atoms": [0]}, {**LAB, "atoms": [60], "decimals": 1}, GROUP)
    path = tmp_path / "m.model"
    pf.Synthesizer("aim", epsilon=10.0, delta=1e-9).fit([_table()], schema=schema).save(path)
    model = pf.load_model(path)
    assert model.schema.columns == schema.columns
    rows = model.sample(4000, seed=2)
    assert abs(np.mean(rows["spend"].to_numpy(dtype=float) == 0) - 0.25) < 0.04
    lab = rows["lab"].to_numpy(dtype=float)
    assert abs(np.mean(lab == 60) - 0.4) < 0.04 and np.all(np.round(lab, 1) == lab)
    assert np.all(model.sample(200, seed=3, where={"lab": 60})["lab"] == 60)  # an atom as a condition
    out = tmp_path / "more.csv"
    code, _, err = run_cli("sample", path, "--rows", "3000", "--out", out, "--seed", "4", capsys=capsys)
    assert code == 0, err
    written = pd.read_csv(out, dtype=str)
    assert written["lab"].str.fullmatch(r"\d+(\.\d)?").all() and abs(np.mean(written["lab"] == "60.0") - 0.4) < 0.04


# ---- data dictionaries -----------------------------------------------------------------------------


def test_a_data_dictionary_carries_atoms_and_decimals(tmp_path):
    from privsyn_fed.schema.dictionary import read_dictionary

    path = tmp_path / "dict.csv"
    path.write_text(
        "name,type,min,max,categories,integer,atoms,decimals\n"
        "spend,numeric,0,1000,,,0|500,2\n"
        "visits,numeric,0,20,,true,5,\n"
        "group,categorical,,,a|b,,,\n"
    )
    spend, visits, _ = read_dictionary(path).columns
    assert spend.atoms == (0.0, 500.0) and spend.decimals == 2 and visits.atoms == (5.0,) and visits.decimals is None
    path.write_text("name,type,min,max,atoms\nspend,numeric,0,1000,0|x\n")
    with pytest.raises(InputError, match=r"line 2, column 'atoms': column 'spend': '0\|x' is not numbers"):
        read_dictionary(path)
    path.write_text("name,type,categories,atoms\ng,categorical,a|b,1\n")
    with pytest.raises(InputError, match="categorical column 'g' takes no atoms"):
        read_dictionary(path)
    path.write_text("name,type,min,max,atoms\nspend,numeric,0,1000,2000\n")
    with pytest.raises(InputError, match=r"column 'spend': atom 2000 is not inside the bounds"):
        read_dictionary(path)


def test_the_quality_report_draws_a_column_with_atoms_and_missing_values(tmp_path, capsys):
    columns = [{**SPEND, "atoms": [0], "missing": True}, {**LAB, "atoms": [60], "decimals": 1}, GROUP]
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps({"columns": columns}))
    real = _table(600).astype({"spend": object})
    real.loc[real.index[:30], "spend"] = ""
    syn = pf.synthesize([real], "aim", 10.0, 1e-9, schema=_schema(*columns), seed=1, rows=500).data
    real.to_csv(tmp_path / "real.csv", index=False)
    syn.to_csv(tmp_path / "syn.csv", index=False)
    out = tmp_path / "quality.html"
    args = ["--real", tmp_path / "real.csv", "--synthetic", tmp_path / "syn.csv", "--schema", schema_path]
    code, _, err = run_cli("evaluate", *args, "--report", out, capsys=capsys)
    assert code == 0, err
    page = out.read_text(encoding="utf-8")
    assert "spend: real and synthetic histograms" in page and "lab: real and synthetic histograms" in page
