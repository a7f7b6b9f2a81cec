"""What a ledger states about itself: the conversion it names is the one this version performs
(``CONVERSION``); its timestamps (``created``, ``updated``) are ISO 8601 times with a zone, created
no later than updated (a ledger without them is not refused for it); and a complete release
states the threat model of its method (``method: ...``; a party's copy, ``party RANK's own account of a
METHOD release``; a schema draft, ``DRAFT_THREAT_MODEL``, or over MPC ``MPC_DRAFT_THREAT_MODEL``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .findings import AuditReport
from .party_copy import is_party_copy
from .structure import METHODS

#: How a DP schema draft states its threat model.
DRAFT_THREAT_MODEL = "the data owner drafts on their own machine"
MPC_DRAFT_THREAT_MODEL = "the silos draft on secret shares"
#: The conversion from zCDP to (epsilon, delta) that ``arithmetic`` recomputes.
CONVERSION = "Canonne-Kamath-Steinke zCDP to (epsilon, delta), OpenDP make_zCDP_to_approxDP"


def _time(value: str) -> datetime | None:
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        return None
    return stamp if stamp.tzinfo is not None else None


def _check_stamps(ledger: dict[str, Any], rep: AuditReport) -> None:
    """The conversion, the timestamps and the threat model (module docstring)."""
    _check_threat_model(ledger, rep)
    if "conversion" in ledger and ledger["conversion"] != CONVERSION:
        rep.problems.append(f"conversion {ledger['conversion']!r} is not the one the audit recomputes ({CONVERSION!r})")
    times = {}
    for key in ("created", "updated"):
        if key in ledger:
            times[key] = _time(ledger[key])
            if times[key] is None:
                rep.problems.append(f"{key} {ledger[key]!r} is not an ISO 8601 time with its zone")
    if times.get("created") and times.get("updated") and times["created"] > times["updated"]:
        rep.problems.append(f"created {ledger['created']} is later than updated {ledger['updated']}")


def _check_threat_model(ledger: dict[str, Any], rep: AuditReport) -> None:
    """A complete release states the threat model of its method (module docstring)."""
    method, stated = ledger["method"], ledger.get("threat_model", "")
    if method not in METHODS or ledger["status"] != "complete":
        return
    if is_party_copy(ledger):
        lead = f"party {ledger['details']['party'].get('rank')}'s own account of a {method} release"
    elif method == "schema-draft":
        lead = MPC_DRAFT_THREAT_MODEL if "mpc" in (ledger.get("details") or {}) else DRAFT_THREAT_MODEL
    else:
        lead = f"{method}: "
    if not stated.startswith(lead):
        rep.problems.append(f"the threat model does not state {method}'s (it must begin {lead!r})")
