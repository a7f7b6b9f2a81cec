"""The noise of every release of a complete run of the AIM family, recomputed from its budget
``rho`` (after a planning total, what the total left), its options (``alpha``; ``T`` rounds as
given or as planned; ``s`` local steps; the variant) and the entries before it:

* AIM starts with ``sigma = sqrt(T / (2 alpha rho))`` and ``eps = sqrt(8 (1 - alpha) rho / T)``
  (planned: ``T = R + alpha d`` units); each later round keeps them or anneals them (``sigma / 2``,
  ``2 eps``); a round that finds less than two rounds' cost left spends all that is left, ``r``
  (``sigma = sqrt(1 / (2 alpha r))``, ``eps = sqrt(8 (1 - alpha) r)``), and is the last;
* DistAIM: ``sigma = sqrt((T + d) / (2 alpha rho))`` (``sqrt(d / (2 rho))`` without rounds) and
  ``eps = sqrt(8 (1 - alpha) rho / T)``; its round ``T`` spends what is left, as AIM's last does;
  an annealing DistAIM (``details.schedule.anneals``) has AIM's noise, rounds and last round;
  so has an annealing FLAIM, whose round's sums of ``c`` marginals carry ``sigma sqrt(c)``;
* FLAIM: ``sigma = sqrt(G / (2 alpha rho))`` for its ``G`` unit Gaussian releases and
  ``eps = sqrt(8 (1 - alpha) rho / (T s))`` throughout; private FLAIM's sums of ``c`` chosen
  marginals have ``sigma sqrt(c / s)`` (``flaim.pooled_sums_noise``).

Every 1-way and measurement has that sigma (noise the parties drew: at least it), every
selection that epsilon. A target's ``d - 1`` 2-ways, before all of these, spend its share ``s`` of
the budget they found (after a planning total): ``sigma = sqrt((d - 1) / (2 s rho))``; then
``--find-dependence`` spends its shares of what they left (``_check_dependence_noise``); ``rho``
above is then what is left after both.
"""

from __future__ import annotations

import math
from typing import Any

from ..methods import GROUPING_SHARE, allocation, pooled_sums_noise, share_sigma, target_sigma
from .aim_charges import Found
from .aim_run import GROUPING, ONEWAY, PAIR, SCREEN, SELECT, SUMS, TARGET, TOTAL, AimRun
from .arithmetic import _close, _cost, _effective_sigma
from .findings import AuditReport

#: Relative precision of a round that spends what is left (recomputed from a difference of sums).
LAST_TOL = 1e-6


def _last(left: float, alpha: float) -> tuple[float, float]:
    """The round that spends ``left``: ``(sqrt(1 / (2 alpha left)), sqrt(8 (1 - alpha) left))``."""
    return math.sqrt(1.0 / (2.0 * alpha * left)), math.sqrt(8.0 * (1.0 - alpha) * left)


def _round_rho(params: tuple[float, float]) -> float:
    sigma, eps = params
    return 1.0 / (2.0 * sigma**2) + eps**2 / 8.0


def _start(run: AimRun, alpha: float, rho: float, units: float) -> tuple[float, float]:
    """The sigma and epsilon a run starts its rounds with (module docstring)."""
    d, T, s = len(run.columns), run.rounds, run.steps
    if run.method == "aim" or run.anneals:
        return math.sqrt(units / (2.0 * alpha * rho)), math.sqrt(8.0 * (1.0 - alpha) * rho / units)
    if run.method == "distaim":
        eps = math.sqrt(8.0 * (1.0 - alpha) * rho / T) if T else 0.0
        return allocation.distaim_sigma(rho, T, d, alpha), eps
    eps = math.sqrt(8.0 * (1.0 - alpha) * rho / (T * s)) if T else 0.0
    return allocation.flaim_sigma(rho, T, s, d, alpha, run.proxy_rounds), eps


def _has_noise(e: dict[str, Any], sigma: float, tol: float = 1e-9) -> bool:
    """Whether a Gaussian has the noise ``sigma`` (noise the parties drew: at least it)."""
    if e.get("distributed"):
        return _effective_sigma(e) >= sigma * (1 - tol)
    return _close(float(e["sigma"]), sigma, tol)


def _matches(
    entries: list[dict[str, Any]], i: int, params: tuple[float, float], tol: float, scale: float = 1.0
) -> bool:
    """Whether the selection at ``i`` and the measurement after it have ``params`` (the
    measurement's sigma times ``scale``)."""
    return _close(float(entries[i]["epsilon"]), params[1], tol) and _has_noise(entries[i + 1], params[0] * scale, tol)


def _sums_scale(run: AimRun, found: list[Found], i: int) -> float:
    """How much the round's sigma is multiplied in the measurement at ``i``: ``sqrt(c)`` for an
    annealing FLAIM's sums of ``c`` chosen marginals (``pooled_sums_noise``), else 1."""
    if run.pooled_sums and i < len(found) and found[i].charge.kind == SUMS:
        return pooled_sums_noise(len(found[i].cliques), 1, 1.0)[1]
    return 1.0


def _aim_rounds(
    ledger: dict[str, Any], run: AimRun, found: list[Found], start: tuple[float, float], alpha: float, rep: AuditReport
) -> None:
    """AIM's rounds: kept or annealed, and the last spends what is left (module docstring)."""
    entries, budget = ledger["entries"], float(ledger["rho_budget"])
    selections = [i for i, f in enumerate(found) if f.charge.kind == SELECT]
    params = start
    for n, i in enumerate(selections):
        scale = _sums_scale(run, found, i + 1)
        label = f"entry {i + 1} ({entries[i]['query']})"
        left = budget - sum(_cost(e) for e in entries[:i])
        options = [params] if n == 0 else [params, (params[0] / 2.0, params[1] * 2.0)]
        slack = 1e-9 * budget
        if n == len(selections) - 1:
            ends = left > 0 and any(left < 2.0 * _round_rho(p) + slack for p in options)
            if not (ends and _matches(entries, i, _last(left, alpha), LAST_TOL, scale)):
                rep.problems.append(
                    f"{label}: AIM's last round spends what is left ({left:.6g}) when less than two rounds' "
                    "cost is left; this round does not"
                )
            return
        kept = [p for p in options if left >= 2.0 * _round_rho(p) - slack and _matches(entries, i, p, 1e-9, scale)]
        if not kept:
            rep.problems.append(
                f"{label}: its noise (sigma {entries[i + 1]['sigma']:.6g}, epsilon {entries[i]['epsilon']:.6g}) is "
                f"neither the round before's nor it annealed ({params[0]:.6g}, {params[1]:.6g}), with more than "
                "two rounds' cost left"
            )
            return
        params = kept[-1]


def _check_dependence_noise(
    entries: list[dict[str, Any]], run: AimRun, found: list[Found], rho: float, rep: AuditReport
) -> None:
    """``--find-dependence``'s releases, from the budget ``rho`` it found: the ``d`` grouping 1-ways
    together at ``GROUPING_SHARE`` of it (``sigma = sqrt(d / (2 g rho))``), each of the ``P``
    screened pairs at half its share ``s`` (``sqrt(P / (2 (s / 2) rho))``) and each of the ``F``
    chosen pairs at the other half (``sqrt(F / (2 (s / 2) rho))``)."""
    if run.screened is None or run.chosen is None:
        return
    share = run.dependence_share / 2.0
    want = {
        GROUPING: share_sigma(rho, GROUPING_SHARE, len(run.columns)),
        SCREEN: share_sigma(rho, share, len(run.screened)) if run.screened else 0.0,
        PAIR: share_sigma(rho, share, len(run.chosen)) if run.chosen else 0.0,
    }
    for i, f in enumerate(found):
        kind = f.charge.kind
        if kind in want and not _has_noise(entries[i], want[kind]):
            rep.problems.append(
                f"entry {i + 1} ({entries[i]['query']}): its noise is not the sigma {want[kind]:.6g} that "
                "find_dependence's share of the budget gives it"
            )


def _check_noise(
    ledger: dict[str, Any], run: AimRun, found: list[Found], alpha: float, rho: float, units: float, rep: AuditReport
) -> None:
    """The noise of every release (module docstring); ``rho`` is the budget the rounds plan with
    and ``units`` AIM's ``T``."""
    entries = ledger["entries"]
    steps = [i for i, f in enumerate(found) if f.charge.kind in (GROUPING, SCREEN, PAIR)]
    before = rho + sum(_cost(entries[i]) for i in steps)  # the budget the dependence step found
    _check_dependence_noise(entries, run, found, before, rep)
    targets = [i for i, f in enumerate(found) if f.charge.kind == TARGET]
    if targets:
        want = target_sigma(before + sum(_cost(entries[i]) for i in targets), run.target_share, len(run.columns))
        for i in targets:
            if not _has_noise(entries[i], want):
                rep.problems.append(
                    f"entry {i + 1} ({entries[i]['query']}): its noise is not the sigma {want:.6g} that the target's "
                    f"share {run.target_share:g} of the budget gives each of its 2-ways"
                )
    start = _start(run, alpha, rho, units)
    for i, f in enumerate(found):
        if f.charge.kind == ONEWAY and not _has_noise(entries[i], start[0]):
            rep.problems.append(
                f"entry {i + 1} ({entries[i]['query']}): its noise is not the sigma {start[0]:.6g} its budget and "
                "options give every 1-way"
            )
    if run.method == "aim" or run.anneals:
        _aim_rounds(ledger, run, found, start, alpha, rep)
        return
    budget = float(ledger["rho_budget"])
    for i, f in enumerate(found):
        kind, t = f.charge.kind, f.charge.round
        if kind in (TOTAL, TARGET, ONEWAY, GROUPING, SCREEN, PAIR) or run.method == "distaim" and kind != SELECT:
            continue
        label = f"entry {i + 1} ({entries[i]['query']})"
        params, tol = start, 1e-9
        if run.method == "distaim" and t == run.rounds:
            left = budget - sum(_cost(e) for e in entries[:i])
            params, tol = (_last(left, alpha) if left > 0 else (math.inf, 0.0)), LAST_TOL
        if kind == SELECT and run.method == "distaim":
            ok = _matches(entries, i, params, tol)
        elif kind == SELECT:
            ok = _close(float(entries[i]["epsilon"]), params[1], tol)
        elif kind == SUMS and run.pooled_sums:
            params = (pooled_sums_noise(len(f.cliques), run.steps, params[0])[1], params[1])
            ok = _has_noise(entries[i], params[0], tol)
        else:
            ok = _has_noise(entries[i], params[0], tol)
        if not ok:
            rep.problems.append(
                f"{label}: its noise is not what its budget and options give round {t} (sigma {params[0]:.6g}, "
                f"epsilon {params[1]:.6g})"
            )
