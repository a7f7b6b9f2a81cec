"""A budget tied to the data: the silos a budget store has charged, recognised by their content.

A store cannot know every copy of a dataset, but it can know the silos it has already charged.
Each release with a store records, for every silo it read, a keyed digest of the silo's content
(``silo.content``: one sum per column over every row read, and the row count), keyed by a secret
the store draws once and keeps in its ``meta`` table: the digests say nothing without the key,
and the sums themselves never leave the process. A release whose silo matches one the store
charged under another dataset id is refused before any statistic is computed, naming that
dataset, unless the user says the data really differ (``--new-dataset``); the store then records,
in the run's ``new_dataset`` column, which datasets matched and that it was said.

Two silos match when they have the same number of rows and, over the columns both were read on
(at least two of them, or the one column of a one-column silo), the same digest for every column:
a copy under another schema (columns added or dropped, other categories or bins) is still found
where its shared columns hold the same values; a copy with values recoded or rows added is not.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sqlite3
from datetime import datetime, timezone
from typing import Any, Sequence

from ..common import InputError, parse_json

_TABLE = (
    "CREATE TABLE IF NOT EXISTS silo_digests (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL, "
    "run INTEGER NOT NULL, digests TEXT NOT NULL, recorded TEXT NOT NULL)"
)
#: The meta key of the store's secret.
KEY = "content_key"


def digests(key: bytes, rows: int, sums: dict[str, int]) -> dict[str, Any]:
    """The keyed digests of one silo's content: its row count and each column's sum."""

    def mac(*parts: object) -> str:
        return hmac.new(key, "\x1f".join(map(str, parts)).encode(), hashlib.sha256).hexdigest()[:32]

    return {"rows": mac("rows", rows), "columns": {name: mac("column", name, s) for name, s in sorted(sums.items())}}


def same_silo(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two silos' digests match (module docstring)."""
    if a.get("rows") != b.get("rows"):
        return False
    ca, cb = a.get("columns") or {}, b.get("columns") or {}
    shared = set(ca) & set(cb)
    enough = len(shared) >= 2 or (len(shared) == 1 and (len(ca) == 1 or len(cb) == 1))
    return enough and all(ca[c] == cb[c] for c in shared)


def _key(db: sqlite3.Connection) -> bytes:
    """The store's secret (drawn on first use; the caller holds the write lock)."""
    row = db.execute("SELECT value FROM meta WHERE key=?", (KEY,)).fetchone()
    if row is not None:
        return bytes.fromhex(row[0])
    key = secrets.token_bytes(32)
    db.execute("INSERT INTO meta VALUES (?, ?)", (KEY, key.hex()))
    return key


def charge_silos(
    db: sqlite3.Connection,
    store: str,
    dataset: str,
    run: int,
    silos: Sequence[tuple[str, int, dict[str, int]]],
    new_dataset: bool,
) -> list[str]:
    """Check the silos of run ``run`` (each ``(name, rows, sums)``) against those the store charged
    under other datasets, then record them for ``dataset``, in one write transaction. Raises
    ``InputError`` naming the first match (nothing recorded) unless ``new_dataset``; returns the
    datasets matched (recorded in the run's ``new_dataset`` when said)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(_TABLE)
        key = _key(db)
        mine = [(name, digests(key, rows, sums)) for name, rows, sums in silos]
        earlier = [
            (other, parse_json(text, store, "record of silo digests"))
            for other, text in db.execute("SELECT dataset, digests FROM silo_digests WHERE dataset != ?", (dataset,))
        ]
        matched: list[str] = []
        for name, digest in mine:
            for other, seen in earlier:
                if same_silo(digest, seen) and other not in matched:
                    if not new_dataset:
                        raise InputError(
                            f"{name}: {store} already charged these rows under dataset '{other}'; a release of the "
                            f"same data draws on that dataset's budget (--dataset-id {other}). If the data really "
                            "differ, say so with --new-dataset (the store records it); no statistic was computed "
                            "and nothing was spent"
                        )
                    matched.append(other)
        known = {text for (text,) in db.execute("SELECT digests FROM silo_digests WHERE dataset = ?", (dataset,))}
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        for _, digest in mine:
            text = json.dumps(digest, sort_keys=True)
            if text not in known:
                db.execute(
                    "INSERT INTO silo_digests (dataset, run, digests, recorded) VALUES (?, ?, ?, ?)",
                    (dataset, run, text, now),
                )
                known.add(text)
        if matched:
            said = "said new (--new-dataset) though its silos matched " + ", ".join(f"'{m}'" for m in matched)
            db.execute("UPDATE runs SET new_dataset=? WHERE id=?", (said, run))
        db.execute("COMMIT")
        return matched
    except BaseException:
        db.execute("ROLLBACK")
        raise
