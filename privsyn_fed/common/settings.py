"""Settings read from the environment (light: the command line reads them before any heavy import)."""

from __future__ import annotations

import os

#: A folder for JAX's persistent compilation cache (unset, empty or ``off``: no cache).
JAX_CACHE_ENV = "PRIVSYN_FED_JAX_CACHE"


def jax_cache_setting() -> str | None:
    """The persistent compilation cache folder asked for in ``$PRIVSYN_FED_JAX_CACHE``, or None."""
    setting = os.environ.get(JAX_CACHE_ENV, "")
    return None if setting.lower() in ("", "off") else setting
