"""The public request of one release, as party 0 states it and every party and site checks it.
``ReleaseTerms`` is what party 0 asks for (the release's own request states them,
``release.ReleaseRequest.terms``); ``ReleaseRequest`` holds the facts a party or a site checks
against its own policy (``policy``) and accounts against (``party_ledger``): method, epsilon, delta,
the schema's SHA-256, seeded or not, the parties (compute servers) and the collusion threshold, and
optionally the privacy unit, the target column and the silo column. ``from_wire`` checks the shape
of what arrived, one line (``Refused``) for anything wrong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..accounting import MAX_DELTA, MAX_EPSILON, PrivacyUnit, epsilon_to_rho
from ..common import InputError
from .policy import DRAFT, HEX64, METHOD_STEPS, Refused


@dataclass(frozen=True)
class ReleaseTerms:
    """What party 0 asks of the parties for one release: the method and budget, and optionally the
    privacy unit, the target column and the silo column with each party's silo name (the names None
    across hosts: party 0 asks the parties for theirs)."""

    method: str
    epsilon: float
    delta: float
    unit: PrivacyUnit | None = None
    target: str | None = None
    site: tuple[str, tuple[str, ...] | None] | None = None


@dataclass(frozen=True)
class ReleaseRequest:
    """The public facts of one release that a party checks and accounts against."""

    method: str
    epsilon: float
    delta: float
    schema: str  # the schema's SHA-256, hex
    seeded: bool
    parties: int
    collusion: int
    #: The privacy unit (column, K, M): each party keeps at most K rows per unit and costs every
    #: step for one unit (``K M`` times one record's sensitivity); None: one record.
    unit: PrivacyUnit | None = None
    #: The release's target column (``--target``), whose 2-ways the AIM family sums before its rounds.
    target: str | None = None
    #: The silo column (``--silo-column``) and each party's silo name, by rank: each party's rows take
    #: its own name in that column (``silo.site``). None: no silo column.
    site: tuple[str, tuple[str, ...]] | None = None

    @classmethod
    def of(cls, terms: ReleaseTerms, schema: str, seeded: bool, parties: int, collusion: int) -> "ReleaseRequest":
        """The request of ``terms`` among ``parties`` parties (``collusion`` the threshold) that loaded the
        schema of SHA-256 ``schema``; the silo column's names must be known by now."""
        if terms.site is not None and terms.site[1] is None:
            raise ValueError("the silo column's names are asked of the parties before the request is made")
        site = None if terms.site is None else (terms.site[0], tuple(terms.site[1] or ()))
        return cls(
            terms.method, float(terms.epsilon), float(terms.delta), schema, seeded, parties, collusion,
            terms.unit, terms.target, site,
        )  # fmt: skip

    @property
    def terms(self) -> ReleaseTerms:
        """The terms the parties accepted, at the delta the release's accountant converts at
        (``conversion_delta``)."""
        return ReleaseTerms(self.method, self.epsilon, self.conversion_delta, self.unit, self.target, self.site)

    @property
    def factor(self) -> float:
        """``K M`` of the request's unit, 1 without one: the multiplier of every sensitivity."""
        return 1.0 if self.unit is None else float(self.unit.factor)

    @property
    def rho(self) -> float:
        """The release's zCDP budget: ``epsilon_to_rho(epsilon, delta)``, as party 0's accountant has it
        (a draft's at its ``delta_conversion``: the rest of delta goes to its thresholds)."""
        return epsilon_to_rho(self.epsilon, self.conversion_delta)

    @property
    def conversion_delta(self) -> float:
        """The delta at which the release's rho converts (``draft_dp.THRESHOLD_DELTA_SHARE`` of a
        draft's goes to its thresholds instead)."""
        from ..draft_dp import THRESHOLD_DELTA_SHARE

        return self.delta * (1 - THRESHOLD_DELTA_SHARE) if self.method == DRAFT else self.delta

    def to_wire(self) -> dict[str, Any]:
        """The request as it travels (JSON)."""
        return {
            "method": self.method,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "schema": f"sha256:{self.schema}",
            "seeded": self.seeded,
            "parties": self.parties,
            "collusion": self.collusion,
            **({"privacy_unit": self.unit.record()} if self.unit is not None else {}),
            **({"target": self.target} if self.target is not None else {}),
            **({"silo_column": {"column": self.site[0], "silos": list(self.site[1])}} if self.site is not None else {}),
        }

    @classmethod
    def from_wire(cls, raw: Any, parties: int) -> "ReleaseRequest":
        """A request received from party 0, checked for shape; ``Refused`` naming what is wrong."""
        if not isinstance(raw, dict):
            raise Refused("the release request is not an object")

        def number(key: str, high: float, closed: bool) -> float:
            v = raw.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
                raise Refused(f"the release request's {key} is not a number")
            if not (0 < float(v) <= high if closed else 0 < float(v) < high):
                raise Refused(f"the release request's {key} {v!r} is out of range")
            return float(v)

        method = raw.get("method")
        if method not in METHOD_STEPS:
            raise Refused(f"method {method!r} cannot be served by a party (it serves {', '.join(METHOD_STEPS)})")
        schema = raw.get("schema")
        match = HEX64.fullmatch(schema) if isinstance(schema, str) else None
        if match is None:
            raise Refused("the release request does not name its schema's SHA-256")
        if raw.get("parties") != parties:
            raise Refused(f"the release request is for {raw.get('parties')!r} parties, but this party joined {parties}")
        t = raw.get("collusion")
        if isinstance(t, bool) or not isinstance(t, int) or not 1 <= t < parties:
            raise Refused(f"the release request's collusion threshold {t!r} does not lie in 1..{parties - 1}")
        if not isinstance(raw.get("seeded"), bool):
            raise Refused("the release request does not say whether its noise is seeded")
        return cls(
            method,
            number("epsilon", MAX_EPSILON, True),
            number("delta", MAX_DELTA, False),
            match.group(1).lower(),
            raw["seeded"],
            parties,
            t,
            _unit_from_wire(raw.get("privacy_unit"), parties),
            _target_from_wire(raw.get("target")),
            _site_from_wire(raw.get("silo_column"), parties),
        )


def _site_from_wire(raw: Any, parties: int) -> tuple[str, tuple[str, ...]] | None:
    """The request's silo column and the parties' silo names (None: none); ``Refused`` unless it is
    a column's name with one distinct name per party (the party checks the column against its
    schema, and its own name, when it accepts the request)."""
    if raw is None:
        return None
    column = raw.get("column") if isinstance(raw, dict) else None
    names = raw.get("silos") if isinstance(raw, dict) else None
    if (
        not isinstance(column, str)
        or not isinstance(names, list)
        or len(names) != parties
        or not all(isinstance(n, str) and 0 < len(n) <= 1000 for n in names)
        or len(set(names)) != len(names)
    ):
        raise Refused("the release request's silo column is not a column with one distinct silo name per party")
    return column, tuple(names)


def _target_from_wire(raw: Any) -> str | None:
    """The request's target column (None: none); ``Refused`` for one that is not a column's name
    (the party checks it against its schema when it accepts the request)."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw or len(raw) > 1000:
        raise Refused("the release request's target is not a column's name")
    return raw


def _unit_from_wire(raw: Any, parties: int) -> PrivacyUnit | None:
    """The request's privacy unit (None when it has none); ``Refused`` for one that is not a column
    with whole K and M of at least 1, M at most the parties, and ``sensitivity_factor`` K M."""
    if raw is None:
        return None
    try:
        unit = PrivacyUnit(raw["column"], raw["max_rows_per_unit"], raw["max_silos_per_unit"], silos_enforced=False)
    except (KeyError, TypeError, InputError):
        raise Refused("the release request's privacy unit is not a column with whole K and M of at least 1") from None
    if raw.get("sensitivity_factor") != unit.factor or unit.max_silos > parties:
        raise Refused(
            f"the release request's privacy unit has K M = {raw.get('sensitivity_factor')!r} for K {unit.max_rows} "
            f"and M {unit.max_silos} among {parties} parties"
        )
    return unit
