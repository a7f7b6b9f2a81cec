"""Where a run's ledger goes when it draws on a budget store (``synth`` and ``schema draft --dp``): a
ledger the store references is never replaced, with or without ``--force``; the run writes a numbered
file beside it (``accounting.kept_ledger``), chosen in its reservation."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..common import Named


def ledger_output(args: argparse.Namespace, ledger: Path) -> list[tuple[Named, str]]:
    """The ledger as an output to check before anything is read: ``[]`` when the budget store
    references it already (it is then kept, and only its folder, which the numbered file shares, is
    checked here)."""
    from ..accounting import referenced_by
    from ..common import check_output

    item = Named("--ledger" if args.ledger else "the ledger", ledger)
    if referenced_by(getattr(args, "budget_store", None), ledger) is None:
        return [(item, "ledger")]
    check_output(item, "ledger", True)
    return []


def used_ledger(requested: Path, reservation: Any, store: str | None) -> Path:
    """The ledger the reserved run writes: ``requested``, or the numbered file beside it that the
    reservation chose because ``requested`` is kept (one line on stderr says so)."""
    if reservation is None or store is None:
        return requested
    from ..accounting import used_ledger as chosen

    path, moved = chosen(requested, reservation, store)
    if moved:
        print(f"privsyn-fed: {moved}", file=sys.stderr)
    return path
