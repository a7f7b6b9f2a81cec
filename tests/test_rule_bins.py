"""Bins cut where the constraints' ranges end (``schema.cut_at_rules``, ``schema cut-at-rules``)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privsyn_fed as pf
from privsyn_fed.model import Condition
from privsyn_fed.schema import bin_edges, cut_at_rules, cut_bins, encode_frame

from .conftest import assert_one_line_error, run_cli


def _schema(column: dict, rng: str) -> pf.Schema:
    return pf.Schema.from_dict(
        {
            "columns": [column, {"name": "job", "type": "categorical", "categories": ["a", "b"], "missing": True}],
            "constraints": [{"if": {"x": rng}, "then": {"job": [None]}}],
        }
    )


@st.composite
def columns_and_ranges(draw):
    """A numeric column (integer or real; uniform, log-scale or given cut points; atoms) and a range
    inside or across its bounds."""
    integer = draw(st.booleans())
    lower = draw(st.integers(-50, 50))
    upper = lower + draw(st.integers(3, 200))
    col = {"name": "x", "type": "numeric", "lower": lower, "upper": upper, "integer": integer}
    kind = draw(st.sampled_from(["uniform", "log", "edges"]))
    if kind == "uniform":
        col["bins"] = draw(st.integers(1, 40))
    elif kind == "log":
        col["bins"], col["scale"] = draw(st.integers(2, 20)), "log"
    else:
        top = upper if integer else upper - 1  # a real column's cut points lie strictly inside its bounds
        cuts = draw(st.lists(st.integers(lower + 1, top), min_size=1, max_size=10, unique=True))
        col["edges"] = sorted(cuts)
    if draw(st.booleans()):
        col["atoms"] = [draw(st.integers(lower, upper))]
    a = draw(st.integers(lower - 5, upper))
    b = draw(st.integers(max(a, lower), upper + 10))  # the range meets the bounds (else the schema refuses it)
    if not integer:  # ends between whole numbers too, the range still meeting the bounds
        a = min(a + draw(st.sampled_from([0, 0.1, 0.5])), upper)
        b = max(b + draw(st.sampled_from([0, 0.1, 0.5])), a)
    return col, f"{a:g}..{b:g}"


@settings(max_examples=150, deadline=None)
@given(columns_and_ranges())
def test_after_the_cut_every_bin_is_wholly_inside_or_outside_the_range_and_nests_in_an_old_one(case):
    column, rng = case
    before = _schema(column, rng)
    after = cut_at_rules(before)
    old, new = before.column("x"), after.column("x")
    values = before.constraints[0].when[0]
    w = Condition(values).weights(before)[: old.n_bins]
    assert bool(np.all((w == 0) | (w == 1))) == (not cut_bins(before))
    w_new = Condition(after.constraints[0].when[0]).weights(after)[: new.n_bins]
    assert np.all((w_new == 0) | (w_new == 1)), w_new  # exactly: structural zeros test for 0 and 1
    assert cut_bins(after) == [] and cut_at_rules(after) is after
    # every value keeps its old bin: each new bin lies inside one old bin, and atoms are untouched
    grid = np.linspace(old.lower, old.upper, 4001)
    if old.integer:
        grid = np.unique(np.round(grid))
    else:  # a real value on an equal-width edge may round to either side of it: keep off the edges
        starts = bin_edges(old)[0]
        grid = grid[np.abs(grid[:, None] - starts[None, :]).min(axis=1) > 1e-9 * (1 + abs(old.upper))]
    frame = pd.DataFrame({"x": grid, "job": "a"})
    cells = np.stack([encode_frame(frame, s, "grid")[0][:, 0] for s in (before, after)], axis=1)
    pairs = {(int(o), int(n)) for o, n in cells}
    assert len({n for _, n in pairs}) == len(pairs), "a new bin straddles two old ones"
    assert new.atoms == old.atoms and new.n_bins == old.n_bins + len(cut_bins(before))


def test_the_ages_rule_cuts_the_bin_that_holds_both_sides_of_it():
    schema = _schema({"name": "x", "type": "numeric", "lower": 0, "upper": 99, "integer": True, "bins": 32}, "..14")
    cuts = cut_bins(schema)
    assert [(c.at, c.low, c.high) for c in cuts] == [(15.0, 13.0, 15.0)]
    assert "constraint #1" in cuts[0].constraint
    edges = cut_at_rules(schema).column("x").edges
    assert 15.0 in edges and 13.0 in edges and len(edges) == 32


def _ages(n: int, seed: int) -> pd.DataFrame:
    """Ages 0..99; from 15 on most people hold a job, and none below."""
    rng = np.random.default_rng(seed)
    age = rng.integers(0, 100, n)
    job = np.where(age >= 15, np.where(rng.random(n) < 0.9, rng.choice(["a", "b"], n), ""), "")
    return pd.DataFrame({"x": age, "job": job})


def test_a_release_on_cut_bins_keeps_the_ages_rejection_would_thin(tmp_path):
    drafted = _schema({"name": "x", "type": "numeric", "lower": 0, "upper": 99, "integer": True, "bins": 32}, "..14")
    rows = _ages(20_000, 1)
    real = float(rows["x"].between(13, 14).mean())
    shares = {}
    for name, schema in (("drafted", drafted), ("cut", cut_at_rules(drafted))):
        syn = pf.synthesize([rows], "aim", 4.0, 1e-9, schema=schema, rows=20_000, seed=3, progress=False).data
        ages = pd.to_numeric(syn["x"])
        assert not ((ages <= 14) & syn["job"].notna()).any()  # no row breaks the rule either way
        shares[name] = float(ages.between(13, 14).mean())
    # on 13..15 the model holds 15's workers; rejection keeps a third of them and so drops 13-14-year-olds
    assert abs(shares["cut"] - real) < 0.004, (shares, real)
    assert shares["drafted"] < real - 0.004, (shares, real)


def test_the_command_writes_the_cut_schema_and_names_each_cut(tmp_path, capsys):
    path, out = tmp_path / "s.json", tmp_path / "cut.json"
    schema = _schema({"name": "x", "type": "numeric", "lower": 0, "upper": 99, "integer": True, "bins": 32}, "..14")
    path.write_text(json.dumps(schema.to_dict()))
    code, stdout, _ = run_cli("schema", "cut-at-rules", path, "--out", out, capsys=capsys)
    assert code == 0 and "x: bin 13..15 cut at 15 (constraint #1)" in stdout
    assert pf.Schema.load(out).column("x").edges == cut_at_rules(schema).column("x").edges
    before = out.read_bytes()
    assert_one_line_error(run_cli("schema", "cut-at-rules", path, "--out", out), "already exists", "--force")
    assert out.read_bytes() == before
    code, stdout, _ = run_cli("schema", "cut-at-rules", out, "--out", tmp_path / "again.json", capsys=capsys)
    assert code == 0 and "unchanged" in stdout
    assert_one_line_error(run_cli("schema", "cut-at-rules", tmp_path / "nope.json", "--out", tmp_path / "n.json"))


@pytest.mark.parametrize("cut", [False, True])
def test_synth_names_the_bins_its_constraints_divide(tmp_path, cut):
    schema = _schema({"name": "x", "type": "numeric", "lower": 0, "upper": 99, "integer": True, "bins": 32}, "..14")
    schema = cut_at_rules(schema) if cut else schema
    (tmp_path / "s.json").write_text(json.dumps(schema.to_dict()))
    _ages(2_000, 2).to_csv(tmp_path / "a.csv", index=False)
    argv = ["synth", "--schema", tmp_path / "s.json", "--silo", tmp_path / "a.csv", "--out", tmp_path / "o.csv"]
    proc = run_cli(*argv, "--epsilon", "1", "--delta", "1e-9", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    note = [line for line in proc.stderr.splitlines() if "the constraints divide" in line]
    assert note == ([] if cut else [note[0]]) and (cut or "x 13..15 at 15" in note[0] and "cut-at-rules" in note[0])


def test_the_api_logs_the_bins_its_constraints_divide(caplog):
    schema = _schema({"name": "x", "type": "numeric", "lower": 0, "upper": 99, "integer": True, "bins": 32}, "..14")
    with caplog.at_level("WARNING", logger="privsyn_fed"):
        pf.synthesize([_ages(2_000, 2)], "aim", 1.0, 1e-9, schema=schema, rows=100, seed=1, progress=False)
    assert any("the constraints divide 1 bin(s) (x 13..15 at 15)" in r.getMessage() for r in caplog.records)


def test_the_command_keeps_a_drafts_note_and_every_other_key(tmp_path, capsys):
    schema = _schema({"name": "x", "type": "numeric", "lower": 0, "upper": 99, "integer": True, "bins": 32}, "..14")
    document = {"_draft": "drafted from rows.csv: review before a release", "comment": "kept", **schema.to_dict()}
    path, out = tmp_path / "s.json", tmp_path / "cut.json"
    path.write_text(json.dumps(document))
    assert run_cli("schema", "cut-at-rules", path, "--out", out, capsys=capsys).returncode == 0
    written = json.loads(out.read_text())
    assert written["_draft"] == document["_draft"] and written["comment"] == "kept"
    assert written["constraints"] == document["constraints"] and written["columns"][1] == document["columns"][1]
    assert pf.Schema.load(out).private_draft  # still a draft a release refuses until reviewed
