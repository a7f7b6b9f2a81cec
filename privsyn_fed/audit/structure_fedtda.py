"""The structure of a complete Fed-TDA run, recomputed from its column types and options: the row
total (1), the categorical histograms jointly (``sqrt(n_cat)``), the numeric histograms jointly
(``sqrt(n_num)``) and the second moments (``B^2``, ``B = norm_factor sqrt(n_cat + 2 n_num)``), all
Gaussian; an entry summed on secret shares may add its fixed-point rounding
(``fixed_point.rounding_l2``) to a planned sensitivity that must be the sound one, and the second
moments on shares round by at least ``sqrt(cells) 2^-16``.
"""

from __future__ import annotations

import math
from typing import Any

from .arithmetic import _close, _square
from .findings import AuditReport
from .placement import MPC_REAL_BITS, _mpc_run
from .schedule import _check_fedtda_schedule


def _check_fedtda(ledger: dict[str, Any], d: dict[str, Any], rep: AuditReport) -> None:
    """Fed-TDA makes, in order, Gaussian releases of the row total (sensitivity 1), every
    categorical histogram jointly (``sqrt(n_cat)``, absent without categorical columns), every
    numeric histogram jointly (``sqrt(n_num)``, absent without numeric columns) and the second
    moments of rows clipped to ``B = norm_factor sqrt(n_cat + 2 n_num)`` (``B^2``). A secure sum
    adds its fixed-point rounding to a planned sensitivity that must be the sound one; on secret
    shares the second moments (real values on the grid ``2^-MPC_REAL_BITS``) round by at least
    ``sqrt(cells) 2^-MPC_REAL_BITS``."""
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
    expect = [("the row total", 1.0, 0)]
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
        elif rounding < 0 or not _close(float(e["sensitivity_l2"]), planned + rounding):
            rep.problems.append(
                f"{label}: sensitivity {e['sensitivity_l2']:g} is not the planned {planned:g} plus "
                f"the fixed-point rounding {rounding:g}"
            )
        elif rounding < grid * (1 - 1e-9):
            rep.problems.append(
                f"{label}: {what} summed on secret shares are rounded to the grid 2^-{MPC_REAL_BITS}, "
                f"which adds {grid:.6g} to the sensitivity (sqrt({real_cells}) grid steps), but the "
                f"ledger records a rounding of {rounding:g}"
            )
    if d.get("schedule") is not None and len(rep.problems) == known:
        _check_fedtda_schedule(ledger, d, types, norm_factor * math.sqrt(width), rep)
