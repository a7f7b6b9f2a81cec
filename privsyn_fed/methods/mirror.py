"""mbi's mirror descent in numpy: the same estimator, no compilation, neither JAX nor mbi loaded.

The estimation problem is mbi's: potentials ``theta`` over the maximal measured cliques ``L``,
marginals ``mu = total * marginals(p_theta)`` with ``p_theta(x) ∝ exp(sum_C theta_C(x_C))``, and
the loss ``sum_i ||M_{r_i}(mu) - y_i||^2 / (2 sigma_i^2)``. The iterates are
``compiled.CarriedMirrorDescent``'s (mbi's ``MirrorDescent`` with Armijo line search, the current
marginals carried): ``theta' = theta - alpha grad``, accepted when
``loss - loss' >= alpha / 2 <grad, mu - mu'>`` (then ``alpha *= 1.01``), else ``alpha /= 2``;
``alpha`` starts at ``g * 2 / (L total)`` with mbi's Lipschitz constant ``L`` (``lipschitz``), the
total, unless given, mbi's minimum-variance estimate (``minimum_variance_total``), and ``g`` the
carried growth: 1 in mbi (and by default), where the 1% growth per accepted step spends hundreds
of steps regaining the ``g`` the previous refit of the same model had reached; ``pgm.ModelFitter``
starts each refit at the ratio ``alpha / (2 / (L total))`` the previous one ended at
(``last_growth``; the line search halves a step that is too long). The marginal
oracle is mbi's on CPU, HUGIN message passing in log space over mbi's junction tree for ``L``
(``clique_tree``): messages ``m_{i->j} = logsumexp_{C_i - C_j}(b_i - m_{j->i})``, ``b_j += m_{i->j}``;
then every belief normalised to ``total``. Here the same messages are computed on
``exp(b - max b)`` as sums and products (``Plan.marginals``), in log space only where that
underflows (``Plan.log_marginals``). Stopping follows mbi's ``estimate``: blocks of
``CALLBACK_EVERY`` steps, stopping once ``tol`` is met ``patience`` blocks in a row.

A step works on flat vectors through fixed index maps (``Plan``, ``flat_sums.Sums``): a few dozen numpy
calls whatever the model, so a small model's step takes tens of microseconds, and a step on a
model of half a million cells about as long as mbi's compiled one (benchmarks/README.md, "Flat
steps"); ``pgm.ModelFitter`` uses mbi's compiled program only above ``pgm.NUMPY_CELLS``. On two
or more cores, a step on a model of at least ``halves.SPLIT_CELLS`` cells does its large sums,
exponentials and messages in two halves, one on a helper thread, with the same bits (``halves``).
A node that triangulation makes large while it holds only a few small loss cliques is not built:
its messages and marginals are contractions of those cliques' tables and the messages it received
(``factored``), the same quantities to rounding.
"""

from __future__ import annotations

import contextlib
import math
from typing import Callable, Mapping, Sequence, TypeVar

import numpy as np

from ..model import aligned
from . import halves
from .clique_tree import junction_tree, maximal_subset, smallest_holding
from .coarse import group_sizes
from .factored import FactoredNodes, Link, send_links, separator
from .flat_sums import Sums, cell_map, joined
from .graphical import Clique, Domain, FittedModel, Measurement
from .messages import Message, node_cut, send, waves

T = TypeVar("T")

#: The potential a structural zero's cells are held at, in each loss clique holding it: their
#: probability is at most ``exp(ZERO_LOG)`` times the allowed cells' (about 1e-22).
ZERO_LOG = -50.0
#: Steps between two checks of the stopping rule (and two safe points for signals): mbi's
#: ``estimation.CALLBACK_EVERY``.
CALLBACK_EVERY = 50


def expanded_tables(
    potentials: Mapping[Clique, np.ndarray] | None, domain: Domain, cliques: Sequence[Sequence[str]]
) -> dict[Clique, np.ndarray]:
    """mbi's ``CliqueVector.expand`` in numpy: each old potential is added, broadcast, into the
    smallest new clique that holds it (mbi's ``reverse_clique_mapping``); other cliques start at zero."""
    targets: list[Clique] = [tuple(c) for c in cliques]
    tables = {cl: np.zeros(domain.cells(cl)) for cl in targets}
    for old, table in (potentials or {}).items():
        into = smallest_holding(old, targets, domain)
        if into is not None:
            tables[into] = tables[into] + aligned(np.asarray(table, dtype=float), old, into)
    return tables


def minimum_variance_total(measurements: Sequence[Measurement]) -> float:
    """mbi's ``minimum_variance_unbiased_total``: the inverse-variance weighted mean of the totals
    of the marginals on full cells (variance ``sigma^2`` times their cells), at least 1; 1 when
    there are none."""
    full = [m for m in measurements if m.starts is None]
    if not full:
        return 1.0
    totals = np.array([float(np.sum(m.values)) for m in full])
    weights = np.array([1.0 / (m.stddev**2 * np.size(m.values)) for m in full])
    return max(1.0, float(np.average(totals, weights=weights)))


def lipschitz(domain: Domain, measurements: Sequence[Measurement]) -> float:
    """mbi's ``calculate_l2_lipschitz_from_metadata``: the loss's Hessian is block-diagonal by
    maximal clique ``C``, so ``L = max_C sum_{M -> C} ||Q_M||^2 / sigma_M^2 * |C| / |c_M|``, where
    ``||Q||^2`` is 1 for a marginal and, on merged bins, the product of the largest groups' sizes."""
    maximal = maximal_subset([m.clique for m in measurements])
    blocks: dict[Clique, float] = {}
    for m in measurements:
        into = smallest_holding(m.clique, maximal, domain)
        assert into is not None  # the maximal cliques hold every measured one
        norm_sq = 1.0
        if m.starts is not None:
            norm_sq = float(math.prod(max(group_sizes(c, s)) for s, c in zip(m.starts, domain.cells(m.clique))))
        contribution = norm_sq / max(float(m.stddev), 1e-12) ** 2 * domain.size(into) / domain.size(m.clique)
        blocks[into] = blocks.get(into, 0.0) + contribution
    return max(blocks.values()) if blocks else 1.0


def zero_mask(
    table: Sequence[str], shape: Sequence[int], zeros: Sequence[tuple[Clique, np.ndarray]]
) -> np.ndarray | None:
    """For every cell of a table over ``table`` (row-major), whether its projection onto some
    structural zero's clique inside ``table`` is a zero (``zeros``: clique and boolean table); None
    when no zero's clique lies inside ``table``."""
    mask = None
    for clique, zero in zeros:
        if set(clique) <= set(table):
            hit = zero.ravel()[cell_map(table, shape, clique, zero.shape)]
            mask = hit if mask is None else mask | hit
    return mask


def held_at_zero(
    potentials: Mapping[Clique, np.ndarray], zeros: Sequence[tuple[Clique, np.ndarray]]
) -> dict[Clique, np.ndarray]:
    """``potentials`` with every cell ``zero_mask`` marks set to ``ZERO_LOG``: the model the numpy
    estimator's projection leaves, from potentials fitted with the zeros held another way."""
    out = {}
    for c, table in potentials.items():
        mask = zero_mask(c, table.shape, zeros)
        out[c] = table if mask is None else np.where(mask.reshape(table.shape), ZERO_LOG, table)
    return out


def _group_logsumexp(values: np.ndarray, order: np.ndarray, groups: int) -> np.ndarray:
    """``log sum exp`` of ``values`` within each of ``groups`` equal-sized groups (``order`` lists
    the values group by group), shifted by each group's maximum for stability."""
    table = values[order].reshape(groups, -1)
    top = table.max(axis=1)
    return np.log(np.exp(table - top[:, None]).sum(axis=1)) + top


class Plan:
    """The fixed structure of one fit as index arrays over flat vectors, so that one step is a few
    dozen numpy calls whatever the number of cliques and measurements.

    Vectors: ``theta`` and ``mu`` hold the loss cliques' tables one after another (row-major,
    ``tables`` splits them); the junction tree's beliefs hold its built nodes' tables likewise. A loss
    clique's potential is added into the smallest node holding it, and its marginal read off that
    same node (mbi's ``expand`` and ``project``): one pair of index arrays does both. A measurement
    ``y_i`` of clique ``r_i`` inside loss clique ``k`` (the smallest holding it) is ``G_i mu_k``
    with ``G_i`` summing cells (and, for ``coarse.BlockQuery``, merging groups of them), again a
    pair of index arrays; its gradient is the adjoint, the residual gathered back."""

    def __init__(
        self, domain: Domain, measurements: Sequence[Measurement], extra: Sequence[Clique] = (), factor: bool = True
    ):
        """``factor``: keep the nodes worth it as their factors (``factored``); False builds every node."""
        sizes = domain.sizes
        self.domain = domain
        self._inputs = (list(measurements), list(extra))
        self._every: Plan | None = None  # the plan with every node built, made where a step needs it
        self.cliques: list[Clique] = maximal_subset([m.clique for m in measurements] + list(extra))
        self.shapes = [domain.cells(c) for c in self.cliques]
        self.offsets = np.cumsum([0] + [math.prod(s) for s in self.shapes])
        tree = junction_tree(domain, self.cliques)
        homes = [tree.nodes.index(smallest_holding(c, tree.nodes, domain)) for c in self.cliques]
        #: The nodes kept as their factors (``factored``), or None where every node is built.
        self.factors = FactoredNodes.build(domain, tree, self.cliques, homes, self.offsets) if factor else None
        built = [n for n in range(len(tree.nodes)) if self.factors is None or n not in self.factors.nodes]
        position = {n: k for k, n in enumerate(built)}
        #: The built nodes, whose tables the beliefs hold one after another.
        self.nodes: list[Clique] = [tree.nodes[n] for n in built]
        self.node_shapes = [tuple(sizes[a] for a in c) for c in self.nodes]
        #: The built nodes' cells (what one step's message passing touches, a few times over).
        self.cells = sum(math.prod(s) for s in self.node_shapes)
        node_offsets = np.cumsum([0] + [math.prod(s) for s in self.node_shapes])
        self.starts = node_offsets[:-1].astype(np.intp)
        self.node_of_cell = np.repeat(np.arange(len(self.nodes)), np.diff(node_offsets))
        #: The node where the beliefs split in two halves of about equal cells for two threads, or None.
        self.cut = node_cut(node_offsets) if halves.split(self.cells) else None
        cells = [slice(int(a), int(b)) for a, b in zip(node_offsets[:-1], node_offsets[1:])]
        into, home_cells = [], []
        for k, c in enumerate(self.cliques):
            if homes[k] in position:  # a factored node's cliques are read off its factors
                n = position[homes[k]]
                into.append(self.offsets[k] + cell_map(self.nodes[n], self.node_shapes[n], c, self.shapes[k]))
                home_cells.append(np.arange(cells[n].start, cells[n].stop))
        #: theta[clique_cell] is added into beliefs[node_cell]; mu[clique_cell] sums beliefs[node_cell].
        self.clique_cell, self.node_cell = joined(into), joined(home_cells)
        #: Each loss clique cell's home node (whose scale to ``total`` its marginal takes).
        self.home_node = np.repeat(np.array([position.get(h, 0) for h in homes], dtype=np.intp), np.diff(self.offsets))
        halfway = self.cells // 2 if self.cut is not None else None
        self._into_nodes = Sums(self.node_cell, self.clique_cell, self.cells, int(self.offsets[-1]), halfway)
        #: Where the beliefs part into two halves of equal cells for two threads (None: one thread), and
        #: where the nodes' parts start in each half.
        self.halfway = halfway if self._into_nodes.halves is not None else None
        if self.halfway is not None:
            self._parts = (
                self.starts[self.starts < halfway],
                np.union1d([halfway], self.starts[self.starts > halfway]) - halfway,
            )
        self._out_of_nodes = self._into_nodes.transposed()
        self.messages: list[Message] = []
        #: The messages where some nodes are factored (``factored.Link``; ``messages`` is then empty).
        self.links: list[Link] = []
        sent: dict[tuple[int, int], int] = {}
        for i, j in tree.message_order():
            sep = separator(tree.nodes, i, j)
            sep_shape = tuple(sizes[x] for x in sep)
            link = Link(i, j, sent.get((j, i), -1))
            if i in position:
                p = position[i]
                from_sender = cell_map(self.nodes[p], self.node_shapes[p], sep, sep_shape)
                link.summed = Sums(from_sender, np.arange(from_sender.size), math.prod(sep_shape), from_sender.size)
                link.sender = cells[p]
            if j in position:
                link.receiver = cells[position[j]]
                link.to_receiver = cell_map(self.nodes[position[j]], self.node_shapes[position[j]], sep, sep_shape)
            if self.factors is not None:
                self.links.append(link)
                sent[(i, j)] = len(self.links) - 1
                continue
            assert link.summed is not None and link.sender is not None  # every node is built
            assert link.receiver is not None and link.to_receiver is not None
            grouped = np.argsort(link.summed.into, kind="stable")
            middle = link.to_receiver.size // 2 if halves.split(link.to_receiver.size) else 0
            self.messages.append(
                Message(link.sender, link.receiver, link.summed, link.to_receiver, grouped, link.back, middle)
            )
            sent[(i, j)] = len(self.messages) - 1
        self.waves = waves(self.messages)
        #: ``waves`` where some message is split for two threads, else None (sent one by one).
        self.runs = self.waves if any(m.middle or m.summed.halves is not None for m in self.messages) else None
        self._route(domain, measurements, sizes)

    def _route(self, domain: Domain, measurements: Sequence[Measurement], sizes: dict[str, int]) -> None:
        """Each measurement's cells, as sums of its loss clique's cells (``measured_cell`` for each
        ``mu`` cell in ``loss_cell``), its values and its precision ``1 / sigma^2`` per cell."""
        loss_index = {c: k for k, c in enumerate(self.cliques)}
        loss_cells, measured, values, precision, start = [], [], [], [], 0
        for m in measurements:
            clique = tuple(m.clique)
            k = loss_index.get(clique)
            if k is None:  # mbi's CliqueVector.project: the smallest loss clique holding it
                k = loss_index[smallest_holding(clique, self.cliques, domain)]
            target, shape = self.cliques[k], self.shapes[k]
            grid = np.indices(shape).reshape(len(shape), -1)
            coords, measured_shape = [], []
            starts = m.starts or [None] * len(clique)
            for a, group_starts in zip(clique, starts):
                coord = grid[target.index(a)]
                if group_starts is None:
                    coords.append(coord)
                    measured_shape.append(sizes[a])
                else:  # a merged marginal: the group each cell falls in
                    coords.append(np.searchsorted(np.asarray(group_starts), coord, side="right") - 1)
                    measured_shape.append(len(group_starts))
            flat = np.ravel_multi_index(coords, measured_shape) if clique else np.zeros(grid.shape[1], dtype=np.intp)
            y = np.asarray(m.values, dtype=float).ravel()
            loss_cells.append(self.offsets[k] + np.arange(grid.shape[1]))
            measured.append(start + flat)
            values.append(y)
            precision.append(np.full(y.size, 1.0 / max(float(m.stddev), 1e-12) ** 2))
            start += y.size
        self.loss_cell, self.measured_cell = joined(loss_cells), joined(measured)
        self.y, self.precision = joined(values, float), joined(precision, float)
        self._query = Sums(self.measured_cell, self.loss_cell, self.y.size, int(self.offsets[-1]))
        self._adjoint = self._query.transposed()

    def zero_cells(self, zeros: Sequence[tuple[Clique, np.ndarray]]) -> np.ndarray:
        """The ``theta`` cells, in every loss clique that holds a zero's columns, whose projection
        onto them is a structural zero (``zeros``: clique and boolean table; ``zero_mask``)."""
        out = []
        for k, c in enumerate(self.cliques):
            mask = zero_mask(c, self.shapes[k], zeros)
            if mask is not None:
                out.append(self.offsets[k] + np.flatnonzero(mask))
        return joined(out)

    def flatten(self, tables: Sequence[np.ndarray]) -> np.ndarray:
        """The loss cliques' tables (in ``cliques`` order) as one vector."""
        return joined([np.asarray(t, dtype=float).ravel() for t in tables], float)

    def tables(self, vector: np.ndarray) -> list[np.ndarray]:
        """``flatten``'s inverse: one table per loss clique."""
        return [vector[a:b].reshape(s) for a, b, s in zip(self.offsets[:-1], self.offsets[1:], self.shapes)]

    def _node_logs(self, theta: np.ndarray) -> np.ndarray:
        """Each junction-tree node's log potential: the loss cliques' potentials it holds."""
        return self._into_nodes(theta)

    def marginals(self, theta: np.ndarray, total: float) -> np.ndarray:
        """``mu``: HUGIN message passing (module docstring), every loss clique's marginal scaled to
        ``total``. Computed on ``exp(b - max b)`` per node (sums and products, no logarithms); if a
        message has an empty cell (a separator value whose probability underflows) or a belief's
        sum is not a positive finite number, the step is recomputed in log space as mbi does it."""
        if self.factors is not None:
            mu = self._factored_marginals(theta, total)
            return mu if mu is not None else self.every().marginals(theta, total)
        beliefs = self.shifted(theta)
        if not send(beliefs, self.messages, self.runs):
            return self.log_marginals(theta, total)
        scales = self.scales(beliefs, total)
        if scales is None:
            return self.log_marginals(theta, total)
        return self.read(beliefs) * scales[self.home_node]  # scaled once summed: fewer cells

    def scales(self, beliefs: np.ndarray, total: float) -> np.ndarray | None:
        """Each built node's factor to ``total`` (None where a belief underflowed or overflowed)."""

        def sums(first: int, end: int) -> np.ndarray:
            a, b = self._span(first, end)
            return np.add.reduceat(beliefs[a:b], self.starts[first:end] - a)

        with np.errstate(over="ignore", divide="ignore"):  # caught just below
            scales = total / np.concatenate(self._by_nodes(sums))
        return scales if np.all((scales > 0) & (scales < math.inf)) else None

    def _factored_marginals(self, theta: np.ndarray, total: float) -> np.ndarray | None:
        """``marginals`` with the factored nodes' messages and marginals by contraction
        (``factored``); None where a message has an empty cell or a scale is not finite."""
        assert self.factors is not None
        beliefs = self.shifted(theta)
        tables = self.factors.exponentials(theta)
        received = send_links(beliefs, self.links, self.factors, tables)
        scales = None if received is None else self.scales(beliefs, total)
        if received is None or scales is None:
            return None
        factors = self.factors
        mu, read = halves.both(
            lambda: self.read(beliefs) * scales[self.home_node],
            lambda: factors.marginals(tables, received, total),
        )
        if read is None:
            return None
        for k, values in read:
            mu[self.offsets[k] : self.offsets[k + 1]] = values
        return mu

    def every(self) -> Plan:
        """This plan with every node built (itself where none is factored)."""
        if self.factors is None:
            return self
        if self._every is None:
            self._every = Plan(self.domain, *self._inputs, factor=False)
        return self._every

    def shifted(self, theta: np.ndarray) -> np.ndarray:
        """Each node's ``exp(b - max b)``, ``b`` its log potential. In two halves of equal cells where
        the plan splits: each half's logs and the maxima of the node parts it holds, then (a node
        cut by the halfway point taking the larger of its two maxima) each half's exponentials."""
        if self.halfway is None:
            logs = self._node_logs(theta)
            return np.exp(logs - np.maximum.reduceat(logs, self.starts)[self.node_of_cell])
        into, (first_parts, second_parts) = self._into_nodes, self._parts
        half, cells = self.halfway, self.cells

        def logs_and_maxima(logs: np.ndarray, parts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return logs, np.maximum.reduceat(logs, parts)

        (first, first_max), (second, second_max) = halves.both(
            lambda: logs_and_maxima(into.upper(theta), first_parts),
            lambda: logs_and_maxima(into.lower(theta), second_parts),
        )
        if len(first_max) + len(second_max) > len(self.nodes):  # a node across the halfway point
            first_max[-1] = np.maximum(first_max[-1], second_max[0])  # as the whole node's maximum (NaN kept)
            second_max = second_max[1:]
        maxima = np.concatenate([first_max, second_max])
        beliefs = np.empty(cells)

        def exponentials(logs: np.ndarray, a: int, b: int) -> None:
            np.exp(np.subtract(logs, maxima[self.node_of_cell[a:b]], out=beliefs[a:b]), out=beliefs[a:b])

        halves.both(lambda: exponentials(first, 0, half), lambda: exponentials(second, half, cells))
        return beliefs

    def _span(self, first: int, end: int) -> tuple[int, int]:
        """The belief cells of the nodes from ``first`` up to ``end``."""
        return int(self.starts[first]), int(self.starts[end]) if end < len(self.nodes) else self.cells

    def _by_nodes(self, work: Callable[[int, int], T]) -> list[T]:
        """``work(first, end)`` over every node: in two halves at ``cut`` on two threads, else once."""
        if self.cut is None:
            return [work(0, len(self.nodes))]
        cut = self.cut
        return list(halves.both(lambda: work(0, cut), lambda: work(cut, len(self.nodes))))

    def log_marginals(self, theta: np.ndarray, total: float) -> np.ndarray:
        """``marginals`` with log-space messages throughout (mbi's ``message_passing_hugin``)."""
        if self.factors is not None:
            return self.every().log_marginals(theta, total)
        beliefs = self._node_logs(theta)
        sent: list[np.ndarray] = []
        for msg in self.messages:
            m = _group_logsumexp(beliefs[msg.sender], msg.grouped, msg.summed.size)
            if msg.back >= 0:  # constant over the summed cells: subtract after summing
                m = m - sent[msg.back]
            sent.append(m)
            beliefs[msg.receiver] += m[msg.to_receiver]
        top = np.maximum.reduceat(beliefs, self.starts)[self.node_of_cell]
        shifted = np.exp(beliefs - top)
        log_z = np.log(np.add.reduceat(shifted, self.starts))[self.node_of_cell]
        return self.read(np.exp(beliefs - top - log_z + math.log(total)))

    def read(self, beliefs: np.ndarray) -> np.ndarray:
        """Each loss clique's marginal summed out of its home node's table."""
        return self._out_of_nodes(beliefs)

    def loss(self, mu: np.ndarray) -> tuple[float, np.ndarray]:
        """The loss at ``mu`` and its gradient: ``r = G mu - y``, ``sum precision r^2 / 2`` and
        ``G^T (precision r)``."""
        residual = self._query(mu) - self.y
        weighted = self.precision * residual
        return 0.5 * float(weighted @ residual), self._adjoint(weighted)


class NumpyMirrorDescent:
    """mbi's mirror descent with the current marginals carried (module docstring), in numpy."""

    #: The last fit's final step as a multiple of mbi's first step ``2 / (L total)``.
    last_growth: float = 1.0

    def estimate(
        self,
        domain: Domain,
        measurements: Sequence[Measurement],
        known_total: float | None = None,
        iters: int = 1000,
        callback_fn: Callable | None = None,
        warm_start: FittedModel | None = None,
        tol: float | None = None,
        patience: int = 2,
        growth: float = 1.0,
        zeros: Sequence[tuple[Clique, np.ndarray]] = (),
    ) -> FittedModel:
        """Fit potentials to ``measurements`` with at most ``iters`` steps, rounded up to whole
        blocks of ``CALLBACK_EVERY`` as mbi does, warm-started from ``warm_start``'s potentials, the
        first step ``growth`` times mbi's; ``last_growth`` is then the last step's ratio to mbi's.
        ``zeros`` (``methods.zeros``): their cliques join the model, and every step holds their
        cells' potentials at ``ZERO_LOG`` (a projection: those cells keep probability about 0)."""
        total = float(minimum_variance_total(measurements) if known_total is None else known_total)
        plan = Plan(domain, measurements, [c for c, _ in zeros])
        tables = expanded_tables(None if warm_start is None else warm_start.potentials, domain, plan.cliques)
        theta = plan.flatten([tables[c] for c in plan.cliques])
        held = plan.zero_cells(zeros)
        theta[held] = ZERO_LOG
        first = 2.0 / (lipschitz(domain, measurements) * total)
        with halves.one_blas_thread() if plan.cut is not None else contextlib.nullcontext():
            theta, mu = self._descend(
                plan, theta, held, total, first * growth, first, iters, callback_fn, tol, patience
            )
        return FittedModel(
            domain,
            list(plan.cliques),
            dict(zip(plan.cliques, plan.tables(theta))),
            dict(zip(plan.cliques, plan.tables(mu))),
            total,
        )

    def _descend(
        self,
        plan: Plan,
        theta: np.ndarray,
        held: np.ndarray,
        total: float,
        alpha: float,
        first: float,
        iters: int,
        callback_fn: Callable | None,
        tol: float | None,
        patience: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``estimate``'s steps from ``theta`` at step size ``alpha`` (mbi's first: ``first``); the
        last ``theta`` and its marginals ``mu``."""
        mu = plan.marginals(theta, total)  # the first of mbi's steps: the starting marginals
        loss, grad = plan.loss(mu)
        steps = 1
        prev_loss, stalls = math.inf, 0
        for _ in range(math.ceil(iters / CALLBACK_EVERY)):
            for _ in range(CALLBACK_EVERY - steps):
                theta2 = theta - alpha * grad
                theta2[held] = ZERO_LOG
                mu2 = plan.marginals(theta2, total)
                loss2, grad2 = plan.loss(mu2)
                decrease = float(grad @ (mu - mu2))
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
        self.last_growth = alpha / first
        return theta, mu
