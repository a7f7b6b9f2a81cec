"""Silos in an engine (DuckDB, PostgreSQL), named by URL: for random tables and schemas the silo
read from the engine equals the one read from the same rows exported as CSV and as Parquet (encoded
rows, content sums, clipping, identifier warnings, a privacy unit's bounds, a silo column); bad rows
and bad URLs give one-line errors naming the table; the password never appears; a release over
engine silos equals the release over their CSV exports."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError
from privsyn_fed.silo import Silo
from tests.conftest import assert_one_line_error, make_frame, run_cli, synth_argv

duckdb = pytest.importorskip("duckdb", reason="DuckDB is not installed (pip install 'privsyn-fed[engines]')")

KEY = "0123456789abcdef"


def _numeric(rng: np.random.Generator, name: str, n: int) -> tuple[dict, np.ndarray]:
    integer = bool(rng.integers(2))
    lower = float(rng.integers(-10, 20)) if integer else float(rng.choice([0, -5, 18, 0.5]))
    upper = lower + (float(rng.integers(1, 200)) if integer else float(rng.choice([0.7, 7.0, 70.0, 1e3])))
    col: dict = {"name": name, "type": "numeric", "lower": lower, "upper": upper, "integer": integer}
    kind = rng.choice(["width", "log", "edges"])
    if kind == "edges":
        cuts = np.unique(np.round(rng.uniform(lower, upper, 4), 0 if integer else 3))
        col["edges"] = [float(c) for c in cuts if lower < c < upper] or [float(np.round((lower + upper) / 2))]
    else:
        col["bins"] = int(rng.integers(1, 12))
        if kind == "log" and lower >= 0:
            col["scale"] = "log"
    grid = np.linspace(lower, upper, 41)
    values = np.concatenate([rng.uniform(lower - 3, upper + 3, n - len(grid) - 10), grid, lower + np.arange(10) + 0.5])
    if integer:
        values = np.round(values, 1)
    if rng.integers(2):
        atom = float(np.round(grid[20])) if integer else float(grid[20])
        col["atoms"] = [atom]
        values[: n // 10] = atom
    if rng.integers(2):
        col["missing"] = True
        values[rng.random(n) < 0.1] = np.nan
    return col, rng.permutation(values)


def _categorical(rng: np.random.Generator, name: str, n: int) -> tuple[dict, np.ndarray]:
    cats = ["a", "b", "c d", "e"][: int(rng.integers(1, 5))]
    col: dict = {"name": name, "type": "categorical", "categories": list(cats)}
    pool = [*cats, " a ", f"\u3000{cats[-1]}\t"]  # white space that str.strip strips
    if rng.integers(2):
        col["categories"].append("other")
        col["unknown"] = "other"
        pool.append("zz")
    values = rng.choice(np.array(pool, dtype=object), n)
    if rng.integers(2):
        col["missing"] = True
        values[rng.random(n) < 0.1] = None
    return col, values


def _random_table(seed: int, n: int = 400) -> tuple[dict, pd.DataFrame]:
    """A schema of four columns and the silo column ``site``, and a table of ``n`` rows that also
    holds a person id ``pid`` (the privacy unit, several rows each)."""
    rng = np.random.default_rng(seed)
    cols, frame = [], {}
    for i in range(4):
        col, values = (_numeric if i < 2 or rng.integers(2) else _categorical)(rng, f"c{i}", n)
        cols.append(col)
        frame[col["name"]] = values
    cols.append({"name": "site", "type": "categorical", "categories": ["north", "south"]})
    frame["pid"] = rng.integers(1000, 1000 + n // 3, n)
    return {"columns": cols}, pd.DataFrame(frame)


def _duckdb_file(path, df: pd.DataFrame, table: str = "t") -> str:
    con = duckdb.connect(str(path))
    con.register("frame", df)
    con.execute(f"CREATE TABLE {table} AS SELECT * FROM frame")
    con.close()
    return f"duckdb://{path}?table={table}"


def _pg_table(postgres, df: pd.DataFrame, table: str) -> str:
    kinds = {
        c: "double precision" if df[c].dtype.kind == "f" else "bigint" if df[c].dtype.kind == "i" else "text"
        for c in df.columns
    }
    with postgres.connect() as con:
        con.execute(f"DROP TABLE IF EXISTS {table}")
        con.execute(f"CREATE TABLE {table} ({', '.join(f'{c} {k}' for c, k in kinds.items())})")
        with con.cursor().copy(f"COPY {table} ({', '.join(df.columns)}) FROM STDIN") as copy:
            for row in df.itertuples(index=False):
                copy.write_row([None if v is None or (isinstance(v, float) and np.isnan(v)) else v for v in row])
    return postgres.url(table)


#: The one-line error of a silo whose rows changed between two reads of a release.
CHANGED = (
    "{url}: its rows changed between two reads of this release (the table was written to, or the query gives "
    "other rows each time it runs); release again from rows that hold still"
)


def _same_silo(a: Silo, b: Silo) -> None:
    assert a.true_size() == b.true_size() > 0
    assert a.fingerprint() == b.fingerprint()
    assert a.content is not None and b.content is not None
    assert (a.content.rows, a.content.sums) == (b.content.rows, b.content.sums)
    assert (a.clipped, a.identifiers, a.unit, a.unit_dropped, a.site) == (
        b.clipped,
        b.identifiers,
        b.unit,
        b.unit_dropped,
        b.site,
    )
    for clique in itertools.combinations(range(len(a.schema.columns)), 2):
        assert np.array_equal(a.marginal(clique), b.marginal(clique)), clique


@pytest.mark.parametrize("seed", range(8))
def test_a_silo_in_duckdb_is_the_silo_of_its_csv_and_parquet_exports(tmp_path, seed):
    spec, df = _random_table(seed)
    schema = pf.Schema.from_dict(spec)
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_parquet(tmp_path / "t.parquet", index=False)
    url = _duckdb_file(tmp_path / "t.duckdb", df)
    read = dict(unit="pid", max_rows=2, unit_key=KEY, site=("site", "north"))
    from_csv = Silo.load(tmp_path / "t.csv", schema, **read)
    for other in (tmp_path / "t.parquet", url, f"duckdb://?query=SELECT * FROM read_parquet('{tmp_path}/t.parquet')"):
        _same_silo(from_csv, Silo.load(other, schema, **read))


@pytest.mark.parametrize("seed", range(8))
def test_a_silo_counted_in_duckdb_is_the_silo_of_its_csv_export(tmp_path, seed, monkeypatch):
    """Without a privacy unit a DuckDB silo's rows stay in DuckDB and are counted there
    (``EngineStore``); it answers as the CSV's silo, whose rows the reader encoded. Half the seeds
    count in grouping sets (each clique in a set of its own, or groups of columns covering them),
    the others one ``GROUP BY`` of their columns;
    half the rows stream back from DuckDB and are kept in parts of 7 rows."""
    from privsyn_fed.silo import column_groups, engine_store, grouped_counts

    monkeypatch.setattr(grouped_counts, "JOINT_CELLS", 1 if seed >= 4 else grouped_counts.JOINT_CELLS)
    monkeypatch.setattr(column_groups, "GROUP_CELLS", {4: 1, 5: 1, 6: 64, 7: 64}.get(seed, column_groups.GROUP_CELLS))
    monkeypatch.setattr(engine_store, "PART_ROWS", 7 if seed in (2, 3, 6, 7) else engine_store.PART_ROWS)
    spec, df = _random_table(200 + seed)
    schema = pf.Schema.from_dict(spec)
    held = df.assign(site="north") if seed % 2 else df  # the silo column held by the table, or not
    held.to_csv(tmp_path / "t.csv", index=False)
    url = _duckdb_file(tmp_path / "t.duckdb", held)
    from_csv = Silo.load(tmp_path / "t.csv", schema, site=("site", "north"))
    counted = Silo.load(url, schema, site=("site", "north"))
    assert [type(s).__name__ for s in counted._stores] == ["EngineStore"]
    _same_silo(from_csv, counted)
    assert np.array_equal(np.concatenate([v for _, v in from_csv.parts()]), counted.values(), equal_nan=True)
    d = len(schema.columns)
    every = list(itertools.chain.from_iterable(itertools.combinations(range(d), k) for k in range(d + 1)))
    shuffled = [tuple(np.random.default_rng(seed).permutation(c)) for c in every]
    for clique, counts in counted.marginals(shuffled).items():  # inside counted sets, in any column order
        assert np.array_equal(counts, from_csv.marginal(clique)), clique


@pytest.mark.parametrize("seed", range(4))
def test_a_silo_in_postgresql_is_the_silo_of_its_csv_export(tmp_path, postgres, monkeypatch, seed):
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    spec, df = _random_table(100 + seed)
    schema = pf.Schema.from_dict(spec)
    df.to_csv(tmp_path / "t.csv", index=False)
    url = _pg_table(postgres, df, f"rows_{seed}")
    read = dict(unit="pid", max_rows=2, unit_key=KEY, site=("site", "north"))
    _same_silo(Silo.load(tmp_path / "t.csv", schema, **read), Silo.load(url, schema, **read))
    query = postgres.url(query=f"SELECT * FROM rows_{seed} WHERE pid >= 0")
    site = ("site", "north")
    _same_silo(Silo.load(tmp_path / "t.csv", schema, site=site), Silo.load(query, schema, site=site))


# ---- errors ---------------------------------------------------------------------------------------
BAD = pd.DataFrame({"g": ["a", "b", "a", "zz", "b"], "x": [1.0, 2, 3, 4, 5], "pid": [1, 2, 3, None, 5]})
BAD_SCHEMA = {
    "columns": [
        {"name": "g", "type": "categorical", "categories": ["a", "b"]},
        {"name": "x", "type": "numeric", "lower": 0, "upper": 10, "bins": 2},
    ]
}


def _error(source, **read) -> str:
    with pytest.raises(InputError) as caught:
        Silo.load(source, pf.Schema.from_dict(BAD_SCHEMA), **read)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{source}: "), message
    return message


def _bad_errors(tmp_path, url_of) -> None:
    """Each bad table in the engine (``url_of(frame, name)``) gives the error of its Parquet export,
    the table named by its URL, its rows numbered alike."""
    cases = {
        "category": (BAD, {}),
        "unit": (BAD.assign(g="a"), {"unit": "pid"}),
        "column": (BAD.drop(columns="x"), {}),
        "type": (BAD.assign(x=BAD["x"].astype(str)), {}),
        "empty": (BAD.iloc[:0], {}),
    }
    for name, (frame, read) in cases.items():
        frame.to_parquet(tmp_path / f"{name}.parquet", index=False)
        want = _error(tmp_path / f"{name}.parquet", **read).replace("large_string", "string")
        url = url_of(frame, name)
        got = _error(url, **read)
        where = "in Parquet" if name == "type" else ""
        engine = {"duckdb": "in DuckDB", "postgresql": "in PostgreSQL", "mysql": "in MySQL", "spark": "in Spark"}[
            url.split(":", 1)[0]
        ]
        assert got.replace(url, "SOURCE") == want.replace(str(tmp_path / f"{name}.parquet"), "SOURCE").replace(
            "in Parquet", where and engine
        ), name


@pytest.mark.parametrize("part_rows", [None, 2])
def test_bad_rows_in_duckdb_give_the_errors_of_its_parquet_export(tmp_path, monkeypatch, part_rows):
    """Whole, or streamed back in parts of 2 rows (the refused row in the second part)."""
    from privsyn_fed.silo import engine_store

    monkeypatch.setattr(engine_store, "PART_ROWS", part_rows or engine_store.PART_ROWS)
    _bad_errors(tmp_path, lambda frame, name: _duckdb_file(tmp_path / f"{name}.duckdb", frame))


def test_a_duckdb_silo_with_another_silos_name_and_a_refused_value_gives_its_parquet_exports_error(
    tmp_path, monkeypatch
):
    """Another silo's name in the first part streamed back and a refused value in the second: the
    reader, reading both in one chunk, names the refused value first, and so does the DuckDB silo."""
    from privsyn_fed.silo import engine_store

    monkeypatch.setattr(engine_store, "PART_ROWS", 2)
    spec = {"columns": [*BAD_SCHEMA["columns"], {"name": "site", "type": "categorical", "categories": ["n", "s"]}]}
    frame = BAD.assign(g=["a", "b", "zz", "a", "b"], site=["n", "s", "n", "n", "n"])
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    errors = []
    for source in (tmp_path / "t.parquet", _duckdb_file(tmp_path / "t.duckdb", frame)):
        with pytest.raises(InputError) as caught:
            Silo.load(source, pf.Schema.from_dict(spec), site=("site", "n"))
        errors.append(str(caught.value).replace(str(source), "SOURCE"))
    assert errors[0] == errors[1] and "row 3" in errors[0] and "'zz'" in errors[0], errors


def test_a_duckdb_silo_keeps_only_its_cells_in_the_engine_and_refuses_rows_changed_under_it(tmp_path):
    """The engine's table holds one column of cells per schema column, no values; a later pass that
    reads the values again and finds other rows (the table rewritten, a value now refused, a query
    drawing rows at random) is one line, not a statistic of those rows."""
    spec, df = _random_table(7)
    schema = pf.Schema.from_dict(spec)
    df.to_parquet(tmp_path / "t.parquet", index=False)
    url = f"duckdb://?query=SELECT * FROM read_parquet('{tmp_path}/t.parquet')"
    silo = Silo.load(url, schema, site=("site", "north"))
    (store,) = silo._stores
    kept = store._table("SELECT column_name AS name FROM (DESCRIBE memory.main.privsyn_cells)").column("name")
    assert kept.to_pylist() == [f"c{j}" for j in range(len(schema.columns))]
    first = silo.values()
    assert np.array_equal(silo.values(), first, equal_nan=True)  # read again, the same rows
    col = next(c for c in spec["columns"] if c["type"] == "numeric")
    changed = df.copy()  # as many rows, one value other
    changed.loc[0, col["name"]] = col["upper"] if changed.loc[0, col["name"]] == col["lower"] else col["lower"]
    changed.to_parquet(tmp_path / "t.parquet", index=False)
    with pytest.raises(InputError) as caught:
        silo.values()
    assert str(caught.value) == CHANGED.format(url=url)
    assert silo.marginal((0,)).sum() == len(df)  # the cells kept are still the first rows'
    good = BAD.assign(g="a")
    good.to_parquet(tmp_path / "g.parquet", index=False)
    url = f"duckdb://?query=SELECT * FROM read_parquet('{tmp_path}/g.parquet')"
    silo = Silo.load(url, pf.Schema.from_dict(BAD_SCHEMA))
    good.assign(g=["zz"] + ["a"] * (len(good) - 1)).to_parquet(tmp_path / "g.parquet", index=False)  # refused now
    with pytest.raises(InputError, match="its rows changed between two reads of this release"):
        next(silo.parts())
    drawn = f"duckdb://?query=SELECT * FROM read_parquet('{tmp_path}/t.parquet') ORDER BY random() LIMIT 200"
    silo = Silo.load(drawn, schema, site=("site", "north"))  # other rows at each run of the query
    with pytest.raises(InputError, match="its rows changed between two reads of this release"):
        silo.values()


def test_bad_rows_in_postgresql_give_the_errors_of_its_parquet_export(tmp_path, postgres, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    _bad_errors(tmp_path, lambda frame, name: _pg_table(postgres, frame, f"bad_{name}"))


@pytest.mark.parametrize(
    "url, fragment",
    [
        ("duckdb://nowhere.duckdb?table=t", "no DuckDB database file 'nowhere.duckdb'"),
        ("duckdb://x.duckdb", "exactly one of ?table=NAME or ?query=SQL"),
        ("duckdb://x.duckdb?table=t&query=SELECT%201", "exactly one of ?table=NAME or ?query=SQL"),
        ("duckdb://x.duckdb?table=t&threads=4", "takes only ?table= or ?query=, not ?threads="),
        ("duckdb://?table=t", "name a database file (duckdb://PATH?table=NAME)"),
        ("postgresql://ann@db.example/prod", "exactly one of ?table=NAME or ?query=SQL"),
    ],
)
def test_a_bad_url_is_refused_in_one_line_before_anything_is_opened(url, fragment):
    with pytest.raises(InputError, match=None) as caught:
        Silo.load(url, pf.Schema.from_dict(BAD_SCHEMA))
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://ann:Sesame-42@127.0.0.1/prod?table=t",
        "postgres://ann@127.0.0.1/prod?password=Sesame-42&table=t",
        "postgresql://ann:Ses@me-42@127.0.0.1/prod?table=t",  # an @ left unescaped in the password
    ],
)
def test_a_password_in_the_url_is_refused_and_never_repeated(url, tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(BAD_SCHEMA))
    proc = run_cli(*synth_argv(schema=tmp_path / "s.json", silos=[url], out=tmp_path / "o.csv"))
    line = assert_one_line_error(proc, "holds a password", "PGPASSWORD", "***")
    assert not any(part in proc.stdout + proc.stderr for part in ("Sesame", "Ses@", "me-42")), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_the_password_comes_from_pgpassword_and_never_shows(tmp_path, postgres, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    url = _pg_table(postgres, BAD.assign(g="a"), "secret_rows")
    (tmp_path / "s.json").write_text(json.dumps(BAD_SCHEMA))
    argv = synth_argv(schema=tmp_path / "s.json", silos=[url], out=tmp_path / "o.csv", seed=1, rows=20)
    env = dict(os.environ)
    env.pop("PGPASSWORD")
    refused = run_cli(*argv, env=env)
    assert_one_line_error(refused, url, "cannot connect to PostgreSQL")
    wrong = run_cli(*argv, env={**env, "PGPASSWORD": "not-" + postgres.password})
    assert_one_line_error(wrong, "cannot connect to PostgreSQL")
    assert postgres.password not in wrong.stderr
    done = run_cli(*argv, env={**env, "PGPASSWORD": postgres.password})
    assert done.returncode == 0, done.stderr
    written = "".join(p.read_text() for p in tmp_path.iterdir() if p.is_file())
    assert postgres.password not in done.stdout + done.stderr + written
    assert json.loads((tmp_path / "o.ledger.json").read_text())["method"] == "aim"


# ---- a release ------------------------------------------------------------------------------------
def assert_same_release(tmp_path, engines: list[str], files: list[str]) -> None:
    """A seeded ``synth`` with a privacy unit over ``engines`` writes the CSV, byte for byte, and the
    ledger (but its times) that it writes over ``files``, their exports (schema ``tmp_path/s.json``)."""
    ledgers = []
    for name, silos in (("engines", engines), ("files", files)):
        argv = synth_argv(schema=tmp_path / "s.json", silos=silos, out=tmp_path / f"{name}.csv", seed=5)
        proc = run_cli(*argv, "--privacy-unit", "pid", "--max-rows-per-unit", "2")
        assert proc.returncode == 0, proc.stderr
        ledger = json.loads((tmp_path / f"{name}.ledger.json").read_text())
        ledgers.append({k: v for k, v in ledger.items() if k not in ("created", "updated")})
    assert (tmp_path / "engines.csv").read_bytes() == (tmp_path / "files.csv").read_bytes()
    assert ledgers[0] == ledgers[1]


def test_a_release_over_engine_silos_equals_the_release_over_their_csv_exports(tmp_path, postgres, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    spec, df = _random_table(7, n=900)
    spec["columns"] = spec["columns"][:-1]  # no silo column
    (tmp_path / "s.json").write_text(json.dumps(spec))
    north, south = df.iloc[:500], df.iloc[500:]
    north.to_csv(tmp_path / "north.csv", index=False)
    south.to_csv(tmp_path / "south.csv", index=False)
    engines = [f"north={_duckdb_file(tmp_path / 'n.duckdb', north)}", f"south={_pg_table(postgres, south, 'south')}"]
    files = [f"north={tmp_path / 'north.csv'}", f"south={tmp_path / 'south.csv'}"]
    assert_same_release(tmp_path, engines, files)


def test_the_same_engine_table_given_twice_is_refused(tmp_path):
    url = _duckdb_file(tmp_path / "t.duckdb", BAD.assign(g="a"))
    (tmp_path / "s.json").write_text(json.dumps(BAD_SCHEMA))
    proc = run_cli(*synth_argv(schema=tmp_path / "s.json", silos=[f"a={url}", f"b={url}"], out=tmp_path / "o.csv"))
    assert_one_line_error(proc, url, "given twice as --silo")


def test_a_query_keeps_its_plus_signs_and_folders_beside_a_url_silo_are_named_after_it(tmp_path):
    from privsyn_fed.common import beside, parse_engine_url

    t = parse_engine_url("duckdb://x.duckdb?query=SELECT a+1, 'b%26c' FROM t")
    assert t.query == "SELECT a+1, 'b&c' FROM t"
    assert beside("duckdb:///data/x.duckdb?table=t", ".ledgers") == Path("/data/x.duckdb.ledgers")
    assert beside("postgresql://ann@db/clinic?table=public.visits", ".site") == Path("visits.site")
    assert beside("north.csv", ".site") == Path("north.csv.site")


def test_a_query_over_a_table_with_plus_and_where_reads_its_rows(tmp_path):
    url = _duckdb_file(tmp_path / "t.duckdb", BAD.assign(g="a"))
    base = url.split("?")[0]
    silo = Silo.load(f"{base}?query=SELECT g, x+1 AS x FROM t WHERE x >= 2", pf.Schema.from_dict(BAD_SCHEMA))
    assert silo.true_size() == 4 and silo.marginal((1,)).tolist() == [2, 2]


def test_duckdb_keeps_to_the_memory_limit_asked_for_and_a_bad_one_is_one_line(tmp_path, monkeypatch):
    url = _duckdb_file(tmp_path / "t.duckdb", BAD.assign(g="a"))
    monkeypatch.setenv("PRIVSYN_FED_DUCKDB_MEMORY", "100MB")
    silo = Silo.load(url, pf.Schema.from_dict(BAD_SCHEMA))
    assert silo.marginal((0,)).tolist() == [5, 0]
    limit = silo._stores[0]._table("SELECT current_setting('memory_limit') AS m").column("m")[0].as_py()
    assert limit.replace(" ", "").upper().startswith(("95.3MIB", "100MB", "95MIB")), limit
    monkeypatch.setenv("PRIVSYN_FED_DUCKDB_MEMORY", "lots")
    with pytest.raises(InputError, match="PRIVSYN_FED_DUCKDB_MEMORY=lots: DuckDB refuses it as a memory limit"):
        Silo.load(url, pf.Schema.from_dict(BAD_SCHEMA))


def test_the_api_and_mpc_parties_take_engine_urls_and_release_as_from_the_exports(tmp_path):
    """``pf.synthesize`` mixes a URL with a path; ``synth --mpc`` starts a party per silo, each
    reading its own DuckDB table; both release what the CSV exports give."""
    spec, df = _random_table(11, n=600)
    spec["columns"] = spec["columns"][:-1]
    schema = pf.Schema.from_dict(spec)
    (tmp_path / "s.json").write_text(json.dumps(spec))
    north, south = df.iloc[:300], df.iloc[300:]
    north.to_csv(tmp_path / "north.csv", index=False)
    south.to_csv(tmp_path / "south.csv", index=False)
    url = _duckdb_file(tmp_path / "n.duckdb", north, "north")
    kept = pf.synthesize([url, tmp_path / "south.csv"], "aim", 1.0, 1e-9, schema=schema, seed=2, rows=50)
    plain = pf.synthesize(
        [tmp_path / "north.csv", tmp_path / "south.csv"], "aim", 1.0, 1e-9, schema=schema, seed=2, rows=50
    )
    pd.testing.assert_frame_equal(kept.data, plain.data)
    south_url = _duckdb_file(tmp_path / "s.duckdb", south, "south")
    outs = []
    for name, silos in (("engine", [url, south_url]), ("files", [tmp_path / "north.csv", tmp_path / "south.csv"])):
        argv = synth_argv("distaim", schema=tmp_path / "s.json", silos=silos, out=tmp_path / f"{name}.csv", seed=3)
        proc = run_cli(*argv, "--mpc", "--rows", "50", timeout=300)
        assert proc.returncode == 0, proc.stderr
        outs.append((tmp_path / f"{name}.csv").read_bytes())
    assert outs[0] == outs[1]
    copies = sorted(p.name for p in tmp_path.glob("*.duckdb.ledgers"))
    assert copies and set(copies) <= {"n.duckdb.ledgers", "s.duckdb.ledgers"}  # beside the parties' DuckDB files


def test_a_schema_is_drafted_from_an_engine_table_as_from_its_export(tmp_path):
    """``schema draft URL`` (in the clear) drafts what the CSV export gives; ``--dp`` drafts from two
    DuckDB tables and its ledger audits."""
    spec, df = _random_table(21, n=500)
    df = df.drop(columns="pid")
    df.to_csv(tmp_path / "t.csv", index=False)
    url = _duckdb_file(tmp_path / "t.duckdb", df)
    drafts = []
    for name, source in (("engine", url), ("file", tmp_path / "t.csv")):
        proc = run_cli("schema", "draft", source, "--out", tmp_path / f"{name}.json")
        assert proc.returncode == 0, proc.stderr
        drafts.append(json.loads((tmp_path / f"{name}.json").read_text())["columns"])
    assert drafts[0] == drafts[1]
    frame = make_frame(800, seed=4)
    north, south = (
        _duckdb_file(tmp_path / "n.duckdb", frame.iloc[:400]),
        _duckdb_file(tmp_path / "s.duckdb", frame.iloc[400:]),
    )
    dp = ["--dp", "8", "--delta", "1e-9", "--leave-unfound", "--out", tmp_path / "dp.json"]
    proc = run_cli("schema", "draft", north, south, *dp)
    assert proc.returncode == 0, proc.stderr
    assert run_cli("audit", tmp_path / "dp.ledger.json").returncode == 0
    again = run_cli("schema", "draft", url, url, "--dp", "4", "--delta", "1e-9", "--out", tmp_path / "dp2.json")
    assert_one_line_error(again, url, "given twice as DATA")


def test_evaluate_and_the_quality_holdout_read_engine_tables_as_their_exports(tmp_path):
    spec, df = _random_table(31, n=400)
    spec["columns"] = spec["columns"][:-1]
    (tmp_path / "s.json").write_text(json.dumps(spec))
    df.iloc[:300].to_csv(tmp_path / "real.csv", index=False)
    df.iloc[300:].to_csv(tmp_path / "hold.csv", index=False)
    real, hold = _duckdb_file(tmp_path / "r.duckdb", df.iloc[:300]), _duckdb_file(tmp_path / "h.duckdb", df.iloc[300:])
    argv = synth_argv(schema=tmp_path / "s.json", silos=[tmp_path / "real.csv"], out=tmp_path / "syn.csv", seed=1)
    made = run_cli(*argv, "--quality-report", tmp_path / "q.html", "--quality-holdout", hold)
    assert made.returncode == 0 and (tmp_path / "q.html").exists(), made.stderr
    measures = []
    for name, (r, h) in {"engine": (real, hold), "file": (tmp_path / "real.csv", tmp_path / "hold.csv")}.items():
        args = [
            "evaluate",
            "--real",
            r,
            "--holdout",
            h,
            "--synthetic",
            tmp_path / "syn.csv",
            "--schema",
            tmp_path / "s.json",
        ]
        proc = run_cli(*args, "--json", tmp_path / f"{name}.json")
        assert proc.returncode == 0, proc.stderr
        measures.append({k: v for k, v in json.loads((tmp_path / f"{name}.json").read_text()).items() if k != "files"})
    assert measures[0] == measures[1]


# ---- PostgreSQL's rows through ADBC's driver (a binary COPY) -----------------------------------------
def _pg_typed_table(postgres, table: str, rows: int, seed: int) -> None:
    """A table of every column type read through ADBC's driver, with the values a reader might mangle:
    NaN and infinities, float4's and float8's extremes, numeric's long decimals, empty text against
    NULL, commas, quotes, new lines and non-ASCII text."""
    rng = np.random.default_rng(seed)
    specials = [
        (1, 1, 1, "NaN", "NaN", "NaN", True, "", "", "a"),
        (
            -32768,
            -(2**31),
            -(2**63),
            "Infinity",
            "-Infinity",
            "1234567890123456789.123456789",
            False,
            'a,"b"',
            "x\ny",
            "ü ",
        ),
        (32767, 2**31 - 1, 2**63 - 1, "3.4028235e+38", "1.7976931348623157e308", "-1e-21", None, None, None, None),
        (None, None, None, "1.17549435e-38", "5e-324", "Infinity", True, " lead", "tail ", "\t"),
        (0, 0, 0, "-0", "-0", "1" + "0" * 400, None, "NULL", "\\N", ""),
    ]
    with postgres.connect() as con:
        con.execute(f"DROP TABLE IF EXISTS {table}")
        con.execute(
            f"CREATE TABLE {table} (i2 smallint, i4 integer, i8 bigint, f4 real, f8 double precision, "
            "n numeric, b boolean, t text, v varchar(12), c char(3))"
        )
        with con.cursor().copy(f"COPY {table} FROM STDIN") as copy:
            for row in specials:
                copy.write_row(row)
            for _ in range(rows):
                x = float(rng.normal() * 10.0 ** rng.integers(-30, 30))
                text = "".join(rng.choice(list("ab ,\"\n'é"), rng.integers(0, 6)))
                copy.write_row(
                    (
                        int(rng.integers(-9, 9)),
                        int(rng.integers(-(2**31), 2**31 - 1)),
                        int(rng.integers(-(2**62), 2**62)),
                        x,
                        x,
                        f"{rng.normal():.{rng.integers(0, 25)}f}",
                        bool(rng.integers(2)),
                        None if rng.random() < 0.1 else text,
                        text[:12],
                        text[:3],
                    )
                )


def _same_columns(a, b) -> None:
    assert a.schema == b.schema and a.num_rows == b.num_rows
    for name in a.column_names:
        x, y = a.column(name), b.column(name)
        assert x.is_null().to_pylist() == y.is_null().to_pylist(), name
        if str(x.type).startswith(("float", "double")):
            xs = x.to_numpy(zero_copy_only=False)
            ys = y.to_numpy(zero_copy_only=False)
            assert np.array_equal(xs, ys, equal_nan=True), name
        else:
            assert x.to_pylist() == y.to_pylist(), name


def test_postgresql_rows_through_adbc_are_the_cursors_values(postgres, monkeypatch):
    import pyarrow as pa

    from privsyn_fed.common import engines

    monkeypatch.setenv("PGPASSWORD", postgres.password)
    _pg_typed_table(postgres, "typed", 3000, 0)
    t = engines.parse_engine_url(postgres.url("typed"))
    copied = {c: list(engines.engine_batches(t, 1000, c and [c])) for c in (None, "t", "b")}
    assert [first for _, first in copied[None]] == [1, 1001, 2001, 3001]  # batches of chunk_rows, rows numbered
    monkeypatch.setattr(engines, "arrow_readable", lambda types: False)  # the cursor's route
    for columns, batches in copied.items():  # one column alone: a NULL is an empty line
        fetched = pa.Table.from_batches([b for b, _ in engines.engine_batches(t, 1000, columns and [columns])])
        _same_columns(pa.Table.from_batches([b for b, _ in batches]), fetched)


def test_a_postgresql_silo_is_read_in_a_read_only_transaction(postgres, monkeypatch):
    """A query that would write (here: advance a sequence) is refused by the server, in one line,
    through the driver's route and the cursor's alike, and writes nothing."""
    from urllib.parse import quote

    from privsyn_fed.common import engines

    monkeypatch.setenv("PGPASSWORD", postgres.password)
    url = _pg_table(postgres, BAD.iloc[:3], "ro_rows")
    with postgres.connect() as con:
        con.execute("DROP SEQUENCE IF EXISTS ro_seq")
        con.execute("CREATE SEQUENCE ro_seq")
    query = quote("SELECT g, x FROM ro_rows WHERE nextval('ro_seq') > 0")
    source = url.replace("table=ro_rows", f"query={query}")
    assert "read-only transaction" in _error(source)
    monkeypatch.setattr(engines, "arrow_readable", lambda types: False)  # the cursor's route
    assert "read-only transaction" in _error(source)
    with postgres.connect() as con:
        assert con.execute("SELECT is_called FROM ro_seq").fetchone() == (False,)


@pytest.mark.parametrize("failing_row", [3, 1_500_000])
def test_a_postgresql_query_failing_while_its_rows_stream_is_one_line(postgres, monkeypatch, failing_row):
    """The server's error (a division by zero) at the first rows or after the driver has handed
    over batches of them reaches the user as one line naming the silo, on the driver's route and
    the cursor's."""
    from privsyn_fed.common import engines

    monkeypatch.setenv("PGPASSWORD", postgres.password)
    rows = (
        "SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END AS g, (i % 10)::float8 AS x "
        f"FROM generate_series(1, {failing_row + 10}) AS i WHERE 1 / (i - {failing_row}) > -100"
    )
    source = postgres.url(query=rows)
    assert "division by zero" in _error(source)
    monkeypatch.setattr(engines, "arrow_readable", lambda types: False)  # the cursor's route
    assert "division by zero" in _error(source)


def test_rebatched_gives_batches_of_the_rows_asked_for_in_order():
    import pyarrow as pa

    from privsyn_fed.common.pg_arrow import rebatched

    rng = np.random.default_rng(5)
    sizes = rng.integers(0, 700, 40)
    values = np.arange(int(sizes.sum()))
    cuts = np.split(values, np.cumsum(sizes)[:-1])
    out = list(rebatched((pa.record_batch({"x": c}) for c in cuts), 500))
    assert [b.num_rows for b in out[:-1]] == [500] * (len(out) - 1) and 0 < out[-1].num_rows <= 500
    assert np.array_equal(np.concatenate([b.column(0).to_numpy() for b in out]), values)


@pytest.mark.parametrize("bad", [6, 249_993])
def test_a_bad_row_in_a_long_postgresql_copy_is_one_line_and_stops_the_read(tmp_path, postgres, monkeypatch, bad):
    """Early (the read stops with most of the COPY unread) and late (past the driver's first batches)."""
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    rows = 250_000
    frame = pd.DataFrame({"g": ["a", "b"] * (rows // 2), "x": np.arange(rows) % 10 * 1.0})
    frame.loc[bad, "g"] = "zz"
    url = _pg_table(postgres, frame, f"long_bad_{bad}")
    message = _error(url)
    assert f"row {bad + 1}" in message and "'g'" in message, message
    frame.to_parquet(tmp_path / "long_bad.parquet", index=False)
    assert message.replace(url, "SOURCE") == _error(tmp_path / "long_bad.parquet").replace(
        str(tmp_path / "long_bad.parquet"), "SOURCE"
    )
