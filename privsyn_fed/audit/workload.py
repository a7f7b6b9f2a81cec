"""The workload a run of the AIM family records (``details.workload``) is the one its options
declare: with ``details.options.workload`` ``explicit``, the cliques given (recorded as a run
orders them: distinct cliques, each of distinct columns in schema order, sorted); otherwise the
seeded sample its options give (``workload_degree``, default ``min(3, d)``; ``workload_size``, 0
or null for all; ``workload_seed``), regenerated here by the public, data-independent sampler
(``methods.workload.sample_workload``) and compared clique by clique. With a target column
(``details.options.target``) the workload holds its 2-way with every other column too
(``methods.workload.with_target``), and a sampled one is compared with its weights. A sample larger than a run
accepts (``MAX_WORKLOAD`` marginals) is not regenerated: no run records it.
"""

from __future__ import annotations

from typing import Any

from ..methods import (
    DEFAULT_DEGREE,
    DEFAULT_SIZE,
    DEFAULT_WORKLOAD_SEED,
    MAX_WORKLOAD,
    sample_workload,
    with_target,
    workload_count,
)
from .findings import AuditReport

#: The AIM family records an explicit workload in ``details.workload`` and says so in its options.
EXPLICIT_WORKLOAD = "explicit"


def _check_workload(
    d: dict[str, Any], cliques: list[tuple[int, ...]], weights: list[int] | None, rep: AuditReport
) -> None:
    """``cliques``: ``details.workload`` as column indices, each in its recorded order; ``weights``
    its weights (None: all 1)."""
    options, n = d.get("options") or {}, len(d["columns"])
    target = options.get("target")
    if target is not None and target not in d["columns"]:
        rep.problems.append(f"details.options.target {target!r} is not one of details.columns")
        return
    pairs = with_target([], None, n, d["columns"].index(target))[0] if target is not None else []
    if not set(pairs) <= set(cliques):
        rep.problems.append(f"details.workload does not hold every 2-way marginal with the target {target!r}")
        return
    if options.get("workload") == EXPLICIT_WORKLOAD:
        ordered = all(list(cl) == sorted(set(cl)) and cl for cl in cliques)
        if not ordered or cliques != sorted(set(cliques)):
            rep.problems.append(
                "details.workload is not recorded as a run orders an explicit workload (distinct cliques of "
                "distinct columns in schema order, sorted)"
            )
        return
    degree = options.get("workload_degree") or min(DEFAULT_DEGREE, n)
    size = options.get("workload_size", DEFAULT_SIZE) or None
    seed = options.get("workload_seed", DEFAULT_WORKLOAD_SEED)
    if degree > n:
        rep.problems.append(f"details.options.workload_degree {degree} is more than the {n} columns")
        return
    if workload_count(n, degree, size) > MAX_WORKLOAD:
        rep.problems.append(
            f"details.options ask for {workload_count(n, degree, size):,} workload marginals, more than the "
            f"{MAX_WORKLOAD:,} a run accepts"
        )
        return
    expected, expected_weights = sample_workload(n, degree, size, seed), [1] * len(cliques)
    if target is not None:
        expected, expected_weights = with_target(expected, None, n, d["columns"].index(target))
    if cliques == expected and (weights or [1] * len(cliques)) != expected_weights:
        rep.problems.append("details.workload_weights are not the weights a target adds to the sampled workload")
    if cliques != expected:
        rep.problems.append(
            f"details.workload ({len(cliques)} marginals) is not the sample its options give ({len(expected)} "
            f"{degree}-way marginals drawn with workload_seed {seed}{', and the target' if target else ''}), and the "
            "options do not declare an explicit workload"
        )
