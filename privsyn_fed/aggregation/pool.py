"""DistAIM's pool: ``A_r = sum_{k in Seen} M_r(D_k)`` over every candidate marginal ``r``.

A silo contributes its answers to every candidate once, when it is first sampled. ``Pool`` keeps
the bookkeeping (which silos are in, where each candidate's cells lie in the concatenated answer)
and leaves the answers to a storage backend that its aggregator supplies:
  * ``aggregate.PlainPoolStorage``: the answers in the clear, inside a trusted aggregator;
  * ``mpc.shared_pool.SharedPoolStorage``: the answers as secret shares among the parties.
A storage scores, selects and measures on the pooled answers, with the noise it is handed; only
``mechanisms`` calls those steps, after it has charged the ledger. Numpy only: parties import it.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from ..accounting import PartiesNoise
from ..noise import NoiseSource
from ..silo import MarginalsQuery

Clique = tuple[str, ...]


class PoolStorage(Protocol):
    """Where a pool's answers live (in the clear, or as shares)."""

    #: Recorded as ``where`` on the ledger entries of selections and measurements on the pool.
    where: str
    #: Noise drawn by each party and summed (None: one sampler draws it); ``mechanisms`` then
    #: hands ``select`` and ``measure`` each party's scale.
    parties_noise: PartiesNoise | None

    def accumulate(self, query: MarginalsQuery, silos: Sequence[str], round_index: int) -> Sequence[str] | None:
        """Add the silos' answers to ``query`` (every candidate, concatenated) to the pool; the silos
        that answered (None: all of them; a site absent when asked is skipped)."""

    def selection(self, epsilon: float, sensitivity: float, noise: NoiseSource) -> tuple[float, dict[str, Any]]:
        """The Gumbel scale that samples an ``epsilon``-exponential mechanism of this sensitivity
        here, and the ledger fields that describe how (sampler, fixed-point rounding)."""

    def measurement_fields(self, noise: NoiseSource) -> dict[str, Any]:
        """The ledger fields that describe how a measurement's noise is drawn here."""

    def select(
        self,
        pool: "Pool",
        cands: Mapping[Clique, float],
        model_marginals: Mapping[Clique, np.ndarray],
        *,
        sigma: float,
        scale: float,
        noise: NoiseSource,
        draws: int,
    ) -> list[int]:
        """``draws`` indices into ``cands``, each the noisy max of AIM's scores with Gumbel ``scale``."""

    def measure(self, cells: np.ndarray, sigma: float, noise: NoiseSource) -> np.ndarray:
        """``A[cells] + N(0, sigma^2)``; the exact answers never leave the storage."""


class Pool:
    """The pooled answers to every candidate marginal, and which silos have contributed."""

    def __init__(
        self, cliques: Mapping[Clique, Sequence[int]], shape: Sequence[int], storage_for: Callable[[int], PoolStorage]
    ):
        """The layout of the candidates' answers; ``storage_for(length)`` makes the storage for them."""
        self.keys = list(cliques)
        self.sizes = [math.prod(int(shape[i]) for i in cliques[q]) for q in self.keys]
        self.starts = dict(zip(self.keys, np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(int)))
        self.size = dict(zip(self.keys, self.sizes))
        self.query = MarginalsQuery(tuple(tuple(cliques[q]) for q in self.keys))
        self.length = int(sum(self.sizes))
        self.storage = storage_for(self.length)
        self.where = self.storage.where
        self.seen: set[str] = set()

    def cells(self, q: Clique) -> np.ndarray:
        """Positions of candidate ``q``'s cells in the concatenated answer."""
        start = self.starts[q]
        return np.arange(start, start + self.size[q], dtype=np.int64)

    def add(self, silos: Sequence[str], round_index: int) -> list[str]:
        """Silos not seen before contribute every candidate answer; returns them."""
        new = [k for k in silos if k not in self.seen]
        if new:
            answered = self.storage.accumulate(self.query, new, round_index)
            new = new if answered is None else [k for k in new if k in answered]
            self.seen.update(new)
        return new
