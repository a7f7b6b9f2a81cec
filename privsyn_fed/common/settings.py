"""Settings read from the environment (light: the command line reads them before any heavy import)."""

from __future__ import annotations

import os

#: The source tree's version (``privsyn_fed.__version__``; the installed package's metadata states the same).
SOURCE_VERSION = "0.1.0"

#: Seconds an MPC party waits for the others by default (between commands party 0 may fit a model
#: for a while; ``--mpc-timeout``).
MPC_TIMEOUT_S = 600.0

#: A folder for JAX's persistent compilation cache (unset, empty or ``off``: no cache).
JAX_CACHE_ENV = "PRIVSYN_FED_JAX_CACHE"


#: DuckDB's memory limit for silos counted in DuckDB (``4GB``, ``500MB``; unset: DuckDB's own, 80% of memory).
DUCKDB_MEMORY_ENV = "PRIVSYN_FED_DUCKDB_MEMORY"


def duckdb_memory_setting() -> str | None:
    """The memory limit asked for in ``$PRIVSYN_FED_DUCKDB_MEMORY``, or None (DuckDB's default)."""
    return os.environ.get(DUCKDB_MEMORY_ENV, "").strip() or None


def jax_cache_setting() -> str | None:
    """The persistent compilation cache folder asked for in ``$PRIVSYN_FED_JAX_CACHE``, or None."""
    setting = os.environ.get(JAX_CACHE_ENV, "")
    return None if setting.lower() in ("", "off") else setting


def package_version() -> str:
    """The installed privsyn-fed's version (its package metadata; the source tree's when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("privsyn-fed")
    except PackageNotFoundError:
        return SOURCE_VERSION
