"""Stopping a run on SIGINT (Ctrl-C) or SIGTERM at a safe point.

Raising ``KeyboardInterrupt`` at an arbitrary bytecode is not safe here: it can fire inside a
JAX or OpenDP finaliser (where it is swallowed and the run goes on to release its CSV) or while
native code runs on other threads. So ``deferred_signals`` installs handlers that only record
the signal, and the run calls ``checkpoint()`` at points where stopping is clean: before every
privacy charge, between model-fit blocks, between silos, between output chunks and just before
the release is committed. ``checkpoint`` raises ``Interrupted`` (a ``BaseException``, like
``KeyboardInterrupt``, so ``except Exception`` blocks do not swallow it); the run then marks its
ledger ``failed`` with what it spent, settles its budget reservation at that spend and writes no
CSV. Without ``deferred_signals`` (library use) ``checkpoint`` never raises.

Commands that spend no budget (``evaluate``, ``partition``, the MPC parties ...) use
``deferred_signals(immediate=True)``: the signal raises ``Interrupted`` at once (SIGTERM then
unwinds like Ctrl-C, so temporary files are removed instead of left behind).
"""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: int | None = None


class Interrupted(BaseException):
    """The run received SIGINT or SIGTERM and stopped at a safe point."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """The conventional exit status of a process stopped by the signal: ``128 + signum``."""
        return 128 + self.signum


def received() -> int | None:
    """The signal received since handlers were installed, if any."""
    return _received


def checkpoint() -> None:
    """Raise ``Interrupted`` if a signal was received (a safe point of the run)."""
    if _received is not None:
        raise Interrupted(_received)


def _record(signum, frame) -> None:
    global _received
    first = _received is None
    _received = _received or signum
    if first:  # os.write: the main thread may be inside a buffered write to stderr right now
        os.write(
            2,
            f"\nprivsyn-fed: {signal.Signals(signum).name} received: stopping at the next safe "
            "point (no CSV will be written)\n".encode(),
        )


def _raise(signum, frame) -> None:
    raise Interrupted(signum)


@contextmanager
def deferred_signals(immediate: bool = False):
    """Record SIGINT and SIGTERM instead of raising (``immediate``: raise ``Interrupted`` at
    once); restore the previous handlers on exit."""
    global _received
    _received = None
    previous = {s: signal.signal(s, _raise if immediate else _record) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _received = None
