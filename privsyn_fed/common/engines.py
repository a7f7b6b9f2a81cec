"""Tables that live in an engine: a DuckDB or SQLite database, a PostgreSQL or MySQL server or Spark,
named by URL.

* ``duckdb://PATH?table=T`` or ``duckdb://PATH?query=SQL``: the database file at ``PATH`` (what
  follows ``duckdb://``, so ``duckdb:///data/x.duckdb`` is absolute and ``duckdb://x.duckdb``
  relative), opened read-only; with no ``PATH`` (``duckdb://?query=...``) an empty in-memory
  database, for a query over files DuckDB reads itself (``read_parquet('...')``).
* ``sqlite://PATH?table=T`` or ``sqlite://PATH?query=SQL``: the SQLite database file at ``PATH``
  (named as DuckDB's is), opened read-only with Python's own ``sqlite3`` (``sqlite``); its values
  are typed one by one, so its cells are checked as a CSV's are.
* ``postgresql://USER@HOST:PORT/DB?table=T`` (or ``?query=SQL``; ``postgres://`` too): libpq's own
  URI, every parameter of it passed on (``host=/socket/folder``, ``sslmode``, ...), in a read-only
  transaction. The password comes from ``PGPASSWORD`` or ``~/.pgpass`` (libpq reads them); one in
  the URL is refused, so it never reaches a process list, a ledger, a log or a message.
* ``mysql://USER@HOST:PORT/DB?table=T`` (or ``?query=SQL``; ``mariadb://`` too): a MySQL or MariaDB
  server, read with PyMySQL in a read-only transaction (``mysql``: its parameters, types and
  password, which comes from ``MYSQL_PWD`` or ``~/.my.cnf`` and is refused in the URL).
* ``spark://MASTER?table=T`` (or ``?query=SQL``): a table or query of Spark SQL, ``MASTER`` being
  ``local[N]`` or a standalone cluster's ``HOST:PORT``, the other parameters Spark settings
  (``spark``; a setting named like a secret is refused, as a password is); ``sc://HOST:PORT?...``
  the same through a Spark Connect server (``spark_connect``; its token from
  ``SPARK_CONNECT_AUTHENTICATE_TOKEN``, refused in the URL).

``T`` may be ``schema.table`` (MySQL: ``database.table``); each part is quoted. Rows come back as
Arrow record batches of typed cells, as a Parquet file's do (SQLite's: typed value by value),
numbered from 1 in the order the engine returns them: a table's stored order (DuckDB keeps
insertion order; PostgreSQL's synchronised scans are turned off so that two reads see the same
order), a query's own order. Failures are ``InputError``s of one line that name the table by its
URL, which holds no password.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from .errors import InputError, one_line
from .extras import require_engines, require_spark
from .interrupt import checkpoint
from .mysql import check_mysql_url, mysql_batches, mysql_types
from .paths import Named
from .pg_arrow import arrow_readable, driver_errors, pg_batches, with_connect_timeout
from .spark import spark_batches, spark_master, spark_source, spark_types
from .spark_connect import connect_target
from .sqlite import sqlite_batches, sqlite_names

#: URL schemes of engine tables, by engine.
SCHEMES = {
    "duckdb": "duckdb",
    "sqlite": "sqlite",
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
    "spark": "spark",
    "sc": "spark",  # Spark Connect
}
#: Words that mark a Spark setting as a secret, refused in a URL.
SECRET_WORDS = ("password", "secret", "token", "credential")
#: PostgreSQL types read as numbers, as Arrow names them (the others are read as text).
PG_NUMBERS = {"int2": "int16", "int4": "int32", "int8": "int64", "float4": "float", "float8": "double"}
PG_TEXT = {"text": "string", "varchar": "string", "bpchar": "string", "name": "string", "bool": "bool"}
#: SQLite's columns' type: none, each value has its own (``sqlite``); the cells are checked as a CSV's.
SQLITE_TYPE = "any"


def is_engine_url(text: object) -> bool:
    """Whether ``text`` names an engine's table (a ``duckdb:``, ``sqlite:``, ``postgresql:``, ``mysql:``
    or ``spark:`` URL), not a file."""
    return isinstance(text, str) and text.split(":", 1)[0].lower() in SCHEMES and "://" in text


@dataclass(frozen=True)
class EngineTable:
    """A table or query in an engine (module docstring). ``shown`` is its URL as given (no password)."""

    engine: str
    target: str  # DuckDB, SQLite: the file ("" in memory); PostgreSQL, MySQL: the URL's server part; Spark: the master
    table: str | None
    query: str | None
    shown: str
    options: tuple[tuple[str, str], ...] = ()  # Spark's settings

    def __str__(self) -> str:
        return self.shown

    @property
    def source(self) -> str:
        """The rows' SQL source: the quoted table, or the query in parentheses."""
        if self.engine == "spark":
            return spark_source(self)
        mark = "`" if self.engine == "mysql" else '"'  # MySQL reads "..." as text
        if self.table is not None:
            return ".".join(mark + part.replace(mark, mark * 2) + mark for part in self.table.split("."))
        return f"({self.query}) AS privsyn_fed_rows"

    @property
    def name(self) -> str:
        """A silo's default name: the table's (without its schema), else the database's."""
        if self.table is not None:
            return self.table.rsplit(".", 1)[-1]
        if self.engine in ("duckdb", "sqlite"):
            return os.path.basename(self.target).rsplit(".", 1)[0] or self.engine
        if self.engine == "spark":
            return "spark"
        return urlsplit(self.target).path.strip("/") or self.engine


def parse_engine_url(text: str) -> EngineTable:
    """The ``EngineTable`` a URL names; ``InputError`` of one line for a URL without exactly one of
    ``table``/``query``, with a parameter DuckDB or SQLite does not take, or with a password."""
    scheme, _, rest = text.partition("://")
    engine = SCHEMES[scheme.lower()]
    base, _, params = rest.partition("?")
    pairs = [(unquote(k), unquote(v)) for k, _, v in (p.partition("=") for p in params.split("&") if p)]
    given = dict(pairs)
    table, query = given.pop("table", None), given.pop("query", None)
    if (table is None) == (query is None) or not (table or query):
        raise InputError(f"{text}: name the rows with exactly one of ?table=NAME or ?query=SQL")
    if scheme.lower() == "sc":
        return EngineTable("spark", connect_target(text, unquote(base), given), table, query, text)
    if engine == "spark":
        return _spark_table(text, unquote(base), table, query, given)
    if engine in ("duckdb", "sqlite"):
        shown = {"duckdb": "DuckDB", "sqlite": "SQLite"}[engine]
        if given:
            raise InputError(f"{text}: a {shown} URL takes only ?table= or ?query=, not ?{next(iter(given))}=")
        if not base and (table is not None or engine == "sqlite"):
            raise InputError(f"{text}: name a database file ({engine}://PATH?table=NAME)")
        return EngineTable(engine, unquote(base), table, query, text)
    parts = urlsplit(f"{scheme}://{base}")
    if parts.password is not None or "password" in given:
        places = "MYSQL_PWD or ~/.my.cnf" if engine == "mysql" else "PGPASSWORD or ~/.pgpass"
        raise InputError(
            f"{_without_password(text)}: the URL holds a password; put it in {places} instead "
            "(a URL shows in process lists and shell histories)"
        )
    if engine == "mysql":
        check_mysql_url(_without_password(text), given)
    target = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(list(given.items()), quote_via=quote), ""))
    return EngineTable(engine, target, table, query, text)


def _spark_table(text: str, master: str, table: str | None, query: str | None, given: dict) -> EngineTable:
    """A Spark URL's table: its master checked, every other parameter a Spark setting (``spark.``),
    none named like a secret."""
    for key in given:
        if not key.startswith("spark."):
            raise InputError(f"{text}: a Spark URL takes ?table=, ?query= and Spark settings (spark.*), not ?{key}=")
        if any(word in key.lower() for word in SECRET_WORDS):
            raise InputError(
                f"{text.split('?', 1)[0]}?...: the URL holds the secret setting {key}; put it in Spark's own "
                "configuration (spark-defaults.conf under SPARK_CONF_DIR) or the environment instead"
            )
    return EngineTable("spark", spark_master(master, text), table, query, text, tuple(given.items()))


def _without_password(text: str) -> str:
    """``text`` with the password of its user part and of a ``password=`` parameter masked."""
    scheme, _, rest = text.partition("://")
    base, _, params = rest.partition("?")
    netloc, slash, path = base.partition("/")
    user_part, at, host = netloc.rpartition("@")  # the last @ ends the user part, as urlsplit reads it
    if at and ":" in user_part:
        base = user_part.split(":", 1)[0] + ":***@" + host + slash + path
    pairs = parse_qsl(params, keep_blank_values=True)
    masked = "&".join(f"{k}={'***' if k == 'password' else quote(v)}" for k, v in pairs)
    return f"{scheme}://{base}" + (f"?{masked}" if masked else "")


@contextmanager
def _connection(t: EngineTable) -> Iterator[Any]:
    """A read-only connection to ``t``'s engine; ``InputError`` naming ``t`` when it cannot be opened."""
    require_engines(f"silo {t}")
    if t.engine == "duckdb":
        import duckdb

        if t.target and not os.path.isfile(t.target):
            raise InputError(f"{t}: no DuckDB database file {t.target!r}")
        try:
            con = duckdb.connect(t.target or ":memory:", read_only=bool(t.target))
        except duckdb.Error as exc:
            raise InputError(f"{t}: cannot open the DuckDB database ({one_line(exc)})") from None
        try:
            yield con
        finally:
            con.close()
        return
    import psycopg

    try:
        pg: Any = psycopg.connect(with_connect_timeout(t.target))
    except psycopg.Error as exc:
        raise InputError(f"{t}: cannot connect to PostgreSQL ({one_line(exc)})") from None
    try:
        pg.read_only = True
        pg.execute("SET synchronize_seqscans = off")
        yield pg
    finally:
        pg.close()


def _engine_errors(t: EngineTable) -> tuple[type[Exception], ...]:
    """The engine's error types, for ``except`` clauses that turn them into ``InputError``s."""
    if t.engine == "duckdb":
        import duckdb

        return (duckdb.Error,)
    import psycopg
    import pyarrow as pa

    return (psycopg.Error, pa.ArrowInvalid, *driver_errors())  # ADBC's driver and Arrow read the rows (``pg_arrow``)


def engine_types(t: EngineTable) -> dict[str, str]:
    """Each column of ``t``'s rows and its type, as Arrow names it (``int64``, ``double``,
    ``string``, ...; a PostgreSQL type not read as a number or text keeps its own name; SQLite's
    ``SQLITE_TYPE``), in order; ``InputError`` for a column named twice or a table or query the
    engine refuses."""
    if t.engine == "spark":
        return _distinct(t, spark_types(t))
    if t.engine == "sqlite":
        return _distinct(t, [(name, SQLITE_TYPE) for name in sqlite_names(t)])
    if t.engine == "mysql":
        return _distinct(t, mysql_types(t))
    with _connection(t) as con:
        try:
            if t.engine == "duckdb":
                schema = con.sql(f"SELECT * FROM {t.source} LIMIT 0").to_arrow_table().schema
                fields = [(f.name, str(f.type)) for f in schema]
            else:
                cur = con.execute(f"SELECT * FROM {t.source} LIMIT 0")
                fields = [(d.name, _pg_type(con, d.type_code)) for d in cur.description or []]
        except _engine_errors(t) as exc:
            raise InputError(f"{t}: the engine cannot read the rows ({one_line(exc)})") from None
    return _distinct(t, fields)


def _distinct(t: EngineTable, fields: list[tuple[str, str]]) -> dict[str, str]:
    """``fields`` as a dict; ``InputError`` naming a column that appears twice."""
    names = [n for n, _ in fields]
    repeated = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if repeated is not None:
        raise InputError(f"{t}: column '{repeated}' appears twice")
    return dict(fields)


def _pg_type(con, oid: int) -> str:
    info = con.adapters.types.get(oid)
    name = info.name if info is not None else str(oid)
    if name == "numeric":
        return "decimal128"
    return PG_NUMBERS.get(name, PG_TEXT.get(name, name))


def engine_batches(t: EngineTable, chunk_rows: int, columns: Sequence[str] | None = None) -> Iterator:
    """``(record batch, first row)`` of ``t``'s rows, about ``chunk_rows`` rows at a time, with
    ``columns`` only (all when None), in the rows' own column order; a safe point between batches."""
    if t.engine == "spark":
        engine_types(t)  # a column named twice is refused first, as from the other engines
        yield from spark_batches(t, chunk_rows, columns)
        return
    types = engine_types(t)
    names = [n for n in types if columns is None or n in columns]
    if t.engine == "sqlite":
        yield from sqlite_batches(t, chunk_rows, names)
        return
    if t.engine == "mysql":
        yield from mysql_batches(t, chunk_rows, types, names)
        return
    select = ", ".join('"' + n.replace('"', '""') + '"' for n in names) or "1"
    sql = f"SELECT {select} FROM {t.source}"
    kinds = [types[n] for n in names]
    if t.engine == "postgresql" and arrow_readable(kinds):  # the server failing mid-way: the stream's OSError
        yield from _numbered(t, pg_batches(t.target, sql, names, kinds, chunk_rows), (*_engine_errors(t), OSError))
        return
    with _connection(t) as con:
        batches = _duckdb_batches if t.engine == "duckdb" else _cursor_batches
        yield from _numbered(t, batches(con, sql, names, types, chunk_rows), _engine_errors(t))


def _numbered(t: EngineTable, batches: Iterator, errors: tuple[type[Exception], ...]) -> Iterator:
    """``(batch, first row)`` of ``batches``, a safe point before each; the engine's ``errors`` as
    one ``InputError`` naming ``t`` and the row reached."""
    row = 1
    try:
        for batch in batches:
            checkpoint()
            yield batch, row
            row += batch.num_rows
    except errors as exc:
        raise InputError(f"{t}: the engine failed near row {row} ({one_line(exc)})") from None


def _duckdb_batches(con: Any, sql: str, names: list[str], types: dict[str, str], chunk_rows: int) -> Iterator:
    """Record batches of ``sql``'s rows from DuckDB, about ``chunk_rows`` at a time (run when first asked)."""
    import pyarrow as pa

    for batch in con.sql(sql).to_arrow_reader(chunk_rows):
        yield pa.RecordBatch.from_arrays(batch.columns, names=names)


def _cursor_batches(con: Any, sql: str, names: list[str], types: dict[str, str], chunk_rows: int) -> Iterator:
    """Record batches of ``sql``'s rows through a server-side psycopg cursor, ``chunk_rows`` at a
    time (columns of types ADBC's driver does not read)."""
    import pyarrow as pa

    with con.cursor(name="privsyn_fed_rows") as cur:
        cur.itersize = chunk_rows
        cur.execute(sql)
        while rows := cur.fetchmany(chunk_rows):
            cells = list(zip(*rows))
            arrays = [_pg_array(cells[i], types[n]) for i, n in enumerate(names)]
            yield pa.RecordBatch.from_arrays(arrays, names=names)


def _pg_array(values: Sequence, kind: str):
    """One column of PostgreSQL cells as an Arrow array of ``kind`` (numeric as doubles; any type not
    read as a number or text as its text)."""
    import pyarrow as pa

    if kind == "decimal128":
        return pa.array([None if v is None else float(v) for v in values], pa.float64())
    if kind in ("int16", "int32", "int64", "float", "double", "bool", "string"):
        return pa.array(values, {"float": pa.float32(), "bool": pa.bool_(), "string": pa.string()}.get(kind, kind))
    return pa.array([None if v is None else str(v) for v in values], pa.string())


def check_engine_url(text: str) -> EngineTable:
    """The table ``text`` names, its URL checked and its engine's extra installed (``InputError``
    otherwise); nothing is opened."""
    t = parse_engine_url(text)
    if t.engine == "spark":
        require_spark(f"silo {t}", connect=t.target.startswith("sc:"))
    elif t.engine != "sqlite":  # Python's own sqlite3 reads SQLite
        require_engines(f"silo {t}")
    return t


def named_files(given: Iterable[tuple[str, str | Path]]) -> list[Named]:
    """The files among ``(option, value)`` pairs as ``Named`` inputs; an engine's URL among them is
    checked (``check_engine_url``) and left out, since it names no file, and refused when given twice
    (its rows would count twice while the ledger charges once; files are compared by ``check_distinct``)."""
    files, urls = [], set()
    for option, value in given:
        if is_engine_url(value):
            check_engine_url(str(value))
            if value in urls:
                raise InputError(f"{value}: given twice as {option}; give each silo once")
            urls.add(value)
        else:
            files.append(Named(option, Path(value)))
    return files


def beside(silo: str | Path, suffix: str) -> Path:
    """A path named after a silo with ``suffix`` added (``north.csv.ledgers``): beside its file; for
    an engine's table beside its DuckDB or SQLite file, or in the current folder named after the table."""
    if is_engine_url(silo):
        t = parse_engine_url(str(silo))
        p = Path(t.target if t.engine in ("duckdb", "sqlite") and t.target else t.name)
    else:
        p = Path(silo)
    return p.with_name(p.name + suffix)


def table_source(text: str | Path) -> str | Path:
    """A table as the readers take it: an engine's URL as it stands, a file's name as a ``Path``."""
    return str(text) if is_engine_url(text) else Path(text)
