"""Data-size-aware budget allocation: a release's schedule as a function of one noisy row total
and the public domain, so that choosing it is post-processing.

A release that plans its schedule first spends ``TOTAL_SHARE`` of its budget on the row total,
``N_hat = N + N(0, sigma_N^2)`` (L2 sensitivity 1). Everything below reads only ``N_hat``, the
budget left after it, the public schema and the method's options; the ledger records ``N_hat`` and
the schedule (``details.schedule``) and ``audit`` applies the same functions to them again.

**How much a measurement is worth.** A Gaussian measurement of a marginal with ``n`` cells and
noise ``sigma`` has expected L1 error ``sqrt(2/pi) sigma n`` (in rows). It is worth planning when
that is at most ``NOISE_TO_SIGNAL`` (one tenth) of the rows it describes: beyond that its noise alone
exceeds the dependence a typical pair of columns shows (the median L1 distance between a pair's
joint distribution and the product of its 1-ways is 0.08 on Adult and 0.09 on CPS1988). One half
and one quarter plan too many rounds on 1,000 rows (``benchmarks/README.md``).

**The AIM family** (``planned_rounds``). More rounds mean more noise in each. The planned number
``R`` is the largest for which the ``R`` smallest candidate marginals (two or more columns;
beyond their count the largest stands in) are each still worth measuring at that round's noise,
capped by the method's default (a DistAIM over every silo in every round plans as AIM). The
1-ways are measured at a round's noise (AIM's own coupling), so they take ``alpha d / (R + alpha d)``
of the budget in AIM: all of it when ``R = 0``, when nothing but the 1-ways is measured (the
independent method's allocation), and AIM's ``1/16`` share when the data are large. This is
AIM's schedule with ``T = R + alpha d`` instead of ``16 d``; MST spends a third on its 1-ways
and OpenDP's contingency tables half, whatever the data size.

**Fed-TDA** (``plan_fedtda``). Each histogram column gets the same budget (the independent
method's split). The noise of one entry of the copula's correlation estimate is
``s = B^2 / (N_hat sqrt(2 rho_cov))``; the covariance gets ``MAX_COVARIANCE_SHARE`` of the budget
when that brings ``s`` to at most ``CORRELATION_NOISE``, and ``MIN_COVARIANCE_SHARE`` otherwise.
Each public bin is split in ``refine`` (1, 2 or 4, at most the option) only while a refined bin
still expects ``REFINED_BIN_SIGMAS`` times its noise in rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from ..silo import SQRT_2_OVER_PI

#: Share of the budget spent on the row total that a planned schedule reads.
TOTAL_SHARE = 0.01
#: A measurement is planned when its expected L1 noise is at most this share of its rows.
NOISE_TO_SIGNAL = 0.1


def schedule_record(noisy_total: float, **plan) -> dict:
    """What the ledger records of a planned schedule (``details.schedule``): the released total,
    the rule's constants, and the plan."""
    return {"noisy_total": float(noisy_total), "total_share": TOTAL_SHARE, "noise_to_signal": NOISE_TO_SIGNAL, **plan}


def total_sigma(rho: float) -> float:
    """Noise of the planning total: ``TOTAL_SHARE`` of ``rho`` at sensitivity 1."""
    return math.sqrt(1.0 / (2.0 * TOTAL_SHARE * rho))


def worth_measuring(cells: float, sigma: float, rows: float) -> bool:
    """``sqrt(2/pi) sigma cells <= NOISE_TO_SIGNAL rows``."""
    return SQRT_2_OVER_PI * sigma * cells <= NOISE_TO_SIGNAL * rows


def planned_rounds(
    n_hat: float, candidate_cells: Sequence[int], sigma_for: Callable[[int], float], max_rounds: int
) -> int:
    """The largest ``R`` in ``[0, max_rounds]`` whose ``R``-th smallest candidate (the largest one
    beyond their count) is worth measuring with ``sigma_for(R)``. Both grow with ``R``, so the
    rule stops at the first ``R`` that fails."""
    cells = sorted(int(c) for c in candidate_cells)
    if not cells:
        return 0
    rounds = 0
    for r in range(1, max(0, int(max_rounds)) + 1):
        if not worth_measuring(cells[min(r, len(cells)) - 1], sigma_for(r), n_hat):
            break
        rounds = r
    return rounds


# ---- the AIM family ------------------------------------------------------------------------------

#: The most global rounds a planned federated schedule runs (the FLAIM paper's T): FLAIM's, and
#: DistAIM's with sampled silos (over every silo in every round DistAIM plans and anneals as AIM).
FEDERATED_ROUNDS = 10
#: With at least this many silos the default sample rate is ``MANY_SILOS_RATE``; below it every
#: silo takes part in every round.
MANY_SILOS = 100
MANY_SILOS_RATE = 0.1


def default_sample_rate(n_silos: int) -> float:
    """1 (every silo, every round) for fewer than 100 silos; 0.1 from 100 silos on (the FLAIM paper)."""
    return MANY_SILOS_RATE if n_silos >= MANY_SILOS else 1.0


def aim_units(rounds: int, n_columns: int, alpha: float) -> float:
    """AIM's ``T`` for ``R`` planned rounds: ``R + alpha d`` (the 1-ways cost ``alpha d`` units)."""
    return rounds + alpha * n_columns


def aim_sigma(rho: float, units: float, alpha: float) -> float:
    """AIM's measurement noise ``sqrt(T / (2 alpha rho))``."""
    return math.sqrt(units / (2.0 * alpha * rho))


def oneway_only_sigma(rho: float, n_columns: int) -> float:
    """Every 1-way with the whole of ``rho``: ``sqrt(d / (2 rho))``."""
    return math.sqrt(n_columns / (2.0 * rho))


def plan_aim(n_hat: float, rho: float, alpha: float, n_columns: int, candidate_cells: Sequence[int]) -> int:
    """Planned AIM rounds: at most AIM's default ``16 d`` units in all."""
    max_rounds = int(math.floor(16 * n_columns - alpha * n_columns))
    return planned_rounds(
        n_hat, candidate_cells, lambda r: aim_sigma(rho, aim_units(r, n_columns, alpha), alpha), max_rounds
    )


def distaim_sigma(rho: float, rounds: int, n_columns: int, alpha: float) -> float:
    """DistAIM's noise ``sqrt((T + d) / (2 alpha rho))``; ``sqrt(d / (2 rho))`` without rounds."""
    if rounds == 0:
        return oneway_only_sigma(rho, n_columns)
    return math.sqrt((rounds + n_columns) / (2.0 * alpha * rho))


def plan_distaim(
    n_hat: float, rho: float, alpha: float, n_columns: int, candidate_cells: Sequence[int], max_rounds: int
) -> int:
    """Planned DistAIM rounds, at most ``max_rounds`` (``planned_rounds`` at ``distaim_sigma``'s noise)."""
    return planned_rounds(n_hat, candidate_cells, lambda r: distaim_sigma(rho, r, n_columns, alpha), max_rounds)


def flaim_proxy_rounds(variant: str, sample_rate: float) -> bool:
    """Whether a FLAIM run measures every 1-way again in rounds 1..T-1 for its proxy: private with
    sampled silos (``p < 1``). With every silo in every round the initial 1-ways already are the
    round's silos' (the proxy), and measuring them again would spend ``d`` of every round's
    ``d + 2s - 1`` unit releases on them."""
    return variant == "private" and sample_rate < 1


def flaim_pooled_sums(variant: str) -> bool:
    """Whether a FLAIM run sums each chosen marginal over every silo of the round (private), not
    over the silos that chose it (naive and oracle, the paper's aggregation)."""
    return variant == "private"


def flaim_anneals(rounds: int | None, sample_rate: float, local_steps: int, variant: str) -> bool:
    """Whether a FLAIM run follows AIM's annealed schedule (``flaim``, step 5): its rounds planned,
    every silo in every round, one local step and private's pooled sums, where a round costs what
    one of AIM's does (``eps^2 / 8 + 1 / (2 sigma^2)``)."""
    return rounds is None and sample_rate == 1.0 and local_steps == 1 and flaim_pooled_sums(variant)


def plan_flaim_annealed(
    n_hat: float, rho: float, alpha: float, n_columns: int, candidate_cells: Sequence[int], n_silos: int
) -> int:
    """An annealing FLAIM's planned rounds: AIM's plan (``plan_aim``) for the rows its sums are
    worth, ``N_hat / sqrt(K)``: a round's ``c`` sums over every silo carry ``sigma sqrt(c)``, with
    ``c`` up to ``K`` (``plan_flaim``'s private rule at ``p = 1``)."""
    return plan_aim(n_hat / math.sqrt(max(1, n_silos)), rho, alpha, n_columns, candidate_cells)


def flaim_gaussians(rounds: int, local_steps: int, n_columns: int, proxy_rounds: bool) -> int:
    """Unit-sensitivity Gaussian releases of a FLAIM run: ``T (2s - 1) + d``, or
    ``T (2s - 1) + max(T, 1) d`` with the proxy's 1-ways in rounds 1..T-1 (``flaim_proxy_rounds``)."""
    proxies = max(rounds, 1) * n_columns if proxy_rounds else n_columns
    return rounds * (2 * local_steps - 1) + proxies


def flaim_sigma(rho: float, rounds: int, local_steps: int, n_columns: int, alpha: float, proxy_rounds: bool) -> float:
    """``sqrt(G / (2 alpha rho))``; ``sqrt(d / (2 rho))`` without rounds (no selection to pay for)."""
    if rounds == 0:
        return oneway_only_sigma(rho, n_columns)
    return math.sqrt(flaim_gaussians(rounds, local_steps, n_columns, proxy_rounds) / (2.0 * alpha * rho))


def plan_flaim(
    n_hat: float,
    rho: float,
    alpha: float,
    n_columns: int,
    candidate_cells: Sequence[int],
    max_rounds: int,
    local_steps: int,
    variant: str,
    n_silos: int,
    sample_rate: float,
) -> int:
    """Planned FLAIM rounds. Naive and oracle sum a chosen marginal over the silos that chose it,
    which may be a single one: the rows behind a measurement are taken as one silo's share,
    ``N_hat / K``. Private sums it over the ``m = max(1, p K)`` silos expected in a round, with
    ``sigma sqrt(m)`` at most (``flaim.pooled_sums_noise``): as ``N_hat sqrt(m) / K`` rows with
    ``sigma``."""
    sampled = max(1.0, sample_rate * n_silos)
    return planned_rounds(
        n_hat * (math.sqrt(sampled) if flaim_pooled_sums(variant) else 1.0) / n_silos,
        candidate_cells,
        lambda r: flaim_sigma(rho, r, local_steps, n_columns, alpha, flaim_proxy_rounds(variant, sample_rate)),
        max_rounds,
    )


# ---- Fed-TDA -------------------------------------------------------------------------------------

#: The covariance is worth its full share when one entry of the copula's correlation estimate,
#: ``B^2 / (N_hat sqrt(2 rho_cov))``, has at most this noise at that share.
CORRELATION_NOISE = 0.1
#: The covariance's share of the budget left after the total: the research code's 40% when it is
#: worth measuring, else 5% (enough for the correlations near +-1 that survive the thresholding).
MIN_COVARIANCE_SHARE = 0.05
MAX_COVARIANCE_SHARE = 0.4
#: A refined bin is planned while it expects this many times its noise in rows.
REFINED_BIN_SIGMAS = 8.0


@dataclass(frozen=True)
class FedTDAPlan:
    """Fed-TDA's budget (rho of the categorical histograms, the numeric histograms and the second
    moments) and the refinement of the numeric bins."""

    rho_cat: float
    rho_num: float
    rho_cov: float
    refine: int

    def record(self) -> dict:
        """The plan as the ledger records it (``details.schedule``)."""
        return {
            "rho_categorical": self.rho_cat,
            "rho_numeric": self.rho_num,
            "rho_covariance": self.rho_cov,
            "refine": self.refine,
        }


def plan_fedtda(
    n_hat: float, rho: float, numeric_cells: Sequence[int], n_categorical: int, bound: float, max_refine: int
) -> FedTDAPlan:
    """The covariance's share from the noise of its correlations, the rest to the histograms at
    equal budget per column, and the refinement from the numeric histograms' noise (module
    docstring); ``numeric_cells`` are the numeric columns' cells in the domain."""
    n_num = len(numeric_cells)
    d = n_categorical + n_num
    noise = bound**2 / (n_hat * math.sqrt(2.0 * MAX_COVARIANCE_SHARE * rho))
    share = MAX_COVARIANCE_SHARE if noise <= CORRELATION_NOISE else MIN_COVARIANCE_SHARE
    hist = (1.0 - share) * rho
    rho_cat, rho_num = hist * n_categorical / d, hist * n_num / d
    refine = 1
    if n_num:
        sigma = math.sqrt(n_num / (2.0 * rho_num))
        widest = max(numeric_cells)
        for r in (2, 4):
            if r <= max_refine and n_hat / (widest * r) >= REFINED_BIN_SIGMAS * sigma:
                refine = r
    return FedTDAPlan(rho_cat, rho_num, share * rho, refine)
