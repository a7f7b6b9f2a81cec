"""Our junction tree (``methods.clique_tree``) against mbi's, and the numpy path's promise: a release
whose models are fitted in numpy loads neither JAX nor mbi."""

import subprocess
import sys

import numpy as np

from privsyn_fed.methods import clique_tree, compiled, pgm


def _random_models(count: int, seed: int):
    """Random domains and cliques: trees, forests, cycles, isolated columns, nested and repeated."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        d = int(rng.integers(2, 11))
        names = [f"c{i}" for i in range(d)]
        domain = pgm.make_domain(names, [int(n) for n in rng.integers(2, 20, d)])
        cliques = [
            tuple(str(a) for a in rng.choice(names, size=int(rng.integers(1, min(4, d) + 1)), replace=False))
            for _ in range(int(rng.integers(0, 9)))
        ]
        yield domain, cliques


def test_the_nodes_are_mbis_maximal_cliques_and_the_tree_is_a_junction_tree():
    """Same maximal cliques as mbi's ``make_junction_tree``; the edges form a forest in which the
    nodes holding any one column are connected (the running-intersection property), every measured
    clique lies in some node, and cliques sharing a column are in one tree."""
    from mbi import junction_tree

    for domain, cliques in _random_models(200, seed=7):
        tree = clique_tree.junction_tree(domain, cliques)
        ref, _ = junction_tree.make_junction_tree(compiled.mbi_domain(domain), cliques)
        assert sorted(tree.nodes) == sorted(tuple(c) for c in junction_tree.maximal_cliques(ref)), cliques
        assert len(tree.edges) == len(tree.nodes) - len({root for root, parent in tree.preorder() if parent < 0})
        for cl in cliques:
            assert any(set(cl) <= set(n) for n in tree.nodes)
        around = tree.neighbours()
        for a in domain.attributes:
            holding = {i for i, n in enumerate(tree.nodes) if a in n}
            start = next(iter(holding))
            seen, todo = {start}, [start]
            while todo:
                for j in around[todo.pop()]:
                    if j in holding and j not in seen:
                        seen.add(j)
                        todo.append(j)
            assert seen == holding, (a, tree)


def test_each_node_sends_once_it_has_heard_from_its_other_neighbours():
    for domain, cliques in _random_models(100, seed=8):
        tree = clique_tree.junction_tree(domain, cliques)
        order = tree.message_order()
        directed = {(i, j) for i, j in tree.edges} | {(j, i) for i, j in tree.edges}
        assert sorted(order) == sorted(directed)
        at = {m: k for k, m in enumerate(order)}
        around = tree.neighbours()
        for (i, j), k in at.items():
            assert all(at[(n, i)] < k for n in around[i] if n != j)


def test_the_elimination_order_is_mbis_greedy_order():
    """The neighbourhoods kept as sets (``_greedy_order``) give mbi's ``greedy_order`` exactly,
    ties included, on wider models than the tree test's."""
    from mbi import junction_tree

    rng = np.random.default_rng(11)
    for _ in range(300):
        d = int(rng.integers(1, 21))
        names = [f"c{i}" for i in range(d)]
        sizes = [int(n) for n in rng.choice([1, 2, 3, 5, 16, 32], d)]
        domain = pgm.make_domain(names, sizes)
        cliques = [
            tuple(str(a) for a in rng.choice(names, size=int(rng.integers(1, min(4, d) + 1)), replace=False))
            for _ in range(int(rng.integers(0, 30)))
        ]
        around = clique_tree._closed_neighbourhoods(names, cliques)
        ours = clique_tree._greedy_order(dict(zip(names, sizes)), names, around)
        assert ours == junction_tree.greedy_order(compiled.mbi_domain(domain), cliques)[0], cliques


def test_maximal_subset_is_mbis():
    from mbi.clique_utils import maximal_subset

    for _, cliques in _random_models(100, seed=9):
        assert clique_tree.maximal_subset(cliques) == maximal_subset(cliques)


def test_a_release_fitted_in_numpy_loads_neither_jax_nor_mbi():
    """A small AIM release (every model under ``NUMPY_CELLS``) from the package's entry point, then
    the same with ``compiled`` forced, which does load them: the check can fail."""
    script = (
        "import sys\n"
        "import privsyn_fed as pf\n"
        "from tests.conftest import SCHEMA, make_frame\n"
        "pf.synthesize([make_frame(300, 1), make_frame(300, 2)], 'aim', 1.0, 1e-9,"
        " schema=pf.Schema.from_dict(SCHEMA), seed=1, rounds=8)\n"
        "print(sorted(m for m in ('jax', 'mbi') if m in sys.modules))\n"
    )
    for cells, loaded in (("", "[]"), ("0", "['jax', 'mbi']")):
        env = {"PRIVSYN_FED_NUMPY_CELLS": cells, "PATH": "/usr/bin:/bin"}
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip().splitlines()[-1] == loaded
