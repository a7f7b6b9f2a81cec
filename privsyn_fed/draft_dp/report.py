"""What a DP draft reports (``draft_dp``, 4.): its results (``DPDraft``, a column not found as an
``Unfound``), its ledger's accountant and threat model, the one line that names the columns it did not
find and the epsilon that would, and the schema's ``"_draft"`` note.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..accounting import Accountant
from ..schema import DP_DRAFT_PRIVACY, UNFOUND_KEY, Schema
from .plan import METHOD, DraftPlan, _round_up


@dataclass(frozen=True)
class Unfound:
    """A column whose ``sought`` (``"bounds"`` or ``"categories"``) the budget did not find, ``why`` (in
    words), and the least ``epsilon`` whose threshold falls to ``count``: the count the column's sought
    intervals or values show, estimated from the noisy releases, or half the threshold when the estimate
    is lost in its noise (``coarse``). None: no budget up to ``accounting.MAX_EPSILON`` finds them from these rows."""

    name: str
    sought: str
    why: str
    count: int | None
    epsilon: float | None
    coarse: bool = False


def _unfound(plan: DraftPlan, name: str, sought: str, why: str, estimate: float | None, noise: float) -> Unfound:
    """The ``Unfound`` of a column whose sought intervals or values hold about ``estimate`` (None: none
    that any budget finds), an estimate taken as lost in its noise below ``noise``."""
    if estimate is None:
        return Unfound(name, sought, why, None, None)
    threshold = plan.bound_rows if sought == "bounds" else plan.threshold
    coarse = estimate < noise
    count = threshold // 2 if coarse else min(math.floor(estimate), threshold - 1)
    count_or_none = count if count >= 2 else None
    return Unfound(name, sought, why, count_or_none, plan.epsilon_for(sought, count_or_none), coarse)


@dataclass
class DPDraft:
    """A DP draft: the schema entries (a column in ``unfound`` as a placeholder with ``UNFOUND_KEY``),
    the columns left out, notes (DP outputs only) and the ledger."""

    columns: list[dict[str, Any]]
    dropped: list[str]
    notes: list[str]
    accountant: Accountant
    unfound: list[Unfound] = field(default_factory=list)

    @property
    def schema(self) -> Schema:
        """The drafted schema (``InputError`` while a placeholder is left in it)."""
        return Schema.from_dict({"columns": self.columns}, source="<dp draft>")


THREAT_MODEL = (
    "the data owner drafts on their own machine and is trusted with its rows; the schema and this "
    "ledger are what leave it"
)
#: Over MPC (``draft_dp``, 5.), followed by the secure computation's assumptions.
MPC_THREAT_MODEL = (
    "the silos draft on secret shares, each silo's party trusted with its own rows only: the union's counts are "
    "opened only with every party's own noise added, and each silo's candidate values only as its own "
    "thresholded list; "
)


def unfound_message(plan: DraftPlan, unfound: Sequence[Unfound], ledger: str, reusable: bool = True) -> str:
    """One line: the columns whose bounds or categories were not found, why, the epsilon that would
    bring the thresholds down to the counts they show, and that a retry with --leave-unfound spends
    nothing (it reuses the values kept beside the ledger, ``draft_dp.replay``; not when ``reusable`` is False)."""
    parts = []
    for sought in ("bounds", "categories"):
        some = [u for u in unfound if u.sought == sought]
        if some:
            listed = ", ".join(f"'{u.name}' ({u.why})" for u in some)
            parts.append(f"the {sought} of {listed}")
    needs = [u.epsilon for u in unfound if u.epsilon is not None]
    never = [f"'{u.name}'" for u in unfound if u.epsilon is None]
    coarse = [f"'{u.name}'" for u in unfound if u.epsilon is not None and u.coarse]
    need = ""
    if needs:
        need = (
            f"about --dp {_round_up(max(needs))} at --delta {plan.delta:g} would bring the thresholds "
            f"({plan.bound_rows} numbers for an interval, {plan.threshold} cells for a value) down to the counts "
            "they show"
        )
        if coarse:
            its = "its threshold" if len(coarse) == 1 else "their thresholds"
            need += f" (the noisy counts of {', '.join(coarse)} are too coarse to tell how far: it halves {its})"
    if never:
        no = f"no --dp up to {_max_epsilon():g} finds {', '.join(never)} from these rows"
        need = f"{need}; {no}" if need else no
    need += " (a column of a single value, or of none, never shows more: declare its domain by hand)"
    retry = (
        "it spends nothing: it reuses the values this draft released"
        if reusable
        else "a new spend: the values this draft released could not be kept beside its ledger"
    )
    return (
        f"--dp {plan.epsilon:g} did not find {'; '.join(parts)}: {need}. No schema was written; {ledger} records "
        "the budget spent. Draft again with a larger --dp (a new spend), or with --leave-unfound to write these "
        f"columns as placeholders to fill in by hand ({retry})"
    )


def _max_epsilon() -> float:
    from ..accounting import MAX_EPSILON

    return MAX_EPSILON


def accountant_for(plan: DraftPlan, ledger_path: str | Path | None = None, secure: str = "") -> Accountant:
    """The accountant of a DP draft: rho at ``delta_conversion``, thresholds' deltas up to ``delta``
    (``secure``: the secure computation's threat model, over MPC)."""
    return Accountant(
        plan.epsilon,
        plan.delta_conversion,
        METHOD,
        ledger_path=ledger_path,
        threat_model=MPC_THREAT_MODEL + secure if plan.mpc else THREAT_MODEL,
        details={"columns": list(plan.columns), "draft": plan.record()},
        delta_budget=plan.delta,
    )


def dp_note(
    sources: str | Sequence[str],
    ledger: dict[str, Any],
    ledger_name: str,
    plan: DraftPlan,
    dropped: Sequence[str],
    unfound: Sequence[Unfound] = (),
) -> dict:
    """The ``"_draft"`` note of a DP draft of one table, or of the union of several (``sources``)."""
    names = [Path(sources).name] if isinstance(sources, (str, Path)) else [Path(s).name for s in sources]
    rows = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]} (their union)"
    placeholders = (
        f'The columns {", ".join(repr(u.name) for u in unfound)} are placeholders (their "{UNFOUND_KEY}" says '
        "why): the schema will not load until they are filled in. "
        if unfound
        else ""
    )
    note: dict[str, Any] = {
        "note": (
            f"Drafted from the rows of {rows} under ({ledger['epsilon']:.4g}, {ledger['delta']:.3g})-"
            f"differential privacy; every value read from the rows was released by a mechanism recorded in "
            f"{ledger_name} (check it with `privsyn-fed audit {ledger_name}`). {placeholders}Review before use: "
            f"categories seen fewer than about {plan.threshold} times are not listed (such values map to the "
            f"catch-all), bounds span the intervals of a grid of two-digit numbers that hold at least about "
            f"{plan.bound_rows} values (values beyond are clipped), and a column left out or typed wrongly must "
            "be fixed by hand. Delete this note when done."
        ),
        "privacy": DP_DRAFT_PRIVACY,
        "drafted_from": names[0] if len(names) == 1 else names,
        "dp": {"epsilon": ledger["epsilon"], "delta": ledger["delta"], "ledger": ledger_name},
    }
    if dropped:
        note["left_out"] = list(dropped)
    if unfound:
        note["unfound"] = [u.name for u in unfound]
    return note
