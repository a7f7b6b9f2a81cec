"""A durable privacy budget shared by every release of one dataset (an SQLite file).

A dataset has a total ``(epsilon, delta)``, held as ``rho_total = epsilon_to_rho(epsilon, delta)``.
Releases compose in zCDP, so the store admits a run only while the rho already committed plus
the run's rho stays within ``rho_total``; then the whole series is ``(epsilon, delta)``-DP.

* ``reserve`` books a run's full rho in one ``BEGIN IMMEDIATE`` transaction (SQLite's write lock:
  two runs started at the same time are serialised, and only one can take the last of the
  budget). It happens before any silo is read.
* ``settle`` records what the run's ledger says it spent. Until then the full reservation
  counts, so a run that crashes after reserving never hands back budget it may have spent.
* A run that fails or is interrupted settles at its accountant's spend (``failed``); only a run
  in which no mechanism ever ran settles at zero (``rejected``). If the settlement itself
  fails (a locked or full disk), the run stays ``reserved``: counted in full.
* ``settling.settle_stale`` lets the custodian close a reservation whose process is gone (killed, host
  lost) at the spend its ledger records, never below it (``abandoned``).
* ``reserve`` given the run's ledger path writes an opening ledger there in the same transaction
  (``OpeningLedger``): status ``running``, no entries, naming the store's run. A run killed
  before its first charge can then be settled at zero. The run's accountant replaces it at its
  first write; a run that ends without charging anything (``rejected``) withdraws it.
* A run that is approximate zCDP (a DP schema draft: thresholded histograms over unknown domains)
  also books a ``delta_slack``, the sum of its entries' own deltas. The series then converts its
  rho at the dataset's delta minus every committed slack: the store admits a run only while
  ``committed rho + rho <= epsilon_to_rho(total_epsilon, delta - committed slack - its slack)``, so
  the whole series stays ``(total_epsilon, delta)``-DP. Runs without slack keep the plain rule.
"""

from __future__ import annotations

import math
import os
import secrets
import socket
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..common import BudgetExceeded, InputError, OptionError
from .conversions import epsilon_to_rho, rho_to_epsilon
from .kept_ledger import choose as choose_ledger
from .opening import OpeningLedger, opening_ledger

STORE_FORMAT = "privsyn-fed-budget/1"
TOLERANCE = 1e-9

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE datasets (
    id TEXT PRIMARY KEY, total_epsilon REAL NOT NULL, delta REAL NOT NULL, rho_total REAL NOT NULL,
    created TEXT NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL REFERENCES datasets(id),
    method TEXT NOT NULL, epsilon REAL NOT NULL, rho_reserved REAL NOT NULL, rho_spent REAL,
    status TEXT NOT NULL, ledger TEXT, started TEXT NOT NULL, settled TEXT, host TEXT, pid INTEGER);
"""
#: Columns added after the first release of the store format (added in place to older stores).
_ADDED_COLUMNS = {
    "host": "TEXT",
    "pid": "INTEGER",
    "delta_slack": "REAL",
    "token": "TEXT",
    "new_dataset": "TEXT",
    "unit": "TEXT",
}


@dataclass
class DatasetBudget:
    """One dataset of a store: its total budget, the rho committed (settled spends plus open
    reservations) and its runs. ``rho_total`` is ``total_epsilon`` at ``delta`` less the committed
    ``delta_slack`` of approximate-zCDP runs (their thresholds' deltas)."""

    id: str
    total_epsilon: float
    delta: float
    rho_total: float
    rho_committed: float
    runs: list[dict[str, Any]]
    delta_slack: float = 0.0

    @property
    def rho_left(self) -> float:
        """``rho_total - rho_committed``, at least 0."""
        return max(0.0, self.rho_total - self.rho_committed)

    @property
    def epsilon_committed(self) -> float:
        """The committed rho as epsilon at the dataset's delta (0 when nothing is committed)."""
        return rho_to_epsilon(self.rho_committed, self.delta) if self.rho_committed > 0 else 0.0


def run_tag(store: Path, dataset: str, run: int, token: str | None) -> dict[str, Any]:
    """A run's ``details.budget_store``: the store, the dataset, the run and its ``token``, an
    identifier only the store and the run's ledger know, so that ``settling.settle_stale`` takes no
    other ledger for the run's."""
    return {"path": str(store), "dataset_id": dataset, "run": run, "token": token}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def check_dataset_id(dataset: Any, where: str = "--dataset-id") -> str:
    """A dataset id: printable text, not blank (``budget show`` prints it on a line of its own, so a
    newline or another control character could forge lines); ``InputError`` naming ``where``."""
    if not isinstance(dataset, str) or not dataset.strip():
        raise InputError(f"{where} must not be empty")
    if not dataset.isprintable():
        raise InputError(
            f"{where} {dataset!r}: a dataset id must be printable text (no newline, tab or other control character)"
        )
    return dataset


class BudgetStore:
    """The budget file at ``path`` (created on first use)."""

    def __init__(self, path: str | Path, create: bool = True):
        self.path = Path(path)
        if self.path.is_dir():
            raise InputError(f"{self.path}: is a folder, not a budget store file")
        exists = self.path.exists()
        if not exists and not create:
            raise InputError(f"{self.path}: budget store not found")
        if not exists and not self.path.parent.is_dir():
            raise InputError(f"{self.path}: the folder {str(self.path.parent)!r} does not exist")
        try:
            self.db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            self.db.execute("PRAGMA foreign_keys = ON")
            if exists and self.path.stat().st_size > 0:
                self._check_format()
            else:
                self._create()
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{self.path}: not a privsyn-fed budget store ({exc})") from None

    def _create(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            if not self._tables():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self.db.execute(statement)
                self.db.execute("INSERT INTO meta VALUES ('format', ?)", (STORE_FORMAT,))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self._check_format()

    def _tables(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def _check_format(self) -> None:
        if not {"meta", "datasets", "runs"} <= self._tables():
            raise InputError(f"{self.path}: not a privsyn-fed budget store (foreign database)")
        row = self.db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
        if row is None or row[0] != STORE_FORMAT:
            raise InputError(f"{self.path}: unsupported budget store format {row[0] if row else None!r}")
        have = {r[1] for r in self.db.execute("PRAGMA table_info(runs)")}
        for name, kind in _ADDED_COLUMNS.items():
            if name not in have:
                self.db.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")

    def close(self) -> None:
        """Close the connection to the store."""
        self.db.close()

    # ---- runs ---------------------------------------------------------------------------------
    def reserve(
        self,
        dataset: str,
        *,
        epsilon: float,
        delta: float,
        method: str,
        total_epsilon: float | None = None,
        ledger: str | None = None,
        delta_slack: float = 0.0,
        keep_existing: bool = False,
    ) -> "Reservation":
        """Book ``epsilon_to_rho(epsilon, delta - delta_slack)`` for a run; refuse if it does not fit.

        The first run of a dataset must give ``total_epsilon``; later runs may omit it, and if they
        give it, it must match. ``delta`` must be the dataset's delta. ``delta_slack`` (approximate
        zCDP, see the module docstring) is the part of ``delta`` the run's own entries may spend. A
        ``ledger`` the store references (or, with ``keep_existing``, that exists) is never replaced:
        the run's goes to a numbered file beside it, ``Reservation.ledger_path`` (``kept_ledger``).
        """
        check_dataset_id(dataset, "dataset")
        if not 0 <= delta_slack < delta:
            raise ValueError(f"delta_slack {delta_slack!r} must lie in [0, delta)")
        rho = epsilon_to_rho(epsilon, delta - delta_slack)
        opening, token = None, secrets.token_hex(16)
        self.db.execute("BEGIN IMMEDIATE")
        try:
            ds = self.db.execute(
                "SELECT total_epsilon, delta, rho_total FROM datasets WHERE id=?", (dataset,)
            ).fetchone()
            if ds is None:
                if total_epsilon is None:
                    raise OptionError(
                        f"give total_epsilon to set the total budget of dataset '{dataset}', new to {self.path}",
                        "total_epsilon",
                    )
                if not (math.isfinite(total_epsilon) and total_epsilon > 0):
                    raise OptionError(f"total_epsilon must be a positive number, not {total_epsilon}", "total_epsilon")
                ds = (total_epsilon, delta, epsilon_to_rho(total_epsilon, delta))
                self.db.execute("INSERT INTO datasets VALUES (?, ?, ?, ?, ?)", (dataset, *ds, _now()))
            total_eps, ds_delta, rho_total = ds
            if total_epsilon is not None and not math.isclose(total_epsilon, total_eps, rel_tol=1e-12):
                raise InputError(
                    f"dataset '{dataset}' has total epsilon {total_eps:g} in {self.path}, not {total_epsilon:g}"
                )
            if not math.isclose(delta, ds_delta, rel_tol=1e-12):
                raise OptionError(
                    f"delta must be {ds_delta:g}, the delta dataset '{dataset}' is accounted at (not {delta:g})",
                    "delta",
                )
            committed = self._committed(dataset)
            rho_total = self._rho_total(total_eps, ds_delta, rho_total, self._committed_slack(dataset) + delta_slack)
            if committed + rho > rho_total * (1 + TOLERANCE):
                left = max(0.0, rho_total - committed)
                raise BudgetExceeded(
                    f"dataset '{dataset}': this run needs rho={rho:.6g} (epsilon {epsilon:g}) but only "
                    f"rho={left:.6g} (epsilon {rho_to_epsilon(left, delta) if left > 0 else 0:.4g}) of "
                    f"the total epsilon {total_eps:g} is left; no silo was read and nothing was written"
                )
            ledger, kept_run = choose_ledger(self.db, ledger, keep_existing) if ledger else (None, None)
            cur = self.db.execute(
                "INSERT INTO runs (dataset, method, epsilon, rho_reserved, status, ledger, started, host, pid, "
                "delta_slack, token) VALUES (?, ?, ?, ?, 'reserved', ?, ?, ?, ?, ?, ?)",
                (dataset, method, epsilon, rho, ledger, _now(), socket.gethostname(), os.getpid(), delta_slack, token),
            )
            run = int(cur.lastrowid)
            tag = run_tag(self.path, dataset, run, token)
            if ledger is not None:  # before the commit: a reservation never lacks its ledger
                document = opening_ledger(tag, epsilon=epsilon, delta=delta, method=method, delta_slack=delta_slack)
                opening = OpeningLedger.write(ledger, document)
            self.db.execute("COMMIT")
            return Reservation(
                self,
                run,
                dataset,
                rho,
                delta_slack=delta_slack,
                opening=opening,
                ledger_path=ledger,
                kept_run=kept_run,
                token=token,
            )
        except BaseException:
            self.db.execute("ROLLBACK")
            if opening is not None:
                opening.withdraw()
            raise

    def settle(self, run: int, rho_spent: float, status: str, delta_slack: float | None = None) -> None:
        """Record what run ``run`` spent (``status``: complete, failed or rejected); ``delta_slack``:
        its entries' deltas (None keeps the slack reserved; a rejected run spent none)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            row = self.db.execute(
                "SELECT rho_reserved, COALESCE(delta_slack, 0) FROM runs WHERE id=? AND status='reserved'", (run,)
            ).fetchone()
            if row is None:
                raise ValueError(f"run {run} is not awaiting settlement")
            if rho_spent > row[0] * (1 + TOLERANCE):
                raise ValueError(f"run {run} spent {rho_spent} beyond its reservation {row[0]}")
            if delta_slack is not None and delta_slack > row[1] * (1 + TOLERANCE):
                raise ValueError(f"run {run} spent delta {delta_slack} beyond its reserved slack {row[1]}")
            slack = 0.0 if status == "rejected" else row[1] if delta_slack is None else delta_slack
            self.db.execute(
                "UPDATE runs SET rho_spent=?, status=?, settled=?, delta_slack=?, ledger=CASE WHEN ? THEN NULL "
                "ELSE ledger END WHERE id=?",  # a rejected run withdraws its opening ledger: it has none
                (rho_spent, status, _now(), slack, status == "rejected", run),
            )
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def run(self, run: int) -> dict[str, Any]:
        """Every recorded field of run ``run`` (``InputError`` if the store has no such run)."""
        cols = [
            "id",
            "dataset",
            "method",
            "epsilon",
            "rho_reserved",
            "rho_spent",
            "status",
            "ledger",
            "started",
            "settled",
            "host",
            "pid",
            "delta_slack",
            "token",
        ]
        row = self.db.execute(f"SELECT {', '.join(cols)} FROM runs WHERE id=?", (run,)).fetchone()
        if row is None:
            raise InputError(f"{self.path}: no run {run}")
        return dict(zip(cols, row))

    def _committed(self, dataset: str) -> float:
        """Settled runs count what they spent; unsettled ones their whole reservation."""
        row = self.db.execute(
            "SELECT COALESCE(SUM(CASE WHEN status='reserved' THEN rho_reserved ELSE rho_spent END), 0) "
            "FROM runs WHERE dataset=?",
            (dataset,),
        ).fetchone()
        return float(row[0])

    def _committed_slack(self, dataset: str) -> float:
        """The deltas that approximate-zCDP runs reserved or spent (``delta_slack``), added up."""
        row = self.db.execute(
            "SELECT COALESCE(SUM(COALESCE(delta_slack, 0)), 0) FROM runs WHERE dataset=?", (dataset,)
        ).fetchone()
        return float(row[0])

    @staticmethod
    def _rho_total(total_epsilon: float, delta: float, rho_total: float, slack: float) -> float:
        """The dataset's rho when ``slack`` of its delta goes to thresholds: ``total_epsilon`` at
        ``delta - slack`` (the stored ``rho_total`` when there is no slack; 0 when none is left)."""
        if slack <= 0:
            return rho_total
        if slack >= delta:
            return 0.0
        try:
            return epsilon_to_rho(total_epsilon, delta - slack)
        except ValueError:
            return 0.0

    # ---- reading ------------------------------------------------------------------------------
    def datasets(self) -> list[str]:
        """The store's dataset ids, sorted."""
        return [r[0] for r in self.db.execute("SELECT id FROM datasets ORDER BY id")]

    def budget(self, dataset: str) -> DatasetBudget:
        """The budget of ``dataset`` and its runs (``InputError`` naming the known datasets if unknown)."""
        ds = self.db.execute("SELECT total_epsilon, delta, rho_total FROM datasets WHERE id=?", (dataset,)).fetchone()
        if ds is None:
            known = ", ".join(self.datasets()) or "none"
            raise InputError(f"{self.path}: no dataset '{dataset}' (known: {known})")
        cols = ["id", "method", "epsilon", "rho_reserved", "rho_spent", "status", "ledger", "started", "settled"]
        cols += ["unit", "new_dataset"]
        runs = [
            dict(zip(cols, r))
            for r in self.db.execute(f"SELECT {', '.join(cols)} FROM runs WHERE dataset=? ORDER BY id", (dataset,))
        ]
        slack = self._committed_slack(dataset)
        rho_total = self._rho_total(ds[0], ds[1], ds[2], slack)
        return DatasetBudget(dataset, ds[0], ds[1], rho_total, self._committed(dataset), runs, slack)


@dataclass
class Reservation:
    """A run's booked budget; settled once, at what the run's accountant spent.

    ``bind`` attaches the run's accountant (anything with ``rho_spent`` and ``released``) as
    soon as it exists; ``fail`` then settles at its spend, and at zero only if no mechanism ran.
    """

    store: BudgetStore
    run: int
    dataset: str
    rho: float
    settled: bool = False
    accountant: Any = None
    delta_slack: float = 0.0
    opening: OpeningLedger | None = None
    #: Where the run's ledger goes, and the run whose ledger the path asked for is (``kept_ledger``).
    ledger_path: str | None = None
    kept_run: int | None = None
    #: The run's secret identifier, known to the store and written into the run's ledger (``run_tag``).
    token: str | None = None

    #: The user said the data differ from any dataset whose silos match (``--new-dataset``).
    new_dataset: bool = False

    def charge_silos(self, silos: Sequence[Any]) -> list[str]:
        """Record the run's silos in the store (``fingerprints``): ``InputError`` naming the dataset
        they were charged under if it is another, unless ``new_dataset``; the datasets matched."""
        from .fingerprints import charge_silos

        contents = [(s.name, s.content.rows, s.content.sums) for s in silos if s.content is not None]
        store = str(self.store.path)
        return charge_silos(self.store.db, store, self.dataset, self.run, contents, self.new_dataset)

    def tag(self) -> dict[str, Any]:
        """What the run's ledger records of its reservation (``details.budget_store``)."""
        return run_tag(self.store.path, self.dataset, self.run, self.token)

    def bind(self, accountant: Any) -> None:
        """Attach the run's accountant, so that ``fail`` settles at its spend; the store records its
        privacy unit's bounds, and whether each was enforced or declared (``unit.bounds_text``)."""
        from .unit import bounds_text

        self.accountant = accountant
        unit = getattr(accountant, "unit", None)
        if unit is not None:
            self.store.db.execute("UPDATE runs SET unit=? WHERE id=?", (bounds_text(unit.record()), self.run))

    def settle(self, rho_spent: float, status: str, delta_slack: float | None = None) -> None:
        """Record the run's spend and ``status`` in the store, once (later calls do nothing);
        ``delta_slack``: the deltas its entries spent (None: as reserved). A ``rejected`` run
        withdraws its opening ledger: it leaves no ledger behind."""
        if not self.settled:
            self.store.settle(self.run, rho_spent, status, delta_slack)
            self.settled = True
            if status == "rejected" and self.opening is not None:
                self.opening.withdraw()

    def fail(self) -> None:
        """Settle a run that did not complete: ``failed`` at its spend (and the deltas its entries
        spent), or ``rejected`` at zero when no mechanism ever ran."""
        acc = self.accountant
        if acc is not None and acc.released:
            self.settle(acc.rho_spent, "failed", getattr(acc, "delta_spent", None) if self.delta_slack else None)
        else:
            self.settle(0.0, "rejected")


@contextmanager
def reserved(
    path: str | Path,
    dataset: str,
    *,
    epsilon: float,
    delta: float,
    method: str,
    total_epsilon: float | None = None,
    ledger: str | None = None,
    delta_slack: float = 0.0,
    keep_existing: bool = False,
    new_dataset: bool = False,
) -> Iterator[Reservation]:
    """Reserve a run's budget in the store at ``path`` for the block (``BudgetStore.reserve``).

    The release inside the block binds its accountant and settles the reservation when it
    completes (``release.run_release(reservation=...)``). A block left any other way settles it with
    ``fail``: at the accountant's spend, or at zero when no mechanism ran. If the store cannot be
    written, the run stays counted at its whole reservation and the exception says how to close it.
    """
    reservation = BudgetStore(path).reserve(
        dataset,
        epsilon=epsilon,
        delta=delta,
        method=method,
        total_epsilon=total_epsilon,
        ledger=ledger,
        delta_slack=delta_slack,
        keep_existing=keep_existing,
    )
    reservation.new_dataset = new_dataset
    try:
        yield reservation
    except BaseException as exc:
        note = _settle_failed(reservation)
        if note:
            exc.add_note(note)
        raise
    if not reservation.settled:  # the block ended without its release settling it: as a failed run
        note = _settle_failed(reservation)
        if note and "could not be settled" in note:
            raise RuntimeError(note)


def _settle_failed(reservation: Reservation) -> str | None:
    """``reservation.fail()`` unless it is settled already; what was recorded, or could not be."""
    if reservation.settled:
        return None
    spent = reservation.accountant is not None and reservation.accountant.released
    try:
        reservation.fail()
    except Exception as exc:
        return (
            f"the budget store could not be settled ({' '.join(str(exc).split())}); run {reservation.run} "
            f"stays counted at its whole reservation until `privsyn-fed budget settle --budget-store "
            f"{reservation.store.path} --run {reservation.run}`"
        )
    return f"the budget store counts run {reservation.run} at that spend" if spent else None
