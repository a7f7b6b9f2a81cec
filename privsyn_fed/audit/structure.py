"""The structure of a complete run: it carries the ``details`` its method's check needs, and its
entries are exactly the ones the algorithm makes, with the sensitivities, cells and noise
recomputed from public facts the ledger records. Here: the AIM family (aim, distaim, flaim) from
its workload, domain, rounds and options (``workload``, ``aim_run``, ``aim_charges``,
``selection``, ``aim_noise``; a planned schedule's rounds in ``schedule``), and the independent
method from its columns; Fed-TDA's (``structure_fedtda``) and a DP schema draft's
(``structure_draft``) in their own modules.
"""

from __future__ import annotations

import math
from typing import Any

from ..methods import MAX_CANDIDATE_WEIGHT, downward_closure
from .aim_charges import _check_charges
from .aim_noise import _check_noise
from .aim_run import AimRun
from .arithmetic import _close, _planned_noise
from .dependence import _check_dependence
from .findings import AuditReport
from .schedule import _check_aim_family_schedule, _target_cost
from .selection import _check_selections
from .structure_draft import _check_draft
from .structure_fedtda import _check_fedtda
from .workload import EXPLICIT_WORKLOAD, _check_workload

#: The one release of the independent method.
INDEPENDENT_QUERY = "every column's 1-way marginal"
#: The releases of synthetic data (``privsyn_fed.methods.METHODS``), and every kind of ledger audit checks.
RELEASE_METHODS = ("aim", "distaim", "flaim", "fedtda", "independent")
METHODS = RELEASE_METHODS + ("schema-draft",)

#: Exponential-mechanism sensitivity per method, in units of the largest workload weight (the sound
#: values: AIM's score moves by w; DistAIM's and naive FLAIM's also through the secret or local
#: size; AugFLAIM's also through its heterogeneity term).
EM_SENSITIVITY = {
    "aim": 1.0,
    "distaim": 2.0,
    ("flaim", "naive"): 2.0,
    ("flaim", "private"): 4.0,
    ("flaim", "oracle"): 4.0,
}


def _check_independent(ledger: dict[str, Any], d: dict[str, Any], rep: AuditReport) -> None:
    """The independent method makes one Gaussian release of every column's 1-way marginal (round
    0): a record is in one cell of each of the ``d`` marginals, so its sensitivity is ``sqrt(d)``;
    its cells are the columns' sizes added up, and it spends the whole budget (``sigma =
    sqrt(d / (2 rho))``; noise the parties drew: at least it)."""
    columns, shape = d.get("columns"), d.get("shape")
    if not columns:
        rep.problems.append(
            "the ledger does not record its columns (details), so the structure of an "
            "independent release (one Gaussian of sensitivity sqrt(d)) cannot be checked"
        )
        return
    entries = ledger["entries"]
    if len(entries) != 1 or entries[0]["mechanism"] != "gaussian":
        rep.problems.append(
            f"{len(entries)} entries, but a complete independent run makes one Gaussian release "
            "of every column's 1-way marginal: an entry is missing or extra"
        )
        return
    e, label = entries[0], f"entry 1 ({entries[0]['query']})"
    sound = math.sqrt(len(columns))
    if float(e["sensitivity_l2"]) < sound * (1 - 1e-9):
        rep.problems.append(
            f"{label}: sensitivity {e['sensitivity_l2']:g} is below "
            f"the sound value sqrt({len(columns)}) = {sound:g} of {len(columns)} one-way marginals"
        )
    elif not _close(float(e["sensitivity_l2"]), sound):
        rep.problems.append(f"{label}: sensitivity {e['sensitivity_l2']:g} is not sqrt({len(columns)}) = {sound:g}")
    if e["query"] != INDEPENDENT_QUERY or e.get("round") != 0:
        rep.problems.append(f"{label}: the release of an independent run is {INDEPENDENT_QUERY!r}, in round 0")
    if not isinstance(shape, list) or e.get("cells") != sum(shape):
        rep.problems.append(f"{label}: cells {e.get('cells')!r}, but the {len(columns)} 1-ways have sum(details.shape)")
    rho = float(ledger["rho_budget"])
    if not (rho > 0 and _planned_noise(e, sound / math.sqrt(2.0 * rho))):
        rep.problems.append(f"{label}: its noise does not spend the whole budget (sigma = sqrt(d / (2 rho_budget)))")
    if d.get("rounds") != 1:
        rep.problems.append(f"details.rounds is {d.get('rounds')}, but an independent run has one round")


def _workload_weights(d: dict[str, Any], n: int, rep: AuditReport) -> tuple[bool, list[int] | None]:
    """Whether ``details.workload_weights`` can be used, and the weights: a declared workload's
    whole-number weights, one per marginal (None when absent: all 1)."""
    weights = d.get("workload_weights")
    if weights is None:
        return True, None
    whole = isinstance(weights, list) and all(isinstance(w, int) and not isinstance(w, bool) for w in weights)
    if not (whole and len(weights) == n and all(1 <= w <= MAX_CANDIDATE_WEIGHT for w in weights)):
        rep.problems.append(
            f"details.workload_weights must give each of the {n} workload marginals a whole-number weight from 1 "
            f"to {MAX_CANDIDATE_WEIGHT}"
        )
        return False, None
    options = d.get("options") or {}
    if options.get("workload") != EXPLICIT_WORKLOAD and options.get("target") is None:
        rep.problems.append(
            "details.workload_weights belong to a declared workload (details.options.workload) or a target"
        )
        return False, None
    return True, weights


def _check_aim_family(ledger: dict[str, Any], d: dict[str, Any], rep: AuditReport) -> None:
    """A complete run of aim, distaim or flaim, from its recorded workload, domain, options and
    budget: the workload its options give (``workload``), the rounds (``details.rounds``; for
    distaim and flaim the ``T`` given or planned), every release in its place with its cells and
    sensitivity (``aim_charges``), every selection's sensitivity (``selection``) and every
    release's noise (``aim_noise``)."""
    method, options = ledger["method"], d.get("options") or {}
    columns, workload, shape = d.get("columns"), d.get("workload"), d.get("shape")
    if not columns or not workload:
        rep.problems.append(
            "the ledger does not record its method's columns and workload (details), so its "
            "structure (one entry per release, sound sensitivities) cannot be checked"
        )
        return
    index = {c: i for i, c in enumerate(columns)}
    if any(c not in index for cl in workload for c in cl) or any(not cl for cl in workload):
        rep.problems.append("details.workload names columns that are not in details.columns")
        return
    if not isinstance(shape, list) or len(shape) != len(columns):
        rep.problems.append(
            "the ledger does not record the cells of every column (details.shape), so the marginals it "
            "measured cannot be checked"
        )
        return
    cliques = [tuple(index[c] for c in cl) for cl in workload]
    usable, weights = _workload_weights(d, len(cliques), rep)
    if not usable:
        return
    _check_workload(d, cliques, weights, rep)
    closure = downward_closure([tuple(sorted(set(cl))) for cl in cliques], weights)
    variant = options.get("variant", "private")
    key = (method, variant) if method == "flaim" else method
    if key not in EM_SENSITIVITY:
        rep.problems.append(f"details.options.variant {variant!r} is not a flaim variant")
        return
    usable, declared = _check_dependence(ledger, d, closure, rep)
    if not usable:
        return
    alpha = float(options.get("alpha", 0.9))
    steps = options.get("local_steps", 1) if method == "flaim" else 1
    rho = float(ledger["rho_budget"])
    if not rho > 0:
        rep.problems.append(f"a run's noise is recomputed from a positive budget, not rho_budget {rho!r}")
        return
    schedule = d.get("schedule")
    if schedule is not None:
        plan = _check_aim_family_schedule(ledger, d, closure, variant, rep)
        if plan is None:
            return
        T, rho, units = plan
    else:  # T given (or a ledger from before schedules were planned)
        T = options.get("rounds")
        if T is None or T < 1 or steps is None or steps < 1:
            rep.problems.append(
                f"the ledger does not record a positive number of rounds (details.options.rounds"
                f"{', local_steps' if method == 'flaim' else ''}) or a planned schedule "
                f"(details.schedule), so the number of releases a complete {method} run makes "
                "cannot be checked"
            )
            return
        units = float(T)
        rho -= _target_cost(ledger, d, planned=False)
    rounds = d.get("rounds")
    anneals = schedule is not None and schedule.get("anneals") is True  # annealing DistAIM or FLAIM: AIM's rounds
    if method == "aim" or anneals:
        if rounds is None:
            rep.problems.append(f"the ledger does not record the rounds {method} ran (details.rounds)")
            return
    elif rounds != T:
        rep.problems.append(f"details.rounds is {rounds}, but the run has the {T} rounds its options give")
        return
    target = options.get("target")
    if target is not None and target not in columns:
        return  # said by the workload's check
    run = AimRun(
        method,
        variant,
        list(columns),
        list(shape),
        closure,
        int(rounds),
        int(steps),
        schedule is not None,
        None if target is None else columns.index(target),
        float(options.get("target_share") or 0.0),
        target_groups=d.get("target_groups"),
        screened=declared[0] if declared else None,
        chosen=declared[1] if declared else None,
        groups=declared[2] if declared else None,
        dependence_share=float(options.get("dependence_share") or 0.0),
        sample_rate=AimRun.recorded_sample_rate(d),
        anneals=anneals,
    )
    found = _check_charges(ledger, run, rep)
    if found is None:
        return
    _check_selections(ledger, run, found, EM_SENSITIVITY[key], rep)
    _check_noise(ledger, run, found, alpha, rho, units, rep)


def _check_structure(ledger: dict[str, Any], rep: AuditReport) -> None:
    """For a finished run of a known method: every release the algorithm makes has an entry, with
    the sensitivity, cells and noise its recorded public facts give."""
    d = ledger.get("details") or {}
    method = ledger.get("method")
    if method == "fedtda":
        _check_fedtda(ledger, d, rep)
    elif method == "independent":
        _check_independent(ledger, d, rep)
    elif method == "schema-draft":
        _check_draft(ledger, d, rep)
    else:
        _check_aim_family(ledger, d, rep)
