"""A plain draft's bins for a skewed numeric column: cut at its quantiles and at its extremes.

Equal widths over an income's bounds put most of its values in one bin, and a release draws values
evenly (or along the frequency polygon) inside a bin: in a draft of NIST's national excerpt,
``PINCP``'s bins of 93,750 over -1,000,000..2,000,000 (its values: -9,000..1,327,000) gave a fifth
of the synthetic people a negative income, against 0.1% of the real ones. So a plain draft, which
reads the rows in the clear anyway, measures on a uniform sample of a numeric column's numbers
(``profile.EDGE_SAMPLE``; the values that are proposed atoms left out, as their cells are their
own) the share that the fullest of its ``bins`` equal-width bins would hold. Above
``SKEWED_SHARE``, and above twice an even share (``2 / bins``), or always with ``edges =
"quantiles"``, the column gets ``edges`` instead: the sample's ``k / bins`` quantiles, the
column's least and greatest number (so that the margins its rounded bounds add stay empty bins)
and 0 where its numbers change sign (a loss is not a small gain), each to 4 significant digits
(whole numbers for an integer column), strictly inside its bounds, once each. Drafted from the
national excerpt so, ``PINCP`` came out 0.17% negative in an AIM release at epsilon 1.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

#: A numeric column whose fullest equal-width bin would hold more than this share of its numbers
#: (atoms aside; and more than twice an even share) is cut at its quantiles.
SKEWED_SHARE = 0.25
#: A plain draft's choices of bins: quantiles where equal widths are skewed (``auto``, the default),
#: or equal widths or quantiles for every numeric column.
EDGE_CHOICES = ("auto", "uniform", "quantiles")


def binned_numbers(sample: np.ndarray, atoms: Sequence[float]) -> np.ndarray:
    """The sampled numbers that fall in bins: every one that is not an atom."""
    return sample[~np.isin(sample, np.asarray(atoms, dtype=float))] if len(atoms) else sample


def fullest_share(values: np.ndarray, lower: float, upper: float, bins: int) -> float:
    """The share of ``values`` that the fullest of ``bins`` equal-width bins over ``[lower, upper]``
    holds (0 for no values)."""
    if not len(values) or not upper > lower:
        return 0.0
    counts, _ = np.histogram(np.clip(values, lower, upper), bins=bins, range=(lower, upper))
    return float(counts.max() / len(values))


def round_cut(value: float, integer: bool) -> float:
    """A cut point as a schema writes it: the whole number at or above ``value`` for an integer
    column, else ``value`` to 4 significant digits."""
    return float(math.ceil(value)) if integer else float(f"{value:.4g}")


def quantile_edges(
    values: np.ndarray, lower: float, upper: float, bins: int, integer: bool, least: float, most: float
) -> list:
    """Cut points at the ``k / bins`` quantiles of ``values`` (``k = 1 .. bins - 1``), at the
    column's ``least`` and ``most`` numbers, and at 0 between them, rounded as the module docstring
    says, strictly inside ``(lower, upper)``, sorted, once each."""
    if not len(values):
        return []
    qs = [*np.quantile(values, np.arange(1, bins) / bins), least, most, *([0.0] if least < 0 < most else [])]
    cuts = {round_cut(q, integer) for q in qs}
    return [int(c) if integer else c for c in sorted(c for c in cuts if lower < c < upper)]


def cut_skewed(
    choice: str, sample: np.ndarray | None, spec: dict, least: float, most: float
) -> tuple[dict, str | None]:
    """A drafted numeric ``spec`` with ``edges`` (``quantile_edges``; ``least`` and ``most``: the
    column's extreme numbers) in place of ``bins``, and the note that says why; ``spec`` unchanged
    and None where its equal widths stay (``choice``: one of ``EDGE_CHOICES``; a categorical spec,
    or no sample, is returned as it is)."""
    if choice == "uniform" or sample is None or "bins" not in spec:
        return spec, None
    lower, upper, bins = float(spec["lower"]), float(spec["upper"]), int(spec["bins"])
    values = binned_numbers(sample, spec.get("atoms", ()))
    share = fullest_share(values, lower, upper, bins)
    if choice == "auto" and share <= max(SKEWED_SHARE, 2 / bins):
        return spec, None
    cuts = quantile_edges(values, lower, upper, bins, bool(spec.get("integer")), least, most)
    if not cuts:
        return spec, None
    why = f"one of {bins} bins of equal width would hold {share:.0%} of its numbers; " if choice == "auto" else ""
    note = (
        f"column '{spec['name']}': {why}cut into {len(cuts) + 1} bins at its quantiles and at its least and "
        'greatest values ("edges"; --edges uniform keeps equal widths)'
    )
    return {**{k: v for k, v in spec.items() if k != "bins"}, "edges": cuts}, note
