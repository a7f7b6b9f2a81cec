"""The privacy unit of a release: whom its neighbouring relation protects.

By default two datasets are neighbours when they differ by one record (``NEIGHBOURING`` in
``ledger``). With a privacy unit (a column that identifies a person or an account), each silo keeps
at most ``K`` rows per unit (``silo.units``), a unit may appear in at most ``M`` silos, and two
datasets are neighbours when they differ by one unit's rows: at most ``K`` in each of at most ``M``
silos, so at most ``K M`` rows in all.

``K`` is always enforced: each silo keeps at most K rows per unit. ``M`` is enforced where one
process reads every silo (central AIM and the in-process federated methods: a unit found in more
than M silos keeps its rows in M of them, ``units.silo_masks``); over MPC no process sees another
silo's units, so M is the user's declaration, and the ledger says so (``bound``).

Every statistic a release measures is a sum of per-row contributions (counts, clipped moments,
scores built from counts), so removing ``K M`` rows moves it by at most ``K M`` times what one row
moves it: the L1 and the L2 sensitivity of a count vector are both ``K M`` (the rows may all fall
into one cell, so L2 is not ``sqrt(K M)``). ``PrivacyUnit.factor`` is that multiplier; the
accountant (``ledger.UnitAccountant``) records every sensitivity multiplied by it. A step that each
silo runs on its own rows would need only ``K sqrt(M)`` over ``M`` silos; it is charged at ``K M``
too (an upper bound, so the guarantee holds; one rule for every entry keeps the audit exact).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..common import OptionError

#: The ledger's ``neighbouring`` without a privacy unit.
ROW_RELATION = "add/remove one record"
#: ``max_silos_bound`` of a unit's record: M enforced by the release, or declared by its user.
ENFORCED, DECLARED = "enforced", "declared"


@dataclass(frozen=True)
class PrivacyUnit:
    """A privacy unit: the identifying ``column``, at most ``max_rows`` (K) rows per unit in a silo,
    a unit in at most ``max_silos`` (M) silos."""

    column: str
    max_rows: int = 1
    max_silos: int = 1
    #: Whether the release enforces M (in process) or takes it as declared (over MPC).
    silos_enforced: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column.strip():
            raise OptionError(f"privacy_unit must name a column, not {self.column!r}", "privacy_unit")
        for name, value in (("max_rows_per_unit", self.max_rows), ("max_silos_per_unit", self.max_silos)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise OptionError(f"{name} must be a whole number of at least 1, not {value!r}", name)

    @property
    def factor(self) -> int:
        """``K M``: the most rows one unit has in a release, the multiplier of every sensitivity."""
        return self.max_rows * self.max_silos

    @property
    def relation(self) -> str:
        """The ledger's ``neighbouring`` for this unit."""
        return relation(self.column, self.max_rows, self.max_silos)

    def record(self) -> dict[str, Any]:
        """What the ledger states about the unit (the column's name, never its values)."""
        return {
            "column": self.column,
            "max_rows_per_unit": self.max_rows,
            "max_silos_per_unit": self.max_silos,
            "sensitivity_factor": self.factor,
            "max_silos_bound": ENFORCED if self.silos_enforced else DECLARED,
        }


def relation(column: str, max_rows: int, max_silos: int) -> str:
    """``add/remove one unit ('column') with at most K rows in each of at most M silos``."""
    silos = "1 silo" if max_silos == 1 else f"each of at most {max_silos} silos"
    return f"add/remove one unit ({column!r}) with at most {max_rows} row{'' if max_rows == 1 else 's'} in {silos}"


def bounds_text(record: dict[str, Any]) -> str:
    """A unit's record in words: ``'pid': at most K rows per silo (enforced), in at most M silos
    (enforced | declared, not checked on the data)``."""
    bound = record.get("max_silos_bound")
    how = "enforced" if bound == ENFORCED else "declared, not checked on the data"
    return (
        f"{record.get('column')!r}: at most {record.get('max_rows_per_unit')} row(s) per silo (enforced), "
        f"in at most {record.get('max_silos_per_unit')} silo(s) ({how})"
    )


def unit_of(
    privacy_unit: str | None, max_rows_per_unit: int | None, max_silos_per_unit: int | None, mpc: bool = False
) -> PrivacyUnit | None:
    """The release's ``PrivacyUnit`` from the API's and command line's arguments (None: row-level);
    ``OptionError`` for a bound without a unit or a bound below 1. In process M defaults to 1 and
    is enforced; over MPC (``mpc``) it has no default: the user declares it."""
    if privacy_unit is None:
        for name, value in (("max_rows_per_unit", max_rows_per_unit), ("max_silos_per_unit", max_silos_per_unit)):
            if value is not None:
                raise OptionError(f"{name} bounds a privacy unit: give privacy_unit too", name, "privacy_unit")
        return None
    if mpc and max_silos_per_unit is None:
        raise OptionError(
            "over MPC no process sees the other silos' units, so the most silos one unit can be in is yours to "
            "declare: give max_silos_per_unit (the ledger records it as a declaration)",
            "max_silos_per_unit",
        )
    return PrivacyUnit(
        privacy_unit,
        1 if max_rows_per_unit is None else max_rows_per_unit,
        1 if max_silos_per_unit is None else max_silos_per_unit,
        silos_enforced=not mpc,
    )
