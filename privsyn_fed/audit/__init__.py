"""The independent audit of a ledger: every check re-derived from the entries (``checks``), the
empirical privacy check (``empirical``) and the HTML audit report (``report``)."""

from .checks import AuditReport, audit_ledger, load_ledger
from .empirical import empirical_check, runner_for
from .report import check_report_path, render_report, write_report

__all__ = [
    "AuditReport",
    "audit_ledger",
    "check_report_path",
    "empirical_check",
    "load_ledger",
    "render_report",
    "runner_for",
    "write_report",
]
