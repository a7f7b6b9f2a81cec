"""Graphical-model estimation: mbi's (private-pgm 2.x) estimator and semantics, fitted in numpy
for the models most releases fit, by mbi's compiled program for the largest.

``ModelFitter`` keeps mbi's semantics (mirror descent with Armijo line search on the Gaussian
log-likelihood ``sum_i ||M_{r_i}(p) - y_i||^2 / (2 sigma_i^2)``, warm-started from the previous
potentials) and adds what long runs need:
  * the step size carried too: a refit starts at the step size the previous one ended at (as a
    multiple of mbi's first step ``2 / (L total)``, at least 1), where mbi starts every refit at
    its first step and spends hundreds of steps growing it back (benchmarks/README.md, "Carried
    step sizes");
  * models up to ``NUMPY_CELLS`` junction-tree cells fitted in numpy (``mirror``: the same
    iterates, nothing compiled, and neither JAX nor mbi imported); larger ones by mbi's compiled
    program (``compiled``, imported then);
  * repeated measurements of one clique merged into one (inverse-variance weighting; the loss
    changes by a constant only);
  * an optional relative tolerance: a refit stops early once 50 iterations improve the loss by
    less than ``tol * loss`` twice in a row (mbi's own rule), instead of always running ``iters``;
  * structural zeros (``zeros``) held at probability 0 by either estimator, those whose cliques keep
    the model within ``zero_cells`` (``fitting_zeros``).
Every model is a ``graphical.FittedModel`` (numpy tables) whichever estimator fitted it.
"""

from __future__ import annotations

import itertools
import math
import os
from collections import Counter
from typing import Sequence

import numpy as np

from ..common import InputError, checkpoint
from ..model import JunctionTree, aligned
from .clique_tree import junction_tree, junction_tree_cells
from .factored import summed_onto
from .graphical import Domain, FittedModel, Measurement
from .mirror import NumpyMirrorDescent, expanded_tables, minimum_variance_total

#: Models whose junction tree has at most this many cells are fitted in numpy (``mirror``: the
#: same iterates, nothing compiled); larger ones by mbi's compiled program. A numpy step costs
#: about what a compiled one does up to about 3 million cells, and compiling costs 3.5 to 6 s a
#: refit; at 2 million cells numpy's fits also take half the memory (benchmarks/README.md, "Flat
#: steps", "Zeros held in models of every size"). 2**21 cells: the default
#: ``--max-model-size`` of 16 MB at 8 bytes a cell, so a release within it compiles nothing.
NUMPY_CELLS = 2**21
#: Environment variable: another such limit in cells (0 fits every model with mbi); not an option of
#: the methods, because the estimator's choice changes no release's distribution or privacy.
NUMPY_CELLS_ENV = "PRIVSYN_FED_NUMPY_CELLS"


def numpy_cells_setting() -> int:
    """The largest junction tree (cells) fitted in numpy: ``$PRIVSYN_FED_NUMPY_CELLS`` when set, else
    ``NUMPY_CELLS``; ``InputError`` unless it is a whole number of at least 0."""
    setting = os.environ.get(NUMPY_CELLS_ENV, "").strip()
    if not setting:
        return NUMPY_CELLS
    if not setting.isdigit():
        raise InputError(f"{NUMPY_CELLS_ENV} must be a whole number of cells (0 or more), not {setting!r}")
    return int(setting)


def memory_mb() -> float:
    """This machine's physical memory in MB."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20


def make_domain(names: Sequence[str], shape: Sequence[int]) -> Domain:
    """The ``Domain`` of the columns ``names`` with ``shape`` cells each."""
    return Domain(tuple(names), tuple(shape))


def merge_measurements(measurements: Sequence[tuple]) -> list[Measurement]:
    """One ``Measurement`` per clique and query: ``y = sum(y_i / s_i^2) / sum(1 / s_i^2)``,
    ``s = sum(1 / s_i^2)^(-1/2)``. A measurement is ``(clique, y, sigma)``, or ``(clique, y, sigma,
    starts)`` for a marginal on merged bins (``coarse``)."""
    groups: dict[tuple, list[tuple[np.ndarray, float]]] = {}
    for clique, y, sigma, *starts in measurements:
        key = (tuple(clique), tuple(tuple(s) for s in starts[0]) if starts else None)
        groups.setdefault(key, []).append((np.asarray(y, dtype=float), float(sigma)))
    merged = []
    for (clique, starts), items in groups.items():
        precision = sum(1.0 / s**2 for _, s in items)
        y = np.sum([v / s**2 for v, s in items], axis=0) / precision
        merged.append(Measurement(clique, y, float(precision**-0.5), starts))
    return merged


class ModelFitter:
    """Fits a Markov random field to noisy marginals, warm-starting round after round."""

    def __init__(
        self,
        domain: Domain,
        iters: int = 1000,
        tol: float | None = None,
        known_total: float | None = None,
        numpy_cells: int | None = None,
        zeros: Sequence[tuple[tuple[str, ...], np.ndarray]] = (),
    ):
        self.domain = domain
        #: Structural zeros (``methods.zeros``), held at probability 0 (those the last fit held:
        #: ``held``); those whose cliques would grow the model too far are left to rejection when
        #: rows are drawn.
        self.zeros = list(zeros)
        #: The largest junction tree (cells) the zeros' cliques may grow a model to (``final_fit``
        #: sets the method's model size limit; None: ``numpy_cells``).
        self.zero_cells: int | None = None
        self.held: list[tuple[tuple[str, ...], np.ndarray]] = []
        #: Models of at most this many junction-tree cells are fitted in numpy (default ``numpy_cells()``).
        self.numpy_cells = numpy_cells_setting() if numpy_cells is None else numpy_cells
        self.iters = iters
        self.tol = tol
        #: The model's total; None estimates it from the measurements (mbi's minimum variance).
        self.known_total = known_total
        self.model: FittedModel | None = None
        #: Where the last refit's step size ended, as a multiple of mbi's first step (``mirror``):
        #: the next refit starts there (at least at mbi's step).
        self.growth = 1.0

    def fit(self, measurements: Sequence[tuple], iters: int | None = None) -> FittedModel:
        """Fit the model to ``measurements`` (``(clique, y, sigma)`` or, merged bins, ``(clique, y,
        sigma, starts)``; repeated ones merged) with at most ``iters`` iterations (default the
        fitter's), warm-started from the previous fit."""
        merged = merge_measurements(measurements)
        total = minimum_variance_total(merged) if self.known_total is None else self.known_total
        steps, safe_point = iters or self.iters, lambda _: checkpoint()
        growth = max(1.0, self.growth)
        measured = [m.clique for m in merged]
        self.held = self.fitting_zeros(measured)
        if junction_tree_cells(self.domain, measured + [c for c, _ in self.held]) <= self.numpy_cells:
            estimator = NumpyMirrorDescent()
            self.model = estimator.estimate(
                self.domain,
                merged,
                total,
                steps,
                safe_point,
                warm_start=self.model,
                tol=self.tol,
                growth=growth,
                zeros=self.held,
            )
            self.growth = estimator.last_growth
        else:
            from . import compiled

            self.model, self.growth = compiled.estimate(
                self.domain,
                merged,
                self.model,
                iters=steps,
                tol=self.tol,
                known_total=total,
                callback_fn=safe_point,
                growth=growth,
                zeros=self.held,
            )
        return self.model

    def fitting_zeros(self, cliques: list[tuple[str, ...]]) -> list[tuple[tuple[str, ...], np.ndarray]]:
        """The zeros whose cliques join a model of ``cliques`` while its junction tree stays within
        ``zero_cells``: every one where they all fit, else the better of two greedy choices (more
        sets held, then more zero cells; ties to the first): the most zero cells first, and at each
        step the set that grows the tree least."""
        limit = self.numpy_cells if self.zero_cells is None else self.zero_cells
        cells = lambda held: junction_tree_cells(self.domain, cliques + [c for c, _ in held])  # noqa: E731
        if cells(self.zeros) <= limit:
            return list(self.zeros)
        by_size: list[tuple[tuple[str, ...], np.ndarray]] = []
        for zero in sorted(self.zeros, key=lambda z: -int(z[1].sum())):
            if cells(by_size + [zero]) <= limit:
                by_size.append(zero)
        by_growth: list[tuple[tuple[str, ...], np.ndarray]] = []
        left = list(self.zeros)
        while left:
            grown = [cells(by_growth + [zero]) for zero in left]
            best = int(np.argmin(grown))
            if grown[best] > limit:
                break
            by_growth.append(left.pop(best))
        return max((by_size, by_growth), key=lambda held: (len(held), sum(int(z.sum()) for _, z in held)))


class MarginalReader:
    """The fitted model's marginals over arbitrary cliques, computed in numpy.

    mbi's ``project`` compiles a new XLA program for every clique outside the model, which made
    scoring AIM's candidates cost seconds each. Here a clique inside a model clique is summed out
    of that clique's marginal. Any other clique is read off the junction-tree factorisation
    ``p(x) = p(x_root) prod_C p(x_{C - S_C} | x_{S_C})``: one upward pass of log-space messages
    over the junction tree gives the root marginal and every conditional (all entries in [0, 1],
    so contracting them cannot underflow to an all-zero table), and variable elimination along the
    tree (``eliminate``) sums out the variables outside the clique, over only the factors whose
    subtrees hold one of its columns (every other subtree sums to 1). Same quantity as mbi's
    variable elimination.
    """

    def __init__(self, model: FittedModel):
        self.total = float(model.total)
        self.marginals = {tuple(cl): np.asarray(mu, dtype=float) for cl, mu in model.marginals.items()}
        self._model = model
        self._tree: JunctionTree | None = None
        self._new: list[set[str]] | None = None  # each factor's columns outside its separator
        self._memo: Memo | None = None  # ``eliminate``'s messages, kept for the next cliques

    def _junction_tree(self) -> JunctionTree:
        domain, potentials = self._model.domain, self._model.potentials
        tree = junction_tree(domain, list(potentials))
        table = expanded_tables(potentials, domain, tree.nodes)
        order = tree.preorder()  # a forest when the model is disconnected
        factors: list[tuple[tuple[str, ...], np.ndarray]] = []
        position: dict[int, int] = {}
        for node, parent in reversed(order):  # children before their parent
            c = tree.nodes[node]
            position[node] = len(factors)
            if parent < 0:
                factors.append((c, np.exp(table[c] - logsumexp(table[c]))))
                continue
            above = tree.nodes[parent]
            sep = tuple(a for a in c if a in above)
            out = tuple(i for i, a in enumerate(c) if a not in sep)
            message = logsumexp(table[c], axis=out) if out else table[c]
            factors.append((c, np.exp(table[c] - aligned(message, sep, c))))
            table[above] = table[above] + aligned(message, sep, above)
        parents = [position[parent] if parent >= 0 else -1 for _, parent in reversed(order)]
        return JunctionTree(factors, parents, self.total)

    def factorisation(self) -> JunctionTree:
        """The model as normalised junction-tree factors (``model.factor_tree``: sampling, conditioning,
        likelihoods; savable)."""
        if self._tree is None:
            self._tree = self._junction_tree()
        return self._tree

    def log_likelihood(self, codes: np.ndarray, names: Sequence[str]) -> np.ndarray:
        """``log p(x)`` (natural log) of each encoded row (``JunctionTree.log_likelihood``)."""
        return self.factorisation().log_likelihood(codes, names)

    def __call__(self, clique: Sequence[str]) -> np.ndarray:
        """Flat float64 vector over ``clique``'s cells in row-major order."""
        clique = tuple(clique)
        for cl, mu in self.marginals.items():
            if set(clique) <= set(cl):
                return summed_onto(mu, cl, clique).ravel()
        tree = self.factorisation()
        needed = self._needed(tree, set(clique))
        if self._memo is None:
            self._memo = Memo(tree)
        out = eliminate(tree, needed, clique, self._memo)
        if out is None:
            out = _greedy_contraction(tree, needed, clique)
        return (out / out.sum() * self.total).ravel()

    def _needed(self, tree: JunctionTree, clique: set[str]) -> list[int]:
        """The factors the marginal over ``clique`` needs: those whose subtree introduces one of its
        columns. Any other subtree is a product of conditionals summed over all of its own new
        columns, which is 1, and a root's marginal sums to 1 too."""
        if self._new is None:
            self._new = [set(cl) - set(tree.separator(i)) for i, (cl, _) in enumerate(tree.factors)]
        hit = [False] * len(tree.factors)
        for i, new in enumerate(self._new):  # children before parents: a child's hit reaches its parent
            hit[i] = hit[i] or bool(new & clique)
            if hit[i] and tree.parents[i] >= 0:
                hit[tree.parents[i]] = True
        return [i for i, h in enumerate(hit) if h]


#: ``eliminate`` builds no table larger than this or the largest factor it reads.
ELIMINATION_CELLS = 1 << 16
#: ``Memo`` keeps messages of at most this many cells in all (8 bytes each).
MEMO_CELLS = 1 << 22


class Memo:
    """``eliminate``'s messages from non-root factors, kept for the next cliques read off the same
    tree. Factor ``i``'s message depends on the clique only through its columns in ``i``'s subtree
    (``below[i]``: nothing outside the subtree enters the sums), so it is kept under ``(i, those
    columns)`` with the largest product built for it, which a later read with a lower size limit
    declines as ``eliminate`` would. At most ``MEMO_CELLS`` cells are kept."""

    def __init__(self, tree: JunctionTree):
        self.below = [set(cols) for cols, _ in tree.factors]
        for i, p in enumerate(tree.parents):  # children before parents: a subtree is whole when reached
            if p >= 0:
                self.below[p] |= self.below[i]
        self.kept: dict[tuple[int, frozenset[str]], tuple[tuple[str, ...], np.ndarray, int]] = {}
        self.cells = 0  # kept so far

    def key(self, i: int, wanted: set[str]) -> tuple[int, frozenset[str]]:
        """The key of factor ``i``'s message towards a clique over ``wanted``."""
        return i, frozenset(wanted & self.below[i])

    def keep(self, key: tuple[int, frozenset[str]], message: tuple[tuple[str, ...], np.ndarray, int]) -> None:
        """Keep a message (columns, table, the largest product built for it), while there is room."""
        if self.cells + message[1].size <= MEMO_CELLS:
            self.kept[key] = message
            self.cells += message[1].size


def eliminate(
    tree: JunctionTree, needed: Sequence[int], clique: Sequence[str], memo: Memo | None = None
) -> np.ndarray | None:
    """``sum`` of ``prod_{i in needed} f_i`` over every column outside ``clique``, as a table over
    ``clique`` in its order: variable elimination along the tree, children before parents. A
    factor is first summed over its columns that neither its separator, ``clique`` nor a child's
    message holds; each child's message is then multiplied in by a two-operand einsum that sums out
    the columns nothing later needs (by the running intersection property, a column outside a
    separator appears nowhere above it). ``needed`` holds every parent of each of its factors.
    None where a product would hold more cells than ``ELIMINATION_CELLS`` and the largest factor
    (a clique's column carried up beside a large separator): ``_greedy_contraction`` then.
    ``memo``: messages kept from earlier cliques (``Memo``), taken and kept; the same values."""
    wanted = set(clique)
    sizes = tree.sizes()
    limit = max([ELIMINATION_CELLS] + [tree.factors[i][1].size for i in needed])
    children: dict[int, list[int]] = {}
    for i in needed:
        children.setdefault(tree.parents[i], []).append(i)
    # each message: its columns, its table and the largest product built in its subtree
    messages: dict[int, tuple[tuple[str, ...], np.ndarray, int]] = {}
    inside: set[int] = set()  # factors whose message a kept one already holds
    for i in reversed(needed):  # parents before children
        p = tree.parents[i]
        if p in inside or p in messages:
            inside.add(i)
        elif memo is not None and p >= 0 and (kept := memo.kept.get(memo.key(i, wanted))) is not None:
            messages[i] = kept
    for i in needed:
        if i in messages or i in inside:
            continue
        cols, table = tree.factors[i]
        up = wanted | set(tree.separator(i)) if tree.parents[i] >= 0 else wanted
        # the messages that bring no column of their own first, then by the cells they bring: a
        # product's table holds the columns later messages need, times those brought so far
        incoming = sorted(
            (messages.pop(k) for k in children.get(i, [])),
            key=lambda m: math.prod(n for a, n in zip(m[0], m[1].shape) if a not in cols),
        )
        peak = max([0] + [m[2] for m in incoming])  # a kept message's too: the read declines as afresh
        keep = up.union(*(c for c, _, _ in incoming))
        drop = tuple(k for k, a in enumerate(cols) if a not in keep)
        if drop:
            cols, table = tuple(a for a in cols if a in keep), table.sum(axis=drop)
        for k, (m_cols, m, _) in enumerate(incoming):
            later = up.union(*(c for c, _, _ in incoming[k + 1 :]))
            out = tuple(a for a in dict.fromkeys(cols + m_cols) if a in later)
            peak = max(peak, math.prod(sizes[a] for a in out))
            if peak > limit:
                return None
            table, cols = _product(table, cols, m, m_cols, out), out
        messages[i] = (cols, table, peak)
        if memo is not None and tree.parents[i] >= 0:
            memo.keep(memo.key(i, wanted), messages[i])
    roots = [messages[i] for i in needed if tree.parents[i] < 0]
    labels = {a: k for k, a in enumerate(dict.fromkeys(a for cols, _, _ in roots for a in cols))}
    operands = [x for cols, table, _ in roots for x in (table, [labels[a] for a in cols])]
    return np.einsum(*operands, [labels[a] for a in clique])


def _greedy_contraction(tree: JunctionTree, needed: Sequence[int], clique: Sequence[str]) -> np.ndarray:
    """``eliminate``'s sum by ``opt_einsum``'s greedy contraction order over every needed factor
    at once, each first summed over the columns no other factor and not ``clique`` holds."""
    import opt_einsum

    factors = [tree.factors[i] for i in needed]
    uses = Counter(a for cols, _ in factors for a in cols) + Counter(clique)
    index = {a: k for k, a in enumerate(uses)}
    operands: list = []
    for cols, table in factors:
        private = tuple(k for k, a in enumerate(cols) if uses[a] == 1)
        operands += [table.sum(axis=private) if private else table, [index[a] for a in cols if uses[a] > 1]]
    return opt_einsum.contract(*operands, [index[a] for a in clique], optimize="greedy")


#: A product of at least this many multiplications goes through numpy's optimised einsum (BLAS
#: where it can); a smaller one through its plain loop, which costs less per call.
OPTIMISED_EINSUM = 1 << 16


def _product(x: np.ndarray, x_cols: Sequence[str], y: np.ndarray, y_cols: Sequence[str], out: Sequence[str]):
    """``x * y`` over the union of their columns, summed over the columns ``out`` leaves out."""
    labels = {a: k for k, a in enumerate(dict.fromkeys(tuple(x_cols) + tuple(y_cols)))}
    work = math.prod(x.shape) * math.prod(n for a, n in zip(y_cols, y.shape) if a not in x_cols)
    return np.einsum(
        x, [labels[a] for a in x_cols], y, [labels[a] for a in y_cols], [labels[a] for a in out],
        optimize=work >= OPTIMISED_EINSUM,
    )  # fmt: skip


def logsumexp(x: np.ndarray, axis: int | tuple[int, ...] | None = None) -> np.ndarray:
    """``log(sum(exp(x)))`` over ``axis`` (all of ``x`` when None), shifted by the maximum so that
    nothing overflows; ``-inf`` where every term is ``-inf`` (scipy's, without its import: about
    0.06 s of every small release)."""
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
    return out.reshape(()) if axis is None else np.squeeze(out, axis=axis)


def model_cliques(model: FittedModel) -> list[tuple[str, ...]]:
    """The model's cliques, as tuples of column names."""
    return list(model.cliques)


def hypothetical_size_mb(domain: Domain, cliques: Sequence[Sequence[str]]) -> float:
    """Junction-tree size in MB (8 bytes a cell over the maximal cliques), as mbi's
    ``hypothetical_model_size`` computes it (``clique_tree.junction_tree_cells``, without mbi's objects)."""
    return cells_mb(junction_tree_cells(domain, cliques))


def cells_mb(cells: int) -> float:
    """A model of ``cells`` cells in MB (8 bytes a cell)."""
    return cells * 8 / 2**20


def covered_cliques(cliques: Sequence[Sequence[str]]) -> set[frozenset[str]]:
    """Every subset of a model clique: marginals the model already represents exactly."""
    out: set[frozenset[str]] = set()
    for c in cliques:
        for k in range(1, len(c) + 1):
            out.update(frozenset(s) for s in itertools.combinations(c, k))
    return out
