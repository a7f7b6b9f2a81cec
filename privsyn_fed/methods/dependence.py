"""Finding dependence on small tables (``--find-dependence``): a planned share of the budget finds
which pairs of columns depend on each other and measures those pairs on merged bins (``coarse``),
before AIM's rounds.

A planned schedule (``allocation``) assumes every candidate shows the dependence a typical pair
shows (a tenth of its rows, in L1) at the schema's cells. On a small table with many numeric
columns that fails twice: a pair of 32-bin columns has 1,024 cells, whose noise buries any
dependence, and which pairs depend on each other is private. Here it is measured, on a few merged
bins per column. With the budget ``rho`` left after the planning total (and a target's 2-ways) and
the option's share ``s`` (``dependence_share``), before the 1-ways:

1. **Groups.** Every column's 1-way marginal, released together with ``GROUPING_SHARE`` of
   ``rho``: one Gaussian of L2 sensitivity ``sqrt(d)``, ``sigma_0 = sqrt(d / (2 g rho))``. Each
   column's cells are cut into at most ``k`` contiguous groups at the quantiles ``i / k`` of its
   noisy 1-way projected onto the histograms of the noisy total (``quantile_starts``).
   Post-processing; these 1-ways are fitted too.
2. **Screen.** Every pair of columns that the workload's candidates hold, ``P`` pairs, on at most
   ``SCREEN_GROUPS`` groups a column (a median split), with ``s / 2`` of ``rho``: each at
   ``sigma_1 = sqrt(P / (2 (s / 2) rho))``. A merged marginal has sensitivity 1 (``coarse``).
3. **Choose** (post-processing). A pair's dependence is
   ``dep = ||y - y_a y_b^T / n||_1 - sqrt(2/pi) sigma_1 c`` on its noisy merged marginal ``y``
   (clipped at 0) of ``c`` cells, margins ``y_a``, ``y_b`` and total ``n``: the L1 distance from the
   product of its margins, less what the noise alone gives. The pairs with ``dep > 0`` are taken in
   decreasing ``dep`` while they join two trees (Kruskal's maximum spanning forest, as in Chow-Liu
   trees and MST): at most ``d - 1`` pairs, so the model holds each once and its junction tree
   stays a forest of pairs.
4. **Measure.** The ``F`` chosen pairs on at most ``MEASURE_GROUPS`` groups a column, with the
   other ``s / 2`` of ``rho``: ``sigma_2 = sqrt(F / (2 (s / 2) rho))`` (nothing when ``F = 0``).
   Each chosen pair's screen and measurement are fitted with the other measurements through
   their merged-bin query; the model keeps every column's own cells.
5. **The rest.** The rounds are planned on the budget left (``allocation``: the planned rule
   reads only the noisy total and that budget), and the 1-ways and the rounds share it as without
   the step. The forest finds dependence between many-celled columns, which the rounds, measuring
   marginals at the schema's cells, cannot see on a small table; the rounds find what the forest's
   few groups merge away (benchmarks/README.md, "Finding dependence on small tables").

**When it runs.** ``find_dependence`` True runs the step and False leaves it out. Left unset (None,
the default), a rule decides from public values and the noisy total only: the step runs when the
schedule is planned (no ``rounds`` given), the run is not over MPC, and the noisy total ``n_hat``
times ``sqrt(rho)`` (``rho`` the release's whole budget, for one record) lies in ``AUTO_BAND``. That
product is the rows' size against the noise of a count; the band is where the step was measured to
pay: rows times epsilon about 2,500 to 12,000 at delta 1e-9. Below it the screen's noise buries the
dependence; above it the rounds find it at the schema's cells and the step's share is better spent
there. The ledger records the rule's inputs and outcome (``details.dependence_rule``), and
``audit`` recomputes it.

Every release is a Gaussian of planned noise; the ledger records the groups, every pair's ``dep``
and the pairs chosen (``details.dependence``), and ``audit`` recomputes the choice, the cells, the
sensitivities and the noise from them (``audit.dependence``). Over MPC the parties answer no
merged-bin marginal, so ``find_dependence`` True is refused there and the rule never runs the step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Hashable, Sequence, TypeVar

import numpy as np

from ..common import OptionError
from ..silo import SQRT_2_OVER_PI
from .base import option
from .coarse import MeasurePairs
from .histograms import projected
from .target import share_sigma

#: A column, as a name or an index.
C = TypeVar("C", bound=Hashable)
#: At most this many groups a column in the screen, and in the chosen pairs' measurements.
SCREEN_GROUPS = 2
MEASURE_GROUPS = 4
#: The share of the budget (after the planning total) spent on the grouping 1-ways.
GROUPING_SHARE = 0.1
#: The default share of the budget (after the planning total) for the screen and the chosen pairs.
DEPENDENCE_SHARE = 0.3
#: The rounds are planned on the budget the step leaves (releases before this rule planned none).
ROUNDS_AFTER = True
#: With ``find_dependence`` unset, the step runs when ``n_hat sqrt(rho)`` lies in this band (module docstring).
AUTO_BAND = (300.0, 1500.0)


@dataclass
class DependenceOptions:
    """The options of a release that finds dependence (AIM, DistAIM and FLAIM)."""

    find_dependence: bool | None = option(
        None,
        "aim, distaim and flaim: spend --dependence-share of the budget (and a tenth on 1-ways) finding which pairs of "
        "columns depend on each other, on merged bins: every pair of the workload screened, the most dependent "
        "ones (a forest) measured, then the rounds planned on the rest. By default a rule decides from the noisy "
        "row total: on where it pays, rows x epsilon about 2,500 to 12,000 at delta 1e-9 (noisy rows x sqrt(rho) in "
        f"{AUTO_BAND[0]:g}..{AUTO_BAND[1]:g}), off elsewhere and over --mpc (benchmarks/README.md, 'Finding "
        "dependence on small tables'); --find-dependence always runs it (not over --mpc), --no-find-dependence "
        "never",
        flag="--find-dependence",
        group="aim",
    )
    dependence_share: float = option(
        DEPENDENCE_SHARE,
        "when the dependence step runs, the share of the budget (after the planning total) for the screen and the "
        "chosen pairs, in (0, 0.9) (default {default})",
        flag="--dependence-share",
        metavar="S",
        group="aim",
    )

    def validate_dependence(self, rounds: int | None) -> None:
        """Refuse a ``dependence_share`` outside (0, 1 - GROUPING_SHARE), one given with
        ``find_dependence`` False, and ``find_dependence`` True with the options' ``rounds`` given (it
        plans the rounds)."""
        if not 0 < self.dependence_share < 1 - GROUPING_SHARE:
            raise OptionError(
                f"dependence_share must lie in (0, {1 - GROUPING_SHARE:g}), not {self.dependence_share}",
                "dependence_share",
            )
        if self.find_dependence is False and self.dependence_share != DEPENDENCE_SHARE:
            raise OptionError(
                "dependence_share is the share of the dependence step, which find_dependence False leaves out",
                "dependence_share",
            )
        if self.find_dependence and rounds is not None:
            raise OptionError(
                "find_dependence plans the rounds from the dependence it finds: leave rounds out", "find_dependence"
            )


def screened_pairs(candidates: Sequence[Sequence[str]], names: Sequence[str]) -> list[tuple[str, ...]]:
    """Every pair of columns that some candidate holds, each in schema order, sorted by schema order."""
    order = {n: i for i, n in enumerate(names)}
    pairs = {
        tuple(sorted((a, b), key=order.__getitem__)) for cl in candidates for i, a in enumerate(cl) for b in cl[i + 1 :]
    }
    return sorted(pairs, key=lambda p: (order[p[0]], order[p[1]]))


def quantile_starts(noisy: np.ndarray, groups: int, total: float) -> tuple[int, ...]:
    """At most ``groups`` contiguous groups of a column's cells, cut after the cell that holds each
    quantile ``i / groups`` of its noisy 1-way projected onto the histograms of ``total`` rows
    (``histograms.projected``): the groups' first cells, starting with 0."""
    h = projected(np.asarray(noisy, dtype=float), total)
    cells = h.size
    cum = np.cumsum(h)
    cuts = {int(np.searchsorted(cum, i / groups, side="left")) + 1 for i in range(1, groups)}
    return tuple(sorted({0} | {c for c in cuts if 0 < c < cells}))


def valid_starts(starts: Sequence[int], cells: int, groups: int) -> bool:
    """Whether ``starts`` are the first cells of at most ``groups`` contiguous groups of ``cells``."""
    s = list(starts)
    return 1 <= len(s) <= groups and s[0] == 0 and all(a < b for a, b in zip(s, s[1:])) and s[-1] < cells


def dependence(y: np.ndarray, sigma: float) -> float:
    """``||y - y_a y_b^T / n||_1 - sqrt(2/pi) sigma c`` for a noisy 2-way table ``y`` (clipped at 0
    first) of ``c`` cells: its distance from the product of its margins, beyond the noise's."""
    t = np.clip(np.asarray(y, dtype=float), 0.0, None)
    n = t.sum()
    if not n > 0:
        return -SQRT_2_OVER_PI * sigma * t.size
    product = np.outer(t.sum(axis=1), t.sum(axis=0)) / n
    return float(np.abs(t - product).sum()) - SQRT_2_OVER_PI * sigma * t.size


def spanning_forest(pairs: Sequence[tuple[C, ...]], scores: Sequence[float]) -> list[tuple[C, ...]]:
    """Kruskal's maximum spanning forest over the pairs with a positive score: in decreasing score
    (ties: the given order), each pair kept when it joins two trees."""
    parent: dict[C, C] = {}

    def root(a: C) -> C:
        while parent.get(a, a) != a:
            a = parent[a]
        return a

    kept = []
    for i in sorted(range(len(pairs)), key=lambda i: -scores[i]):
        if not scores[i] > 0:
            break
        a, b = root(pairs[i][0]), root(pairs[i][1])
        if a != b:
            parent[a] = b
            kept.append(pairs[i])
    return kept


GROUPING_QUERY = "every column's 1-way marginal (groups the screen's bins)"


def screen_query(pair: Sequence[str]) -> str:
    """How the ledger names the screen of one pair."""
    return f"marginal({', '.join(pair)}) on merged bins (screens dependence)"


def measure_query(pair: Sequence[str]) -> str:
    """How the ledger names the measurement of a chosen pair."""
    return f"marginal({', '.join(pair)}) on merged bins (a dependent pair)"


@dataclass
class Found:
    """What the step released and chose: the measurements to fit (``(clique, y, sigma)``, or
    ``(pair, y, sigma, starts)`` on merged bins), the screened pairs with their ``dep``, the pairs
    chosen and each column's groups (screen and measurement)."""

    measurements: list[tuple] = field(default_factory=list)
    pairs: list[tuple[str, ...]] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    chosen: list[tuple[str, ...]] = field(default_factory=list)
    screen_groups: dict[str, tuple[int, ...]] = field(default_factory=dict)
    measure_groups: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def record(self) -> dict:
        """What the ledger records (``details.dependence``): public, post-processing of releases."""
        return {
            "grouping_share": GROUPING_SHARE,
            "screen_groups": SCREEN_GROUPS,
            "measure_groups": MEASURE_GROUPS,
            "groups": {c: [list(self.screen_groups[c]), list(self.measure_groups[c])] for c in self.screen_groups},
            "pairs": [list(p) for p in self.pairs],
            "scores": [float(s) for s in self.scores],
            "chosen": [list(p) for p in self.chosen],
            "rounds_after": ROUNDS_AFTER,
        }


#: ``measure_oneways(sigma, query)``: every column's 1-way, concatenated, plus ``N(0, sigma^2)``
#: (one Gaussian of L2 sensitivity ``sqrt(d)``), charged by the caller's mechanism.
MeasureOneways = Callable[[float, str], np.ndarray]


def find_dependence(
    names: Sequence[str],
    shape: Sequence[int],
    candidates: Sequence[Sequence[str]],
    share: float,
    rho: float,
    n_hat: float,
    measure_oneways: MeasureOneways,
    measure_pairs: MeasurePairs,
) -> Found:
    """Steps 1 to 4 of the module docstring, ``rho`` the budget before them and ``n_hat`` the noisy
    planning total."""
    d = len(names)
    found = Found()
    sigma0 = share_sigma(rho, GROUPING_SHARE, d)
    y = measure_oneways(sigma0, GROUPING_QUERY)
    for name, part in zip(names, np.split(np.asarray(y, dtype=float), np.cumsum(shape)[:-1])):
        found.measurements.append(((name,), part, sigma0))
        found.screen_groups[name] = quantile_starts(part, SCREEN_GROUPS, n_hat)
        found.measure_groups[name] = quantile_starts(part, MEASURE_GROUPS, n_hat)
    found.pairs = screened_pairs(candidates, names)
    if not found.pairs:
        return found
    sigma1 = share_sigma(rho, share / 2.0, len(found.pairs))
    starts1 = [tuple(found.screen_groups[c] for c in pair) for pair in found.pairs]
    screened = measure_pairs([(p, s, screen_query(p)) for p, s in zip(found.pairs, starts1)], sigma1)
    screens = {}
    for pair, y, starts in zip(found.pairs, screened, starts1):
        screens[pair] = (np.asarray(y, dtype=float), starts)
        found.scores.append(dependence(screens[pair][0].reshape([len(s) for s in starts]), sigma1))
    found.chosen = spanning_forest(found.pairs, found.scores)
    if found.chosen:
        sigma2 = share_sigma(rho, share / 2.0, len(found.chosen))
        starts2 = [tuple(found.measure_groups[c] for c in pair) for pair in found.chosen]
        measured = measure_pairs([(p, s, measure_query(p)) for p, s in zip(found.chosen, starts2)], sigma2)
        for pair, y, starts in zip(found.chosen, measured, starts2):
            found.measurements.append((pair, y, sigma2, starts))
            found.measurements.append((pair, screens[pair][0], sigma1, screens[pair][1]))
    return found


def auto_rule(n_hat: float, rho: float, secure: bool) -> dict:
    """The rule that decides the step when ``find_dependence`` is unset (module docstring), as the
    ledger records it: its band, the signal ``n_hat sqrt(rho)`` and whether the step runs."""
    signal = n_hat * math.sqrt(rho)
    return {"band": list(AUTO_BAND), "signal": signal, "on": not secure and AUTO_BAND[0] <= signal <= AUTO_BAND[1]}


def measure_dependence(
    prob,
    opts,
    acc,
    n_hat: float | None,
    measure_oneways: MeasureOneways,
    measure_pairs: MeasurePairs,
    secure: bool = False,
) -> Found:
    """When the step runs: ``find_dependence`` on the run's public problem (``core.Problem``) with
    ``acc.remaining`` as its ``rho`` and the noisy total ``n_hat``, recorded in the ledger
    (``details.dependence``); else nothing. It runs when ``opts.find_dependence`` is True; when it
    is None and the schedule is planned (``n_hat`` given), as ``auto_rule`` decides on the release's
    budget ``acc.rho_budget`` (over MPC when ``secure``), recorded in ``details.dependence_rule``."""
    runs = bool(opts.find_dependence)
    if opts.find_dependence is None and n_hat is not None:
        rule = auto_rule(n_hat, acc.rho_budget, secure)
        acc.note(dependence_rule=rule)
        runs = rule["on"]
    if not runs:
        return Found()
    assert n_hat is not None  # find_dependence True needs a planned schedule (validate_dependence)
    found = find_dependence(
        prob.names,
        prob.shape,
        list(prob.candidates),
        opts.dependence_share,
        acc.remaining,
        n_hat,
        measure_oneways,
        measure_pairs,
    )
    acc.note(dependence=found.record())
    return found
