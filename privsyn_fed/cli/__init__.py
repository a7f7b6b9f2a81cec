"""The ``privsyn-fed`` command line: one module per command group.

  * ``synth``: a release (``synth.py``; its parser ``synth_args.py``, its outputs
    ``synth_outputs.py``), and after it, on request, its quality report (``quality.py``);
  * ``sample``: more rows from a saved release's model, optionally given public values
    (``sample.py``);
  * ``audit``: a ledger, or a mechanism empirically (``audit.py``);
  * ``budget``: the budget store (``budget.py``);
  * ``schema draft`` (from a table's rows, plain or ``--dp``) and ``schema from-dictionary``
    (from a public data dictionary in CSV) (``schema.py``);
  * ``partition`` and ``evaluate``: data, not releases (``data.py``);
  * ``mpc-demo``, ``mpc-party``, ``mpc-server``, ``mpc-dealer``: secure computation (``mpc.py``);
  * ``site run``, ``log``, ``pending``, ``approve``, ``refuse``: a site of a federation of sites and
    servers (``site.py``);
  * ``federation init``, ``issue``, ``describe``, ``show``: a multi-host federation's certificates
    (``federation.py``).

Exit status: 0 success; 2 bad input or bad usage (one line on stderr naming what is at fault);
1 anything else, including a ledger that fails its audit.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import warnings

from ..common import BudgetExceeded, InputError, MPCError, OptionError, settings, terminal_text
from . import audit, budget, data, federation, mpc, sample, schema, site, synth, synth_args
from .common import Parser, one_line

DESCRIPTION = """\
Differentially private synthetic data from several silos that share a schema.
Every release writes a zCDP privacy ledger that `privsyn-fed audit` re-checks."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command."""
    parser = Parser(prog="privsyn-fed", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--version", action="version", version=f"privsyn-fed {settings.package_version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    synth_args.add_parser(sub)
    sample.add_parser(sub)
    mpc.add_parsers(sub)
    site.add_parsers(sub)
    federation.add_parsers(sub)
    audit.add_parsers(sub)
    budget.add_parsers(sub)
    schema.add_parsers(sub)
    data.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; SIGINT and SIGTERM stop it at the next safe point (``interrupt``)."""
    from ..common import deferred_signals, notes_on_stderr

    args = build_parser().parse_args(argv)
    _stable_hashing_for_the_compilation_cache(argv)
    spends = args.command == "synth" or (args.command == "schema" and schema.spends_budget(args))
    # only synth and schema draft --dp spend budget; the library's warnings are notes on stderr
    with deferred_signals(immediate=not spends), notes_on_stderr(), warnings.catch_warnings(record=True) as caught:
        status = _run(args, caught)  # a library's warnings (NumPy's): in the error's line, or notes after
    if status and argv is None:  # the program, which exits next: a stopped read's Arrow reader may sit in a
        gc.collect()  # cycle with the error's frames; freed now, not torn down with the interpreter (SIGABRT)
    for line in _warning_lines(caught):
        print(f"privsyn-fed: note: {line}", file=sys.stderr)
    try:
        sys.stdout.flush()  # what is still buffered: the reader (`| head`) may have gone
    except BrokenPipeError:
        return _reader_gone()
    return status


def _reader_gone() -> int:
    """Stop writing to stdout, whose reader has gone (``| head``), quietly, as Unix tools do: the
    status of a process ended by SIGPIPE (141), and nothing more written to the closed pipe."""
    import signal

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush then finds no pipe
    os.close(devnull)
    return 128 + signal.SIGPIPE


def _stdout_broken(exc: OSError) -> bool:
    """Whether ``exc`` is stdout's reader gone: a broken pipe, with stdout a pipe no one reads."""
    import select

    if not isinstance(exc, BrokenPipeError):
        return False
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poll.poll(0))
    except (OSError, ValueError, AttributeError):  # stdout is not a file (captured)
        return False


def _stable_hashing_for_the_compilation_cache(argv: list[str] | None) -> None:
    """With a persistent compilation cache (``PRIVSYN_FED_JAX_CACHE``), run this command again, once,
    with ``PYTHONHASHSEED=0``: mbi orders attributes by Python's string hashes, so only with the same
    hashing in every process are the programs an earlier run compiled found again. (Hash
    randomisation guards dictionaries against keys chosen to collide; the keys here are the
    operator's own column names and values.)"""
    if argv is not None or settings.jax_cache_setting() is None or os.environ.get("PYTHONHASHSEED") is not None:
        return  # called from Python (not as the program), no cache, or hashing already fixed
    os.execve(
        sys.executable, [sys.executable, "-m", "privsyn_fed", *sys.argv[1:]], {**os.environ, "PYTHONHASHSEED": "0"}
    )


def _warning_lines(caught: list[warnings.WarningMessage], most: int = 3) -> list[str]:
    """The distinct warnings ``caught``, at most ``most``, each as one line without its source line."""
    lines = list(dict.fromkeys(f"{w.category.__name__}: {' '.join(str(w.message).split())}" for w in caught))
    return [terminal_text(line) for line in lines[:most]]


def _run(args: argparse.Namespace, caught: list[warnings.WarningMessage]) -> int:
    from ..common import Interrupted

    commands = {
        "synth": synth.run,
        "sample": sample.run,
        "audit": audit.run,
        "partition": data.run_partition,
        "evaluate": data.run_evaluate,
        "budget": budget.run,
        "schema": schema.run,
        "mpc-demo": mpc.run_demo_command,
        "mpc-party": mpc.run_party,
        "mpc-dealer": mpc.run_dealer,
        "mpc-server": mpc.run_server,
        "site": site.run,
        "federation": federation.run,
    }
    try:
        try:
            return commands[args.command](args)
        except Exception as exc:  # the warnings that came before the error go into its one line
            for line in _warning_lines(caught):
                exc.add_note(f"after the warning {line}")
            caught.clear()
            raise
    except InputError as exc:
        if isinstance(exc, OptionError):  # named in Python; here by its flag
            exc.args = (exc.renamed(synth_args.flag_name),)
        print(f"privsyn-fed: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except BudgetExceeded as exc:
        print(f"privsyn-fed: refused: {one_line(exc)}", file=sys.stderr)
        return 1
    except MPCError as exc:
        print(f"privsyn-fed: error: {one_line(exc)}", file=sys.stderr)
        return 1
    except Interrupted as exc:
        what = "no schema" if args.command == "schema" else "no synthetic data"
        print(f"privsyn-fed: {one_line(exc)}; {what} was written", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("privsyn-fed: interrupted; the ledger records what was spent", file=sys.stderr)
        return 130
    except OSError as exc:  # the environment: a full disk, a folder made read-only meanwhile
        if _stdout_broken(exc):
            return _reader_gone()
        where = f"{exc.filename}: " if exc.filename else ""
        exc.args = (f"{where}{exc.strerror or exc}",)
        print(f"privsyn-fed: error: {one_line(exc)} (nothing was released)", file=sys.stderr)
        return 1
    except Exception as exc:  # an internal failure: one line, the ledger keeps what was spent
        if os.environ.get("PRIVSYN_FED_DEBUG"):
            raise
        print(
            f"privsyn-fed: internal error: {type(exc).__name__}: {one_line(exc)} "
            "(no output was written; the ledger, if any, records what was spent; set "
            "PRIVSYN_FED_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
