"""Progress display for long runs, on stderr.

On a terminal a one-line bar shows the share of the privacy budget spent (the natural measure of
how far an AIM-family run has got); elsewhere each update is its own log line.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool = True):
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()
        self._open_line = False

    def update(self, fraction: float, message: str) -> None:
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
        if not self.enabled:
            return
        self._end_line()
        self.stream.write(f"[{self.label}] {message}\n")
        self.stream.flush()

    def close(self) -> None:
        self._end_line()

    def _end_line(self) -> None:
        if self._open_line:
            self.stream.write("\n")
            self._open_line = False


class Silent(Progress):
    def __init__(self):
        super().__init__("", enabled=False)
