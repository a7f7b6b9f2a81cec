"""The words of provisioning bundles: organisations as certificates name them, the federation
file's bytes, and README paragraphs (``federation`` and ``federation_sites``)."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from ..common import InputError


def check_organisation(name: str, where: str) -> str:
    """An organisation as a certificate names it: printable, 1 to 64 characters."""
    name = name.strip()
    if not name or len(name) > 64 or not name.isprintable():
        raise InputError(f"{where}: the organisation must be printable text of 1 to 64 characters, not {name!r}")
    return name


def federation_text(content: dict[str, Any]) -> bytes:
    """A federation file's bytes."""
    return (json.dumps(content, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def paragraphs(*texts: str, width: int = 96) -> str:
    """Each text as a paragraph wrapped at ``width``; a text starting with a space is kept as it is."""
    return "\n\n".join(t if t.startswith(" ") else textwrap.fill(t, width) for t in texts if t) + "\n"
