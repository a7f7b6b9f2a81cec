"""The quality report's HTML: each section's and figure's markup, the numbers in its tables, and
the page's style."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Section:
    """One section of the page: its anchor, its title (plain text) and its HTML."""

    anchor: str
    title: str
    html: str


def _section(title: str, guide: str, body: str, anchor: str) -> Section:
    return Section(
        anchor,
        title,
        f'<section id="{anchor}"><h2>{html.escape(title)}</h2>'
        f'<p class="guide"><b>How to read it:</b> {guide}</p>{body}</section>',
    )


def _figure(svg: str, caption: str = "") -> str:
    cap = f"<figcaption>{caption}</figcaption>" if caption else ""
    return f'<figure class="fig">{svg}{cap}</figure>'


def _number(value: Any, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


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
