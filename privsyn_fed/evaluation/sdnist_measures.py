"""Two of SDNist v2.3's measures beside its k-marginal score (``sdnist/metrics/propensity.py`` and
``sdnist/metrics/unique_exact_matches.py``), reported by ``evaluate`` with the k-marginal. Computed
from the real rows: not differentially private.

* **pMSE** (propensity mean squared error): the two tables' common columns, binned as the k-marginal
  bins them (``kmarginal.binned``), each column's codes numbered over both tables; a decision tree
  of depth ``PMSE_DEPTH`` (CART, seeded) learns to tell the real rows (0) from the synthetic ones
  (1) and gives every row of both its probability ``p_i`` of being synthetic;
  ``pMSE = mean_i (p_i - c)^2`` with ``c = n_syn / (n_real + n_syn)``. 0: the tree cannot tell the
  tables apart; at most ``c (1 - c)`` (0.25 for tables of equal size): it tells every row.
* **Unique exact matches**: the real rows whose values (every common column, as text; in a column
  whose values are all numbers, each number written one way, ``3`` for ``3.0``; a missing cell as
  ``N``) occur once in the real table, and how
  many of them occur among the synthetic rows, also as a share of the unique real rows. A
  disclosure measure: lower is better, and a release of the real rows would match every one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..schema import numbers_as_text
from .kmarginal import NOT_APPLICABLE, _as_text, binned

#: Depth of the tree that tells real from synthetic rows (SDNist's).
PMSE_DEPTH = 5


def pmse(real: pd.DataFrame, synthetic: pd.DataFrame, seed: int = 0) -> dict[str, Any]:
    """The pMSE of ``synthetic`` against ``real`` (module docstring): ``score``, its ``largest``
    possible value ``c (1 - c)``, the tree's ``depth`` and the rows."""
    from sklearn.tree import DecisionTreeClassifier

    if len(real) == 0 or len(synthetic) == 0:
        raise ValueError("pMSE: both tables need rows")
    r, s, _ = binned(real, synthetic)
    both = pd.concat([r, s], ignore_index=True)
    x = np.stack([pd.factorize(both[name], sort=True)[0] for name in both.columns], axis=1)
    y = np.r_[np.zeros(len(r), dtype=np.int8), np.ones(len(s), dtype=np.int8)]
    tree = DecisionTreeClassifier(max_depth=PMSE_DEPTH, random_state=seed).fit(x, y)
    p = tree.predict_proba(x)[:, list(tree.classes_).index(1)]
    c = len(s) / len(both)
    return {
        "score": float(np.mean((p - c) ** 2)),
        "largest": float(c * (1 - c)),
        "depth": PMSE_DEPTH,
        "rows": {"real": len(r), "synthetic": len(s)},
    }


def _values(real: pd.Series, synthetic: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Both columns as text (``kmarginal._as_text``); when every present value of both is a number,
    each number as ``numbers_as_text`` writes it."""
    r, s = _as_text(real), _as_text(synthetic)
    both = pd.concat([r, s], ignore_index=True)
    present = both != NOT_APPLICABLE
    numbers = pd.to_numeric(both.where(present), errors="coerce")
    if numbers[present].isna().any():
        return r, s
    text = pd.Series(numbers_as_text(numbers.to_numpy(dtype=float)), index=both.index).where(present, NOT_APPLICABLE)
    return pd.Series(text[: len(r)].to_numpy(), index=r.index), pd.Series(text[len(r) :].to_numpy(), index=s.index)


def unique_exact_matches(real: pd.DataFrame, synthetic: pd.DataFrame) -> dict[str, Any]:
    """The real rows unique in ``real`` that ``synthetic`` holds exactly (module docstring):
    ``unique_real`` (how many, and ``unique_share`` of the real rows), ``matched`` and
    ``matched_share`` (of the unique real rows; None when there are none)."""
    columns = sorted(set(real.columns) & set(synthetic.columns))
    if not columns:
        raise ValueError("unique exact matches: the tables have no column in common")
    pairs = {c: _values(real[c], synthetic[c]) for c in columns}
    r = pd.DataFrame({c: pair[0] for c, pair in pairs.items()})
    s = pd.DataFrame({c: pair[1] for c, pair in pairs.items()})
    once = r[~r.duplicated(keep=False)]
    matched = int(once.merge(s.drop_duplicates(), how="inner", on=columns).shape[0])
    return {
        "unique_real": len(once),
        "unique_share": len(once) / len(r) if len(r) else None,
        "matched": matched,
        "matched_share": matched / len(once) if len(once) else None,
    }
