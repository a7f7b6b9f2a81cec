"""The two kinds of model a release fits, as samplers of decoded rows that can be conditioned.

* ``GraphicalModel``: the AIM family's graphical model and the independent model, as a junction
  tree (``factor_tree``); conditioning is exact (the tree given the conditions' weights), and numeric
  values are then drawn inside ``bin ∩ range`` along the model's frequency polygon
  (``schema.bin_shape``), which the conditions' weights follow.
* ``CopulaModel``: Fed-TDA's Gaussian copula ``z = L g``, ``g ~ N(0, I)``, decoded through the public
  encoding. Its rows given a condition are drawn by rejection (exact: the kept rows are the model's
  rows given the condition), bounded: a condition that too few of the model's rows meet is refused
  rather than sampled for ever. With a target, each row's label is then drawn from the target's
  noisy 2-ways given the row's other columns (``label``).

Both are post-processing of a release's noisy statistics: sampling reads no rows and spends nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from ..common import InputError
from ..schema import BinShape, NumericColumn, Schema, bin_lengths, bin_shape, decode_codes
from .checks import check_encoding, check_factor, check_factors, check_total
from .conditions import Condition
from .factor_tree import JunctionTree, independent_tree
from .label import LabelTables
from .rejection import draw_kept

#: Rejection draws a probe of this many rows to estimate how often a condition holds.
PROBE_ROWS = 20_000
#: Refused when a condition (or the public constraints) would need more than this many draws per row.
MAX_DRAWS_PER_ROW = 10_000


@dataclass
class GraphicalModel:
    """Rows of a junction tree (``tree``) decoded on ``schema``; ``ranges`` narrows numeric values
    to the conditions' ranges and ``probability`` is the conditions' probability (1 without any)."""

    tree: JunctionTree
    schema: Schema
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    probability: float = 1.0
    #: Each numeric column's within-bin shape (``bin_shapes``); the unconditioned model's once given.
    shapes: dict[str, BinShape] | None = None

    kind = "junction-tree"

    @property
    def total(self) -> float:
        """The model's noisy row count."""
        return float(self.tree.total)

    @classmethod
    def independent(cls, probabilities: Sequence[np.ndarray], schema: Schema, total: float) -> "GraphicalModel":
        """The independent model: each column drawn from its own distribution."""
        return cls(independent_tree(probabilities, schema.names, total), schema)

    def sample(self, rows: int, seed: int | None) -> pd.DataFrame:
        """``rows`` rows drawn with one generator seeded ``seed`` (``None``: fresh): codes by the tree,
        then values inside their bins (and ranges), shaped by the model's frequency polygons."""
        rng = np.random.default_rng(seed)
        codes = self.tree.sample_codes(rows, rng, self.schema.names)
        return decode_codes(codes, self.schema, rng, self.ranges, self.bin_shapes())

    def bin_shapes(self) -> dict[str, BinShape]:
        """Each numeric column's bin shapes (``schema.bin_shape``: the frequency polygon's heights, and a
        long tail's bins), from the model's own bin masses."""
        if self.shapes is None:
            masses = self.tree.column_marginals()
            self.shapes = {
                col.name: bin_shape(masses[col.name][: col.n_bins], *bin_lengths(col))
                for col in self.schema.columns
                if isinstance(col, NumericColumn)
            }
        return self.shapes

    def given(self, conditions: Sequence[Condition]) -> "GraphicalModel":
        """The model given ``conditions`` (exact); ``InputError`` when they have probability 0."""
        if not conditions:
            return self
        shapes = self.bin_shapes()
        weights = {c.column: c.weights(self.schema, shapes.get(c.column)) for c in conditions}
        tree, p = self.tree.conditioned(weights)
        if p <= 0:
            raise InputError(f"{_described(conditions)} has probability 0 under the model: no row can meet it")
        ranges = {c.column: c.range for c in conditions if c.range is not None}
        return GraphicalModel(tree, self.schema, {**self.ranges, **ranges}, self.probability * p, shapes)

    def to_arrays(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The model as a JSON header and arrays (``model.file``)."""
        header = {"cliques": [list(c) for c, _ in self.tree.factors], "parents": list(self.tree.parents)}
        arrays = {f"factor{i}": np.asarray(t, dtype=np.float64) for i, (_, t) in enumerate(self.tree.factors)}
        return header, arrays

    @classmethod
    def from_arrays(cls, schema: Schema, total: float, header: dict, arrays: dict[str, np.ndarray]) -> "GraphicalModel":
        """The model ``to_arrays`` wrote; ``ValueError`` when it does not fit ``schema``."""
        cliques = [tuple(str(a) for a in c) for c in header["cliques"]]
        factors = [(c, np.asarray(arrays[f"factor{i}"], dtype=np.float64)) for i, c in enumerate(cliques)]
        check_total(total)
        check_factors(factors, dict(zip(schema.names, schema.shape)))
        tree = JunctionTree(factors, [int(p) for p in header["parents"]], total)
        missing = set(schema.names) - set(tree.sizes())
        if missing:
            raise ValueError(f"the model does not cover column(s) {', '.join(sorted(missing))}")
        return cls(tree, schema)


@dataclass
class CopulaModel:
    """Fed-TDA's released copula: the public ``encoding``, the Cholesky factor ``factor`` of its
    correlation and the noisy row ``total``; ``conditions`` filter its rows (by rejection)."""

    encoding: object  # silo.copula_encoding.Encoding (public parameters)
    factor: np.ndarray
    total: float
    conditions: tuple[Condition, ...] = ()
    probability: float = 1.0
    #: With a target: each row's label drawn from the target's 2-ways given its other columns.
    label: LabelTables | None = None

    kind = "copula"

    @property
    def schema(self) -> Schema:
        """The release's schema."""
        return self.encoding.schema  # type: ignore[attr-defined]

    def draw(self, rows: int, seed: int | None) -> pd.DataFrame:
        """``rows`` rows of the copula: ``z = L g`` (float32, seeded ``seed``), decoded by inverting
        the encoding."""
        rng = np.random.default_rng(seed)
        width = self.factor.shape[0]
        # computed transposed so that each coordinate (a column of z) is contiguous for decoding
        z = (self.factor.astype(np.float32) @ rng.standard_normal((width, rows), dtype=np.float32)).T
        frame = self.encoding.decode(z)  # type: ignore[attr-defined]
        return frame if self.label is None else self.label.relabel(frame, self.schema, rng)

    def sample(self, rows: int, seed: int | None) -> pd.DataFrame:
        """``rows`` rows, given the conditions when there are any (``rejected``)."""
        if not self.conditions:
            return self.draw(rows, seed)
        conditions = self.conditions
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1, dtype=np.uint64)[0] % 2**63)

        def refusal(drawn: int, kept: int) -> str:
            return f"{_described(conditions)} was met by {kept:,} of {drawn:,} rows drawn from the model: too rare"

        return draw_kept(self.draw, rows, seed, lambda f: _all_hold(conditions, f), refusal, MAX_DRAWS_PER_ROW)

    def given(self, conditions: Sequence[Condition]) -> "CopulaModel":
        """The model given ``conditions``; ``InputError`` when the model's rows (almost) never meet
        them: none of ``PROBE_ROWS`` draws does."""
        if not conditions:
            return self
        combined = self.conditions + tuple(conditions)
        probe = self.draw(PROBE_ROWS, 0x5EED)
        share = float(np.mean(_all_hold(combined, probe)))
        if share == 0:
            raise InputError(
                f"{_described(conditions)}: none of {PROBE_ROWS:,} rows drawn from the model meets it "
                f"(probability below about 1 in {PROBE_ROWS:,}); condition on a wider range or fewer columns"
            )
        return CopulaModel(self.encoding, self.factor, self.total, combined, share, self.label)

    def to_arrays(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The model as a JSON header and arrays (``model.file``)."""
        header, arrays = self.encoding.to_wire()  # type: ignore[attr-defined]
        out = {"encoding": header}, {**{f"encoding:{k}": v for k, v in arrays.items()}, "factor": self.factor}
        if self.label is not None:
            label_header, label_arrays = self.label.to_arrays(self.schema)
            out[0]["label"] = label_header
            out[1].update(label_arrays)
        return out

    @classmethod
    def from_arrays(cls, schema: Schema, total: float, header: dict, arrays: dict[str, np.ndarray]) -> "CopulaModel":
        """The model ``to_arrays`` wrote; ``ValueError`` when it does not fit ``schema``."""
        from ..silo import Encoding

        wire = {k.removeprefix("encoding:"): v for k, v in arrays.items() if k.startswith("encoding:")}
        check_total(total)
        check_encoding(schema, header["encoding"], wire)
        encoding = Encoding.from_wire(schema, header["encoding"], wire)
        factor = np.asarray(arrays["factor"], dtype=np.float64)
        check_factor(factor, encoding.width)
        label = LabelTables.from_arrays(schema, header["label"], arrays) if "label" in header else None
        return cls(encoding, factor, total, label=label)


def _all_hold(conditions: Sequence[Condition], frame: pd.DataFrame) -> np.ndarray:
    ok = np.ones(len(frame), dtype=bool)
    for c in conditions:
        ok &= c.holds(frame)
    return ok


def _described(conditions: Sequence[Condition]) -> str:
    text = " and ".join(c.describe() for c in conditions)
    return f"the condition {text}"
