"""One zCDP accountant per release, with a durable write-ahead ledger.

Every charge is checked against the budget, appended to the ledger and written to disk (atomic
replace plus fsync) *before* the caller may release the noisy value. A charge that would exceed
the budget raises ``BudgetExceeded`` and nothing is recorded or released. Mechanisms released
together (a dependence screen's pairs) are charged together (``charge_all``): one write records
them all before the first is released, and a batch that does not fit records none.

Costs (add/remove-one-record neighbours):
  * Gaussian mechanism, L2 sensitivity ``D``, standard deviation ``sigma``: ``rho = D^2 / (2 sigma^2)``;
  * exponential mechanism (Gumbel-max), ``P[r] ~ exp(eps * u_r / (2 D))``: ``rho = eps^2 / 8``.
Sequential composition adds rho. An entry with ``parallel_over`` stands for the same mechanism
run on disjoint data (e.g. one per client); its rho is the cost of one of them (the maximum).

Approximate zCDP (only for an accountant given ``delta_budget``, e.g. a DP schema draft): an entry
may carry its own ``delta``, the probability of an event outside its rho guarantee (a thresholded
histogram over an unknown domain releasing a value held by one record). Such ``(rho_i, delta_i)``
compose to ``(sum rho_i, sum delta_i)``; the ledger then converts ``rho_spent`` at
``delta_conversion`` and states ``delta = delta_conversion + sum delta_i``, at most ``delta_budget``.
Release ledgers carry no such entry and keep their format.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from ..common import BudgetExceeded, checkpoint, write_atomic
from .conversions import epsilon_to_rho, rho_to_epsilon
from .distributed import distributed_gaussian_rho
from .unit import ROW_RELATION, PrivacyUnit

LEDGER_FORMAT = "privsyn-fed-ledger/1"
NEIGHBOURING = ROW_RELATION
#: Relative slack for floating-point rounding when comparing spend with the budget.
BUDGET_TOLERANCE = 1e-9


def gaussian_rho(sensitivity_l2: float, sigma: float) -> float:
    """``D^2 / (2 sigma^2)``: the zCDP cost of the Gaussian mechanism."""
    return sensitivity_l2**2 / (2.0 * sigma**2)


def exponential_rho(epsilon: float) -> float:
    """``eps^2 / 8``: the zCDP cost of an ``eps``-DP exponential mechanism (bounded range)."""
    return epsilon**2 / 8.0


def entry_rho(entry: dict[str, Any]) -> float:
    """The zCDP cost an entry's own recorded parameters imply (noise the parties drew themselves,
    ``distributed``, is costed by ``accounting.distributed``)."""
    mech, parties = entry["mechanism"], entry.get("distributed")
    if mech == "gaussian" and parties:
        honest = int(parties["parties"]) - int(parties["collusion"])
        return distributed_gaussian_rho(
            float(entry["sensitivity_l2"]),
            float(entry["sigma"]),
            honest,
            int(entry["cells"]),
            float(parties.get("grid", 1.0)),
        )
    if mech == "gaussian":
        return gaussian_rho(float(entry["sensitivity_l2"]), float(entry["sigma"]))
    if mech == "exponential":
        return exponential_rho(float(entry["epsilon"]))
    raise ValueError(f"unknown mechanism {mech!r}")


def encode_entry(entry: dict[str, Any]) -> str:
    """``entry`` as ``json.dumps(ledger, indent=2)`` writes it inside the ledger's ``entries``."""
    return json.dumps(entry, indent=2).replace("\n", "\n    ")


def ledger_text(ledger: dict[str, Any], encoded: list[str]) -> str:
    """``json.dumps(ledger, indent=2)`` plus a newline, where ``entries`` is the ledger's last key and
    ``encoded`` its entries already passed through ``encode_entry``: a ledger rewritten at every
    charge encodes each entry once (``json``'s indented encoder is pure Python)."""
    head = json.dumps({k: v for k, v in ledger.items() if k != "entries"}, indent=2)
    listed = "[\n    " + ",\n    ".join(encoded) + "\n  ]" if encoded else "[]"
    return f'{head[:-2]},\n  "entries": {listed}\n}}\n'


class Accountant:
    """zCDP budget of one release and its ledger.

    ``epsilon``/``delta`` set the budget ``rho_budget = epsilon_to_rho(epsilon, delta)``.
    ``seeded`` records that noise came from a seeded (predictable) generator.
    """

    def __init__(
        self,
        epsilon: float,
        delta: float,
        method: str,
        *,
        seeded: bool = False,
        ledger_path: str | Path | None = None,
        threat_model: str = "",
        details: dict[str, Any] | None = None,
        delta_budget: float | None = None,
        unit: PrivacyUnit | None = None,
    ):
        #: The privacy unit the neighbouring relation is stated for (None: one record).
        self.unit = unit
        self.epsilon_budget = float(epsilon)
        self.delta = float(delta)
        self.rho_budget = epsilon_to_rho(self.epsilon_budget, self.delta)
        self.method = method
        self.seeded = seeded
        self.threat_model = threat_model
        self.details = dict(details or {})
        self.ledger_path = Path(ledger_path) if ledger_path is not None else None
        self.entries: list[dict[str, Any]] = []
        self._encoded: list[str] = []  # ``encode_entry`` of each entry, for ``ledger_text``
        self.rho_spent = 0.0
        #: Approximate zCDP: ``delta`` converts rho; the entries' own deltas add up to at most
        #: ``delta_budget - delta`` (None: a plain zCDP accountant, whose entries carry no delta).
        self.delta_budget = None if delta_budget is None else float(delta_budget)
        self.delta_spent = 0.0
        self.status = "running"
        self.created = _now()
        #: When the ledger last changed (a charge, a note, the status).
        self.updated = self.created
        #: Why this release carries no DP guarantee (e.g. a non-private research baseline); None if it does.
        self.non_private: str | None = None

    # ---- spending -----------------------------------------------------------------------------
    @property
    def remaining(self) -> float:
        """The budget left: ``rho_budget - rho_spent``, at least 0."""
        return max(0.0, self.rho_budget - self.rho_spent)

    def can_afford(self, rho: float) -> bool:
        """Whether charging ``rho`` keeps the spend within the budget (up to ``BUDGET_TOLERANCE``)."""
        return self._within(self.rho_spent + rho)

    def _within(self, spent: float) -> bool:
        """Whether a spend of ``spent`` stays within the budget (up to ``BUDGET_TOLERANCE``)."""
        return spent <= self.rho_budget * (1 + BUDGET_TOLERANCE)

    def charge(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Record ``entry`` durably; refuse it if it would exceed the budget.

        A safe point: a run that received SIGINT or SIGTERM stops here, before the charge."""
        return self.charge_all([entry])[0]

    def charge_all(self, entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Record ``entries`` in order with one durable write, before any of them is released;
        refuse them all, recording none, if together they would exceed the budget (``charge``)."""
        checkpoint()
        rhos = [entry_rho(entry) for entry in entries]
        spent, delta_spent = self.rho_spent, self.delta_spent
        for entry, rho in zip(entries, rhos):
            spent, delta_spent = self._check(entry, rho, spent, delta_spent)
        recorded = []
        for entry, rho in zip(entries, rhos):
            recorded.append({"step": len(self.entries) + 1, **entry, "rho": rho})
            self.entries.append(recorded[-1])
            self._encoded.append(encode_entry(recorded[-1]))
        self.rho_spent, self.delta_spent = spent, delta_spent
        self._persist()
        return recorded

    def _check(self, entry: dict[str, Any], rho: float, spent: float, delta_spent: float) -> tuple[float, float]:
        """The spend after ``entry`` of cost ``rho`` on top of ``spent`` (and ``delta_spent``), or
        ``BudgetExceeded`` (``ValueError`` for a cost that is no cost)."""
        what = entry.get("query", entry["mechanism"])
        if not math.isfinite(rho) or rho < 0:
            raise ValueError(f"invalid privacy cost {rho!r}")
        if not self._within(spent + rho):
            raise BudgetExceeded(
                f"{what}: needs rho={rho:.6g} but only {max(0.0, self.rho_budget - spent):.6g} of "
                f"{self.rho_budget:.6g} is left; nothing was released"
            )
        extra_delta = float(entry.get("delta", 0.0))
        if extra_delta:
            if self.delta_budget is None:
                raise ValueError("an entry with its own delta needs an accountant given delta_budget")
            if not 0 < extra_delta < 1:
                raise ValueError(f"invalid delta {extra_delta!r}")
            if self.delta + delta_spent + extra_delta > self.delta_budget * (1 + BUDGET_TOLERANCE):
                raise BudgetExceeded(
                    f"{what}: needs delta={extra_delta:.6g} but only "
                    f"{self.delta_budget - self.delta - delta_spent:.6g} of the delta budget is left; "
                    "nothing was released"
                )
        return spent + rho, delta_spent + extra_delta

    def gaussian(self, query: str, sensitivity_l2: float, sigma: float, where: str, **extra: Any) -> dict[str, Any]:
        """Charge a Gaussian mechanism, ``rho = sensitivity_l2^2 / (2 sigma^2)``; the recorded entry."""
        return self.charge(gaussian_entry(query, sensitivity_l2, sigma, where, **extra))

    def exponential(self, query: str, sensitivity: float, epsilon: float, where: str, **extra: Any) -> dict[str, Any]:
        """Charge an exponential mechanism, ``rho = epsilon^2 / 8``; the recorded entry."""
        return self.charge(exponential_entry(query, sensitivity, epsilon, where, **extra))

    def note(self, **details: Any) -> None:
        """Record public facts of the run in the ledger's ``details`` now (e.g. a schedule planned
        from released values), so that a run that fails later still shows them."""
        self.details.update(details)
        self._persist()

    def mark_non_private(self, reason: str) -> None:
        """Declare, in the ledger itself, that the release uses unprotected statistics."""
        self.non_private = reason
        self._persist()

    def finish(self, status: str = "complete", *, updated: str | None = None, **details: Any) -> None:
        """Set the run's ``status``, add ``details`` and write the ledger; ``updated``: the time to
        record (a ``preview``'s, so that files staged from it hold the ledger exactly as written)."""
        self.status = status
        self.details.update(details)
        self._persist(updated)

    def preview(self, status: str = "complete", **details: Any) -> dict[str, Any]:
        """The ledger as ``finish(status, **details)`` would write it (nothing is written)."""
        led = self.ledger()
        led["updated"] = _now()
        led["status"] = status
        led["details"] = {**self.details, **details}
        return led

    @property
    def released(self) -> bool:
        """Whether any mechanism was charged (so a noisy value may have been released)."""
        return bool(self.entries)

    # ---- the ledger ---------------------------------------------------------------------------
    def ledger(self) -> dict[str, Any]:
        """The ledger as written to disk (``epsilon``: ``rho_spent`` converted at ``delta``)."""
        return {
            "format": LEDGER_FORMAT,
            "method": self.method,
            "neighbouring": NEIGHBOURING if self.unit is None else self.unit.relation,
            **({"privacy_unit": self.unit.record()} if self.unit is not None else {}),
            "epsilon": rho_to_epsilon(self.rho_spent, self.delta),
            "delta": self.delta if self.delta_budget is None else self.delta + self.delta_spent,
            **(
                {"delta_conversion": self.delta, "delta_budget": self.delta_budget}
                if self.delta_budget is not None
                else {}
            ),
            "epsilon_budget": self.epsilon_budget,
            "rho_budget": self.rho_budget,
            "rho_spent": self.rho_spent,
            "seeded": self.seeded,
            **({"non_private": self.non_private} if self.non_private else {}),
            "status": self.status,
            "conversion": "Canonne-Kamath-Steinke zCDP to (epsilon, delta), OpenDP make_zCDP_to_approxDP",
            "threat_model": self.threat_model,
            "created": self.created,
            "updated": self.updated,
            **({"details": self.details} if self.details else {}),
            "entries": list(self.entries),
        }

    def _persist(self, updated: str | None = None) -> None:
        self.updated = updated or _now()
        if self.ledger_path is not None:
            text = ledger_text(self.ledger(), self._encoded)
            write_atomic(self.ledger_path, lambda fh: fh.write(text))


class UnitAccountant:
    """A release's accountant as a method planned for one-record neighbours sees it, when the
    release's neighbours differ by one privacy unit of up to ``factor`` rows (``unit.PrivacyUnit``).

    Every statistic moves by at most ``factor`` times what one row moves it, so each charge records
    the unit's sensitivity: a Gaussian's ``sensitivity_l2`` times ``factor`` at the planned sigma,
    costing ``factor^2`` times the planned ``D^2 / (2 sigma^2)``; an exponential mechanism's
    sensitivity and epsilon both times ``factor`` (its sampling scale ``2 D / eps`` is unchanged: an
    ``eps``-DP selection for one row is ``factor eps``-DP for ``factor`` rows), costing ``factor^2``
    times the planned ``eps^2 / 8``. The budget the method plans with is shrunk to match:
    ``rho_budget``, ``rho_spent`` and ``remaining`` are the accountant's divided by ``factor^2``, so a
    plan that spends its (row) budget spends exactly the release's. Everything else is the
    accountant's own; every charge is still ``Accountant.charge``'s, recorded and refused there."""

    def __init__(self, accountant: Accountant, factor: float):
        if not factor >= 1:
            raise ValueError(f"a unit's factor is at least 1, not {factor!r}")
        self._acc = accountant
        self.factor = float(factor)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._acc, name)

    @property
    def rho_budget(self) -> float:
        """The release's budget in row units: ``rho_budget / factor^2``."""
        return self._acc.rho_budget / self.factor**2

    @property
    def rho_spent(self) -> float:
        """The spend in row units: ``rho_spent / factor^2``."""
        return self._acc.rho_spent / self.factor**2

    @property
    def remaining(self) -> float:
        """The budget left in row units."""
        return self._acc.remaining / self.factor**2

    def can_afford(self, rho: float) -> bool:
        """Whether ``rho`` (row units) fits what is left."""
        return self._acc.can_afford(rho * self.factor**2)

    def charge(self, entry: dict[str, Any]) -> dict[str, Any]:
        """``entry`` planned for one row, recorded for one unit (class docstring)."""
        return self.charge_all([entry])[0]

    def charge_all(self, entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``Accountant.charge_all`` of ``entries``, each planned for one row, recorded for one unit."""
        return self._acc.charge_all([self._scaled(entry) for entry in entries])

    def _scaled(self, entry: dict[str, Any]) -> dict[str, Any]:
        """``entry`` at ``factor`` times the row's sensitivity (class docstring)."""
        scaled = dict(entry)
        if "delta" in entry:
            raise ValueError("a privacy unit is charged for Gaussian and exponential mechanisms without delta only")
        if entry["mechanism"] == "gaussian":
            # noise the parties drew costs D^2 / (2 k s^2) + tau d (``distributed``): at most factor^2
            # times the plan; a fixed-point rounding slack inside D is scaled too (an upper bound)
            scaled["sensitivity_l2"] = float(entry["sensitivity_l2"]) * self.factor
        elif entry["mechanism"] == "exponential":
            scaled["sensitivity"] = float(entry["sensitivity"]) * self.factor
            scaled["epsilon"] = float(entry["epsilon"]) * self.factor
            if isinstance(entry.get("fixed_point"), dict) and "epsilon_sampled" in entry["fixed_point"]:
                # rounded Gumbels of scale b: factor eps_s + 4 / b is covered by factor (eps_s + 4 / b)
                fixed = dict(entry["fixed_point"])
                fixed["epsilon_sampled"] = float(fixed["epsilon_sampled"]) * self.factor
                scaled["fixed_point"] = fixed
        else:
            raise ValueError(f"unknown mechanism {entry['mechanism']!r}")
        return scaled

    def gaussian(self, query: str, sensitivity_l2: float, sigma: float, where: str, **extra: Any) -> dict[str, Any]:
        """``Accountant.gaussian`` at ``factor`` times the row's sensitivity."""
        return self.charge(gaussian_entry(query, sensitivity_l2, sigma, where, **extra))

    def exponential(self, query: str, sensitivity: float, epsilon: float, where: str, **extra: Any) -> dict[str, Any]:
        """``Accountant.exponential`` at ``factor`` times the row's sensitivity and epsilon."""
        return self.charge(exponential_entry(query, sensitivity, epsilon, where, **extra))


def gaussian_entry(query: str, sensitivity_l2: float, sigma: float, where: str, **extra: Any) -> dict[str, Any]:
    """A Gaussian mechanism's ledger entry, before its cost and step are added."""
    entry = {"mechanism": "gaussian", "query": query, "sensitivity_l2": float(sensitivity_l2), "sigma": float(sigma)}
    return {**entry, "where": where, **extra}


def exponential_entry(query: str, sensitivity: float, epsilon: float, where: str, **extra: Any) -> dict[str, Any]:
    """An exponential mechanism's ledger entry, before its cost and step are added."""
    entry = {"mechanism": "exponential", "query": query, "sensitivity": float(sensitivity), "epsilon": float(epsilon)}
    return {**entry, "where": where, **extra}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
