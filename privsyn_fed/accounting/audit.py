"""Independent re-check of a ledger: every entry's cost from its own parameters, the total,
the budget and the (epsilon, delta) conversion.

The conversion is checked twice: against OpenDP and against an independent implementation of
the same bound (``cks_delta``). Problems make the ledger fail; warnings (a seeded run, a run
that did not finish) are reported but do not make the arithmetic wrong.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from .conversions import cks_delta, rho_to_epsilon
from .ledger import entry_rho

REL_TOL = 1e-9
REQUIRED_TOP = ("method", "neighbouring", "epsilon", "delta", "rho_budget", "rho_spent", "seeded", "entries")
REQUIRED_ENTRY = {
    "gaussian": ("step", "query", "sensitivity_l2", "sigma", "rho", "where"),
    "exponential": ("step", "query", "sensitivity", "epsilon", "rho", "where"),
}


@dataclass
class AuditReport:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def load_ledger(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: ledger file not found") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ledger ({exc})") from None
    if not isinstance(raw, dict):
        raise InputError(f"{path}: a ledger is a JSON object")
    missing = [k for k in REQUIRED_TOP if k not in raw]
    if missing:
        raise InputError(f"{path}: not a privsyn-fed ledger (missing field '{missing[0]}')")
    if not isinstance(raw["entries"], list):
        raise InputError(f"{path}: 'entries' must be a list")
    return raw


def _close(a: float, b: float, tol: float = REL_TOL) -> bool:
    return math.isclose(a, b, rel_tol=tol, abs_tol=1e-15)


#: Exponential-mechanism sensitivity per method, in units of the largest workload weight (the sound
#: values: AIM's score moves by w; DistAIM's and naive FLAIM's also through the secret or local
#: size; AugFLAIM's also through its heterogeneity term).
EM_SENSITIVITY = {"aim": 1.0, "distaim": 2.0, ("flaim", "naive"): 2.0, ("flaim", "private"): 4.0,
                  ("flaim", "oracle"): 4.0}


def _check_composition(ledger: dict[str, Any], rep: AuditReport) -> None:
    """Parallel composition is sound only for a mechanism each silo runs on its own rows."""
    for i, e in enumerate(ledger["entries"]):
        if not isinstance(e, dict) or not e.get("parallel_over"):
            continue
        label = f"entry {i + 1} ({e.get('query', '?')})"
        silos = e.get("silos")
        if e["parallel_over"] != "silos" or e.get("where") != "silo":
            rep.problems.append(f"{label}: parallel composition is only valid for a mechanism run by each "
                                f"silo on its own rows (parallel_over 'silos', where 'silo')")
        elif not isinstance(silos, list) or not silos or len(set(map(str, silos))) != len(silos):
            rep.problems.append(f"{label}: a parallel entry must list the distinct silos it ran on")


def _check_fixed_point(ledger: dict[str, Any], rep: AuditReport) -> None:
    """A selection on secret shares samples rounded Gumbel noise of scale ``b = 2^bits 2 D / eps_s``;
    rounding adds ``4 / b`` to its bounded range, so ``eps_s + 4 / b`` must not exceed the epsilon
    charged (SECURITY.md, "Fixed-point effects")."""
    for i, e in enumerate(ledger["entries"]):
        if not isinstance(e, dict) or e.get("mechanism") != "exponential" or e.get("where") != "mpc":
            continue
        label = f"entry {i + 1} ({e.get('query', '?')})"
        fp = e.get("fixed_point")
        try:
            scale = math.ldexp(2.0 * float(e["sensitivity"]) / float(fp["epsilon_sampled"]), int(fp["score_bits"]))
            covered = float(fp["epsilon_sampled"]) + 4.0 / scale <= float(e["epsilon"]) * (1 + REL_TOL)
            consistent = _close(scale, float(fp["gumbel_scale_grid_units"]))
        except (TypeError, KeyError, ValueError, ZeroDivisionError):
            rep.problems.append(f"{label}: a selection on secret shares must record its fixed-point parameters")
            continue
        if not consistent:
            rep.problems.append(f"{label}: the recorded Gumbel scale does not match epsilon_sampled and the sensitivity")
        elif not covered:
            rep.problems.append(f"{label}: the fixed-point rounding slack is not covered by the epsilon charged")


def _check_structure(ledger: dict[str, Any], rep: AuditReport) -> None:
    """For a finished run of a known method: every release the algorithm makes has an entry, with
    at least the sound sensitivity (recomputed from the recorded public workload)."""
    from ..workload import downward_closure

    d = ledger.get("details") or {}
    method, options = ledger.get("method"), d.get("options") or {}
    columns, workload = d.get("columns"), d.get("workload")
    if method not in ("aim", "distaim", "flaim"):
        rep.warnings.append(f"no structural check (one entry per release, sound sensitivities) is defined "
                            f"for method {method!r}; its arithmetic was checked")
        return
    if not columns or not workload:
        rep.warnings.append("the ledger does not record its method's columns and workload; "
                            "its structure (one entry per release, sound sensitivities) was not checked")
        return
    try:
        index = {c: i for i, c in enumerate(columns)}
        w_max = max(downward_closure([tuple(sorted(index[c] for c in cl)) for cl in workload]).values())
    except (KeyError, TypeError, ValueError):
        rep.problems.append("details.workload names columns that are not in details.columns")
        return
    variant = options.get("variant", "private")
    factor = EM_SENSITIVITY[(method, variant) if method == "flaim" else method]
    ems = [(i, e) for i, e in enumerate(ledger["entries"]) if isinstance(e, dict) and e.get("mechanism") == "exponential"]
    gauss = [(i, e) for i, e in enumerate(ledger["entries"]) if isinstance(e, dict) and e.get("mechanism") == "gaussian"]
    for i, e in ems:
        if float(e.get("sensitivity", 0)) < factor * w_max * (1 - 1e-12):
            rep.problems.append(f"entry {i + 1} ({e.get('query')}): sensitivity {e.get('sensitivity')} is below "
                                f"the sound value {factor:g} x max weight {w_max:g} = {factor * w_max:g} for {method}")
    for i, e in gauss:
        if float(e.get("sensitivity_l2", 0)) < 1.0 - 1e-12:
            rep.problems.append(f"entry {i + 1} ({e.get('query')}): a count marginal has L2 sensitivity at least 1")
    n_cols = len(columns)
    if method in ("aim", "distaim"):
        rounds = d.get("rounds") if method == "aim" else options.get("rounds")
        expect = {"exponential": rounds, "gaussian": None if rounds is None else n_cols + rounds}
    else:
        T, s = int(options.get("rounds") or 0), int(options.get("local_steps") or 1)
        expect = {"exponential": T * s}
        need = T * (2 * s - 1) + (T * n_cols if variant == "private" else n_cols)
        have = sum(float(e["sensitivity_l2"]) ** 2 for _, e in gauss)
        if have < need * (1 - 1e-9):
            rep.problems.append(f"the Gaussian releases add up to {have:g} unit-sensitivity measurements, fewer "
                                f"than the {need} a {variant} FLAIM run with T={T}, s={s} makes")
    for mech, count in expect.items():
        found = len(ems if mech == "exponential" else gauss)
        if count is not None and found != count:
            rep.problems.append(f"{found} {mech} entries, but a complete {method} run of these options makes "
                                f"{count}: an entry is missing or extra")


def audit_ledger(ledger: dict[str, Any]) -> AuditReport:
    rep = AuditReport()
    total = 0.0
    for i, e in enumerate(ledger["entries"]):
        label = f"entry {i + 1}"
        if not isinstance(e, dict):
            rep.problems.append(f"{label}: not an object")
            continue
        mech = e.get("mechanism")
        if mech not in REQUIRED_ENTRY:
            rep.problems.append(f"{label}: unknown mechanism {mech!r}")
            continue
        absent = [k for k in REQUIRED_ENTRY[mech] if k not in e]
        if absent:
            rep.problems.append(f"{label}: missing field '{absent[0]}'")
            continue
        label = f"entry {i + 1} (step {e['step']}, {e['query']})"
        if e["step"] != i + 1:
            rep.problems.append(f"{label}: step number {e['step']} out of sequence (expected {i + 1})")
        try:
            expected = entry_rho(e)
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            rep.problems.append(f"{label}: parameters do not give a cost ({exc})")
            continue
        if not _close(float(e["rho"]), expected):
            rep.problems.append(f"{label}: recorded rho {e['rho']:.6g} but its parameters give {expected:.6g}")
        if mech == "gaussian" and not float(e["sensitivity_l2"]) > 0:
            rep.problems.append(f"{label}: sensitivity must be positive")
        if mech == "exponential" and not float(e["sensitivity"]) > 0:
            rep.problems.append(f"{label}: sensitivity must be positive")
        total += expected
    rho_spent, rho_budget = float(ledger["rho_spent"]), float(ledger["rho_budget"])
    delta, epsilon = float(ledger["delta"]), float(ledger["epsilon"])
    if not _close(rho_spent, total):
        rep.problems.append(f"rho_spent is {rho_spent:.8g} but the entries add up to {total:.8g}")
    if total > rho_budget * (1 + REL_TOL):
        rep.problems.append(f"the entries spend {total:.8g}, more than the budget rho_budget={rho_budget:.8g}")
    if not 0 < delta < 1:
        rep.problems.append(f"delta {delta!r} is not in (0, 1)")
    else:
        eps_opendp = rho_to_epsilon(total, delta)
        if not _close(epsilon, eps_opendp, 1e-6):
            rep.problems.append(f"epsilon {epsilon:.8g} is not what rho={total:.8g} converts to at "
                                f"delta={delta:g} ({eps_opendp:.8g})")
        if total > 0 and cks_delta(total, eps_opendp) > delta * (1 + 1e-6):
            rep.problems.append("OpenDP's conversion disagrees with the independent CKS bound")
        eb = ledger.get("epsilon_budget")
        if eb is not None and rho_to_epsilon(rho_budget, delta) > float(eb) * (1 + 1e-6):
            rep.problems.append(f"rho_budget {rho_budget:.8g} converts to more than epsilon_budget {eb}")
    if ledger.get("neighbouring") != "add/remove one record":
        rep.warnings.append(f"neighbouring relation is {ledger.get('neighbouring')!r}; "
                            "sensitivities here assume add/remove one record")
    if ledger.get("seeded"):
        rep.warnings.append("SEEDED RUN: its noise is predictable to anyone who knows the seed; "
                            "the guarantee does not hold for this release (tests and demos only)")
    _check_composition(ledger, rep)
    _check_fixed_point(ledger, rep)
    if ledger.get("status") == "complete":
        _check_structure(ledger, rep)
    mpc = (ledger.get("details") or {}).get("mpc") or {}
    if isinstance(mpc, dict) and mpc.get("debug"):
        rep.problems.append(f"DEBUG MPC MODE ({mpc.get('provider', 'unknown provider')}): a party could see "
                            "the other parties' values; this release is not protected by secure computation")
    if ledger.get("non_private"):
        rep.problems.append(f"NOT PRIVATE: {ledger['non_private']}")
    if ledger.get("status") not in (None, "complete"):
        rep.warnings.append(f"run status is {ledger.get('status')!r}: the release did not finish; "
                            "the entries record what was spent before it stopped")
    rep.summary = {"entries": len(ledger["entries"]), "rho_spent": total, "rho_budget": rho_budget,
                   "epsilon": epsilon, "delta": delta, "method": ledger.get("method")}
    return rep
