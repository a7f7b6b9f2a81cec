"""The junction tree's messages over flat belief vectors, sent in waves.

A message ``i -> j`` sums the sender's table onto their separator and multiplies that into the
receiver's cells (HUGIN, on ``exp(b - max b)``; ``mirror.Plan``). The schedule sends them one by
one; ``waves`` groups consecutive messages none of whose senders an earlier message of the group
receives into, so a wave's sums can all be taken before its products, which are then made in the
schedule's order: every cell is multiplied by the same messages in the same order, the same bits
as one by one. On two cores a wave's large sums, and each run of its large products, go to the
helper thread in one hand-over (``halves``), where one message at a time took two each.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Sequence

import numpy as np

from . import halves
from .flat_sums import Sums


@dataclass
class Message:
    """One message ``i -> j`` over the separator ``S`` of nodes ``i`` and ``j`` (its cells in one
    order for both directions): the sum of the sender's table onto ``S``, each receiver cell's
    separator cell, the sender's cells grouped by separator cell (for log space), and the message
    ``j -> i`` already sent (its index, or -1)."""

    sender: slice
    receiver: slice
    summed: Sums
    to_receiver: np.ndarray
    grouped: np.ndarray
    back: int
    #: Where the receiver's cells split in two halves for two threads (0: one thread).
    middle: int = 0


def waves(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """The schedule cut into runs ``[first, end)`` of messages none of whose senders an earlier
    message of the run receives into (module docstring)."""
    out: list[tuple[int, int]] = []
    first, received = 0, set[int]()
    for k, msg in enumerate(messages):
        if msg.sender.start in received:
            out.append((first, k))
            first, received = k, set()
        received.add(msg.receiver.start)
    if messages:
        out.append((first, len(messages)))
    return out


def send(beliefs: np.ndarray, messages: Sequence[Message], runs: Sequence[tuple[int, int]] | None) -> bool:
    """Send every message into ``beliefs`` (in place), wave by wave (``runs``: ``waves``), or one
    by one where ``runs`` is None (nothing split: the same bits, fewer calls); False, with
    ``beliefs`` part-way, when a message has an empty cell (a separator value whose probability
    underflows: the caller redoes the step in log space)."""
    if runs is None:
        return _one_by_one(beliefs, messages)
    sent: list[np.ndarray] = []
    for first, end in runs:
        wave = messages[first:end]
        for msg, m in zip(wave, _sums(beliefs, wave)):
            if msg.back >= 0:  # constant over the summed cells: divide after summing
                m = m / sent[msg.back]
            if not m.min() > 0:
                return False
            sent.append(m)
        _products(beliefs, wave, sent[first:end])
    return True


def _one_by_one(beliefs: np.ndarray, messages: Sequence[Message]) -> bool:
    """``send`` in the schedule's order, the empty cells looked for once at the end: a message after
    an empty one divides by zero (NaN and infinities, not warned about), and the step is redone."""
    sent: list[np.ndarray] = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for msg in messages:
            m = msg.summed(beliefs[msg.sender])
            if msg.back >= 0:
                m = m / sent[msg.back]
            sent.append(m)
            beliefs[msg.receiver] *= m[msg.to_receiver]
    return not sent or bool(np.concatenate(sent).min() > 0)


def _sums(beliefs: np.ndarray, wave: Sequence[Message]) -> list[np.ndarray]:
    """Each message's sum of its sender's cells: the upper halves of the split ones on the helper,
    the rest here."""
    split = [msg.summed.halves is not None for msg in wave]
    if not any(split):
        return [msg.summed(beliefs[msg.sender]) for msg in wave]

    def uppers() -> list[np.ndarray]:
        return [msg.summed.upper(beliefs[msg.sender]) for msg, cut in zip(wave, split) if cut]

    upper, lower = halves.both(uppers, lambda: [msg.summed.lower(beliefs[msg.sender]) for msg in wave])
    tops = iter(upper)
    return [np.concatenate([next(tops), low]) if cut else low for cut, low in zip(split, lower)]


def _products(beliefs: np.ndarray, wave: Sequence[Message], sums: Sequence[np.ndarray]) -> None:
    """Multiply each message into its receiver, in the schedule's order: a run of split messages
    in one hand-over (each thread its halves of them, in order), the others here."""
    k = 0
    while k < len(wave):
        if not wave[k].middle:
            beliefs[wave[k].receiver] *= sums[k][wave[k].to_receiver]
            k += 1
            continue
        end = k
        while end < len(wave) and wave[end].middle:
            end += 1
        run = list(zip(wave[k:end], sums[k:end]))
        halves.both(partial(_multiply_part, beliefs, run, True), partial(_multiply_part, beliefs, run, False))
        k = end


def _multiply_part(beliefs: np.ndarray, run: Sequence[tuple[Message, np.ndarray]], first: bool) -> None:
    """The first (or second) half of each receiver's cells multiplied by its message, in order."""
    for msg, m in run:
        i, j = (0, msg.middle) if first else (msg.middle, msg.to_receiver.size)
        start = msg.receiver.start
        beliefs[start + i : start + j] *= m[msg.to_receiver[i:j]]


def node_cut(node_offsets: np.ndarray) -> int | None:
    """The node boundary nearest half the cells (None for a single node)."""
    if len(node_offsets) < 3:
        return None
    inner = node_offsets[1:-1]
    return 1 + int(np.argmin(np.abs(inner - node_offsets[-1] / 2)))
