"""The MPC transport: frames and objects, certificates, the federation file, role binding on real
TLS sockets, CrypTen's collectives across real processes, and a killed peer. Loopback only."""

from __future__ import annotations

import json
import os
import pickle
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from privsyn_fed.common import InputError
from privsyn_fed.mpc import certs, tls
from privsyn_fed.mpc import federation as federation_file
from privsyn_fed.mpc.launch import local_federation

CLI = [sys.executable, "-m", "privsyn_fed"]
ROOT = Path(__file__).resolve().parent.parent


def one_line(run: subprocess.CompletedProcess, *fragments: str, status: int) -> str:
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert run.returncode == status and len(lines) == 1, run.stderr
    assert "Traceback" not in run.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# ---- frames and objects -----------------------------------------------------------------------


def header(kind=tls.TENSOR, channel=tls.MAIN, dtype=1, ndim=1, reserved=0, nbytes=8, magic=tls.MAGIC) -> bytes:
    return tls.HEADER.pack(magic, kind, channel, dtype, ndim, reserved, nbytes)


@pytest.mark.parametrize(
    "raw, problem",
    [
        (header(magic=b"\x80\x04\x95\x00"), "bad magic"),  # the first bytes of a pickle
        (header(kind=9), "unknown frame kind"),
        (header(channel=7), "unknown channel"),
        (header(dtype=0), "unknown element type"),
        (header(ndim=9), "9 dimensions"),
        (header(nbytes=tls.MAX_TENSOR_BYTES + 8), "a tensor of"),
        (header(reserved=1), "reserved"),
        (header(kind=tls.OBJ, dtype=0, ndim=0, nbytes=tls.MAX_OBJ_BYTES + 1), "an object of"),
        (header(kind=tls.OBJ, dtype=1, ndim=0, nbytes=4), "element type or dimensions"),
        (header(kind=tls.BARRIER, dtype=0, ndim=0, nbytes=1), "with a payload"),
        (header()[:-1], "a header has"),
    ],
)
def test_a_malformed_header_is_refused(raw, problem):
    with pytest.raises(tls.FrameError, match=problem):
        tls.unpack_header(raw)


def test_a_tensor_frame_must_add_up():
    assert tls.check_shape((2, 3), 1, 48) == 6
    with pytest.raises(tls.FrameError, match="do not make"):
        tls.check_shape((2, 3), 1, 40)
    with pytest.raises(tls.FrameError, match="negative"):
        tls.check_shape((-2, -3), 1, 48)


def test_objects_round_trip_only_as_tagged_json():
    import torch

    request = {
        "function": "additive",
        "device": None,
        "args": (torch.Size([3, 4]), torch.Size([4]), "mul"),
        "kwargs": {},
    }
    back = tls.decode_obj(tls.encode_obj(request))
    assert back == request and isinstance(back["args"], tuple) and isinstance(back["args"][0], torch.Size)
    assert tls.decode_obj(tls.encode_obj("terminate")) == "terminate"
    for bad in [1.5, b"x", object(), {1: 2}, {"$size": 1}, 2**64]:
        with pytest.raises(TypeError):
            tls.encode_obj(bad)


@pytest.mark.parametrize(
    "raw",
    [
        pickle.dumps({"function": "additive"}),
        b'{"a": 1.5}',
        b'{"a": NaN}',
        b'{"a": 1, "a": 2}',
        b'{"$pickle": "gASV"}',
        b'{"$size": [-1]}',
        b'{"$size": [1], "x": 2}',
        b"[" * 40 + b"]" * 40,
        b"18446744073709551616",
        b"\xff\xfe",
    ],
)
def test_an_object_that_is_not_tagged_json_is_refused(raw):
    with pytest.raises(tls.FrameError):
        tls.decode_obj(raw)


def test_the_dealer_receives_no_tensor_and_talks_only_on_its_channels():
    n = 3
    for channel in tls.CHANNEL_NAMES:
        for src in range(n):
            assert not tls.allowed(src, n, tls.TENSOR, channel, n)  # never a tensor to the dealer
    assert tls.allowed(0, n, tls.OBJ, tls.TTP, n) and not tls.allowed(1, n, tls.OBJ, tls.TTP, n)
    assert tls.allowed(n, 0, tls.TENSOR, tls.TTP_COMM, n) and not tls.allowed(n, 1, tls.TENSOR, tls.TTP_COMM, n)
    for channel in (tls.MAIN, tls.COMMAND):
        assert not tls.allowed(n, 0, tls.TENSOR, channel, n) and not tls.allowed(0, n, tls.BARRIER, channel, n)
    assert tls.allowed(1, 2, tls.TENSOR, tls.MAIN, n) and not tls.allowed(1, 2, tls.TENSOR, tls.TTP, n)


def test_the_dealer_serves_only_cryptens_requests():
    import torch

    from privsyn_fed.common import MPCError
    from privsyn_fed.mpc.dealer import check_request

    s = torch.Size
    ok = {"function": "additive", "device": None, "args": (s([5, 1]), s([1, 4]), "mul"), "kwargs": {}}
    assert check_request(ok) == ("additive", (s([5, 1]), s([1, 4]), "mul"))
    assert check_request({**ok, "function": "B2A", "args": (s([7]),), "device": "cpu"})[0] == "B2A"
    for bad in [
        {**ok, "args": (s([5]), s([4]), "__import__")},
        {**ok, "args": (s([5, 2]), s([3, 4]), "matmul")},
        {**ok, "function": "system"},
        {**ok, "device": "cuda"},
        {**ok, "kwargs": {"out": 1}},
        {**ok, "args": (s([1 << 20, 1 << 20]), s([1]), "mul")},
        {**ok, "extra": 1},
        "anything else",
    ]:
        with pytest.raises(MPCError):
            check_request(bad)


# ---- certificates and the federation file ----------------------------------------------------


def test_certificates_name_their_role_and_keys_are_private(tmp_path):
    ca = certs.make_ca("test")
    cert, key = certs.issue(ca, "party-1", "Hospital B", days=1 / 24)
    who = certs.identity(cert)
    assert (who.role, who.organisation) == ("party-1", "Hospital B")
    assert who.sha256 == certs.fingerprint(cert)
    certs.write_private(tmp_path / "k.pem", key)
    assert (tmp_path / "k.pem").stat().st_mode & 0o777 == 0o600
    with pytest.raises(FileExistsError):
        certs.write_private(tmp_path / "k.pem", key)
    certs.write_private(tmp_path / "k.pem", key, overwrite=True)
    assert (tmp_path / "k.pem").stat().st_mode & 0o777 == 0o600
    (tmp_path / "c.pem").write_bytes(cert)
    assert certs.load_credentials(tmp_path / "c.pem", tmp_path / "k.pem").identity.role == "party-1"
    certs.check_issued_by(cert, ca[0], "c.pem")
    with pytest.raises(InputError, match="not issued by the federation's CA"):
        certs.check_issued_by(cert, certs.make_ca("other")[0], "c.pem")
    other_key = certs.issue(ca, "party-1", "Hospital B")[1]
    certs.write_private(tmp_path / "other.pem", other_key)
    with pytest.raises(InputError, match="not the private key"):
        certs.load_credentials(tmp_path / "c.pem", tmp_path / "other.pem")
    os.chmod(tmp_path / "k.pem", 0o644)
    with pytest.raises(InputError, match="chmod 600"):
        certs.load_credentials(tmp_path / "c.pem", tmp_path / "k.pem")
    with pytest.raises(ValueError):
        certs.issue(ca, "admin", "Hospital B")
    assert certs.check_role(cert, "party-1").organisation == "Hospital B"
    with pytest.raises(InputError, match="names party-1, not dealer"):
        certs.check_role(cert, "dealer")
    # an existing CA, read back from its files, issues more certificates
    (tmp_path / "ca.pem").write_bytes(ca[0])
    certs.write_private(tmp_path / "ca.key", ca[1])
    again = certs.load_ca(tmp_path / "ca.pem", tmp_path / "ca.key")
    certs.check_issued_by(certs.issue(again, "dealer", "Trust D")[0], ca[0], "dealer.pem")
    with pytest.raises(InputError, match="not a CA certificate"):
        certs.load_ca(tmp_path / "c.pem", tmp_path / "ca.key")
    with pytest.raises(InputError, match="not the private key of the CA"):
        certs.load_ca(tmp_path / "ca.pem", tmp_path / "other.pem")


@pytest.fixture
def fed_dir(tmp_path):
    folder = tmp_path / "fed"
    folder.mkdir(mode=0o700)
    return local_federation(folder, 2)


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda d: d["members"].reverse(), "members[0].role"),
        (lambda d: d["members"][1].update(port=0), "members[1].port"),
        (lambda d: d["members"][1].update(port="80"), "members[1].port"),
        (lambda d: d["members"][2].update(port=d["members"][0]["port"]), "members[2].port"),
        (lambda d: d["members"][0].update(colour="red"), "members[0].colour"),
        (lambda d: d["members"][0].pop("organisation"), "members[0].organisation"),
        (lambda d: d["members"][0].update(sha256="abc"), "members[0].sha256"),
        (lambda d: d.update(members=d["members"][1:]), "members: a list of at least 2 silo parties"),
        (lambda d: d.update(ca="nowhere.pem"), "ca: cannot read"),
        (lambda d: d.update(ca="party-0.pem"), "a member's certificate"),
        (lambda d: d.update(federation=""), "federation"),
        (lambda d: d.update(schema_sha256="xyz"), "schema_sha256"),
        (lambda d: d.update(rendezvous="tcp://h:1"), "rendezvous: unknown field"),
    ],
)
def test_a_bad_federation_file_is_one_line_naming_the_field(fed_dir, change, field):
    data = json.loads(fed_dir.path.read_text())
    change(data)
    bad = fed_dir.path.with_name("bad.json")
    bad.write_text(json.dumps(data))
    with pytest.raises(InputError) as info:
        federation_file.load(bad)
    assert str(info.value).startswith(f"{bad}: ") and field in str(info.value) and "\n" not in str(info.value)


# ---- the mesh on real sockets: who gets in -----------------------------------------------------


def mesh(fed_dir, rank: int, timeout: float = 20.0) -> tls.Mesh:
    creds = certs.load_credentials(fed_dir.certs[rank], fed_dir.keys[rank])
    return tls.Mesh(fed_dir.federation, rank, creds, timeout)


def start(m: tls.Mesh) -> tuple[threading.Thread, list]:
    outcome: list = []

    def run():
        try:
            outcome.append(m.join())
        except Exception as exc:  # the test reads it
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def attempt(port: int, payload: bytes, cert=None, key=None, ca_pem: bytes | None = None) -> str:
    """A stranger's try: TLS (with ``cert`` if given) to party 0's port, then ``payload``; what came back."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    if ca_pem is None:  # plain TCP
        raw.sendall(payload)
        try:
            return "welcomed" if raw.recv(1) == tls.WELCOME else "closed"
        except OSError:
            return "closed"
        finally:
            raw.close()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    if cert:
        context.load_cert_chain(cert, key)
    try:
        s = context.wrap_socket(raw, server_hostname="party-0")
        s.sendall(payload)
        return "welcomed" if s.recv(1) == tls.WELCOME else "closed"
    except (ssl.SSLError, OSError) as exc:
        return f"refused: {exc}"
    finally:
        raw.close()


def hello(fed_dir, rank: int) -> bytes:
    m = mesh(fed_dir, rank)
    return m._hello()


def test_only_members_with_their_own_role_get_in_and_the_mesh_still_forms(fed_dir, tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    evil = pickle.dumps(Evil())
    (tmp_path / "other").mkdir(mode=0o700)
    stranger = local_federation(tmp_path / "other", 2)
    ca = fed_dir.federation.ca_pem
    p0 = mesh(fed_dir, 0)
    port = fed_dir.federation.members[0].port
    thread0, out0 = start(p0)
    time.sleep(0.3)
    tries = {
        "plain TCP garbage": attempt(port, b"GET / HTTP/1.0\r\n\r\n" + os.urandom(64)),
        "plain TCP pickle": attempt(port, evil),
        "TLS without a certificate": attempt(port, hello(fed_dir, 1), ca_pem=ca),
        "another CA's party-1": attempt(port, hello(fed_dir, 1), stranger.certs[1], stranger.keys[1], ca),
        "party-1's certificate, a pickle as hello": attempt(port, evil, fed_dir.certs[1], fed_dir.keys[1], ca),
        "the dealer's certificate claiming rank 1": attempt(
            port, hello(fed_dir, 1), fed_dir.certs[2], fed_dir.keys[2], ca
        ),
        "party-0's own certificate": attempt(port, hello(fed_dir, 0), fed_dir.certs[0], fed_dir.keys[0], ca),
    }
    assert all(not outcome.startswith("welcomed") for outcome in tries.values()), tries
    assert not marker.exists()
    # the members themselves still form the mesh
    others = [mesh(fed_dir, 1), mesh(fed_dir, 2)]
    threads = [start(m) for m in others]
    for thread, _ in [(thread0, out0), *threads]:
        thread.join(30)
    assert out0 == [p0] and [o for _, o in threads] == [[m] for m in others], (out0, threads)
    reasons = " | ".join(p0.refused)
    assert len(p0.refused) >= len(tries), reasons
    assert "handshake failed" in reasons and "claims rank 1" in reasons and "own role" in reasons
    # an authenticated member that sends a pickle where an object is due: refused, nothing unpickled
    raw = evil
    link = others[0]._out[0]
    link.sock.sendall(tls.pack_header(tls.OBJ, tls.MAIN, nbytes=len(raw)) + raw)
    with pytest.raises(RuntimeError, match="party 1 sent a malformed frame"):
        p0.take_obj(1, tls.MAIN)
    assert not marker.exists()
    # the dealer's readers refuse a tensor, whoever sends it
    import torch

    dealer = others[1]
    p0._out[2].sock.sendall(tls.pack_header(tls.TENSOR, tls.TTP, 1, (1,), 8) + struct.pack("<q", 7))
    with pytest.raises(RuntimeError, match="a tensor frame on the ttp channel"):
        dealer.take_tensor(0, tls.TTP)
    with pytest.raises(ValueError, match="may not send"):
        p0.send_tensor(2, tls.MAIN, torch.zeros(1, dtype=torch.long))
    for m in [p0, *others]:
        m.close()


def test_a_member_presenting_another_role_is_not_dialled_into(fed_dir, tmp_path):
    """Party 1 dials party 0's address, where a process holding the dealer's certificate listens:
    TLS checks the name party-0, so party 1 never connects, and says why when it gives up."""
    listener = socket.create_server(("127.0.0.1", fed_dir.federation.members[0].port))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(fed_dir.certs[2], fed_dir.keys[2])
    stop = threading.Event()

    def impostor():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            try:
                context.wrap_socket(conn, server_side=True).recv(1)
            except (ssl.SSLError, OSError):
                pass
            conn.close()

    threading.Thread(target=impostor, daemon=True).start()
    try:
        with pytest.raises(
            tls.JoinError, match=r"party 0 \(party-0\) at 127.0.0.1:\d+ within 2 s \(its certificate was refused"
        ):
            mesh(fed_dir, 1, timeout=2).join()
    finally:
        stop.set()
        listener.close()


def test_a_killed_peer_fails_every_wait_at_once(fed_dir):
    script = (
        "import sys, time\n"
        "from privsyn_fed.mpc import certs, tls, federation\n"
        "fed = federation.load(sys.argv[1])\n"
        "tls.Mesh(fed, 1, certs.load_credentials(sys.argv[2], sys.argv[3]), 60).join()\n"
        "print('joined', flush=True)\n"
        "time.sleep(60)\n"
    )
    party1 = subprocess.Popen(
        [sys.executable, "-c", script, str(fed_dir.path), str(fed_dir.certs[1]), str(fed_dir.keys[1])],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        members = [mesh(fed_dir, 0, 60), mesh(fed_dir, 2, 60)]
        threads = [start(m) for m in members]
        for thread, _ in threads:
            thread.join(60)
        assert party1.stdout.readline().strip() == "joined"
        party1.kill()
        start_wait = time.monotonic()
        with pytest.raises(RuntimeError, match="connection to party 1 closed"):
            members[0].take_tensor(1, tls.MAIN)
        with pytest.raises(RuntimeError, match="closed"):  # a wait on another member fails too
            members[0].take_tensor(2, tls.TTP_COMM)
        assert time.monotonic() - start_wait < 5
        for m in members:
            m.close()
    finally:
        party1.kill()
        party1.wait()


# ---- CrypTen's collectives over the mesh, across real processes ---------------------------------

COLLECTIVES = r"""
import sys
import torch
from privsyn_fed.mpc import world
from privsyn_fed.mpc.communicator import current

fed, cert, key, rank = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
m = world.membership(world.Access(fed, cert, key), rank=rank, timeout_s=60)
import os
threads = torch.get_num_threads()
world.join(m)
# the members on this host share its cores (a user's OMP_NUM_THREADS is kept), and get them back on leaving
joined = threads if "OMP_NUM_THREADS" in os.environ else world.torch_threads(m)
assert torch.get_num_threads() == joined, (torch.get_num_threads(), joined)
c = current()
n = c.get_world_size()
if rank == n:  # the dealer: serve party 0's request, then stop
    from privsyn_fed.mpc.dealer import run_dealer
    run_dealer()
    world.leave()
    assert torch.get_num_threads() == threads
    print("ok", flush=True)
    sys.exit(0)
X = lambda r: torch.arange(6, dtype=torch.long).reshape(2, 3) * (r + 1) + 1000 * r
# 16 MB from each party: many TLS records, several socket reads and sending slices per tensor
big = lambda r: torch.arange(2_000_000, dtype=torch.long) * (r + 1) - r
assert torch.equal(c.all_reduce(big(rank)), sum(big(r) for r in range(n)))
before = c.get_communication_stats()
assert torch.equal(c.all_reduce(X(rank)), sum(X(r) for r in range(n)))
bx = c.all_reduce([X(rank), X(rank) + 1], op=torch.distributed.ReduceOp.BXOR, batched=True)
ref = [X(0), X(0) + 1]
for r in range(1, n):
    ref = [ref[0] ^ X(r), ref[1] ^ (X(r) + 1)]
assert all(torch.equal(a, b) for a, b in zip(bx, ref))
red = c.reduce(X(rank), 1)
assert (red is None) == (rank != 1) and (rank != 1 or torch.equal(red, sum(X(r) for r in range(n))))
b = X(rank).clone()
assert torch.equal(c.broadcast(b, 2), X(2)) and torch.equal(b, X(2))
g = c.gather(X(rank), 0)
assert g == [None] if rank else all(torch.equal(g[r], X(r)) for r in range(n))
assert all(torch.equal(t, X(r)) for r, t in enumerate(c.all_gather(X(rank))))
sc = c.scatter([X(r) for r in range(n)] if rank == 0 else None, 0, size=torch.Size([2, 3]))
assert torch.equal(sc, X(rank))
nxt, prv = (rank + 1) % n, (rank - 1) % n
seed, got = torch.tensor(rank + 7), torch.tensor([0])  # CrypTen's _sync_seeds: shapes () and [1]
c.isend(seed, nxt).wait()
c.irecv(got, src=prv).wait()
assert got.item() == prv + 7
c.barrier()
obj = {"k": (1, torch.Size([2]))} if rank == 0 else None
assert c.broadcast_obj(obj, 0) == {"k": (1, torch.Size([2]))}
after = c.get_communication_stats()
# CrypTen's counts (communicator._logging), element by element: all-reduces 2 (n - 1) copies,
# reduce, broadcast and gather n - 1 at the root, all_gather 2 (n - 1), scatter what is sent or kept
expected = 2 * (n - 1) * 6 + 2 * (n - 1) * 12 + 6 * (1 + (rank == 1)) + 6 * (1 + (rank == 2)) + 6 * (1 + (rank == 0))
expected += 2 * (n - 1) * 6 + (12 if rank == 0 else 6) + 1 + 1 + sys.getsizeof(obj) / 8 * (n - 1)
assert after["rounds"] - before["rounds"] == 11, after["rounds"] - before["rounds"]
assert abs(after["bytes"] - before["bytes"] - 8 * expected) < 1e-6, (after["bytes"] - before["bytes"], 8 * expected)
import crypten  # a multiplication on integer shares: the dealer's triple, then the openings
x = crypten.cryptensor(torch.tensor([3, -2]), src=0, precision=0)
y = crypten.cryptensor(torch.tensor([4, 5]), src=1, precision=0)
assert torch.equal((x * y).get_plain_text().long(), torch.tensor([12, -10]))
world.leave()
assert torch.get_num_threads() == threads
print("ok", flush=True)
"""


def test_each_collective_matches_its_reference_across_processes(tmp_path):
    folder = tmp_path / "fed"
    folder.mkdir(mode=0o700)
    fed_dir = local_federation(folder, 3)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", COLLECTIVES, str(fed_dir.path), str(fed_dir.certs[r]), str(fed_dir.keys[r]), str(r)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for r in range(4)
    ]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and out.strip() == "ok", err[-3000:]


def test_members_on_one_host_share_its_cores():
    """The local layout (every address loopback) counts every member as on this host; across
    hosts, only the members listening on this member's own host."""
    from privsyn_fed.mpc import world
    from privsyn_fed.mpc.federation import Federation, Member

    def fed(*hosts):
        roles = [f"party-{k}" for k in range(len(hosts) - 1)] + ["dealer"]
        members = tuple(Member(r, role, "Org", host, 7100 + r) for r, (role, host) in enumerate(zip(roles, hosts)))
        return Federation("f", b"", members)

    def here(federation, rank):
        return world.members_here(world.Membership(federation, rank, None))  # type: ignore[arg-type]

    assert here(fed("127.0.0.1", "127.0.0.2", "localhost", "::1"), 0) == 4
    spread = fed("10.0.0.1", "10.0.0.2", "10.0.0.2", "10.0.0.9")
    assert [here(spread, r) for r in range(4)] == [1, 2, 2, 1]
    cores = len(os.sched_getaffinity(0))
    assert world.torch_threads(world.Membership(spread, 1, None)) == max(1, cores // 2)  # type: ignore[arg-type]


# ---- the command line ---------------------------------------------------------------------------


def test_the_commands_refuse_plain_tcp_and_missing_credentials(fed_dir, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text('{"columns": [{"name": "a", "type": "categorical", "categories": ["x", "y"]}]}')
    run = subprocess.run(
        CLI + ["mpc-dealer", "--parties", "2", "--rendezvous", "tcp://127.0.0.1:29500"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    one_line(run, "--rendezvous", "--federation FILE --cert CERT.pem --key KEY.pem", status=2)
    run = subprocess.run(
        CLI + ["mpc-dealer", "--federation", str(fed_dir.path)], capture_output=True, text=True, cwd=ROOT
    )
    one_line(run, "--federation needs --cert and --key", "privsyn-fed federation init", status=2)
    wrong = ["--cert", str(fed_dir.certs[1]), "--key", str(fed_dir.keys[1])]
    run = subprocess.run(
        CLI + ["mpc-dealer", "--federation", str(fed_dir.path), *wrong], capture_output=True, text=True, cwd=ROOT
    )
    one_line(run, "names party-1", "`mpc-dealer` runs the dealer", status=2)
    run = subprocess.run(
        CLI
        + [
            "mpc-party",
            "--rank",
            "1",
            "--federation",
            str(fed_dir.path),
            "--cert",
            str(fed_dir.certs[2]),
            "--key",
            str(fed_dir.keys[2]),
            "--schema",
            str(schema),
            "--silo",
            str(schema),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    one_line(run, "names dealer, but this member was started as rank 1", status=2)


def test_a_member_that_cannot_join_says_so_in_one_line_within_its_timeout(fed_dir):
    start_time = time.monotonic()
    run = subprocess.run(
        CLI + ["mpc-dealer", *fed_dir.args(2), "--mpc-timeout", "3"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    elapsed = time.monotonic() - start_time
    port = fed_dir.federation.members[0].port
    one_line(run, "the dealer could not join", f"127.0.0.1:{port}", "within 3 s", "refused", status=1)
    assert elapsed < 3 + 12, f"took {elapsed:.1f} s with --mpc-timeout 3"  # 3 s plus start-up on a busy machine


def test_a_member_still_joining_stops_soon_after_another_leaves_cleanly(fed_dir):
    """Party 1 never comes; when the dealer gives up and says goodbye, party 0 stops at once rather
    than waiting out its timeout, and says who left."""
    p0, dealer = mesh(fed_dir, 0, timeout=60), mesh(fed_dir, 2, timeout=5)
    thread0, out0 = start(p0)
    thread2, _ = start(dealer)
    deadline = time.monotonic() + 20
    while 2 not in p0._in and time.monotonic() < deadline:  # the dealer has connected to party 0
        time.sleep(0.05)
    assert 2 in p0._in
    began = time.monotonic()
    dealer.close(orderly=True)
    thread0.join(15)
    assert not thread0.is_alive() and time.monotonic() - began < 15
    assert isinstance(out0[0], tls.JoinError) and "the dealer left before every member had joined" in str(out0[0])
    thread2.join(15)
