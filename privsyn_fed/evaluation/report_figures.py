"""The quality report's figures: matplotlib figures drawn as inline ``<svg>`` elements (one per
column, the association heatmaps, the workload marginals' errors, TSTR and DCR), in the report's
style and colours."""

from __future__ import annotations

import html
import io
import re
from typing import Any

import numpy as np

from ..schema import CategoricalColumn, NumericColumn

#: Most categories drawn for one column (by real frequency; the rest are pooled as "other").
MAX_BARS = 30
#: Most bins drawn for one numeric column (adjacent schema bins are merged beyond it).
MAX_BINS = 60
#: Most workload marginals drawn (the largest errors); the mean is over all of them.
MAX_MARGINALS = 40
#: Longest label drawn in a figure before it is cut with an ellipsis.
MAX_LABEL = 24
REAL_COLOUR, SYN_COLOUR = "#1f77b4", "#ff7f0e"


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
