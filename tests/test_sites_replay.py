"""A wiretap between a site and party 0's sites' port: what it hears, and what replaying it does.

An honest ``Site`` connects to a real ``SiteHub`` through a relay in this process that keeps every
byte the site sends. The tap hears TLS 1.3 records only (never the site's name, its hello or a
count of its silo); the recorded stream, replayed to the hub on a new connection, is refused, and
the honest site's connection goes on answering.
"""

from __future__ import annotations

import socket
import threading
import time

from privsyn_fed.site.client import Site, SiteSetup

from .test_sites_attacker import QUERY, SIGMA, kit, make_hub, party0  # noqa: F401  (kit: a fixture)


class Tap:
    """A TCP relay from a port of its own to ``target``, keeping what the client sends."""

    def __init__(self, target: int):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target = target
        self.heard = bytearray()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        client, _ = self.listener.accept()
        server = socket.create_connection(("127.0.0.1", self.target))
        threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
        self._pipe(server, client, False)

    def _pipe(self, src: socket.socket, dst: socket.socket, keep: bool) -> None:
        try:
            while chunk := src.recv(1 << 16):
                if keep:
                    self.heard += chunk
                dst.sendall(chunk)
        except OSError:
            pass


def test_a_tap_hears_only_tls_records_and_a_replayed_stream_is_refused(kit):  # noqa: F811
    """The bytes a site sends are TLS 1.3 records (handshake, then application data) with neither
    its name, its hello nor its answer in them; replayed on a new connection they are refused and
    recorded, and the honest site still answers the next step."""
    from dataclasses import replace

    hub = make_hub(kit, names=("alpha", "beta"))
    tap = Tap(hub.port)
    try:
        tapped = replace(kit.fed, sites=replace(kit.fed.sites, port=tap.port))
        setup = SiteSetup(
            "alpha", str(kit.silos["alpha"]), kit.schema, kit.fingerprint, tapped, kit.digest,
            kit.pem("site-alpha"), kit.pem("site-alpha", "key"), connect_s=10.0,
        )  # fmt: skip
        threading.Thread(target=Site(setup, out=lambda line: None).run, daemon=True).start()
        deadline = time.monotonic() + 20
        while "alpha" not in hub.links and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "alpha" in hub.links, hub.refused
        agg, _ = party0(kit, hub)
        assert agg._offer_release(["alpha"]) == ["alpha"]
        agg._begin_sites(["alpha"])
        answered, _, _ = agg._collect("noisy_sum", QUERY, ["alpha"], SIGMA)
        assert answered == ["alpha"]
        time.sleep(0.2)
        heard = bytes(tap.heard)
        assert heard[:1] == b"\x16" and len(heard) > 1000  # a TLS handshake record first, then the rest
        for secret in (b"alpha", b'"op"', b"hello", (500).to_bytes(8, "little")):  # 500: the marker's count
            assert secret not in heard[5:], secret
        before = len(hub.refused)
        replay = socket.create_connection(("127.0.0.1", hub.port), timeout=5)
        try:
            replay.sendall(heard)
            replay.settimeout(5)
            try:
                while replay.recv(1 << 16):
                    pass
            except OSError:
                pass
        finally:
            replay.close()
        deadline = time.monotonic() + 15
        while len(hub.refused) == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(hub.refused) == before + 1, hub.refused
        assert hub.links["alpha"].state == "active"
        answered, _, _ = agg._collect("noisy_sum", QUERY, ["alpha"], SIGMA)
        assert answered == ["alpha"]
    finally:
        hub.close({"op": "end", "status": "failed"})
