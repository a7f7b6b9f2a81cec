"""Contribution bounding for a privacy unit: each silo keeps at most ``K`` rows per unit.

Which rows a unit keeps depends on nothing but the unit's identifier, the order of the unit's own
rows and a key: the ``j``-th row of a unit (in table order) gets the priority
``mix(h(unit) ^ mix(j ^ key))``, where ``h`` is pandas' keyed SipHash of the identifier's text
(``hash_pandas_object``), and a unit keeps its ``K`` rows of lowest priority. The values of the
schema's columns play no part, so two tables that differ only in those values keep the same row
positions; and since a row's priority does not depend on other units' rows, adding or removing one
unit's rows changes no other unit's choice (the bounded tables of neighbours differ by that unit's
at most ``K`` rows only). The key is drawn afresh for each release (``new_key``) and
never stored, so which rows a unit keeps cannot be predicted across releases; a seeded run (tests
and demos) derives it from its seed.

Two identifiers whose 64-bit hashes collide count as one unit: that unit keeps fewer rows, never
more, so the bound still holds. The identifiers stay inside the silo: only the keep mask leaves
this module, and the silo keeps no identifier.
"""

from __future__ import annotations

import hashlib
import secrets

import numpy as np
import pandas as pd

from ..common import InputError

#: pandas' ``hash_key`` is 16 characters.
KEY_CHARS = 16


def new_key(seed: int | None = None) -> str:
    """A fresh key for one release (``secrets``), or one derived from a test run's ``seed``."""
    if seed is None:
        return secrets.token_hex(KEY_CHARS // 2)
    return hashlib.sha256(f"privsyn-fed unit key {seed}".encode()).hexdigest()[:KEY_CHARS]


def unit_hashes(ids: pd.Series, key: str, column: str, source: str, first_row: int) -> np.ndarray:
    """The keyed 64-bit hash of each identifier (its text, ``id_text``); ``InputError`` naming the
    row for a missing one (an empty cell or NaN), without quoting any identifier."""
    text = id_text(ids)
    missing = ids.isna().to_numpy() | (text == "").to_numpy() | (text.str.lower() == "nan").to_numpy()
    if missing.any():
        row = first_row + int(np.argmax(missing))
        raise InputError(
            f"{source}: row {row}: the privacy unit column '{column}' is empty or NaN; every row needs a unit"
        )
    return pd.util.hash_pandas_object(text, index=False, hash_key=key).to_numpy(dtype=np.uint64)


def id_text(ids: pd.Series) -> pd.Series:
    """Identifiers as text, stripped: a table's text as it stands; typed numbers (Parquet, an
    engine's table, read as floats) a whole number as its digits (``123``, as a CSV export writes
    it) and any other as Python's shortest text, so one unit has one text in every format."""
    if not pd.api.types.is_float_dtype(ids.dtype):
        return ids.astype(str).str.strip()
    v = ids.to_numpy(dtype=np.float64)
    whole = np.isfinite(v) & (np.floor(v) == v) & (np.abs(v) < 2.0**53)
    text = np.where(np.isnan(v), "nan", v.astype(str)).astype(object)
    text[whole] = v[whole].astype(np.int64).astype(str)
    return pd.Series(text, index=ids.index)


def _mix(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser on uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def keep_mask(units: np.ndarray, max_rows: int, key: str) -> np.ndarray:
    """For rows whose units hash to ``units`` (in table order), True for the at most ``max_rows``
    rows each unit keeps: those of lowest priority ``mix(unit ^ mix(j ^ key))``, ``j`` the row's
    place among its unit's rows."""
    units = np.asarray(units, dtype=np.uint64)
    n = len(units)
    if n == 0:
        return np.zeros(0, dtype=bool)
    salt = np.uint64(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16))
    # j: each row's place among its unit's rows, in table order (a stable sort keeps that order)
    by_unit = np.argsort(units, kind="stable")
    occurrence = np.empty(n, dtype=np.uint64)
    occurrence[by_unit] = _ranks_within_groups(units[by_unit]).astype(np.uint64)
    priority = _mix(units ^ _mix(occurrence ^ salt))
    order = np.lexsort((priority, units))
    keep = np.zeros(n, dtype=bool)
    keep[order] = _ranks_within_groups(units[order]) < max_rows
    return keep


def _ranks_within_groups(sorted_keys: np.ndarray) -> np.ndarray:
    """For keys sorted so that equal keys are adjacent, each one's place (0, 1, ...) in its run."""
    n = len(sorted_keys)
    starts = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]
    group_start = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    return np.arange(n) - group_start


def silo_masks(hashes: list[np.ndarray], max_silos: int, key: str) -> list[np.ndarray]:
    """For each silo's rows (``hashes[s]``: silo ``s``'s unit hashes, under one key shared by every
    silo), True where the row's unit may stay in that silo when a unit appears in at most
    ``max_silos`` (M) silos: a unit found in more keeps the M silos of lowest priority
    ``mix(unit ^ mix(s ^ salt))`` and is left out of the others. The priority reads nothing but
    the unit's hash, the silo's position and the key, so removing one unit changes no other unit's
    choice; with ``keep_mask`` in each silo, neighbours differ by at most K rows in M silos."""
    hashes = [np.asarray(h, dtype=np.uint64) for h in hashes]
    present = [np.unique(h) for h in hashes]
    if max_silos >= sum(len(p) > 0 for p in present):
        return [np.ones(len(h), dtype=bool) for h in hashes]  # no unit can be in more than M silos
    salt = np.uint64(int(hashlib.sha256(f"silos {key}".encode()).hexdigest()[:16], 16))
    units = np.concatenate(present)
    silo = np.concatenate([np.full(len(p), s, dtype=np.uint64) for s, p in enumerate(present)])
    priority = _mix(units ^ _mix(silo ^ salt))
    order = np.lexsort((priority, units))
    allowed = np.zeros(len(units), dtype=bool)
    allowed[order] = _ranks_within_groups(units[order]) < max_silos
    masks, start = [], 0
    for h, p in zip(hashes, present):
        kept = p[allowed[start : start + len(p)]]
        start += len(p)
        masks.append(np.ones(len(h), dtype=bool) if len(kept) == len(p) else np.isin(h, kept))
    return masks
