"""A silo party's side of an MPC run: ``serve`` follows party 0's commands, each after its own checks.

The order in which a party does things protects its rows before anything else happens:
  1. ``hello``: the schema and the noise mode (``--seed``) must be party 0's;
  2. ``release``: party 0's public request (``policy.ReleaseRequest``) is checked against this
     party's policy and its own budget store, read only; nothing is reserved or read yet;
  3. ``begin``: once every party accepted, the party reserves the release's rho in its own store,
     then reads its silo, then opens its ledger copy (``party_ledger.PartyRelease``);
  4. each step (``noisy_sum``, ``pool_new``, ``pool_add``, ``select``, ``measure``,
     ``local_select``) is costed by the party (``party_costs``) and charged to its own ledger
     before it answers; a step of another method, an exact ``sum`` and a step its budget does not
     cover are refused;
  5. ``end``: the ledger copy is closed with the release's status and the store settled at what
     was spent (also when the release fails or contact is lost: ``abandon``).
Every command but ``stop``, ``end`` and ``traffic`` gets a verdict (``verdicts.send_verdict``) and
is carried out only when every party accepted it. A party started with ``--non-private-checks``
(tests and demonstrations) also answers exact sums, and steps outside a release without
accounting; never an exact sum during a release.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

from ..accounting import PartiesNoise
from ..common import InputError, MPCError, first_line
from ..common import terminal_text as shown
from ..silo import Silo, check_silo_column, default_silo_name, from_wire, identifier_warning
from . import secure, world
from .answers import grid_sigma, local_choice, ring_answer, traffic_row
from .draft import DraftSpec, DraftSteps, read_draft_table
from .federation import schema_fingerprint
from .noise import party_noise
from .party_costs import (
    Charge,
    PoolState,
    _among,
    local_select_charge,
    measure_charge,
    noisy_sum_charge,
    pool_add_check,
    pool_new_check,
    select_charge,
)
from .party_ledger import PartyRelease
from .party_store import charge_silo, make_folder, new_ledger_path, reserve
from .policy import (
    ACCEPT,
    BAD_SILO,
    DRAFT,
    MODE_DIFFERS,
    REFUSED,
    SCHEMA_DIFFERS,
    Policy,
    Refused,
)
from .request import ReleaseRequest
from .verdicts import send_verdict

#: The arrays of a secure selection, exactly.
SELECT_ARRAYS = {"cells", "segment_ids", "model", "weights", "offsets", "total_cells"}


class PartyRefusal(Exception):
    """This party refused the release (its policy, its store, or a protocol it cannot follow)."""


class PartySession:
    """One party's state across party 0's commands."""

    def __init__(
        self,
        schema,
        silo_path: str,
        rank: int,
        parties: int,
        *,
        channel: world.Channel | None = None,
        seed: int | None = None,
        policy: Policy | None = None,
        ledger: Path | None = None,
        checks: bool = False,
        out: Callable[[str], None] | None = None,
        silo_name: str | None = None,
    ):
        self.schema, self.silo_path, self.rank, self.parties = schema, silo_path, rank, parties
        #: This silo's value in a release's silo column (``--silo NAME=TABLE``, else the file's name).
        self.silo_name = silo_name or default_silo_name(silo_path)
        self.channel = channel or world.Channel()
        self.noise = party_noise(seed, rank)
        self.policy, self.ledger, self.checks = policy, ledger, checks
        self.out = out or (lambda line: print(line, flush=True))
        #: Started to draft a schema (``mpc-party --draft``: no schema yet; ``mpc.draft``).
        self.drafting = schema is None
        self.fingerprint = None if schema is None else schema_fingerprint(schema)
        self.draft_spec: DraftSpec | None = None
        self.steps: DraftSteps | None = None
        self.silo: Any = None  # a Silo, or a DraftTable when drafting
        self.request: ReleaseRequest | None = None
        self.release: PartyRelease | None = None
        self.served = 0
        self.pool: PoolState | None = None
        self.shares: Any = None
        #: The exit status so far (0, or 1 once a release failed) and what to say if party 0 goes away.
        self.status = 0
        self.note = "party 0 stopped before any release began; nothing was read or spent here"

    # ---- the loop -------------------------------------------------------------------------------
    def run(self) -> int:
        """Follow party 0 until ``stop``; the exit status."""
        handlers = self.handlers()
        while True:
            cmd, arrays = self.channel.receive()
            op = cmd.get("op")
            if op == "stop":
                self.abandon("party 0 stopped before the release ended")
                return self.status
            if op == "traffic":
                world.gather_to_party0(traffic_row(self.channel))
            elif op in handlers:
                handlers[op](cmd)
            else:
                self.step(str(op), cmd, arrays)

    def handlers(self) -> dict[str, Callable[[dict], None]]:
        """The commands answered outside the steps (no costing)."""
        return {
            "hello": self.hello,
            "names": self.names,
            "release": self.declare,
            "begin": self.begin,
            "end": self.end,
        }

    def abandon(self, why: str) -> None:
        """Close a release under way as failed: the ledger copy at what was spent, the store settled there."""
        if self.release is not None:
            release, self.release, self.request = self.release, None, None
            self.status = 1
            self.out(f"failed ({why}): {release.finish('failed')}")

    # ---- the handshake, the release, its beginning and end ---------------------------------------
    def hello(self, cmd: dict) -> None:
        """The schema (or, drafting, a well-formed draft) and the noise mode must be party 0's
        (``MPCError`` after the verdict if not)."""
        if self.drafting:
            try:
                self.draft_spec = DraftSpec.from_wire(cmd.get("draft")) if "draft" in cmd else None
            except Refused:
                self.draft_spec = None
            if self.draft_spec is not None:
                self.fingerprint = self.draft_spec.fingerprint
        same = cmd.get("schema") == self.fingerprint and ("draft" in cmd) == self.drafting
        same_mode = bool(cmd.get("seeded")) == self.noise.seeded
        code = ACCEPT if same and same_mode else SCHEMA_DIFFERS if not same else MODE_DIFFERS
        go = send_verdict(self.channel, code)
        if not same and self.drafting:
            raise MPCError("party 0 does not draft a schema; start this party with --schema for its release")
        if not same:
            raise MPCError("this party's schema differs from party 0's; use the same public schema file")
        if not same_mode:
            raise MPCError(
                "party 0's noise is "
                + ("seeded (not private)" if cmd.get("seeded") else "private")
                + " but this party was started "
                + ("with" if self.noise.seeded else "without")
                + " --seed; start every party with the same --seed, or none"
            )
        if not go:
            self.note = "another party's schema or --seed differs from party 0's; nothing was read or spent here"

    def declare(self, cmd: dict) -> None:
        """Check party 0's release request against this party's policy and store (read only)."""
        request = None
        try:
            if self.release is not None or self.request is not None:
                raise Refused("a release is already under way")
            if self.ledger is not None and self.served:
                raise Refused(f"this party was started for one release (--ledger {self.ledger})")
            request = ReleaseRequest.from_wire(cmd.get("request"), self.parties)
            if request.schema != self.fingerprint:
                raise Refused("the release's schema is not the one this party loaded")
            if request.target is not None and (self.schema is None or request.target not in self.schema.names):
                raise Refused(f"the release's target {request.target!r} is not a column of this party's schema")
            if request.site is not None:
                self._check_site(request.site)
            if (request.method == DRAFT) != self.drafting:
                raise Refused(
                    "this party was started to draft a schema (--draft)"
                    if self.drafting
                    else "a schema draft, but this party was started with a schema (start it with --draft)"
                )
            if request.seeded != self.noise.seeded:
                raise Refused("the release's noise mode (--seed) is not this party's")
            if self.policy is not None:
                reason = self.policy.refusal(request) or self.policy.store_refusal(request.rho)
                if reason:
                    raise Refused(reason)
            code, reason = ACCEPT, ""
        except Refused as exc:
            code, reason = exc.code, str(exc)
        except InputError as exc:  # the party's own store cannot be read
            code, reason = REFUSED, str(exc)
        go = send_verdict(self.channel, code, reason)
        if code != ACCEPT:
            raise PartyRefusal(reason)
        if not go:
            self.note = "another party refused the release; nothing was read, reserved or spent here"
            return
        assert request is not None
        self.request = request
        self.out(
            f"accepted: {request.method} at epsilon {request.epsilon:g}, delta {request.delta:g}, "
            f"{request.parties} parties, collusion {request.collusion}"
            + ("" if request.unit is None else f", for one unit ({request.unit.relation[len('add/remove ') :]})")
            + (f" (policy {self.policy.source})" if self.policy else " (no policy: the request's own budget)")
        )

    def begin(self, cmd: dict) -> None:
        """Reserve in the party's own store, then read its silo, then open its ledger copy."""
        reservation, release = None, None
        try:
            if self.release is not None:
                raise Refused("a release is already under way")
            if self.request is None:
                raise Refused("no release was accepted before begin")
            ledger = new_ledger_path(self.ledger, self.silo_path)
            reservation = reserve(self.policy, self.request, ledger)
            if reservation is not None and reservation.ledger_path != str(ledger.resolve()):  # a ledger its store
                ledger = Path(reservation.ledger_path)  # references is kept: a numbered file beside it (kept_ledger)
            self._load()
            if reservation is not None and self.draft_spec is None:
                assert self.policy is not None
                charge_silo(self.policy, reservation, self.silo, self.out)
            if self.draft_spec is not None:
                self.steps = DraftSteps(self.silo.plan, self.silo)
            make_folder(ledger)
            release = PartyRelease(
                self.request,
                self.rank,
                self.noise.name,
                ledger,
                reservation=reservation,
                policy=None if self.policy is None else self.policy.source,
                silo=str(self.silo_path),
            )
            code, reason = ACCEPT, ""
        except Refused as exc:
            code, reason = exc.code, str(exc)
            if reservation is not None:
                reservation.settle(0.0, "rejected")
        go = send_verdict(self.channel, code, reason)
        if code != ACCEPT:
            self.request = None
            if code == BAD_SILO:
                raise InputError(reason)
            raise PartyRefusal(reason)
        assert release is not None
        if not go:
            if reservation is not None:
                reservation.settle(0.0, "rejected")
            self.request = None
            self.note = "another party could not take part; this party's reservation was returned, nothing was spent"
            return
        release.start()
        self.release, self.served = release, self.served + 1
        self.note = "lost contact during the release"
        store = (
            f"; reserved rho {reservation.rho:.6g} in {reservation.store.path} (dataset '{reservation.dataset}', "
            f"run {reservation.run})"
            if reservation is not None
            else ""
        )
        self.out(f"read {self.silo_path}{store}; ledger copy {release.ledger_path}")

    def end(self, cmd: dict) -> None:
        """Party 0 says the release ended (complete or failed): close the ledger copy, settle the store."""
        if self.release is None:
            return
        release, self.release, self.request = self.release, None, None
        status = "complete" if cmd.get("status") == "complete" and not release.refused else "failed"
        if status != "complete":
            self.status = 1
        self.note = "party 0 stopped after the release"
        self.out(release.finish(status))

    def names(self, cmd: dict) -> None:
        """Tell party 0 this silo's name (public: its operator gave it), for a release's silo column."""
        world.gather_bytes(self.channel, self.silo_name.encode("utf-8"))

    def _check_site(self, site: tuple[str, tuple[str, ...]]) -> None:
        """A release's silo column: a categorical column of this party's schema whose categories are
        the parties' silo names, and this party's name in it is its own; ``Refused`` otherwise."""
        try:
            check_silo_column(self.schema, site[0], site[1])
        except InputError as exc:
            raise Refused(f"the release's silo column: {exc}") from None
        if site[1][self.rank] != self.silo_name:
            raise Refused(
                f"the release names this party's silo {site[1][self.rank]!r}, but it is {self.silo_name!r} "
                "(mpc-party --silo NAME=TABLE)"
            )

    def _load(self) -> Any:
        """This party's silo (or, drafting, its ``DraftTable``), read now (once, or again when the
        accepted release's privacy unit asks for another bound); ``Refused`` with its value-free
        message if it cannot be."""
        unit = None if self.request is None else self.request.unit
        wanted = None if unit is None else (unit.column, unit.max_rows)
        site_of = None if self.request is None else self.request.site
        site = None if site_of is None else (site_of[0], self.silo_name)
        if self.silo is None or (self.draft_spec is None and (self.silo.unit != wanted or self.silo.site != site)):
            try:
                if self.draft_spec is not None:
                    assert self.request is not None
                    split = PartiesNoise(self.request.parties, self.request.collusion)
                    plan = self.draft_spec.plan(self.request.epsilon, self.request.delta, split)
                    self.silo = read_draft_table(self.silo_path, plan)
                    return self.silo
                if unit is None:
                    self.silo = Silo.load(self.silo_path, self.schema, site=site)
                else:
                    self.silo = Silo.load(
                        self.silo_path, self.schema, unit=unit.column, max_rows=unit.max_rows, site=site
                    )
            except InputError as exc:
                raise Refused(exc.shareable(), BAD_SILO) from None
            except OSError as exc:
                raise Refused(f"{self.silo_path}: cannot be read ({exc.strerror or exc})", BAD_SILO) from None
            for col, reason in getattr(self.silo, "identifiers", {}).items():
                warning = identifier_warning(self.silo_path, shown(col), reason)
                print(
                    f"privsyn-fed mpc-party {self.rank}: warning for this silo's operator: {warning}", file=sys.stderr
                )
            for col, n in self.silo.clipped.items():
                if n:
                    print(
                        f"privsyn-fed mpc-party {self.rank}: note for this silo's operator: {n} value(s) of "
                        f"'{shown(col)}' lay outside the schema's bounds and were clipped (private; not released)",
                        file=sys.stderr,
                    )
            if getattr(self.silo, "unit_dropped", 0):
                print(
                    f"privsyn-fed mpc-party {self.rank}: note for this silo's operator: {self.silo.unit_dropped} "
                    "row(s) beyond the per-unit bound were left out (private; not released)",
                    file=sys.stderr,
                )
        return self.silo

    # ---- the steps ----------------------------------------------------------------------------------
    def step(self, op: str, cmd: dict, arrays: dict) -> None:
        """Cost and charge the step (``plan``), tell party 0, and answer only if every party agreed."""
        run = None
        try:
            run = self.plan(op, cmd, arrays)
            code, reason = ACCEPT, ""
        except Refused as exc:
            code, reason = exc.code, str(exc)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            code, reason = REFUSED, f"a malformed {op} command ({first_line(exc)})"
        if code != ACCEPT:
            print(f"privsyn-fed mpc-party {self.rank}: refused {op}: {shown(reason)}", file=sys.stderr, flush=True)
            if self.release is not None:
                self.release.refused.append(f"{op}: {reason}")
        if send_verdict(self.channel, code, reason) and run is not None:
            run()
            if self.release is not None:
                self.release.answered += 1

    def _account(self, charge: Charge | None) -> None:
        if self.release is not None:
            self.release.account(charge)

    def _silo_now(self) -> Silo:
        return self.silo if self.silo is not None else self._load()

    def plan(self, op: str, cmd: dict, arrays: dict) -> Callable[[], None]:
        """Check ``op``, charge it to the release (if one is under way), and return how to answer it."""
        me, n, schema = self.rank, self.parties, self.schema
        if self.drafting or op.startswith("draft_"):
            return self._draft_step(op, cmd)
        if op == "sum":
            if self.release is not None or not self.checks:
                raise Refused(
                    "an exact sum would open this silo's answer without noise; a party answers one only "
                    "when started with --non-private-checks, and never during a release"
                )
            q, among = from_wire(schema, cmd["query"], arrays), _among(cmd.get("among"), n)
            silo = self._silo_now()

            def exact_sum() -> None:
                secure.open_to_party0(secure.share_sum(ring_answer(q, silo, me, among), among, q.size(schema)))

            return exact_sum
        if self.release is None and not self.checks:
            raise Refused(f"no release is under way (party 0 must declare and begin one before {op})")
        if self.release is not None:
            self.release.allow(op)
        method = self.release.request.method if self.release is not None else None
        request = self.release.request if self.release is not None else None
        if op == "noisy_sum":
            q = from_wire(schema, cmd["query"], arrays)
            factor = 1.0 if request is None else request.factor
            target = None if request is None or request.target is None else schema.names.index(request.target)
            charge = noisy_sum_charge(q, cmd, schema, me, method, n, factor, target)
            among, sigma = _among(cmd["among"], n), float(cmd["sigma"])
            silo = self._silo_now()
            self._account(charge)

            def noisy_sum() -> None:
                mine = ring_answer(q, silo, me, among)
                secure.noisy_sum(mine, among, q.size(schema), grid_sigma(q, sigma), self.noise)

            return noisy_sum
        if op == "pool_new":
            state = pool_new_check(cmd)

            def new_pool() -> None:
                self.pool, self.shares = state, secure.zeros(state.length)

            return new_pool
        if op == "pool_add":
            q = from_wire(schema, cmd["query"], arrays)
            mine = pool_add_check(q, cmd, self.pool, schema, me, n)
            among = _among(cmd["among"], n)
            silo = self._silo_now() if mine else None
            pool = self.pool

            def add() -> None:
                answer = ring_answer(q, silo, me, among) if silo is not None else None
                self.shares = self.shares + secure.share_sum(answer, among, pool.length)
                pool.mine = pool.mine or mine

            return add
        if op == "select":
            if set(arrays) != SELECT_ARRAYS:
                raise Refused(f"a selection takes the arrays {', '.join(sorted(SELECT_ARRAYS))}")
            self._account(select_charge(cmd, arrays, self.pool, request, n))  # the request's K M included
            shares = self.shares

            def select() -> None:
                secure.secure_select(
                    shares,
                    scale=float(cmd["scale"]),
                    noise=self.noise,
                    noise_parties=int(cmd["noise_parties"]),
                    draws=int(cmd["draws"]),
                    **arrays,
                )

            return select
        if op == "measure":
            if set(arrays) != {"cells"}:
                raise Refused("a measurement takes the array cells only")
            self._account(measure_charge(cmd, arrays, self.pool, 1.0 if request is None else request.factor))
            shares, sigma = self.shares, float(cmd["sigma"])

            def measure() -> None:
                secure.secure_measure(shares, arrays["cells"], sigma, self.noise)

            return measure
        if op == "local_select":
            q = from_wire(schema, cmd["query"], arrays)
            charge = local_select_charge(q, cmd, schema, me, n, 1.0 if request is None else request.factor)
            among, scale = _among(cmd["among"], n), float(cmd["scale"])
            silo = self._silo_now()
            self._account(charge)

            def local_select() -> None:
                world.gather_to_party0([local_choice(q, silo, me, among, scale)])

            return local_select
        raise Refused(f"unknown command {op!r}")

    def _draft_step(self, op: str, cmd: dict) -> Callable[[], None]:
        """A step of a schema draft (``mpc.draft.DraftSteps``), charged before it is answered."""
        if not self.drafting:
            raise Refused(f"{op} is a step of a schema draft, but this party serves releases over a schema")
        if self.release is None or self.steps is None:
            raise Refused(f"no draft is under way (party 0 must declare and begin one before {op})")
        self.release.allow(op)
        charges, answer = self.steps.plan_step(op, cmd, self.noise, self.channel)
        for charge in charges:
            self._account(charge)
        return answer


def serve(session: PartySession) -> int:
    """Run ``session`` until party 0 stops it; whatever ends it, a release under way is closed as
    failed at what it spent (``PartySession.abandon``). Returns the exit status."""
    try:
        return session.run()
    except BaseException as exc:
        session.abandon(first_line(exc) if isinstance(exc, RuntimeError) else type(exc).__name__)
        raise
