"""A label drawn from a target's noisy 2-ways (Fed-TDA with ``--target``): post-processing.

From the released 2-way marginal ``T_c`` of the target ``Y`` with each other column ``c`` (noisy
counts, clipped at 0, plus half a count in every cell), ``P(x_c | y) = T_c[x_c, y] / sum_x T_c[x, y]``
and ``P(y)`` the mean of the tables' target marginals. Each synthetic row's label is drawn from
``P(y | x) ∝ P(y) prod_c P(x_c | y)`` given the row's other columns (naive Bayes): the label then
depends on every column as the 2-ways say, where the copula's one correlation per category code
cannot place a rare label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ..schema import CategoricalColumn, Schema, encode_frame

#: Added to every clipped noisy count before the tables are normalised.
SMOOTHING = 0.5


@dataclass
class LabelTables:
    """``P(y)`` (``prior``, one entry per cell of the target) and ``P(x_c | y)`` for each other
    column ``c`` (``likelihood[c]``, cells of ``c`` by cells of the target)."""

    target: int
    prior: np.ndarray
    likelihood: dict[int, np.ndarray]

    @classmethod
    def from_noisy(cls, schema: Schema, target: int, tables: Sequence[np.ndarray]) -> "LabelTables":
        """From the noisy 2-ways of ``target`` with every other column, in schema order, each
        flattened row-major over its two columns in schema order."""
        others = [j for j in range(len(schema.columns)) if j != target]
        k, likelihood, margins = schema.shape[target], {}, []
        for j, flat in zip(others, tables):
            t = np.maximum(np.asarray(flat, dtype=float), 0.0) + SMOOTHING
            t = t.reshape((schema.shape[j], k) if j < target else (k, schema.shape[j]))
            t = t if j < target else t.T  # cells of c by cells of the target
            likelihood[j] = t / t.sum(axis=0, keepdims=True)
            margins.append(t.sum(axis=0) / t.sum())
        return cls(target, np.mean(margins, axis=0), likelihood)

    def relabel(self, frame: pd.DataFrame, schema: Schema, rng: np.random.Generator) -> pd.DataFrame:
        """``frame`` (decoded rows) with each row's label drawn from ``P(y | x)`` given its other columns."""
        codes = encode_frame(frame, schema, "the model's rows")[0]
        logp = np.tile(np.log(self.prior), (len(frame), 1))
        for j, table in self.likelihood.items():
            logp += np.log(table[codes[:, j]])
        y = np.argmax(logp + rng.gumbel(size=logp.shape), axis=1)  # one draw from each row's posterior
        column = schema.columns[self.target]
        assert isinstance(column, CategoricalColumn)
        values = np.array(list(column.categories) + [None], dtype=object)
        out = frame.copy()
        out[column.name] = pd.Series(values[y], dtype=object, index=frame.index)
        return out

    def to_arrays(self, schema: Schema) -> tuple[dict, dict[str, np.ndarray]]:
        """The tables as a JSON header and arrays (``model.file``)."""
        arrays = {"label:prior": self.prior, **{f"label:{j}": t for j, t in self.likelihood.items()}}
        return {"column": schema.names[self.target]}, arrays

    @classmethod
    def from_arrays(cls, schema: Schema, header: dict, arrays: dict[str, np.ndarray]) -> "LabelTables":
        """The tables ``to_arrays`` wrote; ``ValueError`` when they do not fit ``schema``."""
        target = schema.names.index(header["column"])
        k = schema.shape[target]
        if not isinstance(schema.columns[target], CategoricalColumn):
            raise ValueError(f"the label {header['column']!r} is not a categorical column")
        prior = np.asarray(arrays["label:prior"], dtype=float)
        likelihood = {}
        for j in range(len(schema.columns)):
            if j != target:
                likelihood[j] = np.asarray(arrays[f"label:{j}"], dtype=float)
                if likelihood[j].shape != (schema.shape[j], k):
                    raise ValueError(f"the label's table of {schema.names[j]!r} has shape {likelihood[j].shape}")
        tables = [prior, *likelihood.values()]
        probable = all(np.all(np.isfinite(t)) and np.all(t > 0) and np.all(t <= 1 + 1e-6) for t in tables)
        if prior.shape != (k,) or not probable:
            raise ValueError("the label's tables hold a probability that is not positive, finite and at most 1")
        return cls(target, prior, likelihood)
