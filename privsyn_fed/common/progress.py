"""Progress and notes of long runs.

Every update and note of a ``Progress`` goes to the ``logging`` logger ``privsyn_fed.progress``
(INFO; a warning at WARNING). A ``Progress`` may also show them on a stream (stderr by default:
on a terminal a one-line bar of the share of the privacy budget spent, the natural measure of how
far an AIM-family run has got; elsewhere one line per update) and hand each update to a callback
``callback(fraction, message)``. The library writes nothing to stdout. Other parts log their notes
on loggers named ``privsyn_fed.*`` too; ``notes_on_stderr`` is how the command line shows their
warnings.
"""

from __future__ import annotations

import logging
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator, TextIO

from .escaping import terminal_text

#: The logger of every update and note of a run's progress.
log = logging.getLogger("privsyn_fed.progress")

#: ``callback(fraction, message)``: the share of the budget spent so far and what was done.
ProgressCallback = Callable[[float, str], None]


class Progress:
    """Progress of one run: logged (``log``), passed to ``callback`` when given, and shown on
    ``stream`` (stderr by default) when ``enabled``: a bar redrawn in place on a terminal, one line
    per update elsewhere."""

    def __init__(
        self,
        label: str,
        stream: TextIO | None = None,
        enabled: bool = True,
        callback: ProgressCallback | None = None,
    ):
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.callback = callback
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()
        self._open_line = False

    def _logged(self, level: int, message: str) -> None:
        log.log(level, "%s%s", f"{self.label}: " if self.label else "", message)

    def update(self, fraction: float, message: str) -> None:
        """Report ``fraction`` of the budget spent, ``message`` and the seconds elapsed: on a terminal
        the bar is redrawn in place (``fraction`` clamped to [0, 1], ``message`` cut to 60
        characters), elsewhere one line is written."""
        elapsed = time.monotonic() - self.start
        self._logged(logging.INFO, f"{fraction:.1%} of budget, {elapsed:.1f}s: {message}")
        if self.callback is not None:
            self.callback(float(fraction), message)
        if not self.enabled:
            return
        label, message = terminal_text(self.label), terminal_text(message)  # names reach no terminal raw
        if self.tty:
            width = 24
            filled = int(round(max(0.0, min(1.0, fraction)) * width))
            bar = "#" * filled + "-" * (width - filled)
            self.stream.write(f"\r[{label}] [{bar}] {fraction:6.1%} {elapsed:6.1f}s  {message[:60]:<60}")
            self._open_line = True
        else:
            self.stream.write(f"[{label}] {fraction:6.1%} of budget, {elapsed:.1f}s: {message}\n")
        self.stream.flush()

    def log(self, message: str, level: int = logging.INFO) -> None:
        """Log ``message`` at ``level``, and write it on a line of its own (ending an open bar line first)."""
        self._logged(level, message)
        if not self.enabled:
            return
        self._end_line()
        self.stream.write(f"[{terminal_text(self.label)}] {terminal_text(message)}\n")
        self.stream.flush()

    def warn(self, message: str) -> None:
        """``log`` at WARNING: a fact the caller must not miss (a release without a guarantee)."""
        self.log(message, logging.WARNING)

    def close(self) -> None:
        """End the bar's line, if one is open."""
        self._end_line()

    def _end_line(self) -> None:
        if self._open_line:
            self.stream.write("\n")
            self._open_line = False


class Silent(Progress):
    """A ``Progress`` that shows nothing (it still logs)."""

    def __init__(self, label: str = ""):
        super().__init__(label, enabled=False)


class _StderrNotes(logging.Handler):
    """Warnings of the ``privsyn_fed`` loggers on the stderr of the moment, one line each, each
    message once (a silo's note comes when its header is checked and again when it is read); the
    progress logger's are left out (a command shows its progress itself)."""

    def __init__(self, prefix: str):
        super().__init__(logging.WARNING)
        self.prefix = prefix
        self.shown: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name != log.name and bool(super().filter(record))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = terminal_text(" ".join(record.getMessage().split()))
            if line in self.shown:
                return
            self.shown.add(line)
            sys.stderr.write(f"{self.prefix}{line}\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


@contextmanager
def notes_on_stderr(prefix: str = "privsyn-fed: note: ") -> Iterator[None]:
    """For the block: each warning logged under ``privsyn_fed`` is one line on stderr, after ``prefix``,
    and no record reaches the root logger (which a library such as CrypTen may have configured)."""
    logger = logging.getLogger("privsyn_fed")
    handler, propagate = _StderrNotes(prefix), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
