"""A target column (``synth --target Y``, ``target=`` in the API): its 2-way marginal with every other
column joins the workload, and a planned share of the budget measures all of them before the rounds;
public, recorded in the ledger and checked by the audit."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.audit import audit_ledger, load_ledger
from privsyn_fed.common import OptionError
from privsyn_fed.evaluation.utility import encode, marginal_errors
from privsyn_fed.methods import TARGET_GROUPS, target_starts
from privsyn_fed.methods.coarse import MergedMarginalQuery
from privsyn_fed.methods.workload import with_target

from .conftest import SCHEMA, assert_one_line_error, make_frame, run_cli

NAMES = [c["name"] for c in SCHEMA["columns"]]
PAIRS = [(0, 4), (1, 4), (2, 4), (3, 4)]  # every 2-way with "label"


def release(method: str, *, target: str | None = "label", seed: int | None = None, rows: int = 50, **options):
    frames = [make_frame(400, 1), make_frame(300, 2)]
    schema = pf.Schema.from_dict(SCHEMA)
    if method != "fedtda":
        options["pgm_iters"] = 50
    return pf.synthesize(frames, method, 1.0, 1e-9, schema=schema, rows=rows, target=target, seed=seed,
                         progress=False, **options)  # fmt: skip


def test_the_target_adds_its_two_ways_to_the_workload_summing_weights():
    cliques, weights = with_target([(0, 1, 4), (1, 4)], [1, 3], 5, 4)
    assert cliques == [(0, 1, 4), (0, 4), (1, 4), (2, 4), (3, 4)]
    assert weights == [1, 1, 3 + 1, 1, 1]


@pytest.mark.parametrize("method, rounds", [("aim", None), ("distaim", 3), ("flaim", None)])
def test_a_release_measures_the_targets_two_ways_first_at_its_share_and_audits(method, rounds):
    led = release(method, rounds=rounds).ledger
    entries, d = led["entries"], len(NAMES)
    first = 0 if rounds else 1  # after the planning total
    pairs = entries[first : first + d - 1]
    assert [e["query"] for e in pairs] == [f"marginal({NAMES[a]}, {NAMES[b]}) with the target" for a, b in PAIRS]
    before = led["rho_budget"] - sum(e["rho"] for e in entries[:first])
    sigma = math.sqrt((d - 1) / (2 * 0.2 * before))  # the default share, 0.2
    assert all(e["sensitivity_l2"] == 1 and math.isclose(e["sigma"], sigma, rel_tol=1e-9) for e in pairs)
    assert math.isclose(sum(e["rho"] for e in pairs), 0.2 * before, rel_tol=1e-9)
    assert all([NAMES[a], NAMES[b]] in led["details"]["workload"] for a, b in PAIRS)
    assert led["details"]["options"]["target"] == "label" and led["details"]["options"]["target_share"] == 0.2
    # age (8 cells) and income (6) on 4 merged groups with the label's 2; sex and region whole
    assert [e["cells"] for e in pairs] == [8, 8, 4, 8] and led["details"]["target_groups"] == 4
    report = audit_ledger(led)
    assert report.ok, report.problems


@pytest.mark.parametrize("seed", range(5))
def test_a_targets_merged_two_way_moves_by_one_cell_when_a_record_is_added(seed):
    """Sensitivity 1 on merged bins: one added record moves exactly one cell of the target's 2-way
    by one (``target_starts``, ``coarse.MergedMarginalQuery``), on any rows."""
    schema = pf.Schema.from_dict(SCHEMA)
    frame = make_frame(30 + seed, seed)
    pair, cells = ("age", "label"), [schema.shape[0], schema.shape[4]]
    starts = target_starts(pair, cells, "label", TARGET_GROUPS)
    assert starts is not None and [len(s) for s in starts] == [4, 2]
    query = MergedMarginalQuery((0, 4), starts)
    before = query(pf.Silo.from_frame(frame, schema))
    after = query(pf.Silo.from_frame(pd.concat([frame, make_frame(1, seed + 100)]), schema))
    assert np.abs(after - before).sum() == 1 and after.sum() == before.sum() + 1
    assert target_starts(("sex", "label"), [2, 2], "label", TARGET_GROUPS) is None  # nothing to merge


def test_the_audit_checks_the_targets_merged_cells():
    led = release("aim", seed=0).ledger
    wider = copy.deepcopy(led)
    wider["details"]["target_groups"] = 8
    assert "has 16" in _problems(wider) and "details.target_groups 8" in _problems(wider)
    old = copy.deepcopy(led)  # a ledger from before the groups: every cell
    del old["details"]["target_groups"]
    assert "the target's 2-way on its merged bins (details.target_groups None) has 16" in _problems(old)


def _problems(led: dict) -> str:
    return " | ".join(audit_ledger(led).problems)


def test_the_audit_refutes_a_target_release_that_was_tampered_with():
    # seeded: a noisy total near a planning boundary lets the tampered cost change the planned rounds
    # first, and the audit then reports the schedule instead of the target's share
    led = release("aim", seed=0).ledger
    quieter = copy.deepcopy(led)
    quieter["entries"][1]["sigma"] /= 2
    assert "the target's share 0.2 of the budget gives each of its 2-ways" in _problems(quieter)
    missing = copy.deepcopy(led)
    del missing["entries"][2]
    assert "an entry is missing or extra" in _problems(missing)
    unknown = copy.deepcopy(led)
    unknown["details"]["options"]["target"] = "zip"
    assert "details.options.target 'zip' is not one of details.columns" in _problems(unknown)
    hidden = copy.deepcopy(led)  # the ledger claims no target, but measured its 2-ways
    hidden["details"]["options"]["target"] = None
    assert not audit_ledger(hidden).ok
    shrunk = copy.deepcopy(led)
    shrunk["details"]["workload"].remove(["sex", "label"])
    assert "does not hold every 2-way marginal with the target 'label'" in _problems(shrunk)


def test_the_target_answers_the_labels_marginals_better():
    """On the same rows and budget, the label's 2-ways are closer with the target than without
    (three seeded releases each)."""
    real = np.vstack([encode(make_frame(n, s), pf.Schema.from_dict(SCHEMA), "real") for n, s in ((400, 1), (300, 2))])
    shape = pf.Schema.from_dict(SCHEMA).shape

    def error(target):
        out = []
        for seed in (11, 12, 13):
            syn = release("aim", target=target, seed=seed, rows=2000).data
            out.append(marginal_errors(real, encode(syn, pf.Schema.from_dict(SCHEMA), "syn"), list(shape), PAIRS))
        return float(np.mean(out))

    with_label, without = error("label"), error(None)
    assert with_label < without, (with_label, without)


def test_the_command_line_refuses_a_bad_target_before_any_output(tmp_path, capsys):
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    for name, seed in (("a", 3), ("b", 4)):
        make_frame(300, seed).to_csv(tmp_path / f"{name}.csv", index=False)
    base = ["synth", "--method", "distaim", "--schema", tmp_path / "schema.json"]
    base += ["--silo", tmp_path / "a.csv", "--silo", tmp_path / "b.csv"]
    base += ["--epsilon", "1", "--delta", "1e-9", "--rows", "20", "--rounds", "2", "--pgm-iters", "50", "--quiet"]
    out = tmp_path / "x.csv"
    for extra, fragment in [
        (["--target", "zip"], "target column 'zip' is not in the schema"),
        (["--target", "label", "--target-share", "1"], "--target-share must lie in (0, 1), not 1.0"),
        (["--target-share", "0.3"], "is the share of a target's 2-ways: give a target too"),
    ]:
        assert_one_line_error(run_cli(*base, *extra, "--out", out, capsys=capsys), fragment)
        assert not out.exists() and not (tmp_path / "x.ledger.json").exists()
    run = run_cli(*base, "--target", "label", "--target-share", "0.3", "--out", out, capsys=capsys)
    assert run.returncode == 0
    led = load_ledger(tmp_path / "x.ledger.json")
    assert led["details"]["options"]["target_share"] == 0.3 and audit_ledger(led).ok


def test_a_party_sums_the_targets_two_ways_but_no_other_for_distaim():
    from privsyn_fed.mpc.party_costs import own_rows
    from privsyn_fed.mpc.policy import Refused
    from privsyn_fed.silo import MarginalsQuery

    schema = pf.Schema.from_dict(SCHEMA)
    assert own_rows(MarginalsQuery(((0, 4), (3,))), schema, 0, "distaim", target=4) == (2, [])
    for target in (None, 3):
        with pytest.raises(Refused, match="its target's 2-ways only"):
            own_rows(MarginalsQuery(((0, 4),)), schema, 0, "distaim", target=target)
    with pytest.raises(Refused, match="its target's 2-ways only"):
        own_rows(MarginalsQuery(((0, 1, 4),)), schema, 0, "distaim", target=4)


@pytest.mark.parametrize("split", [None, (0.05, 0.2, 0.35, 0.4)])
def test_fedtda_releases_the_targets_two_ways_jointly_after_the_total_and_audits(split):
    led = release("fedtda", split=split).ledger
    total, pairs = led["entries"][:2]
    d, cells = len(NAMES), sum(pf.Schema.from_dict(SCHEMA).shape[:4]) * 2
    assert pairs["query"] == "the target's 2-way marginal with every other column" and pairs["cells"] == cells
    assert math.isclose(pairs["sensitivity_l2"], math.sqrt(d - 1))
    assert math.isclose(pairs["rho"], 0.2 * (led["rho_budget"] - total["rho"]), rel_tol=1e-9)
    report = audit_ledger(led)
    assert report.ok, report.problems
    quieter = copy.deepcopy(led)
    quieter["entries"][1]["sigma"] /= 2
    assert not audit_ledger(quieter).ok
    dropped = copy.deepcopy(led)
    del dropped["entries"][1]
    assert "an entry is missing or extra" in _problems(dropped)


def test_fedtda_draws_the_label_from_its_two_ways_given_the_other_columns(tmp_path):
    """Seeded: the synthetic label's 2-ways are closer to the real ones with the target than
    without (three releases each), and a saved model keeps the label's tables."""
    schema = pf.Schema.from_dict(SCHEMA)
    real = np.vstack([encode(make_frame(n, s), schema, "real") for n, s in ((400, 1), (300, 2))])

    def error(target):
        out = []
        for seed in (21, 22, 23):
            syn = release("fedtda", target=target, seed=seed, rows=3000).data
            out.append(marginal_errors(real, encode(syn, schema, "syn"), list(schema.shape), PAIRS))
        return float(np.mean(out))

    assert error("label") < error(None)
    kept = release("fedtda")  # unseeded: a saved model must audit
    kept.model.save(tmp_path / "m.model")
    model = pf.load_model(tmp_path / "m.model")
    assert set(model.sample(200, where={"label": "yes"})["label"]) == {"yes"}
    assert model.sample(3000, seed=1).equals(kept.model.sample(3000, seed=1))  # the label's tables were kept


def test_fedtda_refuses_a_numeric_target():
    with pytest.raises(OptionError) as info:
        release("fedtda", target="income")
    assert "fedtda's target must be a categorical column, and 'income' is numeric" in str(info.value)
