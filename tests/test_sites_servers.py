"""Sites and compute servers: real processes, real sockets, real certificates.

Twelve sites run DistAIM, FLAIM and Fed-TDA over three compute servers (``synth --mpc --servers``);
a provisioned federation (``federation init --site``) runs with every member and site as a process
of its own, one site absent and one killed after it shared; the servers refuse a relayed step whose
shares are bound to another query, and a replayed one, so nothing is opened.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.mpc import ReleaseTerms
from privsyn_fed.silo import MarginalsQuery, Silo

from .conftest import SCHEMA, make_frame, run_cli

SITES = 12
ROWS = 250
PY = [sys.executable, "-m", "privsyn_fed"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """Twelve sites' CSVs of one correlated table, and the schema."""
    root = tmp_path_factory.mktemp("sites")
    (root / "schema.json").write_text(json.dumps(SCHEMA))
    paths = []
    for k in range(SITES):
        path = root / f"clinic{k:02d}.csv"
        make_frame(ROWS, seed=100 + k).to_csv(path, index=False)
        paths.append(path)
    return root, paths


def one_and_two_way_error(real: pd.DataFrame, syn: pd.DataFrame, schema: pf.Schema) -> float:
    """Mean total variation distance over every 1-way and 2-way marginal on the schema's bins."""
    a, b = Silo.from_frame(real, schema), Silo.from_frame(syn, schema)
    d = len(schema.columns)
    cliques = [(i,) for i in range(d)] + list(itertools.combinations(range(d), 2))
    errors = []
    for c in cliques:
        p, q = (MarginalsQuery((c,))(s).astype(float) for s in (a, b))
        errors.append(0.5 * np.abs(p / p.sum() - q / q.sum()).sum())
    return float(np.mean(errors))


def site_copies(paths) -> list[dict]:
    """Every site's ledger copy (the newest in the folder beside its silo)."""
    out = []
    for p in paths:
        newest = max(Path(f"{p}.ledgers").glob("*.ledger.json"), key=os.path.getmtime)
        out.append(json.loads(newest.read_text()))
    return out


@pytest.mark.parametrize("method", ["distaim", "flaim"])
def test_twelve_sites_over_three_servers_audit_and_match_the_in_process_error(table, method, tmp_path):
    """DistAIM and FLAIM over 12 sites and S = 3 servers (t = 1; Fed-TDA over sites and servers is
    ``test_site_agents``'): the ledger and every site's copy audit;
    each copy accepted the servers' request; the ledger names the sites that contributed; and the
    release's 1- and 2-way error is within reach of the in-process method's on the same rows."""
    root, paths = table
    out = tmp_path / "syn.csv"
    options = ["--rounds", "4"]
    argv = [
        "synth",
        "--method",
        method,
        "--mpc",
        "--servers",
        "3",
        "--collusion",
        "1",
        "--schema",
        root / "schema.json",
    ]
    argv += [a for p in paths for a in ("--silo", p)]
    argv += ["--epsilon", "2", "--delta", "1e-6", "--out", out, "--rows", "3000", "--force", *options]
    run = run_cli(*argv, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "12 of 12 sites answered" in run.stdout
    ledger_path = out.with_suffix(".ledger.json")
    audit = run_cli("audit", ledger_path, "--report", tmp_path / "report.md")
    assert audit.returncode == 0, audit.stdout
    assert "3 compute servers held the sites' answers" in (tmp_path / "report.md").read_text()
    ledger = json.loads(ledger_path.read_text())
    mpc = ledger["details"]["mpc"]
    assert mpc["layout"] == "sites and servers" and mpc["servers"] == 3 and mpc["collusion"] == 1
    assert mpc["sites"] == [f"clinic{k:02d}" for k in range(SITES)]
    named = {s for entry in ledger["details"]["site_contributions"] for s in entry["sites"]}
    assert named == set(mpc["sites"])
    for copy in site_copies(paths):
        path = tmp_path / "copy.json"
        path.write_text(json.dumps(copy))
        assert run_cli("audit", path).returncode == 0
        assert copy["details"]["party"]["request"]["parties"] == 3
        assert copy["status"] == "complete"
        if method == "distaim":  # its answers went into the pool: later steps are the servers' to cost
            assert "pooled" in copy["details"]["site"]
        else:  # every step it took part in, at the ledger's own sigma: the same spend
            assert copy["rho_spent"] == pytest.approx(ledger["rho_spent"], rel=1e-9)
    schema = pf.Schema.load(root / "schema.json")
    real = pd.concat([pd.read_csv(p, keep_default_na=False) for p in paths])
    mpc_error = one_and_two_way_error(real, pd.read_csv(out, keep_default_na=False), schema)
    frames = {f"c{k}": pd.read_csv(p, keep_default_na=False) for k, p in enumerate(paths)}
    local = pf.synthesize(frames, method, 2.0, 1e-6, schema=schema, rows=3000, seed=1, progress=False, rounds=4)
    local_error = one_and_two_way_error(real, local.data, schema)
    assert mpc_error <= 1.5 * local_error + 0.03, (mpc_error, local_error)


def provision(root: Path, sites: list[str]) -> Path:
    """``federation init`` with three servers, the dealer and ``sites``, on free loopback ports."""
    from privsyn_fed.mpc.launch import free_ports

    ports = free_ports(5)
    argv = ["federation", "init", "--out", root / "kit", "--name", "sites-test", "--schema", root / "schema.json"]
    for k, org in enumerate(["Stats Office", "University", "Registry"]):
        argv += ["--party", f"{org}@127.0.0.1:{ports[k]}"]
    argv += ["--dealer", f"Trust@127.0.0.1:{ports[3]}", "--site-port", str(ports[4])]
    argv += [a for s in sites for a in ("--site", f"{s}=Clinic {s}")]
    assert run_cli(*argv).returncode == 0
    return root / "kit"


def test_a_site_absent_and_a_site_killed_after_sharing_leave_the_release_complete(table, tmp_path):
    """Across processes as provisioned: of four sites one never appears and one is killed once its
    answers are in DistAIM's pool; the release completes, audits, and its ledger names exactly the
    three sites that contributed to the pool. Every site connects outward only."""
    root, paths = table
    (tmp_path / "schema.json").write_text((root / "schema.json").read_text())
    names = ["clinic-a", "clinic-b", "clinic-c", "clinic-d"]
    kit = provision(tmp_path, names)
    procs: dict[str, subprocess.Popen] = {}
    logs = tmp_path / "logs"
    logs.mkdir()

    def start(name: str, folder: Path, args: list[str]) -> None:
        files = ["--federation", "federation.json", "--cert", "cert.pem", "--key", "key.pem"]
        with open(logs / f"{name}.err", "wb") as err:
            procs[name] = subprocess.Popen([*PY, *args, *files], cwd=folder, stdout=subprocess.DEVNULL, stderr=err)

    try:
        for j in (1, 2):
            start(f"server{j}", kit / f"party-{j}", ["mpc-server", "--schema", str(tmp_path / "schema.json")])
        start("dealer", kit / "dealer", ["mpc-dealer"])
        for name, silo in zip(names[:3], paths):  # clinic-d never appears
            start(
                name,
                kit / f"site-{name}",
                ["site", "run", "--schema", str(tmp_path / "schema.json"), "--silo", str(silo)],
            )
        from privsyn_fed.mpc.launch_servers import servers_coordinator

        killed = []

        def progress(fraction, message):
            if "round 1" in message and not killed:  # every sampled site's answers are in the pool now
                procs["clinic-c"].send_signal(signal.SIGKILL)
                killed.append(message)

        party0 = kit / "party-0"
        with servers_coordinator(
            tmp_path / "schema.json",
            [],
            federation=party0 / "federation.json",
            cert=party0 / "cert.pem",
            key=party0 / "key.pem",
            site_wait_s=15,
            release=ReleaseTerms("distaim", 2.0, 1e-6),
        ) as agg:
            agg.begin()
            result = pf.api.synthesize_over(
                agg,
                "distaim",
                2.0,
                1e-6,
                ledger_path=tmp_path / "out.ledger.json",
                rows=200,
                progress=progress,
                rounds=4,
            )
        assert killed, "the release never reached its first round"
        assert len(result.data) == 200
        ledger = json.loads((tmp_path / "out.ledger.json").read_text())
        assert ledger["status"] == "complete"
        pooled = [e for e in ledger["details"]["site_contributions"] if e["step"].startswith("pool")]
        assert [s for e in pooled for s in e["sites"]] == ["clinic-a", "clinic-b", "clinic-c"]
        audit = run_cli("audit", tmp_path / "out.ledger.json")
        assert audit.returncode == 0, audit.stdout
        for name in ("clinic-a", "clinic-b"):
            assert procs[name].wait(timeout=60) == 0, (logs / f"{name}.err").read_text()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def test_servers_refuse_shares_bound_to_another_query_and_a_replayed_step(table, tmp_path):
    """Party 0 relays a step whose query digest it changed, then replays a step the servers already
    took: each server refuses, so nothing is opened, and the next honest step still runs."""
    from privsyn_fed.common import MPCError
    from privsyn_fed.mpc import secure
    from privsyn_fed.mpc.launch_servers import servers_coordinator

    root, paths = table
    with servers_coordinator(
        root / "schema.json", paths[:3], servers=3, collusion=1, release=ReleaseTerms("fedtda", 1.0, 1e-6)
    ) as agg:
        agg.begin()
        q = MarginalsQuery(((0,),))
        extra = {"sigma": 50.0, "label": "marginal(age)"}
        answered, mine, messages = agg._collect("noisy_sum", q, agg.silo_names, extra)
        assert answered == agg.silo_names
        forged = [(dict(h, digest="0" * 64), a) for h, a in messages]
        with pytest.raises(MPCError, match="another query"):
            agg._relay("noisy_sum", forged)
        answered, mine, messages = agg._collect("noisy_sum", q, agg.silo_names, extra)
        agg._relay("noisy_sum", messages)
        opened = secure.noisy_sum(mine, [0, 1, 2], q.size(agg.schema), 50.0, agg.noise)
        assert abs(float(opened.sum()) - 3 * ROWS) < 1000  # the true total, under noise of sd ~61 x 8 cells
        with pytest.raises(MPCError, match="replayed"):
            agg._relay("noisy_sum", messages)
        agg.bind_release(None)


def test_a_sites_bad_input_is_one_line_and_exit_2_before_it_connects(table, tmp_path):
    """A server's certificate given to `site`, a silo that is not there, a federation without
    sites, an existing ledger copy without --force, and `synth --servers` with a sites federation's
    --silo: each one line naming what is wrong, exit 2, nothing connected or written."""
    from .conftest import assert_one_line_error

    root, paths = table
    (tmp_path / "schema.json").write_text((root / "schema.json").read_text())
    kit = provision(tmp_path, ["clinic-a"])
    fed, schema = kit / "federation.json", tmp_path / "schema.json"
    site = kit / "site-clinic-a"

    def site_run(*extra):
        return run_cli("site", "run", "--federation", fed, "--schema", schema, "--connect-timeout", "1", *extra)

    party1 = ["--cert", kit / "party-1" / "cert.pem", "--key", kit / "party-1" / "key.pem"]
    own = ["--cert", site / "cert.pem", "--key", site / "key.pem"]
    assert_one_line_error(site_run(*party1, "--silo", paths[0]), "names party-1, not a site")
    assert_one_line_error(site_run(*own, "--silo", tmp_path / "missing.csv"), "missing.csv")
    taken = tmp_path / "copy.ledger.json"
    taken.write_text("{}")
    assert_one_line_error(site_run(*own, "--silo", paths[0], "--ledger", taken), "copy.ledger.json")
    assert taken.read_text() == "{}"
    mesh = kit.parent / "mesh.json"
    data = json.loads(fed.read_text())
    del data["sites"]
    data["ca"] = str(kit / "ca" / "ca.pem")
    mesh.write_text(json.dumps(data))
    assert_one_line_error(
        run_cli("site", "run", "--federation", mesh, "--schema", schema, *own, "--silo", paths[0]), "lists no sites"
    )
    party0 = ["--cert", kit / "party-0" / "cert.pem", "--key", kit / "party-0" / "key.pem"]
    synth = run_cli(
        "synth", "--method", "distaim", "--mpc", "--federation", fed, *party0, "--schema", schema,
        "--silo", paths[0], "--epsilon", "1", "--delta", "1e-6", "--out", tmp_path / "out.csv",
    )  # fmt: skip
    assert_one_line_error(synth, "reads no --silo")
    assert not (tmp_path / "out.csv").exists()
