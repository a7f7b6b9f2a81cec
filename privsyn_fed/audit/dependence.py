"""``--find-dependence`` (``methods.dependence``), as a ledger declares it in ``details.dependence``:
the rule's constants, each column's groups (valid contiguous groups, at most the rule's number), the
screened pairs (every pair of columns that the recorded workload's candidates hold), a finite
``dep`` per pair, and the pairs chosen, which must be the maximum spanning forest of those scores
(``spanning_forest``, recomputed here). The step needs a planned schedule. Its entries' places,
cells, sensitivities and noise are checked with the run's other releases (``aim_releases``,
``aim_noise``).
"""

from __future__ import annotations

import math
from typing import Any

from ..methods.dependence import (
    GROUPING_SHARE,
    MEASURE_GROUPS,
    ROUNDS_AFTER,
    SCREEN_GROUPS,
    screened_pairs,
    spanning_forest,
    valid_starts,
)
from .findings import AuditReport

Declared = tuple[list[tuple[int, ...]], list[tuple[int, ...]], list[tuple[list[int], list[int]]]]


def _pairs(value: Any, index: dict[str, int]) -> list[tuple[int, ...]] | None:
    """A list of pairs of column names as column-index pairs, or None when it is not one."""
    if not isinstance(value, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(c, str) and c in index for c in p) for p in value
    ):
        return None
    return [tuple(index[c] for c in p) for p in value]


def _check_dependence(
    d: dict[str, Any], closure: dict[tuple[int, ...], float], rep: AuditReport
) -> tuple[bool, Declared | None]:
    """Whether the declared step can be used, and what it declares (None without the option)."""
    options, dep = d.get("options") or {}, d.get("dependence")
    columns, shape = list(d["columns"]), list(d["shape"])
    if not options.get("find_dependence"):
        if dep is not None:
            rep.problems.append("details.dependence is recorded, but details.options.find_dependence is not set")
            return False, None
        return True, None
    if not isinstance(dep, dict):
        rep.problems.append("details.options.find_dependence is set, but details.dependence does not record the step")
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
