"""Starting the parties of one machine: party ``k >= 1`` and the dealer as separate processes.

The caller is party 0. It makes a throw-away federation in its private temporary folder (0700):
a CA, which signs one certificate per role and is then dropped, each role's key (0600), and a
federation file with one loopback port per member (``local_federation``). So a run on one machine
is TLS with mutual authentication too, with nothing for the user to set up. Each other party is
``python -m privsyn_fed mpc-party`` reading only its own CSV; it prints ``ready`` once its arguments
(schema, policy, ledger copy's place) are checked, then joins, and reads its CSV only once the
release's request has passed its policy (``party_session``). The dealer is ``python -m privsyn_fed
mpc-dealer`` and reads nothing; it is started as a peer, not as party 0's child
(``DetachedProcess``: the operating system re-parents it). ``LocalParties`` waits for every
``ready`` (a party that rejects its input stops the launch with that party's one-line error),
reports a party that stopped during the run, and on exit ends every process it started.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..common import InputError, MPCError, first_line
from . import DEFAULT_TIMEOUT_S, certs
from .federation import Federation
from .federation import load as load_federation
from .request import ReleaseTerms

READY_TIMEOUT_S = 120.0
#: Hours a local run's throw-away certificates are valid: every connection is made at the start.
LOCAL_CERT_HOURS = 6.0
#: The organisation every local member's certificate names.
LOCAL_ORGANISATION = "this machine"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (chosen by the OS, not held)."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1 that are free now (chosen by the OS, not held)."""
    held = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(s)
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


@dataclass(frozen=True)
class LocalFederation:
    """A throw-away federation on this machine's loopback: its file, and each rank's certificate and key."""

    path: Path
    federation: Federation
    certs: tuple[Path, ...]
    keys: tuple[Path, ...]

    def access(self, rank: int):
        """What member ``rank`` joins with (``world.Access``)."""
        from .world import Access

        return Access(self.path, self.certs[rank], self.keys[rank])

    def args(self, rank: int) -> list[str]:
        """Member ``rank``'s command-line arguments: ``--federation``, ``--cert``, ``--key``."""
        return ["--federation", str(self.path), "--cert", str(self.certs[rank]), "--key", str(self.keys[rank])]


def local_federation(
    folder: str | Path,
    parties: int,
    *,
    hours: float = LOCAL_CERT_HOURS,
    schema_sha256: str | None = None,
    sites: Sequence[str] = (),
) -> LocalFederation:
    """Make a throw-away federation of ``parties`` silo parties (or, with ``sites``, compute servers)
    and the dealer in ``folder`` (which should be private, 0700): a CA (its key is never written and
    is dropped once the members' certificates are signed), one certificate and key (0600) per role
    valid for ``hours`` (each site's too, after the members'), and ``federation.json`` with a free
    loopback port per member (and one for the sites)."""
    folder = Path(folder)
    name = f"local-{secrets.token_hex(4)}"
    ca = certs.make_ca(name, days=hours / 24)
    roles = [certs.party_role(k) for k in range(parties)] + ["dealer"]
    cert_paths, key_paths = [], []
    for role in roles + [certs.site_role(n) for n in sites]:
        cert_pem, key_pem = certs.issue(ca, role, LOCAL_ORGANISATION, days=hours / 24)
        cert_paths.append(folder / f"{role}.pem")
        key_paths.append(folder / f"{role}.key")
        certs.write_public(cert_paths[-1], cert_pem)
        certs.write_private(key_paths[-1], key_pem)
    ca_pem = ca[0]
    del ca  # the CA's key: nobody can issue another certificate of this federation
    certs.write_public(folder / "ca.pem", ca_pem)
    ports = free_ports(len(roles) + 1)
    members = [
        {"role": role, "organisation": LOCAL_ORGANISATION, "host": "127.0.0.1", "port": port}
        for role, port in zip(roles, ports)
    ]
    content: dict[str, Any] = {"federation": name, "ca": "ca.pem", "members": members}
    if sites:
        content["sites"] = {
            "port": ports[-1],
            "members": [{"name": n, "organisation": LOCAL_ORGANISATION} for n in sites],
        }
    if schema_sha256:
        content["schema_sha256"] = schema_sha256
    path = folder / "federation.json"
    certs.write_public(path, json.dumps(content, indent=1).encode())
    return LocalFederation(path, load_federation(path), tuple(cert_paths), tuple(key_paths))


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
    """Parties ``1..n-1`` (one per silo after the first) and the dealer, over loopback TLS."""

    def __init__(
        self,
        schema: str | Path | None,
        silos: Sequence[str | Path],
        seed: int | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        checks: bool = False,
        names: Sequence[str] | None = None,
    ):
        self.schema = None if schema is None else str(schema)  # None: the parties draft a schema
        self.silos = [str(s) for s in silos]
        #: How each party is told its silo's name (``--silo NAME=TABLE``); by default its file names it.
        self.silo_args = self.silos if names is None else [f"{n}={p}" for n, p in zip(names, self.silos)]
        self.seed, self.timeout_s = seed, timeout_s
        self.checks = checks  # parties also answer exact sums outside a release (tests, the demo)
        self.parties = len(self.silos)
        self.procs: list[tuple[str, subprocess.Popen | DetachedProcess, Path]] = []
        self._logs = tempfile.TemporaryDirectory(prefix="privsyn-fed-mpc-")  # 0700
        try:
            self.local = local_federation(self._logs.name, self.parties)
        except BaseException:
            self._logs.cleanup()
            raise

    def _start(
        self, label: str, rank: int, args: list[str], detached: bool = False
    ) -> subprocess.Popen | DetachedProcess:
        log = Path(self._logs.name) / f"{len(self.procs)}.err"
        cmd = [sys.executable, "-m", "privsyn_fed", *args, *self.local.args(rank)]
        cmd += ["--mpc-timeout", str(self.timeout_s)]
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
            for k, (path, silo_arg) in enumerate(zip(self.silos[1:], self.silo_args[1:]), start=1):
                seed = [] if self.seed is None else ["--seed", str(self.seed)]
                seed += ["--non-private-checks"] if self.checks else []
                self._start(
                    f"party {k} ({path})",
                    k,
                    [
                        "mpc-party",
                        "--rank",
                        str(k),
                        *(["--draft"] if self.schema is None else ["--schema", self.schema]),
                        "--silo",
                        silo_arg,
                        *seed,
                    ],
                )
            self._start("the dealer", self.parties, ["mpc-dealer"], detached=True)
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
                    f"{', '.join(lbl for lbl, _ in waiting.values())} did not check its arguments within "
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
    schema_path: str | Path | None,
    silo_paths: Sequence[str | Path],
    *,
    federation: str | Path | None = None,
    cert: str | Path | None = None,
    key: str | Path | None = None,
    listen: tuple[str, int] | None = None,
    parties: int | None = None,
    rendezvous: str | None = None,
    seed: int | None = None,
    collusion: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    log=None,
    release: ReleaseTerms | None = None,
    checks: bool = False,
    draft=None,
    silo_names: Sequence[str] | None = None,
):
    """Party 0 of an MPC run: yields its ``MPCAggregator``.

    With ``release`` (``request.ReleaseTerms``: method, epsilon, delta, and optionally the privacy
    unit, the target and the silo column) the parties check the
    release's request against their own policies before anything is read, party 0's silo included:
    the aggregator is yielded with no silo, and the caller reserves its budget and then calls
    ``begin`` (which reads party 0's silo, then every party reserves in its own store and reads its
    silo). Without it, party 0's silo
    is read first and the release is declared when one binds (``bind_release``). ``checks``: the
    parties of this machine also answer exact sums outside a release (tests and demonstrations).

    Without ``federation`` every silo is a party on this machine (``LocalParties``, with a
    throw-away federation); with it (the federation file, and party 0's ``cert`` and ``key``), only
    ``silo_paths[0]`` is read here and the other parties and the dealer join from their hosts
    (``parties``, if given, must be the file's). ``rendezvous`` is refused: it named a plain-TCP
    address. A party that stops mid-run ends the run with ``MPCError`` naming it. ``log`` gets one
    line once every party has joined. ``draft`` (``mpc.draft.DraftSpec``, no ``schema_path``, with
    ``release``): the parties draft a schema (``mpc-party --draft``). ``silo_names``: each local
    party's silo name (``mpc-party --silo NAME=TABLE``), for a release with a silo column.
    """
    from ..common import require_mpc
    from ..schema import Schema
    from ..silo import Silo
    from . import world
    from .aggregator import MPCAggregator, schema_fingerprint

    require_mpc("an MPC run")
    if rendezvous is not None:
        raise InputError(RENDEZVOUS_REPLACED)
    member = None
    if federation is not None:
        member = world.membership(world.Access(federation, cert, key, listen), parties=parties, timeout_s=timeout_s)
        if member.rank != 0:
            raise InputError(
                f"--cert {cert}: names {member.federation.role(member.rank)}; the coordinator "
                "(`synth --mpc`) is party-0, the others join with `privsyn-fed mpc-party` or `mpc-dealer`"
            )
    schema = Schema.load(schema_path) if schema_path is not None else None
    if member is not None and schema is not None:
        member.federation.check_schema(schema_fingerprint(schema), str(schema_path))
    own = None if release else Silo.load(silo_paths[0], schema)
    local = None if member else LocalParties(schema_path, silo_paths, seed, timeout_s, checks=checks, names=silo_names)
    n = member.parties if member else len(silo_paths)
    names = [own.name if own is not None else str(Path(silo_paths[0]))] + (
        [f"party-{k}" for k in range(1, n)] if member else [str(p) for p in silo_paths[1:]]
    )
    start = time.monotonic()
    with local or contextlib.nullcontext():
        if local:
            member = world.membership(local.local.access(0), timeout_s=timeout_s)
        world.join(member)
        if log:
            where = "processes on this machine" if local else f"federation {member.federation.name!r}"
            log(
                f"{n} silo parties and the dealer joined in {time.monotonic() - start:.1f} s over mutually "
                f"authenticated TLS ({where})"
            )
        try:
            agg = MPCAggregator(
                own, names, seed=seed, collusion=collusion, schema=schema, own_path=silo_paths[0], draft=draft
            )
            if release is not None:
                agg.declare(_with_silo_names(agg, release, schema, silo_names))
            yield agg
            agg.close()
        except RuntimeError as exc:
            raise stopped(exc, local) from None
        finally:
            world.leave()


def _with_silo_names(agg, terms, schema, silo_names: Sequence[str] | None):
    """``terms`` (``request.ReleaseTerms``) with its silo column's names: a silo column given without
    them (across hosts, where party 0 knows its own only) takes every party's own name, asked of the
    parties (``MPCAggregator.gather_silo_names``), and is checked against the schema (``InputError``)."""
    if terms.site is None or terms.site[1] is not None:
        return terms
    from ..silo import check_silo_column, default_silo_name

    column = terms.site[0]
    own = silo_names[0] if silo_names else default_silo_name(agg.own_path)
    names = agg.gather_silo_names(own)
    try:
        check_silo_column(schema, column, names)
    except InputError as exc:
        raise InputError(f"{exc} (the parties name their silos: {', '.join(names)})") from None
    return dataclasses.replace(terms, site=(column, tuple(names)))


#: What ``--rendezvous`` (a plain-TCP address) says now.
RENDEZVOUS_REPLACED = (
    "--rendezvous is gone: every MPC connection is now TLS 1.3 with mutual authentication; start each "
    "member with --federation FILE --cert CERT.pem --key KEY.pem (provisioned with `privsyn-fed federation init`)"
)


def stopped(exc: RuntimeError, local) -> RuntimeError:
    """What to raise when a run stops on ``exc``: a refusal (``MPCError``) or an error that is not a
    lost member as it is; else one ``MPCError`` naming the member that stopped (``local``'s
    processes) or the lost contact, with the notes the release recorded as it failed."""
    if isinstance(exc, MPCError):
        return exc
    problem = (local.failed() if local else None) or _lost_contact(exc)
    if problem is None:
        return exc
    error = MPCError(
        f"{problem}; the run stopped: no CSV was written, and the ledger records every value opened before the failure"
    )
    for note in getattr(exc, "__notes__", []):  # what the release recorded as it failed
        error.add_note(note)
    return error


def _lost_contact(exc: BaseException) -> str | None:
    text = first_line(exc, limit=200)
    markers = ("Connection", "connection", "timed out", "Timeout", "closed", "reset by peer")
    return f"lost contact with another party ({text})" if any(m in text for m in markers) else None


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:500] if lines else ""
