"""The MPC aggregator: party 0's view of a run in which every silo is its own CrypTen party.

``MPCAggregator`` implements the aggregator interface for the coordinating party (rank 0): each
call is broadcast as a command, every party secret-shares its own answer, and only noisy sums,
selected indices (or, for checks and Fed-TDA's labelled non-private mode, an exact sum) are opened,
to party 0 alone. ``serve`` is the loop the other parties run: they answer only declared queries
(``privsyn_fed.queries``) over their own rows. ``SharedPool`` keeps DistAIM's pool of answers as
shares inside the parties. Real answers (Fed-TDA's second moments) are shared on the grid
``2^-REAL_BITS``; the noise is then the discrete Gaussian on that grid, and the rounding is
charged as extra sensitivity (``rounding_l2``).
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Mapping, Sequence

import numpy as np

from ..errors import InputError, MPCError
from ..mechanisms import OpenDPNoise
from ..queries import MarginalsQuery, MaskedQuery, answer, concat, from_wire
from ..silo import Silo
from . import secure, world
from .noise import gumbel_rounding_slack

COLLUSION = ("additive secret sharing among the n parties: any coalition of up to n-1 parties sees only "
             "uniformly random shares; the dealer (a separate process that sees no data) must collude with "
             "no party and must not see the released outputs, as it knows the noise it dealt")


class MPCAggregator:
    """Secure aggregation among CrypTen parties; runs in party 0, the coordinator."""

    where = "mpc"

    def __init__(self, own: Silo, names: Sequence[str], channel: world.Channel | None = None):
        self.own = own
        self.names = list(names)
        self.channel = channel or world.Channel()
        self.seeded = secure.dealer_seeded()
        self.noise_name = ("dealer: seeded numpy (not private)" if self.seeded else
                           "dealer: exact discrete Gaussian (OpenDP) / exactly rounded Gumbel (CSPRNG)")
        self.schema = own.schema
        self.traffic = MPCTraffic(self)
        self.channel.send({"op": "hello", "schema": schema_fingerprint(own.schema)})
        agree = world.gather_to_party0([1.0])
        different = [self.names[k] for k, (ok,) in enumerate(agree) if not ok]
        if different:
            raise InputError(f"{', '.join(different)}: loaded a different schema than party 0's; every party "
                             "must use the same public schema file")
        self.threat_model = (f"secure multi-party computation among {len(self.names)} silo parties plus a "
                             f"dealer (CrypTen, semi-honest, TTP provider): {COLLUSION}")

    # ---- the aggregator interface -----------------------------------------------------------
    @property
    def silo_names(self) -> list[str]:
        return list(self.names)

    def local(self, name: str) -> Silo:
        if name != self.own.name:
            raise RuntimeError(f"{name} lives in another party's process; only secure sums reach it")
        return self.own

    def ranks(self, among: Sequence[str]) -> list[int]:
        return sorted(self.names.index(n) for n in among)

    def sum(self, request, among: Sequence[str], *, round: int, label: str) -> np.ndarray:
        """The exact sum, opened to party 0: for checks only (no mechanism protects it)."""
        return self.sum_and_share(request, among, label)[1]

    def sum_and_share(self, request, among: Sequence[str], label: str = "sum") -> tuple[np.ndarray, np.ndarray]:
        """Party 0's share of the exact sum (uniformly random on its own) and the opened sum."""
        q, ranks = _query(request, label), self.ranks(among)
        self._send("sum", q, ranks)
        shared = secure.share_sum(_answer(q, self.own, 0, ranks), ranks, q.size(self.schema))
        return shared.share.numpy().copy(), _decode(q, secure.open_to_party0(shared))

    def noisy_sum(self, request, among: Sequence[str], *, sigma: float, round: int, label: str) -> np.ndarray:
        """``sum + N(0, sigma^2)``: the dealer's discrete Gaussian on the fixed-point grid of real
        answers (``REAL_BITS``), opened to party 0; the exact sum is never opened."""
        q, ranks = _query(request, label), self.ranks(among)
        self._send("noisy_sum", q, ranks, sigma=sigma)
        return _decode(q, secure.noisy_sum(_answer(q, self.own, 0, ranks), ranks, q.size(self.schema),
                                           _grid_sigma(q, sigma)))

    def batch(self, parts: Sequence[tuple[object, Sequence[str]]]) -> tuple[object, list[str]]:
        """One query for several ``(request, silos)``: each part answered only by its silos."""
        union = [n for n in self.names if any(n in among for _, among in parts)]
        if all(sorted(among) == sorted(union) for _, among in parts):
            return concat([q for q, _ in parts]), union
        return concat([MaskedQuery(q, tuple(self.ranks(among))) for q, among in parts]), union

    def local_select(self, request, among: Sequence[str], *, epsilon: float, sensitivity: float) -> dict[str, int]:
        """Each silo in ``among`` scores with ``request`` on its own rows and runs the exponential
        mechanism itself (OpenDP's noisy max); only the chosen indices reach party 0. The caller
        charges it (parallel composition over the silos)."""
        q, ranks = _query(request, "local selection"), self.ranks(among)
        self._send("local_select", q, ranks, epsilon=epsilon, sensitivity=sensitivity)
        rows = world.gather_to_party0([_local_choice(q, self.own, 0, ranks, epsilon, sensitivity)])
        return {self.names[r]: int(rows[r][0]) for r in ranks}

    def rounding_l2(self, request) -> float:
        """Extra L2 sensitivity from rounding a real answer to the grid: a record moves one silo's
        rounded answer by its exact change plus at most one grid step per cell."""
        q = _query(request, "rounding")
        return math.sqrt(q.size(self.schema)) * math.ldexp(1.0, -REAL_BITS) if q.real else 0.0

    def _send(self, op: str, q, ranks: list[int], **extra) -> None:
        header, arrays = q.to_wire()
        self.channel.send({"op": op, "query": header, "among": ranks, **extra}, arrays)

    def noise_fields(self) -> dict:
        """Ledger fields of noise added inside MPC (``details.mpc`` has the full assumptions)."""
        return {"sampler": self.noise_name, "noise_from": "dealer, secret-shared",
                "collusion": f"up to {len(self.names) - 1} of {len(self.names)} parties; the dealer colludes with none"}

    def ledger_details(self) -> dict:
        """``details.mpc`` of the ledger."""
        return {"parties": len(self.names), "provider": "TTP (dealer process)", "debug": False,
                "framework": "CrypTen 0.4.1, semi-honest", "transport": "gloo over TCP, unencrypted",
                "assumptions": COLLUSION, "noise": self.noise_name}

    def broadcast(self, payload: Mapping[str, np.ndarray], to: Sequence[str], *, round: int) -> None:
        """Nothing to do: public arrays travel with the queries that use them (Fed-TDA's encoding
        with its second-moments query, FLAIM's model marginals and proxy with its local-scores
        query); DistAIM sends the parties no model."""

    def pool(self, prob) -> "SharedPool":
        return SharedPool(self, prob)

    def close(self) -> None:
        self.channel.send({"op": "stop"})

    def party_traffic(self) -> list[dict[str, float]]:
        """Rounds and bytes per party (CrypTen's counts plus the command channel)."""
        self.channel.send({"op": "traffic"})
        rows = world.gather_to_party0(_traffic_row(self.channel))
        return [{"rounds": r[0], "bytes": r[1], "command_bytes": r[2]} for r in rows]


class MPCTraffic:
    """``traffic_summary`` for an MPC run: measured at the end, per party."""

    def __init__(self, agg: MPCAggregator):
        self.agg = agg

    def summary(self, names: Sequence[str]) -> dict[str, float]:
        per = self.agg.party_traffic()
        total = [p["bytes"] + p["command_bytes"] for p in per]
        return {"mpc": True, "silos": len(names), "silos_active": len(names), "parties": per,
                "rounds_max": max(p["rounds"] for p in per),
                "mean_bytes_sent_per_active_silo": float(np.mean(total)),
                "mean_bytes_received_per_active_silo": float(np.mean(total)),
                "max_bytes_per_silo": float(max(total))}


def _traffic_row(channel: world.Channel) -> list[float]:
    t = world.traffic()
    return [float(t["rounds"]), float(t["bytes"]), float(channel.bytes)]


#: Fractional bits of real answers (Fed-TDA's second moments) on shares.
REAL_BITS = 16


def _query(request, label: str):
    if not hasattr(request, "to_wire"):
        raise TypeError(f"{label}: only declared queries (privsyn_fed.queries) can be sent to MPC parties")
    return request


def _answer(q, own: Silo, me: int, ranks: list[int]) -> np.ndarray | None:
    """This party's answer as ring integers (reals on the ``2^-REAL_BITS`` grid), if it contributes."""
    if me not in ranks:
        return None
    value = answer(q, own, me)
    return np.rint(np.ldexp(value.astype(float), REAL_BITS)).astype(np.int64) if q.real else value.astype(np.int64)


def schema_fingerprint(schema) -> str:
    return hashlib.sha256(json.dumps(schema.to_dict(), sort_keys=True).encode()).hexdigest()


def _local_choice(q, own: Silo, me: int, ranks: list[int], epsilon: float, sensitivity: float) -> float:
    if me not in ranks:
        return -1.0
    return float(OpenDPNoise().noisy_argmax(np.asarray(q(own), dtype=float), 2.0 * sensitivity / epsilon))


def _decode(q, opened: np.ndarray | None) -> np.ndarray | None:
    if opened is None or not q.real:
        return opened
    return np.ldexp(opened.astype(float), -REAL_BITS)


def _grid_sigma(q, sigma: float) -> float:
    return math.ldexp(sigma, REAL_BITS) if q.real else sigma


class SharedPool:
    """DistAIM's pool ``A_r = sum_{k in Seen} M_r(D_k)``, held as shares by the parties."""

    def __init__(self, agg: MPCAggregator, prob):
        self.agg, self.prob = agg, prob
        self.keys = list(prob.candidates)
        self.sizes = [prob.cells(q) for q in self.keys]
        self.starts = dict(zip(self.keys, np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(int)))
        self.query = MarginalsQuery(tuple(tuple(prob.columns(q)) for q in self.keys))
        self.seen: set[str] = set()
        agg.channel.send({"op": "pool_new", "length": int(sum(self.sizes))})
        self.shares = secure.zeros(int(sum(self.sizes)))

    def cells(self, q) -> np.ndarray:
        return np.arange(self.starts[q], self.starts[q] + self.prob.cells(q), dtype=np.int64)

    def add(self, silos: list[str], round: int) -> list[str]:
        new = [k for k in silos if k not in self.seen]
        if new:
            ranks = self.agg.ranks(new)
            self.agg._send("pool_add", self.query, ranks)
            mine = _answer(self.query, self.agg.own, 0, ranks)
            self.shares = self.shares + secure.share_sum(mine, ranks, int(sum(self.sizes)))
            self.seen.update(new)
        return new

    def select_arrays(self, cands: dict, model_marginals: dict, sigma: float) -> dict[str, np.ndarray]:
        """The public inputs of ``secure.secure_select`` for candidates ``cands`` (weights)."""
        keys = list(cands)
        weights = np.array([cands[q] for q in keys])
        if not np.allclose(weights, np.round(weights)):
            raise ValueError("secure select needs integer workload weights")
        model = np.concatenate([np.floor(np.ldexp(np.ravel(model_marginals[q]), secure.SCORE_BITS)) for q in keys])
        offsets = [round_half(math.ldexp(math.sqrt(2 / math.pi) * sigma * self.prob.cells(q), secure.SCORE_BITS))
                   for q in keys]
        return {"cells": np.concatenate([self.cells(q) for q in keys]),
                "segment_ids": np.concatenate([np.full(self.prob.cells(q), i) for i, q in enumerate(keys)]),
                "model": model.astype(np.int64), "weights": np.round(weights).astype(np.int64),
                "offsets": np.array(offsets, dtype=np.int64), "total_cells": self.cells(self.keys[0])}

    def select(self, acc, noise, cands: dict, model_marginals: dict, *, sigma: float, epsilon: float,
               sensitivity: float, round: int, query: str):
        """The exponential mechanism on shares. ``noise`` (party 0's own source) is unused: the
        dealer supplies the noise."""
        return self.select_many(acc, cands, model_marginals, sigma=sigma, epsilon=epsilon, sensitivity=sensitivity,
                                round=round, query=query, draws=1)[0]

    def select_many(self, acc, cands: dict, model_marginals: dict, *, sigma: float, epsilon: float,
                    sensitivity: float, round: int, query: str, draws: int) -> list:
        """``draws`` independent exponential mechanisms on the same scores, each charged ``epsilon``
        (which covers the fixed-point rounding slack)."""
        arrays = self.select_arrays(cands, model_marginals, sigma)
        # sample at eps_s with eps_s + 4 / scale(eps_s) = epsilon
        eps_s = epsilon / (1.0 + 4.0 / secure.gumbel_scale(1.0, sensitivity))
        scale = secure.gumbel_scale(eps_s, sensitivity)
        for _ in range(draws):
            acc.exponential(query, sensitivity, epsilon, self.agg.where, round=round, candidates=len(cands),
                            fixed_point={"score_bits": secure.SCORE_BITS, "epsilon_sampled": eps_s,
                                         "gumbel_scale_grid_units": scale,
                                         "rounding_slack": gumbel_rounding_slack(scale)},
                            **self.agg.noise_fields())
        self.agg.channel.send({"op": "select", "scale": scale, "draws": draws}, arrays)
        keys = list(cands)
        return [keys[i] for i in secure.secure_select(self.shares, scale=scale, draws=draws, **arrays)]

    def measure(self, acc, noise, q, *, sigma: float, round: int, query: str) -> np.ndarray:
        acc.gaussian(query, 1.0, sigma, self.agg.where, round=round, cells=self.prob.cells(q),
                     silos=len(self.seen), **self.agg.noise_fields())
        self.agg.channel.send({"op": "measure", "sigma": sigma}, {"cells": self.cells(q)})
        return secure.secure_measure(self.shares, self.cells(q), sigma)


def round_half(x: float) -> int:
    return int(math.floor(x + 0.5))


def serve(own: Silo, channel: world.Channel | None = None) -> None:
    """A non-coordinating party: follow party 0's commands until ``stop``."""
    channel = channel or world.Channel()
    me = secure.rank()
    pool = None
    while True:
        cmd, arrays = channel.receive()
        op = cmd["op"]
        if op == "stop":
            return
        if op == "hello":
            same = cmd["schema"] == schema_fingerprint(own.schema)
            world.gather_to_party0([1.0 if same else 0.0])
            if not same:
                raise MPCError("this party's schema differs from party 0's; use the same public schema file")
        elif op == "traffic":
            world.gather_to_party0(_traffic_row(channel))
        elif op in ("sum", "noisy_sum", "pool_add"):
            q = from_wire(own.schema, cmd["query"], arrays)
            mine, length = _answer(q, own, me, cmd["among"]), q.size(own.schema)
            if op == "sum":
                secure.open_to_party0(secure.share_sum(mine, cmd["among"], length))
            elif op == "noisy_sum":
                secure.noisy_sum(mine, cmd["among"], length, _grid_sigma(q, cmd["sigma"]))
            else:
                pool = pool + secure.share_sum(mine, cmd["among"], length)
        elif op == "local_select":
            q = from_wire(own.schema, cmd["query"], arrays)
            world.gather_to_party0([_local_choice(q, own, me, cmd["among"], cmd["epsilon"], cmd["sensitivity"])])
        elif op == "pool_new":
            pool = secure.zeros(int(cmd["length"]))
        elif op == "select":
            secure.secure_select(pool, scale=cmd["scale"], draws=int(cmd["draws"]), **arrays)
        elif op == "measure":
            secure.secure_measure(pool, arrays["cells"], cmd["sigma"])
        else:
            raise world.MPCError(f"unknown command {op!r} from party 0")
