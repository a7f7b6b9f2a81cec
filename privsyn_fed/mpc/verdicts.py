"""The verdict exchange (``send_verdict`` in a party, ``collect_verdicts`` in party 0): every party
sends ``[code, reason length]`` to party 0 (code 0: accept, ``policy.ACCEPT``); party 0 then
broadcasts ``go``, or ``abort`` with the longest reason's length, after which every party sends
its reason's bytes (as numbers, zero-padded) and nobody takes the step."""

from __future__ import annotations

from dataclasses import dataclass

from ..common import MPCError
from . import world
from .policy import ACCEPT

#: A reason is cut to this many bytes (UTF-8) before it travels.
REASON_BYTES = 600


def _reason_bytes(reason: str) -> bytes:
    raw = " ".join(reason.split()).encode("utf-8")[:REASON_BYTES]
    return raw.decode("utf-8", errors="ignore").encode("utf-8")


def send_verdict(channel: world.Channel, code: int, reason: str = "") -> bool:
    """A party's verdict on party 0's last command: ``code`` (``ACCEPT`` or why not) and, if asked,
    the reason. Returns whether every party accepted (party 0 said ``go``)."""
    raw = _reason_bytes(reason) if code != ACCEPT else b""
    world.gather_to_party0([float(code), float(len(raw))])
    cmd, _ = channel.receive()
    if cmd.get("op") == "go":
        return True
    if cmd.get("op") != "abort":
        raise MPCError(f"party 0 sent {cmd.get('op')!r} where it owed a go or an abort")
    length = int(cmd["bytes"])
    world.gather_to_party0([float(b) for b in raw.ljust(length, b"\0")[:length]] if length else [0.0])
    return False


@dataclass(frozen=True)
class Verdict:
    """One party's refusal as party 0 received it."""

    rank: int
    code: int
    reason: str


def collect_verdicts(channel: world.Channel) -> list[Verdict]:
    """Party 0's side of the exchange: every party's verdict on the command just sent; tells them
    ``go`` when all accepted (returns ``[]``), else ``abort`` and returns the refusals."""
    rows = world.gather_to_party0([0.0, 0.0]) or []
    refusals = [(k, int(code), int(length)) for k, (code, length) in enumerate(rows) if int(code) != ACCEPT]
    if not refusals:
        channel.send({"op": "go"})
        return []
    length = max(n for _, _, n in refusals)
    channel.send({"op": "abort", "bytes": length})
    texts = world.gather_to_party0([0.0] * length if length else [0.0]) or []
    out = []
    for k, code, n in refusals:
        raw = bytes(int(b) for b in texts[k][:n]) if n else b""
        out.append(Verdict(k, code, raw.decode("utf-8", errors="replace") or "no reason given"))
    return out
