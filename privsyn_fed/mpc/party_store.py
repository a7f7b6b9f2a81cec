"""A party's or a site's own budget store and ledger copies, as it uses them in a release; no torch.

* ``default_ledger_folder``: ``SILO.ledgers/`` beside the silo, one ledger copy per release;
* ``make_folder``: that folder, made private (0700);
* ``reserve``: the release's rho reserved in the store its policy names (which writes the opening
  ledger copy), before the silo is read;
* ``charge_silo``: the silo recorded in that store (``accounting.fingerprints``), refused when the
  store charged the same rows under another dataset id and the policy does not say they differ.
"""

from __future__ import annotations

import os
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from ..common import BudgetExceeded, InputError
from .policy import Policy, Refused
from .request import ReleaseRequest


def default_ledger_folder(silo_path: str | Path) -> Path:
    """Where a party keeps its ledger copies when ``--ledger`` is not given: ``SILO.ledgers/`` beside
    its silo, one file per release; for a silo in an engine, beside its DuckDB file, or in the current
    folder named after its table."""
    from ..common import beside

    return beside(silo_path, ".ledgers")


def new_ledger_path(ledger: Path | None, silo_path: str | Path) -> Path:
    """The ledger copy of a release about to begin: ``ledger`` (``--ledger``), or a new file in the
    folder beside the silo (``default_ledger_folder``; ``make_folder`` makes it)."""
    if ledger is not None:
        return ledger
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return default_ledger_folder(silo_path) / f"{stamp}-{secrets.token_hex(3)}.ledger.json"


def make_folder(ledger: Path) -> None:
    """The folder of a ledger copy, made private (0700) if missing; ``Refused`` if it cannot be."""
    try:
        ledger.parent.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise Refused(f"{ledger.parent}: cannot hold this party's ledger copy ({exc.strerror or exc})") from None


def reserve(policy: Policy | None, request: ReleaseRequest, ledger: Path):
    """The reservation of the release's rho in the store ``policy`` names (None without one), which
    writes the opening ``ledger`` copy; ``Refused`` when the store refuses."""
    if policy is None or policy.store is None:
        return None
    from ..accounting import BudgetStore, rho_to_epsilon

    spec, delta = policy.store, policy.max_delta
    make_folder(ledger)
    try:
        return BudgetStore(spec.path).reserve(
            spec.dataset_id,
            epsilon=rho_to_epsilon(request.rho, delta),
            delta=delta,
            method=request.method,
            total_epsilon=spec.total_epsilon,
            ledger=str(ledger.resolve()),
        )
    except (BudgetExceeded, InputError) as exc:
        raise Refused(f"its budget store refused the release ({exc})") from None


def charge_silo(policy: Policy, reservation: Any, silo: Any, out: Callable[[str], None]) -> None:
    """Record ``silo`` in the store (``accounting.fingerprints``); ``Refused`` when the store charged
    it under another dataset id and the policy does not say the data differ (the dataset's name
    stays here: party 0 hears only that the store refused)."""
    assert policy.store is not None
    reservation.new_dataset = policy.store.new_dataset
    try:
        matched = reservation.charge_silos([silo])
    except InputError as exc:
        out(f"refused: {exc}")
        raise Refused("its budget store charged this silo under another dataset id (see its own output)") from None
    if matched:
        out(f"its store charged this silo under {', '.join(map(repr, matched))}; the policy says it differs")


def check_ledger_target(ledger: Path | None, silo_path: str | Path, force: bool) -> None:
    """Before joining: ``--ledger`` can be written (``--force`` to replace it), or the folder beside
    the silo that holds the ledger copies can be made and written."""
    from ..common import Named, check_output

    if ledger is not None:
        check_output(Named("--ledger", ledger), "ledger copy", force)
        return
    folder = default_ledger_folder(silo_path)
    where = folder if folder.is_dir() else folder.parent
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{folder}: is not a folder; pass --ledger PATH for this party's ledger copy")
    if not (where.is_dir() and os.access(where, os.W_OK | os.X_OK)):
        raise InputError(
            f"{where}: this party keeps its ledger copies in {folder}, which cannot be written there; "
            "pass --ledger PATH"
        )
