"""Workload error: mean over the workload's marginals of ``|| M_r(D)/|D| - M_r(S)/|S| ||_1``
(normalised L1, between 0 and 2), computed on the schema's encoded bins."""

from __future__ import annotations

import numpy as np

import privsyn_fed as pf


def workload_error(real: pf.Silo, synthetic: pf.Silo, workload) -> float:
    errs = []
    for clique in workload:
        a, b = real.marginal(clique).astype(float), synthetic.marginal(clique).astype(float)
        errs.append(np.abs(a / a.sum() - b / max(b.sum(), 1.0)).sum())
    return float(np.mean(errs))
