"""``privsyn-fed federation``'s options and help: the parsers of ``init``, ``issue``, ``describe``
and ``show``, their examples, and the validity in days they accept."""

from __future__ import annotations

import argparse

from .common import number

#: The longest validity accepted for ``--days`` and ``--ca-days`` (ten years).
MAX_DAYS = 3650.0

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
