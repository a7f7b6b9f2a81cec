"""Frames over a stream socket (TLS or plain): a JSON header and a binary body.

A frame is ``json_len (4 bytes, big-endian) || body_len (8 bytes, big-endian) || JSON || body``:
a 12-byte prefix with no magic, then the header, a JSON object in compact UTF-8, then the body.
The receiver checks both lengths against its caps before reading or allocating anything, and
accepts only a strict JSON object: valid UTF-8, no NaN or Infinity, no duplicate keys, nested at
most 64 deep. A body may carry several blobs (``pack_blobs``), their lengths listed in the header.
"""

from __future__ import annotations

import hashlib
import json
import socket
import struct

import numpy as np

PREFIX = struct.Struct(">IQ")
#: The deepest nesting of a header (the header object itself is depth 1).
MAX_DEPTH = 64
_CHUNK = 1 << 20


class FrameError(ValueError):
    """A malformed, oversized or truncated frame; the message is one line."""


class PeerClosed(ConnectionError):
    """The peer closed the stream cleanly between frames."""


def send_frame(sock: socket.socket, header: dict, body: bytes = b"") -> int:
    """Write one frame: the prefix, ``header`` as compact UTF-8 JSON (no NaN), then ``body``;
    returns the bytes written."""
    if not isinstance(header, dict):
        raise TypeError(f"a frame header is a dict, not {type(header).__name__}")
    data = json.dumps(header, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    view = memoryview(body).cast("B")
    if len(data) >= 1 << 32:
        raise ValueError(f"a frame header of {len(data)} bytes is too long")
    sock.sendall(PREFIX.pack(len(data), len(view)) + data)
    if len(view):
        sock.sendall(view)
    return PREFIX.size + len(data) + len(view)


def _recv_exactly(sock: socket.socket, n: int, what: str) -> bytes:
    """``n`` bytes, read in chunks (memory grows only as data arrives); ``FrameError`` on EOF."""
    parts, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, _CHUNK))
        if not chunk:
            raise FrameError(f"the peer closed the stream in the middle of a frame's {what} ({got} of {n} bytes)")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _no_duplicates(pairs: list) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise FrameError(f"the frame header repeats the key {key[:64]!r}")
        out[key] = value
    return out


def _no_constant(name: str):
    raise FrameError(f"the frame header holds {name}, which is not JSON")


def _depth(value) -> int:
    """How deep ``value`` nests (a scalar 0, ``{}`` 1), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            items = list(item.values())
        elif isinstance(item, list):
            items = item
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in items)
    return deepest


def parse_header(data: bytes) -> dict:
    """A frame header's JSON object; ``FrameError`` when it is not strict JSON or not an object."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError("the frame header is not valid UTF-8") from None
    try:
        header = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except RecursionError:
        raise FrameError(f"the frame header nests deeper than {MAX_DEPTH}") from None
    except FrameError:
        raise
    except ValueError as exc:
        raise FrameError(f"the frame header is not JSON ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(header, dict):
        raise FrameError(f"the frame header is a JSON {type(header).__name__}, not an object")
    if _depth(header) > MAX_DEPTH:
        raise FrameError(f"the frame header nests deeper than {MAX_DEPTH}")
    return header


def recv_frame(sock: socket.socket, max_header: int = 1 << 20, max_body: int = 1 << 31) -> tuple[dict, bytes]:
    """Read one frame: ``(header, body)``. ``PeerClosed`` on a clean EOF before the frame starts,
    ``FrameError`` on EOF within it or when a length exceeds ``max_header`` / ``max_body``
    (checked before reading on) or the header is not a strict JSON object."""
    first = sock.recv(PREFIX.size)
    if not first:
        raise PeerClosed("the peer closed the stream")
    if len(first) < PREFIX.size:
        first += _recv_exactly(sock, PREFIX.size - len(first), "length prefix")
    header_len, body_len = PREFIX.unpack(first)
    if header_len > max_header:
        raise FrameError(f"a frame header of {header_len} bytes is over the limit of {max_header}")
    if body_len > max_body:
        raise FrameError(f"a frame body of {body_len} bytes is over the limit of {max_body}")
    header = parse_header(_recv_exactly(sock, header_len, "header"))
    return header, _recv_exactly(sock, body_len, "body")


def pack_blobs(blobs: list[bytes]) -> tuple[list[int], bytes]:
    """``(lengths, body)``: the blobs' lengths (for the header) and their concatenation."""
    blobs = [bytes(b) for b in blobs]
    return [len(b) for b in blobs], b"".join(blobs)


def unpack_blobs(lengths: list[int], body: bytes) -> list[bytes]:
    """The blobs ``pack_blobs`` packed; ``FrameError`` unless ``lengths`` is a list of
    non-negative integers that sum to the body's length."""
    if not isinstance(lengths, list) or not all(type(n) is int and n >= 0 for n in lengths):
        raise FrameError("blob lengths are a list of non-negative integers")
    if sum(lengths) != len(body):
        raise FrameError(f"blob lengths sum to {sum(lengths)}, the body has {len(body)} bytes")
    out, at = [], 0
    for n in lengths:
        out.append(bytes(body[at : at + n]))
        at += n
    return out


def pack_arrays(arrays: dict[str, np.ndarray]) -> tuple[list, bytes]:
    """``(layout, body)`` of int64/float64 arrays: ``[[name, dtype, shape], ...]`` and their bytes."""
    layout, parts = [], []
    for name, value in arrays.items():
        value = np.ascontiguousarray(value)
        if value.dtype not in (np.int64, np.float64):
            raise TypeError(f"array {name!r} is {value.dtype}, not int64 or float64")
        layout.append([name, str(value.dtype), list(value.shape)])
        parts.append(value.astype(value.dtype.newbyteorder("<"), copy=False).tobytes())
    return layout, b"".join(parts)


def unpack_arrays(layout, body: bytes) -> dict[str, np.ndarray]:
    """The arrays ``pack_arrays`` packed; ``FrameError`` when the layout does not describe the body."""
    if not isinstance(layout, list):
        raise FrameError("the arrays' layout is not a list")
    out, at = {}, 0
    for item in layout:
        if not (
            isinstance(item, list) and len(item) == 3 and isinstance(item[0], str) and item[1] in ("int64", "float64")
        ):
            raise FrameError("an array's layout is not [name, int64|float64, shape]")
        shape = item[2]
        if not isinstance(shape, list) or len(shape) > 8 or not all(type(n) is int and 0 <= n < 1 << 40 for n in shape):
            raise FrameError(f"array {item[0][:40]!r} has a malformed shape")
        count = int(np.prod(shape, dtype=np.int64))
        if item[0] in out or at + 8 * count > len(body):
            raise FrameError(f"array {item[0][:40]!r} is repeated or longer than the body")
        out[item[0]] = np.frombuffer(body, dtype="<" + ("i8" if item[1] == "int64" else "f8"), count=count, offset=at)
        out[item[0]] = out[item[0]].astype(item[1]).reshape(shape)
        at += 8 * count
    if at != len(body):
        raise FrameError("the body is longer than its arrays")
    return out


def query_digest(header: dict, arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of a query as it travels (canonical JSON header, then each array's name, type, shape
    and bytes in name order): what a sealed share is bound to."""
    h = hashlib.sha256(json.dumps(header, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(arrays):
        value = np.ascontiguousarray(arrays[name])
        h.update(json.dumps([name, str(value.dtype), list(value.shape)]).encode())
        h.update(value.tobytes())
    return h.hexdigest()
