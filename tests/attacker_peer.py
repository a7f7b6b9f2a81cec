"""The attacker of ``test_federation_attacker``: run as a script in its own network namespace.

``python attacker_peer.py PLAN.json`` makes every connection attempt the plan lists, all at once
(threads, at most ``MAX_ATTEMPTS``), and writes what happened to the plan's ``report`` file (JSON).
Each attempt connects to ``host:port`` (a federation member's address inside the test's namespaces,
never anything else) and either sends ``payload`` as it is (``mode`` raw) or first makes a TLS
handshake, presenting ``cert``/``key`` if given, and then sends it (``mode`` tls). Then it reads
until the other side closes, the connection breaks, or ``read_s`` has passed, and records the
outcome: whether TCP connected, whether the handshake completed, the bytes received (raw: as they
came; tls: the application bytes after the handshake), how it ended and when.

Standard library only: it imports nothing of the package it attacks.
"""

from __future__ import annotations

import json
import socket
import ssl
import sys
import threading
import time

#: The most attempts one plan may hold, and the most bytes one attempt records.
MAX_ATTEMPTS = 96
MAX_RECEIVED = 1 << 20


def attempt(spec: dict) -> dict:
    """One connection attempt (see the module's docstring); its outcome as a dict."""
    out = {"id": spec["id"], "mode": spec["mode"], "connected": False, "handshake": None, "received": "", "end": None}
    start = time.monotonic()
    out["started"] = time.time()
    payload = bytes.fromhex(spec["payload"])
    read_s = float(spec.get("read_s", 15.0))
    got = bytearray()
    sock = None
    try:
        try:
            sock = socket.create_connection((spec["host"], int(spec["port"])), timeout=5.0)
        except ConnectionRefusedError:
            out["end"] = "connect refused"
            return out
        except OSError as exc:
            out["end"] = f"connect failed: {exc.strerror or exc}"
            return out
        out["connected"] = True
        sock.settimeout(5.0)
        if spec["mode"] == "tls":
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE  # the attacker does not care who answers
            if spec.get("cert"):
                context.load_cert_chain(spec["cert"], spec["key"])
            try:
                sock = context.wrap_socket(sock, server_hostname=spec.get("sni") or None)
                out["handshake"] = True
                out["tls_version"] = sock.version()
            except (ssl.SSLError, OSError) as exc:
                out["handshake"] = False
                out["end"] = f"handshake failed: {describe(exc)}"
                return out
        try:
            sock.sendall(payload)
        except (ssl.SSLError, OSError) as exc:
            out["send_error"] = describe(exc)
        deadline = start + read_s
        while len(got) < MAX_RECEIVED:
            left = deadline - time.monotonic()
            if left <= 0:
                out["end"] = "still open"
                break
            sock.settimeout(left)
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                out["end"] = "still open"
                break
            except (ssl.SSLError, OSError) as exc:
                out["end"] = f"closed: {describe(exc)}"
                break
            if not chunk:
                out["end"] = "closed: end of stream"
                break
            got += chunk
        else:
            out["end"] = "received too much"
    finally:
        out["received"] = bytes(got).hex()
        out["seconds"] = round(time.monotonic() - start, 3)
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
    return out


def describe(exc: BaseException) -> str:
    """An error in a few words: the TLS reason, or the socket error's name."""
    if isinstance(exc, ssl.SSLError):
        return f"TLS {exc.reason or exc}"
    return type(exc).__name__ + (f" ({exc.strerror})" if getattr(exc, "strerror", None) else "")


def main(plan_path: str) -> int:
    """Run the plan's attempts together and write the report; 0."""
    with open(plan_path) as fh:
        plan = json.load(fh)
    specs = plan["attempts"]
    if len(specs) > MAX_ATTEMPTS:
        raise SystemExit(f"at most {MAX_ATTEMPTS} attempts, not {len(specs)}")
    results: list[dict | None] = [None] * len(specs)

    def run(k: int) -> None:
        try:
            results[k] = attempt(specs[k])
        except Exception as exc:  # recorded, never fatal: the report must be written
            results[k] = {"id": specs[k]["id"], "end": f"attacker error: {exc!r}"}

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(len(specs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60.0)
    report = [r if r is not None else {"id": s["id"], "end": "attacker thread hung"} for r, s in zip(results, specs)]
    with open(plan["report"], "w") as fh:
        json.dump(report, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
