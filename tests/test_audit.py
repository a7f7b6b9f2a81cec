"""The audit is total and strict: every tampering a reviewer found passing is now caught, and a
malformed file gets one line naming the field (exit 2), never a crash."""
from __future__ import annotations

import copy
import json

import pytest

import privsyn_fed as pf
from privsyn_fed.accounting import audit_ledger
from privsyn_fed.cli import main
from privsyn_fed.errors import InputError

from .conftest import SCHEMA, make_frame


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


@pytest.mark.parametrize("method, tamper, fragment", [
    ("aim", lambda l: l.update(seeded=True), "SEEDED RUN"),
    ("aim", lambda l: l["entries"][0].update(sampler="seeded-numpy"), "SEEDED NOISE"),
    ("fedtda", lambda l: l["details"].update(noise="seeded-numpy"), "SEEDED NOISE"),
    ("aim", lambda l: l["entries"][0].update(sigma=-l["entries"][0]["sigma"]), "sigma must be positive"),
    ("distaim", lambda l: next(e for e in l["entries"] if e["mechanism"] == "exponential").update(sensitivity=0),
     "sensitivity must be positive"),
    ("aim", lambda l: l.pop("details"), "does not record its method's columns and workload"),
    ("fedtda", lambda l: l.pop("details"), "does not record fedtda's column types"),
    ("flaim", lambda l: l.update(status="running"), "did not complete (status 'running')"),
    ("distaim", lambda l: l.update(status="failed"), "did not complete (status 'failed')"),
    ("aim", lambda l: l.update(neighbouring="substitute one record"), "neighbouring relation"),
    ("fedtda", lambda l: _fedtda_entry(l, "upper triangle").update(
        sensitivity_l2=1.0, rho=1.0 / (2 * _fedtda_entry(l, "upper triangle")["sigma"] ** 2)), "below the sound value"),
    ("fedtda", lambda l: _fedtda_entry(l, "categorical").update(
        sensitivity_l2=1.0, rho=1.0 / (2 * _fedtda_entry(l, "categorical")["sigma"] ** 2)), "below the sound value"),
    ("fedtda", lambda l: _fedtda_entry(l, "numeric").update(
        fixed_point={"sensitivity_planned": 1.0, "rounding_l2": 0.0}), "below the sound value"),
    ("fedtda", lambda l: l["entries"].pop(1), "an entry is missing or extra"),
])
def test_every_tampering_fails_the_audit(honest, method, tamper, fragment):
    led = copy.deepcopy(honest[method])
    tamper(led)
    rep = audit_ledger(led)
    assert not rep.ok
    assert any(fragment in p for p in rep.problems), rep.problems


@pytest.mark.parametrize("tamper, fragment", [
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
])
def test_malformed_ledgers_are_refused_naming_the_field(honest, tamper, fragment, tmp_path, capsys):
    led = copy.deepcopy(honest["aim"])
    tamper(led)
    with pytest.raises(InputError, match=None) as exc:
        audit_ledger(led)
    assert fragment in str(exc.value)
    path = tmp_path / "l.json"
    path.write_text(json.dumps(led))
    assert main(["audit", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and fragment in err and "Traceback" not in err


@pytest.mark.parametrize("text, fragment", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"format": "privsyn-fed-ledger/1", "rho_spent": NaN}', "NaN is not a finite number"),
    ('"just a string"', "a ledger is a JSON object, not a string"),
])
def test_hostile_files_get_one_line(text, fragment, tmp_path, capsys):
    path = tmp_path / "l.json"
    path.write_text(text)
    assert main(["audit", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and fragment in err and "Traceback" not in err
