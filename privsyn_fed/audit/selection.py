"""Each selection of a complete run of the AIM family chooses among at most the run's candidates,
with the sensitivity the method's score has: ``factor`` (``structure.EM_SENSITIVITY``) times the
largest weight among the candidates it scores. FLAIM scores with the largest weight of the whole
closure, so its sensitivity is exactly that. AIM and DistAIM score the
candidates that fit the model-size limit: the sensitivity is ``factor`` times the weight of one of
the run's candidates, at least that of the marginal the round then measures, at most the
closure's largest, and exactly that when nothing was filtered out (as many candidates as the
closure has).
"""

from __future__ import annotations

from typing import Any

from .aim_charges import Found
from .aim_run import MEASURE, SELECT, AimRun
from .arithmetic import _close
from .findings import AuditReport

REL_TOL = 1e-12


def _check_selections(ledger: dict[str, Any], run: AimRun, found: list[Found], factor: float, rep: AuditReport) -> None:
    """Every selection's number of candidates and sensitivity (module docstring)."""
    pool = run.candidates()
    weights = sorted(set(pool.values()))
    top = factor * weights[-1]
    for i, f in enumerate(found):
        if f.charge.kind != SELECT:
            continue
        e = ledger["entries"][i]
        label = f"entry {i + 1} ({e['query']})"
        n, have = f.candidates or 0, float(e["sensitivity"])
        if n > len(pool):
            rep.problems.append(
                f"{label}: it selects among {n} candidates, but the run has {len(pool)} (from details.workload)"
            )
        elif run.method == "flaim" or n == len(pool):
            largest = max(run.closure.values()) if run.method == "flaim" else weights[-1]
            want = factor * largest
            if not _close(have, want, REL_TOL):
                rep.problems.append(
                    f"{label}: sensitivity {have:g} is {'below the sound value' if have < want else 'not'} {want:g}, "
                    f"{factor:g} x the largest weight {largest:g} of the run's candidates"
                )
        else:
            nxt = found[i + 1] if i + 1 < len(found) else None
            picked = nxt.cliques[0] if nxt is not None and nxt.charge.kind == MEASURE else None
            floor = factor * pool.get(picked, weights[0]) if picked is not None else factor * weights[0]
            if have < floor * (1 - REL_TOL):
                rep.problems.append(
                    f"{label}: sensitivity {have:g} is below the sound value {floor:g}, {factor:g} x the weight of "
                    "the marginal it picked"
                )
            elif not any(_close(have, factor * w, REL_TOL) for w in weights):
                rep.problems.append(
                    f"{label}: sensitivity {have:g} is not {factor:g} x the weight of one of its candidates "
                    f"(at most {top:g})"
                )
