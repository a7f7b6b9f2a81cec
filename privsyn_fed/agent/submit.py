"""``synth --superlink HOST:PORT``: a release's job goes to the sites' agents as one Flower run.

Once party 0's sites' port listens, ``AgentsRun.submit`` writes the Flower CLI's connection (the
SuperLink's address, the federation's CA as its root certificate) in a private folder and submits
the app in ``agent/fab`` with ``flwr run``; its ServerApp (``server_app``) hands each site's agent
the job, and each agent's ClientApp connects to party 0 as ``site run`` does. ``finish`` waits for
the run to end and reports each site's reply (its exit status and last lines). The SuperLink keeps
the run's state in its database; a site whose agent is offline is skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from ..common import InputError, MPCError, first_line, parse_json, read_json

#: The Flower app (FAB) of the site agents: its pyproject names the components in this package.
FAB = Path(__file__).parent / "fab"
#: The Flower CLI beside this Python.
FLWR = Path(sys.executable).parent / "flwr"


class AgentsRun:
    """One release's Flower run (module docstring)."""

    def __init__(
        self,
        superlink: str,
        ca_pem: bytes,
        federation: str,
        digest: str,
        sites: Sequence[str],
        *,
        wait_s: float = 60.0,
        log: Callable[[str], None] | None = None,
    ):
        self.superlink, self.sites = superlink, [f"site-{s}" for s in sites]
        self.job = {"federation": federation, "digest": digest}
        self.wait_s = wait_s
        self.log = log or (lambda line: None)
        self._folder = tempfile.TemporaryDirectory(prefix="privsyn-fed-agents-")  # 0700
        home = Path(self._folder.name)
        (home / "ca.pem").write_bytes(ca_pem)
        (home / "config.toml").write_text(
            f'[superlink]\ndefault = "federation"\n[superlink.federation]\naddress = "{superlink}"\n'
            f'root-certificates = "{home / "ca.pem"}"\n'
        )
        self.result = home / "result.json"
        self.env = {**os.environ, "FLWR_HOME": str(home), "FLWR_DISABLE_UPDATE_CHECK": "1", "NO_COLOR": "1"}
        self.run_id: str | None = None

    def _flwr(self, *args: str, timeout: float = 120.0) -> str:
        try:
            proc = subprocess.run(
                [str(FLWR), *args], env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self._folder.name
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise MPCError(f"the Flower CLI failed ({first_line(exc)})") from None
        if proc.returncode != 0:
            said = (proc.stdout + proc.stderr).strip().splitlines()
            raise MPCError(f"the SuperLink at {self.superlink} refused `flwr {args[0]}`: {(said or ['?'])[-1][:300]}")
        return proc.stdout

    def submit(self) -> str:
        """Submit the run (the job to every site's agent); its run id."""
        config = Path(self._folder.name) / "run.toml"
        settings = {
            "job": json.dumps(self.job),
            "sites": json.dumps(self.sites),
            "wait-s": float(self.wait_s),
            "result-file": str(self.result),
        }
        config.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()))
        out = self._flwr("run", str(FAB), "federation", "--format", "json", "--run-config", str(config))
        try:
            run_id = str(parse_json(out, "flwr run", "its output")["run-id"])
        except (InputError, KeyError, TypeError):
            raise MPCError(f"`flwr run` did not say which run it started ({out.strip()[:200]})") from None
        self.run_id = run_id
        self.log(f"the release's job went to the sites' agents as Flower run {run_id} (SuperLink {self.superlink})")
        return run_id

    def finish(self, timeout_s: float = 120.0) -> dict:
        """Wait for the run to end; each site's reply (``{site: {"status", "lines"}}``)."""
        deadline = time.monotonic() + timeout_s
        status = "?"
        while time.monotonic() < deadline:
            out = self._flwr("ls", "--run-id", str(self.run_id), "--format", "json")
            runs = parse_json(out, "flwr ls", "its output").get("runs") or [{}]
            status = str(runs[0].get("status", "?"))
            if status.startswith("finished"):
                break
            time.sleep(1.0)
        replies = read_json(self.result, "the agents' replies") if self.result.exists() else {}
        for site, reply in sorted(replies.items()):
            last = (reply.get("lines") or [""])[-1]
            self.log(f"{site}'s agent: status {reply.get('status')}: {last}")
        self.log(f"Flower run {self.run_id}: {status}")
        return replies

    def close(self) -> None:
        """Remove the private folder (the CLI's connection, the replies)."""
        self._folder.cleanup()
