"""An attacker at party 0's sites' port, and party 0 itself as the relay of the sites' sealed shares.

A real ``SiteHub`` listens on 127.0.0.1; honest sites are real ``Site`` objects in threads (or a real
``privsyn-fed site`` process); a hostile peer is this test process with raw sockets and TLS. Every
certificate is a real one: the throw-away federation's (``local_federation``: party-0..2, the dealer
and four sites) or one of another CA's.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.mpc import certs, envelope
from privsyn_fed.mpc.envelope import offer_context
from privsyn_fed.mpc.federation import federation_digest, schema_fingerprint
from privsyn_fed.mpc.launch import local_federation
from privsyn_fed.mpc.request import ReleaseRequest
from privsyn_fed.mpc.servers import ServersAggregator
from privsyn_fed.mpc.sites import SiteHub
from privsyn_fed.mpc.wire import pack_blobs, recv_frame, send_frame, unpack_blobs
from privsyn_fed.silo import MarginalsQuery, Silo
from privsyn_fed.site.client import Site, SiteSetup

from .conftest import SCHEMA, make_frame

S = 3  # compute servers
SITES = ["alpha", "beta", "mallory", "outsider"]  # "outsider" has a certificate, but no release lists it
MARKER_ROWS = 500
#: Every marker row is the same: each marginal holds MARKER_ROWS in one cell and 0 elsewhere.
MARKER_ROW = {"age": 30, "income": 50.0, "sex": "F", "region": "north", "label": "no"}
QUERY = MarginalsQuery(((0, 1, 3), (2, 4)))
SIGMA = {"sigma": 1e4, "label": "test sum"}


@dataclass
class Kit:
    folder: Path
    fed: object
    digest: str
    schema: object
    schema_path: Path
    fingerprint: str
    silos: dict

    def pem(self, role: str, kind: str = "pem") -> Path:
        return self.folder / f"{role}.{kind}"


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Kit:
    folder = tmp_path_factory.mktemp("sites")
    os.chmod(folder, 0o700)
    local = local_federation(folder, S, sites=SITES)
    schema_path = folder / "schema.json"
    schema_path.write_text(json.dumps(SCHEMA))
    schema = pf.Schema.load(schema_path)
    silos = {"alpha": folder / "alpha.csv", "beta": folder / "beta.csv"}
    pd.DataFrame([MARKER_ROW] * MARKER_ROWS).to_csv(silos["alpha"], index=False)
    make_frame(300, seed=5).to_csv(silos["beta"], index=False)
    fed = local.federation
    return Kit(folder, fed, federation_digest(fed), schema, schema_path, schema_fingerprint(schema), silos)


def make_hub(kit: Kit, names: tuple[str, ...]) -> SiteHub:
    """Party 0's sites' port on 127.0.0.1, an ephemeral port, for the release's ``names``."""
    organisations = {n: "this machine" for n in names}
    party0_tls = (kit.pem("party-0"), kit.pem("party-0", "key"))
    return SiteHub(
        kit.fed.name, kit.digest, kit.fed.ca_pem, *party0_tls, ("127.0.0.1", 0), names, organisations=organisations
    )


def start_site(kit: Kit, hub: SiteHub, name: str):
    """An honest ``Site`` running in a thread, pointed at ``hub``'s port; (thread, its output lines)."""
    fed = replace(kit.fed, sites=replace(kit.fed.sites, port=hub.port))
    setup = SiteSetup(
        name, str(kit.silos[name]), kit.schema, kit.fingerprint, fed, kit.digest,
        kit.pem(f"site-{name}"), kit.pem(f"site-{name}", "key"), connect_s=10.0,
    )  # fmt: skip
    lines: list[str] = []
    thread = threading.Thread(target=Site(setup, out=lines.append).run, daemon=True)
    thread.start()
    return thread, lines


def party0(kit: Kit, hub: SiteHub, method: str = "fedtda"):
    """Party 0 as ``ServersAggregator`` is once the servers offered their keys: its real methods
    (``_offer_release``, ``_begin_sites``, ``_collect``) on an object holding only what they read
    (no CrypTen world); and the three servers' X25519 keys, made from party-0..2's certificates."""
    release = secrets.token_hex(12)
    context = offer_context(kit.fed.name, release)
    made = [
        envelope.server_offer(kit.pem(f"party-{j}", "key").read_bytes(), kit.pem(f"party-{j}").read_bytes(), context)
        for j in range(S)
    ]
    agg = object.__new__(ServersAggregator)
    agg.__dict__.update(
        hub=hub, federation=kit.fed.name, ca_pem=kit.fed.ca_pem, release_id=release, servers=S, step=0,
        offers=[offer for _, offer in made], _key=made[0][0], _certs={}, _certs_sent=set(), schema=kit.schema,
        names=list(hub.names),
        request=ReleaseRequest(method, 1.0, 1e-6, kit.fingerprint, False, S, 1), begun=True, answer_s=10.0,
        approval_s=10.0,
    )  # fmt: skip
    return agg, [key for key, _ in made]


def tls_client(kit: Kit, port: int, role: str | None, files: tuple[Path, Path] | None = None) -> ssl.SSLSocket:
    """A TLS 1.3 client of the hub holding ``role``'s certificate (or ``files``, or none)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.load_verify_locations(cadata=kit.fed.ca_pem.decode("ascii"))
    if files or role:
        context.load_cert_chain(*(files or (kit.pem(role), kit.pem(role, "key"))))
    sock = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5), server_hostname="party-0")
    sock.settimeout(5)
    return sock


def hello(kit: Kit, site: str, **changes) -> dict:
    return {"op": "hello", "site": site, "federation": kit.fed.name, "digest": kit.digest, **changes}


def refused_after(hub: SiteHub, attempt) -> str:
    """Run ``attempt`` (a hostile connection); the refusal the hub records for it."""
    before = len(hub.refused)
    try:
        attempt()
    except (OSError, ValueError):
        pass  # the hub closed the connection or refused the handshake: what it must do
    deadline = time.monotonic() + 15
    while len(hub.refused) == before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(hub.refused) == before + 1, hub.refused
    return hub.refused[-1]


def reply_of(sock: ssl.SSLSocket) -> dict | None:
    """The hub's reply frame, or None when it closed the connection instead."""
    try:
        return recv_frame(sock, max_body=0)[0]
    except (OSError, ValueError):
        return None


# ---- 1. admission ------------------------------------------------------------------------------


def test_strangers_wrong_roles_and_bad_hellos_are_refused_and_recorded_and_a_proper_site_still_joins(kit, tmp_path):
    """Garbage, bad certificates/roles, lying or huge hellos, a duplicate: each refused, recorded; a site joins."""
    hub = make_hub(kit, names=("alpha", "beta"))
    other_ca = certs.make_ca("another federation", days=1)
    other = (tmp_path / "other.pem", tmp_path / "other.key")
    cert_pem, key_pem = certs.issue(other_ca, "site-alpha", "this machine", days=1)
    certs.write_public(other[0], cert_pem)
    certs.write_private(other[1], key_pem)
    replies: dict[str, dict | None] = {}

    def garbage():
        with socket.create_connection(("127.0.0.1", hub.port), timeout=5) as raw:
            raw.sendall(b"GET / HTTP/1.1\r\nHost: party-0\r\n\r\n" + os.urandom(64))
            raw.recv(100)

    def attempt(case, why, role=None, files=None, frame=None, prefix=b""):
        def run():
            with tls_client(kit, hub.port, role, files) as sock:
                if prefix:
                    sock.sendall(prefix)  # a size promised, the rest never sent
                if frame is not None:
                    send_frame(sock, frame)
                replies[case] = reply_of(sock)

        seen = refused_after(hub, run)
        assert why in seen, (case, seen)

    try:
        assert "SSL" in refused_after(hub, garbage)
        attempt("no certificate", "did not return a certificate", None, frame=hello(kit, "alpha"))
        attempt("other CA", "certificate verify failed", files=other, frame=hello(kit, "alpha"))
        attempt("party-1", "names party-1, not a site", "party-1", frame=hello(kit, "alpha"))
        attempt("dealer", "names dealer, not a site", "dealer", frame=hello(kit, "alpha"))
        attempt("outsider", "'outsider', not a site of this release", "site-outsider", frame=hello(kit, "outsider"))
        attempt("names beta", "first frame is not its hello", "site-alpha", frame=hello(kit, "beta"))
        other_fed = hello(kit, "alpha", federation="another")
        attempt("federation", "federation file differs", "site-alpha", frame=other_fed)
        attempt("digest", "federation file differs", "site-alpha", frame=hello(kit, "alpha", digest="0" * 64))
        big = json.dumps(hello(kit, "alpha")).encode()
        attempt("huge body", "over the limit of 0", "site-alpha", prefix=struct.pack(">IQ", len(big), 1 << 40) + big)
        attempt("huge header", "over the limit of 1048576", "site-alpha", prefix=struct.pack(">IQ", 1 << 31, 0))
        assert hub.links == {}, "no hostile connection may be admitted"

        first = tls_client(kit, hub.port, "site-alpha")
        send_frame(first, hello(kit, "alpha"))
        assert reply_of(first) == {"op": "welcome"}
        attempt("second", "connected already", "site-alpha", frame=hello(kit, "alpha"))

        def pong():
            send_frame(first, {"op": "pong", "to": recv_frame(first)[0]["op"]})

        worker = threading.Thread(target=pong, daemon=True)
        worker.start()
        got = hub.ask(["alpha"], lambda n: ({"op": "ping"}, b""), 5, states=("joined",))
        worker.join(5)
        assert got == {"alpha": ({"op": "pong", "to": "ping"}, b"")}, "the first connection keeps working"
        assert hub.links["alpha"].state == "joined"

        thread, _ = start_site(kit, hub, "beta")
        assert hub.wait(10) == ["alpha", "beta"]
        first.close()
    finally:
        hub.close({"op": "end", "status": "failed"})
    thread.join(10)
    assert not thread.is_alive()
    for case in ("federation", "digest", "second"):
        assert replies[case]["op"] == "refused", (case, replies[case])
    for case in ("party-1", "dealer", "outsider", "names beta", "huge body"):
        assert replies[case] is None, (case, replies[case])  # closed without a word


# ---- 2. hostile replies ------------------------------------------------------------------------


def hostile_site(kit: Kit, port: int, mode: str) -> threading.Thread:
    """Site ``mallory`` with its valid certificate: accepts the release, begins, then answers the
    first ``answer`` as ``mode`` says."""

    def run():
        with tls_client(kit, port, "site-mallory") as sock:
            send_frame(sock, hello(kit, "mallory"))
            assert recv_frame(sock, max_body=0)[0] == {"op": "welcome"}
            sock.settimeout(30)
            while True:
                try:
                    header, _ = recv_frame(sock)
                except (OSError, ValueError):
                    return  # dropped: the hub closed the connection
                if header["op"] in ("release", "begin"):
                    send_frame(sock, {"op": "accepted" if header["op"] == "release" else "ready"})
                elif header["op"] != "answer":
                    return
                elif mode == "garbage":
                    sock.sendall(b"\xde\xad\xbe\xef" * 64)
                elif mode == "blob lengths":
                    lengths, body = pack_blobs([os.urandom(100)] * (2 * S))
                    lengths[0] += 1
                    send_frame(sock, {"op": "shares", "step": header["step"], "lengths": lengths}, body)
                elif mode == "silent":
                    continue  # says nothing, until the hub drops it
                else:
                    return  # closes the socket

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    "mode, why",
    [
        ("garbage", "a malformed reply"),
        ("blob lengths", "its shares were refused: blob lengths sum to"),
        ("silent", "no answer within 1.5 s"),
        ("close", "closed its connection"),
    ],
)
def test_a_hostile_sites_reply_drops_it_and_the_honest_site_still_answers(kit, mode, why):
    """A site answering garbage, bad blob lengths, nothing, or closing is dropped; the honest shares still open."""
    hub = make_hub(kit, names=("mallory", "alpha"))
    try:
        agg, keys = party0(kit, hub)
        hostile = hostile_site(kit, hub.port, mode)
        thread, _ = start_site(kit, hub, "alpha")
        assert hub.wait(10) == ["mallory", "alpha"]
        agg._begin_sites(agg._offer_release(["mallory", "alpha"]))
        assert hub.active() == ["mallory", "alpha"]
        agg.answer_s = 1.5
        answered, mine, messages = agg._collect("noisy_sum", QUERY, ["mallory", "alpha"], SIGMA)
        assert answered == ["alpha"]
        assert hub.links["mallory"].state == "gone" and why in hub.links["mallory"].why, hub.links["mallory"].why
        assert hub.active() == ["alpha"]
        total = mine
        for j in (1, 2):
            cmd = messages[j][0]
            assert cmd["sites"] == ["alpha"] and len(cmd["lengths"]) == 2  # nothing of mallory's is relayed
            blob = sealed_for(messages, j)[0]
            aad = envelope.aad_of(kit.fed.name, agg.release_id, "alpha", j, agg.step, cmd["digest"])
            total = envelope.combine([total, envelope.open_sealed(blob, keys[j], aad, QUERY.size(kit.schema))])
        assert sorted(total.tolist()) == [0] * (len(total) - 2) + [MARKER_ROWS] * 2
        assert agg._collect("noisy_sum", QUERY, ["mallory", "alpha"], SIGMA)[0] == ["alpha"]
    finally:
        hub.close({"op": "end", "status": "failed"})
    thread.join(10)
    hostile.join(10)
    assert not thread.is_alive()


def test_a_large_frame_reaches_a_slow_reader_within_the_steps_time_whatever_its_last_reply_left(kit):
    """A big frame to a site that reads late gets the step's time, not the 50 ms its last receive left."""
    hub = make_hub(kit, names=("alpha", "mallory"))
    body, got = os.urandom(32 << 20), {}

    def raw_site(name: str, reply_after: float, read_after: tuple[float, ...]):
        with tls_client(kit, hub.port, f"site-{name}") as sock:
            send_frame(sock, hello(kit, name))
            assert recv_frame(sock, max_body=0)[0] == {"op": "welcome"}
            sock.settimeout(20)
            for pause in read_after:
                time.sleep(pause)
                got[name] = len(recv_frame(sock)[1])
                time.sleep(reply_after)
                send_frame(sock, {"op": "pong"})

    sites = (("alpha", 0.9, (0,)), ("mallory", 0, (0, 0.3)))
    threads = [threading.Thread(target=raw_site, args=a, daemon=True) for a in sites]
    try:
        for t in threads:
            t.start()
        assert hub.wait(10) == ["alpha", "mallory"]
        first = hub.ask(["alpha", "mallory"], lambda n: ({"op": "ping"}, b""), 1.0, states=("joined",))
        assert set(first) == {"alpha", "mallory"}
        second = hub.ask(["mallory"], lambda n: ({"op": "big"}, body), 10.0, states=("joined",))
        assert second == {"mallory": ({"op": "pong"}, b"")}, hub.links["mallory"].why
        assert got["mallory"] == len(body)
    finally:
        hub.close({"op": "end"})
    for t in threads:
        t.join(10)


# ---- 3. the envelopes in party 0's relay -------------------------------------------------------


def sealed_for(messages, j: int) -> list[bytes]:
    """Server ``j``'s relayed blobs (sealed share, signature, ...) of ``_collect``'s messages."""
    cmd, arrays = messages[j]
    return unpack_blobs(cmd["lengths"], arrays["_sealed"].tobytes()[: sum(cmd["lengths"])])


def test_the_relay_cannot_open_or_rebind_shares_and_each_server_sees_uniform_noise(kit):
    """The relay opens only server 0's shares; each server's are uniform, rebound ones or forged signatures fail."""
    hub = make_hub(kit, names=("alpha",))
    size, steps = QUERY.size(kit.schema), 40
    try:
        agg, keys = party0(kit, hub)
        thread, lines = start_site(kit, hub, "alpha")
        assert hub.wait(10) == ["alpha"]
        agg._begin_sites(agg._offer_release(["alpha"]))
        assert hub.active() == ["alpha"]
        opened = np.zeros((S, steps, size), dtype=np.int64)
        alpha_cert = kit.pem("site-alpha").read_bytes()
        truth = QUERY(Silo.load(kit.silos["alpha"], kit.schema))
        assert sorted(truth.tolist())[-3:] == [0, MARKER_ROWS, MARKER_ROWS]
        for t in range(steps):
            answered, mine, messages = agg._collect("noisy_sum", QUERY, ["alpha"], SIGMA)
            assert answered == ["alpha"]
            digest = messages[0][0]["digest"]
            for j in range(S):
                blob, signature = sealed_for(messages, j)
                aad = envelope.aad_of(kit.fed.name, agg.release_id, "alpha", j, agg.step, digest)
                envelope.check_signature(alpha_cert, kit.fed.ca_pem, "site-alpha", blob, aad, signature)
                opened[j, t] = envelope.open_sealed(blob, keys[j], aad, size)
                if j:  # (a) party 0 holds server 0's key only: it cannot open what it relays
                    with pytest.raises(envelope.EnvelopeError):
                        envelope.open_sealed(blob, agg._key, aad, size)
                    own = envelope.aad_of(kit.fed.name, agg.release_id, "alpha", 0, agg.step, digest)
                    with pytest.raises(envelope.EnvelopeError):
                        envelope.open_sealed(blob, agg._key, own, size)
            np.testing.assert_array_equal(opened[0, t], mine)
            np.testing.assert_array_equal(envelope.combine(list(opened[:, t])), truth)

        # (b) each server's shares alone: no marker, every bit balanced, the marker cell never repeats
        marker = int(np.argmax(truth))
        for j in range(S):
            values = opened[j].ravel()
            assert MARKER_ROWS not in values and not np.any(opened[j] == truth)
            bits = (values.view(np.uint64)[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
            share = bits.mean(axis=0)  # sd 0.5 / sqrt(40 * 196) = 0.0056: 0.03 is 5.3 sd
            assert np.all(np.abs(share - 0.5) < 0.03), (j, share.min(), share.max())
            assert len(set(opened[j, :, marker].tolist())) == steps

        # (c) a share re-bound to a later step, another site or another query does not open
        blob, signature = sealed_for(messages, 1)
        for site, step, query in (
            ("alpha", agg.step + 1, digest),
            ("beta", agg.step, digest),
            ("alpha", agg.step, "0" * 64),
        ):
            with pytest.raises(envelope.EnvelopeError):
                envelope.open_sealed(
                    blob, keys[1], envelope.aad_of(kit.fed.name, agg.release_id, site, 1, step, query), size
                )
        aad = envelope.aad_of(kit.fed.name, agg.release_id, "alpha", 1, agg.step, digest)
        # (d) a signature of another site's key does not verify as alpha's, nor alpha's as beta's
        forged = envelope.sign(kit.pem("site-beta", "key").read_bytes(), blob, aad)
        for cert, role, sig in (("site-alpha", "site-alpha", forged), ("site-beta", "site-beta", signature)):
            with pytest.raises(envelope.EnvelopeError, match="does not verify"):
                envelope.check_signature(kit.pem(cert).read_bytes(), kit.fed.ca_pem, role, blob, aad, sig)

        # (e) a step that does not increase, and kinds fedtda does not answer, are refused; the site stays
        header = QUERY.to_wire()[0]
        ask = {"op": "answer", "kind": "noisy_sum", "query": header, "arrays": [], **SIGMA}
        for frame in (
            {**ask, "step": agg.step},
            {**ask, "step": agg.step - 5},
            {**ask, "step": agg.step + 1, "kind": "pool_add"},
            {"op": "local_select", "step": agg.step + 2, "query": header, "arrays": [], "scale": 1.0},
            {**ask, "step": agg.step + 3, "query": {"kind": "sql", "text": "SELECT * FROM silo"}},
        ):
            assert hub.ask(["alpha"], lambda n: (frame, b""), 10) == {}
            assert hub.active() == ["alpha"]
        agg.step += 3
        assert agg._collect("noisy_sum", QUERY, ["alpha"], SIGMA)[0] == ["alpha"]
    finally:
        hub.close({"op": "end", "status": "failed"})
    thread.join(10)
    assert not thread.is_alive()
    refusals = [line for line in lines if line.startswith("refused")]
    assert len(refusals) == 5, lines
    assert "does not follow step" in refusals[0] and "does not follow step" in refusals[1]
    assert "pool_add is not a step of fedtda" in refusals[2] and "local_select is not a step of fedtda" in refusals[3]
    assert "a query this site does not answer" in refusals[4]


# ---- 4. a site opens no port -------------------------------------------------------------------


def tcp_sockets(pid: int) -> dict[int, tuple[str, int, int]]:
    """The process's TCP sockets, by inode: (state, local port, remote port), from /proc."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}") if os.path.exists(f"/proc/{pid}/fd/{fd}") else ""
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    found = {}
    for table in ("tcp", "tcp6", "udp", "udp6"):
        with open(f"/proc/{pid}/net/{table}") as fh:
            for row in fh.read().splitlines()[1:]:
                f = row.split()
                if int(f[9]) in inodes:
                    found[int(f[9])] = (table + ":" + f[3], int(f[1].split(":")[1], 16), int(f[2].split(":")[1], 16))
    return found


def test_a_site_process_holds_one_outward_connection_and_listens_on_nothing(kit, tmp_path):
    """A connected ``privsyn-fed site`` process listens on nothing (/proc) and holds one TCP connection, to the hub."""
    os.chmod(tmp_path, 0o700)
    local = local_federation(tmp_path, S, sites=["alpha"])
    fed = local.federation
    hub = SiteHub(
        fed.name, federation_digest(fed), fed.ca_pem, tmp_path / "party-0.pem", tmp_path / "party-0.key",
        ("127.0.0.1", fed.sites.port), ["alpha"],
    )  # fmt: skip
    argv = [
        "site",
        "run",
        "--federation",
        local.path,
        "--schema",
        kit.schema_path,
        "--cert",
        tmp_path / "site-alpha.pem",
    ]
    argv += ["--key", tmp_path / "site-alpha.key", "--silo", kit.silos["alpha"], "--connect-timeout", "20"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "privsyn_fed", *map(str, argv)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        assert hub.wait(60) == ["alpha"], hub.refused
        assert proc.poll() is None
        sockets = tcp_sockets(proc.pid)
        link = hub.links["alpha"].sock
        assert not [s for s in sockets.values() if s[0].endswith(":0A")], sockets  # 0A: LISTEN
        assert list(sockets.values()) == [("tcp:01", link.getpeername()[1], hub.port)], sockets  # 01: ESTABLISHED
        hub.close({"op": "end", "status": "failed"})
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 1 and "went away" not in out + err, (out, err)  # it ended on "end"
    finally:
        hub.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
