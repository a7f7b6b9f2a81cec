"""A DP schema draft over the silos' parties (``schema draft --dp E --delta D --mpc``): real party,
dealer and coordinator processes over loopback TLS, OpenDP's samplers, real SQLite stores. The union's
counts are summed on secret shares with every party's own noise; each silo lists its candidate
category values under its own noise; party 0's ledger and every party's copy pass the audit."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.accounting import epsilon_to_rho
from privsyn_fed.accounting.budget_store import BudgetStore
from privsyn_fed.accounting.distributed import PartiesNoise
from privsyn_fed.audit import audit_ledger, load_ledger
from privsyn_fed.common import InputError
from privsyn_fed.draft_dp import plan_draft, profile_sensitivity
from privsyn_fed.mpc import policy
from privsyn_fed.mpc.draft import DraftSteps, DraftTable
from privsyn_fed.mpc.launch import local_federation
from privsyn_fed.mpc.policy import DRAFT, Refused
from privsyn_fed.mpc.request import ReleaseRequest

from .conftest import CLI, assert_one_line_error, finish, run_cli, start, start_dealer, start_party


def _silo(path, rows: int, seed: int, regions=("north", "south")) -> str:
    """A silo of people: whole-number ages, a sex, a region (``regions``), an income with a few missing."""
    rng = np.random.default_rng(seed)
    income = np.round(rng.gamma(2.0, 20_000.0, rows), 2).astype(object)
    income[rng.random(rows) < 0.05] = ""
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 90, rows),
            "sex": rng.choice(["F", "M"], rows),
            "region": rng.choice(list(regions), rows),
            "income": income,
        }
    )
    frame.to_csv(path, index=False)
    return str(path)


@pytest.fixture(scope="module")
def drafted(tmp_path_factory):
    """One draft over three silos on this machine; only the third holds the region 'east'."""
    folder = tmp_path_factory.mktemp("mpc-draft")
    silos = [
        _silo(folder / "a.csv", 1500, 1),
        _silo(folder / "b.csv", 1500, 2),
        _silo(folder / "c.csv", 1500, 3, ("north", "south", "east")),
    ]
    out = folder / "schema.json"
    run = run_cli("schema", "draft", *silos, "--out", out, "--dp", "3", "--delta", "1e-6", "--mpc", timeout=300)
    return folder, silos, out, run


def test_the_union_is_drafted_on_shares_and_a_value_of_one_silo_is_found(drafted):
    folder, silos, out, run = drafted
    assert run.returncode == 0, run.stderr[-3000:]
    assert "on secret shares among their parties under differential privacy" in run.stdout
    columns = {c["name"]: c for c in json.loads(out.read_text())["columns"]}
    assert columns["region"]["categories"][:3] == ["east", "north", "south"]  # only c.csv holds 'east'
    assert columns["sex"]["categories"][:2] == ["F", "M"]
    assert columns["age"]["integer"] and columns["age"]["lower"] <= 18 and columns["age"]["upper"] >= 89
    assert columns["age"]["upper"] <= 100  # the noise of every party together stays below the bounds' threshold
    assert columns["income"]["type"] == "numeric" and columns["income"].get("missing")
    assert "at or above the threshold" in run.stderr and "in at least one silo" in run.stderr
    document = json.loads(out.read_text())
    del document["_draft"]
    pf.Schema.from_dict(document)  # a schema a release can use


def test_party_0s_ledger_and_every_partys_copy_audit_and_agree(drafted):
    folder, silos, out, run = drafted
    ledger_path = out.with_suffix(".ledger.json")
    assert run_cli("audit", ledger_path).stdout.startswith("OK")
    ledger = load_ledger(ledger_path)
    assert ledger["details"]["mpc"]["parties"] == 3 and ledger["threat_model"].startswith("the silos draft on secret")
    kinds = [e["query"].split(" ")[0].rstrip(":") for e in ledger["entries"]]
    assert kinds == ["profile", "bounds", "categories", "counts", "categories", "counts", "bounds"]
    for e in ledger["entries"]:
        if "threshold" in e:  # each silo's own list: parallel composition over the three
            assert e["where"] == "silo" and e["parallel_over"] == "silos" and len(e["silos"]) == 3
            assert e["delta"] > 0 and "distributed" not in e
        else:  # everything else on secret shares, with every party's noise
            assert e["where"] == "mpc" and e["distributed"] == {"parties": 3, "collusion": 2}
    text = ledger_path.read_text()
    assert not (folder / "a.csv.ledgers").exists()  # party 0 keeps the ledger itself
    for name in ("b.csv", "c.csv"):
        (copy_path,) = sorted((folder / f"{name}.ledgers").glob("*.ledger.json"))
        copy = load_ledger(copy_path)
        assert audit_ledger(copy).ok, audit_ledger(copy).problems
        assert copy["method"] == DRAFT and copy["status"] == "complete"
        assert math.isclose(copy["rho_spent"], ledger["rho_spent"], rel_tol=1e-12)
        assert math.isclose(copy["delta"], ledger["delta"], rel_tol=1e-12)
        text += copy_path.read_text()
    assert "east" not in text and "north" not in text  # the ledgers name columns, never a value


def _tampered(ledger: dict, change) -> list[str]:
    copy = json.loads(json.dumps(ledger))
    change(copy)
    return audit_ledger(copy).problems


def test_the_audit_refutes_a_tampered_mpc_draft(drafted):
    folder, silos, out, run = drafted
    ledger = load_ledger(out.with_suffix(".ledger.json"))
    assert audit_ledger(ledger).ok
    entries = ledger["entries"]
    listed = next(i for i, e in enumerate(entries) if "threshold" in e)
    counted = next(i for i, e in enumerate(entries) if e["query"].startswith("counts of "))
    bounds = next(i for i, e in enumerate(entries) if "min_count" in e)

    def pooled(led):  # a candidates list claimed from the union (no parallel composition) on shares
        led["entries"][listed]["where"] = "mpc"

    def lower_threshold(led):
        led["entries"][bounds]["min_count"] -= 10
        led["details"]["draft"]["bounds_threshold"] -= 10

    def less_noise(led):  # each party's sigma halved, the cost rewritten to match
        e = led["entries"][counted]
        e["sigma"] /= 2
        e["rho"] *= 4

    def no_counts(led):
        del led["entries"][counted]

    assert any("are drafted in silo" in p for p in _tampered(ledger, pooled))
    assert any("min_count" in p or "bounds_threshold" in p for p in _tampered(ledger, lower_threshold))
    assert any("the draft's plan gives it" in p for p in _tampered(ledger, less_noise))
    assert any("not the ones its noisy profile decides" in p for p in _tampered(ledger, no_counts))


# ---- a party's side: sensitivities and the order of the steps --------------------------------------


def _plan(columns, epsilon=3.0):
    return plan_draft(epsilon, 1e-6, columns, 50, 32, (), PartiesNoise(3, 2))


@pytest.mark.parametrize("seed", range(4))
def test_a_silos_parts_move_by_at_most_their_sensitivity_on_d_and_d_plus_one_record(tmp_path, seed):
    rng = np.random.default_rng(100 + seed)
    d_path = _silo(tmp_path / "d.csv", 200, seed, ("north", "south", "east"))
    frame = pd.read_csv(d_path, dtype=str, keep_default_na=False)
    record = {
        "age": str(rng.choice(["17", "45", "1e9", "x", ""])),
        "sex": str(rng.choice(["F", "M", "other", ""])),
        "region": str(rng.choice(["north", "west", ""])),
        "income": str(rng.choice(["12.5", "", "-3", "n/a"])),
    }
    plus = pd.concat([frame, pd.DataFrame([record])], ignore_index=True)
    plus_path = tmp_path / "plus.csv"
    plus.to_csv(plus_path, index=False)
    columns = tuple(frame.columns)
    plan = _plan(columns)
    d, d1 = DraftTable(d_path, plan), DraftTable(plus_path, plan)
    assert np.linalg.norm(d1.profile() - d.profile()) <= profile_sensitivity(len(columns)) + 1e-12
    for column in columns:
        assert np.abs(d1.intervals(column) - d.intervals(column)).sum() <= 1
        listed = ["north", "south", "F", "M", "45"]
        assert np.abs(d1.value_counts(column, listed) - d.value_counts(column, listed)).sum() <= 1


def test_a_party_answers_each_draft_step_once_in_order_and_costs_it_itself(tmp_path):
    path = _silo(tmp_path / "s.csv", 300, 7)
    plan = _plan(("age", "sex", "region", "income"))
    steps = DraftSteps(plan, DraftTable(path, plan))

    def refused(op, **cmd):
        with pytest.raises(Refused) as info:
            steps.plan_step(op, cmd, None, None)
        return str(info.value)

    assert "comes after draft_profile" in refused("draft_bounds", column="age")
    (charge,), _ = steps.plan_step("draft_profile", {}, None, None)
    assert math.isclose(charge.sensitivity, profile_sensitivity(4)) and charge.cells == 41  # 1 + 10 per column
    assert charge.scale == plan.split.party_sigma(profile_sensitivity(4), plan.sigma_profile, 41)
    assert "answered already" in refused("draft_profile")
    assert "not a column of the draft" in refused("draft_bounds", column="zip")
    assert "comes after draft_candidates" in refused("draft_counts", column="sex", values=["F"])
    (charge,), _ = steps.plan_step("draft_candidates", {"column": "sex"}, None, None)
    assert charge.where == "silo" and charge.threshold == plan.threshold and charge.scale == plan.sigma_values
    assert "drafted already" in refused("draft_bounds", column="sex")
    assert "at most 50 distinct values" in refused("draft_counts", column="sex", values=[str(v) for v in range(51)])
    (charge,), _ = steps.plan_step("draft_counts", {"column": "sex", "values": ["F", "M"]}, None, None)
    assert charge.cells == 3 and charge.sensitivity == 1.0
    assert "not a step of a schema draft" in refused("noisy_sum")


def test_a_policy_may_accept_drafts_only_without_a_schema_and_a_drafts_budget_converts_at_half_delta(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"max_epsilon": 2, "max_delta": 1e-6, "methods": [DRAFT]}))
    pol = policy.load_policy(path)
    request = ReleaseRequest(DRAFT, 1.0, 1e-6, "a" * 64, False, 3, 2)
    assert pol.schema_sha256 is None and pol.refusal(request) is None
    assert math.isclose(request.rho, epsilon_to_rho(1.0, 0.5e-6), rel_tol=1e-12)
    assert "max_epsilon" in pol.refusal(ReleaseRequest(DRAFT, 3.0, 1e-6, "a" * 64, False, 3, 2))
    path.write_text(json.dumps({"max_epsilon": 2, "max_delta": 1e-6, "methods": [DRAFT, "distaim"]}))
    with pytest.raises(InputError, match="missing field 'schema_sha256'"):
        policy.load_policy(path)


@pytest.mark.parametrize(
    "extra, fragments",
    [
        (["--dp", "1", "--delta", "1e-6", "--mpc"], ("--mpc needs at least two silo parties",)),
        (["--dp", "1", "--delta", "1e-6", "--mpc", "--collusion", "3"], ("--collusion 3", "1..1")),
        (["--mpc"], ("--mpc and its options belong to --dp",)),
    ],
)
def test_bad_mpc_options_of_a_draft_are_one_line(tmp_path, capsys, extra, fragments):
    one = _silo(tmp_path / "a.csv", 50, 1)
    two = [_silo(tmp_path / "b.csv", 50, 2)] if "--collusion" in extra else []
    run = run_cli("schema", "draft", one, *two, "--out", tmp_path / "s.json", *extra, capsys=capsys)
    assert_one_line_error(run, *fragments)
    assert not (tmp_path / "s.json").exists() and not (tmp_path / "s.ledger.json").exists()


def test_a_party_drafts_or_serves_a_schema_not_both(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        run_cli("mpc-party", "--draft", "--schema", tmp_path / "s.json", "--silo", tmp_path / "a.csv", capsys=capsys)
    assert info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


# ---- across hosts: each party's own policy and budget store ----------------------------------------


def test_a_party_drafts_under_its_own_policy_and_settles_its_own_store(tmp_path):
    """Party 1 joins from its own host's command line with ``mpc-party --draft --policy``: the draft
    is within its policy, and its store is settled at the spend its ledger copy states."""
    pol = tmp_path / "policy.json"
    store = {"path": "p1.db", "dataset_id": "d1", "total_epsilon": 5.0}
    pol.write_text(json.dumps({"max_epsilon": 2.0, "max_delta": 1e-6, "methods": [DRAFT], "budget_store": store}))
    silo0, silo1 = _silo(tmp_path / "own.csv", 1500, 11), _silo(tmp_path / "theirs.csv", 1500, 12, ("north", "east"))
    fed = local_federation(tmp_path, 2)
    out, copy = tmp_path / "schema.json", tmp_path / "p1.ledger.json"
    # --dp 2 (within the policy); whether the spread-out incomes' bounds are found at this budget is
    # the noise's to say, and not what this test is about: --leave-unfound writes the draft either way
    party0 = [*CLI, "schema", "draft", silo0, "--out", str(out), "--dp", "2", "--delta", "1e-6", "--mpc"]
    party0 += ["--leave-unfound"]
    procs = {
        "party1": start_party(fed, 1, "--draft", "--silo", silo1, "--policy", pol, "--ledger", copy),
        "dealer": start_dealer(fed, 2),
        "party0": start([*party0, *fed.args(0), "--mpc-timeout", "60"]),
    }
    done = finish(procs)
    assert procs["party0"].returncode == 0, done["party0"][1][-3000:]
    assert procs["party1"].returncode == 0, done["party1"][1][-3000:]
    regions = next(c for c in json.loads(out.read_text())["columns"] if c["name"] == "region")["categories"]
    assert "east" in regions  # held by party 1's silo alone
    ledger, mine = load_ledger(out.with_suffix(".ledger.json")), load_ledger(copy)
    assert audit_ledger(ledger).ok and audit_ledger(mine).ok, audit_ledger(mine).problems
    assert math.isclose(mine["rho_spent"], ledger["rho_spent"], rel_tol=1e-12)
    run = BudgetStore(tmp_path / "p1.db").budget("d1").runs[-1]
    assert run["status"] == "complete" and math.isclose(run["rho_spent"], mine["rho_spent"], rel_tol=1e-12)


def test_a_silo_with_other_columns_is_refused_naming_them_and_no_value(tmp_path):
    path = tmp_path / "s.csv"
    pd.DataFrame({"age": [30, 41], "sex": ["F", "M"], "zip": ["02139", "75001"]}).to_csv(path, index=False)
    with pytest.raises(InputError) as info:
        DraftTable(path, _plan(("age", "sex", "region")))
    message = str(info.value)
    assert "missing 'region'" in message and "not in the draft 'zip'" in message
    assert "02139" not in message and "\n" not in message
