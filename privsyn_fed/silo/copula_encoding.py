"""The public encoding every silo applies to its own rows before Fed-TDA's second moments, and its
wire format (it travels to MPC parties with the ``SecondMomentsQuery`` that uses it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from ..schema import CategoricalColumn, NumericColumn, Schema, rounded
from .copula import ICDM, ModeCDF


@dataclass
class Encoding:
    """The public parameters every silo encodes its rows with."""

    schema: Schema
    icdm: list[ICDM]  # per column: categories, or mixture components (+ missing)
    modes: list[ModeCDF | None]  # per numeric column (None for categorical)
    bound: float  # rows are clipped to this L2 norm

    @property
    def width(self) -> int:
        """``l``: one coordinate per categorical column, two (value, component) per numeric column."""
        return sum(2 if m is not None else 1 for m in self.modes)

    def value_coordinates(self) -> list[int]:
        """Coordinates of the numeric columns' values; each is followed by its component's code."""
        out, k = [], 0
        for mode in self.modes:
            if mode is not None:
                out.append(k)
            k += 2 if mode is not None else 1
        return out

    def public_arrays(self) -> dict[str, np.ndarray]:
        """What the server sends every silo so that it can encode its rows."""
        out = {}
        for j, name in enumerate(self.schema.names):
            out[f"{name}:icdm"] = np.concatenate([self.icdm[j].probs, self.icdm[j]._order])
            if self.modes[j] is not None:
                out[f"{name}:modes"] = self.modes[j].mass
        return out

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The encoding as a JSON header and arrays (it travels to MPC parties with its query)."""
        header = {
            "bound": self.bound,
            "lam": [c.lam for c in self.icdm],
            "bins": [None if m is None else m.col.bins for m in self.modes],
            "edges": [None if m is None or m.col.edges is None else list(m.col.edges) for m in self.modes],
            "mode_lam": [None if m is None else m.lam for m in self.modes],
        }
        arrays = {}
        for j, c in enumerate(self.icdm):
            arrays[f"{j}:probs"] = np.asarray(c.probs, dtype=np.float64)
            arrays[f"{j}:order"] = np.asarray(c._order, dtype=np.int64)
            if self.modes[j] is not None:
                arrays[f"{j}:mass"] = np.asarray(self.modes[j].mass, dtype=np.float64)
        return header, arrays

    @classmethod
    def from_wire(cls, schema: Schema, header: dict, arrays: dict[str, np.ndarray]) -> "Encoding":
        """The encoding that ``to_wire`` wrote, on the public ``schema``."""
        icdm: list[ICDM] = []
        modes: list[ModeCDF | None] = []
        for j, col in enumerate(schema.columns):
            icdm.append(ICDM(arrays[f"{j}:probs"], float(header["lam"][j]), arrays[f"{j}:order"]))
            bins = header["bins"][j]
            if bins is None:
                modes.append(None)
                continue
            edges = (header.get("edges") or [None] * len(schema.columns))[j]
            base = cast(NumericColumn, col)  # the refined column: the public one's cut bins, or more uniform bins
            fine = (
                dataclasses.replace(base, bins=int(bins))
                if edges is None
                else dataclasses.replace(base, bins=int(bins), edges=tuple(float(e) for e in edges), scale="linear")
            )
            modes.append(ModeCDF(fine, arrays[f"{j}:mass"], float(header["mode_lam"][j])))
        return cls(schema, icdm, modes, float(header["bound"]))

    def encode(self, codes: np.ndarray, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``(n, l)`` encoded rows, each clipped to L2 norm ``bound`` (runs inside a silo)."""
        cols = []
        for j, col in enumerate(self.schema.columns):
            mode = self.modes[j]
            if mode is None:
                cols.append(self.icdm[j].encode(codes[:, j], rng))
                continue
            x = values[:, j]
            missing = np.isnan(x)
            comp = np.full(len(x), mode.components)  # "missing" is the last component
            a = np.zeros(len(x))
            if (~missing).any():
                comp[~missing], a[~missing] = mode.encode(x[~missing], rng)
            cols += [a, self.icdm[j].encode(comp, rng)]
        rows = np.stack(cols, axis=1)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows * np.minimum(1.0, self.bound / np.maximum(norms, 1e-300))

    def decode(self, z: np.ndarray) -> pd.DataFrame:
        """A data frame of the rows encoded as ``z`` (inverse of ``encode``); the ICDM slot after the last
        category or component decodes to missing; a column's ``decimals`` round its values."""
        out, k = {}, 0
        for j, col in enumerate(self.schema.columns):
            mode = self.modes[j]
            if mode is None:
                idx = self.icdm[j].decode(z[:, k])
                k += 1
                cats = np.array(list(cast(CategoricalColumn, col).categories) + [None], dtype=object)
                out[col.name] = pd.Series(cats[idx], dtype=object)
                continue
            comp = self.icdm[j].decode(z[:, k + 1])
            missing = comp >= mode.components
            v = mode.decode(np.where(missing, 0, comp), z[:, k])
            k += 2
            num = cast(NumericColumn, col)
            if not num.integer and num.decimals is not None:
                v = rounded(v, num.decimals, num.lower, num.upper)
            series = pd.Series(v.astype(np.int64), dtype="Int64") if num.integer else pd.Series(v, dtype="Float64")
            series[missing] = pd.NA
            out[col.name] = series
        return pd.DataFrame(out, columns=self.schema.names)
