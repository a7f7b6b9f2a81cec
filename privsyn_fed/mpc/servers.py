"""Party 0 of a federation of sites and compute servers: the aggregator over sites' sealed shares.

The CrypTen parties are ``S`` compute servers that hold no silo; the sites (``privsyn_fed.site``)
connect to party 0 (``sites.SiteHub``). For each step that needs the sites' answers party 0 asks
the sites it names (the method's sample: DistAIM's and FLAIM's Poisson sample of sites, public
randomness), and each site sends ``S`` shares of its answer, each sealed for one server and
signed. Party 0 opens its own (server 0's) and relays to server ``j`` only the shares sealed for
``j`` (``world.Channel.send_each``): relaying them, it learns their sizes. Each server checks every
site's signature and opens its shares, sums them, and the servers then run the secure step as
parties do (``secure``): ``sum_j sum_k s_kj = sum_k x_k``, every server adds its own noise, and only
the noisy result is opened. A site that does not answer in time is skipped and the release goes
on; the ledger lists, per step, the sites that contributed (``details.site_contributions``).
Noise: ``S - t`` honest servers carry the guarantee, whatever the number of sites.
"""

from __future__ import annotations

import json
import math
import secrets
from typing import Any, Mapping, Sequence

import numpy as np

from ..aggregation import Pool, check_declared
from ..common import InputError, MPCError
from . import envelope, secure, world
from .aggregator import MPCAggregator
from .answers import decode, grid_sigma, one_query
from .grid import SERVERS_COLLUSION
from .policy import MODE_DIFFERS, SCHEMA_DIFFERS
from .shared_pool import SharedPoolStorage, collective
from .sites import ANSWER_S, APPROVAL_S, SiteHub
from .verdicts import Verdict, collect_verdicts
from .wire import FrameError, pack_arrays, parse_header, query_digest, unpack_blobs


def pack_bytes(raw: bytes) -> np.ndarray:
    """Bytes as an int64 array (zero-padded to a multiple of 8), for a command's arrays."""
    return np.frombuffer(raw + b"\0" * (-len(raw) % 8), dtype="<i8").astype(np.int64)


class ServersAggregator(MPCAggregator):
    """Party 0 (server 0) of ``S`` compute servers, over the sites of ``hub`` (module docstring)."""

    #: Party 0 is a compute server: the release reads no silo here.
    holds_no_silo = True

    def __init__(
        self,
        hub: SiteHub,
        federation: str,
        ca_pem: bytes,
        credentials: tuple[Any, Any],
        channel: world.Channel | None = None,
        *,
        seed: int | None = None,
        collusion: int | None = None,
        schema: Any = None,
        site_wait_s: float = 60.0,
        answer_s: float = ANSWER_S,
        approval_s: float = APPROVAL_S,
        log=None,
    ):
        """``credentials``: server 0's certificate and key files (its encryption key is signed with it)."""
        self.hub, self.federation, self.ca_pem = hub, federation, ca_pem
        self.credentials = credentials
        self.release_id = secrets.token_hex(12)
        self.site_wait_s, self.answer_s, self.approval_s = site_wait_s, answer_s, approval_s
        self.log = log or (lambda line: None)
        self.step = 0
        self.servers = secure.world_size()  # the servers of the mesh (the dealer is not one)
        self.offers: list[dict] = []
        self._key: Any = None
        self._certs: dict[str, str] = {}
        #: The sites whose certificate every server holds (sent with the first step they answered).
        self._certs_sent: set[str] = set()
        self.contributions: list[dict[str, Any]] = []
        super().__init__(None, hub.names, channel, seed=seed, collusion=collusion, schema=schema)
        self.threat_model = (
            f"a federation of {len(self.names)} sites and {self.servers} compute servers plus a dealer (CrypTen, "
            f"semi-honest, TTP provider): {SERVERS_COLLUSION}"
        )

    def _party_count(self) -> int:
        """The compute servers: they hold the shares and add the noise."""
        return self.servers

    # ---- the handshake, the release, its beginning ----
    def _hello(self) -> None:
        """Every server's schema and noise mode, then every server's encryption key for this release."""
        self.channel.send({"op": "hello", "schema": self.fingerprint, "seeded": self.seeded})
        refusals = collect_verdicts(self.channel)
        if any(v.code in (SCHEMA_DIFFERS, MODE_DIFFERS) for v in refusals):
            raise InputError(
                "; ".join(f"server {v.rank}: its schema or --seed differs from party 0's" for v in refusals)
                + "; every server must load the same public schema and the same --seed, or none"
            )
        if refusals:
            raise MPCError(self._refused(refusals, "the handshake"))
        context = envelope.offer_context(self.federation, self.release_id)
        self.channel.send({"op": "offer", "release": self.release_id, "sites": self.names})
        cert_path, key_path = self.credentials
        with open(cert_path, "rb") as fh:
            cert_pem = fh.read()
        with open(key_path, "rb") as fh:
            self._key, mine = envelope.server_offer(fh.read(), cert_pem, context)
        rows = world.gather_bytes(self.channel, json.dumps(mine, sort_keys=True).encode())
        assert rows is not None
        self.offers = [parse_header(row) for row in rows]  # a frame header's limits
        for j, offer in enumerate(self.offers):  # a server's key is checked here as every site checks it
            envelope.check_offer(offer, self.ca_pem, f"party-{j}", context)

    def _refused(self, refusals: list[Verdict], what: str) -> str:
        return "; ".join(f"server {v.rank} refused {what}: {v.reason}" for v in refusals)

    def gather_silo_names(self, own: str) -> list[str]:
        """The sites' names: they name themselves by their certificates."""
        return list(self.names)

    def declare(self, terms) -> None:
        """The request on ``terms`` to every server, then to every site connected within ``site_wait_s``:
        a site that refuses (its policy, its store) takes no part; ``InputError`` if no site accepts."""
        request = self.release_request(terms)
        self.channel.send({"op": "release", "request": request.to_wire(), "sites": self.names})
        refusals = collect_verdicts(self.channel)
        if refusals:
            raise InputError(self._refused(refusals, "the release"))
        self.request = request
        live = self.hub.wait(self.site_wait_s)
        self.log(f"{len(live)} of {len(self.names)} sites connected")
        accepted = self._offer_release(live)
        if not accepted:
            raise InputError(f"no site accepted the release ({len(live)} connected; each says why in its own output)")

    def _offer_release(self, names: Sequence[str]) -> list[str]:
        assert self.request is not None
        header = {
            "op": "release",
            "request": self.request.to_wire(),
            "release": self.release_id,
            "sites": self.names,
            "offers": self.offers,
        }
        replies = self.hub.ask(names, lambda n: (header, b""), self.approval_s, states=("joined",))
        accepted = [n for n, (h, _) in replies.items() if h.get("op") == "accepted"]
        for n in accepted:
            self.hub.links[n].state = "accepted"
        return accepted

    def begin(self, own=None) -> None:
        """Every server opens its ledger copy; every site that accepted reserves, reads its silo and
        opens its own."""
        if self.request is None:
            raise ValueError("begin needs a declared release (declare)")
        self.command("begin")
        self.begun = True
        self._begin_sites([n for n in self.names if n in self.hub.links and self.hub.links[n].state == "accepted"])
        if not self.hub.active():
            raise InputError("no site could begin the release (each says why in its own output)")

    def _begin_sites(self, names: Sequence[str]) -> None:
        replies = self.hub.ask(names, lambda n: ({"op": "begin"}, b""), self.answer_s, states=("accepted",))
        for n, (h, _) in replies.items():
            if h.get("op") == "ready":
                self.hub.links[n].state = "active"

    def _admit_late(self) -> None:
        """Sites that connected after the release was declared take part from now on."""
        late = [n for n in self.names if n in self.hub.links and self.hub.links[n].state == "joined"]
        if late and self.request is not None and self.begun:
            self._begin_sites(self._offer_release(late))

    # ---- collecting the sites' shares ----
    def _collect(self, kind: str, q, among: Sequence[str], extra: Mapping[str, Any]):
        """Ask the active sites of ``among`` for their sealed shares of ``q``; returns the sites that
        answered, server 0's share of their sum, and each server's command (its sealed shares)."""
        self._admit_late()
        self.step += 1
        step, size = self.step, q.size(self.schema)
        header, arrays = q.to_wire()
        layout, body = pack_arrays(arrays)
        digest = query_digest(header, arrays)
        ask = {"op": "answer", "kind": kind, "step": step, "query": header, "arrays": layout, **extra}
        wanted = [n for n in among if n in set(self.hub.active())]
        replies = self.hub.ask(wanted, lambda n: (ask, body), self.answer_s)
        mine = np.zeros(size, dtype=np.int64)
        sealed: list[list[bytes]] = [[] for _ in range(self.servers)]
        answered = []
        for name in wanted:
            if name not in replies:
                continue
            reply, raw = replies[name]
            try:
                blobs = unpack_blobs(reply.get("lengths"), raw)
                if reply.get("op") != "shares" or reply.get("step") != step or len(blobs) != 2 * self.servers:
                    raise FrameError(f"a reply that is not {self.servers} sealed, signed shares for step {step}")
                aad = envelope.aad_of(self.federation, self.release_id, name, 0, step, digest)
                cert = self.hub.links[name].cert_pem
                envelope.check_signature(cert, self.ca_pem, f"site-{name}", blobs[0], aad, blobs[1])
                share = envelope.open_sealed(blobs[0], self._key, aad, size)
            except (FrameError, envelope.EnvelopeError, ValueError) as exc:
                self.hub.drop(name, f"its shares were refused: {' '.join(str(exc).split())[:200]}")
                continue
            mine = (mine.view(np.uint64) + share.view(np.uint64)).view(np.int64)
            for j in range(self.servers):
                sealed[j] += [blobs[2 * j], blobs[2 * j + 1]]
            self._certs.setdefault(name, cert.decode("ascii"))
            answered.append(name)
        messages = []
        for j in range(self.servers):
            lengths = [len(b) for b in sealed[j]]
            cmd = {
                "op": kind,
                "query": header,
                "among": list(range(self.servers)),
                "sites": answered,
                "step": step,
                "digest": digest,
                "lengths": lengths,
                "certs": {n: self._certs[n] for n in answered if n not in self._certs_sent},
                **extra,
            }
            messages.append((cmd, {**arrays, "_sealed": pack_bytes(b"".join(sealed[j]))}))
        return answered, mine, messages

    def _relay(self, op: str, messages) -> None:
        """Each server its own command; ``MPCError`` naming any that refused (nothing is opened then).
        Once accepted, every server holds the certificates it carried."""
        self.channel.send_each(messages)
        self._verdicts(op)
        self._certs_sent.update(messages[0][0]["certs"])

    def _record(self, round_index: int, label: str, sites: list[str]) -> None:
        entry = {"round": int(round_index), "step": label, "sites": sites}
        self.contributions.append(entry)
        if self.release is not None:
            self.release.details.setdefault("site_contributions", []).append(entry)

    # ---- the aggregator protocol ----
    @collective
    def noisy_sum(self, query, among, *, sigma: float, noise, round_index: int, label: str) -> np.ndarray:
        """``sum`` over the sites that answered, plus every server's own ``N_Z(0, sigma^2)``, opened
        to party 0; the exact sum is never opened."""
        q = check_declared(query, label)
        answered, mine, messages = self._collect("noisy_sum", q, among, {"sigma": sigma, "label": label})
        self._relay("noisy_sum", messages)
        self._record(round_index, label, answered)
        everyone = list(range(self.servers))
        return decode(q, secure.noisy_sum(mine, everyone, q.size(self.schema), grid_sigma(q, sigma), self.noise))

    @collective
    def local_select(self, queries, *, scale: float, noise, round_index: int) -> dict[str, int]:
        """Each sampled site scores on its own rows and takes the noisy max itself; only the chosen
        indices reach party 0 (the servers take no part)."""
        q = one_query(queries, "local selection")
        self._admit_late()
        self.step += 1
        header, arrays = q.to_wire()
        layout, body = pack_arrays(arrays)
        label = f"round {round_index}: this site's selection"
        ask = {
            "op": "local_select",
            "step": self.step,
            "query": header,
            "arrays": layout,
            "scale": scale,
            "label": label,
        }
        wanted = [n for n in queries if n in set(self.hub.active())]
        replies = self.hub.ask(wanted, lambda n: (ask, body), self.answer_s)
        out, candidates = {}, q.size(self.schema)  # one score per candidate
        for name, (reply, _) in replies.items():
            choice = reply.get("choice")
            if reply.get("op") != "choice" or type(choice) is not int or not 0 <= choice < candidates:
                self.hub.drop(name, "a malformed choice")
                continue
            out[name] = choice
        self._record(round_index, label, sorted(out, key=self.names.index))
        return out

    def pool(self, cliques) -> Pool:
        """An empty pool, secret-shared among the servers."""
        return Pool(cliques, self.schema.shape, lambda length: ServersPoolStorage(self, length))

    def exact_sum_and_share_for_checks(self, query, among, label: str = "sum"):
        """Refused: the servers never open a sum without noise."""
        raise MPCError("exact sums are not available with sites and servers")

    def bind_release(self, accountant: Any) -> None:
        """As ``MPCAggregator.bind_release``; at the release's end every site is told its status."""
        if accountant is None and self.begun:
            status = getattr(self.release, "status", "failed")
            self.hub.close({"op": "end", "status": "complete" if status == "complete" else "failed"})
        super().bind_release(accountant)

    def close(self) -> None:
        """Stop the servers and close the sites' port."""
        self.hub.close({"op": "end", "status": "failed"})
        super().close()

    def ledger_details(self, noise) -> dict[str, Any]:
        """``details.noise`` and ``details.mpc`` (layout: sites and servers)."""
        out = super().ledger_details(noise)
        out["mpc"].update(
            parties=self.servers,
            layout="sites and servers",
            servers=self.servers,
            sites=list(self.names),
            assumptions=SERVERS_COLLUSION,
            provider="TTP (dealer process: correlated randomness only, no noise)",
        )
        return out

    def traffic_summary(self) -> dict[str, Any]:
        """Bytes of every server (CrypTen's counts and the commands) and of every site (its frames)."""
        per = self.party_traffic()
        sites = self.hub.traffic()
        per_site = [v["sent"] + v["received"] for v in sites.values()] or [0]
        active = sum(1 for v in sites.values() if v["received"])
        server_bytes = [p["bytes"] + p["command_bytes"] for p in per]
        return {
            "mpc": True,
            "layout": "sites and servers",
            "silos": len(self.names),
            "silos_active": active,
            "parties": per,
            "servers": per,
            "sites": sites,
            "rounds_max": max(p["rounds"] for p in per),
            "mean_bytes_sent_per_active_silo": float(np.mean(per_site)),
            "mean_bytes_received_per_active_silo": float(np.mean(per_site)),
            "max_bytes_per_silo": float(max(per_site)),
            "max_bytes_per_site": float(max(per_site)),
            "max_bytes_per_server": float(max(server_bytes)),
        }


class ServersPoolStorage(SharedPoolStorage):
    """DistAIM's pool as shares held by the servers: a newly sampled site shares its answers once."""

    @collective
    def accumulate(self, query, silos: Sequence[str], round_index: int) -> list[str]:
        """Add the answers of the sites of ``silos`` that answer now; returns them."""
        agg: ServersAggregator = self.agg
        answered, mine, messages = agg._collect("pool_add", query, silos, {})
        if not answered:  # the sampled new sites are absent: the pool stays as it is
            return []
        agg._relay("pool_add", messages)
        agg._record(round_index, "pool: new sites' answers to every candidate", answered)
        self.shares = self.shares + secure.share_sum(mine, list(range(agg.servers)), self.length)
        return answered


def noise_factor(servers: int, collusion: int) -> float:
    """The released noise's standard deviation over the planned sigma: ``sqrt(S / (S - t))``."""
    return math.sqrt(servers / (servers - collusion))
