"""Moments, quantiles and point masses of each numeric column, real against synthetic (not private).

Histograms on the schema's bins hide two faults a user meets first: a heavy tail drawn too heavy or
too light (the mean moves while most bins look right) and a point mass smeared over its bin (a
value at a limit of detection held by most real rows and by none of the synthetic ones). Per
numeric column, over its present (non-missing) values ``x_1..x_n`` and ``y_1..y_m``:

* ``mean``: ``sum(x) / n`` against ``sum(y) / m``, their difference ``syn - real`` and ratio;
* ``quantiles``: the ``q``-quantiles for ``q`` in ``QUANTILES`` (linear interpolation between order
  statistics), each with its difference;
* ``atoms``: for each value ``v`` the schema declares as a point mass (the column's ``atoms``), the
  share of rows equal to ``v`` (over all rows, missing ones included), real against synthetic;
* ``mode``: the most common real value and its share of the real rows against its synthetic
  share, when that share is at least ``POINT_MASS`` (a point mass the schema does not declare).

Computed from the real rows: it belongs with the quality report and ``evaluate``'s output, handled
like the real data, never with the release.
"""

from __future__ import annotations

import html
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ..schema import NumericColumn, Schema

#: The quantiles compared, tails first and last: 1%, 5%, quartiles, 95%, 99%.
QUANTILES = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)
#: The least share of real rows at which the most common value is reported as a point mass.
POINT_MASS = 0.05
#: Relative tolerance of "equal to v" (values read back from text, drawn values in floating point).
EQUAL_RTOL = 1e-9


def quantile_label(q: float) -> str:
    """``0.05`` as ``"5%"``, ``0.5`` as ``"50%"``."""
    return f"{100 * q:g}%"


def numeric_summary(
    real_num: Mapping[str, pd.Series], syn_num: Mapping[str, pd.Series], schema: Schema
) -> dict[str, dict[str, Any]]:
    """Per numeric column of ``schema``, the module docstring's measures as a JSON-ready dict, from
    each side's values as floats (NaN where missing, ``utility.numeric_columns``); a measure with
    no present value on a side is None there."""
    out: dict[str, dict[str, Any]] = {}
    for col in schema.columns:
        if not isinstance(col, NumericColumn):
            continue
        r = real_num[col.name].to_numpy(dtype=float)
        s = syn_num[col.name].to_numpy(dtype=float)
        a, b = r[np.isfinite(r)], s[np.isfinite(s)]
        entry: dict[str, Any] = {
            "present": {"real": int(len(a)), "synthetic": int(len(b))},
            "mean": _pair(_mean(a), _mean(b), ratio=True),
            "quantiles": {quantile_label(q): _pair(_quantile(a, q), _quantile(b, q)) for q in QUANTILES},
            "atoms": [{"value": float(v), **_pair(_share(r, v), _share(s, v))} for v in col.atoms],
        }
        if len(a):
            values, counts = np.unique(a, return_counts=True)
            top = int(np.argmax(counts))  # the smallest of tied values
            share = float(counts[top]) / len(r)
            if share >= POINT_MASS:
                v = float(values[top])
                entry["mode"] = {"value": v, **_pair(share, _share(s, v))}
        out[col.name] = entry
    return out


def _mean(x: np.ndarray) -> float | None:
    return float(x.mean()) if len(x) else None


def _quantile(x: np.ndarray, q: float) -> float | None:
    return float(np.quantile(x, q)) if len(x) else None


def _share(x: np.ndarray, v: float) -> float | None:
    """The share of all ``x`` (NaN for missing) equal to ``v`` within ``EQUAL_RTOL``."""
    if not len(x):
        return None
    return float(np.mean(np.abs(x - v) <= EQUAL_RTOL * max(1.0, abs(v))))


def _pair(real: float | None, syn: float | None, ratio: bool = False) -> dict[str, float | None]:
    """``{"real", "synthetic", "difference"}`` (synthetic minus real), with ``"ratio"`` when asked."""
    out = {"real": real, "synthetic": syn, "difference": None}
    if real is not None and syn is not None:
        out["difference"] = syn - real
    if ratio:
        out["ratio"] = syn / real if real is not None and syn is not None and real != 0 else None
    return out


# ---- rendering ----------------------------------------------------------------------------------------
def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def _value(v: float) -> str:
    return f"{v:.6g}"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1%}"


def _ratio(p: dict[str, Any]) -> str:
    return "" if p.get("ratio") is None else f" (\u00d7{p['ratio']:.2f})"


def point_masses(entry: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The column's point masses to show: each declared atom, then the most common real value when
    it is not one of them, each as ``(what, measure)``."""
    out = [(f"atom {_value(a['value'])}", a) for a in entry["atoms"]]
    mode = entry.get("mode")
    if mode is not None and all(a["value"] != mode["value"] for a in entry["atoms"]):
        out.append((f"most common real value {_value(mode['value'])}", mode))
    return out


def summary_html(summary: dict[str, dict[str, Any]]) -> str:
    """One HTML table row per numeric column (means, quantiles, point masses), each cell ``real /
    synthetic`` with the difference below; every text escaped."""
    labels = [quantile_label(q) for q in QUANTILES]
    head = "<tr><th>column</th><th>mean</th>" + "".join(f"<th>{x}</th>" for x in labels)
    head += "<th>point masses (share of rows)</th></tr>"

    def cell(p: dict[str, Any], extra: str = "") -> str:
        diff = p["difference"]
        below = "" if diff is None else f"<br><small>diff {diff:+.4g}{html.escape(extra)}</small>"
        return f"<td>{_num(p['real'])} / {_num(p['synthetic'])}{below}</td>"

    rows = []
    for name, e in summary.items():
        masses = "<br>".join(
            f"{html.escape(what)}: {_pct(m['real'])} / {_pct(m['synthetic'])}" for what, m in point_masses(e)
        )
        rows.append(
            f"<tr><th>{html.escape(name)}</th>{cell(e['mean'], _ratio(e['mean']))}"
            + "".join(cell(e["quantiles"][x]) for x in labels)
            + f"<td>{masses or 'none'}</td></tr>"
        )
    return f'<table class="summary numeric">{head}{"".join(rows)}</table>'


def summary_lines(summary: dict[str, dict[str, Any]], escape=lambda s: s) -> list[str]:
    """Two lines per numeric column for a terminal: mean and quantiles (real / synthetic), then
    its point masses; ``escape`` makes a column name safe to print."""
    lines = []
    for name, e in summary.items():
        m, q = e["mean"], e["quantiles"]
        tails = ", ".join(f"{x} {_num(q[x]['real'])} / {_num(q[x]['synthetic'])}" for x in q)
        lines.append(
            f"'{escape(name)}' real / synthetic: mean {_num(m['real'])} / {_num(m['synthetic'])}{_ratio(m)}; {tails}"
        )
        for what, p in point_masses(e):
            lines.append(f"  {what}: {_pct(p['real'])} of real rows / {_pct(p['synthetic'])} of synthetic rows")
    return lines
