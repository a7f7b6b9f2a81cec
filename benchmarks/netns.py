"""Hosts in network namespaces of their own, joined by a link with a one-way delay, on this machine only.

``Network(hosts, delay_ms, by)`` makes ``hosts`` namespaces with addresses 10.231.0.1.. on a private
/24 that exists only inside them; a packet from one to another arrives ``delay_ms`` after it was sent
(round trip twice that; no jitter, loss, reordering or rate limit). The delay comes from one of two
mechanisms (``delay_mechanism()`` says which works here):

- ``NETEM``, where the kernel has it (``CONFIG_NET_SCH_NETEM``): every namespace is joined to a bridge in
  the root namespace by a veth pair, with ``tc qdisc add dev <veth> root netem delay D ms`` on the
  namespace's end; a packet leaves through exactly one such end (netem's queue holds 100,000 packets).
- ``RELAY`` otherwise: every namespace holds a TUN device whose file descriptor stays with this process,
  and a thread (``Relay``) writes each IPv4 packet read from one device to the device of the namespace
  with its destination address D ms later, in the order read.

``Network(..., tap=f)`` (relay only) also hands ``f`` every IPv4 packet the relay carries, as read:
a wiretap on the link, for tests of what travels on it.

``Network.start(k, args, log)`` runs ``python ARGS`` in namespace k. On leaving the ``with`` block (and
on Ctrl-C or SIGTERM, held off meanwhile) every process started is killed, the relay stopped, and the
links, namespaces and bridge deleted; namespaces and links carry this process's pid in their names.
Needs root, ``ip`` and either ``tc`` with netem or ``/dev/net/tun``.
"""

from __future__ import annotations

import collections
import contextlib
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
import threading
import time
from pathlib import Path
from typing import Callable

TUNSETIFF, IFF_TUN, IFF_NO_PI = 0x400454CA, 0x0001, 0x1000  # from <linux/if_tun.h>
TUN_MTU = 65535  # TUN's largest MTU: large packets keep the relay's packet rate low
READ_BATCH = 8  # packets the relay reads from one device before it writes what is due and reads the others
NETEM, RELAY = "netem", "userspace relay"


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

    def __init__(self, route: dict[str, int], delay_s: float, tap: Callable[[bytes], None] | None = None):
        super().__init__(name="delay relay", daemon=True)
        self.route = {socket.inet_aton(addr): fd for addr, fd in route.items()}
        self.delay_s = delay_s
        self.tap = tap  # called (in this thread) with each packet it will deliver, as read
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
                            if self.tap is not None:
                                self.tap(packet)
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
    """``hosts`` network namespaces behind one delay: namespace k holds host k on ``addr[k]`` (10.231.0.k+1/24)
    of its interface ``dev[k]``, every packet between two of them delayed by ``delay_ms`` through ``by``
    (``NETEM`` or ``RELAY``, see the module's docstring).

    Made on entering; on leaving, every process started with ``start`` is killed, the relay stopped and
    the links, the namespaces and the bridge are deleted (Ctrl-C and SIGTERM are held off meanwhile).
    """

    def __init__(
        self,
        hosts: int,
        delay_ms: float,
        by: str,
        tcp_buffer_mb: float | None = None,
        cwd: Path | None = None,
        tap: Callable[[bytes], None] | None = None,
    ):
        if not 1 <= hosts <= 200:
            raise ValueError(f"hosts must be between 1 and 200, not {hosts}")
        if tap is not None and by != RELAY:
            raise ValueError("a tap needs the userspace relay (by=RELAY): netem's packets never pass this process")
        self.tap = tap
        tag = f"pf{os.getpid()}"  # interface names have at most 15 characters
        self.delay_ms, self.by, self.tcp_buffer_mb, self.cwd = delay_ms, by, tcp_buffer_mb, cwd
        self.bridge = f"{tag}br" if by == NETEM else None
        self.ns = [f"pfnetem-{os.getpid()}-{k}" for k in range(hosts)]
        self.dev = [f"{tag}{'n' if by == NETEM else 't'}{k}" for k in range(hosts)]  # inside namespace k
        self.peer = [f"{tag}b{k}" for k in range(hosts)] if by == NETEM else []  # veth ends on the bridge
        self.addr = [f"10.231.0.{k + 1}" for k in range(hosts)]
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
                self.relay = Relay(dict(zip(self.addr, self.tun)), self.delay_ms / 1e3, self.tap)
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

    def start(self, k: int, args: list[str], log: Path, err: Path | None = None) -> subprocess.Popen:
        """``python ARGS`` in namespace ``k``; output to ``log`` (its stderr to ``err`` if given)."""
        env = ["env", "PYTHONUNBUFFERED=1"]
        with contextlib.ExitStack() as files:  # a session of its own: killed as a group, Ctrl-C reaches only us
            fh = files.enter_context(open(log, "wb"))
            proc = subprocess.Popen(
                ["ip", "netns", "exec", self.ns[k], *env, sys.executable, *args],
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=files.enter_context(open(err, "wb")) if err is not None else subprocess.STDOUT,
                cwd=self.cwd,
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
