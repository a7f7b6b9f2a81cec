"""Shared fixtures and helpers: a small mixed schema, generated silos written as real CSV files, the
command line as tests run it, the processes of a local MPC federation (parties, dealer), and noise
that adds nothing for decisions on known counts."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.draft_dp.cells import PROFILE_CELLS

SCHEMA = {
    "columns": [
        {"name": "age", "type": "numeric", "lower": 18, "upper": 90, "bins": 8, "integer": True},
        {"name": "income", "type": "numeric", "lower": 0, "upper": 100.0, "bins": 6},
        {"name": "sex", "type": "categorical", "categories": ["F", "M"]},
        {"name": "region", "type": "categorical", "categories": ["north", "south", "east"], "missing": True},
        {"name": "label", "type": "categorical", "categories": ["no", "yes"]},
    ]
}


def make_frame(n: int, seed: int) -> pd.DataFrame:
    """Correlated toy rows: income depends on age and sex, label on income."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 91, n)
    sex = rng.choice(["F", "M"], n)
    income = np.clip(20 + 0.6 * (age - 18) + np.where(sex == "M", 10, 0) + rng.normal(0, 10, n), 0, 100)
    region = rng.choice(["north", "south", "east", ""], n, p=[0.4, 0.3, 0.2, 0.1])
    label = np.where(income + rng.normal(0, 10, n) > 55, "yes", "no")
    return pd.DataFrame({"age": age, "income": income.round(2), "sex": sex, "region": region, "label": label})


def assert_audit_objects_only_to_the_seed(ledger: dict) -> None:
    """Tests seed their noise to be reproducible; the audit must fail such a ledger for that reason
    and for no other."""
    from privsyn_fed.audit import audit_ledger

    problems = audit_ledger(ledger).problems
    assert len(problems) == 1 and problems[0].startswith("SEEDED RUN"), problems


def assert_cli_audit_objects_only_to_the_seed(stdout: str, returncode: int) -> None:
    """The same through `privsyn-fed audit`: exit 1 and one PROBLEM line, the seeded run."""
    problems = [line for line in stdout.splitlines() if line.startswith("PROBLEM")]
    assert returncode == 1 and len(problems) == 1 and "SEEDED RUN" in problems[0], stdout


# ---- the command line ---------------------------------------------------------------------------
CLI = [sys.executable, "-m", "privsyn_fed"]


class CliRun(subprocess.CompletedProcess):
    """A finished command; it also unpacks as ``code, out, err``."""

    def __iter__(self):
        return iter((self.returncode, self.stdout, self.stderr))


def run_cli(*args, capsys=None, timeout=600, **kw) -> CliRun:
    """``privsyn-fed ARGS`` with its output captured as text.

    By default in a child process, as a user runs it; other keywords (``env``, ``cwd``, ``check``)
    go to ``subprocess.run``. Given pytest's ``capsys`` it runs in this process through
    ``privsyn_fed.cli.main`` instead: faster, and what a test has patched applies. A usage error
    then raises ``SystemExit`` as ``main`` does."""
    if any(isinstance(a, (list, tuple)) for a in args):
        raise TypeError("run_cli takes the arguments one by one: run_cli(*argv)")
    argv = [str(a) for a in args]
    if capsys is None:
        proc = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=timeout, **kw)
        return CliRun(proc.args, proc.returncode, proc.stdout, proc.stderr)
    if kw:
        raise TypeError(f"run_cli in this process takes no {', '.join(sorted(kw))}")
    from privsyn_fed.cli import main

    code = main(argv)
    out, err = capsys.readouterr()
    return CliRun(argv, code, out, err)


def synth_argv(method: str = "aim", *, schema, silos, out, epsilon=1.0, delta=1e-9, seed=None, **options) -> list[str]:
    """The arguments of ``privsyn-fed synth``: ``--silo`` once per silo, then each option as
    ``--flag value`` (underscores become hyphens, True gives a bare flag, a list repeats the flag,
    False or None leaves it out). Without a seed the run is unseeded."""
    argv = ["synth", "--method", method]
    argv += _flags({"schema": schema})
    for silo in silos:
        argv += ["--silo", str(silo)]
    argv += _flags({"out": out, "epsilon": epsilon, "delta": delta, "seed": seed, **options})
    return argv


def _flags(options: dict) -> list[str]:
    argv = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            for item in value:
                argv += [flag, str(item)]
        else:
            argv += [flag, str(value)]
    return argv


def assert_one_line_error(proc_or_stderr, *fragments: str, status: int = 2) -> str:
    """An error as a user meets it: exit ``status``, exactly one non-empty line on stderr, no
    traceback (Python's, or a native library's ``frame #`` lines), and each fragment in that line,
    which is returned. Given the stderr text alone, the exit status is not checked."""
    if isinstance(proc_or_stderr, str):
        err = proc_or_stderr
    else:
        err = proc_or_stderr.stderr
        assert proc_or_stderr.returncode == status, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "frame #" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def schema_dict():
    return json.loads(json.dumps(SCHEMA))


@pytest.fixture
def schema(tmp_path) -> pf.Schema:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    return pf.Schema.load(path)


@pytest.fixture
def schema_path(tmp_path):
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    return path


@pytest.fixture
def silo_paths(tmp_path):
    paths = []
    for k, n in enumerate([400, 300, 300]):
        p = tmp_path / f"silo{k}.csv"
        make_frame(n, seed=k).to_csv(p, index=False)
        paths.append(p)
    return paths


@contextmanager
def never_opened(*paths):
    """Regular files that no other process can open unnoticed: each holds a write lease
    (``F_SETLEASE``), so a process that opens one waits (the kernel's lease-break time, 45 s by
    default) and the lease is broken. Yields a function returning the paths opened so far.
    (A FIFO nobody writes was such a witness, but every command now refuses FIFOs unopened.)"""
    previous = signal.signal(signal.SIGIO, lambda signum, frame: None)  # a lease break signals SIGIO
    leases = {}
    try:
        for path in paths:
            leases[path] = os.open(path, os.O_RDONLY)
            fcntl.fcntl(leases[path], fcntl.F_SETLEASE, fcntl.F_WRLCK)
        yield lambda: [p for p, fd in leases.items() if fcntl.fcntl(fd, fcntl.F_GETLEASE) != fcntl.F_WRLCK]
    finally:
        for fd in leases.values():
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
            os.close(fd)
        signal.signal(signal.SIGIO, previous)


def start(args, **kw) -> subprocess.Popen:
    """A process of ``args`` (each made text) with its output captured as text."""
    return subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def start_party(fed, rank: int, *args, mpc_timeout: float = 60, **kw) -> subprocess.Popen:
    """``privsyn-fed mpc-party ARGS`` as member ``rank`` of the local federation ``fed``
    (``mpc.launch.local_federation``), with ``--mpc-timeout``; ``kw`` go to ``start``."""
    return start([*CLI, "mpc-party", *map(str, args), *fed.args(rank), "--mpc-timeout", str(mpc_timeout)], **kw)


def start_dealer(fed, rank: int, mpc_timeout: float = 60, **kw) -> subprocess.Popen:
    """``privsyn-fed mpc-dealer`` as member ``rank`` (the last) of the local federation ``fed``."""
    return start([*CLI, "mpc-dealer", *fed.args(rank), "--mpc-timeout", str(mpc_timeout)], **kw)


@contextmanager
def killed_at_exit(procs):
    """Yields ``procs`` (processes, or a dict of them); any still running on the way out is killed."""
    try:
        yield procs
    finally:
        for p in procs.values() if isinstance(procs, dict) else procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def finish(procs: dict, timeout: float = 120) -> dict:
    """Every process's ``(stdout, stderr)`` by name, once it ends; any still running after
    ``timeout`` (or when one raises) is killed."""
    with killed_at_exit(procs):
        return {name: p.communicate(timeout=timeout) for name, p in procs.items()}


def synth(schema_path, silos, out, method="fedtda", seed=3, **options):
    """A quiet, seeded ``synth`` command line (``synth_argv``): fedtda unless another method is named."""
    return synth_argv(method, schema=schema_path, silos=silos, out=out, quiet=True, seed=seed, **options)


def snapshot(folder):
    """Every regular file below ``folder`` with its bytes, to compare before and after a command."""
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


def parquet_table(path, names):
    """A Parquet file of 300 rows, a column of ages and one of letters, under ``names`` (which may repeat)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    columns = [pa.array(rng.integers(17, 90, 300)), pa.array(rng.choice(["a", "b"], 300))]
    pq.write_table(pa.Table.from_arrays(columns, names=names), path)
    return path


def mode(path) -> int:
    """The permission bits of ``path``."""
    return stat.S_IMODE(os.stat(path).st_mode)


@contextmanager
def umask(mask: int):
    """Runs its block under the process umask ``mask``."""
    before = os.umask(mask)
    try:
        yield
    finally:
        os.umask(before)


class ExactNoise:
    """No noise at all, for decisions on known counts (with ``below_zero``, the profile's missing and
    non-integer counts far below zero): every mechanism is still charged. Not private; tests only."""

    name = "exact (tests only)"
    seeded = True

    def __init__(self, below_zero: bool = False):
        self.below_zero, self.calls = below_zero, 0

    def gaussian_counts(self, counts, sigma):
        self.calls += 1
        out = np.asarray(counts, dtype=np.int64).copy()
        if self.below_zero and self.calls == 1:
            w = len(PROFILE_CELLS)  # per column: missing, non-number, 1..6 and more decimal places, distinct
            out[1::w] -= 1000  # missing, per column
            for cell in range(2, w - 1):
                out[1 + cell :: w] -= 1000  # numbers with decimal places (non-integer), per column
        return out

    def gaussian_reals(self, values, sigma):
        return np.asarray(values, dtype=float)

    def noisy_argmax(self, scores, scale):
        return int(np.argmax(scores))


@pytest.fixture
def coarse_table(tmp_path):
    """600 rows where epsilon 3 finds 'n' and 'ok' but not 'k' (one value) nor 'flag' (one category),
    whatever the noise (every margin is more than five standard deviations)."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(
        {
            "n": rng.integers(10, 20, 600),
            "k": [7.5] * 598 + [8.5] * 2,  # not whole numbers: numeric (a code would be categorical)
            "flag": ["a"] * 598 + ["b"] * 2,
            "ok": rng.choice(["x", "y", "z"], 600),
        }
    )
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    return path


# ---- PostgreSQL: a server of the tests' own ---------------------------------------------------------
PG_BIN = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))


class Postgres:
    """A running test server: its Unix socket folder, port, user and password (SCRAM), and a URL
    for a silo in it (the password never in the URL: ``PGPASSWORD`` gives it)."""

    def __init__(self, socket: Path, port: int, user: str, password: str):
        self.socket, self.port, self.user, self.password = socket, port, user, password

    def connect(self):
        """A connection of the tests' own (autocommit), to load tables."""
        import psycopg

        return psycopg.connect(
            host=str(self.socket),
            port=self.port,
            user=self.user,
            password=self.password,
            dbname="postgres",
            autocommit=True,
        )

    def url(self, table: str | None = None, query: str | None = None) -> str:
        """``postgresql://USER@/postgres?host=SOCKET&port=PORT&table=T`` (or ``query=``)."""
        from urllib.parse import quote

        rows = f"table={quote(table)}" if table is not None else f"query={quote(str(query))}"
        return f"postgresql://{self.user}@/postgres?host={quote(str(self.socket))}&port={self.port}&{rows}"


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server started for the tests: Unix socket only (no TCP port), password
    authentication (SCRAM), run as the unprivileged user 65534 where the tests run as root (the
    server refuses root); stopped and removed afterwards. Skipped, with one line, where it cannot
    start."""
    import secrets
    import shutil
    import tempfile

    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'privsyn-fed[engines]')")
    if not PG_BIN:
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)")
    bin_ = PG_BIN[-1].parent
    root = Path(tempfile.mkdtemp(prefix="privsyn-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv, and PostgreSQL refuses to run as root")
        os.chown(root, 65534, 65534)
        as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    password = secrets.token_hex(12)
    (root / "pw").write_text(password)
    os.chown(root / "pw", 65534, 65534) if as_user else None
    data, port = root / "data", 55400 + os.getpid() % 500

    def run(*cmd):
        return subprocess.run([*as_user, *map(str, cmd)], capture_output=True, text=True, timeout=60)

    made = run(
        bin_ / "initdb", "-D", data, "--no-sync", "-A", "scram-sha-256", "-U", "privsyn", "--pwfile", root / "pw"
    )
    if made.returncode:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"initdb failed: {(made.stderr.strip().splitlines() or ['?'])[-1]}")
    options = f"-k {root} -c listen_addresses='' -p {port} -c fsync=off"
    started = run(bin_ / "pg_ctl", "-D", data, "-o", options, "-l", root / "log", "-w", "start")
    if started.returncode:
        log = (root / "log").read_text()[-200:] if (root / "log").exists() else started.stderr
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"PostgreSQL did not start: {' '.join(log.split())}")
    try:
        yield Postgres(root, port, "privsyn", password)
    finally:
        run(bin_ / "pg_ctl", "-D", data, "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)


# ---- MySQL (MariaDB): a server of the tests' own -----------------------------------------------------
class MySQL:
    """A running test server: its socket file, a database ``privsyn``, a user with SELECT on it and
    its password (given through ``MYSQL_PWD`` or ``~/.my.cnf``, never the URL)."""

    def __init__(self, socket: Path, user: str, password: str):
        self.socket, self.user, self.password = socket, user, password

    def connect(self):
        """A connection of the tests' own (the server's root, autocommit), to load tables."""
        import pymysql

        return pymysql.connect(
            unix_socket=str(self.socket), user="root", database="privsyn", autocommit=True, charset="utf8mb4"
        )

    def url(self, table: str | None = None, query: str | None = None) -> str:
        """``mysql://USER@localhost/privsyn?unix_socket=SOCKET&table=T`` (or ``query=``)."""
        from urllib.parse import quote

        rows = f"table={quote(table)}" if table is not None else f"query={quote(str(query))}"
        return f"mysql://{self.user}@localhost/privsyn?unix_socket={quote(str(self.socket))}&{rows}"


@pytest.fixture(scope="session")
def mysql():
    """A MariaDB server (MySQL's protocol) started for the tests: a socket file only (no TCP port),
    a user with a password and SELECT on one database; stopped and removed afterwards. Skipped,
    with one line, where it cannot start."""
    import secrets
    import shutil
    import tempfile
    import time

    pymysql = pytest.importorskip("pymysql", reason="PyMySQL is not installed (pip install 'privsyn-fed[engines]')")
    server = shutil.which("mariadbd", path="/usr/sbin:/usr/bin") or shutil.which("mysqld", path="/usr/sbin:/usr/bin")
    install = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
    if server is None or install is None:
        pytest.skip("no MariaDB or MySQL server binaries (apt-get install mariadb-server)")
    root = Path(tempfile.mkdtemp(prefix="privsyn-my-"))
    user = ["--user=root"] if os.geteuid() == 0 else []
    made = subprocess.run(
        [install, "--no-defaults", f"--datadir={root / 'data'}", "--auth-root-authentication-method=normal",
         "--skip-test-db", *user],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if made.returncode:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"{Path(install).name} failed: {(made.stderr.strip().splitlines() or ['?'])[-1]}")
    socket = root / "sock"
    proc = subprocess.Popen(
        [server, "--no-defaults", f"--datadir={root / 'data'}", f"--socket={socket}", "--skip-networking",
         f"--pid-file={root / 'pid'}", f"--log-error={root / 'log'}", "--innodb-buffer-pool-size=32M",
         "--skip-log-bin", *user],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    password = secrets.token_hex(12)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                con = pymysql.connect(unix_socket=str(socket), user="root", autocommit=True)
                break
            except pymysql.Error:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = (root / "log").read_text()[-200:] if (root / "log").exists() else "no log"
                    pytest.skip(f"MariaDB did not start: {' '.join(log.split())}")
                time.sleep(0.2)
        with con.cursor() as cur:
            cur.execute("CREATE DATABASE privsyn CHARACTER SET utf8mb4")
            cur.execute(f"CREATE USER 'analyst'@'localhost' IDENTIFIED BY '{password}'")
            cur.execute("GRANT SELECT ON privsyn.* TO 'analyst'@'localhost'")
        con.close()
        yield MySQL(socket, "analyst", password)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)


# ---- Spark Connect: a server of the tests' own --------------------------------------------------------
CONNECT_SERVER = """
import sys
from pyspark.sql import SparkSession

port, token = sys.argv[1], sys.argv[2]
session = (
    SparkSession.builder.master("local[2]").appName("privsyn-fed tests: Spark Connect")
    .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
    .config("spark.connect.grpc.binding.address", "127.0.0.1").config("spark.connect.grpc.binding.port", port)
    .config("spark.connect.authenticate.token", token)
    .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    .getOrCreate()
)
print("ready", flush=True)
sys.stdin.read()  # until the tests close it
session.stop()
"""


class SparkConnect:
    """A running Spark Connect server: its ``host:port`` and the token it asks for."""

    def __init__(self, address: str, token: str):
        self.address, self.token = address, token

    def url(self, table: str | None = None, query: str | None = None) -> str:
        """``sc://HOST:PORT?table=T`` (or ``query=``), the token not in it."""
        from urllib.parse import quote

        rows = f"table={quote(table)}" if table is not None else f"query={quote(str(query))}"
        return f"sc://{self.address}?{rows}"


def start_connect_server(folder: Path) -> tuple[subprocess.Popen, SparkConnect]:
    """A Spark Connect server (local Spark with the Connect plugin, two cores) in a process of its
    own, on a free loopback port, asking for a random token; it stops when its stdin is closed.
    Skips, with one line, where pyspark's Connect modules or Java are missing or it does not start."""
    import secrets
    import shutil
    import socket
    import time

    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'privsyn-fed[spark]')")
    pytest.importorskip(
        "grpc_status", reason="Spark Connect's client is not installed (pip install 'privsyn-fed[spark]')"
    )
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        pytest.skip("no Java on PATH (Spark needs Java 17 or newer)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = secrets.token_hex(16)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    with open(folder / "server.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", CONNECT_SERVER, str(port), token],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=folder,
        )  # fmt: skip
    ready = proc.stdout.readline().strip() if proc.stdout else ""
    if ready != "ready":
        stop_connect_server(proc)
        tail = " ".join((folder / "server.log").read_text()[-300:].split())
        pytest.skip(f"the Spark Connect server did not start: {tail}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.2)
    return proc, SparkConnect(f"localhost:{port}", token)


def stop_connect_server(proc: subprocess.Popen) -> None:
    """Stop a server of ``start_connect_server``: its stdin closed, killed after 60 s."""
    if proc.stdin:
        proc.stdin.close()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory):
    """A Spark Connect server for the tests (``start_connect_server``), stopped afterwards."""
    proc, server = start_connect_server(tmp_path_factory.mktemp("spark-connect"))
    try:
        yield server
    finally:
        stop_connect_server(proc)


@pytest.fixture(scope="session")
def spark():
    """Spark in local mode (two cores) in this process, started as a Spark silo starts it
    (``common.spark.spark_session``: its JVM's output in a private folder, the driver on loopback);
    stopped afterwards. Skipped, with one line, where pyspark or Java is missing."""
    import shutil

    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'privsyn-fed[spark]')")
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        pytest.skip("no Java on PATH (Spark needs Java 17 or newer)")
    from privsyn_fed.common.engines import parse_engine_url
    from privsyn_fed.common.spark import spark_session

    session = spark_session(parse_engine_url("spark://local[2]?query=SELECT 1"))
    try:
        yield session
    finally:
        session.stop()
