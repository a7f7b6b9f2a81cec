"""A site's answer, split into additive shares and sealed for each compute server.

**Shares.** An answer ``v`` (an int64 vector) becomes ``S`` shares over the ring Z_{2^64}:
``x_1 .. x_{S-1}`` uniform and ``x_S = v - (x_1 + .. + x_{S-1}) mod 2^64``, so that
``x_1 + .. + x_S = v mod 2^64`` and any ``S - 1`` shares are jointly uniform, independent of ``v``.

**Server keys.** Each compute server makes an X25519 key per session and signs its public half
with its federation TLS certificate's EC P-256 key (``server_offer``); a site checks the
certificate chain, role and signature (``check_offer``) before sealing anything for it.

**Sealing.** ``seal`` is ECIES: an ephemeral X25519 key ``e``, ``k = HKDF-SHA256(X25519(e, P),
info = "privsyn-fed share v1" || aad)``, AES-256-GCM under ``k`` with a random nonce and ``aad``
(``aad_of``: federation, release, site, server, step, query) as associated data, so the relay sees
nothing and a share cannot be replayed for another server, site, step or query.

**Signatures.** The site signs each sealed share with its own certificate's key (``sign``), so a
server knows which site sent it (``check_signature``).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re

import numpy as np
from cryptography import x509
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.x509.oid import NameOID

#: The ring of the shares: Z_{2^64}.
RING = 2**64
#: A compute server's per-session encryption key.
ServerKey = X25519PrivateKey

OFFER_LABEL = b"privsyn-fed server key\0"
SHARE_INFO = b"privsyn-fed share v1"
SIGN_LABEL = b"privsyn-fed site share\0"
NONCE = 12
TAG = 16
_HEX = re.compile(r"(?:[0-9a-f]{2}){1,160}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MAX_CERT = 1 << 16


class EnvelopeError(ValueError):
    """A refused offer, share or signature; the message is one line saying what is wrong."""


def _int64(values) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype != np.int64:
        if arr.dtype.kind not in "iu" or not np.can_cast(arr.dtype, np.int64):
            raise ValueError(f"shares are of int64 values, not {arr.dtype}")
        arr = arr.astype(np.int64)
    return np.ascontiguousarray(arr)


def split(values: np.ndarray, servers: int, rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """``servers`` additive shares of ``values`` over Z_{2^64}: the first ``servers - 1`` uniform
    (``os.urandom``; ``rng``, a seeded generator, only for tests), the last ``v - sum(others)``.
    Each share is an int64 array of ``values``' shape (the uint64 residue viewed as int64)."""
    if isinstance(servers, bool) or not isinstance(servers, (int, np.integer)) or servers < 2:
        raise ValueError(f"an answer is shared among at least 2 servers, not {servers!r}")
    v = _int64(values).view(np.uint64)
    nbytes = 8 * v.size
    shares, rest = [], v.copy()
    with np.errstate(over="ignore"):
        for _ in range(int(servers) - 1):
            raw = rng.bytes(nbytes) if rng is not None else os.urandom(nbytes)
            share = np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(v.shape)
            np.subtract(rest, share, out=rest)
            shares.append(share.view(np.int64))
    shares.append(rest.view(np.int64))
    return shares


def combine(shares: list[np.ndarray]) -> np.ndarray:
    """The shared value: ``sum(shares) mod 2^64``, as int64 (shares of one shape)."""
    if not shares:
        raise ValueError("no shares to combine")
    arrays = [_int64(s) for s in shares]
    if any(a.shape != arrays[0].shape for a in arrays):
        raise ValueError(f"shares of different shapes: {[a.shape for a in arrays]}")
    total = arrays[0].view(np.uint64).copy()
    with np.errstate(over="ignore"):
        for a in arrays[1:]:
            np.add(total, a.view(np.uint64), out=total)
    return total.view(np.int64)


def _ec_private(key) -> ec.EllipticCurvePrivateKey:
    if isinstance(key, (bytes, bytearray)):
        try:
            key = serialization.load_pem_private_key(bytes(key), password=None)
        except (ValueError, TypeError):
            raise EnvelopeError("not an unencrypted PEM private key") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        raise EnvelopeError("a federation key is an EC P-256 private key")
    return key


def _check_cert(cert_pem: bytes, ca_pem: bytes, role: str, what: str) -> ec.EllipticCurvePublicKey:
    """The public key of ``cert_pem`` once it is issued by ``ca_pem``, valid now and names ``role``
    as its common name and its only DNS name; ``EnvelopeError`` naming ``what`` otherwise."""
    try:
        cert = x509.load_pem_x509_certificate(bytes(cert_pem))
    except (ValueError, TypeError):
        raise EnvelopeError(f"{what}: not a PEM certificate") from None
    try:
        ca = x509.load_pem_x509_certificate(bytes(ca_pem))
    except (ValueError, TypeError):
        raise EnvelopeError(f"{what}: the federation CA is not a PEM certificate") from None
    try:
        cert.verify_directly_issued_by(ca)
    except Exception as exc:  # InvalidSignature, ValueError (names differ), TypeError (key type)
        raise EnvelopeError(f"{what}: not issued by the federation's CA ({type(exc).__name__})") from None
    now = datetime.datetime.now(datetime.timezone.utc)
    for c, who in ((cert, "certificate"), (ca, "CA certificate")):
        if not c.not_valid_before_utc <= now <= c.not_valid_after_utc:
            raise EnvelopeError(
                f"{what}: its {who} is valid from {c.not_valid_before_utc:%Y-%m-%d %H:%M} to "
                f"{c.not_valid_after_utc:%Y-%m-%d %H:%M} UTC, not now"
            )
    try:
        if cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
            raise EnvelopeError(f"{what}: a CA certificate, not a member's")
    except x509.ExtensionNotFound:
        pass
    cns = [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    try:
        dns = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName
        )
    except x509.ExtensionNotFound:
        dns = []
    if cns != [role] or dns != [role]:
        raise EnvelopeError(f"{what}: names {cns or 'no common name'} and DNS {dns or 'none'}, not {role!r}")
    key = cert.public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(key.curve, ec.SECP256R1):
        raise EnvelopeError(f"{what}: its key is not EC P-256")
    return key


def _raw(public: X25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def server_offer(tls_private_key, cert_pem: bytes, context: bytes) -> tuple[X25519PrivateKey, dict]:
    """A new X25519 key and its offer ``{"cert", "public", "signature"}``: the signature is
    ECDSA-P256-SHA256 by the server's TLS key over ``"privsyn-fed server key\\0" || context || "\\0"
    || public`` (``public`` raw, 32 bytes). ``tls_private_key``: a key object or its PEM."""
    key = _ec_private(tls_private_key)
    try:
        cert = x509.load_pem_x509_certificate(bytes(cert_pem))
    except (ValueError, TypeError):
        raise EnvelopeError("server offer: not a PEM certificate") from None
    der = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if cert.public_key().public_bytes(*der) != key.public_key().public_bytes(*der):
        raise EnvelopeError("server offer: the private key is not the certificate's")
    private = X25519PrivateKey.generate()
    raw = _raw(private.public_key())
    signature = key.sign(OFFER_LABEL + bytes(context) + b"\0" + raw, ec.ECDSA(hashes.SHA256()))
    return private, {"cert": bytes(cert_pem).decode("ascii"), "public": raw.hex(), "signature": signature.hex()}


def check_offer(offer: dict, ca_pem: bytes, role: str, context: bytes) -> X25519PublicKey:
    """The server's X25519 public key once its offer checks out: the certificate is the CA's, valid
    now and names ``role``, and its key signed this public key for ``context``."""
    if not isinstance(offer, dict) or set(offer) != {"cert", "public", "signature"}:
        raise EnvelopeError("server offer: not an object with exactly cert, public and signature")
    cert, public, signature = offer["cert"], offer["public"], offer["signature"]
    if not all(isinstance(x, str) for x in (cert, public, signature)) or len(cert) > _MAX_CERT:
        raise EnvelopeError("server offer: cert, public and signature are strings (cert at most 64 KiB)")
    if not _SHA256.fullmatch(public) or not _HEX.fullmatch(signature):
        raise EnvelopeError("server offer: public is 64 and signature up to 320 lowercase hex digits")
    try:
        cert_pem = cert.encode("ascii")
    except UnicodeEncodeError:
        raise EnvelopeError("server offer: the certificate is not ASCII PEM") from None
    key = _check_cert(cert_pem, ca_pem, role, f"server offer of {role}")
    raw = bytes.fromhex(public)
    try:
        key.verify(bytes.fromhex(signature), OFFER_LABEL + bytes(context) + b"\0" + raw, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        raise EnvelopeError(
            f"server offer of {role}: the signature does not verify (tampered or another context)"
        ) from None
    server_public = X25519PublicKey.from_public_bytes(raw)
    try:
        X25519PrivateKey.generate().exchange(server_public)
    except ValueError:
        raise EnvelopeError(f"server offer of {role}: a low-order X25519 public key") from None
    return server_public


def aad_of(federation: str, release: str, site: str, server: int, step: int, query_sha256: str) -> bytes:
    """The associated data binding a share to its place: the compact JSON list
    ``["privsyn-fed share", federation, release, site, server, step, query_sha256]`` (ASCII)."""
    for name, value in (("federation", federation), ("release", release), ("site", site)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{name} is a non-empty string, not {value!r}")
    for name, number in (("server", server), ("step", step)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise ValueError(f"{name} is a non-negative integer, not {number!r}")
    if not isinstance(query_sha256, str) or not _SHA256.fullmatch(query_sha256):
        raise ValueError("query_sha256 is 64 lowercase hex digits")
    fields = ["privsyn-fed share", federation, release, site, server, step, query_sha256]
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _key(shared: bytes, aad: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=SHARE_INFO + aad).derive(shared)


def seal(share: np.ndarray, server_public: X25519PublicKey, aad: bytes) -> bytes:
    """``e_pub (32) || nonce (12) || AES-256-GCM(k, nonce, share as little-endian int64, aad)``
    with ``k = HKDF-SHA256(X25519(e, server_public), info = "privsyn-fed share v1" || aad)``.
    ``share`` is a 1-D int64 vector."""
    arr = _int64(share)
    if arr.ndim != 1:
        raise ValueError(f"a sealed share is a 1-D vector, not of shape {arr.shape}")
    if not isinstance(server_public, X25519PublicKey):
        raise TypeError("seal needs the server's X25519PublicKey (check_offer)")
    ephemeral = X25519PrivateKey.generate()
    key = _key(ephemeral.exchange(server_public), bytes(aad))
    nonce = os.urandom(NONCE)
    body = AESGCM(key).encrypt(nonce, arr.astype("<i8").tobytes(), bytes(aad))
    return _raw(ephemeral.public_key()) + nonce + body


def open_sealed(blob: bytes, server_private: X25519PrivateKey, aad: bytes, length: int) -> np.ndarray:
    """The int64 vector of ``length`` values that ``seal`` sealed for this server under ``aad``;
    ``EnvelopeError`` when the size is not ``32 + 12 + 8 length + 16`` or the tag does not verify."""
    if isinstance(length, bool) or not isinstance(length, int) or length < 0:
        raise ValueError(f"length is a non-negative integer, not {length!r}")
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise EnvelopeError("a sealed share is bytes")
    blob = bytes(blob)
    expected = 32 + NONCE + 8 * length + TAG
    if len(blob) != expected:
        raise EnvelopeError(f"a sealed share of {length} values is {expected} bytes, not {len(blob)}")
    try:
        shared = server_private.exchange(X25519PublicKey.from_public_bytes(blob[:32]))
        plain = AESGCM(_key(shared, bytes(aad))).decrypt(blob[32 : 32 + NONCE], blob[32 + NONCE :], bytes(aad))
    except (InvalidTag, ValueError):
        raise EnvelopeError("the sealed share cannot be opened: tampered, for another server or another step") from None
    return np.frombuffer(plain, dtype="<i8").astype(np.int64)


def _signed(blob: bytes, aad: bytes) -> bytes:
    return SIGN_LABEL + hashlib.sha256(bytes(aad)).digest() + hashlib.sha256(bytes(blob)).digest()


def sign(site_private_key, blob: bytes, aad: bytes) -> bytes:
    """The site's ECDSA-P256-SHA256 signature (DER) over ``"privsyn-fed site share\\0" ||
    SHA-256(aad) || SHA-256(blob)``. ``site_private_key``: a key object or its PEM."""
    return _ec_private(site_private_key).sign(_signed(blob, aad), ec.ECDSA(hashes.SHA256()))


def check_signature(site_cert_pem: bytes, ca_pem: bytes, role: str, blob: bytes, aad: bytes, signature: bytes) -> None:
    """Nothing if ``site_cert_pem`` is the CA's, valid now, names ``role`` and its key made
    ``signature`` over ``blob`` and ``aad`` (see ``sign``); ``EnvelopeError`` otherwise."""
    key = _check_cert(site_cert_pem, ca_pem, role, f"share of {role}")
    if not isinstance(signature, (bytes, bytearray)):
        raise EnvelopeError(f"share of {role}: the signature is bytes")
    try:
        key.verify(bytes(signature), _signed(blob, aad), ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        raise EnvelopeError(f"share of {role}: the signature does not verify (tampered or another site)") from None


def offer_context(federation: str, release: str) -> bytes:
    """What a server's encryption key is signed for: one release of one federation."""
    return f"{federation}\0{release}".encode()
