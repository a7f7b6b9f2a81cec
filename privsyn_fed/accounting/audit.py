"""Independent re-check of a ledger: every entry's cost from its own parameters, the total,
the budget and the (epsilon, delta) conversion.

The conversion is checked twice: against OpenDP and against an independent implementation of
the same bound (``cks_delta``). Problems make the ledger fail; warnings (a seeded run, a run
that did not finish) are reported but do not make the arithmetic wrong.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from .conversions import cks_delta, rho_to_epsilon
from .ledger import entry_rho

REL_TOL = 1e-9
REQUIRED_TOP = ("method", "neighbouring", "epsilon", "delta", "rho_budget", "rho_spent", "seeded", "entries")
REQUIRED_ENTRY = {
    "gaussian": ("step", "query", "sensitivity_l2", "sigma", "rho", "where"),
    "exponential": ("step", "query", "sensitivity", "epsilon", "rho", "where"),
}


@dataclass
class AuditReport:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def load_ledger(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: ledger file not found") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ledger ({exc})") from None
    if not isinstance(raw, dict):
        raise InputError(f"{path}: a ledger is a JSON object")
    missing = [k for k in REQUIRED_TOP if k not in raw]
    if missing:
        raise InputError(f"{path}: not a privsyn-fed ledger (missing field '{missing[0]}')")
    if not isinstance(raw["entries"], list):
        raise InputError(f"{path}: 'entries' must be a list")
    return raw


def _close(a: float, b: float, tol: float = REL_TOL) -> bool:
    return math.isclose(a, b, rel_tol=tol, abs_tol=1e-15)


def audit_ledger(ledger: dict[str, Any]) -> AuditReport:
    rep = AuditReport()
    total = 0.0
    for i, e in enumerate(ledger["entries"]):
        label = f"entry {i + 1}"
        if not isinstance(e, dict):
            rep.problems.append(f"{label}: not an object")
            continue
        mech = e.get("mechanism")
        if mech not in REQUIRED_ENTRY:
            rep.problems.append(f"{label}: unknown mechanism {mech!r}")
            continue
        absent = [k for k in REQUIRED_ENTRY[mech] if k not in e]
        if absent:
            rep.problems.append(f"{label}: missing field '{absent[0]}'")
            continue
        label = f"entry {i + 1} (step {e['step']}, {e['query']})"
        if e["step"] != i + 1:
            rep.problems.append(f"{label}: step number {e['step']} out of sequence (expected {i + 1})")
        try:
            expected = entry_rho(e)
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            rep.problems.append(f"{label}: parameters do not give a cost ({exc})")
            continue
        if not _close(float(e["rho"]), expected):
            rep.problems.append(f"{label}: recorded rho {e['rho']:.6g} but its parameters give {expected:.6g}")
        if mech == "gaussian" and not float(e["sensitivity_l2"]) > 0:
            rep.problems.append(f"{label}: sensitivity must be positive")
        if mech == "exponential" and not float(e["sensitivity"]) > 0:
            rep.problems.append(f"{label}: sensitivity must be positive")
        total += expected
    rho_spent, rho_budget = float(ledger["rho_spent"]), float(ledger["rho_budget"])
    delta, epsilon = float(ledger["delta"]), float(ledger["epsilon"])
    if not _close(rho_spent, total):
        rep.problems.append(f"rho_spent is {rho_spent:.8g} but the entries add up to {total:.8g}")
    if total > rho_budget * (1 + REL_TOL):
        rep.problems.append(f"the entries spend {total:.8g}, more than the budget rho_budget={rho_budget:.8g}")
    if not 0 < delta < 1:
        rep.problems.append(f"delta {delta!r} is not in (0, 1)")
    else:
        eps_opendp = rho_to_epsilon(total, delta)
        if not _close(epsilon, eps_opendp, 1e-6):
            rep.problems.append(f"epsilon {epsilon:.8g} is not what rho={total:.8g} converts to at "
                                f"delta={delta:g} ({eps_opendp:.8g})")
        if total > 0 and cks_delta(total, eps_opendp) > delta * (1 + 1e-6):
            rep.problems.append("OpenDP's conversion disagrees with the independent CKS bound")
        eb = ledger.get("epsilon_budget")
        if eb is not None and rho_to_epsilon(rho_budget, delta) > float(eb) * (1 + 1e-6):
            rep.problems.append(f"rho_budget {rho_budget:.8g} converts to more than epsilon_budget {eb}")
    if ledger.get("neighbouring") != "add/remove one record":
        rep.warnings.append(f"neighbouring relation is {ledger.get('neighbouring')!r}; "
                            "sensitivities here assume add/remove one record")
    if ledger.get("seeded"):
        rep.warnings.append("SEEDED RUN: its noise is predictable to anyone who knows the seed; "
                            "the guarantee does not hold for this release (tests and demos only)")
    if ledger.get("non_private"):
        rep.problems.append(f"NOT PRIVATE: {ledger['non_private']}")
    if ledger.get("status") not in (None, "complete"):
        rep.warnings.append(f"run status is {ledger.get('status')!r}: the release did not finish; "
                            "the entries record what was spent before it stopped")
    rep.summary = {"entries": len(ledger["entries"]), "rho_spent": total, "rho_budget": rho_budget,
                   "epsilon": epsilon, "delta": delta, "method": ledger.get("method")}
    return rep
