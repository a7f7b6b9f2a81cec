"""Range checks of a saved model's parameters, run before a sampler is built from them: a model that
passes draws only rows inside its own schema, and its likelihoods are finite probabilities.

Each check raises ``ValueError`` naming the parameter (the model reader turns it into one
``InputError`` naming the file). Probabilities are checked against ``TOLERANCE`` (floating-point
noise of normalisation); counts against ``MAX_COUNT``.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..common import InputError
from ..schema import MAX_COLUMN_CELLS, CategoricalColumn, NumericColumn, Schema

#: How far above 1 a stored probability may lie: normalising in float64 errs by ~1e-15, far below.
TOLERANCE = 1e-6
#: The largest count (a noisy total, a bin's mass) a model may hold: a quadrillion rows is more than
#: any table holds, and sums of a hundred thousand such counts stay far from float64's overflow.
MAX_COUNT = 1e15


def check_total(total: float) -> None:
    """A noisy row count: finite and within ``MAX_COUNT``."""
    if not math.isfinite(total) or abs(total) > MAX_COUNT:
        raise ValueError(f"its noisy total {total!r} is not a count of rows")


def check_factors(factors: Sequence[tuple[tuple[str, ...], np.ndarray]], sizes: dict[str, int] | None) -> None:
    """Junction-tree factors: cliques of distinct columns (of ``sizes`` when given, with their cells
    on every axis; else one size per column across cliques) holding probabilities, finite and in
    ``[0, 1]``."""
    seen: dict[str, int] = dict(sizes or {})
    for clique, table in factors:
        if len(set(clique)) != len(clique):
            raise ValueError(f"the factor over {list(clique)} names a column twice")
        if table.ndim != len(clique):
            raise ValueError(f"the factor over {list(clique)} has {table.ndim} axes")
        for attr, n in zip(clique, table.shape):
            if sizes is not None and attr not in sizes:
                raise ValueError(f"the factor over {list(clique)} names {attr!r}, not a column of the schema")
            if seen.setdefault(attr, n) != n:
                raise ValueError(f"column {attr!r} has {n} cells in a factor but {seen[attr]} elsewhere")
            if n < 1:
                raise ValueError(f"column {attr!r} has no cells in a factor")
        if not np.all(np.isfinite(table)) or (table < 0).any() or (table > 1 + TOLERANCE).any():
            raise ValueError("a factor holds a probability that is negative, non-finite or above 1")


def _probabilities(name: str, values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if values.shape != shape:
        raise ValueError(f"{name} has shape {values.shape}, not {shape}")
    out = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(out)) or (out < 0).any() or not out.sum() > 0 or (out > MAX_COUNT).any():
        raise ValueError(f"{name} holds a value that is negative, non-finite or too large, or none above 0")
    return out


def _order(name: str, order: np.ndarray, n: int) -> None:
    if order.shape != (n,) or order.dtype.kind not in "iu" or not np.array_equal(np.sort(order), np.arange(n)):
        raise ValueError(f"{name} is not an order of its {n} slots")


def _share(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 0.5:
        raise ValueError(f"{name} {value!r} is not a share in (0, 0.5)")
    return float(value)


def check_encoding(schema: Schema, header: Any, arrays: dict[str, np.ndarray]) -> None:
    """Fed-TDA's public encoding (``silo.copula_encoding.Encoding.to_wire``) fits ``schema``: one
    layout per column, refined bins within the schema's cap (cut points finite, increasing, inside the
    bounds), masses positive and finite, category and component slots matching the schema."""
    from ..schema import checked_edges

    if not isinstance(header, dict):
        raise ValueError("the encoding is not a JSON object")
    n = len(schema.columns)
    lam, bins, mode_lam = header.get("lam"), header.get("bins"), header.get("mode_lam")
    edges = header.get("edges") or [None] * n
    for what, value in (("lam", lam), ("bins", bins), ("edges", edges), ("mode_lam", mode_lam)):
        if not isinstance(value, list) or len(value) != n:
            raise ValueError(f"the encoding's {what} is not one entry per column")
    bound = header.get("bound")
    if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not 0 < bound < MAX_COUNT:
        raise ValueError(f"the encoding's bound {bound!r} is not a positive number")
    assert isinstance(lam, list) and isinstance(bins, list) and isinstance(mode_lam, list)
    for j, col in enumerate(schema.columns):
        where = f"column {col.name!r}"
        _share(f"{where}: its encoding's lam", lam[j])
        probs = np.asarray(arrays[f"{j}:probs"])
        if isinstance(col, CategoricalColumn):
            if bins[j] is not None:
                raise ValueError(f"{where} is categorical but its encoding has bins")
            _probabilities(f"{where}: its category shares", probs, (col.size,))
            _order(f"{where}: its category order", np.asarray(arrays[f"{j}:order"]), col.size)
            continue
        assert isinstance(col, NumericColumn)
        if col.atoms:
            raise ValueError(f'{where} declares "atoms", which a Fed-TDA copula does not model')
        b = bins[j]
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_COLUMN_CELLS:
            raise ValueError(f"{where}: its encoding's bins {_shown(b)} are not from 1 to {MAX_COLUMN_CELLS:,}")
        _share(f"{where}: its encoding's mode_lam", mode_lam[j])
        if edges[j] is not None:
            try:
                cuts = checked_edges({"edges": edges[j]}, col.lower, col.upper, col.integer, f"{where}'s refined bins")
            except InputError as exc:
                raise ValueError(str(exc)) from None
            if cuts is None or len(cuts) + 1 != b:
                raise ValueError(f"{where}: its encoding's edges do not make its {b} bins")
            fine_bins = b
        else:
            fine_bins = _fine_bins(col, b)
        mass = np.asarray(arrays[f"{j}:mass"])
        if mass.ndim != 2 or mass.shape[0] != fine_bins or not 1 <= mass.shape[1] <= MAX_COLUMN_CELLS:
            raise ValueError(f"{where}: its encoding's mass has shape {mass.shape}, not ({fine_bins}, components)")
        values = np.asarray(mass, dtype=np.float64)
        if not np.all(np.isfinite(values)) or not (values > 0).all() or (values > MAX_COUNT).any():
            raise ValueError(f"{where}: its encoding's mass holds a value that is not positive, finite and a count")
        slots = mass.shape[1] + (1 if col.missing else 0)
        _probabilities(f"{where}: its component shares", probs, (slots,))
        _order(f"{where}: its component order", np.asarray(arrays[f"{j}:order"]), slots)


def _fine_bins(col: NumericColumn, bins: int) -> int:
    import dataclasses

    return dataclasses.replace(col, bins=bins).n_bins


def check_factor(factor: np.ndarray, width: int) -> None:
    """The copula's Cholesky factor: ``width x width``, finite, each row of length at most 1 (a
    correlation's factor has rows of unit length), so every draw stays a finite normal."""
    if factor.shape != (width, width) or not np.all(np.isfinite(factor)):
        raise ValueError(f"the copula's factor has shape {factor.shape}, not {(width,) * 2}, or is not finite")
    if (np.linalg.norm(factor, axis=1) > 1 + TOLERANCE).any():
        raise ValueError("the copula's factor is not a correlation's (a row is longer than 1)")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
