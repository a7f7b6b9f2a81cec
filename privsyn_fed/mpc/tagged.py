"""Tagged JSON: the few Python objects CrypTen sends over the MPC transport, never pickles.

``encode_obj`` writes None, bools, 64-bit integers, text, lists, dicts with text keys, tuples
(``{"$tuple": [...]}``) and ``torch.Size`` (``{"$size": [...]}``) as compact JSON; ``decode_obj``
reads back only that, within the frames' limits, and raises ``FrameError`` for anything else.
"""

from __future__ import annotations

import json
from typing import Any

from .frames import MAX_DEPTH, MAX_NDIM, MAX_OBJ_BYTES, FrameError


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
