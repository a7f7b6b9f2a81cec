"""AGGREGATOR: the ``Aggregator`` protocol that methods talk to, the in-process (trusted)
aggregator (``aggregate``), and DistAIM's pool of measured marginals (``pool``). The MPC aggregator
lives in ``privsyn_fed.mpc``."""

from .aggregate import Aggregator, InProcessAggregator, batched, check_declared, refuse_exact_sum_in_release
from .pool import Clique, Pool

__all__ = [
    "Aggregator",
    "Clique",
    "InProcessAggregator",
    "Pool",
    "batched",
    "check_declared",
    "refuse_exact_sum_in_release",
]
