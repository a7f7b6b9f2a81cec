"""Silos in a SQLite database file (``sqlite://PATH?table=T`` or ``?query=SQL``), read with Python's
``sqlite3``: for random tables and schemas the silo equals the one read from the same rows exported
as CSV (encoded rows, content sums, clipping, identifier warnings, a privacy unit's bounds, a silo
column); values typed one by one are read as a CSV's cells; a BLOB, bad rows and bad URLs give
one-line errors naming the table; the file is never changed; a release over SQLite silos equals the
release over their CSV exports."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError, beside
from privsyn_fed.silo import Silo
from privsyn_fed.silo.site import default_silo_name
from tests.conftest import assert_one_line_error, run_cli, synth_argv
from tests.test_engine_silos import BAD, BAD_SCHEMA, KEY, _error, _random_table, _same_silo, assert_same_release


def _sqlite_file(path, df: pd.DataFrame, table: str = "t") -> str:
    """``df`` written to the SQLite file ``path`` (pandas' own types: INTEGER, REAL, TEXT; NaN and None as NULL)."""
    with sqlite3.connect(path) as con:
        df.to_sql(table, con, index=False)
    con.close()
    return f"sqlite://{path}?table={table}"


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("seed", range(8))
def test_a_silo_in_sqlite_is_the_silo_of_its_csv_export(tmp_path, seed):
    spec, df = _random_table(300 + seed)
    schema = pf.Schema.from_dict(spec)
    df.to_csv(tmp_path / "t.csv", index=False)
    url = _sqlite_file(tmp_path / "t.db", df)
    before = _digest(tmp_path / "t.db")
    query = f"sqlite://{tmp_path / 't.db'}?query=SELECT * FROM t WHERE pid >= 0"
    read = dict(unit="pid", max_rows=2, unit_key=KEY, site=("site", "north"))
    from_csv = Silo.load(tmp_path / "t.csv", schema, **read)
    for other in (url, query):
        _same_silo(from_csv, Silo.load(other, schema, **read))
    site = ("site", "north")
    _same_silo(Silo.load(tmp_path / "t.csv", schema, site=site), Silo.load(url, schema, site=site, chunk_rows=37))
    assert _digest(tmp_path / "t.db") == before  # opened read-only: not a byte changed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv", "t.db"]  # no journal left behind


# A table whose columns' declared types do not hold for every value, as SQLite allows.
LOOSE = [
    ("a", 1, " 7 ", "x"),
    ("b", 2.5, "8", "y"),
    (None, None, "1e1", 3),
    (" a", 4, 9, 2.5),
    ("b", "5", None, "x"),
]
LOOSE_SCHEMA = {
    "columns": [
        {"name": "g", "type": "categorical", "categories": ["a", "b"], "missing": True},
        {"name": "x", "type": "numeric", "lower": 0, "upper": 10, "bins": 5, "missing": True},
        {"name": "y", "type": "numeric", "lower": 0, "upper": 10, "bins": 2, "integer": True, "missing": True},
        {"name": "h", "type": "categorical", "categories": ["x", "y", "3", "2.5"]},
    ]
}


def _loose_file(path, rows) -> str:
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (g TEXT, x REAL, y INTEGER, h TEXT)")
        con.execute("CREATE TABLE u (g, x, y, h)")  # no declared types at all
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
        con.executemany("INSERT INTO u VALUES (?, ?, ?, ?)", rows)
    con.close()
    return f"sqlite://{path}?table=t"


def test_values_typed_one_by_one_are_read_as_the_cells_of_a_csv_export(tmp_path):
    """SQLite keeps text in a REAL column and numbers in a TEXT one; each batch's column is read as
    numbers where all its values are, else as text, so the cells are the CSV export's in any batching."""
    url = _loose_file(tmp_path / "t.db", LOOSE)
    pd.DataFrame(LOOSE, columns=["g", "x", "y", "h"]).to_csv(tmp_path / "t.csv", index=False)
    schema = pf.Schema.from_dict(LOOSE_SCHEMA)
    want = Silo.load(tmp_path / "t.csv", schema)
    for source in (url, url.replace("table=t", "table=u"), url.replace("table=t", "query=SELECT * FROM u")):
        for chunk in (1, 2, 100):
            got = Silo.load(source, schema, chunk_rows=chunk)
            _same_silo(want, got)
            assert np.array_equal(want.rows(), got.rows())


def test_a_value_that_is_not_a_number_gives_the_error_of_the_csv_export_with_its_row(tmp_path):
    rows = [*LOOSE[:3], ("a", "n/a", 1, "x")]
    url = _loose_file(tmp_path / "t.db", rows)
    pd.DataFrame(rows, columns=["g", "x", "y", "h"]).to_csv(tmp_path / "t.csv", index=False)
    schema = pf.Schema.from_dict(LOOSE_SCHEMA)
    with pytest.raises(InputError) as from_csv:
        Silo.load(tmp_path / "t.csv", schema)
    with pytest.raises(InputError) as from_sqlite:
        Silo.load(url, schema, chunk_rows=2)
    # a CSV names the row by its line (the header is line 1); SQLite's rows are numbered from 1
    want = str(from_csv.value).replace(str(tmp_path / "t.csv"), "SOURCE").replace("row 5,", "row 4,")
    assert str(from_sqlite.value).replace(url, "SOURCE") == want
    assert "row 4, column 'x'" in want and "n/a" in want


def test_a_blob_is_refused_naming_its_row_and_column_and_nothing_is_written(tmp_path):
    rows = [*LOOSE[:3], ("a", b"\x00\x01", 1, "x")]
    url = _loose_file(tmp_path / "t.db", rows)
    (tmp_path / "s.json").write_text(json.dumps(LOOSE_SCHEMA))
    proc = run_cli(*synth_argv(schema=tmp_path / "s.json", silos=[url], out=tmp_path / "o.csv"))
    assert_one_line_error(proc, f"{url}: row 4, column 'x': holds binary data (a BLOB)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json", "t.db"]


def test_bad_rows_in_sqlite_give_the_errors_of_its_parquet_export(tmp_path):
    cases = {
        "category": (BAD, {}),
        "unit": (BAD.assign(g="a"), {"unit": "pid"}),
        "column": (BAD.drop(columns="x"), {}),
    }
    for name, (frame, read) in cases.items():
        frame.to_parquet(tmp_path / f"{name}.parquet", index=False)
        want = _error(tmp_path / f"{name}.parquet", **read).replace(str(tmp_path / f"{name}.parquet"), "SOURCE")
        url = _sqlite_file(tmp_path / f"{name}.db", frame)
        assert _error(url, **read).replace(url, "SOURCE") == want, name
    with sqlite3.connect(tmp_path / "empty.db") as con:
        con.execute("CREATE TABLE t (g TEXT, x REAL, pid INTEGER)")
    con.close()
    assert _error(f"sqlite://{tmp_path / 'empty.db'}?table=t").endswith(": the table has no rows")


@pytest.mark.parametrize(
    "make, url, fragment",
    [
        (None, "sqlite://nowhere.db?table=t", "no SQLite database file 'nowhere.db'"),
        (None, "sqlite://x.db", "exactly one of ?table=NAME or ?query=SQL"),
        (None, "sqlite://?query=SELECT 1", "name a database file"),
        (None, "sqlite://x.db?table=t&mode=rw", "takes only ?table= or ?query=, not ?mode="),
        ("text", "sqlite://{d}/x.db?table=t", "SQLite cannot read the rows (file is not a database)"),
        ("db", "sqlite://{d}/x.db?table=nope", "SQLite cannot read the rows (no such table: nope)"),
        ("db", "sqlite://{d}/x.db?query=DELETE FROM t", "SQLite cannot read the rows"),
    ],
)
def test_a_bad_url_or_file_is_refused_in_one_line(tmp_path, make, url, fragment):
    if make == "text":
        (tmp_path / "x.db").write_text("g,x\na,1\n")
    elif make == "db":
        _sqlite_file(tmp_path / "x.db", BAD)
    before = _digest(tmp_path / "x.db") if make else None
    with pytest.raises(InputError) as caught:
        Silo.load(url.format(d=tmp_path), pf.Schema.from_dict(BAD_SCHEMA))
    assert fragment in str(caught.value) and "\n" not in str(caught.value), caught.value
    if make:
        assert _digest(tmp_path / "x.db") == before


def test_a_release_over_sqlite_silos_equals_the_release_over_their_csv_exports(tmp_path):
    spec, df = _random_table(17, n=900)
    spec["columns"] = spec["columns"][:-1]  # no silo column
    (tmp_path / "s.json").write_text(json.dumps(spec))
    north, south = df.iloc[:500], df.iloc[500:]
    north.to_csv(tmp_path / "north.csv", index=False)
    south.to_csv(tmp_path / "south.csv", index=False)
    _sqlite_file(tmp_path / "regions.db", north, "north")
    _sqlite_file(tmp_path / "regions.db", south, "south")
    engines = [f"sqlite://{tmp_path / 'regions.db'}?table={t}" for t in ("north", "south")]
    files = [str(tmp_path / "north.csv"), str(tmp_path / "south.csv")]
    assert_same_release(tmp_path, engines, files)
    assert [default_silo_name(u) for u in engines] == ["north", "south"]  # named after their tables
    assert beside(engines[0], ".ledgers") == tmp_path / "regions.db.ledgers"  # an MPC party's copies
    schema = pf.Schema.from_dict(spec)
    mixed = pf.synthesize([engines[0], files[1]], "aim", 1.0, 1e-9, schema=schema, seed=2, rows=50)
    plain = pf.synthesize(files, "aim", 1.0, 1e-9, schema=schema, seed=2, rows=50)
    pd.testing.assert_frame_equal(mixed.data, plain.data)


def test_a_schema_is_drafted_from_a_sqlite_table_as_from_its_csv_export(tmp_path):
    spec, df = _random_table(23, n=600)
    df.to_csv(tmp_path / "t.csv", index=False)
    url = _sqlite_file(tmp_path / "t.db", df)
    drafts = []
    for source, out in ((tmp_path / "t.csv", "a.json"), (url, "b.json")):
        proc = run_cli("schema", "draft", "--out", str(tmp_path / out), str(source))
        assert proc.returncode == 0, proc.stderr
        drafts.append(json.loads((tmp_path / out).read_text()))
    assert drafts[1]["_draft"]["drafted_from"] == url  # the URL whole, not cut at its last slash
    assert drafts[0]["columns"] == drafts[1]["columns"]
