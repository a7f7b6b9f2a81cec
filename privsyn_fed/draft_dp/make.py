"""A DP draft's decisions (``draft_dp``, 1. to 4.): ``make_draft`` releases the plan's noisy facts
and decides each column from them (post-processing), into a ``DPDraft`` (``report``).
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np
import pandas as pd

from ..accounting import Accountant
from ..common import InputError
from ..noise import NoiseSource, OpenDPNoise
from ..schema import UNFOUND_KEY, Schema, category_order, text_fault
from .atoms import choose_atoms, releases_atoms
from .cells import PROFILE_CELLS
from .decide import ColumnFacts, _shown, identifier_line, is_code, numeric_entry
from .local import DraftAnswers, LocalAnswers
from .plan import DISTINCT_GUARD, MAX_LOST_SHARE, OTHER_CATEGORY, SEEN_SIGMAS, DraftPlan
from .report import DPDraft, _unfound


def make_draft(
    frames: Callable[[], Iterable[pd.DataFrame]] | DraftAnswers,
    plan: DraftPlan,
    acc: Accountant,
    noise: NoiseSource | None = None,
) -> DPDraft:
    """Make the draft through the plan's mechanisms, each charged to ``acc`` before its noisy value
    exists: from the rows ``frames()`` yields (chunks of one table, or of several tables' union; a
    second call reads them again), or from ``DraftAnswers``. Columns whose bounds or categories were
    not found come back in ``unfound``."""
    from .bounds import numeric_column

    answers = frames if not callable(frames) else LocalAnswers(frames, plan, acc, noise or OpenDPNoise())
    noisy = answers.profile()
    # the noisy profile is public from here on: the ledger records it, so audit can re-derive every decision
    rows, stride = int(noisy[0]), len(PROFILE_CELLS)
    plan = plan.with_rows(rows)  # the bounds' grid, from the noisy row count (post-processing)
    grid = {"bounds_grid": plan.record()["bounds_grid"], "bounds_threshold": plan.bound_rows}
    acc.note(draft={**acc.details.get("draft", {}), **grid, "profile": [int(v) for v in noisy]})
    sigma = plan.profile_sd
    seen = SEEN_SIGMAS * sigma + 0.5
    columns, dropped, notes, unfound, identifiers = [], [], [], [], []
    tokens = list(plan.missing_values)
    left_out = "left out of the schema (a release ignores it in the silos)"
    for j, name in enumerate(plan.columns):
        f = ColumnFacts.of(noisy[1 + stride * j : 1 + stride * (j + 1)], rows, seen)
        has_missing, said = f.has_missing, f.said()
        code = is_code(f, plan.categorical_max)
        if f.numbers_only and not code:
            b = numeric_column(plan, name, np.asarray(answers.bounds(name, plan.grid)), f, tokens)
            spec, note, lost, span = b.spec, b.note, b.unfound, b.span
            line = identifier_line(name, f, plan.include, text=False, lo=span[0], hi=span[1]) if span else None
            if line is not None:  # whole numbers filling their noisy span: ids, row numbers
                dropped.append(name)
                identifiers.append(name)
                notes.append(f"{line} ({said})")
                continue
            if lost is None and releases_atoms(plan, f.distinct):  # its point masses, from its own release
                atoms = choose_atoms(answers.atoms(name), f.numbers, spec)
                if atoms:
                    spec["atoms"] = [int(v) if spec.get("integer") else v for v in atoms]
                    note += f"; point masses at {', '.join(f'{v:g}' for v in atoms)}"
            columns.append(spec)
            notes.append(f"{note} ({said})")
            unfound += [lost] if lost else []
            continue
        if not code and f.distinct > DISTINCT_GUARD:
            dropped.append(name)
            notes.append(
                f"column '{name}': text with more than {DISTINCT_GUARD:,} distinct values (IDs or free text; "
                f"{said}): {left_out}"
            )
            continue
        line = None if code else identifier_line(name, f, plan.include, text=True)
        if line is not None:  # decided from the profile alone: nothing more is spent on it
            dropped.append(name)
            identifiers.append(name)
            notes.append(f"{line}{_codes_hint(f, []) if f.numbers > f.non_numbers else ''} ({said})")
            continue
        # post-processing of the noisy profile and the released values: the present cells that no listed
        # value holds, over the unlisted values when the noisy distinct count is clearly positive (else
        # taken as one value): the count each of them holds on average
        distinct, present = f.distinct, f.present
        what = f"a code of at most {plan.categorical_max} whole numbers" if code else "text"
        found = answers.values(name, present, sigma)
        kept, rest, spread = found.listed, found.rest, found.spread
        odd = [v for v in kept if text_fault(v) is not None]
        if odd:  # no category may hold a control character: a release maps such cells to the other category
            kept = {v: c for v, c in kept.items() if v not in odd}
            notes.append(f"column '{name}': {len(odd)} released value(s) with control characters left unlisted")
        wide = found.extent is not None and found.extent[0] < found.extent[1]
        if (
            code
            and found.passed > plan.categorical_max
            and wide
            and rest <= MAX_LOST_SHARE * present + SEEN_SIGMAS * spread
        ):
            assert found.extent is not None  # more values than a code has: numeric over those that passed
            lo, hi = found.extent
            columns.append(numeric_entry(name, lo, hi, f, plan.bins, tokens))
            notes.append(
                f"column '{name}': numeric, integer; {found.passed} values passed the threshold, more than "
                f"--categorical-max {plan.categorical_max}: bounded by the least and largest of them, {lo:g}..{hi:g}; "
                f"values beyond are clipped ({said})"
            )
            continue
        if found.passed > plan.categorical_max:
            dropped.append(name)
            notes.append(
                f"column '{name}': {what}; {found.passed} values passed the threshold, more than --categorical-max "
                f"{plan.categorical_max} ({said}): {left_out}; declare it from public knowledge to keep it"
            )
            continue
        unlisted = max(1, min(distinct, DISTINCT_GUARD) - len(kept)) if distinct > seen else 1
        if not kept and rest / unlisted < 2:
            dropped.append(name)
            notes.append(
                f"column '{name}': {what} whose values are held by about {_shown(rest / unlisted)} record(s) each, "
                f"too few for any budget to find (IDs or free text; {said}): {left_out}"
            )
            continue
        other = OTHER_CATEGORY
        while other in kept:
            other += "*"
        spec = {"name": name, "type": "categorical", "categories": category_order(kept) + [other], "unknown": other}
        if has_missing:
            spec["missing"] = True
            if tokens:
                spec["missing_values"] = tokens
        why = None
        if not kept:
            why = f"no value has {plan.threshold} (noisy) cells"
        elif len(kept) == 1:
            why = f"only {next(iter(kept))!r} has {plan.threshold} (noisy) cells"
        elif rest > MAX_LOST_SHARE * present + SEEN_SIGMAS * spread:
            why = (
                f"about {_shown(rest)} of its about {_shown(present)} present cells hold values below "
                f"{plan.threshold} (noisy) cells, which would map to {other!r}"
            )
        kind = f"categorical{' (' + what + ')' if code else ''}{', missing' if has_missing else ''}"
        if why is not None and not code and f.numbers > f.non_numbers:
            why += _codes_hint(f, kept)
        if why is not None:  # the unlisted values' average count, when clearly above the noise of ``rest``
            unfound.append(_unfound(plan, name, "categories", why, rest / unlisted, 2 * spread / unlisted))
            spec[UNFOUND_KEY] = (
                f"--dp {plan.epsilon:g} did not find its categories: {why}; list its public categories (values "
                f'outside them map to the last, {other!r}), then delete "{UNFOUND_KEY}"'
            )
            columns.append(spec)
            notes.append(f"column '{name}': {kind}; categories NOT FOUND: {why} ({said})")
            continue
        columns.append(spec)
        notes.append(
            f"column '{name}': {kind}; {len(kept)} values {answers.listing}, the others map to {other!r} ({said})"
        )
    if not columns:
        raise InputError("no column could be drafted: " + "; ".join(notes))
    found_columns = [c for c in columns if UNFOUND_KEY not in c]
    if found_columns:
        Schema.from_dict({"columns": found_columns}, source="<dp draft>")
    if identifiers:  # which columns the identifier rule left out: post-processing, recorded likewise
        acc.note(draft={**acc.details["draft"], "identifiers": identifiers})
    if unfound:  # which columns are placeholders: post-processing, recorded with the releases it follows
        acc.note(draft={**acc.details["draft"], "unfound": [u.name for u in unfound]})
    return DPDraft(columns, dropped, notes, acc, unfound)


def _codes_hint(f: ColumnFacts, kept: Iterable[str]) -> str:
    """For a text column whose noisy counts show mostly numbers: the ``--missing-value`` to draft it
    again with, its released non-number values (post-processing of released values)."""
    codes = [v for v in kept if pd.to_numeric(pd.Series([v]), errors="coerce").isna().all()]
    given = " ".join(f"--missing-value {v}" for v in codes) if codes else "--missing-value TOKEN"
    return (
        f"; about {_shown(f.numbers)} of its cells are numbers and about {_shown(f.non_numbers)} are not: if those "
        f"are codes for a missing number, draft again with {given} (a numeric column)"
    )
