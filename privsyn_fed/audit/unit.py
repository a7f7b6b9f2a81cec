"""The privacy unit a ledger declares (``accounting.unit``): its record and its relation agree, and
the run's structure is checked in row units.

A ledger with ``privacy_unit`` states neighbours that differ by one unit of at most ``K`` rows in
each of at most ``M`` silos; every sensitivity it records must be ``K M`` times the sound one-row
value, and every exponential mechanism's epsilon ``K M`` times the one its schedule plans for one
row (``ledger.UnitAccountant``). ``in_row_units`` divides those back out (and the budget and costs
by ``(K M)^2``), so the structure checks, written for one row, recompute every sensitivity and every
noise scale: a ledger whose sensitivities were recorded for another ``K`` or ``M`` than it declares
fails them. The arithmetic (each cost from its recorded parameters, their sum, the conversion) is
checked on the ledger as recorded.
"""

from __future__ import annotations

import copy
from typing import Any

from ..accounting import DECLARED, ENFORCED, ROW_RELATION, bounds_text, relation
from .findings import AuditReport


def unit_factor(ledger: dict[str, Any]) -> float | None:
    """``K M`` of a ledger's valid ``privacy_unit``, 1 without one, None when it is not valid."""
    unit = ledger.get("privacy_unit")
    if unit is None:
        return 1.0
    try:
        k, m = unit["max_rows_per_unit"], unit["max_silos_per_unit"]
        ok = all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (k, m))
        ok = ok and isinstance(unit["column"], str) and unit.get("sensitivity_factor") == k * m
    except (KeyError, TypeError):
        return None
    return float(k * m) if ok else None


def check_unit(ledger: dict[str, Any], rep: AuditReport) -> None:
    """The neighbouring relation: one record without ``privacy_unit``, else the unit's own relation
    from a valid record (positive whole K and M, ``sensitivity_factor`` = K M)."""
    unit = ledger.get("privacy_unit")
    if unit is None:
        if ledger["neighbouring"] != ROW_RELATION:
            rep.problems.append(
                f"neighbouring relation is {ledger['neighbouring']!r}; every sensitivity here is derived for "
                f"{ROW_RELATION} (or for a unit the ledger declares under privacy_unit)"
            )
        return
    if unit_factor(ledger) is None:
        rep.problems.append(
            f"privacy_unit {unit!r} is not a valid unit: it needs a column, whole numbers max_rows_per_unit and "
            "max_silos_per_unit of at least 1, and sensitivity_factor their product"
        )
        return
    stated = relation(unit["column"], unit["max_rows_per_unit"], unit["max_silos_per_unit"])
    if ledger["neighbouring"] != stated:
        rep.problems.append(
            f"neighbouring relation is {ledger['neighbouring']!r}, but its privacy_unit states {stated!r}"
        )
    _check_silo_bound(ledger, unit, rep)


def _check_silo_bound(ledger: dict[str, Any], unit: dict[str, Any], rep: AuditReport) -> None:
    """M is ``enforced`` only where one process read every silo (no ``details.mpc``); a declared M,
    or one a ledger does not qualify (written before M was enforced), is a warning: a statement
    about the data that nothing checked."""
    bound = unit.get("max_silos_bound")
    over_mpc = bool((ledger.get("details") or {}).get("mpc"))
    rep.summary["privacy_unit"] = bounds_text(unit)
    if bound not in (None, ENFORCED, DECLARED):
        rep.problems.append(f"privacy_unit.max_silos_bound is {bound!r}; it must be {ENFORCED!r} or {DECLARED!r}")
    elif bound == ENFORCED and over_mpc:
        rep.problems.append(
            "privacy_unit states max_silos_per_unit as enforced, but this release ran over MPC, where no process "
            "sees the other silos' units: there M can only be declared"
        )
    elif bound != ENFORCED and unit["max_silos_per_unit"] < _silos(ledger):
        rep.warnings.append(
            f"the privacy unit's bound of {unit['max_silos_per_unit']} silo(s) per unit is "
            + ("declared by the release's user" if bound == DECLARED else "not recorded as enforced (an older ledger)")
            + ", not checked on the data: the guarantee holds only if no unit is in more silos"
        )


def _silos(ledger: dict[str, Any]) -> int:
    """The number of silos a ledger names (``details.silos``, or a party copy's MPC parties; 1 when
    it names none)."""
    details = ledger.get("details") or {}
    silos = details.get("silos", (details.get("mpc") or {}).get("parties"))
    return silos if isinstance(silos, int) and not isinstance(silos, bool) else 1


def in_row_units(ledger: dict[str, Any]) -> dict[str, Any]:
    """The ledger as its method planned it for one row (module docstring); itself without a unit."""
    factor = unit_factor(ledger)
    if ledger.get("privacy_unit") is None or factor is None:
        return ledger
    out = copy.deepcopy(ledger)
    f2 = factor**2
    for key in ("rho_budget", "rho_spent"):
        out[key] = float(out[key]) / f2
    for e in out["entries"]:
        if "sensitivity_l2" in e:
            e["sensitivity_l2"] = float(e["sensitivity_l2"]) / factor
        if e.get("mechanism") == "exponential":
            e["sensitivity"] = float(e["sensitivity"]) / factor
            e["epsilon"] = float(e["epsilon"]) / factor
            if isinstance(e.get("fixed_point"), dict) and "epsilon_sampled" in e["fixed_point"]:
                e["fixed_point"]["epsilon_sampled"] = float(e["fixed_point"]["epsilon_sampled"]) / factor
        if "rho" in e:
            e["rho"] = float(e["rho"]) / f2
    return out
