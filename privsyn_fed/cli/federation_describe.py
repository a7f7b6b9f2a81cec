"""``privsyn-fed federation describe`` and ``show``: the federation file for certificates issued by an
existing CA (no private key involved), and what a federation file says."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..common import InputError
from .bundle_text import federation_text
from .federation_ca import ca_facts
from .federation_inputs import (
    Spec,
    check_addresses,
    check_name,
    checked,
    parse_address,
    read_file,
    schema_sha256,
)

# ---- describe -----------------------------------------------------------------------------------


def run_describe(args: argparse.Namespace) -> int:
    """``federation describe``: the federation file for certificates of an existing CA; 0."""
    from ..common import Named, check_files, write_atomic
    from ..mpc import certs

    name = check_name(args.name)
    ca_path, out = Path(args.ca_cert), Path(args.out)
    given: dict[str, tuple[Path, str, int, str]] = {}
    for text in args.member:
        where = f"--member {text!r}"
        role, sep, rest = text.partition("=")
        cert_text, at, address = rest.rpartition("@")
        if not sep or not at or not cert_text:
            raise InputError(f"{where}: give ROLE=CERT.pem@HOST:PORT, for example 'party-0=a.pem@10.0.0.1:7100'")
        try:
            certs.check_role_name(role)
        except ValueError:
            raise InputError(f"{where}: {role!r} is not a role (party-<k>, k = 0, 1, ..., or dealer)") from None
        if role in given:
            raise InputError(f"{where}: {role} is given twice")
        host, port = parse_address(address, where)
        given[role] = (Path(cert_text), host, port, where)
    parties = len(given) - ("dealer" in given)
    expected = [certs.party_role(k) for k in range(parties)] + ["dealer"]
    missing = [r for r in expected if r not in given]
    if missing or parties < 2:
        have = ", ".join(sorted(given, key=_role_order))
        lacking = missing[0] if missing else "party-1"
        raise InputError(
            f"--member: a federation is party-0 .. party-(n-1) (n >= 2) and the dealer; {lacking} is missing "
            f"(given: {have})"
        )
    schema = [Named("--schema", Path(args.schema))] if args.schema else []
    check_files(
        [Named("--ca-cert", ca_path)] + [Named("--member", given[r][0]) for r in expected] + schema,
        [(Named("--out", out), "federation file")],
        force=args.force,
    )
    ca_pem = read_file(ca_path, "CA's certificate", "--ca-cert")
    facts = ca_facts(ca_pem, f"--ca-cert {ca_path}")
    if not facts["valid"]:
        raise InputError(f"--ca-cert {ca_path}: the CA is not valid now (it expires {facts['expires']})")
    specs, pins = [], {}
    for role in expected:
        cert_path, host, port, where = given[role]
        cert_pem = read_file(cert_path, "certificate", "--member")
        who = certs.identity(cert_pem, str(cert_path))
        if who.role != role:
            raise InputError(f"{cert_path}: names {who.role}, not {role} ({where})")
        certs.check_issued_by(cert_pem, ca_pem, str(cert_path))
        check_tls_usage(cert_pem, str(cert_path))
        if not who.organisation.strip() or len(who.organisation) > 64:
            raise InputError(f"{cert_path}: names no organisation of 1 to 64 characters (its subject's O)")
        specs.append(Spec(role, who.organisation, host, port))
        pins[role] = who.sha256
    check_addresses(specs, {r: given[r][3] for r in expected})
    content: dict[str, Any] = {"federation": name, "ca": facts["pem"].decode("ascii")}
    schema_hash = schema_sha256(args.schema)
    if schema_hash:
        content["schema_sha256"] = schema_hash
    content["members"] = [
        {"role": s.role, "organisation": s.organisation, "host": s.host, "port": s.port}
        | ({} if args.no_pins else {"sha256": pins[s.role]})
        for s in specs
    ]
    fed = checked(content, str(out))
    text = federation_text(fed.to_dict())
    write_atomic(out, lambda fh: fh.write(text), binary=True)
    print(
        f"wrote {out}: federation {fed.name!r}, {fed.parties} silo parties and the dealer, CA {facts['subject']} "
        f"(valid until {facts['expires']}); "
        + ("every certificate pinned (sha256)" if not args.no_pins else "no certificate pinned")
        + ". Give every member this same file."
    )
    return 0


def check_tls_usage(cert_pem: bytes, source: str) -> None:
    """``InputError`` unless the certificate may sign a TLS 1.3 handshake as server and as client
    (every member is both): its key usage, if any, includes digitalSignature and its extended key
    usage, if any, serverAuth and clientAuth."""
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        if not cert.extensions.get_extension_for_class(x509.KeyUsage).value.digital_signature:
            raise InputError(f"{source}: its key usage lacks digitalSignature, which TLS 1.3 needs")
    except x509.ExtensionNotFound:
        pass
    try:
        usages = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        return
    for oid, name in ((ExtendedKeyUsageOID.SERVER_AUTH, "serverAuth"), (ExtendedKeyUsageOID.CLIENT_AUTH, "clientAuth")):
        if oid not in usages:
            raise InputError(
                f"{source}: its extended key usage lacks {name}; a member both accepts and opens connections, "
                "so its certificate needs serverAuth and clientAuth"
            )


def _role_order(role: str) -> tuple[int, int]:
    return (1, 0) if role == "dealer" else (0, int(role.split("-")[1]))


# ---- show ---------------------------------------------------------------------------------------


def run_show(args: argparse.Namespace) -> int:
    """``federation show FILE``: the federation's members, pins, schema hash and CA; 0."""
    from ..common import Named, check_input
    from ..mpc import load_federation as load

    path = Path(args.file)
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give the federation file (federation.json)")
    check_input(Named("FILE", path), "federation file")
    fed = load(path)
    ca = ca_facts(fed.ca_pem, str(path))
    pins = sum(1 for m in fed.members if m.sha256)
    print(f"federation {fed.name!r} ({path}): {fed.parties} silo parties and the dealer")
    print(
        f"CA: {ca['subject']}, valid until {ca['expires']}"
        + ("" if ca["valid"] else " (NOT VALID NOW)")
        + f", sha256 {ca['sha256']}"
    )
    print(
        f"schema sha256: {fed.schema_sha256} (every party must load this schema)"
        if fed.schema_sha256
        else "schema sha256: none (party 0 compares the parties' schemas with its own)"
    )
    if pins == len(fed.members):
        print("pins: every member's certificate (only the pinned certificate is accepted for its role)")
    elif pins:
        print(f"pins: {pins} of {len(fed.members)} members (the others: any certificate of the CA for their role)")
    else:
        print("pins: none (any certificate of the CA naming a member's role and organisation is accepted)")
    rows = [("rank", "role", "organisation", "address", "certificate sha256")]
    rows += [(str(m.rank), m.role, m.organisation, m.address, m.sha256 or "-") for m in fed.members]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4])
    return 0
