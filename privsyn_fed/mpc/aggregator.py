"""The MPC aggregator: party 0's view of a run in which every silo is its own CrypTen party.

``MPCAggregator`` implements the aggregator interface for the coordinating party (rank 0): each call
is broadcast as a command, every party secret-shares its own answer, and only noisy sums, selected
indices (or, for checks and Fed-TDA's labelled non-private mode, an exact sum) are opened, to party
0 alone. The other parties run ``party_session.serve``: each answers only declared queries
(``privsyn_fed.silo.queries``) over its own rows, and only after costing the step against its own
budget (``party_ledger``); every command gets each party's verdict first (``policy``), and a refusal
stops the step everywhere. Party 0 states the release's public request (``declare``) before any silo
is read, and the parties read theirs at ``begin``. ``SharedPoolStorage`` keeps DistAIM's pool of
answers as shares inside the parties (``shared_pool``). Real answers (Fed-TDA's second moments) are
shared on the grid ``2^-REAL_BITS``; the noise is then the discrete Gaussian on that grid, and the
rounding is charged as extra sensitivity (``rounding_l2``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..accounting import PartiesNoise
from ..aggregation import Pool, batched, check_declared, refuse_exact_sum_in_release
from ..common import InputError, MPCError
from ..silo import Query, Silo
from . import secure, world
from .answers import decode, grid_sigma, local_choice, one_query, ring_answer, traffic_row
from .federation import schema_fingerprint
from .grid import COLLUSION, LOCAL_SAMPLER, REAL_BITS, grid_rounding_l2
from .noise import party_noise
from .policy import BAD_SILO, MODE_DIFFERS, SCHEMA_DIFFERS
from .request import ReleaseRequest, ReleaseTerms
from .shared_pool import SharedPoolStorage, collective
from .verdicts import Verdict, collect_verdicts


class MPCAggregator:
    """Secure aggregation among CrypTen parties; runs in party 0, the coordinator."""

    where = "mpc"
    secure = True

    def __init__(
        self,
        own: Silo | None,
        names: Sequence[str],
        channel: world.Channel | None = None,
        *,
        seed: int | None = None,
        collusion: int | None = None,
        schema: Any = None,
        own_path: str | Path | None = None,
        draft: Any = None,
    ):
        """Party 0 of ``names`` (rank order); ``seed`` makes every party's noise seeded (NOT private,
        and every party must be started with it); ``collusion`` is the threshold ``t`` (default
        ``n - 1``). ``own`` may be None, with ``schema`` and ``own_path``: party 0's silo is then read
        by ``begin``, once the parties have accepted the release (``declare``). ``draft``
        (``mpc.draft.DraftSpec``, with no schema): the parties draft a schema (``mpc.draft``)."""
        self.own = own
        self.own_path = own_path
        self.names = list(names)
        self.channel = channel or world.Channel()
        self.noise = party_noise(seed, 0)
        self.seeded = self.noise.seeded
        self.noise_name = self.noise.name
        n = self._party_count()
        self.parties_noise: PartiesNoise | None = PartiesNoise(n, n - 1 if collusion is None else collusion)
        self.schema = own.schema if own is not None else schema
        self.draft = draft
        #: What every party must have loaded: the schema's fingerprint, or the draft's.
        self.fingerprint = draft.fingerprint if draft is not None else schema_fingerprint(self.schema)
        self.release: Any = None
        #: The release the parties accepted (``declare``), and whether they have read their silos (``begin``).
        self.request: ReleaseRequest | None = None
        self.begun = False
        #: Whether a collective failed midway (a party lost): no further command can reach the parties.
        self.broken = False
        self.traffic = MPCTraffic(self)
        self._hello()
        self.threat_model = (
            f"secure multi-party computation among {len(self.names)} silo parties plus a "
            f"dealer (CrypTen, semi-honest, TTP provider): {COLLUSION}"
        )

    def _party_count(self) -> int:
        """The CrypTen parties that hold shares and add noise: here, one per silo."""
        return len(self.names)

    def _hello(self) -> None:
        """The handshake: every party must have loaded the same schema and use the same noise mode."""
        hello = {"op": "hello", "schema": self.fingerprint, "seeded": self.seeded}
        self.channel.send({**hello, "draft": self.draft.to_wire()} if self.draft is not None else hello)
        refusals = collect_verdicts(self.channel)
        different = [self.names[v.rank] for v in refusals if v.code == SCHEMA_DIFFERS]
        if different and self.draft is not None:
            raise InputError(
                f"{', '.join(different)}: started with --schema, not to draft one; start every party with "
                "`privsyn-fed mpc-party --draft`"
            )
        if different:
            raise InputError(
                f"{', '.join(different)}: loaded a different schema than party 0's (or was started with --draft); "
                "every party must use the same public schema file"
            )
        other_mode = [self.names[v.rank] for v in refusals if v.code == MODE_DIFFERS]
        if other_mode:
            raise InputError(
                f"{', '.join(other_mode)}: started {'without' if self.seeded else 'with'} --seed, but this "
                f"run's noise is {'seeded (not private)' if self.seeded else 'private'}; start every "
                "party with the same --seed, or none"
            )
        if refusals:
            raise MPCError(self._refused(refusals, "the handshake"))

    def release_request(self, terms: ReleaseTerms) -> ReleaseRequest:
        """The public request of a release on ``terms`` among these parties."""
        assert self.parties_noise is not None
        return ReleaseRequest.of(
            terms, self.fingerprint, self.seeded, self._party_count(), self.parties_noise.collusion
        )

    def gather_silo_names(self, own: str) -> list[str]:
        """Every party's silo name, by rank (``own`` is party 0's): public facts each party's operator
        gave (``mpc-party --silo NAME=TABLE``, else the file's name), asked for a silo column."""
        self.channel.send({"op": "names"})
        rows = world.gather_bytes(self.channel, own.encode("utf-8"))
        assert rows is not None
        return [row.decode("utf-8", errors="replace") for row in rows]

    def declare(self, terms: ReleaseTerms) -> None:
        """Send the release's public request (``terms``) to every party, which checks it against its own
        policy and budget store before it reads anything; ``InputError`` naming each party that refuses,
        and why (then nothing was read, reserved or spent by any party). With a privacy unit each
        party keeps at most K rows per unit of its silo and costs every step for one unit. With a silo
        column (the column and each party's silo name) each party checks its own name and gives its
        rows that name."""
        request = self.release_request(terms)
        self.channel.send({"op": "release", "request": request.to_wire()})
        refusals = collect_verdicts(self.channel)
        if refusals:
            raise InputError(self._refused(refusals, "the release"))
        self.request = request

    def begin(self, own: Silo | None = None) -> None:
        """After ``declare`` (and party 0's own reservation): party 0's silo is read (``own``, else
        ``own_path``), then every party reserves in its own store and reads its silo. ``InputError``
        naming a party whose silo cannot be read (its value-free message) or that refuses."""
        if self.request is None:
            raise ValueError("begin needs a declared release (declare)")
        if own is not None:
            self.own = own
        unit = self.request.unit
        if self.own is None:
            column, max_rows = (None, 1) if unit is None else (unit.column, unit.max_rows)
            site = None if self.request.site is None else (self.request.site[0], self.request.site[1][0])
            self.own = Silo.load(str(self.own_path), self.schema, unit=column, max_rows=max_rows, site=site)
        self.channel.send({"op": "begin"})
        refusals = collect_verdicts(self.channel)
        bad = [v for v in refusals if v.code == BAD_SILO]
        if bad:
            named = [(self.names[v.rank], v.reason) for v in bad]
            raise InputError("; ".join(why if why.startswith(name) else f"{name}: {why}" for name, why in named))
        if refusals:
            raise InputError(self._refused(refusals, "the release"))
        self.begun = True

    def _refused(self, refusals: list[Verdict], what: str) -> str:
        return "; ".join(f"{self.names[v.rank]} refused {what}: {v.reason}" for v in refusals)

    def _verdicts(self, op: str) -> None:
        """Every party's verdict on the command just sent; ``MPCError`` naming each that refused
        (nothing was computed or opened then)."""
        refusals = collect_verdicts(self.channel)
        if refusals:
            raise MPCError(self._refused(refusals, op) + "; nothing was opened")

    # ---- the aggregator protocol (aggregate.Aggregator) ----------------------------------------
    @property
    def silo_names(self) -> list[str]:
        """The parties' silo names, in rank order."""
        return list(self.names)

    def bind_release(self, accountant: Any) -> None:
        """Bind a release's accountant (None unbinds); exact sums are then refused unless it is
        non-private. Binding declares the release to the parties (unless ``declare`` did) and has
        them read their silos (unless ``begin`` did); unbinding tells them it ended, with its status,
        so that each settles its own store and closes its ledger copy."""
        if accountant is None:
            if self.begun and not self.broken:
                status = getattr(self.release, "status", "failed")
                try:
                    self.channel.send({"op": "end", "status": "complete" if status == "complete" else "failed"})
                except RuntimeError:  # the parties are gone; each settles its own store as it stops
                    self.broken = True
            self.release, self.request, self.begun = None, None, False
            return
        unit = getattr(accountant, "unit", None)
        details = getattr(accountant, "details", {})
        target = (details.get("options") or {}).get("target")
        recorded = details.get("silo_column")
        site = None if recorded is None else (recorded["column"], tuple(recorded["silos"]))
        wanted = ReleaseTerms(
            accountant.method, float(accountant.epsilon_budget), float(accountant.delta), unit, target, site
        )
        if self.request is None:
            self.declare(wanted)
        elif (accountant.seeded, wanted) != (self.request.seeded, self.request.terms):
            raise ValueError(f"the release {wanted} is not the one the parties accepted ({self.request})")
        if not self.begun:
            self.begin()
        self.release = accountant

    def ranks(self, among: Sequence[str]) -> list[int]:
        """The parties (ranks) of the silos ``among``."""
        return sorted(self.names.index(n) for n in among)

    def broadcast(self, payload: Mapping[str, np.ndarray], to: Sequence[str], *, round_index: int) -> None:
        """Nothing to do: public arrays travel with the queries that use them (Fed-TDA's encoding
        with its second-moments query, FLAIM's model marginals and proxy with its local-scores
        query); DistAIM sends the parties no model."""

    def batch(self, parts: Sequence[tuple[Query, Sequence[str]]]) -> tuple[Query, list[str]]:
        """``batched`` over the parties' silos: each part answered only by its silos."""
        return batched(parts, self.names)

    def rounding_l2(self, query: Query) -> float:
        """Extra L2 sensitivity from rounding a real answer to the grid: a record moves one silo's
        rounded answer by its exact change plus at most one grid step per cell."""
        return grid_rounding_l2(check_declared(query, "rounding"), self.schema)

    def noise_grid(self, query: Query) -> float:
        """The grid the parties' discrete Gaussians lie on: ``2^-REAL_BITS`` for real answers, 1 for counts."""
        return math.ldexp(1.0, -REAL_BITS) if check_declared(query, "noise grid").real else 1.0

    def noise_fields(self, noise, *, local: bool = False) -> dict[str, Any]:
        """Ledger fields of noise added inside MPC (``details.mpc`` has the full assumptions), or
        drawn by each silo's own process (``local``)."""
        if local:
            return {"sampler": LOCAL_SAMPLER}
        t, n = self.parties_noise.collusion, len(self.names)
        return {
            "sampler": self.noise_name,
            "noise_from": "parties, secret-shared",
            "collusion": f"shares: up to {n - 1} of {n} parties; noise: up to {t} of {n} parties; "
            "the dealer colludes with none",
        }

    @collective
    def noisy_sum(
        self, query: Query, among: Sequence[str], *, sigma: float, noise, round_index: int, label: str
    ) -> np.ndarray:
        """``sum`` plus every party's own ``N(0, sigma^2)`` (discrete, on the fixed-point grid of
        real answers, ``REAL_BITS``), opened to party 0; the exact sum is never opened."""
        q, ranks = check_declared(query, label), self.ranks(among)
        self._send("noisy_sum", q, ranks, sigma=sigma, label=label)
        mine = ring_answer(q, self.own, 0, ranks)
        return decode(q, secure.noisy_sum(mine, ranks, q.size(self.schema), grid_sigma(q, sigma), self.noise))

    @collective
    def local_select(self, queries: Mapping[str, Query], *, scale: float, noise, round_index: int) -> dict[str, int]:
        """Each silo scores with its query on its own rows and takes the noisy max itself
        (OpenDP's, in its own process); only the chosen indices reach party 0. Every silo must be
        sent the same query (the command is broadcast)."""
        q = one_query(queries, "local selection")
        ranks = self.ranks(list(queries))
        self._send("local_select", q, ranks, scale=scale, label=f"round {round_index}: this silo's selection")
        rows = world.gather_to_party0([local_choice(q, self.own, 0, ranks, scale)])
        return {self.names[r]: int(rows[r][0]) for r in ranks}

    def local_noisy_answers(
        self, queries: Mapping[str, Query], *, sigma: float, noise, round_index: int
    ) -> dict[str, np.ndarray]:
        """Not available over MPC (FLAIM's local steps beyond the first need it; refused before a
        run starts)."""
        raise MPCError("local measurements (FLAIM's --local-steps above 1) are not available over MPC")

    @collective
    def pool(self, cliques: Mapping[tuple[str, ...], Sequence[int]]) -> Pool:
        """An empty pool whose answers are secret-shared among the parties (``SharedPoolStorage``)."""
        return Pool(cliques, self.schema.shape, lambda length: SharedPoolStorage(self, length))

    def open_exact_sum_for_checks(
        self, query: Query, among: Sequence[str], *, label: str, round_index: int = 0
    ) -> np.ndarray:
        """The exact sum, opened to party 0: for checks only (no mechanism protects it)."""
        return self.exact_sum_and_share_for_checks(query, among, label)[1]

    @collective
    def exact_sum_and_share_for_checks(
        self, query: Query, among: Sequence[str], label: str = "sum"
    ) -> tuple[np.ndarray, np.ndarray]:
        """Party 0's share of the exact sum (uniformly random on its own) and the opened sum; for
        checks and demonstrations only (refused during a private release)."""
        refuse_exact_sum_in_release(self.release, label)
        q, ranks = check_declared(query, label), self.ranks(among)
        self._send("sum", q, ranks)
        shared = secure.share_sum(ring_answer(q, self.own, 0, ranks), ranks, q.size(self.schema))
        return shared.share.numpy().copy(), decode(q, secure.open_to_party0(shared))

    def ledger_details(self, noise) -> dict[str, Any]:
        """``details.noise`` and ``details.mpc`` of the ledger."""
        return {
            "noise": self.noise_name,
            "mpc": {
                "parties": self._party_count(),
                "layout": "silo parties",
                "collusion": self.parties_noise.collusion,
                "provider": "TTP (dealer process: correlated randomness only, no noise)",
                "debug": False,
                "framework": "CrypTen 0.4.1, semi-honest",
                "transport": world.transport(),
                "assumptions": COLLUSION,
                "noise": self.noise_name,
            },
        }

    def traffic_summary(self) -> dict[str, Any] | None:
        """Rounds and bytes of every party, measured now (``MPCTraffic.summary``)."""
        return self.traffic.summary(self.names)

    # ---- party 0's side of the commands ---------------------------------------------------------
    def _send(self, op: str, q, ranks: list[int], **extra) -> None:
        """Send a command about query ``q`` answered by parties ``ranks``; returns once every party
        accepted it (``MPCError`` naming any that refused)."""
        header, arrays = q.to_wire()
        self.command(op, {"query": header, "among": ranks, **extra}, arrays)

    def command(self, op: str, header: Mapping[str, Any] | None = None, arrays=None) -> None:
        """Broadcast command ``op`` and collect every party's verdict on it (``_verdicts``)."""
        self.channel.send({"op": op, **(header or {})}, arrays)
        self._verdicts(op)

    def close(self) -> None:
        """Tell every party to stop serving."""
        self.channel.send({"op": "stop"})

    @collective
    def party_traffic(self) -> list[dict[str, float]]:
        """Rounds and bytes per party (CrypTen's counts plus the command channel)."""
        self.channel.send({"op": "traffic"})
        rows = world.gather_to_party0(traffic_row(self.channel))
        return [{"rounds": r[0], "bytes": r[1], "command_bytes": r[2], "command_broadcasts": r[3]} for r in rows]


class MPCTraffic:
    """``traffic_summary`` for an MPC run: measured at the end, per party."""

    def __init__(self, agg: MPCAggregator):
        self.agg = agg

    def summary(self, names: Sequence[str]) -> dict[str, Any]:
        """Rounds and bytes of every party, measured now."""
        per = self.agg.party_traffic()
        total = [p["bytes"] + p["command_bytes"] for p in per]
        return {
            "mpc": True,
            "silos": len(names),
            "silos_active": len(names),
            "parties": per,
            "rounds_max": max(p["rounds"] for p in per),
            "mean_bytes_sent_per_active_silo": float(np.mean(total)),
            "mean_bytes_received_per_active_silo": float(np.mean(total)),
            "max_bytes_per_silo": float(max(total)),
        }
