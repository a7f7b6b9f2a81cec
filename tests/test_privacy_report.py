"""The privacy report: it names its CSV and the rounds that ran beside those planned, can be
shared, and says what the silo column keeps and which rows a per-unit bound left out."""

from __future__ import annotations

import hashlib
import re
from importlib.metadata import version

import numpy as np
import pandas as pd

import privsyn_fed as pf
from privsyn_fed.audit.report import render_report
from privsyn_fed.audit.scope import joint_marginals

from .conftest import mode, run_cli, synth_argv, umask


# ---- the CSV it names and the rounds that ran -----------------------------------------------------
def test_release_report_names_its_csv_and_the_rounds_that_ran_and_is_shareable(
    schema_path, silo_paths, tmp_path, capsys
):
    out, report = tmp_path / "syn.csv", tmp_path / "privacy.md"
    with umask(0o022):
        run = run_cli(*synth_argv(schema=schema_path, silos=silo_paths, out=out, seed=3, report=report), capsys=capsys)
    assert run.returncode == 0, run.stderr
    ran = re.search(r"mechanism calls over (\d+) rounds?\n", run.stdout)
    assert ran, run.stdout
    text = report.read_text()
    assert text.startswith("# Privacy report: syn.csv (aim release)")
    assert f"* **Rounds:** {ran.group(1)} ran" in text
    assert hashlib.sha256(out.read_bytes()).hexdigest() in text
    assert f"privsyn-fed {version('privsyn-fed')}" in text
    assert re.search(r"\* \*\*Date:\*\* \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", text)
    assert (mode(out), mode(out.with_suffix(".ledger.json")), mode(report)) == (0o600, 0o600, 0o644)

    audit_report = tmp_path / "audit.html"
    with umask(0o027):
        run_cli("audit", out.with_suffix(".ledger.json"), "--report", audit_report, capsys=capsys)
    assert mode(audit_report) == 0o640
    assert "made from the ledger syn.ledger.json alone" in audit_report.read_text()


def test_report_states_rounds_ran_beside_the_rounds_planned():
    from privsyn_fed.audit.report import _rounds

    ran_fewer = _rounds({"details": {"rounds": 11, "schedule": {"rounds": 23}}})
    assert ran_fewer.startswith("11 ran (the schedule planned up to 23")
    assert _rounds({"details": {"rounds": 5, "schedule": {"rounds": 5}}}) == "5 ran"
    assert _rounds({"details": {}}) is None


# ---- the silo column and the rows a per-unit bound left out ---------------------------------------
SITES = ("north", "south")


SITE_SCHEMA = {
    "columns": [
        {"name": "site", "type": "categorical", "categories": list(SITES)},
        {"name": "age", "type": "numeric", "lower": 0, "upper": 100, "bins": 10, "integer": True},
        {"name": "sick", "type": "categorical", "categories": ["y", "n"]},
    ]
}


def _sites(with_person: bool) -> dict[str, pd.DataFrame]:
    frames = {}
    for k, site in enumerate(SITES):
        rng = np.random.default_rng(k)
        n = 400
        frame = pd.DataFrame({"age": rng.integers(20 + 30 * k, 50 + 30 * k, n), "sick": rng.choice(["y", "n"], n)})
        if with_person:
            frame.insert(0, "person", np.arange(n) // 3)  # three rows per person
        frames[site] = frame
    return frames


def _report(tmp_path, method: str, **options) -> str:
    result = pf.synthesize(
        _sites("privacy_unit" in options), method, 2.0, 1e-9, schema=pf.Schema.from_dict(SITE_SCHEMA), seed=3,
        silo_column="site", **options,
    )  # fmt: skip
    return render_report(result.ledger, tmp_path / "privacy.md")


def test_the_privacy_report_says_rows_a_per_unit_bound_left_out(tmp_path):
    text = _report(tmp_path, "independent", privacy_unit="person", max_rows_per_unit=2)
    line = next(x for x in text.splitlines() if "Rows left out by the unit bound" in x)
    assert "at most 2 row(s) per unit ('person')" in line
    assert "describes the bounded table" in line and "per-person totals" in line
    assert "shown only to each silo's operator" in line and "not part of the release" in line
    plain = _report(tmp_path, "independent")
    assert "Rows left out" not in plain and "bounded table" not in plain


def test_the_privacy_report_says_what_the_silo_column_keeps(tmp_path):
    text = _report(tmp_path, "independent")
    line = next(x for x in text.splitlines() if "Silo column" in x)
    assert "each silo's one-way marginal (its share of the rows) only" in line
    assert "measured no marginal of the column with another column" in line
    assert "every distribution within a silo comes from the model's fit" in line
    result = pf.synthesize(
        _sites(False), "aim", 4.0, 1e-9, schema=pf.Schema.from_dict(SITE_SCHEMA), seed=3, silo_column="site"
    )
    joint = joint_marginals(result.ledger, "site")
    assert joint and all("site" in m.split(", ") and "," in m for m in joint)
    aim = render_report(result.ledger, tmp_path / "aim.md")
    assert "the marginals it measured together with the column" in aim
    assert "it does not keep every distribution within a silo" in aim
    assert all(f"({m})" in aim for m in joint)
