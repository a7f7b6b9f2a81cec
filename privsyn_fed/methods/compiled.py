"""mbi's compiled mirror descent (JAX, float64) for models too large for the numpy one.

Imported only when a model's junction tree outgrows ``pgm.NUMPY_CELLS``: JAX and mbi take about
half a second to import, more than a small release spends fitting. What it adds to mbi:
  * JAX's persistent compilation cache only where asked for (``compilation_cache``);
  * ``CarriedMirrorDescent``: the same iterates as mbi's ``MirrorDescent``, but the marginals of
    the current potentials are carried in the state (the line search has already computed them),
    so each iteration runs one marginal oracle instead of two, and neither the start nor the end of
    a fit compiles an oracle program of its own: one XLA program per refit;
  * warm-start potentials expanded in numpy (mbi does it op by op, one small compile per shape);
  * structural zeros held as mbi 2.0's ``Constraint`` (``-inf`` folded into the potentials by its
    oracle), their cliques joining the loss's as in ``mirror``, and the fitted potentials given
    ``mirror``'s ``ZERO_LOG`` there, so that either estimator's model is the same kind of model;
  * a guard that clears JAX's caches before the process nears the kernel's mapping limit.
Models go in and come out as ``graphical`` types (numpy), so either estimator warm-starts the other.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import jax

jax.config.update("jax_enable_x64", True)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import mbi
    from mbi import CliqueVector, Constraint, Factor, LinearMeasurement, MarkovRandomField, estimation, marginal_loss
    from mbi.clique_utils import maximal_subset

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from ..common import JAX_CACHE_ENV, jax_cache_setting  # noqa: E402
from .coarse import BlockQuery  # noqa: E402
from .graphical import Clique, Domain, FittedModel, Measurement  # noqa: E402
from .mirror import expanded_tables, held_at_zero, minimum_variance_total  # noqa: E402

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


def map_count() -> int:
    """The memory mappings this process holds (lines of ``/proc/<pid>/maps``; 0 when unreadable)."""
    try:
        with open(f"/proc/{os.getpid()}/maps", "rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


def expand_potentials(potentials: Mapping[Clique, np.ndarray] | None, domain: Domain, cliques) -> CliqueVector:
    """The potentials re-expressed over ``cliques`` (same distribution, ``mirror.expanded_tables``),
    as mbi factors over ``domain`` (ours)."""
    tables, theirs = expanded_tables(potentials, domain, cliques), mbi_domain(domain)
    return CliqueVector(
        theirs, list(tables), {cl: Factor(theirs.project(cl), jnp.asarray(t)) for cl, t in tables.items()}
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
    ``k - 1`` of mbi's. ``growth`` multiplies mbi's first step size (``mirror``'s carried growth);
    neither it nor ``ended`` (where the last fit's step size is left) is part of the compiled
    program's key, so refits started at other step sizes share one program.
    """

    growth: float = dataclasses.field(default=1.0, compare=False)
    ended: dict = dataclasses.field(default_factory=dict, compare=False)

    def _init(self, domain, loss_fn, known_total, *, warm_start=None, constraints=()):
        potentials = expand_potentials(_tables(warm_start), ours(domain), loss_fn.cliques)
        self.ended["first"] = 2.0 / (loss_fn.lipschitz * known_total)
        alpha = jnp.asarray(self.growth * self.ended["first"], dtype=jnp.float64)
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
        self.ended["growth"] = float(state.alpha) / self.ended["first"]
        return MarkovRandomField(
            potentials=state.potentials, marginals=state.mu, total=known_total, constraints=constraints
        )


def mbi_domain(domain: Domain) -> mbi.Domain:
    """mbi's ``Domain`` of ours."""
    return mbi.Domain(list(domain.attributes), list(domain.shape))


def ours(domain: mbi.Domain | Domain) -> Domain:
    """Our ``Domain`` of mbi's (or ours)."""
    return Domain(tuple(domain.attributes), tuple(domain.shape))


def mbi_measurements(measurements: Sequence[Measurement], domain: Domain) -> list[LinearMeasurement]:
    """mbi's measurements of ours: a marginal on merged bins through ``coarse.BlockQuery``."""
    out = []
    for m in measurements:
        query = {} if m.starts is None else {"query": BlockQuery(m.starts, domain.cells(m.clique))}
        out.append(LinearMeasurement(np.asarray(m.values, dtype=float), m.clique, stddev=float(m.stddev), **query))
    return out


def fitted(model: MarkovRandomField, zeros: Sequence[tuple[Clique, np.ndarray]] = ()) -> FittedModel:
    """mbi's model as ours (numpy tables); the cells of ``zeros`` (held by ``constraints_of``) at
    ``mirror.ZERO_LOG`` in the potentials (``mirror.held_at_zero``)."""
    cliques = [tuple(c) for c in model.potentials.cliques]
    potentials = {c: np.asarray(model.potentials[c].values, dtype=float) for c in cliques}
    return FittedModel(
        ours(model.domain),
        cliques,
        held_at_zero(potentials, zeros),
        {c: np.asarray(model.marginals[c].values, dtype=float) for c in cliques},
        float(model.total),
    )


def constraints_of(zeros: Sequence[tuple[Clique, np.ndarray]], domain: Domain) -> list[Constraint]:
    """Each structural zero (clique and boolean table) as mbi's ``Constraint`` forbidding its cells,
    over the clique in the domain's order (the order mbi folds it in)."""
    theirs, out = mbi_domain(domain), []
    for clique, zero in zeros:
        order = theirs.canonical(clique)
        cells = np.transpose(np.asarray(zero, dtype=bool), [list(clique).index(a) for a in order])
        out.append(Constraint(theirs.project(order), invalid=np.argwhere(cells)))
    return out


def loss_of(measurements: Sequence[Measurement], domain: Domain, extra: Sequence[Clique]):
    """mbi's loss of ``measurements`` over the maximal cliques of theirs and ``extra`` (a zero's
    clique joins the model as in ``mirror.Plan``); the Lipschitz constant is the measurements' own."""
    loss = marginal_loss.from_linear_measurements(mbi_measurements(measurements, domain), mbi_domain(domain))
    if not extra:
        return loss
    return dataclasses.replace(loss, cliques=tuple(maximal_subset(list(loss.cliques) + [tuple(c) for c in extra])))


def _tables(warm_start: Any) -> Mapping[Clique, np.ndarray] | None:
    """A warm start's potentials as numpy tables: ours, mbi's model, or none."""
    if warm_start is None:
        return None
    if isinstance(warm_start, FittedModel):
        return warm_start.potentials
    return fitted(warm_start).potentials


def estimate(
    domain: Domain,
    measurements: Sequence[Measurement],
    warm_start: FittedModel | None,
    *,
    iters: int,
    tol: float | None,
    known_total: float | None,
    callback_fn: Callable,
    growth: float = 1.0,
    zeros: Sequence[tuple[Clique, np.ndarray]] = (),
) -> tuple[FittedModel, float]:
    """Fit with ``CarriedMirrorDescent`` (mbi's ``estimate``: blocks of 50 steps, its stopping
    rule) from ``growth`` times mbi's first step, ``zeros`` held (``constraints_of``), clearing
    JAX's caches first when the process holds more than ``MAP_COUNT_LIMIT`` mappings: the model and
    the growth its last step reached."""
    if map_count() > MAP_COUNT_LIMIT:
        jax.clear_caches()
    estimator = CarriedMirrorDescent(growth=growth)
    model = estimator.estimate(
        mbi_domain(domain),
        loss_of(measurements, domain, [c for c, _ in zeros]),
        known_total=minimum_variance_total(measurements) if known_total is None else known_total,
        constraints=constraints_of(zeros, domain),
        iters=iters,
        warm_start=warm_start,
        tol=tol,
        callback_fn=callback_fn,
    )
    return fitted(model, zeros), estimator.ended.get("growth", growth)
