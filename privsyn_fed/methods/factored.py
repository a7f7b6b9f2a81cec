"""Large junction-tree nodes kept as their factors: their messages and marginals by contraction.

Triangulation can make a junction-tree node whose table is large while the potentials it holds are
a few small loss cliques: Adult's late models hold a node of 362,880 cells whose three loss cliques
have 368. Its belief is the product of those cliques' ``exp(theta_c - max theta_c)`` and the
messages it received, so it need not be built: a message out of it is that product without the
receiver's message, summed onto their separator (Shafer and Shenoy's message; HUGIN divides the
receiver's message out of the built table, the same quantity), and a loss clique's marginal is the
whole product summed onto the clique. Each is a tensor contraction (``Contraction``), two tables at
a time in the order of fewest multiply-adds (opt_einsum's dynamic programming, once per plan),
each pair as one batched matrix product: opt_einsum's own pairwise calls took 0.2 to 8 ms on
contractions of the same 760,000 multiply-adds, these 0.24 to 0.53 ms. ``FactoredNodes.build``
keeps a node so where its contractions cost less than the dense passes over its table (the rule at
``PASS_FLOPS``); ``mirror.Plan`` builds every other node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .clique_tree import CliqueTree
from .flat_sums import Sums
from .graphical import Clique, Domain

#: A node of fewer cells is always built.
FACTOR_CELLS = 1 << 16
#: A node is kept as factors where its contractions' multiply-adds, each contraction counted
#: ``CONTRACTION_FLOPS`` more for its calls, are at most ``PASS_FLOPS`` times the cells its dense
#: step passes over (``3 + 2 degree`` passes: potentials, exponentials, read, and each message
#: summed out of it and multiplied into it). Measured on Adult's models: a dense pass about 1.15 ns
#: a cell, a contraction 0.35 ns a multiply-add and 50 microseconds of calls.
PASS_FLOPS = 3.0
CONTRACTION_FLOPS = 150_000.0
#: A node with more tables than this (loss cliques and neighbours) is built: the search for the
#: order of fewest multiply-adds grows exponentially with them.
MOST_OPERANDS = 8


@dataclass
class Factored:
    """One node kept as factors: its loss cliques (indices into the plan's cliques), its tree
    neighbours in a fixed order, each neighbour's separator (shape), and the contractions: ``send[j]``
    onto the separator with ``j`` (every operand but ``j``'s message), ``read[k]`` onto the ``k``-th
    loss clique. Operands: the loss cliques' exponentials, then the neighbours' messages."""

    columns: Clique
    cliques: list[int]
    neighbours: list[int]
    separators: list[tuple[int, ...]]
    send: dict[int, Contraction] = field(default_factory=dict)
    read: list[Contraction] = field(default_factory=list)


def separator(nodes: Sequence[Clique], i: int, j: int) -> Clique:
    """The separator of nodes ``i`` and ``j`` in the order ``mirror.Plan`` lays its cells out."""
    first, second = nodes[min(i, j)], nodes[max(i, j)]
    return tuple(x for x in first if x in second)


class FactoredNodes:
    """The nodes of one plan kept as factors (module docstring), by tree index; ``offsets`` and
    ``shapes``: where each loss clique's cells lie in ``theta`` and its table's shape."""

    def __init__(self, nodes: dict[int, Factored], offsets: np.ndarray, shapes: Sequence[tuple[int, ...]]):
        self.nodes, self.offsets, self.shapes = nodes, offsets, shapes

    def exponentials(self, theta: np.ndarray) -> dict[int, list[np.ndarray]]:
        """Each factored node's loss cliques' ``exp(theta_k - max theta_k)``, as tables."""
        out = {}
        for n, node in self.nodes.items():
            parts = [theta[self.offsets[k] : self.offsets[k + 1]] for k in node.cliques]
            out[n] = [np.exp(t - t.max()).reshape(self.shapes[k]) for k, t in zip(node.cliques, parts)]
        return out

    def marginals(
        self, tables: dict[int, list[np.ndarray]], received: dict[int, dict[int, np.ndarray]], total: float
    ) -> list[tuple[int, np.ndarray]] | None:
        """Each factored node's loss cliques' marginals (clique index, flat values), each node's
        scaled to ``total`` by the sum of its first; None where a scale is not a positive finite
        number."""
        out = []
        for n, node in self.nodes.items():
            messages = _messages(node, received[n], None)
            reads = [read(*tables[n], *messages) for read in node.read]
            with np.errstate(divide="ignore"):
                scale = total / reads[0].sum()
            if not 0 < scale < math.inf:
                return None
            out += [(k, read.ravel() * scale) for k, read in zip(node.cliques, reads)]
        return out

    @classmethod
    def build(
        cls, domain: Domain, tree: CliqueTree, cliques: Sequence[Clique], homes: Sequence[int], offsets: np.ndarray
    ) -> FactoredNodes | None:
        """The nodes worth keeping as factors (module docstring), or None where there are none;
        ``homes``: each loss clique's node, ``offsets``: where its cells lie in ``theta``."""
        sizes = domain.sizes
        neighbours: dict[int, list[int]] = {n: [] for n in range(len(tree.nodes))}
        for i, j in tree.message_order():  # each edge both ways: the collecting direction first
            if i not in neighbours[j]:
                neighbours[j].append(i)
        kept: dict[int, Factored] = {}
        for n, columns in enumerate(tree.nodes):
            cells = math.prod(sizes[a] for a in columns)
            held = [k for k, h in enumerate(homes) if h == n]
            if cells < FACTOR_CELLS or not held or len(held) + len(neighbours[n]) > MOST_OPERANDS:
                continue
            seps = [separator(tree.nodes, n, j) for j in neighbours[n]]
            node = Factored(columns, held, neighbours[n], [tuple(sizes[a] for a in sep) for sep in seps])
            terms = [cliques[k] for k in held] + seps
            work = 0.0
            for m, j in enumerate(neighbours[n]):
                node.send[j] = Contraction([t for k, t in enumerate(terms) if k != len(held) + m], sizes, seps[m])
                work += node.send[j].flops + CONTRACTION_FLOPS
            for k in held:
                node.read.append(Contraction(terms, sizes, cliques[k]))
                work += node.read[-1].flops + CONTRACTION_FLOPS
            if work <= PASS_FLOPS * cells * (3 + 2 * len(neighbours[n])):
                kept[n] = node
        if len(kept) == len(tree.nodes):  # the plan builds at least one node: the smallest
            del kept[min(kept, key=lambda n: math.prod(sizes[a] for a in tree.nodes[n]))]
        return cls(kept, offsets, [tuple(sizes[a] for a in c) for c in cliques]) if kept else None


@dataclass
class Link:
    """One message ``i -> j`` of a schedule with factored nodes: from a built node (``summed`` over
    its ``sender`` cells) or a factored one (None: by contraction), into a built node (its
    ``receiver`` cells, each taking the message's cell ``to_receiver``) or a factored one (None:
    kept); ``back``: the index of the message ``j -> i`` if already sent, else -1."""

    i: int
    j: int
    back: int
    summed: Sums | None = None
    sender: slice | None = None
    receiver: slice | None = None
    to_receiver: np.ndarray | None = None


def send_links(
    beliefs: np.ndarray, links: Sequence[Link], factors: FactoredNodes, potentials: dict[int, list[np.ndarray]]
) -> dict[int, dict[int, np.ndarray]] | None:
    """Send every message in order: built nodes' beliefs take theirs in place (HUGIN, as
    ``messages.send``), factored nodes keep theirs (``potentials``: each factored node's loss
    cliques' exponentials). Returns each factored node's received messages by sender, or None
    where a message has an empty cell (the caller redoes the step another way)."""
    received: dict[int, dict[int, np.ndarray]] = {n: {} for n in factors.nodes}
    sent: list[np.ndarray] = []
    for link in links:
        if link.summed is not None:
            assert link.sender is not None
            m = link.summed(beliefs[link.sender])
            if link.back >= 0:
                m = m / sent[link.back]
        else:
            node = factors.nodes[link.i]
            m = node.send[link.j](*potentials[link.i], *_messages(node, received[link.i], link.j)).ravel()
        if not m.min() > 0:
            return None
        sent.append(m)
        if link.receiver is not None:
            beliefs[link.receiver] *= m[link.to_receiver]
        else:
            received[link.j][link.i] = m
    return received


def _messages(node: Factored, received: dict[int, np.ndarray], to: int | None) -> list[np.ndarray]:
    """The messages the node received, as tables over their separators, but ``to``'s."""
    return [received[j].reshape(shape) for j, shape in zip(node.neighbours, node.separators) if j != to]


class Contraction:
    """``sum`` over every column outside ``onto`` of the product of tables over ``terms``, as a table
    over ``onto`` in its order (module docstring): ``flops`` multiply-adds. A column of ``onto`` in
    no term (a separator's column that only the left-out message holds) is one the product does not
    depend on: the result repeats along it."""

    def __init__(self, terms: Sequence[Clique], sizes: dict[str, int], onto: Clique):
        import opt_einsum

        held = {a for t in terms for a in t}
        self.terms, self.onto = [tuple(t) for t in terms], tuple(onto)
        self.shape = tuple(sizes[a] for a in onto)
        #: The columns of ``onto`` some term holds, in its order: what the steps compute.
        self.held = tuple(a for a in onto if a in held)
        letters = {a: opt_einsum.get_symbol(k) for k, a in enumerate(sorted(held))}
        subscripts = ",".join("".join(letters[a] for a in t) for t in terms)
        shapes = [tuple(sizes[a] for a in t) for t in terms]
        path, info = opt_einsum.contract_path(
            subscripts + "->" + "".join(letters[a] for a in self.held),
            *shapes,
            shapes=True,
            optimize=opt_einsum.DynamicProgramming(minimize="flops"),
        )
        self.flops = float(info.opt_cost)
        #: Each step: the positions of the one or two tables it takes (the larger first), and the
        #: columns its result keeps.
        self.steps: list[tuple[tuple[int, ...], Clique]] = []
        left = list(self.terms)
        for number, taken in enumerate(path):
            taken = tuple(sorted(taken, reverse=True))
            parts = [left.pop(k) for k in taken]
            later = {a for t in left for a in t} | set(self.held)
            last = number == len(path) - 1
            out = self.held if last else tuple(a for a in dict.fromkeys(sum(parts, ())) if a in later)
            self.steps.append((taken, out))
            left.append(out)

    def __call__(self, *tables: np.ndarray) -> np.ndarray:
        """The contraction of ``tables`` (over the ``terms`` given at construction)."""
        left, cols = list(tables), list(self.terms)
        for taken, out in self.steps:
            if len(taken) == 1:
                left.append(summed_onto(left.pop(taken[0]), cols.pop(taken[0]), out))
            else:
                x, xs, y, ys = left.pop(taken[0]), cols.pop(taken[0]), left.pop(taken[1]), cols.pop(taken[1])
                left.append(_pair(x, xs, y, ys, out))
            cols.append(out)
        if self.held == self.onto:
            return left[0]
        spread = [n if a in self.held else 1 for a, n in zip(self.onto, self.shape)]
        return np.broadcast_to(left[0].reshape(spread), self.shape)


def _pair(x: np.ndarray, xs: Clique, y: np.ndarray, ys: Clique, out: Clique) -> np.ndarray:
    """``x * y`` (over columns ``xs`` and ``ys``) summed onto ``out``, as one batched matrix
    product: columns in both and in ``out`` batch it, those in both and not in ``out`` are summed
    by it; a column in one table only and not in ``out`` is summed out of that table first."""
    x_kept = tuple(a for a in xs if a in ys or a in out)
    x, xs = summed_onto(x, xs, x_kept), x_kept
    y_kept = tuple(a for a in ys if a in xs or a in out)
    y, ys = summed_onto(y, ys, y_kept), y_kept
    size = dict(zip(xs, x.shape)) | dict(zip(ys, y.shape))
    batch = [a for a in xs if a in ys and a in out]
    summed = [a for a in xs if a in ys and a not in out]
    only_x, only_y = [a for a in xs if a not in ys], [a for a in ys if a not in xs]
    lead = [size[a] for a in batch]
    x = np.transpose(x, [xs.index(a) for a in batch + only_x + summed])
    y = np.transpose(y, [ys.index(a) for a in batch + summed + only_y])
    product = np.matmul(
        x.reshape(lead + [math.prod(size[a] for a in only_x), math.prod(size[a] for a in summed)]),
        y.reshape(lead + [math.prod(size[a] for a in summed), math.prod(size[a] for a in only_y)]),
    )
    got = batch + only_x + only_y
    return np.transpose(product.reshape([size[a] for a in got]), [got.index(a) for a in out])


def summed_onto(table: np.ndarray, cols: Clique, onto: Clique) -> np.ndarray:
    """``table`` over ``cols`` summed onto ``onto`` (a subset) in its order."""
    drop = tuple(k for k, a in enumerate(cols) if a not in onto)
    kept = [a for a in cols if a in onto]
    out = table.sum(axis=drop) if drop else table
    return np.transpose(out, [kept.index(a) for a in onto])
