"""An attacker on the link of a multi-host MPC release.

Three silo parties and the dealer each run in a network namespace of their own (``benchmarks/netns``:
10.231.0.1 .. 10.231.0.4, port 7100 + rank), provisioned with ``privsyn-fed federation init``; an
attacker runs in a fifth namespace on the same link (10.231.0.5, ``attacker_peer.py``), and a wiretap
on the link (the relay's ``tap``) keeps every packet. Party 0 runs ``synth --mpc --federation``, the
others ``mpc-party`` (each with its policy) and ``mpc-dealer``: real processes, sockets and TLS.

What the transport binds (``privsyn_fed/mpc/tls.py``): a member's ROLE is bound by its certificate
(issued by the federation's CA, naming the role as its common name and only DNS name and the
organisation the federation file gives, and pinned by SHA-256 in the file ``federation init``
writes). Its ADDRESS is bound only where a member dials: it connects to the address the file gives
and checks that the certificate there names the role it dialled. A member accepting a connection
takes it from any source address: whoever holds a member's certificate AND private key is that
member on the connections it opens, from anywhere, until the real member has connected (a second
connection for a role is refused). Every listener is open only while the mesh forms and is closed
once it is complete, so during the computation nothing listens.

Skipped, in one line, where network namespaces or a TUN device cannot be made (not root, no ``ip``).
"""

from __future__ import annotations

import datetime
import json
import os
import pickle
import random
import secrets
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import privsyn_fed as pf
from privsyn_fed.mpc import certs, tls
from privsyn_fed.mpc.aggregator import schema_fingerprint
from privsyn_fed.mpc.federation import load as load_federation
from privsyn_fed.silo import Silo

from .conftest import SCHEMA, assert_one_line_error, make_frame, never_opened, run_cli

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import netns  # noqa: E402

ATTACKER_SCRIPT = Path(__file__).with_name("attacker_peer.py")
PARTIES = 3
DEALER = PARTIES
ATTACKER = PARTIES + 1  # the namespace after the members'
PORT = 7100  # member k listens on PORT + k in its own namespace
DELAY_MS = 1.0
TIMEOUT_S = 90  # every member's --mpc-timeout
#: The real party 1's --mpc-timeout where an impersonator holds its place: it waits that long in any case
#: (``Mesh.join`` does not notice that every other member has left; see that test).
PARTY1_TIMEOUT_S = 20
ROWS = [300, 300, 300]
#: An attempt against a listener must be over within the handshake allowance and a little.
CLOSED_WITHIN_S = tls.HANDSHAKE_S + 3
#: Attempts on each port besides the replays (``suite``).
ATTEMPTS = 11


def addr(rank: int) -> str:
    """Member ``rank``'s address (namespace ``rank``); the attacker's is ``addr(ATTACKER)``."""
    return f"10.231.0.{rank + 1}"


def role(rank: int) -> str:
    return "dealer" if rank == DEALER else certs.party_role(rank)


def link_or_skip() -> str:
    """The relay (the only mechanism with a wiretap); skip in one line where it cannot be made."""
    by, why = netns.delay_mechanism()
    if by is None:
        pytest.skip(f"no network namespaces here: {why}")
    if by != netns.RELAY:
        try:
            os.close(netns.open_tun(f"pf{os.getpid()}probe"))
        except OSError as exc:
            pytest.skip(f"the wiretap needs the userspace relay, and there is no TUN device ({exc})")
    return netns.RELAY


# ---- the federation --------------------------------------------------------------------------------


@dataclass
class Kit:
    """A federation made with ``federation init`` for the namespaces' addresses, with the silos,
    the parties' policies and the attacker's certificates."""

    root: Path
    name: str
    orgs: list[str]
    schema: Path
    silos: list[Path]
    policies: dict[int, Path]
    creds: dict[str, tuple[str, str]] = field(default_factory=dict)  # the attacker's: cert, key

    def bundle(self, rank: int) -> Path:
        return self.root / "kit" / role(rank)

    def access(self, rank: int) -> list[str]:
        b = self.bundle(rank)
        return ["--federation", str(b / "federation.json"), "--cert", str(b / "cert.pem"), "--key", str(b / "key.pem")]


def make_kit(root: Path) -> Kit:
    """The schema, three silos, the federation's bundles (CLI), policies, and what the attacker holds:
    a self-signed certificate, one of another federation's CA, and a stolen copy of party 1's."""
    tag = secrets.token_hex(5)
    schema = root / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    silos = []
    for k, n in enumerate(ROWS):
        silos.append(root / f"silo{k}.csv")
        make_frame(n, seed=70 + k).to_csv(silos[-1], index=False)
    name = f"attacked-{tag}"
    orgs = [f"Org{k}-{tag}" for k in range(PARTIES + 1)]
    members = [f"{orgs[k]}@{addr(k)}:{PORT + k}" for k in range(PARTIES + 1)]
    args = ["federation", "init", "--out", root / "kit", "--name", name, "--schema", schema]
    for m in members[:PARTIES]:
        args += ["--party", m]
    done = run_cli(*args, "--dealer", members[DEALER], timeout=120)
    assert done.returncode == 0, done.stderr
    fp = schema_fingerprint(pf.Schema.load(schema))
    policies = {}
    for k in range(1, PARTIES):
        policies[k] = root / f"policy{k}.json"
        policies[k].write_text(
            json.dumps({"max_epsilon": 1.0, "max_delta": 1e-9, "methods": ["distaim"], "schema_sha256": fp})
        )
    kit = Kit(root, name, orgs, schema, silos, policies)
    loot = root / "attacker"
    loot.mkdir(mode=0o700)
    other_ca = certs.make_ca(f"other-{tag}", days=1)
    made = {
        "self-signed": self_signed("party-1", orgs[1]),
        "other-federation": certs.issue(other_ca, "party-1", orgs[1], days=1),
        "stolen": ((kit.bundle(1) / "cert.pem").read_bytes(), (kit.bundle(1) / "key.pem").read_bytes()),
    }
    for what, (cert_pem, key_pem) in made.items():
        certs.write_public(loot / f"{what}.pem", cert_pem)
        certs.write_private(loot / f"{what}.key", key_pem)
        kit.creds[what] = (str(loot / f"{what}.pem"), str(loot / f"{what}.key"))
    return kit


def self_signed(role_name: str, organisation: str) -> tuple[bytes, bytes]:
    """A certificate naming ``role_name`` of ``organisation`` exactly as a member's does, signed by its own key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, role_name),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, organisation),
        ]
    )
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(role_name)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), pem


class _Opens:
    """Pickles as ``open(path, "w")``: whoever unpickles it creates the file."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def live_pickle(marker: Path, control: Path) -> bytes:
    """The pickle that creates ``marker``, after checking on ``control`` that such a pickle works."""
    pickle.loads(pickle.dumps(_Opens(control))).close()  # our own bytes: proves the payload is live
    assert control.exists()
    control.unlink()
    return pickle.dumps(_Opens(marker))


def hello(kit: Kit, rank: int) -> bytes:
    """The hello member ``rank`` sends after its handshake (the federation file is public)."""
    fed = load_federation(kit.bundle(0) / "federation.json")
    body = {"version": tls.PROTOCOL, "federation": fed.name, "digest": tls.federation_digest(fed)}
    payload = json.dumps({**body, "parties": fed.parties, "rank": rank}, separators=(",", ":")).encode()
    return tls.pack_header(tls.HELLO, tls.MAIN, nbytes=len(payload)) + payload


# ---- the wiretap and what it heard ------------------------------------------------------------------


class Tap:
    """Every packet the relay carries (called in the relay's thread), up to ``CAP`` bytes."""

    CAP = 256 << 20

    def __init__(self):
        self.packets: list[bytes] = []
        self.bytes = 0

    def __call__(self, packet: bytes) -> None:
        if self.bytes < self.CAP:
            self.packets.append(packet)
            self.bytes += len(packet)

    def connections(self) -> list["Conn"]:
        return connections(list(self.packets))


@dataclass
class Conn:
    """One TCP connection heard on the link: who opened it, to whom, and the bytes each way."""

    client: tuple[str, int]
    server: tuple[str, int]
    up: bytearray = field(default_factory=bytearray)  # client to server
    down: bytearray = field(default_factory=bytearray)  # server to client

    def between_members(self) -> bool:
        members = {addr(k) for k in range(PARTIES + 1)}
        return self.client[0] in members and self.server[0] in members


SYN, ACK = 0x02, 0x10


def connections(packets: list[bytes]) -> list[Conn]:
    """The TCP connections in ``packets`` (IPv4, as the relay reads them), each direction's payload
    put together by sequence number (a retransmission lands where it belongs)."""
    found: list[Conn] = []
    by_ends: dict[tuple, Conn] = {}
    isn: dict[tuple, int] = {}
    for p in packets:
        if p[0] >> 4 != 4 or p[9] != socket.IPPROTO_TCP:
            continue
        ihl, total = (p[0] & 0xF) * 4, struct.unpack("!H", p[2:4])[0]
        segment = p[ihl:total]
        sport, dport, seq = struct.unpack("!HHI", segment[:8])
        flags, payload = segment[13], segment[(segment[12] >> 4) * 4 :]
        a, b = (socket.inet_ntoa(p[12:16]), sport), (socket.inet_ntoa(p[16:20]), dport)
        if flags & SYN:
            if not flags & ACK:  # a client's SYN: a new connection
                conn = Conn(a, b)
                by_ends[(a, b)] = conn
                found.append(conn)
            isn[(a, b)] = seq
            continue
        conn = by_ends.get((a, b)) or by_ends.get((b, a))
        if not payload or conn is None or (a, b) not in isn:
            continue
        buf = conn.up if conn.client == a else conn.down
        at = (seq - isn[(a, b)] - 1) % 2**32
        if len(buf) < at + len(payload):
            buf.extend(bytes(at + len(payload) - len(buf)))
        buf[at : at + len(payload)] = payload
    return found


HANDSHAKE, CHANGE_CIPHER_SPEC, ALERT, APPLICATION_DATA = 22, 20, 21, 23


def tls_records(stream: bytes) -> list[tuple[int, bytes]]:
    """``stream`` as TLS records (type, body); ``ValueError`` where it is anything else."""
    records, at = [], 0
    while at < len(stream):
        if at + 5 > len(stream):
            raise ValueError(f"a record header cut short at byte {at}")
        kind, version, length = (
            stream[at],
            int.from_bytes(stream[at + 1 : at + 3], "big"),
            int.from_bytes(stream[at + 3 : at + 5], "big"),
        )
        if kind not in (HANDSHAKE, CHANGE_CIPHER_SPEC, ALERT, APPLICATION_DATA) or version not in (0x0301, 0x0303):
            raise ValueError(f"not a TLS record at byte {at}: {bytes(stream[at : at + 5]).hex()}")
        if length > 2**14 + 256 or at + 5 + length > len(stream):
            raise ValueError(f"a record of {length} bytes at byte {at} does not fit")
        records.append((kind, bytes(stream[at + 5 : at + 5 + length])))
        at += 5 + length
    return records


def negotiated_version(server_hello: bytes) -> int | None:
    """The version a ServerHello's supported_versions extension selects (0x0304: TLS 1.3), if any."""
    if not server_hello or server_hello[0] != 2:
        return None
    at = 4 + 2 + 32  # handshake header, legacy version, random
    at += 1 + server_hello[at]  # session id
    at += 2 + 1  # cipher suite, compression
    end = at + 2 + int.from_bytes(server_hello[at : at + 2], "big")
    at += 2
    while at + 4 <= end:
        kind, size = (
            int.from_bytes(server_hello[at : at + 2], "big"),
            int.from_bytes(server_hello[at + 2 : at + 4], "big"),
        )
        if kind == 0x002B and size == 2:
            return int.from_bytes(server_hello[at + 4 : at + 6], "big")
        at += 4 + size
    return None


def markers(kit: Kit) -> dict[str, bytes]:
    """What plaintext frames or silo 1's data would put on the wire: the federation's name, the
    organisations (in the certificates, which TLS 1.3 encrypts), the schema's and federation file's
    hashes (release request, hello), the frames' layout and the command headers' JSON keys, silo 1's
    first row and each of its exact 1-way histograms (int64, and in CrypTen's 16-bit fixed point)."""
    fed = load_federation(kit.bundle(0) / "federation.json")
    schema = pf.Schema.load(kit.schema)
    found = {
        "the federation's name": kit.name.encode(),
        "the schema's sha256": schema_fingerprint(schema).encode(),
        "the federation file's digest": tls.federation_digest(fed).encode(),
        "a hello frame's header": tls.pack_header(tls.HELLO, tls.MAIN)[:8],
        "a hello's JSON": b'"version":1,"federation":',
        "a command header's layout key": b'"_arrays": [',
        "a command header's op key": b'{"op": "',
        "silo 1's first row": kit.silos[1].read_text().splitlines()[1].encode(),
    }
    found.update({f"organisation of {role(k)}": org.encode() for k, org in enumerate(kit.orgs)})
    silo = Silo.load(kit.silos[1], schema)
    for c, column in enumerate(schema.columns):
        h = silo.marginal((c,)).astype("<i8")
        found[f"silo 1's {column.name} histogram"] = h.tobytes()
        found[f"silo 1's {column.name} histogram, fixed point"] = (h << 16).tobytes()
    return found


# ---- the processes ----------------------------------------------------------------------------------


def start_member(net, kit: Kit, rank: int, logs: Path, out: Path, timeout_s: float = TIMEOUT_S):
    """Member ``rank`` in its namespace: party 0 runs ``synth``, parties ``mpc-party`` with their
    policy and ledger copy, the dealer ``mpc-dealer``; stdout to ROLE.out, stderr to ROLE.err."""
    if rank == 0:
        args = ["synth", "--method", "distaim", "--mpc", *kit.access(0), "--schema", str(kit.schema)]
        args += ["--silo", str(kit.silos[0]), "--epsilon", "1", "--delta", "1e-9", "--out", str(out)]
        args += ["--rounds", "2", "--quiet", "--mpc-timeout", str(timeout_s)]
    elif rank < PARTIES:
        args = ["mpc-party", *kit.access(rank), "--schema", str(kit.schema), "--silo", str(kit.silos[rank])]
        args += ["--policy", str(kit.policies[rank]), "--ledger", str(logs / f"party{rank}.ledger.json")]
        args += ["--mpc-timeout", str(timeout_s)]
    else:
        args = ["mpc-dealer", *kit.access(rank), "--mpc-timeout", str(timeout_s)]
    return net.start(rank, ["-m", "privsyn_fed", *args], logs / f"{role(rank)}.out", logs / f"{role(rank)}.err")


def listening(net, rank: int) -> bool:
    """Whether something listens on member ``rank``'s port in its namespace (its /proc/net/tcp)."""
    text = netns.sh("ip", "netns", "exec", net.ns[rank], "cat", "/proc/net/tcp")
    rows = [line.split() for line in text.splitlines()[1:]]
    return any(r[1].endswith(f":{PORT + rank:04X}") and r[3] == "0A" for r in rows)


def wait_until(check, what: str, procs: dict, logs: Path, timeout_s: float = 120.0) -> None:
    """Poll ``check`` (every 0.2 s, at most ``timeout_s``); fail early, with its stderr, if a member stops."""
    deadline = time.monotonic() + timeout_s
    while not check():
        for rank, p in procs.items():
            if p.poll() is not None:
                raise AssertionError(f"{role(rank)} stopped ({p.returncode}) before {what}: {tail(logs, rank)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout_s:g} s")
        time.sleep(0.2)


def tail(logs: Path, rank: int) -> str:
    return (logs / f"{role(rank)}.err").read_text(errors="replace")[-2000:]


def finish(procs: dict, timeout_s: float = 240.0) -> dict[int, int]:
    """Every member's exit status (each waited for, all within ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    return {rank: p.wait(timeout=max(1.0, deadline - time.monotonic())) for rank, p in procs.items()}


def attack(net, plan: list[dict], folder: Path, name: str) -> dict[str, dict]:
    """Run ``plan`` with ``attacker_peer.py`` in the attacker's namespace; its outcomes by attempt id."""
    report, plan_path = folder / f"{name}.report.json", folder / f"{name}.plan.json"
    plan_path.write_text(json.dumps({"report": str(report), "attempts": plan}))
    proc = net.start(ATTACKER, [str(ATTACKER_SCRIPT), str(plan_path)], folder / f"{name}.log")
    assert proc.wait(timeout=120) == 0, (folder / f"{name}.log").read_text()[-2000:]
    return {r["id"]: r for r in json.loads(report.read_text())}


def suite(kit: Kit, rank: int, payloads: dict[str, bytes], replays: list[bytes]) -> list[dict]:
    """Every attempt against member ``rank``'s port: garbage, a plaintext hello (the old plain-TCP
    transport's first frame), the pickle raw, nothing at all, then over TLS with no certificate, a
    self-signed one, one of another federation and the stolen party-1 one (the pickle; a frame
    carrying the pickle; a valid hello; nothing), and each replayed stream."""
    tried = [
        ("garbage", "raw", None, payloads["garbage"]),
        ("plaintext hello", "raw", None, payloads["hello"]),
        ("pickle", "raw", None, payloads["pickle"]),
        ("idle", "raw", None, b""),
        ("tls, no certificate, pickle", "tls", None, payloads["pickle"]),
        ("tls, self-signed party-1, pickle", "tls", "self-signed", payloads["pickle"]),
        ("tls, other federation's party-1, pickle", "tls", "other-federation", payloads["pickle"]),
        ("tls, stolen party-1, pickle", "tls", "stolen", payloads["pickle"]),
        ("tls, stolen party-1, pickle in a hello frame", "tls", "stolen", payloads["framed pickle"]),
        ("tls, stolen party-1, valid hello", "tls", "stolen", payloads["hello"]),
        ("tls, stolen party-1, silent", "tls", "stolen", b""),
    ]
    tried += [(f"replay {i}", "raw", None, data) for i, data in enumerate(replays)]
    return [
        {
            "id": f"{role(rank)}: {what}",
            "host": addr(rank),
            "port": PORT + rank,
            "sni": role(rank),
            "mode": mode,
            "cert": kit.creds[cred][0] if cred else None,
            "key": kit.creds[cred][1] if cred else None,
            "payload": data.hex(),
            "read_s": 15.0,
        }
        for what, mode, cred, data in tried
    ]


def not_refused(outcome: dict) -> str | None:
    """Why an attempt was not refused, or None: a refusal is no listener at all, or a connection the
    member closed within ``CLOSED_WITHIN_S`` having sent nothing but TLS records (raw) or no
    application byte at all (over TLS: no welcome, nothing)."""
    end = outcome.get("end") or ""
    if end == "connect refused":
        return None
    if not outcome.get("connected") or not (end.startswith("closed") or end.startswith("handshake failed")):
        return f"not closed by the member: {end}"
    if outcome["seconds"] > CLOSED_WITHIN_S:
        return f"closed only after {outcome['seconds']} s"
    received = bytes.fromhex(outcome["received"])
    if outcome["mode"] == "tls":
        return f"received {received[:16].hex()} after the handshake" if received else None
    try:
        tls_records(received)
    except ValueError as exc:
        return f"received bytes that are not TLS records ({exc})"
    return None


# ---- the attacked release ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """One release under attack. Parties 1, 2 and the dealer start first and mesh among themselves
    while they wait for party 0: meanwhile the attacker (phase A) tries every attack on their
    listeners, including replays of their handshakes heard on the link, and on party 0's port (no
    listener yet). Then party 0 starts the release; once a megabyte of it has crossed the link, the
    attacker (phase B) tries everything again on all four ports. The wiretap keeps every packet."""
    by = link_or_skip()
    root = tmp_path_factory.mktemp("attacked")
    logs = root / "logs"
    logs.mkdir()
    kit = make_kit(root)
    marker = root / "PWNED-by-a-pickle"
    pickle_bytes = live_pickle(marker, root / "control")
    payloads = {
        "garbage": random.Random(7).randbytes(4096),
        "hello": hello(kit, 1),
        "pickle": pickle_bytes,
        "framed pickle": tls.pack_header(tls.HELLO, tls.MAIN, nbytes=len(pickle_bytes)) + pickle_bytes,
    }
    out = root / "release.csv"
    tap = Tap()
    seen: dict = {"kit": kit, "marker": marker, "out": out, "logs": logs, "payloads": payloads}
    with netns.Network(PARTIES + 2, DELAY_MS, by, cwd=ROOT, tap=tap) as net:
        procs = {rank: start_member(net, kit, rank, logs, out) for rank in (1, 2, DEALER)}
        first = (1, 2, DEALER)
        wait_until(
            lambda: all(listening(net, r) for r in first), "listeners of parties 1, 2 and the dealer", procs, logs
        )

        def meshed() -> list[Conn]:
            done = [c for c in tap.connections() if c.between_members() and c.up and c.down]
            return done if len({(c.client[0], c.server) for c in done}) == 6 else []

        wait_until(lambda: bool(meshed()), "mesh among parties 1, 2 and the dealer", procs, logs)
        time.sleep(0.5)  # the hellos and welcomes
        replays = [bytes(c.up) for c in meshed()]
        plan = [a for rank in range(PARTIES + 1) for a in suite(kit, rank, payloads, replays)]
        seen["phase A"] = attack(net, plan, root, "phase-a")
        seen["marker after A"] = marker.exists()
        assert all(p.poll() is None for p in procs.values()), "a member stopped under phase A"

        mark = tap.bytes
        procs[0] = start_member(net, kit, 0, logs, out)
        wait_until(lambda: tap.bytes > mark + (1 << 20), "a megabyte of the release", procs, logs, 180)
        replays = [bytes(c.up[: 16 << 10]) for c in tap.connections() if c.between_members() and c.up]
        plan = [a for rank in range(PARTIES + 1) for a in suite(kit, rank, payloads, replays[:12])]
        seen["phase B"] = attack(net, plan, root, "phase-b")
        seen["party 0 running after B"] = procs[0].poll() is None
        seen["codes"] = finish(procs)
        seen["conns"] = tap.connections()
        seen["relay"] = (net.failure(), net.relay.summary() if net.relay else None)
    seen["marker at the end"] = marker.exists()
    return seen


def outcomes(seen: dict, phase: str, *, replay: bool) -> dict[str, dict]:
    return {k: v for k, v in seen[phase].items() if k.split(": ", 1)[1].startswith("replay") == replay}


def test_attacker_garbage_and_pickles_never_run_and_the_release_completes(attacked):
    logs = attacked["logs"]
    assert attacked["relay"][0] is None, attacked["relay"]
    # the release is written and audits, and so does each party's own ledger copy
    codes = attacked["codes"]
    assert codes == {0: 0, 1: 0, 2: 0, DEALER: 0}, {r: tail(logs, r) for r in codes}
    out = attacked["out"]
    assert out.exists() and len(out.read_text().splitlines()) > 100
    for ledger in [out.with_suffix(".ledger.json"), logs / "party1.ledger.json", logs / "party2.ledger.json"]:
        audit = run_cli("audit", ledger, timeout=120)
        assert audit.returncode == 0 and audit.stdout.startswith("OK"), (ledger, audit.stdout, audit.stderr)
    assert json.loads(out.with_suffix(".ledger.json").read_text())["status"] == "complete"
    # no pickle was ever loaded, by any member, at any time
    assert not attacked["marker after A"] and not attacked["marker at the end"]
    # phase A: parties 1, 2 and the dealer were listening and closed every attempt; party 0 was not there yet
    phase_a = outcomes(attacked, "phase A", replay=False)
    for rank in range(PARTIES + 1):
        mine = {k: v for k, v in phase_a.items() if k.startswith(f"{role(rank)}: ")}
        assert len(mine) == ATTEMPTS
        if rank == 0:
            assert all(v["end"] == "connect refused" for v in mine.values()), mine
        else:
            assert all(v["connected"] for v in mine.values()), mine
        problems = {k: not_refused(v) for k, v in mine.items() if not_refused(v)}
        assert not problems, problems
    # phase B, during the computation: nothing listens any more, on any member
    assert attacked["party 0 running after B"], "the release ended before phase B was over"
    phase_b = outcomes(attacked, "phase B", replay=False)
    assert len(phase_b) == ATTEMPTS * (PARTIES + 1)
    assert all(v["end"] == "connect refused" for v in phase_b.values()), phase_b


def test_attacker_certificates_other_than_the_members_own_are_refused_before_any_frame(attacked):
    """No certificate, a self-signed one or another federation's, each naming party-1 of party 1's
    organisation: the TLS handshake fails (the member sends a TLS alert), no frame is read. The
    stolen party-1 certificate and key pass the handshake (the address is not bound), but the
    pickle is not a hello, and even a valid hello (or none) is refused at once: party-1 is connected
    already (parties 2 and the dealer) or is the member itself (party 1). A connection that sends
    nothing is cut at the handshake deadline (``tls.HANDSHAKE_S``)."""
    phase_a = attacked["phase A"]
    for rank in range(1, PARTIES + 1):
        for cred in ("no certificate", "self-signed party-1", "other federation's party-1"):
            o = phase_a[f"{role(rank)}: tls, {cred}, pickle"]
            assert o["connected"] and not o["received"], o
            assert o["end"].startswith("handshake failed") or "TLS" in o["end"], o  # an alert, not a plain close
        for what in ("pickle", "pickle in a hello frame", "valid hello"):
            o = phase_a[f"{role(rank)}: tls, stolen party-1, {what}"]
            assert o["handshake"] and o.get("tls_version") == "TLSv1.3", o
            assert o["end"].startswith("closed") and not o["received"], o  # no welcome byte
    for rank in range(1, PARTIES + 1):
        o = phase_a[f"{role(rank)}: idle"]  # a connection that says nothing is cut at the handshake deadline
        assert o["end"].startswith("closed") and not o["received"], o
        assert tls.HANDSHAKE_S - 1 <= o["seconds"] <= CLOSED_WITHIN_S, o
        o = phase_a[f"{role(rank)}: tls, stolen party-1, silent"]  # refused on its certificate alone
        assert o["handshake"] and o["end"].startswith("closed") and not o["received"], o
        assert o["seconds"] < tls.HANDSHAKE_S - 1, o
    for rank in range(1, PARTIES + 1):  # the plaintext hello and the raw pickle get a TLS alert at most
        for what in ("garbage", "plaintext hello", "pickle"):
            o = phase_a[f"{role(rank)}: {what}"]
            kinds = [kind for kind, _ in tls_records(bytes.fromhex(o["received"]))]
            assert set(kinds) <= {ALERT}, o
    assert not attacked["marker at the end"]


def test_attacker_replays_of_captured_streams_are_refused(attacked):
    """Each stream a member sent to another (its ClientHello, certificate, Finished and hello, heard
    on the link while parties 1, 2 and the dealer waited for party 0) is replayed to every
    listener: TLS 1.3's fresh server randoms make the replayed Finished fail; nothing is welcomed.
    During the computation the first 16 KB of every member's stream are replayed: nothing listens."""
    phase_a = outcomes(attacked, "phase A", replay=True)
    assert len(phase_a) == 6 * (PARTIES + 1)
    for key, o in phase_a.items():
        assert not_refused(o) is None, (key, not_refused(o))
        if not key.startswith("party-0: "):
            assert o["connected"] and o["received"], o  # the member answered the ClientHello, then closed
    phase_b = outcomes(attacked, "phase B", replay=True)
    assert len(phase_b) >= 4 * (PARTIES + 1)
    assert all(o["end"] == "connect refused" for o in phase_b.values()), phase_b
    assert attacked["codes"][0] == 0


def test_attacker_on_the_link_hears_only_tls_13_records_never_the_markers(attacked):
    conns = [c for c in attacked["conns"] if c.between_members() and c.up]
    pairs = {(c.client[0], c.server) for c in conns}
    assert pairs == {(addr(a), (addr(b), PORT + b)) for a in range(PARTIES + 1) for b in range(PARTIES + 1) if a != b}
    heard = sum(len(c.up) + len(c.down) for c in conns)
    assert heard > 2 << 20, heard  # the release's shares crossed the link
    for c in conns:
        for direction, stream in (("up", c.up), ("down", c.down)):
            records = tls_records(stream)  # every byte belongs to a TLS record
            kinds = [kind for kind, _ in records]
            first = records[0][1]
            assert kinds[0] == HANDSHAKE and first[0] == (1 if direction == "up" else 2), (c.client, c.server)
            assert set(kinds[1:]) <= {CHANGE_CIPHER_SPEC, APPLICATION_DATA}, (c.client, c.server, set(kinds))
            assert APPLICATION_DATA in kinds
            if direction == "down":
                assert negotiated_version(first) == 0x0304  # TLS 1.3
    found = markers(attacked["kit"])
    leaks = {
        what: f"{c.client} -> {c.server}"
        for what, needle in found.items()
        for c in conns
        if needle in c.up or needle in c.down
    }
    assert not leaks, leaks
    # the wiretap does hear plaintext where there is some: the attacker's own raw attempts
    raw = b"".join(bytes(c.up) for c in attacked["conns"] if c.client[0] == addr(ATTACKER))
    assert attacked["payloads"]["pickle"] in raw and found["a hello's JSON"] in raw


def test_attacker_with_party_1s_stolen_key_connecting_first_makes_the_run_fail_closed(tmp_path):
    """The address is not bound: from the attacker's address, party 1's stolen certificate and key
    and a valid hello (built from the public federation file) are welcomed as party 1 by party 0,
    party 2 and the dealer while the real party 1 has not connected yet. The impersonator receives
    nothing but the welcome byte (every member sends to party 1 only on the connection it opens to
    party 1's address in the file). The real party 1 is then refused as a second party-1, and
    once the attacker hangs up the run fails closed: party 0 exits with one line, writes no CSV and
    no ledger of a release (nothing was read or opened); parties 1 and 2 never open their silos
    (party 0 reads only its own silo's header, a public fact checked before anything is reserved)."""
    by = link_or_skip()
    logs = tmp_path / "logs"
    logs.mkdir()
    kit = make_kit(tmp_path)
    marker = tmp_path / "PWNED-by-a-pickle"
    payload = live_pickle(marker, tmp_path / "control")
    out = tmp_path / "release.csv"
    # the other parties' silos under a write lease: a member opening its silo would block and break the lease
    with never_opened(*kit.silos[1:]) as opened, netns.Network(PARTIES + 2, DELAY_MS, by, cwd=ROOT) as net:
        procs = {rank: start_member(net, kit, rank, logs, out) for rank in (0, 2, DEALER)}
        wait_until(lambda: all(listening(net, r) for r in (0, 2, DEALER)), "listeners", procs, logs)
        plan = []
        for rank in (0, 2, DEALER):
            for a in suite(
                kit, rank, {"garbage": b"", "hello": hello(kit, 1), "pickle": payload, "framed pickle": b""}, []
            ):
                if a["id"].endswith("valid hello"):
                    plan.append({**a, "read_s": 12.0})  # holds party 1's place for 12 s
                elif a["id"].endswith((": pickle", "stolen party-1, pickle")):
                    plan.append(a)
        report_path = tmp_path / "hijack.report.json"
        (tmp_path / "hijack.plan.json").write_text(json.dumps({"report": str(report_path), "attempts": plan}))
        attacker = net.start(ATTACKER, [str(ATTACKER_SCRIPT), str(tmp_path / "hijack.plan.json")], tmp_path / "a.log")
        time.sleep(2.0)  # the attacker has connected
        procs[1] = start_member(net, kit, 1, logs, out, PARTY1_TIMEOUT_S)  # the real party 1 comes too late
        started = time.monotonic()
        assert attacker.wait(timeout=60) == 0, (tmp_path / "a.log").read_text()
        codes = finish(procs, 120)
        party1_s = time.monotonic() - started
        opened_silos = opened()
    print(f"the real party 1 gave up {party1_s:.0f} s after it started: {tail(logs, 1).strip()}")
    report = {r["id"]: r for r in json.loads(report_path.read_text())}
    for rank in (0, 2, DEALER):
        o = report[f"{role(rank)}: tls, stolen party-1, valid hello"]
        assert o["handshake"], o
        # what the design does today: the stolen identity is welcomed from another address...
        # ...and is sent nothing but the welcome byte; were addresses bound, it would be refused
        assert bytes.fromhex(o["received"]) in (tls.WELCOME, b""), o
        for what in ("pickle", "tls, stolen party-1, pickle"):
            assert not_refused(report[f"{role(rank)}: {what}"]) is None
    welcomed = [r for r in (0, 2, DEALER) if report[f"{role(r)}: tls, stolen party-1, valid hello"]["received"]]
    print(f"the stolen party-1 identity was welcomed from {addr(ATTACKER)} by {[role(r) for r in welcomed]}")
    # the run failed closed: party 0 says why in one line; no CSV, no ledger, no ledger copy
    assert all(code != 0 for code in codes.values()), codes
    line = assert_one_line_error((logs / "party-0.err").read_text())
    assert "party 1" in line or "party-1" in line, line
    assert not out.exists() and not out.with_suffix(".ledger.json").exists()
    assert not list(tmp_path.glob("logs/party*.ledger.json"))
    assert not marker.exists()
    assert not opened_silos, opened_silos


def test_attacker_tests_skip_in_one_line_without_namespaces(monkeypatch):
    """Where namespaces cannot be made, every test here skips, saying why in one line."""
    monkeypatch.setattr(netns, "delay_mechanism", lambda: (None, "network namespaces need root"))
    with pytest.raises(pytest.skip.Exception) as info:
        link_or_skip()
    assert str(info.value) == "no network namespaces here: network namespaces need root"
