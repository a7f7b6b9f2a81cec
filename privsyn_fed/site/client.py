"""A site: it connects outward to party 0, checks the release, answers the steps it is asked, and leaves.

The order protects the site's rows as a party's does (``mpc.party_session``):
  1. ``release``: party 0's request (``mpc.policy.ReleaseRequest``, for the federation's ``S``
     servers) is checked against the site's policy and its own budget store, read only, and every
     server's encryption key against the federation's CA (``envelope.check_offer``);
  2. ``begin``: the site reserves the release's rho in its own store, reads its silo, and opens its
     ledger copy (``party_ledger.PartyRelease``);
  3. ``answer`` (a noisy sum's or the DistAIM pool's share): the step is costed by the site and
     charged to its ledger copy before it answers; the answer, on the ring ``Z_{2^64}``, is split
     into ``S`` additive shares (``envelope.split``), each sealed for its server and bound to the
     release, the site, the server, the step and the query (``envelope.aad_of``), and signed with
     the site's key; ``local_select`` (FLAIM): the site's own noisy maximum, charged likewise;
  4. ``end``: the ledger copy is closed and the store settled. Once the site's answers are in
     DistAIM's pool they are in every later selection and measurement, which the servers cost and
     the site no longer sees: its store is then settled at the whole request's rho.
The site never listens on a port, imports neither torch nor CrypTen, and holds one connection.
"""

from __future__ import annotations

import hashlib
import socket
import ssl
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..common import InputError, first_line, terminal_text
from ..mpc import (
    FrameError,
    PartyRelease,
    PeerClosed,
    Policy,
    Refused,
    ReleaseRequest,
    certs,
    charge_silo,
    envelope,
    local_select_charge,
    make_folder,
    new_ledger_path,
    noisy_sum_charge,
    pack_blobs,
    query_digest,
    recv_frame,
    reserve,
    send_frame,
    to_ring,
    unpack_arrays,
)
from ..noise import OpenDPNoise
from ..silo import MarginalsQuery, Silo, answer, from_wire
from . import approvals
from .log import SiteLog

#: Seconds a site waits for party 0 between frames (a release may fit a model for a while).
IDLE_S = 3600.0


@dataclass(frozen=True)
class SiteSetup:
    """Everything one site needs: who it is, its silo, and what it allows."""

    name: str
    silo_path: str
    schema: Any
    fingerprint: str
    federation: Any  # mpc.federation.Federation, with sites
    digest: str
    cert_path: Path
    key_path: Path
    policy: Policy | None = None
    ledger: Path | None = None
    seeded: bool = False
    connect_s: float = 60.0
    #: The site's own folder: requests waiting for a person (``approvals``) and its audit log
    #: (None: ``TABLE.site/`` beside its silo).
    state: Path | None = None


class Site:
    """One site's side of one release (module docstring)."""

    def __init__(self, setup: SiteSetup, out: Callable[[str], None] | None = None):
        self.s = setup
        self.state = setup.state or Path(setup.silo_path).with_name(Path(setup.silo_path).name + ".site")
        self.out = out or (lambda line: print(f"site {setup.name}: {line}", flush=True))
        self.key_pem = setup.key_path.read_bytes()
        self.request: ReleaseRequest | None = None
        self.release_id = ""
        self.index = -1
        self.servers: list[Any] = []
        self.silo: Silo | None = None
        self.release: PartyRelease | None = None
        self.reservation: Any = None
        self.pooled = False
        self.last_step = -1
        self.sock: ssl.SSLSocket | None = None
        self.bytes_sent = 0
        self.bytes_received = 0
        self.audit: Any = None
        #: The release this site logged a request of, whether it logged a verdict, and who refuses.
        self.logged_release = ""
        self.decided = False
        self.refused_by = "policy"
        self.approved_by = "policy"

    # ---- the connection ----
    def connect(self) -> ssl.SSLSocket:
        """TLS 1.3 to party 0 with this site's certificate; party 0's must name ``party-0``."""
        party0 = self.s.federation.members[0]
        assert self.s.federation.sites is not None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1_3
        context.verify_mode = ssl.CERT_REQUIRED
        context.verify_flags |= ssl.VERIFY_X509_STRICT
        context.check_hostname = True
        context.load_verify_locations(cadata=self.s.federation.ca_pem.decode("ascii"))
        context.load_cert_chain(self.s.cert_path, self.s.key_path)
        deadline, why = time.monotonic() + self.s.connect_s, ""
        while time.monotonic() < deadline:
            try:
                raw = socket.create_connection((party0.host, self.s.federation.sites.port), timeout=10)
                sock = context.wrap_socket(raw, server_hostname="party-0")
                send_frame(
                    sock,
                    {"op": "hello", "site": self.s.name, "federation": self.s.federation.name, "digest": self.s.digest},
                )
                sock.settimeout(30)
                reply, _ = recv_frame(sock, max_body=0)
                if reply.get("op") != "welcome":
                    raise InputError(f"party 0 refused this site: {str(reply.get('why', ''))[:200]}")
                sock.settimeout(IDLE_S)
                self.sock = sock
                return sock
            except ssl.SSLCertVerificationError as exc:
                raise InputError(f"party 0's certificate was refused: {exc.verify_message}") from None
            except (OSError, FrameError) as exc:
                why = first_line(exc)
                time.sleep(0.3)
        raise InputError(
            f"could not reach party 0 at {party0.host}:{self.s.federation.sites.port} within "
            f"{self.s.connect_s:g} s ({why}); is the release started?"
        )

    def _send(self, header: dict, body: bytes = b"") -> None:
        assert self.sock is not None
        self.bytes_sent += send_frame(self.sock, header, body)

    def run(self) -> int:
        """Follow party 0 until the release ends; 0 when it completed, 1 when it failed, 2 when
        this site refused it."""
        self.connect()
        self.state.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.audit = SiteLog(self.state / "audit.log")
        handlers = {
            "release": self.on_release,
            "begin": self.on_begin,
            "answer": self.on_answer,
            "local_select": self.on_local_select,
        }
        try:
            while True:
                assert self.sock is not None
                header, body = recv_frame(self.sock, max_body=1 << 30)
                self.bytes_received += len(body)
                op = header.get("op")
                if op == "end":
                    return self.finish("complete" if header.get("status") == "complete" else "failed")
                if op not in handlers:
                    raise FrameError(f"party 0 sent {str(op)[:40]!r}, which is not a site's step")
                try:
                    handlers[op](header, body)
                except Refused as exc:
                    self.out(f"refused {op}: {terminal_text(exc)}")
                    if op == "release" and self.logged_release and not self.decided:
                        self.audit.append("verdict", release=self.logged_release, verdict="refused",
                                          by=self.refused_by, why=str(exc)[:300])  # fmt: skip
                    if self.release is not None:
                        self.release.refused.append(f"{op}: {exc}")
                    self._send({"op": "refused", "why": str(exc)[:300]})
                    if op in ("release", "begin"):
                        return self.finish("rejected")
        except (PeerClosed, ConnectionError, OSError, FrameError) as exc:
            if self.release is None and not self.pooled:
                self.out(f"party 0 went away before this site answered ({first_line(exc)}); nothing was spent")
                return 1
            status = self.finish("failed" if not self.pooled else "complete-pooled")
            self.out(f"party 0 went away ({first_line(exc)})")
            return status
        finally:
            self.audit.close()
            if self.sock is not None:
                try:
                    self.sock.close()
                except OSError:
                    pass

    # ---- the release ----
    def on_release(self, header: dict, body: bytes) -> None:
        """Check the request, the site's place in it, and the servers' keys; read nothing."""
        if self.request is not None:
            raise Refused("a release is under way already")
        release_id = header.get("release")
        if not isinstance(release_id, str) or not 8 <= len(release_id) <= 64 or not release_id.isalnum():
            raise Refused("the release has no id")
        request = ReleaseRequest.from_wire(header.get("request"), self.s.federation.parties)
        self._log_request(release_id, request)  # every well-formed request, then its verdict
        if request.schema != self.s.fingerprint:
            raise Refused("the release's schema is not the one this site loaded")
        if request.seeded != self.s.seeded:
            raise Refused("the release's noise mode (--seed) is not this site's")
        sites = header.get("sites")
        if not isinstance(sites, list) or self.s.name not in sites:
            raise Refused("the release does not list this site")
        if request.site is not None and request.site[1][sites.index(self.s.name)] != self.s.name:
            raise Refused("the release's silo column names this site otherwise")
        if request.target is not None and request.target not in self.s.schema.names:
            raise Refused(f"the release's target {request.target!r} is not a column of this site's schema")
        offers = header.get("offers")
        if not isinstance(offers, list) or len(offers) != request.parties:
            raise Refused(
                f"the release brings {len(offers) if isinstance(offers, list) else 0} server keys, "
                f"not {request.parties}"
            )
        context = envelope.offer_context(self.s.federation.name, release_id)
        try:
            servers = [
                envelope.check_offer(offer, self.s.federation.ca_pem, f"party-{j}", context)
                for j, offer in enumerate(offers)
            ]
        except envelope.EnvelopeError as exc:
            raise Refused(f"a server's key: {exc}") from None
        if self.s.policy is not None:
            reason = self.s.policy.refusal(request) or self.s.policy.store_refusal(request.rho)
            if reason:
                raise Refused(reason)
            if self.s.policy.approve == "person":
                self._approval(request, release_id)
        self.request, self.release_id, self.servers = request, release_id, servers
        self.index, self.sites = sites.index(self.s.name), sites
        by = self.approved_by if self.s.policy is not None and self.s.policy.approve == "person" else "policy"
        self.audit.append("verdict", release=release_id, verdict="accepted", by=by)
        self.decided = True
        self.out(
            f"accepted: {request.method} at epsilon {request.epsilon:g}, delta {request.delta:g}, "
            f"{request.parties} compute servers, collusion {request.collusion}"
            + (f" (policy {self.s.policy.source})" if self.s.policy else " (no policy: the request's own budget)")
        )
        self._send({"op": "accepted"})

    def _log_request(self, release_id: str, request: ReleaseRequest) -> None:
        """The request in the site's audit log: who asked (party 0's certificate) and what."""
        assert self.sock is not None
        who = certs.identity(ssl.DER_cert_to_PEM_cert(self.sock.getpeercert(binary_form=True)).encode())
        self.audit.append(
            "request",
            release=release_id,
            party0={"role": who.role, "organisation": who.organisation, "sha256": who.sha256},
            method=request.method,
            epsilon=request.epsilon,
            delta=request.delta,
            schema_sha256=request.schema,
            servers=request.parties,
            collusion=request.collusion,
        )
        self.logged_release = release_id

    def _approval(self, request: ReleaseRequest, release_id: str) -> None:
        """Wait for a person's decision on a request inside the policy (``approvals``); ``Refused``
        when they refuse it or it waits past the policy's ``approve_within_s``."""
        assert self.s.policy is not None
        approvals.ask(self.state, release_id, {"site": self.s.name, "request": request.to_wire()})
        self.out(
            f"release {release_id} ({request.method} at epsilon {request.epsilon:g}, delta {request.delta:g}) waits "
            f"for a person: `privsyn-fed site approve {release_id} --state {self.state} --by NAME` or "
            f"`site refuse {release_id} --state {self.state} --by NAME --why TEXT`"
        )
        self._send({"op": "pending", "why": f"its policy has a person approve each release (release {release_id})"})
        decision = approvals.wait(self.state, release_id, self.s.policy.approve_within_s)
        if not decision.approved:
            self.refused_by = decision.by
            raise Refused(f"refused by {decision.by}" + (f": {decision.why}" if decision.why else ""))
        self.approved_by = decision.by
        self.out(f"release {release_id} approved by {decision.by}")

    def on_begin(self, header: dict, body: bytes) -> None:
        """Reserve in the site's store, read its silo, open its ledger copy."""
        if self.request is None or self.release is not None:
            raise Refused("begin without an accepted release")
        ledger = new_ledger_path(self.s.ledger, self.s.silo_path)
        self.reservation = reserve(self.s.policy, self.request, ledger)
        try:
            if self.reservation is not None and self.reservation.ledger_path != str(ledger.resolve()):
                ledger = Path(self.reservation.ledger_path)
            self.silo = self._load()
            if self.reservation is not None and self.s.policy is not None:
                charge_silo(self.s.policy, self.reservation, self.silo, self.out)
            make_folder(ledger)
            self.release = PartyRelease(
                self.request,
                self.index,
                "sites: none drawn here (the servers add the noise); OpenDP noisy max for local selections",
                ledger,
                reservation=self.reservation,
                policy=None if self.s.policy is None else self.s.policy.source,
                silo=self.s.silo_path,
            )
            self.release.acc.details["site"] = {"name": self.s.name, "index": self.index, "sites": len(self.sites)}
        except Refused:
            if self.reservation is not None:
                self.reservation.settle(0.0, "rejected")
                self.reservation = None
            raise
        self.release.start()
        self.out(f"read {self.s.silo_path}; ledger copy {self.release.ledger_path}")
        self._send({"op": "ready"})

    def _load(self) -> Silo:
        assert self.request is not None
        unit, site = self.request.unit, self.request.site
        try:
            return Silo.load(
                self.s.silo_path,
                self.s.schema,
                unit=None if unit is None else unit.column,
                max_rows=1 if unit is None else unit.max_rows,
                site=None if site is None else (site[0], self.s.name),
            )
        except InputError as exc:
            raise Refused(exc.shareable()) from None
        except OSError as exc:
            raise Refused(f"{self.s.silo_path}: cannot be read ({exc.strerror or exc})") from None

    def _step(self, header: dict) -> int:
        step = header.get("step")
        if type(step) is not int or step <= self.last_step:
            raise Refused(f"step {step!r} does not follow step {self.last_step}")
        if self.release is None:
            raise Refused("no release is under way")
        self.last_step = step
        return step

    def _query(self, header: dict, body: bytes):
        arrays = unpack_arrays(header.get("arrays"), body)
        raw = header.get("query")
        if not isinstance(raw, dict):
            raise Refused("the step names no query")
        try:
            q = from_wire(self.s.schema, raw, arrays)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise Refused(f"a query this site does not answer ({first_line(exc)})") from None
        return q, query_digest(raw, arrays)

    def on_answer(self, header: dict, body: bytes) -> None:
        """Cost the step, then send one sealed, signed share per server."""
        step = self._step(header)
        assert self.release is not None and self.request is not None and self.silo is not None
        q, digest = self._query(header, body)
        kind = header.get("kind")
        if kind not in ("noisy_sum", "pool_add"):
            raise Refused(f"a share for {str(kind)[:40]!r}, which is not a step")
        self.release.allow(kind)
        schema, request = self.s.schema, self.request
        if kind == "noisy_sum":
            target = None if request.target is None else schema.names.index(request.target)
            cmd = {"among": [self.index], "sigma": header.get("sigma"), "label": header.get("label")}
            charge = noisy_sum_charge(
                q, cmd, schema, self.index, request.method, len(self.sites), request.factor, target
            )
            self.release.account(charge)
        else:
            if self.pooled:
                raise Refused("this site's answers are in the pool already")
            if not isinstance(q, MarginalsQuery):
                raise Refused("the pool holds marginal counts only")
            self.pooled = True
            self.release.acc.details["site"]["pooled"] = (
                "this site's answers to every candidate went into DistAIM's pool at step "
                f"{step}; the servers cost every later selection and measurement, and this site's store "
                "is charged the whole request"
            )
        value = to_ring(q, answer(q, self.silo, self.index))
        shares = envelope.split(value.ravel(), request.parties)
        blobs = []
        for j, (share, public) in enumerate(zip(shares, self.servers)):
            aad = envelope.aad_of(self.s.federation.name, self.release_id, self.s.name, j, step, digest)
            sealed = envelope.seal(share, public, aad)
            blobs += [sealed, envelope.sign(self.key_pem, sealed, aad)]
        lengths, packed = pack_blobs(blobs)
        self.release.answered += 1
        self._log_answer(step, str(kind), digest, header.get("label"))
        self._send({"op": "shares", "step": step, "lengths": lengths, "cells": int(value.size)}, packed)

    def on_local_select(self, header: dict, body: bytes) -> None:
        """FLAIM's selection in the silo: charged, then the noisy maximum's index alone."""
        self._step(header)
        assert self.release is not None and self.request is not None and self.silo is not None
        q, digest = self._query(header, body)
        self.release.allow("local_select")
        cmd = {"among": [self.index], "scale": header.get("scale"), "label": header.get("label")}
        self.release.account(
            local_select_charge(q, cmd, self.s.schema, self.index, len(self.sites), self.request.factor)
        )
        choice = OpenDPNoise().noisy_argmax(np.asarray(q(self.silo), dtype=float), float(cmd["scale"]))
        self.release.answered += 1
        self._log_answer(self.last_step, "local_select", digest, header.get("label"))
        self._send({"op": "choice", "choice": int(choice)})

    def _log_answer(self, step: int, kind: str, digest: str, label) -> None:
        assert self.release is not None
        self.audit.append("answer", release=self.release_id, step=step, step_kind=kind, query=digest,
                          label=str(label or "")[:200], rho=self.release.acc.rho_spent)  # fmt: skip

    def _log_end(self, status: str, rho: float, ledger: Path | None) -> None:
        """The release's end in the audit log: its status, what the store was settled at, the
        ledger copy's path and SHA-256, the store's run."""
        if not self.logged_release:
            return
        digest = hashlib.sha256(ledger.read_bytes()).hexdigest() if ledger is not None and ledger.exists() else None
        r = self.reservation
        self.audit.append("end", release=self.logged_release, status=status, rho_spent=rho,
                          ledger=None if digest is None else str(ledger), ledger_sha256=digest,
                          store=None if r is None else str(r.store.path), run=None if r is None else r.run)  # fmt: skip

    def finish(self, status: str) -> int:
        """Close the ledger copy and settle the store; the exit status (``run``)."""
        if status == "rejected":
            self._log_end("rejected", 0.0, None)
            return 2
        if self.release is None:
            return 0 if status == "complete" else 1
        release, self.release = self.release, None
        pooled = self.pooled
        final = "complete" if status in ("complete", "complete-pooled") else "failed"
        if pooled and self.reservation is not None and not self.reservation.settled:
            release.reservation = None  # settled here, at the whole request: the pool outlives this site
            line = release.finish(final)
            self.reservation.settle(release.acc.rho_budget, "complete")
            line += f"; store {self.reservation.store.path} run {self.reservation.run} settled at the whole request"
        else:
            line = release.finish(final)
        self.out(line)
        settled = None if self.reservation is None else self.reservation.store.run(self.reservation.run)["rho_spent"]
        self._log_end(final, release.acc.rho_spent if settled is None else float(settled), release.ledger_path)
        return 0 if final == "complete" else 1


def site_main(setups: list[SiteSetup]) -> int:
    """Run every site of ``setups`` (one thread each, one connection each); the worst exit status."""
    import threading

    statuses = [1] * len(setups)

    def one(i: int) -> None:
        try:
            statuses[i] = Site(setups[i]).run()
        except InputError as exc:
            print(f"privsyn-fed site {setups[i].name}: error: {terminal_text(exc)}", file=sys.stderr, flush=True)
            statuses[i] = 2
        except Exception as exc:  # one site's failure must not stop the others
            print(f"privsyn-fed site {setups[i].name}: error: {first_line(exc)}", file=sys.stderr, flush=True)
            statuses[i] = 1

    if len(setups) == 1:
        one(0)
    else:
        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(setups))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return max(statuses)
