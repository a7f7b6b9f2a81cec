"""mbi's mirror descent in numpy: the same estimator, no compilation.

The estimation problem is mbi's: potentials ``theta`` over the maximal measured cliques ``L``,
marginals ``mu = total * marginals(p_theta)`` with ``p_theta(x) ∝ exp(sum_C theta_C(x_C))``, and
the loss ``sum_i ||M_{r_i}(mu) - y_i||^2 / (2 sigma_i^2)``. The iterates are
``pgm.CarriedMirrorDescent``'s (mbi's ``MirrorDescent`` with Armijo line search, the current
marginals carried): ``theta' = theta - alpha grad``, accepted when
``loss - loss' >= alpha / 2 <grad, mu - mu'>`` (then ``alpha *= 1.01``), else ``alpha /= 2``;
``alpha`` starts at ``2 / (L total)`` with mbi's Lipschitz constant ``L``. The marginal oracle is
mbi's on CPU, HUGIN message passing in log space over the junction tree mbi builds for ``L``:
messages ``m_{i->j} = logsumexp_{C_i - C_j}(b_i - m_{j->i})`` in mbi's order, ``b_j += m_{i->j}``;
then every belief normalised to ``total``. Here the same messages are computed on
``exp(b - max b)`` as sums and products (``Plan.marginals``), in log space only where that
underflows (``Plan.log_marginals``). Stopping follows mbi's ``estimate``: blocks of
``CALLBACK_EVERY`` steps, stopping once ``tol`` is met ``patience`` blocks in a row.

Each step costs a few dozen numpy calls per junction-tree clique, so for small models (a few
thousand cells) a step takes well under a millisecond and nothing is compiled; for large models
XLA's fused program is faster per step and ``pgm.ModelFitter`` uses mbi instead (``pgm.NUMPY_CELLS``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable, Sequence

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)  # as pgm: mbi's objects hold float64
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mbi import CliqueVector, Domain, Factor, LinearMeasurement, MarkovRandomField, junction_tree
    from mbi.clique_utils import maximal_subset, reverse_clique_mapping
    from mbi.estimation import CALLBACK_EVERY, minimum_variance_unbiased_total
    from mbi.marginal_loss import calculate_l2_lipschitz_from_metadata

from ..model.junction import aligned  # noqa: E402
from .coarse import BlockQuery, coarsen, expand  # noqa: E402

Clique = tuple[str, ...]


def expanded_tables(potentials: CliqueVector | None, domain: Domain, cliques) -> dict[tuple[str, ...], np.ndarray]:
    """``CliqueVector.expand`` in numpy: each old potential is added, broadcast, into the smallest
    new clique that contains it (mbi's ``reverse_clique_mapping``); other cliques start at zero."""
    cliques = [tuple(c) for c in cliques]
    mapping = reverse_clique_mapping(cliques, potentials.cliques, domain=domain) if potentials else {}
    tables = {}
    for cl in cliques:
        table = np.zeros(domain.project(cl).shape)
        for old in mapping.get(cl, []):
            table = table + aligned(np.asarray(potentials[old].values, dtype=float), old, cl)
        tables[cl] = table
    return tables


def _broadcast(attrs: Sequence[str], target: Sequence[str], sizes: dict[str, int]) -> tuple[list[int], list[int]]:
    """The transpose and reshape that make a table over ``attrs`` broadcast against ``target``
    (``junction.aligned`` as two precomputed lists)."""
    order = sorted(range(len(attrs)), key=lambda i: list(target).index(attrs[i]))
    shape = [sizes[a] if a in attrs else 1 for a in target]
    return order, shape


def _logsumexp(table: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """``log sum exp`` over ``axes`` (kept as size-1 axes), shifted by the maximum for stability."""
    top = table.max(axis=axes, keepdims=True)
    return np.log(np.exp(table - top).sum(axis=axes, keepdims=True)) + top


@dataclass
class _Message:
    """One message ``i -> j``: the axes of ``C_i`` summed out, and how the result (``C_i``'s axes,
    size 1 on the summed ones) broadcasts into ``C_j``."""

    i: int
    j: int
    out: tuple[int, ...]
    order: list[int]  # axes of the squeezed message, in C_j's order
    shape: list[int]  # its shape broadcast into C_j
    back: int  # index of the message j -> i already sent, or -1


@dataclass
class _Measure:
    """A measurement routed to the loss clique ``k`` holding it: ``y`` over the clique in ``k``'s
    axis order (broadcast shape), the axes of ``k`` summed out, and its ``1 / sigma^2``."""

    k: int
    y: np.ndarray
    out: tuple[int, ...]
    precision: float
    #: A merged marginal (``coarse.BlockQuery``): per grouped axis of ``k``, its group starts and
    #: fine cells; empty for an identity query.
    groups: tuple[tuple[int, tuple[int, ...], int], ...] = ()

    def fitted(self, mu: np.ndarray) -> np.ndarray:
        """The query on the clique's marginal ``mu``: summed over ``out``, then merged in groups."""
        x = mu.sum(axis=self.out, keepdims=True) if self.out else mu
        if self.groups:
            x = coarsen(x, tuple(s for _, s, _ in self.groups), [a for a, _, _ in self.groups])
        return x

    def adjoint(self, diff: np.ndarray) -> np.ndarray:
        """The query's adjoint on a residual: each group's value repeated over its cells."""
        if not self.groups:
            return diff
        return expand(
            diff, tuple(s for _, s, _ in self.groups), [c for _, _, c in self.groups], [a for a, _, _ in self.groups]
        )


class Plan:
    """The fixed structure of one fit: loss cliques, junction tree, message schedule, routing."""

    def __init__(self, domain: Domain, measurements: Sequence[LinearMeasurement]):
        sizes = dict(zip(domain.attributes, domain.shape))
        self.domain = domain
        self.cliques: list[Clique] = [tuple(c) for c in maximal_subset([m.clique for m in measurements])]
        self.shapes = [tuple(sizes[a] for a in c) for c in self.cliques]
        jtree, _ = junction_tree.make_junction_tree(domain, self.cliques)
        self.nodes: list[Clique] = [tuple(c) for c in junction_tree.maximal_cliques(jtree)]
        self.node_shapes = [tuple(sizes[a] for a in c) for c in self.nodes]
        #: The junction tree's cells (what one step's message passing touches, a few times over).
        self.cells = sum(math.prod(s) for s in self.node_shapes)
        index = {c: n for n, c in enumerate(self.nodes)}
        # each loss clique's potential goes into the smallest node holding it (mbi's expand), and its
        # marginal is read off that same node (mbi's project)
        self.home = [min((n for n in self.nodes if set(c) <= set(n)), key=domain.size) for c in self.cliques]
        self.into_node = [(index[h], *_broadcast(c, h, sizes)) for c, h in zip(self.cliques, self.home)]
        self.from_node = []
        for c, h in zip(self.cliques, self.home):
            out = tuple(a for a, name in enumerate(h) if name not in c)
            kept = [name for name in h if name in c]
            self.from_node.append((index[h], out, [kept.index(a) for a in c]))
        self.messages: list[_Message] = []
        sent: dict[tuple[int, int], int] = {}
        for a, b in junction_tree.message_passing_order(jtree):
            i, j = index[tuple(a)], index[tuple(b)]
            ci, cj = self.nodes[i], self.nodes[j]
            out = tuple(k for k, name in enumerate(ci) if name not in cj)
            kept = [name for name in ci if name in cj]
            order, shape = _broadcast(kept, cj, sizes)
            self.messages.append(_Message(i, j, out, order, shape, sent.get((j, i), -1)))
            sent[(i, j)] = len(self.messages) - 1
        loss_index = {c: k for k, c in enumerate(self.cliques)}
        self.measures: list[_Measure] = []
        for m in measurements:
            clique = tuple(m.clique)
            k = loss_index.get(clique)
            if k is None:  # mbi's CliqueVector.project: the smallest loss clique holding it
                k = loss_index[min((c for c in self.cliques if set(clique) <= set(c)), key=domain.size)]
            target = self.cliques[k]
            out = tuple(a for a, name in enumerate(target) if name not in clique)
            stddev = max(float(m.stddev), 1e-12)
            groups: tuple[tuple[int, tuple[int, ...], int], ...] = ()
            if isinstance(m.query, BlockQuery):  # a merged marginal: its groups on the clique's axes of k
                shape = [len(st) for st in m.query.starts]
                groups = tuple(sorted((target.index(a), st, sizes[a]) for a, st in zip(clique, m.query.starts)))
            else:
                shape = [sizes[a] for a in clique]
            y = np.asarray(m.noisy_measurement, dtype=float).reshape(shape)
            self.measures.append(_Measure(k, aligned(y, clique, target), out, 1.0 / stddev**2, groups))

    def _node_logs(self, theta: list[np.ndarray]) -> list[np.ndarray]:
        """Each junction-tree node's log potential: the loss cliques' potentials it holds."""
        logs = [np.zeros(s) for s in self.node_shapes]
        for t, (n, order, shape) in zip(theta, self.into_node):
            logs[n] = logs[n] + np.transpose(t, order).reshape(shape)
        return logs

    def _to_receiver(self, msg: _Message, m: np.ndarray) -> np.ndarray:
        """A message over the sender's axes (size 1 where summed out) as its receiver broadcasts it."""
        kept = m.reshape([s for a, s in enumerate(m.shape) if a not in msg.out])
        return np.transpose(kept, msg.order).reshape(msg.shape)

    def marginals(self, theta: list[np.ndarray], total: float) -> list[np.ndarray]:
        """``mu``: HUGIN message passing (module docstring), every loss clique's marginal scaled to
        ``total``. Computed on ``exp(b - max b)`` per node with messages scaled to a maximum of 1
        (sums and products, no logarithms); if a message has an empty cell (a separator value whose
        probability underflows) or a whole belief underflows, the step is recomputed in log space
        as mbi does it."""
        beliefs = []
        for log in self._node_logs(theta):
            beliefs.append(np.exp(log - log.max()))
        sent: list[np.ndarray] = []
        for msg in self.messages:
            m = beliefs[msg.i].sum(axis=msg.out, keepdims=True) if msg.out else beliefs[msg.i]
            if msg.back >= 0:  # constant over the summed axes: divide after summing
                m = m / sent[msg.back]
            m = self._to_receiver(msg, m)
            top = m.max()
            if not m.min() > 0 or not np.isfinite(top):
                return self.log_marginals(theta, total)
            sent.append(m / top)
            beliefs[msg.j] = beliefs[msg.j] * sent[-1]
        scales = [total / float(b.sum()) for b in beliefs]
        if not all(0 < s < math.inf for s in scales):  # a whole belief underflowed (or nearly: total / z overflows)
            return self.log_marginals(theta, total)
        return self._read([b * s for b, s in zip(beliefs, scales)])

    def log_marginals(self, theta: list[np.ndarray], total: float) -> list[np.ndarray]:
        """``marginals`` with log-space messages throughout (mbi's ``message_passing_hugin``)."""
        beliefs = self._node_logs(theta)
        sent: list[np.ndarray] = []
        for msg in self.messages:
            m = _logsumexp(beliefs[msg.i], msg.out) if msg.out else beliefs[msg.i]
            if msg.back >= 0:  # constant over the summed axes: subtract after summing
                m = m - sent[msg.back]
            sent.append(self._to_receiver(msg, m))
            beliefs[msg.j] = beliefs[msg.j] + sent[-1]
        # ``sent[k]`` is message ``k`` broadcast into its receiver, so the message ``j -> i`` that
        # HUGIN takes out before ``i`` answers ``j`` is already in ``C_i``'s frame
        log_total = math.log(total)
        scaled = [np.exp(b - _logsumexp(b, tuple(range(b.ndim))) + log_total) for b in beliefs]
        return self._read(scaled)

    def _read(self, nodes: list[np.ndarray]) -> list[np.ndarray]:
        """Each loss clique's marginal summed out of its home node's table."""
        return [np.transpose(nodes[n].sum(axis=axes) if axes else nodes[n], order) for n, axes, order in self.from_node]

    def loss(self, mu: list[np.ndarray]) -> tuple[float, list[np.ndarray]]:
        """The loss at ``mu`` and its gradient (one table per loss clique)."""
        grad = [np.zeros(s) for s in self.shapes]
        value = 0.0
        for m in self.measures:
            diff = m.fitted(mu[m.k]) - m.y
            value += 0.5 * m.precision * float((diff * diff).sum())
            grad[m.k] = grad[m.k] + m.precision * m.adjoint(diff)
        return value, grad


class NumpyMirrorDescent:
    """``pgm.CarriedMirrorDescent`` in numpy (module docstring); ``estimate`` takes mbi's arguments
    and returns mbi's ``MarkovRandomField``, so either estimator warm-starts the other."""

    def estimate(
        self,
        domain: Domain,
        measurements: list[LinearMeasurement],
        known_total: float | None = None,
        iters: int = 1000,
        callback_fn: Callable | None = None,
        warm_start: MarkovRandomField | None = None,
        tol: float | None = None,
        patience: int = 2,
        plan: Plan | None = None,
    ) -> MarkovRandomField:
        """Fit potentials to ``measurements`` (identity queries, or ``coarse.BlockQuery``) with at most
        ``iters`` steps, rounded up to whole blocks of ``CALLBACK_EVERY`` as mbi does."""
        if known_total is None:
            known_total = minimum_variance_unbiased_total(measurements)
        total = float(known_total)
        plan = plan or Plan(domain, measurements)
        prev = None if warm_start is None else warm_start.potentials
        tables = expanded_tables(prev, domain, plan.cliques)
        theta = [tables[c] for c in plan.cliques]
        lipschitz = calculate_l2_lipschitz_from_metadata(domain, measurements) or 1.0
        alpha = 2.0 / (lipschitz * total)
        mu = plan.marginals(theta, total)  # the first of mbi's steps: the starting marginals
        loss, grad = plan.loss(mu)
        steps = 1
        prev_loss, stalls = math.inf, 0
        for _ in range(math.ceil(iters / CALLBACK_EVERY)):
            for _ in range(CALLBACK_EVERY - steps):
                theta2 = [t - alpha * g for t, g in zip(theta, grad)]
                mu2 = plan.marginals(theta2, total)
                loss2, grad2 = plan.loss(mu2)
                decrease = sum(float((g * (a - b)).sum()) for g, a, b in zip(grad, mu, mu2))
                if loss - loss2 >= 0.5 * alpha * decrease:
                    theta, mu, loss, grad, alpha = theta2, mu2, loss2, grad2, 1.01 * alpha
                else:
                    alpha = 0.5 * alpha
            steps = 0
            if callback_fn is not None:
                callback_fn(None)
            if tol is not None:
                converged = prev_loss - loss <= tol * max(abs(loss), 1.0)
                stalls = stalls + 1 if converged else 0
                prev_loss = loss
                if stalls >= patience:
                    break
        return MarkovRandomField(
            potentials=_clique_vector(domain, plan.cliques, theta),
            marginals=_clique_vector(domain, plan.cliques, mu),
            total=total,
        )


def _clique_vector(domain: Domain, cliques: list[Clique], tables: list[np.ndarray]) -> CliqueVector:
    """mbi's ``CliqueVector`` over ``cliques`` holding numpy ``tables`` (nothing is compiled)."""
    return CliqueVector(domain, cliques, {c: Factor(domain.project(c), t) for c, t in zip(cliques, tables)})


def junction_tree_cells(domain: Domain, cliques: Sequence[Sequence[str]]) -> int:
    """The cells of the junction tree mbi builds for ``cliques`` (``make_junction_tree``: a tree's
    own edges, else the graph triangulated along mbi's greedy elimination order; its maximal
    cliques), counted without building mbi's domains, graphs and spanning tree. The same number as
    ``mbi.junction_tree.hypothetical_model_size`` times ``2**20 / 8``, at a fraction of the cost."""
    sizes = dict(zip(domain.attributes, domain.shape))
    attrs = list(domain.attributes)
    neighbours: dict[str, set[str]] = {a: set() for a in attrs}
    for cl in cliques:
        for a in cl:
            neighbours[a].update(b for b in cl if b != a)
    edges = sum(len(n) for n in neighbours.values()) // 2
    if edges and edges == len(attrs) - 1 and _connected(neighbours):
        maximal = [frozenset((a, b)) for a in attrs for b in neighbours[a] if a < b]  # a tree: its edges
    else:
        maximal = _maximal_cliques(neighbours, _greedy_order(sizes, attrs, [frozenset(c) for c in cliques]))
    return sum(math.prod(sizes[a] for a in c) for c in maximal)


def _connected(neighbours: dict[str, set[str]]) -> bool:
    start = next(iter(neighbours))
    seen, todo = {start}, [start]
    while todo:
        for b in neighbours[todo.pop()]:
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return len(seen) == len(neighbours)


def _greedy_order(sizes: dict[str, int], attrs: list[str], cliques: list[frozenset[str]]) -> list[str]:
    """mbi's ``greedy_order`` (not stochastic): repeatedly eliminate the first attribute, in domain
    order, whose neighbourhood (the union of the cliques holding it) has the fewest cells."""
    order, unmarked, clique_set = [], list(attrs), set(cliques)
    for _ in range(len(unmarked)):
        best, best_cost = None, None
        for a in unmarked:
            union = frozenset().union(*(c for c in clique_set if a in c))
            cost = math.prod(sizes[b] for b in union)
            if best_cost is None or cost < best_cost:
                best, best_cost = a, cost
        assert best is not None
        order.append(best)
        unmarked.remove(best)
        holding = {c for c in clique_set if best in c}
        clique_set -= holding
        clique_set.add(frozenset().union(*holding) - {best})
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
