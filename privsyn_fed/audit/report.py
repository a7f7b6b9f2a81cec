"""A one-page privacy report of a ledger, for whoever receives the CSV: the synthetic file it belongs
to, its date and the privsyn-fed version, the guarantee, its neighbouring relation and threat model,
the audit's verdict, what the release keeps of each silo and the rows a per-unit bound left out
(``scope``), the rounds that ran, a chart of the cumulative budget by step, and the
mechanisms that spent it. HTML (with an inline SVG chart) or Markdown, written readable by all
(``SHAREABLE``): it is made to be handed out with the CSV."""

from __future__ import annotations

import html
import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..accounting import ROW_RELATION, bounds_text
from ..common import SHAREABLE, InputError, markdown_text, package_version, write_atomic
from .dependence import dependence_summary
from .findings import AuditReport
from .scope import silo_column_text, unit_bound_text
from .verdict import audit_ledger


def _groups(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries grouped by mechanism, where, parallelism and sensitivity."""
    groups: dict[tuple, dict[str, Any]] = defaultdict(lambda: {"count": 0, "rho": 0.0, "scales": []})
    for e in entries:
        key = (
            e.get("mechanism"),
            e.get("where"),
            e.get("parallel_over") or "",
            e.get("sensitivity_l2", e.get("sensitivity")),
        )
        g = groups[key]
        g["count"] += 1
        g["rho"] += float(e.get("rho", 0.0))
        g["scales"].append(float(e.get("sigma", e.get("epsilon", 0.0))))
    out = []
    for (mech, where, parallel, sens), g in groups.items():
        lo, hi = min(g["scales"]), max(g["scales"])
        scale = f"{lo:.4g}" if lo == hi else f"{lo:.4g} to {hi:.4g}"
        out.append(
            {
                "mechanism": mech,
                "where": where,
                "parallel": parallel or "no",
                "sensitivity": sens,
                "count": g["count"],
                "scale": ("sigma " if mech == "gaussian" else "epsilon ") + scale,
                "rho": g["rho"],
            }
        )
    return out


def _cumulative(entries: list[dict[str, Any]]) -> list[float]:
    total, out = 0.0, []
    for e in entries:
        total += float(e.get("rho", 0.0))
        out.append(total)
    return out


@dataclass(frozen=True)
class Subject:
    """What a report belongs to: the synthetic file's name (and the SHA-256 of its bytes) when the
    release writes the report, or the ledger's name when ``audit`` does."""

    synthetic: str | None = None
    sha256: str | None = None
    ledger: str | None = None

    def describe(self) -> str:
        """The synthetic data the report belongs to, in one line."""
        if self.synthetic:
            return self.synthetic + (f" (SHA-256 {self.sha256})" if self.sha256 else "")
        where = f" {self.ledger}" if self.ledger else ""
        return f"not named: this report was made from the ledger{where} alone"


def _date(ledger: dict[str, Any]) -> str:
    """When the ledger was last written (the release's end for a complete one), as UTC."""
    stamp = ledger.get("updated") or ledger.get("created")
    try:
        when = datetime.fromisoformat(str(stamp)).astimezone(timezone.utc)
    except (TypeError, ValueError):
        return f"{stamp} (as the ledger states it)" if stamp else "not recorded in the ledger"
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def _rounds(ledger: dict[str, Any]) -> str | None:
    """The rounds that ran (each one selection and one measurement for the AIM family), beside the
    rounds the schedule planned when they differ; None for a ledger that records no rounds."""
    details = ledger.get("details") or {}
    ran = details.get("rounds")
    if not isinstance(ran, int) or isinstance(ran, bool):
        return None
    schedule = details.get("schedule")
    planned = schedule.get("rounds") if isinstance(schedule, dict) else None
    text = f"{ran} ran"
    if isinstance(planned, int) and planned != ran:
        text += (
            f" (the schedule planned up to {planned}: the run ends as soon as its budget is spent, and each "
            "annealing step gives the rounds after it more of the budget)"
        )
    return text


def _neighbours(ledger: dict[str, Any]) -> str:
    """The neighbouring relation; for one record, the one line on who it protects less."""
    relation = str(ledger.get("neighbouring"))
    if ledger.get("privacy_unit") is None and relation == ROW_RELATION:
        relation += (
            " (the guarantee is per row: a person with several rows is protected less, about k times "
            "epsilon for k rows; release with --privacy-unit to protect people)"
        )
    return relation


def _facts(ledger: dict[str, Any], audit: AuditReport, subject: Subject) -> list[tuple[str, str]]:
    status = ledger.get("status", "?")
    facts = [
        ("Synthetic data", subject.describe()),
        ("Date", _date(ledger)),
        ("Made by", f"privsyn-fed {package_version()}"),
        ("Guarantee", f"({ledger['epsilon']:.4g}, {ledger['delta']:g})-differential privacy"),
        ("Neighbouring datasets", _neighbours(ledger)),
        *(
            [
                ("Privacy unit", bounds_text(ledger["privacy_unit"])),
                ("Rows left out by the unit bound", unit_bound_text(ledger["privacy_unit"])),
            ]
            if isinstance(ledger.get("privacy_unit"), dict)
            else []
        ),
        (
            "Budget",
            f"epsilon {ledger.get('epsilon_budget', '?')} at delta {ledger['delta']:g}; rho "
            f"{ledger['rho_spent']:.6g} spent of {ledger['rho_budget']:.6g} (zCDP)",
        ),
        ("Method", str(ledger.get("method"))),
        ("Run status", status),
        ("Threat model", str(ledger.get("threat_model") or "not stated")),
        (
            "Audit",
            "OK: every entry, the total, the budget and the conversion check out"
            if audit.ok
            else "FAILED: " + "; ".join(audit.problems),
        ),
    ]
    rounds = _rounds(ledger)
    if rounds is not None:
        facts.append(("Rounds", rounds))
    schedule = (ledger.get("details") or {}).get("schedule")
    if isinstance(schedule, dict) and "noisy_total" in schedule:
        plan = (
            f"at most {schedule['rounds']} rounds"
            if "rounds" in schedule
            else f"covariance rho {schedule.get('rho_covariance', 0):.4g}, "
            f"numeric bins split in {schedule.get('refine')}"
        )
        facts.append(
            ("Schedule", f"planned from the released row total {schedule['noisy_total']:.0f} (post-processing): {plan}")
        )
    found = dependence_summary(ledger)
    if found is not None:
        facts.append(("Dependence step", found))
    details = ledger.get("details") or {}
    if "expected_oneway_tvd" in details and "expected_oneway_tvd_independent" in details:
        facts.append(
            (
                "Expected 1-way error",
                f"mean total variation {details['expected_oneway_tvd']:.3g} from the "
                f"release's own noise; {details['expected_oneway_tvd_independent']:.3g} "
                "for the independent method at this budget",
            )
        )
    mpc = details.get("mpc") if isinstance(details.get("mpc"), dict) else {}
    if mpc.get("layout") == "sites and servers" and isinstance(mpc.get("sites"), list):
        steps = details.get("site_contributions") if isinstance(details.get("site_contributions"), list) else []
        answered = {s for e in steps if isinstance(e, dict) for s in (e.get("sites") or []) if isinstance(s, str)}
        facts.append(
            (
                "Sites and servers",
                f"{mpc.get('servers')} compute servers held the sites' answers as shares (noise withstands "
                f"{mpc.get('collusion')} colluding); {len(answered)} of {len(mpc['sites'])} sites contributed",
            )
        )
    site = details.get("silo_column")
    if isinstance(site, dict) and isinstance(site.get("silos"), list):
        facts.append(("Silo column", silo_column_text(ledger, site)))
    if audit.warnings:
        facts.append(("Warnings", "; ".join(audit.warnings)))
    return facts


def _title(ledger: dict[str, Any], subject: Subject) -> str:
    release = f"{ledger.get('method')} release"
    return f"Privacy report: {subject.synthetic} ({release})" if subject.synthetic else f"Privacy report: {release}"


def render_markdown(ledger: dict[str, Any], audit: AuditReport, subject: Subject = Subject()) -> str:
    """The report as Markdown (the cumulative budget as a text bar chart)."""
    md = markdown_text  # every text from the ledger or a file name, escaped for one cell or line
    lines = [f"# {md(_title(ledger, subject))}", ""]
    lines += [f"* **{md(k)}:** {md(v)}" for k, v in _facts(ledger, audit, subject)]
    entries = ledger["entries"]
    cum, budget = _cumulative(entries), float(ledger["rho_budget"])
    lines += ["", "## Cumulative budget by step", "", "```"]
    width = 50
    for i, c in enumerate(cum):
        if len(cum) > 40 and i % max(1, len(cum) // 40) and i != len(cum) - 1:
            continue
        share = c / budget if budget > 0 else 0.0
        share = share if math.isfinite(share) else 0.0  # a tampered, subnormal budget
        bar = "#" * int(round(width * min(1.0, max(0.0, share))))
        lines.append(f"step {i + 1:>4} |{bar:<{width}}| {100 * share:5.1f}%")
    lines += [
        "```",
        "",
        "## Mechanisms",
        "",
        "| mechanism | where | parallel over | sensitivity | calls | scale | rho | share |",
        "|---|---|---|---|---|---|---|---|",
    ]
    spent = max(float(ledger["rho_spent"]), 1e-300)
    for g in _groups(entries):
        lines.append(
            f"| {md(g['mechanism'])} | {md(g['where'])} | {md(g['parallel'])} | {g['sensitivity']:.4g} | "
            f"{g['count']} | {md(g['scale'])} | {g['rho']:.4g} | {100 * g['rho'] / spent:.1f}% |"
        )
    lines += ["", "## Every entry", "", "| step | mechanism | query | rho |", "|---|---|---|---|"]
    for e in entries:
        lines.append(
            f"| {md(e.get('step'))} | {md(e.get('mechanism'))} | {md(e.get('query', ''))} | "
            f"{float(e.get('rho', 0)):.4g} |"
        )
    return "\n".join(lines) + "\n"


def _svg(cum: list[float], budget: float) -> str:
    w, h, pad = 640, 240, 40
    n = max(1, len(cum))
    top = max(budget, cum[-1] if cum else 0.0) or 1.0
    pts = [(pad, h - pad)] + [
        (pad + (w - 2 * pad) * (i + 1) / n, h - pad - (h - 2 * pad) * c / top) for i, c in enumerate(cum)
    ]
    poly = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
    by = h - pad - (h - 2 * pad) * budget / top
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
        f'aria-label="cumulative rho by step">'
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#444"/>'
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="#444"/>'
        f'<line x1="{pad}" y1="{by:.1f}" x2="{w - pad}" y2="{by:.1f}" stroke="#c00" stroke-dasharray="6 4"/>'
        f'<text x="{w - pad}" y="{by - 6:.1f}" text-anchor="end" font-size="12" fill="#c00">budget rho '
        f"{budget:.4g}</text>"
        f'<polyline points="{poly}" fill="none" stroke="#06c" stroke-width="2"/>'
        f'<text x="{w / 2}" y="{h - 8}" text-anchor="middle" font-size="12">step (1 to {len(cum)})</text>'
        f'<text x="12" y="{h / 2}" font-size="12" transform="rotate(-90 12 {h / 2})" text-anchor="middle">'
        f"cumulative rho</text></svg>"
    )


def render_html(ledger: dict[str, Any], audit: AuditReport, subject: Subject = Subject()) -> str:
    """The report as one HTML page (the cumulative budget as an inline SVG chart)."""
    esc = lambda x: html.escape(str(x))
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in _facts(ledger, audit, subject))
    spent = max(float(ledger["rho_spent"]), 1e-300)
    groups = "".join(
        f"<tr><td>{esc(g['mechanism'])}</td><td>{esc(g['where'])}</td><td>{esc(g['parallel'])}</td>"
        f"<td>{g['sensitivity']:.4g}</td><td>{g['count']}</td><td>{esc(g['scale'])}</td><td>{g['rho']:.4g}</td>"
        f"<td>{100 * g['rho'] / spent:.1f}%</td></tr>"
        for g in _groups(ledger["entries"])
    )
    entries = "".join(
        f"<tr><td>{esc(e.get('step'))}</td><td>{esc(e.get('mechanism'))}</td>"
        f"<td>{esc(e.get('query', ''))}</td><td>{float(e.get('rho', 0)):.4g}</td></tr>"
        for e in ledger["entries"]
    )
    verdict = "ok" if audit.ok else "failed"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(_title(ledger, subject))}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}}
.ok{{color:#070}} .failed{{color:#c00}}</style></head><body>
<h1>{esc(_title(ledger, subject))}</h1>
<p class="{verdict}"><strong>Audit {verdict.upper()}</strong></p>
<table>{rows}</table>
<h2>Cumulative budget by step</h2>
{_svg(_cumulative(ledger["entries"]), float(ledger["rho_budget"]))}
<h2>Mechanisms</h2>
<table><tr><th>mechanism</th><th>where</th><th>parallel over</th><th>sensitivity</th><th>calls</th><th>scale</th>
<th>rho</th><th>share</th></tr>{groups}</table>
<h2>Every entry</h2>
<table><tr><th>step</th><th>mechanism</th><th>query</th><th>rho</th></tr>{entries}</table>
</body></html>
"""


REPORT_SUFFIXES = (".html", ".htm", ".md", ".markdown")


def check_report_path(path: str | Path) -> None:
    """Refuse (``InputError``) a report path whose suffix is not ``.html``, ``.htm``, ``.md`` or ``.markdown``."""
    if Path(path).suffix.lower() not in REPORT_SUFFIXES:
        raise InputError(f"{path}: the report is written as .html or .md")


def render_report(
    ledger: dict[str, Any], path: str | Path, audit: AuditReport | None = None, subject: Subject = Subject()
) -> str:
    """The report as HTML (``.html``, ``.htm``) or Markdown (``.md``), by ``path``'s suffix."""
    check_report_path(path)
    audit = audit or audit_ledger(ledger)
    html = Path(path).suffix.lower() in (".html", ".htm")
    return render_html(ledger, audit, subject) if html else render_markdown(ledger, audit, subject)


def write_report(
    ledger: dict[str, Any], path: str | Path, audit: AuditReport | None = None, subject: Subject = Subject()
) -> None:
    """Write the report (``render_report``) atomically, readable by all (``SHAREABLE``)."""
    text = render_report(ledger, path, audit, subject)
    write_atomic(path, lambda fh: fh.write(text), mode=SHAREABLE)
