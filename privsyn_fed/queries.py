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
  * ``flaim.LocalScoresQuery``: a silo's FLAIM scores, for the selection it makes itself.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class MarginalsQuery:
    cliques: tuple[tuple[int, ...], ...]
    real = False

    def __call__(self, silo) -> np.ndarray:
        return np.concatenate([silo.marginal(c) for c in self.cliques])

    def size(self, schema) -> int:
        """Length of the answer, known to every party from the public schema."""
        return int(sum(np.prod([schema.shape[i] for i in c], dtype=np.int64) for c in self.cliques))

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
        return {"kind": "marginals", "cliques": [list(c) for c in self.cliques]}, {}


@dataclass(frozen=True)
class NumericHistogramQuery:
    column: int
    refine: int
    real = False

    def _col(self, schema):
        from .methods.fedtda import refined
        return refined(schema.columns[self.column], self.refine)

    def __call__(self, silo) -> np.ndarray:
        from .methods.fedtda import numeric_histogram
        return numeric_histogram(self._col(silo.schema), silo.values()[:, self.column])

    def size(self, schema) -> int:
        col = self._col(schema)
        return col.n_bins + (1 if col.missing else 0)

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
        return {"kind": "numeric_histogram", "column": self.column, "refine": self.refine}, {}


@dataclass(frozen=True, eq=False)
class SecondMomentsQuery:
    """``upper(sum_i x_i x_i^T)`` over the silo's rows encoded by ``encoding`` (each clipped to its
    bound); the encoding's randomness comes from ``seed`` and the silo's name (None: fresh)."""

    encoding: object
    seed: int | None
    real = True

    def __call__(self, silo) -> np.ndarray:
        from .methods.fedtda import upper
        rng = np.random.default_rng(None if self.seed is None else [self.seed, zlib.crc32(silo.name.encode())])
        x = self.encoding.encode(silo.rows(), silo.values(), rng)
        return upper(x.T @ x)

    def size(self, schema) -> int:
        w = self.encoding.width
        return w * (w + 1) // 2

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
        header, arrays = self.encoding.to_wire()
        return {"kind": "second_moments", "seed": self.seed, "encoding": header}, arrays


@dataclass(frozen=True)
class ConcatQuery:
    parts: tuple
    @property
    def real(self) -> bool:
        return any(p.real for p in self.parts)

    def __call__(self, silo) -> np.ndarray:
        answers = [np.asarray(p(silo)) for p in self.parts]
        return np.concatenate([a.astype(float) for a in answers] if self.real else answers)

    def size(self, schema) -> int:
        return sum(p.size(schema) for p in self.parts)

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
        headers, arrays = [], {}
        for i, p in enumerate(self.parts):
            h, a = p.to_wire()
            headers.append(h)
            arrays.update({f"{i}/{k}": v for k, v in a.items()})
        return {"kind": "concat", "parts": headers}, arrays


@dataclass(frozen=True, eq=False)
class MaskedQuery:
    query: object
    ranks: tuple[int, ...]

    @property
    def real(self) -> bool:
        return self.query.real

    def size(self, schema) -> int:
        return self.query.size(schema)

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
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
        from .methods.fedtda import Encoding
        seed = header["seed"]
        return SecondMomentsQuery(Encoding.from_wire(schema, header["encoding"], arrays),
                                  None if seed is None else int(seed))
    if kind == "masked":
        return MaskedQuery(from_wire(schema, header["query"], arrays), tuple(int(r) for r in header["ranks"]))
    if kind == "local_scores":
        from .methods.flaim import LocalScoresQuery
        return LocalScoresQuery.from_wire(header, arrays)
    if kind == "concat":
        return ConcatQuery(tuple(from_wire(schema, h, {k.split("/", 1)[1]: v for k, v in arrays.items()
                                                       if k.startswith(f"{i}/")})
                                 for i, h in enumerate(header["parts"])))
    raise ValueError(f"a party answers only declared queries, not {kind!r}")


def concat(queries: Sequence) -> object:
    return queries[0] if len(queries) == 1 else ConcatQuery(tuple(queries))
