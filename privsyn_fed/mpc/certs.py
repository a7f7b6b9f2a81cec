"""A federation's certificates: its CA, one leaf per role, and checks of what a member was given.

Every connection of an MPC run is TLS 1.3 with a certificate on both sides, issued by the
federation's own certificate authority (``make_ca``). A leaf (``issue``) names its **role** twice,
as the subject's common name and as its only DNS subject-alternative name (``party-0`` ..
``party-(n-1)``, ``dealer``), and its organisation as the subject's O. It may serve as TLS server
and client (extended key usage serverAuth and clientAuth), is no CA, and is short-lived: a
provisioned one for a year by default, a local run's throw-away set for hours. Keys are EC P-256.

Private keys are written with ``write_private``: created with mode 0600 (never loosened later),
refused if the file exists unless ``overwrite`` (then written beside it and renamed over it).
``load_credentials`` reads a member's certificate and key and checks that they belong together;
``load_ca`` reads an existing CA to issue more; ``check_role`` checks whom a certificate names.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from ..common import InputError

#: ``party-0``, ``party-1``, ..., ``dealer``, or a site's ``site-<name>`` (a DNS label).
ROLE = re.compile(r"party-(0|[1-9][0-9]{0,5})|dealer|site-[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?")
#: A site's name inside its role ``site-<name>``.
SITE_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?")
#: Certificates are valid from this long before they were made (clocks of different hosts differ).
CLOCK_SKEW = datetime.timedelta(minutes=5)


def party_role(rank: int) -> str:
    """The role of silo party ``rank``: ``party-<rank>``."""
    return f"party-{rank}"


def check_role_name(role: str) -> str:
    """``role`` if it is ``party-<k>``, ``dealer`` or ``site-<name>``, else ``ValueError``."""
    if not isinstance(role, str) or not ROLE.fullmatch(role):
        raise ValueError(
            f"a role is party-<k>, dealer or site-<name> (lower-case letters, digits and '-'), not {role!r}"
        )
    return role


def site_role(name: str) -> str:
    """The role of site ``name``: ``site-<name>``."""
    return f"site-{name}"


def _x509():
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    return x509, hashes, serialization, ec, ExtendedKeyUsageOID, NameOID


def _key_pem(key) -> bytes:
    _, _, serialization, _, _, _ = _x509()
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_ca(name: str, days: float = 365.0) -> tuple[bytes, bytes]:
    """A new federation CA named ``name``, valid for ``days``: ``(certificate PEM, private key PEM)``.

    The key signs the members' certificates and nothing else (path length 0); keep it off the
    members' hosts, or drop it once every member has its certificate."""
    x509, hashes, serialization, ec, _, NameOID = _x509()
    if not name or not name.isprintable():
        raise ValueError("a federation CA needs a printable name")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA"[:64]),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, name[:64]),
        ]
    )
    now = datetime.datetime.now(datetime.timezone.utc)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def issue(ca: tuple[bytes, bytes], role: str, organisation: str, days: float = 365.0) -> tuple[bytes, bytes]:
    """A leaf certificate for ``role`` (``party-<k>`` or ``dealer``) of ``organisation``, signed by
    ``ca`` (``make_ca``'s pair) and valid for ``days`` (a fraction for hours):
    ``(certificate PEM, private key PEM)``."""
    x509, hashes, serialization, ec, ExtendedKeyUsageOID, NameOID = _x509()
    check_role_name(role)
    if not organisation or not organisation.isprintable() or len(organisation) > 64:
        raise ValueError("an organisation is a printable name of 1 to 64 characters")
    ca_cert = x509.load_pem_x509_certificate(ca[0])
    ca_key = serialization.load_pem_private_key(ca[1], password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    not_after = min(now + datetime.timedelta(days=days), ca_cert.not_valid_after_utc)
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, role),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, organisation),
        ]
    )
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(role)]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def write_private(path: str | Path, pem: bytes, *, overwrite: bool = False) -> None:
    """Write a private key: the file is created with mode 0600 and this content, never wider.

    An existing file is an error (``FileExistsError``) unless ``overwrite``; then the key is
    written to a new 0600 file beside it, which replaces it."""
    path = Path(path)
    target = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp") if overwrite else path
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
            fh.flush()
            os.fsync(fh.fileno())
        if overwrite:
            os.replace(target, path)
    except BaseException:
        if overwrite:
            target.unlink(missing_ok=True)
        raise


def write_public(path: str | Path, pem: bytes) -> None:
    """Write a certificate or a federation file (public): mode 0644 at most, replacing nothing."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)


def fingerprint(cert: bytes) -> str:
    """SHA-256 of a certificate's DER form, as 64 lowercase hex digits (PEM or DER given)."""
    if cert.lstrip().startswith(b"-----BEGIN"):
        import ssl

        cert = ssl.PEM_cert_to_DER_cert(cert.decode("ascii"))
    return hashlib.sha256(cert).hexdigest()


@dataclass(frozen=True)
class Identity:
    """What a certificate says about its holder."""

    role: str
    organisation: str
    not_after: datetime.datetime
    sha256: str


def identity(cert_pem: bytes, source: str = "certificate") -> Identity:
    """The role (common name and only DNS name, which must agree), organisation, expiry and
    fingerprint of a leaf certificate; ``InputError`` naming ``source`` when it names no role."""
    x509, _, serialization, _, _, NameOID = _x509()
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        raise InputError(f"{source}: not a PEM certificate") from None
    cns = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = names.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        dns = []
    if len(cns) != 1 or dns != cns or not ROLE.fullmatch(str(cns[0])):
        raise InputError(
            f"{source}: names no federation role (its common name and only DNS name must both be "
            f"party-<k>, dealer or site-<name>; it has {cns or 'no common name'} and {dns or 'no DNS name'})"
        )
    return Identity(
        str(cns[0]),
        str(orgs[0]) if orgs else "",
        cert.not_valid_after_utc,
        hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest(),
    )


def check_issued_by(cert_pem: bytes, ca_pem: bytes, source: str) -> None:
    """``InputError`` unless ``cert_pem`` is signed by the CA ``ca_pem`` and valid now."""
    x509, _, _, _, _, _ = _x509()
    cert = x509.load_pem_x509_certificate(cert_pem)
    ca = x509.load_pem_x509_certificate(ca_pem)
    try:
        cert.verify_directly_issued_by(ca)
    except Exception as exc:  # InvalidSignature (no message), or a key of another type
        raise InputError(
            f"{source}: not issued by the federation's CA ({type(exc).__name__}); use the certificate "
            "provisioned for this federation"
        ) from None
    now = datetime.datetime.now(datetime.timezone.utc)
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        raise InputError(
            f"{source}: valid from {cert.not_valid_before_utc:%Y-%m-%d %H:%M} to "
            f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC, not now; have a new one issued"
        )


def check_role(cert_pem: bytes, role: str, source: str = "certificate") -> Identity:
    """The certificate's ``identity``; ``InputError`` naming ``source`` unless it names ``role``."""
    who = identity(cert_pem, source)
    if who.role != role:
        raise InputError(f"{source}: names {who.role}, not {role}")
    return who


def load_ca(cert_path: str | Path, key_path: str | Path) -> tuple[bytes, bytes]:
    """An existing federation CA (``make_ca``'s pair, from PEM files), to issue more certificates;
    ``InputError`` if a file cannot be read, the certificate is not a CA's, or the key is not its key."""
    x509, _, serialization, _, _, _ = _x509()
    try:
        cert_pem, key_pem = Path(cert_path).read_bytes(), Path(key_path).read_bytes()
    except OSError as exc:
        raise InputError(f"{exc.filename}: cannot read it ({exc.strerror or exc})") from None
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except (ValueError, x509.ExtensionNotFound):
        is_ca = False
    if not is_ca:
        raise InputError(f"{cert_path}: not a CA certificate")
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        raise InputError(f"{key_path}: not an unencrypted PEM private key") from None
    public = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*public) != cert.public_key().public_bytes(*public):
        raise InputError(f"{key_path}: not the private key of the CA {cert_path}")
    return cert_pem, key_pem


@dataclass(frozen=True)
class Credentials:
    """A member's certificate and private key (PEM) as read from its files, and who it names."""

    cert_path: Path
    key_path: Path
    cert_pem: bytes
    identity: Identity


def load_credentials(cert_path: str | Path, key_path: str | Path) -> Credentials:
    """Read a member's certificate and key; ``InputError`` (one line, naming the file) if a file is
    missing, the key is readable by other users, or the two do not belong together."""
    cert_path, key_path = Path(cert_path), Path(key_path)
    try:
        cert_pem = cert_path.read_bytes()
    except OSError as exc:
        raise InputError(f"--cert {cert_path}: cannot read it ({exc.strerror or exc})") from None
    try:
        mode = os.stat(key_path).st_mode
        key_path.open("rb").close()
    except OSError as exc:
        raise InputError(f"--key {key_path}: cannot read it ({exc.strerror or exc})") from None
    if stat.S_IMODE(mode) & 0o077:
        raise InputError(
            f"--key {key_path}: other users may read or write it (mode {stat.S_IMODE(mode):04o}); "
            f"make it private: chmod 600 {key_path}"
        )
    who = identity(cert_pem, f"--cert {cert_path}")
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_cert_chain(cert_path, key_path)
    except ssl.SSLError as exc:
        raise InputError(f"--key {key_path}: not the private key of --cert {cert_path} ({exc.reason or exc})") from None
    return Credentials(cert_path, key_path, cert_pem, who)
