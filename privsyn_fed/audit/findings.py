"""What an audit finds: problems (any fails the ledger, exit 1), warnings (informational only) and
a summary of the ledger; every check records into one ``AuditReport``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class AuditReport:
    """The audit's verdict: problems (any fails the ledger), warnings (informational) and a summary."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the ledger passes: no problems."""
        return not self.problems
