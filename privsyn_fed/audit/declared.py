"""The declared inputs of a release (``details``): the options it ran with, its domain and its silos.
Each must be a value a run accepts and agree with the others, so that the checks that recompute
the entries from them (``structure`` and the modules it calls) start from facts a run could have
had. A complete release records its silos, domain, noise source, rows and rounds
(``RELEASE_DETAILS``) and every option of its method (``OPTIONS``, kept here so that the audit is
independent of the code it checks; a test compares the two) and no other; a release that
declares ``non_private`` in its options says so in the ledger too.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ..methods import DEPENDENCE_SHARE, GROUPING_SHARE, TARGET_SHARE
from .findings import AuditReport
from .party_copy import is_party_copy
from .shape import _finite as _number
from .workload import EXPLICIT_WORKLOAD

#: What every complete release records of itself (``details``), besides its options.
RELEASE_DETAILS = ("silos", "columns", "column_types", "shape", "noise", "rows", "rounds")
#: The most rounds, and the most synthetic rows, a run accepts.
MAX_ROUNDS = 100_000
MAX_ROWS = 1_000_000_000


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _split(v: Any) -> bool:
    """Four finite non-negative shares; the total's and the covariance's positive."""
    return (
        isinstance(v, (list, tuple)) and len(v) == 4 and all(_number(x) and x >= 0 for x in v) and min(v[0], v[3]) > 0
    )


Rule = tuple[str, Callable[[Any], bool]]
#: The options of a release with a target column (``methods.target``); a ledger that records
#: neither ran without one.
TARGET_OPTIONS: dict[str, Rule] = {
    "target": ("null or a column's name", lambda v: v is None or isinstance(v, str)),
    "target_share": ("a number in (0, 1)", lambda v: _number(v) and 0 < v < 1),
}
#: The options of ``--find-dependence`` (``methods.dependence``); a ledger that records neither ran
#: without it.
DEPENDENCE_OPTIONS: dict[str, Rule] = {
    "find_dependence": ("true, false or null (the rule decides)", lambda v: v is None or isinstance(v, bool)),
    "dependence_share": (
        f"a number in (0, {1 - GROUPING_SHARE:g})",
        lambda v: _number(v) and 0 < v < 1 - GROUPING_SHARE,
    ),
}
#: Options added after the first ledgers were written: a complete ledger without one predates it.
LATER_OPTIONS: dict[str, Rule] = {
    "final_iters": ("a whole number of at least 0", lambda v: _whole(v) and v >= 0),
}
AIM_OPTIONS: dict[str, Rule] = {
    "rounds": (
        f"null or a whole number from 1 to {MAX_ROUNDS}",
        lambda v: v is None or _whole(v) and 1 <= v <= MAX_ROUNDS,
    ),
    "alpha": ("a number in (0, 1)", lambda v: _number(v) and 0 < v < 1),
    "max_model_size": ("a positive number", lambda v: _number(v) and v > 0),
    "pgm_iters": ("a whole number of at least 1", lambda v: _whole(v) and v >= 1),
    "pgm_tol": ("null or a number of at least 0", lambda v: v is None or _number(v) and v >= 0),
    "workload_degree": ("null or a whole number of at least 1", lambda v: v is None or _whole(v) and v >= 1),
    "workload_size": ("null or a whole number of at least 0", lambda v: v is None or _whole(v) and v >= 0),
    "workload_seed": ("a whole number of at least 0", lambda v: _whole(v) and v >= 0),
    **TARGET_OPTIONS,
    **DEPENDENCE_OPTIONS,
    **LATER_OPTIONS,
}
FEDERATED_OPTIONS: dict[str, Rule] = {
    **AIM_OPTIONS,
    "sample_rate": ("null or a number in (0, 1]", lambda v: v is None or _number(v) and 0 < v <= 1),
}
#: Every option of each method, with the values a run accepts.
OPTIONS: dict[str, dict[str, Rule]] = {
    "aim": AIM_OPTIONS,
    "distaim": FEDERATED_OPTIONS,
    "flaim": {
        **FEDERATED_OPTIONS,
        "variant": ("naive, private or oracle", lambda v: v in ("naive", "private", "oracle")),
        "local_steps": ("a whole number of at least 1", lambda v: _whole(v) and v >= 1),
    },
    "fedtda": {
        "split": (
            "null or four non-negative shares, the first and the last positive",
            lambda v: v is None or _split(v),
        ),
        "components": ("a whole number of at least 1", lambda v: _whole(v) and v >= 1),
        "norm_factor": ("a positive number", lambda v: _number(v) and v > 0),
        "icdm_lambda": ("a number in (0, 0.5)", lambda v: _number(v) and 0 < v < 0.5),
        "threshold": ("a number", _number),
        "refine": ("1, 2 or 4", lambda v: v in (1, 2, 4) and _whole(v)),
        "non_private": ("true or false", lambda v: isinstance(v, bool)),
        **TARGET_OPTIONS,
    },
    "independent": {},
}


def _check_options(ledger: dict[str, Any], options: dict[str, Any], rep: AuditReport) -> bool:
    """Every option of the method, each a value the method accepts, and no other; whether every
    option recorded has such a value."""
    method, known = ledger["method"], len(rep.problems)
    rules = OPTIONS[method]
    complete = ledger["status"] == "complete"
    for key, (text, ok) in rules.items():
        if key not in options:
            if complete and not any(key in group for group in (TARGET_OPTIONS, DEPENDENCE_OPTIONS, LATER_OPTIONS)):
                rep.problems.append(f"details.options does not record {key}, an option of every {method} run")
        elif not ok(options[key]):
            rep.problems.append(f"details.options.{key} must be {text}, not {options[key]!r}")
    valid = len(rep.problems) == known
    for key in options:
        if key == "workload" and method in ("aim", "distaim", "flaim"):
            if options[key] != EXPLICIT_WORKLOAD:
                rep.problems.append(
                    f"details.options.workload must be {EXPLICIT_WORKLOAD!r} (the cliques are in details.workload), "
                    f"not {options[key]!r}"
                )
        elif key not in rules:
            rep.problems.append(f"details.options.{key} is not an option of {method}")
    if options.get("target") is None and options.get("target_share", TARGET_SHARE) != TARGET_SHARE:
        rep.problems.append(
            f"details.options.target_share is {options.get('target_share')!r} without a target, where a run "
            f"keeps the default {TARGET_SHARE:g}"
        )
    share = options.get("dependence_share", DEPENDENCE_SHARE)
    if options.get("find_dependence") is False and share != DEPENDENCE_SHARE:
        rep.problems.append(
            f"details.options.dependence_share is {share!r} with find_dependence false, "
            f"where a run keeps the default {DEPENDENCE_SHARE:g}"
        )
    if method == "fedtda" and options.get("non_private") is True and not ledger.get("non_private"):
        rep.problems.append("details.options.non_private is true, but the ledger does not declare the run non-private")
    return valid


def _check_domain(d: dict[str, Any], rep: AuditReport) -> bool:
    """Distinct columns, one type (categorical or numeric) and one size (at least 1) per column;
    whether they hold."""
    columns, known = d.get("columns"), len(rep.problems)
    if columns is not None and len(set(columns)) != len(columns):
        rep.problems.append("details.columns names a column twice")
    n = len(columns) if columns is not None else None
    for key in ("column_types", "shape"):
        values = d.get(key)
        if values is not None and n is not None and len(values) != n:
            rep.problems.append(f"details.{key} has {len(values)} entries for the {n} columns of details.columns")
    unknown = [t for t in d.get("column_types") or [] if t not in ("categorical", "numeric")]
    if unknown:
        rep.problems.append(
            f"details.column_types must give categorical or numeric for each column, not {unknown[0]!r}"
        )
    if any(s < 1 for s in d.get("shape") or []):
        rep.problems.append("details.shape must give each column's number of cells, at least 1")
    return len(rep.problems) == known


def _check_counts(d: dict[str, Any], rep: AuditReport) -> None:
    """The silos (at least 1), the synthetic rows (1 to ``MAX_ROWS``), the rounds run (at least 0)
    and the expected one-way errors (more than 0)."""
    if "silos" in d and not d["silos"] >= 1:
        rep.problems.append(f"details.silos must be at least 1, not {d['silos']}")
    if "rows" in d and not 1 <= d["rows"] <= MAX_ROWS:
        rep.problems.append(f"details.rows must be a row count from 1 to {MAX_ROWS:,}, not {d['rows']}")
    if "rounds" in d and not d["rounds"] >= 0:
        rep.problems.append(f"details.rounds must be at least 0, not {d['rounds']}")
    for key in ("expected_oneway_tvd", "expected_oneway_tvd_independent"):
        if key in d and not d[key] > 0:
            rep.problems.append(f"details.{key} is an expected error of noise, more than 0, not {d[key]}")
    if "model_sha256" in d and not re.fullmatch(r"[0-9a-f]{64}", d["model_sha256"]):
        rep.problems.append("details.model_sha256 must be a SHA-256 digest (64 hexadecimal digits)")


def _check_silo_column(d: dict[str, Any], rep: AuditReport) -> None:
    """A silo column (``silo.site``), if recorded: a categorical column of the release whose cells are
    exactly its silos, one distinct name per silo of ``details.silos``."""
    site = d.get("silo_column")
    if site is None:
        return
    names = site.get("silos") if isinstance(site, dict) else None
    column = site.get("column") if isinstance(site, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names) or not isinstance(column, str):
        rep.problems.append("details.silo_column must record its column and the silos' names (text)")
        return
    if len(set(names)) != len(names):
        rep.problems.append("details.silo_column names a silo twice")
    if "silos" in d and len(names) != d["silos"]:
        rep.problems.append(f"details.silo_column names {len(names)} silos, but the release had {d['silos']}")
    columns = d.get("columns") or []
    if column not in columns:
        rep.problems.append(f"details.silo_column's column {column!r} is not a column of the release")
        return
    j = columns.index(column)
    kind = (d.get("column_types") or [None] * len(columns))[j]
    size = (d.get("shape") or [None] * len(columns))[j]
    if kind != "categorical" or size != len(names):
        rep.problems.append(
            f"details.silo_column's column {column!r} must be categorical with one cell per silo ({len(names)}), "
            f"not {kind} with {size}"
        )


def _check_declared(ledger: dict[str, Any], rep: AuditReport) -> bool:
    """The declared inputs of a release (module docstring); whether the domain and the options it
    records are valid, so that the checks that compute with them may run."""
    d = ledger.get("details") or {}
    valid = _check_domain(d, rep)
    _check_counts(d, rep)
    _check_silo_column(d, rep)
    if ledger["method"] in OPTIONS and not is_party_copy(ledger):
        missing = [k for k in RELEASE_DETAILS if k not in d]
        if ledger["status"] == "complete" and d and missing:
            rep.problems.append(f"the ledger does not record {', '.join(missing)} (details) of its release")
        if "options" in d:
            valid = _check_options(ledger, d["options"], rep) and valid
        elif ledger["status"] == "complete":
            rep.problems.append(
                f"the ledger does not record the options of its {ledger['method']} run (details.options)"
            )
    return valid
