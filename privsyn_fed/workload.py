"""Workloads of marginal queries and their downward closure (public, data-independent).

The default workload follows the FLAIM evaluation: a seeded sample of 64 three-way marginals
(all of them when there are fewer). Cliques are tuples of column indices in schema order, and
every list here is sorted, so runs do not depend on hash order.
"""
from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

Clique = tuple[int, ...]

DEFAULT_DEGREE = 3
DEFAULT_SIZE = 64
DEFAULT_WORKLOAD_SEED = 0


def sample_workload(n_columns: int, degree: int = DEFAULT_DEGREE, size: int | None = DEFAULT_SIZE,
                    seed: int = DEFAULT_WORKLOAD_SEED) -> list[Clique]:
    """``size`` distinct ``degree``-way marginals drawn uniformly (all when ``size`` is None or
    at least their number)."""
    degree = min(degree, n_columns)
    all_cliques = list(itertools.combinations(range(n_columns), degree))
    if size is None or size >= len(all_cliques):
        return all_cliques
    pick = np.random.default_rng(seed).choice(len(all_cliques), size=size, replace=False)
    return sorted(all_cliques[i] for i in pick)


def downward_closure(workload: Sequence[Clique]) -> dict[Clique, float]:
    """Every non-empty subset ``r`` of a workload clique, with weight ``w_r = sum_s |r & s|``."""
    subsets = set()
    for s in workload:
        for k in range(1, len(s) + 1):
            subsets.update(itertools.combinations(s, k))
    weights = {r: float(sum(len(set(r) & set(s)) for s in workload)) for r in subsets}
    return dict(sorted(weights.items(), key=lambda kv: (len(kv[0]), kv[0])))


def n_cells(clique: Sequence[int], shape: Sequence[int]) -> int:
    return int(np.prod([shape[i] for i in clique], dtype=np.int64))
