"""The facts of a federation CA's certificate, as ``federation init``, ``issue``, ``describe`` and
``show`` report and check them."""

from __future__ import annotations

import datetime
from typing import Any

from ..common import InputError


def ca_facts(ca_pem: bytes, source: str = "the CA") -> dict[str, Any]:
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
