"""The verdict on a ledger (``audit_ledger``). It is total: any JSON file, and any dict handed to
``audit_ledger``, gets a verdict or a one-line ``InputError``, never a crash. The checks run in
turn, each from its own module: the ledger's shape (``shape``), its arithmetic (``arithmetic``),
the guarantee it claims (here), where and how each entry ran (``placement``) and, for a complete
run, its structure (``structure``), or for a silo party's own copy of an MPC release what that
party can check (``party_copy``).

The guarantee: a seeded run (``seeded`` at the top level, or a seeded noise source named by any
entry's ``sampler`` or ``noise_from``, ``details.noise`` or ``details.mpc.noise``), a non-private
run, a debug MPC mode, a neighbouring relation other than add/remove one record, an unknown
method, and a run that did not complete (status running or failed: no release belongs to it; its
entries still record what was spent and are checked) all fail the audit. Problems make the ledger
fail (exit 1); warnings are informational only.
"""

from __future__ import annotations

from typing import Any

from .arithmetic import _check_arithmetic
from .findings import AuditReport
from .party_copy import _check_party_copy, is_party_copy
from .placement import _check_composition, _check_fixed_point, _check_where
from .shape import validate_ledger
from .structure import METHODS, _check_structure


def _seeded_samplers(ledger: dict[str, Any]) -> list[str]:
    """Noise sources that say they are seeded (or not private): each entry's ``sampler`` and
    ``noise_from`` (MPC: the dealer's), ``details.noise`` and ``details.mpc.noise``."""
    details = ledger.get("details") or {}
    names = [e.get(key, "") for e in ledger["entries"] for key in ("sampler", "noise_from")]
    names += [details.get("noise", ""), (details.get("mpc") or {}).get("noise", "")]
    return sorted({n for n in names if "seeded" in n.lower() or "not private" in n.lower()})


def audit_ledger(ledger: dict[str, Any]) -> AuditReport:
    """Audit a ledger (see the module docstring); ``InputError`` when it is not shaped like one."""
    validate_ledger(ledger)
    rep = AuditReport()
    total = _check_arithmetic(ledger, rep)
    if ledger["neighbouring"] != "add/remove one record":
        rep.problems.append(
            f"neighbouring relation is {ledger['neighbouring']!r}; every sensitivity here is "
            "derived for add/remove one record"
        )
    if ledger["method"] not in METHODS:
        rep.problems.append(f"unknown method {ledger['method']!r}: no algorithm to check the entries against")
    if ledger["seeded"]:
        rep.problems.append(
            "SEEDED RUN: its noise is predictable to anyone who knows the seed; this is not a "
            "private release (tests and demos only)"
        )
    elif _seeded_samplers(ledger):
        rep.problems.append(
            f"SEEDED NOISE: the ledger says it is not seeded, but noise came from "
            f"{_seeded_samplers(ledger)[0]!r}; this is not a private release"
        )
    _check_where(ledger, rep)
    _check_composition(ledger, rep)
    _check_fixed_point(ledger, rep)
    if ledger["status"] == "complete" and is_party_copy(ledger):
        _check_party_copy(ledger, rep)  # a silo party's own copy: what one party can know of the release
    elif ledger["status"] == "complete" and ledger["method"] in METHODS:
        _check_structure(ledger, rep)
    mpc = (ledger.get("details") or {}).get("mpc") or {}
    if isinstance(mpc, dict) and mpc.get("debug"):
        rep.problems.append(
            f"DEBUG MPC MODE ({mpc.get('provider', 'unknown provider')}): a party could see "
            "the other parties' values; this release is not protected by secure computation"
        )
    if ledger.get("non_private"):
        rep.problems.append(f"NOT PRIVATE: {ledger['non_private']}")
    if ledger["status"] != "complete":
        rep.problems.append(
            f"the run did not complete (status {ledger['status']!r}): no synthetic data belongs "
            "to this ledger; its entries record what was spent before it stopped"
        )
    rep.summary = {
        "entries": len(ledger["entries"]),
        "rho_spent": total,
        "rho_budget": float(ledger["rho_budget"]),
        "epsilon": float(ledger["epsilon"]),
        "delta": float(ledger["delta"]),
        "method": ledger.get("method"),
        **({"party": ledger["details"]["party"].get("rank")} if is_party_copy(ledger) else {}),
    }
    return rep
