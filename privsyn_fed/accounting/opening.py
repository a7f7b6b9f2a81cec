"""The opening ledger of a reserved run (``budget_store.BudgetStore.reserve``): written in the
reservation's transaction, before the run reads any row, so that a run killed before its first
charge can be settled at zero."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common import write_atomic
from .ledger import Accountant


@dataclass
class OpeningLedger:
    """The ledger a reservation writes before its run reads any row: status ``running``, no
    entries, naming the store's run, so that ``budget settle`` can close a run killed before its
    first charge (at zero). ``previous``: what the path held before (a ledger replaced with
    ``--force``), put back by ``withdraw``."""

    path: Path
    text: str
    previous: bytes | None

    @classmethod
    def write(cls, path: str | Path, ledger: dict[str, Any]) -> "OpeningLedger":
        """Write ``ledger`` atomically at ``path``, keeping what the path held before."""
        path = Path(path)
        try:
            previous = path.read_bytes() if path.is_file() else None
        except OSError:  # unreadable: replaced, as --force asked
            previous = None
        text = json.dumps(ledger, indent=2) + "\n"
        write_atomic(path, lambda fh: fh.write(text))
        return cls(path, text, previous)

    def withdraw(self) -> None:
        """Put back what the path held before (remove the file when it held nothing), unless the
        run's accountant has written its own ledger there since. Best effort: a failure leaves
        the opening ledger, which records no spend."""
        try:
            if self.path.read_bytes() != self.text.encode():
                return
            if self.previous is None:
                self.path.unlink()
            else:
                previous = self.previous
                write_atomic(self.path, lambda fh: fh.write(previous), binary=True)
        except OSError:
            pass


def opening_ledger(
    tag: dict[str, Any], *, epsilon: float, delta: float, method: str, delta_slack: float
) -> dict[str, Any]:
    """The ledger of a run that has reserved its budget and charged nothing yet (``OpeningLedger``);
    ``tag``: its ``details.budget_store`` (``budget_store.run_tag``)."""
    acc = Accountant(
        epsilon,
        delta - delta_slack,
        method,
        details={"budget_store": tag},
        delta_budget=delta if delta_slack else None,
    )
    return acc.ledger()
