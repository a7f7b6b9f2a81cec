"""What ``privsyn-fed federation`` reads and checks: members and addresses as the options give
them, the federation's name, the schema's hash, the folder to write, the files it reads, the
federation file as it will load."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..common import InputError, check_name_fits
from .bundle_text import check_organisation

# ---- option values ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """A member as the command line gives it."""

    role: str
    organisation: str
    host: str
    port: int


def parse_address(text: str, where: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[V6ADDR]:PORT``) as ``(host, port)``; ``InputError`` naming ``where``."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host:
        raise InputError(f"{where}: give the address as HOST:PORT, for example 10.0.0.1:7100")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise InputError(f"{where}: write an IPv6 address in brackets, [ADDRESS]:PORT")
    if not host or len(host) > 253 or any(c.isspace() or c in "[]@/" for c in host) or not host.isprintable():
        raise InputError(f"{where}: {host!r} is not a host name or address")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise InputError(f"{where}: the port must be a number in 1..65535, not {port!r}")
    return host, int(port)


def parse_member(text: str, role: str, option: str) -> Spec:
    """``ORGANISATION@HOST:PORT`` of ``init --party``/``--dealer`` as the member ``role``."""
    where = f"{option} {text!r}"
    organisation, sep, address = text.rpartition("@")
    if not sep:
        raise InputError(f"{where}: give ORGANISATION@HOST:PORT, for example 'Hospital A@10.0.0.1:7100'")
    host, port = parse_address(address, where)
    return Spec(role, check_organisation(organisation, where), host, port)


def check_name(name: str) -> str:
    """The federation's name: printable text of 1 to 64 characters (the CA is named after it)."""
    if not name.strip() or len(name) > 64 or not name.isprintable():
        raise InputError(f"--name {name!r}: the federation's name must be printable text of 1 to 64 characters")
    return name


def check_addresses(specs: list[Spec], options: dict[str, str]) -> None:
    """No two members listen on the same address; ``options`` says which option gave each role."""
    seen: dict[tuple[str, int], str] = {}
    for s in specs:
        key = (s.host.lower(), s.port)
        if key in seen:
            raise InputError(
                f"{options[s.role]}: {_address(s.host, s.port)} is also {seen[key]}'s address; every member "
                "listens on an address of its own"
            )
        seen[key] = s.role


def schema_sha256(path: str | None) -> str | None:
    """The schema's fingerprint as the parties compare it (``aggregator.schema_fingerprint``)."""
    if path is None:
        return None
    from ..common import Named, check_input
    from ..schema import Schema

    check_input(Named("--schema", Path(path)), "schema")
    try:
        schema = Schema.load(path)
    except InputError as exc:
        raise InputError(f"--schema {exc}") from None
    if schema.private_draft:
        raise InputError(
            f'--schema {path}: a draft read off private rows (its "_draft" note says so); review it and '
            "delete the note first: every party of the federation will load it"
        )
    from ..mpc import schema_fingerprint

    return schema_fingerprint(schema)


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# ---- files and folders --------------------------------------------------------------------------


def check_target(out: Path, force: bool, own: Callable[[str], bool], inputs: list[tuple[str, Path]]) -> None:
    """``out`` may be written: it does not exist, or (with ``force``) is an empty folder or one that
    holds only entries this command writes (``own``); its folder exists and is writable; no input
    lies inside it."""
    label = f"--out {out}"
    check_name_fits(out, "folder")
    if out.is_symlink():
        raise InputError(f"{label}: is a symbolic link; give the folder itself")
    parent = out.absolute().parent
    if not parent.is_dir():
        raise InputError(f"{label}: the folder {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{label}: the folder {str(parent)!r} is not writable")
    if not out.exists():
        return
    if not out.is_dir():
        raise InputError(f"{label}: exists and is not a folder")
    if not force:
        raise InputError(f"{label}: already exists; choose another folder or pass --force to replace it")
    foreign = sorted(e.name for e in out.iterdir() if not own(e.name))
    if foreign:
        raise InputError(
            f"{label}: holds {foreign[0]!r}, which this command does not write; --force replaces only "
            "what it wrote, so choose another folder"
        )
    inside = out.resolve()
    for option, path in inputs:
        if path.resolve().is_relative_to(inside):
            raise InputError(f"{option} {path}: lies inside --out {out}, which --force would replace")


def read_file(path: Path, what: str, option: str) -> bytes:
    """A file's bytes; ``InputError`` naming the option and the file if it cannot be read or is not a
    regular file (a FIFO or a device is never opened)."""
    from ..common import check_regular

    check_regular(path, option)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"{option} {path}: cannot read the {what} ({exc.strerror or exc})") from None


def checked(content: dict[str, Any], source: str):
    """The federation ``content`` as ``federation.parse`` reads it (the file we write must load)."""
    from ..mpc import parse_federation as parse

    return parse(content, Path(source))
