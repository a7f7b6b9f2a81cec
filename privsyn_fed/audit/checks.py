"""Independent re-check of a ledger. It is total: any JSON file, and any dict handed to
``audit_ledger``, gets a verdict or a one-line ``InputError``, never a crash.

* **Shape** (``validate_ledger``, run by ``load_ledger`` and by ``audit_ledger`` itself; a failure
  is an ``InputError``, exit status 2, naming the field, e.g. ``field 'entries[3].rho' must be a
  number, not a string``): the format is exactly ``privsyn-fed-ledger/1``; every field the audit
  reads has its type (numbers finite, booleans not numbers, whole numbers at most 2^53); the
  status is running, complete or failed; a mechanism is gaussian or exponential. A file with
  NaN or Infinity, or nested too deeply for Python's JSON reader, is refused in one line.
* **Arithmetic**: each entry's cost recomputed here from its own parameters (``D^2 / (2 sigma^2)``
  or ``eps^2 / 8``; sigma, sensitivity and epsilon must be positive), the step numbers, the total
  (``rho_spent``), the budget, and the (epsilon, delta) conversion, checked against OpenDP and
  against an independent implementation of the same bound (``cks_delta``).
* **Where and how**: every entry ran at a known place (curator, aggregator, silo, mpc); parallel
  composition only for a mechanism each silo runs on its own rows; a run over MPC records its
  secure computation (``details.mpc`` with its debug flag), has no trusted curator or aggregator,
  and each selection on secret shares records fixed-point parameters whose rounding slack the
  epsilon charged covers.
* **Structure**: a complete ledger carries the ``details`` its method's check needs, and its
  entries are exactly the ones the algorithm makes, with at least the sound sensitivities
  recomputed from public facts the ledger records: for the AIM family (aim, distaim, flaim) the
  workload's largest weight, the number of rounds (and local steps) and the columns; for
  Fed-TDA the column types and options: the row total (1), the categorical histograms jointly
  (``sqrt(n_cat)``), the numeric histograms jointly (``sqrt(n_num)``) and the second moments
  (``B^2``, ``B = norm_factor sqrt(n_cat + 2 n_num)``), all Gaussian; an entry summed on secret
  shares may add its fixed-point rounding (``fixed_point.rounding_l2``) to a planned sensitivity
  that must be the sound one, and Fed-TDA's second moments on shares round by at least
  ``sqrt(cells) 2^-16``.
* **Approximate zCDP** (a DP schema draft, method ``schema-draft``): an entry may carry its own
  ``delta`` with its ``threshold`` (a Gaussian histogram over an unknown domain that lists the values
  whose noisy count reaches the threshold): its delta is recomputed here as
  ``erfc((threshold - 2) / (sigma sqrt 2)) / 2``; rho then converts at ``delta_conversion`` and the
  ledger's ``delta`` must be ``delta_conversion`` plus the entries' deltas, within ``delta_budget``.
  A draft's structure is re-derived from its recorded columns and noisy profile (``_check_draft``):
  one profile of sensitivity ``sqrt(1 + 2 d)`` over ``1 + 4 d`` cells first; then for each column
  what the profile decides: a histogram of its numbers over the intervals of a public grid (its
  bounds), or of its values with a threshold and its delta (its categories), each of sensitivity
  1, or nothing (a text column of too many distinct values).
* **Guarantee**: a seeded run (``seeded`` at the top level, or a seeded noise source named by any
  entry's ``sampler`` or ``noise_from``, ``details.noise`` or ``details.mpc.noise``), a
  non-private run, a debug MPC mode, a neighbouring relation other than add/remove one record,
  an unknown method, and a run that did not complete (status running or failed: no release
  belongs to it; its entries still record what was spent and are checked) all fail the audit.
Problems make the ledger fail (exit 1); warnings are informational only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..accounting.conversions import cks_delta, rho_to_epsilon
from ..accounting.ledger import LEDGER_FORMAT
from ..common import InputError

REL_TOL = 1e-9
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
    "expected_oneway_tvd": NUMBER,
    "expected_oneway_tvd_independent": NUMBER,
    "draft": dict,
}
MPC_OPTIONAL = {"debug": bool, "provider": str, "noise": str}
STATUSES = ("running", "complete", "failed")
#: Secure sums of real values (Fed-TDA's second moments) are shared on the grid 2^-MPC_REAL_BITS
#: (``privsyn_fed.mpc.aggregator.REAL_BITS``; kept here so that the audit needs no MPC stack).
MPC_REAL_BITS = 16
#: The releases of synthetic data (``privsyn_fed.methods.METHODS``), and every kind of ledger audit checks.
RELEASE_METHODS = ("aim", "distaim", "flaim", "fedtda", "independent")
METHODS = RELEASE_METHODS + ("schema-draft",)
#: The rules by which a DP schema draft's noisy profile decides each column (``privsyn_fed.draft_dp``;
#: kept here so that the audit re-derives the decisions independently): numbers when the noisy
#: non-number count is at most ``DRAFT_SEEN_SIGMAS sigma + 1/2``, else text, left out when its noisy
#: distinct count exceeds ``DRAFT_DISTINCT_GUARD``.
DRAFT_SEEN_SIGMAS = 4.0
DRAFT_DISTINCT_GUARD = 10_000
#: Where a mechanism runs: the central curator (AIM), the aggregator of the silos' sums, a silo on
#: its own rows, or secure computation among the silos.
WHERE = ("curator", "aggregator", "silo", "mpc")


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


def load_ledger(path: str | Path) -> dict[str, Any]:
    """Read and shape-check a ledger file (``InputError`` naming the file and the field)."""
    path = Path(path)

    def refuse_constant(name: str):
        raise InputError(f"{path}: {name} is not a finite number; a ledger holds finite numbers only")

    try:
        raw = json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse_constant)
    except FileNotFoundError:
        raise InputError(f"{path}: ledger file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a ledger") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise InputError(f"{path}: not a privsyn-fed ledger (JSON nested too deeply to read)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ledger ({exc})") from None
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
        _check_type(value, INTEGER if key in ("rounds", "refine") else NUMBER, f"details.schedule.{key}", source)
    for i, clique in enumerate(details.get("workload", [])):
        _check_type(clique, list, f"details.workload[{i}]", source)
        for j, v in enumerate(clique):
            _check_type(v, str, f"details.workload[{i}][{j}]", source)
    for key, value in details.get("options", {}).items():
        if isinstance(value, (dict, list)) and key != "split":
            raise InputError(f"{source}: field 'details.options.{key}' must be a plain value, not {_kind(value)}")
    options = details.get("options", {})
    for key, want in (("rounds", INTEGER), ("local_steps", INTEGER), ("variant", str), ("norm_factor", NUMBER)):
        if options.get(key) is not None:
            _check_type(options[key], want, f"details.options.{key}", source)
    if options.get("split") is not None:
        if not isinstance(options["split"], tuple):  # a ledger in memory holds the option's tuple
            _check_type(options["split"], list, "details.options.split", source)
        for i, v in enumerate(options["split"]):
            _check_type(v, NUMBER, f"details.options.split[{i}]", source)
    _check_fields(details.get("mpc", {}), {}, MPC_OPTIONAL, "details.mpc.", source)


def _cost(e: dict[str, Any]) -> float:
    """An entry's zCDP cost from its own parameters, computed here (not by the accountant), without
    overflow: ``D^2 / (2 sigma^2)`` or ``eps^2 / 8``; ``inf`` when it does not fit in a float. Noise
    summed from the parties' own draws (``distributed``): a selection still costs ``eps^2 / 8`` (a
    mixture of exponential mechanisms, ``accounting.distributed``); Gaussians over ``d`` cells with
    ``k = parties - collusion`` honest parties each drawing ``N_Z(0, s^2)`` cost
    ``D^2 / (2 k s^2) + d tau``, ``tau = 10 sum_{j<k} exp(-2 pi^2 s^2 j / (j+1))`` (Kairouz, Liu and
    Steinke 2021); ``inf`` (fails) for an invalid split."""
    if e["mechanism"] == "exponential":
        eps = float(e["epsilon"])
        return eps * eps / 8.0
    split = e.get("distributed")
    ratio = float(e["sensitivity_l2"]) / float(e["sigma"])
    if not split:
        return 0.5 * ratio * ratio
    grid = float(split.get("grid", 1.0))  # the noise's lattice step: the bound is in its units
    honest, s, d = split["parties"] - split["collusion"], float(e["sigma"]) / grid, e.get("cells")
    if not (1 <= honest <= split["parties"] and s >= 0.5 and isinstance(d, int) and d >= 1):
        return math.inf
    tau = 10.0 * sum(math.exp(-2.0 * (math.pi * s) ** 2 * j / (j + 1.0)) for j in range(1, honest))
    return 0.5 * ratio * ratio / honest + d * tau


def _effective_sigma(e: dict[str, Any]) -> float:
    """The sigma of one Gaussian with this entry's sensitivity and cost (``sigma`` itself unless
    the parties drew the noise): what a planned schedule is checked against."""
    return float(e["sensitivity_l2"]) / math.sqrt(2.0 * _cost(e)) if e.get("distributed") else float(e["sigma"])


def _planned_noise(e: dict[str, Any], sigma: float) -> bool:
    """Whether the entry's noise is the planned ``sigma``: exactly, or for noise the parties drew,
    at least it (each party adds at least half a grid step, which can exceed a tiny plan)."""
    if e.get("distributed"):
        return _effective_sigma(e) >= sigma * (1 - 1e-9)
    return _close(float(e["sigma"]), sigma, 1e-9)


def _square(x: float) -> float:
    return float(x) * float(x)  # inf rather than OverflowError


def _close(a: float, b: float, tol: float = REL_TOL) -> bool:
    return math.isclose(a, b, rel_tol=tol, abs_tol=1e-15)


#: Exponential-mechanism sensitivity per method, in units of the largest workload weight (the sound
#: values: AIM's score moves by w; DistAIM's and naive FLAIM's also through the secret or local
#: size; AugFLAIM's also through its heterogeneity term).
EM_SENSITIVITY = {
    "aim": 1.0,
    "distaim": 2.0,
    ("flaim", "naive"): 2.0,
    ("flaim", "private"): 4.0,
    ("flaim", "oracle"): 4.0,
}


def _check_composition(ledger: dict[str, Any], rep: AuditReport) -> None:
    """Parallel composition is sound only for a mechanism each silo runs on its own rows."""
    for i, e in enumerate(ledger["entries"]):
        if not isinstance(e, dict) or not e.get("parallel_over"):
            continue
        label = f"entry {i + 1} ({e.get('query', '?')})"
        silos = e.get("silos")
        if e["parallel_over"] != "silos" or e.get("where") != "silo":
            rep.problems.append(
                f"{label}: parallel composition is only valid for a mechanism run by each "
                f"silo on its own rows (parallel_over 'silos', where 'silo')"
            )
        elif not isinstance(silos, list) or not silos or len(set(map(str, silos))) != len(silos):
            rep.problems.append(f"{label}: a parallel entry must list the distinct silos it ran on")


def _mpc_run(ledger: dict[str, Any]) -> bool:
    """Whether the run computed on secret shares (``details.mpc``, or an entry ``where`` mpc)."""
    return "mpc" in (ledger.get("details") or {}) or any(e["where"] == "mpc" for e in ledger["entries"])


def _check_where(ledger: dict[str, Any], rep: AuditReport) -> None:
    """Where each mechanism ran decides which checks apply: it must be a known place, and a run over
    MPC (no trusted aggregator or curator) records its secure computation, debug mode included."""
    mpc = (ledger.get("details") or {}).get("mpc")
    for i, e in enumerate(ledger["entries"]):
        label = f"entry {i + 1} ({e['query']})"
        if e["where"] not in WHERE:
            rep.problems.append(
                f"{label}: where {e['where']!r} is not one of {', '.join(WHERE)}, so the audit "
                "cannot tell which checks apply to it"
            )
        elif mpc is not None and e["where"] in ("curator", "aggregator"):
            rep.problems.append(
                f"{label}: a run over MPC has no trusted {e['where']}; its mechanisms run on secret "
                "shares (where 'mpc') or in a silo (where 'silo')"
            )
        elif e.get("distributed") and e["where"] != "mpc":
            rep.problems.append(f"{label}: noise summed from the parties' own draws exists only on secret shares")
        elif e.get("distributed") and not 2.0**-MPC_REAL_BITS <= float(e["distributed"].get("grid", 1.0)) <= 1.0:
            rep.problems.append(
                f"{label}: the parties' noise lies on a grid of {e['distributed']['grid']}, but shares "
                f"are integers or multiples of 2^-{MPC_REAL_BITS}"
            )
        elif e.get("distributed") and not 1 <= e["distributed"]["collusion"] < e["distributed"]["parties"]:
            rep.problems.append(
                f"{label}: collusion threshold {e['distributed']['collusion']} for {e['distributed']['parties']} "
                "parties: it must lie in 1..parties-1 (each party knows its own noise and sees the release)"
            )
        if "dealer" in str(e.get("noise_from", "")):
            rep.warnings.append(
                f"{label}: its noise was dealt by the dealer, which knows it: the entry is DP only "
                "against a dealer that never sees the released outputs"
            )
    if _mpc_run(ledger) and (mpc is None or "debug" not in mpc):
        rep.problems.append(
            "entries were computed on secret shares, but the ledger does not record the secure "
            "computation (details.mpc, with its debug flag), so it cannot be checked"
        )


def _check_fixed_point(ledger: dict[str, Any], rep: AuditReport) -> None:
    """A selection on secret shares samples rounded Gumbel noise of scale ``b = 2^bits 2 D / eps_s``
    (each of the parties that add one, or the dealer's in earlier versions); rounding adds ``4 / b``
    to its bounded range, so ``eps_s + 4 / b`` must not exceed the epsilon charged (SECURITY.md,
    "Fixed-point effects"). In a run over MPC every selection that is not a silo's own (parallel
    over the silos) is one on secret shares."""
    mpc_run = _mpc_run(ledger)
    for i, e in enumerate(ledger["entries"]):
        if e["mechanism"] != "exponential" or not (e["where"] == "mpc" or mpc_run and not e.get("parallel_over")):
            continue
        label = f"entry {i + 1} ({e.get('query', '?')})"
        fp = e.get("fixed_point")
        try:
            eps_s, bits = float(fp["epsilon_sampled"]), fp["score_bits"]
            if not (eps_s > 0 and bits == int(bits) and 0 <= bits <= 64):
                raise ValueError("not a sampling epsilon and a number of bits")
            scale = math.ldexp(2.0 * float(e["sensitivity"]) / eps_s, int(bits))
            covered = eps_s + 4.0 / scale <= float(e["epsilon"]) * (1 + REL_TOL)
            consistent = _close(scale, float(fp["gumbel_scale_grid_units"]))
        except (TypeError, KeyError, ValueError, ZeroDivisionError, OverflowError):
            rep.problems.append(f"{label}: a selection on secret shares must record its fixed-point parameters")
            continue
        if not consistent:
            rep.problems.append(
                f"{label}: the recorded Gumbel scale does not match epsilon_sampled and the sensitivity"
            )
        elif not covered:
            rep.problems.append(f"{label}: the fixed-point rounding slack is not covered by the epsilon charged")


def _check_independent(ledger: dict[str, Any], d: dict[str, Any], rep: AuditReport) -> None:
    """The independent method makes one Gaussian release of every column's 1-way marginal: a record
    is in one cell of each of the ``d`` marginals, so its sensitivity is at least ``sqrt(d)``."""
    columns = d.get("columns")
    if not columns:
        rep.problems.append(
            "the ledger does not record its columns (details), so the structure of an "
            "independent release (one Gaussian of sensitivity sqrt(d)) cannot be checked"
        )
        return
    entries = ledger["entries"]
    if len(entries) != 1 or entries[0]["mechanism"] != "gaussian":
        rep.problems.append(
            f"{len(entries)} entries, but a complete independent run makes one Gaussian release "
            "of every column's 1-way marginal: an entry is missing or extra"
        )
        return
    sound = math.sqrt(len(columns))
    if float(entries[0]["sensitivity_l2"]) < sound * (1 - 1e-9):
        rep.problems.append(
            f"entry 1 ({entries[0]['query']}): sensitivity {entries[0]['sensitivity_l2']:g} is below "
            f"the sound value sqrt({len(columns)}) = {sound:g} of {len(columns)} one-way marginals"
        )


def _check_structure(ledger: dict[str, Any], rep: AuditReport) -> None:
    """For a finished run of a known method: every release the algorithm makes has an entry, with
    at least the sound sensitivity (recomputed from the recorded public workload)."""
    from ..methods.workload import downward_closure

    d = ledger.get("details") or {}
    method, options = ledger.get("method"), d.get("options") or {}
    columns, workload = d.get("columns"), d.get("workload")
    if method == "fedtda":
        _check_fedtda(ledger, d, rep)
        return
    if method == "independent":
        _check_independent(ledger, d, rep)
        return
    if method == "schema-draft":
        _check_draft(ledger, d, rep)
        return
    if not columns or not workload:
        rep.problems.append(
            "the ledger does not record its method's columns and workload (details), so its "
            "structure (one entry per release, sound sensitivities) cannot be checked"
        )
        return
    try:
        index = {c: i for i, c in enumerate(columns)}
        w_max = max(downward_closure([tuple(sorted(index[c] for c in cl)) for cl in workload]).values())
    except (KeyError, TypeError, ValueError):
        rep.problems.append("details.workload names columns that are not in details.columns")
        return
    variant = options.get("variant", "private")
    key = (method, variant) if method == "flaim" else method
    if key not in EM_SENSITIVITY:
        rep.problems.append(f"details.options.variant {variant!r} is not a flaim variant")
        return
    factor = EM_SENSITIVITY[key]
    ems = [(i, e) for i, e in enumerate(ledger["entries"]) if e["mechanism"] == "exponential"]
    gauss = [(i, e) for i, e in enumerate(ledger["entries"]) if e["mechanism"] == "gaussian"]
    for i, e in ems:
        if float(e.get("sensitivity", 0)) < factor * w_max * (1 - 1e-12):
            rep.problems.append(
                f"entry {i + 1} ({e.get('query')}): sensitivity {e.get('sensitivity')} is below "
                f"the sound value {factor:g} x max weight {w_max:g} = {factor * w_max:g} for {method}"
            )
    for i, e in gauss:
        if float(e.get("sensitivity_l2", 0)) < 1.0 - 1e-12:
            rep.problems.append(f"entry {i + 1} ({e.get('query')}): a count marginal has L2 sensitivity at least 1")
    n_cols = len(columns)
    steps = options.get("local_steps", 1) if method == "flaim" else 1
    schedule = d.get("schedule")
    if schedule is not None:
        closure = downward_closure([tuple(sorted(index[c] for c in cl)) for cl in workload])
        planned = _check_aim_family_schedule(ledger, d, closure, variant, rep)
        if planned is None:
            return
        rounds = d.get("rounds") if method == "aim" else planned
    else:  # T given (or a ledger from before schedules were planned)
        rounds = d.get("rounds") if method == "aim" else options.get("rounds")
        if rounds is None or rounds < 1 or steps is None or steps < 1:
            where = "details.rounds" if method == "aim" else "details.options.rounds"
            rep.problems.append(
                f"the ledger does not record a positive number of rounds ({where}"
                f"{', local_steps' if method == 'flaim' else ''}) or a planned schedule "
                f"(details.schedule), so the number of releases a complete {method} run makes "
                "cannot be checked"
            )
            return
    total = 1 if schedule is not None else 0  # the planning total
    if method in ("aim", "distaim"):
        expect = {"exponential": rounds, "gaussian": total + n_cols + rounds}
    else:
        T, s = rounds, steps
        expect = {"exponential": T * s}
        need = total + T * (2 * s - 1) + (max(T, 1) * n_cols if variant == "private" else n_cols)
        have = sum(_square(e["sensitivity_l2"]) for _, e in gauss)
        if have < need * (1 - 1e-9):
            rep.problems.append(
                f"the Gaussian releases add up to {have:g} unit-sensitivity measurements, fewer "
                f"than the {need} a {variant} FLAIM run with T={T}, s={s} makes"
            )
    for mech, count in expect.items():
        found = len(ems if mech == "exponential" else gauss)
        if count is not None and found != count:
            rep.problems.append(
                f"{found} {mech} entries, but a complete {method} run of these options makes "
                f"{count}: an entry is missing or extra"
            )


def _planning_total(ledger: dict[str, Any], d: dict[str, Any], n_columns: int, rep: AuditReport) -> float | None:
    """A planned schedule is recomputed from the domain (``details.shape``) and starts with the row
    total: a Gaussian of sensitivity 1 at ``allocation.TOTAL_SHARE`` of the budget. Returns the
    budget left after it (None on a problem)."""
    from ..methods import allocation

    schedule, shape = d["schedule"], d.get("shape")
    if not isinstance(shape, list) or len(shape) != n_columns:
        rep.problems.append(
            "a planned schedule is recomputed from the domain, but details.shape does not give "
            "the cells of every column"
        )
        return None
    entries = ledger["entries"]
    rho_budget = float(ledger["rho_budget"])
    first = entries[0] if entries else None
    if (
        first is None
        or first["mechanism"] != "gaussian"
        or not _close(float(first["sensitivity_l2"]), 1.0)
        or not _planned_noise(first, allocation.total_sigma(rho_budget))
    ):
        rep.problems.append(
            "a planned schedule starts with the row total (one Gaussian of sensitivity 1 with "
            f"{allocation.TOTAL_SHARE:g} of the budget), and the first entry is not that release"
        )
        return None
    if not _close(float(schedule.get("total_share", -1)), allocation.TOTAL_SHARE) or not _close(
        float(schedule.get("noise_to_signal", -1)), allocation.NOISE_TO_SIGNAL
    ):
        rep.problems.append(
            "details.schedule records other constants than this version's allocation rule "
            f"(total_share {allocation.TOTAL_SHARE:g}, noise_to_signal {allocation.NOISE_TO_SIGNAL:g})"
        )
        return None
    if "noisy_total" not in schedule:
        rep.problems.append("details.schedule does not record the noisy total the schedule was planned from")
        return None
    return rho_budget - _cost(first)


def _check_aim_family_schedule(
    ledger: dict[str, Any], d: dict[str, Any], closure: dict, variant: str, rep: AuditReport
) -> int | None:
    """The rounds a planned AIM, DistAIM or FLAIM schedule must have, recomputed from the recorded
    noisy total and the public facts of the ledger (``allocation``), and the noise of the 1-ways
    that follow the total. Returns the planned rounds (None on a problem)."""
    from ..methods import allocation

    schedule, options, method = d["schedule"], d.get("options") or {}, ledger["method"]
    shape, columns = d.get("shape"), d.get("columns") or []
    rest = _planning_total(ledger, d, len(columns), rep)
    if rest is None:
        return None
    n_hat, alpha, n_cols = float(schedule["noisy_total"]), float(options.get("alpha", 0.9)), len(columns)
    cells = [math.prod(shape[i] for i in cl) for cl in closure if len(cl) > 1]
    steps = int(options.get("local_steps") or 1)
    if method == "aim":
        planned = allocation.plan_aim(n_hat, rest, alpha, n_cols, cells)
        sigma = allocation.aim_sigma(rest, allocation.aim_units(planned, n_cols, alpha), alpha)
    elif method == "distaim":
        planned = allocation.plan_distaim(n_hat, rest, alpha, n_cols, cells, allocation.FEDERATED_ROUNDS)
        sigma = allocation.distaim_sigma(rest, planned, n_cols, alpha)
    else:
        planned = allocation.plan_flaim(
            n_hat, rest, alpha, n_cols, cells, allocation.FEDERATED_ROUNDS, steps, variant, int(d.get("silos") or 1)
        )
        sigma = allocation.flaim_sigma(rest, planned, steps, n_cols, alpha, variant)
    if schedule.get("rounds") != planned:
        rep.problems.append(
            f"details.schedule plans {schedule.get('rounds')} rounds, but the allocation rule "
            f"gives {planned} for the recorded noisy total {n_hat:g}"
        )
        return None
    oneways = ledger["entries"][1 : 1 + n_cols]
    if len(oneways) < n_cols or any(e["mechanism"] != "gaussian" or not _planned_noise(e, sigma) for e in oneways):
        rep.problems.append(
            f"the {n_cols} one-way measurements after the total must have the planned noise sigma {sigma:.6g}"
        )
        return None
    return planned


def _check_fedtda(ledger: dict[str, Any], d: dict[str, Any], rep: AuditReport) -> None:
    """Fed-TDA makes, in order, Gaussian releases of the row total (sensitivity 1), every
    categorical histogram jointly (``sqrt(n_cat)``, absent without categorical columns), every
    numeric histogram jointly (``sqrt(n_num)``, absent without numeric columns) and the second
    moments of rows clipped to ``B = norm_factor sqrt(n_cat + 2 n_num)`` (``B^2``). A secure sum
    adds its fixed-point rounding to a planned sensitivity that must be the sound one; on secret
    shares the second moments (real values on the grid ``2^-MPC_REAL_BITS``) round by at least
    ``sqrt(cells) 2^-MPC_REAL_BITS``."""
    types, columns, options = d.get("column_types"), d.get("columns"), d.get("options") or {}
    if not types or options.get("norm_factor") is None:
        rep.problems.append(
            "the ledger does not record fedtda's column types and options (details), so its "
            "structure (one entry per release, sound sensitivities) cannot be checked"
        )
        return
    unknown = sorted(set(types) - {"categorical", "numeric"})
    if unknown or (columns is not None and len(columns) != len(types)):
        rep.problems.append(
            "details.column_types must give one type, categorical or numeric, per column of "
            "details.columns" + (f" (not {unknown[0]!r})" if unknown else "")
        )
        return
    norm_factor = float(options["norm_factor"])
    if not norm_factor > 0:
        rep.problems.append(
            f"details.options.norm_factor {norm_factor:g} is not positive: fedtda clips rows to a positive norm"
        )
        return
    n_cat, n_num = types.count("categorical"), types.count("numeric")
    width, mpc_run, known = n_cat + 2 * n_num, _mpc_run(ledger), len(rep.problems)
    moments = width * (width + 1) // 2
    expect = [("the row total", 1.0, 0)]
    expect += [("the categorical histograms", math.sqrt(n_cat), 0)] if n_cat else []
    expect += [("the numeric histograms", math.sqrt(n_num), 0)] if n_num else []
    expect += [("the second moments", _square(norm_factor) * width, moments)]
    entries = ledger["entries"]
    if any(e["mechanism"] != "gaussian" for e in entries) or len(entries) != len(expect):
        rep.problems.append(
            f"{len(entries)} entries, but a complete fedtda run over {n_cat} categorical and {n_num} "
            f"numeric columns makes {len(expect)} Gaussian releases: an entry is missing or extra"
        )
        return
    for i, (e, (what, sound, real_cells)) in enumerate(zip(entries, expect)):
        label = f"entry {i + 1} ({e['query']})"
        fp = e.get("fixed_point") or {}
        planned = float(fp.get("sensitivity_planned", e["sensitivity_l2"]))
        rounding = float(fp.get("rounding_l2", 0.0))
        grid = math.sqrt(real_cells) * math.ldexp(1.0, -MPC_REAL_BITS) if mpc_run else 0.0
        if planned < sound * (1 - 1e-9):
            rep.problems.append(f"{label}: sensitivity {planned:g} is below the sound value {sound:g} of {what}")
        elif rounding < 0 or not _close(float(e["sensitivity_l2"]), planned + rounding):
            rep.problems.append(
                f"{label}: sensitivity {e['sensitivity_l2']:g} is not the planned {planned:g} plus "
                f"the fixed-point rounding {rounding:g}"
            )
        elif rounding < grid * (1 - 1e-9):
            rep.problems.append(
                f"{label}: {what} summed on secret shares are rounded to the grid 2^-{MPC_REAL_BITS}, "
                f"which adds {grid:.6g} to the sensitivity (sqrt({real_cells}) grid steps), but the "
                f"ledger records a rounding of {rounding:g}"
            )
    if d.get("schedule") is not None and len(rep.problems) == known:
        _check_fedtda_schedule(ledger, d, types, norm_factor * math.sqrt(width), rep)


def _check_fedtda_schedule(
    ledger: dict[str, Any], d: dict[str, Any], types: list, bound: float, rep: AuditReport
) -> bool:
    """A planned Fed-TDA schedule, recomputed from the recorded noisy total and the public facts of
    the ledger (``allocation.plan_fedtda``), and each release's noise against its planned share."""
    from ..methods import allocation

    schedule, shape, options = d["schedule"], d.get("shape"), d.get("options") or {}
    rest = _planning_total(ledger, d, len(types), rep)
    if rest is None:
        return False
    n_cat = types.count("categorical")
    numeric = [shape[j] for j, t in enumerate(types) if t == "numeric"]
    plan = allocation.plan_fedtda(
        float(schedule["noisy_total"]), rest, numeric, n_cat, bound, int(options.get("refine") or 4)
    )
    recorded = {k: schedule.get(k) for k in plan.record()}
    if not all(
        _close(float(recorded[k] if recorded[k] is not None else -1), float(v)) for k, v in plan.record().items()
    ):
        rep.problems.append(
            f"details.schedule records {recorded}, but the allocation rule gives {plan.record()} for "
            f"the recorded noisy total {schedule['noisy_total']:g}"
        )
        return False
    parts = ([plan.rho_cat] if n_cat else []) + ([plan.rho_num] if numeric else []) + [plan.rho_cov]
    for e, rho_part in zip(ledger["entries"][1:], parts):
        fp = e.get("fixed_point") or {}
        planned = float(fp.get("sensitivity_planned", e["sensitivity_l2"]))
        grown = dict(e, sigma=float(e["sigma"]) * planned / float(e["sensitivity_l2"]), sensitivity_l2=planned)
        if not _planned_noise(grown, planned / math.sqrt(2.0 * rho_part)):  # before any fixed-point growth
            rep.problems.append(
                f"entry {e['step']} ({e['query']}): its noise does not spend the planned rho {rho_part:.6g}"
            )
            return False
    return True


def threshold_delta(sigma: float, threshold: float) -> float:
    """``erfc((tau - 2) / (sigma sqrt 2)) / 2``: a bound on the probability that a value held by one
    record passes the threshold ``tau`` of a histogram with discrete Gaussian noise of scale
    ``sigma``, ``P(1 + Z >= tau) <= P(N(0, sigma^2) >= tau - 2)`` (recomputed here, independently of
    ``privsyn_fed.draft_dp``)."""
    return 0.5 * math.erfc((float(threshold) - 2.0) / (float(sigma) * math.sqrt(2.0)))


def _conversion_delta(ledger: dict[str, Any], rep: AuditReport) -> float:
    """The delta at which rho converts: the ledger's ``delta``, or for approximate zCDP (entries with
    their own ``delta``) ``delta_conversion``, after checking that ``delta`` is it plus the entries'
    deltas (each recomputed from its sigma and threshold) and within ``delta_budget``."""
    delta = float(ledger["delta"])
    own = [(i, e) for i, e in enumerate(ledger["entries"]) if "delta" in e or "threshold" in e]
    for i, e in own:
        label = f"entry {i + 1} ({e['query']})"
        if e["mechanism"] != "gaussian" or "delta" not in e or "threshold" not in e:
            rep.problems.append(f"{label}: only a thresholded Gaussian histogram carries a delta and a threshold")
        elif not float(e["threshold"]) >= 2 or not float(e["sigma"]) > 0:
            rep.problems.append(f"{label}: a histogram threshold is at least 2, not {e['threshold']!r}")
        elif not float(e["delta"]) >= threshold_delta(e["sigma"], e["threshold"]) * (1 - 1e-9):
            rep.problems.append(
                f"{label}: recorded delta {e['delta']:.6g} is below what its threshold {e['threshold']:g} "
                f"and sigma {e['sigma']:g} give ({threshold_delta(e['sigma'], e['threshold']):.6g})"
            )
    if "delta_conversion" not in ledger:
        if own:
            rep.problems.append(
                "entries carry their own delta, but the ledger does not record the delta its rho converts "
                "at (delta_conversion)"
            )
        return delta
    conversion = float(ledger["delta_conversion"])
    spent = sum(float(e.get("delta", 0.0)) for _, e in own)
    if not 0 < conversion < 1:
        rep.problems.append(f"delta_conversion {conversion!r} is not in (0, 1)")
        return delta
    if not _close(delta, conversion + spent):
        rep.problems.append(
            f"delta {delta:.8g} is not delta_conversion {conversion:.8g} plus the entries' deltas {spent:.8g}"
        )
    budget = ledger.get("delta_budget")
    if budget is None or delta > float(budget) * (1 + REL_TOL):
        rep.problems.append(f"delta {delta:.8g} is not within the recorded delta_budget {budget}")
    return conversion


def _check_draft(ledger: dict[str, Any], d: dict[str, Any], rep: AuditReport) -> None:
    """A DP schema draft over the recorded columns (``details.columns``, the table's header): first
    the profile, one Gaussian of sensitivity at least ``sqrt(1 + 2 k)`` over ``1 + 4 k`` cells (the
    row count, and per column three exclusive counts and a capped distinct count, each moved by at
    most one record); then, in column order, what its noisy profile (``details.draft.profile``)
    decides for each column: a histogram of its numbers over the intervals of a public grid (no
    delta: the domain is public; its cells recorded) for a column of numbers; nothing for a text
    column of more than ``DRAFT_DISTINCT_GUARD`` distinct values; otherwise a thresholded histogram
    of its values with its delta. Each histogram is a Gaussian of sensitivity at least 1 (a record is
    in one cell of it)."""
    columns = d.get("columns")
    if not columns:
        rep.problems.append("the ledger does not record the drafted table's columns (details.columns)")
        return
    k = len(columns)
    entries = ledger["entries"]
    first = entries[0] if entries else None
    sound = math.sqrt(1.0 + 2.0 * k)
    if first is None or first["mechanism"] != "gaussian" or "column" in first or "threshold" in first:
        rep.problems.append("a schema draft starts with the profile of its columns (one Gaussian release)")
        return
    if float(first["sensitivity_l2"]) < sound * (1 - 1e-9):
        rep.problems.append(
            f"entry 1 ({first['query']}): sensitivity {first['sensitivity_l2']:g} is below the sound value "
            f"sqrt(1 + 2 x {k}) = {sound:g} of the profile of {k} columns"
        )
    if first.get("cells") != 1 + 4 * k:
        rep.problems.append(
            f"entry 1 ({first['query']}): the profile of {k} columns has {1 + 4 * k} cells, not {first.get('cells')}"
        )
        return
    profile = (d.get("draft") or {}).get("profile") if isinstance(d.get("draft"), dict) else None
    if not (
        isinstance(profile, list)
        and len(profile) == 1 + 4 * k
        and all(isinstance(v, int) and not isinstance(v, bool) for v in profile)
    ):
        rep.problems.append(
            f"the ledger does not record the draft's noisy profile (details.draft.profile, {1 + 4 * k} whole "
            "numbers), so the releases it decides cannot be checked"
        )
        return
    seen = DRAFT_SEEN_SIGMAS * float(first["sigma"]) + 0.5
    expected = []
    for j, col in enumerate(columns):
        non_numbers, distinct = profile[2 + 4 * j], profile[4 + 4 * j]
        if non_numbers <= seen:
            expected.append((col, "bounds"))
        elif distinct <= DRAFT_DISTINCT_GUARD:
            expected.append((col, "categories"))
    found = []
    for i, e in enumerate(entries[1:], start=2):
        label = f"entry {i} ({e['query']})"
        kind = "categories" if "threshold" in e else "bounds"
        found.append((e.get("column"), kind))
        if e["mechanism"] != "gaussian":
            rep.problems.append(f"{label}: a drafting release is a Gaussian histogram, not {e['mechanism']}")
        elif float(e["sensitivity_l2"]) < 1 - 1e-12:
            rep.problems.append(f"{label}: a histogram of one column has L2 sensitivity at least 1")
        elif kind == "bounds" and not (isinstance(e.get("cells"), int) and e["cells"] >= 2):
            rep.problems.append(f"{label}: a bounds histogram records its intervals (cells)")
    if found != expected:
        missing = [f"{kind} of '{col}'" for col, kind in expected if (col, kind) not in found]
        extra = [f"{kind} of {col!r}" for col, kind in found if (col, kind) not in expected]
        rep.problems.append(
            "the releases after the profile are not the ones its noisy profile decides (numbers: bounds; text "
            f"of at most {DRAFT_DISTINCT_GUARD:,} distinct values: categories; in column order)"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f"; unexpected: {', '.join(extra)}" if extra else "")
        )


def _seeded_samplers(ledger: dict[str, Any]) -> list[str]:
    """Noise sources that say they are seeded (or not private): each entry's ``sampler`` and
    ``noise_from`` (MPC: the dealer's), ``details.noise`` and ``details.mpc.noise``."""
    details = ledger.get("details") or {}
    names = [e.get(key, "") for e in ledger["entries"] for key in ("sampler", "noise_from")]
    names += [details.get("noise", ""), (details.get("mpc") or {}).get("noise", "")]
    return sorted({n for n in names if "seeded" in n.lower() or "not private" in n.lower()})


def audit_ledger(ledger: dict[str, Any]) -> AuditReport:
    """Audit a ledger (see the module docstring); ``InputError`` when it is not shaped like one."""
    validate_ledger(ledger)
    rep = AuditReport()
    total = 0.0
    for i, e in enumerate(ledger["entries"]):
        mech = e["mechanism"]
        label = f"entry {i + 1} (step {e['step']}, {e['query']})"
        if e["step"] != i + 1:
            rep.problems.append(f"{label}: step number {e['step']} out of sequence (expected {i + 1})")
        params = ("sensitivity_l2", "sigma") if mech == "gaussian" else ("sensitivity", "epsilon")
        bad = [k for k in params if not e[k] > 0]
        if bad:
            rep.problems.append(f"{label}: {bad[0]} must be positive, not {e[bad[0]]!r}")
            continue
        expected = _cost(e)
        if not _close(float(e["rho"]), expected):
            rep.problems.append(f"{label}: recorded rho {e['rho']:.6g} but its parameters give {expected:.6g}")
        total += expected
    rho_spent, rho_budget = float(ledger["rho_spent"]), float(ledger["rho_budget"])
    delta, epsilon = _conversion_delta(ledger, rep), float(ledger["epsilon"])
    if not _close(rho_spent, total):
        rep.problems.append(f"rho_spent is {rho_spent:.8g} but the entries add up to {total:.8g}")
    if total > rho_budget * (1 + REL_TOL):
        rep.problems.append(f"the entries spend {total:.8g}, more than the budget rho_budget={rho_budget:.8g}")
    if not 0 < delta < 1:
        rep.problems.append(f"delta {delta!r} is not in (0, 1)")
    elif rho_budget < 0:
        rep.problems.append(f"rho_budget {rho_budget!r} is negative")
    elif not math.isfinite(rho_to_epsilon(total, delta)):
        rep.problems.append(f"the entries spend rho {total:.8g}, which no finite epsilon covers")
    else:
        eps_opendp = rho_to_epsilon(total, delta)
        if not _close(epsilon, eps_opendp, 1e-6):
            rep.problems.append(
                f"epsilon {epsilon:.8g} is not what rho={total:.8g} converts to at delta={delta:g} ({eps_opendp:.8g})"
            )
        try:
            agrees = total == 0 or cks_delta(total, eps_opendp) <= delta * (1 + 1e-6)
        except (OverflowError, ValueError, ZeroDivisionError):
            agrees = False
        if not agrees:
            rep.problems.append("OpenDP's conversion disagrees with the independent CKS bound")
        eb = ledger.get("epsilon_budget")
        if eb is not None and rho_to_epsilon(rho_budget, delta) > float(eb) * (1 + 1e-6):
            rep.problems.append(f"rho_budget {rho_budget:.8g} converts to more than epsilon_budget {eb}")
    if ledger["neighbouring"] != "add/remove one record":
        rep.problems.append(
            f"neighbouring relation is {ledger['neighbouring']!r}; every sensitivity here is "
            "derived for add/remove one record"
        )
    if ledger["method"] not in METHODS:
        rep.problems.append(f"unknown method {ledger['method']!r}: no algorithm to check the entries against")
    if ledger["seeded"]:
        rep.problems.append(
            "SEEDED RUN: its noise is predictable to anyone who knows the seed; this is not a "
            "private release (tests and demos only)"
        )
    elif _seeded_samplers(ledger):
        rep.problems.append(
            f"SEEDED NOISE: the ledger says it is not seeded, but noise came from "
            f"{_seeded_samplers(ledger)[0]!r}; this is not a private release"
        )
    _check_where(ledger, rep)
    _check_composition(ledger, rep)
    _check_fixed_point(ledger, rep)
    if ledger["status"] == "complete" and ledger["method"] in METHODS:
        _check_structure(ledger, rep)
    mpc = (ledger.get("details") or {}).get("mpc") or {}
    if isinstance(mpc, dict) and mpc.get("debug"):
        rep.problems.append(
            f"DEBUG MPC MODE ({mpc.get('provider', 'unknown provider')}): a party could see "
            "the other parties' values; this release is not protected by secure computation"
        )
    if ledger.get("non_private"):
        rep.problems.append(f"NOT PRIVATE: {ledger['non_private']}")
    if ledger["status"] != "complete":
        rep.problems.append(
            f"the run did not complete (status {ledger['status']!r}): no synthetic data belongs "
            "to this ledger; its entries record what was spent before it stopped"
        )
    rep.summary = {
        "entries": len(ledger["entries"]),
        "rho_spent": total,
        "rho_budget": rho_budget,
        "epsilon": epsilon,
        "delta": float(ledger["delta"]),
        "method": ledger.get("method"),
    }
    return rep
