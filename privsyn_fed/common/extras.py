"""The optional parts of the installation, checked before a command that needs one starts.

``pip install privsyn-fed`` runs every method in process, drafts schemas, audits, samples and
evaluates. Secure computation needs the ``mpc`` extra (torch, onnx, omegaconf) and CrypTen, which
is installed apart with ``--no-deps`` (its metadata requires the retired ``sklearn`` package);
site agents on Flower need the ``agent`` extra; silos in DuckDB, PostgreSQL or MySQL the ``engines``
extra, silos in Spark the ``spark`` extra (and Java). ``require_mpc``, ``require_agent``,
``require_engines`` and ``require_spark`` look the modules up without importing them and raise
``InputError`` with the command that installs them.
"""

from __future__ import annotations

import importlib.util

from .errors import InputError

#: torch and CrypTen, and CrypTen's dependencies of the ``mpc`` extra (it imports them).
MPC_MODULES = ("torch", "crypten", "onnx", "omegaconf")
#: The module of the ``agent`` extra.
AGENT_MODULES = ("flwr",)
#: The modules of the ``engines`` extra: silos in DuckDB, PostgreSQL and MySQL.
ENGINE_MODULES = ("duckdb", "psycopg", "adbc_driver_postgresql", "pymysql")
#: The module of the ``spark`` extra: silos in Spark.
SPARK_MODULES = ("pyspark",)
#: The modules Spark Connect's client needs besides pyspark (the ``spark`` extra's ``pyspark[connect]``).
CONNECT_MODULES = ("grpc", "grpc_status")

MPC_INSTALL = (
    "pip install 'privsyn-fed[mpc]' && pip install --no-deps crypten==0.4.1 "
    "(--no-deps: CrypTen's metadata requires the retired sklearn package)"
)
AGENT_INSTALL = "pip install 'privsyn-fed[agent]'"
ENGINES_INSTALL = "pip install 'privsyn-fed[engines]'"
SPARK_INSTALL = "pip install 'privsyn-fed[spark]'"


def missing(modules: tuple[str, ...]) -> list[str]:
    """Those of ``modules`` (top-level names) that cannot be found; none of them is imported."""
    absent = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a finder that refuses it; a module without a spec
            found = False
        if not found:
            absent.append(name)
    return absent


def _require(what: str, extra: str, modules: tuple[str, ...], install: str) -> None:
    """``InputError`` naming ``what`` and the ``extra`` it needs, with ``install`` (the command that
    installs it), unless every one of ``modules`` is installed."""
    absent = missing(modules)
    if absent:
        raise InputError(
            f"{what} needs the {extra}, not installed here (no {', '.join(absent)}); install it with: {install}"
        )


def require_mpc(what: str) -> None:
    """``_require`` for ``--mpc``, ``mpc-party``: torch, CrypTen and CrypTen's dependencies."""
    _require(what, "MPC extra", MPC_MODULES, MPC_INSTALL)


def require_agent(what: str) -> None:
    """``_require`` for ``--superlink``: Flower."""
    _require(what, "agent extra (Flower)", AGENT_MODULES, AGENT_INSTALL)


def require_engines(what: str) -> None:
    """``_require`` for a silo's DuckDB, PostgreSQL or MySQL URL: DuckDB, psycopg, ADBC's PostgreSQL
    driver and PyMySQL."""
    _require(what, "engines extra", ENGINE_MODULES, ENGINES_INSTALL)


def require_spark(what: str, connect: bool = False) -> None:
    """``_require`` for a silo's Spark URL: pyspark (Java is checked when Spark starts); for Spark
    Connect (``connect``) also its gRPC modules, and no Java."""
    if connect:
        _require(what, "spark extra", SPARK_MODULES + CONNECT_MODULES, SPARK_INSTALL)
    else:
        _require(what, "spark extra", SPARK_MODULES, f"{SPARK_INSTALL} (Spark also needs Java 17 or newer)")
