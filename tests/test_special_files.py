"""Special files as inputs: a FIFO, a link to a FIFO, a link to ``/dev/zero`` and a Unix socket.

Such a file can block a command forever (a FIFO waits for a writer) or feed it bytes forever (a
device). Every command refuses one in every input position by its metadata alone, before any file
is read or any budget reserved: exit status 2, one line naming the file and the option. A FIFO is
watched by a writer that waits for a reader: had the command opened it, the writer would have
been let through.

``INPUTS`` is built by hand, one entry per input position; ``test_every_path_option_is_classified``
walks the real parsers so that a new option cannot be left out of it unnoticed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from privsyn_fed.accounting.budget_store import BudgetStore
from privsyn_fed.cli import build_parser, main

from .conftest import CLI, SCHEMA, CliRun, assert_one_line_error, make_frame, never_opened, run_cli

KINDS = ("fifo", "fifo-link", "zero-link", "socket")


# ---- special files --------------------------------------------------------------------------------
class WatchedFifo:
    """A FIFO with a writer waiting for a reader in a thread: ``opened`` tells whether anyone opened
    it for reading."""

    def __init__(self, path: Path):
        os.mkfifo(path)
        self.path = path
        self.opened = threading.Event()
        self._thread = threading.Thread(target=self._write, daemon=True)
        self._thread.start()

    def _write(self) -> None:
        fd = os.open(self.path, os.O_WRONLY)  # blocks until a reader opens the FIFO
        self.opened.set()
        os.close(fd)

    def release(self) -> None:
        """Let the writer through (as a reader that reads nothing) and wait for it."""
        for _ in range(10):  # the writer may not be waiting in its open yet
            if self.opened.is_set():
                break
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            self.opened.wait(1)
            os.close(fd)
        self._thread.join(5)


class Specials:
    """Makes special files of one kind and remembers the FIFOs to check and release."""

    def __init__(self, kind: str):
        self.kind = kind
        self.fifos: list[WatchedFifo] = []

    def make(self, path: Path) -> Path:
        """A special file of this kind at ``path``."""
        if self.kind == "fifo":
            self.fifos.append(WatchedFifo(path))
        elif self.kind == "fifo-link":
            self.fifos.append(WatchedFifo(path.with_name(path.name + ".target")))
            path.symlink_to(self.fifos[-1].path)
        elif self.kind == "zero-link":
            path.symlink_to("/dev/zero")
        else:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.bind(str(path))
        return path

    def never_opened(self) -> bool:
        """Whether no FIFO was opened for reading; releases every writer."""
        opened = [f.path for f in self.fifos if f.opened.is_set()]
        for f in self.fifos:
            f.release()
        return not opened


# ---- the regular files the commands are given ----------------------------------------------------
@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    """Valid regular inputs for every command: schema, tables, dictionary, ledger, budget store,
    model, policy and a federation's certificates and keys."""
    root = tmp_path_factory.mktemp("kit")
    (root / "schema.json").write_text(json.dumps(SCHEMA))
    for k, name in enumerate(("a.csv", "b.csv", "h.csv")):
        make_frame(40, k).to_csv(root / name, index=False)
    (root / "dict.csv").write_text("name,type,min,max,categories\nage,numeric,18,90,\nsex,categorical,,,F|M\n")
    (root / "ledger.json").write_text("{}\n")
    (root / "workload.json").write_text('[["label", "*"]]\n')
    (root / "model.npz").write_bytes(b"PK\x03\x04")
    store = BudgetStore(root / "store.db")
    store.reserve("d", epsilon=1, delta=1e-9, method="aim", total_epsilon=3, ledger=str(root / "ledger.json"))
    store.close()
    policy = {"max_epsilon": 1, "max_delta": 1e-9, "methods": ["distaim"], "schema_sha256": "0" * 64}
    (root / "policy.json").write_text(json.dumps(policy))
    members = ["--party", "A@127.0.0.1:7301", "--party", "B@127.0.0.1:7302", "--dealer", "D@127.0.0.1:7303"]
    assert main(["federation", "init", "--out", str(root / "fed"), "--name", "t", *members]) == 0
    servers = ["--party", "A@127.0.0.1:7311", "--party", "B@127.0.0.1:7312", "--dealer", "D@127.0.0.1:7313"]
    sites = ["--site", "s=S", "--site-port", "7314"]
    assert main(["federation", "init", "--out", str(root / "sfed"), "--name", "u", *servers, *sites]) == 0
    return root


def files(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root``: a regular file's bytes, anything else None."""
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() and not p.is_symlink() else None
        for p in sorted(root.rglob("*"))
    }


# ---- every input position -------------------------------------------------------------------------
@dataclass(frozen=True)
class Position:
    """One input position: the parser and option it belongs to, the command line with a special
    file there (``argv(kit, work, special)``, where ``special(path)`` makes one) and the words
    the error must name."""

    parser: str
    option: str
    variant: str
    argv: Callable[[Path, Path, Callable[[Path], Path]], list]
    label: str

    @property
    def id(self) -> str:
        return f"{self.parser}:{self.option}" + (f":{self.variant}" if self.variant else "")


def _synth(k: Path, w: Path, at: dict) -> list:
    f = {"--schema": k / "schema.json", "--silo": k / "a.csv", "--quality-holdout": k / "h.csv"}
    f["--budget-store"], f["--workload"] = w / "b.db", k / "workload.json"
    f.update(at)
    return (
        ["synth", "--schema", f["--schema"], "--silo", f["--silo"], "--silo", k / "b.csv", "--epsilon", "1"]
        + ["--workload", f["--workload"]]
        + ["--delta", "1e-9", "--out", w / "o.csv", "--quality-report", w / "q.html", "--quality-holdout"]
        + [f["--quality-holdout"], "--budget-store", f["--budget-store"], "--dataset-id", "d", "--total-epsilon", "3"]
    )


def _member(k: Path, role: str, at: dict) -> list:
    """``--federation``, ``--cert`` and ``--key`` of ``role`` from the kit, or from ``at``."""
    f = {"--federation": k / "fed" / "federation.json", "--cert": k / "fed" / role / "cert.pem"}
    f["--key"] = k / "fed" / role / "key.pem"
    f.update(at)
    return [x for option in ("--federation", "--cert", "--key") for x in (option, f[option])]


def _synth_mpc(k: Path, w: Path, at: dict) -> list:
    return (
        ["synth", "--method", "distaim", "--mpc", "--schema", k / "schema.json", "--silo", k / "a.csv"]
        + _member(k, "party-0", at)
        + ["--epsilon", "1", "--delta", "1e-9", "--out", w / "o.csv", "--budget-store", w / "b.db"]
        + ["--dataset-id", "d", "--total-epsilon", "3"]
    )


def _party(k: Path, w: Path, at: dict) -> list:
    f = {"--schema": k / "schema.json", "--silo": k / "a.csv", "--policy": k / "policy.json"}
    f.update(at)
    given = [x for option in ("--schema", "--silo", "--policy") for x in (option, f[option])]
    return ["mpc-party", *_member(k, "party-1", at), *given, "--ledger", w / "copy.json", "--mpc-timeout", "5"]


def _party_store(k: Path, w: Path, special) -> list:
    """``mpc-party`` whose policy names a special file as its budget store."""
    policy = json.loads((k / "policy.json").read_text())
    policy["budget_store"] = {"path": str(special(w / "pb.db")), "dataset_id": "d", "total_epsilon": 3}
    (w / "policy.json").write_text(json.dumps(policy))
    return _party(k, w, {"--policy": w / "policy.json"})


def _server(k: Path, w: Path, at: dict) -> list:
    """``mpc-server`` of a federation of sites and servers."""
    f = {"--federation": k / "sfed" / "federation.json", "--cert": k / "sfed" / "party-1" / "cert.pem"}
    f |= {"--key": k / "sfed" / "party-1" / "key.pem", "--schema": k / "schema.json", "--policy": k / "policy.json"}
    f.update(at)
    given = [x for option in ("--federation", "--cert", "--key", "--schema", "--policy") for x in (option, f[option])]
    return ["mpc-server", *given, "--ledgers", w / "l", "--mpc-timeout", "5"]


def _site(k: Path, w: Path, at: dict) -> list:
    """``site`` of a federation of sites and servers."""
    f = {"--federation": k / "sfed" / "federation.json", "--cert": k / "sfed" / "site-s" / "cert.pem"}
    f |= {"--key": k / "sfed" / "site-s" / "key.pem", "--schema": k / "schema.json", "--policy": k / "policy.json"}
    f["--silo"] = k / "a.csv"
    f.update(at)
    options = ("--federation", "--cert", "--key", "--schema", "--silo", "--policy")
    given = [x for option in options for x in (option, f[option])]
    return ["site", "run", *given, "--ledger", w / "copy.json", "--connect-timeout", "1"]


def _dealer(k: Path, w: Path, at: dict) -> list:
    return ["mpc-dealer", *_member(k, "dealer", at), "--mpc-timeout", "5"]


def _draft(k: Path, w: Path, at: dict) -> list:
    f = {"data": k / "a.csv", "--budget-store": w / "b.db"}
    f.update(at)
    store = ["--budget-store", f["--budget-store"], "--dataset-id", "d", "--total-epsilon", "3"]
    return ["schema", "draft", f["data"], "--out", w / "s.json", "--dp", "1", "--delta", "1e-9", *store]


def _draft_mpc(k: Path, w: Path, at: dict) -> list:
    return ["schema", "draft", k / "a.csv", "--out", w / "s.json", "--dp", "1", "--delta", "1e-9", "--mpc"] + _member(
        k, "party-0", at
    )


def _plain_draft(k: Path, w: Path, special) -> list:
    return ["schema", "draft", special(w / "x.csv"), "--out", w / "s.json"]


def _dictionary(k: Path, w: Path, special) -> list:
    return ["schema", "from-dictionary", special(w / "d.csv"), "--out", w / "s.json"]


def _cut(k: Path, w: Path, special) -> list:
    return ["schema", "cut-at-rules", special(w / "s.json"), "--out", w / "c.json"]


def _partition(k: Path, w: Path, special) -> list:
    return ["partition", special(w / "x.csv"), "--clients", "2", "--scheme", "iid", "--out", w / "p"]


def _evaluate(k: Path, w: Path, at: dict) -> list:
    f = {"--real": k / "a.csv", "--synthetic": k / "b.csv", "--schema": k / "schema.json", "--holdout": k / "h.csv"}
    f.update({"--model": k / "model.npz", "--baseline": k / "b.csv"})
    f.update(at)
    given = [x for option, path in f.items() for x in (option, path)]
    return ["evaluate", "--label", "label", "--json", w / "e.json", "--report", w / "q.html", *given]


def _sample(k: Path, w: Path, special) -> list:
    return ["sample", special(w / "x.model"), "--rows", "5", "--out", w / "s.csv"]


def _audit(k: Path, w: Path, special) -> list:
    return ["audit", special(w / "l.json")]


def _audit_report(k: Path, w: Path, special) -> list:
    return [*_audit(k, w, special), "--report", w / "r.md"]


def _a_site_log(w: Path) -> Path:
    """A site's audit log of one request (``site.log``), written in ``w``."""
    from privsyn_fed.site.log import SiteLog

    log = SiteLog(w / "site.log")
    log.append("request", release="r1")
    log.close()
    return w / "site.log"


def _site_log(k: Path, w: Path, special) -> list:
    return ["site", "log", special(w / "x.log")]


def _audit_site_log(k: Path, w: Path, at: dict) -> list:
    f = {"--site-log": at.get("--site-log") or _a_site_log(w), "--budget-store": k / "store.db"}
    f.update(at)
    return ["audit", "--site-log", f["--site-log"], "--budget-store", f["--budget-store"]]


def _budget_show(k: Path, w: Path, special) -> list:
    return ["budget", "show", "--budget-store", special(w / "x.db")]


def _settle(k: Path, w: Path, at: dict) -> list:
    shutil.copy(k / "store.db", w / "store.db")
    f = {"--budget-store": w / "store.db", "--ledger": k / "ledger.json"}
    f.update(at)
    return ["budget", "settle", "--budget-store", f["--budget-store"], "--run", "1", "--ledger", f["--ledger"]]


def _settle_recorded(k: Path, w: Path, special) -> list:
    """``budget settle`` without ``--ledger``: the store recorded a special file as the run's ledger."""
    store = BudgetStore(w / "store.db")
    store.reserve("d", epsilon=1, delta=1e-9, method="aim", total_epsilon=3, ledger=str(w / "l.json"))
    store.close()
    (w / "l.json").unlink(missing_ok=True)  # what the reservation may have opened there
    special(w / "l.json")
    return ["budget", "settle", "--budget-store", w / "store.db", "--run", "1"]


def _issue(k: Path, w: Path, special, name: str | None = None) -> list:
    """``federation issue`` with a copy of the CA's folder; ``name`` in it special when given."""
    ca = w / "ca"
    shutil.copytree(k / "fed" / "ca", ca)
    federation = k / "fed" / "federation.json"
    if name:
        (ca / name).unlink()
        special(ca / name)
    else:
        federation = special(w / "f.json")
    return ["federation", "issue", "--ca", ca, "--federation", federation, "--role", "party-1", "--out", w / "n"]


def _describe(k: Path, w: Path, at: dict) -> list:
    certs = {r: at.get(r, k / "fed" / r / "cert.pem") for r in ("party-0", "party-1", "dealer")}
    members = [x for n, (r, c) in enumerate(certs.items()) for x in ("--member", f"{r}={c}@127.0.0.1:{7401 + n}")]
    return (
        ["federation", "describe", "--ca-cert", at.get("--ca-cert", k / "fed" / "ca" / "ca.pem"), "--name", "t"]
        + members
        + ["--schema", at.get("--schema", k / "schema.json"), "--out", w / "f.json"]
    )


def _init(k: Path, w: Path, special) -> list:
    members = ["--party", "A@127.0.0.1:7501", "--party", "B@127.0.0.1:7502", "--dealer", "D@127.0.0.1:7503"]
    return ["federation", "init", "--out", w / "n", "--name", "t", *members, "--schema", special(w / "x.json")]


def _show(k: Path, w: Path, special) -> list:
    return ["federation", "show", special(w / "f.json")]


def _at(build, option: str, name: str):
    """``argv`` for a builder that takes ``{option: path}``: the special file made at ``work/name``."""
    return lambda k, w, special: build(k, w, {option: special(w / name)})


def _each(parser: str, build, options: tuple[str, ...], name: str) -> list[Position]:
    """One position per option of ``build`` (a builder taking ``{option: path}``)."""
    return [Position(parser, o, "", _at(build, o, name), o) for o in options]


INPUTS = [
    *_each("synth", _synth, ("--schema", "--silo", "--quality-holdout", "--budget-store", "--workload"), "x.csv"),
    *_each("synth", _synth_mpc, ("--federation", "--cert", "--key"), "x.pem"),
    *_each("mpc-party", _party, ("--federation", "--cert", "--key", "--schema", "--silo", "--policy"), "x.pem"),
    Position("mpc-party", "--policy", "budget_store.path", _party_store, "budget_store.path"),
    *_each("mpc-dealer", _dealer, ("--federation", "--cert", "--key"), "x.pem"),
    *_each("mpc-server", _server, ("--federation", "--cert", "--key", "--schema", "--policy"), "x.pem"),
    *_each("site run", _site, ("--federation", "--cert", "--key", "--schema", "--silo", "--policy"), "x.pem"),
    Position("federation init", "--schema", "", _init, "--schema"),
    Position("federation issue", "--federation", "", _issue, "--federation"),
    Position("federation issue", "--ca", "ca.pem", lambda k, w, s: _issue(k, w, s, "ca.pem"), "--ca"),
    Position("federation issue", "--ca", "ca.key", lambda k, w, s: _issue(k, w, s, "ca.key"), "--ca"),
    *_each("federation describe", _describe, ("--ca-cert", "--schema"), "x.pem"),
    Position("federation describe", "--member", "", _at(_describe, "party-1", "x.pem"), "--member"),
    Position("federation show", "file", "", _show, "FILE"),
    Position("audit", "ledger", "", _audit, "LEDGER"),
    Position("audit", "ledger", "report", _audit_report, "LEDGER"),
    *_each("audit", _audit_site_log, ("--site-log", "--budget-store"), "x.log"),
    Position("site log", "log", "", _site_log, "LOG"),
    Position("budget show", "--budget-store", "", _budget_show, "--budget-store"),
    Position("budget settle", "--budget-store", "", _at(_settle, "--budget-store", "x.db"), "--budget-store"),
    Position("budget settle", "--ledger", "", _at(_settle, "--ledger", "x.json"), "--ledger"),
    Position("budget settle", "--ledger", "recorded", _settle_recorded, "the ledger of run 1"),
    Position("schema draft", "data", "dp", _at(_draft, "data", "x.csv"), "DATA"),
    Position("schema draft", "data", "plain", _plain_draft, "DATA"),
    Position("schema draft", "--budget-store", "", _at(_draft, "--budget-store", "x.db"), "--budget-store"),
    *_each("schema draft", _draft_mpc, ("--federation", "--cert", "--key"), "x.pem"),
    Position("schema from-dictionary", "dictionary", "", _dictionary, "DICT.csv"),
    Position("schema cut-at-rules", "schema", "", _cut, "SCHEMA"),
    Position("partition", "data", "", _partition, "DATA.csv"),
    Position("sample", "model", "", _sample, "MODEL"),
    *_each("evaluate", _evaluate, ("--real", "--synthetic", "--schema", "--holdout", "--model", "--baseline"), "x.csv"),
]

#: Path options that name what a command writes (their checks are in test_file_safety and elsewhere).
OUTPUTS = {
    ("synth", "--out"),
    ("synth", "--ledger"),
    ("synth", "--report"),
    ("synth", "--model-out"),
    ("synth", "--quality-report"),
    ("mpc-party", "--ledger"),
    ("mpc-server", "--ledgers"),
    ("site run", "--ledger"),
    ("site run", "--state"),
    ("site pending", "--state"),
    ("site approve", "--state"),
    ("site refuse", "--state"),
    ("federation init", "--out"),
    ("federation issue", "--out"),
    ("federation describe", "--out"),
    ("audit", "--report"),
    ("schema draft", "--out"),
    ("schema draft", "--ledger"),
    ("schema from-dictionary", "--out"),
    ("schema cut-at-rules", "--out"),
    ("partition", "--out"),
    ("evaluate", "--json"),
    ("evaluate", "--report"),
    ("sample", "--out"),
}

#: Text options that name no file.
TEXT = {
    ("synth", "--quality-label"),
    ("synth", "--privacy-unit"),
    ("synth", "--dataset-id"),
    ("synth", "--target"),
    ("synth", "--silo-column"),
    ("synth", "--superlink"),
    ("federation init", "--name"),
    ("federation init", "--party"),
    ("federation init", "--dealer"),
    ("federation init", "--site"),
    ("federation init", "--superlink"),
    ("site approve", "release"),
    ("site approve", "--by"),
    ("site refuse", "release"),
    ("site refuse", "--by"),
    ("site refuse", "--why"),
    ("federation issue", "--role"),
    ("federation issue", "--organisation"),
    ("federation issue", "--address"),
    ("federation describe", "--name"),
    ("budget show", "--dataset-id"),
    ("schema draft", "--missing-value"),
    ("schema draft", "--dataset-id"),
    ("schema draft", "--exclude"),
    ("schema draft", "--include"),
    ("partition", "--label"),
    ("evaluate", "--label"),
    ("evaluate", "--silo-column"),
    ("sample", "--where"),
}


def text_options(parser: argparse.ArgumentParser, prefix: str = ""):
    """``(command, option)`` of every option of every command that takes free text (a path or a name)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from text_options(sub, f"{prefix} {name}".strip())
        elif action.nargs != 0 and action.type is None and action.choices is None and action.dest != "help":
            yield prefix, action.option_strings[0] if action.option_strings else action.dest


def test_every_path_option_is_classified():
    found = set(text_options(build_parser()))
    inputs = {(p.parser, p.option) for p in INPUTS}
    assert not inputs & OUTPUTS and not inputs & TEXT and not OUTPUTS & TEXT
    assert found == inputs | OUTPUTS | TEXT, (found - (inputs | OUTPUTS | TEXT), (inputs | OUTPUTS | TEXT) - found)


# ---- the property ---------------------------------------------------------------------------------
class Stuck(Exception):
    """The command did not finish in time: it read a special file."""


def _in_process(argv: list[str], capsys, seconds: float = 30) -> CliRun:
    """``privsyn-fed ARGV`` in this process, failing with ``Stuck`` if it runs past ``seconds``."""

    def stuck(signum, frame):
        raise Stuck(" ".join(argv))

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return run_cli(*argv, capsys=capsys)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


#: What the error calls each kind of special file.
CALLED = {
    "fifo": "is a FIFO",
    "fifo-link": "is a link to a FIFO",
    "zero-link": "is a link to a character device (/dev/zero)",
    "socket": "is a socket",
}


def assert_refused(run: CliRun, special: Path, kind: str, label: str) -> None:
    """Exit 2 and one line naming the special file, what it is and where it was given."""
    assert_one_line_error(run, f"{special}: {CALLED[kind]}", "not a regular file", f"({label})")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("position", INPUTS, ids=lambda p: p.id)
def test_a_special_file_in_any_input_position_is_refused_unread(position, kind, kit, tmp_path, capsys):
    work = tmp_path / "w"
    work.mkdir()
    specials = Specials(kind)
    made: list[Path] = []
    argv = [str(a) for a in position.argv(kit, work, lambda path: made.append(specials.make(path)) or path)]
    before, kit_before = files(work), files(kit)
    try:
        run = _in_process(argv, capsys)
    finally:
        unread = specials.never_opened()
    assert unread, f"{position.id}: a FIFO was opened for reading"
    assert len(made) == 1
    assert_refused(run, made[0], kind, position.label)
    assert files(work) == before, "a file was written or changed"  # no output, no budget store, no run
    assert files(kit) == kit_before


# ---- as a user meets it: real processes ------------------------------------------------------------
#: Positions checked again as real processes (the property above runs the command line in this
#: process, for speed; synth and schema draft have process tests of their own below).
AS_PROCESSES = {"mpc-party:--silo": "fifo-link", "budget settle:--ledger:recorded": "socket"}


def test_commands_refuse_a_special_file_as_real_processes(kit, tmp_path):
    """Each command in a process of its own, all at once: a special file opened would leave its
    process blocked (a FIFO) or reading (``/dev/zero``) until the timeout."""
    runs = []
    for n, position in enumerate(p for p in INPUTS if p.id in AS_PROCESSES):
        work = tmp_path / f"w{n}"
        work.mkdir()
        kind = AS_PROCESSES[position.id]
        specials = Specials(kind)
        made: list[Path] = []
        argv = [str(a) for a in position.argv(kit, work, lambda path: made.append(specials.make(path)) or path)]
        proc = subprocess.Popen([*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        runs.append((position, kind, specials, made[0], proc, work, files(work)))
    assert len(runs) == len(AS_PROCESSES)
    for position, kind, specials, special, proc, work, before in runs:
        try:
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
            unread = specials.never_opened()
        assert unread, position.id
        assert_refused(CliRun(proc.args, proc.returncode, out, err), special, kind, position.label)
        assert files(work) == before, position.id


def test_the_lease_witness_sees_another_process_open_a_file(tmp_path):
    """``never_opened``, which other tests use to show a silo was not read, does see an open."""
    seen, unseen = tmp_path / "seen.csv", tmp_path / "unseen.csv"
    seen.write_text("a\n1\n")
    unseen.write_text("a\n1\n")
    with never_opened(seen, unseen) as opened:
        reader = subprocess.Popen([sys.executable, "-c", f"open({str(seen)!r}).read()"])
        deadline = time.monotonic() + 30
        while not opened() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert opened() == [seen]
    assert reader.wait(timeout=30) == 0  # let through once the lease is gone


def test_a_fifo_as_a_silo_is_refused_before_the_budget_is_reserved(kit, tmp_path):
    """``synth`` with a FIFO among its silos and a budget store: refused at once, nothing reserved."""
    specials = Specials("fifo")
    fifo = specials.make(tmp_path / "silo.csv")
    argv = _synth(kit, tmp_path, {"--silo": fifo})
    try:
        run = run_cli(*argv, timeout=60)
    finally:
        assert specials.never_opened()
    assert_one_line_error(run, f"{fifo}: is a FIFO, not a regular file (--silo)")
    assert not (tmp_path / "b.db").exists() and not (tmp_path / "o.csv").exists()


def test_a_schema_draft_of_a_link_to_dev_zero_is_refused(tmp_path):
    link = tmp_path / "t.csv"
    link.symlink_to("/dev/zero")
    run = run_cli("schema", "draft", link, "--out", tmp_path / "t.json", timeout=60)
    assert_one_line_error(run, f"{link}: is a link to a character device (/dev/zero), not a regular file (DATA)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def _bytes_read(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/PID/io")


def test_sigterm_stops_the_digest_of_a_large_silo_promptly(kit, tmp_path):
    """Comparing silos' bytes reads them whole after the budget is reserved: SIGTERM stops that read
    at once (status 143), settles the reservation at nothing spent and writes no CSV."""
    big = tmp_path / "big.csv"
    make_frame(40, 5).to_csv(big, index=False)
    with open(big, "r+b") as fh:
        fh.truncate(64 << 30)  # then NUL bytes up to 64 GiB, sparse: a minute to digest, no disk used
    argv = _synth(kit, tmp_path, {"--silo": big})
    err = open(tmp_path / "stderr.txt", "w+")
    proc = subprocess.Popen([*CLI, *(str(a) for a in argv)], stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while _bytes_read(proc.pid) < 256 << 20:  # well into the digest
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "stderr.txt").read_text()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        code = proc.wait(timeout=30)
        took = time.monotonic() - stopped
    finally:
        proc.kill()
    stderr = (tmp_path / "stderr.txt").read_text()
    assert code == 128 + signal.SIGTERM, stderr
    assert took < 5, took
    assert "interrupted by SIGTERM" in stderr and "Traceback" not in stderr
    assert not (tmp_path / "o.csv").exists()
    budget = BudgetStore(tmp_path / "b.db").budget("d")
    assert len(budget.runs) == 1 and budget.rho_committed == 0, budget.runs


def test_a_csv_line_that_never_ends_is_refused_not_held_in_memory(tmp_path):
    """A regular file of 64 GiB of NUL bytes (sparse) has no line end: refused once a line passes
    ``MAX_LINE_BYTES``, instead of growing in memory until the line ends."""
    from privsyn_fed.common.tables import MAX_LINE_BYTES

    data = tmp_path / "t.csv"
    with open(data, "wb") as fh:
        fh.truncate(64 << 30)
    run = run_cli("schema", "draft", data, "--out", tmp_path / "t.json", timeout=60)
    assert_one_line_error(run, f"{data}: line 1 is longer than {MAX_LINE_BYTES >> 20} MiB")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]
