"""Counting a release's marginals where the rows live: a silo counted in DuckDB (``EngineStore``:
the cells encoded once in the engine, ``GROUPING SETS``, only count vectors back) against today's
reader (``Silo.load`` of the Parquet file: read in chunks into the row store, counted in numpy), on
a generated silo, each in a process of its own (wall time and peak memory).

    python benchmarks/engine_counting.py --rows 20000000

Every mode reads the silo and counts every 3-way marginal of its six columns; the counts are
checked equal across modes. Modes: ``reader`` (the Parquet file), ``duckdb-file`` (the rows in a
DuckDB database file, ``duckdb://silo.duckdb?table=silo``; writing that file is timed apart, as the
export a bank would already have), ``duckdb-parquet`` (DuckDB reading the Parquet file itself,
``duckdb://?query=SELECT * FROM read_parquet(...)``), ``spark-parquet`` (Spark in local mode on
every core reading the Parquet file, ``spark://local[*]?query=SELECT * FROM parquet.`...```: the rows
come back a partition at a time and are counted by the silo, as the reader's are; its peak is the
Python process's, Spark's JVM apart), ``sqlite-file`` (the rows in a SQLite file,
``sqlite://silo.db?table=silo``, read by Python's ``sqlite3`` and counted by the silo; writing the
file is timed apart), ``postgresql`` (the rows in a PostgreSQL table, read through ADBC's driver, a
binary ``COPY``, and counted by the silo: with ``--postgres URL``, a server and database the
benchmark may write table ``privsyn_bench_silo`` to, the password from ``PGPASSWORD``; loading it is
timed apart). Needs the engines extra (and the spark
extra for Spark).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import privsyn_fed as pf

SCHEMA = {
    "columns": [
        {"name": "age", "type": "numeric", "lower": 18, "upper": 90, "bins": 8, "integer": True},
        {"name": "income", "type": "numeric", "lower": 0, "upper": 200000, "bins": 16, "scale": "log"},
        {"name": "hours", "type": "numeric", "lower": 0, "upper": 99, "bins": 10, "atoms": [40]},
        {"name": "score", "type": "numeric", "lower": -3, "upper": 3, "bins": 12, "missing": True},
        {"name": "region", "type": "categorical", "categories": ["north", "south", "east", "west"]},
        {"name": "plan", "type": "categorical", "categories": ["a", "b", "c", "other"], "unknown": "other"},
    ]
}
MODES = ("reader", "duckdb-file", "duckdb-parquet", "spark-parquet", "sqlite-file", "postgresql")
#: The table ``--postgres`` loads the silo into.
PG_TABLE = "privsyn_bench_silo"


def generate(path: Path, rows: int, seed: int = 0, chunk: int = 2_000_000) -> None:
    """``rows`` rows in Parquet, written in chunks."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    writer = None
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        score = rng.normal(0, 1, n)
        score[rng.random(n) < 0.05] = np.nan
        frame = pd.DataFrame(
            {
                "age": rng.integers(18, 91, n),
                "income": np.round(rng.lognormal(10, 1, n), 2),
                "hours": np.where(rng.random(n) < 0.4, 40.0, np.round(rng.uniform(0, 99, n), 1)),
                "score": score,
                "region": rng.choice(["north", "south", "east", "west"], n),
                "plan": rng.choice(["a", "b", "c", "d", "e"], n),
            }
        )
        table = pa.Table.from_pandas(frame, preserve_index=False)
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
    assert writer is not None
    writer.close()


def write_sqlite(parquet: Path, path: Path) -> None:
    """The Parquet file's rows as table ``silo`` of a SQLite file, a batch at a time."""
    import sqlite3

    import pyarrow.parquet as pq

    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE silo (age INTEGER, income REAL, hours REAL, score REAL, region TEXT, plan TEXT)")
        for batch in pq.ParquetFile(parquet).iter_batches(batch_size=500_000):
            rows = zip(*(batch.column(i).to_pylist() for i in range(batch.num_columns)))
            con.executemany("INSERT INTO silo VALUES (?, ?, ?, ?, ?, ?)", rows)
    con.close()


def write_postgres(parquet: Path, url: str) -> None:
    """The Parquet file's rows as table ``PG_TABLE`` of the database at ``url``, through ``COPY``."""
    import io

    import psycopg
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    with psycopg.connect(url, autocommit=True) as con:
        con.execute(f"DROP TABLE IF EXISTS {PG_TABLE}")
        con.execute(
            f"CREATE TABLE {PG_TABLE} (age bigint, income double precision, hours double precision, "
            "score double precision, region text, plan text)"
        )
        with con.cursor().copy(f"COPY {PG_TABLE} FROM STDIN (FORMAT csv)") as copy:
            for batch in pq.ParquetFile(parquet).iter_batches(batch_size=500_000):
                text = io.BytesIO()
                pacsv.write_csv(batch, text, pacsv.WriteOptions(include_header=False))
                copy.write(text.getvalue())


def source(mode: str, folder: Path) -> str:
    """The silo as ``Silo.load`` takes it in ``mode``."""
    parquet = folder / "silo.parquet"
    if mode == "postgresql":
        url = os.environ["PRIVSYN_BENCH_POSTGRES"]
        return f"{url}{'&' if '?' in url else '?'}table={PG_TABLE}"
    if mode == "reader":
        return str(parquet)
    if mode == "duckdb-file":
        return f"duckdb://{folder / 'silo.duckdb'}?table=silo"
    if mode == "spark-parquet":
        return f"spark://local[*]?query=SELECT * FROM parquet.`{parquet}`"
    if mode == "sqlite-file":
        return f"sqlite://{folder / 'silo.db'}?table=silo"
    return f"duckdb://?query=SELECT * FROM read_parquet('{parquet}')"


def run_mode(mode: str, folder: Path) -> None:
    """Read the silo and count every 3-way marginal; print one JSON line (seconds, peak MB, counts digest)."""
    schema = pf.Schema.from_dict(SCHEMA)
    cliques = list(itertools.combinations(range(len(schema.columns)), 3))
    start = time.monotonic()
    silo = pf.Silo.load(source(mode, folder), schema)
    read_s = time.monotonic() - start
    counts = silo.marginals(cliques)
    total_s = time.monotonic() - start
    digest = int(sum(int((counts[c] * np.arange(1, len(counts[c]) + 1)).sum()) for c in cliques))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"mode": mode, "read_s": read_s, "total_s": total_s, "peak_mb": peak, "digest": digest}))


def main() -> int:
    """Generate the silo, run each mode in its own process, print one line per mode."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, of: " + ", ".join(MODES))
    parser.add_argument("--postgres", help="postgresql://USER@HOST/DB: a database for the postgresql mode")
    parser.add_argument("--run", nargs=2, metavar=("MODE", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        run_mode(args.run[0], Path(args.run[1]))
        return 0
    import duckdb

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        start = time.monotonic()
        generate(folder / "silo.parquet", args.rows)
        size = (folder / "silo.parquet").stat().st_size / 1e6
        print(f"generated {args.rows:,} rows, {size:.0f} MB of Parquet, in {time.monotonic() - start:.1f} s")
        if "duckdb-file" in args.modes:
            start = time.monotonic()
            with duckdb.connect(str(folder / "silo.duckdb")) as con:
                con.execute(f"CREATE TABLE silo AS SELECT * FROM read_parquet('{folder / 'silo.parquet'}')")
            size = (folder / "silo.duckdb").stat().st_size / 1e6
            print(f"wrote the DuckDB file ({size:.0f} MB) in {time.monotonic() - start:.1f} s (not counted below)")
        if "sqlite-file" in args.modes:
            start = time.monotonic()
            write_sqlite(folder / "silo.parquet", folder / "silo.db")
            size = (folder / "silo.db").stat().st_size / 1e6
            print(f"wrote the SQLite file ({size:.0f} MB) in {time.monotonic() - start:.1f} s (not counted below)")
        if "postgresql" in args.modes:
            if not args.postgres:
                parser.error("the postgresql mode needs --postgres URL")
            os.environ["PRIVSYN_BENCH_POSTGRES"] = args.postgres
            start = time.monotonic()
            write_postgres(folder / "silo.parquet", args.postgres)
            print(f"loaded the PostgreSQL table in {time.monotonic() - start:.1f} s (not counted below)")
        results = []
        for mode in args.modes.split(","):
            proc = subprocess.run(
                [sys.executable, __file__, "--run", mode, str(folder)], capture_output=True, text=True, env=os.environ
            )
            if proc.returncode:
                print(proc.stderr, file=sys.stderr)
                return 1
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            results.append(r)
            per = r["total_s"] / args.rows * 1e9
            print(
                f"{mode:15s} read {r['read_s']:6.1f} s, with every 3-way marginal {r['total_s']:6.1f} s "
                f"({per:.0f} ns a row), peak {r['peak_mb']:,.0f} MB"
            )
    same = len({r["digest"] for r in results}) == 1
    base = next((r for r in results if r["mode"] == "reader"), None)
    if base is not None:
        for r in results:
            print(f"{r['mode']}: {base['total_s'] / r['total_s']:.1f}x the reader's speed")
    print(f"counts equal across modes: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
