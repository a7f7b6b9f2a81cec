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
from .draft_plan import (
    DRAFT_DISTINCT_GUARD,
    DRAFT_EARLIER_CELLS,
    DRAFT_PROFILE_CELLS,
    DRAFT_SEEN_SIGMAS,
    _check_draft_plan,
    decision_sd,
    profile_cells,
)
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
    draft = d.get("draft") if isinstance(d.get("draft"), dict) else {}
    layout = profile_cells(draft)
    if layout not in (DRAFT_PROFILE_CELLS, DRAFT_EARLIER_CELLS):
        rep.problems.append(f"details.draft.profile_cells is {draft.get('profile_cells')!r}, not a known layout")
        return
    w = len(layout)  # a column's cells in the profile
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
    if first.get("cells") != 1 + w * k:
        rep.problems.append(
            f"entry 1 ({first['query']}): the profile of {k} columns has {1 + w * k} cells, not {first.get('cells')}"
        )
        return
    place = "mpc" if "mpc" in d else "silo"  # drafted on secret shares among the silos' parties, or in the silo
    if not first["query"].startswith("profile: ") or first["where"] != place:
        rep.problems.append(f"entry 1 ({first['query']}): a schema draft's profile is drafted in {place}, named so")
    profile = draft.get("profile")
    if not (
        isinstance(profile, list)
        and len(profile) == 1 + w * k
        and all(isinstance(v, int) and not isinstance(v, bool) for v in profile)
    ):
        rep.problems.append(
            f"the ledger does not record the draft's noisy profile (details.draft.profile, {1 + w * k} whole "
            "numbers), so the releases it decides cannot be checked"
        )
        return
    seen = DRAFT_SEEN_SIGMAS * decision_sd(first) + 0.5
    identifiers = draft.get("identifiers", [])
    most = draft.get("categorical_max")  # a code has at most this many distinct values (the plan checks it)
    most = most if isinstance(most, int) and not isinstance(most, bool) else -1
    expected = []
    for j, col in enumerate(columns):
        cells = dict(zip(layout, profile[1 + w * j : 1 + w * (j + 1)]))
        non_numbers, distinct = cells["non_number"], cells["distinct"]
        whole = all(v <= seen for c, v in cells.items() if c.startswith(("decimals_", "non_integer")))
        code = "codes" in draft and whole and distinct <= most
        categories = [(col, "categories")] + ([(col, "counts")] if place == "mpc" else [])
        if non_numbers <= seen:
            expected += categories if code else [(col, "bounds")]
        elif distinct <= DRAFT_DISTINCT_GUARD and col not in identifiers:
            expected += categories
    found = []
    for i, e in enumerate(entries[1:], start=2):
        label = f"entry {i} ({e['query']})"
        query = e["query"]
        kind = "atoms" if query.startswith("atoms of ") else "counts" if query.startswith("counts of ") else None
        kind = kind or ("categories" if "threshold" in e else "bounds")
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
        where = "silo" if kind in ("categories", "atoms") else place  # under MPC each silo lists its own candidates
        if not e["query"].startswith(f"{kind} of '{e.get('column')}': ") or e["where"] != where:
            rep.problems.append(f"{label}: the {kind} of column {e.get('column')!r} are drafted in {where}, named so")
        elif place == "mpc" and kind == "categories" and e.get("parallel_over") != "silos":
            rep.problems.append(f"{label}: each silo lists its own candidate values (parallel_over silos)")
    found = _atoms_after_bounds(found, draft, rep)
    if found != expected:
        missing = [f"{kind} of '{col}'" for col, kind in expected if (col, kind) not in found]
        extra = [f"{kind} of {col!r}" for col, kind in found if (col, kind) not in expected]
        rep.problems.append(
            "the releases after the profile are not the ones its noisy profile decides (numbers: bounds; text "
            f"of at most {DRAFT_DISTINCT_GUARD:,} distinct values: categories; in column order)"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f"; unexpected: {', '.join(extra)}" if extra else "")
        )
    _check_identifiers(draft, columns, expected, rep)
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


def _check_identifiers(draft: dict[str, Any], columns: list, expected: list[tuple[Any, str]], rep: AuditReport) -> None:
    """``details.draft.identifiers`` (when recorded): the columns the identifier rule left out, decided
    from released values (a text column from the profile alone, so it gets no release; a column of
    numbers after its bounds), in the table's order, none that ``--include`` keeps; ``--exclude``'s
    columns are not among the drafted ones."""
    identifiers, include = draft.get("identifiers", []), draft.get("include", [])
    exclude = draft.get("exclude", [])
    if not (isinstance(identifiers, list) and isinstance(include, list) and isinstance(exclude, list)):
        return  # the plan's check names it
    bounded = [col for col, kind in expected if kind == "bounds"]
    text = [c for c in columns if c not in [col for col, _ in expected]]
    for c in identifiers:
        if c in include:
            rep.problems.append(f"details.draft.identifiers names {c!r}, which --include keeps")
        elif c not in bounded and c not in text:
            rep.problems.append(
                f"details.draft.identifiers names {c!r}, which is neither a drafted column of numbers (bounds) "
                "nor a text column that got no release"
            )
    if identifiers != [c for c in columns if c in identifiers]:
        rep.problems.append(f"details.draft.identifiers {identifiers!r} is not columns in the table's order")
    for c in [*include, *exclude]:
        if (c in columns) != (c in include):
            which = "--include" if c in include else "--exclude"
            rep.problems.append(f"details.draft: {which} names {c!r}, {'not ' if c in include else ''}a drafted column")


def _atoms_after_bounds(found: list[tuple[Any, str]], draft: dict[str, Any], rep: AuditReport) -> list[tuple[Any, str]]:
    """The releases without the atoms' histograms, each of which must come right after its column's
    bounds, of a column kept with its bounds found (post-processing of that histogram decides it):
    not one the ledger records as not found or as an identifier."""
    skipped = [c for key in ("unfound", "identifiers") if isinstance(draft.get(key), list) for c in draft[key]]
    out = []
    for i, (col, kind) in enumerate(found):
        if kind != "atoms":
            out.append((col, kind))
        elif i == 0 or found[i - 1] != (col, "bounds") or col in skipped:
            rep.problems.append(
                f"the atoms of {col!r} come right after its bounds, for a column kept with its bounds found"
            )
    return out
