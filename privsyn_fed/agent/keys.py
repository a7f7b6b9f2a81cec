"""The Flower deployment's credentials, from a federation's CA: the SuperLink's TLS certificate
(naming the address the SuperNodes dial) and one node key pair per site (ECDSA P-384 in OpenSSH
form, as ``flower-supernode --auth-supernode-private-key`` and ``flwr supernode register`` take).
"""

from __future__ import annotations

import datetime
import ipaddress
from typing import cast

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def superlink_certificate(ca: tuple[bytes, bytes], host: str, days: float = 365.0) -> tuple[bytes, bytes]:
    """A TLS server certificate for the SuperLink at ``host`` (an IP address or a DNS name, its only
    subject-alternative name), signed by the federation's CA: ``(certificate PEM, key PEM)``."""
    ca_cert = x509.load_pem_x509_certificate(ca[0])
    ca_key = cast(ec.EllipticCurvePrivateKey, serialization.load_pem_private_key(ca[1], password=None))
    key = ec.generate_private_key(ec.SECP256R1())
    try:
        name: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        name = x509.DNSName(host)
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "superlink")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(min(now + datetime.timedelta(days=days), ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([name]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), pem


def node_keys(comment: str) -> tuple[bytes, bytes]:
    """A site agent's node key pair: ``(private key, public key)`` in OpenSSH form (ECDSA P-384)."""
    key = ec.generate_private_key(ec.SECP384R1())
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public + f" {comment}\n".encode()
