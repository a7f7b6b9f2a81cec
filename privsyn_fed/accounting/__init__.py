"""zCDP accounting: the accountant and its write-ahead ledger (``ledger``), conversions between zCDP
and (epsilon, delta) (``conversions``), the cost of noise drawn by MPC parties (``distributed``), and
the budget store that runs share (``budget_store``). The audit lives in ``privsyn_fed.audit``."""

from .conversions import cks_delta, epsilon_to_rho, rho_to_epsilon
from .ledger import Accountant, entry_rho, exponential_rho, gaussian_rho

__all__ = [
    "Accountant",
    "cks_delta",
    "entry_rho",
    "epsilon_to_rho",
    "exponential_rho",
    "gaussian_rho",
    "rho_to_epsilon",
]
