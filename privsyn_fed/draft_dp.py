"""A schema drafted under differential privacy: everything read from the rows is released by a
mechanism that charges a ledger (``privsyn-fed schema draft --dp EPSILON --delta DELTA``).

Neighbouring tables differ by adding or removing one record (a row as the reader yields it). The
column names (the header), the options and the budget are public; nothing else is read for free.
The plan (``plan_draft``) is fixed from public facts before any row is read: the budget
``rho = epsilon_to_rho(epsilon, delta_conversion)`` with ``delta_conversion = delta / 2``; the other
half of delta is shared equally by the ``d`` columns' thresholds (``delta_target = delta / (2 d)``).
``PROFILE_SHARE`` of rho goes to the profile, the rest in equal shares ``rho_col`` to the columns:

1. **Profile** (one Gaussian, discrete, on integers): the row count, and per column the counts of
   missing cells, of present cells that are not finite numbers, of numbers that are not whole, and
   ``min(distinct present values, C)`` with the public cap ``C = DISTINCT_GUARD + 1 + ceil(6 sigma)``.
   A record is one row (1), and in each column in at most one of the first three counts (1) and adds
   at most one distinct value (1): L2 sensitivity ``sqrt(1 + 2 d)``; cost ``(1 + 2 d) / (2 sigma^2)``.
   Decisions (post-processing): ``missing`` when the noisy missing count is positive (declaring it
   costs one cell; omitting it makes ``synth`` refuse the table); a column of numbers (numeric) when
   the noisy non-number count is at most ``SEEN_SIGMAS sigma + 1/2``, of whole numbers likewise;
   otherwise a column of text, left out when its noisy distinct count exceeds ``DISTINCT_GUARD``
   (IDs, free text: nothing more is spent on it), else categorical. Unlike a plain draft, a column
   of numbers is always numeric here: a whole-number column of a small range gets one bin per value,
   which encodes like a categorical column, and no histogram of numbers is needed.
2. **Bounds** of a numeric column: a Gaussian histogram of its numbers over the ``m + 1 = 344``
   intervals that the public grid ``BOUNDS_GRID`` cuts the line into (edges 0 and +-{1, ..., 9} 10^k,
   k = -3..15, up to 9e15; ``(-inf, g_0), [g_0, g_1), ..., [g_{m-1}, inf)``): a record is a number in
   at most one interval, so sensitivity 1, ``sigma_b = 1 / sqrt(2 rho_col)``, cost ``rho_col``. The
   domain is public, so this is plain zCDP. The bounds are the lower edge of the lowest and the upper
   edge of the highest interval whose noisy count reaches ``T = 1 + ceil(z sigma_b)``, with ``z`` such
   that an empty interval passes with probability at most ``BOUNDS_FALSE_RATE / 344`` (``P(Z >= T)
   <= P(N(0, sigma_b^2) >= T - 1)``, see 3.); for a whole-number column the whole numbers inside
   them (an upper edge is exclusive); then rounded outward (``draft.round_outward``); no
   interval reaching ``T`` gives the placeholder ``0..0`` (values are clipped, never refused).
   Outer intervals holding fewer than about ``T`` rows are cut off (their values clipped), so a
   budget whose ``T`` exceeds ``MAX_BOUND_ROWS`` is refused before anything is read. (Quantiles by
   the exponential mechanism over the same grid were the alternative; but every candidate beyond the
   largest value scores alike, so wherever the high quantile is that largest value -- a point mass at
   the top, as the code 501 of ACS's POVPIP, or a 0/1 column -- the mechanism picks uniformly among
   them and a bound drifts to the grid's end, 1e12 and beyond. An empty interval never passes here.)
3. **Categories** of a categorical column: a thresholded histogram. Every present value's count
   gets discrete Gaussian noise ``N_Z(0, s^2)``, ``s = 1 / sqrt(2 rho_col)`` (sensitivity 1, cost
   ``rho_col``), and the values whose noisy count is at least the integer threshold ``tau`` are
   listed, sorted, plus the catch-all ``OTHER_CATEGORY`` for the rest (the column is left out when
   none passes, or more than ``K`` (``--categorical-max``) do). The domain is unknown, so a
   value held by one record appears with probability ``delta' = P(1 + Z >= tau) <=
   P(N(0, s^2) >= tau - 2) = erfc((tau - 2) / (s sqrt 2)) / 2`` (the discrete Gaussian's tail past
   ``t`` is at most the continuous one past ``t - 1``: bound each mass by the integral over the unit
   interval below it, and the normaliser ``sum_k exp(-k^2 / 2 s^2) >= s sqrt(2 pi)`` by Poisson
   summation). Conditioned on that event not happening the outputs are identical, so the histogram is
   ``(rho_col, delta')``-approximately zCDP; ``tau`` is the least integer with ``delta' <= delta_target``.
   Each histogram's entry records ``threshold`` and ``delta``; the run is ``(epsilon, delta)``-DP with
   ``epsilon`` the conversion of the spent rho at ``delta_conversion`` and ``delta =
   delta_conversion + sum delta'`` (``accounting.ledger``; ``audit`` re-derives every part).

The ledger (method ``schema-draft``) is written before each release, as for ``synth``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from .accounting import Accountant
from .accounting.conversions import epsilon_to_rho, rho_to_epsilon
from .common import InputError
from .mechanisms import threshold_delta
from .noise import NoiseSource, OpenDPNoise
from .schema import (
    DP_DRAFT_PRIVACY,
    MAX_DRAFT_BOUND,
    ColumnProfile,
    Schema,
    category_order,
    numeric_spec,
    profile_chunks,
)

METHOD = "schema-draft"
#: Share of rho spent on the profile; the rest is split equally among the columns.
PROFILE_SHARE = 0.1
#: Share of delta left to the thresholds of the categories' histograms (the rest converts rho).
THRESHOLD_DELTA_SHARE = 0.5
#: The probability that any empty interval of the bounds histogram passes its threshold (one column).
BOUNDS_FALSE_RATE = 1e-3
#: The largest bounds threshold (rows an outer interval needs to be kept) worth drafting at.
MAX_BOUND_ROWS = 1000
#: A noisy profile count above ``SEEN_SIGMAS sigma + 1/2`` says such cells exist.
SEEN_SIGMAS = 4.0
#: A text column with more distinct values than this (noisy) is left out without a histogram.
DISTINCT_GUARD = 10_000
#: The distinct-value cap is ``DISTINCT_GUARD + 1 + ceil(CAP_SIGMAS sigma)``: a column with more
#: distinct values than that passes the guard with probability below ``Phi(-CAP_SIGMAS)`` (1e-9).
CAP_SIGMAS = 6.0
#: The catch-all category of a drafted categorical column (values below the threshold map to it).
OTHER_CATEGORY = "(other)"
THREAT_MODEL = (
    "the data owner drafts on their own machine and is trusted with its rows; the schema and this "
    "ledger are what leave it"
)


def bounds_grid() -> np.ndarray:
    """The public edges of the bounds histogram: 0 and +-m 10^k for m = 1..9, k = -3..15 (343 round
    numbers, sorted; the widest, 9e15, is ``draft.MAX_DRAFT_BOUND``); 344 intervals."""
    pos = sorted(float(f"{m}e{k}") for k in range(-3, 16) for m in range(1, 10))
    pos = [p for p in pos if p <= MAX_DRAFT_BOUND]
    return np.array([-p for p in reversed(pos)] + [0.0] + pos)


BOUNDS_GRID = bounds_grid()


def interval_edges(i: int) -> tuple[float, float]:
    """Lower and upper edge of interval ``i`` of ``BOUNDS_GRID`` (the open ends at +-MAX_DRAFT_BOUND)."""
    lo = float(BOUNDS_GRID[i - 1]) if i > 0 else -MAX_DRAFT_BOUND
    hi = float(BOUNDS_GRID[i]) if i < len(BOUNDS_GRID) else MAX_DRAFT_BOUND
    return lo, hi


def bounds_threshold(sigma: float) -> int:
    """``T = 1 + ceil(z sigma)``, the least with ``344 P(N(0, sigma^2) >= T - 1) <= BOUNDS_FALSE_RATE``:
    a noisy count of an empty interval reaches ``T`` with probability at most that (for discrete
    Gaussian noise, ``P(Z >= T) <= P(N >= T - 1)``)."""
    from scipy.special import erfcinv

    cells = len(BOUNDS_GRID) + 1

    def passes(t: int) -> bool:  # an empty interval reaches t with probability at most the rate
        return cells * 0.5 * math.erfc((t - 1) / (sigma * math.sqrt(2.0))) <= BOUNDS_FALSE_RATE

    t = 1 + math.ceil(sigma * math.sqrt(2.0) * float(erfcinv(2.0 * BOUNDS_FALSE_RATE / cells)))
    while not passes(t):
        t += 1
    while t > 1 and passes(t - 1):
        t -= 1
    return t


def threshold_for(sigma: float, delta_target: float) -> int:
    """The least integer ``tau >= 2`` with ``threshold_delta(sigma, tau) <= delta_target``."""
    from scipy.special import erfcinv

    tau = max(2, 2 + math.ceil(sigma * math.sqrt(2.0) * float(erfcinv(2.0 * delta_target))) - 1)
    while threshold_delta(sigma, tau) > delta_target:
        tau += 1
    while tau > 2 and threshold_delta(sigma, tau - 1) <= delta_target:
        tau -= 1
    return tau


def profile_vector(profiles: Sequence[ColumnProfile]) -> np.ndarray:
    """``[rows, then per column: missing, non-numbers, non-integers, min(distinct, cap)]`` (int64)."""
    rows = profiles[0].rows if profiles else 0
    out = [rows]
    for p in profiles:
        out += [p.missing, p.non_numbers, p.non_integers, p.distinct_capped]
    return np.array(out, dtype=np.int64)


def profile_sensitivity(d: int) -> float:
    """``sqrt(1 + 2 d)``: the L2 sensitivity of ``profile_vector`` over ``d`` columns."""
    return math.sqrt(1.0 + 2.0 * d)


@dataclass(frozen=True)
class DraftPlan:
    """The public plan of a DP draft, fixed before any row is read (see the module docstring)."""

    epsilon: float
    delta: float
    columns: tuple[str, ...]
    categorical_max: int
    bins: int
    missing_values: tuple[str, ...] = ()
    delta_conversion: float = field(init=False)
    delta_target: float = field(init=False)
    rho_budget: float = field(init=False)
    rho_profile: float = field(init=False)
    rho_column: float = field(init=False)
    sigma_profile: float = field(init=False)
    cap: int = field(init=False)
    sigma_column: float = field(init=False)
    bound_rows: int = field(init=False)
    threshold: int = field(init=False)

    def __post_init__(self):
        d = len(self.columns)
        set_ = lambda k, v: object.__setattr__(self, k, v)
        set_("delta_conversion", self.delta * (1 - THRESHOLD_DELTA_SHARE))
        set_("delta_target", self.delta * THRESHOLD_DELTA_SHARE / d)
        set_("rho_budget", epsilon_to_rho(self.epsilon, self.delta_conversion))
        set_("rho_profile", PROFILE_SHARE * self.rho_budget)
        set_("rho_column", (1 - PROFILE_SHARE) * self.rho_budget / d)
        set_("sigma_profile", profile_sensitivity(d) / math.sqrt(2 * self.rho_profile))
        set_("cap", DISTINCT_GUARD + 1 + math.ceil(CAP_SIGMAS * self.sigma_profile))
        set_("sigma_column", 1.0 / math.sqrt(2 * self.rho_column))
        set_("bound_rows", bounds_threshold(self.sigma_column))
        set_("threshold", threshold_for(self.sigma_column, self.delta_target))

    def record(self) -> dict[str, Any]:
        """The plan as the ledger records it (``details.draft``): public facts only."""
        return {
            "profile_share": PROFILE_SHARE,
            "seen_sigmas": SEEN_SIGMAS,
            "threshold_delta_share": THRESHOLD_DELTA_SHARE,
            "categorical_max": self.categorical_max,
            "distinct_guard": DISTINCT_GUARD,
            "distinct_cap": self.cap,
            "bounds_grid": {
                "edges": len(BOUNDS_GRID),
                "lowest": float(BOUNDS_GRID[0]),
                "highest": float(BOUNDS_GRID[-1]),
            },
            "bounds_threshold": self.bound_rows,
            "max_bound_rows": MAX_BOUND_ROWS,
            "threshold": self.threshold,
            "delta_target": self.delta_target,
            "bins": self.bins,
            "missing_values": list(self.missing_values),
        }


def needed_epsilon(d: int, delta: float) -> float:
    """The least ``--dp`` epsilon (at ``delta``) whose bounds threshold is at most ``MAX_BOUND_ROWS``."""
    lo, hi = 1e-6, 1.0
    while bounds_threshold(1.0 / math.sqrt(2 * hi)) > MAX_BOUND_ROWS:
        hi *= 2
    for _ in range(60):  # the least rho_col, by bisection (the threshold falls as rho_col grows)
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if bounds_threshold(1.0 / math.sqrt(2 * mid)) > MAX_BOUND_ROWS else (lo, mid)
    rho = hi * d / (1 - PROFILE_SHARE)
    return rho_to_epsilon(rho, delta * (1 - THRESHOLD_DELTA_SHARE))


def plan_draft(
    epsilon: float,
    delta: float,
    columns: Sequence[str],
    categorical_max: int,
    bins: int,
    missing_values: Sequence[str] = (),
) -> DraftPlan:
    """The plan of a DP draft over ``columns`` (public), or ``InputError`` (one line naming a column
    and the epsilon needed) when the budget is too small to find bounds (``MAX_BOUND_ROWS``)."""
    from .api import MAX_EPSILON, check_budget_args

    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0 < epsilon <= MAX_EPSILON:
        raise InputError(f"--dp must be a positive epsilon up to {MAX_EPSILON:g}, not {epsilon!r}")
    check_budget_args(epsilon, delta)
    if not columns:
        raise InputError("the table has no columns")
    d = len(columns)
    try:
        plan = DraftPlan(float(epsilon), float(delta), tuple(columns), categorical_max, bins, tuple(missing_values))
    except ValueError:  # no zCDP budget converts to so small an epsilon
        plan = None
    if plan is None or plan.bound_rows > MAX_BOUND_ROWS:
        need = needed_epsilon(d, delta)
        rows = f"{plan.bound_rows:,} rows" if plan else "more rows than any table has"
        raise InputError(
            f"--dp {epsilon:g} is too small to find the bounds of column '{columns[0]}' (each of the {d} "
            f"columns gets an equal share): an interval of the grid would need {rows} to be found, more "
            f"than {MAX_BOUND_ROWS:,}; --dp needs at least {_round_up(need)} at --delta {delta:g} (nothing was "
            "read, written or reserved)"
        )
    return plan


def _round_up(x: float) -> str:
    """``x`` rounded up to two significant digits, as text."""
    e = math.floor(math.log10(x)) - 1
    return f"{math.ceil(x / 10**e) * 10**e:.{max(0, -e)}f}"


# ---- the release -----------------------------------------------------------------------------------
@dataclass
class DPDraft:
    """A DP draft: the schema entries, the columns left out, notes (DP outputs only) and the ledger."""

    columns: list[dict[str, Any]]
    dropped: list[str]
    notes: list[str]
    accountant: Accountant

    @property
    def schema(self) -> Schema:
        """The drafted schema."""
        return Schema.from_dict({"columns": self.columns}, source="<dp draft>")


def release_draft(
    frames: Callable[[], Iterable[pd.DataFrame]],
    plan: DraftPlan,
    acc: Accountant,
    noise: NoiseSource | None = None,
) -> DPDraft:
    """Read the table (``frames()`` yields its chunks; a second call reads it again) and release the
    draft through the plan's mechanisms, each charged to ``acc`` before its noisy value exists."""
    from .common import checkpoint
    from .mechanisms import gaussian_mechanism, thresholded_histogram

    def chunks() -> Iterable[pd.DataFrame]:
        for frame in frames():
            checkpoint()  # a safe point between chunks (SIGINT, SIGTERM)
            yield frame

    noise = noise or OpenDPNoise()
    profiles = profile_chunks(chunks(), plan.columns, plan.cap, plan.missing_values, BOUNDS_GRID)
    sigma = plan.sigma_profile
    noisy = gaussian_mechanism(
        acc,
        noise,
        profile_vector(profiles),
        sigma=sigma,
        sensitivity_l2=profile_sensitivity(len(plan.columns)),
        query=f"profile: rows; per column missing, non-number, non-integer and distinct (at most {plan.cap}) cells",
        where="silo",
    )
    # the noisy profile is public from here on: the ledger records it, so audit can re-derive every decision
    acc.note(draft={**acc.details.get("draft", {}), "profile": [int(v) for v in noisy]})
    seen = SEEN_SIGMAS * sigma + 0.5
    rows = int(noisy[0])
    facts = {name: tuple(int(v) for v in noisy[1 + 4 * j : 5 + 4 * j]) for j, name in enumerate(plan.columns)}
    text = [n for n in plan.columns if facts[n][1] > seen and facts[n][3] <= DISTINCT_GUARD]
    if any(p.saturated for p in profiles if p.name in text):  # rare (CAP_SIGMAS): count every value again
        again = {p.name: p for p in profile_chunks(chunks(), plan.columns, 2**62, plan.missing_values)}
        profiles = [again[p.name] if p.name in text and p.saturated else p for p in profiles]
    columns, dropped, notes = [], [], []
    tokens = list(plan.missing_values)
    for p in profiles:
        name = p.name
        missing, non_numbers, non_integers, distinct = facts[name]
        has_missing = missing > 0
        said = (
            f"noisy counts: {rows} rows, {missing} missing, {non_numbers} non-number, {non_integers} "
            f"non-integer, {distinct} distinct"
        )
        if non_numbers <= seen:
            noisy_intervals = gaussian_mechanism(
                acc,
                noise,
                p.intervals,
                sigma=plan.sigma_column,
                query=f"bounds of '{name}': histogram of its numbers over the {len(p.intervals)} intervals of a "
                "public grid",
                where="silo",
                column=name,
                min_count=float(plan.bound_rows),
            )
            found = np.flatnonzero(noisy_intervals >= plan.bound_rows)
            integer = non_integers <= seen
            if len(found):
                lo, hi = interval_edges(int(found[0]))[0], interval_edges(int(found[-1]))[1]
                if integer:  # the whole numbers in [lo, hi), if any
                    whole = float(math.ceil(lo)), float(math.ceil(hi) - 1)
                    lo, hi = whole if whole[0] <= whole[1] else (float(math.floor(lo)), float(math.ceil(hi)))
            else:
                lo = hi = 0.0
            spec = numeric_spec(name, lo, hi, integer, plan.bins, has_missing, tokens)
            columns.append(spec)
            where = (
                f"the intervals of the grid with at least {plan.bound_rows} (noisy) numbers span {lo:g}..{hi:g}, "
                f"giving the bounds {spec['lower']:g}..{spec['upper']:g}; values beyond are clipped"
                if len(found)
                else f"no interval of the grid held {plan.bound_rows} (noisy) numbers: the bounds 0..0 are a "
                "placeholder for public knowledge"
            )
            notes.append(
                f"column '{name}': numeric{', integer' if integer else ''}{', missing' if has_missing else ''}; "
                f"{where} ({said})"
            )
            continue
        if distinct > DISTINCT_GUARD:
            dropped.append(name)
            notes.append(
                f"column '{name}': text with more than {DISTINCT_GUARD:,} distinct values (IDs or free text; "
                f"{said}): left out of the schema; remove it from the tables before `synth`"
            )
            continue
        values = list(p.counts)
        passed = thresholded_histogram(
            acc,
            noise,
            np.array([p.counts[v] for v in values], dtype=np.int64),
            sigma=plan.sigma_column,
            threshold=plan.threshold,
            query=f"categories of '{name}': thresholded histogram of its values",
            where="silo",
            column=name,
        )
        kept = [v for v, ok in zip(values, passed) if ok]
        if not kept or len(kept) > plan.categorical_max:
            dropped.append(name)
            why = (
                f"no value was frequent enough to release (threshold {plan.threshold})"
                if not kept
                else f"{len(kept)} values passed the threshold, more than --categorical-max {plan.categorical_max}"
            )
            notes.append(
                f"column '{name}': text; {why} ({said}): left out of the schema; declare it from public "
                "knowledge, or remove it from the tables before `synth`"
            )
            continue
        other = OTHER_CATEGORY
        while other in kept:
            other += "*"
        spec = {"name": name, "type": "categorical", "categories": category_order(kept) + [other], "unknown": other}
        if has_missing:
            spec["missing"] = True
            if tokens:
                spec["missing_values"] = tokens
        columns.append(spec)
        notes.append(
            f"column '{name}': categorical{', missing' if has_missing else ''}; {len(kept)} values at or above the "
            f"threshold {plan.threshold}, the others map to {other!r} ({said})"
        )
    if not columns:
        raise InputError("no column could be drafted: " + "; ".join(notes))
    Schema.from_dict({"columns": columns}, source="<dp draft>")
    return DPDraft(columns, dropped, notes, acc)


def accountant_for(plan: DraftPlan, ledger_path: str | Path | None = None) -> Accountant:
    """The accountant of a DP draft: rho at ``delta_conversion``, thresholds' deltas up to ``delta``."""
    return Accountant(
        plan.epsilon,
        plan.delta_conversion,
        METHOD,
        ledger_path=ledger_path,
        threat_model=THREAT_MODEL,
        details={"columns": list(plan.columns), "draft": plan.record()},
        delta_budget=plan.delta,
    )


def dp_note(source: str, ledger: dict[str, Any], ledger_name: str, plan: DraftPlan, dropped: Sequence[str]) -> dict:
    """The ``"_draft"`` note of a DP draft."""
    note: dict[str, Any] = {
        "note": (
            f"Drafted from the rows of {Path(source).name} under ({ledger['epsilon']:.4g}, {ledger['delta']:.3g})-"
            f"differential privacy; every value read from the rows was released by a mechanism recorded in "
            f"{ledger_name} (check it with `privsyn-fed audit {ledger_name}`). Review before use: categories "
            f"seen fewer than about {plan.threshold} times are not listed (such values map to the catch-all), "
            f"bounds span the intervals of a grid of round numbers that hold at least about {plan.bound_rows} "
            "values (values beyond are clipped), and a column left out or typed wrongly must be fixed by hand. "
            "Delete this note when done."
        ),
        "privacy": DP_DRAFT_PRIVACY,
        "drafted_from": Path(source).name,
        "dp": {"epsilon": ledger["epsilon"], "delta": ledger["delta"], "ledger": ledger_name},
    }
    if dropped:
        note["left_out"] = list(dropped)
    return note
