"""Atomic file replacement: readers see the old file or the complete new one, never a mix.

``write_folder`` does the same for a folder of files: built beside its destination, then swapped in.

``Staged`` holds several files written under temporary names beside their destinations until
the caller commits: ``publish`` renames them all into place, ``discard`` removes them. A release
stages its CSV, model and report, marks its ledger complete, and only then publishes.

Every file is created readable and writable by its owner only (0600, ``tempfile``'s mode): an
output is the operator's until they decide to share it. A file made to be handed out is written
with ``mode=SHAREABLE`` (0644, less what the umask removes).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")
#: The end of a staged file's name (a folder built by ``write_folder`` ends ``.new`` or ``.old``).
STAGED_SUFFIX = ".tmp"
#: The mode of a file made to be handed out (the privacy report), before the umask.
SHAREABLE = 0o644


def staged_name(path: str | Path) -> Path:
    """A name as long as any a file staged for ``path`` gets (``.NAME.`` plus ``tempfile``'s eight
    random characters plus ``STAGED_SUFFIX``), beside it: an output's name must leave room for it."""
    path = Path(path)
    return path.parent / f".{path.name}.{'x' * 8}{STAGED_SUFFIX}"


def stage_file(path: str | Path, write: Callable, binary: bool = False, mode: int | None = None) -> Path:
    """Call ``write`` on a new temporary file beside ``path`` and fsync it; returns its name. The file
    is 0600, or ``mode`` less the umask. On any failure the temporary file is removed and the error
    re-raised."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=STAGED_SUFFIX, dir=path.parent)
    try:
        if mode is not None:
            os.fchmod(fd, mode & ~_umask())
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        _unlink(tmp)
        raise
    return Path(tmp)


def _umask() -> int:
    """The process's umask (read by setting a strict one for an instant)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _publish(tmp: Path, path: Path) -> None:
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _unlink(tmp: str | Path) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


def write_atomic(path: str | Path, write: Callable, binary: bool = False, mode: int | None = None) -> None:
    """Call ``write`` on a temporary file beside ``path``, fsync it, rename it over ``path`` and
    fsync the folder (``binary``: ``write`` gets a binary file; ``mode``: see ``stage_file``). On
    any failure the temporary file is removed and ``path`` is untouched."""
    tmp = stage_file(path, write, binary, mode)
    try:
        _publish(tmp, Path(path))
    except BaseException:
        _unlink(tmp)
        raise


class Staged:
    """Files written in full under temporary names, published together or not at all."""

    def __init__(self) -> None:
        self.files: list[tuple[Path, Path]] = []

    def add(self, path: str | Path, write: Callable, binary: bool = False, mode: int | None = None) -> None:
        """Stage what ``write`` writes under a temporary name beside ``path`` (``stage_file``, which
        also takes ``mode``), to be published at ``path``."""
        self.files.append((stage_file(path, write, binary, mode), Path(path)))

    def publish(self) -> None:
        """Rename every staged file over its destination, in the order staged, fsyncing each folder; the
        set is then empty."""
        for tmp, path in self.files:
            _publish(tmp, path)
        self.files = []

    def discard(self) -> None:
        """Remove every staged file, leaving the destinations untouched; the set is then empty."""
        for tmp, _ in self.files:
            _unlink(tmp)
        self.files = []


def write_folder(out: Path, build: Callable[[Path], T]) -> T:
    """Call ``build`` on a new private folder (0700) beside ``out``, then put it in ``out``'s place
    (an existing ``out`` is moved aside first and removed after); ``build``'s result. On any failure
    nothing new is left behind and an existing ``out`` is as it was."""
    parent = out.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".new", dir=parent))
    try:
        result = build(new)
        if not out.exists():
            os.rename(new, out)
            return result
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=parent))
        os.rename(out, old / out.name)
        try:
            os.rename(new, out)
        except BaseException:
            os.rename(old / out.name, out)
            raise
        shutil.rmtree(old, ignore_errors=True)
        return result
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
