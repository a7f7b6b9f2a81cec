"""The structure of a complete Fed-TDA run, recomputed from its column types, domain and options: the
row total (1), with a target column its 2-ways jointly (``sqrt(d - 1)``), the categorical
histograms jointly (``sqrt(n_cat)``), the numeric histograms jointly (``sqrt(n_num)``) and the
second moments (``B^2``, ``B = norm_factor sqrt(n_cat + 2 n_num)``), all Gaussian, in one round,
each named as the run names it; an entry summed on secret shares adds its fixed-point rounding
(``fixed_point.rounding_l2``) to a planned sensitivity that must be the sound one: ``sqrt(cells)
2^-16`` for the second moments on shares, none otherwise. Their cells: 1; the target's size times
the other columns' sizes added up; the categorical columns' sizes added up; the numeric columns'
sizes added up, each bin split in at most ``refine`` (the option, or the planned one); ``l (l + 1)
/ 2`` for ``l = n_cat + 2 n_num``. Their noise spends the shares of the budget that the options'
``split`` gives (``split_rho``; a target takes ``target_share`` of what the total's left, the
others shrinking by as much), or the planned schedule's (``schedule``).
"""

from __future__ import annotations

import math
from typing import Any

from ..methods import TARGET_QUERY
from .arithmetic import _close, _square
from .findings import AuditReport
from .placement import MPC_REAL_BITS, _mpc_run
from .schedule import _check_fedtda_schedule, _check_fedtda_shares

#: How each release of a run begins its query.
QUERIES = {
    "the row total": "total number of rows",
    "the target's 2-ways": TARGET_QUERY,
    "the categorical histograms": "every categorical column's histogram",
    "the numeric histograms": "every numeric column's histogram",
    "the second moments": "upper triangle of the sum of x x^T",
}


def split_rho(rho: float, split: list[float], n_cat: int, n_num: int) -> list[float]:
    """The rho of the total, the categorical and numeric histograms and the covariance for the
    options' ``split``: an absent family's share goes to the others in proportion."""
    shares = [split[0], split[1] if n_cat else 0.0, split[2] if n_num else 0.0, split[3]]
    return [rho * x / sum(shares) for x in shares]


def _check_cells(
    ledger: dict[str, Any], d: dict[str, Any], types: list, refine: int, target: int | None, rep: AuditReport
) -> None:
    """Each release's cells, from the domain (``details.shape``) and the refinement (module docstring)."""
    shape = d.get("shape")
    if not isinstance(shape, list) or len(shape) != len(types):
        rep.problems.append("the ledger does not record the cells of every column (details.shape)")
        return
    cat = sum(c for c, t in zip(shape, types) if t == "categorical")
    num = sum(c for c, t in zip(shape, types) if t == "numeric")
    width = types.count("categorical") + 2 * types.count("numeric")
    pairs = 0 if target is None else shape[target] * (sum(shape) - shape[target])
    want = [(1, 1)] + ([(pairs, pairs)] if pairs else [])
    want += ([(cat, cat)] if cat else []) + ([(num, refine * num)] if num else [])
    want += [(width * (width + 1) // 2,) * 2]
    for i, (e, (lo, hi)) in enumerate(zip(ledger["entries"], want)):
        cells = e.get("cells")
        if not (isinstance(cells, int) and lo <= cells <= hi):
            span = f"{lo}" if lo == hi else f"{lo} to {hi}"
            rep.problems.append(f"entry {i + 1} ({e['query']}): cells {cells!r}, but its columns give {span}")


def _check_fedtda(ledger: dict[str, Any], d: dict[str, Any], rep: AuditReport) -> None:
    """Fed-TDA makes, in order, Gaussian releases of the row total (sensitivity 1), every
    categorical histogram jointly (``sqrt(n_cat)``, absent without categorical columns), every
    numeric histogram jointly (``sqrt(n_num)``, absent without numeric columns) and the second
    moments of rows clipped to ``B = norm_factor sqrt(n_cat + 2 n_num)`` (``B^2``). A secure sum
    adds its fixed-point rounding to a planned sensitivity that must be the sound one; on secret
    shares the second moments (real values on the grid ``2^-MPC_REAL_BITS``) round by
    ``sqrt(cells) 2^-MPC_REAL_BITS``, the counts not at all. Then each release's query and round,
    the run's one round, its noise against its share of the budget and its cells (module
    docstring)."""
    types, columns, options = d.get("column_types"), d.get("columns"), d.get("options") or {}
    if not types or options.get("norm_factor") is None:
        rep.problems.append(
            "the ledger does not record fedtda's column types and options (details), so its "
            "structure (one entry per release, sound sensitivities) cannot be checked"
        )
        return
    unknown = sorted(set(types) - {"categorical", "numeric"})
    if unknown or (columns is not None and len(columns) != len(types)):
        rep.problems.append(
            "details.column_types must give one type, categorical or numeric, per column of "
            "details.columns" + (f" (not {unknown[0]!r})" if unknown else "")
        )
        return
    norm_factor = float(options["norm_factor"])
    if not norm_factor > 0:
        rep.problems.append(
            f"details.options.norm_factor {norm_factor:g} is not positive: fedtda clips rows to a positive norm"
        )
        return
    n_cat, n_num = types.count("categorical"), types.count("numeric")
    width, mpc_run, known = n_cat + 2 * n_num, _mpc_run(ledger), len(rep.problems)
    moments = width * (width + 1) // 2
    target = options.get("target")
    if target is not None and (columns is None or target not in columns or types[columns.index(target)] == "numeric"):
        rep.problems.append(f"details.options.target {target!r} is not a categorical column of details.columns")
        return
    target_index = None if target is None or columns is None else columns.index(target)
    expect = [("the row total", 1.0, 0)]
    expect += [("the target's 2-ways", math.sqrt(len(types) - 1), 0)] if target is not None else []
    expect += [("the categorical histograms", math.sqrt(n_cat), 0)] if n_cat else []
    expect += [("the numeric histograms", math.sqrt(n_num), 0)] if n_num else []
    expect += [("the second moments", _square(norm_factor) * width, moments)]
    entries = ledger["entries"]
    if any(e["mechanism"] != "gaussian" for e in entries) or len(entries) != len(expect):
        rep.problems.append(
            f"{len(entries)} entries, but a complete fedtda run over {n_cat} categorical and {n_num} "
            f"numeric columns makes {len(expect)} Gaussian releases: an entry is missing or extra"
        )
        return
    for i, (e, (what, sound, real_cells)) in enumerate(zip(entries, expect)):
        label = f"entry {i + 1} ({e['query']})"
        fp = e.get("fixed_point") or {}
        planned = float(fp.get("sensitivity_planned", e["sensitivity_l2"]))
        rounding = float(fp.get("rounding_l2", 0.0))
        grid = math.sqrt(real_cells) * math.ldexp(1.0, -MPC_REAL_BITS) if mpc_run else 0.0
        if planned < sound * (1 - 1e-9):
            rep.problems.append(f"{label}: sensitivity {planned:g} is below the sound value {sound:g} of {what}")
        elif not _close(planned, sound):
            rep.problems.append(f"{label}: sensitivity {planned:g} is not the sound value {sound:g} of {what}")
        elif rounding < 0 or not _close(float(e["sensitivity_l2"]), planned + rounding):
            rep.problems.append(
                f"{label}: sensitivity {e['sensitivity_l2']:g} is not the planned {planned:g} plus "
                f"the fixed-point rounding {rounding:g}"
            )
        elif not _close(rounding, grid, 1e-9):
            rep.problems.append(
                f"{label}: {what} summed on secret shares are rounded to the grid 2^-{MPC_REAL_BITS}, "
                f"which adds {grid:.6g} to the sensitivity (sqrt({real_cells}) grid steps), but the "
                f"ledger records a rounding of {rounding:g}"
            )
    for i, (e, (what, _, _)) in enumerate(zip(entries, expect)):
        if not e["query"].startswith(QUERIES[what]) or e.get("round") != 0:
            rep.problems.append(f"entry {i + 1} ({e['query']}): a fedtda run releases {what} here, in round 0")
    if d.get("rounds") != 1:
        rep.problems.append(f"details.rounds is {d.get('rounds')}, but a fedtda run has one round")
    if len(rep.problems) != known:
        return
    if d.get("schedule") is not None:
        refine = _check_fedtda_schedule(ledger, d, types, norm_factor * math.sqrt(width), rep)
    elif options.get("split") is not None:
        rho = float(ledger["rho_budget"])
        parts = split_rho(rho, list(options["split"]), n_cat, n_num)
        parts = [p for p, n in zip(parts, (1, n_cat, n_num, 1)) if n]
        if target is not None:  # its share of what the total's left; the others shrink by as much
            share = float(options["target_share"])
            parts = [parts[0], share * (rho - parts[0])] + [p * (1 - share) for p in parts[1:]]
        refine = int(options.get("refine") or 4) if _check_fedtda_shares(entries, parts, rep) else None
    else:
        rep.problems.append("the ledger records neither the options' split nor a planned schedule (details.schedule)")
        return
    if refine is not None:
        _check_cells(ledger, d, types, refine, target_index, rep)
