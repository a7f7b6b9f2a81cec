"""Fed-TDA (Duan et al.) with every released statistic differentially private: a Gaussian copula
over mode-normalised numeric columns and ICDM-encoded categorical columns.

Budget ``rho`` split between four releases, each one Gaussian mechanism over the sum across silos
(``split`` as given, or planned: 1% of ``rho`` on the total and the rest by ``allocation.plan_fedtda``):
  1. the row total ``N`` (sensitivity 1);
  2. every categorical column's histogram, jointly (L2 sensitivity ``sqrt(n_d)``);
  3. every numeric column's histogram, jointly (``sqrt(n_c)``), on its public bins each split in
     ``refine`` (at most 4, planned from the rows; whole-number columns at most one bin per value),
     so the copula can place point masses (Adult's zero capital gains) within a schema bin. Every
     histogram is projected onto the nearest one whose total is the inverse-variance combination of
     the noisy total and the histograms' sums; counts of split bins below ``threshold`` (2) sigma are
     set to zero, and the server fits a 1-D Gaussian mixture to each numeric histogram (weighted EM
     on the bin centres, a fixed number of iterations, components below weight 0.005 pruned): all
     post-processing;
  4. the upper triangle of ``sum_rows x x^T`` of the silos' encoded rows, whose norm is clipped to
     ``B = norm_factor sqrt(l)``: one record changes it by ``x x^T``, of Frobenius norm at most
     ``B^2``, the L2 sensitivity of the released vector.
With a target column (``--target Y``, categorical), its 2-way marginal with each other column is
released after the total, jointly (L2 sensitivity ``sqrt(d - 1)``), with a share ``s`` of what the
total left (``target``); the other releases share the rest, and each synthetic row's label is drawn
from those 2-ways given its other columns (``model.label``) instead of from the copula.
Each silo encodes its own rows with the public parameters of steps 2 and 3 (a row of ``l = 2 n_c +
n_d`` coordinates): a categorical value, and a numeric value's mixture component (drawn from its
posterior; "missing" is one more component), become ``Phi^-1(u)`` with ``u`` uniform on the
category's interval of the ICDM (categories ordered by noisy frequency, ascending, ties by
position; mixture components by their means, so that the code grows with the value; trimmed by
``lambda`` at both ends); a numeric value ``c`` in component ``t`` also becomes
``a = Phi^-1(F_t(c))``, its mode-specific normalisation by the component's share of the noisy
histogram (``ModeCDF``; ``|a| <= Phi^-1(1 - lambda)``). The research code's
``(c - mu_t) / (4 sigma_t)`` assumes every mode is Gaussian and smears the point masses of columns
such as Adult's capital gains across bins. Each coordinate is then ``N(0, 1)`` by construction (up
to the noise in the histograms), so the sum of the rows is not released (its expectation is 0)
and the noisy second moment over ``N_hat`` estimates the copula's correlation: unit diagonal,
off-diagonal entries hard-thresholded at the universal threshold ``sqrt(2 ln p)`` times their
noise (none kept once that reaches 1), zero between a value's code and its component's code (they
are independent by construction); it is symmetrised, its eigenvalues are clamped and it is
factorised (Cholesky, with a growing ridge if needed). Synthesis draws ``z ~ N(0, R)`` and
inverts every encoding exactly: numeric values are real numbers inside the schema's bounds (whole
numbers for integer columns), categorical values are schema categories.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence, cast

import numpy as np

from ..accounting import Accountant
from ..aggregation import Aggregator
from ..common import InputError, OptionError, Progress, Silent
from ..mechanisms import exact_sums_in_a_non_private_run, gaussian_sigma, noisy_sums
from ..model import CopulaModel, LabelTables
from ..noise import NoiseSource
from ..schema import CategoricalColumn, NumericColumn, Schema, refined
from ..silo import (
    ICDM,
    Encoding,
    MarginalsQuery,
    ModeCDF,
    NumericHistogramQuery,
    SecondMomentsQuery,
    correlation_estimate,
    fit_mixture,
    from_upper,
    mode_cdf,
    repair_correlation,
    universal_threshold,
)
from . import allocation, core
from .base import FederatedMethod, option
from .histograms import combined_total, projected
from .target import TargetOptions, target_pairs

#: How the ledger names the release of the target's 2-ways.
TARGET_QUERY = "the target's 2-way marginal with every other column"

NON_PRIVATE_WARNING = (
    "NON-PRIVATE TEST MODE: fedtda ran with exact statistics and no noise; this "
    "release has NO differential-privacy guarantee (for testing the method only)"
)


def shares_from_text(text: str) -> tuple[float, ...]:
    """``split`` as the command line writes it: comma-separated numbers."""
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise OptionError(f"split must be four comma-separated numbers, not {text!r}", "split") from None


@dataclass
class FedTDAOptions(TargetOptions):
    """Fed-TDA's options; ``split`` None plans the budget from a noisy row total
    (``allocation.plan_fedtda``)."""

    split: Sequence[float] | None = option(
        None,
        "shares of the budget for the row total, the categorical histograms, the numeric histograms and the "
        "covariance, e.g. 0.05,0.2,0.35,0.4 (default: planned from a noisy row total that costs "
        f"{allocation.TOTAL_SHARE:.0%} of the budget: the histograms get an equal share per column and the "
        f"covariance {allocation.MAX_COVARIANCE_SHARE:.0%} where its correlations can be measured, else "
        f"{allocation.MIN_COVARIANCE_SHARE:.0%})",
        flag="--split",
        metavar="N,CAT,NUM,COV",
        group="fedtda",
        from_flag=shares_from_text,
    )
    components: int = option(
        5,
        "most Gaussian-mixture components per numeric column (default {default})",
        flag="--components",
        metavar="K",
        group="fedtda",
        positive=True,
    )
    norm_factor: float = option(2.0, "encoded rows are clipped to norm norm_factor * sqrt(l) (default {default})")
    icdm_lambda: float = option(1e-4, "ICDM trims [0, 1] to [lambda, 1 - lambda] (default {default})")
    threshold: float = option(
        2.0, "noisy numeric-histogram counts below threshold x sigma count as empty (default {default})"
    )
    refine: int = option(
        4,
        "each schema bin is split in this many (1, 2 or 4) for the numeric histograms; at most this many when "
        "the budget is planned (default {default})",
    )
    non_private: bool = option(
        False,
        "TEST MODE: exact statistics, no noise, NO privacy guarantee (the ledger says so and audit fails it); "
        "for checking the method itself",
        flag="--non-private",
        group="fedtda",
    )

    def validate(self) -> None:
        """Refuse (``OptionError``) a ``split`` other than four finite non-negative shares whose total
        and covariance shares are positive, ``refine`` other than 1, 2 or 4, ``components`` below 1,
        a ``norm_factor`` not positive, and ``icdm_lambda`` outside (0, 0.5)."""
        if self.split is not None:
            if len(self.split) != 4 or any(not (0 <= x < math.inf) for x in self.split) or not sum(self.split) > 0:
                raise OptionError(
                    f"split needs four non-negative shares (total, categorical, numeric, "
                    f"covariance), not {list(self.split)}",
                    "split",
                )
            if min(self.split[0], self.split[3]) <= 0:
                raise OptionError("split: the total and the covariance need a positive share", "split")
        if self.refine not in (1, 2, 4):
            raise OptionError(f"refine must be 1, 2 or 4, not {self.refine}", "refine")
        if self.components < 1:
            raise OptionError(f"components must be at least 1, not {self.components}", "components")
        if not self.norm_factor > 0:
            raise OptionError("norm_factor must be positive", "norm_factor")
        if not 0 < self.icdm_lambda < 0.5:
            raise OptionError(f"icdm_lambda must lie in (0, 0.5), not {self.icdm_lambda}", "icdm_lambda")
        self.validate_target()

    def check_mpc(self) -> None:
        """Every Fed-TDA statistic is a declared query: nothing to refuse over MPC."""

    def check_schema(self, schema: Schema) -> None:
        """The released second moments have ``l (l + 1) / 2`` cells for ``l = n_cat + 2 n_num``
        coordinates; refused before any budget is spent when they would not fit in memory. A numeric
        column with ``atoms`` is refused: the copula's marginals are mixtures over bins, with no point
        masses."""
        from .workload import MAX_CANDIDATE_CELLS

        refuse_atoms(schema)
        self.check_target(schema)
        if self.target is not None and not isinstance(
            schema.columns[schema.names.index(self.target)], CategoricalColumn
        ):
            raise OptionError(f"fedtda's target must be a categorical column, and {self.target!r} is numeric", "target")
        n_num = sum(isinstance(c, NumericColumn) for c in schema.columns)
        n_cat = len(schema.columns) - n_num
        shares = self.split or (1.0, 1.0, 1.0, 1.0)
        for count, share, family in ((n_cat, shares[1], "categorical"), (n_num, shares[2], "numeric")):
            if count and not share > 0:
                raise OptionError(
                    f"split gives the {family} histograms no budget, but the schema has {count} "
                    f"{family} column(s); give them a positive share",
                    "split",
                )
        width = len(schema.columns) + n_num
        if width * (width + 1) // 2 > MAX_CANDIDATE_CELLS:
            raise InputError(f"fedtda's copula over {width} coordinates has too many second moments; use fewer columns")


def refuse_atoms(schema: Schema) -> None:
    """``InputError`` for a numeric column with ``atoms``: the copula's marginals are mixtures over
    bins, with no point masses, so an atom's cell would be misplaced."""
    with_atoms = next((c for c in schema.columns if isinstance(c, NumericColumn) and c.atoms), None)
    if with_atoms is not None:
        raise InputError(
            f"{schema.source}: column '{with_atoms.name}' declares \"atoms\", which fedtda's copula does not "
            'model; use another method (aim, for one) or remove "atoms"'
        )


def threat_model(agg: Aggregator) -> str:
    """The ledger's threat model of a Fed-TDA run over ``agg``."""
    return (
        "fedtda: each silo sends its row count, its histograms and the sum of outer products of its "
        f"locally encoded rows; {agg.threat_model}."
    )


# ---- the run ------------------------------------------------------------------------------------


def split_rho(rho: float, split: Sequence[float], n_cat: int, n_num: int) -> list[float]:
    """Shares of ``rho`` for (total, categorical, numeric, covariance); an absent family's share
    goes to the others in proportion."""
    shares = [split[0], split[1] if n_cat else 0.0, split[2] if n_num else 0.0, split[3]]
    total = sum(shares)
    return [rho * s / total for s in shares]


def run_fedtda(
    agg: Aggregator,
    acc: Accountant,
    noise: NoiseSource,
    opts: FedTDAOptions,
    encode_seed: int | None,
    progress: Progress | None = None,
) -> core.MethodResult:
    """Fed-TDA (module docstring) over ``agg``, every release charged to ``acc``; ``encode_seed`` seeds
    the silos' encoding randomness (with each silo's name; None: fresh)."""
    progress = progress or Silent()
    silos = agg.silo_names
    schema = agg.schema
    refuse_atoms(schema)  # before anything is released
    names = schema.names
    cat = [j for j, c in enumerate(schema.columns) if isinstance(c, CategoricalColumn)]
    num = [j for j, c in enumerate(schema.columns) if isinstance(c, NumericColumn)]
    exact = opts.non_private
    if exact:
        acc.mark_non_private(NON_PRIVATE_WARNING)
        progress.warn(NON_PRIVATE_WARNING)
    width = len(cat) + 2 * len(num)
    bound = opts.norm_factor * math.sqrt(width)

    def release(requests, sensitivity, rho_part, query):
        """Each request summed over the silos; released jointly as one Gaussian mechanism of
        L2 sensitivity ``sensitivity`` with ``rho_part`` (no noise in the non-private test mode)."""
        labelled = [(label, fn, silos) for label, fn in requests]
        if exact:
            return exact_sums_in_a_non_private_run(acc, agg, labelled), 0.0
        sigma = gaussian_sigma(sensitivity, rho_part)
        return noisy_sums(agg, acc, noise, labelled, sigma, sensitivity, query, 0), sigma

    planned = opts.split is None  # the rest planned from the noisy total (allocation.plan_fedtda)
    if planned:
        rho_n = allocation.TOTAL_SHARE * acc.rho_budget
    else:
        rho_n, rho_cat, rho_num, rho_cov = split_rho(acc.rho_budget, opts.split, len(cat), len(num))
    (n_sum,), sigma_n = release(
        [("rows", MarginalsQuery(((),)))],
        1.0,
        rho_n,
        "total number of rows" + (" (plans the schedule)" if planned else ""),
    )
    n_hat = max(1.0, float(n_sum[0]))
    label = None
    if opts.target is not None:  # its share of what the total left; the other shares shrink by as much
        rho_t = opts.target_share * (acc.remaining if planned else acc.rho_budget - rho_n)
        if not planned:
            rho_cat, rho_num, rho_cov = (r * (1.0 - opts.target_share) for r in (rho_cat, rho_num, rho_cov))
        pairs = target_pairs(names, opts.target)
        tables, _ = release(
            [(", ".join(p), MarginalsQuery((tuple(names.index(c) for c in p),))) for p in pairs],
            math.sqrt(len(pairs)),
            rho_t,
            TARGET_QUERY,
        )
        label = LabelTables.from_noisy(schema, names.index(opts.target), tables)
    refine = opts.refine
    if planned:
        plan = allocation.plan_fedtda(
            n_hat, acc.remaining, [schema.shape[j] for j in num], len(cat), bound, opts.refine
        )
        rho_cat, rho_num, rho_cov, refine = plan.rho_cat, plan.rho_num, plan.rho_cov, plan.refine
        acc.note(schedule=allocation.schedule_record(n_hat, **plan.record()))
    fine = {j: refined(cast(NumericColumn, schema.columns[j]), refine) for j in num}
    hist_cat, sigma_cat = (
        release(
            [(names[j], MarginalsQuery(((j,),))) for j in cat],
            math.sqrt(len(cat)),
            rho_cat,
            "every categorical column's histogram",
        )
        if cat
        else ([], 0.0)
    )
    hist_num, sigma_num = (
        release(
            [(names[j], NumericHistogramQuery(j, refine)) for j in num],
            math.sqrt(len(num)),
            rho_num,
            f"every numeric column's histogram on its public bins (each schema bin split in {refine})",
        )
        if num
        else ([], 0.0)
    )
    if not exact:  # the total, and the sum of every histogram, estimate the rows: combined
        n_hat = combined_total(
            [n_hat] + [float(h.sum()) for h in hist_cat + hist_num],
            [sigma_n**2] + [h.size * sigma_cat**2 for h in hist_cat] + [h.size * sigma_num**2 for h in hist_num],
        )
    # the nearest histograms with that total; counts of refined bins below threshold x sigma cannot
    # be told from empty ones: treat them as empty
    cut = opts.threshold * sigma_num if refine > 1 else 0.0
    hist_num = [np.where(h < cut, 0.0, h) for h in (projected(h, n_hat) * n_hat for h in hist_num)]
    progress.update(acc.rho_spent / acc.rho_budget, "released the total and the column histograms")

    icdm: list[ICDM | None] = [None] * len(names)
    modes: list[ModeCDF | None] = [None] * len(names)
    for j, h in zip(cat, hist_cat):
        icdm[j] = ICDM(_probabilities(h, n_hat), opts.icdm_lambda)
    for j, h in zip(num, hist_num):
        col = fine[j]
        mix = fit_mixture(col, h[: col.n_bins], opts.components)
        modes[j] = mode_cdf(col, h[: col.n_bins], mix, opts.icdm_lambda)
        comp_mass = modes[j].cum[-1]
        missing = [max(float(h[col.missing_cell]), 0.0)] if col.missing else []
        # components in the order of their means (then "missing"), so the code is monotone in the value
        order = np.concatenate([np.argsort(mix.means, kind="stable"), np.arange(len(missing)) + len(comp_mass)])
        icdm[j] = ICDM(_probabilities(np.concatenate([comp_mass, missing]), n_hat), opts.icdm_lambda, order)
    encoding = Encoding(schema, icdm, modes, bound)
    agg.broadcast(encoding.public_arrays(), silos, round_index=0)

    (g,), sigma_cov = release(
        [("second moments of encoded rows", SecondMomentsQuery(encoding, encode_seed))],
        encoding.bound**2,
        rho_cov,
        f"upper triangle of the sum of x x^T of the encoded rows (rows clipped to norm {encoding.bound:.4g})",
    )
    # the universal threshold: pure noise survives in none of the p entries with high probability
    corr = correlation_estimate(from_upper(g, width) / n_hat, universal_threshold(width) * sigma_cov / n_hat)
    for k in encoding.value_coordinates():  # a value's code is uniform given its component: no correlation
        corr[k, k + 1] = corr[k + 1, k] = 0.0
    _, factor = repair_correlation(corr)
    model = CopulaModel(encoding, factor, n_hat, label=label)
    progress.log(f"copula over {width} coordinates")
    info = {
        "coordinates": width,
        "components": {names[j]: modes[j].components for j in num},
        "oneway_sigmas": _oneway_sigmas(schema, fine, rho_cat, rho_num, exact),
        "traffic": agg.traffic_summary(),
    }
    return core.MethodResult(model, model, 1, [], info)


def _oneway_sigmas(schema: Schema, fine: dict, rho_cat: float, rho_num: float, exact: bool) -> list[float]:
    """Per column, the noise per schema cell of its released histogram: ``sqrt(n_cat / (2 rho_cat))``
    for a categorical column; for a numeric one ``sqrt(n_num / (2 rho_num))`` per refined bin, and a
    schema bin sums ``refined bins / schema bins`` of them (thresholding aside)."""
    if exact:
        return [0.0] * len(schema.columns)
    n_cat = sum(isinstance(c, CategoricalColumn) for c in schema.columns)
    n_num = len(schema.columns) - n_cat
    out = []
    for j, col in enumerate(schema.columns):
        if isinstance(col, CategoricalColumn):
            out.append(math.sqrt(n_cat / (2.0 * rho_cat)))
        else:
            out.append(math.sqrt(n_num / (2.0 * rho_num) * fine[j].n_bins / col.n_bins))
    return out


def _probabilities(counts: np.ndarray, n_hat: float) -> np.ndarray:
    """The nearest histogram with total ``n_hat`` (``projected``) plus a small floor (so every
    category keeps an interval), normalised."""
    c = projected(counts, n_hat) * n_hat + max(n_hat, 1.0) * 1e-6
    return c / c.sum()


#: Fed-TDA in the registry.
FEDTDA = FederatedMethod("fedtda", FedTDAOptions, min_silos=1, graphical=False, runner=run_fedtda, threat=threat_model)
