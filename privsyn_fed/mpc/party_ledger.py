"""A silo party's own ledger copy of a release.

Every command that touches this party's rows is costed by the party (``party_costs``) and charged
here, to its own accountant (``mechanisms``, the one module that charges a ledger), before it
answers; a step the remaining budget does not cover is refused (``policy.Refused``).
``PartyRelease`` holds the accountant, writes the ledger copy (the same format as party 0's, with
``details.party``; ``privsyn-fed audit`` checks it) and settles the party's budget store at what
was spent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..accounting import Accountant, PartiesNoise, exponential_rho
from ..common import BudgetExceeded
from ..mechanisms import party_exponential_step, party_gaussian_step, party_thresholded_step
from .grid import COLLUSION
from .party_costs import Charge
from .policy import Refused
from .request import ReleaseRequest


class PartyRelease:
    """One release as this party accounts for it: its accountant (the ledger copy), its budget
    store's reservation, and the steps it answered or refused."""

    def __init__(
        self,
        request: ReleaseRequest,
        rank: int,
        noise_name: str,
        ledger_path: Path,
        *,
        reservation: Any = None,
        policy: Path | None = None,
        silo: str = "",
    ):
        self.request, self.rank, self.reservation = request, rank, reservation
        self.parties = PartiesNoise(request.parties, request.collusion)
        self.noise_name = noise_name
        self.answered = 0
        self.refused: list[str] = []
        details: dict[str, Any] = {
            "party": {
                "rank": rank,
                "parties": request.parties,
                "collusion": request.collusion,
                "silo": silo,
                "policy": None if policy is None else str(policy),
                "request": request.to_wire(),
            },
            "noise": noise_name,
            "mpc": {
                "parties": request.parties,
                "collusion": request.collusion,
                "provider": "TTP (dealer process: correlated randomness only, no noise)",
                "debug": False,
                "noise": noise_name,
            },
        }
        if reservation is not None:
            details["budget_store"] = reservation.tag()
        self.acc = Accountant(
            request.epsilon,
            request.conversion_delta,
            request.method,
            seeded=request.seeded,
            ledger_path=ledger_path,
            threat_model=(
                f"party {rank}'s own account of a {request.method} release among {request.parties} silo parties "
                "and a dealer: every step that touched this silo's rows, costed by this party from public "
                f"facts it checked, before it answered; {COLLUSION}"
            ),
            details=details,
            delta_budget=request.delta if request.conversion_delta != request.delta else None,
            unit=request.unit,
        )
        if reservation is not None:
            reservation.bind(self.acc)

    @property
    def ledger_path(self) -> Path:
        """Where the ledger copy is written."""
        assert self.acc.ledger_path is not None
        return self.acc.ledger_path

    def start(self) -> None:
        """Write the ledger copy (status running): from here on it records every charge before its answer."""
        self.acc.note()

    def allow(self, op: str) -> None:
        """``Refused`` unless ``op`` is a step of the accepted method."""
        from .policy import METHOD_STEPS

        if op not in METHOD_STEPS[self.request.method]:
            raise Refused(f"{op} is not a step of {self.request.method}, the method this party accepted")

    def account(self, c: Charge | None) -> None:
        """Record ``c`` in the ledger copy before the party answers; ``Refused`` when the budget it
        accepted does not cover it (nothing is recorded then) or its noise is below the bound's
        reach."""
        if c is None:
            return
        noise = {"sampler": self.noise_name, "noise_from": "parties, secret-shared"} if c.where == "mpc" else {}
        try:
            if c.mechanism == "gaussian" and c.threshold is not None:
                party_thresholded_step(
                    self.acc, c.query, sigma=c.scale, threshold=c.threshold, sampler=self.noise_name, **c.fields
                )
                return
            if c.mechanism == "gaussian":
                party_gaussian_step(
                    self.acc,
                    self.parties,
                    c.query,
                    sensitivity_l2=c.sensitivity,
                    sigma=c.scale,
                    cells=c.cells,
                    grid=c.grid,
                    **noise,
                    **c.fields,
                )
                return
            need = c.draws * exponential_rho(c.scale)
            if not self.acc.can_afford(need):
                raise BudgetExceeded(
                    f"{c.query}: needs rho={need:.6g} but only {self.acc.remaining:.6g} of {self.acc.rho_budget:.6g} "
                    "is left"
                )
            extra = {**noise, **self.parties.fields()} if c.where == "mpc" else {}
            for _ in range(c.draws):
                party_exponential_step(
                    self.acc, c.query, sensitivity=c.sensitivity, epsilon=c.scale, where=c.where, **extra, **c.fields
                )
        except BudgetExceeded as exc:
            raise Refused(
                f"its budget for this release does not cover the step ({exc}); nothing was answered"
            ) from None
        except ValueError as exc:
            raise Refused(f"the step's noise is below what its accounting covers ({exc})") from None
        except OSError as exc:  # a step not on disk is never answered
            raise Refused(f"its ledger copy cannot record the step ({exc.strerror or exc})") from None

    def finish(self, status: str) -> str:
        """Close the release: the ledger copy marked ``status`` (complete or failed) and the store
        settled at what was spent (``failed`` at the spend, ``rejected`` when nothing was).
        Returns a one-line account of what was written."""
        done = {**self.acc.details["party"], "answered": self.answered, "refused": list(self.refused)}
        problems = []
        try:
            self.acc.finish(status, party=done)
        except OSError as exc:
            problems.append(f"the ledger copy could not be written ({exc})")
        store = ""
        if self.reservation is not None and not self.reservation.settled:
            try:
                if status == "complete":
                    self.reservation.settle(self.acc.rho_spent, "complete")
                else:
                    self.reservation.fail()
                store = f"; store {self.reservation.store.path} run {self.reservation.run} settled"
            except Exception as exc:
                problems.append(
                    f"the store could not be settled ({' '.join(str(exc).split())}); run {self.reservation.run} "
                    f"stays counted at its reservation until `privsyn-fed budget settle --budget-store "
                    f"{self.reservation.store.path} --run {self.reservation.run} --ledger {self.ledger_path}`"
                )
        line = (
            f"{status}: answered {self.answered} step(s) over this silo's rows, rho {self.acc.rho_spent:.6g} of "
            f"{self.acc.rho_budget:.6g}; ledger {self.ledger_path}{store}"
        )
        return "; ".join([line, *problems])
