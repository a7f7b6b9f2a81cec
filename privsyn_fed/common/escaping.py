"""Text from inputs (column names, categories, paths, a ledger's fields) as each output format shows
it: one function per format, used by every writer of that format.

  * ``terminal_text``: for stderr and stdout. Control characters (C0, DEL, C1, the line and
    paragraph separators and the bidirectional overrides) are shown escaped, as Python's ``repr``
    writes them (``\\x1b``, ``\\n``, ``\\u202e``), so no name can move the cursor, recolour or clear
    the terminal, or forge a line of its own.
  * ``markdown_text``: for one Markdown table cell, list item or heading. The control characters as
    ``terminal_text`` shows them, then every character that Markdown or the HTML inside it reads
    escaped (``|`` and the emphasis, code, link and heading marks with a backslash; ``<``, ``>`` and
    ``&`` as entities), so the text stays inside its cell and renders as written.
  * HTML is written with ``html.escape``.
"""

from __future__ import annotations

import re

#: Characters shown escaped on a terminal beyond Unicode's "Cc" (controls): line and paragraph
#: separators and the bidirectional embeddings, overrides and isolates.
_INVISIBLE = "\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f" + _INVISIBLE + "]")


def terminal_text(value: object, keep: str = "") -> str:
    """``str(value)`` with every control character but those in ``keep`` (say ``"\\n"`` for text of
    several lines) shown escaped (``\\x1b``, ``\\r``, ``\\u202e``)."""
    text = str(value)
    return _CONTROLS.sub(lambda m: m.group() if m.group() in keep else _escaped(m.group()), text)


#: Characters that Markdown (CommonMark with GitHub's tables) may read as markup.
_MARKDOWN = re.compile(r"[\\`*_\[\]#|~!{}]")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def markdown_text(value: object) -> str:
    """``str(value)`` for one Markdown cell, list item or heading: HTML's ``<``, ``>`` and ``&`` as
    entities, Markdown's marks backslash-escaped, and control characters shown escaped (as
    ``terminal_text`` does), so it renders as the text it is, on one line and in its cell."""
    text = "".join(_ENTITIES.get(c, c) for c in str(value))
    return terminal_text(_MARKDOWN.sub(lambda m: "\\" + m.group(), text))


__all__ = ["markdown_text", "terminal_text"]
