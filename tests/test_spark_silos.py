"""Silos in Spark (``spark://MASTER?table=T|query=SQL``, and Spark data frames in the API), read by
a real Spark in local mode: for random tables and schemas the silo read through Spark equals the one
read from the same rows' CSV and Parquet exports; bad rows, bad URLs, a failing query and a missing
Java give one-line errors naming the table; a release over Spark silos equals the release over their
CSV exports, and leaves nothing of Spark's behind."""

from __future__ import annotations

import itertools
import json
import os
import time
from contextlib import suppress
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError
from privsyn_fed.silo import Silo
from tests.conftest import assert_one_line_error, make_frame, run_cli, synth_argv
from tests.test_engine_silos import BAD, BAD_SCHEMA, CHANGED, KEY, _bad_errors, _random_table, _same_silo

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'privsyn-fed[spark]')")


def _over(path) -> str:
    """A Spark silo: a query over a Parquet file."""
    return f"spark://local[2]?query=SELECT * FROM parquet.`{path}`"


@pytest.mark.parametrize("seed", range(4))
def test_a_silo_in_spark_is_the_silo_of_its_csv_and_parquet_exports(tmp_path, spark, seed):
    spec, df = _random_table(300 + seed)
    schema = pf.Schema.from_dict(spec)
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_parquet(tmp_path / "t.parquet", index=False)
    spark.read.parquet(str(tmp_path / "t.parquet")).createOrReplaceTempView(f"rows_{seed}")
    read = dict(unit="pid", max_rows=2, unit_key=KEY, site=("site", "north"))
    from_csv = Silo.load(tmp_path / "t.csv", schema, **read)
    for other in (f"spark://local[2]?table=rows_{seed}", _over(tmp_path / "t.parquet")):
        _same_silo(from_csv, Silo.load(other, schema, **read))
    held = df.assign(site="north")  # the silo column held by the table
    spark.createDataFrame(held).createOrReplaceTempView(f"held_{seed}")
    site = ("site", "north")
    _same_silo(
        Silo.load(tmp_path / "t.csv", schema, site=site), Silo.load(f"spark://?table=held_{seed}", schema, site=site)
    )


@pytest.mark.parametrize("seed", range(4))
def test_a_silo_counted_in_spark_is_the_silo_of_its_csv_export(tmp_path, spark, seed, monkeypatch):
    """Without a privacy unit a Spark silo's rows are encoded by Spark's workers and counted by Spark
    (``SparkStore``); its summaries, merged, answer as the CSV's silo, whose rows the reader encoded.
    Half the seeds count in grouping sets (Spark's ``grouping_id`` then takes the columns in ``GROUP
    BY``'s order): each clique in a set of its own, or groups of columns covering them; the others
    one ``GROUP BY`` of their columns."""
    from privsyn_fed.silo import column_groups, grouped_counts

    monkeypatch.setattr(grouped_counts, "JOINT_CELLS", 1 if seed >= 2 else grouped_counts.JOINT_CELLS)
    monkeypatch.setattr(column_groups, "GROUP_CELLS", {2: 1, 3: 64}.get(seed, column_groups.GROUP_CELLS))
    spec, df = _random_table(400 + seed, n=3000)
    schema = pf.Schema.from_dict(spec)
    held = df.assign(site="north") if seed % 2 else df  # the silo column held by the table, or not
    held.to_csv(tmp_path / "t.csv", index=False)
    spark.createDataFrame(held).repartition(3).createOrReplaceTempView(f"counted_{seed}")  # several partitions
    site = ("site", "north")
    from_csv = Silo.load(tmp_path / "t.csv", schema, site=site)
    counted = Silo.load(f"spark://?table=counted_{seed}", schema, site=site)
    assert [type(s).__name__ for s in counted._stores] == ["SparkStore"]
    _same_silo(from_csv, counted)
    a, b = from_csv.rows(), counted.rows()  # the same rows, in another order (three partitions)
    assert np.array_equal(a[np.lexsort(a.T)], b[np.lexsort(b.T)])
    d = len(schema.columns)
    every = list(itertools.chain.from_iterable(itertools.combinations(range(d), k) for k in range(d + 1)))
    shuffled = [tuple(np.random.default_rng(seed).permutation(c)) for c in every]
    for clique, counts in counted.marginals(shuffled).items():
        assert np.array_equal(counts, from_csv.marginal(clique)), clique
    view = counted._stores[0].cells
    assert view in [t.name for t in spark.catalog.listTables()]
    counted._stores[0].close()
    assert view not in [t.name for t in spark.catalog.listTables()]


def test_spark_counts_grouping_sets_whose_columns_first_appear_out_of_order(tmp_path, spark, monkeypatch):
    """Sets (0, 3) and (1, 2) name the columns in the order 0, 3, 1, 2: Spark's ``grouping_id`` must
    follow ``GROUP BY``'s own column list, or Spark refuses the query (a table of many columns, whose
    joint has more cells than ``JOINT_CELLS``, once stopped a release this way)."""
    from privsyn_fed.silo import column_groups, grouped_counts

    monkeypatch.setattr(grouped_counts, "JOINT_CELLS", 1)
    monkeypatch.setattr(column_groups, "GROUP_CELLS", 1)  # each set its own
    spec, df = _random_table(420, n=800)
    schema = pf.Schema.from_dict(spec)
    df.to_csv(tmp_path / "t.csv", index=False)
    spark.createDataFrame(df).createOrReplaceTempView("out_of_order")
    counted = Silo.load("spark://?table=out_of_order", schema, site=("site", "north"))
    from_csv = Silo.load(tmp_path / "t.csv", schema, site=("site", "north"))
    for clique, counts in counted.marginals([(0, 3), (1, 2)]).items():
        assert np.array_equal(counts, from_csv.marginal(clique)), clique


def test_spark_partitions_merge_into_the_identifier_scan_of_their_rows_in_order(spark, monkeypatch):
    """Each partition sends its first present cells; merged in partition order, they sample the
    silo's first cells as one pass over its rows in that order does (the sample cut short here)."""
    from privsyn_fed.silo import identifier_scan

    spec, df = _random_table(77, n=2000)
    schema = pf.Schema.from_dict(spec)
    spark.createDataFrame(df).repartition(4).createOrReplaceTempView("scanned")
    monkeypatch.setattr(identifier_scan, "IDENTIFIER_SAMPLE", 150)  # where the partitions are merged
    counted = Silo.load("spark://?table=scanned", schema, site=("site", "north"))
    one_pass = identifier_scan.IdentifierScan(schema, "site")
    for codes, values in counted._parts(with_values=True):  # the rows in Spark's partition order
        one_pass.add(codes, values)
    assert counted.identifiers == one_pass.reasons()
    assert one_pass.sampled == {j: 150 for j in one_pass.columns}


def test_spark_types_are_read_as_numbers_or_as_their_text(tmp_path, spark):
    """Decimals are numbers (read as doubles); a date, a type neither number nor text, is its text."""
    rows = [(Decimal("1.50"), "2024-01-05"), (Decimal("7.25"), "2024-02-29"), (None, "2024-01-05")]
    spark.createDataFrame(rows, "x decimal(6,2), d string").selectExpr("x", "to_date(d) AS d").createOrReplaceTempView(
        "typed"
    )
    schema = pf.Schema.from_dict(
        {
            "columns": [
                {"name": "x", "type": "numeric", "lower": 0, "upper": 10, "bins": 5, "missing": True},
                {"name": "d", "type": "categorical", "categories": ["2024-01-05", "2024-02-29"]},
            ]
        }
    )
    pd.DataFrame({"x": [1.5, 7.25, None], "d": ["2024-01-05", "2024-02-29", "2024-01-05"]}).to_csv(
        tmp_path / "t.csv", index=False
    )
    _same_silo(Silo.load(tmp_path / "t.csv", schema), Silo.load("spark://?table=typed", schema))


def test_a_spark_silo_keeps_only_narrow_cells_and_refuses_rows_changed_under_it(tmp_path, spark):
    """Spark keeps one column of cells per schema column, in the narrowest integer type that holds
    them (a byte up to 128 cells, two bytes from 129), and no values; a later pass that encodes the
    values again and finds other rows is one line, not a statistic of those rows."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    spec, df = _random_table(502, n=500)
    wide = [f"k{i}" for i in range(128)]  # cells 0 to 128 (the missing cell): one past a signed byte
    spec["columns"].append({"name": "wide", "type": "categorical", "categories": wide, "missing": True})
    df["wide"] = np.random.default_rng(5).choice(wide[100:] + [""], len(df))
    schema = pf.Schema.from_dict(spec)
    df.to_csv(tmp_path / "t.csv", index=False)
    flag = tmp_path / "flag"
    flag.write_text("same")
    read_flag = str(flag)
    state = F.udf(lambda: open(read_flag).read(), StringType()).asNondeterministic()  # read at each run
    rows = spark.createDataFrame(df.reset_index()).withColumn("state", state())
    first = F.col("index") == 0
    rows = rows.where(~first | (F.col("state") != "dropped"))  # the first row dropped
    refused = F.when(first & (F.col("state") == "refused"), F.lit("zzz")).otherwise(F.col("wide"))
    rows.withColumn("wide", refused).drop("index", "state").createOrReplaceTempView("held_still")
    url = "spark://?table=held_still"
    silo = Silo.load(url, schema, site=("site", "north"))
    (store,) = silo._stores
    assert type(store).__name__ == "SparkStore"
    kinds = {f.name: f.dataType.simpleString() for f in store.frame.schema.fields}
    assert kinds == {f"c{j}": "smallint" for j in range(len(schema.columns))}
    from_csv = Silo.load(tmp_path / "t.csv", schema, site=("site", "north"))
    _same_silo(from_csv, silo)
    assert silo.marginal((len(schema.columns) - 1,)).tolist() == from_csv.marginal((len(schema.columns) - 1,)).tolist()
    assert np.array_equal(silo.values(), from_csv.values(), equal_nan=True)  # encoded again, the same rows
    narrow = pf.Schema.from_dict({"columns": spec["columns"][:-1]})
    (store,) = Silo.load(url, narrow, site=("site", "north"))._stores
    assert {f.dataType.simpleString() for f in store.frame.schema.fields} == {"tinyint"}
    for change in ("dropped", "refused"):  # the first row gone from the table, or a value the schema refuses
        flag.write_text(change)
        with pytest.raises(InputError) as caught:
            silo.values()
        assert str(caught.value) == CHANGED.format(url=url)
    assert silo.marginal((0,)).sum() == len(df)  # the cells kept are still the first rows'


def test_bad_rows_in_spark_give_the_errors_of_its_parquet_export(tmp_path, spark):
    def url_of(frame, name):
        frame.to_parquet(tmp_path / f"{name}.spark.parquet", index=False)
        return _over(tmp_path / f"{name}.spark.parquet")

    _bad_errors(tmp_path, url_of)


def test_a_query_that_fails_in_spark_is_one_line_naming_the_table(tmp_path, spark):
    BAD.assign(g="a").to_parquet(tmp_path / "t.parquet", index=False)
    source = f"parquet.`{tmp_path / 't.parquet'}`"
    url = f"spark://local[2]?query=SELECT g, IF(x > 3, raise_error('x is past the limit'), x) AS x FROM {source}"
    with pytest.raises(InputError) as caught:
        Silo.load(url, pf.Schema.from_dict(BAD_SCHEMA))
    message = str(caught.value)
    assert message.startswith(f"{url}: Spark failed near row 1 (") and "x is past the limit" in message, message
    assert "\n" not in message and " at org." not in message and len(message) < 600, message
    with pytest.raises(InputError, match="cannot be found"):
        Silo.load("spark://local[2]?table=no_such_rows", pf.Schema.from_dict(BAD_SCHEMA))


def test_a_silo_of_another_master_or_setting_is_refused_while_a_session_runs(spark):
    """One process reads through one session: a silo naming another master must not be read from
    this one (the rows would be another cluster's), nor one whose settings the session lacks."""
    spark.createDataFrame(BAD.assign(g="a")).createOrReplaceTempView("t")
    for url, fragment in (
        ("spark://local[1]?table=t", "already runs Spark with master local[2]"),
        ("spark://local[2]?table=t&spark.sql.shuffle.partitions=7", "has spark.sql.shuffle.partitions=200, not 7"),
    ):
        with pytest.raises(InputError, match=None) as caught:
            Silo.load(url, pf.Schema.from_dict(BAD_SCHEMA))
        assert fragment in str(caught.value), str(caught.value)
    assert Silo.load("spark://?table=t", pf.Schema.from_dict(BAD_SCHEMA)).true_size() == 5


@pytest.mark.parametrize(
    "url, fragment",
    [
        ("spark://local[0]?table=t", "is not a Spark master"),
        ("spark://yarn?table=t", "is not a Spark master"),
        ("spark://local[2]", "exactly one of ?table=NAME or ?query=SQL"),
        ("spark://local[2]?table=t&threads=4", "Spark settings (spark.*), not ?threads="),
        ("spark://127.0.0.1:1?table=t", "no Spark master answers at 127.0.0.1:1"),
    ],
)
def test_a_bad_spark_url_is_refused_in_one_line_before_spark_starts(url, fragment):
    started = time.monotonic()
    with pytest.raises(InputError) as caught:
        Silo.load(url, pf.Schema.from_dict(BAD_SCHEMA))
    assert fragment in str(caught.value) and "\n" not in str(caught.value)
    assert time.monotonic() - started < 15


def test_a_secret_setting_in_a_spark_url_is_refused_and_never_repeated(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(BAD_SCHEMA))
    url = "spark://local[2]?table=t&spark.hadoop.fs.s3a.secret.key=Sesame-42"
    proc = run_cli(*synth_argv(schema=tmp_path / "s.json", silos=[url], out=tmp_path / "o.csv"))
    assert_one_line_error(proc, "secret setting spark.hadoop.fs.s3a.secret.key", "spark-defaults.conf")
    assert "Sesame" not in proc.stdout + proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_without_java_a_spark_silo_stops_in_one_line_and_writes_nothing(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(BAD_SCHEMA))
    BAD.assign(g="a").to_parquet(tmp_path / "t.parquet", index=False)
    argv = synth_argv(schema=tmp_path / "s.json", silos=[_over(tmp_path / "t.parquet")], out=tmp_path / "o.csv")
    proc = run_cli(*argv, env={**os.environ, "JAVA_HOME": str(tmp_path / "no-java")}, cwd=tmp_path)
    assert_one_line_error(proc, "Spark needs Java 17 or newer", "holds no bin/java")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json", "t.parquet"]


def test_spark_that_cannot_start_says_why_in_one_line_and_writes_nothing(tmp_path):
    """Too small a heap for Spark's driver: its JVM stops at start, and the cause it logged is the message."""
    (tmp_path / "s.json").write_text(json.dumps(BAD_SCHEMA))
    BAD.assign(g="a").to_parquet(tmp_path / "t.parquet", index=False)
    url = _over(tmp_path / "t.parquet") + "&spark.driver.memory=64m"
    proc = run_cli(*synth_argv(schema=tmp_path / "s.json", silos=[url], out=tmp_path / "o.csv"), cwd=tmp_path)
    assert_one_line_error(proc, url, "Spark did not start", "INVALID_DRIVER_MEMORY")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json", "t.parquet"]


# ---- releases -------------------------------------------------------------------------------------
def test_a_release_over_spark_silos_equals_the_release_over_their_csv_exports(tmp_path):
    """In a child process, as a user runs it: Spark starts there, writes nothing in the current
    folder (no spark-warehouse) and nothing of its own on stderr but the JVM's one notice."""
    spec, df = _random_table(11, n=900)
    spec["columns"] = spec["columns"][:-1]  # no silo column
    (tmp_path / "s.json").write_text(json.dumps(spec))
    north, south = df.iloc[:500], df.iloc[500:]
    for name, part in (("north", north), ("south", south)):
        part.to_csv(tmp_path / f"{name}.csv", index=False)
        part.to_parquet(tmp_path / f"{name}.parquet", index=False)
    sparks = [f"{n}={_over(tmp_path / f'{n}.parquet')}" for n in ("north", "south")]
    files = [f"{n}={tmp_path / f'{n}.csv'}" for n in ("north", "south")]
    ledgers = []
    for name, silos in (("spark", sparks), ("files", files)):
        argv = synth_argv(schema=tmp_path / "s.json", silos=silos, out=tmp_path / f"{name}.csv", seed=5)
        proc = run_cli(*argv, "--privacy-unit", "pid", "--max-rows-per-unit", "2", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        if name == "spark":
            assert not [ln for ln in proc.stderr.splitlines() if "WARN " in ln or "log4j" in ln], proc.stderr
        ledger = json.loads((tmp_path / f"{name}.ledger.json").read_text())
        ledgers.append({k: v for k, v in ledger.items() if k not in ("created", "updated")})
    assert (tmp_path / "spark.csv").read_bytes() == (tmp_path / "files.csv").read_bytes()
    assert ledgers[0] == ledgers[1]
    assert not (tmp_path / "spark-warehouse").exists() and not (tmp_path / "metastore_db").exists()


def test_spark_data_frames_in_the_api_release_as_their_pandas_frames(tmp_path, spark):
    spec, df = _random_table(12, n=600)
    spec["columns"] = spec["columns"][:-1]
    schema = pf.Schema.from_dict(spec)
    parts = [df.iloc[:350].reset_index(drop=True), df.iloc[350:].reset_index(drop=True)]
    given = dict(schema=schema, seed=9, privacy_unit="pid", max_rows_per_unit=2)
    from_pandas = pf.synthesize(parts, "aim", 1.0, **given)
    from_spark = pf.synthesize([spark.createDataFrame(p) for p in parts], "aim", 1.0, **given)
    assert from_spark.data.equals(from_pandas.data)
    assert {k: v for k, v in from_spark.ledger.items() if k not in ("created", "updated")} == {
        k: v for k, v in from_pandas.ledger.items() if k not in ("created", "updated")
    }
    assert not [t.name for t in spark.catalog.listTables() if t.name.startswith("privsyn_fed_frame")]
    with pytest.raises(InputError, match="not in the schema"):  # an error still drops the views
        pf.synthesize([spark.createDataFrame(BAD.drop(columns="pid"))], schema=pf.Schema.from_dict(BAD_SCHEMA))
    assert not [t.name for t in spark.catalog.listTables() if t.name.startswith("privsyn_fed_frame")]


def test_a_schema_is_drafted_from_a_spark_table_as_from_its_export(tmp_path, spark, capsys):
    """``schema draft URL`` (in the clear) drafts what the CSV export gives; ``--dp`` drafts from two
    Spark tables and its ledger audits (in this process, through the running session)."""
    spec, df = _random_table(22, n=500)
    df = df.drop(columns="pid")
    df.to_csv(tmp_path / "t.csv", index=False)
    spark.createDataFrame(df).createOrReplaceTempView("drafted")
    drafts = []
    for name, source in (("engine", "spark://?table=drafted"), ("file", tmp_path / "t.csv")):
        proc = run_cli("schema", "draft", source, "--out", tmp_path / f"{name}.json", capsys=capsys)
        assert proc.returncode == 0, proc.stderr
        drafts.append(json.loads((tmp_path / f"{name}.json").read_text())["columns"])
    assert drafts[0] == drafts[1]
    frame = make_frame(800, seed=4)
    spark.createDataFrame(frame.iloc[:400]).createOrReplaceTempView("north")
    spark.createDataFrame(frame.iloc[400:]).createOrReplaceTempView("south")
    dp = ["--dp", "8", "--delta", "1e-9", "--leave-unfound", "--out", tmp_path / "dp.json"]
    proc = run_cli("schema", "draft", "spark://?table=north", "spark://?table=south", *dp, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert run_cli("audit", tmp_path / "dp.ledger.json", capsys=capsys).returncode == 0


def _listening(pid: int) -> list[str]:
    """The local addresses of the TCP sockets process ``pid`` listens on (``/proc``: state 0A)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    out = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                out.append(fields[1])
    return out


def test_a_local_spark_listens_on_loopback_only_and_authenticates_its_connections(spark):
    """The session a Spark silo starts: every port its JVM listens on is on 127.0.0.1 (IPv4, or
    IPv4-mapped IPv6), and its RPC and block transfers need the secret Spark drew for it."""
    addresses = _listening(spark.sparkContext._gateway.proc.pid)
    assert addresses, "the JVM listens on nothing"
    loopback = ("0100007F:", "0000000000000000FFFF00000100007F:")  # 127.0.0.1 as /proc writes it
    assert all(a.startswith(loopback) for a in addresses), addresses
    assert spark.conf.get("spark.authenticate") == "true"
    assert spark.sparkContext.getConf().get("spark.authenticate.secret") is None  # drawn in the JVM, not passed
