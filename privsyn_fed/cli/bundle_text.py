"""The words of provisioning bundles: organisations as certificates name them, the federation
file's bytes, and the README.txt that ``federation init`` and ``issue`` write: a member's, a site's,
a site agent's, the SuperLink's, and the kit's own (``federation_init``, ``federation_issue`` and
``federation_sites``)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from ..common import InputError


def check_organisation(name: str, where: str) -> str:
    """An organisation as a certificate names it: printable, 1 to 64 characters."""
    name = name.strip()
    if not name or len(name) > 64 or not name.isprintable():
        raise InputError(f"{where}: the organisation must be printable text of 1 to 64 characters, not {name!r}")
    return name


def federation_text(content: dict[str, Any]) -> bytes:
    """A federation file's bytes."""
    return (json.dumps(content, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def paragraphs(*texts: str, width: int = 96) -> str:
    """Each text as a paragraph wrapped at ``width`` (words whole, as ``lines_text``); a text starting
    with a space is kept as it is."""
    return "\n\n".join(t if t.startswith(" ") else _fill(t, width) for t in texts if t) + "\n"


def _fill(text: str, width: int, more: str = "") -> str:
    """``text`` wrapped at ``width``, continuations indented by ``more``; a word longer than ``width``
    (a path) stands whole on its line, and none is broken at a hyphen (``--flags``), so paths,
    options and fingerprints can be copied as printed."""
    return textwrap.fill(text, width, subsequent_indent=more, break_long_words=False, break_on_hyphens=False)


def lines_text(lines: list[str], width: int = 100) -> str:
    """``lines`` wrapped at ``width`` (``_fill``), an indented line's continuation indented further."""
    out = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip()))
        out.append(_fill(line, width, indent + "    " if indent else ""))
    return "\n".join(out) + "\n"


def bundle_readme(fed, member, who) -> str:
    """What a member is told in its bundle: what each file is and which command it runs."""
    pinned = any(m.sha256 for m in fed.members)
    files = "--federation federation.json --cert cert.pem --key key.pem"
    if member.rank == 0:
        silo = "" if fed.sites is not None else " --silo YOUR_TABLE.csv"
        command = (
            f"  privsyn-fed synth --method distaim --mpc {files} \\\n"
            f"      --schema schema.json{silo} --epsilon E --delta D --out release.csv"
        )
        role = (
            "Party 0 coordinates: it starts the release and writes the synthetic CSV and its ledger "
            "(--method flaim, fedtda and independent run over MPC too). Start it with the others in any order."
        )
    elif member.role == "dealer":
        command = f"  privsyn-fed mpc-dealer {files}"
        role = (
            "The dealer reads no data and deals CrypTen's correlated randomness; it must collude with no "
            "party, so run it on a host that no silo controls."
        )
    elif fed.sites is not None:
        command = f"  privsyn-fed mpc-server {files} --schema schema.json --ledgers ledgers/"
        role = (
            "A compute server holds no silo: it opens only the shares the sites sealed for it, only inside "
            "noisy sums, adds its own noise, and keeps a ledger copy of every step it costed."
        )
    else:
        command = (
            f"  privsyn-fed mpc-party {files} \\\n      --schema schema.json --silo YOUR_TABLE.csv --policy policy.json"
        )
        role = (
            "--policy says which releases this party accepts and what they may cost its rows (the "
            "project's docs/mpc.md, \"Each party's own policy\"); without it any request over this schema is "
            "accepted."
        )
    if fed.schema_sha256:
        schema = (
            f"Every party loads the federation's public schema (schema.json above), whose SHA-256 is "
            f"{fed.schema_sha256}; a party with another schema is refused."
        )
    elif member.role == "dealer":
        schema = ""
    else:
        schema = "Every party loads the same public schema (schema.json above); party 0 refuses to start otherwise."
    described = (
        "every member's role, organisation and address, the CA's certificate"
        + (", every member's certificate fingerprint (pin)" if pinned else "")
        + (" and the schema's SHA-256" if fed.schema_sha256 else "")
    )
    return paragraphs(
        f"Federation {fed.name!r}: the bundle of {member.role} ({member.organisation}), rank {member.rank} "
        f"of {fed.parties} silo parties (party-0 .. party-{fed.parties - 1}) and the dealer (rank {fed.parties}).",
        f"key.pem: this member's private key (mode 0600). Keep it on this member's host, readable only by "
        f"the account that runs privsyn-fed, and never send it anywhere: whoever holds it can take part "
        f"as {member.role}.",
        f"cert.pem: its certificate, naming {member.role} of {member.organisation}, issued by the "
        f"federation's CA, valid until {who.not_after:%Y-%m-%d %H:%M} UTC, SHA-256 {who.sha256}.",
        f"federation.json: the federation (public): {described}. Every member must hold the same file; "
        "members whose files differ refuse each other.",
        f"This member listens on {member.address} (--listen HOST:PORT binds another address, behind NAT) "
        "and connects to every other member's address: allow TLS connections between all members' "
        "addresses. On this member's host, in this folder, run:",
        command,
        role,
        schema,
        "`privsyn-fed federation show federation.json` prints the federation. When this certificate is "
        "rotated you receive a new bundle: replace key.pem, cert.pem and federation.json together. When "
        "another member's is, you receive a new federation.json: replace yours.",
    )


def init_summary(fed, out: Path, ca_pem: bytes, issued: list[tuple[bytes, bytes]]) -> str:
    """What ``init`` wrote and what to do with it (printed, and kept as ``OUT/README.txt``)."""
    from ..mpc import certs
    from .federation_ca import ca_facts

    ca = ca_facts(ca_pem)
    pinned = all(m.sha256 for m in fed.members)
    head = lines_text(
        [
            f"federation {fed.name!r}: {fed.parties} silo parties and the dealer; CA valid until {ca['expires']}",
            f"wrote {out}/ (mode 0700):",
            "  ca/            the federation's CA: ca.pem and ca.key. Take ca.key offline now (an encrypted "
            "removable disk, a safe): it is needed only to issue or rotate a certificate (`privsyn-fed "
            "federation issue`), and whoever holds it can mint certificates of this federation"
            + (" (refused while the federation file pins other ones)." if pinned else "."),
        ]
    )
    rows = []
    for member, (cert_pem, _) in zip(fed.members, issued):
        who = certs.identity(cert_pem)
        rows.append(
            (f"  {member.role}/", member.organisation, member.address, f"until {who.not_after:%Y-%m-%d}", who.sha256)
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    table = "".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + f"  sha256 {r[4]}\n" for r in rows)
    tail = [
        "  federation.json  the public federation file, the same as in every bundle"
        + (f" (schema sha256 {fed.schema_sha256})" if fed.schema_sha256 else ""),
        "Send each bundle folder to its organisation over a secure channel (in person, or an encrypted "
        "and authenticated transfer; never plain e-mail), then delete it here: each key.pem is a member's "
        "private key, and this folder holds them all. Each bundle's README.txt says which command that "
        "member runs.",
    ]
    if pinned:
        tail.append(
            "Every member's certificate is pinned (sha256) in federation.json: a certificate minted later "
            "with the CA's key is refused until every member holds a federation file that names it."
        )
    else:
        tail.append(
            "No certificate is pinned (--no-pins): any certificate of this CA naming a member's role and "
            "organisation is accepted, so revoking one means a new CA for everyone (`federation init`)."
        )
    dealer = fed.dealer
    shared = [m.role for m in fed.members[:-1] if m.organisation == dealer.organisation]
    if shared:
        tail.append(
            f"note: the dealer's organisation {dealer.organisation!r} also runs {', '.join(shared)}; the dealer "
            'must collude with no party (SECURITY.md, "The dealer"): give it to an organisation that controls '
            "no silo."
        )
    return head + table + lines_text(tail)


def site_readme(fed: Any, name: str, organisation: str, cert_pem: bytes) -> str:
    """What a site is told in its bundle: what each file is and which command it runs."""
    from ..mpc import certs

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


def agent_readme(host: str, port: int) -> str:
    """What a site's README.txt adds for its agent on Flower: the SuperNode it runs (``--superlink``)."""
    return paragraphs(
        "To answer every release without being started for each (a site agent): put your table at "
        "silo.csv, your policy at policy.json and the schema at schema.json here (or change "
        "agent.json), and run once, in this folder, Flower's SuperNode with privsyn-fed and its agent extra "
        "installed (pip install 'privsyn-fed[agent]'):",
        f"  flower-supernode --superlink {host}:{port} --root-certificates ca.pem \\\n"
        "      --auth-supernode-private-key node.key --node-config \"site-dir='$PWD'\"",
        "It connects outward to the SuperLink and waits for jobs; each release runs as `site run` "
        "would, and its requests, verdicts and answers go to state/audit.log (`privsyn-fed site log`).",
    )


def superlink_readme(fed: Any, host: str, port: int, registers: str) -> str:
    """The SuperLink folder's README.txt: how to start it and register every site's node key."""
    return paragraphs(
        f"The Flower SuperLink of federation {fed.name!r}, at {host}:{port}, on party 0's host: it hands each "
        "release's job to the sites' agents (`privsyn-fed synth --superlink`) and keeps its runs in its database.",
        "Start it, then register every site's node key once (with a Flower CLI whose config.toml names this "
        "SuperLink and ca.pem as its root certificate):",
        f"  flower-superlink --ssl-ca-certfile ca.pem --ssl-certfile cert.pem --ssl-keyfile key.pem \\\n"
        f"      --database state.db --enable-supernode-auth --disable-runtime-dependency-installation \\\n"
        f"      --host {host} --port {port}\n{registers}",
    )
