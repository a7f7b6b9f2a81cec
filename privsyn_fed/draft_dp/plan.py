"""The public plan of a DP draft (``draft_dp``), fixed from public facts before any row is read: the
budget's shares and constants, the sigmas and thresholds they give (``DraftPlan``, ``plan_draft``),
the profile's definition and sensitivity (``draft_dp``, 1.), and the least epsilon that finds bounds
(``needed_epsilon``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..accounting import PartiesNoise, epsilon_to_rho, rho_to_epsilon
from ..common import InputError
from ..mechanisms import threshold_delta
from ..schema import ColumnProfile
from .atoms import ATOM_RHO_SHARE
from .cells import PROFILE_CELLS
from .grid import BOUNDS_GRID, COARSE_GRID, bounds_threshold, grid_record

METHOD = "schema-draft"
#: Share of rho spent on the profile; the rest is split equally among the columns.
PROFILE_SHARE = 0.1
#: Share of delta left to the thresholds of the categories' histograms (the rest converts rho).
THRESHOLD_DELTA_SHARE = 0.5
#: Locally, the fine grid is used when its threshold is at most this share of the noisy rows
#: (``DraftPlan.with_rows``).
FINE_GRID_SHARE = 0.05
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
#: ``SEEN_SIGMAS`` standard deviations of the noisy estimate) are not found (``draft_dp``, 4.).
MAX_LOST_SHARE = 0.1
#: The catch-all category of a drafted categorical column (values below the threshold map to it).
OTHER_CATEGORY = "(other)"
#: Under MPC, the share of a categorical column's rho spent on each silo's own thresholded list of
#: candidate values; the rest counts the union's cells per candidate on secret shares (``draft_dp``, 5.).
CANDIDATE_SHARE = 0.5


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
    """The public plan of a DP draft, fixed before any row is read (see the module docstring of ``draft_dp``)."""

    epsilon: float
    delta: float
    columns: tuple[str, ...]
    categorical_max: int
    bins: int
    missing_values: tuple[str, ...] = ()
    #: The silos' parties computing on secret shares, each adding its own noise (``draft_dp``,
    #: 5.); None: the rows are read on this machine.
    split: PartiesNoise | None = None
    #: A numeric column's bins: ``uniform``, or at the noisy histogram's ``quantiles`` (``draft_dp``, 6.).
    edges: str = "uniform"
    #: Columns the identifier rule may not leave out (``--include``), and the header's columns removed
    #: from ``columns`` before any row is read (``--exclude``): public, recorded in the ledger.
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    #: The grid of the bounds histograms: ``fine`` (``grid.BOUNDS_GRID``) or ``coarse``
    #: (``grid.COARSE_GRID``; ``with_rows`` says when).
    grid: str = "fine"
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
        set_("bounds_sd", self.noise_sd(self.sigma_column, 1.0, len(self.grid_edges) + 1))
        set_("bound_rows", bounds_threshold(self.bounds_sd, len(self.grid_edges) + 1))
        set_("threshold", threshold_for(self.sigma_values, self.delta_target))

    @property
    def grid_edges(self) -> np.ndarray:
        """The edges of the bounds histograms' grid."""
        return COARSE_GRID if self.grid == "coarse" else BOUNDS_GRID

    def with_rows(self, rows: float) -> "DraftPlan":
        """The plan for a table of about ``rows`` rows (the noisy profile's count, so this is
        post-processing): the coarse grid where the fine grid's threshold exceeds
        ``FINE_GRID_SHARE`` of the rows, since each of its intervals holds about a tenth of a coarse
        one's numbers and would miss a thinly spread tail (NMES1988's visit counts, ACS incomes); the
        coarse histogram is the fine one's counts summed before the noise (over MPC by each party), at
        the same cost."""
        if self.grid == "coarse" or self.bound_rows <= FINE_GRID_SHARE * rows:
            return self
        return dataclasses.replace(self, grid="coarse")

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

    def epsilon_for(self, sought: str, count: int | None) -> float | None:
        """The least ``--dp`` (at this delta, over these columns) whose threshold for ``sought`` (the
        bounds' ``T``, or the categories' ``tau``; both fall as rho grows) is at most ``count``; None for
        no count, or when no epsilon up to ``accounting.MAX_EPSILON`` is enough."""
        from ..accounting import MAX_EPSILON

        if count is None:
            return None

        def threshold(rho_column: float) -> int:
            if sought == "bounds":
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
            "bounds_grid": grid_record(self.grid_edges),
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


def needed_epsilon(d: int, delta: float, factor: float = 1.0, share: float = 1.0, coarse: bool = False) -> float:
    """The least ``--dp`` epsilon (at ``delta``) whose bounds threshold is at most ``MAX_BOUND_ROWS``
    (``factor``: the noise's standard deviation over the planned, ``sqrt(n / k)`` on secret shares;
    ``share``: the bounds histogram's share of a column's rho; ``coarse``: on the coarse grid)."""
    cells = len(COARSE_GRID if coarse else BOUNDS_GRID) + 1

    def too_many(rho_col: float) -> bool:
        return bounds_threshold(factor / math.sqrt(2 * share * rho_col), cells) > MAX_BOUND_ROWS

    lo, hi = 1e-6, 1.0
    while too_many(hi):
        hi *= 2
    for _ in range(60):  # the least rho_col, by bisection (the threshold falls as rho_col grows)
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if too_many(mid) else (lo, mid)
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
    from ..accounting import MAX_EPSILON, check_budget_args

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
    if plan is not None and plan.bound_rows > MAX_BOUND_ROWS and not plan.mpc:
        plan = dataclasses.replace(plan, grid="coarse")  # the fine grid could never be used
    if plan is None or plan.bound_rows > MAX_BOUND_ROWS:
        need = needed_epsilon(
            d, delta, split.accuracy_cost() if split else 1.0, 1.0 if split else 1 - ATOM_RHO_SHARE, split is None
        )
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
