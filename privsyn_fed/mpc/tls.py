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
"""

from __future__ import annotations

import collections
import json
import socket
import ssl
import struct
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import certs
from .federation import Federation, federation_digest

if TYPE_CHECKING:
    import torch

#: Version of the frames and the hello; members of other versions are refused at the hello.
PROTOCOL = 1
MAGIC = b"PSF1"
#: magic, kind, channel, element type, number of dimensions, reserved (0), payload bytes.
HEADER = struct.Struct("<4sBBBBIQ")
TENSOR, OBJ, BARRIER, HELLO, BYE = 1, 2, 3, 4, 5
KIND_NAMES = {TENSOR: "tensor", OBJ: "object", BARRIER: "barrier", HELLO: "hello", BYE: "bye"}
#: CrypTen's groups and the command channel: parties (main), everyone with the dealer (ttp), party 0
#: and the dealer (ttp_comm), party 0's commands and the replies (command).
MAIN, TTP, TTP_COMM, COMMAND = 0, 1, 2, 3
CHANNEL_NAMES = {MAIN: "main", TTP: "ttp", TTP_COMM: "ttp_comm", COMMAND: "command"}
DTYPE_NAMES = {1: "int64", 2: "int32", 3: "int8", 4: "uint8", 5: "float64", 6: "bool"}
ITEMSIZE = {1: 8, 2: 4, 3: 1, 4: 1, 5: 8, 6: 1}
MAX_NDIM = 8
#: A tensor frame may carry at most this much (one opening of a large pool is well below it).
MAX_TENSOR_BYTES = 8 << 30
#: An object or hello frame may carry at most this much (CrypTen's requests are a few hundred bytes).
MAX_OBJ_BYTES = 64 << 10
#: Longest nesting of an object frame's lists and dicts.
MAX_DEPTH = 16
#: Seconds an accepted connection has for its TLS handshake and hello.
HANDSHAKE_S = 10.0
#: Seconds between two tries to connect to a member that is not listening yet.
RETRY_S = 0.25
#: Large tensors are written in slices of this many bytes (each with the send timeout of its own).
SEND_SLICE = 4 << 20
#: Tensors up to this size go out in one write with their header.
SMALL = 64 << 10
WELCOME, REFUSED = b"\x01", b"\x00"

if sys.byteorder != "little":  # frames carry little-endian numbers as they lie in memory
    raise ImportError("the MPC transport needs a little-endian machine")


class FrameError(ValueError):
    """A frame (or an object inside one) that does not follow the layout: the sender is broken or hostile."""


class JoinError(RuntimeError):
    """The mesh did not form within the timeout; the message says which member was missing and why."""


class Refused(Exception):
    """A connection attempt that was refused (why, in one line)."""


# ---- frames -------------------------------------------------------------------------------------


def _torch_dtypes() -> dict[int, Any]:
    import torch

    return {1: torch.int64, 2: torch.int32, 3: torch.int8, 4: torch.uint8, 5: torch.float64, 6: torch.bool}


def dtype_code(dtype) -> int:
    """The frame code of a torch element type (``ValueError`` for one the transport does not carry)."""
    for code, known in _torch_dtypes().items():
        if known == dtype:
            return code
    raise ValueError(f"the MPC transport carries no {dtype} tensors")


def pack_header(kind: int, channel: int, dtype: int = 0, shape: tuple[int, ...] = (), nbytes: int = 0) -> bytes:
    """A frame's header (and a tensor's dimensions, as int64s after it)."""
    return HEADER.pack(MAGIC, kind, channel, dtype, len(shape), 0, nbytes) + struct.pack(f"<{len(shape)}q", *shape)


def unpack_header(raw: bytes) -> tuple[int, int, int, int, int]:
    """``(kind, channel, dtype, ndim, nbytes)`` of a header; ``FrameError`` if anything is off."""
    if len(raw) != HEADER.size:
        raise FrameError(f"a header has {HEADER.size} bytes, not {len(raw)}")
    magic, kind, channel, dtype, ndim, reserved, nbytes = HEADER.unpack(raw)
    if magic != MAGIC:
        raise FrameError("not a frame of this protocol (bad magic)")
    if kind not in KIND_NAMES:
        raise FrameError(f"unknown frame kind {kind}")
    if channel not in CHANNEL_NAMES:
        raise FrameError(f"unknown channel {channel}")
    if reserved:
        raise FrameError("reserved header bits are set")
    if kind == TENSOR:
        if dtype not in DTYPE_NAMES:
            raise FrameError(f"unknown element type {dtype}")
        if ndim > MAX_NDIM:
            raise FrameError(f"{ndim} dimensions (at most {MAX_NDIM})")
        if nbytes > MAX_TENSOR_BYTES:
            raise FrameError(f"a tensor of {nbytes} bytes (at most {MAX_TENSOR_BYTES})")
    elif dtype or ndim:
        raise FrameError(f"a {KIND_NAMES[kind]} frame with an element type or dimensions")
    elif kind in (OBJ, HELLO) and nbytes > MAX_OBJ_BYTES:
        raise FrameError(f"an object of {nbytes} bytes (at most {MAX_OBJ_BYTES})")
    elif kind in (BARRIER, BYE) and nbytes:
        raise FrameError(f"a {KIND_NAMES[kind]} frame with a payload")
    return kind, channel, dtype, ndim, nbytes


def check_shape(dims: tuple[int, ...], dtype: int, nbytes: int) -> int:
    """The number of elements of a tensor frame's dimensions; ``FrameError`` unless they match ``nbytes``."""
    count = 1
    for d in dims:
        if d < 0:
            raise FrameError(f"a negative dimension ({d})")
        count *= d
    if count * ITEMSIZE[dtype] != nbytes:
        raise FrameError(f"dimensions {list(dims)} of {DTYPE_NAMES[dtype]} do not make {nbytes} bytes")
    return count


def allowed(src: int, dst: int, kind: int, channel: int, parties: int) -> bool:
    """Whether ``src`` may send ``dst`` a frame of ``kind`` on ``channel`` (the dealer is rank ``parties``).

    Parties talk on the main and command channels; the dealer only on its own: it sends the parties
    their seeds and barriers (ttp), party 0 its replies (ttp) and correlated randomness (ttp_comm),
    and it receives nothing but party 0's requests and everyone's barriers: never a tensor."""
    dealer = parties
    if kind == BYE:
        return True
    if kind == HELLO:
        return False  # only as the first frame of a connection, read before the reader starts
    if src != dealer and dst != dealer:
        if channel in (MAIN, COMMAND):
            return kind in (TENSOR, OBJ, BARRIER)
        return channel == TTP and kind == BARRIER
    if channel == TTP_COMM:
        return src == dealer and dst == 0 and kind == TENSOR
    if channel != TTP:
        return False
    if src == dealer:
        return kind in (TENSOR, BARRIER) or (kind == OBJ and dst == 0)
    return kind == BARRIER or (kind == OBJ and src == 0)


# ---- objects: a tagged JSON of the few types CrypTen sends --------------------------------------


def encode_obj(obj: Any) -> bytes:
    """``obj`` as tagged JSON: None, bools, integers (64-bit), text, lists, dicts with text keys,
    tuples (``{"$tuple": [...]}``) and ``torch.Size`` (``{"$size": [...]}``); ``TypeError`` otherwise."""
    return json.dumps(_tag(obj, 0), separators=(",", ":"), allow_nan=False).encode()


def _tag(obj: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise TypeError("an object nested too deeply for the MPC transport")
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        if not -(2**63) <= obj < 2**63:
            raise TypeError("integers beyond 64 bits do not travel")
        return int(obj)
    if type(obj).__name__ == "Size" and type(obj).__module__ == "torch":
        return {"$size": [int(d) for d in obj]}
    if isinstance(obj, tuple):
        return {"$tuple": [_tag(x, depth + 1) for x in obj]}
    if isinstance(obj, list):
        return [_tag(x, depth + 1) for x in obj]
    if isinstance(obj, dict):
        if not all(isinstance(k, str) and not k.startswith("$") for k in obj):
            raise TypeError("object keys are text not starting with $")
        return {k: _tag(v, depth + 1) for k, v in obj.items()}
    raise TypeError(f"a {type(obj).__name__} does not travel over the MPC transport")


def decode_obj(raw: bytes) -> Any:
    """The object of ``encode_obj``'s bytes; ``FrameError`` for anything else (floats, unknown
    tags, duplicate keys, deep nesting, oversized integers, bytes that are not UTF-8 JSON)."""
    if len(raw) > MAX_OBJ_BYTES:
        raise FrameError("an oversized object")
    try:
        data = json.loads(
            raw.decode("utf-8"),
            object_pairs_hook=_unique_keys,
            parse_float=_refuse("a real number"),
            parse_constant=_refuse("NaN or infinity"),
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FrameError(f"an object that is not tagged JSON ({str(exc)[:80]})") from None
    return _untag(data, 0)


def _unique_keys(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate keys")
    return dict(pairs)


def _refuse(what: str):
    def refuse(text):
        raise ValueError(f"{what} ({text[:20]})")

    return refuse


def _untag(data: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise FrameError("an object nested too deeply")
    if data is None or isinstance(data, (bool, str)):
        return data
    if isinstance(data, int):
        if not -(2**63) <= data < 2**63:
            raise FrameError("an integer beyond 64 bits")
        return data
    if isinstance(data, list):
        return [_untag(x, depth + 1) for x in data]
    if isinstance(data, dict):
        tags = [k for k in data if k.startswith("$")]
        if not tags:
            return {k: _untag(v, depth + 1) for k, v in data.items()}
        if len(data) != 1 or tags[0] not in ("$size", "$tuple") or not isinstance(data[tags[0]], list):
            raise FrameError(f"an unknown tag {tags[0][:20]!r}")
        items = data[tags[0]]
        if tags[0] == "$tuple":
            return tuple(_untag(x, depth + 1) for x in items)
        if len(items) > MAX_NDIM or not all(type(d) is int and 0 <= d < 2**63 for d in items):
            raise FrameError("a size that is not up to 8 non-negative integers")
        import torch

        return torch.Size(items)
    raise FrameError(f"a {type(data).__name__} in an object")


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


@dataclass
class _Link:
    sock: ssl.SSLSocket
    lock: threading.Lock


class Mesh:
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

    def who(self, rank: int) -> str:
        """``party 2`` or ``the dealer``."""
        return self.federation.who(rank)

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

    # ---- reading ----
    def _read_loop(self, src: int, tls: ssl.SSLSocket) -> None:
        me, parties = self.rank, self.parties
        dtypes = None
        try:
            while True:
                kind, channel, dtype, ndim, nbytes = unpack_header(_recv_exact(tls, HEADER.size))
                if not allowed(src, me, kind, channel, parties):
                    raise FrameError(f"a {KIND_NAMES[kind]} frame on the {CHANNEL_NAMES[channel]} channel")
                if kind == BYE:
                    with self._cond:
                        self._left.add(src)
                        self._cond.notify_all()
                    return
                item: Any
                if kind == TENSOR:
                    dims = struct.unpack(f"<{ndim}q", _recv_exact(tls, 8 * ndim)) if ndim else ()
                    count = check_shape(dims, dtype, nbytes)
                    if dtypes is None:
                        dtypes = _torch_dtypes()
                    import torch

                    flat = torch.empty(count, dtype=dtypes[dtype])
                    if count:
                        _recv_into(tls, _bytes_of(flat))
                    item = flat.view(dims)
                elif kind == OBJ:
                    item = _Obj(decode_obj(_recv_exact(tls, nbytes)))
                else:
                    item = _BARRIER
                with self._cond:
                    self._boxes[(src, channel)].append(item)
                    self._cond.notify_all()
        except FrameError as exc:
            self._fail(f"{self.who(src)} sent a malformed frame ({exc}); its connection was closed")
        except (OSError, ssl.SSLError, EOFError) as exc:
            self._fail(f"connection to {self.who(src)} closed ({_reason(exc)})", src)
        except Exception as exc:  # no memory for a tensor, say: the run cannot go on
            self._fail(f"connection to {self.who(src)} closed: {type(exc).__name__}: {_reason(exc)}")
        finally:
            _close(tls)

    def _fail(self, message: str, src: int | None = None) -> None:
        with self._cond:
            if self._closing or (src is not None and src in self._left):
                return
            if self._failure is None:
                self._failure = message
            self._cond.notify_all()

    def failure(self) -> str | None:
        """Why this member's mesh broke, or None."""
        return self._failure

    def take(self, src: int, channel: int) -> Any:
        """The next frame's content from ``src`` on ``channel``: a tensor, an object or a barrier;
        ``RuntimeError`` once the mesh broke, ``src`` left, or after ``timeout_s``."""
        deadline = time.monotonic() + self.timeout_s
        with self._cond:
            while True:
                box = self._boxes.get((src, channel))
                if box:
                    return box.popleft()
                if self._failure is not None:
                    raise RuntimeError(self._failure)
                if src in self._left:
                    raise RuntimeError(f"connection to {self.who(src)} closed: it left the run")
                if self._closing:
                    raise RuntimeError("connection closed: this member has left the run")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RuntimeError(f"timed out after {self.timeout_s:g} s waiting for {self.who(src)}")
                self._cond.wait(remaining)

    def take_tensor(self, src: int, channel: int) -> torch.Tensor:
        """The next frame from ``src`` on ``channel``, which must be a tensor."""
        item = self.take(src, channel)
        if isinstance(item, (_Obj, _Barrier)):
            raise RuntimeError(f"protocol error: {self.who(src)} sent {item} where a tensor was due")
        return item

    def take_obj(self, src: int, channel: int) -> Any:
        """The next frame from ``src`` on ``channel``, which must be an object."""
        item = self.take(src, channel)
        if not isinstance(item, _Obj):
            raise RuntimeError(f"protocol error: {self.who(src)} sent {_describe(item)} where an object was due")
        return item.value

    def take_barrier(self, src: int, channel: int) -> None:
        """The next frame from ``src`` on ``channel``, which must be a barrier."""
        item = self.take(src, channel)
        if item is not _BARRIER:
            raise RuntimeError(f"protocol error: {self.who(src)} sent {_describe(item)} where a barrier was due")

    # ---- sending ----
    def send_tensor(self, dst: int, channel: int, tensor: torch.Tensor) -> None:
        """Send ``tensor`` (its element type, shape and bytes) to ``dst`` on ``channel``."""
        data = tensor.detach().contiguous()
        code = dtype_code(data.dtype)
        nbytes = data.numel() * ITEMSIZE[code]
        if nbytes > MAX_TENSOR_BYTES:
            raise ValueError(f"a tensor of {nbytes} bytes exceeds the transport's {MAX_TENSOR_BYTES}")
        header = pack_header(TENSOR, channel, code, tuple(data.shape), nbytes)
        body = _bytes_of(data.reshape(-1)) if nbytes else memoryview(b"")
        self._send(dst, TENSOR, channel, header, body)

    def send_obj(self, dst: int, channel: int, obj: Any) -> None:
        """Send ``obj`` (``encode_obj``'s types only) to ``dst`` on ``channel``."""
        payload = encode_obj(obj)
        if len(payload) > MAX_OBJ_BYTES:
            raise ValueError(f"an object of {len(payload)} bytes exceeds the transport's {MAX_OBJ_BYTES}")
        self._send(dst, OBJ, channel, pack_header(OBJ, channel, nbytes=len(payload)), memoryview(payload))

    def send_barrier(self, dst: int, channel: int) -> None:
        """Send a barrier to ``dst`` on ``channel``."""
        self._send(dst, BARRIER, channel, pack_header(BARRIER, channel), memoryview(b""))

    def _send(self, dst: int, kind: int, channel: int, header: bytes, body: memoryview) -> None:
        if not allowed(self.rank, dst, kind, channel, self.parties):
            raise ValueError(
                f"{self.who(self.rank)} may not send {self.who(dst)} a {KIND_NAMES[kind]} on "
                f"the {CHANNEL_NAMES[channel]} channel"
            )
        link = self._out.get(dst)
        if link is None:
            raise RuntimeError(f"connection to {self.who(dst)} closed: not connected")
        with link.lock:
            if self._failure is not None:
                raise RuntimeError(self._failure)
            try:
                if len(body) <= SMALL:
                    link.sock.sendall(header + body.tobytes() if len(body) else header)
                else:
                    link.sock.sendall(header)
                    for start in range(0, len(body), SEND_SLICE):
                        link.sock.sendall(body[start : start + SEND_SLICE])
            except socket.timeout:
                message = f"timed out after {self.timeout_s:g} s sending to {self.who(dst)}"
                self._fail(message)
                raise RuntimeError(message) from None
            except (OSError, ssl.SSLError) as exc:
                if dst in self._left:
                    raise RuntimeError(f"connection to {self.who(dst)} closed: it left the run") from None
                message = f"connection to {self.who(dst)} closed ({_reason(exc)})"
                self._fail(message)
                raise RuntimeError(message) from None

    # ---- leaving ----
    def close(self, orderly: bool = True) -> None:
        """Say goodbye on every outgoing connection (if ``orderly``) and close every connection."""
        if orderly:
            bye = pack_header(BYE, MAIN)
            for link in list(self._out.values()):
                with link.lock:
                    try:
                        link.sock.settimeout(min(5.0, self.timeout_s))
                        link.sock.sendall(bye)
                    except (OSError, ssl.SSLError):
                        pass
        with self._cond:
            self._closing = True
            self._joining = False
            self._cond.notify_all()
            outgoing, incoming = list(self._out.values()), list(self._in.values())
        for link in outgoing:
            with link.lock:
                _close(link.sock)
        for sock in incoming:  # wakes its reader, which closes it (the reader alone uses its TLS state)
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass
        if self._listener is not None:
            self._listener.close()
        # Wait for the readers to end: a thread still inside torch when the interpreter exits would
        # be unwound there, which aborts the process.
        deadline = time.monotonic() + min(5.0, self.timeout_s)
        for thread in self._readers:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))


class _Obj:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __str__(self):
        return "an object"


class _Barrier:
    def __str__(self):
        return "a barrier"


_BARRIER = _Barrier()


def _describe(item: Any) -> str:
    return str(item) if isinstance(item, (_Obj, _Barrier)) else "a tensor"


def _bytes_of(flat: torch.Tensor) -> memoryview:
    """The bytes of a contiguous one-dimensional CPU tensor, without a copy."""
    array: Any = flat.numpy()
    return memoryview(array).cast("B")


def _recv_exact(sock, count: int) -> bytes:
    buffer = bytearray(count)
    if count:
        _recv_into(sock, memoryview(buffer))
    return bytes(buffer)


def _recv_into(sock, view: memoryview) -> None:
    got, total = 0, len(view)
    while got < total:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise EOFError("the peer closed the connection")
        got += n


def _close(sock) -> None:
    if sock is None:
        return
    try:
        sock.close()
    except OSError:
        pass


def _reason(exc: BaseException) -> str:
    if isinstance(exc, socket.timeout):
        return "timed out"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"certificate refused: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return (exc.reason or str(exc)).replace("_", " ").lower()
    if isinstance(exc, EOFError):
        return "the peer closed the connection"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
