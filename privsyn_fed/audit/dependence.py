"""``--find-dependence`` (``methods.dependence``), as a ledger declares it in ``details.dependence``:
the rule's constants, each column's groups (valid contiguous groups, at most the rule's number), the
screened pairs (every pair of columns that the recorded workload's candidates hold), a finite
``dep`` per pair, and the pairs chosen, which must be the maximum spanning forest of those scores
(``spanning_forest``, recomputed here). The step needs a planned schedule. Its entries' places,
cells, sensitivities and noise are checked with the run's other releases (``aim_charges``,
``aim_noise``). Whether it ran is ``details.options.find_dependence`` when true or false; when null,
the rule's (``details.dependence_rule``), recomputed from the recorded noisy total and the budget.
"""

from __future__ import annotations

import math
from typing import Any

from ..methods import (
    GROUPING_SHARE,
    MEASURE_GROUPS,
    ROUNDS_AFTER,
    SCREEN_GROUPS,
    auto_rule,
    screened_pairs,
    spanning_forest,
    valid_starts,
)
from .arithmetic import _close
from .findings import AuditReport
from .shape import _finite

Declared = tuple[list[tuple[int, ...]], list[tuple[int, ...]], list[tuple[list[int], list[int]]]]


def _pairs(value: Any, index: dict[str, int]) -> list[tuple[int, ...]] | None:
    """A list of pairs of column names as column-index pairs, or None when it is not one."""
    if not isinstance(value, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(c, str) and c in index for c in p) for p in value
    ):
        return None
    return [tuple(index[c] for c in p) for p in value]


def step_ran(ledger: dict[str, Any], d: dict[str, Any], rep: AuditReport) -> bool | None:
    """Whether the run's dependence step ran (module docstring); None on a problem. The rule decides
    only a run of the AIM family with a planned schedule and ``find_dependence`` null; its record must
    be ``methods.dependence.auto_rule`` of the recorded noisy total, the budget (``rho_budget``, in
    row units) and whether the run was over MPC (``details.mpc``). A ledger whose options do not
    name ``find_dependence``, or a flaim ledger without a rule's record, ran without the step
    (versions before it)."""
    options, rule, schedule = d.get("options") or {}, d.get("dependence_rule"), d.get("schedule")
    choice = options.get("find_dependence", False)
    if ledger["method"] == "flaim" and choice is None and rule is None:
        return False
    if choice is not None or schedule is None or ledger["method"] not in ("aim", "distaim", "flaim"):
        if rule is not None:
            rep.problems.append(
                "details.dependence_rule is recorded, but the rule decides only a planned aim, distaim or flaim run "
                "with find_dependence unset"
            )
            return None
        return bool(choice)
    if not isinstance(rule, dict) or rule.get("on") not in (True, False):
        rep.problems.append(
            "find_dependence is unset and the schedule planned, but details.dependence_rule does not record "
            "the rule's outcome"
        )
        return None
    n_hat, rho = schedule.get("noisy_total"), ledger["rho_budget"]
    if _finite(n_hat) and _finite(rho) and rho > 0:  # else the schedule's own checks refuse them
        want = auto_rule(float(n_hat), float(rho), "mpc" in d)
        signal = rule.get("signal")
        if (
            rule.get("band") != want["band"]
            or rule["on"] is not want["on"]
            or not (_finite(signal) and _close(float(signal), want["signal"]))
        ):
            rep.problems.append(
                f"details.dependence_rule records {rule!r}, but the rule gives {want!r} from the noisy total "
                f"{float(n_hat):g} and the budget"
            )
    return bool(rule["on"])  # checked above: the rest of the run is checked against what it recorded


def _check_dependence(
    ledger: dict[str, Any], d: dict[str, Any], closure: dict[tuple[int, ...], float], rep: AuditReport
) -> tuple[bool, Declared | None]:
    """Whether the declared step can be used, and what it declares (None when it did not run)."""
    dep = d.get("dependence")
    columns, shape = list(d["columns"]), list(d["shape"])
    ran = step_ran(ledger, d, rep)
    if ran is None:
        return False, None
    if not ran:
        if dep is not None:
            rep.problems.append(
                "details.dependence is recorded, but neither details.options.find_dependence nor the rule ran the step"
            )
            return False, None
        return True, None
    if not isinstance(dep, dict):
        rep.problems.append("the dependence step ran, but details.dependence does not record it")
        return False, None
    if d.get("schedule") is None:
        rep.problems.append("find_dependence runs with a planned schedule, and the ledger records none")
        return False, None
    constants = {
        "grouping_share": GROUPING_SHARE,
        "screen_groups": SCREEN_GROUPS,
        "measure_groups": MEASURE_GROUPS,
        "rounds_after": ROUNDS_AFTER,
    }
    if any(dep.get(k) != v for k, v in constants.items()):
        rep.problems.append(f"details.dependence records other constants than this version's rule {constants}")
        return False, None
    groups, index = dep.get("groups"), {c: i for i, c in enumerate(columns)}
    if not isinstance(groups, dict) or sorted(groups) != sorted(columns):
        rep.problems.append("details.dependence.groups does not give every column its groups")
        return False, None
    declared_groups = []
    for c, cells in zip(columns, shape):
        g = groups[c]
        ok = isinstance(g, list) and len(g) == 2 and all(isinstance(s, list) and s for s in g)
        if not ok or not all(isinstance(x, int) and not isinstance(x, bool) for s in g for x in s):
            rep.problems.append(f"details.dependence.groups[{c!r}] is not two lists of first cells")
            return False, None
        if not (valid_starts(g[0], cells, SCREEN_GROUPS) and valid_starts(g[1], cells, MEASURE_GROUPS)):
            rep.problems.append(
                f"details.dependence.groups[{c!r}] are not contiguous groups of its {cells} cells "
                f"(at most {SCREEN_GROUPS} and {MEASURE_GROUPS}, starting with 0)"
            )
            return False, None
        declared_groups.append((list(g[0]), list(g[1])))
    pairs, chosen, scores = _pairs(dep.get("pairs"), index), _pairs(dep.get("chosen"), index), dep.get("scores")
    names = [[columns[i] for i in c] for c in closure]
    expected = [tuple(index[c] for c in p) for p in screened_pairs(names, columns)]
    if pairs != expected:
        rep.problems.append(
            "details.dependence.pairs are not every pair of columns that the workload's candidates hold, in "
            "schema order"
        )
        return False, None
    finite = isinstance(scores, list) and all(
        isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) for s in scores
    )
    if not finite or len(scores) != len(pairs):
        rep.problems.append("details.dependence.scores must give every screened pair a finite number")
        return False, None
    forest = [tuple(p) for p in spanning_forest([tuple(p) for p in pairs], [float(s) for s in scores])]
    if chosen != forest:
        rep.problems.append(
            "details.dependence.chosen is not the maximum spanning forest of the screened pairs with a positive "
            "score, in decreasing score"
        )
        return False, None
    return True, (pairs, chosen, declared_groups)


def dependence_summary(ledger: dict[str, Any]) -> str | None:
    """What a ledger's dependence step measured and why it ran (the rule or ``find_dependence``),
    for people; None when it did not run."""
    details = ledger.get("details") or {}
    dep, rule = details.get("dependence"), details.get("dependence_rule")
    if not isinstance(dep, dict):
        return None
    why = "--find-dependence"
    if isinstance(rule, dict):
        signal, band = rule.get("signal"), rule.get("band")
        shown = _finite(signal) and isinstance(band, list) and len(band) == 2 and all(_finite(b) for b in band)
        why = "the default rule" + (
            f": noisy rows x sqrt(rho) = {signal:,.0f}, in {band[0]:,.0f} to {band[1]:,.0f}" if shown else ""
        )
        why += "; --no-find-dependence leaves it out"
    chosen, pairs = (len(v) if isinstance(v, list) else 0 for v in (dep.get("chosen"), dep.get("pairs")))
    return f"{chosen} of {pairs} screened pairs measured on merged bins before the rounds ({why})"
