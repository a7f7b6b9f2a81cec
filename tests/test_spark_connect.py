"""Silos in Spark through a Spark Connect server (``sc://HOST:PORT?table=T`` or ``?query=SQL``, and
Spark Connect data frames in the API), against a server the tests start in a process of their own:
the silo counted by the server's Spark equals the CSV export's; a release equals the one over the
export; the token comes from ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` and a wrong one, a token in the
URL or a server that does not answer stop in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError
from privsyn_fed.silo import Silo
from tests.conftest import assert_one_line_error, run_cli, start_connect_server, stop_connect_server, synth_argv
from tests.test_engine_silos import KEY, _random_table, _same_silo

ONE_COLUMN = {"columns": [{"name": "g", "type": "categorical", "categories": ["a"]}]}


@pytest.fixture
def connect(spark_connect, monkeypatch):
    monkeypatch.setenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", spark_connect.token)
    return spark_connect


def _parquet_query(connect, path) -> str:
    return connect.url(query=f"SELECT * FROM parquet.`{path}`")


@pytest.mark.parametrize("seed", range(2))
def test_a_silo_through_spark_connect_is_the_silo_of_its_csv_export(tmp_path, connect, seed, monkeypatch):
    """Counted by the server's Spark (``SparkStore``: its workers encode, it counts, with many
    grouping sets where the columns' joint is large), and read back with a privacy unit."""
    from privsyn_fed.silo import grouped_counts

    monkeypatch.setattr(grouped_counts, "JOINT_CELLS", 1 if seed else grouped_counts.JOINT_CELLS)
    spec, df = _random_table(500 + seed, n=1500)
    schema = pf.Schema.from_dict(spec)
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_parquet(tmp_path / "t.parquet", index=False)
    url = _parquet_query(connect, tmp_path / "t.parquet")
    site = ("site", "north")
    from_csv = Silo.load(tmp_path / "t.csv", schema, site=site)
    counted = Silo.load(url, schema, site=site)
    assert [type(s).__name__ for s in counted._stores] == ["SparkStore"]
    _same_silo(from_csv, counted)
    read = dict(unit="pid", max_rows=2, unit_key=KEY, site=site)
    _same_silo(Silo.load(tmp_path / "t.csv", schema, **read), Silo.load(url, schema, **read))


def test_a_release_through_spark_connect_equals_the_release_over_the_csv_export(tmp_path, connect):
    spec, df = _random_table(31, n=800)
    spec["columns"] = spec["columns"][:-1]
    (tmp_path / "s.json").write_text(json.dumps(spec))
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_parquet(tmp_path / "t.parquet", index=False)
    outs = []
    for name, silo in (("connect", _parquet_query(connect, tmp_path / "t.parquet")), ("file", tmp_path / "t.csv")):
        proc = run_cli(*synth_argv(schema=tmp_path / "s.json", silos=[silo], out=tmp_path / f"{name}.csv", seed=4))
        assert proc.returncode == 0, proc.stderr
        ledger = json.loads((tmp_path / f"{name}.ledger.json").read_text())
        outs.append(
            (
                (tmp_path / f"{name}.csv").read_bytes(),
                {k: v for k, v in ledger.items() if k not in ("created", "updated")},
            )
        )
    assert outs[0] == outs[1]


def test_spark_connect_frames_in_the_api_release_as_their_pandas_frames(tmp_path, connect):
    from pyspark.sql.connect.session import SparkSession

    spec, df = _random_table(13, n=600)
    spec["columns"] = spec["columns"][:-1]
    schema = pf.Schema.from_dict(spec)
    parts = [df.iloc[:350].reset_index(drop=True), df.iloc[350:].reset_index(drop=True)]
    session = SparkSession.builder.remote(f"sc://{connect.address}").create()
    try:
        given = dict(schema=schema, seed=9, privacy_unit="pid", max_rows_per_unit=2)
        from_pandas = pf.synthesize(parts, "aim", 1.0, **given)
        from_connect = pf.synthesize([session.createDataFrame(p) for p in parts], "aim", 1.0, **given)
        assert from_connect.data.equals(from_pandas.data)
        assert not [t.name for t in session.catalog.listTables() if t.name.startswith("privsyn_fed_frame")]
    finally:
        session.stop()
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ  # classic Spark silos still work in this process
    with pytest.raises(InputError, match="no Spark Connect data frames were given"):
        Silo.load("sc://?table=privsyn_fed_frame1_x", schema)


def test_the_token_comes_from_the_environment_and_a_wrong_one_stops_in_one_line(tmp_path, spark_connect):
    pd.DataFrame({"g": ["a", "b"] * 20, "x": range(40)}).to_parquet(tmp_path / "t.parquet", index=False)
    schema = {"columns": [{"name": "g", "type": "categorical", "categories": ["a", "b"]}]}
    (tmp_path / "s.json").write_text(json.dumps(schema))
    url = _parquet_query(spark_connect, tmp_path / "t.parquet")
    argv = synth_argv(schema=tmp_path / "s.json", silos=[url], out=tmp_path / "o.csv", seed=1, rows=10)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_AUTHENTICATE_TOKEN"}
    wrong = run_cli(*argv, env={**env, "SPARK_CONNECT_AUTHENTICATE_TOKEN": "not-" + spark_connect.token})
    assert_one_line_error(wrong, url, "Spark Connect refused the session", "SPARK_CONNECT_AUTHENTICATE_TOKEN")
    assert spark_connect.token not in wrong.stdout + wrong.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json", "t.parquet"]
    done = run_cli(*argv, env={**env, "SPARK_CONNECT_AUTHENTICATE_TOKEN": spark_connect.token})
    assert done.returncode == 0, done.stderr
    written = "".join(p.read_text() for p in tmp_path.iterdir() if p.suffix in (".csv", ".json"))
    assert spark_connect.token not in done.stdout + done.stderr + written


@pytest.mark.parametrize(
    "url, fragment",
    [
        ("sc://localhost:15002?table=t&token=Sesame-42", "the URL holds the secret token"),
        ("sc://localhost:15002?table=t&use_ssl=maybe", "use_ssl is true or false"),
        ("sc://localhost:15002?table=t&spark.x=1", "takes ?table= or ?query= and use_ssl=true, not ?spark.x="),
        ("sc://localhost?table=t", "is not HOST:PORT"),
    ],
)
def test_a_bad_spark_connect_url_is_refused_in_one_line(tmp_path, url, fragment):
    (tmp_path / "s.json").write_text(json.dumps(ONE_COLUMN))
    proc = run_cli(*synth_argv(schema=tmp_path / "s.json", silos=[url], out=tmp_path / "o.csv"))
    assert_one_line_error(proc, fragment)
    assert "Sesame" not in proc.stdout + proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_a_spark_connect_server_that_does_not_answer_stops_in_one_line(tmp_path):
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "s.json").write_text(json.dumps(ONE_COLUMN))
    url = f"sc://localhost:{port}?table=t"
    start = time.monotonic()
    proc = run_cli(*synth_argv(schema=tmp_path / "s.json", silos=[url], out=tmp_path / "o.csv"))
    assert_one_line_error(proc, url, f"no Spark Connect server answers at localhost:{port}")
    assert time.monotonic() - start < 30


def test_a_process_whose_spark_connect_server_is_gone_exits_without_waiting_for_it(tmp_path):
    """The session is released at exit once, without retries: a process that read a silo through a
    server that stopped since exits at once rather than after Spark's ten minutes of retries."""
    proc, server = start_connect_server(tmp_path)
    try:
        pd.DataFrame({"g": ["a"] * 30}).to_parquet(tmp_path / "t.parquet", index=False)
        code = (
            "import sys, privsyn_fed as pf\n"
            "from privsyn_fed.silo import Silo\n"
            f"Silo.load({_parquet_query(server, tmp_path / 't.parquet')!r}, pf.Schema.from_dict({ONE_COLUMN!r}))\n"
            "print('read', flush=True)\n"
            "sys.stdin.read()\n"
        )
        env = {**os.environ, "SPARK_CONNECT_AUTHENTICATE_TOKEN": server.token}
        reader = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        assert reader.stdout is not None and reader.stdout.readline().strip() == "read"
    finally:
        stop_connect_server(proc)
    start = time.monotonic()
    assert reader.stdin is not None
    reader.stdin.close()
    try:
        assert reader.wait(120) == 0
    finally:
        if reader.poll() is None:  # still waiting for the server: not left behind
            reader.kill()
            reader.wait()
    assert time.monotonic() - start < 15
