"""Planned schedules (``details.schedule``): a run that planned its budget from a noisy row total
starts with that total, and its later releases are recomputed here from the recorded noisy total
and the public facts of the ledger by the same allocation rule (``methods.allocation``): the rounds
of the AIM family, the shares of Fed-TDA, and each release's noise against its planned share.
"""

from __future__ import annotations

import math
from typing import Any

from ..methods import allocation
from .arithmetic import _close, _cost, _planned_noise
from .findings import AuditReport


def _planning_total(ledger: dict[str, Any], d: dict[str, Any], n_columns: int, rep: AuditReport) -> float | None:
    """A planned schedule is recomputed from the domain (``details.shape``) and starts with the row
    total: a Gaussian of sensitivity 1 at ``allocation.TOTAL_SHARE`` of the budget. Returns the
    budget left after it (None on a problem)."""
    schedule, shape = d["schedule"], d.get("shape")
    if not isinstance(shape, list) or len(shape) != n_columns:
        rep.problems.append(
            "a planned schedule is recomputed from the domain, but details.shape does not give "
            "the cells of every column"
        )
        return None
    entries = ledger["entries"]
    rho_budget = float(ledger["rho_budget"])
    first = entries[0] if entries else None
    if (
        first is None
        or first["mechanism"] != "gaussian"
        or not _close(float(first["sensitivity_l2"]), 1.0)
        or not _planned_noise(first, allocation.total_sigma(rho_budget))
    ):
        rep.problems.append(
            "a planned schedule starts with the row total (one Gaussian of sensitivity 1 with "
            f"{allocation.TOTAL_SHARE:g} of the budget), and the first entry is not that release"
        )
        return None
    if not _close(float(schedule.get("total_share", -1)), allocation.TOTAL_SHARE) or not _close(
        float(schedule.get("noise_to_signal", -1)), allocation.NOISE_TO_SIGNAL
    ):
        rep.problems.append(
            "details.schedule records other constants than this version's allocation rule "
            f"(total_share {allocation.TOTAL_SHARE:g}, noise_to_signal {allocation.NOISE_TO_SIGNAL:g})"
        )
        return None
    if "noisy_total" not in schedule:
        rep.problems.append("details.schedule does not record the noisy total the schedule was planned from")
        return None
    return rho_budget - _cost(first)


def _check_aim_family_schedule(
    ledger: dict[str, Any], d: dict[str, Any], closure: dict, variant: str, rep: AuditReport
) -> int | None:
    """The rounds a planned AIM, DistAIM or FLAIM schedule must have, recomputed from the recorded
    noisy total and the public facts of the ledger (``allocation``), and the noise of the 1-ways
    that follow the total. Returns the planned rounds (None on a problem)."""
    schedule, options, method = d["schedule"], d.get("options") or {}, ledger["method"]
    shape, columns = d.get("shape"), d.get("columns") or []
    rest = _planning_total(ledger, d, len(columns), rep)
    if rest is None:
        return None
    n_hat, alpha, n_cols = float(schedule["noisy_total"]), float(options.get("alpha", 0.9)), len(columns)
    cells = [math.prod(shape[i] for i in cl) for cl in closure if len(cl) > 1]
    steps = int(options.get("local_steps") or 1)
    if method == "aim":
        planned = allocation.plan_aim(n_hat, rest, alpha, n_cols, cells)
        sigma = allocation.aim_sigma(rest, allocation.aim_units(planned, n_cols, alpha), alpha)
    elif method == "distaim":
        planned = allocation.plan_distaim(n_hat, rest, alpha, n_cols, cells, allocation.FEDERATED_ROUNDS)
        sigma = allocation.distaim_sigma(rest, planned, n_cols, alpha)
    else:
        planned = allocation.plan_flaim(
            n_hat, rest, alpha, n_cols, cells, allocation.FEDERATED_ROUNDS, steps, variant, int(d.get("silos") or 1)
        )
        sigma = allocation.flaim_sigma(rest, planned, steps, n_cols, alpha, variant)
    if schedule.get("rounds") != planned:
        rep.problems.append(
            f"details.schedule plans {schedule.get('rounds')} rounds, but the allocation rule "
            f"gives {planned} for the recorded noisy total {n_hat:g}"
        )
        return None
    oneways = ledger["entries"][1 : 1 + n_cols]
    if len(oneways) < n_cols or any(e["mechanism"] != "gaussian" or not _planned_noise(e, sigma) for e in oneways):
        rep.problems.append(
            f"the {n_cols} one-way measurements after the total must have the planned noise sigma {sigma:.6g}"
        )
        return None
    return planned


def _check_fedtda_schedule(
    ledger: dict[str, Any], d: dict[str, Any], types: list, bound: float, rep: AuditReport
) -> bool:
    """A planned Fed-TDA schedule, recomputed from the recorded noisy total and the public facts of
    the ledger (``allocation.plan_fedtda``), and each release's noise against its planned share."""
    schedule, shape, options = d["schedule"], d.get("shape"), d.get("options") or {}
    rest = _planning_total(ledger, d, len(types), rep)
    if rest is None:
        return False
    n_cat = types.count("categorical")
    numeric = [shape[j] for j, t in enumerate(types) if t == "numeric"]
    plan = allocation.plan_fedtda(
        float(schedule["noisy_total"]), rest, numeric, n_cat, bound, int(options.get("refine") or 4)
    )
    recorded = {k: schedule.get(k) for k in plan.record()}
    if not all(
        _close(float(recorded[k] if recorded[k] is not None else -1), float(v)) for k, v in plan.record().items()
    ):
        rep.problems.append(
            f"details.schedule records {recorded}, but the allocation rule gives {plan.record()} for "
            f"the recorded noisy total {schedule['noisy_total']:g}"
        )
        return False
    parts = ([plan.rho_cat] if n_cat else []) + ([plan.rho_num] if numeric else []) + [plan.rho_cov]
    for e, rho_part in zip(ledger["entries"][1:], parts):
        fp = e.get("fixed_point") or {}
        planned = float(fp.get("sensitivity_planned", e["sensitivity_l2"]))
        grown = dict(e, sigma=float(e["sigma"]) * planned / float(e["sensitivity_l2"]), sensitivity_l2=planned)
        if not _planned_noise(grown, planned / math.sqrt(2.0 * rho_part)):  # before any fixed-point growth
            rep.problems.append(
                f"entry {e['step']} ({e['query']}): its noise does not spend the planned rho {rho_part:.6g}"
            )
            return False
    return True
