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
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import pandas as pd  # noqa: E402
from adult import load_adult  # noqa: E402
from mpc_adult import OUT, TRAIN_ROWS, Clock, round_times  # noqa: E402
from netns import NETEM, Network, delay_mechanism, sh  # noqa: E402

import privsyn_fed as pf  # noqa: E402
from privsyn_fed.evaluation import evaluate, partition  # noqa: E402
from privsyn_fed.mpc import certs, coordinator  # noqa: E402

RESULTS = OUT / "mpc_netem.jsonl"
ROOT = Path(__file__).resolve().parent.parent
PARTIES = 3  # silo parties; the dealer is one more process
PORT = 29500  # every member's port, each on its own namespace's address
TIMEOUT_S = 600  # how long a party waits for the others (join and each exchange)
DEFINITION = (
    "One-way delay D: every process in a network namespace of its own, so any packet between two processes "
    "arrives D after it was sent (round trip 2D), either by `netem delay D ms` on each namespace's veth to a "
    "bridge or, where the kernel has no netem, by a userspace relay between TUN devices in the namespaces; "
    "0 is plain loopback."
)


def measure(schema_path, paths, train_csv, rounds: int, access: dict | None = None) -> dict:
    """Party 0's run (all parties on loopback, or with ``access``, party 0's federation file,
    certificate and key, only ``paths[0]`` here): times, traffic and workload error."""
    schema = pf.Schema.load(schema_path)
    where = {**access, "parties": PARTIES, "timeout_s": TIMEOUT_S} if access else {}
    clock = Clock()
    start = time.monotonic()
    with coordinator(schema_path, paths, **where) as agg:
        joined = time.monotonic()
        result = pf.api.synthesize_over(agg, "distaim", 1.0, 1e-9, progress=clock, rounds=rounds)
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


def federation(net: Network, folder: Path) -> list[dict[str, str]]:
    """A throw-away federation of the namespaces' addresses in ``folder``: a CA (its key dropped once
    it has signed), one certificate and key per role; each member's federation file, certificate and key."""
    ca = certs.make_ca("mpc-netem", days=1)
    roles = [certs.party_role(k) for k in range(PARTIES)] + ["dealer"]
    members, access = [], []
    for k, role in enumerate(roles):
        cert, key = certs.issue(ca, role, "benchmark", days=1)
        certs.write_public(folder / f"{role}.pem", cert)
        certs.write_private(folder / f"{role}.key", key)
        members.append({"role": role, "organisation": "benchmark", "host": net.addr[k], "port": PORT})
        access.append({"federation": str(folder / "federation.json"), "cert": str(folder / f"{role}.pem")})
        access[-1]["key"] = str(folder / f"{role}.key")
    certs.write_public(folder / "ca.pem", ca[0])
    (folder / "federation.json").write_text(json.dumps({"federation": "mpc-netem", "ca": "ca.pem", "members": members}))
    return access


def run_namespaced(net: Network, schema_path, paths, train_csv, rounds: int, tmp: Path) -> dict:
    """Start party 0 (this script's ``party0``), parties 1, 2 and the dealer in their namespaces;
    party 0's measurements once it is done."""
    access = federation(net, Path(tempfile.mkdtemp(prefix="federation-", dir=tmp)))
    member = [[f"--{k}={v}" for k, v in a.items()] + ["--mpc-timeout", str(TIMEOUT_S)] for a in access]
    job = {
        "schema": str(schema_path),
        "silo": str(paths[0]),
        "train": str(train_csv),
        "rounds": rounds,
        "access": access[0],
        "out": str(tmp / "party0.json"),
    }
    cli = ["-m", "privsyn_fed"]
    logs = [tmp / f"{k}.log" for k in range(PARTIES + 1)]
    procs = {"party 0": net.start(0, [str(Path(__file__).resolve()), "party0", json.dumps(job)], logs[0])}
    for k in range(1, PARTIES):
        party = ["mpc-party", "--rank", str(k), *member[k], "--schema", str(schema_path), "--silo", str(paths[k])]
        procs[f"party {k}"] = net.start(k, [*cli, *party], logs[k])
    procs["the dealer"] = net.start(PARTIES, [*cli, "mpc-dealer", *member[PARTIES]], logs[PARTIES])

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
                with Network(PARTIES + 1, delay, by, args.tcp_buffer_mb, cwd=ROOT) as net:
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
            with Network(PARTIES + 1, delay, by, args.tcp_buffer_mb, cwd=ROOT) as net:
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
    row = measure(job["schema"], [job["silo"]], job["train"], job["rounds"], job["access"])
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
    p0.add_argument("job", help="JSON: schema, silo, train, rounds, access (federation, cert, key), out")
    args = parser.parse_args()
    try:
        {"run": run, "report": report, "link": link, "party0": party0}[args.command](args)
    except KeyboardInterrupt:
        sys.exit("mpc_netem: interrupted (its namespaces, links and processes are removed)")


if __name__ == "__main__":
    main()
