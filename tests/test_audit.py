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
        ("distaim", lambda l: l["details"]["options"].update(rounds=0), "does not record a positive number of rounds"),
        ("flaim", lambda l: l["details"]["options"].update(local_steps=-1), "does not record a positive number"),
        ("fedtda", lambda l: l["details"]["options"].update(norm_factor=-2.0), "norm_factor -2 is not positive"),
        ("fedtda", lambda l: l["details"]["options"].update(norm_factor=1e300), "below the sound value inf"),
        ("fedtda", lambda l: l["details"]["column_types"].__setitem__(0, "ordinal"), "(not 'ordinal')"),
        ("fedtda", lambda l: l["details"]["column_types"].pop(), "one type, categorical or numeric, per column"),
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
