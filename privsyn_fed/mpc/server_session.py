"""A compute server's side of a release over sites: it holds no silo, only the sites' shares.

A server follows party 0's commands as a party does (``party_session``), with three differences:
  * ``offer``: it draws an encryption key for the release and signs it with its certificate's key
    (``site.envelope.server_offer``); the sites check it before they seal anything for it;
  * ``noisy_sum`` and ``pool_add`` come with the shares sealed for this server by the sites that
    answered. The server checks each site's certificate (the federation's CA, ``site-<name>``, a
    site of the release) and signature, opens each share for the command's step and query
    (``envelope.aad_of``: a share of another step, query, site or server cannot be opened), and
    takes their sum as its own answer; any failure refuses the step, so nothing is opened;
  * its costing is the union's: a record is in one site, so a step costs the largest cost any one
    site's rows could bear (``worst_site_charge``); a site's answers enter the pool once.
The server's ledger copy records every step it costed before it answered.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..common import first_line
from ..silo import MarginalsQuery, from_wire
from . import envelope, secure, world
from .answers import grid_sigma
from .party_costs import Charge, noisy_sum_charge, pool_add_check
from .party_ledger import PartyRelease
from .party_session import PartySession
from .party_store import make_folder
from .policy import ACCEPT, Refused
from .request import ReleaseRequest
from .verdicts import send_verdict
from .wire import FrameError, query_digest, unpack_blobs


class ServerSession(PartySession):
    """One compute server's state across party 0's commands (module docstring)."""

    def __init__(
        self, schema, rank: int, parties: int, *, credentials, ca_pem: bytes, federation: str, ledgers: Path, **kwargs
    ):
        super().__init__(schema, str(ledgers / "server"), rank, parties, **kwargs)
        self.credentials, self.ca_pem, self.federation = credentials, ca_pem, federation
        self.ledgers = ledgers
        self.release_id = ""
        self.sites: list[str] = []
        self.pooled: set[str] = set()
        self.last_step = 0
        self._key: Any = None
        #: Each site's certificate, as it came with the first step the site answered.
        self._site_certs: dict[str, str] = {}
        self.note = "party 0 stopped before any release began; nothing was spent here"

    def handlers(self) -> dict[str, Callable[[dict], None]]:
        """A party's, and ``offer``."""
        return {**super().handlers(), "offer": self.offer}

    def offer(self, cmd: dict) -> None:
        """This release's encryption key, signed with the server's certificate key, to party 0."""
        release, sites = cmd.get("release"), cmd.get("sites")
        ok = isinstance(release, str) and release.isalnum() and 8 <= len(release) <= 64
        ok = ok and isinstance(sites, list) and all(isinstance(s, str) for s in sites) and len(set(sites)) == len(sites)
        if not ok:
            raise Refused("party 0's offer command names no release or no sites")
        self.release_id, self.sites = release, list(sites)
        cert_path, key_path = self.credentials
        self._key, mine = envelope.server_offer(
            Path(key_path).read_bytes(), Path(cert_path).read_bytes(), envelope.offer_context(self.federation, release)
        )
        world.gather_bytes(self.channel, json.dumps(mine, sort_keys=True).encode())

    def _check_site(self, site: tuple[str, tuple[str, ...]]) -> None:
        """A release's silo column names the sites, each by its own name."""
        if list(site[1]) != self.sites:
            raise Refused("the release's silo column does not name the release's sites")

    def begin(self, cmd: dict) -> None:
        """Open the server's ledger copy (it holds no silo and no budget store)."""
        release = None
        try:
            if self.release is not None or self.request is None:
                raise Refused("begin without an accepted release")
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            ledger = self.ledgers / f"{stamp}-{secrets.token_hex(3)}.ledger.json"
            make_folder(ledger)
            release = PartyRelease(self.request, self.rank, self.noise.name, ledger, silo="")
            release.acc.details["server"] = {"rank": self.rank, "sites": list(self.sites)}
            code, reason = ACCEPT, ""
        except Refused as exc:
            code, reason = exc.code, str(exc)
        if not send_verdict(self.channel, code, reason) or release is None:
            self.request = None
            return
        release.start()
        self.release, self.served = release, self.served + 1
        self.note = "lost contact during the release"
        self.out(f"began; ledger copy {release.ledger_path}")

    # ---- the steps ----
    def plan(self, op: str, cmd: dict, arrays: dict) -> Callable[[], None]:
        """``noisy_sum`` and ``pool_add`` over the sites' shares; a party's other steps; no exact sum
        and no local selection (the sites make those)."""
        if op in ("sum", "local_select") or op.startswith("draft_"):
            raise Refused(f"a compute server does not take part in {op}")
        if op not in ("noisy_sum", "pool_add"):
            return super().plan(op, cmd, arrays)
        if self.release is None:
            raise Refused(f"no release is under way (party 0 must declare and begin one before {op})")
        self.release.allow(op)
        request = self.release.request
        sealed = arrays.pop("_sealed", None)
        q = from_wire(self.schema, cmd["query"], arrays)
        size = q.size(self.schema)
        sites = self._sites(cmd)
        everyone = list(range(self.parties))
        if op == "noisy_sum":
            self._account(
                worst_site_charge(q, cmd, self.schema, request, [self.sites.index(s) for s in sites], len(self.sites))
            )
            mine = self._open(cmd, sealed, q, arrays, sites, size)
            sigma = float(cmd["sigma"])

            def noisy_sum() -> None:
                secure.noisy_sum(mine, everyone, size, grid_sigma(q, sigma), self.noise)

            return noisy_sum
        if not isinstance(q, MarginalsQuery):
            raise Refused("the pool holds marginal counts only")
        again = sorted(set(sites) & self.pooled)
        if again:
            raise Refused(f"site {again[0]}'s answers are in the pool already; a second copy would double them")
        pool = self.pool
        if pool is not None:
            mine_before, pool.mine = pool.mine, False
            pool_add_check(q, {"among": [0]}, pool, self.schema, 0, 1)
            pool.mine = mine_before
        else:
            raise Refused("no pool to add to (pool_new first)")
        mine = self._open(cmd, sealed, q, arrays, sites, size)

        def add() -> None:
            self.shares = self.shares + secure.share_sum(mine, everyone, pool.length)
            pool.mine = pool.mine or bool(sites)
            self.pooled.update(sites)

        return add

    def _sites(self, cmd: dict) -> list[str]:
        sites = cmd.get("sites")
        if not isinstance(sites, list) or len(set(map(str, sites))) != len(sites) or not set(sites) <= set(self.sites):
            raise Refused("the command's sites are not sites of the release")
        return list(sites)

    def _open(self, cmd: dict, sealed, q, arrays: dict, sites: list[str], size: int) -> np.ndarray:
        """The sum of this server's shares from ``sites``, each checked and opened for this step."""
        step = cmd.get("step")
        if type(step) is not int or step <= self.last_step:
            raise Refused(f"step {step!r} does not follow step {self.last_step}: a replayed command")
        digest = query_digest(cmd["query"], arrays)
        if cmd.get("digest") != digest:
            raise Refused("the shares are bound to another query than the command's")
        raw = b"" if sealed is None else np.ascontiguousarray(sealed, dtype="<i8").tobytes()
        lengths = cmd.get("lengths")
        try:
            if not isinstance(lengths, list) or len(lengths) != 2 * len(sites) or sum(lengths) > len(raw):
                raise FrameError("the sealed shares do not match the sites listed")
            blobs = unpack_blobs(lengths, raw[: sum(lengths)])
        except FrameError as exc:
            raise Refused(str(exc)) from None
        certs = cmd.get("certs") if isinstance(cmd.get("certs"), dict) else {}
        total = np.zeros(size, dtype=np.uint64)
        for i, site in enumerate(sites):
            known, pem = self._site_certs.get(site), certs.get(site, self._site_certs.get(site))
            aad = envelope.aad_of(self.federation, self.release_id, site, self.rank, step, digest)
            try:
                if not isinstance(pem, str):
                    raise envelope.EnvelopeError("no certificate")
                if known is not None and pem != known:
                    raise envelope.EnvelopeError("another certificate than the one it answered with before")
                envelope.check_signature(
                    pem.encode("ascii"), self.ca_pem, f"site-{site}", blobs[2 * i], aad, blobs[2 * i + 1]
                )
                share = envelope.open_sealed(blobs[2 * i], self._key, aad, size)
            except (envelope.EnvelopeError, ValueError, UnicodeEncodeError) as exc:
                raise Refused(f"site {site}'s share for this server: {first_line(exc)}") from None
            total += share.view(np.uint64)
            self._site_certs[site] = pem
        self.last_step = step
        return total.view(np.int64)


def worst_site_charge(q, cmd: dict, schema, request: ReleaseRequest, indices: list[int], sites: int) -> Charge | None:
    """The cost of a noisy sum to the union: a record is in one site, so the largest cost over the
    sites that answered (one site's ``noisy_sum_charge``; the same for every site unless the query
    masks parts by site)."""
    target = None if request.target is None else schema.names.index(request.target)
    worst = None
    for i in indices:
        one = {"among": [i], "sigma": cmd.get("sigma"), "label": cmd.get("label")}
        charge = noisy_sum_charge(q, one, schema, i, request.method, sites, request.factor, target)
        if charge is not None and (worst is None or charge.sensitivity > worst.sensitivity):
            worst = charge
    return worst
