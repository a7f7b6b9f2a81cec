"""Each silo's party protects its own rows: its policy is checked before its silo is read, it costs
every step itself against its own budget, refuses what its accounting does not cover, settles its
own budget store and writes its own ledger copy. Real party, dealer and coordinator processes on
loopback (TLS, a throw-away federation), real SQLite stores, OpenDP's samplers."""

from __future__ import annotations

import json
import math
import sqlite3
import sys

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.accounting import epsilon_to_rho
from privsyn_fed.accounting.budget_store import BudgetStore
from privsyn_fed.audit import audit_ledger, load_ledger
from privsyn_fed.common import InputError
from privsyn_fed.mpc import policy, secure
from privsyn_fed.mpc.aggregator import schema_fingerprint
from privsyn_fed.mpc.launch import local_federation
from privsyn_fed.mpc.party_costs import PoolState, local_select_charge, noisy_sum_charge, own_rows, select_charge
from privsyn_fed.mpc.request import ReleaseRequest
from privsyn_fed.silo import ConcatQuery, LocalScoresQuery, MarginalsQuery, MaskedQuery, answer

from .conftest import CLI, SCHEMA, assert_one_line_error, finish, make_frame, never_opened, run_cli, start, synth_argv

# ---- the policy file ----------------------------------------------------------------------------


def _policy(tmp_path, **fields):
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    doc = {
        "max_epsilon": 1.0,
        "max_delta": 1e-9,
        "methods": ["distaim"],
        "schema_sha256": schema_fingerprint(pf.Schema.load(schema)),
        **fields,
    }
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({k: v for k, v in doc.items() if v is not None}))
    return path


@pytest.mark.parametrize(
    "fields, fragment",
    [
        ({"max_epsilon": 0}, "field 'max_epsilon' must be a number above 0"),
        ({"max_delta": 0.5}, "field 'max_delta' must be a number above 0 and below 0.1"),
        ({"methods": ["aim"]}, "field 'methods' names 'aim'"),
        ({"schema_sha256": "abc"}, "field 'schema_sha256' must be the schema's SHA-256"),
        ({"max_epsilom": 1}, "unknown field 'max_epsilom'"),
        ({"methods": None}, "missing field 'methods'"),
        ({"min_collusion": 0}, "field 'min_collusion' must be a whole number"),
        ({"budget_store": {"path": "b.db", "dataset_id": "d"}}, "missing field 'budget_store.total_epsilon'"),
        ({"budget_store": {"path": "no/such/b.db", "dataset_id": "d", "total_epsilon": 1}}, "budget_store.path"),
        (
            {"budget_store": {"path": "b.db", "dataset_id": "d\nrun 2: fake", "total_epsilon": 1}},
            "field 'budget_store.dataset_id' 'd\\nrun 2: fake': a dataset id must be printable text",
        ),
    ],
)
def test_a_bad_policy_is_one_line_naming_the_file_and_the_field(tmp_path, capsys, fields, fragment):
    path = _policy(tmp_path, **fields)
    with pytest.raises(InputError) as info:
        policy.load_policy(path)
    assert str(path) in str(info.value) and fragment in str(info.value)
    # and from the command line: exit 2, one line, before the party joins anything
    fed = local_federation(tmp_path, 2)
    (tmp_path / "silo.csv").write_text("")
    run = run_cli(
        "mpc-party",
        *fed.args(1),
        "--schema",
        tmp_path / "schema.json",
        "--silo",
        tmp_path / "silo.csv",
        "--policy",
        path,
        "--mpc-timeout",
        "5",
        capsys=capsys,
    )
    assert_one_line_error(run, str(path), fragment)


def test_a_policy_accepts_only_what_it_names(tmp_path):
    pol = policy.load_policy(_policy(tmp_path, methods=["distaim", "fedtda"], min_collusion=2))
    ok = ReleaseRequest("fedtda", 0.5, 1e-10, pol.schema_sha256, False, 3, 2)
    assert pol.refusal(ok) is None
    for change, reason in [
        ({"method": "flaim"}, "method flaim is not among"),
        ({"epsilon": 1.5}, "more than its policy's max_epsilon 1"),
        ({"delta": 1e-8}, "more than its policy's max_delta 1e-09"),
        ({"schema": "0" * 64}, "agreed to schema sha256"),
        ({"collusion": 1}, "below its policy's min_collusion 2"),
    ]:
        request = ReleaseRequest(**{**ok.__dict__, **change})
        assert reason in (pol.refusal(request) or ""), change


# ---- the party's own sensitivity rules (no processes) -----------------------------------------------


def test_the_party_costs_its_own_rows_from_the_query_it_answers(tmp_path):
    schema = pf.Schema.load(_policy(tmp_path).parent / "schema.json")
    one_ways = ConcatQuery((MarginalsQuery(((0,),)), MarginalsQuery(((2,), (3,)))))
    assert own_rows(one_ways, schema, 1, "independent") == (3, [])
    masked = ConcatQuery((MaskedQuery(MarginalsQuery(((0, 2),)), (1,)), MaskedQuery(MarginalsQuery(((3,),)), (2,))))
    assert own_rows(masked, schema, 1, "flaim") == (1, []) and own_rows(masked, schema, 0, "flaim") == (0, [])
    with pytest.raises(policy.Refused, match="1-way marginals and its target.s 2-ways only"):
        own_rows(MarginalsQuery(((0, 2),)), schema, 1, "distaim")
    with pytest.raises(policy.Refused, match="distaim sends no noisy sum of concat queries"):
        own_rows(masked, schema, 1, "distaim")
    charge = noisy_sum_charge(MarginalsQuery(((0,), (2,))), {"among": [0, 1], "sigma": 4.0}, schema, 1, None, 2)
    assert charge is not None and math.isclose(charge.sensitivity, math.sqrt(2)) and charge.cells == 8 + 2
    assert noisy_sum_charge(MarginalsQuery(((0,),)), {"among": [0], "sigma": 4.0}, schema, 1, None, 2) is None


@pytest.mark.parametrize("seed", range(5))
def test_the_sensitivity_a_party_charges_bounds_its_answer_on_d_and_d_plus_one_record(seed):
    """For a silo D and D plus one of its own rows (drawn with a fixed seed), the L2 distance between
    the party's answers is at most the sensitivity its noisy-sum charge states, for every query kind a
    method may send it (1-ways, a masked batch with several columns)."""
    schema = pf.Schema.from_dict(SCHEMA)
    frame = make_frame(200, seed=seed)
    rng = np.random.default_rng(seed)
    plus_one = pd.concat([frame, frame.iloc[[int(rng.integers(len(frame)))]]], ignore_index=True)
    d, d1 = pf.Silo.from_frame(frame, schema, name="d"), pf.Silo.from_frame(plus_one, schema, name="d+1")
    batch = ConcatQuery((MaskedQuery(MarginalsQuery(((0, 2),)), (1,)), MaskedQuery(MarginalsQuery(((3,),)), (1,))))
    queries = [
        (MarginalsQuery(((0,), (1,), (2,), (3,))), "independent"),
        (batch, "flaim"),
    ]
    for q, method in queries:
        charge = noisy_sum_charge(q, {"among": [0, 1], "sigma": 4.0}, schema, 1, method, 2)
        moved = np.linalg.norm(answer(q, d1, 1).astype(float) - answer(q, d, 1).astype(float))
        assert charge is not None and moved <= charge.sensitivity + 1e-12, (method, moved, charge.sensitivity)


def test_a_selection_costs_what_the_arrays_the_party_scores_with_allow():
    pool = PoolState(8 + 2 + 16, sizes=[8, 2, 16], mine=True)  # cliques (age), (sex), (age, sex)
    unit = 1 << secure.SCORE_BITS
    honest = {
        "cells": np.arange(26, dtype=np.int64),
        "segment_ids": np.repeat(np.arange(3), [8, 2, 16]).astype(np.int64),
        "model": np.concatenate([np.full(8, unit // 8), np.full(2, unit // 2), np.full(16, unit // 16)]).astype(
            np.int64
        ),
        "weights": np.array([1, 3, 2], dtype=np.int64),
        "offsets": np.zeros(3, dtype=np.int64),
        "total_cells": np.arange(8, dtype=np.int64),
    }
    cmd = {"scale": 1e6, "draws": 1, "noise_parties": 2}
    request = ReleaseRequest("distaim", 1.0, 1e-9, "0" * 64, False, 2, 1)
    c = select_charge(cmd, honest, pool, request, 2)
    assert c is not None and c.sensitivity == 2.0 * 3  # AIM's 2 max w
    eps_s = math.ldexp(2.0 * 6, secure.SCORE_BITS) / 1e6
    assert math.isclose(c.scale, eps_s + 4 / 1e6) and c.fields["fixed_point"]["epsilon_sampled"] == eps_s
    # a cell counted twice, or model marginals heavier than a distribution, move the score more
    cells = honest["cells"].copy()
    cells[9] = 8  # candidate (sex), weight 3, counts its cell 8 twice
    assert select_charge(cmd, {**honest, "cells": cells}, pool, request, 2).sensitivity == 3 * (2 + 1)
    heavy = {**honest, "model": honest["model"] * 2}  # model marginals of mass 2
    assert select_charge(cmd, heavy, pool, request, 2).sensitivity == 3 * (1 + 2)
    with pytest.raises(policy.Refused, match="a coalition of 1 must miss one"):
        select_charge({**cmd, "noise_parties": 1}, honest, pool, request, 2)
    assert select_charge(cmd, honest, PoolState(26, sizes=[8, 2, 16], mine=False), request, 2) is None


def test_a_silos_own_selection_costs_2_or_4_max_w(tmp_path):
    schema = pf.Schema.load(_policy(tmp_path).parent / "schema.json")
    probs = (np.full(8, 1 / 8), np.full(2, 1 / 2))
    naive = LocalScoresQuery(((0,), (2,)), (1.0, 5.0), probs, 3.0)
    c = local_select_charge(naive, {"among": [1], "scale": 2.0}, schema, 1, 2)
    assert c.sensitivity == 2 * 5 and c.scale == 2 * 10 / 2.0 and c.where == "silo"
    proxy = tuple(np.full(n, 1 / n) for n in schema.shape)
    private = LocalScoresQuery(((0,), (2,)), (1.0, 5.0), probs, 3.0, proxy)
    assert local_select_charge(private, {"among": [1], "scale": 2.0}, schema, 1, 2).sensitivity == 4 * 5
    bad = LocalScoresQuery(((0,),), (1.0,), (np.full(8, 1.0),), 3.0)  # a "distribution" of mass 8
    assert local_select_charge(bad, {"among": [1], "scale": 2.0}, schema, 1, 2).sensitivity == 1 + 8


# ---- processes ----------------------------------------------------------------------------------------

#: Party 0 as the command line runs it: the parties' policy round, then its own reservation and
#: silo, then the release (``cli.synth``); an input error is one line and exit status 2.
PARTY0 = r"""
import json, sys
from privsyn_fed.accounting.budget_store import reserved
from privsyn_fed.cli.common import one_line
from privsyn_fed.common import InputError
from privsyn_fed.mpc.launch import coordinator

from privsyn_fed.release import ReleaseRequest, run_release
from privsyn_fed.schema import Schema

cfg = json.loads(sys.argv[1])
try:
    request = ReleaseRequest.of(cfg["method"], cfg["epsilon"], cfg["delta"], Schema.load(cfg["schema"]), None,
                                silos=2, mpc=True, **cfg["options"])
    with coordinator(
        cfg["schema"], [cfg["silo"]], federation=cfg["federation"], cert=cfg["cert"], key=cfg["key"],
        collusion=cfg["collusion"], timeout_s=60, release=request.terms(),
    ) as agg:
        with reserved(cfg["store"], "d0", epsilon=cfg["epsilon"], delta=cfg["delta"], method=cfg["method"],
                      total_epsilon=5.0, ledger=cfg["ledger"]) as reservation:
            agg.begin()
            result = run_release(request.with_silo_names(agg.silo_names), [agg.own], aggregator=agg,
                                 reservation=reservation, ledger_path=cfg["ledger"])
except InputError as exc:
    print(f"privsyn-fed: error: {one_line(exc)}", file=sys.stderr)
    sys.exit(2)
print(json.dumps({"rho_spent": result.ledger["rho_spent"]}))
"""


def _silo(path, rows, seed):
    make_frame(rows, seed=seed).to_csv(path, index=False)
    return path


def _store(path, dataset, total, spent_epsilon=None):
    """A budget store with ``dataset`` (total epsilon ``total`` at 1e-9) and, if given, one settled run."""
    store = BudgetStore(path)
    run = store.reserve(dataset, epsilon=spent_epsilon or 0.01, delta=1e-9, method="aim", total_epsilon=total)
    if spent_epsilon:
        run.settle(epsilon_to_rho(spent_epsilon, 1e-9), "complete")
    else:
        run.settle(0.0, "rejected")
    store.close()
    return path


def _dump(path):
    with sqlite3.connect(path) as db:
        return list(db.iterdump())


def _party1(fed, schema, silo, pol, ledger, *extra):
    args = [*fed.args(1), "--mpc-timeout", "60", "--schema", str(schema), "--silo", str(silo), "--ledger", str(ledger)]
    return start(CLI + ["mpc-party", *args, *(["--policy", str(pol)] if pol else []), *extra])


def _dealer(fed, rank):
    return start(CLI + ["mpc-dealer", *fed.args(rank), "--mpc-timeout", "60"])


def _party0(fed, cfg):
    access = {"federation": str(fed.path), "cert": str(fed.certs[0]), "key": str(fed.keys[0])}
    return start([sys.executable, "-c", PARTY0, json.dumps({**access, **cfg})])


@pytest.mark.parametrize(
    "case, reason",
    [
        ("epsilon", "epsilon 1 is more than its policy's max_epsilon 0.5"),
        ("method", "method distaim is not among the methods its policy accepts (fedtda)"),
        ("schema", "its policy agreed to schema sha256 " + "0" * 64),
        ("store", "has rho"),
    ],
)
def test_a_refusing_party_stops_the_release_before_any_silo_is_read_or_budget_spent(tmp_path, case, reason):
    """Both silos hold a write lease (``never_opened``): opening either would block and break the
    lease, so a run that ends with both leases whole read neither. Both stores are compared byte
    for byte (as SQL) before and after."""
    pol_fields = {
        "epsilon": {"max_epsilon": 0.5},
        "method": {"methods": ["fedtda"]},
        "schema": {"schema_sha256": "0" * 64},
        "store": {},
    }[case]
    store1 = _store(tmp_path / "p1.db", "d1", 1.0, spent_epsilon=0.9 if case == "store" else None)
    pol = _policy(tmp_path, budget_store={"path": "p1.db", "dataset_id": "d1", "total_epsilon": 1.0}, **pol_fields)
    schema = tmp_path / "schema.json"
    store0 = _store(tmp_path / "p0.db", "d0", 5.0)
    silos = [tmp_path / f"silo{k}.csv" for k in (0, 1)]
    for k, silo in enumerate(silos):
        make_frame(50, k).to_csv(silo, index=False)
    before = (_dump(store0), _dump(store1))
    fed = local_federation(tmp_path, 2)
    epsilon = 0.5 if case == "store" else 1.0  # the store case: rho(0.9) + rho(0.5) exceeds rho(1.0)
    with never_opened(*silos) as opened:
        procs = {
            "party1": _party1(fed, schema, tmp_path / "silo1.csv", pol, tmp_path / "p1.ledger.json"),
            "dealer": _dealer(fed, 2),
            "party0": _party0(
                fed,
                {
                    "schema": str(schema),
                    "silo": str(tmp_path / "silo0.csv"),
                    "method": "distaim",
                    "epsilon": epsilon,
                    "delta": 1e-9,
                    "collusion": 1,
                    "store": str(store0),
                    "ledger": str(tmp_path / "p0.ledger.json"),
                    "options": {"rounds": 2},
                },
            ),
        }
        out = finish(procs)
        assert not opened(), opened()
    err0 = out["party0"][1]
    line = assert_one_line_error(err0, "party-1 refused the release: ", reason)
    assert procs["party0"].returncode == 2, err0
    err1 = out["party1"][1]
    assert procs["party1"].returncode == 2 and "refused the release: " in err1 and reason in err1, err1
    assert "ready" in out["party1"][0] and "accepted" not in out["party1"][0]
    assert (_dump(store0), _dump(store1)) == before, line
    assert not (tmp_path / "p0.ledger.json").exists() and not (tmp_path / "p1.ledger.json").exists()


#: A modified party 0: the package's own modules, raw commands, every verdict recorded.
RAW = r"""
import json, sys
import numpy as np
from privsyn_fed.mpc import secure, world
from privsyn_fed.mpc.noise import party_noise
from privsyn_fed.mpc.verdicts import collect_verdicts
from privsyn_fed.silo import LocalScoresQuery, MarginalsQuery

cfg = json.loads(sys.argv[1])
world.join(world.membership(world.Access(cfg["federation"], cfg["cert"], cfg["key"]), timeout_s=60))
ch, noise, out = world.Channel(), party_noise(None, 0), {}

def command(name, header, arrays=None):
    ch.send(header, arrays)
    out[name] = [v.reason for v in collect_verdicts(ch)]
    return not out[name]

command("hello", {"op": "hello", "schema": cfg["fingerprint"], "seeded": False})
command("release", {"op": "release", "request": cfg["request"]})
command("begin", {"op": "begin"})
age, ages = MarginalsQuery(((0,),)).to_wire()
if command("sum", {"op": "sum", "query": age, "among": [0, 1]}):
    out["opened"] = secure.open_to_party0(secure.share_sum(None, [1], 8)).tolist()
for name, sigma in (("below half a step", 1e-6), ("below the budget", 1.0)):
    if command(name, {"op": "noisy_sum", "query": age, "among": [0, 1], "sigma": sigma}):
        out["opened " + name] = secure.noisy_sum(np.zeros(8, np.int64), [0, 1], 8, sigma, noise).tolist()
scores, arrays = LocalScoresQuery(((0,),), (1.0,), (np.full(8, 1 / 8),), 1.0).to_wire()
command("another method", {"op": "local_select", "query": scores, "among": [0, 1], "scale": 1.0}, arrays)
command("pool_new", {"op": "pool_new", "length": 8})
pool = secure.zeros(8)
if command("pool_add", {"op": "pool_add", "query": age, "among": [0, 1]}):
    pool = pool + secure.share_sum(np.zeros(8, np.int64), [0, 1], 8)
command("pool_add again", {"op": "pool_add", "query": age, "among": [0, 1]})
select = {"cells": np.arange(8), "segment_ids": np.zeros(8, np.int64), "model": np.full(8, 8192),
          "weights": np.array([1]), "offsets": np.array([0]), "total_cells": np.arange(8)}
command("select with one Gumbel", {"op": "select", "scale": 1e9, "draws": 1, "noise_parties": 1}, select)
out["answered"] = 0
for i in range(cfg["steps"]):
    name = f"noisy sum {i + 1}"
    if not command(name, {"op": "noisy_sum", "query": age, "among": [0, 1], "sigma": cfg["sigma"],
                          "label": f"marginal(age), try {i + 1}"}):
        break
    secure.noisy_sum(np.zeros(8, np.int64), [0, 1], 8, cfg["sigma"], noise)
    out["answered"] += 1
ch.send({"op": "end", "status": "complete"})
ch.send({"op": "stop"})
world.leave()
print(json.dumps(out))
"""


def test_a_modified_party_0_gets_refusals_never_values(tmp_path):
    schema = tmp_path / "schema.json"
    pol = _policy(tmp_path, max_epsilon=0.5, budget_store={"path": "p1.db", "dataset_id": "d1", "total_epsilon": 2.0})
    fp = policy.load_policy(pol).schema_sha256
    silo = _silo(tmp_path / "silo1.csv", 300, 21)
    ledger = tmp_path / "p1.ledger.json"
    request = ReleaseRequest("distaim", 0.5, 1e-9, fp, False, 2, 1)
    rho = request.rho
    sigma = math.sqrt(1 / (2 * rho / 3.5))  # one party's own noise (k = 1): three such sums fit, not four
    fed = local_federation(tmp_path, 2)
    access = {"federation": str(fed.path), "cert": str(fed.certs[0]), "key": str(fed.keys[0])}
    cfg = {**access, "fingerprint": fp, "request": request.to_wire(), "sigma": sigma, "steps": 6}
    procs = {
        "party1": _party1(fed, schema, silo, pol, ledger),
        "dealer": _dealer(fed, 2),
        "party0": start([sys.executable, "-c", RAW, json.dumps(cfg)]),
    }
    out = finish(procs)
    assert procs["party0"].returncode == 0, out["party0"][1][-3000:]
    got = json.loads(out["party0"][0])
    assert got["hello"] == got["release"] == got["begin"] == got["pool_new"] == got["pool_add"] == []
    refusals = {
        "sum": "an exact sum would open this silo's answer without noise",
        "below half a step": "noise is below what its accounting covers",
        "below the budget": "its budget for this release does not cover the step",
        "another method": "local_select is not a step of distaim",
        "pool_add again": "answers are in the pool already",
        "select with one Gumbel": "a coalition of 1 must miss one",
        "noisy sum 4": "its budget for this release does not cover the step",
    }
    for name, reason in refusals.items():
        assert len(got[name]) == 1 and reason in got[name][0], (name, got[name])
    assert not [k for k in got if k.startswith("opened")]  # nothing refused was ever opened
    assert got["answered"] == 3
    # the party's own ledger: the three sums it answered, at the noise it enforced; failed, since it refused
    led = load_ledger(ledger)
    assert led["status"] == "failed" and len(led["entries"]) == 3
    for e in led["entries"]:
        assert e["mechanism"] == "gaussian" and e["sigma"] == sigma and e["sensitivity_l2"] == 1.0
        assert e["distributed"] == {"parties": 2, "collusion": 1} and e["query"].startswith("marginal(age), try")
    assert math.isclose(led["rho_spent"], 3 / (2 * sigma**2), rel_tol=1e-12) and led["rho_spent"] <= rho
    assert len(led["details"]["party"]["refused"]) == 7 and led["details"]["party"]["answered"] == 5
    problems = audit_ledger(led).problems
    assert problems and all("did not complete" in p for p in problems), problems
    # its store: settled at what it spent, counted at its policy's delta
    run = BudgetStore(tmp_path / "p1.db").budget("d1").runs[-1]
    assert run["status"] == "failed" and math.isclose(run["rho_spent"], led["rho_spent"], rel_tol=1e-12)
    assert procs["party1"].returncode == 1 and "refused noisy_sum" in out["party1"][1]


def _two_party_release(tmp_path, fed, schema, silo1, pol, ledger1):
    """Party 1 (``silo1`` under policy ``pol``), the dealer and party 0 (a 400-row silo, its own
    store): a DistAIM release at epsilon 1 with two rounds."""
    return {
        "party1": _party1(fed, schema, silo1, pol, ledger1),
        "dealer": _dealer(fed, 2),
        "party0": _party0(
            fed,
            {
                "schema": str(schema),
                "silo": str(_silo(tmp_path / "silo0.csv", 400, 30)),
                "method": "distaim",
                "epsilon": 1.0,
                "delta": 1e-9,
                "collusion": 1,
                "store": str(tmp_path / "p0.db"),
                "ledger": str(tmp_path / "p0.ledger.json"),
                "options": {"rounds": 2, "workload_size": 4},
            },
        ),
    }


def test_a_party_with_a_store_settles_it_at_the_spend_its_ledger_copy_states(tmp_path):
    schema = tmp_path / "schema.json"
    pol = _policy(tmp_path, budget_store={"path": "p1.db", "dataset_id": "d1", "total_epsilon": 3.0})
    fed = local_federation(tmp_path, 2)
    ledger1 = tmp_path / "p1.ledger.json"
    procs = _two_party_release(tmp_path, fed, schema, _silo(tmp_path / "silo1.csv", 300, 31), pol, ledger1)
    out = finish(procs, timeout=240)
    assert procs["party0"].returncode == 0, out["party0"][1][-3000:]
    assert procs["party1"].returncode == 0, out["party1"][1][-3000:]
    ledger0, copy = load_ledger(tmp_path / "p0.ledger.json"), load_ledger(ledger1)
    assert audit_ledger(copy).ok, audit_ledger(copy).problems
    assert math.isclose(copy["rho_spent"], ledger0["rho_spent"], rel_tol=1e-12)
    run = BudgetStore(tmp_path / "p1.db").budget("d1").runs[-1]
    assert run["status"] == "complete" and math.isclose(run["rho_spent"], copy["rho_spent"], rel_tol=1e-12)
    assert copy["details"]["budget_store"]["run"] == 1 and run["ledger"] == str(ledger1.resolve())
    # the audit checks the copy on its own terms: a sensitivity below its recorded facts is caught
    tampered = json.loads(json.dumps(copy))
    e = next(e for e in tampered["entries"] if e["mechanism"] == "gaussian")
    e["own_rows"]["count_marginals"] = 4
    assert any("what one record of this silo moves" in p for p in audit_ledger(tampered).problems)


def test_after_a_distaim_release_every_partys_ledger_audits_and_states_party_0s_spend(tmp_path):
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    silos = [_silo(tmp_path / f"silo{k}.csv", n, 40 + k) for k, n in enumerate([400, 300, 300])]
    out = tmp_path / "syn.csv"
    args = synth_argv("distaim", schema=tmp_path / "schema.json", silos=silos, out=out, mpc=True, rounds=2, quiet=True)
    run = run_cli(*args, timeout=300)
    assert run.returncode == 0, run.stderr
    ledger0 = json.loads(out.with_suffix(".ledger.json").read_text())
    copies = [sorted((tmp_path / f"silo{k}.csv.ledgers").glob("*.ledger.json")) for k in (1, 2)]
    assert [len(c) for c in copies] == [1, 1] and not (tmp_path / "silo0.csv.ledgers").exists()
    for k, (path,) in enumerate(copies, start=1):
        audit = run_cli("audit", path)
        assert audit.returncode == 0 and audit.stdout.startswith("OK"), audit.stdout
        copy = json.loads(path.read_text())
        assert copy["details"]["party"]["rank"] == k and copy["status"] == "complete"
        assert math.isclose(copy["rho_spent"], ledger0["rho_spent"], rel_tol=1e-12)
        assert [e["mechanism"] for e in copy["entries"]] == [e["mechanism"] for e in ledger0["entries"]]


@pytest.mark.parametrize("said", [False, True])
def test_a_party_refuses_its_silo_under_a_new_dataset_id_unless_its_policy_says_it_differs(tmp_path, said):
    """A site's store knows the silo it charged under 'd1': a policy renamed to 'd1-renamed' is
    refused at the site (party 0 hears no dataset name), unless the policy says the data differ."""
    from privsyn_fed.silo import Silo

    silo1 = _silo(tmp_path / "silo1.csv", 300, 31)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    earlier = BudgetStore(tmp_path / "p1.db").reserve("d1", epsilon=0.1, delta=1e-9, method="aim", total_epsilon=3.0)
    earlier.charge_silos([Silo.load(silo1, pf.Schema.load(schema))])  # as a release of 'd1' recorded it
    earlier.settle(0.0, "rejected")
    store = {
        "path": "p1.db",
        "dataset_id": "d1-renamed",
        "total_epsilon": 3.0,
        **({"new_dataset": True} if said else {}),
    }
    pol = _policy(tmp_path, budget_store=store)
    fed = local_federation(tmp_path, 2)
    procs = _two_party_release(tmp_path, fed, schema, silo1, pol, tmp_path / "p1.ledger.json")
    out = finish(procs, timeout=240)
    runs = BudgetStore(tmp_path / "p1.db").budget("d1-renamed").runs
    if said:
        assert procs["party0"].returncode == 0, out["party0"][1][-3000:]
        assert runs[-1]["status"] == "complete" and "though its silos matched 'd1'" in runs[-1]["new_dataset"]
        copy = load_ledger(tmp_path / "p1.ledger.json")
        assert copy["details"]["budget_store"]["token"] == BudgetStore(tmp_path / "p1.db").run(runs[-1]["id"])["token"]
        return
    assert procs["party0"].returncode != 0
    assert "its budget store charged this silo under another dataset id" in out["party0"][1]
    assert "'d1'" not in out["party0"][1] and "under dataset 'd1'" in out["party1"][0] + out["party1"][1]
    assert [(r["status"], r["rho_spent"]) for r in runs] == [("rejected", 0.0)]
