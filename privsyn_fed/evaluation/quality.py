"""A visual quality report of a synthetic table against the real rows: one static HTML page.

The page is self-contained: its figures are inline SVG drawn by matplotlib (no network, no
external CSS, scripts or fonts; text is drawn as paths). It shows, each with a one-line reading
guide: per-column distributions, the numeric columns' means, quantiles and point masses,
pairwise association (bias-corrected Cramer's V on the schema's bins) for real, synthetic and
their difference, the error of each workload marginal, and with a holdout the
train-on-synthetic/test-on-real ROC-AUC and the distance to closest record.

It is computed from the real rows and is NOT differentially private: it must be handled like the
real data, never published with the release. The measures come from ``evaluate``.
"""

from __future__ import annotations

import datetime
import html
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..common import InputError
from ..schema import CategoricalColumn, NumericColumn, Schema

#: File name suffixes of the report (it is always HTML).
REPORT_SUFFIXES = (".html", ".htm")
#: Most categories drawn for one column (by real frequency; the rest are pooled as "other").
MAX_BARS = 30
#: Most bins drawn for one numeric column (adjacent schema bins are merged beyond it).
MAX_BINS = 60
#: Most workload marginals drawn (the largest errors); the mean is over all of them.
MAX_MARGINALS = 40
#: Longest label drawn in a figure before it is cut with an ellipsis.
MAX_LABEL = 24
REAL_COLOUR, SYN_COLOUR = "#1f77b4", "#ff7f0e"
NON_PRIVATE_NOTE = (
    "computed from the real rows: NOT differentially private; handle it like the real data and never publish it"
)


def check_report_path(path: str | Path, option: str) -> None:
    """Refuse (``InputError``) a quality report path whose suffix is not ``.html`` (or ``.htm``)."""
    if Path(path).suffix.lower() not in REPORT_SUFFIXES:
        raise InputError(f"{path}: the quality report ({option}) is an HTML page; give it the suffix .html")


def read_union(
    paths: Sequence[str | Path], silo_column: str | None = None, names: Sequence[str] | None = None
) -> pd.DataFrame:
    """The rows of every table at ``paths`` (CSV, gzip CSV or Parquet) in one frame of text cells;
    with a ``silo_column``, a table without it takes its silo's name there (``names``, by position)."""
    from ..common import read_table
    from .per_silo import with_silo_names
    from .utility import as_text

    frames = [as_text(read_table(p)) for p in paths]
    if silo_column is not None and names is not None:
        frames = with_silo_names(frames, names, silo_column)
    return pd.concat(frames, ignore_index=True)


@dataclass
class Sources:
    """The files a report compares, as the user named them (shown in its header)."""

    real: list[str]
    synthetic: str
    schema: str
    holdout: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


def build_report(
    real_df: pd.DataFrame,
    syn_df: pd.DataFrame,
    schema: Schema,
    sources: Sources,
    *,
    holdout_df: pd.DataFrame | None = None,
    label: str | None = None,
    workload_size: int | None = 64,
    workload_seed: int = 0,
    evaluation: dict[str, Any] | None = None,
    seed: int = 0,
    silo_column: str | None = None,
) -> str:
    """The report as one HTML page. ``evaluation`` is ``evaluate.evaluate``'s result for the same
    tables and options when the caller has it already (it is computed otherwise). With a
    ``silo_column``, a section compares the real and synthetic rows within each silo."""
    from .utility import dcr_distances, encode, evaluate, evaluation_workload, marginal_errors

    if evaluation is None:
        evaluation = evaluate(
            real_df,
            syn_df,
            schema,
            holdout_df=holdout_df,
            label=label,
            workload_size=workload_size,
            workload_seed=workload_seed,
            seed=seed,
            silo_column=silo_column,
        )
    real, syn = encode(real_df, schema, "real"), encode(syn_df, schema, "synthetic")
    workload = evaluation_workload(schema, workload_size, workload_seed)
    figures = _Figures()
    sections = [_summary(evaluation)]
    sections.append(_columns_section(figures, schema, real, syn, evaluation["columns"]))
    if any(isinstance(c, NumericColumn) for c in schema.columns):
        sections.append(_numeric_section(evaluation, real_df, syn_df, schema))
    sections.append(_association_section(figures, schema, real, syn))
    errors = marginal_errors(real, syn, schema.shape, workload)
    sections.append(_workload_section(figures, schema, workload, errors))
    if evaluation.get("per_silo"):
        sections.append(_per_silo_section(evaluation["per_silo"]))
    if evaluation.get("constraints"):
        sections.append(_constraints_section(evaluation["constraints"]))
    if holdout_df is not None:
        hold = encode(holdout_df, schema, "holdout")
        if "tstr" in evaluation:
            sections.append(_tstr_section(figures, evaluation["tstr"]))
        d_train, d_hold = dcr_distances(real, hold, syn, schema, seed=seed)
        sections.append(_dcr_section(figures, d_train, d_hold))
    return _page(sources, evaluation, sections)


# ---- figures ----------------------------------------------------------------------------------------
class _Figures:
    """Matplotlib figures as inline ``<svg>`` elements, each with its own prefix on every id (so the
    ids of several figures never collide in one page)."""

    RC: dict[Any, Any] = {
        "svg.fonttype": "path",
        "svg.hashsalt": "privsyn-fed",
        "text.parse_math": False,
        "font.size": 9,
        "axes.titlesize": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "legend.frameon": False,
    }

    def __init__(self) -> None:
        self.count = 0

    def new(self, width: float, height: float):
        """A matplotlib ``Figure`` of ``width`` x ``height`` inches with constrained layout (no pyplot,
        no display)."""
        from matplotlib.figure import Figure

        return Figure(figsize=(width, height), layout="constrained")

    def draw(self, make, title: str) -> str:
        """The figure ``make()`` returns, drawn under the report's style (fonts, spines, text as paths),
        as an inline ``<svg>`` element labelled ``title``."""
        import matplotlib

        self.count += 1
        buf = io.StringIO()
        with matplotlib.rc_context(self.RC):
            make().savefig(buf, format="svg", metadata={"Date": None})
        return _inline_svg(buf.getvalue(), f"f{self.count}", title)


def _inline_svg(text: str, prefix: str, title: str) -> str:
    """A standalone SVG document made fit to sit inside HTML: no XML prolog, DOCTYPE, namespace
    declarations or metadata (the HTML parser puts the element in the SVG namespace), every id
    prefixed with ``prefix``, and an accessible label."""
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    head_end = text.index(">")
    head = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text[:head_end])
    head += f' role="img" aria-label="{html.escape(title)}"'
    text = head + text[head_end:]
    text = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', text)
    text = re.sub(r'href="#([^"]+)"', rf'href="#{prefix}-\1"', text)
    return re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}-\1)", text)


def _short(text: str, limit: int = MAX_LABEL) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _categorical_bars(col: CategoricalColumn, real: np.ndarray, syn: np.ndarray):
    """Labels and real/synthetic shares of a categorical column's bars, and the position of the
    "other" bar (None without one): every category in schema order, or the ``MAX_BARS`` most
    frequent in the real rows and "other" pooling the rest; then "(missing)" when the column allows
    it."""
    n = len(col.categories)
    labels, r, s, other = list(col.categories), list(real[:n]), list(syn[:n]), None
    if n > MAX_BARS:
        top = sorted(range(n), key=lambda k: (-real[k], k))[:MAX_BARS]
        rest = sorted(set(range(n)) - set(top))
        labels = [col.categories[k] for k in top] + [f"other ({len(rest)} categories)"]
        r = [real[k] for k in top] + [float(real[rest].sum())]
        s = [syn[k] for k in top] + [float(syn[rest].sum())]
        other = MAX_BARS
    if col.missing:
        labels.append("(missing)")
        r.append(real[n])
        s.append(syn[n])
    return [_short(x) for x in labels], np.array(r), np.array(s), other


def _titles(fig, ax, name: str, note: str) -> None:
    """The column's name in bold above the figure, its measures on the line below."""
    fig.suptitle(_short(name, 60), x=0.02, ha="left", fontweight="bold", fontsize=10)
    ax.set_title(note, loc="left", fontsize=8)


def _categorical_figure(figures: _Figures, col: CategoricalColumn, real: np.ndarray, syn: np.ndarray, note: str):
    """Horizontal bars: the share of real (blue) and synthetic (orange) rows in each category. When
    the pooled "other" bar would dwarf the rest, the axis is cut and its shares are written on it."""
    labels, r, s, other = _categorical_bars(col, real, syn)
    rest = [k for k in range(len(labels)) if k != other]
    peak = float(max(r[rest].max(initial=0), s[rest].max(initial=0)))
    cut = other is not None and peak > 0 and max(r[other], s[other]) > 1.6 * peak

    def make():
        fig = figures.new(5.2, 1.4 + 0.26 * len(labels))
        ax = fig.add_subplot()
        y = np.arange(len(labels))
        ax.barh(y - 0.2, r, height=0.4, color=REAL_COLOUR, label="real")
        ax.barh(y + 0.2, s, height=0.4, color=SYN_COLOUR, label="synthetic")
        ax.set_yticks(y, labels)
        ax.set_ylim(len(labels) - 0.5, -0.5)
        ax.set_xlabel("share of rows")
        if cut:
            ax.set_xlim(0, 1.35 * peak)
            ax.text(
                1.35 * peak,
                other,
                f"real {r[other]:.2f}, synthetic {s[other]:.2f} (cut)",
                ha="right",
                va="center",
                fontsize=7,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1},
            )
        _titles(fig, ax, col.name, note)
        fig.legend(loc="outside lower center", ncol=2, fontsize=8)
        return fig

    return figures.draw(make, f"{col.name}: real and synthetic shares by category")


def _numeric_edges(col: NumericColumn) -> np.ndarray:
    """The edges of a numeric column's bins (integer columns: half a unit beyond each bin's whole
    numbers, so bars touch)."""
    from ..schema import bin_edges

    lo, hi = bin_edges(col)
    if col.integer:
        return np.append(lo - 0.5, hi[-1] + 0.5).astype(float)
    if col.upper == col.lower:
        return np.array([col.lower - 0.5, col.upper + 0.5])
    return np.append(lo, hi[-1]).astype(float)


def _numeric_figure(figures: _Figures, col: NumericColumn, real: np.ndarray, syn: np.ndarray, note: str):
    """A histogram on the schema's bins (an atom's rows in the bin that holds it): real rows filled
    (blue), synthetic rows as an orange line; beside it, when the column allows missing values, the
    share of missing rows as its own bars."""
    B = col.n_bins
    edges = _numeric_edges(col)
    r, s = real[:B].copy(), syn[:B].copy()
    if col.atoms:  # each atom's share is drawn in the bin that holds its value
        from ..schema import numeric_bin

        at = numeric_bin(col, np.asarray(col.atoms))
        np.add.at(r, at, real[col.first_atom_cell : col.missing_cell])
        np.add.at(s, at, syn[col.first_atom_cell : col.missing_cell])
    merged = 1
    if B > MAX_BINS:
        merged = -(-B // MAX_BINS)
        starts = np.arange(0, B, merged)
        r, s = np.add.reduceat(r, starts), np.add.reduceat(s, starts)
        edges = np.append(edges[starts], edges[-1])
    if merged > 1:
        note += f"; {merged} bins per bar"

    def make():
        fig = figures.new(5.2, 2.9)
        if col.missing:
            ax, axm = fig.subplots(1, 2, sharey=True, width_ratios=[7, 1])
        else:
            ax, axm = fig.add_subplot(), None
        ax.stairs(r, edges, fill=True, color=REAL_COLOUR, alpha=0.45, label="real")
        ax.stairs(s, edges, color=SYN_COLOUR, linewidth=1.8, label="synthetic")
        ax.set_xlim(edges[0], edges[-1])
        ax.set_ylim(bottom=0)
        ax.set_ylabel("share of rows")
        ax.set_xlabel(_short(col.name, 40) + (" (whole numbers)" if col.integer else ""))
        _titles(fig, ax, col.name, note)
        if axm is not None:
            axm.bar([0, 1], [real[col.missing_cell], syn[col.missing_cell]], color=[REAL_COLOUR, SYN_COLOUR], width=0.8)
            axm.set_xticks([0.5], ["missing"])
            axm.set_xlim(-0.6, 1.6)
            axm.tick_params(axis="y", left=False, labelleft=False)
        fig.legend(loc="outside lower center", ncol=2, fontsize=8)
        return fig

    return figures.draw(make, f"{col.name}: real and synthetic histograms")


def _heatmap(figures: _Figures, names: list[str], matrix: np.ndarray, title: str, diverging: bool) -> str:
    """A ``(d, d)`` matrix as a heatmap with the column names on both axes (grey: undefined), values
    written in the cells when there are few columns."""
    from matplotlib import colormaps

    d = len(names)
    if diverging:
        finite = np.abs(matrix[np.isfinite(matrix)])
        top = max(0.05, float(np.ceil(finite.max(initial=0) * 20) / 20))
        cmap, vmin, vmax = colormaps["RdBu_r"].with_extremes(bad="#dddddd"), -top, top
    else:
        cmap, vmin, vmax = colormaps["viridis"].with_extremes(bad="#dddddd"), 0.0, 1.0
    side = min(7.5, max(3.0, 0.3 * d + 1.6))
    labels = [_short(n, 16) for n in names]

    def make():
        fig = figures.new(side + 0.6, side)
        ax = fig.add_subplot()
        im = ax.imshow(np.ma.masked_invalid(matrix), cmap=cmap, vmin=vmin, vmax=vmax, interpolation="none")
        ax.set_xticks(range(d), labels, rotation=90)
        ax.set_yticks(range(d), labels)
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
        if d <= 12:
            for i in range(d):
                for j in range(d):
                    v = matrix[i, j]
                    if np.isfinite(v):
                        dark = (abs(v) / vmax > 0.6) if diverging else v < 0.55
                        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w" if dark else "k")
        ax.set_title(title, loc="left", fontweight="bold")
        fig.colorbar(im, ax=ax, shrink=0.8)
        return fig

    return figures.draw(make, title)


def _workload_figure(figures: _Figures, names: list[str], workload, errors: np.ndarray) -> str:
    """One dot per workload marginal (the largest ``MAX_MARGINALS`` errors), its L1 distance between
    the real and synthetic shares, with the mean over the whole workload as a dashed line."""
    order = np.argsort(-errors, kind="stable")[:MAX_MARGINALS]
    labels = [" \u00d7 ".join(_short(names[i], 14) for i in workload[k]) for k in order]
    values = errors[order]
    mean = float(errors.mean())

    def make():
        fig = figures.new(6.4, 1.3 + 0.22 * len(order))
        ax = fig.add_subplot()
        y = np.arange(len(order))
        ax.hlines(y, 0, values, color="#999999", linewidth=1)
        ax.plot(values, y, "o", color=SYN_COLOUR, markersize=5)
        ax.axvline(mean, color="k", linestyle="--", linewidth=1, label=f"mean over all {len(errors)}: {mean:.3f}")
        ax.set_yticks(y, labels)
        ax.invert_yaxis()
        ax.set_xlim(0, max(0.05, float(values.max()) * 1.1))
        # under the axes' right end, reaching left below the marginals' names: the label is wider than
        # the axes when the names are long, and centred under them it would run off the figure
        ax.set_xlabel("L1 distance between real and synthetic shares (0 = equal, 2 = disjoint)", loc="right")
        fig.legend(loc="outside lower center", fontsize=8)
        return fig

    return figures.draw(make, "error of each workload marginal")


def _tstr_figure(figures: _Figures, tstr: dict[str, Any]) -> str:
    """Two bars: the ROC-AUC on the holdout of the model trained on the synthetic rows and of the
    same model trained on the real rows; the dashed line is chance (0.5)."""
    values = [tstr["auc_synthetic"], tstr["auc_real"]]

    def make():
        fig = figures.new(6.0, 1.9)
        ax = fig.add_subplot()
        ax.barh([0, 1], values, color=[SYN_COLOUR, REAL_COLOUR], height=0.6)
        for y, v in enumerate(values):
            ax.text(v + 0.01, y, f"{v:.3f}", va="center", fontsize=8)
        ax.axvline(0.5, color="k", linestyle="--", linewidth=1, label="chance (0.5)")
        ax.set_yticks([0, 1], ["trained on synthetic", "trained on real"])
        ax.invert_yaxis()
        ax.set_xlim(0, 1.08)
        ax.set_xlabel(f"ROC-AUC on the holdout for '{_short(tstr['label'], 30)}'")
        fig.legend(loc="outside lower center", fontsize=8)
        return fig

    return figures.draw(make, "train on synthetic, test on real")


def _dcr_figure(figures: _Figures, d_train: np.ndarray, d_hold: np.ndarray) -> str:
    """Histograms of each synthetic row's distance to its closest real (training) row and to its
    closest holdout row, on common bins."""
    top = max(float(d_train.max(initial=0)), float(d_hold.max(initial=0)), 1e-9)
    edges = np.linspace(0, top * 1.0001, 31)

    def make():
        fig = figures.new(6.0, 2.8)
        ax = fig.add_subplot()
        ax.hist(d_train, bins=edges, histtype="stepfilled", alpha=0.45, color=REAL_COLOUR, label="to real rows")
        ax.hist(d_hold, bins=edges, histtype="step", linewidth=1.8, color="#2ca02c", label="to holdout rows")
        ax.set_xlabel("distance from a synthetic row to its closest record")
        ax.set_ylabel("synthetic rows")
        fig.legend(loc="outside lower center", ncol=2, fontsize=8)
        return fig

    return figures.draw(make, "distance to closest record")


# ---- sections ---------------------------------------------------------------------------------------
def _section(title: str, guide: str, body: str, anchor: str) -> str:
    return (
        f'<section id="{anchor}"><h2>{html.escape(title)}</h2>'
        f'<p class="guide"><b>How to read it:</b> {guide}</p>{body}</section>'
    )


def _figure(svg: str, caption: str = "") -> str:
    cap = f"<figcaption>{caption}</figcaption>" if caption else ""
    return f'<figure class="fig">{svg}{cap}</figure>'


def _columns_section(figures: _Figures, schema: Schema, real, syn, shapes: dict[str, dict[str, float]]) -> str:
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


def _numeric_section(ev: dict[str, Any], real_df: pd.DataFrame, syn_df: pd.DataFrame, schema: Schema) -> str:
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


def _association_section(figures: _Figures, schema: Schema, real, syn) -> str:
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


def _workload_section(figures: _Figures, schema: Schema, workload, errors: np.ndarray) -> str:
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


def _tstr_section(figures: _Figures, tstr: dict[str, Any]) -> str:
    guide = (
        "a gradient-boosted tree is trained on the synthetic rows and on the real rows and both are tested "
        "on the holdout; good: the synthetic bar close to the real one, and both well above chance (0.5)."
    )
    if tstr["auc_synthetic"] is None or tstr["auc_real"] is None:
        body = f"<p>Not computed: the holdout holds a single value of '{html.escape(tstr['label'])}'.</p>"
    else:
        body = _figure(_tstr_figure(figures, tstr))
    return _section("Train on synthetic, test on real (ROC-AUC)", guide, body, "tstr")


def _dcr_section(figures: _Figures, d_train: np.ndarray, d_hold: np.ndarray) -> str:
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


def _per_silo_section(per_silo: dict[str, Any]) -> str:
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
        f"Per silo ('{html.escape(per_silo['column'])}')",
        "each silo's rows compared within the silo. A release keeps each silo's share of the rows and the "
        "marginals it measured together with the silo column, not every distribution within a silo. Good: the "
        "shares agree; errors well above the union's show distributions within a silo the release did not measure.",
        f'<table class="summary">{head}{"".join(rows)}</table>',
        "per-silo",
    )


def _constraints_section(rows: list[dict[str, Any]]) -> str:
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


def _number(value: Any, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _summary(ev: dict[str, Any]) -> str:
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


STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial, sans-serif;
       margin: 0 auto; max-width: 1180px; padding: 16px 24px 48px; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; margin: 0.4em 0; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 1.6em; }
.warning { background: #fdecea; border: 2px solid #c62828; padding: 10px 14px; border-radius: 4px; }
.guide { background: #f3f6fa; border-left: 4px solid #1f77b4; padding: 6px 10px; }
table { border-collapse: collapse; }
th, td { text-align: left; padding: 3px 12px 3px 0; vertical-align: top; }
.summary th { font-weight: 600; }
.grid { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; }
figure.fig { margin: 0; max-width: 100%; }
figure.fig svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: 0.9em; color: #444; }
nav a { margin-right: 1em; }
code { background: #f2f2f2; padding: 0 3px; }
"""


def _page(sources: Sources, ev: dict[str, Any], sections: list[str]) -> str:
    """The whole page: header (files compared, the non-private warning), contents and sections."""
    files = [("Real rows", ", ".join(sources.real)), ("Synthetic rows", sources.synthetic)]
    if sources.holdout:
        files.append(("Holdout (real rows not used for the release)", sources.holdout))
    files.append(("Schema", sources.schema))
    files += list(sources.extra.items())
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td><code>{html.escape(v)}</code></td></tr>" for k, v in files)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    anchors = re.findall(r'<section id="([^"]+)"><h2>([^<]+)</h2>', "".join(sections))
    nav = "".join(f'<a href="#{a}">{t}</a>' for a, t in anchors)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Quality report: {html.escape(sources.synthetic)}</title><style>{STYLE}</style></head><body>"
        "<h1>Quality report of a synthetic table</h1>"
        '<p class="warning"><b>Not differentially private.</b> This report is computed from the real rows '
        "(and the holdout): it reveals facts about individual records. Handle it like the real data; do not "
        "publish it or hand it out with the synthetic table.</p>"
        f"<table>{rows}</table><p>Made by privsyn-fed on {when}.</p><nav>{nav}</nav>"
        + "".join(sections)
        + "</body></html>\n"
    )


def write_report(path: str | Path, page: str) -> None:
    """Write the page atomically (the old file, if any, stays until the new one is complete)."""
    from ..common import write_atomic

    write_atomic(path, lambda fh: fh.write(page))
