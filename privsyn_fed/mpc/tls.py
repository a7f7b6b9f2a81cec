"""The MPC transport: a mutually authenticated TLS 1.3 full mesh among a federation's members.

Every member (silo parties ``0..n-1`` and the dealer, rank ``n``) listens on its own address from
the federation file and connects to every other member, retrying until ``timeout_s``. So every
pair has **two one-way connections**: member ``i`` sends to ``j`` only on the connection it opened
to ``j``, and ``j`` reads it only in a reader thread of its own. An OpenSSL connection is thus used
by one thread at a time, and encryption (the sender's thread) runs beside decryption (the readers).

Both ends present a certificate of the federation's CA (``certs``) and check the other's before
any application byte is read: a connecting member asks for the role it dials (the name TLS
checks), and the accepting member takes the peer's rank from the role its certificate names. A
certificate of another CA, of a role that is not a member's, of another organisation than the
file gives, with another fingerprint than a pin, a duplicate or no certificate at all: the
connection is closed. Then the connecting side sends a ``HELLO`` (federation name, fingerprint of
the federation file, parties, rank, protocol version) and waits for one welcome byte.

What travels is frames of a fixed binary layout (``pack_header``): tensors as their raw bytes,
CrypTen's few Python objects as a tagged JSON (``encode_obj``; never pickles), barriers and a
closing ``BYE``. Readers check every header (kind, channel, element type, shape, size) and the
channel policy (``allowed``: the dealer sends and receives only on the dealer's channels and never
receives a tensor), and put what arrives in a mailbox per ``(sender, channel)``. A wait has a
deadline (``timeout_s``). When a connection breaks outside an orderly close, or a peer sends a
malformed frame, every pending and later wait fails at once with a ``RuntimeError`` that says
which member's connection closed.

The frames are ``frames``, the objects ``tagged`` and the traffic over formed connections
``traffic``; this module forms the mesh (``Mesh.join``) and gives their names too.
"""

from __future__ import annotations

import collections
import json
import socket
import ssl
import threading
import time

from . import certs
from .federation import Federation, federation_digest
from .frames import (
    BARRIER,
    BYE,
    CHANNEL_NAMES,
    COMMAND,
    DTYPE_NAMES,
    HEADER,
    HELLO,
    ITEMSIZE,
    KIND_NAMES,
    MAGIC,
    MAIN,
    MAX_DEPTH,
    MAX_NDIM,
    MAX_OBJ_BYTES,
    MAX_TENSOR_BYTES,
    OBJ,
    PROTOCOL,
    TENSOR,
    TTP,
    TTP_COMM,
    FrameError,
    _recv_exact,
    allowed,
    check_shape,
    dtype_code,
    pack_header,
    unpack_header,
)
from .tagged import decode_obj, encode_obj
from .traffic import SEND_SLICE, SMALL, Traffic, _close, _Link, _reason

__all__ = [
    "BARRIER",
    "BYE",
    "CHANNEL_NAMES",
    "COMMAND",
    "DTYPE_NAMES",
    "HANDSHAKE_S",
    "HEADER",
    "HELLO",
    "ITEMSIZE",
    "KIND_NAMES",
    "MAGIC",
    "MAIN",
    "MAX_DEPTH",
    "MAX_NDIM",
    "MAX_OBJ_BYTES",
    "MAX_TENSOR_BYTES",
    "OBJ",
    "PROTOCOL",
    "REFUSED",
    "RETRY_S",
    "SEND_SLICE",
    "SMALL",
    "TENSOR",
    "TTP",
    "TTP_COMM",
    "WELCOME",
    "FrameError",
    "JoinError",
    "Mesh",
    "Refused",
    "Traffic",
    "allowed",
    "check_shape",
    "contexts",
    "decode_obj",
    "dtype_code",
    "encode_obj",
    "federation_digest",
    "pack_header",
    "unpack_header",
]

#: Seconds an accepted connection has for its TLS handshake and hello.
HANDSHAKE_S = 10.0
#: Seconds between two tries to connect to a member that is not listening yet.
RETRY_S = 0.25
WELCOME, REFUSED = b"\x01", b"\x00"


class JoinError(RuntimeError):
    """The mesh did not form within the timeout; the message says which member was missing and why."""


class Refused(Exception):
    """A connection attempt that was refused (why, in one line)."""


# ---- the mesh -----------------------------------------------------------------------------------


def contexts(ca_pem: bytes, cert_path, key_path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """The server and client contexts: TLS 1.3 only, a certificate required on both sides and
    verified against the federation's CA alone (no system store), this member's certificate."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    for context in (server, client):
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        context.maximum_version = ssl.TLSVersion.TLSv1_3
        context.verify_mode = ssl.CERT_REQUIRED
        context.verify_flags |= ssl.VERIFY_X509_STRICT
        context.load_verify_locations(cadata=ca_pem.decode("ascii"))
        context.load_cert_chain(cert_path, key_path)
    server.num_tickets = 0  # nothing ever travels back on a connection but the welcome byte
    client.check_hostname = True  # the role dialled is the name checked: party-k or dealer
    return server, client


class Mesh(Traffic):
    """This member's connections to every other member of ``federation``, once ``join`` returns."""

    def __init__(
        self,
        federation: Federation,
        rank: int,
        credentials: certs.Credentials,
        timeout_s: float,
        *,
        listen: tuple[str, int] | None = None,
    ):
        self.federation, self.rank, self.timeout_s = federation, rank, float(timeout_s)
        self.parties = federation.parties
        self.peers = [r for r in range(self.parties + 1) if r != rank]
        self.credentials = credentials
        me = federation.members[rank]
        self.listen = listen or (me.host, me.port)
        self.digest = federation_digest(federation)
        self._server, self._client = contexts(federation.ca_pem, credentials.cert_path, credentials.key_path)
        self._cond = threading.Condition()
        self._boxes: dict[tuple[int, int], collections.deque] = collections.defaultdict(collections.deque)
        self._out: dict[int, _Link] = {}
        self._in: dict[int, ssl.SSLSocket] = {}
        self._readers: list[threading.Thread] = []  # the acceptor and each connection's reader
        self._left: set[int] = set()  # peers that said goodbye
        self._failure: str | None = None
        self._closing = False
        self._joining = True
        self._unreached: dict[int, str] = {}
        self.refused: list[str] = []  # why connections to this member were refused (latest last)
        self._listener: socket.socket | None = None

    # ---- joining ----
    def join(self) -> "Mesh":
        """Listen, connect to every other member and accept each of them (retrying until the
        timeout); ``JoinError`` if the mesh is not complete by then."""
        deadline = time.monotonic() + self.timeout_s
        self._listener = self._bind()
        acceptor = threading.Thread(target=self._accept_loop, name="mpc-accept", daemon=True)
        self._readers.append(acceptor)
        acceptor.start()
        for peer in self.peers:
            threading.Thread(
                target=self._connect, args=(peer, deadline), name=f"mpc-connect-{peer}", daemon=True
            ).start()
        with self._cond:
            while not self._complete() and self._failure is None and not self._left:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(min(remaining, 0.5))
            complete, failure = self._complete(), self._failure
            if not complete and failure is None and self._left:  # a member gave up joining: so do we
                failure = ", ".join(self.who(r) for r in sorted(self._left)) + " left before every member had joined"
                if self.refused:
                    failure += f"; refused: {self.refused[-1]}"
            self._joining = False
        acceptor.join(5.0)  # it stops within its accept timeout; then nobody else uses the listener
        self._listener.close()
        if complete and failure is None:
            return self
        reason = failure or self._missing()
        self.close(orderly=False)
        raise JoinError(reason)

    def _complete(self) -> bool:
        return len(self._out) == len(self.peers) and len(self._in) == len(self.peers)

    def _missing(self) -> str:
        t = f"{self.timeout_s:g} s"
        for peer in self.peers:
            if peer not in self._out:
                m = self.federation.members[peer]
                why = self._unreached.get(peer, "no answer")
                return f"could not connect to {self.who(peer)} ({m.role}) at {m.address} within {t} ({why})"
        peer = next(p for p in self.peers if p not in self._in)
        refused = f"; refused: {self.refused[-1]}" if self.refused else ""
        return f"{self.who(peer)} did not connect to this member within {t}{refused}"

    def _bind(self) -> socket.socket:
        host, port = self.listen
        try:
            family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
            return socket.create_server(address, family=family, backlog=64)
        except OSError as exc:
            raise JoinError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}): another process may be using "
                "the port, or the address is not this host's (--listen HOST:PORT sets another)"
            ) from None

    def _accept_loop(self) -> None:
        listener = self._listener
        listener.settimeout(0.2)
        while True:
            with self._cond:
                if not self._joining or self._closing:
                    return
            try:
                sock, address = listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._admit, args=(sock, address), name="mpc-admit", daemon=True).start()

    def _admit(self, sock: socket.socket, address) -> None:
        """Handshake with a connecting member, check its certificate, read its hello, welcome it;
        then read its frames (this thread becomes its reader)."""
        where = f"{address[0]}:{address[1]}"
        tls = None
        try:
            sock.settimeout(min(HANDSHAKE_S, self.timeout_s))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                tls = self._server.wrap_socket(sock, server_side=True)
            except (ssl.SSLError, OSError) as exc:
                raise Refused(f"TLS handshake failed ({_reason(exc)})") from None
            peer = self._peer_rank(tls, None)
            with self._cond:
                if peer in self._in:
                    raise Refused(f"a second connection as {self.federation.role(peer)}")
            self._check_hello(tls, peer)
            tls.sendall(WELCOME)
            tls.settimeout(None)
            with self._cond:
                if peer in self._in or self._closing:
                    raise Refused(f"a second connection as {self.federation.role(peer)}")
                self._in[peer] = tls
                self._readers.append(threading.current_thread())
                self._cond.notify_all()
        except Refused as exc:
            self._refuse(f"a connection from {where}: {exc}", tls or sock)
            return
        except Exception as exc:  # a socket error, a malformed hello, anything: the stranger is refused
            self._refuse(f"a connection from {where}: {_reason(exc)}", tls or sock)
            return
        self._read_loop(peer, tls)

    def _refuse(self, why: str, sock) -> None:
        with self._cond:
            self.refused = (self.refused + [why])[-20:]
        _close(sock)

    def _peer_rank(self, tls: ssl.SSLSocket, expected: int | None) -> int:
        """The member whose certificate ``tls``'s peer presented (already verified against the CA)."""
        der = tls.getpeercert(binary_form=True)
        if not der:
            raise Refused("no certificate")
        try:
            who = certs.identity(ssl.DER_cert_to_PEM_cert(der).encode("ascii"), "its certificate")
        except Exception as exc:
            raise Refused(str(exc)) from None
        rank = self.federation.rank_of(who.role)
        if rank is None:
            raise Refused(f"its certificate names {who.role}, not a member of federation {self.federation.name!r}")
        if expected is not None and rank != expected:
            raise Refused(f"its certificate names {who.role}, not {self.federation.role(expected)}")
        if rank == self.rank:
            raise Refused(f"its certificate names this member's own role ({who.role})")
        member = self.federation.members[rank]
        if who.organisation != member.organisation:
            raise Refused(
                f"its certificate names {who.role} of {who.organisation!r}, the federation file {member.organisation!r}"
            )
        if member.sha256 and who.sha256 != member.sha256:
            raise Refused(f"its certificate is not the one pinned for {who.role} (sha256 {who.sha256[:16]}...)")
        return rank

    def _hello(self) -> bytes:
        body = {
            "version": PROTOCOL,
            "federation": self.federation.name,
            "digest": self.digest,
            "parties": self.parties,
            "rank": self.rank,
        }
        payload = json.dumps(body, separators=(",", ":")).encode()
        return pack_header(HELLO, MAIN, nbytes=len(payload)) + payload

    def _check_hello(self, tls: ssl.SSLSocket, peer: int) -> None:
        kind, _, _, _, nbytes = unpack_header(_recv_exact(tls, HEADER.size))
        if kind != HELLO:
            raise Refused(f"its first frame was a {KIND_NAMES[kind]}, not a hello")
        hello = decode_obj(_recv_exact(tls, nbytes))
        if not isinstance(hello, dict) or hello.get("version") != PROTOCOL:
            raise Refused(f"another protocol version ({hello.get('version') if isinstance(hello, dict) else '?'})")
        if hello.get("federation") != self.federation.name or hello.get("digest") != self.digest:
            self._tell(tls, "its federation file differs from this member's")
            raise Refused(f"its federation file ({str(hello.get('federation'))[:40]!r}) differs from this member's")
        if hello.get("rank") != peer or hello.get("parties") != self.parties:
            raise Refused(f"its hello claims rank {hello.get('rank')!r}, its certificate {peer}")

    @staticmethod
    def _tell(tls: ssl.SSLSocket, why: str) -> None:
        try:
            tls.sendall(REFUSED + why.encode()[:200])
        except (OSError, ssl.SSLError):
            pass

    def _connect(self, peer: int, deadline: float) -> None:
        member = self.federation.members[peer]
        while True:
            with self._cond:
                if not self._joining or self._closing:
                    return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            tls = None
            try:
                raw = socket.create_connection((member.host, member.port), timeout=min(HANDSHAKE_S, max(left, 0.1)))
                raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    tls = self._client.wrap_socket(raw, server_hostname=member.role)
                except BaseException:
                    _close(raw)
                    raise
                self._peer_rank(tls, peer)
                tls.sendall(self._hello())
                answer = tls.recv(1)
                if answer != WELCOME:
                    said = tls.recv(200).decode(errors="replace") if answer == REFUSED else ""
                    raise Refused(f"it refused this member{': ' + said if said else ''}")
                tls.settimeout(self.timeout_s)
                with self._cond:
                    if self._joining and not self._closing:
                        self._out[peer] = _Link(tls, threading.Lock())
                        self._cond.notify_all()
                        return
                _close(tls)
                return
            except Refused as exc:
                why = str(exc)
            except ssl.SSLCertVerificationError as exc:
                why = f"its certificate was refused: {exc.verify_message}"
            except ssl.SSLError as exc:
                why = f"TLS: {_reason(exc)}"
            except Exception as exc:  # refused, reset, a malformed answer: try again until the deadline
                why = _reason(exc)
            _close(tls)
            with self._cond:
                self._unreached[peer] = why
            time.sleep(RETRY_S)
