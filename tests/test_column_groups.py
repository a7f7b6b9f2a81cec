"""Marginals summed from the counts of groups of columns: the groups cover every clique within their
cell limit, and a store's grouped counts are each clique's own, in its own column order."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privsyn_fed.silo import column_groups, marginal_counts, rowstore
from privsyn_fed.silo.column_groups import covering_groups
from privsyn_fed.silo.rowstore import RowStore


@st.composite
def _problems(draw):
    d = draw(st.integers(1, 8))
    shape = draw(st.lists(st.integers(1, 12), min_size=d, max_size=d))
    clique = st.lists(st.integers(0, d - 1), unique=True, max_size=min(d, 4)).map(tuple)
    cliques = draw(st.lists(clique, min_size=1, max_size=25))
    cap = draw(st.integers(1, 5000))
    return shape, cliques, cap


@settings(max_examples=200, deadline=None)
@given(_problems())
def test_the_groups_cover_every_clique_within_the_cell_limit(problem):
    shape, cliques, cap = problem
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(column_groups, "GROUP_CELLS", cap)
        groups = covering_groups(cliques, shape)
    used = {j for c in cliques for j in c}
    assert all(list(g) == sorted(set(g)) and set(g) <= used for g in groups)
    for c in cliques:
        assert not c or any(set(c) <= set(g) for g in groups), (c, groups)
    for g in groups:  # within the limit, or a clique too large alone
        cells = math.prod(shape[j] for j in g)
        assert cells <= cap or any(tuple(sorted(c)) == g for c in cliques), (g, cells, cap)
    assert len(groups) <= len({tuple(sorted(c)) for c in cliques if c})


@settings(max_examples=60, deadline=None)
@given(_problems(), st.integers(1, 400), st.integers(1, 50), st.integers(8, 4000), st.integers(0, 2**32 - 1))
def test_a_stores_grouped_counts_are_each_cliques_own(problem, rows, slice_rows, table_bytes, seed):
    """Grouped (any limit, slices and passes; a store spilled to its file) against ``marginal_counts``
    of each clique, in the clique's own column order; the empty clique counts the rows."""
    shape, cliques, cap = problem
    rng = np.random.default_rng(seed)
    codes = np.column_stack([rng.integers(0, k, rows) for k in shape])
    store = RowStore(shape, [], spill_bytes=int(rng.integers(0, 2 * codes.size)))
    for part in np.array_split(codes, int(rng.integers(1, 5))):
        store.append(part, None)
    store.seal()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(column_groups, "GROUP_CELLS", cap)
        mp.setattr(rowstore, "GROUPED_ROWS", 0)
        mp.setattr(rowstore, "SLICE_ROWS", slice_rows)
        mp.setattr(rowstore, "TABLE_BYTES", table_bytes)
        grouped = store.marginals(shape, cliques + [()])
    assert set(grouped) == {tuple(c) for c in cliques} | {()}
    for c in cliques:
        assert np.array_equal(grouped[c], marginal_counts(codes, shape, c)), c
    assert grouped[()].tolist() == [rows]
    store.close()
