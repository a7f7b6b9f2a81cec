"""Silos larger than memory: UCI Adult repeated to millions of rows, as CSV and as Parquet.

  build   write adult-<N>.csv and adult-<N>.parquet (Adult's 48,842 rows repeated to N rows)
  read    the reading step alone (``Silo.load``, one process per file): wall time and peak memory
  run     `privsyn-fed synth` with the big silo and Adult itself as a second silo (DistAIM needs
          two): wall time and peak memory of the whole release
  report  the Markdown tables of everything measured (benchmarks/out/large/results.jsonl)

`--code DIR` runs another checkout's package (for the figures of an earlier version).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from adult import load_adult  # noqa: E402
from aim_adult import timed  # noqa: E402

OUT = HERE / "out" / "large"
RESULTS = OUT / "results.jsonl"
ADULT_ROWS = 48_842


def paths(rows: int) -> dict[str, Path]:
    """The CSV and Parquet files of ``rows`` rows."""
    return {"csv": OUT / f"adult-{rows}.csv", "parquet": OUT / f"adult-{rows}.parquet"}


def build(rows: int) -> None:
    """Adult repeated (and cut) to ``rows`` rows, written as CSV by appending and as Parquet in row
    groups of 1M rows, neither ever held whole in memory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    adult_csv, _ = load_adult(OUT)
    adult = pd.read_csv(adult_csv, dtype=str, keep_default_na=False)
    out = paths(rows)
    if not out["csv"].exists():
        tmp = out["csv"].with_suffix(".tmp")
        text = adult.to_csv(index=False, header=False)
        lines = text.splitlines(keepends=True)
        with open(tmp, "w") as fh:
            fh.write(",".join(adult.columns) + "\n")
            left = rows
            while left > 0:
                fh.writelines(lines[: min(left, len(lines))])
                left -= len(lines)
        os.replace(tmp, out["csv"])
    if not out["parquet"].exists():
        typed = pd.read_csv(adult_csv, keep_default_na=False, na_values=[])
        table = pa.Table.from_pandas(typed, preserve_index=False)
        group = pa.concat_tables([table] * (1_000_000 // ADULT_ROWS + 1)).slice(0, 1_000_000)
        tmp = out["parquet"].with_suffix(".tmp")
        with pq.ParquetWriter(tmp, table.schema) as writer:
            left = rows
            while left > 0:
                writer.write_table(group.slice(0, min(left, 1_000_000)))
                left -= 1_000_000
        os.replace(tmp, out["parquet"])
    for fmt, p in out.items():
        print(f"{p}: {p.stat().st_size / 2**20:,.0f} MB ({fmt})")


READ_SCRIPT = """
import sys, time
import privsyn_fed as pf
schema = pf.Schema.load(sys.argv[2])
start = time.monotonic()
silo = getattr(pf.Silo, "load", pf.Silo.from_csv)(sys.argv[1], schema)  # earlier versions: CSV only
print(time.monotonic() - start, silo.true_size())
"""


def record(row: dict) -> None:
    """Append one measurement to ``RESULTS`` and print it."""
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a") as fh:
        fh.write(json.dumps(row) + "\n")
    print(json.dumps(row))


def env_for(code: str | None) -> dict[str, str]:
    """The environment of a child: ``PYTHONPATH`` at ``code`` when given. Children run in ``OUT``:
    run from the repository, ``python -c`` and ``-m`` would import the checkout's package first."""
    env = dict(os.environ)
    if code:
        env["PYTHONPATH"] = str(Path(code).resolve())
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["build", "read", "run", "report"])
    ap.add_argument("--rows", default="1000000,5000000,20000000", help="comma-separated row counts")
    ap.add_argument("--formats", default="csv,parquet")
    ap.add_argument("--methods", default="fedtda,distaim,aim")
    ap.add_argument("--code", help="a checkout whose privsyn_fed to run instead (an earlier version)")
    ap.add_argument("--label", default="now", help="the version's name in the results")
    ap.add_argument("--timeout", type=float, default=3600.0)
    args = ap.parse_args()
    counts = [int(r) for r in args.rows.split(",")]
    formats = args.formats.split(",")
    if args.step == "report":
        return report()
    OUT.mkdir(parents=True, exist_ok=True)
    _, schema = load_adult(OUT)
    for rows in counts:
        build(rows)
        if args.step == "build":
            continue
        for fmt in formats:
            silo = paths(rows)[fmt]
            if args.step == "read":
                log = OUT / f"read-{args.label}-{rows}-{fmt}.log"
                cmd = [sys.executable, "-c", READ_SCRIPT, str(silo), str(schema)]
                wall, peak, rc = timed(cmd, log, args.timeout, env_for(args.code), cwd=OUT)
                inner = float(log.read_text().split()[0]) if rc == 0 else None
                record(
                    dict(
                        step="read",
                        version=args.label,
                        rows=rows,
                        format=fmt,
                        wall_s=wall,
                        read_s=inner,
                        peak_mb=peak,
                        rc=rc,
                    )
                )
                continue
            for method in args.methods.split(","):
                out = OUT / f"{method}-{args.label}-{rows}-{fmt}.csv"
                cmd = [sys.executable, "-m", "privsyn_fed", "synth", "--method", method, "--schema", str(schema)]
                cmd += ["--silo", str(silo), "--silo", str(OUT / "adult.csv")]
                cmd += ["--epsilon", "1", "--delta", "1e-9", "--out", str(out), "--force", "--quiet"]
                if method in ("distaim", "flaim"):
                    cmd += ["--rounds", "10"]
                wall, peak, rc = timed(cmd, out.with_suffix(".log"), args.timeout, env_for(args.code), cwd=OUT)
                record(
                    dict(
                        step="run",
                        version=args.label,
                        rows=rows,
                        format=fmt,
                        method=method,
                        wall_s=wall,
                        peak_mb=peak,
                        rc=rc,
                    )
                )
                out.unlink(missing_ok=True)
    return 0


def report() -> int:
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines()]
    print("| version | step | method | silo rows | format | wall time (s) | reading (s) | peak memory (MB) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["step"], r.get("method", ""), r["version"], r["format"], r["rows"])):
        status = "" if r["rc"] == 0 else f" (exit {r['rc']})"
        reading = f"{r['read_s']:.1f}" if r.get("read_s") else ""
        print(
            f"| {r['version']} | {r['step']} | {r.get('method', '')} | {r['rows']:,} | {r['format']} | "
            f"{r['wall_s']:.1f}{status} | {reading} | {r['peak_mb']:,.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
