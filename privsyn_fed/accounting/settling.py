"""Closing a reservation whose process is gone (``budget settle``): at the spend the run's own
ledger records, never below it.

A ledger is the run's own when its ``details.budget_store`` (``budget_store.run_tag``) names this
store's file, the run's dataset, the run and the run's ``token``, an identifier drawn when the
run reserved and known only to the store and the run's ledger: a ledger written for another store,
dataset or run, or a copy that names none, is refused in one line naming the field that differs.
The spend counted is the largest of what the given ledger records (its ``rho_spent`` and the sum
of its entries) and of what the run's recorded ledger file records, where that is another file
that is still the run's own: settling never counts below the run's own record.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from ..common import InputError, read_json
from .budget_store import TOLERANCE, BudgetStore
from .ledger import entry_rho


def settle_stale(
    store: BudgetStore, run: int, ledger: dict[str, Any], ledger_path: str, *, confirm_stopped: bool = False
) -> float:
    """Close run ``run`` of ``store`` at the spend its ledger records (module docstring) as
    ``abandoned``; returns that spend. The run's process must be gone."""
    r = store.run(run)
    if r["status"] != "reserved":
        raise InputError(f"run {run} of {store.path} is already settled ({r['status']})")
    if r["host"] == socket.gethostname() and r["pid"] and _alive(int(r["pid"])):
        raise InputError(
            f"run {run} is still running (process {r['pid']} on this host); stop it with "
            "Ctrl-C or SIGTERM and it settles itself"
        )
    if r["host"] != socket.gethostname() and not confirm_stopped:
        raise InputError(
            f"run {run} was started on host {r['host'] or 'unknown'}, where this command cannot "
            "see whether it has stopped; make sure it has, then pass --confirm-stopped"
        )
    field = foreign_field(store, r, ledger)
    if field is not None:
        raise InputError(f"{ledger_path}: this ledger is not run {run}'s of {store.path}: {field}")
    spent, deltas = _spend(ledger, ledger_path)
    own = _recorded_spend(store, r, ledger_path)
    if own is not None:
        spent, deltas = max(spent, own[0]), max(deltas, own[1])
    slack = r["delta_slack"] or 0.0
    if spent > r["rho_reserved"] * (1 + TOLERANCE) or deltas > slack * (1 + TOLERANCE):
        raise InputError(
            f"{ledger_path}: the ledger records rho {spent:.6g} (delta {deltas:.3g}), more than run {run} "
            f"reserved (rho {r['rho_reserved']:.6g}, delta {slack:.3g}); leaving the run counted at its reservation"
        )
    store.settle(run, spent, "abandoned", deltas if slack else None)
    return spent


def foreign_field(store: BudgetStore, r: dict[str, Any], ledger: dict[str, Any]) -> str | None:
    """Which field of the ledger's ``details.budget_store`` differs from run ``r`` of ``store``
    (in words), or None when the ledger is the run's own. A run reserved before tokens were drawn
    (its ``token`` NULL) is matched on the other fields."""
    details = ledger.get("details") if isinstance(ledger.get("details"), dict) else {}
    tag = details.get("budget_store")
    if not isinstance(tag, dict):
        return "it names no budget store (details.budget_store)"
    path = tag.get("path")
    if not isinstance(path, str) or not _same_file(path, store.path):
        return f"it was written for the store {path!r}"
    if tag.get("dataset_id") != r["dataset"]:
        return f"its dataset_id is {tag.get('dataset_id')!r}, not '{r['dataset']}'"
    if tag.get("run") != r["id"]:
        return f"its run is {tag.get('run')!r}, not {r['id']}"
    if r.get("token") is not None and tag.get("token") != r["token"]:
        return "its token is not the one the store drew for this run"
    return None


def _spend(ledger: dict[str, Any], where: str) -> tuple[float, float]:
    """``(rho, delta)`` a ledger records: the larger of its ``rho_spent`` and its entries' sum."""
    try:
        total = sum(entry_rho(e) for e in ledger["entries"])
        recorded = float(ledger["rho_spent"])
        deltas = sum(float(e.get("delta", 0.0)) for e in ledger["entries"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as exc:
        raise InputError(f"{where}: the ledger's entries do not give a spend ({exc})") from None
    return max(total, recorded), deltas


def _recorded_spend(store: BudgetStore, r: dict[str, Any], given: str) -> tuple[float, float] | None:
    """The spend of the run's recorded ledger file when it is another file than ``given`` and still
    the run's own (None otherwise: missing, unreadable, or replaced by another run's)."""
    path = r.get("ledger")
    if not path or _same_file(path, given) or not Path(path).is_file():
        return None
    try:
        ledger = read_json(path, "ledger file")
    except InputError:
        return None
    if not isinstance(ledger, dict) or foreign_field(store, r, ledger) is not None:
        return None
    try:
        return _spend(ledger, path)
    except InputError:
        return None


def _same_file(a: str | Path, b: str | Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError):
        return False


def _alive(pid: int) -> bool:
    """Whether process ``pid`` on this host is a running privsyn-fed process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"privsyn" in fh.read()
    except OSError:
        return True
