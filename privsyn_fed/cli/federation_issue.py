"""``privsyn-fed federation issue``: a new certificate and key for one member, signed by the
federation's CA, in a new bundle with the federation file that pins it."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

from ..common import InputError, write_folder
from .bundle_text import check_organisation, lines_text
from .federation_ca import ca_facts
from .federation_init import BUNDLE_FILES, write_bundle
from .federation_inputs import check_target, checked, parse_address, read_file


def load_ca(folder: Path) -> tuple[bytes, bytes]:
    """The CA's certificate and key from ``folder`` (``ca.pem``, ``ca.key``); ``InputError`` when a
    file is missing, the key is readable by others or is not the certificate's, or the CA has expired."""
    import stat

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    if not folder.is_dir():
        raise InputError(f"--ca {folder}: not a folder (give the CA's folder, holding ca.pem and ca.key)")
    cert_path, key_path = folder / "ca.pem", folder / "ca.key"
    cert_pem = read_file(cert_path, "CA's certificate", "--ca")
    key_pem = read_file(key_path, "CA's private key", "--ca")
    mode = stat.S_IMODE(os.stat(key_path).st_mode)
    if mode & 0o077:
        raise InputError(
            f"--ca {key_path}: other users may read or write it (mode {mode:04o}); make it private: "
            f"chmod 600 {key_path}"
        )
    facts = ca_facts(cert_pem, f"--ca {cert_path}")
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise InputError(f"--ca {key_path}: not an unencrypted PEM private key ({exc})") from None
    cert = x509.load_pem_x509_certificate(cert_pem)
    if key.public_key() != cert.public_key():
        raise InputError(f"--ca {key_path}: not the private key of {cert_path}")
    if not facts["valid"]:
        raise InputError(
            f"--ca {cert_path}: the CA expired on {facts['expires']}; make a new federation (`federation init`)"
        )
    return cert_pem, key_pem


def run_issue(args: argparse.Namespace) -> int:
    """``federation issue``: a new certificate and key for ``--role``, in a new bundle at ``--out``; 0."""
    from ..common import Named, check_input, check_regular
    from ..mpc import certs
    from ..mpc import load_federation as load

    try:
        role = certs.check_role_name(args.role)
    except ValueError:
        raise InputError(f"--role {args.role!r}: a role is party-<k> (k = 0, 1, ...) or dealer") from None
    check_input(Named("--federation", Path(args.federation)), "federation file")
    for name in ("ca.pem", "ca.key"):  # every input, before any is read
        check_regular(Path(args.ca) / name, "--ca")
    fed = load(args.federation)
    rank = fed.rank_of(role)
    if rank is None:
        raise InputError(
            f"--role {role}: not a member of federation {fed.name!r} ({args.federation} has party-0 .. "
            f"party-{fed.parties - 1} and the dealer)"
        )
    old = fed.members[rank]
    member = old
    if args.organisation is not None:
        member = replace(
            member, organisation=check_organisation(args.organisation, f"--organisation {args.organisation!r}")
        )
    if args.address is not None:
        host, port = parse_address(args.address, f"--address {args.address!r}")
        member = replace(member, host=host, port=port)
        clash = next(
            (m for m in fed.members if m.rank != rank and (m.host.lower(), m.port) == (host.lower(), port)), None
        )
        if clash is not None:
            raise InputError(f"--address {args.address!r}: is also {clash.role}'s address")
    ca_folder, out = Path(args.ca), Path(args.out)
    check_target(
        out,
        args.force,
        lambda entry: entry in BUNDLE_FILES,
        [("--ca", ca_folder), ("--federation", Path(args.federation))],
    )
    ca = load_ca(ca_folder)
    if certs.fingerprint(ca[0]) != certs.fingerprint(fed.ca_pem):
        raise InputError(
            f"--ca {ca_folder / 'ca.pem'}: not the CA of federation {fed.name!r} ({args.federation} names another CA)"
        )

    cert_pem, key_pem = certs.issue(ca, role, member.organisation, days=args.days)
    pinned = any(m.sha256 for m in fed.members)
    new_pin = certs.fingerprint(cert_pem)
    member = replace(member, sha256=new_pin if pinned else None)
    members = tuple(member if m.rank == rank else m for m in fed.members)
    new_fed = checked(replace(fed, members=members).to_dict(), str(out / "federation.json"))
    changed = new_fed.to_dict() != fed.to_dict()

    write_folder(out, lambda folder: write_bundle(folder, new_fed.members[rank], new_fed, cert_pem, key_pem))
    who = certs.identity(cert_pem)
    lines = [
        f"issued {role} of federation {fed.name!r} ({member.organisation} at {member.address}): certificate valid "
        f"until {who.not_after:%Y-%m-%d %H:%M} UTC, sha256 {who.sha256}",
        f"wrote {out}/ (mode 0700): key.pem (0600), cert.pem, federation.json, README.txt. Send it to "
        f"{member.organisation} over a secure channel and delete it here.",
    ]
    if pinned:
        lines.append(
            f"federation.json now pins the new certificate; the old pin "
            f"{old.sha256 or '(none)'} is gone. Send {out / 'federation.json'} to EVERY member (it replaces "
            "theirs; members whose files differ refuse each other) and use it for the next `federation issue`. "
            "Once every member holds it, the old certificate and key are of no use to anyone."
        )
    elif changed:
        lines.append(
            f"federation.json changed (organisation or address): send {out / 'federation.json'} to EVERY member. "
            "No certificate is pinned, so the old certificate stays valid until it expires: to revoke it, "
            "make a new CA for everyone (`federation init`)."
        )
    else:
        lines.append(
            "The federation file is unchanged (no certificate is pinned): only this member needs the new "
            "bundle. The old certificate stays valid until it expires; to revoke it, make a new CA for "
            "everyone (`federation init`)."
        )
    print(lines_text(lines), end="")
    return 0
