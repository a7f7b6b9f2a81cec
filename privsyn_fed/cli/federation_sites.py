"""``federation init --site NAME=ORGANISATION --site-port PORT``: a federation of sites and servers.

With sites, the ``--party`` members are compute servers that hold no silo (party 0, which writes the
release, among them), and every site gets a bundle of its own (``site-NAME/``: its key, its
certificate naming ``site-NAME`` and its organisation, the federation file, and README.txt with the
``privsyn-fed site run`` command it runs). A site only connects outward, to party 0's host at
``--site-port``; it never listens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..common import InputError


def parse_sites(texts: list[str]) -> list[tuple[str, str]]:
    """``NAME=ORGANISATION`` of each ``--site``: a site name (lower-case letters, digits and '-') and
    its organisation; ``InputError`` naming the option at fault."""
    from ..mpc import SITE_NAME
    from .bundle_text import check_organisation

    out, seen = [], set()
    for text in texts:
        where = f"--site {text!r}"
        name, sep, organisation = text.partition("=")
        if not sep or not SITE_NAME.fullmatch(name):
            raise InputError(
                f"{where}: give NAME=ORGANISATION, NAME 1 to 40 lower-case letters, digits and '-' "
                "(for example 'clinic-a=Clinic A')"
            )
        if name in seen:
            raise InputError(f"{where}: site {name!r} is given twice")
        seen.add(name)
        out.append((name, check_organisation(organisation, where)))
    return out


def sites_content(sites: list[tuple[str, str]], port: int, issued: list[tuple[bytes, bytes]], pins: bool) -> dict:
    """The federation file's ``sites`` field."""
    from ..mpc import certs

    return {
        "port": port,
        "members": [
            {"name": name, "organisation": org} | ({"sha256": certs.fingerprint(cert)} if pins else {})
            for (name, org), (cert, _) in zip(sites, issued)
        ],
    }


def write_site_bundles(folder: Path, fed: Any, sites: list[tuple[str, str]], issued: list[tuple[bytes, bytes]]):
    """One bundle ``site-NAME/`` per site in ``folder``."""
    from ..mpc import certs
    from .bundle_text import federation_text, site_readme

    for (name, organisation), (cert_pem, key_pem) in zip(sites, issued):
        bundle = folder / certs.site_role(name)
        bundle.mkdir(mode=0o700)
        certs.write_private(bundle / "key.pem", key_pem)
        certs.write_public(bundle / "cert.pem", cert_pem)
        certs.write_public(bundle / "federation.json", federation_text(fed.to_dict()))
        certs.write_public(bundle / "README.txt", site_readme(fed, name, organisation, cert_pem).encode())


def write_agent_files(folder: Path, fed: Any, sites: list[tuple[str, str]], ca, superlink, days: float) -> None:
    """For site agents on Flower (``--superlink``): the SuperLink's TLS certificate from the
    federation's CA (``superlink/``, with every site's node public key to register), and in each
    site's bundle its node key pair and an ``agent.json`` naming the bundle's files."""
    import json

    from ..agent import node_keys, superlink_certificate
    from ..mpc import certs
    from .bundle_text import agent_readme, superlink_readme

    host, port = superlink
    link = folder / "superlink"
    (link / "nodes").mkdir(mode=0o700, parents=True)
    cert, key = superlink_certificate(ca, host, days)
    certs.write_public(link / "cert.pem", cert)
    certs.write_private(link / "key.pem", key)
    certs.write_public(link / "ca.pem", ca[0])
    for name, _ in sites:
        private, public = node_keys(certs.site_role(name))
        bundle = folder / certs.site_role(name)
        certs.write_private(bundle / "node.key", private)
        certs.write_public(bundle / "node.pub", public)
        certs.write_public(link / "nodes" / f"{certs.site_role(name)}.pub", public)
        agent = {"federation": "federation.json", "cert": "cert.pem", "key": "key.pem", "schema": "schema.json",
                 "silo": "silo.csv", "policy": "policy.json"}  # fmt: skip
        certs.write_public(bundle / "agent.json", (json.dumps(agent, indent=1) + "\n").encode())
        certs.write_public(bundle / "ca.pem", ca[0])
        with open(bundle / "README.txt", "a") as fh:
            fh.write("\n" + agent_readme(host, port))
    registers = "\n".join(
        f"  flwr supernode register nodes/{certs.site_role(n)}.pub --name {certs.site_role(n)}" for n, _ in sites
    )
    readme = superlink_readme(fed, host, port, registers)
    certs.write_public(link / "README.txt", readme.encode())
