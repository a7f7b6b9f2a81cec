"""A workload users declare (``synth --workload FILE``, ``workload=`` in the API): the marginals a
release must answer well, with "*" for every other column and whole-number weights; public,
recorded in the ledger, driving the AIM family's selection, checked by the audit."""

from __future__ import annotations

import itertools
import json

import pytest

import privsyn_fed as pf
from privsyn_fed.audit import audit_ledger, load_ledger
from privsyn_fed.common import OptionError
from privsyn_fed.methods.workload import declared_workload, downward_closure

from .conftest import SCHEMA, assert_one_line_error, make_frame, run_cli

NAMES = ["age", "income", "sex", "region", "label"]


def test_a_star_stands_for_every_other_column_and_weights_add_up():
    cliques, weights = declared_workload(
        [["region", "*", "*"], {"columns": ["age", "region", "sex"], "weight": 4}], NAMES
    )
    others = [0, 1, 2, 4]
    assert cliques == sorted(tuple(sorted((3, *pair))) for pair in itertools.combinations(others, 2))
    assert weights[cliques.index((0, 2, 3))] == 5 and sum(weights) == 6 + 4
    assert declared_workload([["label", "*"]], NAMES) == ([(0, 4), (1, 4), (2, 4), (3, 4)], [1, 1, 1, 1])


def test_candidate_weights_sum_each_marginals_weight_times_the_columns_shared():
    closure = downward_closure([(0, 1), (1, 2)], [3, 2])
    assert closure[(1,)] == 3 + 2 and closure[(0,)] == 3 and closure[(2,)] == 2
    assert closure[(0, 1)] == 3 * 2 + 2 * 1 and closure[(1, 2)] == 3 * 1 + 2 * 2
    assert downward_closure([(0, 1), (1, 2)]) == downward_closure([(0, 1), (1, 2)], [1, 1])


@pytest.mark.parametrize(
    "entries, fragment",
    [
        ([], "workload must be a non-empty list"),
        ([["age", "zip"]], "workload entry 1: column 'zip' is not in the schema"),
        ([["age"], ["sex", "sex"]], "workload entry 2: column 'sex' is named twice"),
        ([["age", "*", "*", "*", "*", "*"]], "workload entry 1: 5 '*' but only 4 other columns"),
        ([{"columns": ["age"], "weight": 0}], "the weight must be a whole number from 1 to 100"),
        ([{"columns": ["age"], "weight": 1.5}], "the weight must be a whole number"),
        ([{"cols": ["age"]}], 'an object entry has "columns"'),
        ([[]], "a marginal is a non-empty list of column names"),
    ],
)
def test_a_bad_workload_is_refused_naming_the_entry(entries, fragment):
    with pytest.raises(OptionError) as info:
        declared_workload(entries, NAMES)
    assert fragment in str(info.value) and info.value.names == ("workload",)


def test_a_weighted_release_records_its_workload_and_audits(tmp_path):
    schema = pf.Schema.from_dict(SCHEMA)
    frames = [make_frame(400, 1), make_frame(300, 2)]
    declared = [{"columns": ["income", "label"], "weight": 5}, ["sex", "*"]]
    for method in ("aim", "distaim"):
        led = pf.synthesize(frames, method, 1.0, 1e-9, schema=schema, rows=20, rounds=7, pgm_iters=50,
                            workload=declared, progress=False).ledger  # fmt: skip
        assert led["details"]["workload"][0] == ["age", "sex"] and len(led["details"]["workload"]) == 5
        assert led["details"]["workload_weights"] == [1, 1, 5, 1, 1]
        assert audit_ledger(led).ok, (method, audit_ledger(led).problems)
        top = max(downward_closure([(1, 4)], [5]).values())
        selections = [e for e in led["entries"] if e["mechanism"] == "exponential"]
        assert selections and all(e["sensitivity"] >= top for e in selections)  # the weights drive the score


def test_the_command_line_reads_the_workload_file_and_names_its_faults(tmp_path, capsys):
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    silo = tmp_path / "a.csv"
    make_frame(300, 3).to_csv(silo, index=False)
    base = ["synth", "--method", "aim", "--schema", tmp_path / "schema.json", "--silo", silo, "--epsilon", "1"]
    base += ["--delta", "1e-9", "--rows", "20", "--rounds", "7", "--pgm-iters", "50", "--quiet"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([["label", "*"], ["age", "zip"]]))
    run = run_cli(*base, "--workload", bad, "--out", tmp_path / "x.csv", capsys=capsys)
    assert_one_line_error(run, f"{bad}: workload entry 2: column 'zip' is not in the schema")
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "x.ledger.json").exists()
    good = tmp_path / "w.json"
    good.write_text(json.dumps([["label", "*"]]))
    assert run_cli(*base, "--workload", good, "--out", tmp_path / "o.csv", capsys=capsys).returncode == 0
    led = load_ledger(tmp_path / "o.ledger.json")
    assert led["details"]["workload"] == [["age", "label"], ["income", "label"], ["sex", "label"], ["region", "label"]]
    assert "workload_weights" not in led["details"] and led["details"]["options"]["workload"] == "explicit"
    assert audit_ledger(led).ok
