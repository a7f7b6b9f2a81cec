"""zCDP accounting: the accountant and its write-ahead ledger, conversions, and the audit."""

from .audit import AuditReport, audit_ledger, load_ledger
from .conversions import cks_delta, epsilon_to_rho, rho_to_epsilon
from .ledger import Accountant, entry_rho, exponential_rho, gaussian_rho

__all__ = [
    "Accountant",
    "AuditReport",
    "audit_ledger",
    "cks_delta",
    "entry_rho",
    "epsilon_to_rho",
    "exponential_rho",
    "gaussian_rho",
    "load_ledger",
    "rho_to_epsilon",
]
