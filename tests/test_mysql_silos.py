"""Silos in MySQL or MariaDB (``mysql://USER@HOST/DB?table=T`` or ``?query=SQL``), read with PyMySQL
from a server the tests start: for random tables and schemas the silo equals the one read from the
same rows exported as CSV; bad rows give the errors of the Parquet export; a binary column is
refused naming its row; the password comes from ``MYSQL_PWD`` or ``~/.my.cnf`` and never shows; a
release over a MySQL silo equals the release over its CSV export."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError
from privsyn_fed.silo import Silo
from tests.conftest import assert_one_line_error, run_cli, synth_argv
from tests.test_engine_silos import BAD, BAD_SCHEMA, KEY, _bad_errors, _random_table, _same_silo, assert_same_release


def _mysql_table(mysql, df: pd.DataFrame, table: str, kinds: dict[str, str] | None = None) -> str:
    """``df`` as table ``table`` of the test server's database (DOUBLE, BIGINT, TEXT; NaN and None as NULL)."""
    kinds = kinds or {
        c: "DOUBLE" if df[c].dtype.kind == "f" else "BIGINT" if df[c].dtype.kind == "i" else "TEXT" for c in df.columns
    }
    rows = [
        tuple(None if v is None or (isinstance(v, float) and np.isnan(v)) else v for v in row)
        for row in df.itertuples(index=False)
    ]
    with mysql.connect() as con, con.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS `{table}`")
        columns = ", ".join(f"`{c}` {kinds[c]}" for c in df.columns)
        cur.execute(f"CREATE TABLE `{table}` (id INT AUTO_INCREMENT PRIMARY KEY, {columns}) CHARACTER SET utf8mb4")
        names = ", ".join(f"`{c}`" for c in df.columns)
        cur.executemany(f"INSERT INTO `{table}` ({names}) VALUES ({', '.join(['%s'] * len(df.columns))})", rows)
    return mysql.url(table)


def _no_negative_zero(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with -0.0 written 0.0, as MariaDB stores it (so its CSV export and the table hold the same values)."""
    return df.apply(lambda c: c + 0.0 if c.dtype.kind == "f" else c)


@pytest.fixture
def pwd(mysql, monkeypatch):
    monkeypatch.setenv("MYSQL_PWD", mysql.password)
    return mysql


@pytest.mark.parametrize("seed", range(4))
def test_a_silo_in_mysql_is_the_silo_of_its_csv_export(tmp_path, pwd, seed):
    spec, df = _random_table(400 + seed)
    df = _no_negative_zero(df)
    schema = pf.Schema.from_dict(spec)
    df.to_csv(tmp_path / "t.csv", index=False)
    url = _mysql_table(pwd, df, f"rows_{seed}")
    read = dict(unit="pid", max_rows=2, unit_key=KEY, site=("site", "north"))
    _same_silo(Silo.load(tmp_path / "t.csv", schema, **read), Silo.load(url, schema, **read, chunk_rows=53))
    query = pwd.url(query=f"SELECT * FROM rows_{seed} WHERE pid >= 0 ORDER BY id")
    site = ("site", "north")
    _same_silo(Silo.load(tmp_path / "t.csv", schema, site=site), Silo.load(query, schema, site=site))


def test_bad_rows_in_mysql_give_the_errors_of_its_parquet_export(tmp_path, pwd):
    def url_of(frame, name):
        url = _mysql_table(pwd, frame.assign(pid=frame["pid"].astype(object)), f"bad_{name}")
        return url.replace(f"table=bad_{name}", f"query=SELECT {', '.join(frame.columns) or '1'} FROM bad_{name}")

    _bad_errors(tmp_path, url_of)


def test_column_types_decimals_dates_and_binary(tmp_path, pwd):
    frame = pd.DataFrame({"g": ["a", "b", "a"], "x": [1.25, 2.5, 9.75], "d": ["2024-01-02"] * 3, "b": ["p"] * 3})
    kinds = {"g": "ENUM('a','b')", "x": "DECIMAL(6,2)", "d": "DATE", "b": "VARBINARY(8)"}
    url = _mysql_table(pwd, frame, "typed", kinds)
    schema = {"columns": [BAD_SCHEMA["columns"][0], BAD_SCHEMA["columns"][1]]}
    silo = Silo.load(url, pf.Schema.from_dict(schema))
    frame[["g", "x"]].to_csv(tmp_path / "t.csv", index=False)
    _same_silo(Silo.load(tmp_path / "t.csv", pf.Schema.from_dict(schema)), silo)  # ENUM as text, DECIMAL as doubles
    as_date = {"columns": [*schema["columns"][:1], {**schema["columns"][1], "name": "d"}]}
    with pytest.raises(InputError, match="column 'd' is stored as date in MySQL, but the schema declares it numeric"):
        Silo.load(url, pf.Schema.from_dict(as_date))
    as_binary = {"columns": [*schema["columns"][:1], {"name": "b", "type": "categorical", "categories": ["p"]}]}
    with pytest.raises(InputError) as caught:
        Silo.load(url, pf.Schema.from_dict(as_binary))
    assert (
        str(caught.value)
        == f"{url}: row 1, column 'b': holds binary data (a binary string or BLOB); store it as text or as a number"
    )


@pytest.mark.parametrize(
    "url, fragment",
    [
        (
            "mysql://ann:Sesame-42@127.0.0.1/prod?table=t",
            "mysql://ann:***@127.0.0.1/prod?table=t: the URL holds a password",
        ),
        ("mariadb://ann@127.0.0.1/prod?password=Sesame-42&table=t", "put it in MYSQL_PWD or ~/.my.cnf"),
        ("mysql://ann@127.0.0.1/prod?table=t&sslmode=require", "not ?sslmode="),
        ("mysql://ann@127.0.0.1/prod", "exactly one of ?table=NAME or ?query=SQL"),
    ],
)
def test_a_bad_mysql_url_is_refused_in_one_line_and_a_password_never_repeated(tmp_path, url, fragment):
    (tmp_path / "s.json").write_text(json.dumps(BAD_SCHEMA))
    proc = run_cli(*synth_argv(schema=tmp_path / "s.json", silos=[url], out=tmp_path / "o.csv"))
    assert_one_line_error(proc, fragment)
    assert "Sesame" not in proc.stdout + proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_the_password_comes_from_mysql_pwd_or_my_cnf_and_never_shows(tmp_path, mysql):
    url = _mysql_table(mysql, BAD.assign(g="a"), "secret_rows")
    (tmp_path / "s.json").write_text(json.dumps(BAD_SCHEMA))
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "MYSQL_PWD"} | {"HOME": str(home)}
    argv = synth_argv(schema=tmp_path / "s.json", silos=[url], out=tmp_path / "o.csv", seed=1, rows=20)
    refused = run_cli(*argv, env=env)
    assert_one_line_error(refused, url, "cannot connect to MySQL", "[1045]", "give the password in MYSQL_PWD")
    wrong = run_cli(*argv, env={**env, "MYSQL_PWD": "not-" + mysql.password})
    assert_one_line_error(wrong, "cannot connect to MySQL", "using password: YES")
    assert mysql.password not in wrong.stderr
    (home / ".my.cnf").write_text(f"[client]\npassword={mysql.password}\n")
    done = run_cli(*argv, env=env)
    assert done.returncode == 0, done.stderr
    written = "".join(p.read_text() for p in tmp_path.iterdir() if p.is_file())
    assert mysql.password not in done.stdout + done.stderr + written
    assert json.loads((tmp_path / "o.ledger.json").read_text())["method"] == "aim"


def test_a_release_over_a_mysql_silo_equals_the_release_over_its_csv_export(tmp_path, pwd):
    spec, df = _random_table(29, n=900)
    df = _no_negative_zero(df)
    spec["columns"] = spec["columns"][:-1]  # no silo column
    (tmp_path / "s.json").write_text(json.dumps(spec))
    north, south = df.iloc[:500], df.iloc[500:]
    north.to_csv(tmp_path / "north.csv", index=False)
    south.to_csv(tmp_path / "south.csv", index=False)
    engines = [_mysql_table(pwd, north, "north"), str(tmp_path / "south.csv")]
    files = [str(tmp_path / "north.csv"), str(tmp_path / "south.csv")]
    assert_same_release(tmp_path, engines, files)


def test_a_read_stopped_early_leaves_the_unread_rows_with_the_connection(tmp_path, pwd):
    """A bad row near the start of a long table stops the read in one line: the rows left unread are
    not read to the end, and nothing else is printed when the connection and its result are gone."""
    frame = pd.DataFrame({"g": ["a", "zz"] + ["b"] * 59_998, "x": np.linspace(0, 10, 60_000)})
    _mysql_table(pwd, frame, "long_rows")
    url = pwd.url(query="SELECT g, x FROM long_rows ORDER BY id")
    code = (
        "import gc, sys, time, privsyn_fed as pf\n"
        "from privsyn_fed.silo import Silo\n"
        f"schema = pf.Schema.from_dict({BAD_SCHEMA!r})\n"
        "start = time.monotonic()\n"
        "try:\n"
        f"    Silo.load({url!r}, schema, chunk_rows=100)\n"
        "except pf.InputError as exc:\n"
        "    print(exc)\n"
        "gc.collect()\n"
        "print(round(time.monotonic() - start, 3))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    message, _seconds = proc.stdout.strip().splitlines()
    assert message.startswith(f"{url}: row 2, column 'g'"), message
