"""Sites that run themselves: three site agents (Flower SuperNodes with privsyn-fed's ClientApp), a
SuperLink with TLS from the federation's CA, node authentication and its database, two compute
servers, the dealer, and `synth --superlink` as party 0; all real processes on loopback, started
and stopped here. A node whose key is not registered is refused; one site's policy has a person
approve each release; the same agents serve two releases without a restart; every site's audit
log checks out against its ledger copies and its budget store.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privsyn_fed.mpc.launch import free_ports
from privsyn_fed.site import approvals

from .conftest import SCHEMA, make_frame, run_cli

BIN = Path(sys.executable).parent
SITES = ["a", "b", "c"]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in reversed(procs):
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.fixture
def federation(tmp_path):
    """The kit (`federation init --site ... --superlink`), the SuperLink with every site's node key
    registered, and the three agents online; yields what a release needs."""
    if not (BIN / "flower-superlink").exists():
        pytest.skip("Flower's flower-superlink is not installed beside this Python (make install installs it)")
    ports = free_ports(8)
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "FLWR_DISABLE_UPDATE_CHECK": "1", "NO_COLOR": "1"}
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    argv = ["federation", "init", "--out", tmp_path / "kit", "--name", "agents", "--schema", tmp_path / "schema.json"]
    for k, org in enumerate(["Coordinator", "Statistics Office", "University"]):
        argv += ["--party", f"{org}@127.0.0.1:{ports[k]}"]
    argv += ["--dealer", f"Trust@127.0.0.1:{ports[3]}", "--site-port", str(ports[4])]
    argv += ["--superlink", f"127.0.0.1:{ports[5]}"] + [a for s in SITES for a in ("--site", f"{s}=Clinic {s}")]
    assert run_cli(*argv).returncode == 0
    kit = tmp_path / "kit"
    fingerprint = json.loads((kit / "federation.json").read_text())["schema_sha256"]
    for k, s in enumerate(SITES):
        bundle = kit / f"site-{s}"
        (bundle / "schema.json").write_text(json.dumps(SCHEMA))
        make_frame(300, seed=20 + k).to_csv(bundle / "silo.csv", index=False)
        policy = {"max_epsilon": 2, "max_delta": 1e-5, "methods": ["fedtda", "distaim"], "schema_sha256": fingerprint}
        policy["budget_store"] = {"path": "budget.db", "dataset_id": f"clinic-{s}", "total_epsilon": 10}
        if s == "c":
            policy |= {"approve": "person", "approve_within_s": 120}
        (bundle / "policy.json").write_text(json.dumps(policy))
    procs: list[subprocess.Popen] = []
    logs = tmp_path / "logs"
    logs.mkdir()

    running: dict[str, tuple[subprocess.Popen, list, Path]] = {}

    def start(name: str, args: list, cwd: Path, log: str | None = None) -> subprocess.Popen:
        extra = {"FLWR_HOME": str(tmp_path / "homes" / name)}
        Path(extra["FLWR_HOME"]).mkdir(parents=True, exist_ok=True)
        with open(logs / f"{log or name}.log", "wb") as out:
            proc = subprocess.Popen([str(a) for a in args], cwd=cwd, env={**env, **extra}, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        procs.append(proc)
        running[name] = (proc, args, cwd)
        return proc

    def restart(name: str) -> None:
        """Stop ``name`` (SIGTERM) and start it again as it was started: its state is on disk."""
        proc, args, cwd = running[name]
        stop([proc])
        start(name, args, cwd, log=f"{name}-again")

    link = kit / "superlink"
    try:
        start("superlink", [BIN / "flower-superlink", "--ssl-ca-certfile", "ca.pem", "--ssl-certfile", "cert.pem",
                            "--ssl-keyfile", "key.pem", "--database", tmp_path / "state.db", "--enable-supernode-auth",
                            "--disable-runtime-dependency-installation", "--host", "127.0.0.1", "--port", ports[5]],
              link)  # fmt: skip
        cli = tmp_path / "homes" / "cli"
        cli.mkdir(parents=True)
        (cli / "config.toml").write_text(
            f'[superlink]\ndefault = "f"\n[superlink.f]\naddress = "127.0.0.1:{ports[5]}"\n'
            f'root-certificates = "{link / "ca.pem"}"\n'
        )
        deadline = time.monotonic() + 60
        for s in SITES:
            while True:  # the SuperLink's Control API takes a moment to come up
                reg = subprocess.run([BIN / "flwr", "supernode", "register", f"nodes/site-{s}.pub", "--name",
                                      f"site-{s}"], cwd=link, env={**env, "FLWR_HOME": str(cli)},
                                     capture_output=True, text=True)  # fmt: skip
                if reg.returncode == 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert reg.returncode == 0, reg.stdout + reg.stderr
        for s, port in zip(SITES, free_ports(3)):
            bundle = kit / f"site-{s}"
            start(f"agent-{s}", [BIN / "flower-supernode", "--superlink", f"127.0.0.1:{ports[5]}",
                                 "--root-certificates", "ca.pem", "--auth-supernode-private-key", "node.key",
                                 "--node-config", f"site-dir='{bundle}'", "--host", "127.0.0.1", "--port", port],
                  bundle)  # fmt: skip
        yield {"kit": kit, "tmp": tmp_path, "start": start, "restart": restart, "superlink": f"127.0.0.1:{ports[5]}",
               "logs": logs}  # fmt: skip
    finally:
        stop(procs)


def release(fed: dict, method: str, n: int) -> subprocess.CompletedProcess:
    """Servers and the dealer for one release, and `synth --superlink` as party 0; its result."""
    kit, start = fed["kit"], fed["start"]
    files = ["--federation", "federation.json", "--cert", "cert.pem", "--key", "key.pem"]
    for j in (1, 2):
        start(f"server{j}-{n}", [*PY, "mpc-server", *files, "--schema", fed["tmp"] / "schema.json"], kit / f"party-{j}")
    start(f"dealer-{n}", [*PY, "mpc-dealer", *files], kit / "dealer")
    out = fed["tmp"] / f"release-{n}.csv"
    argv = [*PY, "synth", "--method", method, "--mpc", *files, "--schema", fed["tmp"] / "schema.json"]
    argv += ["--epsilon", "1", "--delta", "1e-6", "--out", out, "--rows", "200", "--superlink", fed["superlink"]]
    argv += ["--site-wait", "90", "--approval-wait", "120", *(["--rounds", "2"] if method == "distaim" else [])]
    return subprocess.Popen([str(a) for a in argv], cwd=kit / "party-0", stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


PY = [sys.executable, "-m", "privsyn_fed"]


def test_site_agents_serve_two_releases_with_a_persons_approval_and_logs_that_audit(federation):
    """Two releases through the same three agents: site b's agent restarts between them, and the
    SuperLink (its nodes in its database) restarts while site c's person has yet to approve the second.
    Site c's person approves each release (the request waits in `site pending` until then); both
    releases reach all three sites and their ledgers audit; each site's log checks out against its
    ledger copies and its store (one charge per release, none lost or repeated) and names both
    releases; a node with an unregistered key is refused by the SuperLink."""
    fed = federation
    rogue = fed["tmp"] / "rogue"
    rogue.mkdir()
    from privsyn_fed.agent.keys import node_keys

    private, _ = node_keys("rogue")
    (rogue / "node.key").write_bytes(private)
    (rogue / "node.key").chmod(0o600)
    intruder = fed["start"]("rogue", [BIN / "flower-supernode", "--superlink", fed["superlink"],
                                      "--root-certificates", fed["kit"] / "superlink" / "ca.pem",
                                      "--auth-supernode-private-key", "node.key", "--max-wait-time", "20",
                                      "--port", free_ports(1)[0]], rogue)  # fmt: skip
    assert intruder.wait(timeout=60) != 0
    assert "activate" in (fed["logs"] / "rogue.log").read_text().lower()

    state_c = fed["kit"] / "site-c" / "state"
    for n, method in enumerate(["fedtda", "distaim"]):
        if n == 1:  # between releases one agent restarts and resumes from what it keeps
            fed["restart"]("agent-b")
        proc = release(fed, method, n)
        deadline = time.monotonic() + 120  # site c's person approves each release once it waits
        while not approvals.pending(state_c) and time.monotonic() < deadline:
            time.sleep(0.5)
        [waiting] = approvals.pending(state_c)
        if n == 1:  # the SuperLink restarts while site c waits: the release goes on over the sites' own links
            fed["restart"]("superlink")
        done = run_cli("site", "approve", waiting["release"], "--state", state_c, "--by", f"Dr Ada {n}")
        assert done.returncode == 0, done.stderr
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-3000:]
        assert "3 of 3 sites answered" in stdout
        for s in SITES if n == 0 else ():  # after the restart Flower has failed the run: no replies come back
            assert f"site-{s}'s agent: status 0" in stderr, stderr[-3000:]
        ledger = fed["tmp"] / f"release-{n}.ledger.json"
        assert run_cli("audit", ledger).returncode == 0
    for s in SITES:
        bundle = fed["kit"] / f"site-{s}"
        check = run_cli("audit", "--site-log", bundle / "state" / "audit.log", "--budget-store", bundle / "budget.db")
        assert check.returncode == 0, check.stdout + check.stderr
        assert "2 releases" in check.stdout
    entries = [json.loads(line) for line in (state_c / "audit.log").read_text().splitlines()]
    assert [e["by"] for e in entries if e["kind"] == "verdict"] == ["person:Dr Ada 0", "person:Dr Ada 1"]
