"""Reading a release's silos: paths, data frames or silos read before, on one schema, with a
privacy unit's bounds applied within each silo (K rows per unit) and across them (M silos per
unit, where one process reads every silo)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence, TypeAlias, cast

import pandas as pd

from ..common import InputError, OptionError, frames_as_tables, is_spark_frame
from ..schema import Schema
from . import units
from .silo import Silo, unit_hashes_of

if TYPE_CHECKING:
    from ..accounting import PrivacyUnit

#: What a release takes as a silo: one already read, a pandas or Spark data frame, or a table's path
#: or engine URL (a Spark data frame is typed ``Any``: Spark is an optional extra).
SiloLike: TypeAlias = "Silo | pd.DataFrame | str | Path | Any"


def read_silos(
    silos: Sequence[SiloLike],
    schema: Schema,
    unit: PrivacyUnit | None = None,
    seed: int | None = None,
    sites: Sequence[tuple[str, str]] | None = None,
) -> list[Silo]:
    """Each silo read on ``schema``: pandas frames by ``Silo.from_frame`` (named ``frame 1``, ``frame 2``,
    ... by position), paths and URLs by ``Silo.load``, Spark frames as Spark tables (a temporary view
    each, ``frames_as_tables``, named as pandas frames are); a ``Silo`` as it is, if it was read with
    ``unit``'s column and K (or without a unit when ``unit`` is None) and with its ``sites`` entry.

    With a unit, one key is drawn for the release (derived from ``seed`` in a seeded run) and every
    silo's unit column is hashed with it first (``unit_hashes_of``); each silo then keeps at most K
    rows per unit (``units.keep_mask``) and, where the unit's M is enforced (in process), a unit
    found in more than M silos keeps its rows in M of them (``units.silo_masks``). A ``Silo`` read
    before holds no identifiers, so it is refused where another silo could share its units."""
    names = [f"frame {i + 1}" if sites is None else f"silo {sites[i][1]!r}" for i in range(len(silos))]
    for i, s in enumerate(silos):
        if isinstance(s, Silo):
            _check_read(s, None if sites is None else sites[i], None if unit is None else (unit.column, unit.max_rows))
        elif not isinstance(s, (pd.DataFrame, str, Path)) and not is_spark_frame(s):
            raise InputError(f"silo {i + 1}: a Silo, a pandas or Spark DataFrame or a path, not {type(s).__name__}")
    with frames_as_tables(silos) as tables:
        out = _read_checked(tables, schema, unit, seed, sites, names)
    for i, s in enumerate(silos):
        if is_spark_frame(s):
            out[i].name = names[i]
    return out


def _read_checked(
    silos: Sequence[SiloLike],
    schema: Schema,
    unit: PrivacyUnit | None,
    seed: int | None,
    sites: Sequence[tuple[str, str]] | None,
    names: list[str],
) -> list[Silo]:
    """``read_silos`` on silos whose kinds are checked and with no Spark frame left."""
    column, max_rows = (None, 1) if unit is None else (unit.column, unit.max_rows)
    keeps: list = [None] * len(silos)
    across = unit is not None and unit.silos_enforced and unit.max_silos < len(silos)
    if across and _read_together(silos, cast("PrivacyUnit", unit).max_silos):
        return list(cast(Sequence[Silo], silos))
    if unit is not None and not all(isinstance(s, Silo) for s in silos):
        key = units.new_key(None if seed is None else seed + 1000)
        if across:
            read = next((s for s in silos if isinstance(s, Silo)), None)
            if read is not None:
                raise OptionError(
                    f"{read.name}: a silo read before the release holds no identifiers, so its units cannot be "
                    f"matched with the other silos' to keep each in at most max_silos_per_unit {unit.max_silos} "
                    "silo(s); pass its path or data frame instead",
                    "max_silos_per_unit",
                )
        site_column = None if sites is None else sites[0][0]
        hashes = [
            None if isinstance(s, Silo) else unit_hashes_of(s, schema, unit.column, key, names[i], site_column)
            for i, s in enumerate(silos)
        ]
        rows = [None if h is None else units.keep_mask(h, unit.max_rows, key) for h in hashes]
        elsewhere: list = units.silo_masks(cast(list, hashes), unit.max_silos, key) if across else [None] * len(silos)
        keeps = [None if k is None else (k, k if m is None else k & m) for k, m in zip(rows, elsewhere)]
    elif across:  # every silo read before: none holds identifiers to match across silos
        raise OptionError(
            "silos read before the release hold no identifiers, so a unit cannot be kept in at most "
            f"max_silos_per_unit {unit.max_silos} of them; pass their paths or data frames instead",
            "max_silos_per_unit",
        )
    out, group = [], secrets.token_hex(8)
    for i, s in enumerate(silos):
        site = None if sites is None else sites[i]
        keep = None if keeps[i] is None else keeps[i][1]
        if isinstance(s, Silo):
            out.append(s)
            continue
        if isinstance(s, pd.DataFrame):
            silo = Silo.from_frame(s, schema, names[i], unit=column, max_rows=max_rows, site=site, keep=keep)
        else:
            silo = Silo.load(s, schema, unit=column, max_rows=max_rows, site=site, keep=keep)
        if keeps[i] is not None:
            own, kept = keeps[i]
            silo.unit_dropped, silo.unit_elsewhere = int((~own).sum()), int((own & ~kept).sum())
            if across:
                silo.unit_silos = (group, i, len(silos), cast("PrivacyUnit", unit).max_silos)
        out.append(silo)
    return out


def _read_together(silos: Sequence[SiloLike], max_silos: int) -> bool:
    """Whether ``silos`` are exactly the silos of one ``read_silos`` call, in its order, read so that
    a unit is kept in at most ``max_silos`` of them (or fewer)."""
    marks = [s.unit_silos if isinstance(s, Silo) else None for s in silos]
    first = marks[0]
    return (
        first is not None
        and marks == [(first[0], i, len(silos), first[3]) for i in range(len(silos))]
        and (first[3] <= max_silos)
    )


def _check_read(s: Silo, site: tuple[str, str] | None, want: tuple[str, int] | None) -> None:
    """A ``Silo`` read before the release was read with the release's silo column and unit."""
    if s.site != site:
        raise InputError(
            f"{s.name}: the silo was read "
            + ("without a silo column" if s.site is None else f"as silo {s.site[1]!r} of column '{s.site[0]}'")
            + (", but this release has none" if site is None else f", but this release reads it as {site[1]!r}")
        )
    if s.unit != want:
        raise InputError(
            f"{s.name}: the silo was read "
            + ("without a privacy unit" if s.unit is None else f"with privacy unit '{s.unit[0]}', K={s.unit[1]}")
            + (
                ", but this release has none"
                if want is None
                else f", but this release bounds '{want[0]}' to K={want[1]}"
            )
        )
