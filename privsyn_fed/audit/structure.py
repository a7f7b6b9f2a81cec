"""The structure of a complete run: it carries the ``details`` its method's check needs, and its
entries are exactly the ones the algorithm makes, with at least the sound sensitivities recomputed
from public facts the ledger records. Here: for the AIM family (aim, distaim, flaim) the workload's
largest weight, the number of rounds (and local steps) and the columns, and for the independent
method its columns; Fed-TDA's (``structure_fedtda``) and a DP schema draft's
(``structure_draft``) in their own modules, a planned schedule's in ``schedule``.
"""

from __future__ import annotations

import math
from typing import Any

from ..methods.workload import downward_closure
from .arithmetic import _square
from .findings import AuditReport
from .schedule import _check_aim_family_schedule
from .structure_draft import _check_draft
from .structure_fedtda import _check_fedtda

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
    """The independent method makes one Gaussian release of every column's 1-way marginal: a record
    is in one cell of each of the ``d`` marginals, so its sensitivity is at least ``sqrt(d)``."""
    columns = d.get("columns")
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
    sound = math.sqrt(len(columns))
    if float(entries[0]["sensitivity_l2"]) < sound * (1 - 1e-9):
        rep.problems.append(
            f"entry 1 ({entries[0]['query']}): sensitivity {entries[0]['sensitivity_l2']:g} is below "
            f"the sound value sqrt({len(columns)}) = {sound:g} of {len(columns)} one-way marginals"
        )


def _check_structure(ledger: dict[str, Any], rep: AuditReport) -> None:
    """For a finished run of a known method: every release the algorithm makes has an entry, with
    at least the sound sensitivity (recomputed from the recorded public workload)."""
    d = ledger.get("details") or {}
    method, options = ledger.get("method"), d.get("options") or {}
    columns, workload = d.get("columns"), d.get("workload")
    if method == "fedtda":
        _check_fedtda(ledger, d, rep)
        return
    if method == "independent":
        _check_independent(ledger, d, rep)
        return
    if method == "schema-draft":
        _check_draft(ledger, d, rep)
        return
    if not columns or not workload:
        rep.problems.append(
            "the ledger does not record its method's columns and workload (details), so its "
            "structure (one entry per release, sound sensitivities) cannot be checked"
        )
        return
    try:
        index = {c: i for i, c in enumerate(columns)}
        w_max = max(downward_closure([tuple(sorted(index[c] for c in cl)) for cl in workload]).values())
    except (KeyError, TypeError, ValueError):
        rep.problems.append("details.workload names columns that are not in details.columns")
        return
    variant = options.get("variant", "private")
    key = (method, variant) if method == "flaim" else method
    if key not in EM_SENSITIVITY:
        rep.problems.append(f"details.options.variant {variant!r} is not a flaim variant")
        return
    factor = EM_SENSITIVITY[key]
    ems = [(i, e) for i, e in enumerate(ledger["entries"]) if e["mechanism"] == "exponential"]
    gauss = [(i, e) for i, e in enumerate(ledger["entries"]) if e["mechanism"] == "gaussian"]
    for i, e in ems:
        if float(e.get("sensitivity", 0)) < factor * w_max * (1 - 1e-12):
            rep.problems.append(
                f"entry {i + 1} ({e.get('query')}): sensitivity {e.get('sensitivity')} is below "
                f"the sound value {factor:g} x max weight {w_max:g} = {factor * w_max:g} for {method}"
            )
    for i, e in gauss:
        if float(e.get("sensitivity_l2", 0)) < 1.0 - 1e-12:
            rep.problems.append(f"entry {i + 1} ({e.get('query')}): a count marginal has L2 sensitivity at least 1")
    n_cols = len(columns)
    steps = options.get("local_steps", 1) if method == "flaim" else 1
    schedule = d.get("schedule")
    if schedule is not None:
        closure = downward_closure([tuple(sorted(index[c] for c in cl)) for cl in workload])
        planned = _check_aim_family_schedule(ledger, d, closure, variant, rep)
        if planned is None:
            return
        rounds = d.get("rounds") if method == "aim" else planned
    else:  # T given (or a ledger from before schedules were planned)
        rounds = d.get("rounds") if method == "aim" else options.get("rounds")
        if rounds is None or rounds < 1 or steps is None or steps < 1:
            where = "details.rounds" if method == "aim" else "details.options.rounds"
            rep.problems.append(
                f"the ledger does not record a positive number of rounds ({where}"
                f"{', local_steps' if method == 'flaim' else ''}) or a planned schedule "
                f"(details.schedule), so the number of releases a complete {method} run makes "
                "cannot be checked"
            )
            return
    total = 1 if schedule is not None else 0  # the planning total
    if method in ("aim", "distaim"):
        expect = {"exponential": rounds, "gaussian": total + n_cols + rounds}
    else:
        T, s = rounds, steps
        expect = {"exponential": T * s}
        need = total + T * (2 * s - 1) + (max(T, 1) * n_cols if variant == "private" else n_cols)
        have = sum(_square(e["sensitivity_l2"]) for _, e in gauss)
        if have < need * (1 - 1e-9):
            rep.problems.append(
                f"the Gaussian releases add up to {have:g} unit-sensitivity measurements, fewer "
                f"than the {need} a {variant} FLAIM run with T={T}, s={s} makes"
            )
    for mech, count in expect.items():
        found = len(ems if mech == "exponential" else gauss)
        if count is not None and found != count:
            rep.problems.append(
                f"{found} {mech} entries, but a complete {method} run of these options makes "
                f"{count}: an entry is missing or extra"
            )
