"""Fidelity within each silo, for a release with a silo column (``synth --silo-column``): does the
synthetic table follow each site's rows, not only the union's? (A release keeps each site's share
and the marginals it measured with the silo column, not every distribution within a site.) Not
private (real rows).

For each silo ``s`` (a category of the silo column): its share of the rows, real and synthetic;
and, computed by the caller (``utility.evaluate``) on the silo's rows alone, the mean total
variation distance of the other columns' 1-way distributions and the workload error.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

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
    real: np.ndarray,
    syn: np.ndarray,
    schema: Schema,
    column: str,
    measures: Callable[[np.ndarray, np.ndarray, list[int]], dict[str, float | None]],
) -> dict[str, dict[str, Any]]:
    """Per silo (the categories of ``column``, over encoded ``real`` and ``syn`` rows): ``rows``
    (real, synthetic), ``share`` (real, synthetic), and ``measures(real rows, synthetic rows,
    the other columns)`` of the silo's rows (which gives None where either side has none)."""
    j = schema.names.index(column)
    col = schema.column(column)
    assert isinstance(col, CategoricalColumn)
    others = [k for k in range(len(schema.names)) if k != j]
    out: dict[str, dict[str, Any]] = {}
    for code, name in enumerate(col.categories):
        r, s = real[real[:, j] == code], syn[syn[:, j] == code]
        entry: dict[str, Any] = {
            "rows": {"real": int(len(r)), "synthetic": int(len(s))},
            "share": {"real": len(r) / max(1, len(real)), "synthetic": len(s) / max(1, len(syn))},
        }
        entry.update(measures(r, s, others))
        out[name] = entry
    return out
