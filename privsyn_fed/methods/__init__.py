"""Synthesis methods, and the registry of them (``METHODS``).

A method decides what to ask the silos for; it reaches them only through an aggregator
(``aggregation.Aggregator``) and releases only through ``mechanisms``. Each method module defines
its registry entry, a ``Method`` (``base``): ``aim.AIM`` (a trusted curator), and the federated
``distaim.DISTAIM``, ``flaim.FLAIM``, ``fedtda.FEDTDA`` and ``independent.INDEPENDENT``
(``base.FederatedMethod``). Each says its options class, its threat model, the fewest silos it
accepts, whether it runs over MPC, whether it is a graphical-model (AIM-family) method, the
sensitivity of its selection score per unit of the largest workload weight, and ``run(release)``.
``api`` and ``cli`` read the registry; ``audit`` keeps its own table on purpose (an audit must be
independent of the code it checks) and a test compares the two. The graphical model (``pgm``) is
imported only when a method fits one, so reading the registry loads no model code; mbi and JAX
(``compiled``) only when a model outgrows the numpy estimator.
"""

from __future__ import annotations

from .aim import AIM, AIMOptions
from .base import Method, MethodOptions, Release
from .core import MethodResult
from .distaim import DISTAIM
from .federated import FederatedOptions
from .fedtda import FEDTDA, FedTDAOptions
from .flaim import FLAIM, FLAIMOptions
from .independent import INDEPENDENT, IndependentOptions
from .workload import sample_workload

#: Every method by the name ``--method`` and ``synthesize(method=...)`` take, in the order the
#: command line lists them.
METHODS: dict[str, Method] = {method.name: method for method in (AIM(), DISTAIM, FLAIM, FEDTDA, INDEPENDENT)}

__all__ = [
    "AIMOptions",
    "FLAIMOptions",
    "FedTDAOptions",
    "FederatedOptions",
    "IndependentOptions",
    "METHODS",
    "Method",
    "MethodOptions",
    "MethodResult",
    "Release",
    "sample_workload",
]
