"""The site role: a silo's light process that answers declared queries and shares each answer
with the compute servers; numpy, TLS and `cryptography` only, no torch.

* ``envelope``: additive shares over Z_{2^64}, the servers' signed X25519 keys, sealing a share for
  one server (X25519, HKDF-SHA256, AES-256-GCM) and the site's ECDSA signature over it;
* ``wire``: length-prefixed JSON-and-body frames over a stream socket.
"""
