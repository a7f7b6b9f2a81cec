"""What a release describes, in the privacy report's words: how much of each silo the silo column
keeps, and the rows a per-unit bound left out before anything was measured.

Both are read from the ledger alone (its ``details.silo_column``, ``privacy_unit`` and the
entries' queries), so the words are public like the ledger.
"""

from __future__ import annotations

import re
from typing import Any

#: A parenthesised list of column names in an entry's query: ``marginal(site, age)``.
_COLUMNS = re.compile(r"\(([^()]*)\)")


def joint_marginals(ledger: dict[str, Any], column: str) -> list[str]:
    """The marginals named in the entries' queries that hold ``column`` and at least one other
    column, each once, in the order first measured (``"site, age"``)."""
    found: list[str] = []
    for e in ledger.get("entries") or []:
        for inner in _COLUMNS.findall(str(e.get("query", ""))):
            names = [n.strip() for n in inner.split(",")]
            if column in names and len(names) > 1 and inner not in found:
                found.append(inner)
    return found


def silo_column_text(ledger: dict[str, Any], site: dict[str, Any]) -> str:
    """The silo column's fact: what the release keeps of each silo (its share of the rows and the
    marginals measured together with the column), and what it does not (every other distribution
    within a silo is the model's fit)."""
    column = str(site.get("column"))
    joint = joint_marginals(ledger, column)
    head = f"'{column}' holds each row's silo ({', '.join(map(str, site['silos']))}): public. "
    tail = ". The guarantee is per record, not per silo"
    if not joint:
        return (
            head + "The release keeps each silo's one-way marginal (its share of the rows) only: it measured no "
            "marginal of the column with another column, so every distribution within a silo comes from the "
            "model's fit" + tail
        )
    listed = "; ".join(f"({m})" for m in joint)
    return (
        head + f"The release keeps each silo's one-way marginal (its share of the rows) and the marginals it "
        f"measured together with the column ({listed}); it does not keep every distribution within a silo: "
        "the rest comes from the model's fit" + tail
    )


def unit_bound_text(unit: dict[str, Any]) -> str:
    """The per-unit bound's fact: rows beyond it were left out, so the release describes a changed
    table; the count left out is private and not released."""
    rows = unit.get("max_rows_per_unit")
    text = f"each silo kept at most {rows} row(s) per unit ('{unit.get('column')}')"
    if unit.get("max_silos_bound") == "enforced":
        text += f", and a unit found in more than {unit.get('max_silos_per_unit')} silo(s) kept its rows in that many"
    return (
        text + ". Rows beyond the bound were left out before anything was measured, so the release describes "
        "the bounded table, not the one the silos hold: the silos' shares of the rows, per-person totals and "
        "counts, and anything about people with many rows can move. How many rows were left out is private "
        "and not part of the release (no budget was spent on it): it is shown only to each silo's operator "
        "when the release runs"
    )
