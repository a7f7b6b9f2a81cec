"""A person's approval of a release at a site: requests wait in the site's folder until decided.

With ``"approve": "person"`` in its policy, a site that finds a release inside its policy does not
answer at once: it writes the request to ``STATE/pending/RELEASE.json`` (0600) and waits. A person
decides with ``privsyn-fed site approve RELEASE --by NAME`` or ``site refuse RELEASE --by NAME --why
TEXT`` (``decide``), which writes ``RELEASE.decision.json`` beside it and takes the request out of
the pending list; ``site pending`` lists what waits (``pending``). A request not decided within the
policy's ``approve_within_s`` is refused by itself (``by: timeout``). A decision is written once,
atomically (a temporary file renamed into place, refused if one exists), so two people cannot both
decide the same request.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..common import InputError, read_json

#: A release id as party 0 draws it (``servers.ServersAggregator.release_id``).
RELEASE_ID = re.compile(r"[0-9a-zA-Z]{8,64}")
#: How often a waiting site looks for a decision.
POLL_S = 0.25


@dataclass(frozen=True)
class Decision:
    """What was decided about one request, by whom, and why (a refusal's reason)."""

    approved: bool
    by: str
    why: str = ""


def _folder(state: Path) -> Path:
    folder = Path(state) / "pending"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def _write_once(path: Path, content: dict[str, Any]) -> None:
    """``content`` as JSON at ``path`` (0600), written beside it and linked into place: refused
    (``FileExistsError``) when ``path`` exists."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (json.dumps(content, indent=1) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails if a decision exists: the first one stands
    finally:
        tmp.unlink()


def ask(state: Path, release: str, facts: dict[str, Any]) -> Path:
    """Record ``release``'s request as waiting for a person; its file."""
    path = _folder(state) / f"{release}.json"
    _write_once(path, {"release": release, "asked": _now(), **facts})
    return path


def wait(state: Path, release: str, within_s: float) -> Decision:
    """The decision on ``release``, waiting up to ``within_s`` seconds (then a refusal by timeout,
    recorded as the decision, so a late approval cannot reopen it)."""
    path = _folder(state) / f"{release}.decision.json"
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.exists():
            return _read(path)
        time.sleep(POLL_S)
    try:
        _write_once(path, {"approved": False, "by": "timeout", "why": f"no decision within {within_s:g} s"})
    except FileExistsError:
        pass  # a person decided at the last moment: that decision stands
    return _read(path)


def decide(state: Path, release: str, approved: bool, by: str, why: str = "") -> Decision:
    """A person's decision on a waiting request; ``InputError`` (one line) when no such request
    waits or it was decided already."""
    if not RELEASE_ID.fullmatch(release):
        raise InputError(f"{release!r}: not a release id (see `privsyn-fed site pending`)")
    if not by.strip() or not by.isprintable() or len(by) > 80:
        raise InputError("--by: the name of who decides, printable text of 1 to 80 characters")
    if not approved and (not why.strip() or not why.isprintable() or len(why) > 300):
        raise InputError("--why: the reason for the refusal, printable text of 1 to 300 characters")
    folder = _folder(state)
    if not (folder / f"{release}.json").exists():
        raise InputError(f"{folder / release}.json: no request {release} waits at this site (`site pending`)")
    who, reason = f"person:{by.strip()}", why.strip()
    record = {"approved": approved, "by": who, "why": reason, "decided": _now()}
    try:
        _write_once(folder / f"{release}.decision.json", record)
    except FileExistsError:
        done = _read(folder / f"{release}.decision.json")
        raise InputError(
            f"request {release} was decided already: {'approved' if done.approved else 'refused'} by {done.by}"
        ) from None
    return Decision(approved, who, reason)


def pending(state: Path) -> list[dict[str, Any]]:
    """The requests that wait for a decision, oldest first."""
    folder = Path(state) / "pending"
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        if path.name.endswith(".decision.json") or path.with_name(path.stem + ".decision.json").exists():
            continue
        try:
            record = read_json(path, "pending request", "--state")
        except InputError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return sorted(out, key=lambda r: str(r.get("asked", "")))


def _read(path: Path) -> Decision:
    raw = read_json(path, "decision", "--state")
    if not isinstance(raw, dict):
        raise InputError(f"{path}: not a decision (a JSON object with approved, by and why)")
    return Decision(raw.get("approved") is True, str(raw.get("by", "?")), str(raw.get("why", "")))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
