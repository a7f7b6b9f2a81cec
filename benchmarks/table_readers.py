"""How fast each candidate reader streams a table in chunks, parsing only (no encoding): pandas'
chunked CSV reader (what `tables.py` uses), pyarrow's streaming CSV reader, pyarrow's Parquet
batches (what `tables.py` uses), and DuckDB for both formats when it is installed (it is not a
dependency: `pip install duckdb` to include it). Reads the files `large_silos.py build` writes.

    .venv/bin/python benchmarks/large_silos.py build --rows 1000000   # once (the `read` step builds too)
    .venv/bin/python benchmarks/table_readers.py --rows 1000000
"""

from __future__ import annotations

import argparse
import time

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from large_silos import paths

CHUNK = 100_000


def pandas_csv(csv, _):
    reader = pd.read_csv(csv, dtype=str, keep_default_na=False, na_filter=False, skipinitialspace=True, chunksize=CHUNK)
    return sum(len(f) for f in reader)


def arrow_csv(csv, _):
    names = pd.read_csv(csv, nrows=0).columns
    options = pacsv.ConvertOptions(column_types={c: pa.string() for c in names}, strings_can_be_null=False)
    return sum(b.num_rows for b in pacsv.open_csv(csv, convert_options=options))


def arrow_parquet(_, parquet):
    return sum(b.num_rows for b in pq.ParquetFile(parquet).iter_batches(CHUNK))


def _duckdb(query: str) -> int:
    import duckdb

    result = duckdb.connect().execute(query)
    rows = 0
    while len(chunk := result.fetch_df_chunk(CHUNK // 2048)):
        rows += len(chunk)
    return rows


def duckdb_csv(csv, _):
    return _duckdb(f"select * from read_csv('{csv}', all_varchar=true)")


def duckdb_parquet(_, parquet):
    return _duckdb(f"select * from '{parquet}'")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    files = paths(args.rows)
    readers = [pandas_csv, arrow_csv, arrow_parquet]
    try:
        import duckdb  # noqa: F401

        readers += [duckdb_csv, duckdb_parquet]
    except ImportError:
        print("(duckdb is not installed: its rows are left out)")
    print("| reader | rows | seconds |\n|---|---|---|")
    for reader in readers:
        start = time.perf_counter()
        rows = reader(files["csv"], files["parquet"])
        print(f"| {reader.__name__} | {rows:,} | {time.perf_counter() - start:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
