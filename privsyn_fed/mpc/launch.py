"""Starting the parties of one machine: party ``k >= 1`` and the dealer as separate processes.

The caller is party 0. Each other party is ``python -m privsyn_fed mpc-party`` reading only its
own CSV; it prints ``ready`` once its rows are loaded and checked, then joins the rendezvous. The
dealer is ``python -m privsyn_fed mpc-dealer`` and reads nothing; it is started as a peer, not as
party 0's child (``DetachedProcess``: the operating system re-parents it). ``LocalParties`` waits
for every ``ready`` (a party that rejects its input stops the launch with that party's one-line
error), reports a party that stopped during the run, and on exit ends every process it started.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

from ..common import InputError, MPCError, first_line
from . import DEFAULT_TIMEOUT_S

READY_TIMEOUT_S = 120.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (chosen by the OS, not held)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: Run by a short-lived intermediate: start ``argv[2:]`` in a session of its own with stderr to
#: ``argv[1]``, print its pid and exit, leaving it to be re-parented.
_DETACH = (
    "import subprocess, sys\n"
    "with open(sys.argv[1], 'wb') as log:\n"
    "    p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,\n"
    "                         stderr=log, start_new_session=True)\n"
    "print(p.pid)\n"
)


class DetachedProcess:
    """A process started through an intermediate that exits at once, so that its parent is not
    this process (the dealer is party 0's peer, not its child). This process can still tell whether
    it runs and end it; its exit status is not known here (0 unless its log ends in an error)."""

    stdout = None

    def __init__(self, cmd: list[str], env: dict[str, str], log: Path):
        starter = subprocess.run(
            [sys.executable, "-c", _DETACH, str(log), *cmd], env=env, capture_output=True, text=True, timeout=60
        )
        if starter.returncode != 0 or not starter.stdout.strip().isdigit():
            reason = (starter.stderr.strip().splitlines() or ["no pid"])[-1]
            raise MPCError(f"could not start {' '.join(cmd[2:4])}: {reason}")
        self.pid, self.log, self.cmdline = int(starter.stdout.strip()), log, "\0".join(cmd)
        self.returncode: int | None = None

    def _running(self) -> bool:
        try:
            with open(f"/proc/{self.pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{self.pid}/cmdline", "rb") as fh:
                same = fh.read().decode(errors="replace").rstrip("\0") == self.cmdline
        except OSError:
            return False
        return state != "Z" and same  # a zombie has ended; another command means the pid was reused

    def poll(self) -> int | None:
        """None while it runs, else 1 if its log ends in an error line and 0 otherwise."""
        if self.returncode is None and not self._running():
            self.returncode = 1 if "error" in _last_line(self.log).lower() else 0
        return self.returncode

    def wait(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for it to end; ``subprocess.TimeoutExpired`` if it runs on."""
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("dealer", timeout)
            time.sleep(0.05)
        return self.returncode or 0

    def kill(self) -> None:
        """End it (SIGKILL), if it still runs as the process this object started."""
        if self._running():
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)


class LocalParties:
    """Parties ``1..n-1`` (one per silo after the first) and the dealer, on loopback TCP."""

    def __init__(
        self,
        schema: str | Path,
        silos: Sequence[str | Path],
        seed: int | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ):
        self.schema, self.silos = str(schema), [str(s) for s in silos]
        self.seed, self.timeout_s = seed, timeout_s
        self.parties = len(self.silos)
        self.rendezvous = f"tcp://127.0.0.1:{free_port()}"
        self.procs: list[tuple[str, subprocess.Popen | DetachedProcess, Path]] = []
        self._logs = tempfile.TemporaryDirectory(prefix="privsyn-fed-mpc-")

    def _start(self, label: str, args: list[str], detached: bool = False) -> subprocess.Popen | DetachedProcess:
        log = Path(self._logs.name) / f"{len(self.procs)}.err"
        cmd = [
            sys.executable,
            "-m",
            "privsyn_fed",
            *args,
            "--rendezvous",
            self.rendezvous,
            "--parties",
            str(self.parties),
            "--timeout",
            str(self.timeout_s),
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc: subprocess.Popen | DetachedProcess
        if detached:
            proc = DetachedProcess(cmd, env, log)
        else:
            with open(log, "wb") as err:  # a session of its own: Ctrl-C reaches party 0, which stops the others
                proc = subprocess.Popen(
                    cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, env=env, start_new_session=True
                )
        self.procs.append((label, proc, log))
        return proc

    def __enter__(self) -> "LocalParties":
        try:
            for k, path in enumerate(self.silos[1:], start=1):
                seed = [] if self.seed is None else ["--seed", str(self.seed)]
                self._start(
                    f"party {k} ({path})",
                    ["mpc-party", "--rank", str(k), "--schema", self.schema, "--silo", path, *seed],
                )
            self._start("the dealer", ["mpc-dealer"], detached=True)
            self._wait_ready()
        except BaseException:
            self.stop(grace_s=0)
            raise
        return self

    def _wait_ready(self) -> None:
        waiting = {proc.stdout.fileno(): (label, proc) for label, proc, _ in self.procs[:-1]}
        deadline = time.monotonic() + READY_TIMEOUT_S
        while waiting:
            self._raise_if_failed()
            ready, _, _ = select.select(list(waiting), [], [], 0.2)
            for fd in ready:
                label, proc = waiting[fd]
                line = proc.stdout.readline().decode(errors="replace").strip()
                if line == "ready":
                    del waiting[fd]
                elif not line:
                    proc.wait(timeout=10)
                    self._raise_if_failed()
            if time.monotonic() > deadline:
                raise MPCError(
                    f"{', '.join(lbl for lbl, _ in waiting.values())} did not load its silo within "
                    f"{READY_TIMEOUT_S:.0f} s"
                )

    def failed(self) -> str | None:
        """``'party k (file) exited with status s: <its message>'`` for a process that stopped with an
        error, else None: one killed by a signal first (its peers' errors follow from its death), else
        the first in rank order."""
        stopped = [(label, code, log) for label, proc, log in self.procs if (code := proc.poll()) not in (None, 0)]
        if not stopped:
            return None
        label, code, log = min(stopped, key=lambda s: s[1] >= 0)
        message = _last_line(log)
        return f"{label} exited with status {code}" + (f": {message}" if message else "")

    def _raise_if_failed(self) -> None:
        for label, proc, log in self.procs:
            code = proc.poll()
            if code == 2:
                raise InputError(_last_line(log).removeprefix("privsyn-fed: error: ") or f"{label}: bad input")
        problem = self.failed()
        if problem:
            raise MPCError(problem)

    def stop(self, grace_s: float = 10.0) -> None:
        """Wait briefly for a clean exit, then end every process still running."""
        deadline = time.monotonic() + grace_s
        for _, proc, _ in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for _, proc, _ in self.procs:
            if proc.stdout:
                proc.stdout.close()
        self._logs.cleanup()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop()  # the others notice party 0 has gone and stop themselves; stragglers are killed


@contextmanager
def coordinator(
    schema_path: str | Path,
    silo_paths: Sequence[str | Path],
    *,
    rendezvous: str | None = None,
    parties: int | None = None,
    seed: int | None = None,
    collusion: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    log=None,
):
    """Party 0 of an MPC run: yields its ``MPCAggregator``.

    Without ``rendezvous`` every silo is a party on this machine (``LocalParties``); with it, only
    ``silo_paths[0]`` is read here and the ``parties - 1`` others and the dealer join from their hosts.
    A party that stops mid-run ends the run with ``MPCError`` naming it. ``log`` gets one line once
    every party has joined.
    """
    from ..schema import Schema
    from ..silo import Silo
    from . import world
    from .aggregator import MPCAggregator

    schema = Schema.load(schema_path)
    own = Silo.load(silo_paths[0], schema)
    local = None if rendezvous else LocalParties(schema_path, silo_paths, seed, timeout_s)
    n = len(silo_paths) if local else parties
    names = [own.name] + ([str(p) for p in silo_paths[1:]] if local else [f"party-{k}" for k in range(1, n)])
    start = time.monotonic()
    with local or contextlib.nullcontext():
        world.join(world.Membership(local.rendezvous if local else rendezvous, n, 0, timeout_s))
        if log:
            log(
                f"{n} silo parties and the dealer joined in {time.monotonic() - start:.1f} s "
                f"({'processes on this machine' if local else rendezvous})"
            )
        try:
            agg = MPCAggregator(own, names, seed=seed, collusion=collusion)
            yield agg
            agg.close()
        except RuntimeError as exc:
            if isinstance(exc, MPCError):
                raise
            problem = (local.failed() if local else None) or _lost_contact(exc)
            if problem is None:
                raise
            error = MPCError(
                f"{problem}; the run stopped: no CSV was written, and the ledger records "
                "every value opened before the failure"
            )
            for note in getattr(exc, "__notes__", []):  # what the release recorded as it failed
                error.add_note(note)
            raise error from None
        finally:
            world.leave()


def _lost_contact(exc: BaseException) -> str | None:
    text = first_line(exc, limit=200)
    markers = ("Connection", "connection", "Gloo", "gloo", "timed out", "Timeout", "closed", "reset by peer")
    return f"lost contact with another party ({text})" if any(m in text for m in markers) else None


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:500] if lines else ""
