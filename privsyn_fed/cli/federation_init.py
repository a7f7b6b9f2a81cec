"""``privsyn-fed federation init``: a new federation's CA and one bundle per member under ``--out``
(the kit), and a member's bundle as ``init`` and ``issue`` write it."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from ..common import InputError, write_folder
from .bundle_text import bundle_readme, federation_text, init_summary
from .federation_inputs import (
    check_addresses,
    check_name,
    check_target,
    checked,
    parse_address,
    parse_member,
    schema_sha256,
)

#: What a folder written by ``init`` holds (``--force`` replaces no other folder).
KIT_ENTRIES = re.compile(r"ca|federation\.json|README\.txt|dealer|party-(0|[1-9][0-9]*)|site-[a-z0-9-]+|superlink")
#: What a member's bundle holds.
BUNDLE_FILES = ("key.pem", "cert.pem", "federation.json", "README.txt")


def write_bundle(folder: Path, member, fed, cert_pem: bytes, key_pem: bytes) -> None:
    """A member's bundle in the new, private ``folder``: its key (0600), its certificate, the
    federation file and README.txt."""
    from ..mpc import certs

    certs.write_private(folder / "key.pem", key_pem)
    certs.write_public(folder / "cert.pem", cert_pem)
    certs.write_public(folder / "federation.json", federation_text(fed.to_dict()))
    certs.write_public(folder / "README.txt", bundle_readme(fed, member, certs.identity(cert_pem)).encode())


def run_init(args: argparse.Namespace) -> int:
    """``federation init``: a CA and one bundle per member under ``--out``; 0."""
    from ..mpc import certs

    name = check_name(args.name)
    if len(args.party) < 2:
        raise InputError("--party: a federation needs at least two silo parties (give --party once per party)")
    specs = [parse_member(text, certs.party_role(k), "--party") for k, text in enumerate(args.party)]
    specs.append(parse_member(args.dealer, "dealer", "--dealer"))
    options = {
        s.role: f"--{'dealer' if s.role == 'dealer' else 'party'} {text!r}"
        for s, text in zip(specs, [*args.party, args.dealer])
    }
    check_addresses(specs, options)
    if args.ca_days < args.days:
        raise InputError(f"--ca-days {args.ca_days:g}: the CA must be valid at least as long as --days {args.days:g}")
    out = Path(args.out)
    inputs = [("--schema", Path(args.schema))] if args.schema else []
    check_target(out, args.force, lambda entry: bool(KIT_ENTRIES.fullmatch(entry)), inputs)
    schema_hash = schema_sha256(args.schema)

    from .federation_sites import parse_sites, sites_content, write_agent_files, write_site_bundles

    sites = parse_sites(args.site)
    if bool(sites) != (args.site_port is not None):
        raise InputError("--site and --site-port go together (the sites connect to party 0's host at --site-port)")
    if args.superlink and not sites:
        raise InputError("--superlink goes with --site (the SuperLink hands the sites' agents their jobs)")
    superlink = parse_address(args.superlink, f"--superlink {args.superlink!r}") if args.superlink else None
    ca = certs.make_ca(name, days=args.ca_days)
    issued = [certs.issue(ca, s.role, s.organisation, days=args.days) for s in specs]
    site_issued = [certs.issue(ca, certs.site_role(n), org, days=args.days) for n, org in sites]
    content: dict[str, Any] = {"federation": name, "ca": ca[0].decode("ascii")}
    if schema_hash:
        content["schema_sha256"] = schema_hash
    content["members"] = [
        {"role": s.role, "organisation": s.organisation, "host": s.host, "port": s.port}
        | ({} if args.no_pins else {"sha256": certs.fingerprint(cert)})
        for s, (cert, _) in zip(specs, issued)
    ]
    if sites:
        content["sites"] = sites_content(sites, args.site_port, site_issued, not args.no_pins)
    fed = checked(content, str(out / "federation.json"))
    summary = init_summary(fed, out, ca[0], issued)

    def build(folder: Path) -> None:
        (folder / "ca").mkdir(mode=0o700)
        certs.write_public(folder / "ca" / "ca.pem", ca[0])
        certs.write_private(folder / "ca" / "ca.key", ca[1])
        for member, (cert_pem, key_pem) in zip(fed.members, issued):
            (folder / member.role).mkdir(mode=0o700)
            write_bundle(folder / member.role, member, fed, cert_pem, key_pem)
        write_site_bundles(folder, fed, sites, site_issued)
        if superlink is not None:
            write_agent_files(folder, fed, sites, ca, superlink, args.days)
        certs.write_public(folder / "federation.json", federation_text(fed.to_dict()))
        certs.write_public(folder / "README.txt", summary.encode())

    write_folder(out, build)
    print(summary, end="")
    return 0
