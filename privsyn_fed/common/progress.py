"""Progress display for long runs, on stderr.

On a terminal a one-line bar shows the share of the privacy budget spent (the natural measure of
how far an AIM-family run has got); elsewhere each update is its own log line.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Progress of one run on ``stream`` (stderr by default): a bar redrawn in place on a terminal, one
    line per update elsewhere, nothing at all when not ``enabled``."""

    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool = True):
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()
        self._open_line = False

    def update(self, fraction: float, message: str) -> None:
        """Report ``fraction`` of the budget spent, ``message`` and the seconds elapsed: on a terminal
        the bar is redrawn in place (``fraction`` clamped to [0, 1], ``message`` cut to 60
        characters), elsewhere one line is written."""
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        if self.tty:
            width = 24
            filled = int(round(max(0.0, min(1.0, fraction)) * width))
            bar = "#" * filled + "-" * (width - filled)
            self.stream.write(f"\r[{self.label}] [{bar}] {fraction:6.1%} {elapsed:6.1f}s  {message[:60]:<60}")
            self._open_line = True
        else:
            self.stream.write(f"[{self.label}] {fraction:6.1%} of budget, {elapsed:.1f}s: {message}\n")
        self.stream.flush()

    def log(self, message: str) -> None:
        """Write ``message`` on a line of its own (ending an open bar line first)."""
        if not self.enabled:
            return
        self._end_line()
        self.stream.write(f"[{self.label}] {message}\n")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line, if one is open."""
        self._end_line()

    def _end_line(self) -> None:
        if self._open_line:
            self.stream.write("\n")
            self._open_line = False


class Silent(Progress):
    """A ``Progress`` that writes nothing."""

    def __init__(self):
        super().__init__("", enabled=False)
