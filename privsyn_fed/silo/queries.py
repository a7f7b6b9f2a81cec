"""Declared requests a silo answers: public parameters only, so that they can travel to another process.

A query is called on a silo and returns that silo's private statistic (to be summed across silos
and released only through a mechanism). Under MPC a party answers nothing but these queries,
received as a JSON header plus arrays (``to_wire`` / ``from_wire``):
  * ``MarginalsQuery``: marginal counts over cliques, concatenated (the empty clique counts rows);
  * ``NumericHistogramQuery``: one numeric column's counts on its schema bins split ``refine`` ways;
  * ``SecondMomentsQuery``: Fed-TDA's ``upper(sum x x^T)`` of the rows encoded with a public
    encoding (real-valued);
  * ``ConcatQuery``: several of them, concatenated (one mechanism releases them jointly);
  * ``MaskedQuery``: a query only the parties ``ranks`` answer (the others contribute zeros), so
    sums over different sets of silos can be released together;
  * ``LocalScoresQuery``: a silo's FLAIM scores, for the selection it makes itself.
Everything a party needs to answer them is numpy and scipy only (no model code, no JAX).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Protocol, Sequence, cast, runtime_checkable

import numpy as np

from ..schema import numeric_histogram, refined
from .copula import upper
from .copula_encoding import Encoding
from .scores import heterogeneity_gap, local_score, site_part, site_slice


@runtime_checkable
class Query(Protocol):
    """A declared statistic of one silo's rows, built from public parameters only."""

    @property
    def real(self) -> bool:
        """Whether the answer is real-valued (rounded to a grid on secret shares) rather than counts."""

    def __call__(self, silo: Any) -> np.ndarray:
        """The silo's private answer (to be released only through a mechanism)."""

    def size(self, schema: Any) -> int:
        """Length of the answer, known to every party from the public schema."""

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
        """A JSON header and arrays from which ``from_wire`` rebuilds the query in another process."""


@dataclass(frozen=True)
class MarginalsQuery:
    """Marginal counts over ``cliques`` (column indices), concatenated; ``()`` counts the rows."""

    cliques: tuple[tuple[int, ...], ...]
    real = False

    def __call__(self, silo) -> np.ndarray:
        """The silo's marginal counts on each clique, concatenated."""
        counts = silo.marginals(self.cliques)
        return np.concatenate([counts[tuple(c)] for c in self.cliques])

    def size(self, schema) -> int:
        """Length of the answer, known to every party from the public schema."""
        return int(sum(np.prod([schema.shape[i] for i in c], dtype=np.int64) for c in self.cliques))

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
        """A header naming the cliques; no arrays."""
        return {"kind": "marginals", "cliques": [list(c) for c in self.cliques]}, {}


@dataclass(frozen=True)
class NumericHistogramQuery:
    """One numeric column's counts on its schema bins each split ``refine`` ways (then missing)."""

    column: int
    refine: int
    real = False

    def _col(self, schema):
        return refined(schema.columns[self.column], self.refine)

    def __call__(self, silo) -> np.ndarray:
        """The silo's counts of the column on its refined bins, then missing (``encode.numeric_histogram``),
        summed over the silo's parts."""
        col = self._col(silo.schema)
        return np.sum([numeric_histogram(col, values[:, self.column]) for _, values in silo.parts()], axis=0)

    def size(self, schema) -> int:
        """The refined column's cells: its bins and atoms, plus one if it allows missing values."""
        return self._col(schema).size

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
        """A header naming the column and ``refine``; no arrays."""
        return {"kind": "numeric_histogram", "column": self.column, "refine": self.refine}, {}


@dataclass(frozen=True, eq=False)
class SecondMomentsQuery:
    """``upper(sum_i x_i x_i^T)`` over the silo's rows encoded by ``encoding`` (each clipped to its
    bound); the encoding's randomness comes from ``seed`` and the silo's name (None: fresh)."""

    encoding: Encoding
    seed: int | None
    real = True

    def __call__(self, silo) -> np.ndarray:
        """``upper(X^T X)`` of the silo's encoded rows ``X`` (randomness from ``seed`` and the silo's name),
        summed over the silo's parts."""
        rng = np.random.default_rng(None if self.seed is None else [self.seed, zlib.crc32(silo.name.encode())])
        total = None
        for codes, values in silo.parts():
            x = self.encoding.encode(codes, values, rng)
            total = x.T @ x if total is None else total + x.T @ x
        return upper(total)

    def size(self, schema) -> int:
        """``l (l + 1) / 2`` entries of the upper triangle, ``l`` the encoding's width."""
        w = self.encoding.width
        return w * (w + 1) // 2

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
        """A header with the seed and the encoding's header, and the encoding's arrays."""
        header, arrays = self.encoding.to_wire()
        return {"kind": "second_moments", "seed": self.seed, "encoding": header}, arrays


@dataclass(frozen=True)
class ConcatQuery:
    """Several queries' answers, concatenated (released jointly by one mechanism)."""

    parts: tuple

    @property
    def real(self) -> bool:
        """Whether any part is real-valued (the concatenated answer is then float)."""
        return any(p.real for p in self.parts)

    def __call__(self, silo) -> np.ndarray:
        """The parts' answers, concatenated (as float when any part is real)."""
        answers = [np.asarray(p(silo)) for p in self.parts]
        return np.concatenate([a.astype(float) for a in answers] if self.real else answers)

    def size(self, schema) -> int:
        """The sum of the parts' sizes."""
        return sum(p.size(schema) for p in self.parts)

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
        """A header listing the parts' headers; part ``i``'s arrays under ``"{i}/<name>"``."""
        headers, arrays = [], {}
        for i, p in enumerate(self.parts):
            h, a = p.to_wire()
            headers.append(h)
            arrays.update({f"{i}/{k}": v for k, v in a.items()})
        return {"kind": "concat", "parts": headers}, arrays


@dataclass(frozen=True, eq=False)
class MaskedQuery:
    """``query`` answered only by the parties ``ranks``; the others contribute zeros."""

    query: Query
    ranks: tuple[int, ...]

    @property
    def real(self) -> bool:
        """Whether the inner query is real-valued."""
        return self.query.real

    def __call__(self, silo) -> np.ndarray:
        """The inner query's answer; whether a silo takes part is decided by its rank (``answer``)."""
        return np.asarray(self.query(silo))

    def size(self, schema) -> int:
        """The inner query's size (parties masked out send zeros of that length)."""
        return self.query.size(schema)

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
        """A header with ``ranks`` and the inner query's header, and the inner query's arrays."""
        header, arrays = self.query.to_wire()
        return {"kind": "masked", "ranks": list(self.ranks), "query": header}, arrays


def answer(query, silo, rank: int) -> np.ndarray:
    """Party ``rank``'s answer to ``query`` (zeros for the parts it is masked out of)."""
    if isinstance(query, MaskedQuery):
        if rank in query.ranks:
            return np.asarray(query.query(silo))
        return np.zeros(query.size(silo.schema), dtype=float if query.real else np.int64)
    if isinstance(query, ConcatQuery):
        parts = [answer(p, silo, rank) for p in query.parts]
        return np.concatenate([p.astype(float) for p in parts] if query.real else parts)
    return np.asarray(query(silo))


def from_wire(schema, header: dict, arrays: dict[str, np.ndarray]):
    """Rebuild a query received from party 0; anything but the kinds above is refused."""
    kind = header.get("kind")
    if kind == "marginals":
        return MarginalsQuery(tuple(tuple(int(i) for i in c) for c in header["cliques"]))
    if kind == "numeric_histogram":
        return NumericHistogramQuery(int(header["column"]), int(header["refine"]))
    if kind == "second_moments":
        seed = header["seed"]
        return SecondMomentsQuery(
            Encoding.from_wire(schema, header["encoding"], arrays), None if seed is None else int(seed)
        )
    if kind == "masked":
        return MaskedQuery(from_wire(schema, header["query"], arrays), tuple(int(r) for r in header["ranks"]))
    if kind == "local_scores":
        return LocalScoresQuery.from_wire(header, arrays)
    if kind == "concat":
        return ConcatQuery(
            tuple(
                from_wire(schema, h, {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith(f"{i}/")})
                for i, h in enumerate(header["parts"])
            )
        )
    raise ValueError(f"a party answers only declared queries, not {kind!r}")


def concat(queries: Sequence[Query]) -> Query:
    """One query answering all of ``queries`` in order."""
    return queries[0] if len(queries) == 1 else cast(Query, ConcatQuery(tuple(queries)))


@dataclass(frozen=True, eq=False)
class LocalScoresQuery:
    """A silo's FLAIM scores ``u_k(q)`` on its own rows, from public inputs only: the options'
    columns and weights, the model's normalised marginals, sigma, and the proxy (private variant)
    or the pooled marginals (oracle). Never summed: the silo selects with them itself."""

    cliques: tuple
    weights: tuple
    probs: tuple
    sigma: float
    proxy: tuple | None = None
    oracle: tuple | None = None
    real = True

    def __call__(self, silo) -> np.ndarray:
        """``u_k(q)`` for each clique on the silo's rows (``scores.local_score``); the gap is the mean of
        the columns' gaps against the proxy, ``||M_q(D_k) - n_k oracle_q||_1``, or 0. Where the silo's
        name is a column (``silo.site``), a clique with it is scored against the model's (and the
        oracle's) slice of the silo's own value (``scores.site_slice``), and that column's gap is 0:
        the silo differs from the others there by construction, not by heterogeneity."""
        site = _site_code(silo)
        column_gaps = None
        if self.proxy is not None:  # the gap of q is the mean of its columns' gaps
            oneways = [silo.marginal([i]) for i in range(len(self.proxy))]
            column_gaps = [heterogeneity_gap(oneways, self.proxy, [i]) for i in range(len(oneways))]
            if site is not None:
                column_gaps[site[0]] = 0.0
        out, cells = [], silo.schema.shape
        for r, cols in enumerate(self.cliques):
            counts = silo.marginal(cols)
            probs, oracle = self.probs[r], None if self.oracle is None else self.oracle[r]
            if site is not None and site[0] in cols:
                shape, axis = [cells[i] for i in cols], list(cols).index(site[0])
                counts = site_part(counts, shape, axis, site[1])
                probs = site_slice(probs, shape, axis, site[1])
                oracle = None if oracle is None else site_slice(oracle, shape, axis, site[1])
            if column_gaps is not None:
                gap = float(np.mean([column_gaps[i] for i in cols]))
            elif oracle is not None:
                gap = float(np.abs(counts - counts.sum() * np.ravel(oracle)).sum())
            else:
                gap = 0.0
            out.append(local_score(self.weights[r], counts, probs, self.sigma, gap))
        return np.array(out)

    def size(self, schema) -> int:
        """One score per clique."""
        return len(self.cliques)

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
        """A header (cliques, weights, sigma, number of proxy arrays) and arrays ``p{r}``, ``proxy{i}``;
        the oracle variant is refused."""
        if self.oracle is not None:
            raise ValueError("the oracle variant's pooled marginals never leave party 0")
        arrays = {f"p{r}": np.asarray(p, dtype=np.float64) for r, p in enumerate(self.probs)}
        if self.proxy is not None:
            arrays.update({f"proxy{i}": np.asarray(p, dtype=np.float64) for i, p in enumerate(self.proxy)})
        return {
            "kind": "local_scores",
            "cliques": [list(c) for c in self.cliques],
            "weights": list(self.weights),
            "sigma": self.sigma,
            "proxy": None if self.proxy is None else len(self.proxy),
        }, arrays

    @classmethod
    def from_wire(cls, header: dict, arrays: dict[str, np.ndarray]) -> "LocalScoresQuery":
        """The query that ``to_wire`` wrote (never the oracle variant)."""
        n_proxy = header["proxy"]
        return cls(
            tuple(tuple(int(i) for i in c) for c in header["cliques"]),
            tuple(float(w) for w in header["weights"]),
            tuple(arrays[f"p{r}"] for r in range(len(header["cliques"]))),
            float(header["sigma"]),
            None if n_proxy is None else tuple(arrays[f"proxy{i}"] for i in range(int(n_proxy))),
        )


def _site_code(silo) -> tuple[int, int] | None:
    """``(column index, code)`` of the silo's own value of the silo column, or None without one."""
    site = getattr(silo, "site", None)
    if site is None:
        return None
    j = silo.schema.names.index(site[0])
    return j, silo.schema.columns[j].categories.index(site[1])
