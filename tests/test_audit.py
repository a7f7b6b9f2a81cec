"""The audit is total and strict: every tampering a reviewer found passing is now caught, and a
malformed file gets one line naming the field (exit 2), never a crash."""

from __future__ import annotations

import copy
import json
import math

import pytest

import privsyn_fed as pf
from privsyn_fed.audit import audit_ledger
from privsyn_fed.cli import main
from privsyn_fed.common import InputError

from .conftest import SCHEMA, assert_one_line_error, make_frame, run_cli


@pytest.fixture(scope="module")
def honest():
    """Unseeded (OpenDP noise) complete ledgers of every method on small real files' rows."""
    schema = pf.Schema.from_dict(SCHEMA)
    silos = [pf.Silo.from_frame(make_frame(n, k), schema, name=f"s{k}") for k, n in enumerate([300, 200, 200])]
    small = {"rounds": 3, "workload_size": 3, "pgm_iters": 100}
    return {
        "aim": pf.synthesize(silos, "aim", 1.0, 1e-9, rows=10, rounds=8, workload_size=3, pgm_iters=100).ledger,
        "distaim": pf.synthesize(silos, "distaim", 1.0, 1e-9, rows=10, **small).ledger,
        "flaim": pf.synthesize(silos, "flaim", 1.0, 1e-9, rows=10, **small).ledger,
        "fedtda": pf.synthesize(silos, "fedtda", 1.0, 1e-9, rows=10).ledger,
    }


@pytest.mark.parametrize("method", ["aim", "distaim", "flaim", "fedtda"])
def test_honest_ledgers_of_every_method_pass(honest, method):
    rep = audit_ledger(honest[method])
    assert rep.ok, rep.problems


def _fedtda_entry(led, word):
    return next(e for e in led["entries"] if word in e["query"])


@pytest.mark.parametrize(
    "method, tamper, fragment",
    [
        ("aim", lambda l: l.update(seeded=True), "SEEDED RUN"),
        ("aim", lambda l: l["entries"][0].update(sampler="seeded-numpy"), "SEEDED NOISE"),
        ("fedtda", lambda l: l["details"].update(noise="seeded-numpy"), "SEEDED NOISE"),
        ("aim", lambda l: l["entries"][0].update(sigma=-l["entries"][0]["sigma"]), "sigma must be positive"),
        (
            "distaim",
            lambda l: next(e for e in l["entries"] if e["mechanism"] == "exponential").update(sensitivity=0),
            "sensitivity must be positive",
        ),
        ("aim", lambda l: l.pop("details"), "does not record its method's columns and workload"),
        ("fedtda", lambda l: l.pop("details"), "does not record fedtda's column types"),
        ("flaim", lambda l: l.update(status="running"), "did not complete (status 'running')"),
        ("distaim", lambda l: l.update(status="failed"), "did not complete (status 'failed')"),
        ("aim", lambda l: l.update(neighbouring="substitute one record"), "neighbouring relation"),
        (
            "fedtda",
            lambda l: _fedtda_entry(l, "upper triangle").update(
                sensitivity_l2=1.0, rho=1.0 / (2 * _fedtda_entry(l, "upper triangle")["sigma"] ** 2)
            ),
            "below the sound value",
        ),
        (
            "fedtda",
            lambda l: _fedtda_entry(l, "categorical").update(
                sensitivity_l2=1.0, rho=1.0 / (2 * _fedtda_entry(l, "categorical")["sigma"] ** 2)
            ),
            "below the sound value",
        ),
        (
            "fedtda",
            lambda l: _fedtda_entry(l, "numeric").update(fixed_point={"sensitivity_planned": 1.0, "rounding_l2": 0.0}),
            "below the sound value",
        ),
        ("fedtda", lambda l: l["entries"].pop(1), "an entry is missing or extra"),
    ],
)
def test_every_tampering_fails_the_audit(honest, method, tamper, fragment):
    led = copy.deepcopy(honest[method])
    tamper(led)
    rep = audit_ledger(led)
    assert not rep.ok
    assert any(fragment in p for p in rep.problems), rep.problems


@pytest.mark.parametrize(
    "tamper, fragment",
    [
        (lambda l: l["entries"][0].update(rho="0.001"), "field 'entries[0].rho' must be a number, not a string"),
        (lambda l: l.update(details=[1, 2]), "field 'details' must be an object, not a list"),
        (lambda l: l["entries"].__setitem__(1, [1, 2]), "field 'entries[1]' must be an object, not a list"),
        (lambda l: l.update(entries={"a": 1}), "field 'entries' must be a list, not an object"),
        (lambda l: l.update(seeded="no"), "field 'seeded' must be true or false, not a string"),
        (lambda l: l["entries"][0].update(sigma=True), "field 'entries[0].sigma' must be a number, not a boolean"),
        (lambda l: l["details"].update(workload=[["age", 3]]), "field 'details.workload[0][1]' must be a string"),
        (lambda l: l.update(format="privsyn-fed-ledger/9"), "unsupported ledger format 'privsyn-fed-ledger/9'"),
        (lambda l: l.pop("format"), "missing field 'format'"),
        (lambda l: l.update(status="done"), "field 'status' must be one of running, complete, failed"),
        (lambda l: l["entries"][0].update(mechanism="laplace"), "must be gaussian or exponential"),
    ],
)
def test_malformed_ledgers_are_refused_naming_the_field(honest, tamper, fragment, tmp_path, capsys):
    led = copy.deepcopy(honest["aim"])
    tamper(led)
    with pytest.raises(InputError, match=None) as exc:
        audit_ledger(led)
    assert fragment in str(exc.value)
    path = tmp_path / "l.json"
    path.write_text(json.dumps(led))
    assert_one_line_error(run_cli("audit", path, capsys=capsys), fragment)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"format": "privsyn-fed-ledger/1", "rho_spent": NaN}', "NaN is not a finite number"),
        ('"just a string"', "a ledger is a JSON object, not a string"),
    ],
)
def test_hostile_files_get_one_line(text, fragment, tmp_path, capsys):
    path = tmp_path / "l.json"
    path.write_text(text)
    assert_one_line_error(run_cli("audit", path, capsys=capsys), fragment)


# ---- secure computation: the ledgers an MPC run writes (fields as ``noisy_sums`` and
# ``SharedPool.select_many`` record them), derived from the honest ones ---------------------------

DEALER = "dealer: exact discrete Gaussian (OpenDP) / exactly rounded Gumbel (CSPRNG)"


def _over_mpc(led):
    led = copy.deepcopy(led)
    led["details"]["noise"] = DEALER
    led["details"]["mpc"] = {"parties": 3, "provider": "TTP (dealer process)", "debug": False, "noise": DEALER}
    for e in led["entries"]:
        if e["where"] == "aggregator":
            e.update(where="mpc", sampler=DEALER, noise_from="dealer, secret-shared")
        if e["where"] == "mpc" and e["mechanism"] == "exponential":
            scale = lambda eps: 2**16 * 2 * e["sensitivity"] / eps  # noqa: E731
            eps_s = e["epsilon"] / (1 + 4 / scale(1.0))
            e["fixed_point"] = {
                "score_bits": 16,
                "epsilon_sampled": eps_s,
                "gumbel_scale_grid_units": scale(eps_s),
                "rounding_slack": 4 / scale(eps_s),
            }
    if led["method"] == "fedtda":  # the second moments are real values, shared on the grid 2^-16
        m = led["entries"][-1]
        slack = math.sqrt(m["cells"]) * 2.0**-16
        m["fixed_point"] = {"sensitivity_planned": m["sensitivity_l2"], "rounding_l2": slack}
        m["sigma"] *= (m["sensitivity_l2"] + slack) / m["sensitivity_l2"]
        m["sensitivity_l2"] += slack
    return led


def _without_rounding(led):
    m = led["entries"][-1]
    planned = m.pop("fixed_point")["sensitivity_planned"]
    m["sigma"] *= planned / m["sensitivity_l2"]
    m["sensitivity_l2"] = planned


def _select(led):
    return next(e for e in led["entries"] if e["mechanism"] == "exponential")


def test_mpc_grid_constant_is_the_aggregators():
    pytest.importorskip("torch")
    from privsyn_fed.audit import MPC_REAL_BITS
    from privsyn_fed.mpc.aggregator import REAL_BITS

    assert MPC_REAL_BITS == REAL_BITS


@pytest.mark.parametrize("method", ["distaim", "fedtda"])
def test_honest_ledgers_over_mpc_pass(honest, method):
    rep = audit_ledger(_over_mpc(honest[method]))
    assert rep.ok, rep.problems


@pytest.mark.parametrize(
    "method, tamper, fragment",
    [
        ("fedtda", _without_rounding, "rounded to the grid 2^-16"),
        (
            "fedtda",
            lambda l: l["entries"][-1]["fixed_point"].update(rounding_l2=0.0),
            "is not the planned 28 plus the fixed-point rounding 0",
        ),
        (
            "fedtda",
            lambda l: l["entries"][-1]["fixed_point"].update(sensitivity_planned=1.0),
            "below the sound value 28",
        ),
        (
            "fedtda",
            lambda l: [e.update(sampler="dealer: seeded numpy (not private)") for e in l["entries"]],
            "SEEDED NOISE",
        ),
        ("distaim", lambda l: l["details"]["mpc"].update(noise="dealer: seeded numpy (not private)"), "SEEDED NOISE"),
        ("distaim", lambda l: l["details"]["mpc"].update(debug=True), "DEBUG MPC MODE"),
        ("distaim", lambda l: l["details"]["mpc"].pop("debug"), "does not record the secure computation"),
        ("distaim", lambda l: l["details"].pop("mpc"), "does not record the secure computation"),
        ("distaim", lambda l: _select(l).update(where="aggregator"), "a run over MPC has no trusted aggregator"),
        # a selection relabelled as a silo's own still has its fixed-point slack checked
        (
            "distaim",
            lambda l: (
                _select(l).update(where="silo"),
                _select(l)["fixed_point"].update(
                    epsilon_sampled=_select(l)["epsilon"],
                    gumbel_scale_grid_units=2**17 * _select(l)["sensitivity"] / _select(l)["epsilon"],
                ),
            ),
            "rounding slack is not covered",
        ),
        ("distaim", lambda l: _select(l).pop("fixed_point"), "must record its fixed-point parameters"),
    ],
)
def test_every_tampering_over_mpc_fails_the_audit(honest, method, tamper, fragment):
    led = _over_mpc(honest[method])
    tamper(led)
    rep = audit_ledger(led)
    assert not rep.ok
    assert any(fragment in p for p in rep.problems), rep.problems


# ---- more tampering, and values at the edges of floating point --------------------------------


def _recharge(e):
    """Make an entry's recorded rho agree with its (tampered) parameters."""
    e["rho"] = (e["sensitivity_l2"] / e["sigma"]) ** 2 / 2 if e["mechanism"] == "gaussian" else e["epsilon"] ** 2 / 8


@pytest.mark.parametrize(
    "method, tamper, fragment",
    [
        ("aim", lambda l: l["entries"][0].update(sensitivity_l2=0.0), "sensitivity_l2 must be positive"),
        ("aim", lambda l: l["entries"][0].update(sigma=1e-300), "parameters give inf"),
        ("aim", lambda l: l["entries"][0].update(where="the cloud"), "where 'the cloud' is not one of"),
        ("distaim", lambda l: l["details"].pop("workload"), "does not record its method's columns and workload"),
        (
            "distaim",
            lambda l: l["details"]["options"].update(rounds=0),
            "details.options.rounds must be null or a whole",
        ),
        (
            "flaim",
            lambda l: l["details"]["options"].update(local_steps=-1),
            "options.local_steps must be a whole number",
        ),
        ("fedtda", lambda l: l["details"]["options"].update(norm_factor=-2.0), "norm_factor must be a positive number"),
        ("fedtda", lambda l: l["details"]["options"].update(norm_factor=1e300), "below the sound value inf"),
        (
            "fedtda",
            lambda l: l["details"]["column_types"].__setitem__(0, "ordinal"),
            "numeric for each column, not 'ordinal'",
        ),
        ("fedtda", lambda l: l["details"]["column_types"].pop(), "column_types has 4 entries for the 5 columns"),
        (
            "fedtda",
            lambda l: l["entries"].append(
                {
                    **l["entries"][0],
                    "step": 5,
                    "mechanism": "exponential",
                    "sensitivity": 1.0,
                    "epsilon": 0.01,
                    "rho": 0.01**2 / 8,
                }
            ),
            "makes 4 Gaussian releases: an entry is missing or extra",
        ),
        (
            "fedtda",
            lambda l: (_fedtda_entry(l, "total").update(sensitivity_l2=0.5), _recharge(_fedtda_entry(l, "total"))),
            "sensitivity 0.5 is below the sound value 1 of the row total",
        ),
    ],
)
def test_more_tampering_fails_the_audit(honest, method, tamper, fragment):
    led = copy.deepcopy(honest[method])
    tamper(led)
    rep = audit_ledger(led)
    assert not rep.ok
    assert any(fragment in p for p in rep.problems), rep.problems


@pytest.mark.parametrize(
    "tamper, fragment",
    [
        (lambda l: l["entries"][0].update(sigma=math.inf), "field 'entries[0].sigma' must be a finite number, not inf"),
        (lambda l: l.update(delta=math.nan), "field 'delta' must be a finite number, not nan"),
        (lambda l: l.update(epsilon=10**400), "field 'epsilon' must be a finite number, not a number too large"),
        (
            lambda l: l["entries"][0].update(step=2**60),
            "field 'entries[0].step' must be a whole number of at most 2^53",
        ),
        (lambda l: l["entries"][0].update(step=1.5), "field 'entries[0].step' must be a whole number, not a fraction"),
        (
            lambda l: l["details"]["options"].update(split=5),
            "field 'details.options.split' must be a list, not a number",
        ),
        (lambda l: l["details"].update(mpc={"debug": "no"}), "field 'details.mpc.debug' must be true or false"),
        (
            lambda l: l["entries"][0].update(fixed_point={"rounding_l2": "0"}),
            "field 'entries[0].fixed_point.rounding_l2' must be a number, not a string",
        ),
    ],
)
def test_values_json_can_hold_but_a_ledger_cannot_are_refused(honest, tamper, fragment):
    led = copy.deepcopy(honest["fedtda"])
    tamper(led)
    with pytest.raises(InputError) as exc:
        audit_ledger(led)
    assert fragment in str(exc.value)


@pytest.mark.parametrize(
    "field, text, fragment",
    [
        ("epsilon", "1e999", "field 'epsilon' must be a finite number, not inf"),
        ("epsilon", "1" + "0" * 400, "field 'epsilon' must be a finite number, not a number too large"),
        ("rho_spent", "Infinity", "Infinity is not a finite number"),
    ],
)
def test_numbers_a_float_cannot_hold_get_one_line(honest, field, text, fragment, tmp_path, capsys):
    path = tmp_path / "l.json"
    path.write_text(json.dumps(honest["aim"]).replace(f'"{field}": ', f'"{field}": {text}, "was": ', 1))
    assert_one_line_error(run_cli("audit", path, capsys=capsys), fragment)


def test_seeded_ledger_fails_through_the_cli_and_nothing_else_is_wrong(honest, tmp_path, capsys):
    led = copy.deepcopy(honest["fedtda"])
    led["seeded"] = True
    led["details"]["noise"] = "seeded-numpy"
    for e in led["entries"]:
        e["sampler"] = "seeded-numpy"
    path = tmp_path / "l.json"
    path.write_text(json.dumps(led))
    assert main(["audit", str(path)]) == 1
    problems = [line for line in capsys.readouterr().out.splitlines() if line.startswith("PROBLEM")]
    assert len(problems) == 1 and "SEEDED RUN" in problems[0] and "not a private release" in problems[0]


def test_an_unfinished_run_is_still_checked(honest):
    led = copy.deepcopy(honest["flaim"])
    led.update(status="running")
    led["entries"][0]["rho"] *= 2
    problems = audit_ledger(led).problems
    assert any("no synthetic data belongs to this ledger; its entries record what was spent" in p for p in problems)
    assert any("recorded rho" in p for p in problems)


@pytest.mark.parametrize("kind", ["categorical", "numeric"])
def test_fedtda_over_one_kind_of_column_makes_three_releases(kind):
    spec = {"columns": [c for c in SCHEMA["columns"] if c["type"] == kind]}
    schema = pf.Schema.from_dict(spec)
    names = [c["name"] for c in spec["columns"]]
    silos = [pf.Silo.from_frame(make_frame(n, k)[names], schema, name=f"s{k}") for k, n in enumerate([300, 200])]
    led = pf.synthesize(silos, "fedtda", 1.0, 1e-9, rows=10).ledger
    assert len(led["entries"]) == 3 and audit_ledger(led).ok, audit_ledger(led).problems
    if kind == "categorical":  # claimed numeric, the rows would be twice as wide: B^2 doubles
        led["details"]["column_types"] = ["numeric"] * len(names)
        assert any("below the sound value" in p for p in audit_ledger(led).problems)


def test_a_report_of_a_tampered_subnormal_budget_is_written_not_crashed(honest, tmp_path, capsys):
    led = copy.deepcopy(honest["aim"])
    led["rho_budget"] = 5e-324
    path = tmp_path / "l.json"
    path.write_text(json.dumps(led))
    assert main(["audit", str(path), "--report", str(tmp_path / "r.md")]) == 1  # it fails, in a report
    assert "more than the budget" in capsys.readouterr().out
    assert "Cumulative budget" in (tmp_path / "r.md").read_text()


# ---- a ledger records what ran: every recorded fact is recomputed from its declared inputs -----


def _dp_draft_ledger():
    """A DP schema draft's complete ledger (the drafting API, in this process)."""
    from privsyn_fed import draft_dp

    frame = make_frame(400, 11).drop(columns=["income"]).assign(id=[f"p{i}" for i in range(400)]).astype(str)
    plan = draft_dp.plan_draft(50.0, 1e-6, list(frame.columns), 50, 32)  # age (73 values): not a code
    acc = draft_dp.accountant_for(plan)
    draft_dp.make_draft(lambda: iter([frame]), plan, acc)
    acc.finish("complete")
    return acc.ledger()


def _party_copy(path):
    """A silo party's own complete copy of an independent release over MPC (the party's accounting,
    in this process): its one noisy sum of the five 1-ways."""
    from privsyn_fed.mpc.party_costs import noisy_sum_charge
    from privsyn_fed.mpc.party_ledger import PartyRelease
    from privsyn_fed.mpc.request import ReleaseRequest
    from privsyn_fed.silo import MarginalsQuery

    request = ReleaseRequest("independent", 1.0, 1e-9, "0" * 64, False, 3, 1)
    party = PartyRelease(request, 1, "opendp (each party's own)", path)
    party.start()
    cmd = {"among": [0, 1, 2], "sigma": 40.0, "label": "every column's 1-way marginal"}
    oneways = MarginalsQuery(tuple((j,) for j in range(5)))
    party.account(noisy_sum_charge(oneways, cmd, pf.Schema.from_dict(SCHEMA), 1, "independent", 3))
    party.finish("complete")
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def records(honest, tmp_path_factory):
    """Every kind of ledger the project writes: the honest ones above, and the independent method,
    a planned DistAIM, AIM over an explicit workload, Fed-TDA with a given split, a DP schema draft
    and a party's own copy."""
    schema = pf.Schema.from_dict(SCHEMA)
    silos = [pf.Silo.from_frame(make_frame(n, k), schema, name=f"s{k}") for k, n in enumerate([300, 200, 200])]
    run = lambda method, **kw: pf.synthesize(silos, method, 1.0, 1e-9, rows=10, pgm_iters=100, **kw).ledger  # noqa: E731
    return {
        **honest,
        "independent": pf.synthesize(silos, "independent", 1.0, 1e-9, rows=10).ledger,
        "distaim planned": run("distaim", workload_size=3),
        "aim explicit": run("aim", rounds=6, workload=[{"columns": ["age", "sex"], "weight": 3}, ["region", "*"]]),
        "fedtda split": pf.synthesize(silos, "fedtda", 1.0, 1e-9, rows=10, split=(0.05, 0.2, 0.35, 0.4)).ledger,
        "schema draft": _dp_draft_ledger(),
        "party copy": _party_copy(tmp_path_factory.mktemp("party") / "party1.ledger.json"),
    }


def test_every_kind_of_ledger_the_project_writes_passes(records):
    for name, led in records.items():
        rep = audit_ledger(led)
        assert rep.ok, (name, rep.problems)
    assert records["aim explicit"]["details"]["options"]["workload"] == "explicit"
    assert records["aim explicit"]["details"]["workload"][0] == ["age", "sex"]
    assert records["aim explicit"]["details"]["workload_weights"] == [3, 1, 1, 1, 1]


def _selection(led):
    return next(e for e in led["entries"] if e["mechanism"] == "exponential")


def _first_with(led, key):
    return next(e for e in led["entries"] if key in e)


@pytest.mark.parametrize(
    "name, tamper, field",
    [
        ("aim", lambda l: l.update(epsilon_budget=l["epsilon_budget"] * 1.5), "epsilon_budget"),
        ("schema draft", lambda l: l.update(epsilon_budget=l["epsilon_budget"] * 1.5), "epsilon_budget"),
        ("aim", lambda l: _selection(l).update(sensitivity=_selection(l)["sensitivity"] * 1.5), "sensitivity"),
        ("distaim", lambda l: _selection(l).update(sensitivity=_selection(l)["sensitivity"] * 1.5), "sensitivity"),
        ("flaim", lambda l: _selection(l).update(sensitivity=_selection(l)["sensitivity"] * 1.5), "sensitivity"),
        ("aim", lambda l: l["entries"][0].update(cells=-l["entries"][0]["cells"]), "cells"),
        ("flaim", lambda l: l["entries"][-1].update(cells=-l["entries"][-1]["cells"]), "cells"),
        ("fedtda", lambda l: l["entries"][1].update(cells=-1), "cells"),
        ("independent", lambda l: l["entries"][0].update(cells=-1), "cells"),
        ("schema draft", lambda l: l["entries"][0].update(cells=-1), "cells"),
        ("schema draft", lambda l: _first_with(l, "min_count").update(min_count=1.0), "min_count"),
        ("schema draft", lambda l: _first_with(l, "threshold").update(threshold=50.0), "threshold"),
        ("schema draft", lambda l: l["details"]["draft"].update(threshold=50), "threshold"),
        ("aim", lambda l: l["details"]["workload"].pop(), "details.workload"),
        ("distaim", lambda l: l["details"]["workload"].pop(0), "details.workload"),
        ("flaim", lambda l: l["details"]["workload"].pop(1), "details.workload"),
        ("aim explicit", lambda l: l["details"]["workload"].pop(), "details.workload"),
        ("aim explicit", lambda l: l["details"]["workload_weights"].pop(), "details.workload_weights"),
        ("aim explicit", lambda l: l["details"].pop("workload_weights"), "sensitivity"),
        ("aim", lambda l: l["entries"][3].pop("sampler"), "sampler"),
        ("fedtda", lambda l: l["entries"][0].pop("sampler"), "sampler"),
        ("schema draft", lambda l: l["entries"][-1].pop("sampler"), "sampler"),
        ("party copy", lambda l: l["entries"][0].pop("sampler"), "sampler"),
    ],
)
def test_a_fact_that_contradicts_the_others_fails_naming_the_field(records, name, tamper, field):
    """Each of these leaves the privacy claim conservative; the ledger still no longer records what ran."""
    led = copy.deepcopy(records[name])
    tamper(led)
    problems = audit_ledger(led).problems
    assert any(field in p for p in problems), problems


def test_a_contradicted_budget_fails_through_the_command_line(records, tmp_path):
    led = copy.deepcopy(records["aim"])
    led["epsilon_budget"] *= 1.5
    path = tmp_path / "l.json"
    path.write_text(json.dumps(led))
    proc = run_cli("audit", path)
    assert proc.returncode == 1 and "epsilon_budget" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "name, path, value, field",
    [
        ("distaim planned", ("rho_budget",), 0.0, "rho_budget"),
        ("distaim planned", ("rho_budget",), -0.5, "rho_budget"),
        ("fedtda", ("rho_budget",), -1e-3, "rho_budget"),
        ("distaim planned", ("details", "options", "alpha"), "0.9", "details.options.alpha"),
        ("distaim planned", ("details", "options", "alpha"), 0.0, "details.options.alpha"),
        ("fedtda", ("details", "options", "refine"), "4", "details.options.refine"),
        ("fedtda", ("details", "options", "refine"), 3, "details.options.refine"),
        ("fedtda", ("details", "schedule", "noisy_total"), "716", "details.schedule.noisy_total"),
        ("fedtda", ("details", "schedule", "noisy_total"), 0, "noisy_total"),
        ("distaim planned", ("details", "schedule", "noisy_total"), None, "details.schedule.noisy_total"),
    ],
)
def test_a_planned_schedule_out_of_range_or_of_the_wrong_type_fails_naming_the_field(records, name, path, value, field):
    led = copy.deepcopy(records[name])
    parent = led
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    try:
        problems = audit_ledger(led).problems
    except InputError as exc:  # the wrong type: one line naming the field (exit 2)
        problems = [str(exc)]
    assert any(field in p for p in problems) and not any(p.startswith("AUDIT ERROR") for p in problems), problems


#: Each way a field is mutated: a value of another type, one out of range or not finite, a number
#: half as large again, or no value at all.
MUTATIONS = {
    "a string": lambda v: "x",
    "null": lambda v: None,
    "a list": lambda v: [1],
    "negative": lambda v: -1,
    "zero": lambda v: 0,
    "NaN": lambda v: math.nan,
    "infinite": lambda v: math.inf,
    "huge": lambda v: 10**400,
    "x1.5": lambda v: v * 1.5 if isinstance(v, (int, float)) and not isinstance(v, bool) else v,
}
ALL = set(MUTATIONS) | {"deleted"}
#: Facts that nothing else in a ledger determines, with the mutations that leave them values a run
#: could record: (ledger or "*", field with [*] for any index) -> mutations the audit cannot refute.
UNCHECKED = {
    ("*", "conversion"): {"deleted"},  # optional statements about the ledger itself
    ("*", "created"): {"deleted"},
    ("*", "updated"): {"deleted"},
    ("*", "details.traffic.*"): ALL,  # communication statistics, not a privacy fact
    ("*", "details.mpc.provider"): ALL,  # a description of the secure computation
    ("*", "details.expected_oneway_tvd"): {"x1.5", "deleted"},  # from the model's noisy total, not recorded
    ("*", "details.expected_oneway_tvd_independent"): {"x1.5", "deleted"},
    ("*", "details.model_sha256"): {"deleted"},  # a digest of the saved model, checked when it is loaded
    ("*", "details.schedule.noisy_total"): {"x1.5", "zero", "negative"},  # a released noisy value
    ("*", "details.options.max_model_size"): {"x1.5"},  # options no recorded fact depends on
    ("*", "details.options.target"): {"deleted"},  # a release without a target may predate the option
    ("*", "details.options.target_share"): {"deleted"},
    ("*", "details.options.find_dependence"): {"deleted"},  # as the target's: may predate the option
    ("*", "details.options.dependence_share"): {"deleted", "x1.5"},  # the rule may give it, unused when off
    ("*", "details.options.pgm_tol"): {"x1.5", "zero", "null"},
    ("*", "details.options.final_iters"): {"x1.5", "zero", "deleted"},  # may predate the option
    ("*", "details.options.icdm_lambda"): {"x1.5"},
    ("*", "details.options.threshold"): {"x1.5", "zero", "negative"},
    ("aim explicit", "details.options.workload_seed"): {"x1.5", "huge"},  # sampling options of no sample
    ("aim explicit", "details.options.workload_size"): {"null", "zero", "x1.5"},
    ("fedtda", "details.columns[*]"): {"a string"},  # names no entry repeats
    ("fedtda split", "details.columns[*]"): {"a string"},
    ("independent", "details.columns[*]"): {"a string"},
    ("schema draft", "details.draft.profile[*]"): ALL - {"a string", "null", "a list", "NaN", "infinite", "deleted"},
    ("schema draft", "details.draft.bins"): {"x1.5", "huge"},
    ("schema draft", "details.draft.categorical_max"): {"x1.5", "huge", "zero"},
    ("party copy", "details.party.answered"): {"x1.5", "huge", "zero", "deleted"},
    ("party copy", "details.party.policy"): {"a string", "deleted"},
    ("party copy", "details.party.silo"): {"a string", "deleted"},
    ("party copy", "entries[*].query"): {"a string"},  # party 0's label
}


def _leaves(obj, path=()):
    """The path of every value in ``obj`` that is not an object or a list."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else None
    if items is None:
        yield path
        return
    for key, value in items:
        yield from _leaves(value, (*path, key))


def _field(path, index="[{}]"):
    """A path as the audit names a field: ``entries[0].rho``, ``details.options.alpha``."""
    out = ""
    for key in path:
        out += index.format(key) if isinstance(key, int) else (f".{key}" if out else key)
    return out


def _unchecked(name, path, mutation):
    pattern = _field(path, "[*]")
    return any(
        who in ("*", name)
        and (pattern == field or field.endswith("*") and pattern.startswith(field[:-1]))
        and mutation in allowed
        for (who, field), allowed in UNCHECKED.items()
    )


def _same(a, b):
    number = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)  # noqa: E731
    return (type(a) is type(b) or number(a) and number(b)) and a == b


def test_no_mutation_of_a_recorded_fact_crashes_the_audit_or_passes_unless_nothing_refutes_it(records):
    """Every value of every ledger in turn: another type, out of range, not finite, half as large
    again, or gone. The audit returns a verdict (or refuses the file in one line naming the field),
    never stops on an exception, and fails the ledger unless the fact is one nothing else in it
    determines (``UNCHECKED``)."""
    passed, refused = [], 0
    for name, original in records.items():
        led = copy.deepcopy(original)
        for path in list(_leaves(led)):
            parent = led
            for key in path[:-1]:
                parent = parent[key]
            key, value = path[-1], parent[path[-1]]
            kept = list(parent.items()) if isinstance(parent, dict) else None
            for mutation, make in [*MUTATIONS.items(), ("deleted", None)]:
                if make is None:
                    del parent[key]
                else:
                    if _same(make(value), value):
                        continue
                    parent[key] = make(value)
                try:
                    rep = audit_ledger(led)
                except InputError as exc:
                    refused += 1
                    assert _field(path) in str(exc) or _field(path[:-1]) in str(exc) or "format" in str(exc), exc
                else:
                    assert not any(p.startswith("AUDIT ERROR") for p in rep.problems), (name, path, rep.problems)
                    if rep.ok and not _unchecked(name, path, mutation):
                        passed.append((name, _field(path), mutation))
                finally:
                    if kept is None:
                        parent.insert(key, value) if make is None else parent.__setitem__(key, value)
                    else:
                        parent.clear()
                        parent.update(kept)
        assert led == original
    assert not passed, passed
    assert refused > 100  # the shape refuses many in one line; the rest are the audit's own findings


def test_the_audit_keeps_its_own_copy_of_the_rules_of_the_code_it_checks():
    """The audit re-derives every fact independently of the code that wrote it; its tables must
    still say what that code does."""
    import dataclasses

    from privsyn_fed import draft_dp
    from privsyn_fed.accounting import Accountant
    from privsyn_fed.audit import declared, draft_plan, participation, stamps, structure_fedtda
    from privsyn_fed.methods import METHODS, aim, allocation, fedtda, output

    for name, spec in METHODS.items():
        fields = {f.name for f in dataclasses.fields(spec.options_class)} - {"workload"}
        assert set(declared.OPTIONS[name]) == fields, name
        assert all(ok(getattr(spec.options_class(), k)) for k, (_, ok) in declared.OPTIONS[name].items()), name
    assert (declared.MAX_ROUNDS, declared.MAX_ROWS) == (aim.MAX_ROUNDS, output.MAX_ROWS)
    assert participation.MANY_SILOS == allocation.MANY_SILOS
    assert Accountant(1.0, 1e-9, "aim").ledger()["conversion"] == stamps.CONVERSION
    assert draft_dp.THREAT_MODEL.startswith(stamps.DRAFT_THREAT_MODEL)
    for args in [(1.0, (0.05, 0.2, 0.35, 0.4), 3, 2), (0.3, (1, 0, 2, 1), 0, 4), (2.0, (1, 1, 1, 1), 5, 0)]:
        assert structure_fedtda.split_rho(*args) == pytest.approx(fedtda.split_rho(*args))
    grid = draft_dp.BOUNDS_GRID
    assert (draft_plan.DRAFT_BOUNDS_EDGES, draft_plan.DRAFT_BOUNDS_HIGHEST) == (len(grid), grid[-1]) and grid[
        0
    ] == -grid[-1]
    from privsyn_fed.draft_dp import cells
    from privsyn_fed.draft_dp import grid as draft_grid

    assert draft_plan.DRAFT_BOUNDS_GRID == draft_grid.grid_record()
    assert draft_plan.DRAFT_COARSE_GRID == draft_grid.grid_record(draft_grid.COARSE_GRID)
    assert draft_plan.DRAFT_PROFILE_CELLS == cells.PROFILE_CELLS
    assert draft_plan.DRAFT_ATOM_RHO_SHARE == draft_dp.ATOM_RHO_SHARE
    for mine, theirs in [
        (draft_plan.DRAFT_PROFILE_SHARE, draft_dp.PROFILE_SHARE),
        (draft_plan.DRAFT_THRESHOLD_DELTA_SHARE, draft_dp.THRESHOLD_DELTA_SHARE),
        (draft_plan.DRAFT_BOUNDS_FALSE_RATE, draft_dp.BOUNDS_FALSE_RATE),
        (draft_plan.DRAFT_MAX_BOUND_ROWS, draft_dp.MAX_BOUND_ROWS),
        (draft_plan.DRAFT_CAP_SIGMAS, draft_dp.CAP_SIGMAS),
    ]:
        assert mine == theirs
    for sigma in (0.05, 0.4, 1.0, 7.3, 120.0):
        assert draft_plan.bounds_threshold(sigma) == draft_dp.bounds_threshold(sigma)
        for target in (1e-3, 1e-9, 1e-15):
            assert draft_plan.category_threshold(sigma, target) == draft_dp.threshold_for(sigma, target)
