"""A visual quality report of a synthetic table against the real rows: one static HTML page.

The page is self-contained: its figures are inline SVG drawn by matplotlib (no network, no
external CSS, scripts or fonts; text is drawn as paths). It shows, each with a one-line reading
guide: per-column distributions, the numeric columns' means, quantiles and point masses,
pairwise association (bias-corrected Cramer's V on the schema's bins) for real, synthetic and
their difference, the error of each workload marginal, and with a holdout the
train-on-synthetic/test-on-real ROC-AUC and the distance to closest record.

It is computed from the real rows and is NOT differentially private: it must be handled like the
real data, never published with the release. The measures come from ``evaluate``.

This module assembles the page: its figures are drawn in ``report_figures``, its sections written
in ``report_sections`` and their markup and the page's style in ``report_html``.
"""

from __future__ import annotations

import datetime
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from ..common import InputError
from ..schema import NumericColumn, Schema
from .report_figures import (  # noqa: F401  (the report's limits and figures, importable from here)
    MAX_BARS,
    MAX_BINS,
    MAX_LABEL,
    MAX_MARGINALS,
    REAL_COLOUR,
    SYN_COLOUR,
    _categorical_bars,
    _Figures,
)
from .report_html import STYLE, Section
from .report_sections import (
    _association_section,
    _columns_section,
    _constraints_section,
    _dcr_section,
    _numeric_section,
    _per_silo_section,
    _summary,
    _tstr_section,
    _workload_section,
)

#: File name suffixes of the report (it is always HTML).
REPORT_SUFFIXES = (".html", ".htm")
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


def _page(sources: Sources, ev: dict[str, Any], sections: list[Section]) -> str:
    """The whole page: header (files compared, the non-private warning), contents and sections."""
    files = [("Real rows", ", ".join(sources.real)), ("Synthetic rows", sources.synthetic)]
    if sources.holdout:
        files.append(("Holdout (real rows not used for the release)", sources.holdout))
    files.append(("Schema", sources.schema))
    files += list(sources.extra.items())
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td><code>{html.escape(v)}</code></td></tr>" for k, v in files)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    nav = "".join(f'<a href="#{s.anchor}">{html.escape(s.title)}</a>' for s in sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Quality report: {html.escape(sources.synthetic)}</title><style>{STYLE}</style></head><body>"
        "<h1>Quality report of a synthetic table</h1>"
        '<p class="warning"><b>Not differentially private.</b> This report is computed from the real rows '
        "(and the holdout): it reveals facts about individual records. Handle it like the real data; do not "
        "publish it or hand it out with the synthetic table.</p>"
        f"<table>{rows}</table><p>Made by privsyn-fed on {when}.</p><nav>{nav}</nav>"
        + "".join(s.html for s in sections)
        + "</body></html>\n"
    )


def write_report(path: str | Path, page: str) -> None:
    """Write the page atomically (the old file, if any, stays until the new one is complete)."""
    from ..common import write_atomic

    write_atomic(path, lambda fh: fh.write(page))
