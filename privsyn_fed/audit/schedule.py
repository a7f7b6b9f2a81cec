"""Planned schedules (``details.schedule``): a run that planned its budget from a noisy row total
starts with that total, and its later releases are recomputed here from the recorded noisy total
and the public facts of the ledger by the same allocation rule (``methods.allocation``): the rounds
of the AIM family, the shares of Fed-TDA, and each release's noise against its planned share.
"""

from __future__ import annotations

import math
from typing import Any

from ..methods import allocation
from .aim_run import AimRun
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
    if not rho_budget > 0:
        rep.problems.append(f"a planned schedule is recomputed from a positive budget, not rho_budget {rho_budget!r}")
        return None
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
    if not rho_budget - _cost(first) > 0:
        rep.problems.append("the planning total spends the whole budget: no schedule is planned from nothing")
        return None
    return rho_budget - _cost(first)


def _target_cost(ledger: dict[str, Any], d: dict[str, Any], planned: bool) -> float:
    """What a target's ``d - 1`` 2-ways spent (``details.options.target``; 0 without one): the entries
    after the planning total, before the rounds are planned (their places are checked by
    ``aim_charges``)."""
    if (d.get("options") or {}).get("target") is None:
        return 0.0
    first, n = int(planned), len(d.get("columns") or []) - 1
    return sum(_cost(e) for e in ledger["entries"][first : first + n])


def _dependence_cost(ledger: dict[str, Any], d: dict[str, Any]) -> float:
    """What the dependence step spent (``details.dependence``; 0 when it did not run, which
    ``dependence.step_ran`` checks): the entries after the planning total and a target's 2-ways,
    before the 1-ways (their places are checked by ``aim_charges``)."""
    dep = d.get("dependence")
    if not isinstance(dep, dict):
        return 0.0
    n = len(d.get("columns") or [])
    first = 1 + (n - 1 if (d.get("options") or {}).get("target") is not None else 0)
    count = 1 + len(dep.get("pairs") or []) + len(dep.get("chosen") or [])
    return sum(_cost(e) for e in ledger["entries"][first : first + count])


def _check_aim_family_schedule(
    ledger: dict[str, Any], d: dict[str, Any], closure: dict, variant: str, rep: AuditReport
) -> tuple[int, float, float] | None:
    """The rounds a planned AIM, DistAIM or FLAIM schedule must have, recomputed from the recorded
    noisy total and the public facts of the ledger (``allocation``); AIM's units ``R + alpha d``
    (an annealing DistAIM's too: ``details.schedule.anneals``, planned as AIM's). With
    ``--find-dependence`` they are planned on the budget the step leaves. Returns the planned
    rounds, the budget left after the total (and a target's 2-ways and the dependence step) and
    AIM's units (None on a problem). An annealing FLAIM (``allocation.flaim_anneals``) plans with
    ``allocation.plan_flaim_annealed`` and AIM's units."""
    schedule, options, method = d["schedule"], d.get("options") or {}, ledger["method"]
    shape, columns = d.get("shape"), d.get("columns") or []
    rest = _planning_total(ledger, d, len(columns), rep)
    if rest is None:
        return None
    rest -= _target_cost(ledger, d, planned=True) + _dependence_cost(ledger, d)
    if not rest > 0:
        rep.problems.append(
            "the target's 2-ways and the dependence step spend the whole budget: no rounds are planned from nothing"
        )
        return None
    n_hat, alpha, n_cols = float(schedule["noisy_total"]), float(options.get("alpha", 0.9)), len(columns)
    cells = [math.prod(shape[i] for i in cl) for cl in closure if len(cl) > 1]
    steps = int(options.get("local_steps") or 1)
    anneals = schedule.get("anneals", False)
    silos, rate = int(d.get("silos") or 1), AimRun.recorded_sample_rate(d)
    flaim_anneals = method == "flaim" and allocation.flaim_anneals(None, rate, steps, variant)
    if anneals not in (True, False) or anneals and method != "distaim" and not flaim_anneals:
        rep.problems.append(
            f"details.schedule.anneals is {anneals!r}: only a distaim schedule records it, or a private flaim "
            "over every silo in every round with one local step, as true (aim always anneals)"
        )
        return None
    if method == "aim" or anneals and method == "distaim":  # an annealing DistAIM plans as AIM does
        planned = allocation.plan_aim(n_hat, rest, alpha, n_cols, cells)
    elif anneals:
        planned = allocation.plan_flaim_annealed(n_hat, rest, alpha, n_cols, cells, silos)
    elif method == "distaim":
        planned = allocation.plan_distaim(n_hat, rest, alpha, n_cols, cells, allocation.FEDERATED_ROUNDS)
    else:
        planned = allocation.plan_flaim(
            n_hat, rest, alpha, n_cols, cells, allocation.FEDERATED_ROUNDS, steps, variant, silos, rate
        )
    if schedule.get("rounds") != planned:
        rep.problems.append(
            f"details.schedule plans {schedule.get('rounds')} rounds, but the allocation rule "
            f"gives {planned} for the recorded noisy total {n_hat:g}"
        )
        return None
    units = allocation.aim_units(planned, n_cols, alpha)
    if (method == "aim" or anneals) and not _close(float(schedule.get("units", -1)), units):
        rep.problems.append(
            f"details.schedule records {schedule.get('units')} units, but {planned} planned rounds and "
            f"{n_cols} columns give {units:g}"
        )
        return None
    if method != "aim" and not anneals and "units" in schedule:
        rep.problems.append(f"details.schedule records units, which a {method} schedule does not plan")
        return None
    return planned, rest, units


def _check_fedtda_schedule(
    ledger: dict[str, Any], d: dict[str, Any], types: list, bound: float, rep: AuditReport
) -> int | None:
    """A planned Fed-TDA schedule, recomputed from the recorded noisy total (at least 1: the run
    plans from ``max(1, N_hat)``) and the public facts of the ledger (``allocation.plan_fedtda``),
    and each release's noise against its planned share (a target's 2-ways: ``target_share`` of
    what the total left, the plan then made from the rest). Returns the planned refinement (None on
    a problem)."""
    schedule, shape, options = d["schedule"], d.get("shape"), d.get("options") or {}
    rest = _planning_total(ledger, d, len(types), rep)
    if rest is None:
        return None
    if not float(schedule["noisy_total"]) >= 1:
        rep.problems.append(
            f"details.schedule.noisy_total {schedule['noisy_total']} is below 1, where fedtda plans from 1"
        )
        return None
    entries = ledger["entries"][1:]
    if options.get("target") is not None:  # its share of what the total left, then the plan from the rest
        if not _check_fedtda_shares(entries[:1], [float(options["target_share"]) * rest], rep):
            return None
        rest, entries = rest - _cost(entries[0]), entries[1:]
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
        return None
    parts = ([plan.rho_cat] if n_cat else []) + ([plan.rho_num] if numeric else []) + [plan.rho_cov]
    return plan.refine if _check_fedtda_shares(entries, parts, rep) else None


def _check_fedtda_shares(entries: list[dict[str, Any]], parts: list[float], rep: AuditReport) -> bool:
    """Each release's noise spends its share ``rho_part``: ``sigma = D / sqrt(2 rho_part)`` for its
    planned sensitivity ``D``, before any fixed-point growth (noise the parties drew: at least it)."""
    for e, rho_part in zip(entries, parts):
        fp = e.get("fixed_point") or {}
        planned = float(fp.get("sensitivity_planned", e["sensitivity_l2"]))
        grown = dict(e, sigma=float(e["sigma"]) * planned / float(e["sensitivity_l2"]), sensitivity_l2=planned)
        if not (rho_part > 0 and _planned_noise(grown, planned / math.sqrt(2.0 * rho_part))):
            rep.problems.append(
                f"entry {e['step']} ({e['query']}): its noise does not spend the planned rho {rho_part:.6g}"
            )
            return False
    return True
