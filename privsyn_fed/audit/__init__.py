"""The independent audit of a ledger: every check re-derived from the entries, the empirical
privacy check (``empirical``) and the HTML audit report (``report``).

The checks of a ledger, each in its own module: its shape (``shape``), its arithmetic
(``arithmetic``), where and how each entry ran (``placement``), a complete run's structure
(``structure``, with ``workload``, ``aim_run``, ``aim_charges``, ``selection``, ``aim_noise``,
``schedule``, ``structure_fedtda``, ``structure_draft`` and ``draft_plan``), the declared inputs it
is recomputed from (``declared``), what the ledger states about itself (``stamps``), and the
guarantee and the verdict that runs them all (``verdict``, recording into ``findings``).
"""

from typing import TYPE_CHECKING

from ..common import lazy_names

if TYPE_CHECKING:
    from .arithmetic import threshold_delta
    from .dependence import dependence_summary
    from .draft_plan import DRAFT_DISTINCT_GUARD, DRAFT_SEEN_SIGMAS
    from .empirical import empirical_check, runner_for
    from .findings import AuditReport
    from .placement import MPC_REAL_BITS
    from .report import Subject, check_report_path, render_report, write_report
    from .shape import load_ledger, validate_ledger
    from .structure import EM_SENSITIVITY, METHODS, RELEASE_METHODS
    from .verdict import audit_ledger

#: Every name on first use, from its module: a release's summary line needs ``dependence_summary``
#: alone, and the report's and the verdict's modules are most of the package's import time.
__getattr__ = lazy_names(
    __name__,
    {
        "threshold_delta": "arithmetic",
        "dependence_summary": "dependence",
        "DRAFT_DISTINCT_GUARD": "draft_plan",
        "DRAFT_SEEN_SIGMAS": "draft_plan",
        "empirical_check": "empirical",
        "runner_for": "empirical",
        "AuditReport": "findings",
        "MPC_REAL_BITS": "placement",
        "Subject": "report",
        "check_report_path": "report",
        "render_report": "report",
        "write_report": "report",
        "load_ledger": "shape",
        "validate_ledger": "shape",
        "EM_SENSITIVITY": "structure",
        "METHODS": "structure",
        "RELEASE_METHODS": "structure",
        "audit_ledger": "verdict",
    },
)

__all__ = [
    "dependence_summary",
    "AuditReport",
    "DRAFT_DISTINCT_GUARD",
    "DRAFT_SEEN_SIGMAS",
    "EM_SENSITIVITY",
    "METHODS",
    "MPC_REAL_BITS",
    "RELEASE_METHODS",
    "Subject",
    "audit_ledger",
    "check_report_path",
    "empirical_check",
    "load_ledger",
    "render_report",
    "runner_for",
    "threshold_delta",
    "validate_ledger",
    "write_report",
]
