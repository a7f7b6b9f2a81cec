"""Which silos answered each entry, against the run's silos (``details.silos``): a count from 1 to
that number, or (an entry each silo ran on its own rows) a list of as many names at most; every
Gaussian of a federated release (a sum over the silos, or each silo's own) records it. Where
every silo takes part in every round (a sample rate of 1: Fed-TDA and the independent method
always; DistAIM and FLAIM by default below ``MANY_SILOS`` silos, or at ``sample_rate`` 1) each
entry was answered by all of them (but FLAIM's sums of chosen marginals, which only the silos
that chose a marginal the round kept answer), and every list names the same silos.
"""

from __future__ import annotations

from typing import Any

from .findings import AuditReport

#: From this many silos on, DistAIM and FLAIM sample silos by default.
MANY_SILOS = 100


def _everyone(ledger: dict[str, Any], n: int) -> bool:
    """Whether every silo takes part in every round of the run (sites of a federation of sites and
    servers come and go: an absent site is skipped, and ``details.site_contributions`` names who
    answered each step)."""
    if ((ledger.get("details") or {}).get("mpc") or {}).get("layout") == "sites and servers":
        return False
    if ledger["method"] in ("fedtda", "independent"):
        return True
    rate = ((ledger.get("details") or {}).get("options") or {}).get("sample_rate")
    return rate == 1 if rate is not None else n < MANY_SILOS


def _check_participation(ledger: dict[str, Any], rep: AuditReport) -> None:
    """Every entry's silos against the run's (module docstring)."""
    n = (ledger.get("details") or {}).get("silos")
    if not isinstance(n, int) or n < 1:
        return
    everyone, named = _everyone(ledger, n), set()
    federated = ledger["method"] in ("distaim", "flaim", "fedtda", "independent") and "party" not in ledger["details"]
    lists = []
    for i, e in enumerate(ledger["entries"]):
        silos = e.get("silos")
        count = len(silos) if isinstance(silos, list) else silos
        if silos is None:
            if federated and e["mechanism"] == "gaussian":
                rep.problems.append(f"entry {i + 1} ({e['query']}): a sum over the silos records how many answered")
            continue
        if isinstance(silos, list):
            named.update(silos)
            lists.append(set(silos))
        # FLAIM sums a chosen marginal over the silos that chose it, and may drop a choice for size
        all_of_them = everyone and (isinstance(silos, list) or ledger["method"] != "flaim")
        if not 1 <= count <= n or all_of_them and count != n:
            rep.problems.append(
                f"entry {i + 1} ({e['query']}): answered by {count} silo(s), but the run has {n}"
                + (", and every silo takes part in every round" if all_of_them else "")
            )
    if len(named) > n or everyone and any(s != lists[0] for s in lists):
        rep.problems.append(f"the entries name {len(named)} different silos, but the run has {n}")
