"""The public facts of a complete run of the AIM family (aim, distaim, flaim) and the charges they
imply (ledger entries), in order: the planning total when the schedule was planned; a target's 2-ways; with
``--find-dependence`` every column's 1-way released together, each screened pair and each chosen
pair on merged bins (``methods.dependence``); the 1-way marginal of every column; then per round:
AIM and DistAIM a selection and the measurement of the marginal it picked;
FLAIM, per local step ``k`` of ``s``, a selection in each silo and (``k < s``) each silo's local
measurement of its choice, then (variant private with sampled silos, all rounds but the last)
every column's 1-way over the sampled silos, then the sums of the chosen marginals. Candidates
are the workload's downward closure with AIM's weights ``w_r = sum_s |r & s|``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from ..methods import allocation, target_starts

#: The charges of a run, by kind.
TOTAL, ONEWAY, SELECT, MEASURE, LOCAL, PROXY, SUMS = "total", "oneway", "select", "measure", "local", "proxy", "sums"
TARGET = "target"
#: ``--find-dependence`` (``methods.dependence``): the grouping 1-ways, each pair's screen, each chosen pair.
GROUPING, SCREEN, PAIR = "grouping", "screen", "pair"


class Charge(NamedTuple):
    """One charge a run makes (one ledger entry): its kind, its round (0 before the rounds), its local step and, for
    a 1-way or a target's 2-way, its (other) column."""

    kind: str
    round: int
    step: int = 0
    column: int = -1


@dataclass
class AimRun:
    """A complete run of the AIM family, as its ledger declares it."""

    method: str
    variant: str
    columns: list[str]
    shape: list[int]
    closure: dict[tuple[int, ...], float]
    rounds: int
    steps: int
    planned: bool
    #: The target column's index (``details.options.target``), or None.
    target: int | None = None
    #: The share of the budget (after the planning total) its 2-ways spend.
    target_share: float = 0.0
    #: The groups a column's cells merge into in its 2-way with the target (``details.target_groups``),
    #: or None: every cell.
    target_groups: int | None = None
    #: With ``--find-dependence``: the screened pairs, the chosen ones (column indices) and each
    #: column's groups (screen, measurement), from ``details.dependence``.
    screened: list[tuple[int, ...]] | None = None
    chosen: list[tuple[int, ...]] | None = None
    groups: list[tuple[list[int], list[int]]] | None = None
    #: Its share of the budget for the screen and the chosen pairs (``details.options.dependence_share``).
    dependence_share: float = 0.0
    #: FLAIM's sample rate (``details.options.sample_rate``, else the default for its silos).
    sample_rate: float = 1.0
    #: A DistAIM or FLAIM that ran AIM's annealing schedule (``details.schedule.anneals``).
    anneals: bool = False

    def merged_cells(self, pair: tuple[int, ...], measured: bool) -> int:
        """Cells of a pair on merged bins: the product of its columns' numbers of groups (the screen's,
        or the measurement's)."""
        assert self.groups is not None
        return math.prod(len(self.groups[j][int(measured)]) for j in pair)

    def target_pair(self, column: int) -> tuple[int, ...]:
        """The target's 2-way with ``column``, in schema order."""
        assert self.target is not None
        return tuple(sorted((column, self.target)))

    @staticmethod
    def recorded_sample_rate(details: dict) -> float:
        """FLAIM's sample rate as its ledger records it: ``details.options.sample_rate``, else the
        default for its number of silos (``details.silos``)."""
        rate = (details.get("options") or {}).get("sample_rate")
        return float(rate or allocation.default_sample_rate(int(details.get("silos") or 1)))

    def target_cells(self, pair: tuple[int, ...]) -> int:
        """Cells of the target's 2-way with the column of ``pair``: on its merged bins
        (``target.target_starts``), or every cell."""
        names = [self.columns[i] for i in pair]
        starts = target_starts(
            names, [int(self.shape[i]) for i in pair], names[pair.index(self.target)], self.target_groups
        )
        return self.cells(pair) if starts is None else math.prod(len(s) for s in starts)

    def name(self, clique: tuple[int, ...]) -> str:
        """A marginal as a query names it: its columns, in schema order, joined by ', '."""
        return ", ".join(self.columns[i] for i in clique)

    def cells(self, clique: tuple[int, ...]) -> int:
        """The marginal's cells: the product of its columns' sizes."""
        return math.prod(int(self.shape[i]) for i in clique)

    @property
    def proxy_rounds(self) -> bool:
        """Whether the run measures every 1-way again in rounds 1..T-1 (``allocation.flaim_proxy_rounds``)."""
        return self.method == "flaim" and allocation.flaim_proxy_rounds(self.variant, self.sample_rate)

    @property
    def pooled_sums(self) -> bool:
        """Whether a round's chosen marginals are each summed over every silo that chose (private
        FLAIM), not over the silos that chose it (``methods.flaim``)."""
        return self.method == "flaim" and allocation.flaim_pooled_sums(self.variant)

    def candidates(self) -> dict[tuple[int, ...], float]:
        """What a selection chooses among, before the model-size filter: the closure (private FLAIM:
        without its 1-ways, unless it has nothing else)."""
        if self.method == "flaim" and self.variant == "private":
            return {c: w for c, w in self.closure.items() if len(c) > 1} or self.closure
        return self.closure

    def charges(self) -> list[Charge]:
        """Every charge of the run, in order (module docstring)."""
        out = [Charge(TOTAL, 0)] if self.planned else []
        if self.target is not None:
            out += [Charge(TARGET, 0, column=j) for j in range(len(self.columns)) if j != self.target]
        if self.screened is not None and self.chosen is not None:
            out.append(Charge(GROUPING, 0))
            out += [Charge(SCREEN, 0, column=k) for k in range(len(self.screened))]
            out += [Charge(PAIR, 0, column=k) for k in range(len(self.chosen))]
        out += [Charge(ONEWAY, 0, column=j) for j in range(len(self.columns))]
        for t in range(1, self.rounds + 1):
            if self.method != "flaim":
                out += [Charge(SELECT, t), Charge(MEASURE, t)]
                continue
            for k in range(1, self.steps + 1):
                out.append(Charge(SELECT, t, k))
                if k < self.steps:
                    out.append(Charge(LOCAL, t, k))
            if self.proxy_rounds and t < self.rounds:
                out.append(Charge(PROXY, t))
            out.append(Charge(SUMS, t))
        return out
