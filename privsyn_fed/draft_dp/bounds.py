"""A numeric column's bounds from its noisy bounds histogram (``draft_dp``, 2. and 4.): post-processing
only, so nothing here is charged.

The histogram is released on the coarse grid (``grid.COARSE_GRID``, mantissas 1..9)
when the fine grid's threshold ``T`` exceeds ``FINE_GRID_SHARE`` (5%) of the noisy rows
(``DraftPlan.with_rows``, post-processing of the profile; its counts are the fine ones summed before
the noise, at the same cost), and read there alone. Otherwise it is read first on its own grid
(``grid.BOUNDS_GRID``, intervals a tenth of a decade or less), against its threshold ``T``. Its
intervals are fine, so a column whose numbers spread thinly
over a wide range may leave more than ``MAX_LOST_SHARE`` of them in intervals below ``T``; then it is
read again on the coarse grid (``grid.COARSE_GRID``, mantissas 1..9; not when the intervals reaching
``T`` hold a single value): each coarse interval's noisy
count is the sum of the at most ``PER_COARSE = 10`` fine counts it holds, whose noise has standard
deviation at most ``sqrt(10)`` times one's, so its threshold ``T_c`` is ``bounds_threshold`` at that
standard deviation over the 344 coarse intervals (an empty one passes with probability at most
``BOUNDS_FALSE_RATE / 344`` as before). The coarse reading is kept only when it finds the bounds that
the fine one did not; otherwise the fine reading's verdict stands.

The bounds are the lower edge of the lowest and the upper edge of the highest interval reaching the
threshold, with no further rounding; for a column of numbers with ``k`` decimal places (0: whole
numbers) the multiples of ``10^-k`` inside them (an upper edge is exclusive): 4..107 in whole days
gives 4..109.

**Atoms** over MPC (point masses, ``grid_atoms``; locally a release of their own, ``atoms``),
post-processing as well: an interval of the fine grid inside
the bounds that holds a single multiple of ``10^-k`` (``[0, 0.001)`` holds only 0 for ``k <= 3``; for
whole numbers every interval below 100 holds one) and whose noisy count reaches both ``T`` and
``ATOM_SHARE`` of the column's noisy numbers proposes that value as an atom (the ``MAX_ATOMS``
largest). A point mass elsewhere (501 in ``[500, 510)``), or in a column with more than 6 decimal
places, is not proposed over MPC: that would take a thresholded histogram of the column's values in
each silo, which a draft on secret shares does not make.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..schema import ATOM_SHARE, MAX_ATOMS, MAX_DRAFT_BOUND, UNFOUND_KEY, round_cut
from .atoms import releases_atoms
from .decide import ColumnFacts, _shown, numeric_entry
from .grid import COARSE_GRID, COARSE_INDEX, PER_COARSE, bounds_threshold, coarse_edges, interval_edges
from .plan import MAX_LOST_SHARE, SEEN_SIGMAS, DraftPlan
from .report import Unfound, _unfound


@dataclass(frozen=True)
class Reading:
    """A noisy histogram over a grid's intervals: their ``edges``, the threshold ``T`` an interval's
    count must reach, the noise's standard deviation ``sd`` per interval, the histogram as released
    (``released``, over ``BOUNDS_GRID``) and (for the coarse grid) the first and last of its intervals
    each one holds (``fine``), for quantile cuts."""

    noisy: np.ndarray
    T: int
    sd: float
    edges: Callable[[int], tuple[float, float]]
    name: str
    released: np.ndarray
    fine: np.ndarray | None = None


def fine_reading(noisy: np.ndarray, plan: DraftPlan) -> Reading:
    """The histogram as released, on the plan's grid (``BOUNDS_GRID``, or ``COARSE_GRID`` where
    ``DraftPlan.with_rows`` chose it)."""
    noisy = np.asarray(noisy)
    if plan.grid == "coarse":
        return Reading(noisy, plan.bound_rows, plan.bounds_sd, coarse_edges, "the coarse grid", noisy)
    return Reading(noisy, plan.bound_rows, plan.bounds_sd, interval_edges, "the grid", noisy)


def coarse_reading(noisy: np.ndarray, plan: DraftPlan) -> Reading:
    """The histogram summed over ``COARSE_GRID``'s intervals (module docstring)."""
    cells = len(COARSE_GRID) + 1
    sums = np.bincount(COARSE_INDEX, weights=np.asarray(noisy, dtype=float), minlength=cells)
    sd = math.sqrt(PER_COARSE) * plan.bounds_sd
    first = np.searchsorted(COARSE_INDEX, np.arange(cells), side="left")
    last = np.searchsorted(COARSE_INDEX, np.arange(cells), side="right") - 1
    T = bounds_threshold(sd, cells)
    return Reading(sums, T, sd, coarse_edges, "the coarse grid", np.asarray(noisy), np.stack([first, last], 1))


def _span(r: Reading, found: np.ndarray, places: int | None) -> tuple[float, float]:
    """The lower edge of the first and the upper edge of the last of the intervals ``found``; for a
    column of numbers with ``places`` decimal places (0: whole numbers) the multiples of ``10^-places``
    inside them (an upper edge is exclusive), when there are any."""
    lo, hi = r.edges(int(found[0]))[0], r.edges(int(found[-1]))[1]
    if places is not None and abs(lo) < MAX_DRAFT_BOUND and abs(hi) < MAX_DRAFT_BOUND:
        scale = 10**places  # grid edges are decimals of at most 4 places: 1e-9 absorbs the floats' error
        a, b = math.ceil(lo * scale - 1e-9), math.ceil(hi * scale - 1e-9) - 1
        if a <= b:
            return (float(a), float(b)) if places == 0 else (round(a / scale, places), round(b / scale, places))
        if places == 0:  # no whole number inside: the whole numbers around them
            return float(math.floor(lo)), float(math.ceil(hi))
    return lo, hi


def _covers(r: Reading, t: int, numbers: float, places: int | None) -> bool:
    """Whether the intervals whose noisy count reaches ``t`` give bounds of more than one value that
    leave at most ``MAX_LOST_SHARE`` of the ``numbers`` beyond them (noisy estimates)."""
    found = np.flatnonzero(r.noisy >= t)
    if not len(found):
        return False
    lower, upper = _span(r, found, places)
    inside = float(r.noisy[found[0] : found[-1] + 1].sum())
    return lower < upper and numbers - inside <= MAX_LOST_SHARE * numbers


def _beyond(noisy: np.ndarray, found: np.ndarray, level: float) -> np.ndarray:
    """The intervals next to the span of ``found`` that clearly hold numbers: from each of its edges
    outward, as long as an interval's noisy count reaches ``level``."""
    out = []
    for start, step in ((int(found[0]) - 1, -1), (int(found[-1]) + 1, 1)):
        i = start
        while 0 <= i < len(noisy) and noisy[i] >= level:
            out.append(i)
            i += step
    return np.array(sorted(out), dtype=np.int64)


def quantile_cuts(
    noisy: np.ndarray,
    found: np.ndarray,
    spec: dict[str, Any],
    bins: int,
    edges: Callable[[int], tuple[float, float]] = interval_edges,
) -> list[float]:
    """Cut points between about ``bins`` bins of equal noisy count (module docstring of ``draft_dp``,
        6.): walking the intervals of the grid (``edges``: ``BOUNDS_GRID``'s unless given) across the span
        of ``found``, a cut closes a bin once it holds ``1 / bins`` of the span's noisy count, and an
    interval holding two such shares or more is
        cut into that many parts of equal width (to 4 significant digits); only cuts strictly inside the
        column's bounds are kept (whole numbers, once each, for an integer column)."""
    lower, upper, integer = float(spec["lower"]), float(spec["upper"]), bool(spec.get("integer"))
    span = range(int(found[0]), int(found[-1]) + 1)
    counts = np.clip(np.asarray(noisy, dtype=float)[found[0] : found[-1] + 1], 0, None)
    target = counts.sum() / bins
    if not target > 0:
        return []
    cuts, held = [], 0.0
    for i, count in zip(span, counts):
        lo, hi = edges(i)
        lo, hi = max(lo, lower), min(hi, upper)
        if count >= 2 * target:
            parts = int(round(count / target))
            cuts += ([lo] if held > 0 else []) + [lo + (hi - lo) * j / parts for j in range(1, parts)] + [hi]
            held = 0.0
        else:
            held += count
            if held >= target:
                cuts.append(hi)
                held = 0.0
    cuts = [round_cut(c, integer) for c in cuts]
    inside = sorted({c for c in cuts if lower < c < upper or integer and c == upper and lower < c})
    return [int(c) if integer else c for c in inside]


def grid_atoms(
    r: Reading, found: np.ndarray, places: int | None, numbers: float, spec: dict[str, Any], plan_has_atoms: bool
) -> list:
    """The atoms the fine reading ``r`` proposes inside the column's bounds (module docstring), when
    no histogram of the column's values is released (``plan_has_atoms``: one is, ``atoms.releases_atoms``)."""
    if places is None or r.fine is not None or plan_has_atoms:
        return []
    scale, least = 10**places, max(r.T, ATOM_SHARE * numbers)
    held = []
    for i in range(int(found[0]), int(found[-1]) + 1):
        if r.noisy[i] < least:
            continue
        lo, hi = r.edges(i)
        a, b = math.ceil(lo * scale - 1e-9), math.ceil(hi * scale - 1e-9) - 1
        value = float(a) if places == 0 else round(a / scale, places)
        if a == b and spec["lower"] <= value <= spec["upper"]:
            held.append((float(r.noisy[i]), value))
    return sorted(v for _, v in sorted(held, reverse=True)[:MAX_ATOMS])


def _bounds_count(r: Reading, numbers: float, places: int | None) -> int | None:
    """The largest threshold below ``r.T`` at which the noisy histogram itself would give bounds
    (``_covers``); None when none from 2 does. Noisy counts of empty intervals pass low thresholds as
    well, so this is an estimate from above of the count the missing intervals hold."""
    for t in range(r.T - 1, 1, -1):
        if _covers(r, t, numbers, places):
            return t
    return None


@dataclass
class Bounds:
    """A numeric column's entry, its note, its ``Unfound`` (None: found) and the span of the intervals
    reaching the threshold (None when none does)."""

    spec: dict[str, Any]
    note: str
    unfound: Unfound | None
    span: tuple[float, float] | None
    #: Not found because the intervals reaching the threshold hold one value only (and no more lie
    #: beyond them).
    single: bool = False


def numeric_column(plan: DraftPlan, name: str, noisy: np.ndarray, facts: ColumnFacts, tokens: list) -> Bounds:
    """The column's bounds from its noisy histogram: on the fine grid, else on the coarse one
    (module docstring)."""
    fine = noisy_bounds(plan, name, fine_reading(noisy, plan), facts, tokens)
    if plan.grid == "coarse" or fine.unfound is None or fine.single or facts.numbers <= facts.seen:
        return fine
    coarse = noisy_bounds(plan, name, coarse_reading(noisy, plan), facts, tokens)
    return coarse if coarse.unfound is None else fine


def noisy_bounds(plan: DraftPlan, name: str, r: Reading, facts: ColumnFacts, tokens: list) -> Bounds:
    """The bounds that the reading ``r`` of the column's histogram gives (module docstring of
    ``draft_dp``, 2. and 4.)."""
    sigma_p, seen = plan.profile_sd, facts.seen
    integer, has_missing = facts.whole, facts.has_missing
    places = 0 if integer else facts.decimal_places
    numbers = facts.numbers  # error within 3 sigma_p^2 in variance
    noisy, T = r.noisy, r.T
    found = np.flatnonzero(noisy >= T)
    kind = f"numeric{', integer' if integer else ''}{', missing' if has_missing else ''}"
    level = (SEEN_SIGMAS - 1) * r.sd  # an empty interval reaches it with probability below 0.0014
    count: float | None = None
    grid, single, thin = r.name, False, False
    if len(found):
        lo, hi = _span(r, found, places)
        spec = numeric_entry(name, lo, hi, facts, plan.bins, tokens)
        inside = float(noisy[found[0] : found[-1] + 1].sum())
        spread = math.sqrt(3 * sigma_p**2 + (found[-1] - found[0] + 1) * r.sd**2)
        lost = numbers - inside
        near = _beyond(noisy, found, level)
        if lost > MAX_LOST_SHARE * numbers + SEEN_SIGMAS * spread:
            why = (
                f"the intervals of {grid} with at least {T} (noisy) numbers span {lo:g}..{hi:g}, but about "
                f"{_shown(lost)} of its about {_shown(numbers)} numbers lie beyond them"
            )
            thin = True
        elif len(near) and noisy[near].sum() > MAX_LOST_SHARE * (inside + noisy[near].sum()):
            count = float(noisy[near].min())  # each of them has to pass
            which = "the interval next to them holds" if len(near) == 1 else f"the {len(near)} next to them hold"
            why = (
                f"the intervals of {grid} with at least {T} (noisy) numbers span {lo:g}..{hi:g}, but {which} "
                f"about {_shown(noisy[near].sum())} more (at least {_shown(level)} each, clearly more than none)"
            )
        elif spec["lower"] == spec["upper"]:
            single = True
            why = f"only the value {spec['lower']:g} has an interval of {grid} with at least {T} (noisy) numbers"
        else:
            note = (
                f"column '{name}': {kind}; the intervals of {grid} with at least {T} (noisy) numbers give the "
                f"bounds {spec['lower']:g}..{spec['upper']:g}; values beyond are clipped"
            )
            if "decimals" in spec:
                note += f"; {spec['decimals']} decimal place(s)"
            atoms = grid_atoms(r, found, places, numbers, spec, releases_atoms(plan, facts.distinct))
            if atoms:
                spec["atoms"] = [int(v) if integer else v for v in atoms]
                note += f"; point masses at {', '.join(f'{v:g}' for v in atoms)}"
            if plan.edges == "quantiles":
                fine = found if r.fine is None else np.array([r.fine[found[0], 0], r.fine[found[-1], 1]])
                cuts = quantile_cuts(r.released, fine, spec, plan.bins, r.edges if r.fine is None else interval_edges)
                if cuts:
                    spec = {**{k: v for k, v in spec.items() if k != "bins"}, "edges": cuts}
                    note += f"; {len(cuts) + 1} bins of about equal (noisy) counts"
            return Bounds(spec, note, None, (lo, hi))
    elif numbers <= seen:
        why = "the noisy profile counts no numbers in it (every cell missing?)"
    else:
        why = f"no interval of {grid} holds {T} (noisy) numbers"
        thin = True
    if count is None and numbers > seen:  # the threshold at which the noisy histogram would give bounds
        count = float(_bounds_count(r, numbers, places) or 0)
    if integer and thin:  # spread thinly over many intervals, not a tail next to the found ones
        why += (
            f"; whole numbers spread this widely are often identifiers (of people, accounts, records): if '{name}' "
            f"is one, leave it out with --exclude {name} (and protect whom it names with synth --privacy-unit {name})"
        )
    hidden = 0 < numbers <= seen  # numbers the profile's noise hides: a larger budget may show them (coarse)
    unfound = _unfound(plan, name, "bounds", why, numbers if hidden else count, seen if hidden else level)
    placeholder = numeric_entry(name, 0.0, 0.0, facts, plan.bins, tokens)
    placeholder.update(lower=None, upper=None)
    placeholder[UNFOUND_KEY] = (
        f"--dp {plan.epsilon:g} did not find its bounds: {why}; fill in its public lower and upper bounds, "
        f'then delete "{UNFOUND_KEY}"'
    )
    span = _span(r, found, places) if len(found) else None
    return Bounds(placeholder, f"column '{name}': {kind}; bounds NOT FOUND: {why}", unfound, span, single)
