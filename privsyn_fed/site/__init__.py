"""The site role: a silo's light process that answers declared queries and shares each answer
with the compute servers; numpy, TLS and ``cryptography`` only, no torch.

* ``client``: one site's side of a release (``Site``) and several sites in one process
  (``site_main``); the shares, their sealing and the frames are ``mpc.envelope`` and ``mpc.wire``;
* ``setup``: what a site was given, checked before it connects (``privsyn-fed site run``).
"""

from typing import TYPE_CHECKING

from ..common import lazy_names
from .approvals import decide, pending
from .log import check_log, read_log

if TYPE_CHECKING:
    from .client import Site, site_main
    from .setup import site_setups

#: Names given on first use: a site's client loads the MPC side it shares with (its sealing, frames
#: and ledger copy), which reading a site's log or approvals never needs.
__getattr__ = lazy_names(__name__, {"Site": "client", "site_main": "client", "site_setups": "setup"})

__all__ = ["Site", "check_log", "decide", "pending", "read_log", "site_main", "site_setups"]
