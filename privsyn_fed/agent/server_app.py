"""The coordinator's ServerApp: each release is one Flower run that hands the sites' agents the job.

Run config (``submit``): ``job`` (JSON: the federation's name and digest, the release's method,
epsilon and delta), ``sites`` (JSON list of the node names the agents were registered under,
``site-<name>``), ``wait-s`` (how long to wait for the agents to be online, saying which it waits
for), ``reply-timeout``, ``result-file`` (where each site's reply is written as JSON). An agent
offline when the job goes out is skipped, as a site absent when sampled is.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

from ..common import parse_json

app = ServerApp()


def online(grid: Grid, wanted: list[str]) -> dict[str, int]:
    """The node id of each wanted agent that is online now."""
    return {n.name: n.node_id for n in grid.get_nodes() if n.name in wanted and str(n.status).lower() == "online"}


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Wait for the agents, send each the job, write their replies."""
    cfg = context.run_config
    wanted = parse_json(str(cfg["sites"]), "the run config", "sites")
    deadline = time.monotonic() + float(cfg["wait-s"])
    nodes = online(grid, wanted)
    said = None
    while len(nodes) < len(wanted) and time.monotonic() < deadline:
        missing = sorted(set(wanted) - set(nodes))
        if missing != said:
            print(f"privsyn-fed: waiting for the agents of {', '.join(missing)}", flush=True)
            said = missing
        time.sleep(1.0)
        nodes = online(grid, wanted)
    job = ConfigRecord({"request": str(cfg["job"])})
    messages = [
        Message(content=RecordDict({"job": job}), dst_node_id=node, message_type="query.release")
        for node in nodes.values()
    ]
    names = {node: name for name, node in nodes.items()}
    results: dict[str, dict[str, Any]] = {
        name: {"status": None, "lines": ["its agent was not online"]} for name in wanted if name not in nodes
    }
    for reply in grid.send_and_receive(messages, timeout=float(cfg["reply-timeout"])):
        name = names.get(reply.metadata.src_node_id, str(reply.metadata.src_node_id))
        if reply.has_error():
            results[name] = {"status": None, "lines": [f"its agent failed: {reply.error.reason}"]}
            continue
        record = reply.content["result"]
        status = record["status"]
        lines = parse_json(str(record["lines"]), "a reply", "lines")
        results[name] = {"status": status if isinstance(status, int) else None, "lines": lines}
    for name in wanted:
        results.setdefault(name, {"status": None, "lines": ["no reply before the timeout"]})
        print(f"privsyn-fed: {name}: status {results[name]['status']}", flush=True)
    if str(cfg["result-file"]):
        Path(str(cfg["result-file"])).write_text(json.dumps(results, indent=1))
