"""Workloads of marginal queries and their downward closure (public, data-independent).

The default workload follows the FLAIM evaluation: a seeded sample of 64 three-way marginals
(all of them when there are fewer). Cliques are tuples of column indices in schema order, and
every list here is sorted, so runs do not depend on hash order.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

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
#: Beyond this many K-way marginals a sample is drawn without listing them all.
_ENUMERATE_LIMIT = 1_000_000


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


def check_size(workload: Sequence[Clique], shape: Sequence[int], names: Sequence[str]) -> None:
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
    total = sum(n_cells(cl, shape) for cl in downward_closure(workload))
    if total > MAX_CANDIDATE_CELLS:
        raise OptionError(
            f"the workload's candidate marginals have {total:,} cells together, more than "
            f"{MAX_CANDIDATE_CELLS:,}; use fewer bins or categories, a smaller workload_size "
            "or workload_degree",
            "workload_size",
            "workload_degree",
        )


def downward_closure(workload: Sequence[Clique]) -> dict[Clique, float]:
    """Every non-empty subset ``r`` of a workload clique, with weight ``w_r = sum_s |r & s|``."""
    subsets: set[Clique] = set()
    for s in workload:
        for k in range(1, len(s) + 1):
            subsets.update(itertools.combinations(s, k))
    weights = {r: float(sum(len(set(r) & set(s)) for s in workload)) for r in subsets}
    return dict(sorted(weights.items(), key=lambda kv: (len(kv[0]), kv[0])))


def n_cells(clique: Sequence[int], shape: Sequence[int]) -> int:
    """Cells of the marginal over ``clique``: the product of its columns' sizes (1 when empty)."""
    return math.prod(int(shape[i]) for i in clique)  # Python integers: no wrap-around at 2^63
