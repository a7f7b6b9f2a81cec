"""A site's audit log: append-only JSON lines in a hash chain, for the site's own auditors.

Each line is one compact ASCII JSON object ``{"seq": n, "time": T, "kind": K, "release": ID, ...,
"prev": H}``: ``seq`` counts 0, 1, 2, ...; ``time`` is ISO-8601 UTC, never earlier than the line
before; ``prev`` is the SHA-256 (hex) of the previous line's exact bytes (without its ``\n``), 64
zeros for the first. ``SiteLog`` creates the file 0600, never truncates it, opens it ``O_APPEND`` and
writes each line with one ``os.write`` and an ``fsync`` under an exclusive ``flock``, held while it
reads the last line (threads and processes may share one log). The kinds and their fields:
  * ``request``: ``party0`` (party 0's certificate: ``role``, ``organisation``, ``sha256``),
    ``method``, ``epsilon``, ``delta``, ``schema_sha256``, ``servers``, ``collusion``;
  * ``verdict``: ``verdict`` (accepted or refused), ``by`` (policy, person:<name> or timeout),
    ``why`` (when refused);
  * ``answer``: ``step``, ``step_kind`` (noisy_sum, pool_add, local_select), ``query`` (its digest),
    ``label``, ``rho`` (charged to the release so far);
  * ``end``: ``status``, ``rho_spent`` (what the site's store was settled at), ``ledger`` (the ledger
    copy's path or null), ``ledger_sha256``, ``store`` (the budget store's path or null), ``run``.

``check_log`` finds: a line that is not a complete JSON object entry, ``seq`` out of step, ``prev``
not the previous line's SHA-256 (an altered, removed or reordered line), ``time`` going backwards,
one release's kinds out of order (a request, one verdict, answers only after "accepted" and in
increasing steps, one end), an ``end`` whose ledger copy is missing or hashes otherwise, and with
``store``: an ``end`` whose run is not in the store, or whose ``rho_spent`` or ``ledger`` differ.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import sqlite3
import stat
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..common import InputError, check_regular, parse_json

KINDS = ("request", "verdict", "answer", "end")
#: Fields each kind must have (``append`` refuses an entry without them; ``check_log`` reports it).
REQUIRED = {
    "request": ("release",),
    "verdict": ("release", "verdict", "by"),
    "answer": ("release", "step"),
    "end": ("release", "status", "rho_spent", "ledger", "ledger_sha256", "store", "run"),
}
GENESIS = "0" * 64
MAX_ENTRY_BYTES = 1 << 16
_RESERVED = ("seq", "time", "kind", "prev")


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _fault(kind: Any, fields: dict) -> str | None:
    """What is wrong with an entry's kind and fields (None when nothing)."""
    if kind not in KINDS:
        return f"kind {str(kind)[:40]!r} is not one of {', '.join(KINDS)}"
    if missing := [f for f in REQUIRED[kind] if f not in fields]:
        return f"a {kind} without {', '.join(missing)}"
    if not isinstance(fields["release"], str) or not fields["release"]:
        return "release is not a non-empty string"
    verdict, by = fields.get("verdict"), str(fields.get("by"))
    if kind == "verdict" and verdict not in ("accepted", "refused"):
        return f"verdict {str(verdict)[:40]!r} is neither accepted nor refused"
    if kind == "verdict" and not (by in ("policy", "timeout") or (by.startswith("person:") and by[7:])):
        return f"by {by[:60]!r} is not policy, person:<name> or timeout"
    if kind == "verdict" and verdict == "refused" and not fields.get("why"):
        return "a refusal without why"
    if kind == "answer" and type(fields["step"]) is not int:
        return "step is not an integer"
    return None


class SiteLog:
    """The append-only log at ``path`` (module docstring); ``append`` may be called from any thread."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            os.fchmod(self.fd, 0o600)
        except FileExistsError:
            check_regular(self.path, "site log")
            self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        self._lock = threading.Lock()  # flock excludes other open files, not this one's other threads

    def close(self) -> None:
        """Close the file (``append`` then fails)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _last(self) -> tuple[bytes | None, dict | None]:
        """The last line's bytes and entry (None, None in an empty log); ``InputError`` when the
        log does not end with a complete entry (it is then not extended: an auditor must look)."""
        size = os.fstat(self.fd).st_size
        tail = os.pread(self.fd, min(size, MAX_ENTRY_BYTES + 1), max(0, size - MAX_ENTRY_BYTES - 1))
        if not tail:
            return None, None
        if not tail.endswith(b"\n"):
            raise InputError(f"{self.path}: the last line is incomplete; the site log is not extended")
        line = tail[:-1].rsplit(b"\n", 1)[-1]
        entry = _entry(line)
        if entry is None:
            raise InputError(f"{self.path}: the last line is not a site log entry; the site log is not extended")
        return line, entry

    def append(self, kind: str, **fields: Any) -> dict:
        """Write one entry of ``kind`` with ``fields`` (they must include ``release``); the entry.
        ``ValueError`` for a kind or fields the format does not allow, or that JSON cannot hold."""
        fault = _fault(kind, fields)
        clash = [f for f in _RESERVED if f in fields]
        if fault or clash:
            raise ValueError(fault or f"{', '.join(clash)} are the log's own fields")
        with self._lock:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            try:
                line, last = self._last()
                now = datetime.now(timezone.utc)
                if last is not None:  # never earlier than the line before, whatever the clock did
                    now = max(now, datetime.fromisoformat(last["time"]))
                entry = {"seq": 0 if last is None else last["seq"] + 1, "time": now.isoformat(), "kind": kind}
                entry |= fields
                entry["prev"] = GENESIS if line is None else hashlib.sha256(line).hexdigest()
                try:
                    data = json.dumps(entry, allow_nan=False, separators=(",", ":")).encode("ascii")
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"a {kind} entry JSON cannot hold: {exc}") from None
                if len(data) > MAX_ENTRY_BYTES:
                    raise ValueError(f"a {kind} entry of {len(data)} bytes, more than {MAX_ENTRY_BYTES}")
                if os.write(self.fd, data + b"\n") != len(data) + 1:
                    raise OSError(f"{self.path}: a short write")
                os.fsync(self.fd)
                return entry
            finally:
                fcntl.flock(self.fd, fcntl.LOCK_UN)


def _entry(line: bytes) -> dict | None:
    """The entry a line holds, or None when it is not a JSON object with seq, time, kind and prev."""
    try:
        value = parse_json(line.decode("utf-8"), "site log", "site log line", _constant)
    except (InputError, UnicodeDecodeError):
        return None
    if not isinstance(value, dict) or not all(k in value for k in _RESERVED):
        return None
    try:
        datetime.fromisoformat(value["time"])
    except (TypeError, ValueError):
        return None
    return value if type(value["seq"]) is int and isinstance(value["prev"], str) else None


def _lines(path: str | Path) -> tuple[list[bytes], bool]:
    """The log's lines (without their ``\\n``) and whether the last is complete; ``InputError``
    when the file is missing, not a regular file or unreadable, or no line of it is an entry."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: site log not found")
    check_regular(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the site log ({exc.strerror or exc})") from None
    lines = data.split(b"\n")
    complete = lines[-1] == b""
    lines = lines[:-1] if complete else lines
    if lines and not any(_entry(line) is not None for line in lines):
        raise InputError(f"{path}: not a site log (no line is a log entry)")
    return lines, complete


def read_log(path: str | Path, *, strict: bool = True) -> list[dict]:
    """Every entry of the log at ``path``: ``InputError`` at the first line that is not a complete
    one, or with ``strict=False`` such lines left out (to show a damaged log beside ``check_log``)."""
    lines, complete = _lines(path)
    entries = [_entry(line) if n < len(lines) or complete else None for n, line in enumerate(lines, 1)]
    bad = [n for n, e in enumerate(entries, 1) if e is None]
    if bad and strict:
        raise InputError(f"{path}: line {bad[0]} is not a complete site log entry")
    return [e for e in entries if e is not None]


def _store_rows(store: str | Path) -> dict[int, tuple[Any, Any]]:
    """Each run's ``(rho_spent, ledger)`` in the budget store at ``store``, opened read-only."""
    path = Path(store)
    if not path.is_file():
        raise InputError(f"{path}: budget store not found")
    try:
        db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            return {row[0]: row[1:] for row in db.execute("SELECT id, rho_spent, ledger FROM runs")}
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: not a privsyn-fed budget store ({exc})") from None


def _file_sha(path: Path) -> str:
    """The SHA-256 of a regular file (``OSError`` for anything else: a FIFO is not waited on)."""
    if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or a device is not opened
        raise OSError("not a regular file")
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise OSError("not a regular file")
        digest = hashlib.sha256()
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
        return digest.hexdigest()


def _check_end(e: dict, base: Path, ledgers: bool, rows: dict | None, store: Any) -> list[str]:
    """The problems of an ``end``: its ledger copy's SHA-256, and its run in the store."""
    out, ledger, run = [], e["ledger"], e["run"]
    if ledgers and ledger is not None:
        try:
            digest = _file_sha(base / str(ledger))
        except OSError as exc:
            out.append(f"the ledger copy {ledger} cannot be read ({exc.strerror or exc})")
        else:
            if digest != e["ledger_sha256"]:
                out.append(f"the ledger copy {ledger} has SHA-256 {digest}, not the {e['ledger_sha256']} logged")
    if rows is not None and run is not None:
        if run not in rows:
            return [*out, f"run {run} is not in the budget store {store}"]
        spent, kept = rows[run]
        logged = e["rho_spent"]
        if not (isinstance(spent, float | int) and isinstance(logged, float | int) and math.isclose(spent, logged)):
            out.append(f"the store's run {run} spent rho {spent}, the log says {logged}")
        real = [os.path.realpath(base / str(p)) for p in (kept, ledger)]
        if kept != ledger and (None in (kept, ledger) or real[0] != real[1]):
            out.append(f"the store's run {run} has the ledger {kept}, the log says {ledger}")
    return out


def check_log(path: str | Path, *, ledgers: bool = True, store: str | Path | None = None) -> list[str]:
    """The problems of the log at ``path`` (module docstring), each one line; empty when it checks
    out. A relative ledger path is taken from the log's folder. ``InputError`` when ``path`` or
    ``store`` is missing or not what it should be (``_lines``, ``_store_rows``)."""
    lines, complete = _lines(path)
    rows = None if store is None else _store_rows(store)
    base, problems = Path(path).absolute().parent, []
    state: dict[str, list] = {}  # release -> [its last stage, its last step]
    previous, last_time = GENESIS, None
    for n, line in enumerate(lines, 1):
        e, found = _entry(line), []
        if n == len(lines) and not complete:
            found.append("incomplete (no line end): the log was cut or is being written")
        if e is None:
            found.append("not a site log entry (a JSON object with seq, time, kind and prev)")
        else:
            if e["seq"] != n - 1:
                found.append(f"seq {e['seq']}, not {n - 1}")
            if e["prev"] != previous:
                what = "64 zeros (the first line)" if n == 1 else f"the SHA-256 of line {n - 1}"
                found.append(f"prev is not {what}: a line was altered, removed or reordered")
            when = datetime.fromisoformat(e["time"])
            if when.tzinfo is None:
                found.append(f"time {e['time']} names no time zone")
            elif last_time is not None and when < last_time:
                found.append(f"time {e['time']} is earlier than the line before")
            else:
                last_time = when
            fault = _fault(e["kind"], {k: v for k, v in e.items() if k not in _RESERVED})
            if fault:
                found.append(fault)
            else:
                found += [f"release {e['release']}: {p}" for p in _order(state, e)]
                if e["kind"] == "end":
                    found += [f"release {e['release']}: {p}" for p in _check_end(e, base, ledgers, rows, store)]
        previous = hashlib.sha256(line).hexdigest()
        problems += [f"line {n}: {p}" for p in found]
    return problems


#: The stage each kind may follow in one release, and the stage it leaves.
_AFTER = {"request": (None,), "verdict": ("request",), "answer": ("accepted",), "end": ("accepted", "refused")}
_STAGE = {None: "nothing", "request": "its request", "accepted": "its acceptance", "refused": "its refusal"}


def _order(state: dict[str, list], e: dict) -> list[str]:
    """One release's order: a request, one verdict, answers in increasing steps if accepted, one end."""
    kind, stage = e["kind"], state.setdefault(e["release"], [None, -1])
    if stage[0] not in _AFTER[kind]:
        return [f"{'an' if kind in ('answer', 'end') else 'a'} {kind} after {_STAGE.get(stage[0], 'its end')}"]
    if kind == "answer":
        if e["step"] <= stage[1]:
            return [f"step {e['step']} does not follow step {stage[1]}"]
        stage[1] = e["step"]
    else:
        stage[0] = e["verdict"] if kind == "verdict" else kind
    return []
