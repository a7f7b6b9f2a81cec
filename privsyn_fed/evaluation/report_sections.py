"""The quality report's sections: the summary table, the per-column distributions, the numeric
summary, pairwise association, the workload, per-silo and constraint tables, TSTR and DCR; each
with its one-line reading guide."""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import pandas as pd

from ..schema import NumericColumn, Schema
from .report_figures import (
    MAX_MARGINALS,
    _categorical_figure,
    _dcr_figure,
    _Figures,
    _heatmap,
    _numeric_figure,
    _tstr_figure,
    _workload_figure,
)
from .report_html import Section, _figure, _number, _section


def _columns_section(figures: _Figures, schema: Schema, real, syn, shapes: dict[str, dict[str, float]]) -> Section:
    from .utility import marginal_shares

    items = []
    for j, col in enumerate(schema.columns):
        r, s = marginal_shares(real, schema.shape, [j]), marginal_shares(syn, schema.shape, [j])
        m = shapes[col.name]
        note = f"total variation {m['tv']:.3f}" + (f", KS {m['ks']:.3f}" if "ks" in m else "")
        if isinstance(col, NumericColumn):
            svg = _numeric_figure(figures, col, r, s, note)
        else:
            svg = _categorical_figure(figures, col, r, s, note)
        items.append(_figure(svg))
    return _section(
        "Columns: real and synthetic distributions",
        "one figure per column, shares of rows on the schema's bins (categories, numeric bins, missing as "
        "its own bar); good: the orange synthetic bars or line follow the blue real ones, and a total "
        "variation near 0 (it is half the summed gap between the two, between 0 and 1).",
        '<div class="grid">' + "".join(items) + "</div>",
        "columns",
    )


def _numeric_section(ev: dict[str, Any], real_df: pd.DataFrame, syn_df: pd.DataFrame, schema: Schema) -> Section:
    """Means, quantiles and point masses of the numeric columns (``numeric_summary``): ``ev``'s, or
    computed here when ``ev`` lacks them."""
    from .numeric_summary import numeric_summary, summary_html
    from .utility import numeric_columns

    found = ev.get("numeric") or numeric_summary(
        numeric_columns(real_df, schema), numeric_columns(syn_df, schema), schema
    )
    return _section(
        "Numeric columns: means, quantiles and point masses",
        "each cell is real / synthetic over the column's present values, with the difference (synthetic - real) "
        "below; good: small differences in the mean and in the tails (1%, 5%, 95%, 99%), which the histograms "
        "hide. Point masses are shares of all rows equal to one value: the schema's declared atoms, and the most "
        "common real value when it holds at least 5% of the real rows; a synthetic share far below the real one "
        "means the value was smeared over its bin.",
        summary_html(found),
        "numeric",
    )


def _association_section(figures: _Figures, schema: Schema, real, syn) -> Section:
    from .utility import association_matrix

    if len(schema.columns) < 2:
        return _section("Pairwise association", "needs at least two columns.", "", "association")
    names = schema.names
    a_real, a_syn = association_matrix(real, schema.shape), association_matrix(syn, schema.shape)
    diff = a_syn - a_real
    gap = float(np.nanmean(np.abs(diff))) if np.isfinite(diff).any() else float("nan")
    body = '<div class="grid">' + "".join(
        _figure(_heatmap(figures, names, m, title, diverging))
        for m, title, diverging in (
            (a_real, "real", False),
            (a_syn, "synthetic", False),
            (diff, "difference (synthetic - real)", True),
        )
    )
    body += "</div>"
    body += (
        "<p>Measure: bias-corrected Cram\u00e9r's V (Bergsma, 2013) of each pair's 2-way table on the schema's "
        "bins: numeric columns on their bins, categories as they are, missing as a cell of its own, so one "
        "measure serves numeric, categorical and mixed pairs (0: independent, 1: one column determines the "
        f"other; grey: undefined, a constant column). Mean absolute difference: {gap:.3f}.</p>"
    )
    return _section(
        "Pairwise association",
        "good: the synthetic heatmap looks like the real one and the difference map is pale (near 0); "
        "red cells are relationships the synthetic data exaggerates, blue ones it weakens or lost.",
        body,
        "association",
    )


def _workload_section(figures: _Figures, schema: Schema, workload, errors: np.ndarray) -> Section:
    if not len(errors):
        return _section("Workload error by marginal", "the workload is empty: nothing to show.", "", "workload")
    shown = min(len(errors), MAX_MARGINALS)
    degree = len(workload[0]) if workload else 0
    caption = (
        f"{len(errors)} {degree}-way marginals (the workload that privsyn-fed evaluate scores); "
        + (f"the {shown} largest errors are shown, " if shown < len(errors) else "all are shown, ")
        + f"the dashed line is their mean, the workload error {float(errors.mean()):.4f}."
    )
    return _section(
        "Workload error by marginal",
        "each dot is one marginal's L1 distance between the real and synthetic shares of its cells; good: "
        "every dot near 0 and none far to the right of the mean (a marginal standing out names the "
        "columns whose joint distribution the release got wrong).",
        _figure(_workload_figure(figures, schema.names, workload, errors), html.escape(caption)),
        "workload",
    )


def _tstr_section(figures: _Figures, tstr: dict[str, Any]) -> Section:
    guide = (
        "a gradient-boosted tree is trained on the synthetic rows and on the real rows and both are tested "
        "on the holdout; good: the synthetic bar close to the real one, and both well above chance (0.5)."
    )
    if tstr["auc_synthetic"] is None or tstr["auc_real"] is None:
        body = f"<p>Not computed: the holdout holds a single value of '{html.escape(tstr['label'])}'.</p>"
    else:
        body = _figure(_tstr_figure(figures, tstr))
    return _section("Train on synthetic, test on real (ROC-AUC)", guide, body, "tstr")


def _dcr_section(figures: _Figures, d_train: np.ndarray, d_hold: np.ndarray) -> Section:
    closer = float(np.mean(d_train < d_hold) + 0.5 * np.mean(d_train == d_hold))
    caption = (
        f"{len(d_train)} synthetic rows; median distance {np.median(d_train):.3f} to the real rows and "
        f"{np.median(d_hold):.3f} to the holdout; {closer:.1%} closer to the real rows (ties count half); "
        f"at distance 0: {np.mean(d_train == 0):.1%} from a real row, {np.mean(d_hold == 0):.1%} from a holdout "
        "row. Distances are on numeric bins scaled to [0, 1] and one-hot categories."
    )
    return _section(
        "Distance to closest record",
        "good: the two histograms overlap and about 50% of synthetic rows sit closer to the real rows than "
        "to the holdout; synthetic rows much closer to the real rows than to the holdout (a pile at 0 for "
        "the real rows only) suggest copied records.",
        _figure(_dcr_figure(figures, d_train, d_hold), html.escape(caption)),
        "dcr",
    )


def _per_silo_section(per_silo: dict[str, Any]) -> Section:
    """A table of each silo's rows, share, mean total variation and workload error (``per_silo``)."""
    head = "<tr><th>silo</th><th>real rows</th><th>synthetic rows</th><th>share (real / synthetic)</th>"
    head += "<th>mean total variation</th><th>workload error</th></tr>"
    rows = []
    for name, e in per_silo["silos"].items():
        cells = [
            name,
            f"{e['rows']['real']:,}",
            f"{e['rows']['synthetic']:,}",
            f"{e['share']['real']:.1%} / {e['share']['synthetic']:.1%}",
            _number(e["mean_tv"]),
            _number(e["workload_error"]),
        ]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    return _section(
        f"Per silo ('{per_silo['column']}')",
        "each silo's rows compared within the silo. A release keeps each silo's share of the rows and the "
        "marginals it measured together with the silo column, not every distribution within a silo. Good: the "
        "shares agree; errors well above the union's show distributions within a silo the release did not measure.",
        f'<table class="summary">{head}{"".join(rows)}</table>',
        "per-silo",
    )


def _constraints_section(rows: list[dict[str, Any]]) -> Section:
    """A table of the schema's public constraints and the real and synthetic rows that break each."""
    cells = "".join(
        f"<tr><td>{html.escape(r['constraint'])}</td><td><code>{html.escape(r['rule'])}</code></td>"
        + "".join(f"<td>{r[k]['rows']:,} ({r[k]['share']:.2%})</td>" for k in ("real", "synthetic"))
        + "</tr>"
        for r in rows
    )
    head = "<tr><th>Constraint</th><th>Rule</th><th>Real rows breaking it</th><th>Synthetic rows breaking it</th></tr>"
    return _section(
        "Public constraints",
        "the schema's constraints name combinations of values that never occur. A release made with them never "
        "draws a row that breaks one (its synthetic count is 0); real rows that break one point to a fault in "
        "the data or in the constraint.",
        f"<table>{head}{cells}</table>",
        "constraints",
    )


def _summary(ev: dict[str, Any]) -> Section:
    w, rows = ev["workload"], ev["rows"]
    items = [
        ("Rows", ", ".join(f"{k} {v:,}" for k, v in rows.items())),
        (
            "Workload error",
            f"{_number(w['error'])} (mean L1 over {w['size']} {w['degree']}-way marginals, seed {w['seed']}; 0 to 2)",
        ),
        ("Mean total variation per column", _number(ev["mean_tv"])),
    ]
    if ev.get("mean_ks") is not None:
        items.append(("Mean Kolmogorov-Smirnov (numeric columns)", _number(ev["mean_ks"])))
    for key, text in (("correlation_similarity", "Correlation similarity"), ("contingency_similarity", "Contingency")):
        if ev["pairs"].get(key) is not None:
            items.append((text + (" similarity" if key.startswith("cont") else ""), _number(ev["pairs"][key])))
    if "tstr" in ev:
        t = ev["tstr"]
        items.append(
            (
                f"ROC-AUC for '{t['label']}'",
                f"trained on synthetic {_number(t['auc_synthetic'])}, on real {_number(t['auc_real'])}",
            )
        )
    if "dcr" in ev:
        items.append(("Synthetic rows closer to real than to holdout", f"{ev['dcr']['share_closer_to_train']:.1%}"))
    if "nll" in ev:
        items.append(("Holdout negative log-likelihood", f"{ev['nll']['mean']:.3f} nats per row"))
    if "baseline" in ev:
        items.append(("Baseline workload error", f"{_number(ev['baseline']['workload']['error'])}"))
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in items)
    return _section(
        "Summary",
        "lower errors, total variation and distances are better; similarities lie in [0, 1], higher is better "
        "(the same numbers as <code>privsyn-fed evaluate</code>).",
        f'<table class="summary">{body}</table>',
        "summary",
    )
