"""Pieces every command shares: the one-line-error parser, argument types, error reporting."""

from __future__ import annotations

import argparse

from ..mpc import DEFAULT_TIMEOUT_S as DEFAULT_MPC_TIMEOUT


class Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (exit status 2)."""

    def error(self, message: str):  # noqa: D401
        """Exit with status 2 and the usage error on one line."""
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def positive_int(text: str) -> int:
    """A whole number of at least 1 (an argparse type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def number(text: str) -> float:
    """A real number (an argparse type)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def rendezvous(text: str) -> str:
    """``tcp://HOST:PORT`` (an argparse type)."""
    host, sep, port = text.removeprefix("tcp://").rpartition(":")
    if not text.startswith("tcp://") or not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"must look like tcp://HOST:PORT, not {text!r}")
    return text


def add_membership_args(p: argparse.ArgumentParser) -> None:
    """Where a party or the dealer of a multi-host MPC release finds the others."""
    p.add_argument(
        "--parties", type=positive_int, required=True, metavar="N", help="number of silo parties (the dealer is extra)"
    )
    p.add_argument("--rendezvous", type=rendezvous, required=True, metavar="tcp://HOST:PORT", help="party 0's address")
    p.add_argument(
        "--timeout",
        type=number,
        default=DEFAULT_MPC_TIMEOUT,
        metavar="SECONDS",
        help=f"how long to wait for the others (default {DEFAULT_MPC_TIMEOUT:g})",
    )


def one_line(exc: BaseException) -> str:
    """The exception's message and its notes (what could not be recorded) on one line."""
    parts = [str(exc)] + list(getattr(exc, "__notes__", []))
    return "; ".join(" ".join(p.split()) for p in parts if p.strip())
