"""Party 0's port for sites: sites connect outward to it, and it relays their sealed shares.

A site (``privsyn_fed.site``) connects over TLS 1.3 with a certificate of the federation's CA that
names ``site-<name>``; its name must be one of the release's sites (the federation file's
``sites``, or the sites of a run on one machine) and connected once. ``SiteHub`` takes these
connections on a thread of its own and asks the sites, from the release's thread, to accept the
release (``declare``), to begin (``begin``), and to answer each step (``ask``); a site that does not
answer by the deadline, or answers with something malformed, is dropped (its connection closed)
and the release goes on without it. Every frame is ``site.wire``'s, with its size caps; a site's
shares arrive sealed for each server (``site.envelope``), so this process opens only its own.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..common import InputError
from . import certs
from .wire import FrameError, PeerClosed, recv_frame, send_frame

#: Seconds a connecting site has to complete TLS and its hello.
HANDSHAKE_S = 10.0
#: How often party 0 says which sites it still waits for.
WAITING_EVERY_S = 10.0
#: Seconds each site has to answer one step.
ANSWER_S = 300.0
#: Seconds each site has to accept or refuse the release (a person may decide at a site).
APPROVAL_S = 600.0
#: The most bytes a site's reply may carry (its sealed shares).
MAX_REPLY = 1 << 31


@dataclass
class SiteLink:
    """One site's connection: its name, certificate, state and the bytes that crossed it."""

    name: str
    sock: ssl.SSLSocket
    cert_pem: bytes
    organisation: str
    state: str = "joined"  # joined, accepted, active, gone
    why: str = ""
    sent: int = 0
    received: int = 0

    def send(self, header: dict, body: bytes = b"", deadline: float | None = None) -> None:
        """Send one frame to the site, by ``deadline`` when given (``socket.timeout`` otherwise;
        without one, within whatever time the socket's last receive left)."""
        if deadline is not None:
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
        self.sent += send_frame(self.sock, header, body)

    def receive(self, deadline: float) -> tuple[dict, bytes]:
        """The site's next frame, by ``deadline`` (``socket.timeout`` otherwise)."""
        self.sock.settimeout(max(0.05, deadline - time.monotonic()))
        header, body = recv_frame(self.sock, max_body=MAX_REPLY)
        self.received += len(body) + 12 + len(json.dumps(header, separators=(",", ":")))
        return header, body


class SiteHub:
    """The sites of one release as party 0 sees them (module docstring)."""

    def __init__(
        self,
        federation: str,
        digest: str,
        ca_pem: bytes,
        cert_path,
        key_path,
        listen: tuple[str, int],
        names: Sequence[str],
        *,
        organisations: dict[str, str] | None = None,
        pins: dict[str, str] | None = None,
        log: Callable[[str], None] | None = None,
    ):
        self.federation, self.digest = federation, digest
        self.names = list(names)
        self.organisations = organisations or {}
        self.pins = pins or {}
        self.log = log or (lambda line: None)
        self.links: dict[str, SiteLink] = {}
        self.refused: list[str] = []
        self._cond = threading.Condition()
        self._closing = False
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1_3
        context.verify_mode = ssl.CERT_REQUIRED
        context.verify_flags |= ssl.VERIFY_X509_STRICT
        context.load_verify_locations(cadata=ca_pem.decode("ascii"))
        context.load_cert_chain(cert_path, key_path)
        context.num_tickets = 0
        self._context = context
        family = socket.AF_INET6 if ":" in listen[0] else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._listener.bind(listen)
        except OSError as exc:
            self._listener.close()
            raise InputError(
                f"the sites' port {listen[0]}:{listen[1]} cannot be opened ({exc.strerror or exc}); "
                "choose another (the federation file's sites.port)"
            ) from None
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, name="privsyn-fed sites", daemon=True)
        self._thread.start()

    # ---- connections ----
    def _accept_loop(self) -> None:
        while True:
            try:
                sock, address = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._admit, args=(sock, address), daemon=True).start()

    def _admit(self, sock: socket.socket, address) -> None:
        where = f"{address[0]}:{address[1]}"
        tls = None
        try:
            sock.settimeout(HANDSHAKE_S)
            tls = self._context.wrap_socket(sock, server_side=True)
            der = tls.getpeercert(binary_form=True)
            pem = ssl.DER_cert_to_PEM_cert(der).encode("ascii")
            who = certs.identity(pem, "its certificate")
            if not who.role.startswith("site-"):
                raise FrameError(f"its certificate names {who.role}, not a site")
            name = who.role[len("site-") :]
            if name not in self.names:
                raise FrameError(f"its certificate names site {name!r}, not a site of this release")
            if name in self.organisations and who.organisation != self.organisations[name]:
                raise FrameError(
                    f"its certificate names {who.organisation!r}, the federation file another organisation"
                )
            if name in self.pins and who.sha256 != self.pins[name]:
                raise FrameError(f"its certificate is not the one pinned for site {name!r}")
            hello, _ = recv_frame(tls, max_body=0)
            if hello.get("op") != "hello" or hello.get("site") != name:
                raise FrameError("its first frame is not its hello")
            if hello.get("federation") != self.federation or hello.get("digest") != self.digest:
                send_frame(tls, {"op": "refused", "why": "its federation file differs from party 0's"})
                raise FrameError("its federation file differs from party 0's")
            with self._cond:
                old = self.links.get(name)
                if self._closing or (old is not None and old.state != "gone"):
                    send_frame(tls, {"op": "refused", "why": "this site is connected already"})
                    raise FrameError(f"site {name!r} is connected already")
                send_frame(tls, {"op": "welcome"})
                self.links[name] = SiteLink(name, tls, pem, who.organisation)
                self._cond.notify_all()
            self.log(f"site {name} connected from {where}")
        except Exception as exc:  # a stranger, a wrong role, garbage: refused, and the hub goes on
            with self._cond:
                self.refused = (self.refused + [f"a connection from {where}: {' '.join(str(exc).split())[:200]}"])[-20:]
            for s in (tls, sock):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass

    def wait(self, seconds: float, minimum: int = 1) -> list[str]:
        """Wait up to ``seconds`` for every site to connect (at least ``minimum``: else ``InputError``
        naming who is missing); the sites connected, in the release's order."""
        deadline, said = time.monotonic() + seconds, time.monotonic()
        with self._cond:
            while len(self._live()) < len(self.names) and time.monotonic() < deadline:
                self._cond.wait(timeout=max(0.01, min(WAITING_EVERY_S, deadline - time.monotonic())))
                if time.monotonic() - said >= WAITING_EVERY_S:  # say whom the release waits for
                    said = time.monotonic()
                    missing = [n for n in self.names if n not in self._live()]
                    if missing:
                        self.log(f"waiting for {len(missing)} site(s) to connect: {', '.join(missing[:10])}")
            live = self._live()
        if len(live) < minimum:
            missing = [n for n in self.names if n not in live]
            seen = f"; refused: {self.refused[-1]}" if self.refused else ""
            raise InputError(
                f"{len(live)} of {len(self.names)} sites connected within {seconds:g} s (missing: "
                f"{', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}){seen}; start each site with "
                "`privsyn-fed site run`, or allow more time with --site-wait"
            )
        return live

    def _live(self) -> list[str]:
        return [n for n in self.names if n in self.links and self.links[n].state != "gone"]

    def drop(self, name: str, why: str) -> None:
        """Close a site's connection; the release goes on without it."""
        link = self.links.get(name)
        if link is None or link.state == "gone":
            return
        link.state, link.why = "gone", why
        try:
            link.sock.close()
        except OSError:
            pass
        self.log(f"site {name}: left the release ({why})")

    # ---- exchanges ----
    def ask(
        self,
        names: Sequence[str],
        header_of: Callable[[str], tuple[dict, bytes]],
        seconds: float,
        states: tuple[str, ...] = ("active",),
    ) -> dict[str, tuple[dict, bytes]]:
        """Send each site of ``names`` that is in one of ``states`` its frame, then take each one's
        reply within ``seconds``; the replies by site. A site that fails to send or to reply in time,
        or replies with a frame that is not one, is dropped; one that replies ``refused`` keeps its
        connection and is left out of the step. A site may first say it is ``pending`` (waiting for
        a person's approval): party 0 logs whom it waits for and goes on waiting."""
        deadline = time.monotonic() + seconds
        asked = []
        for name in names:
            link = self.links.get(name)
            if link is None or link.state not in states:
                continue
            header, body = header_of(name)
            try:
                link.send(header, body, deadline)
                asked.append((link, header))
            except (OSError, ValueError) as exc:
                self.drop(name, f"could not be reached: {exc}")
        replies = {}
        for link, header in asked:
            try:
                reply = link.receive(deadline)
                while reply[0].get("op") == "pending":  # the site waits for a person's approval
                    self.log(f"waiting for site {link.name}: {str(reply[0].get('why', ''))[:200]}")
                    reply = link.receive(deadline)
            except (PeerClosed, ConnectionError):
                self.drop(link.name, "closed its connection")
                continue
            except socket.timeout:
                self.drop(link.name, f"no answer within {seconds:g} s")
                continue
            except (OSError, ValueError) as exc:
                self.drop(link.name, f"a malformed reply ({' '.join(str(exc).split())[:160]})")
                continue
            if reply[0].get("op") == "refused":
                why = str(reply[0].get("why", ""))[:300]
                self.log(f"site {link.name}: refused {header.get('op')}: {why}")
                continue
            replies[link.name] = reply
        return replies

    def active(self) -> list[str]:
        """The sites that began the release and are still connected, in the release's order."""
        return [n for n in self.names if n in self.links and self.links[n].state == "active"]

    def traffic(self) -> dict[str, dict[str, int]]:
        """Bytes sent to and received from each site that connected."""
        return {n: {"sent": link.sent, "received": link.received} for n, link in self.links.items()}

    def close(self, header: dict[str, Any] | None = None) -> None:
        """Tell every connected site ``header`` (the release's end), close every connection and the port."""
        with self._cond:
            self._closing = True
        for name, link in list(self.links.items()):
            if link.state != "gone" and header is not None:
                try:
                    link.send(header)
                except (OSError, ValueError):
                    pass
            if link.state != "gone":
                link.state = "gone"
                try:
                    link.sock.close()
                except OSError:
                    pass
        try:
            self._listener.close()
        except OSError:
            pass
