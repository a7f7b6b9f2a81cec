"""zCDP accounting: the accountant and its write-ahead ledger (``ledger``), conversions between zCDP
and (epsilon, delta) (``conversions``), the cost of noise drawn by MPC parties (``distributed``), and
the budget store that runs share (``budget_store``), and the budgets a release may state
(``limits``). The audit lives in ``privsyn_fed.audit``."""

from .budget_store import BudgetStore, Reservation, check_dataset_id, reserved
from .conversions import cks_delta, epsilon_to_rho, rho_to_epsilon
from .distributed import PartiesNoise
from .kept_ledger import LEDGER_SUFFIX, numbered, referenced_by, used_ledger
from .ledger import (
    LEDGER_FORMAT,
    Accountant,
    UnitAccountant,
    entry_rho,
    exponential_rho,
    gaussian_entry,
    gaussian_rho,
)
from .limits import MAX_DELTA, MAX_EPSILON, MIN_DELTA, check_budget_args
from .settling import settle_stale
from .unit import DECLARED, ENFORCED, ROW_RELATION, PrivacyUnit, bounds_text, relation, unit_of

__all__ = [
    "Accountant",
    "BudgetStore",
    "DECLARED",
    "ENFORCED",
    "LEDGER_FORMAT",
    "LEDGER_SUFFIX",
    "MAX_DELTA",
    "MAX_EPSILON",
    "MIN_DELTA",
    "PartiesNoise",
    "PrivacyUnit",
    "ROW_RELATION",
    "Reservation",
    "UnitAccountant",
    "bounds_text",
    "check_budget_args",
    "check_dataset_id",
    "cks_delta",
    "entry_rho",
    "epsilon_to_rho",
    "exponential_rho",
    "gaussian_entry",
    "gaussian_rho",
    "numbered",
    "referenced_by",
    "relation",
    "reserved",
    "rho_to_epsilon",
    "settle_stale",
    "unit_of",
    "used_ledger",
]
