"""Checks and hashes over a silo's encoded rows, wherever they were encoded (in this process, or
by Spark's workers): the silo column's codes, and the order-free hash of the rows."""

from __future__ import annotations

import numpy as np

from ..schema import CategoricalColumn, Schema, cell_error
from .units import _mix


def check_site_codes(codes: np.ndarray, schema: Schema, site: tuple[str, str], source: str, first_row: int) -> None:
    """Every row's code in the site's column is the silo's name's (``site`` is ``(column, name)``);
    ``InputError`` naming the first row that holds another value."""
    j, wrong = _wrong_site_rows(codes, schema, site)
    if len(wrong):
        col = schema.columns[j]
        assert isinstance(col, CategoricalColumn)
        row = int(wrong[0])
        raise cell_error(
            source,
            row + first_row,
            site[0],
            f"holds {col.categories[codes[row, j]]!r}",
            "holds another silo's name",
            f"every row of silo {site[1]!r} holds its name in the silo column; or leave the column out",
        )


def site_codes_hold(codes: np.ndarray, schema: Schema, site: tuple[str, str]) -> bool:
    """Whether every row's code in the site's column is the silo's name's (``check_site_codes``)."""
    return not len(_wrong_site_rows(codes, schema, site)[1])


def _wrong_site_rows(codes: np.ndarray, schema: Schema, site: tuple[str, str]) -> tuple[int, np.ndarray]:
    """The site column's index and the rows whose code there is not the silo's name's."""
    j = schema.names.index(site[0])
    col = schema.columns[j]
    assert isinstance(col, CategoricalColumn)
    return j, np.flatnonzero(codes[:, j] != col.categories.index(site[1]))


def row_multiset_hash(codes: np.ndarray) -> int:
    """Order-insensitive hash of the rows of a code array: the sum of one mixed hash per row."""
    with np.errstate(over="ignore"):
        h = np.zeros(len(codes), dtype=np.uint64)
        for j in range(codes.shape[1]):
            h = _mix(h ^ (codes[:, j].astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15 * (j + 1) % 2**64)))
        return int(h.sum(dtype=np.uint64))
