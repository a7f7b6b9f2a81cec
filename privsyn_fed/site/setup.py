"""Checking what a site was given, before it connects: ``site_setups`` (``privsyn-fed site run``).

Each site is a certificate, its key and its silo: the certificate must be the federation CA's and
name ``site-<name>`` with the organisation the federation file gives that site; the silo must exist
(it is read only once a release passed the site's policy); the schema must be the federation's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..common import InputError, beside, check_input, named_files
from ..mpc import certs, check_ledger_target, check_store_agrees, federation_digest, load_policy, schema_fingerprint
from ..mpc import load_federation as load
from .client import SiteSetup


def site_setups(
    federation_path: str,
    schema_path: str,
    certs_keys_silos: Sequence[tuple[str, str, str]],
    *,
    policies: Sequence[str] = (),
    ledgers: Sequence[str] = (),
    states: Sequence[str] = (),
    seeded: bool = False,
    connect_s: float = 60.0,
    force: bool = False,
) -> list[SiteSetup]:
    """One ``SiteSetup`` per ``(cert, key, silo)``; ``policies``, ``ledgers`` and ``states`` (each
    site's own folder, default ``TABLE.site/``), when given, one per
    site in the same order (an existing ``--ledger`` is replaced only with ``force``). ``InputError``
    naming the option and file at fault."""
    from ..schema import Schema

    fed = load(federation_path)
    if fed.sites is None:
        raise InputError(f"--federation {federation_path}: lists no sites (its 'sites' field); ask its provisioner")
    for option, given in (("--policy", policies), ("--ledger", ledgers), ("--state", states)):
        if given and len(given) != len(certs_keys_silos):
            raise InputError(f"{option}: give one per site ({len(certs_keys_silos)}) or none")
    schema = Schema.load(schema_path)
    fingerprint = schema_fingerprint(schema)
    fed.check_schema(fingerprint, schema_path)
    organisations = {s.name: s for s in fed.sites.members}
    digest = federation_digest(fed)
    out, names = [], set()
    for i, (cert, key, silo) in enumerate(certs_keys_silos):
        creds = certs.load_credentials(cert, key)
        certs.check_issued_by(creds.cert_pem, fed.ca_pem, f"--cert {cert}")
        role = creds.identity.role
        if not role.startswith("site-"):
            raise InputError(f"--cert {cert}: names {role}, not a site (site-<name>)")
        name = role[len("site-") :]
        member = organisations.get(name)
        if member is None:
            raise InputError(f"--cert {cert}: names site {name!r}, not a site of federation {fed.name!r}")
        if creds.identity.organisation != member.organisation:
            raise InputError(
                f"--cert {cert}: names {creds.identity.organisation!r}, but {fed.source} gives "
                f"{member.organisation!r} for site {name}"
            )
        if member.sha256 and creds.identity.sha256 != member.sha256:
            raise InputError(f"--cert {cert}: not the certificate {fed.source} pins for site {name}")
        if name in names:
            raise InputError(f"--cert {cert}: site {name} is given twice")
        names.add(name)
        for item in named_files([("--silo", silo)]):
            check_input(item, "silo")
        check_ledger_target(Path(ledgers[i]) if ledgers else None, silo, force)
        policy = load_policy(policies[i]) if policies else None
        if policy is not None:
            check_store_agrees(policy)
        out.append(
            SiteSetup(
                name,
                silo,
                schema,
                fingerprint,
                fed,
                digest,
                Path(cert),
                Path(key),
                policy,
                Path(ledgers[i]) if ledgers else None,
                seeded,
                connect_s,
                Path(states[i]) if states else beside(silo, ".site"),
            )
        )
    return out
