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
    from ..mpc.certs import SITE_NAME
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


def site_readme(fed: Any, name: str, organisation: str, cert_pem: bytes) -> str:
    """What a site is told in its bundle: what each file is and which command it runs."""
    from ..mpc import certs
    from .bundle_text import paragraphs

    who = certs.identity(cert_pem)
    party0 = fed.members[0]
    return paragraphs(
        f"Federation {fed.name!r}: the bundle of site {name} ({organisation}), one of {len(fed.sites.members)} "
        f"sites; {fed.parties} compute servers hold the sites' shares and a dealer serves them.",
        "key.pem: this site's private key (mode 0600). Keep it on this site's host, readable only by the "
        "account that runs privsyn-fed; whoever holds it can answer as this site.",
        f"cert.pem: its certificate, naming site-{name} of {organisation}, valid until "
        f"{who.not_after:%Y-%m-%d %H:%M} UTC, SHA-256 {who.sha256}.",
        "federation.json: the federation (public). Every member and site must hold the same file.",
        f"This site never listens: it connects outward to party 0 at {party0.host}:{fed.sites.port} (allow "
        "that one outbound TLS connection) when a release is announced, and exits when it ends. Run, "
        "in this folder:",
        "  privsyn-fed site run --federation federation.json --cert cert.pem --key key.pem \\\n"
        "      --schema schema.json --silo YOUR_TABLE.csv --policy policy.json",
        "--policy says which releases this site accepts and what they may cost its rows (max_epsilon, "
        "max_delta, methods, and its own budget_store); the site checks each release against it before "
        "it reads its table. Each answer leaves as one share per compute server, sealed for that server: "
        "no server, relay or coordinator sees it in the clear.",
    )


def write_site_bundles(folder: Path, fed: Any, sites: list[tuple[str, str]], issued: list[tuple[bytes, bytes]]):
    """One bundle ``site-NAME/`` per site in ``folder``."""
    from ..mpc import certs
    from .bundle_text import federation_text

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

    from ..agent.keys import node_keys, superlink_certificate
    from ..mpc import certs
    from .bundle_text import paragraphs

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
            fh.write(
                "\n"
                + paragraphs(
                    "To answer every release without being started for each (a site agent): put your table at "
                    "silo.csv, your policy at policy.json and the schema at schema.json here (or change "
                    "agent.json), and run once, in this folder, Flower's SuperNode with privsyn-fed installed:",
                    f"  flower-supernode --superlink {host}:{port} --root-certificates ca.pem \\\n"
                    "      --auth-supernode-private-key node.key --node-config \"site-dir='$PWD'\"",
                    "It connects outward to the SuperLink and waits for jobs; each release runs as `site run` "
                    "would, and its requests, verdicts and answers go to state/audit.log (`privsyn-fed site log`).",
                )
            )
    registers = "\n".join(
        f"  flwr supernode register nodes/{certs.site_role(n)}.pub --name {certs.site_role(n)}" for n, _ in sites
    )
    readme = paragraphs(
        f"The Flower SuperLink of federation {fed.name!r}, at {host}:{port}, on party 0's host: it hands each "
        "release's job to the sites' agents (`privsyn-fed synth --superlink`) and keeps its runs in its database.",
        "Start it, then register every site's node key once (with a Flower CLI whose config.toml names this "
        "SuperLink and ca.pem as its root certificate):",
        f"  flower-superlink --ssl-ca-certfile ca.pem --ssl-certfile cert.pem --ssl-keyfile key.pem \\\n"
        f"      --database state.db --enable-supernode-auth --disable-runtime-dependency-installation \\\n"
        f"      --host {host} --port {port}\n{registers}",
    )
    certs.write_public(link / "README.txt", readme.encode())
