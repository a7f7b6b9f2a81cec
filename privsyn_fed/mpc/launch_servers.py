"""Starting a federation of sites and compute servers: on one machine, or party 0's side across hosts.

On one machine (``LocalServers``) this process is server 0; it makes a throw-away federation with
``S`` servers, the dealer and one site per silo file (``launch.local_federation`` with sites), then
starts servers ``1..S-1`` (``privsyn-fed mpc-server``), the dealer, and one ``privsyn-fed site run``
process that runs every site, each with its own certificate and one outward connection (a site
needs neither torch nor CrypTen, so one light process holds many). ``servers_coordinator`` yields
party 0's ``ServersAggregator``: the servers join the TLS mesh, the sites connect to party 0's
sites' port (``sites.SiteHub``), and a release is declared to both.
"""

from __future__ import annotations

import contextlib
import re
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Sequence

from ..common import InputError
from . import DEFAULT_TIMEOUT_S
from .launch import LocalParties, _with_silo_names, local_federation, stopped
from .request import ReleaseTerms
from .sites import APPROVAL_S

#: Compute servers of a release on one machine unless told otherwise.
DEFAULT_SERVERS = 3


def local_site_names(silos: Sequence[str | Path], given: Sequence[str] | None = None) -> list[str]:
    """One site name per silo: ``given`` (each must be a site name: lower-case letters, digits and
    '-'), else the file's name so reduced, made unique with ``-k``."""
    from .certs import SITE_NAME

    if given:
        for name in given:
            if not SITE_NAME.fullmatch(name):
                raise InputError(
                    f"--silo {name}=...: a site's name is 1 to 40 lower-case letters, digits and '-' "
                    "(its certificate names site-<name>)"
                )
        return list(given)
    out: list[str] = []
    for k, path in enumerate(silos):
        stem = Path(path).name.split(".")[0].lower()
        name = re.sub(r"[^a-z0-9]+", "-", stem).strip("-")[:30] or f"site-{k + 1}"
        out.append(name if name not in out else f"{name}-{k + 1}")
    return out


class LocalServers(LocalParties):
    """Servers ``1..S-1``, the dealer, and one process running every site, over loopback TLS."""

    def __init__(
        self,
        schema: str | Path,
        silos: Sequence[str | Path],
        sites: Sequence[str],
        servers: int = DEFAULT_SERVERS,
        seed: int | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ):
        import tempfile

        self.schema, self.silos, self.sites = str(schema), [str(s) for s in silos], list(sites)
        self.seed, self.timeout_s, self.checks = seed, timeout_s, False
        self.parties = servers
        self.procs = []
        self._logs = tempfile.TemporaryDirectory(prefix="privsyn-fed-servers-")  # 0700
        try:
            self.local = local_federation(self._logs.name, servers, sites=self.sites)
        except BaseException:
            self._logs.cleanup()
            raise

    def __enter__(self) -> "LocalServers":
        seed = [] if self.seed is None else ["--seed", str(self.seed)]
        try:
            for k in range(1, self.parties):
                ledgers = str(Path(self._logs.name) / f"server-{k}.ledgers")
                self._start(f"server {k}", k, ["mpc-server", "--schema", self.schema, "--ledgers", ledgers, *seed])
            self._start("the dealer", self.parties, ["mpc-dealer"], detached=True)
            self._wait_ready()
            self._start_sites(seed)
        except BaseException:
            self.stop(grace_s=0)
            raise
        return self

    def _start_sites(self, seed: list[str]) -> None:
        """One ``privsyn-fed site run`` process for every site (it connects once party 0 listens)."""
        import os
        import subprocess
        import sys

        first = self.parties + 1  # the sites' certificates follow the members' and the dealer's
        args = ["site", "run", "--federation", str(self.local.path), "--schema", self.schema, *seed]
        for i, silo in enumerate(self.silos):
            args += ["--cert", str(self.local.certs[first + i]), "--key", str(self.local.keys[first + i])]
            args += ["--silo", silo]
        log = Path(self._logs.name) / "sites.err"
        with open(log, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "privsyn_fed", *args],
                stdout=subprocess.DEVNULL,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        self.procs.append((f"the sites' process ({len(self.silos)} sites)", proc, log))


@contextmanager
def servers_coordinator(
    schema_path: str | Path,
    silo_paths: Sequence[str | Path],
    *,
    servers: int = DEFAULT_SERVERS,
    federation: str | Path | None = None,
    cert: str | Path | None = None,
    key: str | Path | None = None,
    listen: tuple[str, int] | None = None,
    seed: int | None = None,
    collusion: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    site_wait_s: float = 60.0,
    approval_s: float = APPROVAL_S,
    announce: Callable[[Any], None] | None = None,
    log=None,
    release: ReleaseTerms | None = None,
    silo_names: Sequence[str] | None = None,
    **_: Any,
):
    """Server 0 of a federation of sites and servers: yields its ``ServersAggregator`` with the
    release (``request.ReleaseTerms``) declared to the servers and to every site
    connected within ``site_wait_s``. Without ``federation`` the servers, the dealer and one site per
    silo file run on this machine (``LocalServers``); with it (a federation file with sites, and
    party 0's ``cert`` and ``key``) the others join from their hosts. ``announce(federation)`` is
    called once the sites' port listens (``synth --superlink``: the job goes to the sites' agents)."""
    from ..common import require_mpc
    from ..schema import Schema
    from . import world
    from .federation import federation_digest, schema_fingerprint
    from .servers import ServersAggregator
    from .sites import SiteHub

    require_mpc("a release over compute servers")
    schema = Schema.load(schema_path)
    local = None
    if federation is not None:
        member = world.membership(world.Access(federation, cert, key, listen), timeout_s=timeout_s)
        if member.rank != 0:
            raise InputError(f"--cert {cert}: names {member.federation.role(member.rank)}; party 0 runs `synth`")
        if member.federation.sites is None:
            raise InputError(f"--federation {federation}: lists no sites; see `privsyn-fed federation init --sites`")
        member.federation.check_schema(schema_fingerprint(schema), str(schema_path))
    else:
        names = local_site_names(silo_paths, silo_names)
        local = LocalServers(schema_path, silo_paths, names, servers, seed, timeout_s)
    with local or contextlib.nullcontext():
        if local is not None:
            member = world.membership(local.local.access(0), timeout_s=timeout_s)
        fed = member.federation
        assert fed.sites is not None
        start = time.monotonic()
        world.join(member)
        host = (listen or (fed.members[0].host, 0))[0]
        hub = SiteHub(
            fed.name,
            federation_digest(fed),
            fed.ca_pem,
            member.credentials.cert_path,
            member.credentials.key_path,
            (host, fed.sites.port),
            fed.sites.names,
            organisations={s.name: s.organisation for s in fed.sites.members},
            pins={s.name: s.sha256 for s in fed.sites.members if s.sha256},
            log=log,
        )
        if log:
            log(
                f"{fed.parties} compute servers and the dealer joined in {time.monotonic() - start:.1f} s over "
                f"mutually authenticated TLS; the sites connect to port {hub.port}"
            )
        try:
            if announce is not None:  # e.g. the sites' agents get the job once the port listens
                announce(fed)
            agg = ServersAggregator(
                hub,
                fed.name,
                fed.ca_pem,
                (member.credentials.cert_path, member.credentials.key_path),
                seed=seed,
                collusion=collusion,
                schema=schema,
                site_wait_s=site_wait_s,
                approval_s=approval_s,
                log=log,
            )
            if release is not None:
                agg.declare(_with_silo_names(agg, release, schema, fed.sites.names))
            yield agg
            agg.close()
        except RuntimeError as exc:
            raise stopped(exc, local) from None
        finally:
            hub.close()
            world.leave()
