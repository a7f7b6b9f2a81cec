"""Atomic file replacement: readers see the old file or the complete new one, never a mix."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, TextIO


def write_atomic(path: str | Path, write: Callable[[TextIO], None], binary: bool = False) -> None:
    """Call ``write`` on a temporary file beside ``path``, fsync it, rename it over ``path`` and
    fsync the folder (``binary``: ``write`` gets a binary file). On any failure the temporary file is removed and ``path`` is untouched."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
