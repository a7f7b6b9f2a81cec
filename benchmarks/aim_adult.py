"""Benchmark: our AIM against smartnoise-synth's AIM on UCI Adult (48,842 rows, 15 columns,
numeric columns in 32 uniform bins between public bounds), epsilon 1, delta 1e-9, the same
workload (a seeded sample of 64 three-way marginals), reporting wall time, peak memory and
workload error as a markdown table.

    .venv/bin/python benchmarks/aim_adult.py [--seeds 1] [--smartnoise PYTHON]

``--smartnoise`` names the python of a separate virtual environment with smartnoise-synth
installed (`python3 -m venv sn && sn/bin/pip install smartnoise-synth`); without it only our AIM
runs. Every run is a separate process so its peak memory is its own.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from adult import load_adult  # noqa: E402
from workload_error import workload_error  # noqa: E402

import privsyn_fed as pf  # noqa: E402
from privsyn_fed.methods import sample_workload  # noqa: E402


def timed(
    cmd: list[str], log: Path, timeout: float, env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[float, float, int]:
    """Run ``cmd`` (in ``env`` and the folder ``cwd`` when given); return wall seconds, peak RSS in MB
    of that child, and its exit status (-9 when it was stopped at ``timeout`` seconds)."""
    start = time.monotonic()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
    wall = time.monotonic() - start
    return wall, usage.ru_maxrss / 1024.0, os.waitstatus_to_exitcode(status)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--seeds", type=int, default=1, help="repetitions of each method")
    ap.add_argument("--smartnoise", help="python executable of a venv with smartnoise-synth")
    ap.add_argument("--out", default=str(HERE / "out"))
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds before a run is stopped")
    ap.add_argument("--skip-ours", action="store_true", help="only run smartnoise-synth")
    args = ap.parse_args()
    out = Path(args.out)
    csv, schema_path = load_adult(out)
    schema = pf.Schema.load(schema_path)
    real = pf.Silo.from_csv(csv, schema)
    workload = sample_workload(len(schema.columns), 3, 64, seed=0)
    codes_csv = out / "adult-codes.csv"
    pd.DataFrame(real.rows(), columns=schema.names).to_csv(codes_csv, index=False)

    rows = []
    for rep in range(args.seeds):
        syn = out / f"ours-{rep}.csv"
        cmd = (
            []
            if args.skip_ours
            else [
                sys.executable,
                "-m",
                "privsyn_fed",
                "synth",
                "--method",
                "aim",
                "--schema",
                str(schema_path),
                "--silo",
                str(csv),
                "--epsilon",
                str(args.epsilon),
                "--delta",
                str(args.delta),
                "--out",
                str(syn),
                "--force",
            ]
        )
        if cmd:
            wall, peak, rc = timed(cmd, out / f"ours-{rep}.log", args.timeout)
            err = workload_error(real, pf.Silo.from_csv(syn, schema), workload) if rc == 0 else float("nan")
            rows.append(("privsyn-fed AIM", rep, wall, peak, err, rc))
            print(rows[-1], flush=True)
        if args.smartnoise:
            syn = out / f"smartnoise-{rep}.csv"
            cmd = [
                args.smartnoise,
                str(HERE / "smartnoise_aim.py"),
                str(codes_csv),
                str(syn),
                str(args.epsilon),
                str(args.delta),
                "3",
                "64",
            ]
            wall, peak, rc = timed(cmd, out / f"smartnoise-{rep}.log", args.timeout)
            err = float("nan")
            if rc == 0:
                codes = pd.read_csv(syn)[schema.names].to_numpy()
                err = workload_error(real, pf.Silo("sn", codes, schema), workload)
            rows.append(("smartnoise-synth AIM", rep, wall, peak, err, rc))
            print(rows[-1], flush=True)

    table = ["| method | run | wall time (s) | peak memory (MB) | workload error | exit |", "|---|---|---|---|---|---|"]
    table += [f"| {m} | {r} | {w:.0f} | {p:.0f} | {e:.3f} | {rc} |" for m, r, w, p, e, rc in rows]
    result = out / ("aim_adult_smartnoise.md" if args.skip_ours else "aim_adult.md")
    result.write_text("\n".join(table) + "\n")
    print("\n".join(table))
    print(f"written to {result}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
