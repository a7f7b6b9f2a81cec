"""A DP schema draft over the silos' parties (``schema draft --dp E --delta D --mpc``): the union's
facts come from sums on secret shares, so no party's rows, or counts, leave its process in the clear.

The plan is ``draft_dp``'s (``DraftPlan`` with ``mpc``), and every party derives it itself from the
public draft (``DraftSpec``: the header's columns and the options) and the release's request
(epsilon, delta), then costs every step from it before it answers (``DraftSteps``):

* ``draft_profile``: each party's ``profile_vector`` of its own rows, summed on shares with every
  party's own discrete Gaussian (``accounting.distributed``), at the plan's ``sigma_profile`` and
  sensitivity ``sqrt(1 + 2 d)``. A record is in one silo, so it moves the sum as it moves its own
  silo's vector; the distinct counts are the silos' sum (at least the union's).
* ``draft_bounds``: a numeric column's bounds histogram over the fine or the coarse grid (party 0
  names it: ``DraftPlan.with_rows``; either has sensitivity 1), summed likewise.
* ``draft_candidates``: a categorical column's values are named by the rows themselves, and no
  party may learn another's. So each party lists, in its own process, the values whose count in its
  own rows plus ``N_Z(0, s_v^2)`` reaches the threshold ``tau`` (``s_v`` from ``CANDIDATE_SHARE`` of
  the column's rho), and sends only that list to party 0: a thresholded histogram of disjoint rows,
  so the union of the lists costs what one costs (parallel composition), with its delta.
* ``draft_counts``: the union's cells per listed value, and the present cells outside them, summed
  on shares (sensitivity 1: a present cell is in one of them) at ``sigma_counts``.
A value is listed when it reaches the threshold in at least one silo: one spread thinly over many
silos maps to the catch-all, and the draft says so when that loses too many cells (``draft_dp``, 4.).
A whole-number code (``draft_dp``, 1.) takes the ``draft_candidates`` and ``draft_counts`` steps as a
categorical column does. No histogram of a numeric column's values is released here, so its atoms
come from its bounds histogram alone (``draft_dp.bounds.grid_atoms``). The header's columns that
``--exclude`` names travel with the draft (``DraftSpec.exclude``): no party reads them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..accounting import PartiesNoise
from ..common import InputError, MPCError
from ..draft_dp import (
    BOUNDS_GRID,
    CellKinds,
    DraftPlan,
    ValueCounts,
    bounds_query,
    on_grid,
    plan_draft,
    profile_query,
    profile_sensitivity,
    profile_vector,
    values_query,
)
from ..mechanisms import local_thresholded_values, parties_noisy_sum
from ..schema import ColumnProfile, profile_chunks
from . import secure, world
from .policy import Refused
from .shared_pool import collective


@dataclass(frozen=True)
class DraftSpec:
    """The public facts of a draft that every party must share: the header's columns and the options."""

    columns: tuple[str, ...]
    categorical_max: int
    bins: int
    missing_values: tuple[str, ...]
    #: Header columns left out before any row is read (``--exclude``), and those the identifier rule
    #: keeps (``--include``); sent only when given.
    exclude: tuple[str, ...] = ()
    include: tuple[str, ...] = ()

    @classmethod
    def of(cls, plan: DraftPlan) -> "DraftSpec":
        """The public facts of ``plan`` that every party shares."""
        return cls(plan.columns, plan.categorical_max, plan.bins, plan.missing_values, plan.exclude, plan.include)

    def to_wire(self) -> dict[str, Any]:
        """The draft as it travels (JSON)."""
        return {
            "columns": list(self.columns),
            "categorical_max": self.categorical_max,
            "bins": self.bins,
            "missing_values": list(self.missing_values),
            **({"exclude": list(self.exclude)} if self.exclude else {}),
            **({"include": list(self.include)} if self.include else {}),
        }

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the draft's canonical JSON (what the release request names in place of a schema)."""
        return hashlib.sha256(json.dumps({"draft": self.to_wire()}, sort_keys=True).encode()).hexdigest()

    @classmethod
    def from_wire(cls, raw: Any) -> "DraftSpec":
        """The draft party 0 proposes, checked for shape; ``Refused`` naming what is wrong."""
        keys = {"columns", "categorical_max", "bins", "missing_values"}
        if not isinstance(raw, dict) or not keys <= set(raw) <= keys | {"exclude", "include"}:
            raise Refused(
                "party 0's draft is not an object of columns, categorical_max, bins and missing_values (and "
                "exclude, include)"
            )
        columns, tokens = raw["columns"], raw["missing_values"]
        exclude, include = raw.get("exclude", []), raw.get("include", [])
        for what, names in (
            ("columns", columns),
            ("missing_values", tokens),
            ("exclude", exclude),
            ("include", include),
        ):
            if not isinstance(names, list) or not all(isinstance(c, str) for c in names):
                raise Refused(f"party 0's draft: {what} is not a list of names")
        if not columns or len(set(columns)) != len(columns):
            raise Refused("party 0's draft: its columns are empty or repeat a name")
        for key in ("categorical_max", "bins"):
            v = raw[key]
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 1 << 20:
                raise Refused(f"party 0's draft: {key} {v!r} is not a whole number in range")
        return cls(tuple(columns), raw["categorical_max"], raw["bins"], tuple(tokens), tuple(exclude), tuple(include))

    def plan(self, epsilon: float, delta: float, split: PartiesNoise) -> DraftPlan:
        """This draft's plan at the request's budget among ``split``'s parties; ``Refused`` when the
        budget cannot find bounds."""
        try:
            return plan_draft(
                epsilon,
                delta,
                self.columns,
                self.categorical_max,
                self.bins,
                self.missing_values,
                split,
                include=self.include,
                exclude=self.exclude,
            )
        except InputError as exc:
            raise Refused(str(exc)) from None


class DraftTable:
    """A silo's own rows as a draft reads them (private: never sent; only its parts summed on shares,
    or its own thresholded lists, leave the process)."""

    def __init__(self, path: str | Path, plan: DraftPlan):
        from ..common import read_chunks, read_header, table_source

        self.path, self.plan = table_source(path), plan
        header = read_header(self.path)
        drafted = [*plan.columns, *plan.exclude]  # the header's columns, some excluded before any row is read
        if sorted(header) != sorted(drafted):
            missing = [c for c in drafted if c not in header]
            extra = [c for c in header if c not in drafted]
            raise InputError(
                f"{self.path}: its columns are not the draft's"
                + (f"; missing {', '.join(repr(c) for c in missing)}" if missing else "")
                + (f"; not in the draft {', '.join(repr(c) for c in extra)}" if extra else "")
                + " (every silo of a draft has the same header)"
            )
        self._frames = lambda: (c.frame for c in read_chunks(self.path))
        self.kinds = CellKinds(plan.columns, plan.missing_values)
        found = profile_chunks(
            self.kinds.watch(self._frames()), plan.columns, plan.cap, plan.missing_values, BOUNDS_GRID
        )
        self.profiles: dict[str, ColumnProfile] = {p.name: p for p in found}

    @property
    def name(self) -> str:
        """The table's path, as text."""
        return str(self.path)

    def profile(self) -> np.ndarray:
        """This silo's ``profile_vector`` (its part of the union's)."""
        columns = self.plan.columns
        return profile_vector([self.profiles[c] for c in columns], [self.kinds.counts[c] for c in columns])

    def intervals(self, column: str, grid: str = "fine") -> np.ndarray:
        """This silo's counts of the column's numbers over the public grid's intervals (``coarse``: the
        fine counts summed over ``COARSE_GRID``'s, ``draft_dp.local.on_grid``)."""
        out = self.profiles[column].intervals
        assert out is not None
        return on_grid(out, grid)

    def counts(self, column: str) -> ColumnProfile:
        """The column's profile with every present value counted (read again if the cap stopped it)."""
        p = self.profiles[column]
        if p.saturated:
            p = self.profiles[column] = profile_chunks(self._frames(), [column], 2**62, self.plan.missing_values)[0]
        return p

    def candidates(self, column: str, noise) -> bytes:
        """This silo's thresholded list of the column's values (``thresholded_counts`` in this
        process, with ``noise``, the party's own), as JSON: the values, or how many passed when more
        than ``categorical_max`` did."""
        plan, p = self.plan, self.counts(column)
        values = list(p.counts)
        counts = np.array([p.counts[v] for v in values], dtype=np.int64)
        noisy = counts + np.asarray(noise.gaussian(len(values), plan.sigma_values), dtype=np.int64)
        passed = [v for v, c in zip(values, noisy) if c >= plan.threshold]
        body = {"values": passed} if len(passed) <= plan.categorical_max else {"passed": len(passed)}
        return json.dumps(body).encode()

    def value_counts(self, column: str, values: Sequence[str]) -> np.ndarray:
        """The cells holding each of ``values``, then the present cells holding none of them."""
        p = self.counts(column)
        listed = [p.counts.get(v, 0) for v in values]
        return np.array([*listed, p.present - sum(listed)], dtype=np.int64)


def read_draft_table(path: str | Path, plan: DraftPlan) -> DraftTable:
    """``DraftTable``, or ``InputError`` naming the file (its value-free message)."""
    try:
        return DraftTable(path, plan)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def _union(lists: list[bytes], names: Sequence[str], most: int) -> tuple[list[str], int]:
    """The union of the silos' thresholded lists (sorted), and how many values passed in all (more
    than ``most`` when a silo said so); ``MPCError`` for a reply that is not such a list."""
    union: set[str] = set()
    passed = 0
    for name, raw in zip(names, lists):
        try:
            body = json.loads(raw.decode())
        except (UnicodeDecodeError, ValueError, RecursionError):
            body = None
        if isinstance(body, dict) and isinstance(body.get("passed"), int) and body["passed"] > most:
            passed = max(passed, body["passed"])
        elif isinstance(body, dict) and isinstance(body.get("values"), list):
            if not all(isinstance(v, str) for v in body["values"]) or len(body["values"]) > most:
                raise MPCError(f"{name}: replied with a list of candidate values that is not one")
            union.update(body["values"])
        else:
            raise MPCError(f"{name}: replied with something other than a list of candidate values")
    return sorted(union), max(passed, len(union))


class MPCAnswers:
    """A DP draft's answers (``draft_dp.DraftAnswers``) from the silos' parties: party 0's side."""

    def __init__(self, agg, plan: DraftPlan, acc):
        self.agg, self.plan, self.acc = agg, plan, acc
        self.own: DraftTable = agg.own
        self.ranks = list(range(len(agg.silo_names)))
        self.listing = f"at or above the threshold {plan.threshold} in at least one silo"

    def _sum(
        self,
        op: str,
        header: dict[str, Any],
        mine: np.ndarray,
        *,
        sigma: float,
        sensitivity: float,
        query: str,
        **extra: Any,
    ) -> np.ndarray:
        def open_sum(each: float) -> np.ndarray:
            self.agg.command(op, header)
            opened = secure.noisy_sum(mine.astype(np.int64), self.ranks, len(mine), each, self.agg.noise)
            assert opened is not None
            return opened

        return parties_noisy_sum(
            self.agg,
            self.acc,
            self.agg.noise,
            open_sum,
            sigma=sigma,
            sensitivity_l2=sensitivity,
            cells=len(mine),
            query=query,
            **extra,
        )

    @collective
    def profile(self) -> np.ndarray:
        """The union's noisy profile: the parties' vectors summed on shares."""
        plan = self.plan
        mine = self.own.profile()
        return self._sum(
            "draft_profile",
            {},
            mine,
            sigma=plan.sigma_profile,
            sensitivity=profile_sensitivity(len(plan.columns)),
            query=profile_query(plan),
        )

    @collective
    def bounds(self, name: str, grid: str = "fine") -> np.ndarray:
        """The union's noisy bounds histogram of column ``name`` over ``grid`` (``DraftPlan.with_rows``),
        summed on shares."""
        mine = self.own.intervals(name, grid)
        plan = dataclasses.replace(self.plan, grid=grid)
        return self._sum(
            "draft_bounds",
            {"column": name, "grid": grid},
            mine,
            sigma=plan.sigma_column,
            sensitivity=1.0,
            query=bounds_query(name, len(mine)),
            column=name,
            min_count=float(plan.bound_rows),
        )

    @collective
    def values(self, name: str, present: float, sigma_profile: float) -> ValueCounts:
        """The union of the silos' thresholded lists of column ``name``, then the union's noisy counts
        of each listed value and of the other present cells, summed on shares."""
        plan, agg = self.plan, self.agg

        def gather() -> tuple[list[str], int]:
            agg.command("draft_candidates", {"column": name})
            lists = world.gather_bytes(agg.channel, self.own.candidates(name, agg.noise))
            assert lists is not None
            return _union(lists, agg.silo_names, plan.categorical_max)

        union, passed = local_thresholded_values(
            agg,
            self.acc,
            agg.noise,
            gather,
            sigma=plan.sigma_values,
            threshold=plan.threshold,
            query=values_query(name, " in each silo"),
            column=name,
        )
        listed = union if passed <= plan.categorical_max else []
        assert plan.sigma_counts is not None
        noisy = self._sum(
            "draft_counts",
            {"column": name, "values": listed},
            self.own.value_counts(name, listed),
            sigma=plan.sigma_counts,
            sensitivity=1.0,
            query=counts_query(name, len(listed)),
            column=name,
        )
        kept = {v: int(c) for v, c in zip(listed, noisy[:-1])}
        spread = plan.noise_sd(plan.sigma_counts, 1.0, len(listed) + 1)
        return ValueCounts(kept, passed, max(0.0, float(noisy[-1])), spread)


def counts_query(name: str, values: int) -> str:
    """The ledger's name of the union's counts of a column's listed values."""
    return f"counts of '{name}': the cells of each of its {values} listed values and of the others"


# ---- a party's side ------------------------------------------------------------------------------
class DraftSteps:
    """What a party answers in a draft, and what each step costs its rows (from the plan it derived)."""

    def __init__(self, plan: DraftPlan, table: DraftTable):
        assert plan.split is not None
        self.plan, self.table, self.split = plan, table, plan.split
        self.done: set[tuple[str, str]] = set()

    def _column(self, cmd: dict, op: str) -> str:
        column = cmd.get("column")
        if column not in self.plan.columns:
            raise Refused(f"{op} of {column!r}, which is not a column of the draft")
        return column

    def _once(self, key: tuple[str, str], *before: tuple[str, str]) -> None:
        """``Refused`` unless ``key`` (a step, a column) comes for the first time, after ``before``."""
        if key in self.done:
            raise Refused(f"{key[0]} of {key[1]!r} was answered already")
        if any(b not in self.done for b in before):
            raise Refused(f"{key[0]} of {key[1]!r} comes after {' and '.join(b[0] for b in before)}")
        if key[0] in ("draft_bounds", "draft_candidates") and any(
            (other, key[1]) in self.done for other in ("draft_bounds", "draft_candidates")
        ):
            raise Refused(f"column {key[1]!r} was drafted already")

    def plan_step(self, op: str, cmd: dict, noise, channel) -> tuple[list, Callable[[], None]]:
        """``(charges, answer)``: the step's cost to this party's rows and how to answer it;
        ``Refused`` for a step out of order, of another column, or repeated."""
        from .party_costs import Charge

        plan, table, ranks = self.plan, self.table, list(range(self.split.parties))

        def summed(mine: np.ndarray, sigma: float, sensitivity: float, query: str, m: int = 1) -> tuple[list, Callable]:
            each = self.split.party_sigma(sensitivity, sigma, len(mine))
            rule = {"own_rows": {"count_marginals": m, "clip_bounds": [], "rounding_l2": 0.0}}

            def add() -> None:
                secure.noisy_sum(mine.astype(np.int64), ranks, len(mine), each, noise)

            return [Charge("gaussian", query, sensitivity, each, cells=len(mine), fields=rule)], add

        if op == "draft_profile":
            self._once((op, ""))
            d = len(plan.columns)
            charges, answer = summed(
                table.profile(), plan.sigma_profile, profile_sensitivity(d), profile_query(plan), 1 + 2 * d
            )
        elif op == "draft_bounds":
            column = self._column(cmd, op)
            self._once((op, column), ("draft_profile", ""))
            grid = cmd.get("grid", "fine")
            if grid not in ("fine", "coarse"):
                raise Refused(f"{op} of {column!r} over the grid {grid!r}: only 'fine' or 'coarse'")
            mine = table.intervals(column, grid)  # either grid: sensitivity 1 at the plan's sigma
            charges, answer = summed(mine, plan.sigma_column, 1.0, bounds_query(column, len(mine)))
        elif op == "draft_candidates":
            column = self._column(cmd, op)
            self._once((op, column), ("draft_profile", ""))
            query = values_query(column, " in this silo")
            rule = {"own_rows": {"count_marginals": 1, "clip_bounds": [], "rounding_l2": 0.0}}
            charges = [
                Charge("gaussian", query, 1.0, plan.sigma_values, where="silo", threshold=plan.threshold, fields=rule)
            ]

            def answer() -> None:
                world.gather_bytes(channel, table.candidates(column, noise))

        elif op == "draft_counts":
            column = self._column(cmd, op)
            self._once((op, column), ("draft_candidates", column))
            values = cmd.get("values")
            if (
                not isinstance(values, list)
                or not all(isinstance(v, str) for v in values)
                or len(set(values)) != len(values)
                or len(values) > plan.categorical_max
            ):
                raise Refused(f"{op} of {column!r} needs a list of at most {plan.categorical_max} distinct values")
            assert plan.sigma_counts is not None
            charges, answer = summed(
                table.value_counts(column, values), plan.sigma_counts, 1.0, counts_query(column, len(values))
            )
        else:
            raise Refused(f"{op} is not a step of a schema draft")
        self.done.add((op, "" if op == "draft_profile" else str(cmd["column"])))
        return charges, answer
