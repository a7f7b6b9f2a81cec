"""Fidelity within each silo, for a release with a silo column (``synth --silo-column``): does the
synthetic table keep each site's distribution, not only the union's? Not private (real rows).

For each silo ``s`` (a category of the silo column): its share of the rows, real and synthetic;
the mean total variation distance of the other columns' 1-way distributions within ``s``; and the
workload error (``utility.workload_error``) of the evaluation's marginals within ``s``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..common import InputError
from ..schema import CategoricalColumn, Schema


def with_silo_names(frames: Sequence[pd.DataFrame], names: Sequence[str], column: str) -> list[pd.DataFrame]:
    """Each silo's ``frame`` with its ``name`` in ``column`` when it lacks the column (as ``synth
    --silo-column`` reads a silo); a frame that has it is kept as it is."""
    return [f if column in f.columns else f.assign(**{column: name}) for f, name in zip(frames, names)]


def check_silo_column_for_evaluation(schema: Schema, column: str) -> None:
    """The silo column is a categorical column of ``schema``; ``InputError`` otherwise."""
    if column not in schema.names:
        raise InputError(f"--silo-column: column '{column}' is not in the schema")
    if not isinstance(schema.column(column), CategoricalColumn):
        raise InputError(f"--silo-column: column '{column}' is numeric in the schema; a silo column is categorical")


def per_silo(
    real: np.ndarray, syn: np.ndarray, schema: Schema, column: str, workload: Sequence[tuple[int, ...]]
) -> dict[str, dict[str, Any]]:
    """Per silo (the categories of ``column``, over encoded ``real`` and ``syn`` rows): ``rows``
    (real, synthetic), ``share`` (real, synthetic), ``mean_tv`` (other columns' 1-ways within the
    silo; None where either side has no rows) and ``workload_error`` (within the silo; likewise)."""
    from .utility import marginal_shares, workload_error

    j = schema.names.index(column)
    col = schema.column(column)
    assert isinstance(col, CategoricalColumn)
    shape = list(schema.shape)
    out: dict[str, dict[str, Any]] = {}
    for code, name in enumerate(col.categories):
        r, s = real[real[:, j] == code], syn[syn[:, j] == code]
        entry: dict[str, Any] = {
            "rows": {"real": int(len(r)), "synthetic": int(len(s))},
            "share": {"real": len(r) / max(1, len(real)), "synthetic": len(s) / max(1, len(syn))},
            "mean_tv": None,
            "workload_error": None,
        }
        if len(r) and len(s):
            others = [k for k in range(len(shape)) if k != j]
            tvs = [0.5 * float(np.abs(marginal_shares(r, shape, [k]) - marginal_shares(s, shape, [k])).sum())
                   for k in others]  # fmt: skip
            entry["mean_tv"] = float(np.mean(tvs)) if tvs else 0.0
            entry["workload_error"] = workload_error(r, s, shape, workload)
        out[name] = entry
    return out
