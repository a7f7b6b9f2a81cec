"""How well a release's fitted model matches the release's own noisy measurements: post-processing
of what was released, so it spends nothing, and ``synth`` warns when the fit is poor.

For each measurement ``y_r`` over two or more columns (not one on merged bins) with noise ``sigma_r``
and ``c_r`` cells, with ``M_r`` the model's marginal and ``I_r`` the independent product of the
model's own 1-way marginals (what ``--method independent`` would answer, scaled to the model's total):

* ``model = sum_r ||M_r - y_r||^2 / sigma_r^2`` and ``independent = sum_r ||I_r - y_r||^2 / sigma_r^2``;
* ``noise = sum_r c_r``, the expectation of either sum at the true marginals (the noise alone);
* ``joint``, the measurements over two or more columns, merged bins included.

A model fitted to its measurements has ``model <= independent`` (the independent product is one of
the models it could have been) and ``model`` about ``noise`` or below. ``FIT_ALARM`` times ``noise``
or more means the measurements disagree with each other, or the fit stopped far from them; more
than ``independent`` by over ``sqrt(2 noise)`` (the sums' standard deviation: columns nearly
independent leave the two within a hair of each other) means it fits them worse than the
independent method would. Either way the synthetic rows may be no better than the independent
method's. A release with no ``joint`` measurement (its budget ran out at the 1-ways) models no
dependence at all: its rows are the independent method's, and ``synth`` says so
(``no_joint_warning``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

#: ``model`` at this many times ``noise`` or more is a poor fit (a chi-square's mean is its cells;
#: four times it is many standard deviations away for any number of cells).
FIT_ALARM = 4.0


def fit_against_independent(
    estimate: Callable[[tuple[str, ...]], np.ndarray], measurements: Sequence[tuple], names: Sequence[str]
) -> dict[str, Any]:
    """``measurements`` (how many were compared), ``model``, ``independent``, ``noise`` and ``joint``
    as in the module docstring, for the model read by ``estimate`` (a clique's marginal in counts)."""
    oneway = {n: np.clip(np.asarray(estimate((n,)), dtype=float), 0, None) for n in names}
    model = independent = noise = 0.0
    measured = 0
    joint = sum(1 for clique, *_ in measurements if len(clique) >= 2)
    for clique, y, sigma, *merged in measurements:
        if merged or len(clique) < 2:
            continue
        parts = [oneway[c] / max(float(oneway[c].sum()), 1e-12) for c in clique]
        product = parts[0]
        for p in parts[1:]:
            product = np.multiply.outer(product, p)
        total = float(oneway[clique[0]].sum())
        y = np.asarray(y, dtype=float).ravel()
        variance = float(sigma) ** 2
        model += float(((np.asarray(estimate(tuple(clique)), dtype=float).ravel() - y) ** 2).sum()) / variance
        independent += float(((total * product.ravel() - y) ** 2).sum()) / variance
        noise += y.size
        measured += 1
    return {"measurements": measured, "model": model, "independent": independent, "noise": noise, "joint": joint}


def no_joint_warning(fit: dict[str, Any] | None, columns: int, unit_factor: int = 1) -> str | None:
    """The warning ``synth`` gives for a release of two or more ``columns`` that measured no marginal
    over two or more of them (module docstring), or None; ``unit_factor``: a privacy unit's
    ``K x M`` (rows per unit times silos per unit), which multiplies every sensitivity."""
    if not fit or columns < 2 or fit.get("joint", 1):
        return None
    room = "a larger --epsilon, fewer columns or fewer bins"
    if unit_factor > 1:
        room += (
            f", or a smaller --max-rows-per-unit or --max-silos-per-unit (their product, {unit_factor}, multiplies "
            "every sensitivity),"
        )
    return (
        "the budget measured no marginal over two or more columns (it ran out at the 1-ways): the synthetic "
        f"columns are independent of each other, as --method independent draws them; {room} leave room for "
        "the rounds that measure how columns depend on each other"
    )


def fit_warning(fit: dict[str, Any] | None, naive_sums: bool = False) -> str | None:
    """The warning ``synth`` gives for a poor fit (module docstring), or None; ``naive_sums`` (naive
    FLAIM's release) names the likely cause of measurements that disagree."""
    if not fit or not fit["measurements"]:
        return None
    far = fit["model"] >= FIT_ALARM * fit["noise"]
    worse = fit["model"] > fit["independent"] + (2 * fit["noise"]) ** 0.5
    if not (far or worse):
        return None
    what = (
        f"the fitted model is {fit['model'] / fit['noise']:,.1f} times further from the release's own "
        f"{fit['measurements']} multi-way measurements than their noise explains"
        if far
        else "the fitted model is further from the release's own multi-way measurements"
    )
    than = (
        "; it fits them worse than the independent method would"
        if worse
        else f" (closer than the independent method's {fit['independent'] / fit['noise']:,.1f} times)"
    )
    cause = (
        " (naive flaim's sums over only the silos that chose a marginal, scaled to them all, do when silos "
        "differ; try --variant private or --method distaim)"
        if naive_sums
        else ""
    )
    baseline = (
        " The synthetic rows may be no better than --method independent's: compare them with "
        "`privsyn-fed evaluate --baseline`"
        if worse
        else ""
    )
    return (
        f"{what}{than}: its statistics disagree with each other{cause} or the fit stopped short (raise "
        f"--final-iters).{baseline}"
    )
