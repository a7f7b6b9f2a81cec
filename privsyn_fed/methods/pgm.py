"""Graphical-model estimation with mbi (private-pgm 2.x) in float64.

``ModelFitter`` keeps mbi's semantics (mirror descent with Armijo line search on the Gaussian
log-likelihood ``sum_i ||M_{r_i}(p) - y_i||^2 / (2 sigma_i^2)``, warm-started from the previous
potentials) and adds what long runs need:
  * float64, and JAX's persistent compilation cache only where asked for (``compilation_cache``);
  * ``CarriedMirrorDescent``: the same iterates as mbi's ``MirrorDescent``, but the marginals of
    the current potentials are carried in the state (the line search has already computed them),
    so each iteration runs one marginal oracle instead of two, and neither the start nor the end of
    a fit compiles an oracle program of its own: one XLA program per refit;
  * warm-start potentials expanded in numpy (mbi does it op by op, one small compile per shape);
  * repeated measurements of one clique merged into one (inverse-variance weighting; the loss
    changes by a constant only);
  * a guard that clears JAX's caches before the process nears the kernel's mapping limit;
  * an optional relative tolerance: a refit stops early once 50 iterations improve the loss by
    less than ``tol * loss`` twice in a row (mbi's own rule), instead of always running ``iters``.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import jax

jax.config.update("jax_enable_x64", True)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mbi import CliqueVector, Domain, Factor, LinearMeasurement, MarkovRandomField, estimation, junction_tree  # noqa: E402

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from ..common import (  # noqa: E402
    JAX_CACHE_ENV,
    InputError,
    checkpoint,  # noqa: E402
    jax_cache_setting,
)
from ..model.junction import JunctionTree, aligned  # noqa: E402
from .coarse import BlockQuery  # noqa: E402
from .mirror import NumpyMirrorDescent, Plan, expanded_tables, junction_tree_cells  # noqa: E402

#: Environment variable: a folder for JAX's persistent compilation cache (unset, empty or ``off``: none).
CACHE_ENV = JAX_CACHE_ENV
#: The cache's size limit; the least recently used programs are evicted beyond it.
CACHE_MAX_BYTES = 2 * 2**30


def compilation_cache() -> Path | None:
    """JAX's persistent compilation cache in the folder ``$PRIVSYN_FED_JAX_CACHE``, if set (opt-in).

    Off by default: mbi compiles many small programs, and its message passing orders separator
    attributes by Python's string hashes, which differ between processes unless ``PYTHONHASHSEED``
    is fixed (the command line fixes it when the cache is on), so without that most of a later
    run's large refit programs miss the cache (benchmarks/README.md, "Speed"). The folder is created
    private to the user (mode 0700) and refused if others can write to it: a compiled program is
    code this process runs. The programs are keyed by the model's cliques and domain (public, or
    DP selections) and embed no row data; the estimator only sees noisy measurements.
    """
    setting = jax_cache_setting()
    jax.config.update("jax_enable_compilation_cache", False)
    if setting is None:
        return None
    folder = Path(setting)
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if folder.stat().st_uid != os.getuid() or folder.stat().st_mode & 0o022:
            raise PermissionError(f"{folder} is not private to this user")
    except OSError:  # no usable cache folder: compile every time, as without a cache
        return None
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.config.update("jax_compilation_cache_max_size", CACHE_MAX_BYTES)
    return folder


COMPILATION_CACHE = compilation_cache()

#: Clear JAX's compiled programs when the process holds this many memory mappings
#: (the kernel default limit is 65,530; every compiled program adds some).
MAP_COUNT_LIMIT = 30_000

#: Models whose junction tree has at most this many cells are fitted in numpy (``mirror``: the
#: same iterates, nothing compiled); larger ones by mbi's compiled program. On Adult a 1,000-step
#: numpy fit took 1.0 s at 26,000 cells, 3.2 s at 66,000 and 27 s at 469,000; mbi's took 4.3 s at
#: 66,000 (compiling included) and 9 to 14 s at 469,000 (benchmarks/README.md, "Compile-free AIM").
NUMPY_CELLS = 80_000
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
    """mbi's ``Domain`` of the columns ``names`` with ``shape`` cells each."""
    return Domain(list(names), list(shape))


def merge_measurements(measurements: Sequence[tuple], domain: Domain | None = None) -> list[LinearMeasurement]:
    """One ``LinearMeasurement`` per clique and query: ``y = sum(y_i / s_i^2) / sum(1 / s_i^2)``,
    ``s = sum(1 / s_i^2)^(-1/2)``. A measurement is ``(clique, y, sigma)``, or ``(clique, y, sigma,
    starts)`` for a marginal on merged bins (``coarse``: fitted through ``coarse.BlockQuery``,
    which needs the ``domain``)."""
    groups: dict[tuple, list[tuple[np.ndarray, float]]] = {}
    for clique, y, sigma, *starts in measurements:
        key = (tuple(clique), tuple(starts[0]) if starts else None)
        groups.setdefault(key, []).append((np.asarray(y, dtype=float), float(sigma)))
    merged = []
    for (clique, starts), items in groups.items():
        precision = sum(1.0 / s**2 for _, s in items)
        y = np.sum([v / s**2 for v, s in items], axis=0) / precision
        if starts is None:
            merged.append(LinearMeasurement(y, clique, stddev=float(precision**-0.5)))
            continue
        assert domain is not None, "a marginal on merged bins is fitted with the model's domain"
        query = BlockQuery(starts, tuple(domain.project(clique).shape))
        merged.append(LinearMeasurement(y, clique, stddev=float(precision**-0.5), query=query))
    return merged


def map_count() -> int:
    """The memory mappings this process holds (lines of ``/proc/<pid>/maps``; 0 when unreadable)."""
    try:
        with open(f"/proc/{os.getpid()}/maps", "rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


def expand_potentials(potentials: CliqueVector | None, domain: Domain, cliques) -> CliqueVector:
    """The potentials re-expressed over ``cliques`` (same distribution), as mbi factors."""
    tables = expanded_tables(potentials, domain, cliques)
    return CliqueVector(
        domain, list(tables), {cl: Factor(domain.project(cl), jnp.asarray(t)) for cl, t in tables.items()}
    )


class CarriedState(NamedTuple):
    """``CarriedMirrorDescent``'s state: the marginals ``mu`` of the potentials, the potentials, the
    step size ``alpha``, the loss at ``mu`` and whether ``mu`` is still to be computed (``fresh``)."""

    mu: CliqueVector  # marginals of ``potentials`` (placeholder while ``fresh``)
    potentials: CliqueVector
    alpha: Any
    loss: Any
    fresh: Any  # True until ``mu`` has been computed for ``potentials``


@dataclasses.dataclass(frozen=True)
class CarriedMirrorDescent(estimation.MirrorDescent):
    """mbi's ``MirrorDescent`` (Armijo line search) with the current marginals carried.

    mbi recomputes ``mu = oracle(theta)`` at the start of every step although the previous step's
    line search computed exactly that (``oracle(theta2)`` when accepted; the unchanged ``mu`` when
    rejected). Carrying it gives the same iterates with one oracle call per step, and a compiled
    step that contains a single oracle. The first step only computes ``mu`` for the starting
    potentials (a step of size zero that is always accepted), so a fit of ``k`` steps makes
    ``k - 1`` of mbi's.
    """

    def _init(self, domain, loss_fn, known_total, *, warm_start=None, constraints=()):
        prev = None if warm_start is None else getattr(warm_start, "potentials", warm_start)
        potentials = expand_potentials(prev, domain, loss_fn.cliques)
        alpha = jnp.asarray(2.0 / (loss_fn.lipschitz * known_total), dtype=jnp.float64)
        mu = CliqueVector.zeros(domain, loss_fn.cliques)
        # Concrete dtypes (not Python scalars) so that the state after a step has the same types
        # as the state before it and the compiled step is reused rather than compiled twice.
        return CarriedState(mu, potentials, alpha, jnp.asarray(jnp.inf, dtype=jnp.float64), jnp.asarray(True))

    def _step(self, state, loss_fn, known_total, constraints=()):
        oracle = self._oracle(loss_fn.cliques, state.potentials.domain, constraints=constraints)
        loss, dL = jax.value_and_grad(loss_fn)(state.mu)
        step = jnp.where(state.fresh, 0.0, state.alpha)
        theta2 = state.potentials - step * dL
        mu2 = oracle(theta2, known_total)
        loss2 = loss_fn(mu2)
        accept = state.fresh | (loss - loss2 >= 0.5 * state.alpha * dL.dot(state.mu - mu2))
        alpha = jnp.where(state.fresh, state.alpha, jnp.where(accept, 1.01 * state.alpha, 0.5 * state.alpha))
        return CarriedState(
            mu=jax.lax.cond(accept, lambda: mu2, lambda: state.mu),
            potentials=jax.lax.cond(accept, lambda: theta2, lambda: state.potentials),
            alpha=alpha,
            loss=jnp.where(accept, loss2, loss),
            fresh=jnp.asarray(False),
        )

    def _callback_value(self, state, known_total, constraints=()):
        return None  # the callback is only a safe point for signals: nothing to compute

    def _finalize(self, state, known_total, constraints=()):
        return MarkovRandomField(
            potentials=state.potentials, marginals=state.mu, total=known_total, constraints=constraints
        )


class ModelFitter:
    """Fits a Markov random field to noisy marginals, warm-starting round after round."""

    def __init__(
        self,
        domain: Domain,
        iters: int = 1000,
        tol: float | None = None,
        known_total: float | None = None,
        numpy_cells: int | None = None,
    ):
        self.domain = domain
        #: Models of at most this many junction-tree cells are fitted in numpy (default ``numpy_cells()``).
        self.numpy_cells = numpy_cells_setting() if numpy_cells is None else numpy_cells
        self.iters = iters
        self.tol = tol
        #: The model's total; None lets mbi estimate it from the measurements (minimum variance).
        self.known_total = known_total
        self.estimator = CarriedMirrorDescent()
        self.model: MarkovRandomField | None = None

    def fit(self, measurements: Sequence[tuple], iters: int | None = None) -> MarkovRandomField:
        """Fit the model to ``measurements`` (``(clique, y, sigma)`` or, merged bins, ``(clique, y, sigma,
        starts)``; repeated ones merged) with at
        most ``iters`` iterations (default the fitter's), warm-started from the previous fit; JAX's
        caches are cleared first when the process holds more than ``MAP_COUNT_LIMIT`` mappings."""
        if map_count() > MAP_COUNT_LIMIT:
            jax.clear_caches()
        merged = merge_measurements(measurements, self.domain)
        plan = Plan(self.domain, merged)
        common = dict(
            iters=iters or self.iters,
            warm_start=self.model,
            tol=self.tol,
            known_total=self.known_total,
            callback_fn=lambda _: checkpoint(),
        )
        if plan.cells <= self.numpy_cells:
            self.model = NumpyMirrorDescent().estimate(self.domain, merged, plan=plan, **common)
        else:
            self.model = self.estimator.estimate(self.domain, merged, **common)
        return self.model


class MarginalReader:
    """The fitted model's marginals over arbitrary cliques, computed in numpy.

    mbi's ``project`` compiles a new XLA program for every clique outside the model, which made
    scoring AIM's candidates cost seconds each. Here a clique inside a model clique is summed out
    of that clique's marginal. Any other clique is read off the junction-tree factorisation
    ``p(x) = p(x_root) prod_C p(x_{C - S_C} | x_{S_C})``: one upward pass of log-space messages
    over the junction tree gives the root marginal and every conditional (all entries in [0, 1],
    so contracting them cannot underflow to an all-zero table), and an optimised einsum sums out
    the variables outside the clique, over only the factors whose subtrees hold one of its columns
    (every other subtree sums to 1). Same quantity as mbi's variable elimination.
    """

    def __init__(self, model: MarkovRandomField):
        self.total = float(model.total)
        self.marginals = {
            tuple(cl): np.asarray(model.marginals[cl].values, dtype=float) for cl in model.marginals.cliques
        }
        self._model = model
        self._tree: JunctionTree | None = None
        self._new: list[set[str]] | None = None  # each factor's columns outside its separator

    def _junction_tree(self) -> JunctionTree:
        import networkx as nx
        from scipy.special import logsumexp

        domain, potentials = self._model.domain, self._model.potentials
        jtree, _ = junction_tree.make_junction_tree(domain, [tuple(c) for c in potentials.cliques])
        nodes = [tuple(c) for c in junction_tree.maximal_cliques(jtree)]
        preorder, parent, roots = [], {}, set()
        for component in nx.connected_components(jtree):  # a forest when the model is disconnected
            root = next(c for c in nodes if c in component)
            roots.add(root)
            preorder += [tuple(c) for c in nx.dfs_preorder_nodes(jtree, root)]
            parent.update({tuple(k): tuple(v) for k, v in nx.dfs_predecessors(jtree, root).items()})
        table = expanded_tables(potentials, domain, nodes)
        factors = []
        for c in reversed(preorder):  # children before their parent
            if c in roots:
                factors.append((c, np.exp(table[c] - logsumexp(table[c]))))
                continue
            sep = tuple(a for a in c if a in parent[c])
            out = tuple(i for i, a in enumerate(c) if a not in sep)
            message = logsumexp(table[c], axis=out) if out else table[c]
            factors.append((c, np.exp(table[c] - aligned(message, sep, c))))
            table[parent[c]] = table[parent[c]] + aligned(message, sep, parent[c])
        position = {c: i for i, (c, _) in enumerate(factors)}
        parents = [position[parent[c]] if c not in roots else -1 for c, _ in factors]
        return JunctionTree(factors, parents, self.total)

    def factorisation(self) -> JunctionTree:
        """The model as normalised junction-tree factors (``model.junction``: sampling, conditioning,
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
                axes = tuple(i for i, a in enumerate(cl) if a not in clique)
                kept = [a for a in cl if a in clique]
                out = mu.sum(axis=axes) if axes else mu
                return np.transpose(out, [kept.index(a) for a in clique]).ravel()
        import opt_einsum

        index = {a: i for i, a in enumerate(self._model.domain.attributes)}
        tree, operands = self.factorisation(), []
        for i in self._needed(tree, set(clique)):
            cl, table = tree.factors[i]
            operands += [table, [index[a] for a in cl]]
        out = opt_einsum.contract(*operands, [index[a] for a in clique], optimize="greedy")
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


def model_cliques(model: MarkovRandomField) -> list[tuple[str, ...]]:
    """The model's cliques, as tuples of column names."""
    return [tuple(c) for c in model.cliques]


def hypothetical_size_mb(domain: Domain, cliques: Sequence[Sequence[str]]) -> float:
    """Junction-tree size in MB (8 bytes a cell over the maximal cliques), as mbi's
    ``hypothetical_model_size`` computes it (``mirror.junction_tree_cells``, without mbi's objects)."""
    return junction_tree_cells(domain, cliques) * 8 / 2**20


def covered_cliques(cliques: Sequence[Sequence[str]]) -> set[frozenset[str]]:
    """Every subset of a model clique: marginals the model already represents exactly."""
    import itertools

    out: set[frozenset[str]] = set()
    for c in cliques:
        for k in range(1, len(c) + 1):
            out.update(frozenset(s) for s in itertools.combinations(c, k))
    return out
