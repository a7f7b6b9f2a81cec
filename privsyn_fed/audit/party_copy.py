"""A silo party's own ledger copy of an MPC release (``details.party``): each party costs every step
that touches its rows and records it before it answers. The arithmetic, the guarantee and the
fixed-point checks are the same as for any ledger; in place of the method's structure (which
needs the workload and schedule only party 0 knows), a complete copy is checked here against
what a party can know: who it is (its rank among the parties, the collusion threshold), that
every entry ran on secret shares or in its own process, that the parties' noise is split for
that threshold, that the request it accepted is this release, and that each sensitivity is the one
its recorded public facts give (``own_rows``): exactly ``sqrt(m + sum B^4)`` plus the grid rounding
of real answers for a Gaussian over ``m`` count cells and second moments clipped to norm ``B``,
and at least the method's sound factor times the largest weight for a selection (the party
bounds its score's sensitivity from the arrays it scores with).
"""

from __future__ import annotations

import math
import re
from typing import Any

from .findings import AuditReport
from .placement import MPC_REAL_BITS
from .shape import _finite as _number
from .structure import EM_SENSITIVITY

#: The selections a party can run, by the score it records: DistAIM's on the shared pool, FLAIM's
#: in the silo (naive, or private with the heterogeneity proxy).
SCORES = {"pooled": "distaim", "local naive": ("flaim", "naive"), "local private": ("flaim", "private")}
#: Bounds on a party's public facts: cells of one answer, and a clipping norm.
MAX_CELLS = 2**53
MAX_BOUND = 1e100
#: Where each method's steps run, per mechanism, in a party's copy.
PLACES = {
    "distaim": {("gaussian", "mpc"), ("exponential", "mpc")},
    "flaim": {("gaussian", "mpc"), ("exponential", "silo")},
    "fedtda": {("gaussian", "mpc")},
    "independent": {("gaussian", "mpc")},
    "schema-draft": {("gaussian", "mpc"), ("gaussian", "silo")},
}


def is_party_copy(ledger: dict[str, Any]) -> bool:
    """Whether the ledger is a silo party's own copy (``details.party``)."""
    return isinstance((ledger.get("details") or {}).get("party"), dict)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_party_copy(ledger: dict[str, Any], rep: AuditReport) -> None:
    """The checks of a party's copy (module docstring); problems go to ``rep``."""
    party = ledger["details"]["party"]
    rank, n, t = party.get("rank"), party.get("parties"), party.get("collusion")
    site = ledger["details"].get("site")
    if isinstance(site, dict):  # a site's copy: its place among the release's sites, the servers' n and t
        index, sites = site.get("index"), site.get("sites")
        placed = _whole(index) and _whole(sites) and 0 <= index < sites and rank == index
        if not (placed and _whole(n) and _whole(t) and 1 <= t < n):
            rep.problems.append(
                "details.site must give this site's index among the release's sites (details.party.rank), "
                "and details.party the number of compute servers and the collusion threshold (1..servers-1)"
            )
            return
    elif not (_whole(rank) and _whole(n) and _whole(t) and 1 <= rank < n and 1 <= t < n):
        rep.problems.append(
            "details.party must give this party's rank (1..parties-1), the number of parties and the "
            "collusion threshold (1..parties-1)"
        )
        return
    _check_request(ledger, party, rep)
    places = PLACES.get(ledger["method"], set())
    for i, e in enumerate(ledger["entries"]):
        label = f"entry {i + 1} ({e['query']})"
        if (e["mechanism"], e["where"]) not in places:
            rep.problems.append(
                f"{label}: a party's {e['mechanism']} in {ledger['method']} runs "
                f"{' or '.join(sorted(w for m, w in places if m == e['mechanism'])) or 'nowhere'}, not {e['where']!r}"
            )
            continue
        if e.get("parallel_over"):
            rep.problems.append(f"{label}: a party's own copy charges each of its steps in full, never in parallel")
        rule = e.get("own_rows")
        if not isinstance(rule, dict):
            rep.problems.append(f"{label}: it does not record the public facts of its sensitivity (own_rows)")
            continue
        if e["mechanism"] == "gaussian" and e["where"] == "silo":
            _check_own_list(e, rule, label, rep)
        elif e["mechanism"] == "gaussian":
            _check_gaussian(e, rule, (n, t), label, rep)
        else:
            _check_selection(e, rule, ledger["method"], label, rep)


def _same(a: Any, b: Any) -> bool:
    """Equal values of one kind (a number within float rounding; a boolean only to a boolean)."""
    if isinstance(a, bool) or isinstance(b, bool) or not (_number(a) and _number(b)):
        return a == b and isinstance(a, bool) == isinstance(b, bool)
    return math.isclose(float(a), float(b), rel_tol=1e-12)


def _check_request(ledger: dict[str, Any], party: dict[str, Any], rep: AuditReport) -> None:
    """The release request the party accepted is the one this ledger accounts for: its method,
    budget, seeding, parties and collusion threshold (``details.party``, ``details.mpc``), and a
    schema named by its SHA-256; the secure computation's noise is the run's."""
    request = party.get("request") or {}
    d, mpc = ledger["details"], ledger["details"].get("mpc") or {}
    want = {
        "method": ledger["method"],
        "epsilon": ledger.get("epsilon_budget"),
        "delta": ledger.get("delta_budget", ledger["delta"]),  # a draft's thresholds spend part of it
        "seeded": ledger["seeded"],
        "parties": party["parties"],
        "collusion": party["collusion"],
    }
    wrong = [k for k, v in want.items() if not _same(request.get(k), v)]
    schema = request.get("schema")
    if not isinstance(schema, str) or not re.fullmatch(r"sha256:[0-9a-f]{64}", schema):
        wrong.append("schema")
    if wrong:
        rep.problems.append(f"details.party.request is not the release this ledger accounts for ({', '.join(wrong)})")
    refused = party.get("refused", [])
    if not (
        _whole(party.get("answered", 0))
        and party.get("answered", 0) >= 0
        and isinstance(refused, list)
        and all(isinstance(r, str) for r in refused)
        and isinstance(party.get("silo", ""), str)
        and isinstance(party.get("policy"), (str, type(None)))
    ):
        rep.problems.append(
            "details.party must give the steps it answered (a count), those it refused (reasons), its silo and "
            "its policy (a path or null)"
        )
    if (mpc.get("parties"), mpc.get("collusion")) != (party["parties"], party["collusion"]) or mpc.get(
        "noise"
    ) != d.get("noise"):
        rep.problems.append("details.mpc is not this party's secure computation (parties, collusion, noise)")


def _check_gaussian(
    e: dict[str, Any], rule: dict[str, Any], split: tuple[int, int], label: str, rep: AuditReport
) -> None:
    parties = e.get("distributed") or {}
    if (parties.get("parties"), parties.get("collusion")) != split:
        rep.problems.append(
            f"{label}: the parties' noise is split for {parties.get('parties')} parties and collusion "
            f"{parties.get('collusion')}, not the release's {split[0]} and {split[1]}"
        )
        return
    m, bounds, rounding = rule.get("count_marginals"), rule.get("clip_bounds"), rule.get("rounding_l2")
    if not (
        _whole(m)
        and 0 <= m <= MAX_CELLS
        and isinstance(bounds, list)
        and all(_number(b) and 0 <= b <= MAX_BOUND for b in bounds)
        and _number(rounding)
        and isinstance(e.get("cells"), int)
        and 0 <= e["cells"] <= MAX_CELLS
    ):
        rep.problems.append(
            f"{label}: own_rows must give count_marginals (whole), clip_bounds (numbers) and rounding_l2, and the "
            "entry its cells"
        )
        return
    grid = float(parties.get("grid", 1.0))
    need_rounding = math.sqrt(e["cells"]) * 2.0**-MPC_REAL_BITS if grid < 1.0 else 0.0
    if not math.isclose(rounding, need_rounding, rel_tol=1e-9, abs_tol=1e-15):
        rep.problems.append(f"{label}: the grid rounding of real answers adds {need_rounding:.6g}, not {rounding:.6g}")
    sound = math.sqrt(m + sum(b**4 for b in bounds)) + need_rounding
    have = float(e["sensitivity_l2"])
    if sound <= 0:
        rep.problems.append(f"{label}: own_rows describe no record of this silo in the answer")
    elif not math.isclose(have, sound, rel_tol=1e-9):
        rep.problems.append(
            f"{label}: sensitivity {have:.6g} is {'below' if have < sound else 'not'} {sound:.6g}, what one record "
            f"of this silo moves ({m} count cell(s), {len(bounds)} clipped second-moment sum(s))"
        )


def _check_own_list(e: dict[str, Any], rule: dict[str, Any], label: str, rep: AuditReport) -> None:
    """A DP schema draft's thresholded list of values drawn in the party's own process: one count cell
    per record (sensitivity 1), with its threshold (its delta is checked with the arithmetic)."""
    if rule.get("count_marginals") != 1 or rule.get("clip_bounds") != [] or "threshold" not in e:
        rep.problems.append(
            f"{label}: a party's own list of values is a thresholded histogram of one count cell a record"
        )
    elif not math.isclose(float(e["sensitivity_l2"]), 1.0, rel_tol=1e-9):
        rep.problems.append(f"{label}: sensitivity {e['sensitivity_l2']:g} of a histogram of one column is not 1")


def _check_selection(e: dict[str, Any], rule: dict[str, Any], method: str, label: str, rep: AuditReport) -> None:
    key = SCORES.get(str(rule.get("score")))
    if key is None or (key if isinstance(key, str) else key[0]) != method:
        rep.problems.append(f"{label}: a {method} party does not select with a {rule.get('score')!r} score")
        return
    weight = rule.get("max_weight")
    if not _number(weight):
        rep.problems.append(f"{label}: own_rows must give the candidates' largest weight (max_weight)")
        return
    sound = EM_SENSITIVITY[key] * weight
    if not weight >= 0 or float(e["sensitivity"]) < sound * (1 - 1e-12):
        rep.problems.append(
            f"{label}: sensitivity {e['sensitivity']:.6g} is below the sound {EM_SENSITIVITY[key]:g} x max weight "
            f"{weight:g} = {sound:g}"
        )
