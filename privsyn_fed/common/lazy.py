"""A folder's face that gives some of its names on first use.

Some modules behind a face load what a process that imports the face for its other names never
needs (CrypTen's shim and the parties' samplers, a site's client, ``cryptography``'s keys).
``lazy_names`` makes the face's ``__getattr__``: such a name is imported from its module when it is
first asked for, so importing the face costs what it did before.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_names(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``'s face: ``names`` maps each lazy name to the submodule
    (of ``package``) that defines it; any other name is an ``AttributeError`` (so ``from package
    import submodule`` still imports the submodule)."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__
