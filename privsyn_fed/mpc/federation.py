"""The federation file: who takes part in an MPC run, where each member listens, and which CA
vouches for them.

```json
{"federation": "adult-2026-05",
 "ca": "ca.pem",
 "schema_sha256": "9f2c...",
 "members": [
   {"role": "party-0", "organisation": "Hospital A", "host": "10.0.0.1", "port": 7100},
   {"role": "party-1", "organisation": "Hospital B", "host": "10.0.0.2", "port": 7100},
   {"role": "party-2", "organisation": "Registry C", "host": "10.0.0.3", "port": 7100},
   {"role": "dealer", "organisation": "Trust D", "host": "10.0.0.9", "port": 7100, "sha256": "..."}]}
```

A member's rank is its place in ``members``: the silo parties ``party-0`` .. ``party-(n-1)`` in
that order (party 0 coordinates), then the ``dealer`` (rank n). ``ca`` is the federation CA's
certificate, as a path (relative to the file) or as the PEM text itself. ``schema_sha256``
(optional) is the SHA-256 of the public schema every party must load (the fingerprint ``synth``
compares; ``aggregator.schema_fingerprint``). ``sha256`` (optional) pins a member's certificate
(SHA-256 of its DER form): any other certificate for that role is refused. Every member gets the
same file; a mistake in it is an ``InputError`` naming the file and the field.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common import InputError, parse_json
from .certs import SITE_NAME, party_role

#: Fields of the file and of each member; anything else is refused (a typo would otherwise be ignored).
FIELDS = {"federation", "ca", "schema_sha256", "members", "sites"}
MEMBER_FIELDS = {"role", "organisation", "host", "port", "sha256"}
SITES_FIELDS = {"port", "members"}
SITE_FIELDS = {"name", "organisation", "sha256"}
HEX64 = re.compile(r"[0-9a-fA-F]{64}")
PEM_CERT = "-----BEGIN CERTIFICATE-----"


@dataclass(frozen=True)
class Member:
    """One process of the run: its rank, role, organisation and where it listens."""

    rank: int
    role: str
    organisation: str
    host: str
    port: int
    sha256: str | None = None

    @property
    def address(self) -> str:
        """``host:port`` (``[host]:port`` for an IPv6 address)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class SiteMember:
    """A site of a federation of sites and compute servers: it connects outward to party 0."""

    name: str
    organisation: str
    sha256: str | None = None


@dataclass(frozen=True)
class Sites:
    """The sites of a federation and the port on party 0's host where they connect."""

    port: int
    members: tuple[SiteMember, ...]

    @property
    def names(self) -> list[str]:
        """The sites' names, in the file's order."""
        return [s.name for s in self.members]


@dataclass(frozen=True)
class Federation:
    """A loaded, checked federation file (``load``). With ``sites`` the parties are compute servers
    that hold no silo, and the sites connect to party 0 (``mpc.sites``)."""

    name: str
    ca_pem: bytes
    members: tuple[Member, ...]
    schema_sha256: str | None = None
    source: str = "the federation file"
    sites: Sites | None = None

    @property
    def parties(self) -> int:
        """``n``, the silo parties; the dealer is rank ``n``."""
        return len(self.members) - 1

    @property
    def dealer(self) -> Member:
        """The dealer, the last member."""
        return self.members[-1]

    def role(self, rank: int) -> str:
        """The role of ``rank``."""
        return self.members[rank].role

    def rank_of(self, role: str) -> int | None:
        """The rank of ``role``, or None if no member has it."""
        return next((m.rank for m in self.members if m.role == role), None)

    def who(self, rank: int) -> str:
        """How messages name ``rank``: ``party 2`` or ``the dealer``."""
        return "the dealer" if rank == self.parties else f"party {rank}"

    @property
    def loopback(self) -> bool:
        """Whether every member listens on this machine's loopback interface."""
        return all(is_loopback(m.host) for m in self.members)

    def check_schema(self, fingerprint: str, schema_source: str) -> None:
        """``InputError`` if the file names a schema and ``fingerprint`` (of ``schema_source``) is another's."""
        if self.schema_sha256 and self.schema_sha256 != fingerprint:
            raise InputError(
                f"{schema_source}: not the schema of federation {self.name!r} ({self.source} has "
                f"schema_sha256 {self.schema_sha256[:12]}..., this schema is {fingerprint[:12]}...); "
                "every party must load the agreed public schema"
            )

    def to_dict(self, ca: str | None = None) -> dict[str, Any]:
        """The file's content; ``ca`` replaces the CA's PEM text (a path relative to the file)."""
        out: dict[str, Any] = {"federation": self.name, "ca": ca or self.ca_pem.decode("ascii")}
        if self.schema_sha256:
            out["schema_sha256"] = self.schema_sha256
        out["members"] = [
            {"role": m.role, "organisation": m.organisation, "host": m.host, "port": m.port}
            | ({"sha256": m.sha256} if m.sha256 else {})
            for m in self.members
        ]
        if self.sites is not None:
            out["sites"] = {
                "port": self.sites.port,
                "members": [
                    {"name": s.name, "organisation": s.organisation} | ({"sha256": s.sha256} if s.sha256 else {})
                    for s in self.sites.members
                ],
            }
        return out


def schema_fingerprint(schema) -> str:
    """SHA-256 of the schema's canonical JSON; the parties compare it with party 0's."""
    return hashlib.sha256(json.dumps(schema.to_dict(), sort_keys=True).encode()).hexdigest()


def federation_digest(federation: Federation) -> str:
    """SHA-256 of the federation's canonical content (the CA by its fingerprint): members whose
    files differ refuse each other."""
    from .certs import fingerprint

    content = federation.to_dict(ca=fingerprint(federation.ca_pem))
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``) or ``localhost``."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load(path: str | Path) -> Federation:
    """Read and check a federation file; ``InputError`` naming the file and the field at fault."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--federation {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    return parse(parse_json(text, path, "federation file", parse_constant=_no_constant), path)


def parse(data: Any, path: Path) -> Federation:
    """Check the content of a federation file (``load``); ``path`` names it and anchors a relative ``ca``."""

    def bad(field: str, problem: str) -> InputError:
        return InputError(f"{path}: {field}: {problem}")

    if not isinstance(data, dict):
        raise InputError(f"{path}: not a federation file (a JSON object with federation, ca and members)")
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise bad(unknown[0], f"unknown field (a federation file has {', '.join(sorted(FIELDS))})")
    name = data.get("federation")
    if not isinstance(name, str) or not name.strip() or not name.isprintable() or len(name) > 128:
        raise bad("federation", "the federation's name: printable text of 1 to 128 characters")
    ca_pem = _ca(data.get("ca"), path, bad)
    schema_sha256 = data.get("schema_sha256")
    if schema_sha256 is not None and (not isinstance(schema_sha256, str) or not HEX64.fullmatch(schema_sha256)):
        raise bad("schema_sha256", "64 hex digits (the SHA-256 of the schema), or leave it out")
    members_data = data.get("members")
    if not isinstance(members_data, list) or len(members_data) < 3:
        raise bad("members", "a list of at least 2 silo parties (party-0, party-1, ...) and then the dealer")
    n = len(members_data) - 1
    members = []
    seen: dict[tuple[str, int], str] = {}
    for rank, item in enumerate(members_data):
        where = f"members[{rank}]"
        if not isinstance(item, dict):
            raise bad(where, "an object with role, organisation, host and port")
        unknown = sorted(set(item) - MEMBER_FIELDS)
        if unknown:
            raise bad(f"{where}.{unknown[0]}", f"unknown field (a member has {', '.join(sorted(MEMBER_FIELDS))})")
        role = "dealer" if rank == n else party_role(rank)
        if item.get("role") != role:
            raise bad(
                f"{where}.role",
                f"must be {role!r} (the parties party-0 .. party-{n - 1} in order, then the dealer), "
                f"not {item.get('role')!r}",
            )
        organisation = item.get("organisation")
        if not isinstance(organisation, str) or not organisation.strip() or len(organisation) > 64:
            raise bad(
                f"{where}.organisation", "the member's organisation (as its certificate names it), 1 to 64 characters"
            )
        host = item.get("host")
        if not isinstance(host, str) or not host or any(c.isspace() for c in host) or len(host) > 253:
            raise bad(f"{where}.host", "the address or name this member listens on")
        port = item.get("port")
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise bad(f"{where}.port", f"a port number in 1..65535, not {port!r}")
        if (host.lower(), port) in seen:
            raise bad(f"{where}.port", f"{host}:{port} is also {seen[(host.lower(), port)]}'s address")
        seen[(host.lower(), port)] = role
        pin = item.get("sha256")
        if pin is not None and (not isinstance(pin, str) or not HEX64.fullmatch(pin.replace(":", ""))):
            raise bad(f"{where}.sha256", "the SHA-256 of the member's certificate (64 hex digits), or leave it out")
        members.append(
            Member(rank, role, organisation, host.strip("[]"), port, pin.replace(":", "").lower() if pin else None)
        )
    sites = _sites(data["sites"], members[0], bad) if "sites" in data else None
    return Federation(name, ca_pem, tuple(members), schema_sha256.lower() if schema_sha256 else None, str(path), sites)


def _sites(data: Any, coordinator: Member, bad) -> Sites:
    """The ``sites`` field: ``{"port": P, "members": [{"name", "organisation", "sha256"?}, ...]}``."""
    if not isinstance(data, dict) or set(data) - SITES_FIELDS:
        raise bad("sites", "an object with port (where party 0 takes the sites' connections) and members")
    port = data.get("port")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535 or port == coordinator.port:
        raise bad("sites.port", f"a port number in 1..65535 other than party-0's {coordinator.port}, not {port!r}")
    items = data.get("members")
    if not isinstance(items, list) or not items:
        raise bad("sites.members", "a list of at least one site ({name, organisation})")
    out, names = [], set()
    for i, item in enumerate(items):
        where = f"sites.members[{i}]"
        if not isinstance(item, dict) or set(item) - SITE_FIELDS:
            raise bad(where, f"an object with {', '.join(sorted(SITE_FIELDS))}")
        name = item.get("name")
        if not isinstance(name, str) or not SITE_NAME.fullmatch(name):
            raise bad(f"{where}.name", "1 to 40 lower-case letters, digits and '-' (its certificate names site-<name>)")
        if name in names:
            raise bad(f"{where}.name", f"{name!r} is listed twice")
        names.add(name)
        organisation = item.get("organisation")
        if not isinstance(organisation, str) or not organisation.strip() or len(organisation) > 64:
            raise bad(
                f"{where}.organisation", "the site's organisation (as its certificate names it), 1 to 64 characters"
            )
        pin = item.get("sha256")
        if pin is not None and (not isinstance(pin, str) or not HEX64.fullmatch(pin.replace(":", ""))):
            raise bad(f"{where}.sha256", "the SHA-256 of the site's certificate (64 hex digits), or leave it out")
        out.append(SiteMember(name, organisation, pin.replace(":", "").lower() if pin else None))
    return Sites(port, tuple(out))


def _ca(value: Any, path: Path, bad) -> bytes:
    if not isinstance(value, str) or not value.strip():
        raise bad("ca", "the federation CA's certificate: a path (relative to this file) or its PEM text")
    if value.lstrip().startswith(PEM_CERT):
        pem, where = value.encode("ascii", errors="replace"), "ca"
    else:
        ca_path = path.parent / value
        try:
            pem = ca_path.read_bytes()
        except OSError as exc:
            raise bad("ca", f"cannot read {ca_path} ({exc.strerror or exc})") from None
        where = f"ca ({ca_path})"
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(pem)
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except (ValueError, x509.ExtensionNotFound):
        raise bad(where, "not a PEM CA certificate") from None
    if not is_ca:
        raise bad(where, "a member's certificate, not the federation CA's")
    return pem


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")
