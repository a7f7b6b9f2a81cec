"""A ledger that a budget store references is never replaced.

The store's ``runs.ledger`` holds the resolved path of each run's ledger, the record by which its
spend can be checked. A run that asks for a path the store already references (any run, of any
dataset of that store) writes a numbered file beside it instead: ``out.ledger.json`` becomes
``out.2.ledger.json`` (then ``.3.``, ...: the first number neither referenced by the store nor on
disk); a name without the ``.ledger.json`` ending gets ``.N`` before its last suffix. The choice
(``choose``) is made inside the reservation's ``BEGIN IMMEDIATE`` transaction
(``BudgetStore.reserve``), so two runs started together never pick the same file. A run settled
``rejected`` records no ledger (``runs.ledger`` is NULL): its opening ledger is withdrawn.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from pathlib import Path
from typing import Any

from ..common import check_name_fits, special_kind

LEDGER_SUFFIX = ".ledger.json"


def numbered(path: Path, n: int) -> Path:
    """``path`` numbered ``n``: ``out.ledger.json`` -> ``out.2.ledger.json``, ``l.json`` -> ``l.2.json``,
    ``ledger`` -> ``ledger.2``."""
    name = path.name
    if name.endswith(LEDGER_SUFFIX) and len(name) > len(LEDGER_SUFFIX):
        return path.with_name(f"{name[: -len(LEDGER_SUFFIX)]}.{n}{LEDGER_SUFFIX}")
    if path.suffix:
        return path.with_name(f"{path.stem}.{n}{path.suffix}")
    return path.with_name(f"{name}.{n}")


def _run_of(db: sqlite3.Connection, path: str) -> int | None:
    """The latest run of the store whose ledger is ``path`` (None: no run's)."""
    row = db.execute("SELECT MAX(id) FROM runs WHERE ledger=?", (path,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def choose(db: sqlite3.Connection, ledger: str, keep_existing: bool = False) -> tuple[str, int | None]:
    """Where a run asking for ``ledger`` writes it, as ``(resolved path, the run whose ledger
    ``ledger`` is, or None)``: the path itself, or the first numbered file beside it that the store
    does not reference and that does not exist, when the store references ``ledger`` (or, with
    ``keep_existing``, when a file is there). Called inside the reservation's transaction."""
    requested = Path(ledger).resolve()
    run = _run_of(db, str(requested))
    if run is None and not (keep_existing and os.path.lexists(requested)):
        return str(requested), None
    for n in itertools.count(2):
        candidate = numbered(requested, n)
        if _run_of(db, str(candidate)) is None and not os.path.lexists(candidate):
            check_name_fits(candidate, "ledger")
            return str(candidate), run
    raise AssertionError("unreachable")  # pragma: no cover


def referenced_by(store: str | Path | None, ledger: Path) -> int | None:
    """The latest run of the budget store at ``store`` whose ledger is ``ledger`` (None: none, or no
    store that can be read yet). A look-up before anything is reserved: the choice itself is made
    in the reservation (``choose``)."""
    if store is None:
        return None
    path = Path(store)
    if special_kind(path) is not None or not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
        try:
            return _run_of(db, str(ledger.resolve()))
        finally:
            db.close()
    except sqlite3.Error:  # not a store, or an older one: the checks that follow say so
        return None


def used_ledger(requested: Path, reservation: Any, store: str | Path) -> tuple[Path, str | None]:
    """The ledger a reserved run writes, as its command shows it, and the line saying why when it is
    not ``requested`` (the reservation kept ``requested`` and chose a numbered file beside it)."""
    used = getattr(reservation, "ledger_path", None)
    if used is None or Path(used) == requested.resolve():
        return requested, None
    beside = requested.parent.resolve() == Path(used).parent  # not when requested is a link elsewhere
    shown = requested.with_name(Path(used).name) if beside else Path(used)
    run = getattr(reservation, "kept_run", None)
    what = f"is the ledger of run {run} in {store}" if run is not None else "exists"
    return shown, f"{requested} {what} and is kept; this run's ledger is {shown}"
