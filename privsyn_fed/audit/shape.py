"""The shape of a ledger (``validate_ledger``, run by ``load_ledger`` and by ``audit_ledger``
itself; a failure is an ``InputError``, exit status 2, naming the field, e.g. ``field
'entries[3].rho' must be a number, not a string``): the format is exactly ``privsyn-fed-ledger/1``;
every field the audit reads has its type (numbers finite, booleans not numbers, whole numbers at
most 2^53); the status is running, complete or failed; a mechanism is gaussian or exponential. A
file with NaN or Infinity, or nested too deeply for Python's JSON reader, is refused in one line.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..accounting import LEDGER_FORMAT
from ..common import InputError, read_json

#: Whole-number fields are at most this large (exactly representable as floats).
MAX_INTEGER = 2**53
NUMBER, INTEGER = "number", "whole number"
TOP_FIELDS = {
    "format": str,
    "method": str,
    "neighbouring": str,
    "epsilon": NUMBER,
    "delta": NUMBER,
    "rho_budget": NUMBER,
    "rho_spent": NUMBER,
    "seeded": bool,
    "status": str,
    "entries": list,
}
TOP_OPTIONAL = {
    "epsilon_budget": NUMBER,
    "non_private": str,
    "threat_model": str,
    "conversion": str,
    "created": str,
    "updated": str,
    "details": dict,
    "delta_conversion": NUMBER,
    "delta_budget": NUMBER,
}
ENTRY_FIELDS = {"step": INTEGER, "mechanism": str, "query": str, "rho": NUMBER, "where": str}
MECHANISM_FIELDS = {
    "gaussian": {"sensitivity_l2": NUMBER, "sigma": NUMBER},
    "exponential": {"sensitivity": NUMBER, "epsilon": NUMBER},
}
ENTRY_OPTIONAL = {
    "sampler": str,
    "round": INTEGER,
    "local_step": INTEGER,
    "cells": INTEGER,
    "candidates": INTEGER,
    "parallel_over": str,
    "noise_from": str,
    "collusion": str,
    "fixed_point": dict,
    "distributed": dict,
    "column": str,
    "min_count": NUMBER,
    "threshold": NUMBER,
    "delta": NUMBER,
}
#: Fields of an entry whose noise the parties drew themselves (``accounting.distributed``).
DISTRIBUTED_FIELDS = {"parties": INTEGER, "collusion": INTEGER}
DETAILS_OPTIONAL = {
    "columns": list,
    "column_types": list,
    "workload": list,
    "workload_weights": list,
    "options": dict,
    "rounds": INTEGER,
    "rows": INTEGER,
    "silos": INTEGER,
    "noise": str,
    "mpc": dict,
    "budget_store": dict,
    "traffic": dict,
    "shape": list,
    "schedule": dict,
    "dependence": dict,
    "dependence_rule": dict,
    "target_groups": INTEGER,
    "expected_oneway_tvd": NUMBER,
    "expected_oneway_tvd_independent": NUMBER,
    "model_sha256": str,
    "draft": dict,
    "party": dict,
}
#: The type of each method option the audit reads (``declared`` checks its range; null is the default).
OPTION_TYPES = {
    "rounds": INTEGER,
    "alpha": NUMBER,
    "max_model_size": NUMBER,
    "pgm_iters": INTEGER,
    "pgm_tol": NUMBER,
    "final_iters": INTEGER,
    "workload_degree": INTEGER,
    "workload_size": INTEGER,
    "workload": str,
    "sample_rate": NUMBER,
    "variant": str,
    "local_steps": INTEGER,
    "components": INTEGER,
    "norm_factor": NUMBER,
    "icdm_lambda": NUMBER,
    "threshold": NUMBER,
    "refine": INTEGER,
    "non_private": bool,
    "find_dependence": bool,
    "dependence_share": NUMBER,
}
MPC_OPTIONAL = {"debug": bool, "provider": str, "noise": str}
STATUSES = ("running", "complete", "failed")


def load_ledger(path: str | Path) -> dict[str, Any]:
    """Read and shape-check a ledger file (``InputError`` naming the file and the field)."""
    path = Path(path)

    def refuse_constant(name: str):
        raise InputError(f"{path}: {name} is not a finite number; a ledger holds finite numbers only")

    raw = read_json(path, "ledger file", parse_constant=refuse_constant)
    validate_ledger(raw, str(path))
    return raw


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    return {
        str: "a string",
        list: "a list",
        dict: "an object",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _show(value: Any) -> str:
    """A value for a one-line message: a string quoted and shortened, anything else by its kind."""
    if not isinstance(value, str):
        return _kind(value)
    return repr(value) if len(value) <= 60 else repr(value[:57] + "...")


def _finite(value: Any) -> bool:
    """A JSON number that is a finite float (booleans are not numbers; huge integers are not finite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _check_type(value: Any, want: Any, field: str, source: str) -> None:
    if want == NUMBER:
        ok = _finite(value)
    elif want == INTEGER:
        ok = isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_INTEGER
    else:
        ok = isinstance(value, want) and not (want is int and isinstance(value, bool))
    if not ok:
        name = (
            want
            if isinstance(want, str)
            else {str: "a string", bool: "true or false", list: "a list", dict: "an object"}[want]
        )
        article = "" if name.startswith(("a ", "an ", "true")) else ("an " if name[0] in "aeiou" else "a ")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and want in (NUMBER, INTEGER):
            if not _finite(value):
                name, article = f"finite {name}", "a "
                got = "a number too large for a float" if isinstance(value, int) else repr(value)
            elif want == INTEGER and isinstance(value, int):
                name, got = f"{name} of at most 2^53", "a larger one"
            else:
                got = "a fraction" if want == INTEGER else _kind(value)
        else:
            got = _kind(value)
        raise InputError(f"{source}: field '{field}' must be {article}{name}, not {got}")


def _check_fields(obj: dict, required: dict, optional: dict, prefix: str, source: str) -> None:
    for key, want in required.items():
        if key not in obj:
            raise InputError(f"{source}: not a privsyn-fed ledger (missing field '{prefix}{key}')")
        _check_type(obj[key], want, prefix + key, source)
    for key, want in optional.items():
        if key in obj:
            _check_type(obj[key], want, prefix + key, source)


def validate_ledger(raw: Any, source: str = "ledger") -> None:
    """The ledger's shape: its format and the type of every field the audit reads."""
    if not isinstance(raw, dict):
        raise InputError(f"{source}: a ledger is a JSON object, not {_kind(raw)}")
    if "format" not in raw:
        raise InputError(f"{source}: not a privsyn-fed ledger (missing field 'format')")
    if raw["format"] != LEDGER_FORMAT:
        raise InputError(
            f"{source}: unsupported ledger format {_show(raw['format'])} (this version reads {LEDGER_FORMAT!r})"
        )
    _check_fields(raw, TOP_FIELDS, TOP_OPTIONAL, "", source)
    if raw["status"] not in STATUSES:
        raise InputError(f"{source}: field 'status' must be one of {', '.join(STATUSES)}, not {_show(raw['status'])}")
    for i, e in enumerate(raw["entries"]):
        prefix = f"entries[{i}]."
        _check_type(e, dict, f"entries[{i}]", source)
        _check_fields(e, ENTRY_FIELDS, ENTRY_OPTIONAL, prefix, source)
        if e["mechanism"] not in MECHANISM_FIELDS:
            raise InputError(
                f"{source}: field '{prefix}mechanism' must be gaussian or exponential, not {_show(e['mechanism'])}"
            )
        _check_fields(e, MECHANISM_FIELDS[e["mechanism"]], {}, prefix, source)
        if "silos" in e and not (
            isinstance(e["silos"], int)
            and not isinstance(e["silos"], bool)
            or isinstance(e["silos"], list)
            and all(isinstance(x, str) for x in e["silos"])
        ):
            raise InputError(f"{source}: field '{prefix}silos' must be a number or a list of silo names")
        for key, value in e.get("fixed_point", {}).items():
            _check_type(value, NUMBER, f"{prefix}fixed_point.{key}", source)
        if "distributed" in e:
            _check_fields(e["distributed"], DISTRIBUTED_FIELDS, {"grid": NUMBER}, f"{prefix}distributed.", source)
    details = raw.get("details", {})
    _check_fields(details, {}, DETAILS_OPTIONAL, "details.", source)
    for key in ("columns", "column_types"):
        for i, v in enumerate(details.get(key, [])):
            _check_type(v, str, f"details.{key}[{i}]", source)
    for i, v in enumerate(details.get("shape", [])):
        _check_type(v, INTEGER, f"details.shape[{i}]", source)
    for key, value in details.get("schedule", {}).items():
        kind = INTEGER if key in ("rounds", "refine") else bool if key == "anneals" else NUMBER
        _check_type(value, kind, f"details.schedule.{key}", source)
    for i, clique in enumerate(details.get("workload", [])):
        _check_type(clique, list, f"details.workload[{i}]", source)
        for j, v in enumerate(clique):
            _check_type(v, str, f"details.workload[{i}][{j}]", source)
    for i, v in enumerate(details.get("workload_weights", [])):
        _check_type(v, INTEGER, f"details.workload_weights[{i}]", source)
    for key, value in details.get("options", {}).items():
        if isinstance(value, (dict, list)) and key != "split":
            raise InputError(f"{source}: field 'details.options.{key}' must be a plain value, not {_kind(value)}")
    options = details.get("options", {})
    for key, want in OPTION_TYPES.items():
        if options.get(key) is not None:
            _check_type(options[key], want, f"details.options.{key}", source)
    if options.get("split") is not None:
        if not isinstance(options["split"], tuple):  # a ledger in memory holds the option's tuple
            _check_type(options["split"], list, "details.options.split", source)
        for i, v in enumerate(options["split"]):
            _check_type(v, NUMBER, f"details.options.split[{i}]", source)
    _check_fields(details.get("mpc", {}), {}, MPC_OPTIONAL, "details.mpc.", source)
