"""Sites that run themselves: each site runs a long-lived Flower SuperNode with the project's
ClientApp; the coordinator runs the SuperLink and submits each release as a Flower run.

* ``keys``: what the Flower deployment needs beside a federation's bundles (the SuperLink's TLS
  certificate from the federation's CA, one node key per site);
* ``client_app``: a site agent's answer to a release job (the site's own ``site.client.Site``,
  configured from its folder, ``agent.json``);
* ``server_app``: the coordinator's side of a run: waits for the sites' agents, hands each the job,
  collects their replies;
* ``submit``: ``synth --superlink``: submits the run, waits for it, reports each site's reply.

Flower carries the jobs and the sites' replies; the shares travel as ``site.client`` sends them,
each sealed for its compute server, over the site's own TLS connection to party 0.
"""

from typing import TYPE_CHECKING

from ..common import lazy_names

if TYPE_CHECKING:
    from .keys import node_keys, superlink_certificate
    from .submit import AgentsRun

#: Names given on first use (``keys`` loads ``cryptography``'s key generation); the Flower apps
#: (``client_app``, ``server_app``) are loaded by Flower from their modules, never by this face.
__getattr__ = lazy_names(__name__, {"AgentsRun": "submit", "node_keys": "keys", "superlink_certificate": "keys"})

__all__ = ["AgentsRun", "node_keys", "superlink_certificate"]
