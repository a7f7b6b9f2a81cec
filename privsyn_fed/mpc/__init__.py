"""Secure computation among silos: CrypTen parties over torch.distributed (gloo, TCP).

* ``world``: joining the parties (rendezvous, CrypTen set-up, the command channel, traffic);
* ``launch``: starting the parties and the dealer of one machine as processes;
* ``dealer``: CrypTen's trusted third party (correlated randomness only, never noise);
* ``noise``: each party's own exact samplers; ``secure``: sum, select and measure on shares;
* ``aggregator``: the aggregator interface over MPC (party 0) and the other parties' loop;
* ``demo``: ``privsyn-fed mpc-demo``.
"""

#: Seconds a party waits for the others (between commands party 0 may fit a model for a while).
DEFAULT_TIMEOUT_S = 600.0

from .launch import coordinator  # noqa: E402  (after the timeout it reads)

__all__ = ["DEFAULT_TIMEOUT_S", "coordinator"]
