"""Workloads of marginal queries and their downward closure (public, data-independent).

The default workload follows the FLAIM evaluation: a seeded sample of 64 three-way marginals
(all of them when there are fewer). Cliques are tuples of column indices in schema order, and
every list here is sorted, so runs do not depend on hash order.

A declared workload (``declared_workload``; ``synth --workload FILE``) is a JSON list whose entries
are lists of column names, where ``"*"`` stands for every other column (``["PUMA", "*", "*"]``: every
pair of the other columns together with PUMA), or objects ``{"columns": [...], "weight": w}`` with a
whole-number weight from 1 to ``MAX_DECLARED_WEIGHT`` (default 1). A marginal given twice gets the sum
of its weights. What an entry's stars stand for is counted before it is listed: an entry is refused when
it stands for more than ``MAX_WORKLOAD`` marginals or its downward closure holds more than
``MAX_CANDIDATES``, a workload when its entries stand for more than ``MAX_EXPANSION`` together.
AIM's candidates are then weighted ``w_r = sum_s c_s |r & s|`` over the workload's
marginals ``s`` with weights ``c_s``.

A target column (``with_target``; ``synth --target Y``) adds every 2-way marginal with ``Y`` to the
workload (weight 1 each, summed with a weight it already has), so every candidate that holds ``Y``
gains weight ``|r & {Y}| (d - 1) + |r - {Y}|`` and the selection favours the label's marginals.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np

Clique = tuple[int, ...]

DEFAULT_DEGREE = 3
DEFAULT_SIZE = 64
DEFAULT_WORKLOAD_SEED = 0
#: Limits that keep a run's marginals in memory (checked before any budget is spent): cells of one
#: marginal, cells of all candidate marginals together (the workload's downward closure), and
#: the number of workload marginals.
MAX_MARGINAL_CELLS = 10_000_000
MAX_CANDIDATE_CELLS = 100_000_000
MAX_WORKLOAD = 100_000
#: The most candidate marginals (the workload's downward closure): every round of the AIM family
#: scores each of them against the model, so this bounds a round's time as well as its memory.
MAX_CANDIDATES = 20_000
#: The most marginals a declared workload's entries may stand for together, a marginal given twice
#: counted twice (counted before any is listed, so an entry's stars cannot run long).
MAX_EXPANSION = 10 * MAX_WORKLOAD
#: Beyond this many K-way marginals a sample is drawn without listing them all.
_ENUMERATE_LIMIT = 1_000_000
#: The largest weight of one declared marginal, and of one candidate (DistAIM's secure selection
#: scores with whole-number weights below 2^16).
MAX_DECLARED_WEIGHT = 100
MAX_CANDIDATE_WEIGHT = 1 << 16
#: The placeholder of a declared workload entry that stands for every other column.
ANY_COLUMN = "*"


def sample_workload(
    n_columns: int, degree: int = DEFAULT_DEGREE, size: int | None = DEFAULT_SIZE, seed: int = DEFAULT_WORKLOAD_SEED
) -> list[Clique]:
    """``size`` distinct ``degree``-way marginals drawn uniformly (all when ``size`` is None or
    at least their number)."""
    degree = min(degree, n_columns)
    count = math.comb(n_columns, degree)
    if count > _ENUMERATE_LIMIT and size is not None and size < count:
        rng, picked = np.random.default_rng(seed), set[Clique]()
        while len(picked) < size:  # distinct uniform K-subsets, without listing all of them
            picked.add(tuple(sorted(int(i) for i in rng.choice(n_columns, size=degree, replace=False))))
        return sorted(picked)
    all_cliques = list(itertools.combinations(range(n_columns), degree))
    if size is None or size >= len(all_cliques):
        return all_cliques
    pick = np.random.default_rng(seed).choice(len(all_cliques), size=size, replace=False)
    return sorted(all_cliques[i] for i in pick)


def workload_count(n_columns: int, degree: int, size: int | None) -> int:
    """How many marginals ``sample_workload`` returns."""
    count = math.comb(n_columns, min(degree, n_columns))
    return count if size is None else min(size, count)


def check_size(
    workload: Sequence[Clique], shape: Sequence[int], names: Sequence[str], weights: Sequence[int] | None = None
) -> None:
    """Refuse a workload whose marginals would not fit in memory (see the limits above)."""
    from ..common import OptionError

    if len(workload) > MAX_WORKLOAD:
        raise OptionError(
            f"the workload has {len(workload):,} marginals, more than {MAX_WORKLOAD:,}; give a smaller workload_size",
            "workload_size",
        )
    for cl in workload:
        if n_cells(cl, shape) > MAX_MARGINAL_CELLS:
            raise OptionError(
                f"the workload marginal ({', '.join(names[i] for i in cl)}) has "
                f"{n_cells(cl, shape):,} cells, more than {MAX_MARGINAL_CELLS:,}; use fewer bins "
                "or categories, or a smaller workload_degree",
                "workload_degree",
            )
    subsets = sum(2 ** len(cl) - 1 for cl in workload)
    if subsets > 10 * MAX_WORKLOAD:
        raise OptionError(
            f"the workload's {subsets:,} candidate marginals are too many; use a smaller "
            "workload_degree or workload_size",
            "workload_degree",
            "workload_size",
        )
    closure = downward_closure(workload, weights)  # at most 10 * MAX_WORKLOAD subsets listed: seconds at most
    if len(closure) > MAX_CANDIDATES:
        raise OptionError(
            f"the workload's downward closure has {len(closure):,} candidate marginals, more than the "
            f"{MAX_CANDIDATES:,} a run may score each round; use a smaller workload_degree or workload_size",
            "workload_degree",
            "workload_size",
        )
    if closure and max(closure.values()) > MAX_CANDIDATE_WEIGHT:
        raise OptionError(
            f"the workload weighs one candidate marginal {max(closure.values()):,.0f}, more than "
            f"{MAX_CANDIDATE_WEIGHT:,}; give smaller weights or fewer marginals",
            "workload",
        )
    total = sum(n_cells(cl, shape) for cl in closure)
    if total > MAX_CANDIDATE_CELLS:
        raise OptionError(
            f"the workload's candidate marginals have {total:,} cells together, more than "
            f"{MAX_CANDIDATE_CELLS:,}; use fewer bins or categories, a smaller workload_size "
            "or workload_degree",
            "workload_size",
            "workload_degree",
        )


def downward_closure(workload: Sequence[Clique], weights: Sequence[float] | None = None) -> dict[Clique, float]:
    """Every non-empty subset ``r`` of a workload clique, with weight ``w_r = sum_s c_s |r & s|``
    (``c_s``: the clique's weight in ``weights``, 1 when none are given)."""
    from ..common import checkpoint

    subsets: set[Clique] = set()
    # sum_s c_s |r & s| = sum_{i in r} (sum_{s holding i} c_s): one pass over the workload, one over r
    column_weight: dict[int, float] = {}
    c = [1.0] * len(workload) if weights is None else [float(w) for w in weights]
    for n, s in enumerate(workload):
        if n % 1024 == 0:
            checkpoint()
        for k in range(1, len(s) + 1):
            subsets.update(itertools.combinations(s, k))
    for s, w in zip(workload, c):
        for i in set(s):
            column_weight[i] = column_weight.get(i, 0.0) + w
    checkpoint()
    out = {r: float(sum(column_weight.get(i, 0.0) for i in set(r))) for r in subsets}
    return dict(sorted(out.items(), key=lambda kv: (len(kv[0]), kv[0])))


def declared_workload(entries: Any, names: Sequence[str]) -> tuple[list[Clique], list[int]]:
    """The cliques (sorted, distinct) and whole-number weights of a declared workload over the columns
    ``names`` (module docstring); ``OptionError`` (argument ``workload``) naming the entry at fault.
    What an entry's stars stand for is counted before it is listed, and refused beyond the limits."""
    from ..common import OptionError, checkpoint

    def fault(i: int, problem: str) -> OptionError:
        return OptionError(f"workload entry {i + 1}: {problem}", "workload")

    if not isinstance(entries, (list, tuple)) or not entries:
        raise OptionError("workload must be a non-empty list of marginals (lists of column names)", "workload")
    index = {n: i for i, n in enumerate(names)}
    weights: dict[Clique, int] = {}
    expansion = 0
    for i, entry in enumerate(entries):
        if i % 1024 == 0:
            checkpoint()
        columns, weight = entry, 1
        if isinstance(entry, dict):
            unknown = sorted(set(entry) - {"columns", "weight"})
            if unknown or "columns" not in entry:
                raise fault(i, 'an object entry has "columns" and optionally "weight"')
            columns, weight = entry["columns"], entry.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= MAX_DECLARED_WEIGHT:
            raise fault(i, f"the weight must be a whole number from 1 to {MAX_DECLARED_WEIGHT}, not {weight!r}")
        if not isinstance(columns, (list, tuple)) or not columns or not all(isinstance(c, str) for c in columns):
            raise fault(i, 'a marginal is a non-empty list of column names (or "*")')
        named = [c for c in columns if c != ANY_COLUMN]
        unknown = [c for c in named if c not in index]
        if unknown:
            raise fault(i, f"column {unknown[0]!r} is not in the schema")
        if len(set(named)) != len(named):
            raise fault(i, f"column {next(c for c in named if named.count(c) > 1)!r} is named twice")
        stars = len(columns) - len(named)
        others = [index[n] for n in names if n not in named]
        if stars > len(others):
            raise fault(i, f"{stars} '*' but only {len(others)} other columns")
        fixed = [index[c] for c in named]
        combos = math.comb(len(others), stars)
        if combos > MAX_WORKLOAD:
            raise fault(
                i, f"its '*' stand for {combos:,} marginals, more than the {MAX_WORKLOAD:,} a workload may hold"
            )
        # counted, not listed: the subsets of its marginals are a subset of the named columns with
        # up to `stars` of the others
        closure = 2 ** len(fixed) * sum(math.comb(len(others), j) for j in range(stars + 1)) - 1
        if stars and closure > MAX_CANDIDATES:  # a marginal without stars: its cells are checked first
            raise fault(
                i,
                f"its '*' stand for {combos:,} marginals, whose downward closure has {closure:,} candidate "
                f"marginals, more than the {MAX_CANDIDATES:,} a run may score each round; use fewer '*'",
            )
        expansion += combos
        if expansion > MAX_EXPANSION:
            raise fault(
                i,
                f"the entries up to this one stand for {expansion:,} marginals, more than the "
                f"{MAX_EXPANSION:,} a workload may expand to",
            )
        for n, more in enumerate(itertools.combinations(others, stars)):
            if n % 4096 == 4095:
                checkpoint()
            clique = tuple(sorted(fixed + list(more)))
            weights[clique] = weights.get(clique, 0) + weight
    cliques = sorted(weights)
    return cliques, [weights[c] for c in cliques]


def with_target(
    cliques: Sequence[Clique], weights: Sequence[int] | None, n_columns: int, target: int
) -> tuple[list[Clique], list[int]]:
    """The workload plus every 2-way marginal ``(target, j)``, weight 1 each (added to the weight of
    one the workload already holds); sorted, as ``declared_workload`` returns them."""
    summed = dict(zip(cliques, weights if weights is not None else [1] * len(cliques)))
    for j in range(n_columns):
        if j != target:
            pair = (min(j, target), max(j, target))
            summed[pair] = summed.get(pair, 0) + 1
    out = sorted(summed)
    return out, [summed[c] for c in out]


def n_cells(clique: Sequence[int], shape: Sequence[int]) -> int:
    """Cells of the marginal over ``clique``: the product of its columns' sizes (1 when empty)."""
    return math.prod(int(shape[i]) for i in clique)  # Python integers: no wrap-around at 2^63
