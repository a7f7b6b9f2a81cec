"""Where and how each entry ran: at a known place (curator, aggregator, silo, mpc); with the noise
of a named sampler (every entry names it; in a run in the clear, the run's ``details.noise``);
parallel composition only for a mechanism each silo runs on its own rows; a run over MPC records
its secure computation (``details.mpc`` with its debug flag), has no trusted curator or
aggregator, and each selection on secret shares records fixed-point parameters whose rounding
slack the epsilon charged covers.
"""

from __future__ import annotations

import math
from typing import Any

from .arithmetic import REL_TOL, _close
from .findings import AuditReport

#: Secure sums of real values (Fed-TDA's second moments) are shared on the grid 2^-MPC_REAL_BITS
#: (``privsyn_fed.mpc.aggregator.REAL_BITS``; kept here so that the audit needs no MPC stack).
MPC_REAL_BITS = 16
#: Where a mechanism runs: the central curator (AIM), the aggregator of the silos' sums, a silo on
#: its own rows, or secure computation among the silos.
WHERE = ("curator", "aggregator", "silo", "mpc")


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


def _check_samplers(ledger: dict[str, Any], rep: AuditReport) -> None:
    """Every entry names the sampler of its noise. In a run in the clear every entry's noise came
    from one source, the run's (``details.noise`` where recorded); in a run over MPC every entry on
    secret shares names the run's noise (``details.noise``, which ``details.mpc.noise`` repeats), and
    an entry whose noise the parties drew says so (``noise_from``)."""
    d = ledger.get("details") or {}
    source, mpc = d.get("noise"), d.get("mpc") or {}
    if "noise" in mpc and source is not None and mpc["noise"] != source:
        rep.problems.append(f"details.mpc.noise {mpc['noise']!r} is not the run's noise {source!r} (details.noise)")
    in_clear = not _mpc_run(ledger)
    named = [e["sampler"] for e in ledger["entries"] if "sampler" in e]
    if in_clear and source is None and named:
        source = named[0]
    for i, e in enumerate(ledger["entries"]):
        label = f"entry {i + 1} ({e['query']})"
        if "sampler" not in e:
            rep.problems.append(
                f"{label}: it does not record its sampler, so where its noise came from (and whether it was "
                "seeded) cannot be checked"
            )
        elif (in_clear or e["where"] == "mpc") and source is not None and e["sampler"] != source:
            rep.problems.append(f"{label}: its sampler {e['sampler']!r} is not the run's noise {source!r}")
        if e.get("distributed") and not str(e.get("noise_from", "")).startswith("parties"):
            rep.problems.append(f"{label}: the parties drew its noise (distributed), but noise_from does not say so")


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
    over the silos, or in a party's own copy one it ran in its silo) is one on secret shares."""
    mpc_run = _mpc_run(ledger)
    own_copy = isinstance((ledger.get("details") or {}).get("party"), dict)  # a party's own selections are its own
    for i, e in enumerate(ledger["entries"]):
        in_silo = e.get("parallel_over") or own_copy and e["where"] == "silo"
        if e["mechanism"] != "exponential" or not (e["where"] == "mpc" or mpc_run and not in_silo):
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
