"""The structure of a DP schema draft (method ``schema-draft``), re-derived from its recorded
columns and noisy profile (``_check_draft``): one profile of sensitivity ``sqrt(1 + 2 d)`` over
``1 + 4 d`` cells first; then for each column what the profile decides: a histogram of its numbers
over the intervals of a public grid (its bounds), or of its values with a threshold and its delta
(its categories), each of sensitivity 1, or nothing (a text column of too many distinct values);
each named as the draft names it and drafted in the silo; over MPC (``details.mpc``) the profile
and the bounds on secret shares, and a column's categories as each silo's own thresholded list
(parallel composition), then the union's counts of the listed values on secret shares; the
columns it records as not found (``details.draft.unfound``) among those releases. Its noise,
thresholds and cells against the draft's plan: ``draft_plan``.
"""

from __future__ import annotations

import math
from typing import Any

from .arithmetic import _close
from .draft_plan import DRAFT_DISTINCT_GUARD, DRAFT_SEEN_SIGMAS, _check_draft_plan, decision_sd
from .findings import AuditReport


def _check_draft(ledger: dict[str, Any], d: dict[str, Any], rep: AuditReport) -> None:
    """A DP schema draft over the recorded columns (``details.columns``, the table's header): first
    the profile, one Gaussian of sensitivity at least ``sqrt(1 + 2 k)`` over ``1 + 4 k`` cells (the
    row count, and per column three exclusive counts and a capped distinct count, each moved by at
    most one record); then, in column order, what its noisy profile (``details.draft.profile``)
    decides for each column: a histogram of its numbers over the intervals of a public grid (no
    delta: the domain is public; its cells recorded) for a column of numbers; nothing for a text
    column of more than ``DRAFT_DISTINCT_GUARD`` distinct values; otherwise a thresholded histogram
    of its values with its delta. Each histogram is a Gaussian of sensitivity at least 1 (a record is
    in one cell of it)."""
    columns = d.get("columns")
    if not columns:
        rep.problems.append("the ledger does not record the drafted table's columns (details.columns)")
        return
    k = len(columns)
    entries = ledger["entries"]
    first = entries[0] if entries else None
    sound = math.sqrt(1.0 + 2.0 * k)
    if first is None or first["mechanism"] != "gaussian" or "column" in first or "threshold" in first:
        rep.problems.append("a schema draft starts with the profile of its columns (one Gaussian release)")
        return
    if not _close(float(first["sensitivity_l2"]), sound):
        relation = "below the sound value" if float(first["sensitivity_l2"]) < sound else "not"
        rep.problems.append(
            f"entry 1 ({first['query']}): sensitivity {first['sensitivity_l2']:g} is {relation} "
            f"sqrt(1 + 2 x {k}) = {sound:g} of the profile of {k} columns"
        )
    if first.get("cells") != 1 + 4 * k:
        rep.problems.append(
            f"entry 1 ({first['query']}): the profile of {k} columns has {1 + 4 * k} cells, not {first.get('cells')}"
        )
        return
    place = "mpc" if "mpc" in d else "silo"  # drafted on secret shares among the silos' parties, or in the silo
    if not first["query"].startswith("profile: ") or first["where"] != place:
        rep.problems.append(f"entry 1 ({first['query']}): a schema draft's profile is drafted in {place}, named so")
    profile = (d.get("draft") or {}).get("profile") if isinstance(d.get("draft"), dict) else None
    if not (
        isinstance(profile, list)
        and len(profile) == 1 + 4 * k
        and all(isinstance(v, int) and not isinstance(v, bool) for v in profile)
    ):
        rep.problems.append(
            f"the ledger does not record the draft's noisy profile (details.draft.profile, {1 + 4 * k} whole "
            "numbers), so the releases it decides cannot be checked"
        )
        return
    seen = DRAFT_SEEN_SIGMAS * decision_sd(first) + 0.5
    expected = []
    for j, col in enumerate(columns):
        non_numbers, distinct = profile[2 + 4 * j], profile[4 + 4 * j]
        if non_numbers <= seen:
            expected.append((col, "bounds"))
        elif distinct <= DRAFT_DISTINCT_GUARD:
            expected += [(col, "categories")] + ([(col, "counts")] if place == "mpc" else [])
    found = []
    for i, e in enumerate(entries[1:], start=2):
        label = f"entry {i} ({e['query']})"
        kind = "categories" if "threshold" in e else "counts" if e["query"].startswith("counts of ") else "bounds"
        found.append((e.get("column"), kind))
        if e["mechanism"] != "gaussian":
            rep.problems.append(f"{label}: a drafting release is a Gaussian histogram, not {e['mechanism']}")
        elif float(e["sensitivity_l2"]) < 1 - 1e-12:
            rep.problems.append(f"{label}: a histogram of one column has L2 sensitivity at least 1")
        elif not _close(float(e["sensitivity_l2"]), 1.0):
            rep.problems.append(f"{label}: a histogram of one column has L2 sensitivity 1, not {e['sensitivity_l2']:g}")
        elif kind == "bounds" and not (isinstance(e.get("cells"), int) and e["cells"] >= 2):
            rep.problems.append(f"{label}: a bounds histogram records its intervals (cells)")
        elif kind == "counts" and not (isinstance(e.get("cells"), int) and e["cells"] >= 1):
            rep.problems.append(f"{label}: the counts of a column's listed values record their cells")
        where = "silo" if kind == "categories" else place  # under MPC each silo lists its own candidates
        if not e["query"].startswith(f"{kind} of '{e.get('column')}': ") or e["where"] != where:
            rep.problems.append(f"{label}: the {kind} of column {e.get('column')!r} are drafted in {where}, named so")
        elif place == "mpc" and kind == "categories" and e.get("parallel_over") != "silos":
            rep.problems.append(f"{label}: each silo lists its own candidate values (parallel_over silos)")
    if found != expected:
        missing = [f"{kind} of '{col}'" for col, kind in expected if (col, kind) not in found]
        extra = [f"{kind} of {col!r}" for col, kind in found if (col, kind) not in expected]
        rep.problems.append(
            "the releases after the profile are not the ones its noisy profile decides (numbers: bounds; text "
            f"of at most {DRAFT_DISTINCT_GUARD:,} distinct values: categories; in column order)"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f"; unexpected: {', '.join(extra)}" if extra else "")
        )
    _check_unfound(d["draft"], columns, expected, rep)
    _check_draft_plan(ledger, d["draft"], k, rep)


def _check_unfound(draft: dict[str, Any], columns: list, expected: list[tuple[Any, str]], rep: AuditReport) -> None:
    """``details.draft.unfound`` (when recorded): the columns whose bounds or categories the draft did not
    find (written as placeholders, or the draft refused), distinct and in column order, each one that got
    a bounds or a categories release."""
    if "unfound" not in draft:
        return
    unfound = draft["unfound"]
    released = [col for col, _ in expected]
    if not (isinstance(unfound, list) and unfound and all(isinstance(c, str) for c in unfound)):
        rep.problems.append(f"details.draft.unfound is {unfound!r}, not a non-empty list of column names")
    elif any(c not in released for c in unfound):
        c = next(c for c in unfound if c not in released)
        rep.problems.append(
            f"details.draft.unfound names {c!r}, which got no bounds or categories release, so none was not found"
        )
    elif unfound != [c for c in columns if c in unfound] or len(set(unfound)) != len(unfound):
        rep.problems.append(f"details.draft.unfound {unfound!r} is not distinct columns in the table's order")
