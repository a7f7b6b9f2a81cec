"""A schema drafted under differential privacy: everything read from the rows is released by a
mechanism that charges a ledger (``privsyn-fed schema draft --dp EPSILON --delta DELTA``).

Neighbouring tables differ by adding or removing one record (a row as the reader yields it). The
column names (the header), the options and the budget are public; nothing else is read for free.
Several tables (silos, all on this machine) are drafted as their union, charged once: a record is in
one of them, so every count below is the sum of the silos' counts, each value's count in 3. is
summed across the silos before the noise, a distinct count is of the union's values, and every
sensitivity is the one stated for one table.
The plan (``plan_draft``) is fixed from public facts before any row is read: the budget
``rho = epsilon_to_rho(epsilon, delta_conversion)`` with ``delta_conversion = delta / 2``; the other
half of delta is shared equally by the ``d`` columns' thresholds (``delta_target = delta / (2 d)``).
``PROFILE_SHARE`` of rho goes to the profile, the rest in equal shares ``rho_col`` to the columns:

1. **Profile** (one Gaussian, discrete, on integers): the row count, and per column (``cells.
   PROFILE_CELLS``) the counts of missing cells, of present cells that are not finite numbers, of
   numbers with exactly 1, 2, ..., 6 decimal places and with more than 6 (``cells``; a whole number is
   in none), and ``min(distinct present values, C)`` with the public cap ``C = DISTINCT_GUARD + 1 +
   ceil(6 sigma)``. A record is one row (1); in each column its cell is missing, or not a number, or a
   number with one count of decimal places, so it is in at most one of the column's first eight counts
   (1), and it adds at most one distinct value (1): per column the change is at most ``1^2 + 1^2``,
   so the L2 sensitivity is ``sqrt(1 + 2 d)``, as with the single count of numbers that are not whole
   that the decimal places replace; cost ``(1 + 2 d) / (2 sigma^2)``.
   Decisions (post-processing, ``decide``), each against the seen level ``SEEN_SIGMAS sigma + 1/2``:
   ``missing`` when the noisy missing count exceeds it (not merely zero: a column without missing cells
   is not declared missing but with probability ``Phi(-SEEN_SIGMAS)``); a column of numbers when the
   noisy non-number count does not, of whole numbers when no count of decimal places does; its
   ``"decimals"`` the largest ``k <= 6`` whose count exceeds it (none when the count of more than 6
   does). A column of whole numbers whose noisy distinct count is at most ``--categorical-max`` is a
   **code** (plan codes, 0/1 flags): drafted from the thresholded histogram of its values (3., the
   same ``rho_col``), a categorical column of the values that pass and the catch-all (when more than
   ``--categorical-max`` pass, the distinct count's noise misled: locally the column is numeric,
   bounded by the least and largest value that passed, unless the others hold too many cells as in
   4.; over MPC, where only their number comes back, it is left out); every other column of numbers
   is numeric (2.), its rho split with its atoms (``atoms``). Otherwise a column of text, left out
   when its noisy distinct count exceeds ``DISTINCT_GUARD``, or when the shared identifier rule
   (``schema.identifiers``) takes it for an identifier from its noisy present (rows - missing) and
   distinct counts (IDs, names, free text: nothing more is spent on it), else categorical. A column of
   whole numbers is tested against the same rule after its bounds (2.), with the span of its
   intervals that reach ``T`` (dense ids, row numbers), and left out too. ``--include COL`` keeps a
   column the rule would leave out; ``--exclude COL`` removes a column from the plan's columns before
   anything is read. The ledger records both (public) in ``details.draft`` and the columns left out
   as identifiers in ``details.draft.identifiers``.
2. **Bounds** of a numeric column: a Gaussian histogram of its numbers over the ``m + 1 = 3,404``
   intervals that the public grid ``BOUNDS_GRID`` cuts the line into (``grid``: edges 0 and
   +-{1.0, 1.1, ..., 9.9} 10^k, k = -3..15, up to 9e15; ``(-inf, g_0), [g_0, g_1), ..., [g_{m-1}, inf)``):
   a record is a number in at most one interval, so sensitivity 1, ``sigma_b = 1 / sqrt(2 s rho_col)``,
   cost ``s rho_col``, with ``s = 1 - ATOM_RHO_SHARE`` (the rest to its atoms, ``atoms``; ``s = 1``
   over MPC). The domain is public, so this is plain zCDP. The bounds are the lower edge of the
   lowest and the upper edge of the highest interval whose noisy count reaches ``T = 1 + ceil(z
   sigma_b)``, with ``z`` such that an empty interval passes with probability at most
   ``BOUNDS_FALSE_RATE / 3,404`` (``P(Z >= T) <= P(N(0, sigma_b^2) >= T - 1)``, see 3.); for a column
   of numbers with ``k`` decimal places (0: whole numbers) the multiples of ``10^-k`` inside them (an
   upper edge is exclusive), with no rounding beyond the grid's (4..107 in whole days gives 4..109);
   values beyond are clipped (4. says when the bounds count as not found). When the fine intervals
   do not find them, the same noisy histogram is read again summed over the coarse grid's intervals
   (mantissas 1..9, at most 10 fine ones each, its own threshold; ``bounds``): post-processing.
   Outer intervals holding fewer than about ``T`` rows are cut off (their values clipped), so a
   budget whose ``T`` exceeds ``MAX_BOUND_ROWS`` is refused before anything is read. (Quantiles by
   the exponential mechanism over the same grid were the alternative; but every candidate beyond the
   largest value scores alike, so wherever the high quantile is that largest value -- a point mass at
   the top, as the code 501 of ACS's POVPIP, or a 0/1 column -- the mechanism picks uniformly among
   them and a bound drifts to the grid's end, 1e12 and beyond. An empty interval never passes here.)
3. **Categories** of a categorical column: a thresholded histogram. Every present value's count
   gets discrete Gaussian noise ``N_Z(0, s^2)``, ``s = 1 / sqrt(2 rho_col)`` (sensitivity 1, cost
   ``rho_col``), and the values whose noisy count is at least the integer threshold ``tau`` are
   listed, sorted, with their noisy counts, plus the catch-all ``OTHER_CATEGORY`` for the rest (the
   column is left out when more than ``K`` (``--categorical-max``) pass). The domain is unknown, so a
   value held by one record appears with probability ``delta' = P(1 + Z >= tau) <=
   P(N(0, s^2) >= tau - 2) = erfc((tau - 2) / (s sqrt 2)) / 2`` (the discrete Gaussian's tail past
   ``t`` is at most the continuous one past ``t - 1``: bound each mass by the integral over the unit
   interval below it, and the normaliser ``sum_k exp(-k^2 / 2 s^2) >= s sqrt(2 pi)`` by Poisson
   summation). Conditioned on that event not happening the outputs are identical, so the histogram is
   ``(rho_col, delta')``-approximately zCDP; ``tau`` is the least integer with ``delta' <= delta_target``.
   Each histogram's entry records ``threshold`` and ``delta``; the run is ``(epsilon, delta)``-DP with
   ``epsilon`` the conversion of the spent rho at ``delta_conversion`` and ``delta =
   delta_conversion + sum delta'`` (``accounting.ledger``; ``audit`` re-derives every part).
4. **Not found** (post-processing of the noisy values above; nothing more is spent): a column's bounds
   are not found when, on the fine grid and then on the coarse one (2.; the fine grid's verdict is the
   one reported), no interval reaches ``T``, when they are a single value, or when the numbers
   beyond them, estimated as ``N - S`` (``N`` = rows - missing - non-numbers from the profile, variance
   at most ``3 sigma^2``; ``S`` the noisy counts of the intervals they span, ``k sigma_b^2``), exceed
   ``MAX_LOST_SHARE N`` by more than ``SEEN_SIGMAS`` standard deviations, or when the intervals next
   to them (from each edge outward while a noisy count reaches ``(SEEN_SIGMAS - 1) sigma_b``, which
   an empty interval does with probability below 0.0014) hold more than ``MAX_LOST_SHARE`` of the
   numbers inside and there; a column's categories are
   not found when fewer than two values pass, or when the present cells outside the listed values,
   ``R = rows - missing - sum of the passing counts``, exceed ``MAX_LOST_SHARE`` of the present cells
   likewise. When no value passes and the unlisted values hold fewer than 2 cells each on average
   (``R / (distinct - listed)``: IDs, free text), no threshold (at least 2) could find them: the
   column is left out. The epsilon that would find a column is the least whose threshold falls to
   the count the column shows (``DraftPlan.epsilon_for``): for bounds, the least noisy count of those
   next intervals, else the largest threshold below ``T`` at which the noisy histogram itself gives
   bounds that are found; for categories, ``R`` over the unlisted values (over one when the noisy
   distinct count is not above ``SEEN_SIGMAS sigma + 1/2``). An estimate lost in its noise (below
   ``(SEEN_SIGMAS - 1) sigma_b``, or ``R`` below twice its standard deviation) gives way to half the
   threshold. ``schema draft --dp`` refuses such a draft (after the spend, which the ledger
   keeps), or with ``--leave-unfound`` writes the column as a placeholder (``schema.UNFOUND_KEY``)
   that ``Schema.from_dict`` refuses until it is filled in. The ledger's ``details.draft.unfound``
   names those columns.

5. **On secret shares** (``--mpc``; ``mpc.draft``): each silo is its own party and no row, and no
   silo's count, leaves its process in the clear. The plan carries the parties (``split``): the profile,
   every bounds histogram and the counts below are sums of the parties' own vectors on secret shares,
   each party adding its own discrete Gaussian so that the ``n - t`` outside any tolerated coalition
   carry the planned cost (``accounting.distributed``); the sensitivities are those above, since a record
   is in one silo. The decisions read the noisy counts against the noise they got, ``sqrt(n)`` times
   each party's sigma (``DraftPlan.noise_sd``: ``T`` and the levels of 4. from it). The distinct
   counts are the silos' sum (at least the union's). A categorical column's values are named by the
   rows, and no party may learn another's, so its ``rho_col`` is split: ``CANDIDATE_SHARE`` to each
   silo's own thresholded histogram (3., drawn in the silo's process at ``s_v``; the silos hold disjoint
   records, so the lists together cost what one costs, with its ``delta'``), which sends party 0 only
   the values that pass (or how many, beyond ``--categorical-max``); the rest to the union's counts of
   the listed values and of the present cells outside them, on secret shares (sensitivity 1: a present
   cell is in one of them). Every listed value is kept; ``R`` is the noisy count of the others. A value
   is listed when it passes in at least one silo, so one spread thinly over many silos maps to the
   catch-all (4. says when that loses too many cells). A code (1.) takes this categorical path too,
   decided from the same noisy profile; ``--exclude`` travels with the draft to every party, whose
   header holds the excluded columns besides the drafted ones.

6. **Bins** (``--edges quantiles``; post-processing, nothing more is spent): a numeric column whose
   bounds were found gets cut points between bins of about equal noisy count, from its noisy bounds
   histogram (``bounds.quantile_cuts``): across the intervals its bounds span, a bin closes once it
   holds ``1 / bins`` of their noisy count, and an interval holding two such shares or more is cut into
   that many parts of equal width (the numbers inside an interval are taken as spread evenly; a cut
   inside an interval to 4 significant digits). The schema's ``"edges"`` then replace its ``"bins"``.

Point masses (``"atoms"``) are proposed only where an interval of the fine grid holds a single
possible value (``bounds``: zero, small whole numbers), from the same noisy histogram, on this machine
and on secret shares alike; a DP draft makes no release of its own for them.

The ledger (method ``schema-draft``) is written before each release, as for ``synth``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, Sequence

import numpy as np
import pandas as pd

from ..accounting import Accountant
from ..accounting.conversions import epsilon_to_rho, rho_to_epsilon
from ..accounting.distributed import PartiesNoise
from ..common import InputError
from ..mechanisms import threshold_delta
from ..noise import NoiseSource, OpenDPNoise
from ..schema import (
    DP_DRAFT_PRIVACY,
    UNFOUND_KEY,
    ColumnProfile,
    Schema,
    category_order,
    profile_chunks,
)
from ..schema.cells import text_fault
from .atoms import ATOM_RHO_SHARE, choose_atoms, number_counts, releases_atoms
from .cells import PROFILE_CELLS, CellKinds
from .decide import ColumnFacts, identifier_line, is_code, numeric_entry
from .grid import BOUNDS_FALSE_RATE as BOUNDS_FALSE_RATE
from .grid import BOUNDS_GRID, bounds_threshold, grid_record
from .grid import interval_edges as interval_edges

METHOD = "schema-draft"
#: Share of rho spent on the profile; the rest is split equally among the columns.
PROFILE_SHARE = 0.1
#: Share of delta left to the thresholds of the categories' histograms (the rest converts rho).
THRESHOLD_DELTA_SHARE = 0.5
#: The largest bounds threshold (rows an outer interval needs to be kept) worth drafting at.
MAX_BOUND_ROWS = 1000
#: A noisy profile count above ``SEEN_SIGMAS sigma + 1/2`` says such cells exist.
SEEN_SIGMAS = 4.0
#: A text column with more distinct values than this (noisy) is left out without a histogram.
DISTINCT_GUARD = 10_000
#: The distinct-value cap is ``DISTINCT_GUARD + 1 + ceil(CAP_SIGMAS sigma)``: a column with more
#: distinct values than that passes the guard with probability below ``Phi(-CAP_SIGMAS)`` (1e-9).
CAP_SIGMAS = 6.0
#: Bounds that clip, or a catch-all that takes, more than this share of a column's cells (by more than
#: ``SEEN_SIGMAS`` standard deviations of the noisy estimate) are not found (module docstring, 4.).
MAX_LOST_SHARE = 0.1
#: The catch-all category of a drafted categorical column (values below the threshold map to it).
OTHER_CATEGORY = "(other)"
#: Under MPC, the share of a categorical column's rho spent on each silo's own thresholded list of
#: candidate values; the rest counts the union's cells per candidate on secret shares (5.).
CANDIDATE_SHARE = 0.5
THREAT_MODEL = (
    "the data owner drafts on their own machine and is trusted with its rows; the schema and this "
    "ledger are what leave it"
)
#: Over MPC (module docstring, 5.), followed by the secure computation's assumptions.
MPC_THREAT_MODEL = (
    "the silos draft on secret shares, each silo's party trusted with its own rows only: the union's counts are "
    "opened only with every party's own noise added, and each silo's candidate values only as its own "
    "thresholded list; "
)


def threshold_for(sigma: float, delta_target: float) -> int:
    """The least integer ``tau >= 2`` with ``threshold_delta(sigma, tau) <= delta_target``."""
    from scipy.special import erfcinv

    tau = max(2, 2 + math.ceil(sigma * math.sqrt(2.0) * float(erfcinv(2.0 * delta_target))) - 1)
    while threshold_delta(sigma, tau) > delta_target:
        tau += 1
    while tau > 2 and threshold_delta(sigma, tau - 1) <= delta_target:
        tau -= 1
    return tau


def profile_vector(profiles: Sequence[ColumnProfile], kinds: Sequence[np.ndarray]) -> np.ndarray:
    """``[rows, then per column: its counts of cells.KINDS (missing, non-numbers, numbers of 1..6 and
    more decimal places), min(distinct, cap)]`` (int64); ``kinds[j]`` counts column ``j``'s cells."""
    rows = profiles[0].rows if profiles else 0
    out = [rows]
    for p, k in zip(profiles, kinds):
        out += [*(int(c) for c in k), p.distinct_capped]
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
    #: The silos' parties computing on secret shares, each adding its own noise (module docstring,
    #: 5.); None: the rows are read on this machine.
    split: PartiesNoise | None = None
    #: A numeric column's bins: ``uniform``, or at the noisy histogram's ``quantiles`` (6.).
    edges: str = "uniform"
    #: Columns the identifier rule may not leave out (``--include``), and the header's columns removed
    #: from ``columns`` before any row is read (``--exclude``): public, recorded in the ledger.
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    delta_conversion: float = field(init=False)
    delta_target: float = field(init=False)
    rho_budget: float = field(init=False)
    rho_profile: float = field(init=False)
    rho_column: float = field(init=False)
    sigma_profile: float = field(init=False)
    cap: int = field(init=False)
    sigma_column: float = field(init=False)
    sigma_atoms: float | None = field(init=False)
    atom_threshold: int | None = field(init=False)
    sigma_values: float = field(init=False)
    sigma_counts: float | None = field(init=False)
    profile_sd: float = field(init=False)
    bounds_sd: float = field(init=False)
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
        set_("sigma_column", 1.0 / math.sqrt(2 * self.bounds_share * self.rho_column))
        set_("sigma_atoms", None if self.mpc else 1.0 / math.sqrt(2 * ATOM_RHO_SHARE * self.rho_column))
        set_("atom_threshold", None if self.sigma_atoms is None else threshold_for(self.sigma_atoms, self.delta_target))
        set_("sigma_values", 1.0 / math.sqrt(2 * self.values_share * self.rho_column))
        set_("sigma_counts", 1.0 / math.sqrt(2 * (1 - CANDIDATE_SHARE) * self.rho_column) if self.mpc else None)
        set_("profile_sd", self.noise_sd(self.sigma_profile, profile_sensitivity(d), 1 + 4 * d))
        set_("bounds_sd", self.noise_sd(self.sigma_column, 1.0, len(BOUNDS_GRID) + 1))
        set_("bound_rows", bounds_threshold(self.bounds_sd))
        set_("threshold", threshold_for(self.sigma_values, self.delta_target))

    @property
    def mpc(self) -> bool:
        """Whether the silos' parties compute on secret shares."""
        return self.split is not None

    def noise_sd(self, sigma: float, sensitivity: float, cells: int) -> float:
        """The standard deviation of the noise a Gaussian release planned at ``sigma`` gets: ``sigma``,
        or on secret shares the sum of every party's own (``sqrt(n)`` times each one's sigma, which
        ``accounting.distributed`` sets from the ``n - t`` honest ones). The decisions read noisy
        counts against it."""
        if self.split is None:
            return sigma
        return math.sqrt(self.split.parties) * self.split.party_sigma(sensitivity, sigma, cells)

    @property
    def bounds_share(self) -> float:
        """The share of a numeric column's rho that its bounds histogram gets (the rest: its atoms)."""
        return 1.0 if self.mpc else 1.0 - ATOM_RHO_SHARE

    @property
    def values_share(self) -> float:
        """The share of a categorical column's rho that its thresholded histogram of values gets."""
        return CANDIDATE_SHARE if self.mpc else 1.0

    def epsilon_for(self, release: str, count: int | None) -> float | None:
        """The least ``--dp`` (at this delta, over these columns) whose threshold for ``release`` (the
        bounds' ``T``, or the categories' ``tau``; both fall as rho grows) is at most ``count``; None for
        no count, or when no epsilon up to ``api.MAX_EPSILON`` is enough."""
        from ..api import MAX_EPSILON

        if count is None:
            return None

        def threshold(rho_column: float) -> int:
            if release == "bounds":
                sigma = 1.0 / math.sqrt(2 * self.bounds_share * rho_column)
                return bounds_threshold(self.bounds_sd / self.sigma_column * sigma)
            return threshold_for(1.0 / math.sqrt(2 * self.values_share * rho_column), self.delta_target)

        if threshold(self.rho_column) <= count:
            return self.epsilon
        share = (1 - PROFILE_SHARE) / len(self.columns)  # rho_column = share * rho_budget
        top = share * epsilon_to_rho(MAX_EPSILON, self.delta_conversion)
        if threshold(top) > count:
            return None
        lo, hi = self.rho_column, top
        for _ in range(60):  # the least rho_column, by bisection
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if threshold(mid) > count else (lo, mid)
        return min(rho_to_epsilon(hi / share, self.delta_conversion), MAX_EPSILON)

    def record(self) -> dict[str, Any]:
        """The plan as the ledger records it (``details.draft``): public facts only."""
        return {
            "profile_share": PROFILE_SHARE,
            "seen_sigmas": SEEN_SIGMAS,
            "threshold_delta_share": THRESHOLD_DELTA_SHARE,
            "categorical_max": self.categorical_max,
            "distinct_guard": DISTINCT_GUARD,
            "distinct_cap": self.cap,
            "bounds_grid": grid_record(),
            "profile_cells": list(PROFILE_CELLS),
            "codes": True,
            "bounds_threshold": self.bound_rows,
            "max_bound_rows": MAX_BOUND_ROWS,
            "threshold": self.threshold,
            "delta_target": self.delta_target,
            "bins": self.bins,
            "missing_values": list(self.missing_values),
            **({"mpc": {"candidate_share": CANDIDATE_SHARE}} if self.mpc else {}),
            **({} if self.mpc else {"atoms": {"rho_share": ATOM_RHO_SHARE}}),
            **({"edges": self.edges} if self.edges != "uniform" else {}),
            **({"include": list(self.include)} if self.include else {}),
            **({"exclude": list(self.exclude)} if self.exclude else {}),
        }


def needed_epsilon(d: int, delta: float, factor: float = 1.0, share: float = 1.0) -> float:
    """The least ``--dp`` epsilon (at ``delta``) whose bounds threshold is at most ``MAX_BOUND_ROWS``
    (``factor``: the noise's standard deviation over the planned, ``sqrt(n / k)`` on secret shares;
    ``share``: the bounds histogram's share of a column's rho)."""
    lo, hi = 1e-6, 1.0
    while bounds_threshold(factor / math.sqrt(2 * share * hi)) > MAX_BOUND_ROWS:
        hi *= 2
    for _ in range(60):  # the least rho_col, by bisection (the threshold falls as rho_col grows)
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if bounds_threshold(factor / math.sqrt(2 * share * mid)) > MAX_BOUND_ROWS else (lo, mid)
    rho = hi * d / (1 - PROFILE_SHARE)
    return rho_to_epsilon(rho, delta * (1 - THRESHOLD_DELTA_SHARE))


def plan_draft(
    epsilon: float,
    delta: float,
    columns: Sequence[str],
    categorical_max: int,
    bins: int,
    missing_values: Sequence[str] = (),
    split: PartiesNoise | None = None,
    edges: str = "uniform",
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> DraftPlan:
    """The plan of a DP draft over ``columns`` (public), or ``InputError`` (one line naming a column
    and the epsilon needed) when the budget is too small to find bounds (``MAX_BOUND_ROWS``).
    ``exclude`` names header columns left out before anything is read (``columns`` then holds the
    others); ``include`` names columns the identifier rule keeps."""
    from ..api import MAX_EPSILON, check_budget_args

    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0 < epsilon <= MAX_EPSILON:
        raise InputError(f"--dp must be a positive epsilon up to {MAX_EPSILON:g}, not {epsilon!r}")
    check_budget_args(epsilon, delta)
    both = [c for c in exclude if c in columns]
    unknown = [c for c in include if c not in columns]
    if both or unknown:
        name = (both or unknown)[0]
        raise InputError(f"--include {name!r}: not a column of the draft (excluded, or not in the table's header)")
    if not columns:
        raise InputError("the table has no columns" + (" left after --exclude" if exclude else ""))
    d = len(columns)
    try:
        plan = DraftPlan(
            float(epsilon),
            float(delta),
            tuple(columns),
            categorical_max,
            bins,
            tuple(missing_values),
            split,
            edges,
            tuple(dict.fromkeys(include)),
            tuple(dict.fromkeys(exclude)),
        )
    except ValueError:  # no zCDP budget converts to so small an epsilon
        plan = None
    if plan is None or plan.bound_rows > MAX_BOUND_ROWS:
        need = needed_epsilon(d, delta, split.accuracy_cost() if split else 1.0, 1.0 if split else 1 - ATOM_RHO_SHARE)
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
@dataclass(frozen=True)
class Unfound:
    """A column whose ``release`` (``"bounds"`` or ``"categories"``) the budget did not find, ``why`` (in
    words), and the least ``epsilon`` whose threshold falls to ``count``: the count the column's sought
    intervals or values show, estimated from the noisy releases, or half the threshold when the estimate
    is lost in its noise (``coarse``). None: no budget up to ``api.MAX_EPSILON`` finds them from these rows."""

    name: str
    release: str
    why: str
    count: int | None
    epsilon: float | None
    coarse: bool = False


def _unfound(plan: DraftPlan, name: str, release: str, why: str, estimate: float | None, noise: float) -> Unfound:
    """The ``Unfound`` of a column whose sought intervals or values hold about ``estimate`` (None: none
    that any budget finds), an estimate taken as lost in its noise below ``noise``."""
    if estimate is None:
        return Unfound(name, release, why, None, None)
    threshold = plan.bound_rows if release == "bounds" else plan.threshold
    coarse = estimate < noise
    count = threshold // 2 if coarse else min(math.floor(estimate), threshold - 1)
    count_or_none = count if count >= 2 else None
    return Unfound(name, release, why, count_or_none, plan.epsilon_for(release, count_or_none), coarse)


@dataclass
class DPDraft:
    """A DP draft: the schema entries (a column in ``unfound`` as a placeholder with ``UNFOUND_KEY``),
    the columns left out, notes (DP outputs only) and the ledger."""

    columns: list[dict[str, Any]]
    dropped: list[str]
    notes: list[str]
    accountant: Accountant
    unfound: list[Unfound] = field(default_factory=list)

    @property
    def schema(self) -> Schema:
        """The drafted schema (``InputError`` while a placeholder is left in it)."""
        return Schema.from_dict({"columns": self.columns}, source="<dp draft>")


def _shown(v: float) -> str:
    """A noisy count as text: never below zero (a negative noisy count says "none")."""
    return f"{max(0, round(v)):,}"


@dataclass(frozen=True)
class ValueCounts:
    """A categorical column's released values: ``listed`` (value: noisy count), how many values
    ``passed`` (``listed`` is empty when more than ``--categorical-max`` did), the present cells that
    no listed value holds (``rest``, a noisy estimate) and its standard deviation (``spread``); for a
    code, the lowest and highest passing value (``extent``, even when more than ``--categorical-max``
    passed; not over MPC, where only their number comes back then)."""

    listed: dict[str, int]
    passed: int
    rest: float
    spread: float
    extent: tuple[float, float] | None = None


class DraftReleases(Protocol):
    """Where a DP draft's noisy facts come from: each call releases them through a mechanism that
    charges the draft's ledger (the rows on this machine, ``LocalReleases``; or the silos' parties on
    secret shares, ``mpc.draft``)."""

    #: How a listed value was found, for the notes.
    listing: str

    def profile(self) -> np.ndarray:
        """The noisy ``profile_vector`` of the union's columns."""
        ...

    def bounds(self, name: str) -> np.ndarray:
        """The noisy bounds histogram of column ``name``."""
        ...

    def values(self, name: str, present: float, sigma_profile: float) -> ValueCounts:
        """The values of column ``name`` (``present``: its noisy count of present cells)."""
        ...

    def atoms(self, name: str) -> dict[float, int]:
        """The numbers of column ``name`` that pass its atoms' threshold, with their noisy counts
        (``atoms``; never asked over MPC)."""
        ...


class LocalReleases:
    """A DP draft's releases from rows read on this machine (one table, or the union of several):
    ``frames()`` yields the chunks (a second call reads them again)."""

    def __init__(
        self, frames: Callable[[], Iterable[pd.DataFrame]], plan: DraftPlan, acc: Accountant, noise: NoiseSource
    ):
        from ..common import checkpoint

        def chunks() -> Iterable[pd.DataFrame]:
            for frame in frames():
                checkpoint()  # a safe point between chunks (SIGINT, SIGTERM)
                yield frame

        self.plan, self.acc, self.noise, self.chunks = plan, acc, noise, chunks
        self.listing = f"at or above the threshold {plan.threshold}"
        cap, tokens = plan.cap, plan.missing_values
        self.kinds = CellKinds(plan.columns, tokens)
        found = profile_chunks(self.kinds.watch(chunks()), plan.columns, cap, tokens, BOUNDS_GRID)
        self.profiles = {p.name: p for p in found}

    def profile(self) -> np.ndarray:
        """The noisy profile of the rows (``DraftReleases.profile``)."""
        from ..mechanisms import gaussian_mechanism

        plan = self.plan
        return gaussian_mechanism(
            self.acc,
            self.noise,
            profile_vector(list(self.profiles.values()), [self.kinds.counts[c] for c in plan.columns]),
            sigma=plan.sigma_profile,
            sensitivity_l2=profile_sensitivity(len(plan.columns)),
            query=profile_query(plan),
            where="silo",
        )

    def bounds(self, name: str) -> np.ndarray:
        """The noisy bounds histogram of column ``name``."""
        from ..mechanisms import gaussian_mechanism

        intervals = self.profiles[name].intervals
        assert intervals is not None
        return gaussian_mechanism(
            self.acc,
            self.noise,
            intervals,
            sigma=self.plan.sigma_column,
            query=bounds_query(name, len(intervals)),
            where="silo",
            column=name,
            min_count=float(self.plan.bound_rows),
        )

    def values(self, name: str, present: float, sigma_profile: float) -> ValueCounts:
        """The values of column ``name`` whose noisy count reaches the threshold, with their noisy counts."""
        from ..mechanisms import thresholded_counts

        plan, p = self.plan, self.profiles[name]
        if p.saturated:  # rare (CAP_SIGMAS): count every value again
            p = profile_chunks(self.chunks(), [name], 2**62, plan.missing_values)[0]
        values = list(p.counts)
        passed = thresholded_counts(
            self.acc,
            self.noise,
            np.array([p.counts[v] for v in values], dtype=np.int64),
            sigma=plan.sigma_values,
            threshold=plan.threshold,
            query=values_query(name),
            where="silo",
            column=name,
        )
        kept = {v: int(c) for v, c in zip(values, passed) if c > 0}
        rest = max(0.0, present - sum(kept.values()))  # standard deviation at most ``spread``
        spread = math.sqrt(2 * sigma_profile**2 + len(kept) * plan.sigma_values**2)
        numbers = [x for x in (_number(v) for v in kept) if x is not None]
        extent = (min(numbers), max(numbers)) if numbers else None
        return ValueCounts(kept if len(kept) <= plan.categorical_max else {}, len(kept), rest, spread, extent)

    def atoms(self, name: str) -> dict[float, int]:
        """The numbers of column ``name`` whose noisy count reaches the atoms' threshold (``atoms``)."""
        from ..mechanisms import thresholded_counts

        plan, p = self.plan, self.profiles[name]
        assert plan.sigma_atoms is not None and plan.atom_threshold is not None
        if p.saturated:  # rare (CAP_SIGMAS): count every value again
            p = profile_chunks(self.chunks(), [name], 2**62, plan.missing_values)[0]
        values, counts = number_counts(p)
        passed = thresholded_counts(
            self.acc,
            self.noise,
            counts,
            sigma=plan.sigma_atoms,
            threshold=plan.atom_threshold,
            query=atoms_query(name),
            where="silo",
            column=name,
        )
        return {v: int(c) for v, c in zip(values, passed) if c > 0}


def _number(text: str) -> float | None:
    """``text`` as a finite number, or None."""
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def atoms_query(name: str) -> str:
    """The ledger's name of a numeric column's thresholded histogram of its numbers (``atoms``)."""
    return f"atoms of '{name}': thresholded histogram of its numbers"


def profile_query(plan: DraftPlan) -> str:
    """The ledger's name of the profile."""
    return (
        "profile: rows; per column missing, non-number, 1..6 and more decimal places, and distinct (at most "
        f"{plan.cap}) cells"
    )


def bounds_query(name: str, cells: int) -> str:
    """The ledger's name of a column's bounds histogram."""
    return f"bounds of '{name}': histogram of its numbers over the {cells} intervals of a public grid"


def values_query(name: str, where: str = "") -> str:
    """The ledger's name of a column's thresholded histogram of values (``where``: in which rows)."""
    return f"categories of '{name}': thresholded histogram of its values{where}"


def release_draft(
    frames: Callable[[], Iterable[pd.DataFrame]] | DraftReleases,
    plan: DraftPlan,
    acc: Accountant,
    noise: NoiseSource | None = None,
) -> DPDraft:
    """Release the draft through the plan's mechanisms, each charged to ``acc`` before its noisy value
    exists: from the rows ``frames()`` yields (chunks of one table, or of several tables' union; a
    second call reads them again), or from ``DraftReleases``. Columns whose bounds or categories were
    not found come back in ``unfound``."""
    from .bounds import numeric_column

    releases = frames if not callable(frames) else LocalReleases(frames, plan, acc, noise or OpenDPNoise())
    noisy = releases.profile()
    # the noisy profile is public from here on: the ledger records it, so audit can re-derive every decision
    acc.note(draft={**acc.details.get("draft", {}), "profile": [int(v) for v in noisy]})
    sigma = plan.profile_sd
    seen = SEEN_SIGMAS * sigma + 0.5
    rows, stride = int(noisy[0]), len(PROFILE_CELLS)
    columns, dropped, notes, unfound, identifiers = [], [], [], [], []
    tokens = list(plan.missing_values)
    left_out = "left out of the schema (a release ignores it in the silos)"
    for j, name in enumerate(plan.columns):
        f = ColumnFacts.of(noisy[1 + stride * j : 1 + stride * (j + 1)], rows, seen)
        has_missing, said = f.has_missing, f.said()
        code = is_code(f, plan.categorical_max)
        if f.numbers_only and not code:
            b = numeric_column(plan, name, np.asarray(releases.bounds(name)), f, tokens)
            spec, note, lost, span = b.spec, b.note, b.unfound, b.span
            line = identifier_line(name, f, plan.include, text=False, lo=span[0], hi=span[1]) if span else None
            if line is not None:  # whole numbers filling their noisy span: ids, row numbers
                dropped.append(name)
                identifiers.append(name)
                notes.append(f"{line} ({said})")
                continue
            if lost is None and releases_atoms(plan, f.distinct):  # its point masses, from its own release
                atoms = choose_atoms(releases.atoms(name), f.numbers, spec)
                if atoms:
                    spec["atoms"] = [int(v) if spec.get("integer") else v for v in atoms]
                    note += f"; point masses at {', '.join(f'{v:g}' for v in atoms)}"
            columns.append(spec)
            notes.append(f"{note} ({said})")
            unfound += [lost] if lost else []
            continue
        if not code and f.distinct > DISTINCT_GUARD:
            dropped.append(name)
            notes.append(
                f"column '{name}': text with more than {DISTINCT_GUARD:,} distinct values (IDs or free text; "
                f"{said}): {left_out}"
            )
            continue
        line = None if code else identifier_line(name, f, plan.include, text=True)
        if line is not None:  # decided from the profile alone: nothing more is spent on it
            dropped.append(name)
            identifiers.append(name)
            notes.append(f"{line} ({said})")
            continue
        # post-processing of the noisy profile and the released values: the present cells that no listed
        # value holds, over the unlisted values when the noisy distinct count is clearly positive (else
        # taken as one value): the count each of them holds on average
        distinct, present = f.distinct, f.present
        what = f"a code of at most {plan.categorical_max} whole numbers" if code else "text"
        found = releases.values(name, present, sigma)
        kept, rest, spread = found.listed, found.rest, found.spread
        odd = [v for v in kept if text_fault(v) is not None]
        if odd:  # no category may hold a control character: a release maps such cells to the other category
            kept = {v: c for v, c in kept.items() if v not in odd}
            notes.append(f"column '{name}': {len(odd)} released value(s) with control characters left unlisted")
        wide = found.extent is not None and found.extent[0] < found.extent[1]
        if (
            code
            and found.passed > plan.categorical_max
            and wide
            and rest <= MAX_LOST_SHARE * present + SEEN_SIGMAS * spread
        ):
            assert found.extent is not None  # more values than a code has: numeric over those that passed
            lo, hi = found.extent
            columns.append(numeric_entry(name, lo, hi, f, plan.bins, tokens))
            notes.append(
                f"column '{name}': numeric, integer; {found.passed} values passed the threshold, more than "
                f"--categorical-max {plan.categorical_max}: bounded by the least and largest of them, {lo:g}..{hi:g}; "
                f"values beyond are clipped ({said})"
            )
            continue
        if found.passed > plan.categorical_max:
            dropped.append(name)
            notes.append(
                f"column '{name}': {what}; {found.passed} values passed the threshold, more than --categorical-max "
                f"{plan.categorical_max} ({said}): {left_out}; declare it from public knowledge to keep it"
            )
            continue
        unlisted = max(1, min(distinct, DISTINCT_GUARD) - len(kept)) if distinct > seen else 1
        if not kept and rest / unlisted < 2:
            dropped.append(name)
            notes.append(
                f"column '{name}': {what} whose values are held by about {_shown(rest / unlisted)} record(s) each, "
                f"too few for any budget to find (IDs or free text; {said}): {left_out}"
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
        why = None
        if not kept:
            why = f"no value has {plan.threshold} (noisy) cells"
        elif len(kept) == 1:
            why = f"only {next(iter(kept))!r} has {plan.threshold} (noisy) cells"
        elif rest > MAX_LOST_SHARE * present + SEEN_SIGMAS * spread:
            why = (
                f"about {_shown(rest)} of its about {_shown(present)} present cells hold values below "
                f"{plan.threshold} (noisy) cells, which would map to {other!r}"
            )
        kind = f"categorical{' (' + what + ')' if code else ''}{', missing' if has_missing else ''}"
        if why is not None:  # the unlisted values' average count, when clearly above the noise of ``rest``
            unfound.append(_unfound(plan, name, "categories", why, rest / unlisted, 2 * spread / unlisted))
            spec[UNFOUND_KEY] = (
                f"--dp {plan.epsilon:g} did not find its categories: {why}; list its public categories (values "
                f'outside them map to the last, {other!r}), then delete "{UNFOUND_KEY}"'
            )
            columns.append(spec)
            notes.append(f"column '{name}': {kind}; categories NOT FOUND: {why} ({said})")
            continue
        columns.append(spec)
        notes.append(
            f"column '{name}': {kind}; {len(kept)} values {releases.listing}, the others map to {other!r} ({said})"
        )
    if not columns:
        raise InputError("no column could be drafted: " + "; ".join(notes))
    found_columns = [c for c in columns if UNFOUND_KEY not in c]
    if found_columns:
        Schema.from_dict({"columns": found_columns}, source="<dp draft>")
    if identifiers:  # which columns the identifier rule left out: post-processing, recorded likewise
        acc.note(draft={**acc.details["draft"], "identifiers": identifiers})
    if unfound:  # which columns are placeholders: post-processing, recorded with the releases it follows
        acc.note(draft={**acc.details["draft"], "unfound": [u.name for u in unfound]})
    return DPDraft(columns, dropped, notes, acc, unfound)


def unfound_message(plan: DraftPlan, unfound: Sequence[Unfound], ledger: str, reusable: bool = True) -> str:
    """One line: the columns whose bounds or categories were not found, why, the epsilon that would
    bring the thresholds down to the counts they show, and that a retry with --leave-unfound spends
    nothing (it reuses the values kept beside the ledger, ``draft_dp.replay``; not when ``reusable`` is False)."""
    parts = []
    for release in ("bounds", "categories"):
        some = [u for u in unfound if u.release == release]
        if some:
            listed = ", ".join(f"'{u.name}' ({u.why})" for u in some)
            parts.append(f"the {release} of {listed}")
    needs = [u.epsilon for u in unfound if u.epsilon is not None]
    never = [f"'{u.name}'" for u in unfound if u.epsilon is None]
    coarse = [f"'{u.name}'" for u in unfound if u.epsilon is not None and u.coarse]
    need = ""
    if needs:
        need = (
            f"about --dp {_round_up(max(needs))} at --delta {plan.delta:g} would bring the thresholds "
            f"({plan.bound_rows} numbers for an interval, {plan.threshold} cells for a value) down to the counts "
            "they show"
        )
        if coarse:
            its = "its threshold" if len(coarse) == 1 else "their thresholds"
            need += f" (the noisy counts of {', '.join(coarse)} are too coarse to tell how far: it halves {its})"
    if never:
        no = f"no --dp up to {_max_epsilon():g} finds {', '.join(never)} from these rows"
        need = f"{need}; {no}" if need else no
    need += " (a column of a single value, or of none, never shows more: declare its domain by hand)"
    retry = (
        "it spends nothing: it reuses the values this draft released"
        if reusable
        else "a new spend: the values this draft released could not be kept beside its ledger"
    )
    return (
        f"--dp {plan.epsilon:g} did not find {'; '.join(parts)}: {need}. No schema was written; {ledger} records "
        "the budget spent. Draft again with a larger --dp (a new spend), or with --leave-unfound to write these "
        f"columns as placeholders to fill in by hand ({retry})"
    )


def _max_epsilon() -> float:
    from ..api import MAX_EPSILON

    return MAX_EPSILON


def accountant_for(plan: DraftPlan, ledger_path: str | Path | None = None, secure: str = "") -> Accountant:
    """The accountant of a DP draft: rho at ``delta_conversion``, thresholds' deltas up to ``delta``
    (``secure``: the secure computation's threat model, over MPC)."""
    return Accountant(
        plan.epsilon,
        plan.delta_conversion,
        METHOD,
        ledger_path=ledger_path,
        threat_model=MPC_THREAT_MODEL + secure if plan.mpc else THREAT_MODEL,
        details={"columns": list(plan.columns), "draft": plan.record()},
        delta_budget=plan.delta,
    )


def dp_note(
    sources: str | Sequence[str],
    ledger: dict[str, Any],
    ledger_name: str,
    plan: DraftPlan,
    dropped: Sequence[str],
    unfound: Sequence[Unfound] = (),
) -> dict:
    """The ``"_draft"`` note of a DP draft of one table, or of the union of several (``sources``)."""
    names = [Path(sources).name] if isinstance(sources, (str, Path)) else [Path(s).name for s in sources]
    rows = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]} (their union)"
    placeholders = (
        f'The columns {", ".join(repr(u.name) for u in unfound)} are placeholders (their "{UNFOUND_KEY}" says '
        "why): the schema will not load until they are filled in. "
        if unfound
        else ""
    )
    note: dict[str, Any] = {
        "note": (
            f"Drafted from the rows of {rows} under ({ledger['epsilon']:.4g}, {ledger['delta']:.3g})-"
            f"differential privacy; every value read from the rows was released by a mechanism recorded in "
            f"{ledger_name} (check it with `privsyn-fed audit {ledger_name}`). {placeholders}Review before use: "
            f"categories seen fewer than about {plan.threshold} times are not listed (such values map to the "
            f"catch-all), bounds span the intervals of a grid of two-digit numbers that hold at least about "
            f"{plan.bound_rows} values (values beyond are clipped), and a column left out or typed wrongly must "
            "be fixed by hand. Delete this note when done."
        ),
        "privacy": DP_DRAFT_PRIVACY,
        "drafted_from": names[0] if len(names) == 1 else names,
        "dp": {"epsilon": ledger["epsilon"], "delta": ledger["delta"], "ledger": ledger_name},
    }
    if dropped:
        note["left_out"] = list(dropped)
    if unfound:
        note["unfound"] = [u.name for u in unfound]
    return note
