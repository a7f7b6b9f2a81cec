"""A mesh member's traffic once its connections stand (``tls.Mesh`` forms them): read, take, send, leave.

Every incoming connection has a reader thread (``_read_loop``): it checks each frame's header and
the channel policy (``frames.allowed``) and puts what arrives in a mailbox per ``(sender,
channel)``, where ``take`` waits for it until a deadline. Sends go out on this member's own
connection to the receiver, one thread at a time. A connection that breaks outside an orderly close,
or a malformed frame, fails every pending and later wait at once (``_fail``).
"""

from __future__ import annotations

import collections
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .frames import (
    BARRIER,
    BYE,
    CHANNEL_NAMES,
    HEADER,
    ITEMSIZE,
    KIND_NAMES,
    MAIN,
    MAX_OBJ_BYTES,
    MAX_TENSOR_BYTES,
    OBJ,
    TENSOR,
    FrameError,
    _bytes_of,
    _recv_exact,
    _recv_into,
    _torch_dtypes,
    allowed,
    check_shape,
    dtype_code,
    pack_header,
    unpack_header,
)
from .tagged import decode_obj, encode_obj

if TYPE_CHECKING:
    import torch

    from .federation import Federation

#: Large tensors are written in slices of this many bytes (each with the send timeout of its own).
SEND_SLICE = 4 << 20
#: Tensors up to this size go out in one write with their header.
SMALL = 64 << 10


@dataclass
class _Link:
    sock: ssl.SSLSocket
    lock: threading.Lock


class Traffic:
    """The mailboxes, takes, sends and goodbye of a mesh member; ``tls.Mesh`` adds the joining."""

    federation: Federation
    rank: int
    parties: int
    timeout_s: float
    _cond: threading.Condition
    _boxes: dict[tuple[int, int], collections.deque]
    _out: dict[int, _Link]
    _in: dict[int, ssl.SSLSocket]
    _readers: list[threading.Thread]  # the acceptor and each connection's reader
    _left: set[int]  # peers that said goodbye
    _failure: str | None
    _closing: bool
    _joining: bool
    _listener: socket.socket | None

    def who(self, rank: int) -> str:
        """``party 2`` or ``the dealer``."""
        return self.federation.who(rank)

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
