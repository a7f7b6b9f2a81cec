"""Tables in MySQL or MariaDB, read with PyMySQL (the ``engines`` extra).

A MySQL silo is ``mysql://USER@HOST:PORT/DB?table=T`` or ``?query=SQL`` (``mariadb://`` too;
``engines``). Its other parameters are ``unix_socket`` (a local server's socket file, in place of
``HOST:PORT``), ``ssl_ca``, ``ssl_cert`` and ``ssl_key`` (files; with ``ssl_ca`` the server's
certificate and name are verified) and ``connect_timeout`` (seconds, 10 unless given). The password
comes from ``MYSQL_PWD`` or the ``[client]`` section of ``~/.my.cnf``, MySQL's own places, never
from the URL (``engines`` refuses one there).

The rows are read in a read-only transaction through an unbuffered cursor, ``chunk_rows`` at a
time, so this process holds one batch. Columns keep the types the server's result describes:
integers (and ``YEAR``) as 64-bit integers, ``FLOAT`` and ``DOUBLE`` as doubles, ``DECIMAL`` as
doubles (named ``decimal128``, as PostgreSQL's), text (``CHAR``, ``VARCHAR``, ``TEXT``, ``ENUM``)
as text, any other type (a date) as its text under its own name; a binary string or ``BLOB`` value
is refused, naming its row and column. Rows are numbered from 1 in the order the server returns
them (a table's: its primary key's order in InnoDB; a query's: its own).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Iterator, Protocol, Sequence
from urllib.parse import parse_qsl, unquote, urlsplit

from .errors import InputError, one_line
from .interrupt import checkpoint

#: The parameters a MySQL URL takes besides ``table`` and ``query``.
MYSQL_PARAMETERS = ("unix_socket", "ssl_ca", "ssl_cert", "ssl_key", "connect_timeout")
#: The server's type codes (``pymysql.constants.FIELD_TYPE``), as Arrow names them.
MYSQL_TYPES = {
    **dict.fromkeys((1, 2, 3, 8, 9, 13), "int64"),  # TINY, SHORT, LONG, LONGLONG, INT24, YEAR
    **dict.fromkeys((4, 5), "double"),  # FLOAT, DOUBLE
    **dict.fromkeys((0, 246), "decimal128"),  # DECIMAL, NEWDECIMAL
    **dict.fromkeys((15, 247, 248, 249, 250, 251, 252, 253, 254), "string"),  # VARCHAR, ENUM, SET, BLOB/TEXT, CHAR
    **{6: "null", 7: "timestamp", 10: "date", 11: "time", 12: "datetime", 14: "date", 16: "bit", 245: "json"},
}


#: The types PyMySQL returns as Python numbers (``int``, ``float``, ``Decimal``), never as bytes.
NUMBER_KINDS = ("int64", "double", "decimal128")


class EngineTable(Protocol):
    """What this module reads of ``engines.EngineTable`` (a Protocol: ``engines`` imports this module)."""

    @property
    def target(self) -> str:
        """The URL without ``table``/``query``."""

    @property
    def source(self) -> str:
        """The rows' SQL source: the quoted table, or the query in parentheses."""


def check_mysql_url(text: str, given: dict[str, str]) -> None:
    """``InputError`` for a MySQL URL's parameter that ``MYSQL_PARAMETERS`` lacks (a password among them)."""
    for key in given:
        if key not in MYSQL_PARAMETERS:
            raise InputError(
                f"{text}: a MySQL URL takes ?table= or ?query= and {', '.join(MYSQL_PARAMETERS)}, not ?{key}="
            )


def _connect_arguments(target: str) -> dict[str, Any]:
    """PyMySQL's arguments for a URL's ``target`` (module docstring): the password from ``MYSQL_PWD``,
    else from ``~/.my.cnf`` (PyMySQL reads its ``[client]`` section for what the URL leaves out)."""
    parts = urlsplit(target)
    given = dict(parse_qsl(parts.query, keep_blank_values=True))
    args: dict[str, Any] = {
        "user": unquote(parts.username or "") or None,
        "host": parts.hostname or "localhost",
        "database": unquote(parts.path.strip("/")) or None,
        "connect_timeout": float(given.get("connect_timeout") or 10),
        "charset": "utf8mb4",
    }
    if parts.port:
        args["port"] = parts.port
    if given.get("unix_socket"):
        args["unix_socket"] = given["unix_socket"]
    ssl = {key[4:]: given[key] for key in ("ssl_ca", "ssl_cert", "ssl_key") if given.get(key)}
    if ssl:
        args["ssl"] = {**ssl, **({"check_hostname": True} if "ca" in ssl else {})}
    if "MYSQL_PWD" in os.environ:
        args["password"] = os.environ["MYSQL_PWD"]
    elif os.path.isfile(os.path.expanduser("~/.my.cnf")):
        args["read_default_file"] = "~/.my.cnf"
    return args


@contextmanager
def mysql_cursor(t: EngineTable) -> Iterator[Any]:
    """An unbuffered cursor in a read-only transaction on ``t``'s server; ``InputError`` naming ``t``
    when it cannot connect (the server's own reason, which never holds the password)."""
    import pymysql

    try:
        con = pymysql.connect(**_connect_arguments(t.target))
    except (pymysql.Error, OSError, ValueError) as exc:
        hint = "; give the password in MYSQL_PWD or ~/.my.cnf" if "using password: NO" in str(exc) else ""
        raise InputError(f"{t}: cannot connect to MySQL ({_reason(exc)}){hint}") from None
    cur = con.cursor(pymysql.cursors.SSCursor)
    try:
        cur.execute("START TRANSACTION READ ONLY")
        yield cur
    finally:
        _abandon(cur)
        con.close()


def _abandon(cur: Any) -> None:
    """Let the rows ``cur`` left unread (a read stopped by a bad row or a signal) go with the
    connection: PyMySQL would otherwise read each of them to the end when the cursor or its result
    is closed or collected (the protocol cannot stop a result midway), and after the connection is
    closed it fails there with a traceback on stderr."""
    result = getattr(cur, "_result", None)
    if result is not None and getattr(result, "unbuffered_active", False):
        result.unbuffered_active = False
    cur.connection = None


def mysql_types(t: EngineTable) -> list[tuple[str, str]]:
    """Each column of ``t``'s rows and its type, as Arrow names it (``MYSQL_TYPES``), in order."""
    import pymysql

    with mysql_cursor(t) as cur:
        try:
            cur.execute(f"SELECT * FROM {t.source} LIMIT 0")
        except pymysql.Error as exc:
            raise InputError(f"{t}: MySQL cannot read the rows ({_reason(exc)})") from None
        return [(d[0], MYSQL_TYPES.get(d[1], f"type {d[1]}")) for d in cur.description or []]


def mysql_batches(t: EngineTable, chunk_rows: int, types: dict[str, str], names: Sequence[str]) -> Iterator:
    """``(record batch, first row)`` of ``t``'s rows with the columns ``names`` (``types``: every
    column's), at most ``chunk_rows`` rows a batch; a safe point between batches."""
    import pyarrow as pa
    import pymysql

    select = ", ".join("`" + n.replace("`", "``") + "`" for n in names) or "1"
    row = 1
    with mysql_cursor(t) as cur:
        try:
            cur.execute(f"SELECT {select} FROM {t.source}")
            while rows := cur.fetchmany(chunk_rows):
                checkpoint()
                cells = list(zip(*rows)) if names else []
                arrays = [_array(cells[i], types[n], t, n, row) for i, n in enumerate(names)]
                yield pa.RecordBatch.from_arrays(arrays, names=list(names)), row
                row += len(rows)
        except pymysql.Error as exc:
            raise InputError(f"{t}: MySQL failed near row {row} ({_reason(exc)})") from None


def _reason(exc: BaseException) -> str:
    """A server error's message and code (``Access denied ... [1045]``), else the exception's one line."""
    if len(exc.args) == 2 and isinstance(exc.args[0], int):
        return f"{one_line(Exception(exc.args[1]))} [{exc.args[0]}]"
    return one_line(exc)


def _array(values: Sequence, kind: str, t: EngineTable, name: str, first_row: int):
    """One column of a batch's values as an Arrow array of ``kind`` (module docstring)."""
    import pyarrow as pa

    if kind not in NUMBER_KINDS:  # only text-like columns (and BIT) come back as bytes
        blob = next((i for i, v in enumerate(values) if isinstance(v, (bytes, bytearray))), None)
        if blob is not None:
            where = f"{t}: row {first_row + blob}, column '{name}'"
            raise InputError(f"{where}: holds binary data (a binary string or BLOB); store it as text or as a number")
    if kind == "int64":
        try:
            return pa.array(values, pa.int64())
        except (OverflowError, pa.ArrowInvalid):  # an unsigned BIGINT past 2^63: a double, as every number is read
            return pa.array([None if v is None else float(v) for v in values], pa.float64())
    if kind in ("double", "decimal128"):
        return pa.array([None if v is None else float(v) for v in values], pa.float64())
    if kind == "string":
        return pa.array(values, pa.string())
    return pa.array([None if v is None else str(v) for v in values], pa.string())
