"""A site agent's ClientApp: it runs the site's side of each release it is sent.

The SuperNode is started with ``--node-config "site-dir='DIR'"``; ``DIR/agent.json`` says where the
site's files are (paths relative to ``DIR``)::

    {"federation": "federation.json", "cert": "cert.pem", "key": "key.pem",
     "schema": "schema.json", "silo": "/data/clinic-a.csv", "policy": "policy.json"}

(``policy``, ``ledger`` and ``state`` optional; the state folder defaults to ``DIR/state``). For
a job (``query.release``) the agent checks its files as ``privsyn-fed site run`` does, checks that
the job names this site's federation, and runs ``site.client.Site``: the request against its
policy (and a person, when the policy says so), its budget store, its silo, its ledger copy and its
audit log are the site's own; the shares go to party 0 over the site's own TLS connection. The
reply carries the site's exit status and its last lines of output, never a value of its rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from ..common import InputError, first_line, parse_json, read_json

app = ClientApp()

#: The fields of ``agent.json``.
FIELDS = {"federation", "cert", "key", "schema", "silo", "policy", "ledger", "state"}


def setup_of(folder: Path):
    """The ``SiteSetup`` that ``folder/agent.json`` describes; ``InputError`` naming what is wrong."""
    from ..site import site_setups

    raw = read_json(folder / "agent.json", "site agent's configuration", "--node-config site-dir")
    if (
        not isinstance(raw, dict)
        or set(raw) - FIELDS
        or not {"federation", "cert", "key", "schema", "silo"} <= set(raw)
    ):
        raise InputError(f"{folder / 'agent.json'}: an object with federation, cert, key, schema and silo")

    def path(key: str) -> str:
        return str(folder / str(raw[key]))

    [setup] = site_setups(
        path("federation"),
        path("schema"),
        [(path("cert"), path("key"), path("silo"))],
        policies=[path("policy")] if "policy" in raw else [],
        ledgers=[path("ledger")] if "ledger" in raw else [],
        states=[path("state") if "state" in raw else str(folder / "state")],
        force=True,
    )
    return setup


@app.query("release")
def release(msg: Message, context: Context) -> Message:
    """Run this site's side of the release the job names; reply with its status and last lines."""
    from ..site import Site

    lines: list[str] = []
    try:
        job: Any = parse_json(str(msg.content["job"]["request"]), "the job", "release job")
        setup = setup_of(Path(str(context.node_config["site-dir"])))
        if not isinstance(job, dict) or job.get("federation") != setup.federation.name:
            raise InputError("the job is for another federation than this site's")
        if job.get("digest") != setup.digest:
            raise InputError("the job's federation file differs from this site's")
        status = Site(setup, out=lines.append).run()
        site = setup.name
    except (InputError, KeyError, ValueError) as exc:
        status, site = 2, str(context.node_config.get("site-dir", "?"))
        lines.append(f"error: {first_line(exc)}")
    reply = ConfigRecord({"site": site, "status": int(status), "lines": json.dumps(lines[-20:])})
    return Message(RecordDict({"result": reply}), reply_to=msg)
