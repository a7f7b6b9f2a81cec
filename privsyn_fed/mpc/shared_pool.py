"""DistAIM's pool of answers held as secret shares by the parties (``SharedPoolStorage``, a
``pool.PoolStorage``): each party adds shares of its own answers, and select and measure run on the
shares, opening only the selected indices and the noisy measurements to party 0. ``collective``
marks the aggregator broken when an exchange with the parties fails midway."""

from __future__ import annotations

import functools
import math
from typing import Any, Mapping, Sequence

import numpy as np

from ..aggregation import Pool
from ..common import BudgetExceeded, MPCError
from ..silo import Query
from . import secure
from .answers import ring_answer
from .noise import gumbel_rounding_slack


def collective(method):
    """Mark the aggregator ``broken`` when ``method``'s exchange with the parties fails midway (a
    party lost, a timeout): no further command can reach them. Refusals (``MPCError``) and budget
    refusals leave the parties listening."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except RuntimeError as exc:
            if not isinstance(exc, (MPCError, BudgetExceeded)):
                getattr(self, "agg", self).broken = True
            raise

    return run


class SharedPoolStorage:
    """A pool's answers as secret shares held by the parties (``pool.PoolStorage``)."""

    def __init__(self, agg: Any, length: int):
        """An all-zero shared pool of ``length`` cells in every party, for party 0's ``agg``
        (``aggregator.MPCAggregator``)."""
        self.agg = agg
        self.where = agg.where
        self.parties_noise = agg.parties_noise
        agg.command("pool_new", {"length": length})
        self.shares = secure.zeros(length)
        self.length = length

    @collective
    def accumulate(self, query: Query, silos: Sequence[str], round_index: int) -> None:
        """Add shares of ``silos``' answers to ``query`` to the shared pool (each party shares its own)."""
        ranks = self.agg.ranks(silos)
        self.agg._send("pool_add", query, ranks)
        mine = ring_answer(query, self.agg.own, 0, ranks)
        self.shares = self.shares + secure.share_sum(mine, ranks, self.length)

    def selection(self, epsilon: float, sensitivity: float, noise) -> tuple[float, dict[str, Any]]:
        """The Gumbel scale on the score grid for the parties' exactly rounded Gumbels, sampled at
        ``eps_s`` with ``eps_s + 4 / scale(eps_s) = epsilon`` so that ``epsilon`` covers the rounding."""
        eps_s = epsilon / (1.0 + 4.0 / secure.gumbel_scale(1.0, sensitivity))
        scale = secure.gumbel_scale(eps_s, sensitivity)
        return scale, {
            "fixed_point": {
                "score_bits": secure.SCORE_BITS,
                "epsilon_sampled": eps_s,
                "gumbel_scale_grid_units": scale,
                "rounding_slack": gumbel_rounding_slack(scale),
            },
            **self.agg.noise_fields(noise),
        }

    def measurement_fields(self, noise) -> dict[str, Any]:
        """The ledger fields of noise added on shares (``MPCAggregator.noise_fields``)."""
        return self.agg.noise_fields(noise)

    def select_arrays(
        self,
        pool: Pool,
        cands: Mapping[tuple[str, ...], float],
        model_marginals: Mapping[tuple[str, ...], np.ndarray],
        sigma: float,
    ) -> dict[str, np.ndarray]:
        """The public inputs of ``secure.secure_select`` for candidates ``cands`` (weights)."""
        keys = list(cands)
        weights = np.array([cands[q] for q in keys])
        if not np.allclose(weights, np.round(weights)):
            raise ValueError("secure select needs integer workload weights")
        model = np.concatenate([np.floor(np.ldexp(np.ravel(model_marginals[q]), secure.SCORE_BITS)) for q in keys])
        offsets = [
            round_half(math.ldexp(math.sqrt(2 / math.pi) * sigma * pool.size[q], secure.SCORE_BITS)) for q in keys
        ]
        return {
            "cells": np.concatenate([pool.cells(q) for q in keys]),
            "segment_ids": np.concatenate([np.full(pool.size[q], i) for i, q in enumerate(keys)]),
            "model": model.astype(np.int64),
            "weights": np.round(weights).astype(np.int64),
            "offsets": np.array(offsets, dtype=np.int64),
            "total_cells": pool.cells(pool.keys[0]),
        }

    @collective
    def select(
        self,
        pool: Pool,
        cands: Mapping[tuple[str, ...], float],
        model_marginals: Mapping[tuple[str, ...], np.ndarray],
        *,
        sigma: float,
        scale: float,
        noise,
        draws: int,
    ) -> list[int]:
        """Secure argmax of the scores plus the Gumbel noise of parties ``0..t``; only the indices are opened."""
        arrays = self.select_arrays(pool, cands, model_marginals, sigma)
        contributors = self.parties_noise.selection_parties
        self.agg.command("select", {"scale": scale, "draws": draws, "noise_parties": contributors}, arrays)
        return secure.secure_select(
            self.shares, scale=scale, noise=self.agg.noise, noise_parties=contributors, draws=draws, **arrays
        )

    @collective
    def measure(self, cells: np.ndarray, sigma: float, noise) -> np.ndarray:
        """``A[cells]`` plus every party's own ``N_Z(0, sigma^2)`` on shares, opened to party 0."""
        self.agg.command("measure", {"sigma": sigma}, {"cells": cells})
        return secure.secure_measure(self.shares, cells, sigma, self.agg.noise)


def round_half(x: float) -> int:
    """``floor(x + 1/2)``: ``x`` rounded to the nearest integer, halves up."""
    return int(math.floor(x + 0.5))
