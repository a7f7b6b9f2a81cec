"""Secure computation among silos: CrypTen parties over a mutually authenticated TLS 1.3 mesh.

* ``federation``, ``certs``: the federation file, its CA and the members' certificates;
* ``tls``, ``communicator``: the TLS mesh and CrypTen's communicator over it;
* ``world``: joining the parties (the mesh, CrypTen set-up, the command channel, traffic);
* ``launch``: starting the parties and the dealer of one machine as processes;
* ``dealer``: CrypTen's trusted third party (correlated randomness only, never noise);
* ``noise``: each party's own exact samplers; ``secure``: sum, select and measure on shares;
* ``grid``: the fixed-point grids of values on shares;
* ``aggregator``: the aggregator interface over MPC (party 0);
* ``party_session``: the other parties' loop; ``policy``: a party's policy and the verdict codes;
  ``request``: the release request every party and site checks; ``party_ledger``: a party's own
  costing of each step and its ledger copy; ``party_store``: its budget store;
* sites and compute servers: ``sites`` (party 0's port for sites), ``servers`` (party 0's
  aggregator over the sites' sealed shares), ``server_session`` (a compute server's loop),
  ``launch_servers``, ``envelope`` (shares sealed and signed for one server), ``wire`` (frames);
* ``demo``: ``privsyn-fed mpc-demo``.
"""

#: Seconds a party waits for the others (between commands party 0 may fit a model for a while).
DEFAULT_TIMEOUT_S = 600.0

from .launch import coordinator  # noqa: E402  (after the timeout it reads)

__all__ = ["DEFAULT_TIMEOUT_S", "coordinator"]
