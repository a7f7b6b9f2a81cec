"""Sites and compute servers on one machine: traffic, time and error of DistAIM as K grows.

    .venv/bin/python benchmarks/sites_servers.py --sites 10 --servers 3 --collusion 1 --json out.json
    .venv/bin/python benchmarks/sites_servers.py --sites 6 --mesh --json mesh.json

A fixed-seed table of its own (six correlated columns: age, hours, sex, sector, education and
income) is generated, ``--rows-per-site`` rows per site (every site draws from the same
distribution with its own seed), and written as K site CSVs in a temporary folder. The release
is DistAIM at ``--epsilon`` (delta 1e-6) for ``--rounds`` rounds over K sites (one
``privsyn-fed site`` process holding every site as a thread) and S compute servers (this process
is server 0; S - 1 ``mpc-server`` processes and the dealer), all on loopback TLS.

Measured, per release:
  * ``site_bytes``: the most any site sent plus received (party 0's count of its frames), and
    ``site_bytes_mean`` over the K sites;
  * ``server_bytes``: the most any server sent, CrypTen's bytes plus its command bytes;
    ``server_sharing_bytes``: the sealed shares party 0 relayed to each other server (the most to
    any one; the part of the servers' traffic that carries the sites' answers);
  * ``seconds``: wall time from the start of the servers to the end of the release (the servers
    stopped), with ``seconds_start`` (until every site has begun the release: the servers joined,
    the sites connected, accepted and read their silos) and ``seconds_release`` (DistAIM itself);
  * ``workload_error``: mean total-variation distance (half the L1 distance of the normalised
    marginals) over the release's workload of 3-way marginals, synthetic rows against the real
    pooled rows; ``in_process_error`` the same for in-process DistAIM on the same rows, epsilon,
    rounds and seeds (``in_process_seconds`` its wall time); ``in_process_matched_error`` the same
    at the epsilon whose zCDP budget is rho / noise_factor^2 (every noise scale times the noise
    factor, as the servers' noise is: a control for its cost). All are averaged over ``--repeats``
    seeds; the in-process run has no ``noise_factor`` (``sqrt(S / (S - t))``) on its noise.
``--mesh`` runs the older layout instead (every silo a CrypTen party, ``mpc.launch.coordinator``,
collusion ``--collusion``) and reports its per-party bytes (``party_bytes``) and seconds.
Progress lines go to stderr; the JSON to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import privsyn_fed as pf
from privsyn_fed.accounting.conversions import epsilon_to_rho, rho_to_epsilon
from privsyn_fed.evaluation import encode, workload_error
from privsyn_fed.mpc import ReleaseTerms
from privsyn_fed.mpc.servers import noise_factor

DELTA = 1e-6

SCHEMA = {
    "columns": [
        {"name": "age", "type": "numeric", "lower": 18, "upper": 90, "bins": 8, "integer": True},
        {"name": "hours", "type": "numeric", "lower": 0, "upper": 80, "bins": 8},
        {"name": "sex", "type": "categorical", "categories": ["F", "M"]},
        {"name": "sector", "type": "categorical", "categories": ["public", "private", "self"]},
        {"name": "education", "type": "categorical", "categories": ["school", "college", "degree", "higher"]},
        {"name": "income", "type": "categorical", "categories": ["<=50K", ">50K"]},
    ]
}


def say(line: str) -> None:
    print(f"[sites_servers {time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def site_rows(n: int, seed: int) -> pd.DataFrame:
    """``n`` rows where hours depend on sex and sector, education on age, and income on all four."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 91, n)
    sex = rng.choice(["F", "M"], n)
    sector = rng.choice(["public", "private", "self"], n, p=[0.2, 0.65, 0.15])
    hours = np.clip(38 + np.where(sex == "M", 4, 0) + np.where(sector == "self", 8, 0) + rng.normal(0, 9, n), 0, 80)
    level = np.clip(np.round(1.2 + 0.015 * (age - 40) + rng.normal(0, 0.9, n)), 0, 3).astype(int)
    education = np.array(["school", "college", "degree", "higher"])[level]
    score = 0.04 * (age - 40) + 0.05 * (hours - 40) + 0.5 * level + np.where(sex == "M", 0.6, 0) + rng.normal(0, 1, n)
    income = np.where(score > 1.3, ">50K", "<=50K")
    return pd.DataFrame(
        {"age": age, "hours": hours.round(1), "sex": sex, "sector": sector, "education": education, "income": income}
    )


def write_sites(folder: Path, sites: int, rows: int) -> tuple[Path, list[Path], pd.DataFrame]:
    """The schema and one CSV per site (site ``k`` draws with seed ``1000 + k``); the pooled rows."""
    schema_path = folder / "schema.json"
    schema_path.write_text(json.dumps(SCHEMA))
    paths, frames = [], []
    for k in range(sites):
        frames.append(site_rows(rows, 1000 + k))
        paths.append(folder / f"site{k:03d}.csv")
        frames[-1].to_csv(paths[-1], index=False)
    return schema_path, paths, pd.concat(frames, ignore_index=True)


def tv_error(real: np.ndarray, result, schema: pf.Schema) -> float:
    """Mean total variation distance over the release's workload (half the normalised L1)."""
    cliques = [[schema.names.index(c) for c in clique] for clique in result.info["workload"]]
    syn = encode(result.data, schema, "synthetic rows")
    return 0.5 * workload_error(real, syn, list(schema.shape), cliques)


def options(args, seed: int) -> dict:
    rate = {} if args.sample_rate is None else {"sample_rate": args.sample_rate}
    return {"rows": args.synthetic_rows, "rounds": args.rounds, "seed": seed, "progress": False, **rate}


def release_options(args, seed: int, agg, ledger: Path) -> dict:
    return {"ledger_path": ledger, "overwrite": True, **options(args, seed)}


def in_process(args, pooled: list[Path], schema: pf.Schema, real: np.ndarray, epsilon: float) -> tuple[list, list]:
    """In-process DistAIM (the trusted aggregator) on the same site tables at ``epsilon``, once per seed."""
    errors, seconds = [], []
    for seed in seeds(args):
        start = time.monotonic()
        result = pf.synthesize(pooled, "distaim", epsilon, DELTA, schema=schema, **options(args, seed))
        seconds.append(time.monotonic() - start)
        errors.append(tv_error(real, result, schema))
        say(f"in-process at epsilon {epsilon:.4g}, seed {seed}: error {errors[-1]:.4f} in {seconds[-1]:.1f} s")
    return errors, seconds


def seeds(args) -> list[int]:
    return [args.seed + i for i in range(args.repeats)]


def servers_release(args, schema_path: Path, paths: list[Path], seed: int, ledger: Path) -> dict:
    """One release over K sites and S servers on this machine; its figures."""
    from privsyn_fed.mpc.launch_servers import servers_coordinator

    relayed = [0] * args.servers
    connected = [0]
    marks: dict[str, float] = {}  # seconds since the start at which the servers joined, the sites connected

    def log(line: str) -> None:
        now = time.monotonic() - start
        if line.startswith("site ") and " connected from " in line:
            connected[0] += 1
            if connected[0] == len(paths):
                marks["seconds_sites_connected"] = now
            if connected[0] in (1, len(paths)) or connected[0] % 25 == 0:
                say(f"+{now:.2f} s: {connected[0]} of {len(paths)} sites have connected")
        else:
            if "compute servers and the dealer joined" in line:
                marks["seconds_servers_joined"] = now
            say(f"+{now:.2f} s: {line}")

    start = time.monotonic()
    with servers_coordinator(
        schema_path,
        paths,
        servers=args.servers,
        collusion=args.collusion,
        seed=seed,
        log=log,
        release=ReleaseTerms("distaim", args.epsilon, DELTA),
        site_wait_s=args.site_wait,
    ) as agg:
        marks["seconds_declared"] = time.monotonic() - start  # every connected site accepted the release
        relay = agg._relay

        def counted(op, messages):  # the sealed shares party 0 relays to servers 1..S-1
            for j in range(1, len(messages)):
                relayed[j] += int(messages[j][1]["_sealed"].nbytes)
            return relay(op, messages)

        agg._relay = counted
        agg.begin()
        began = time.monotonic()
        result = pf.api.synthesize_over(agg, "distaim", args.epsilon, DELTA, **release_options(args, seed, agg, ledger))
        released = time.monotonic()
        traffic = agg.traffic_summary()
    seconds = time.monotonic() - start
    per_site = [v["sent"] + v["received"] for v in traffic["sites"].values()]
    per_site += [0] * (len(paths) - len(per_site))
    servers = traffic["servers"]
    return {
        "result": result,
        "seconds": seconds,
        "seconds_start": began - start,
        "seconds_release": released - began,
        **marks,
        "site_bytes": max(per_site),
        "site_bytes_mean": float(np.mean(per_site)),
        "sites_active": traffic["silos_active"],
        "server_bytes": max(p["bytes"] + p["command_bytes"] for p in servers),
        "server_bytes_each": [p["bytes"] + p["command_bytes"] for p in servers],
        "server_crypten_bytes_each": [p["bytes"] for p in servers],
        "server_sharing_bytes": max(relayed[1:]) if args.servers > 1 else 0,
        "sample_rate": result.info.get("sample_rate"),
        "pooled_sites": result.info.get("pooled_silos"),
    }


def mesh_release(args, schema_path: Path, paths: list[Path], seed: int, ledger: Path) -> dict:
    """One release over the older mesh layout: every silo a CrypTen party (``privsyn-fed synth --mpc``)."""
    from privsyn_fed.mpc.launch import coordinator

    start = time.monotonic()
    with coordinator(
        schema_path,
        paths,
        seed=seed,
        collusion=args.collusion,
        log=say,
        release=ReleaseTerms("distaim", args.epsilon, DELTA),
    ) as agg:
        agg.begin()
        began = time.monotonic()
        result = pf.api.synthesize_over(agg, "distaim", args.epsilon, DELTA, **release_options(args, seed, agg, ledger))
        released = time.monotonic()
        per = agg.traffic_summary()["parties"]
    each = [p["bytes"] + p["command_bytes"] for p in per]
    return {
        "result": result,
        "seconds": time.monotonic() - start,
        "seconds_start": began - start,
        "seconds_release": released - began,
        "party_bytes": max(each),
        "party_bytes_each": each,
        "party_crypten_bytes_each": [p["bytes"] for p in per],
        "sample_rate": result.info.get("sample_rate"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sites", type=int, required=True, help="K: sites (silos)")
    parser.add_argument("--servers", type=int, default=3, help="S: compute servers (default 3)")
    parser.add_argument("--collusion", type=int, default=1, help="t: servers that may collude (default 1)")
    parser.add_argument("--rows-per-site", type=int, default=2000, help="rows in each site's CSV (default 2000)")
    parser.add_argument("--rounds", type=int, default=4, help="DistAIM's rounds (default 4)")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0, help="first seed (noise and site sampling)")
    parser.add_argument("--repeats", type=int, default=1, help="releases, seeds seed..seed+repeats-1")
    parser.add_argument("--synthetic-rows", type=int, default=50_000, help="rows each release draws (default 50,000)")
    parser.add_argument(
        "--sample-rate", type=float, default=None, help="DistAIM's sample rate (default 1 below 100 sites, else 0.1)"
    )
    parser.add_argument("--site-wait", type=float, default=120.0, help="seconds the sites have to connect")
    parser.add_argument("--mesh", action="store_true", help="the older layout: every silo a CrypTen party")
    parser.add_argument("--no-in-process", action="store_true", help="skip the in-process comparison")
    parser.add_argument("--json", required=True, help="where to write the figures")
    args = parser.parse_args()

    schema = pf.Schema.from_dict(SCHEMA)
    with tempfile.TemporaryDirectory(prefix="sites-servers-") as tmp:
        schema_path, paths, pooled = write_sites(Path(tmp), args.sites, args.rows_per_site)
        real = encode(pooled, schema, "pooled rows")
        layout = "mesh" if args.mesh else "sites and servers"
        say(f"{args.sites} sites x {args.rows_per_site} rows ({len(pooled):,} pooled) in {tmp}; layout {layout}")
        runs = []
        for seed in seeds(args):
            ledger = Path(tmp) / f"release-{seed}.ledger.json"
            if args.mesh:
                say(f"seed {seed}: {args.sites} parties (mesh) and the dealer, collusion {args.collusion}")
                run = mesh_release(args, schema_path, paths, seed, ledger)
            else:
                say(f"seed {seed}: {args.servers} servers, the dealer, {args.sites} sites, collusion {args.collusion}")
                run = servers_release(args, schema_path, paths, seed, ledger)
            run["error"] = tv_error(real, run.pop("result"), schema)
            say(f"seed {seed}: error {run['error']:.4f}, {run['seconds']:.1f} s")
            runs.append(run)
        factor = noise_factor(args.sites if args.mesh else args.servers, args.collusion)
        # the same noise in process: rho / factor^2 scales every sigma and Gumbel scale by the factor
        matched = rho_to_epsilon(epsilon_to_rho(args.epsilon, DELTA) / factor**2, DELTA)
        errors, in_seconds, matched_errors = [], [], []
        if not args.no_in_process:
            errors, in_seconds = in_process(args, paths, schema, real, args.epsilon)
            matched_errors = in_process(args, paths, schema, real, matched)[0]

    def mean(key: str) -> float:
        return float(np.mean([r[key] for r in runs]))

    out = {
        "layout": layout,
        "sites": args.sites,
        "servers": None if args.mesh else args.servers,
        "parties": args.sites if args.mesh else args.servers,
        "collusion": args.collusion,
        "rows_per_site": args.rows_per_site,
        "pooled_rows": len(pooled),
        "rounds": args.rounds,
        "epsilon": args.epsilon,
        "delta": DELTA,
        "synthetic_rows": args.synthetic_rows,
        "sample_rate": runs[0].get("sample_rate"),
        "seeds": seeds(args),
        "seconds": mean("seconds"),
        "seconds_start": mean("seconds_start"),
        "seconds_release": mean("seconds_release"),
        "noise_factor": factor,
        "workload_error": mean("error"),
        "workload_errors": [r["error"] for r in runs],
        "in_process_error": float(np.mean(errors)) if errors else None,
        "in_process_errors": errors,
        "in_process_seconds": float(np.mean(in_seconds)) if in_seconds else None,
        "in_process_matched_epsilon": matched,
        "in_process_matched_error": float(np.mean(matched_errors)) if matched_errors else None,
        "in_process_matched_errors": matched_errors,
        "runs": runs,
    }
    for key in ("site_bytes", "site_bytes_mean", "server_bytes", "server_sharing_bytes", "party_bytes"):
        if key in runs[0]:
            out[key] = mean(key)
    Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    say(
        f"wrote {args.json}: error {out['workload_error']:.4f} (in-process {out['in_process_error']}), "
        f"{out['seconds']:.1f} s"
    )


if __name__ == "__main__":
    main()
