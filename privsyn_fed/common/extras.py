"""The optional parts of the installation, checked before a command that needs one starts.

``pip install privsyn-fed`` runs every method in process, drafts schemas, audits, samples and
evaluates. Secure computation needs the ``mpc`` extra (torch, onnx, omegaconf) and CrypTen, which
is installed apart with ``--no-deps`` (its metadata requires the retired ``sklearn`` package);
site agents on Flower need the ``agent`` extra; silos in DuckDB or PostgreSQL the ``engines``
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
#: The modules of the ``engines`` extra: silos in DuckDB and PostgreSQL.
ENGINE_MODULES = ("duckdb", "psycopg")
#: The module of the ``spark`` extra: silos in Spark.
SPARK_MODULES = ("pyspark",)

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


def require_mpc(what: str) -> None:
    """``InputError`` naming ``what`` (``--mpc``, ``mpc-party``) and how to install the MPC extra,
    unless torch, CrypTen and CrypTen's dependencies are installed."""
    absent = missing(MPC_MODULES)
    if absent:
        raise InputError(
            f"{what} needs the MPC extra, not installed here (no {', '.join(absent)}); install it with: {MPC_INSTALL}"
        )


def require_agent(what: str) -> None:
    """``InputError`` naming ``what`` (``--superlink``) and how to install the agent extra, unless
    Flower is installed."""
    absent = missing(AGENT_MODULES)
    if absent:
        raise InputError(
            f"{what} needs the agent extra (Flower), not installed here (no {', '.join(absent)}); install it "
            f"with: {AGENT_INSTALL}"
        )


def require_engines(what: str) -> None:
    """``InputError`` naming ``what`` (a silo's URL) and how to install the engines extra, unless
    DuckDB and psycopg are installed."""
    absent = missing(ENGINE_MODULES)
    if absent:
        raise InputError(
            f"{what} needs the engines extra, not installed here (no {', '.join(absent)}); install it with: "
            f"{ENGINES_INSTALL}"
        )


def require_spark(what: str) -> None:
    """``InputError`` naming ``what`` (a silo's URL) and how to install the spark extra, unless
    pyspark is installed (Java is checked when Spark starts)."""
    absent = missing(SPARK_MODULES)
    if absent:
        raise InputError(
            f"{what} needs the spark extra, not installed here (no {', '.join(absent)}); install it with: "
            f"{SPARK_INSTALL} (Spark also needs Java 17 or newer)"
        )
