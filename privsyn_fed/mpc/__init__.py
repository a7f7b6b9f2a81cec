"""Secure computation among silos: CrypTen parties over a mutually authenticated TLS 1.3 mesh.

* ``federation``, ``certs``: the federation file, its CA and the members' certificates;
* ``tls``, ``communicator``: the TLS mesh and CrypTen's communicator over it;
* ``world``: joining the parties (the mesh, CrypTen set-up, the command channel, traffic);
* ``launch``: starting the parties and the dealer of one machine as processes;
* ``dealer``: CrypTen's trusted third party (correlated randomness only, never noise);
* ``noise``: each party's own exact samplers; ``secure``: sum, select and measure on shares;
* ``grid``: the fixed-point grids of values on shares;
* ``aggregator``: the aggregator interface over MPC (party 0); ``shared_pool``: DistAIM's pool as
  shares; ``answers``: what one party contributes to a step;
* ``party_session``: the other parties' loop; ``policy``: a party's policy and the verdict codes;
  ``request``: the release request every party and site checks; ``party_costs``: a party's own
  costing of each step; ``party_ledger``: its ledger copy; ``party_store``: its budget store;
* sites and compute servers: ``sites`` (party 0's port for sites), ``servers`` (party 0's
  aggregator over the sites' sealed shares), ``server_session`` (a compute server's loop),
  ``launch_servers``, ``envelope`` (shares sealed and signed for one server), ``wire`` (frames).
"""

from typing import TYPE_CHECKING

from ..common import MPC_TIMEOUT_S as DEFAULT_TIMEOUT_S  # (launch, below, reads it here)
from ..common import lazy_names
from . import certs
from .certs import SITE_NAME
from .federation import federation_digest, schema_fingerprint
from .federation import load as load_federation
from .federation import parse as parse_federation
from .grid import to_ring
from .launch import coordinator
from .party_store import charge_silo, check_ledger_target, make_folder, new_ledger_path, reserve
from .policy import Policy, Refused, check_store_agrees, load_policy
from .request import ReleaseRequest, ReleaseTerms
from .wire import FrameError, PeerClosed, pack_blobs, query_digest, recv_frame, send_frame, unpack_arrays

if TYPE_CHECKING:
    from . import envelope
    from .aggregator import MPCAggregator
    from .draft import DraftSpec, MPCAnswers, read_draft_table
    from .launch_servers import DEFAULT_SERVERS, local_site_names, servers_coordinator
    from .party import dealer_main, party_main, server_main
    from .party_costs import local_select_charge, noisy_sum_charge
    from .party_ledger import PartyRelease
    from .world import Access

#: Names given on first use: their modules load CrypTen's shim, the parties' exact samplers or
#: ``cryptography``'s sealing (``envelope``, a module), which a process that reads a federation or
#: checks a request never needs.
__getattr__ = lazy_names(
    __name__,
    {
        "Access": "world",
        "DEFAULT_SERVERS": "launch_servers",
        "MPCAggregator": "aggregator",
        "DraftSpec": "draft",
        "MPCAnswers": "draft",
        "PartyRelease": "party_ledger",
        "dealer_main": "party",
        "local_site_names": "launch_servers",
        "local_select_charge": "party_costs",
        "noisy_sum_charge": "party_costs",
        "party_main": "party",
        "read_draft_table": "draft",
        "server_main": "party",
        "servers_coordinator": "launch_servers",
    },
)

__all__ = [
    "Access",
    "DEFAULT_SERVERS",
    "DEFAULT_TIMEOUT_S",
    "DraftSpec",
    "FrameError",
    "MPCAggregator",
    "MPCAnswers",
    "PartyRelease",
    "PeerClosed",
    "Policy",
    "Refused",
    "ReleaseRequest",
    "ReleaseTerms",
    "SITE_NAME",
    "certs",
    "charge_silo",
    "check_ledger_target",
    "check_store_agrees",
    "coordinator",
    "dealer_main",
    "envelope",
    "federation_digest",
    "load_federation",
    "load_policy",
    "local_site_names",
    "local_select_charge",
    "make_folder",
    "new_ledger_path",
    "noisy_sum_charge",
    "pack_blobs",
    "parse_federation",
    "party_main",
    "query_digest",
    "read_draft_table",
    "recv_frame",
    "reserve",
    "schema_fingerprint",
    "send_frame",
    "server_main",
    "servers_coordinator",
    "to_ring",
    "unpack_arrays",
]
