"""The frames of the MPC transport (``tls``): a fixed binary layout, its checks and the channel policy.

Members exchange frames: a header (``pack_header``: magic, kind, channel, element type, number of
dimensions, payload bytes), a tensor's dimensions as int64s, then the payload: a tensor's raw
bytes, an object as tagged JSON (``tagged``), nothing for a barrier or the closing ``BYE``.
``unpack_header`` and ``check_shape`` check a header before anything of its payload is read or
allocated, and ``allowed`` says who may send whom which kind of frame on which channel. The socket
reads at the end fill a buffer exactly or fail.
"""

from __future__ import annotations

import struct
import sys
from typing import TYPE_CHECKING, Any

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

if sys.byteorder != "little":  # frames carry little-endian numbers as they lie in memory
    raise ImportError("the MPC transport needs a little-endian machine")


class FrameError(ValueError):
    """A frame (or an object inside one) that does not follow the layout: the sender is broken or hostile."""


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


# ---- reading a socket ---------------------------------------------------------------------------


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
