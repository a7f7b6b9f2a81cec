"""The site role's envelope (shares, server keys, sealing, signatures) and wire framing."""

import datetime
import json
import os
import socket
import struct
import subprocess
import sys
import threading

import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.x509.oid import NameOID

from privsyn_fed.mpc import envelope as env
from privsyn_fed.mpc import wire
from privsyn_fed.mpc.certs import issue, make_ca

CONTEXT = b"fed-1\0release-7"
QUERY = "ab" * 32


@pytest.fixture(scope="module")
def pki():
    ca = make_ca("test federation")
    other_ca = make_ca("other federation")
    return {
        "ca": ca,
        "other_ca": other_ca,
        "server0": issue(ca, "party-0", "Org A"),
        "server1": issue(ca, "party-1", "Org B"),
        "site": _leaf(ca, "site-3"),
        "site_other": _leaf(ca, "site-4"),
        "rogue": issue(other_ca, "party-0", "Rogue"),
    }


def _leaf(ca, role, *, not_before=None, not_after=None):
    """A leaf like ``issue`` makes, for any role (``issue`` knows party-<k> and dealer only)."""
    ca_cert = x509.load_pem_x509_certificate(ca[0])
    ca_key = serialization.load_pem_private_key(ca[1], password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, role)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or now - datetime.timedelta(minutes=5))
        .not_valid_after(not_after or now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(role)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), pem


# ---- shares ----------------------------------------------------------------------------------


def test_ring():
    assert env.RING == 2**64


@pytest.mark.parametrize("servers", [2, 3, 5])
def test_split_combine_round_trip(servers):
    rng = np.random.default_rng(7)
    extremes = np.array([0, 1, -1, np.iinfo(np.int64).max, np.iinfo(np.int64).min], dtype=np.int64)
    values = np.concatenate([extremes, rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, 1000)])
    shares = env.split(values, servers)
    assert len(shares) == servers
    assert all(s.dtype == np.int64 and s.shape == values.shape for s in shares)
    np.testing.assert_array_equal(env.combine(shares), values)
    # the sum of the shares as Python integers is the value modulo 2^64
    for i in range(10):
        total = sum(int(s[i]) for s in shares)
        assert (total - int(values[i])) % env.RING == 0
    for s in shares:
        assert not np.array_equal(s, values)


def test_split_shapes_and_seeded_rng():
    values = np.arange(12, dtype=np.int64).reshape(3, 4)
    a = env.split(values, 3, rng=np.random.default_rng(1))
    b = env.split(values, 3, rng=np.random.default_rng(1))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    np.testing.assert_array_equal(env.combine(a), values)
    np.testing.assert_array_equal(env.combine(env.split(np.int32([5, -5]), 2)), [5, -5])
    assert env.combine(env.split(np.array(9, dtype=np.int64), 2)) == 9


def test_split_refuses():
    for bad in (1, 0, True, 2.0):
        with pytest.raises(ValueError):
            env.split(np.zeros(3, dtype=np.int64), bad)
    with pytest.raises(ValueError):
        env.split(np.zeros(3), 2)  # float
    with pytest.raises(ValueError):
        env.split(np.zeros(3, dtype=np.uint64), 2)
    with pytest.raises(ValueError):
        env.combine([])
    with pytest.raises(ValueError):
        env.combine([np.zeros(2, dtype=np.int64), np.zeros(3, dtype=np.int64)])


def test_shares_look_uniform():
    """Each share of a constant vector, alone, is uniform: every bit is set about half the time and
    the top byte is flat (chi-square, 255 degrees of freedom: mean 255, sd 22.6; bound 420)."""
    n = 20_000
    values = np.full(n, 42, dtype=np.int64)
    for share in env.split(values, 3):
        u = share.view(np.uint64)
        bits = (u[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
        freq = bits.mean(axis=0)
        assert np.all(np.abs(freq - 0.5) < 0.03), freq  # sd 0.0035: over 8 sd
        counts = np.bincount((u >> np.uint64(56)).astype(np.int64), minlength=256)
        expected = n / 256
        assert ((counts - expected) ** 2 / expected).sum() < 420


# ---- server offers ---------------------------------------------------------------------------


def test_offer_verifies(pki):
    cert, key = pki["server1"]
    private, offer = env.server_offer(key, cert, CONTEXT)
    assert set(offer) == {"cert", "public", "signature"}
    json.dumps(offer)
    public = env.check_offer(offer, pki["ca"][0], "party-1", CONTEXT)
    assert env._raw(public) == env._raw(private.public_key())
    # a key object works as well as its PEM
    env.check_offer(env.server_offer(serialization.load_pem_private_key(key, None), cert, CONTEXT)[1],
                    pki["ca"][0], "party-1", CONTEXT)  # fmt: skip


def test_offer_refused(pki):
    cert, key = pki["server1"]
    _, offer = env.server_offer(key, cert, CONTEXT)
    ca = pki["ca"][0]
    with pytest.raises(env.EnvelopeError, match="not issued by"):
        env.check_offer(offer, pki["other_ca"][0], "party-1", CONTEXT)
    with pytest.raises(env.EnvelopeError, match="not 'party-0'"):
        env.check_offer(offer, ca, "party-0", CONTEXT)
    with pytest.raises(env.EnvelopeError, match="signature does not verify"):
        env.check_offer(offer, ca, "party-1", b"another context")
    flipped = offer["public"][:-1] + ("0" if offer["public"][-1] != "0" else "1")
    with pytest.raises(env.EnvelopeError, match="signature does not verify"):
        env.check_offer({**offer, "public": flipped}, ca, "party-1", CONTEXT)
    # another server's certificate with this server's signature
    with pytest.raises(env.EnvelopeError, match="signature does not verify"):
        env.check_offer({**offer, "cert": pki["server0"][0].decode()}, ca, "party-0", CONTEXT)
    # a rogue CA's party-0
    _, rogue = env.server_offer(pki["rogue"][1], pki["rogue"][0], CONTEXT)
    with pytest.raises(env.EnvelopeError, match="not issued by"):
        env.check_offer(rogue, ca, "party-0", CONTEXT)


def test_offer_expired(pki):
    now = datetime.datetime.now(datetime.timezone.utc)
    cert, key = _leaf(pki["ca"], "party-2", not_before=now - datetime.timedelta(days=2),
                      not_after=now - datetime.timedelta(days=1))  # fmt: skip
    _, offer = env.server_offer(key, cert, CONTEXT)
    with pytest.raises(env.EnvelopeError, match="not now"):
        env.check_offer(offer, pki["ca"][0], "party-2", CONTEXT)


def test_offer_malformed(pki):
    cert, key = pki["server1"]
    _, offer = env.server_offer(key, cert, CONTEXT)
    ca = pki["ca"][0]
    bad = [
        None,
        [offer],
        "offer",
        {k: v for k, v in offer.items() if k != "signature"},
        {**offer, "extra": 1},
        {**offer, "public": 5},
        {**offer, "public": "zz" * 32},
        {**offer, "public": offer["public"][:-2]},
        {**offer, "public": offer["public"].upper()},
        {**offer, "signature": "abc"},
        {**offer, "signature": ""},
        {**offer, "signature": "00" * 70},
        {**offer, "cert": "not a certificate"},
        {**offer, "cert": "é" + offer["cert"]},
        {**offer, "cert": "x" * 100_000},
    ]
    for b in bad:
        with pytest.raises(env.EnvelopeError):
            env.check_offer(b, ca, "party-1", CONTEXT)
    with pytest.raises(env.EnvelopeError, match="CA is not a PEM"):
        env.check_offer(offer, b"junk", "party-1", CONTEXT)
    with pytest.raises(env.EnvelopeError, match="not the certificate's"):
        env.server_offer(pki["server0"][1], cert, CONTEXT)
    with pytest.raises(env.EnvelopeError, match="PEM private key"):
        env.server_offer(b"junk", cert, CONTEXT)


# ---- sealing ---------------------------------------------------------------------------------


def _aad(**kw):
    args = dict(federation="fed-1", release="r7", site="site-3", server=1, step=4, query_sha256=QUERY)
    args.update(kw)
    return env.aad_of(**args)


def test_aad_canonical():
    assert _aad() == b'["privsyn-fed share","fed-1","r7","site-3",1,4,"' + QUERY.encode() + b'"]'
    variants = {_aad(), _aad(server=0), _aad(step=5), _aad(site="site-4"), _aad(query_sha256="cd" * 32),
                _aad(release="r8"), _aad(federation="fed-2"), _aad(site='a","b')}  # fmt: skip
    assert len(variants) == 8
    for bad in (dict(server=-1), dict(step=True), dict(site=""), dict(query_sha256="AB" * 32), dict(step=1.0)):
        with pytest.raises(ValueError):
            _aad(**bad)


def test_seal_open_round_trip():
    server = X25519PrivateKey.generate()
    share = env.split(np.array([0, 1, -1, 2**63 - 1, -(2**63)], dtype=np.int64), 2)[0]
    blob = env.seal(share, server.public_key(), _aad())
    assert len(blob) == 32 + 12 + 8 * 5 + 16
    np.testing.assert_array_equal(env.open_sealed(blob, server, _aad(), 5), share)
    assert env.seal(share, server.public_key(), _aad()) != blob  # fresh ephemeral key and nonce
    empty = env.seal(np.zeros(0, dtype=np.int64), server.public_key(), _aad())
    assert env.open_sealed(empty, server, _aad(), 0).shape == (0,)


def test_open_refused():
    server, other = X25519PrivateKey.generate(), X25519PrivateKey.generate()
    share = np.arange(10, dtype=np.int64)
    blob = env.seal(share, server.public_key(), _aad())
    with pytest.raises(env.EnvelopeError, match="cannot be opened"):
        env.open_sealed(blob, other, _aad(), 10)
    for aad in (_aad(step=5), _aad(site="site-4"), _aad(query_sha256="cd" * 32), _aad(server=0)):
        with pytest.raises(env.EnvelopeError, match="cannot be opened"):
            env.open_sealed(blob, server, aad, 10)
    for at in (0, 33, 44, len(blob) - 1):
        tampered = bytearray(blob)
        tampered[at] ^= 1
        with pytest.raises(env.EnvelopeError, match="cannot be opened"):
            env.open_sealed(bytes(tampered), server, _aad(), 10)
    for length in (9, 11):
        with pytest.raises(env.EnvelopeError, match="bytes, not"):
            env.open_sealed(blob, server, _aad(), length)
    with pytest.raises(env.EnvelopeError, match="bytes, not"):
        env.open_sealed(blob + b"\0", server, _aad(), 10)
    with pytest.raises(ValueError):
        env.open_sealed(blob, server, _aad(), -1)
    with pytest.raises(ValueError):
        env.seal(share.reshape(2, 5), server.public_key(), _aad())
    with pytest.raises(ValueError):
        env.seal(share.astype(float), server.public_key(), _aad())


# ---- site signatures -------------------------------------------------------------------------


def test_site_signature(pki):
    cert, key = pki["site"]
    ca = pki["ca"][0]
    server = X25519PrivateKey.generate()
    blob = env.seal(np.arange(4, dtype=np.int64), server.public_key(), _aad())
    signature = env.sign(key, blob, _aad())
    env.check_signature(cert, ca, "site-3", blob, _aad(), signature)
    tampered = bytearray(blob)
    tampered[50] ^= 1
    with pytest.raises(env.EnvelopeError, match="does not verify"):
        env.check_signature(cert, ca, "site-3", bytes(tampered), _aad(), signature)
    with pytest.raises(env.EnvelopeError, match="does not verify"):
        env.check_signature(cert, ca, "site-3", blob, _aad(step=5), signature)
    with pytest.raises(env.EnvelopeError, match="does not verify"):
        env.check_signature(pki["site_other"][0], ca, "site-4", blob, _aad(), signature)
    with pytest.raises(env.EnvelopeError, match="not 'site-4'"):
        env.check_signature(cert, ca, "site-4", blob, _aad(), signature)
    with pytest.raises(env.EnvelopeError, match="not issued by"):
        env.check_signature(cert, pki["other_ca"][0], "site-3", blob, _aad(), signature)
    with pytest.raises(env.EnvelopeError, match="does not verify"):
        env.check_signature(cert, ca, "site-3", blob, _aad(), b"\x30\x00")
    with pytest.raises(env.EnvelopeError):
        env.check_signature(b"junk", ca, "site-3", blob, _aad(), signature)
    # the CA itself is no member
    with pytest.raises(env.EnvelopeError):
        env.check_signature(ca, ca, "site-3", blob, _aad(), signature)


# ---- wire ------------------------------------------------------------------------------------


def _pair():
    a, b = socket.socketpair()
    a.settimeout(10)
    b.settimeout(10)
    return a, b


def test_frame_round_trip():
    a, b = _pair()
    body = os.urandom(3 << 20)  # larger than the socket buffers: send from a thread
    header = {"kind": "share", "lengths": [1, 2], "ünï": "cödé", "nested": {"x": [None, True, 1.5]}}
    sender = threading.Thread(target=lambda: (wire.send_frame(a, header, body), wire.send_frame(a, {})))
    sender.start()
    assert wire.recv_frame(b) == (header, body)
    assert wire.recv_frame(b) == ({}, b"")
    sender.join()
    a.close()
    with pytest.raises(wire.PeerClosed):
        wire.recv_frame(b)
    b.close()


def _raw_frame(data: bytes, body: bytes = b"", body_len=None):
    return struct.pack(">IQ", len(data), len(body) if body_len is None else body_len) + data + body


def _recv(raw: bytes, close=True, **kw):
    a, b = _pair()
    try:
        a.sendall(raw)
        if close:
            a.close()
        return wire.recv_frame(b, **kw)
    finally:
        a.close()
        b.close()


def test_frame_oversize_refused_before_reading():
    # nothing follows the prefix and the writer stays open: a reader that waited for the body would hang
    with pytest.raises(wire.FrameError, match="body of 1099511627776 bytes"):
        _recv(struct.pack(">IQ", 2, 1 << 40), close=False)
    with pytest.raises(wire.FrameError, match="header of 2000000 bytes"):
        _recv(struct.pack(">IQ", 2_000_000, 0), close=False)
    with pytest.raises(wire.FrameError, match="body of 11 bytes"):
        _recv(_raw_frame(b"{}", b"x" * 11), max_body=10)


@pytest.mark.parametrize(
    "data, match",
    [
        (b"[1,2]", "not an object"),
        (b'"x"', "not an object"),
        (b'{"a":1,"a":2}', "repeats the key"),
        (b'{"a":NaN}', "NaN"),
        (b'{"a":-Infinity}', "Infinity"),
        (b'{"a":\xff}', "UTF-8"),
        (b"{", "not JSON"),
        (b"", "not JSON"),
        (b'{"a":1} x', "not JSON"),
        (b'{"a":' + b"[" * 64 + b"]" * 64 + b"}", "deeper than 64"),
        (b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}", "deeper than 64"),
    ],
)
def test_frame_bad_header(data, match):
    with pytest.raises(wire.FrameError, match=match):
        _recv(_raw_frame(data))


def test_frame_depth_limit_inclusive():
    header = {"a": json.loads("[" * 63 + "]" * 63)}
    assert _recv(_raw_frame(json.dumps(header).encode()))[0] == header


@pytest.mark.parametrize("cut", [1, 11, 12, 14, 20])
def test_frame_truncated(cut):
    raw = _raw_frame(b'{"a":1}', b"body...")
    with pytest.raises(wire.FrameError, match="middle of a frame"):
        _recv(raw[:cut])


def test_frame_send_refuses():
    a, b = _pair()
    with pytest.raises(TypeError):
        wire.send_frame(a, [1])
    with pytest.raises(ValueError):
        wire.send_frame(a, {"x": float("nan")})
    a.close()
    b.close()


def test_blobs():
    blobs = [b"abc", b"", b"\x00" * 5]
    lengths, body = wire.pack_blobs(blobs)
    assert lengths == [3, 0, 5] and body == b"abc" + b"\x00" * 5
    assert wire.unpack_blobs(lengths, body) == blobs
    assert wire.unpack_blobs([], b"") == []
    for bad in ([3, 0, 4], [3, 0, 6], [-1, 4, 5], [3, True, 4], [3.0, 0, 5], "385", (3, 0, 5), [None]):
        with pytest.raises(wire.FrameError):
            wire.unpack_blobs(bad, body)


# ---- no torch --------------------------------------------------------------------------------


def test_site_imports_no_torch():
    """A site (its client, its setup, the envelopes and frames) loads neither torch nor CrypTen."""
    code = (
        "import sys; import privsyn_fed.mpc.envelope, privsyn_fed.mpc.wire; "
        "import privsyn_fed.site.client, privsyn_fed.site.setup; "
        "print(sorted(m for m in ('torch', 'crypten') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_offer_low_order_key_refused(pki):
    cert, key = pki["server1"]
    low = bytes(32)  # the all-zero point: X25519 with it gives the all-zero secret
    ec_key = serialization.load_pem_private_key(key, None)
    signature = ec_key.sign(env.OFFER_LABEL + CONTEXT + b"\0" + low, ec.ECDSA(hashes.SHA256()))
    offer = {"cert": cert.decode(), "public": low.hex(), "signature": signature.hex()}
    with pytest.raises(env.EnvelopeError, match="low-order"):
        env.check_offer(offer, pki["ca"][0], "party-1", CONTEXT)
