"""The plan of a DP schema draft (method ``schema-draft``), recomputed from its budget and its
header: the draft fixes it before reading any row (``privsyn_fed.draft_dp``), and the audit keeps
its rules here so that it re-derives every number independently.

With ``d`` columns and the budget ``(epsilon_budget, delta_budget)``: rho converts at
``delta_conversion = (1 - THRESHOLD_DELTA_SHARE) delta_budget`` and each column's threshold may
spend ``delta_target = THRESHOLD_DELTA_SHARE delta_budget / d``. ``PROFILE_SHARE`` of
``rho_budget`` goes to the profile, ``sigma_p = sqrt(1 + 2 d) / sqrt(2 PROFILE_SHARE rho_budget)``,
which caps its distinct-value counts at ``DISTINCT_GUARD + 1 + ceil(CAP_SIGMAS sigma_p)``; the
rest in equal shares to the columns, ``sigma_c = 1 / sqrt(2 rho_column)``. A bounds histogram
(``BOUNDS_INTERVALS`` cells, one per interval of the public grid) keeps the intervals whose noisy
count reaches ``T``, the least with ``BOUNDS_INTERVALS P(N(0, sigma_c^2) >= T - 1) <=
BOUNDS_FALSE_RATE`` (at most ``MAX_BOUND_ROWS``), its ``min_count``; a categories histogram lists
the values whose noisy count reaches ``tau``, the least integer from 2 with
``threshold_delta(sigma_c, tau) <= delta_target``, its ``threshold``, and records that delta.
``details.draft`` records the plan and its constants; each must be what is recomputed here.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from .arithmetic import _close, _planned_noise, threshold_delta
from .findings import AuditReport
from .shape import _finite as _number

#: The rules by which a DP schema draft's noisy profile decides each column (``structure_draft``):
#: numbers when the noisy non-number count is at most ``DRAFT_SEEN_SIGMAS sigma + 1/2``, else text,
#: left out when its noisy distinct count exceeds ``DRAFT_DISTINCT_GUARD``.
DRAFT_SEEN_SIGMAS = 4.0
DRAFT_DISTINCT_GUARD = 10_000
DRAFT_PROFILE_SHARE = 0.1
DRAFT_THRESHOLD_DELTA_SHARE = 0.5
DRAFT_BOUNDS_FALSE_RATE = 1e-3
DRAFT_MAX_BOUND_ROWS = 1000
DRAFT_CAP_SIGMAS = 6.0
#: Over MPC, the share of a categorical column's rho that each silo's own thresholded list gets; the
#: rest goes to the union's counts of the listed values (``privsyn_fed.mpc.draft``).
DRAFT_CANDIDATE_SHARE = 0.5
#: Locally, the share of a numeric column's rho that the thresholded histogram of its numbers (its
#: atoms) gets; the rest goes to its bounds histogram (``privsyn_fed.draft_dp.atoms``).
DRAFT_ATOM_RHO_SHARE = 0.25
#: The public grid of the bounds histograms: its edges (0 and +-m 10^k, k = -3..15, for the mantissas
#: m = 1.0, 1.1, ..., 9.9), its widest edge, and so its intervals.
DRAFT_BOUNDS_EDGES = 3403
DRAFT_BOUNDS_HIGHEST = 9e15
DRAFT_BOUNDS_INTERVALS = DRAFT_BOUNDS_EDGES + 1
DRAFT_BOUNDS_GRID = {
    "edges": DRAFT_BOUNDS_EDGES,
    "lowest": -DRAFT_BOUNDS_HIGHEST,
    "highest": DRAFT_BOUNDS_HIGHEST,
    "mantissa_step": 0.1,
}
#: The grid of earlier drafts (mantissas 1..9, 344 intervals), which their ledgers record.
DRAFT_COARSE_GRID = {"edges": 343, "lowest": -DRAFT_BOUNDS_HIGHEST, "highest": DRAFT_BOUNDS_HIGHEST}
#: A column's cells in the profile: earlier drafts counted the numbers that are not whole in one cell;
#: drafts now count them by decimal places (1..6, more), recorded as ``details.draft.profile_cells``.
DRAFT_PROFILE_CELLS = (
    "missing",
    "non_number",
    *(f"decimals_{k}" for k in range(1, 7)),
    "decimals_more",
    "distinct",
)
DRAFT_EARLIER_CELLS = ("missing", "non_number", "non_integer", "distinct")
#: No integer threshold beyond this is searched for (none a draft could use).
_SEARCH_LIMIT = 2**62


def _least(passes: Callable[[int], bool], start: int) -> int | None:
    """The least integer ``t >= start`` with ``passes(t)`` (``passes`` monotone), or None below
    ``_SEARCH_LIMIT``."""
    hi = start
    while not passes(hi):
        if hi >= _SEARCH_LIMIT:
            return None
        hi = max(2 * hi, hi + 1)
    lo = start - 1  # fails, or below the start
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if mid >= start and passes(mid) else (mid, hi)
    return hi


def bounds_threshold(sigma: float, intervals: int = DRAFT_BOUNDS_INTERVALS) -> int | None:
    """``T``: the least with ``intervals P(N(0, sigma^2) >= T - 1) <= BOUNDS_FALSE_RATE``."""
    return _least(
        lambda t: intervals * 0.5 * math.erfc((t - 1) / (sigma * math.sqrt(2.0))) <= DRAFT_BOUNDS_FALSE_RATE,
        1,
    )


def grid_intervals(draft: dict[str, Any]) -> int:
    """The intervals of the grid a draft records (the current grid, or the coarse one of earlier drafts)."""
    return 344 if draft.get("bounds_grid") == DRAFT_COARSE_GRID else DRAFT_BOUNDS_INTERVALS


def profile_cells(draft: dict[str, Any]) -> tuple[str, ...]:
    """A column's cells in the draft's profile: as recorded, or the four of earlier drafts."""
    cells = draft.get("profile_cells")
    return DRAFT_EARLIER_CELLS if cells is None else tuple(cells) if isinstance(cells, list) else ()


def category_threshold(sigma: float, delta_target: float) -> int | None:
    """``tau``: the least integer from 2 with ``threshold_delta(sigma, tau) <= delta_target``."""
    return _least(lambda t: threshold_delta(sigma, t) <= delta_target, 2)


def decision_sd(e: dict[str, Any]) -> float:
    """The standard deviation of an entry's noise, against which the draft read its noisy counts:
    its sigma, or when every one of ``n`` parties drew it on secret shares ``sqrt(n)`` times each one's."""
    split = e.get("distributed") or {}
    return float(e["sigma"]) * math.sqrt(split.get("parties", 1))


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_record(draft: dict[str, Any], rep: AuditReport) -> bool:
    """The constants ``details.draft`` records are the audit's, and its options are usable."""
    constants = {
        "profile_share": DRAFT_PROFILE_SHARE,
        "seen_sigmas": DRAFT_SEEN_SIGMAS,
        "threshold_delta_share": DRAFT_THRESHOLD_DELTA_SHARE,
        "distinct_guard": DRAFT_DISTINCT_GUARD,
        "max_bound_rows": DRAFT_MAX_BOUND_ROWS,
    }
    known = len(rep.problems)
    for key, want in constants.items():
        if draft.get(key) != want:
            rep.problems.append(f"details.draft.{key} is {draft.get(key)!r}, not this version's {want!r}")
    if "edges" in draft and draft["edges"] != "quantiles":
        rep.problems.append(f"details.draft.edges is {draft['edges']!r}, not 'quantiles' (or absent: uniform bins)")
    if "mpc" in draft and draft["mpc"] != {"candidate_share": DRAFT_CANDIDATE_SHARE}:
        rep.problems.append(
            f"details.draft.mpc is {draft['mpc']!r}, not this version's {{'candidate_share': {DRAFT_CANDIDATE_SHARE}}}"
        )
    if "atoms" in draft and (draft["atoms"] != {"rho_share": DRAFT_ATOM_RHO_SHARE} or "mpc" in draft):
        rep.problems.append(
            f"details.draft.atoms is {draft['atoms']!r}, not this version's {{'rho_share': {DRAFT_ATOM_RHO_SHARE}}} "
            "(absent over MPC and in earlier drafts)"
        )
    if draft.get("bounds_grid") not in (DRAFT_BOUNDS_GRID, DRAFT_COARSE_GRID):
        rep.problems.append(
            f"details.draft.bounds_grid is {draft.get('bounds_grid')!r}, not this version's {DRAFT_BOUNDS_GRID!r} "
            f"(or earlier drafts' {DRAFT_COARSE_GRID!r})"
        )
    cells = draft.get("profile_cells")
    if cells is not None and cells != list(DRAFT_PROFILE_CELLS):
        rep.problems.append(
            f"details.draft.profile_cells is {cells!r}, not this version's {list(DRAFT_PROFILE_CELLS)!r}"
        )
    if (draft.get("codes") is not True) if cells is not None else "codes" in draft:  # both came together
        rep.problems.append(
            f"details.draft.codes is {draft.get('codes')!r}: true with details.draft.profile_cells, else absent "
            "(earlier drafts)"
        )
    for key in ("include", "exclude", "identifiers"):
        names = draft.get(key, [])
        if not (isinstance(names, list) and all(isinstance(c, str) for c in names) and len(set(names)) == len(names)):
            rep.problems.append(f"details.draft.{key} is {names!r}, not a list of distinct column names")
    if not (_whole(draft.get("categorical_max")) and draft["categorical_max"] >= 0):
        rep.problems.append("details.draft.categorical_max must be a whole number of at least 0")
    if not (_whole(draft.get("bins")) and draft["bins"] >= 1):
        rep.problems.append("details.draft.bins must be a whole number of at least 1")
    tokens = draft.get("missing_values")
    if not (isinstance(tokens, list) and all(isinstance(t, str) for t in tokens)):
        rep.problems.append("details.draft.missing_values must be a list of tokens")
    return len(rep.problems) == known


def _check_draft_plan(ledger: dict[str, Any], draft: dict[str, Any], k: int, rep: AuditReport) -> None:
    """The plan of a draft over ``k`` columns, and each entry against it (module docstring)."""
    if not _check_record(draft, rep):
        return
    delta_budget = ledger.get("delta_budget")
    rho = float(ledger["rho_budget"])
    if delta_budget is None or not 0 < delta_budget < 1 or not rho > 0:
        rep.problems.append("a schema draft records a positive rho_budget and its delta_budget in (0, 1)")
        return
    conversion = (1 - DRAFT_THRESHOLD_DELTA_SHARE) * delta_budget
    if not _close(float(ledger.get("delta_conversion", -1)), conversion):
        rep.problems.append(
            f"delta_conversion {ledger.get('delta_conversion')!r} is not {1 - DRAFT_THRESHOLD_DELTA_SHARE:g} x "
            f"delta_budget {delta_budget:g}"
        )
    target = DRAFT_THRESHOLD_DELTA_SHARE * delta_budget / k
    sigma_p = math.sqrt(1.0 + 2.0 * k) / math.sqrt(2 * DRAFT_PROFILE_SHARE * rho)
    sigma_c = 1.0 / math.sqrt(2 * (1 - DRAFT_PROFILE_SHARE) * rho / k)
    mpc = "mpc" in draft  # over MPC each silo lists its own candidates, then the union counts them
    share = DRAFT_CANDIDATE_SHARE if mpc else 1.0
    sigma_v, sigma_n = sigma_c / math.sqrt(share), sigma_c / math.sqrt(1 - DRAFT_CANDIDATE_SHARE)
    atom_share = DRAFT_ATOM_RHO_SHARE if "atoms" in draft else 0.0  # of a numeric column's rho
    sigma_b = sigma_c / math.sqrt(1 - atom_share)
    sigma_a = sigma_c / math.sqrt(atom_share) if atom_share else None
    bounds = [e for e in ledger["entries"][1:] if "min_count" in e]
    plan = {
        "delta_target": target,
        "distinct_cap": DRAFT_DISTINCT_GUARD + 1 + math.ceil(DRAFT_CAP_SIGMAS * sigma_p),
        "threshold": category_threshold(sigma_v, target),
    }
    if not mpc or bounds:  # over MPC from what the parties drew (each at least the planned noise)
        plan["bounds_threshold"] = bounds_threshold(decision_sd(bounds[0]) if mpc else sigma_b, grid_intervals(draft))
    atom_threshold = category_threshold(sigma_a, target) if sigma_a is not None else None
    for key, want in plan.items():
        have = draft.get(key)
        if want is None or not (_number(have) and _close(float(have), float(want))):
            rep.problems.append(
                f"details.draft.{key} is {have!r}, but the draft's budget and {k} columns give {want!r}"
            )
            return
    for i, e in enumerate(ledger["entries"]):
        label = f"entry {i + 1} ({e['query']})"
        counts = e["query"].startswith("counts of ")
        atoms = e["query"].startswith("atoms of ")
        if atoms and sigma_a is None:
            rep.problems.append(f"{label}: a draft that records no details.draft.atoms releases no atoms")
            continue
        sigma = sigma_p if i == 0 else sigma_v if "threshold" in e else sigma_n if counts else sigma_b
        sigma = sigma_a if atoms and sigma_a is not None else sigma
        if not _planned_noise(e, sigma):
            rep.problems.append(f"{label}: sigma {e['sigma']:g} is not the {sigma:.6g} the draft's plan gives it")
        if i == 0 or counts:
            continue
        if "threshold" in e:
            tau = atom_threshold if atoms else plan["threshold"]
            want_delta = threshold_delta(sigma, tau)
            if e["threshold"] != tau or not _close(float(e.get("delta", -1)), want_delta):
                rep.problems.append(
                    f"{label}: threshold {e['threshold']!r} and delta {e.get('delta')!r}, but the plan gives "
                    f"{tau} and {want_delta:.6g}"
                )
        elif e.get("min_count") != plan["bounds_threshold"] or e.get("cells") != grid_intervals(draft):
            rep.problems.append(
                f"{label}: min_count {e.get('min_count')!r} over {e.get('cells')!r} cells, but the plan keeps the "
                f"intervals reaching {plan['bounds_threshold']} of the grid's {grid_intervals(draft)}"
            )
