"""mbi's junction tree without mbi: the same maximal cliques, a valid tree over them, and the
orders the estimators and the reader walk it in.

mbi's ``make_junction_tree`` joins every measured clique's columns in a graph; when that graph is a
tree its own edges are the maximal cliques, otherwise it triangulates the graph along a greedy
elimination order and takes the triangulation's maximal cliques; the tree is a maximum spanning
tree of the cliques weighted by how many columns they share (a forest where they share none),
which has the running-intersection property. ``junction_tree`` builds the same cliques and such a
tree (Kruskal's algorithm; ties may pick another of the equally valid trees, which changes no
marginal) without mbi's domains, graphs or networkx.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

from .graphical import Clique, Domain


def maximal_subset(cliques: Sequence[Sequence[str]]) -> list[Clique]:
    """mbi's ``maximal_subset``: the cliques not nested in another, longest first (then in the
    order given), each set once."""
    result: list[Clique] = []
    kept: list[frozenset[str]] = []
    seen: set[frozenset[str]] = set()
    for _, group in itertools.groupby(sorted((tuple(c) for c in cliques), key=len, reverse=True), key=len):
        new = []
        for cl in group:
            s = frozenset(cl)
            if s not in seen:
                seen.add(s)
                if not any(s <= m for m in kept):
                    result.append(cl)
                    new.append(s)
        kept.extend(new)
    return result


def smallest_holding(clique: Sequence[str], cliques: Sequence[Clique], domain: Domain) -> Clique | None:
    """The clique of ``cliques`` with the fewest cells that holds every column of ``clique`` (the
    first such on ties, as mbi's ``clique_mapping``); None when none does."""
    holding = [c for c in cliques if set(clique) <= set(c)]
    return min(holding, key=domain.size) if holding else None


@dataclass(frozen=True)
class CliqueTree:
    """A junction tree: its maximal cliques (``nodes``, columns in the domain's order) and its edges
    as pairs of node indices (a forest when the model is disconnected)."""

    nodes: list[Clique]
    edges: list[tuple[int, int]]

    def neighbours(self) -> list[list[int]]:
        """Each node's neighbours."""
        out: list[list[int]] = [[] for _ in self.nodes]
        for i, j in self.edges:
            out[i].append(j)
            out[j].append(i)
        return out

    def preorder(self) -> list[tuple[int, int]]:
        """``(node, parent)`` in depth-first preorder from each component's first node (parent -1 at
        a root): parents always before their children."""
        around, seen, out = self.neighbours(), set(), []
        for root in range(len(self.nodes)):
            if root in seen:
                continue
            seen.add(root)
            todo = [(root, -1)]
            while todo:
                node, parent = todo.pop()
                out.append((node, parent))
                for other in reversed(around[node]):
                    if other not in seen:
                        seen.add(other)
                        todo.append((other, node))
        return out

    def message_order(self) -> list[tuple[int, int]]:
        """Every directed edge once, each node sending to a neighbour only after hearing from all its
        others: the messages towards each root (children first), then back out (parents first)."""
        order = self.preorder()
        up = [(node, parent) for node, parent in reversed(order) if parent >= 0]
        return up + [(parent, node) for node, parent in order if parent >= 0]


def junction_tree(domain: Domain, cliques: Sequence[Sequence[str]]) -> CliqueTree:
    """mbi's junction tree for ``cliques`` (module docstring)."""
    nodes = sorted(domain.canonical(c) for c in triangulated_cliques(domain, cliques))
    pairs = sorted(
        ((len(set(a) & set(b)), i, j) for (i, a), (j, b) in itertools.combinations(enumerate(nodes), 2)),
        key=lambda t: -t[0],
    )
    component = list(range(len(nodes)))

    def find(i: int) -> int:
        while component[i] != i:
            component[i] = component[component[i]]
            i = component[i]
        return i

    edges = []
    for shared, i, j in pairs:
        if shared and find(i) != find(j):
            component[find(i)] = find(j)
            edges.append((i, j))
    return CliqueTree(nodes, edges)


def junction_tree_cells(domain: Domain, cliques: Sequence[Sequence[str]]) -> int:
    """The cells of the junction tree mbi builds for ``cliques`` (its maximal cliques' tables),
    the same number as ``mbi.junction_tree.hypothetical_model_size`` times ``2**20 / 8``."""
    return int(sum(domain.size(c) for c in triangulated_cliques(domain, cliques)))


def cells_with_each(domain: Domain, cliques: Sequence[Sequence[str]], extra: Iterable[Sequence[str]]) -> Iterator[int]:
    """``junction_tree_cells(domain, cliques + [e])`` for each ``e`` in ``extra``, in turn: the
    graph of ``cliques`` joined once, each ``e``'s columns then joined in a copy of it."""
    base = _closed_neighbourhoods(list(domain.attributes), cliques)
    for e in extra:
        around = {a: set(n) for a, n in base.items()}
        for a in e:
            around[a].update(e)
        yield int(sum(domain.size(c) for c in _triangulated(domain, around)))


def triangulated_cliques(domain: Domain, cliques: Sequence[Sequence[str]]) -> list[frozenset[str]]:
    """The maximal cliques of mbi's triangulation of the graph joining each clique's columns: a
    tree's own edges, else along mbi's greedy elimination order."""
    return _triangulated(domain, _closed_neighbourhoods(list(domain.attributes), cliques))


def _closed_neighbourhoods(attrs: list[str], cliques: Sequence[Sequence[str]]) -> dict[str, set[str]]:
    """Each column's closed neighbourhood in the graph joining each clique's columns (the union of
    the cliques holding it; empty for a column in none)."""
    around: dict[str, set[str]] = {a: set() for a in attrs}
    for cl in cliques:
        for a in cl:
            around[a].update(cl)
    return around


def _triangulated(domain: Domain, around: dict[str, set[str]]) -> list[frozenset[str]]:
    """``triangulated_cliques`` of the graph given by its closed neighbourhoods (changed in place)."""
    attrs = list(domain.attributes)
    neighbours = {a: around[a] - {a} for a in attrs}
    edges = sum(len(n) for n in neighbours.values()) // 2
    if edges and edges == len(attrs) - 1 and _connected(neighbours):
        return [frozenset((a, b)) for a in attrs for b in neighbours[a] if a < b]  # a tree: its edges
    return _maximal_cliques(neighbours, _greedy_order(domain.sizes, attrs, around))


def _connected(neighbours: dict[str, set[str]]) -> bool:
    start = next(iter(neighbours))
    seen, todo = {start}, [start]
    while todo:
        for b in neighbours[todo.pop()]:
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return len(seen) == len(neighbours)


def _greedy_order(sizes: dict[str, int], attrs: list[str], around: dict[str, set[str]]) -> list[str]:
    """mbi's ``greedy_order`` (not stochastic): repeatedly eliminate the first attribute, in domain
    order, whose neighbourhood (``around``: the union of the cliques holding it, changed in place)
    has the fewest cells.

    The neighbourhoods are kept as sets rather than recomputed from the cliques: eliminating ``v``
    replaces the cliques holding it by their union less ``v``, so every other member ``b`` of that
    union gains the union's columns and loses ``v``, and no other neighbourhood changes."""
    cost = {a: math.prod(sizes[b] for b in around[a]) for a in attrs}
    order, unmarked = [], list(attrs)
    for _ in range(len(unmarked)):
        best = min(unmarked, key=cost.__getitem__)  # the first of the cheapest
        order.append(best)
        unmarked.remove(best)
        joined = around.pop(best) - {best}
        for b in joined:
            around[b] |= joined
            around[b].discard(best)
            cost[b] = math.prod(sizes[c] for c in around[b])
    return order


def _maximal_cliques(neighbours: dict[str, set[str]], order: list[str]) -> list[frozenset[str]]:
    """The maximal cliques of the graph triangulated along the elimination ``order`` (mbi's
    ``_triangulated`` and ``networkx.find_cliques``): eliminating ``a`` joins its remaining
    neighbours, so ``{a} + remaining neighbours`` is a clique of the triangulation and every
    maximal clique is one of these."""
    work = {a: set(n) for a, n in neighbours.items()}
    found: list[frozenset[str]] = []
    for a in order:
        around = work.pop(a)
        for b in around:
            work[b] |= around - {b}
            work[b].discard(a)
        found.append(frozenset(around | {a}))
    return [c for c in found if not any(c < other for other in found)]
