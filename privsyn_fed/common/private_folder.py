"""Private temporary folders that a dead process does not leave behind for long.

A folder holds a lock file that its owner keeps locked while it lives (``fcntl.flock``: the kernel
releases it when the process ends, however it ends, SIGKILL included). ``private_folder`` first
removes every folder of its kind in the temporary directory whose lock nobody holds, which only
a process that died without cleaning up leaves: a DuckDB spill folder can hold tens of GB. The
lock file is locked before it takes its name, so a folder being made is never taken for one left
behind; a folder without it (being made, or someone else's) and another user's are left alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass

try:
    import fcntl
except ImportError:  # no flock: folders are made, never swept
    fcntl = None

#: The lock file's name inside a folder.
LOCK = ".owner.lock"


@dataclass
class PrivateFolder:
    """A folder and the descriptor of its held lock."""

    path: str
    lock_fd: int

    def remove(self) -> None:
        """Remove the folder and release its lock."""
        shutil.rmtree(self.path, ignore_errors=True)
        try:
            os.close(self.lock_fd)
        except OSError:
            pass


def private_folder(prefix: str) -> PrivateFolder:
    """A new folder ``prefix*`` in the temporary directory, locked by this process, after removing
    those of the same prefix whose owners are gone (``sweep``)."""
    sweep(prefix)
    path = tempfile.mkdtemp(prefix=prefix)
    fd, staged = tempfile.mkstemp(dir=path, prefix=".lock-")
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(staged, os.path.join(path, LOCK))
    return PrivateFolder(path, fd)


def sweep(prefix: str) -> list[str]:
    """Remove every folder ``prefix*`` of this user in the temporary directory whose lock is free;
    the paths removed."""
    if fcntl is None:
        return []
    removed = []
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return []
    for entry in entries:
        try:
            if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            fd = os.open(os.path.join(entry.path, LOCK), os.O_RDONLY)
        except OSError:  # gone meanwhile, or no lock file: not ours to judge
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its owner lives
            os.close(fd)
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        os.close(fd)
        removed.append(entry.path)
    return removed
