"""A site's audit log (``privsyn_fed.site.log``): the hash chain, the order of each release, the
ledger copies and the budget store it names, and the commands that check it (``site log`` and
``audit --site-log``). Real files, a real budget store, real processes sharing one log."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import stat
import threading
from pathlib import Path

import pytest

from privsyn_fed.accounting.budget_store import BudgetStore
from privsyn_fed.common import InputError
from privsyn_fed.site.log import GENESIS, SiteLog, check_log, read_log

from .conftest import assert_one_line_error, run_cli

PARTY0 = {"role": "party-0", "organisation": "Hospital A", "sha256": "ab" * 32}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def a_release(log: SiteLog, release: str, ledger: Path | None, store: BudgetStore | None, *, answers: int = 2) -> None:
    """One accepted release, as a site logs it: request, verdict, answers, end; its ledger copy written
    and, with ``store``, reserved in and settled with the store at the rho the end logs."""
    log.append(
        "request",
        release=release,
        party0=PARTY0,
        method="distaim",
        epsilon=1.0,
        delta=1e-9,
        schema_sha256="cd" * 32,
        servers=3,
        collusion=1,
    )
    log.append("verdict", release=release, verdict="accepted", by="policy")
    run = None
    if store is not None:
        assert ledger is not None
        reservation = store.reserve("d", epsilon=1, delta=1e-9, method="distaim", total_epsilon=10, ledger=str(ledger))
        run = reservation.run
    for step in range(answers):
        log.append(
            "answer",
            release=release,
            step=step,
            step_kind="noisy_sum",
            query="ef" * 32,
            label=f"1-way {step}",
            rho=0.001 * (step + 1),
        )
    spent = 0.001 * answers
    if ledger is not None:
        ledger.write_text(json.dumps({"release": release, "rho_spent": spent}))
    if store is not None:
        store.settle(run, spent, "complete")
    log.append(
        "end",
        release=release,
        status="complete",
        rho_spent=spent,
        ledger=None if ledger is None else str(ledger),
        ledger_sha256=None if ledger is None else sha(ledger),
        store=None if store is None else str(store.path),
        run=run,
    )


def a_refusal(log: SiteLog, release: str) -> None:
    log.append("request", release=release, party0=PARTY0, method="aim", epsilon=9.0, delta=1e-9)
    log.append("verdict", release=release, verdict="refused", by="person:alice", why="epsilon 9 is above 2")
    log.append(
        "end", release=release, status="rejected", rho_spent=0.0, ledger=None, ledger_sha256=None, store=None, run=None
    )


@pytest.fixture
def site(tmp_path):
    """A log of two accepted releases (their ledger copies and store runs) and one refusal:
    ``(log path, store path, ledger copies)``."""
    store = BudgetStore(tmp_path / "store.db")
    ledgers = [tmp_path / "ledgers" / f"r{k}.json" for k in (1, 2)]
    ledgers[0].parent.mkdir()
    log = SiteLog(tmp_path / "site.log")
    a_release(log, "release0001", ledgers[0], store)
    a_refusal(log, "release0002")
    a_release(log, "release0003", ledgers[1], store, answers=3)
    log.close()
    store.close()
    return tmp_path / "site.log", tmp_path / "store.db", ledgers


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def write_lines(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


# ---- appending and reading back -----------------------------------------------------------------
def test_entries_are_read_back_in_a_chain_and_check_out(site):
    log_path, store, ledgers = site
    entries = read_log(log_path)
    assert [e["kind"] for e in entries] == ["request", "verdict", "answer", "answer", "end"] + [
        "request",
        "verdict",
        "end",
    ] + ["request", "verdict", "answer", "answer", "answer", "end"]
    assert [e["seq"] for e in entries] == list(range(14))
    raw = lines_of(log_path)
    assert entries[0]["prev"] == GENESIS
    assert all(entries[n]["prev"] == hashlib.sha256(raw[n - 1]).hexdigest() for n in range(1, 14))
    assert entries[0]["party0"] == PARTY0 and entries[6]["by"] == "person:alice"
    assert entries[0]["time"].endswith("+00:00")
    assert check_log(log_path) == []
    assert check_log(log_path, store=store) == []


def test_append_returns_the_entry_written_and_reopening_continues_the_chain(tmp_path):
    path = tmp_path / "site.log"
    with_log = SiteLog(path)
    first = with_log.append("request", release="r1", method="aim")
    with_log.close()
    again = SiteLog(path)  # never truncated: the chain goes on
    second = again.append("verdict", release="r1", verdict="accepted", by="timeout")
    again.close()
    assert read_log(path) == [first, second]
    assert first["seq"] == 0 and second["seq"] == 1
    assert second["prev"] == hashlib.sha256(lines_of(path)[0]).hexdigest()
    assert list(first) == ["seq", "time", "kind", "release", "method", "prev"]


def test_the_log_is_created_0600_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        log = SiteLog(tmp_path / "site.log")
        log.append("request", release="r1")
        log.close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "site.log").st_mode) == 0o600


@pytest.mark.parametrize(
    "kind, fields, words",
    [
        ("reply", {"release": "r1"}, "kind 'reply'"),
        ("request", {}, "without release"),
        ("request", {"release": "r1", "epsilon": float("nan")}, "JSON cannot hold"),
        ("request", {"release": "r1", "when": object()}, "JSON cannot hold"),
        ("request", {"release": "r1", "seq": 5}, "seq are the log's own"),
        ("verdict", {"release": "r1", "verdict": "maybe", "by": "policy"}, "neither accepted nor refused"),
        ("verdict", {"release": "r1", "verdict": "accepted", "by": "person:"}, "is not policy"),
        ("verdict", {"release": "r1", "verdict": "refused", "by": "policy"}, "a refusal without why"),
        ("answer", {"release": "r1", "step": "3"}, "step is not an integer"),
        ("end", {"release": "r1", "status": "complete", "rho_spent": 0.1}, "without ledger"),
    ],
)
def test_append_refuses_what_the_format_does_not_allow(tmp_path, kind, fields, words):
    log = SiteLog(tmp_path / "site.log")
    log.append("request", release="r0")
    before = (tmp_path / "site.log").read_bytes()
    with pytest.raises(ValueError, match=words):
        log.append(kind, **fields)
    log.close()
    assert (tmp_path / "site.log").read_bytes() == before


def test_append_refuses_to_extend_a_log_whose_last_line_is_incomplete(tmp_path):
    path = tmp_path / "site.log"
    log = SiteLog(path)
    log.append("request", release="r1")
    with open(path, "ab") as fh:
        fh.write(b'{"seq": 1, "ti')
    with pytest.raises(InputError, match="incomplete"):
        log.append("verdict", release="r1", verdict="accepted", by="policy")
    log.close()
    assert path.read_bytes().endswith(b'{"seq": 1, "ti')


# ---- the chain ------------------------------------------------------------------------------------
def _altered(lines):
    entry = json.loads(lines[3])
    entry["rho"] = 0.0  # the answer at step 1 now says nothing was charged
    lines[3] = json.dumps(entry, separators=(",", ":")).encode()
    return lines, ["line 5: prev is not the SHA-256 of line 4"]


def _removed(lines):
    del lines[3]
    return lines, ["line 4: seq 4, not 3", "line 4: prev is not the SHA-256 of line 3"]


def _swapped(lines):
    lines[2], lines[3] = lines[3], lines[2]
    return lines, ["line 3: seq 3, not 2", "line 3: prev is not", "line 4: prev is not", "line 5: prev is not"]


def _forged(lines):
    last = json.loads(lines[-1])
    forged = {"seq": len(lines), "time": last["time"], "kind": "answer", "release": "release0003", "step": 9}
    lines.append(json.dumps({**forged, "prev": "1" * 64}, separators=(",", ":")).encode())
    return lines, [
        "line 15: prev is not the SHA-256 of line 14",
        "line 15: release release0003: an answer after its end",
    ]


@pytest.mark.parametrize("tamper", [_altered, _removed, _swapped, _forged], ids=lambda f: f.__name__[1:])
def test_a_tampered_log_fails_its_check(site, tamper):
    log_path, store, _ = site
    lines, expected = tamper(lines_of(log_path))
    write_lines(log_path, lines)
    problems = check_log(log_path)
    for words in expected:
        assert any(p.startswith(words) for p in problems), (words, problems)


def test_a_truncated_last_line_fails_its_check(site):
    log_path, _, _ = site
    data = log_path.read_bytes()
    log_path.write_bytes(data[: len(data) - 20])
    problems = check_log(log_path)
    assert "line 14: incomplete (no line end): the log was cut or is being written" in problems
    assert any(p.startswith("line 14: not a site log entry") for p in problems)
    with pytest.raises(InputError, match="line 14 is not a complete site log entry"):
        read_log(log_path)
    assert len(read_log(log_path, strict=False)) == 13


def test_time_going_backwards_fails(tmp_path):
    path = tmp_path / "site.log"
    log = SiteLog(path)
    log.append("request", release="r1")
    log.close()
    first = lines_of(path)[0]
    earlier = {"seq": 1, "time": "2000-01-01T00:00:00+00:00", "kind": "request", "release": "r2"}
    earlier["prev"] = hashlib.sha256(first).hexdigest()
    write_lines(path, [first, json.dumps(earlier).encode()])
    assert check_log(path) == ["line 2: time 2000-01-01T00:00:00+00:00 is earlier than the line before"]


# ---- processes and threads sharing a log ----------------------------------------------------------
def _append_many(path: str, who: str, count: int, start) -> None:
    log = SiteLog(path)
    start.wait(60)  # both processes append at the same moment
    for n in range(count):
        log.append("request", release=f"{who}r{n:03d}", method="aim")
    log.close()


def test_two_processes_appending_at_once_keep_one_chain(tmp_path):
    path = tmp_path / "site.log"
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(2)
    procs = [context.Process(target=_append_many, args=(str(path), who, 150, start)) for who in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    entries = read_log(path)
    assert check_log(path) == []
    assert len(entries) == 300 and [e["seq"] for e in entries] == list(range(300))
    assert sorted(e["release"] for e in entries) == sorted(f"{w}r{n:03d}" for w in "ab" for n in range(150))
    owners = [e["release"][0] for e in entries]
    assert sum(a != b for a, b in zip(owners, owners[1:])) > 1  # the two did write in turns


def test_threads_sharing_one_log_object_keep_one_chain(tmp_path):
    log = SiteLog(tmp_path / "site.log")
    threads = [
        threading.Thread(target=lambda w=w: [log.append("request", release=f"{w}{n}") for n in range(40)])
        for w in "xyz"
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()
    assert check_log(tmp_path / "site.log") == []
    assert len(read_log(tmp_path / "site.log")) == 120


# ---- the order of a release ----------------------------------------------------------------------
V_OK = {"verdict": "accepted", "by": "policy"}
V_NO = {"verdict": "refused", "by": "policy", "why": "no"}
END = {"status": "complete", "rho_spent": 0.0, "ledger": None, "ledger_sha256": None, "store": None, "run": None}
A0, A1 = {"step": 0}, {"step": 1}


@pytest.mark.parametrize(
    "steps, problem",
    [
        ([("answer", A0)], "line 1: release r: an answer after nothing"),
        ([("request", {}), ("answer", A0)], "line 2: release r: an answer after its request"),
        ([("request", {}), ("verdict", V_NO), ("answer", A0)], "line 3: release r: an answer after its refusal"),
        ([("request", {}), ("verdict", V_OK), ("verdict", V_OK)], "line 3: release r: a verdict after its acceptance"),
        ([("request", {}), ("request", {})], "line 2: release r: a request after its request"),
        ([("request", {}), ("end", END)], "line 2: release r: an end after its request"),
        (
            [("request", {}), ("verdict", V_OK), ("end", END), ("answer", A0)],
            "line 4: release r: an answer after its end",
        ),
        (
            [("request", {}), ("verdict", V_OK), ("answer", A1), ("answer", A0)],
            "line 4: release r: step 0 does not follow step 1",
        ),
    ],
)
def test_a_release_out_of_order_fails(tmp_path, steps, problem):
    log = SiteLog(tmp_path / "site.log")
    for kind, fields in steps:
        log.append(kind, release="r", **fields)
    log.append("request", release="other")  # another release's entries are no problem
    log.close()
    assert check_log(tmp_path / "site.log") == [problem]


def test_releases_interleaved_in_order_check_out(tmp_path):
    log = SiteLog(tmp_path / "site.log")
    for kind, fields in [("request", {}), ("verdict", V_OK), ("answer", A0), ("answer", A1), ("end", END)]:
        log.append(kind, release="r1", **fields)
        log.append(kind, release="r2", **fields)
    log.close()
    assert check_log(tmp_path / "site.log") == []


# ---- the ledger copies and the budget store ---------------------------------------------------------
def test_a_ledger_copy_edited_after_its_end_fails(site):
    log_path, _, ledgers = site
    ledgers[0].write_text(json.dumps({"release": "release0001", "rho_spent": 0.0}))
    problems = check_log(log_path)
    assert len(problems) == 1 and problems[0].startswith("line 5: release release0001: the ledger copy")
    assert f"has SHA-256 {sha(ledgers[0])}" in problems[0]
    assert check_log(log_path, ledgers=False) == []


def test_a_missing_ledger_copy_fails(site):
    log_path, _, ledgers = site
    ledgers[1].unlink()
    problems = check_log(log_path)
    assert len(problems) == 1 and problems[0].startswith("line 14: release release0003: the ledger copy")
    assert "cannot be read" in problems[0]


def test_a_store_that_disagrees_fails(site):
    log_path, store_path, ledgers = site
    store = BudgetStore(store_path)
    store.db.execute("UPDATE runs SET rho_spent=0.5 WHERE id=1")
    store.db.execute("UPDATE runs SET ledger=? WHERE id=2", (str(ledgers[0]),))
    store.close()
    problems = check_log(log_path, store=store_path)
    assert problems == [
        "line 5: release release0001: the store's run 1 spent rho 0.5, the log says 0.002",
        f"line 14: release release0003: the store's run 2 has the ledger {ledgers[0]}, the log says {ledgers[1]}",
    ]
    assert check_log(log_path) == []  # without the store the log alone checks out


def test_a_run_missing_from_the_store_fails(site, tmp_path):
    log_path, _, _ = site
    other = BudgetStore(tmp_path / "other.db")
    other.reserve("d", epsilon=1, delta=1e-9, method="aim", total_epsilon=3)
    other.close()
    problems = check_log(log_path, store=tmp_path / "other.db")
    assert f"line 14: release release0003: run 2 is not in the budget store {tmp_path / 'other.db'}" in problems
    assert any(p.startswith("line 5: release release0001: the store's run 1 spent rho None") for p in problems)


def test_the_store_is_read_not_written(site):
    log_path, store_path, _ = site
    before = store_path.read_bytes()
    assert check_log(log_path, store=store_path) == []
    assert store_path.read_bytes() == before
    assert sorted(p.name for p in store_path.parent.iterdir() if p.name.startswith("store.db")) == ["store.db"]


def test_bad_inputs_are_input_errors(tmp_path, site):
    log_path, _, _ = site
    with pytest.raises(InputError, match="site log not found"):
        check_log(tmp_path / "none.log")
    (tmp_path / "ledger.json").write_text(json.dumps({"entries": []}, indent=2))
    with pytest.raises(InputError, match="not a site log"):
        check_log(tmp_path / "ledger.json")
    with pytest.raises(InputError, match="budget store not found"):
        check_log(log_path, store=tmp_path / "none.db")
    with pytest.raises(InputError, match="not a privsyn-fed budget store"):
        check_log(log_path, store=tmp_path / "ledger.json")


# ---- the commands ---------------------------------------------------------------------------------
def test_site_log_prints_one_line_per_entry(site, capsys):
    log_path, _, _ = site
    code, out, err = run_cli("site", "log", log_path, capsys=capsys)
    lines = out.splitlines()
    assert code == 0, err
    assert len(lines) == 15 and lines[-1] == f"OK: {log_path}: 14 entries, 3 releases, 0 problems"
    assert "request  release0001  distaim at epsilon 1.0" in lines[0] and "Hospital A" in lines[0]
    assert "refused by person:alice: epsilon 9 is above 2" in lines[6]
    code, out, _ = run_cli("site", "log", log_path, "--json", capsys=capsys)
    shown = json.loads(out)
    assert code == 0 and shown["ok"] and shown["problems"] == [] and len(shown["entries"]) == 14


def test_site_log_lists_the_problems_and_exits_1(site, capsys):
    log_path, _, ledgers = site
    write_lines(log_path, _removed(lines_of(log_path))[0])
    ledgers[1].write_text("{}")
    code, out, _ = run_cli("site", "log", log_path, capsys=capsys)
    problems = [line for line in out.splitlines() if line.startswith("PROBLEM: ")]
    assert code == 1
    assert "PROBLEM: line 4: seq 4, not 3" in problems
    assert any("release0003: the ledger copy" in p for p in problems)
    assert out.splitlines()[-1].startswith(f"FAILED: {log_path}: 13 entries")


def test_site_log_bad_input_is_one_line_and_exit_2(tmp_path):
    assert_one_line_error(run_cli("site", "log", tmp_path / "none.log"), "none.log: site log not found (LOG)")
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    assert_one_line_error(run_cli("site", "log", tmp_path / "t.csv"), "t.csv: not a site log")


def test_audit_checks_a_site_log_alone_and_with_its_store(site, capsys):
    log_path, store_path, _ = site
    code, out, err = run_cli("audit", "--site-log", log_path, "--budget-store", store_path, capsys=capsys)
    assert code == 0, err
    assert out.splitlines() == [f"OK: {log_path}: site log, 14 entries, 3 releases, against {store_path}"]
    store = BudgetStore(store_path)
    store.db.execute("UPDATE runs SET rho_spent=0.5 WHERE id=1")
    store.close()
    code, out, _ = run_cli("audit", "--site-log", log_path, capsys=capsys)
    assert code == 0 and out.startswith("OK: ")
    code, out, _ = run_cli("audit", "--site-log", log_path, "--budget-store", store_path, capsys=capsys)
    assert code == 1
    assert out.splitlines() == [
        "PROBLEM: line 5: release release0001: the store's run 1 spent rho 0.5, the log says 0.002",
        f"FAILED: {log_path}: site log, 14 entries, 3 releases, against {store_path}",
    ]
    code, out, _ = run_cli("audit", "--site-log", log_path, "--budget-store", store_path, "--json", capsys=capsys)
    shown = json.loads(out)
    assert code == 1 and not shown["ok"] and len(shown["problems"]) == 1 and shown["summary"]["entries"] == 14


def test_audit_site_log_bad_input_is_one_line_and_exit_2(site, tmp_path):
    log_path, store_path, _ = site
    assert_one_line_error(
        run_cli("audit", "--site-log", tmp_path / "no.log"), "no.log: site log not found (--site-log)"
    )
    missing = run_cli("audit", "--site-log", log_path, "--budget-store", tmp_path / "no.db")
    assert_one_line_error(missing, "no.db: budget store not found (--budget-store)")
    assert not (tmp_path / "no.db").exists()
    assert_one_line_error(run_cli("audit", "--budget-store", store_path), "--budget-store belongs to --site-log")
    both = run_cli("audit", "--site-log", log_path, tmp_path / "ledgers" / "r1.json")
    assert_one_line_error(both, "leave LEDGER.json")
    assert_one_line_error(run_cli("audit"), "audit needs a LEDGER.json")  # as before
