"""The files a command reads and writes, checked before anything is read.

Two names denote the same file when their resolved paths are equal or when they share a device
and inode (so symbolic links, hard links and ``..`` are all caught). Every command declares its
inputs and its outputs; ``check_files`` refuses:
  * an output that is also an input or another output;
  * an output that exists without ``--force``, is a folder or not a regular file, or whose folder
    is missing or not writable;
  * an input that does not exist, cannot be read or is not a regular file (after following
    links): a FIFO, a socket or a device could block the command or feed it bytes forever, so
    it is refused by its metadata alone, never opened.
``check_distinct`` refuses one silo given twice (by identity), and ``check_identical_contents``
finds silos whose bytes are identical (a SHA-256 digest computed on this machine and never sent
anywhere): their records would count twice while the ledger charges them once.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from .errors import InputError
from .fileio import staged_name
from .interrupt import checkpoint


@dataclass(frozen=True)
class Named:
    """A path as the user gave it, with the option that named it (``--out``, ``--silo`` ...)."""

    option: str
    path: Path

    @property
    def label(self) -> str:
        """The option and the path as one string (``--silo a.csv``), for messages."""
        return f"{self.option} {self.path}"


def _identity(path: Path) -> tuple[str, tuple[int, int] | None]:
    """``(resolved path, (device, inode) or None when it does not exist)``."""
    resolved = str(path.resolve())
    try:
        st = os.stat(path)
    except OSError:
        return resolved, None
    return resolved, (st.st_dev, st.st_ino)


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name the same file: equal resolved paths, or the same device and inode."""
    ra, ia = _identity(a)
    rb, ib = _identity(b)
    return ra == rb or (ia is not None and ia == ib)


#: What a file that is not a regular one is, by the test of its mode.
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
)


def special_kind(path: Path) -> str | None:
    """What ``path`` is (``"a FIFO"``, ``"a character device"`` ...) when it exists and, after
    following links, is not a regular file; None for a regular file or one that does not exist.
    Only the file's metadata is looked at: a FIFO or a device is never opened."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def not_regular(path: Path) -> str | None:
    """``"is a FIFO"`` or ``"is a link to a character device (/dev/zero)"`` for a special file
    (``special_kind``), None for a regular file or a missing one: the start of a message."""
    kind = special_kind(path)
    if kind is None:
        return None
    if os.path.islink(path):
        return f"is a link to {kind} ({os.path.realpath(path)})"
    return f"is {kind}"


def check_regular(path: Path, where: str = "") -> None:
    """Refuse an existing ``path`` that is not a regular file (``not_regular``) before it is opened;
    ``where`` (an option, ``--silo``) ends the message."""
    problem = not_regular(path)
    if problem is not None:
        raise InputError(f"{path}: {problem}, not a regular file" + (f" ({where})" if where else ""))


def check_input(item: Named, what: str = "file") -> None:
    """An input file: it exists, is a regular file (not a folder, a FIFO, a socket or a device,
    also through a link) and is readable (``what`` names it in messages)."""
    p = item.path
    if not p.exists():
        raise InputError(f"{p}: {what} not found ({item.option})")
    if p.is_dir():
        raise InputError(f"{p}: is a folder, not a {what} ({item.option})")
    check_regular(p, item.option)
    if not os.access(p, os.R_OK):
        raise InputError(f"{p}: cannot be read (permission denied; {item.option})")


def check_name_fits(path: Path, what: str) -> None:
    """Refuse a name too long for its file system: an output is written under a longer temporary
    name beside it first (``fileio.staged_name``), so that name must fit as well. The file system
    itself answers, by looking the temporary name up."""
    try:
        os.lstat(staged_name(path))
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise InputError(
                f"{path}: the name is too long for the file system (the {what} is first written under a "
                "longer temporary name beside it); choose a shorter name"
            ) from None


def check_output(item: Named, what: str, force: bool, force_option: str = "--force") -> None:
    """An output file: its folder exists and is writable; it is not a folder or a special file;
    an existing file is replaced only with ``force``; its name leaves room for the name it is
    staged under (``check_name_fits``)."""
    p = item.path
    check_name_fits(p, what)
    folder = p.parent
    if not folder.is_dir():
        raise InputError(f"{p}: the folder {str(folder)!r} for the {what} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{p}: the folder {str(folder)!r} for the {what} is not writable")
    if p.is_dir():
        raise InputError(f"{p}: is a folder; give a file name for the {what}")
    if p.exists() or p.is_symlink():
        if p.exists() and not p.is_file():
            raise InputError(f"{p}: is not a regular file; give another name for the {what}")
        if not force:
            raise InputError(f"{p}: already exists; choose another name or pass {force_option} to replace it")


def check_store(item: Named) -> None:
    """A file that is read and updated in place (the budget store): it must be writable."""
    p = item.path
    try:
        os.lstat(p)
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            shown = f"{str(p)[:60]}... ({len(str(p))} characters)"
            raise InputError(f"{shown}: the name is too long for the file system; choose a shorter one") from None
    if p.is_dir():
        raise InputError(f"{p}: is a folder, not a budget store file")
    check_regular(p, item.option)
    folder = p.parent
    if not folder.is_dir():
        raise InputError(f"{p}: the folder {str(folder)!r} does not exist")
    # SQLite writes a journal beside the file, so the folder must be writable as well as the file.
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{p}: the folder {str(folder)!r} of the budget store is not writable")
    if p.exists() and not os.access(p, os.R_OK | os.W_OK):
        raise InputError(f"{p}: the budget store is not writable (permission denied)")


def check_distinct(items: Sequence[Named]) -> None:
    """No two of ``items`` are the same file."""
    for i, a in enumerate(items):
        for b in items[i + 1 :]:
            if same_file(a.path, b.path):
                if a.option == b.option:
                    raise InputError(f"{a.path} and {b.path} are the same file, given twice as {a.option}")
                raise InputError(f"{b.label} is the same file as {a.label}; give them different files")


def check_files(
    inputs: Iterable[Named], outputs: Iterable[tuple[Named, str]], *, force: bool, stores: Iterable[Named] = ()
) -> None:
    """Every check on a command's files that needs no file content (see the module docstring).

    ``outputs`` pairs each output with a description (``"synthetic CSV"``); ``stores`` are files
    updated in place. An output or store never equals another output, store or input.
    """
    inputs, outputs, stores = list(inputs), list(outputs), list(stores)
    for item in inputs:
        check_input(item)
    for item, what in outputs:
        check_output(item, what, force)
    for item in stores:
        check_store(item)
    written = [item for item, _ in outputs] + stores
    for i, w in enumerate(written):
        for other in written[i + 1 :] + inputs:
            if same_file(w.path, other.path):
                raise InputError(
                    f"{w.label} is the same file as {other.label}; an output must not "
                    "replace an input or another output"
                )


def file_digest(path: Path) -> str:
    """SHA-256 of the file's bytes. Private: compared on this machine, never released. A safe point
    (``checkpoint``) after every mebibyte: SIGINT or SIGTERM stops the digest of a large file."""
    check_regular(path)
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
            checkpoint()
    return h.hexdigest()


def check_identical_contents(silos: Sequence[Named], allow: bool) -> None:
    """Refuse two silo files with identical bytes (unless ``allow``): their records would be
    counted twice while the ledger charges for one."""
    if allow or len(silos) < 2:
        return
    seen: dict[str, Named] = {}
    for item in silos:
        try:
            digest = file_digest(item.path)
        except OSError as exc:
            raise InputError(f"{item.path}: cannot read ({exc.strerror or exc})") from None
        if digest in seen:
            raise InputError(
                f"{item.path} and {seen[digest].path} have identical contents: every record would "
                "count twice while the ledger charges once; give each silo once, or pass "
                "--allow-identical-silos if they really are different people's rows"
            )
        seen[digest] = item
