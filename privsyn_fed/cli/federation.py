"""``privsyn-fed federation``: provision the certificates of a multi-host MPC federation.

  * ``init``: a new federation CA, and one bundle per member (its private key, its certificate and
    the federation file), like a startup kit for every organisation;
  * ``issue``: a new certificate and key for one member (rotation, or replacing a revoked member),
    with the federation file that pins it;
  * ``describe``: the federation file for certificates issued by an existing CA (no private key
    involved);
  * ``show``: what a federation file says.

Every output is written in full under a temporary name beside its target and renamed into place at
the end, so a failure leaves nothing behind; an existing target is replaced only with ``--force``.
Private keys are created with mode 0600 (``certs.write_private``) and never leave their bundle.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from ..common import InputError, check_name_fits
from ..common.fileio import write_folder
from .bundle_text import check_organisation, federation_text, paragraphs
from .common import number

#: The longest validity accepted for ``--days`` and ``--ca-days`` (ten years).
MAX_DAYS = 3650.0
#: What a folder written by ``init`` holds (``--force`` replaces no other folder).
KIT_ENTRIES = re.compile(r"ca|federation\.json|README\.txt|dealer|party-(0|[1-9][0-9]*)|site-[a-z0-9-]+|superlink")
#: What a member's bundle holds.
BUNDLE_FILES = ("key.pem", "cert.pem", "federation.json", "README.txt")

INIT_EPILOG = """\
example:
  privsyn-fed federation init --out adult-kit --name adult-2026 \\
      --party "Hospital A@10.0.0.1:7100" --party "Hospital B@10.0.0.2:7100" \\
      --party "Registry C@10.0.0.3:7100" --dealer "Trust D@10.0.0.9:7100" --schema schema.json

writes (the folder has mode 0700, every key.pem and ca.key mode 0600):
  OUT/ca/ca.pem, OUT/ca/ca.key   the federation's CA; take ca.key offline: it is needed only to
                                 issue or rotate a certificate (`federation issue`)
  OUT/party-0/ ... OUT/dealer/   one bundle per member: key.pem (its private key), cert.pem,
                                 federation.json and README.txt (the command that member runs)
  OUT/federation.json            the public federation file (the same in every bundle)

Send each bundle to its organisation over a secure channel, then delete it here. By default the
federation file pins every member's certificate (sha256), so a certificate minted later with the
CA's key is refused unless the file is changed too; --no-pins leaves the pins out (then the CA's
key alone can make a working identity, and revoking a member needs a new CA)."""

ISSUE_EPILOG = """\
example (rotate party-1's certificate and key):
  privsyn-fed federation issue --ca adult-kit/ca --federation adult-kit/federation.json \\
      --role party-1 --out party-1-2027

writes the member's new bundle (key.pem, cert.pem, federation.json, README.txt). When the
federation pins certificates, the new federation.json replaces the old pin with the new
certificate's: send it to every member, who must all hold the same file (members whose files
differ refuse each other). Giving --organisation or --address replaces the member, for example one
whose key was stolen. The --federation file itself is not changed."""

DESCRIBE_EPILOG = """\
example (certificates from an existing CA; the members keep their own keys):
  privsyn-fed federation describe --ca-cert our-ca.pem --name adult-2026 \\
      --member "party-0=a.pem@10.0.0.1:7100" --member "party-1=b.pem@10.0.0.2:7100" \\
      --member "party-2=c.pem@10.0.0.3:7100" --member "dealer=d.pem@10.0.0.9:7100" \\
      --out federation.json

Each certificate must be issued directly by the CA, be valid now, and name its role as its common
name and only DNS name (subject alternative name), and the member's organisation as its O."""


def add_parsers(sub) -> None:
    """Add the ``federation`` command group to ``sub`` (the subcommands of ``privsyn-fed``)."""
    fe = sub.add_parser(
        "federation",
        help="make, rotate, describe or show the certificates of a multi-host MPC federation",
        description="Provision the certificates of a multi-host MPC release (`synth --mpc --federation`, "
        "`mpc-party`, `mpc-dealer`): every connection is TLS 1.3 with a certificate on both sides, issued "
        "by the federation's own CA.",
    )
    fsub = fe.add_subparsers(dest="federation_command", metavar="ACTION", parser_class=type(fe))
    fsub.required = True

    raw = argparse.RawDescriptionHelpFormatter
    ini = fsub.add_parser(
        "init",
        help="a new federation: its CA and one bundle (key, certificate, federation file) per member",
        description="Make a federation CA and, for each member, a bundle holding its private key, its "
        "certificate (naming its role and organisation) and the federation file.",
        epilog=INIT_EPILOG,
        formatter_class=raw,
    )
    ini.add_argument("--out", required=True, metavar="DIR", help="the folder to write (a new one; see --force)")
    ini.add_argument(
        "--name", required=True, metavar="NAME", help="the federation's name, for example adult-2026 (printable text)"
    )
    ini.add_argument(
        "--party",
        action="append",
        required=True,
        metavar="ORGANISATION@HOST:PORT",
        help="a silo party: its organisation (as its certificate will name it, up to 64 characters) and "
        "the address it listens on ([V6ADDR]:PORT for IPv6). Repeat in rank order, party 0 (the "
        "coordinator, which writes the release) first; at least two",
    )
    ini.add_argument(
        "--dealer",
        required=True,
        metavar="ORGANISATION@HOST:PORT",
        help="the dealer: an organisation that controls no silo, and its address",
    )
    ini.add_argument(
        "--schema",
        metavar="SCHEMA",
        help="the public schema every party must load: its SHA-256 goes into the federation file, and a "
        "party with another schema is refused (default: no hash; party 0 still compares the parties' "
        "schemas with its own)",
    )
    ini.add_argument(
        "--site",
        action="append",
        default=[],
        metavar="NAME=ORGANISATION",
        help="a site (a federation of sites and compute servers): the --party members are then compute "
        "servers that hold no silo, and each site, which only connects outward, gets its own bundle "
        "site-NAME/. Repeat per site; needs --site-port",
    )
    ini.add_argument(
        "--site-port",
        type=int,
        metavar="PORT",
        help="with --site: the port on party 0's host where the sites connect",
    )
    ini.add_argument(
        "--superlink",
        metavar="HOST:PORT",
        help="with --site: the Flower SuperLink that hands the sites' agents their jobs (`synth "
        "--superlink`): writes its TLS certificate (superlink/) and one node key and agent.json per site",
    )
    _add_days(ini)
    ini.add_argument(
        "--ca-days",
        type=_days,
        default=3 * 365.0,
        metavar="N",
        help="the CA's validity in days (default 1095, at least --days); no certificate it issues outlives it",
    )
    ini.add_argument(
        "--no-pins",
        action="store_true",
        help="leave the members' certificate fingerprints out of the federation file: any certificate "
        "of the CA naming a member's role and organisation is then accepted (see SECURITY.md, "
        '"Provisioning a federation")',
    )
    ini.add_argument(
        "--force",
        action="store_true",
        help="replace --out if it exists (only an empty folder or one that `federation init` wrote)",
    )

    iss = fsub.add_parser(
        "issue",
        help="a new certificate and key for one member (rotation, or replacing a revoked member)",
        description="Issue a new certificate and key for one member with the federation's CA, and write "
        "that member's new bundle with the federation file that pins the new certificate.",
        epilog=ISSUE_EPILOG,
        formatter_class=raw,
    )
    iss.add_argument(
        "--ca", required=True, metavar="CA_DIR", help="the CA's folder, holding ca.pem and ca.key (mode 0600)"
    )
    iss.add_argument("--federation", required=True, metavar="FILE", help="the federation file now in use")
    iss.add_argument("--role", required=True, metavar="ROLE", help="the member: party-<k> or dealer")
    iss.add_argument("--out", required=True, metavar="DIR", help="the folder of the member's new bundle")
    _add_days(iss)
    iss.add_argument(
        "--organisation",
        metavar="NAME",
        help="a new organisation for this role (replacing the member; default: the file's)",
    )
    iss.add_argument(
        "--address",
        metavar="HOST:PORT",
        help="a new address for this role ([V6ADDR]:PORT for IPv6; default: the file's)",
    )
    iss.add_argument(
        "--force", action="store_true", help="replace --out if it exists (only an empty folder or a bundle)"
    )

    de = fsub.add_parser(
        "describe",
        help="the federation file for certificates issued by an existing CA",
        description="Check certificates issued by an existing CA (each naming its role and organisation) "
        "and write the federation file that lists them. No private key is read or written.",
        epilog=DESCRIBE_EPILOG,
        formatter_class=raw,
    )
    de.add_argument("--ca-cert", required=True, metavar="CA.pem", help="the CA's certificate (PEM)")
    de.add_argument("--name", required=True, metavar="NAME", help="the federation's name (printable text)")
    de.add_argument(
        "--member",
        action="append",
        required=True,
        metavar="ROLE=CERT.pem@HOST:PORT",
        help="a member: its role (party-<k> or dealer), its certificate (PEM) and the address it listens "
        "on. Once per role: party-0 .. party-(n-1) and the dealer, in any order",
    )
    de.add_argument("--schema", metavar="SCHEMA", help="the public schema every party must load (its SHA-256)")
    de.add_argument(
        "--no-pins", action="store_true", help="leave the certificates' fingerprints out of the federation file"
    )
    de.add_argument("--out", required=True, metavar="FILE", help="the federation file to write")
    de.add_argument("--force", action="store_true", help="replace --out if it exists")

    sh = fsub.add_parser(
        "show",
        help="print what a federation file says",
        description="Print a federation file's members (rank, role, organisation, address, certificate "
        "pin), the schema's hash, and the CA's subject, expiry and fingerprint.",
    )
    sh.add_argument("file", metavar="FILE", help="the federation file (federation.json)")


def _add_days(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--days",
        type=_days,
        default=365.0,
        metavar="N",
        help="how long the members' certificates are valid, in days (default 365; a fraction for hours)",
    )


def _days(text: str) -> float:
    """A validity in days: above 0, at most ``MAX_DAYS`` (an argparse type)."""
    value = number(text)
    if not 0 < value <= MAX_DAYS:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0 and at most {MAX_DAYS:g} days")
    return value


def run(args: argparse.Namespace) -> int:
    """``federation init``, ``issue``, ``describe`` or ``show``; 0 on success."""
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "init": run_init,
        "issue": run_issue,
        "describe": run_describe,
        "show": run_show,
    }
    return commands[args.federation_command](args)


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
    from ..mpc.aggregator import schema_fingerprint

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
    from ..mpc.federation import parse

    return parse(content, Path(source))


def write_bundle(folder: Path, member, fed, cert_pem: bytes, key_pem: bytes) -> None:
    """A member's bundle in the new, private ``folder``: its key (0600), its certificate, the
    federation file and README.txt."""
    from ..mpc import certs

    certs.write_private(folder / "key.pem", key_pem)
    certs.write_public(folder / "cert.pem", cert_pem)
    certs.write_public(folder / "federation.json", federation_text(fed.to_dict()))
    certs.write_public(folder / "README.txt", bundle_readme(fed, member, certs.identity(cert_pem)).encode())


def lines_text(lines: list[str], width: int = 100) -> str:
    """``lines`` wrapped at ``width``, an indented line's continuation indented further."""
    out = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip()))
        out.append(textwrap.fill(line, width, initial_indent="", subsequent_indent=indent + "    " if indent else ""))
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
            "project's README, \"Each party's own policy\"); without it any request over this schema is "
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


# ---- init ---------------------------------------------------------------------------------------


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


def init_summary(fed, out: Path, ca_pem: bytes, issued: list[tuple[bytes, bytes]]) -> str:
    """What ``init`` wrote and what to do with it (printed, and kept as ``OUT/README.txt``)."""
    from ..mpc import certs

    ca = _ca_facts(ca_pem)
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


# ---- issue --------------------------------------------------------------------------------------


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
    facts = _ca_facts(cert_pem, f"--ca {cert_path}")
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
    from ..mpc.federation import load

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
    facts = _ca_facts(ca_pem, f"--ca-cert {ca_path}")
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


def _ca_facts(ca_pem: bytes, source: str = "the CA") -> dict[str, Any]:
    """The CA certificate's subject, expiry (text), whether it is valid now, and its fingerprint."""
    from cryptography import x509

    from ..mpc import certs

    try:
        cert = x509.load_pem_x509_certificate(ca_pem)
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except (ValueError, x509.ExtensionNotFound):
        raise InputError(f"{source}: not a PEM CA certificate") from None
    if not is_ca:
        raise InputError(f"{source}: a member's certificate, not a CA's")
    from cryptography.hazmat.primitives import serialization

    now = datetime.datetime.now(datetime.timezone.utc)
    return {
        "pem": cert.public_bytes(serialization.Encoding.PEM),
        "subject": cert.subject.rfc4514_string(),
        "expires": f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC",
        "valid": cert.not_valid_before_utc <= now <= cert.not_valid_after_utc,
        "sha256": certs.fingerprint(ca_pem),
    }


def run_show(args: argparse.Namespace) -> int:
    """``federation show FILE``: the federation's members, pins, schema hash and CA; 0."""
    from ..common import Named, check_input
    from ..mpc.federation import load

    path = Path(args.file)
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give the federation file (federation.json)")
    check_input(Named("FILE", path), "federation file")
    fed = load(path)
    ca = _ca_facts(fed.ca_pem, str(path))
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
