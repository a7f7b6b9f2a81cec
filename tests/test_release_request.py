"""One release request, checked once: the command line, the Python API and the object API build the
same ``ReleaseRequest``, each release option is one field of it that the command line reaches by its
flag's ``dest``, and a request that exists is checked and immutable."""

from __future__ import annotations

import dataclasses
import json

import pytest

import privsyn_fed as pf
from privsyn_fed.cli import build_parser
from privsyn_fed.common import InputError, OptionError
from privsyn_fed.release import OPTIONS, ReleaseRequest
from privsyn_fed.release import request as request_module

from .conftest import SCHEMA, make_frame, synth_argv


def _synth_dests() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return {a.dest for a in sub.choices["synth"]._actions}


def test_every_release_option_is_a_field_and_a_flag_of_the_same_name():
    fields = {f.name for f in dataclasses.fields(ReleaseRequest) if f.metadata.get("option")}
    assert set(OPTIONS) == fields and {"rows", "seed", "privacy_unit", "silo_column"} <= fields
    assert fields <= _synth_dests(), fields - _synth_dests()


@pytest.fixture
def counted(monkeypatch):
    """How many times a request is checked (``ReleaseRequest.of``) and each of its checks runs."""
    calls = {"of": 0, "unit": 0, "silo_column": 0}
    of = ReleaseRequest.of.__func__

    def counting_of(cls, *args, **kwargs):
        calls["of"] += 1
        return of(cls, *args, **kwargs)

    def wrap(name, key):
        real = getattr(request_module, name)

        def counting(*args, **kwargs):
            calls[key] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(request_module, name, counting)

    monkeypatch.setattr(ReleaseRequest, "of", classmethod(counting_of))
    wrap("_check_unit", "unit")
    wrap("check_silo_column", "silo_column")
    return calls


def test_the_command_line_checks_its_request_once(tmp_path, counted, capsys):
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    silos = []
    for k in range(2):
        silos.append(tmp_path / f"s{k}.csv")
        make_frame(200, k).to_csv(silos[-1], index=False)
    argv = synth_argv("independent", schema=tmp_path / "schema.json", silos=silos, out=tmp_path / "o.csv", seed=1)
    assert pf.cli.main([str(a) for a in argv]) == 0
    assert counted == {"of": 1, "unit": 1, "silo_column": 1}
    assert (tmp_path / "o.csv").exists()


def test_the_api_checks_its_request_once(counted):
    frames = [make_frame(200, 0), make_frame(150, 1)]
    result = pf.synthesize(frames, "independent", 1.0, 1e-9, schema=pf.Schema.from_dict(SCHEMA), seed=1, rows=10)
    assert counted == {"of": 1, "unit": 1, "silo_column": 1}
    assert len(result.data) == 10


def test_a_request_is_immutable_and_states_its_terms():
    schema = pf.Schema.from_dict(SCHEMA)
    request = ReleaseRequest.of(
        "aim", 1.0, 1e-9, schema, ["a", "b"], privacy_unit="pid", max_rows_per_unit=2, target="label"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.epsilon = 2.0  # type: ignore[misc]
    assert request.unit is not None and request.unit.max_rows == 2 and request.target == "label"
    terms = request.terms()
    assert (terms.method, terms.epsilon, terms.delta, terms.target, terms.site) == ("aim", 1.0, 1e-9, "label", None)
    assert terms.unit == request.unit


def test_method_options_and_release_options_are_told_apart():
    schema = pf.Schema.from_dict(SCHEMA)
    with pytest.raises(InputError, match="option 'bogus' does not apply to method aim"):
        ReleaseRequest.of("aim", 1.0, 1e-9, schema, ["a"], bogus=1)
    with pytest.raises(OptionError, match="^rows "):
        ReleaseRequest.of("aim", 1.0, 1e-9, schema, ["a"], rows=0)
    with pytest.raises(OptionError, match="mpc runs method"):
        ReleaseRequest.of("aim", 1.0, 1e-9, schema, ["a", "b"], mpc=True)
    with pytest.raises(OptionError, match="mpc needs the parties"):
        pf.synthesize([make_frame(50, 0)], "distaim", schema=schema, mpc=True)


def test_names_learnt_later_are_checked_against_the_silo_column():
    schema = pf.Schema.from_dict(
        {**SCHEMA, "columns": [*SCHEMA["columns"], {"name": "site", "type": "categorical", "categories": ["a", "b"]}]}
    )
    request = ReleaseRequest.of("independent", 1.0, 1e-9, schema, None, silos=2, mpc=True, silo_column="site")
    assert request.with_silo_names(["a", "b"]).silo_names == ("a", "b")
    with pytest.raises(OptionError, match="silo_column"):
        request.with_silo_names(["a", "c"])
