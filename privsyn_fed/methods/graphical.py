"""The graphical model's plain types, shared by the numpy estimator and mbi's compiled one: a
domain, a noisy measurement and a fitted model, all numpy. Nothing here imports mbi or JAX, so a
release whose models are fitted in numpy never loads them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Collection

import numpy as np

from .coarse import Starts

#: A clique: column names.
Clique = tuple[str, ...]


@dataclass(frozen=True)
class Domain:
    """Columns and their numbers of cells, in the model's column order."""

    attributes: tuple[str, ...]
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", tuple(self.attributes))
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))

    @cached_property
    def sizes(self) -> dict[str, int]:
        """Cells per column (not to be changed: computed once)."""
        return dict(zip(self.attributes, self.shape))

    def cells(self, clique: Collection[str]) -> tuple[int, ...]:
        """The shape of a table over ``clique`` (in the clique's own order)."""
        sizes = self.sizes
        return tuple(sizes[a] for a in clique)

    def size(self, clique: Collection[str] | None = None) -> int:
        """Cells of a table over ``clique`` (default: every column)."""
        return math.prod(self.shape if clique is None else self.cells(clique))

    def canonical(self, clique: Collection[str]) -> Clique:
        """``clique``'s columns in the domain's order."""
        held = set(clique)
        return tuple(a for a in self.attributes if a in held)


@dataclass(frozen=True)
class Measurement:
    """A noisy marginal ``values`` over ``clique`` (row-major in the clique's order) with noise
    standard deviation ``stddev``; on merged bins (``coarse``) when ``starts`` is given, its
    shape then being the groups'."""

    clique: Clique
    values: np.ndarray
    stddev: float
    starts: Starts | None = None


@dataclass
class FittedModel:
    """A Markov random field ``p(x) ∝ exp(sum_C theta_C(x_C))`` over ``cliques``, its potentials
    ``theta_C`` and its marginals ``mu_C`` (scaled to ``total``), as numpy tables in each clique's
    own order."""

    domain: Domain
    cliques: list[Clique]
    potentials: dict[Clique, np.ndarray]
    marginals: dict[Clique, np.ndarray]
    total: float
