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

from ..mechanisms import threshold_delta
from .atoms import ATOM_RHO_SHARE
from .grid import BOUNDS_FALSE_RATE, BOUNDS_GRID, bounds_threshold, interval_edges
from .local import (
    DraftReleases,
    LocalReleases,
    ValueCounts,
    atoms_query,
    bounds_query,
    profile_query,
    values_query,
)
from .plan import (
    CANDIDATE_SHARE,
    CAP_SIGMAS,
    DISTINCT_GUARD,
    MAX_BOUND_ROWS,
    MAX_LOST_SHARE,
    METHOD,
    OTHER_CATEGORY,
    PROFILE_SHARE,
    SEEN_SIGMAS,
    THRESHOLD_DELTA_SHARE,
    DraftPlan,
    needed_epsilon,
    plan_draft,
    profile_sensitivity,
    profile_vector,
    threshold_for,
)
from .plan import _round_up as _round_up
from .release import release_draft
from .report import MPC_THREAT_MODEL, THREAT_MODEL, DPDraft, Unfound, accountant_for, dp_note, unfound_message

__all__ = [
    "ATOM_RHO_SHARE",
    "BOUNDS_FALSE_RATE",
    "BOUNDS_GRID",
    "CANDIDATE_SHARE",
    "CAP_SIGMAS",
    "DISTINCT_GUARD",
    "DPDraft",
    "DraftPlan",
    "DraftReleases",
    "LocalReleases",
    "MAX_BOUND_ROWS",
    "MAX_LOST_SHARE",
    "METHOD",
    "MPC_THREAT_MODEL",
    "OTHER_CATEGORY",
    "PROFILE_SHARE",
    "SEEN_SIGMAS",
    "THREAT_MODEL",
    "THRESHOLD_DELTA_SHARE",
    "Unfound",
    "ValueCounts",
    "accountant_for",
    "atoms_query",
    "bounds_query",
    "bounds_threshold",
    "dp_note",
    "interval_edges",
    "needed_epsilon",
    "plan_draft",
    "profile_query",
    "profile_sensitivity",
    "profile_vector",
    "release_draft",
    "threshold_delta",
    "threshold_for",
    "unfound_message",
    "values_query",
]
