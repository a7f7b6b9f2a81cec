"""Counting a release's marginals where the rows live: DuckDB (``silo.sql_cells``: the cells as SQL,
``GROUP BY`` in the engine, only count vectors back) against today's reader (``Silo.load``: the
Parquet file read in chunks into the row store, then counted in numpy), on a generated silo.

    python benchmarks/engine_counting.py --rows 20000000

Both count every 3-way marginal of the first six columns; the counts are checked equal. Needs
DuckDB (``pip install duckdb``).
"""

from __future__ import annotations

import argparse
import itertools
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import privsyn_fed as pf
from privsyn_fed.silo.sql_cells import cells_marginal_sql, cells_sql, counts_from_rows, marginal_sql

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


def peak_mb() -> float:
    """This process's peak resident memory so far, MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    """Run the comparison and print one line per reader."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory-limit", default="1GB")
    args = parser.parse_args()
    try:
        import duckdb
    except ImportError:
        print("engine_counting: DuckDB is not installed (pip install duckdb)", file=sys.stderr)
        return 2
    schema = pf.Schema.from_dict(SCHEMA)
    cliques = list(itertools.combinations(range(len(schema.columns)), 3))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "silo.parquet"
        start = time.monotonic()
        generate(path, args.rows)
        print(f"generated {args.rows:,} rows ({path.stat().st_size / 1e6:.0f} MB) in {time.monotonic() - start:.1f} s")

        con = duckdb.connect(config={"threads": args.threads, "memory_limit": args.memory_limit})
        start = time.monotonic()
        source = f"read_parquet('{path}')"
        engine = {
            c: counts_from_rows(schema, c, con.execute(marginal_sql(schema, c, source)).fetchall()) for c in cliques
        }
        engine_s, engine_mb = time.monotonic() - start, peak_mb()
        print(
            f"duckdb, one query per marginal: {len(cliques)} 3-way marginals in {engine_s:.1f} s "
            f"(peak {engine_mb:.0f} MB so far)"
        )
        start = time.monotonic()
        con.execute(f"CREATE TEMP TABLE cells AS {cells_sql(schema, source)}")
        once = {c: counts_from_rows(schema, c, con.execute(cells_marginal_sql(c, "cells")).fetchall()) for c in cliques}
        once_s = time.monotonic() - start
        print(f"duckdb, cells once then counted: {once_s:.1f} s (peak {peak_mb():.0f} MB so far)")
        assert all(np.array_equal(engine[c], once[c]) for c in cliques)

        start = time.monotonic()
        silo = pf.Silo.load(str(path), schema)
        read_s = time.monotonic() - start
        ours = silo.marginals(cliques)
        ours_s = time.monotonic() - start
        print(
            f"reader: read in {read_s:.1f} s, {len(cliques)} 3-way marginals in {ours_s:.1f} s in all "
            f"(peak {peak_mb():.0f} MB)"
        )
    same = all(np.array_equal(engine[c], ours[tuple(c)]) for c in cliques)
    print(f"counts equal: {same}; time against the reader: {engine_s / ours_s:.2f}x and {once_s / ours_s:.2f}x")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
