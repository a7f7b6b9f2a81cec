"""Synthesis methods, and the registry of them (``METHODS``).

A method decides what to ask the silos for; it reaches them only through an aggregator
(``aggregation.Aggregator``) and releases only through ``mechanisms``. Each method module defines
its registry entry, a ``Method`` (``base``): ``aim.AIM`` (a trusted curator), and the federated
``distaim.DISTAIM``, ``flaim.FLAIM``, ``fedtda.FEDTDA`` and ``independent.INDEPENDENT``
(``base.FederatedMethod``). Each says its options class, its threat model, the fewest silos it
accepts, whether it runs over MPC, whether it is a graphical-model (AIM-family) method, the
sensitivity of its selection score per unit of the largest workload weight, the ledger's record of
its options (``ledger_details``), and ``run(run)`` (``base.MethodRun``).
``release`` and ``cli`` read the registry; ``audit`` keeps its own table on purpose (an audit must be
independent of the code it checks) and a test compares the two. The graphical model (``pgm``) is
imported only when a method fits one, so reading the registry loads no model code; mbi and JAX
(``compiled``) only when a model outgrows the numpy estimator.
"""

from __future__ import annotations

from . import allocation
from .aim import AIM, AIMOptions
from .base import Method, MethodOptions, MethodRun, check_option_types
from .core import MethodResult
from .dependence import (
    DEPENDENCE_SHARE,
    GROUPING_QUERY,
    GROUPING_SHARE,
    MEASURE_GROUPS,
    ROUNDS_AFTER,
    SCREEN_GROUPS,
    auto_rule,
    measure_query,
    screen_query,
    screened_pairs,
    share_sigma,
    spanning_forest,
    valid_starts,
)
from .distaim import DISTAIM
from .federated import FederatedOptions
from .fedtda import FEDTDA, TARGET_QUERY, FedTDAOptions
from .fit_check import fit_warning, no_joint_warning
from .flaim import FLAIM, FLAIMOptions, pooled_sums_noise
from .independent import INDEPENDENT, IndependentOptions, expected_oneway_error
from .target import TARGET_GROUPS, TARGET_SHARE, target_query, target_sigma, target_starts
from .workload import (
    DEFAULT_DEGREE,
    DEFAULT_SIZE,
    DEFAULT_WORKLOAD_SEED,
    MAX_CANDIDATE_WEIGHT,
    MAX_WORKLOAD,
    declared_workload,
    downward_closure,
    sample_workload,
    with_target,
    workload_count,
)

#: Every method by the name ``--method`` and ``synthesize(method=...)`` take, in the order the
#: command line lists them.
METHODS: dict[str, Method] = {method.name: method for method in (AIM(), DISTAIM, FLAIM, FEDTDA, INDEPENDENT)}

__all__ = [
    "declared_workload",
    "check_option_types",
    "AIMOptions",
    "DEFAULT_DEGREE",
    "DEFAULT_SIZE",
    "DEFAULT_WORKLOAD_SEED",
    "DEPENDENCE_SHARE",
    "FLAIMOptions",
    "pooled_sums_noise",
    "FedTDAOptions",
    "FederatedOptions",
    "GROUPING_QUERY",
    "GROUPING_SHARE",
    "IndependentOptions",
    "MAX_CANDIDATE_WEIGHT",
    "MAX_WORKLOAD",
    "MEASURE_GROUPS",
    "METHODS",
    "Method",
    "MethodOptions",
    "MethodResult",
    "MethodRun",
    "ROUNDS_AFTER",
    "SCREEN_GROUPS",
    "TARGET_QUERY",
    "TARGET_SHARE",
    "allocation",
    "auto_rule",
    "downward_closure",
    "expected_oneway_error",
    "fit_warning",
    "no_joint_warning",
    "measure_query",
    "sample_workload",
    "screen_query",
    "screened_pairs",
    "share_sigma",
    "spanning_forest",
    "target_query",
    "target_starts",
    "TARGET_GROUPS",
    "target_sigma",
    "valid_starts",
    "with_target",
    "workload_count",
]
