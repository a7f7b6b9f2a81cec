"""A silo party's own policy, the release request it checks against it, and the verdict exchange.

A party does not take party 0's word for what a release costs its rows. Before it reads its silo,
party 0 sends the release's public request (``ReleaseRequest``: method, epsilon, delta, schema
hash, seeded or not, parties and collusion threshold); the party checks it against its policy
file (``Policy``, ``mpc-party --policy FILE``) and, where the policy names one, against its own
budget store, and answers with a verdict. Every command that touches its rows gets a verdict too
(``party_ledger`` costs it first); a refusal carries a one-line reason to party 0, and no party
goes on with a step that any party refused.

The policy file (JSON; SECURITY.md, "A party's own policy")::

    {"max_epsilon": 1.0, "max_delta": 1e-9, "methods": ["distaim", "fedtda"],
     "schema_sha256": "9f2c...64 hex digits...",
     "min_collusion": 2,
     "budget_store": {"path": "budget.db", "dataset_id": "clinic-a", "total_epsilon": 3.0}}

``schema_sha256`` is the schema's fingerprint (``aggregator.schema_fingerprint``, printed by
``mpc-party`` in its first line and by ``synth --mpc``), with or without a ``sha256:`` prefix.
``min_collusion`` and ``budget_store`` are optional; a relative store path is read from the
policy file's folder. A request is accepted when its method is listed, its epsilon is at most
``max_epsilon``, its delta at most ``max_delta``, its schema is the one pinned, its collusion
threshold is at least ``min_collusion``, and the party's store (accounted at ``max_delta``) has
the request's rho left. A DP schema draft (method ``schema-draft``, ``mpc-party --draft``) has no
schema yet: its request names the draft's fingerprint, no pin applies to it, and a policy that
accepts drafts only may leave ``schema_sha256`` out.

The verdict exchange that carries each party's answer is in ``verdicts``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..accounting import MAX_DELTA, MAX_EPSILON, PrivacyUnit, epsilon_to_rho, rho_to_epsilon
from ..common import InputError, read_json

#: The methods a party can serve, and the commands each one sends (``serve`` refuses any other).
METHOD_STEPS = {
    "distaim": frozenset({"noisy_sum", "pool_new", "pool_add", "select", "measure"}),
    "flaim": frozenset({"noisy_sum", "local_select"}),
    "fedtda": frozenset({"noisy_sum"}),
    "independent": frozenset({"noisy_sum"}),
    "schema-draft": frozenset({"draft_profile", "draft_bounds", "draft_candidates", "draft_counts"}),
}
#: The method of a DP schema draft (``mpc.draft``): its request names the draft's fingerprint, not a schema's.
DRAFT = "schema-draft"
#: The kinds of declared query (``silo.queries``) each method's noisy sums are made of.
SUM_KINDS = {
    "distaim": frozenset({"marginals"}),
    "independent": frozenset({"marginals", "concat"}),
    "flaim": frozenset({"marginals", "concat", "masked"}),
    "fedtda": frozenset({"marginals", "numeric_histogram", "second_moments", "concat", "masked"}),
}
#: Methods whose noisy sums are row totals and 1-way marginals only (cliques of at most one column).
ONE_WAY_SUMS = frozenset({"distaim", "independent"})

FIELDS = {
    "max_epsilon",
    "max_delta",
    "methods",
    "schema_sha256",
    "min_collusion",
    "budget_store",
    "privacy_unit",
    "approve",
    "approve_within_s",
}
#: How a request inside the policy runs: at once, or once a person approves it (``site approve``).
APPROVALS = ("auto", "person")
#: How long a request waits for a person by default before it is refused by itself.
APPROVE_WITHIN_S = 3600.0
UNIT_FIELDS = {"column", "min_silos_per_unit", "max_silos_per_unit"}
REQUIRED = ("max_epsilon", "max_delta", "methods", "schema_sha256")
STORE_FIELDS = {"path", "dataset_id", "total_epsilon", "new_dataset"}
HEX64 = re.compile(r"(?:sha256:)?([0-9a-fA-F]{64})")

#: Verdict codes: accepted; the party's schema differs; its noise mode (``--seed``) differs; it
#: refuses (policy, accounting, budget); it cannot read its silo (bad input).
ACCEPT, SCHEMA_DIFFERS, MODE_DIFFERS, REFUSED, BAD_SILO = 0, 1, 2, 3, 4


class Refused(Exception):
    """A party refuses a command; ``code`` says why in kind, the message says why in words."""

    def __init__(self, reason: str, code: int = REFUSED):
        super().__init__(reason)
        self.code = code


@dataclass(frozen=True)
class StoreSpec:
    """The party's own budget store: where, which dataset, and the dataset's total epsilon."""

    path: Path
    dataset_id: str
    total_epsilon: float
    #: The site says its silo really differs from data its store charged under another dataset id.
    new_dataset: bool = False


@dataclass(frozen=True)
class UnitRule:
    """A policy's ``privacy_unit``: releases must be by this ``column``, with a declared M (the most
    silos one unit is in) of at least ``min_silos`` (what the site knows of its people) and at most
    ``max_silos`` (a cap on the noise it accepts), either bound optional."""

    column: str
    min_silos: int | None = None
    max_silos: int | None = None

    def refusal(self, unit: PrivacyUnit | None) -> str | None:
        """Why a request with ``unit`` breaks this rule (one line), or None."""
        if unit is None or unit.column != self.column:
            given = "none" if unit is None else f"'{unit.column}'"
            return f"its policy requires privacy unit '{self.column}', and the release's is {given}"
        if self.min_silos is not None and unit.max_silos < self.min_silos:
            return (
                f"the release declares a unit in at most {unit.max_silos} silo(s), but its policy's "
                f"privacy_unit.min_silos_per_unit is {self.min_silos} (its people are in that many silos)"
            )
        if self.max_silos is not None and unit.max_silos > self.max_silos:
            return (
                f"the release declares a unit in at most {unit.max_silos} silos, more than its policy's "
                f"privacy_unit.max_silos_per_unit {self.max_silos}"
            )
        return None


@dataclass(frozen=True)
class Policy:
    """What a party accepts per release (see the module docstring)."""

    source: Path
    max_epsilon: float
    max_delta: float
    methods: tuple[str, ...]
    schema_sha256: str | None
    min_collusion: int | None = None
    store: StoreSpec | None = None
    unit: UnitRule | None = None
    #: ``auto``: a request inside the policy runs at once; ``person``: it waits for ``site approve``
    #: (a site's policy), and is refused by itself after ``approve_within_s`` seconds.
    approve: str = "auto"
    approve_within_s: float = APPROVE_WITHIN_S

    def refusal(self, request: Any) -> str | None:
        """Why this policy refuses ``request`` (a ``request.ReleaseRequest``; one line), or None when it
        accepts it."""
        if request.method not in self.methods:
            return f"method {request.method} is not among the methods its policy accepts ({', '.join(self.methods)})"
        if request.method != DRAFT and request.schema != self.schema_sha256:
            return (
                f"its policy agreed to schema sha256 {self.schema_sha256}, but the release is over schema "
                f"sha256 {request.schema}"
            )
        if request.epsilon > self.max_epsilon:
            return f"epsilon {request.epsilon:g} is more than its policy's max_epsilon {self.max_epsilon:g}"
        if request.delta > self.max_delta:
            return f"delta {request.delta:g} is more than its policy's max_delta {self.max_delta:g}"
        if self.min_collusion is not None and request.collusion < self.min_collusion:
            return (
                f"collusion threshold {request.collusion} is below its policy's min_collusion {self.min_collusion} "
                "(its noise must withstand that many colluding parties)"
            )
        if self.unit is not None and request.method != DRAFT:
            return self.unit.refusal(request.unit)
        return None

    def store_refusal(self, rho: float) -> str | None:
        """Why the party's own store cannot take ``rho`` now (read only: nothing is written), or None."""
        if self.store is None:
            return None
        rho_total, committed = store_standing(self)
        if committed + rho <= rho_total * (1 + STORE_TOLERANCE):
            return None
        left = max(0.0, rho_total - committed)
        left_eps = rho_to_epsilon(left, self.max_delta) if left > 0 else 0.0
        return (
            f"its budget store {self.store.path} (dataset '{self.store.dataset_id}') has rho {left:.6g} left "
            f"(epsilon {left_eps:.4g} of its total {self.store.total_epsilon:g} at delta {self.max_delta:g}), "
            f"but this release needs rho {rho:.6g}"
        )


#: As ``budget_store.TOLERANCE``: rounding slack when a spend is compared with a total.
STORE_TOLERANCE = 1e-9


def store_standing(policy: Policy) -> tuple[float, float]:
    """``(rho_total, rho_committed)`` of the policy's dataset in its store, read only (a store or a
    dataset that does not exist yet has its whole total left)."""
    from ..accounting import BudgetStore

    assert policy.store is not None
    spec = policy.store
    fresh = epsilon_to_rho(spec.total_epsilon, policy.max_delta), 0.0
    if not spec.path.exists():
        return fresh
    store = BudgetStore(spec.path, create=False)
    try:
        if spec.dataset_id not in store.datasets():
            return fresh
        budget = store.budget(spec.dataset_id)
        return budget.rho_total, budget.rho_committed
    finally:
        store.close()


def check_store_agrees(policy: Policy) -> None:
    """An ``InputError`` naming the policy file when its store already holds the dataset with another
    total epsilon or another delta (the store accounts the party's releases at ``max_delta``)."""
    from ..accounting import BudgetStore

    spec = policy.store
    if spec is None or not spec.path.exists():
        return
    store = BudgetStore(spec.path, create=False)
    try:
        if spec.dataset_id not in store.datasets():
            return
        budget = store.budget(spec.dataset_id)
    finally:
        store.close()
    if not math.isclose(budget.total_epsilon, spec.total_epsilon, rel_tol=1e-12):
        raise InputError(
            f"{policy.source}: field 'budget_store.total_epsilon' is {spec.total_epsilon:g}, but dataset "
            f"'{spec.dataset_id}' has total epsilon {budget.total_epsilon:g} in {spec.path}"
        )
    if not math.isclose(budget.delta, policy.max_delta, rel_tol=1e-12):
        raise InputError(
            f"{policy.source}: field 'max_delta' is {policy.max_delta:g}, but dataset '{spec.dataset_id}' is "
            f"accounted at delta {budget.delta:g} in {spec.path} (the store accounts at the policy's max_delta)"
        )


def _number(raw: dict, key: str, source: Path, low: float, high: float, *, closed_high: bool = True) -> float:
    value = raw[key]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))
    ok = ok and low < float(value) and (float(value) <= high if closed_high else float(value) < high)
    if not ok:
        bound = f"up to {high:g}" if closed_high else f"below {high:g}"
        raise InputError(f"{source}: field '{key}' must be a number above {low:g} and {bound}, not {value!r}")
    return float(value)


def load_policy(path: str | Path) -> Policy:
    """Read and check a policy file; an ``InputError`` (one line, naming the file and the field) if
    it is missing, not JSON, or any field is wrong."""
    source = Path(path)
    raw = read_json(source, "policy file", "--policy")
    if not isinstance(raw, dict):
        raise InputError(f"{source}: a policy is a JSON object with the fields {', '.join(REQUIRED)}")
    unknown = sorted(set(raw) - FIELDS)
    if unknown:
        raise InputError(f"{source}: unknown field '{unknown[0]}' (a policy has {', '.join(sorted(FIELDS))})")
    drafts_only = raw.get("methods") == [DRAFT]  # a draft has no schema yet to pin
    missing = [k for k in REQUIRED if k not in raw and not (drafts_only and k == "schema_sha256")]
    if missing:
        raise InputError(f"{source}: missing field '{missing[0]}'")
    max_epsilon = _number(raw, "max_epsilon", source, 0.0, MAX_EPSILON)
    max_delta = _number(raw, "max_delta", source, 0.0, MAX_DELTA, closed_high=False)
    methods = raw["methods"]
    if not isinstance(methods, list) or not methods or not all(isinstance(m, str) for m in methods):
        raise InputError(f"{source}: field 'methods' must be a non-empty list of method names")
    strange = [m for m in methods if m not in METHOD_STEPS]
    if strange:
        raise InputError(f"{source}: field 'methods' names {strange[0]!r}; a party serves {', '.join(METHOD_STEPS)}")
    schema = raw.get("schema_sha256")
    match = HEX64.fullmatch(schema) if isinstance(schema, str) else None
    if match is None and not (drafts_only and schema is None):
        raise InputError(
            f"{source}: field 'schema_sha256' must be the schema's SHA-256 (64 hex digits, optionally "
            "after 'sha256:'), as `mpc-party` prints it"
        )
    min_collusion = raw.get("min_collusion")
    if min_collusion is not None and (
        isinstance(min_collusion, bool) or not isinstance(min_collusion, int) or min_collusion < 1
    ):
        raise InputError(f"{source}: field 'min_collusion' must be a whole number of at least 1, not {min_collusion!r}")
    return Policy(
        source,
        max_epsilon,
        max_delta,
        tuple(dict.fromkeys(methods)),
        match.group(1).lower() if match else None,
        min_collusion,
        _store_spec(raw.get("budget_store"), source),
        _unit_rule(raw.get("privacy_unit"), source),
        *_approval(raw, source),
    )


def _approval(raw: dict, source: Path) -> tuple[str, float]:
    """``approve`` (``auto`` or ``person``) and ``approve_within_s`` (seconds, with ``person``)."""
    approve = raw.get("approve", "auto")
    if approve not in APPROVALS:
        raise InputError(f"{source}: field 'approve' must be 'auto' or 'person', not {approve!r}")
    within = raw.get("approve_within_s", APPROVE_WITHIN_S)
    if isinstance(within, bool) or not isinstance(within, (int, float)) or not 0 < within <= 30 * 86400:
        raise InputError(f"{source}: field 'approve_within_s' must be seconds in (0, 2592000], not {within!r}")
    if "approve_within_s" in raw and approve != "person":
        raise InputError(f'{source}: field \'approve_within_s\' goes with "approve": "person"')
    return approve, float(within)


def _unit_rule(raw: Any, source: Path) -> UnitRule | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("column"), str) or not raw["column"].strip():
        raise InputError(
            f"{source}: field 'privacy_unit' must be an object with a 'column' (optionally "
            "'min_silos_per_unit' and 'max_silos_per_unit')"
        )
    unknown = sorted(set(raw) - UNIT_FIELDS)
    if unknown:
        raise InputError(f"{source}: unknown field 'privacy_unit.{unknown[0]}'")
    bounds = []
    for key in ("min_silos_per_unit", "max_silos_per_unit"):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(
                f"{source}: field 'privacy_unit.{key}' must be a whole number of at least 1, not {value!r}"
            )
        bounds.append(value)
    if None not in bounds and bounds[0] > bounds[1]:
        raise InputError(f"{source}: field 'privacy_unit.min_silos_per_unit' is above its max_silos_per_unit")
    return UnitRule(raw["column"], bounds[0], bounds[1])


def _store_spec(raw: Any, source: Path) -> StoreSpec | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InputError(f"{source}: field 'budget_store' must be an object with {', '.join(sorted(STORE_FIELDS))}")
    unknown = sorted(set(raw) - STORE_FIELDS)
    if unknown:
        raise InputError(f"{source}: unknown field 'budget_store.{unknown[0]}'")
    missing = [k for k in sorted(STORE_FIELDS - {"new_dataset"}) if k not in raw]
    if missing:
        raise InputError(f"{source}: missing field 'budget_store.{missing[0]}'")
    if not isinstance(raw["path"], str) or not raw["path"].strip():
        raise InputError(f"{source}: field 'budget_store.path' must be a file name")
    from ..accounting import check_dataset_id

    check_dataset_id(raw["dataset_id"], f"{source}: field 'budget_store.dataset_id'")
    total = raw["total_epsilon"]
    if isinstance(total, bool) or not isinstance(total, (int, float)) or not 0 < float(total) <= MAX_EPSILON:
        raise InputError(
            f"{source}: field 'budget_store.total_epsilon' must be a positive number up to {MAX_EPSILON:g}, "
            f"not {total!r}"
        )
    path = Path(raw["path"]).expanduser()
    if not path.is_absolute():
        path = source.parent / path
    from ..common import Named, check_store

    try:
        check_store(Named("budget_store.path", path))
    except InputError as exc:
        raise InputError(f"{source}: field 'budget_store.path': {exc}") from None
    new = raw.get("new_dataset", False)
    if not isinstance(new, bool):
        raise InputError(f"{source}: field 'budget_store.new_dataset' must be true or false, not {new!r}")
    return StoreSpec(path, raw["dataset_id"], float(total), new)
