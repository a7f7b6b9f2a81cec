"""DistAIM over MPC on Adult with network delay: each party and the dealer in a network namespace of its own.

    .venv/bin/python benchmarks/mpc_netem.py run [--rounds 10] [--delays 0,10,50] [--rows N] [--tcp-buffer-mb M]
    .venv/bin/python benchmarks/mpc_netem.py report
    .venv/bin/python benchmarks/mpc_netem.py link [--delays 0,10] [--mb 500]

The run is mpc_adult.py's MPC run (Adult's 32,561 training rows, or the first N with ``--rows``, split
IID over 3 silo parties; epsilon 1, delta 1e-9, T rounds), once per one-way delay D:

* D = 0: plain loopback, mpc_adult.py's layout (every process in this namespace, on 127.0.0.1).
* D > 0 (ms): parties 0, 1, 2 and the dealer each run in a network namespace of their own (addresses
  10.231.0.1..4/24). A packet from one process to another arrives D ms after it was sent, so D is the
  one-way delay and 2D the round trip (no jitter, loss, reordering or rate limit). The delay comes from
  one of two mechanisms, recorded as ``delay_by`` in each result:

  - ``netem`` where the kernel has it (``CONFIG_NET_SCH_NETEM``): every namespace is joined to a bridge
    in the root namespace by a veth pair, with ``tc qdisc add dev <veth> root netem delay D ms`` on the
    namespace's end; a packet leaves through exactly one such end (netem's queue holds 100,000 packets,
    so it drops none).
  - ``userspace relay`` otherwise: every namespace holds a TUN device (MTU 65535) whose file descriptor
    stays with this process, and a thread here (``Relay``) reads each IPv4 packet any namespace sends and
    writes it to the TUN device of the namespace with its destination address D ms later, in the order
    read. It drops nothing; it runs at real-time priority (where allowed) so that it wakes on time when
    the parties keep every core busy, and each result records by how much it was late (mean and max).
    ``link`` measures what it carries: the round trip, then a bulk TCP transfer from party 0's namespace
    to party 1's (over a delay, TCP's throughput is bounded by its socket buffers, as on a real link).

TCP's largest send and receive buffers (``net.ipv4.tcp_wmem`` / ``tcp_rmem``, set in each namespace)
bound each connection's throughput to buffer / round trip: the system's default send buffer (4 MB here)
allows about 27 MB/s at 50 ms. ``--tcp-buffer-mb M`` sets both to M MB in every namespace and keeps TCP
from restarting slowly after each idle moment (``tcp_slow_start_after_idle=0``), as an operator of a
long link would; each result records it (null: the system's settings).

Times are taken by party 0 as in mpc_adult.py: "join" is from opening the coordinator until every
party and the dealer have joined (the others are started at the same moment), then the 1-way
measurements, then one time per round; "total" runs to the release. Each D > 0 also records the round
trip between party 0's and party 1's namespaces (mean of 3 ``ping``s; without ``ping``, of 3 TCP
connections to a closed port, each refused after one round trip) to show that the delay is in effect,
and the packets the namespaces' interfaces dropped (0 is expected).
Results are appended to ``benchmarks/out/mpc_netem.jsonl``.

Needs root, ``ip`` and either ``tc`` with netem or ``/dev/net/tun``; where they are missing, ``run``
prints one line saying why it is skipped and exits 0. The namespaces and links carry this process's pid
in their names and are removed at the end of each delay's run, with every process the benchmark started
and the relay, also on Ctrl-C or SIGTERM (the TUN devices also vanish whenever this process exits, as
nothing else holds them open).
"""

from __future__ import annotations

import argparse
import collections
import fcntl
import gc
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import pandas as pd  # noqa: E402
from adult import load_adult  # noqa: E402
from mpc_adult import OUT, TRAIN_ROWS, Clock, round_times  # noqa: E402

import privsyn_fed as pf  # noqa: E402
from privsyn_fed.evaluation import evaluate, partition  # noqa: E402
from privsyn_fed.mpc.launch import coordinator  # noqa: E402

RESULTS = OUT / "mpc_netem.jsonl"
ROOT = Path(__file__).resolve().parent.parent
PARTIES = 3  # silo parties; the dealer is one more process
PORT = 29500  # party 0's rendezvous port, in its own namespace
TIMEOUT_S = 600  # how long a party waits for the others (join and each exchange)
TUNSETIFF, IFF_TUN, IFF_NO_PI = 0x400454CA, 0x0001, 0x1000  # from <linux/if_tun.h>
TUN_MTU = 65535  # TUN's largest MTU: large packets keep the relay's packet rate low
READ_BATCH = 8  # packets the relay reads from one device before it writes what is due and reads the others
NETEM, RELAY = "netem", "userspace relay"
DEFINITION = (
    "One-way delay D: every process in a network namespace of its own, so any packet between two processes "
    "arrives D after it was sent (round trip 2D), either by `netem delay D ms` on each namespace's veth to a "
    "bridge or, where the kernel has no netem, by a userspace relay between TUN devices in the namespaces; "
    "0 is plain loopback."
)


def sh(*cmd: str, check: bool = True) -> str:
    """Run ``cmd``; its stdout, or RuntimeError with its stderr's last line if it fails and ``check``."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}`: {(done.stderr.strip().splitlines() or ['failed'])[-1]}")
    return done.stdout


def open_tun(name: str) -> int:
    """A new TUN device ``name`` (IP packets, no extra header), as a non-blocking file descriptor; the
    device is deleted when the descriptor is closed."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    except OSError:
        os.close(fd)
        raise
    return fd


def delay_mechanism() -> tuple[str | None, str]:
    """How delays can be made here: (``NETEM`` or ``RELAY``, why that one), or (None, why neither)."""
    if os.geteuid() != 0:
        return None, "network namespaces need root"
    if not shutil.which("ip"):
        return None, "`ip` (iproute2) is needed"
    probe = f"pfnetem-{os.getpid()}-probe"
    try:
        sh("ip", "netns", "add", probe)
    except RuntimeError as exc:
        return None, f"`ip netns add` failed ({exc})"
    try:
        sh("ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")
        return NETEM, "tc netem works"
    except RuntimeError as exc:
        no_netem = f"no netem ({str(exc).partition(': ')[2]})"
    finally:
        sh("ip", "netns", "del", probe, check=False)
    try:
        os.close(open_tun(f"pf{os.getpid()}probe"))
    except OSError as exc:
        return None, f"{no_netem} and no TUN device ({exc})"
    return RELAY, no_netem


class Relay(threading.Thread):
    """The userspace delay link: each IPv4 packet read from one namespace's TUN device is written to the
    TUN device of the namespace holding its destination address ``delay_s`` after it was read.

    All packets wait the same time, so one FIFO keeps them in the order of their times due; nothing is
    dropped or reordered, and there is no rate limit but this thread's speed. Packets for other addresses
    (and IPv6 ones, which nothing here uses) go nowhere, as on a bridge without those hosts.
    """

    def __init__(self, route: dict[str, int], delay_s: float):
        super().__init__(name="delay relay", daemon=True)
        self.route = {socket.inet_aton(addr): fd for addr, fd in route.items()}
        self.delay_s = delay_s
        self.wake, self.waker = os.pipe()  # a byte on ``waker`` stops the thread
        self.packets = self.bytes = 0
        self.late_s = self.latest_s = 0.0  # summed and largest time by which a packet was written after its time due
        self.error: BaseException | None = None

    def run(self) -> None:
        due: collections.deque[tuple[float, int, bytes]] = collections.deque()
        sources = [self.wake, *self.route.values()]
        try:  # this thread only: wake on time even when the processes it serves keep every core busy
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        except OSError:
            pass
        try:
            while True:
                wait = max(0.0, due[0][0] - time.monotonic()) if due else None
                ready = select.select(sources, [], [], wait)[0]  # select's timeout has microseconds
                if self.wake in ready:
                    return
                for fd in ready:
                    for _ in range(READ_BATCH):
                        try:
                            packet = os.read(fd, TUN_MTU)
                        except BlockingIOError:
                            break
                        to = self.route.get(packet[16:20]) if packet[0] >> 4 == 4 else None
                        if to is not None:
                            due.append((time.monotonic() + self.delay_s, to, packet))
                while due and due[0][0] <= (now := time.monotonic()):
                    when, to, packet = due.popleft()
                    os.write(to, packet)
                    self.packets += 1
                    self.bytes += len(packet)
                    self.late_s += now - when
                    self.latest_s = max(self.latest_s, now - when)
        except BaseException as exc:  # reported by Network.failure
            self.error = exc

    def summary(self) -> dict:
        """What it has relayed so far: packets, MB, its CPU seconds, and by how much it was late (ms)."""
        return {
            "packets": self.packets,
            "MB": self.bytes / 1e6,
            "cpu_s": time.clock_gettime(time.pthread_getcpuclockid(self.ident)) if self.is_alive() else None,
            "late_ms_mean": 1e3 * self.late_s / max(self.packets, 1),
            "late_ms_max": 1e3 * self.latest_s,
        }

    def stop(self) -> None:
        """Stop the thread (if it runs) and close its pipe."""
        if self.is_alive():
            os.write(self.waker, b"x")
            self.join()
        os.close(self.wake)
        os.close(self.waker)


class Network:
    """The namespaced layout for one delay: namespace k holds party k (k = 3: the dealer) on ``addr[k]``
    of its interface ``dev[k]``, delayed by ``by`` (``NETEM`` or ``RELAY``, see the module's docstring).

    Made on entering; on leaving, every process started with ``start`` is killed, the relay stopped and
    the links, the namespaces and the bridge are deleted (Ctrl-C and SIGTERM are held off meanwhile).
    """

    def __init__(self, delay_ms: float, by: str, tcp_buffer_mb: float | None = None):
        tag = f"pf{os.getpid()}"  # interface names have at most 15 characters
        self.delay_ms, self.by, self.tcp_buffer_mb = delay_ms, by, tcp_buffer_mb
        self.bridge = f"{tag}br" if by == NETEM else None
        self.ns = [f"pfnetem-{os.getpid()}-{k}" for k in range(PARTIES + 1)]
        self.dev = [f"{tag}{'n' if by == NETEM else 't'}{k}" for k in range(PARTIES + 1)]  # inside namespace k
        self.peer = [f"{tag}b{k}" for k in range(PARTIES + 1)] if by == NETEM else []  # veth ends on the bridge
        self.addr = [f"10.231.0.{k + 1}" for k in range(PARTIES + 1)]
        self.tun: list[int] = []  # the relay's ends of the TUN devices
        self.relay: Relay | None = None
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> "Network":
        try:
            if self.bridge:
                sh("ip", "link", "add", self.bridge, "type", "bridge")
                sh("ip", "link", "set", self.bridge, "up")
            for k, (ns, dev, addr) in enumerate(zip(self.ns, self.dev, self.addr)):
                sh("ip", "netns", "add", ns)
                if self.by == NETEM:
                    sh("ip", "link", "add", dev, "type", "veth", "peer", "name", self.peer[k])
                    sh("ip", "link", "set", self.peer[k], "master", self.bridge, "up")
                else:  # made here, moved into the namespace; the descriptor keeps reading and writing it
                    self.tun.append(open_tun(dev))
                sh("ip", "link", "set", dev, "netns", ns)
                sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
                if self.by == NETEM:
                    sh("ip", "-n", ns, "link", "set", dev, "up")
                    delay = ["netem", "delay", f"{self.delay_ms:g}ms", "limit", "100000"]
                    sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", *delay)
                else:  # txqueuelen: TUN drops what its queue cannot hold while the relay is busy
                    sh("ip", "-n", ns, "link", "set", dev, "mtu", str(TUN_MTU), "txqueuelen", "10000", "up")
                sh("ip", "-n", ns, "link", "set", "lo", "up")
                if self.tcp_buffer_mb:  # per namespace: a long link's usual TCP settings
                    most = str(int(self.tcp_buffer_mb * 2**20))
                    tuned = [f"net.ipv4.tcp_rmem=4096 131072 {most}", f"net.ipv4.tcp_wmem=4096 16384 {most}"]
                    tuned.append("net.ipv4.tcp_slow_start_after_idle=0")
                    for setting in tuned:
                        sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w", setting)
            if self.tun:  # a full garbage collection here (~0.1 s) would hold up the relay: leave what exists out
                gc.freeze()
                self.relay = Relay(dict(zip(self.addr, self.tun)), self.delay_ms / 1e3)
                self.relay.start()
        except BaseException:
            self.close()
            raise
        return self

    def dropped(self) -> int:
        """Packets the namespaces' interfaces have dropped so far (sent or received)."""
        stats = [
            json.loads(sh("ip", "-n", ns, "-j", "-s", "link", "show", dev))[0]["stats64"]
            for ns, dev in zip(self.ns, self.dev)
        ]
        return sum(s["tx"]["dropped"] + s["rx"]["dropped"] for s in stats)

    def failure(self) -> str | None:
        """Why the relay stopped, if it did."""
        if self.relay and not self.relay.is_alive():
            return f"the delay relay stopped: {self.relay.error!r}"
        return None

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, k: int, args: list[str], log: Path) -> subprocess.Popen:
        """``python ARGS`` in namespace ``k``, with gloo on its interface; output to ``log``."""
        env = ["env", f"GLOO_SOCKET_IFNAME={self.dev[k]}", "PYTHONUNBUFFERED=1"]
        with open(log, "wb") as fh:  # a session of its own: killed as a group, Ctrl-C reaches only us
            proc = subprocess.Popen(
                ["ip", "netns", "exec", self.ns[k], *env, sys.executable, *args],
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def round_trip_ms(self) -> tuple[float, str]:
        """Mean round trip from party 0's namespace to party 1's, and how it was measured."""
        if shutil.which("ping"):
            out = sh("ip", "netns", "exec", self.ns[0], "ping", "-q", "-c", "3", self.addr[1])
            return float(re.search(r"= [\d.]+/([\d.]+)/", out).group(1)), "ping"
        probe = (
            "import socket, sys, time\n"
            "times = []\n"
            "for _ in range(3):\n"
            "    t = time.perf_counter()\n"
            "    try:\n"
            "        socket.create_connection((sys.argv[1], 9), timeout=10).close()\n"
            "    except ConnectionRefusedError:\n"
            "        times.append(time.perf_counter() - t)\n"
            "print(1e3 * sum(times) / len(times))\n"
        )
        out = sh("ip", "netns", "exec", self.ns[0], sys.executable, "-c", probe, self.addr[1])
        return float(out), "TCP connect refused"

    def close(self) -> None:
        """Kill the processes, stop the relay, then delete the links, namespaces and bridge (whichever exist)."""
        held = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for proc in self.procs:
                if proc.poll() is None:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait()
            if self.relay:
                self.relay.stop()
                self.relay = None
            while self.tun:  # closing its descriptor deletes a TUN device, in whichever namespace
                os.close(self.tun.pop())
            for peer in self.peer:  # deleting one end deletes the pair
                sh("ip", "link", "del", peer, check=False)
            for ns in self.ns:
                sh("ip", "netns", "del", ns, check=False)
            if self.bridge:
                sh("ip", "link", "del", self.bridge, check=False)
        finally:
            for s, handler in held.items():
                signal.signal(s, handler)


def measure(schema_path, paths, train_csv, rounds: int, rendezvous: str | None = None) -> dict:
    """Party 0's run (all parties on loopback, or with ``rendezvous`` only ``paths[0]`` here): times,
    traffic and workload error."""
    schema = pf.Schema.load(schema_path)
    where = {"rendezvous": rendezvous, "parties": PARTIES, "timeout_s": TIMEOUT_S} if rendezvous else {}
    clock = Clock()
    start = time.monotonic()
    with coordinator(schema_path, paths, **where) as agg:
        joined = time.monotonic()
        result = pf.synthesize([agg.own], "distaim", 1.0, 1e-9, aggregator=agg, progress=clock, rounds=rounds)
    total = time.monotonic() - start
    steps = round_times(joined, clock.marks)
    train = pd.read_csv(train_csv, dtype=str, keep_default_na=False)
    return {
        "seconds_total": total,
        "seconds_start": joined - start,
        "seconds_oneways": steps[0],
        "seconds_per_round": steps[1:],
        "workload_error": evaluate(train, result.data, schema, label="income")["workload"]["error"],
        "traffic": result.info["traffic"]["parties"],
    }


def run_namespaced(net: Network, schema_path, paths, train_csv, rounds: int, tmp: Path) -> dict:
    """Start party 0 (this script's ``party0``), parties 1, 2 and the dealer in their namespaces;
    party 0's measurements once it is done."""
    rendezvous = f"tcp://{net.addr[0]}:{PORT}"
    member = ["--parties", str(PARTIES), "--rendezvous", rendezvous, "--timeout", str(TIMEOUT_S)]
    job = {
        "schema": str(schema_path),
        "silo": str(paths[0]),
        "train": str(train_csv),
        "rounds": rounds,
        "rendezvous": rendezvous,
        "out": str(tmp / "party0.json"),
    }
    cli = ["-m", "privsyn_fed"]
    logs = [tmp / f"{k}.log" for k in range(PARTIES + 1)]
    procs = {"party 0": net.start(0, [str(Path(__file__).resolve()), "party0", json.dumps(job)], logs[0])}
    for k in range(1, PARTIES):
        party = ["mpc-party", "--rank", str(k), *member, "--schema", str(schema_path), "--silo", str(paths[k])]
        procs[f"party {k}"] = net.start(k, [*cli, *party], logs[k])
    procs["the dealer"] = net.start(PARTIES, [*cli, "mpc-dealer", *member], logs[PARTIES])

    def failed() -> str | None:
        for (label, proc), log in zip(procs.items(), logs):
            if proc.poll() not in (None, 0):
                lines = log.read_text(errors="replace").strip().splitlines()
                return f"{label} exited with status {proc.returncode}: {lines[-1] if lines else ''}"
        return net.failure()

    while procs["party 0"].poll() is None and not failed():
        time.sleep(0.5)
    if problem := failed():
        raise RuntimeError(problem)
    for proc in procs.values():  # the others stop once party 0 has gone; Network kills stragglers
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            break
    return json.loads(Path(job["out"]).read_text())


def interrupted(signum: int, _frame) -> None:
    """On SIGINT or SIGTERM: ignore any more of them, so that a second one (``timeout`` sends two) cannot
    cut the clean-up short, and unwind through it."""
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(143)


def mechanism(delays: list[float]) -> str | None:
    """The mechanism for ``delays`` (None when all are 0), after one line saying which and why; exits 0
    with one line if there is none. From here SIGINT and SIGTERM unwind through the clean-up."""
    by, why = delay_mechanism() if any(d > 0 for d in delays) else (None, "")
    if why and not by:
        print(f"mpc_netem: skipped: {why}")
        sys.exit(0)
    if by:
        print(f"mpc_netem: delays by {by} ({why})", flush=True)
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, interrupted)
    return by


def run(args) -> None:
    delays = [float(d) for d in args.delays.split(",")]
    by = mechanism(delays)
    OUT.mkdir(exist_ok=True)
    csv, schema_path = load_adult(OUT)
    df = pd.read_csv(csv, dtype=str, keep_default_na=False)
    train = df.iloc[: min(args.rows or TRAIN_ROWS, TRAIN_ROWS)].reset_index(drop=True)
    part = partition(train, PARTIES, "iid", seed=0)
    with tempfile.TemporaryDirectory(prefix="mpc-netem-") as name:
        tmp = Path(name)
        train_csv = tmp / "train.csv"
        train.to_csv(train_csv, index=False)
        paths = []
        for k, rows in enumerate(part.parts()):
            paths.append(tmp / f"party{k}.csv")
            train.iloc[rows].to_csv(paths[-1], index=False)
        for delay in delays:
            if delay == 0:
                row = {"delay_by": None, "rtt_ms": None, "rtt_by": None, "dropped": None, "relay": None}
                row |= measure(schema_path, paths, train_csv, args.rounds)
            else:
                with Network(delay, by, args.tcp_buffer_mb) as net:
                    rtt, how = net.round_trip_ms()
                    print(f"delay {delay:g} ms ({by}): round trip party 0 -> party 1 {rtt:.1f} ms ({how})", flush=True)
                    row = {"delay_by": by, "rtt_ms": rtt, "rtt_by": how, "tcp_buffer_mb": args.tcp_buffer_mb}
                    row["tcp_slow_start_after_idle"] = 0 if args.tcp_buffer_mb else None
                    row |= run_namespaced(net, schema_path, paths, train_csv, args.rounds, tmp)
                    row |= {"dropped": net.dropped(), "relay": net.relay and net.relay.summary()}
            row = {"delay_ms": delay, "rows": len(train), "parties": PARTIES, "rounds": args.rounds, **row}
            print(json.dumps(row), flush=True)
            with open(RESULTS, "a") as fh:
                fh.write(json.dumps(row) + "\n")


BULK = """
import socket, sys, time
role, host = sys.argv[1:3]
if role == "receive":
    with socket.create_server((host, 5001)) as server:
        conn = server.accept()[0]
        while conn.recv(1 << 20):
            pass
        conn.close()
    sys.exit()
for _ in range(200):
    try:
        conn = socket.create_connection((host, 5001))
        break
    except ConnectionRefusedError:
        time.sleep(0.05)
start, block, mb = time.perf_counter(), bytes(1 << 20), int(sys.argv[3])
for _ in range(mb):
    conn.sendall(block)
conn.shutdown(socket.SHUT_WR)
conn.recv(1)  # the receiver has read everything and closed
print(mb * 2**20 / 1e6 / (time.perf_counter() - start))
"""


def link(args) -> None:
    """For each delay: the round trip and a bulk TCP transfer of ``--mb`` MiB from party 0's namespace to
    party 1's, with the relay's packets and CPU time during the transfer (D = 0 also goes through it)."""
    delays = [float(d) for d in args.delays.split(",")]
    by = mechanism([1.0])
    with tempfile.TemporaryDirectory(prefix="mpc-netem-") as tmp:
        for delay in delays:
            with Network(delay, by, args.tcp_buffer_mb) as net:
                rtt, how = net.round_trip_ms()
                receiver = net.start(1, ["-c", BULK, "receive", net.addr[1]], Path(tmp) / "receive.log")
                send = ["ip", "netns", "exec", net.ns[0], sys.executable, "-c", BULK, "send", net.addr[1], str(args.mb)]
                out = sh(*send)
                receiver.wait(timeout=30)
                row = {"delay_ms": delay, "delay_by": by, "rtt_ms": rtt, "rtt_by": how, "MB": args.mb * 2**20 / 1e6}
                row |= {"MB_per_s": float(out), "dropped": net.dropped()}
                row["relay"] = net.relay and net.relay.summary()
                print(json.dumps(row), flush=True)


def party0(args) -> None:
    """Inside party 0's namespace (started by ``run``): measure and write the result as JSON."""
    job = json.loads(args.job)
    row = measure(job["schema"], [job["silo"]], job["train"], job["rounds"], job["rendezvous"])
    Path(job["out"]).write_text(json.dumps(row))


def report(_args) -> None:
    if not RESULTS.exists():
        print(f"no results in {RESULTS}: run `benchmarks/mpc_netem.py run` first")
        return
    rows = [json.loads(line) for line in open(RESULTS)]
    print(DEFINITION + "\n")
    print(
        "| One-way delay | Rows, T | Join (s) | 1-ways (s) | Round 1 (s) | Rounds 2..T mean / max (s) | Total (s) | "
        "Workload error | CrypTen rounds, party 0 / others | MB per party |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        rest, t = r["seconds_per_round"][1:], r["traffic"]
        mb = " / ".join(f"{(p['bytes'] + p['command_bytes']) / 1e6:.0f}" for p in t)
        by = "loopback" if r["delay_ms"] == 0 else r.get("delay_by", NETEM)
        if r.get("tcp_buffer_mb"):
            by += f", TCP buffers {r['tcp_buffer_mb']:g} MB"
            by += ", no slow start after idle" if r.get("tcp_slow_start_after_idle") == 0 else ""
        print(
            f"| {r['delay_ms']:g} ms ({by}) | {r['rows']}, {r['rounds']} | "
            f"{r['seconds_start']:.1f} | {r['seconds_oneways']:.1f} | {r['seconds_per_round'][0]:.1f} | "
            + (f"{np.mean(rest):.1f} / {np.max(rest):.1f}" if rest else "n/a")
            + f" | {r['seconds_total']:.1f} | {r['workload_error']:.3f} | "
            f"{t[0]['rounds']:.0f} / {t[1]['rounds']:.0f} | {mb} |"
        )
    print()
    for r in rows:
        if r["rtt_ms"] is not None:
            relay = r.get("relay")
            late = (
                f"; relay late by {relay['late_ms_mean']:.2f} ms mean, {relay['late_ms_max']:.1f} max" if relay else ""
            )
            print(
                f"- {r['delay_ms']:g} ms ({r.get('delay_by', NETEM)}): measured round trip between two namespaces "
                f"{r['rtt_ms']:.1f} ms ({r['rtt_by']}; 2D = {2 * r['delay_ms']:g} ms); "
                f"{r.get('dropped')} packets dropped{late}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--rounds", type=int, default=10)
    r.add_argument("--delays", default="0,10,50", help="one-way delays in ms, comma-separated (0: loopback)")
    r.add_argument("--rows", type=int, help="only the first N training rows (a quick try)")
    r.add_argument("--tcp-buffer-mb", type=float, help="largest TCP buffers in each namespace (default: the system's)")
    sub.add_parser("report")
    lk = sub.add_parser("link", help="the round trip and bulk TCP throughput between two namespaces")
    lk.add_argument("--delays", default="0,10", help="one-way delays in ms, comma-separated")
    lk.add_argument("--mb", type=int, default=500, help="MiB to send")
    lk.add_argument("--tcp-buffer-mb", type=float, help="largest TCP buffers in each namespace (default: the system's)")
    p0 = sub.add_parser("party0", help="internal: party 0 inside its namespace")
    p0.add_argument("job", help="JSON: schema, silo, train, rounds, rendezvous, out")
    args = parser.parse_args()
    try:
        {"run": run, "report": report, "link": link, "party0": party0}[args.command](args)
    except KeyboardInterrupt:
        sys.exit("mpc_netem: interrupted (its namespaces, links and processes are removed)")


if __name__ == "__main__":
    main()
