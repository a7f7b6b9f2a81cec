"""Tables in Spark: a session, the rows' column types, and the rows as Arrow record batches.

A Spark silo is ``spark://MASTER?table=T`` or ``spark://MASTER?query=SQL`` (``engines``), where
``MASTER`` is ``local``, ``local[N]`` or ``local[*]`` (Spark in this process's machine), or
``HOST:PORT`` (a standalone cluster's master, ``spark://HOST:PORT``), and the URL's other
parameters are Spark settings (``spark.sql.warehouse.dir=...``). A Spark session already running
in the process (the caller's, or one a data frame belongs to) is used as it is, and a URL naming
another master or setting is refused; otherwise one is started with ``MASTER`` and the settings
(``spark_session``) and kept until the process ends.

The rows come back one partition at a time (``toLocalIterator``), each as Arrow record batches
serialised by Spark's own Python workers (``mapInArrow``), so the driver holds one partition and no
row passes through Python objects. Columns stored as numbers, text or booleans keep their types;
decimals are read as doubles (named ``decimal128``, as PostgreSQL's are) and any other type as its
text. Errors are ``InputError``s of one line that name the table by its URL. A Spark Connect server
(``sc://HOST:PORT?...``) is reached as a client instead (``spark_connect``); the rest is the same.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import secrets
import shutil
import socket
import sys
import tempfile
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Iterator, Protocol, Sequence

from .errors import InputError, first_line
from .interrupt import checkpoint
from .spark_connect import connect_error, connect_session, forget_frames_session, register_frames_session


class EngineTable(Protocol):
    """What Spark's functions read of ``engines.EngineTable`` (a Protocol: ``engines`` imports this module)."""

    @property
    def target(self) -> str:
        """The master: "" (the running session's, else ``local[*]``), ``local[N]`` or ``spark://HOST:PORT``."""

    @property
    def table(self) -> str | None:
        """The table's name, or None for a query."""

    @property
    def query(self) -> str | None:
        """The query, or None for a table."""

    @property
    def options(self) -> tuple[tuple[str, str], ...]:
        """The URL's Spark settings."""


#: A master as a URL names it: local mode with all, N or one core(s), or a standalone cluster's HOST:PORT.
MASTER = re.compile(r"(local(\[(\*|[1-9][0-9]*)\])?|[A-Za-z0-9.-]+:[0-9]+)?")
#: The JVM logs of the Spark sessions started by this process, the last one running.
LOGS: list[Path] = []
#: Spark's types read as they are, as Arrow names them.
SPARK_TYPES = {
    "tinyint": "int8",
    "smallint": "int16",
    "int": "int32",
    "bigint": "int64",
    "float": "float",
    "double": "double",
    "string": "string",
    "boolean": "bool",
}


def spark_master(text: str, shown: str) -> str:
    """Spark's master for a URL's ``MASTER`` ("" when empty: the running session's, else ``local[*]``);
    ``InputError`` for text that names no master."""
    if not MASTER.fullmatch(text):
        raise InputError(
            f"{shown}: {text!r} is not a Spark master; use spark://local[N]?... for Spark on this machine "
            "or spark://HOST:PORT?... for a standalone cluster"
        )
    if not text:
        return ""
    return text if text.startswith("local") else f"spark://{text}"


def spark_session(t: EngineTable) -> Any:
    """The running Spark session, or one started with ``t``'s master and settings (module docstring);
    ``InputError`` naming ``t`` where Spark cannot start (no Java, a bad setting, an unreachable master).

    A session started here runs its JVM with its output in ``spark.log`` of a private temporary
    folder (the exception it logged is told in the error), its warehouse in that folder rather than
    the current one, no web UI or progress bar and, in local mode, the driver on loopback with its
    connections authenticated (a secret Spark draws, never on a command line); the folder is
    removed when the process ends."""
    if t.target.startswith("sc:"):
        return connect_session(t, str(t))
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    if t.target and not t.target.startswith("local"):
        _reach(t)
    try:
        running = SparkSession.getActiveSession()
    except spark_errors() as exc:  # a session whose JVM is gone
        raise InputError(f"{t}: Spark stopped ({spark_error(exc)})") from None
    if running is not None:
        _check_running(t, running)
        return running
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        where = f"JAVA_HOME={home} holds no bin/java" if home else "no java on PATH"
        raise InputError(f"{t}: Spark needs Java 17 or newer, and {where}; install Java or set JAVA_HOME")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Spark's Python workers run this Python
    folder = Path(tempfile.mkdtemp(prefix="privsyn-spark-"))
    atexit.register(shutil.rmtree, folder, True)
    LOGS.append(folder / "spark.log")
    settings = {
        "spark.sql.warehouse.dir": str(folder / "warehouse"),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # a partition comes back whole (toLocalIterator): small ones keep within the driver's default heap
        "spark.sql.files.maxPartitionBytes": "32m",
    }
    if not t.target or t.target.startswith("local"):
        settings |= {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
        settings["spark.authenticate"] = "true"  # its RPC and block transfers take a secret Spark draws itself
        settings["spark.driver.memory"] = _local_memory()  # the driver is the executor: Spark's 1g is too little
    conf = (
        SparkConf().setMaster(t.target or "local[*]").setAppName("privsyn-fed").setAll([*settings.items(), *t.options])
    )
    try:
        with open(folder / "spark.log", "ab") as log:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
        session = SparkSession(SparkContext(conf=conf, gateway=gateway))
    except Exception as exc:  # Spark raises its own runtime errors and Java's, by name only
        raise InputError(f"{t}: Spark did not start ({spark_error(exc)})") from None
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):  # each error is told once, as ours
        logging.getLogger(name).setLevel(logging.CRITICAL)
    return session


def _local_memory() -> str:
    """The heap of a local Spark's JVM: a quarter of this machine's memory, from 1 to 8 GiB (the
    JVM takes it as it needs it)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{max(1024, min(8192, total // 4 // 2**20))}m"


def _check_running(t: EngineTable, running: Any) -> None:
    """``InputError`` where ``t`` names a master or a setting other than the running session's: one
    process reads through one session, and the rows of another cluster must not be read from this one."""
    master = running.sparkContext.master
    if t.target and t.target != master:
        raise InputError(
            f"{t}: this process already runs Spark with master {master}, and one process reads Spark silos "
            "through one session; give the silos of one master (or spark://?table=... for the running session)"
        )
    for key, value in t.options:
        try:
            held = running.conf.get(key)  # the setting's default where it is not set
        except spark_errors():
            held = None  # a setting Spark does not know, never set
        if held != value:
            raise InputError(f"{t}: the running Spark session has {key}={held}, not {value}")


def _reach(t: EngineTable, timeout: float = 10.0) -> None:
    """``InputError`` naming ``t`` unless its standalone master accepts a connection within
    ``timeout`` seconds (Spark itself retries for a minute before it gives up)."""
    host, _, port = t.target.removeprefix("spark://").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise InputError(f"{t}: no Spark master answers at {host}:{port} ({exc.strerror or exc})") from None


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def spark_source(t: EngineTable) -> str:
    """The rows' Spark SQL source: the quoted table (``db.table`` quoted by part), or the query."""
    if t.table is not None:
        return ".".join(_quoted(part) for part in t.table.split("."))
    return f"({t.query}) AS privsyn_fed_rows"


def spark_errors() -> tuple[type[Exception], ...]:
    """Spark's and py4j's errors, and ``OSError`` for a JVM that is gone."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JError, OSError)  # OSError: Spark's JVM gone (its log says why)


def spark_error(exc: BaseException) -> str:
    """The cause of a Spark error in one short line: the last Python exception line of a worker's
    traceback, else the first line of Spark's message (Java's stack left out); for a worker
    without pyarrow, what to set."""
    if type(exc).__module__.startswith("pyspark.errors.exceptions.connect"):
        return connect_error(exc)
    text = str(exc)
    log = LOGS[-1].read_text(errors="replace") if LOGS and LOGS[-1].exists() else ""
    thrown = re.findall(r"^(?:Caused by: )?((?:[\w$]+\.)+[\w$]+(?:Exception|Error): .+)$", log, re.MULTILINE)
    logged = thrown[-1] if thrown else None  # the last exception Spark's JVM logged
    if "OutOfMemoryError" in text + log:
        return (
            "Spark ran out of memory; give it more with &spark.driver.memory=4g in the URL (local mode: set "
            "before Spark starts), or smaller partitions with &spark.sql.files.maxPartitionBytes=8m"
        )
    if "No module named 'pyarrow'" in text:
        return (
            "Spark's Python workers cannot import pyarrow; set PYSPARK_PYTHON (or spark.pyspark.python) "
            f"to a Python that has it, such as {sys.executable}, before the Spark session starts"
        )
    raised = re.findall(r"^(?:\w+\.)*\w+(?:Error|Exception): .*$", text, re.MULTILINE)
    cause: BaseException = RuntimeError(raised[-1]) if raised and "Traceback" in text else exc
    if logged is not None and (isinstance(exc, OSError) or "An error occurred while calling" in text):
        cause = RuntimeError(logged)  # py4j says only which call failed; Spark's log says why
    return re.sub(r"\s*SQLSTATE: \w+.*$", "", first_line(cause))


def _fields(session: Any, t: EngineTable) -> list[tuple[str, str]]:
    """Each column of ``t``'s rows and its Spark type's simple name, in order."""
    try:
        schema = session.sql(f"SELECT * FROM {spark_source(t)} LIMIT 0").schema
    except spark_errors() as exc:
        raise InputError(f"{t}: Spark cannot read the rows ({spark_error(exc)})") from None
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def spark_types(t: EngineTable) -> list[tuple[str, str]]:
    """Each column of ``t``'s rows and its type as the rows come back, as Arrow names it
    (``SPARK_TYPES``; decimals ``decimal128``; any other type ``string``, read as its text), in order."""
    fields = _fields(spark_session(t), t)
    return [(name, _arrow_name(kind)) for name, kind in fields]


def _arrow_name(kind: str) -> str:
    if kind.startswith("decimal"):
        return "decimal128"
    return SPARK_TYPES.get(kind, "string")


def _column(name: str, kind: str) -> str:
    """The select expression of one column: as stored, decimals as doubles, any other type as text."""
    if kind in SPARK_TYPES:
        return _quoted(name)
    return f"CAST({_quoted(name)} AS {'DOUBLE' if kind.startswith('decimal') else 'STRING'}) AS {_quoted(name)}"


def spark_frame(t: EngineTable, columns: Sequence[str] | None = None) -> Any:
    """The Spark data frame of ``t``'s rows with ``columns`` only (all when None), each typed as
    ``spark_types`` names it (decimals cast to doubles, other types to text)."""
    session = spark_session(t)
    fields = [(n, k) for n, k in _fields(session, t) if columns is None or n in columns]
    select = ", ".join(_column(n, k) for n, k in fields)
    if not select:
        raise InputError(f"{t}: none of the columns asked for is among the rows' columns")
    try:
        return session.sql(f"SELECT {select} FROM {spark_source(t)}")
    except spark_errors() as exc:
        raise InputError(f"{t}: Spark cannot read the rows ({spark_error(exc)})") from None


def collected(frame: Any, chunk_rows: int = 100_000) -> Iterator:
    """The rows of a Spark data frame here, as Arrow record batches of at most ``chunk_rows`` rows in
    partition order: one partition at a time (``toLocalIterator``), each serialised by Spark's Python
    workers (``mapInArrow``), never row by row; a safe point between batches. Spark's errors as they are."""
    import pyarrow as pa

    def serialised(batches: Iterator) -> Iterator:
        """Each Arrow record batch of a partition as one row of one binary cell, its IPC stream;
        run by Spark's Python workers, which need only pyarrow (a nested function travels by value)."""
        import pyarrow as pa

        for batch in batches:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as writer:
                writer.write_batch(batch)
            yield pa.RecordBatch.from_arrays([pa.array([sink.getvalue().to_pybytes()], pa.binary())], names=["ipc"])

    session = frame.sparkSession
    setting = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = session.conf.get(setting, None)
    session.conf.set(setting, str(chunk_rows))
    try:
        for packed in frame.mapInArrow(serialised, "ipc binary").toLocalIterator():
            checkpoint()
            yield from pa.ipc.open_stream(packed[0]).read_all().to_batches()
    finally:
        with suppress(*spark_errors()):  # a session that failed may be gone
            if before is None:
                session.conf.unset(setting)
            else:
                session.conf.set(setting, before)


def spark_batches(t: EngineTable, chunk_rows: int, columns: Sequence[str] | None) -> Iterator:
    """``(record batch, first row)`` of ``t``'s rows with ``columns`` only (all when None), at most
    ``chunk_rows`` rows a batch, in partition order (``collected``)."""
    row = 1
    try:
        for batch in collected(spark_frame(t, columns), chunk_rows):
            yield batch, row
            row += batch.num_rows
    except spark_errors() as exc:
        raise InputError(f"{t}: Spark failed near row {row} ({spark_error(exc)})") from None


def is_spark_frame(obj: object) -> bool:
    """Whether ``obj`` is a Spark data frame (classic or Spark Connect), told without importing Spark."""
    return type(obj).__module__.startswith("pyspark.sql") and hasattr(obj, "createOrReplaceTempView")


@contextmanager
def frames_as_tables(silos: Sequence[Any]) -> Iterator[list[Any]]:
    """``silos`` with each Spark data frame replaced by the URL of a temporary view of it in its own
    session (``spark://?table=privsyn_fed_frameI_HEX``; a Spark Connect frame's: ``sc://?table=...``,
    its session registered for them), read as any Spark table; the views are dropped afterwards."""
    made, out = [], []
    try:
        for i, s in enumerate(silos):
            if is_spark_frame(s):
                connect = type(s).__module__.startswith("pyspark.sql.connect")
                if connect:
                    register_frames_session(s.sparkSession, f"silo {i + 1}")
                view = f"privsyn_fed_frame{i + 1}_{secrets.token_hex(4)}"
                s.createOrReplaceTempView(view)
                made.append((s.sparkSession, view))
                s = f"{'sc' if connect else 'spark'}://?table={view}"
            out.append(s)
        yield out
    finally:
        forget_frames_session()
        for session, view in made:
            with suppress(*spark_errors()):  # a session that failed may be gone
                session.catalog.dropTempView(view)
