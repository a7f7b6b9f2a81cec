"""The verdict on a ledger (``audit_ledger``). It is total: any JSON file, and any dict handed to
``audit_ledger``, gets a verdict or a one-line ``InputError``, never a crash. The checks run in
turn, each from its own module: the ledger's shape (``shape``), its arithmetic (``arithmetic``), the
guarantee it claims (here), where and how each entry ran (``placement``), the silos that answered it
(``participation``) and, for a complete run, its structure (``structure``), or for a silo party's
own copy of an MPC release what that party can check (``party_copy``). Before the structure: the
declared inputs it is recomputed from (``declared``) and what the ledger states about itself
(``stamps``); the structure is checked only from declared inputs that are valid.

The guarantee: a seeded run (``seeded`` at the top level, or a seeded noise source named by any
entry's ``sampler`` or ``noise_from``, ``details.noise`` or ``details.mpc.noise``), a non-private
run, a debug MPC mode, a neighbouring relation other than add/remove one record or the one a
declared privacy unit states (``unit``), an unknown
method, and a run that did not complete (status running or failed: no release belongs to it; its
entries still record what was spent and are checked) all fail the audit. Problems make the ledger
fail (exit 1); warnings are informational only. A check that stops on a ledger no check foresaw
records a problem beginning ``AUDIT ERROR`` (the ledger fails) rather than crashing the audit.
"""

from __future__ import annotations

from typing import Any, Callable

from .arithmetic import _check_arithmetic
from .declared import _check_declared
from .findings import AuditReport
from .participation import _check_participation
from .party_copy import _check_party_copy, is_party_copy
from .placement import _check_composition, _check_fixed_point, _check_samplers, _check_where
from .shape import validate_ledger
from .stamps import _check_stamps
from .structure import METHODS, _check_structure
from .unit import check_unit, in_row_units, unit_factor

#: How a problem begins when a check itself stopped on a ledger (the ledger fails).
AUDIT_ERROR = "AUDIT ERROR"


def _seeded_samplers(ledger: dict[str, Any]) -> list[str]:
    """Noise sources that say they are seeded (or not private): each entry's ``sampler`` and
    ``noise_from`` (MPC: the dealer's), ``details.noise`` and ``details.mpc.noise``."""
    details = ledger.get("details") or {}
    names = [e.get(key, "") for e in ledger["entries"] for key in ("sampler", "noise_from")]
    names += [details.get("noise", ""), (details.get("mpc") or {}).get("noise", "")]
    return sorted({n for n in names if "seeded" in n.lower() or "not private" in n.lower()})


def _guarded(what: str, check: Callable[..., Any], ledger: dict[str, Any], rep: AuditReport) -> Any:
    """``check(ledger, rep)``; a check that stops on an exception records a problem naming it (the
    ledger fails) instead of crashing the audit."""
    try:
        return check(ledger, rep)
    except Exception as exc:  # a ledger no check foresaw: it fails, in one line
        rep.problems.append(f"{AUDIT_ERROR}: the check of {what} stopped on this ledger ({type(exc).__name__}: {exc})")
        return None


def _check_guarantee(ledger: dict[str, Any], rep: AuditReport) -> None:
    """The guarantee the ledger claims (module docstring)."""
    check_unit(ledger, rep)
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


def _check_run(ledger: dict[str, Any], rep: AuditReport, inputs_valid: bool) -> None:
    """A complete run's structure (from declared inputs that are valid), or a party's own copy; the
    MPC mode, a declared non-private run and a run that did not complete."""
    if ledger["status"] == "complete" and is_party_copy(ledger):
        _guarded("a party's copy", _check_party_copy, in_row_units(ledger), rep)
    elif ledger["status"] == "complete" and ledger["method"] in METHODS and inputs_valid and unit_factor(ledger):
        # a privacy unit's sensitivities are checked as K M times one row's (``unit``)
        _guarded("the run's structure", _check_structure, in_row_units(ledger), rep)
    mpc = (ledger.get("details") or {}).get("mpc") or {}
    if isinstance(mpc, dict) and mpc.get("debug"):
        rep.problems.append(
            f"DEBUG MPC MODE ({mpc.get('provider', 'unknown provider')}): a party could see "
            "the other parties' values; this release is not protected by secure computation"
        )
    if ledger.get("non_private"):
        rep.problems.append(f"NOT PRIVATE: {ledger['non_private']}")
    if ledger["status"] != "complete":
        spent = (
            "its entries record what was spent before it stopped"
            if ledger["entries"]
            else "it records no mechanism, so nothing had been spent when it was written (a run stopped "
            "before its first charge, or one still reading its data)"
        )
        rep.problems.append(
            f"the run did not complete (status {ledger['status']!r}): no synthetic data belongs to this ledger; {spent}"
        )


def audit_ledger(ledger: dict[str, Any]) -> AuditReport:
    """Audit a ledger (see the module docstring); ``InputError`` when it is not shaped like one."""
    validate_ledger(ledger)
    rep = AuditReport()
    total = _guarded("the arithmetic", _check_arithmetic, ledger, rep)
    inputs_valid = _guarded("the declared inputs", _check_declared, ledger, rep)
    _guarded("the ledger's own statements", _check_stamps, ledger, rep)
    _guarded("the guarantee", _check_guarantee, ledger, rep)
    for what, check in (
        ("where each entry ran", _check_where),
        ("the samplers", _check_samplers),
        ("the silos of each entry", _check_participation),
        ("parallel composition", _check_composition),
        ("the fixed-point selections", _check_fixed_point),
    ):
        _guarded(what, check, ledger, rep)
    _check_run(ledger, rep, bool(inputs_valid))
    rep.summary = {
        **rep.summary,
        "entries": len(ledger["entries"]),
        "rho_spent": float(ledger["rho_spent"]) if total is None else total,
        "rho_budget": float(ledger["rho_budget"]),
        "epsilon": float(ledger["epsilon"]),
        "delta": float(ledger["delta"]),
        "method": ledger.get("method"),
        **({"party": ledger["details"]["party"].get("rank")} if is_party_copy(ledger) else {}),
    }
    return rep
