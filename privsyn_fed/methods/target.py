"""A target column (``synth --target Y``, ``target=`` in Python): a label the release should predict
well. A public choice, recorded in the ledger with its share of the budget.

Before its other releases a run measures the target's 2-way marginal with each of the other
``d - 1`` columns, with a share ``s`` (``target_share``) of the budget ``rho`` left after a planning
total: each at ``sigma = sqrt((d - 1) / (2 s rho))`` (count marginals of sensitivity 1; released
together they are one Gaussian of L2 sensitivity ``sqrt(d - 1)`` at that sigma, the same cost).
The AIM family fits them with its other measurements (and adds them to its workload,
``workload.with_target``); Fed-TDA draws each synthetic row's label from them given the row's
other columns (``model.LabelTables``).

In the AIM family a column of more than ``TARGET_GROUPS`` cells enters its 2-way with the target
on merged bins (``coarse``): its cells in ``TARGET_GROUPS`` contiguous groups, the target's cells
kept. A record is still in one cell (sensitivity 1), and the noise is spread over fewer cells, so
a rare label's dependence on a many-celled column shows above it. The groups follow from the
schema alone; the ledger records ``details.target_groups``. Over secure computation the 2-ways
keep every cell (a party answers only declared count marginals).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..common import OptionError
from .base import option
from .coarse import MeasurePairs, Starts, group_starts

#: The default share of the budget (after the planning total) for the target's 2-ways.
TARGET_SHARE = 0.2
#: The AIM family merges a column's cells into this many groups in its 2-way with the target.
TARGET_GROUPS = 4


@dataclass
class TargetOptions:
    """The options of a release with a target column, shared by every method that takes one."""

    target: str | None = option(
        None,
        "a column the release should predict well (a label): its 2-way marginal with every other column is "
        "measured first with --target-share of the budget (aim, distaim and flaim also add them to the workload "
        "and measure a column of more than 4 cells in 4 merged groups there; fedtda, whose target must be "
        "categorical, draws each row's label from them given its other columns); public, recorded in the ledger",
        flag="--target",
        metavar="COLUMN",
        group="target",
    )
    target_share: float = option(
        TARGET_SHARE,
        "with --target, the share of the budget (after the planning total) spent measuring the target's "
        "2-ways, in (0, 1) (default {default})",
        flag="--target-share",
        metavar="S",
        group="target",
    )

    def validate_target(self) -> None:
        """Refuse a ``target_share`` outside (0, 1), or one given without a target."""
        if not 0 < self.target_share < 1:
            raise OptionError(f"target_share must lie in (0, 1), not {self.target_share}", "target_share")
        if self.target is None and self.target_share != TARGET_SHARE:
            raise OptionError("target_share is the share of a target's 2-ways: give a target too", "target_share")

    def check_target(self, schema) -> None:
        """Refuse a target that is not a column of ``schema``, or one with no other column."""
        if self.target is not None and self.target not in schema.names:
            raise OptionError(f"target column {self.target!r} is not in the schema", "target")
        if self.target is not None and len(schema.names) < 2:
            raise OptionError("a target needs at least one other column to predict it from", "target")


def target_pairs(names: Sequence[str], target: str) -> list[tuple[str, ...]]:
    """The target's 2-way marginal with every other column, each clique in schema order."""
    t = list(names).index(target)
    return [(names[min(j, t)], names[max(j, t)]) for j in range(len(names)) if j != t]


def share_sigma(rho: float, share: float, count: int) -> float:
    """``count`` marginals of L2 sensitivity 1 (or one release of sensitivity ``sqrt(count)``) that
    together spend ``share`` of ``rho``: ``sigma = sqrt(count / (2 share rho))``. A planned share of
    the budget measured before the rounds (a target's 2-ways; ``dependence``'s steps)."""
    return math.sqrt(count / (2.0 * share * rho))


def target_sigma(rho: float, share: float, n_columns: int) -> float:
    """The target's ``d - 1`` 2-ways spend ``share`` of ``rho``: ``sigma = sqrt((d - 1) / (2 share rho))``."""
    return share_sigma(rho, share, n_columns - 1)


def target_query(pair: Sequence[str]) -> str:
    """How the ledger names the AIM family's measurement of one of the target's 2-ways."""
    return f"marginal({', '.join(pair)}) with the target"


def target_starts(pair: Sequence[str], cells: Sequence[int], target: str, groups: int | None) -> Starts | None:
    """The groups of a target's 2-way (``coarse.group_starts``): the other column's cells in
    ``groups`` groups, the target's all kept; None (every cell) when nothing merges or ``groups``
    is None."""
    if groups is None or all(c <= groups for name, c in zip(pair, cells) if name != target):
        return None
    return tuple(tuple(range(c)) if name == target else group_starts(c, groups) for name, c in zip(pair, cells))


def measure_target(
    names: Sequence[str],
    shape: Sequence[int],
    opts: TargetOptions,
    rho: float,
    measure_pairs: MeasurePairs,
    groups: int | None = TARGET_GROUPS,
) -> list[tuple]:
    """With ``opts.target``: each of its 2-ways (``target_pairs``) measured by the caller's charged
    ``measure_pairs([(pair, starts, query), ...], sigma)`` at ``target_sigma`` of ``rho`` (the
    budget before them), on the merged bins ``target_starts`` gives (``(pair, y, sigma)``, or
    ``(pair, y, sigma, starts)`` when merged); without a target, nothing."""
    if opts.target is None:
        return []
    sigma = target_sigma(rho, opts.target_share, len(names))
    cells = dict(zip(names, shape))
    pairs = target_pairs(names, opts.target)
    starts = [target_starts(pair, [cells[c] for c in pair], opts.target, groups) for pair in pairs]
    measured = measure_pairs([(pair, s, target_query(pair)) for pair, s in zip(pairs, starts)], sigma)
    return [(p, y, sigma) if s is None else (p, y, sigma, s) for p, y, s in zip(pairs, measured, starts)]
