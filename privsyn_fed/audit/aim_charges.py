"""Each entry of a complete run of the AIM family is the charge the run makes at its place
(``aim_run``): its mechanism, its round and local step, where it ran (AIM at the curator; FLAIM's
selections and local measurements in each silo, parallel over the silos; everything else at the
aggregator or on secret shares), its number of candidates, its query (a measured marginal is one of
the run's candidates, named as the run names it, so it comes from the recorded workload), its
cells (the product of the sizes of a marginal's columns, summed over the marginals released
together; for a pair on merged bins, the product of its columns' numbers of groups) and its L2
sensitivity: 1 for a count marginal (on merged bins too), ``sqrt(d)`` for FLAIM's ``d`` proxy
1-ways and for the ``d`` 1-ways that ``--find-dependence`` groups its bins with, released
together, ``sqrt(s)`` for FLAIM's sums (a record is in at most ``s`` of them).
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from ..methods import GROUPING_QUERY, measure_query, screen_query, target_query
from .aim_run import (
    GROUPING,
    LOCAL,
    MEASURE,
    ONEWAY,
    PAIR,
    PROXY,
    SCREEN,
    SELECT,
    SUMS,
    TARGET,
    TOTAL,
    AimRun,
    Charge,
)
from .arithmetic import _close
from .findings import AuditReport

#: The query of the planning total.
TOTAL_QUERY = "total number of rows (plans the schedule)"


class Found(NamedTuple):
    """What an entry released: the marginals it names, and for a selection how many candidates."""

    charge: Charge
    cliques: list[tuple[int, ...]]
    candidates: int | None = None


def _count(query: str, head: str, tail: str) -> int | None:
    """The number between ``head`` and ``tail`` in ``query``, or None."""
    m = re.fullmatch(re.escape(head) + r"([1-9][0-9]{0,8})" + re.escape(tail), query)
    return int(m.group(1)) if m else None


def _chosen(text: str, names: dict[str, tuple[int, ...]]) -> list[tuple[int, ...]] | None:
    """``text`` read as ``(m1); (m2); ...``, each ``m`` a candidate's name; None when it is not."""
    if not text:
        return []
    tokens = {f"({n})": c for n, c in names.items()}
    read: dict[int, list[tuple[int, ...]]] = {}  # the end of a token -> the marginals read up to it
    for start in [0] + [pos + 2 for pos in range(len(text))]:
        before = [] if start == 0 else read.get(start - 2)
        if before is None or start and text[start - 2 : start] != "; ":
            continue
        for token, clique in tokens.items():
            if text.startswith(token, start):
                read.setdefault(start + len(token), before + [clique])
    return read.get(len(text))


def _read(e: dict[str, Any], r: Charge, run: AimRun) -> Found | None:
    """The entry read as the release ``r``, or None when its query is not that release's."""
    q, t, k = e["query"], r.round, r.step
    names = {run.name(c): c for c in run.closure}
    if r.kind == TOTAL:
        return Found(r, [()]) if q == TOTAL_QUERY else None
    if r.kind == ONEWAY:
        return Found(r, [(r.column,)]) if q == f"marginal({run.columns[r.column]})" else None
    if r.kind == TARGET:
        pair = run.target_pair(r.column)
        return Found(r, [pair]) if q == target_query([run.columns[i] for i in pair]) else None
    if r.kind == GROUPING:
        return Found(r, [(j,) for j in range(len(run.columns))]) if q == GROUPING_QUERY else None
    if r.kind in (SCREEN, PAIR):
        pairs, name = (run.screened, screen_query) if r.kind == SCREEN else (run.chosen, measure_query)
        assert pairs is not None
        pair = pairs[r.column]
        return Found(r, [pair]) if q == name([run.columns[i] for i in pair]) else None
    if r.kind == SELECT:
        head, tail = {
            "aim": ("select among ", " candidate marginals"),
            "distaim": ("select among ", " candidate marginals (pooled)"),
            "flaim": (f"round {t}, local step {k}: each sampled silo selects among ", " candidates"),
        }[run.method]
        n = _count(q, head, tail)
        return None if n is None else Found(r, [], n)
    if r.kind == MEASURE:
        tail = " over the pool" if run.method == "distaim" else ""
        inner = q[len("marginal(") : len(q) - len(tail) - 1] if q.startswith("marginal(") else None
        ok = inner is not None and q == f"marginal({inner}){tail}" and inner in names
        return Found(r, [names[inner]]) if ok and inner is not None else None
    if r.kind == LOCAL:
        return (
            Found(r, [])
            if q == f"round {t}, local step {k}: each silo measures its choice for its own model copy"
            else None
        )
    if r.kind == PROXY:
        ok = q == f"round {t}: every column's 1-way marginal over the sampled silos (proxy)"
        return Found(r, [(j,) for j in range(len(run.columns))]) if ok else None
    head = f"round {t}: sums of the chosen marginals "
    chosen = _chosen(q[len(head) :], {run.name(c): c for c in run.candidates()}) if q.startswith(head) else None
    return None if chosen is None or len(set(chosen)) != len(chosen) else Found(r, chosen)


def _sensitivity(found: Found, run: AimRun) -> tuple[float, str]:
    """The L2 sensitivity of a Gaussian release, and why."""
    r = found.charge
    if r.kind == PROXY:
        return math.sqrt(len(run.columns)), f"one record is in each of the {len(run.columns)} 1-ways"
    if r.kind == SUMS and run.pooled_sums:
        n = len(found.cliques)
        return math.sqrt(n), f"private flaim sums each of its {n} chosen marginals over every silo that chose"
    if r.kind == SUMS:
        return math.sqrt(run.steps), f"one record is in at most {run.steps} of the sums (one per local step)"
    if r.kind == GROUPING:
        return math.sqrt(len(run.columns)), f"one record is in each of the {len(run.columns)} 1-ways"
    if r.kind in (SCREEN, PAIR):
        return 1.0, "one record is in one cell of a marginal on merged bins"
    return 1.0, "one record is in one cell of a count marginal"


def _check_fields(e: dict[str, Any], found: Found, run: AimRun, label: str, rep: AuditReport) -> None:
    """The round, local step, candidates, cells and sensitivity of an entry read as its release."""
    r = found.charge
    round_field = None if run.method == "aim" and r.round == 0 else r.round
    if e.get("round") != round_field:
        rep.problems.append(f"{label}: it is a release of round {r.round}, not of round {e.get('round')}")
    if e.get("local_step") != (r.step or None):
        rep.problems.append(f"{label}: it is a release of local step {r.step or None}, not {e.get('local_step')}")
    local = run.method == "flaim" and r.kind in (SELECT, LOCAL)
    places = ("silo",) if local else ("curator",) if run.method == "aim" else ("aggregator", "mpc")
    if e["where"] not in places or (e.get("parallel_over") == "silos") != local:
        how = "in each silo, parallel over the silos" if local else f"at the {' or '.join(places)}, once"
        rep.problems.append(f"{label}: a {run.method} run makes this release {how}")
    if r.kind == SELECT:
        if run.method != "flaim" and e.get("candidates") != found.candidates:
            rep.problems.append(
                f"{label}: it records {e.get('candidates')} candidates, but its query {found.candidates}"
            )
        return
    want, why = _sensitivity(found, run)
    if not _close(float(e["sensitivity_l2"]), want):
        rep.problems.append(f"{label}: L2 sensitivity {e['sensitivity_l2']:g}, but {why}: exactly {want:g}")
    if r.kind in (SCREEN, PAIR):
        cells = run.merged_cells(found.cliques[0], r.kind == PAIR)
        if e.get("cells") != cells:
            rep.problems.append(
                f"{label}: cells {e.get('cells')!r}, but the pair on its recorded groups (details.dependence.groups) "
                f"has {cells}"
            )
    elif r.kind == TARGET:
        cells = run.target_cells(found.cliques[0])
        if e.get("cells") != cells:
            rep.problems.append(
                f"{label}: cells {e.get('cells')!r}, but the target's 2-way on its merged bins "
                f"(details.target_groups {run.target_groups}) has {cells}"
            )
    elif r.kind != LOCAL:
        cells = sum(run.cells(c) for c in found.cliques)
        if e.get("cells") != cells:
            rep.problems.append(
                f"{label}: cells {e.get('cells')!r}, but the marginal(s) it releases have {cells} "
                "(the product of their columns' sizes)"
            )


def _check_charges(ledger: dict[str, Any], run: AimRun, rep: AuditReport) -> list[Found] | None:
    """Each entry as the charge the run makes at its place (module docstring); what each released,
    or None when the entries are not the run's charges."""
    entries, expected = ledger["entries"], run.charges()
    if len(entries) != len(expected):
        selections = sum(r.kind == SELECT for r in expected)
        rep.problems.append(
            f"{len(entries)} entries, but a complete {run.method} run of these options makes {len(expected)} "
            f"({selections} exponential, {len(expected) - selections} gaussian): an entry is missing or extra"
        )
        return None
    out = []
    for i, (e, r) in enumerate(zip(entries, expected)):
        label = f"entry {i + 1} ({e['query']})"
        mechanism = "exponential" if r.kind == SELECT else "gaussian"
        found = _read(e, r, run) if e["mechanism"] == mechanism else None
        if found is None:
            what = {
                TOTAL: "the planning total",
                ONEWAY: f"the 1-way marginal of {run.columns[r.column]!r}" if r.column >= 0 else "",
                TARGET: f"the target's 2-way with {run.columns[r.column]!r}" if r.column >= 0 else "",
                GROUPING: "every column's 1-way released together (find_dependence)",
                SCREEN: "the screen of a pair of details.dependence.pairs",
                PAIR: "the measurement of a pair of details.dependence.chosen",
                SELECT: "a selection among its candidates",
                MEASURE: "the measurement of a candidate marginal of its workload (details.workload)",
                LOCAL: "each silo's local measurement",
                PROXY: "the proxy 1-ways",
                SUMS: "the sums of candidate marginals of its workload (details.workload)",
            }[r.kind]
            rep.problems.append(
                f"{label}: a complete {run.method} run makes {what} here ({mechanism}, round {r.round}), "
                "named as the run names it"
            )
            return None
        _check_fields(e, found, run, label, rep)
        out.append(found)
    return out
