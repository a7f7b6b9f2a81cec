"""A DP draft's answers (``draft_dp``, 1. to 3.): what ``make_draft`` asks for
(``DraftAnswers``), the rows on this machine answering through the mechanisms (``LocalAnswers``),
a categorical column's released values (``ValueCounts``), and the ledger's names of the queries.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Iterable, Protocol

import numpy as np
import pandas as pd

from ..accounting import Accountant
from ..noise import NoiseSource
from ..schema import profile_chunks
from .atoms import number_counts
from .cells import CellKinds
from .grid import BOUNDS_GRID, COARSE_GRID, COARSE_INDEX
from .plan import DraftPlan, profile_sensitivity, profile_vector


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


class DraftAnswers(Protocol):
    """Where a DP draft's noisy facts come from: each call releases them through a mechanism that
    charges the draft's ledger (the rows on this machine, ``LocalAnswers``; or the silos' parties on
    secret shares, ``mpc.draft``)."""

    #: How a listed value was found, for the notes.
    listing: str

    def profile(self) -> np.ndarray:
        """The noisy ``profile_vector`` of the union's columns."""
        ...

    def bounds(self, name: str, grid: str = "fine") -> np.ndarray:
        """The noisy bounds histogram of column ``name`` over the plan's ``grid`` (``DraftPlan.grid``)."""
        ...

    def values(self, name: str, present: float, sigma_profile: float) -> ValueCounts:
        """The values of column ``name`` (``present``: its noisy count of present cells)."""
        ...

    def atoms(self, name: str) -> dict[float, int]:
        """The numbers of column ``name`` that pass its atoms' threshold, with their noisy counts
        (``atoms``; never asked over MPC)."""
        ...


def on_grid(intervals: np.ndarray, grid: str) -> np.ndarray:
    """Counts over ``BOUNDS_GRID``'s intervals as counts over ``grid``'s: unchanged for ``fine``, summed
    over ``COARSE_GRID``'s intervals for ``coarse`` (every coarse edge is a fine one: ``COARSE_INDEX``)."""
    if grid == "fine":
        return intervals
    return np.bincount(COARSE_INDEX, weights=intervals, minlength=len(COARSE_GRID) + 1).astype(np.int64)


class LocalAnswers:
    """A DP draft's answers from rows read on this machine (one table, or the union of several):
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
        """The noisy profile of the rows (``DraftAnswers.profile``)."""
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

    def bounds(self, name: str, grid: str = "fine") -> np.ndarray:
        """The noisy bounds histogram of column ``name`` over ``grid``: the fine grid's counts, or on the
        coarse grid their sums (every coarse edge is a fine one: ``grid.COARSE_INDEX``), before the noise."""
        from ..mechanisms import gaussian_mechanism

        fine = self.profiles[name].intervals
        assert fine is not None
        intervals = on_grid(fine, grid)
        plan = self.plan if grid == self.plan.grid else dataclasses.replace(self.plan, grid=grid)
        return gaussian_mechanism(
            self.acc,
            self.noise,
            intervals,
            sigma=self.plan.sigma_column,
            query=bounds_query(name, len(intervals)),
            where="silo",
            column=name,
            min_count=float(plan.bound_rows),
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
