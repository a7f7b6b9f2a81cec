"""Error types. The command line maps ``InputError`` to exit status 2 and prints only its message."""

from __future__ import annotations

import re
from typing import Callable


class InputError(ValueError):
    """Bad input or bad usage: a file, column, row or value the user must fix.

    The message is one line that names what is at fault. ``public``, when given, is the same
    message without the private cell value it quotes: what an MPC party prints, since its error
    is relayed to party 0 (``str(exc)`` is for this host's own operator only).
    """

    def __init__(self, message: str, *, public: str | None = None):
        super().__init__(message)
        self.public = public

    def shareable(self) -> str:
        """The message as it may leave this host: ``public`` when the message quotes a cell value."""
        return self.public or str(self)


class OptionError(InputError):
    """A refused value of a named argument (``epsilon``, a method option such as ``alpha``).

    The message names each argument of ``names`` by its Python name, the first mention of each
    naming it; a front end that calls them otherwise (the command line's flags) gets the same
    message in its own names from ``renamed``.
    """

    def __init__(self, message: str, *names: str):
        super().__init__(message)
        self.names = names

    def renamed(self, rename: Callable[[str], str]) -> str:
        """The message with the first mention of each of ``names`` replaced by ``rename(name)``."""
        text = str(self)
        for name in self.names:
            other = rename(name)
            text = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", lambda _: other, text, count=1)
        return text


class BudgetExceeded(RuntimeError):
    """A charge would take the privacy ledger past its budget; nothing was released."""


class MPCError(RuntimeError):
    """A secure computation cannot go on (a party stopped, the rendezvous failed); one-line message."""


def one_line(exc: BaseException) -> str:
    """An exception's whole message on one line (white space collapsed): for a library's errors whose
    later lines carry the hint (DuckDB's "Did you mean", libpq's "Is the server running")."""
    return " ".join(str(exc).split()) or type(exc).__name__


def first_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's first non-empty line, white space collapsed, at most ``limit`` characters.

    torch's errors may carry C++ stack frames on the lines after the message
    (``TORCH_SHOW_CPP_STACKTRACES``); those never reach the user.
    """
    line = next((ln for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
    line = " ".join(line.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
