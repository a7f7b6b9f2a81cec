"""A schema drafted under differential privacy: everything read from the rows is released by a
mechanism that charges a ledger (``privsyn-fed schema draft --dp EPSILON --delta DELTA``).

In brief: neighbours add or remove one record; the plan (``plan_draft``), fixed before any row is
read, takes ``rho = epsilon_to_rho(epsilon, delta / 2)`` and gives ``PROFILE_SHARE`` of it to one
Gaussian profile of the table (L2 sensitivity ``sqrt(1 + 2 d)``), the rest in equal shares
``rho_col`` to the columns: a numeric column's bounds from a Gaussian histogram over the public grid
``BOUNDS_GRID`` (sensitivity 1, zCDP), a categorical column's values from a thresholded histogram
(sensitivity 1, ``(rho_col, delta')``-approximately zCDP with ``delta' <= delta / (2 d)``). Every
decision (types, bounds, categories, atoms, bins, columns not found) is post-processing, so the
draft is ``(epsilon, delta)``-DP with ``delta = delta / 2 + sum delta'``; over MPC the same sums are
taken on secret shares, each party adding its own noise.

The proof (the plan, every release and its sensitivity): docs/proofs/dp-draft.md; its parts 1. to
6. are what the modules here cite as ``draft_dp``, 1. to 6.
"""

from __future__ import annotations

from ..mechanisms import threshold_delta
from . import replay
from .atoms import ATOM_RHO_SHARE
from .cells import CellKinds
from .grid import BOUNDS_FALSE_RATE, BOUNDS_GRID, bounds_threshold, interval_edges
from .local import (
    DraftAnswers,
    LocalAnswers,
    ValueCounts,
    atoms_query,
    bounds_query,
    on_grid,
    profile_query,
    values_query,
)
from .make import make_draft
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
from .report import MPC_THREAT_MODEL, THREAT_MODEL, DPDraft, Unfound, accountant_for, dp_note, unfound_message

__all__ = [
    "ATOM_RHO_SHARE",
    "BOUNDS_FALSE_RATE",
    "BOUNDS_GRID",
    "CANDIDATE_SHARE",
    "CAP_SIGMAS",
    "CellKinds",
    "DISTINCT_GUARD",
    "DPDraft",
    "DraftAnswers",
    "DraftPlan",
    "LocalAnswers",
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
    "make_draft",
    "needed_epsilon",
    "on_grid",
    "plan_draft",
    "profile_query",
    "profile_sensitivity",
    "profile_vector",
    "replay",
    "threshold_delta",
    "threshold_for",
    "unfound_message",
    "values_query",
]
