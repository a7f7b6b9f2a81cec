"""Property: whatever paths a user gives, no file they did not name as an output changes.

Hypothesis draws a command (synth, partition, evaluate, audit) and, for each of its outputs,
either a new file or another spelling of an existing file (the same path, an absolute path, a
path through ``..``, a symbolic link, a hard link), with or without ``--force``. The command runs
for real on real files; afterwards every file that was not named as an output is byte for byte
what it was, and a command whose output aliases one of its inputs or another of its outputs
exits with status 2 having changed nothing at all.
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privsyn_fed.cli import main

from .conftest import make_frame, synth_argv

SPELLINGS = ("same", "absolute", "dotdot", "symlink", "hardlink")
EXISTING = ("schema.json", "s0.csv", "s1.csv", "real.csv", "rel.ledger.json", "store.db")
_counter = itertools.count()


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    """One set of real files: a schema, two silos, a real table, a ledger and a budget store."""
    import json

    from .conftest import SCHEMA

    root = tmp_path_factory.mktemp("originals")
    (root / "schema.json").write_text(json.dumps(SCHEMA))
    make_frame(120, 0).to_csv(root / "s0.csv", index=False)
    make_frame(100, 1).to_csv(root / "s1.csv", index=False)
    make_frame(150, 2).to_csv(root / "real.csv", index=False)
    args = synth_argv(
        "fedtda",
        schema=root / "schema.json",
        silos=[root / "s0.csv"],
        out=root / "rel.csv",
        quiet=True,
        seed=1,
        budget_store=root / "store.db",
        dataset_id="d",
        total_epsilon=1000,
    )
    assert main(args) == 0
    (root / "rel.csv").unlink()
    return root


def spell(root: Path, name: str, how: str) -> Path:
    """Another name for ``root / name``."""
    target = root / name
    if how == "same":
        return target
    if how == "absolute":
        return target.resolve()
    if how == "dotdot":
        return root / "sub" / ".." / name
    alias = root / "links" / f"{next(_counter)}-{name}"
    if how == "symlink":
        alias.symlink_to(target)
    else:
        os.link(target, alias)
    return alias


def identity(path: Path):
    st_ = os.stat(path)
    return st_.st_dev, st_.st_ino


OUTPUTS = {
    "synth": ["--out", "--ledger", "--report", "--budget-store"],
    "evaluate": ["--json"],
    "audit": ["--report"],
    "partition": ["--out"],
}


@st.composite
def requests(draw):
    command = draw(st.sampled_from(sorted(OUTPUTS)))
    choices = {}
    for option in OUTPUTS[command]:
        if draw(st.booleans()):
            choices[option] = ("new", None)
        else:
            choices[option] = (draw(st.sampled_from(EXISTING)), draw(st.sampled_from(SPELLINGS)))
    return command, choices, draw(st.booleans())


def build(command, choices, force, root):
    """The command line, its inputs and its outputs (as paths)."""

    def path(option, fresh):
        kind, how = choices[option]
        return root / fresh if kind == "new" else spell(root, kind, how)

    if command == "synth":
        inputs = [root / "schema.json", root / "s0.csv", root / "s1.csv"]
        out = path("--out", "syn.csv")
        outs = {
            "--out": out,
            "--ledger": path("--ledger", "syn.ledger.json"),
            "--report": path("--report", "syn.report.md"),
            "--budget-store": path("--budget-store", "new.db"),
        }
        args = synth_argv(
            "fedtda",
            schema=inputs[0],
            silos=inputs[1:],
            out=out,
            epsilon=0.5,
            quiet=True,
            seed=2,
            dataset_id="d",
            total_epsilon=1000,
            ledger=outs["--ledger"],
            report=outs["--report"],
            budget_store=outs["--budget-store"],
        )
    elif command == "evaluate":
        inputs = [root / "real.csv", root / "s1.csv", root / "schema.json"]
        outs = {"--json": path("--json", "eval.json")}
        args = [
            "evaluate",
            "--real",
            inputs[0],
            "--synthetic",
            inputs[1],
            "--schema",
            inputs[2],
            "--workload-size",
            "4",
            "--json",
            outs["--json"],
        ]
    elif command == "audit":
        inputs = [root / "rel.ledger.json"]
        outs = {"--report": path("--report", "audit.md")}
        args = ["audit", inputs[0], "--report", outs["--report"]]
    else:
        inputs = [root / "real.csv"]
        outs = {"--out": path("--out", "clients")}
        args = ["partition", inputs[0], "--clients", "2", "--scheme", "iid", "--out", outs["--out"]]
    return [str(a) for a in args + (["--force"] if force else [])], inputs, outs


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(requests())
def test_no_file_that_was_not_named_as_an_output_changes(originals, tmp_path_factory, request_):
    command, choices, force = request_
    root = tmp_path_factory.mktemp("run")
    for name in EXISTING:
        shutil.copy2(originals / name, root / name)
    (root / "sub").mkdir()
    (root / "links").mkdir()
    args, inputs, outputs = build(command, choices, force, root)
    files = {name: (root / name).read_bytes() for name in EXISTING}
    named = {kind for kind, _ in choices.values() if kind != "new"}
    named_outputs = {identity(p) for p in outputs.values() if p.exists()}
    ins = [identity(p) for p in inputs]
    clash = any(o in ins for o in named_outputs) or len(named_outputs) < sum(1 for p in outputs.values() if p.exists())
    code = main(args)
    for name in EXISTING:
        if name not in named:
            assert (root / name).read_bytes() == files[name], f"{name} changed: {args}"
    if clash:
        assert code == 2, args
        assert all((root / name).read_bytes() == files[name] for name in EXISTING), args
