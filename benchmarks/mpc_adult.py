"""DistAIM over MPC on Adult: 3 silo parties and a dealer on loopback, against the in-process run.

    .venv/bin/python benchmarks/mpc_adult.py run [--rounds 10] [--parties 3] [--collusion T] [--repeat K]
        [--modes mpc sites in-process] [--servers S]
    .venv/bin/python benchmarks/mpc_adult.py report

Adult's 32,561 training rows are split IID into one CSV per party. Both runs use the same
settings (epsilon 1, delta 1e-9, T rounds, every party in every round, 64 three-way marginals);
the wall time of each round is taken from the progress updates (select, measure and the model
refit), and the MPC run also reports CrypTen's communication rounds and bytes per party, and the
command channel's broadcasts. Every party adds its own noise; ``--collusion`` is the threshold t
(default n - 1). Mode ``sites`` runs the same rows as one site per part over ``--servers`` compute
servers (``mpc.launch_servers``): each site shares once, the servers select and measure.
``--repeat`` runs each mode K times (the spread of the workload error).
Results are appended to ``benchmarks/out/mpc_adult.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import pandas as pd  # noqa: E402
from adult import load_adult  # noqa: E402

import privsyn_fed as pf  # noqa: E402
from privsyn_fed.common import Progress  # noqa: E402
from privsyn_fed.evaluation import evaluate, partition  # noqa: E402
from privsyn_fed.mpc import ReleaseTerms, coordinator  # noqa: E402
from privsyn_fed.mpc.launch_servers import servers_coordinator  # noqa: E402

OUT = Path(__file__).parent / "out"
TRAIN_ROWS = 32_561


class Clock(Progress):
    """Records when each progress update arrives (one per DistAIM step)."""

    def __init__(self):
        super().__init__("bench", enabled=False)
        self.marks: list[tuple[float, str]] = []

    def update(self, fraction: float, message: str) -> None:
        self.marks.append((time.monotonic(), message))


def round_times(start: float, marks) -> list[float]:
    times = [t for t, _ in marks]
    return list(np.diff([start] + times))


def run(args) -> None:
    OUT.mkdir(exist_ok=True)
    csv, schema_path = load_adult(OUT)
    df = pd.read_csv(csv, dtype=str, keep_default_na=False)
    train = df.iloc[:TRAIN_ROWS].reset_index(drop=True)
    schema = pf.Schema.load(schema_path)
    part = partition(train, args.parties, "iid", seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for k, rows in enumerate(part.parts()):
            paths.append(Path(tmp) / f"party{k}.csv")
            train.iloc[rows].to_csv(paths[-1], index=False)
        silos = [pf.Silo.from_csv(p, schema) for p in paths]
        options = {"rounds": args.rounds}
        for mode in [m for m in args.modes for _ in range(args.repeat)]:
            clock = Clock()
            start = time.monotonic()
            site_bytes = None
            if mode == "in-process":
                result = pf.synthesize(silos, "distaim", 1.0, 1e-9, progress=clock, **options)
                joined, traffic = start, None
            elif mode == "sites":
                release = ReleaseTerms("distaim", 1.0, 1e-9)
                with servers_coordinator(
                    schema_path, paths, servers=args.servers, collusion=args.collusion, release=release
                ) as agg:
                    agg.begin()
                    joined = time.monotonic()
                    result = pf.api.synthesize_over(agg, "distaim", 1.0, 1e-9, progress=clock, **options)
                    traffic = result.info["traffic"]["servers"]
                    site_bytes = max(v["sent"] + v["received"] for v in result.info["traffic"]["sites"].values())
            else:
                with coordinator(schema_path, paths, collusion=args.collusion) as agg:
                    joined = time.monotonic()
                    result = pf.api.synthesize_over(agg, "distaim", 1.0, 1e-9, progress=clock, **options)
                    traffic = result.info["traffic"]["parties"]
            total = time.monotonic() - start
            steps = round_times(joined, clock.marks)
            report = evaluate(train, result.data, schema, label="income")
            row = {
                "mode": mode,
                "parties": args.parties,
                "collusion": None
                if mode == "in-process"
                else args.collusion
                if args.collusion is not None
                else (args.servers if mode == "sites" else args.parties) - 1,
                "servers": args.servers if mode == "sites" else None,
                "site_bytes": site_bytes,
                "rounds": args.rounds,
                "seconds_total": total,
                "seconds_start": joined - start,
                "seconds_oneways": steps[0],
                "seconds_per_round": steps[1:],
                "workload_error": report["workload"]["error"],
                "traffic": traffic,
                "selected": [e["query"] for e in result.ledger["entries"] if e["mechanism"] == "gaussian"],
            }
            print(json.dumps({k: v for k, v in row.items() if k != "selected"}))
            with open(OUT / "mpc_adult.jsonl", "a") as fh:
                fh.write(json.dumps(row) + "\n")


def report(_args) -> None:
    rows = [json.loads(line) for line in open(OUT / "mpc_adult.jsonl")]
    print(
        "| Run | Start (s) | 1-ways (s) | Round 1 (s) | Rounds 2..T mean / max (s) | Total (s) | "
        "Workload error | CrypTen rounds, party 0 / others | MB per party |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        rest = r["seconds_per_round"][1:]
        t = r["traffic"]
        comm = f"{t[0]['rounds']:.0f} / {t[1]['rounds']:.0f}" if t else "n/a"
        if t and "command_broadcasts" in t[0]:
            comm += f" (+{t[0]['command_broadcasts']:.0f} broadcasts)"
        mode = r["mode"] + (f" S={r['servers']}" if r.get("servers") else "")
        mode += f" t={r['collusion']}" if r.get("collusion") is not None else ""
        if r.get("site_bytes"):
            mode += f" (at most {r['site_bytes'] / 1e6:.2f} MB per site)"
        mb = " / ".join(f"{(p['bytes'] + p['command_bytes']) / 1e6:.0f}" for p in t) if t else "n/a"
        print(
            f"| {mode}, {r['parties']} parties, T={r['rounds']} | {r['seconds_start']:.1f} | "
            f"{r['seconds_oneways']:.1f} | {r['seconds_per_round'][0]:.1f} | "
            f"{np.mean(rest):.1f} / {np.max(rest):.1f} | {r['seconds_total']:.0f} | {r['workload_error']:.3f} | "
            f"{comm} | {mb} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--rounds", type=int, default=10)
    r.add_argument("--parties", type=int, default=3)
    r.add_argument("--modes", nargs="+", default=["mpc", "in-process"], choices=["mpc", "sites", "in-process"])
    r.add_argument("--servers", type=int, default=3, help="compute servers of mode sites (default 3)")
    r.add_argument("--collusion", type=int, default=None, help="MPC collusion threshold t (default parties - 1)")
    r.add_argument("--repeat", type=int, default=1, help="runs of each mode")
    sub.add_parser("report")
    args = parser.parse_args()
    {"run": run, "report": report}[args.command](args)


if __name__ == "__main__":
    main()
