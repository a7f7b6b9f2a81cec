"""The retry of a failed DP schema draft reuses what the draft released instead of spending again.

A ``schema draft --dp`` that does not find some columns' bounds or categories fails (exit 2) after its
spend. Before it says so, it keeps every value it released -- the noisy profile, the noisy bounds
histograms, the listed values and atoms with their noisy counts, exactly what ``draft_dp.make_draft``
received from its ``DraftAnswers`` -- in a file beside its ledger (``released_path``:
``X.ledger.json`` -> ``X.draft-released.json``), written atomically, and records the file's SHA-256
in the failed ledger (``details.draft.released_sha256``).

A retry with ``--leave-unfound`` that finds that failed ledger (at its ledger path, or a numbered
one beside it: ``accounting.kept_ledger``) with the same plan (epsilon, delta, columns, options,
tables, parties) and a statistics file whose SHA-256 the ledger records decides again from those
values alone (``ReplayAnswers``): post-processing of released values, so it reserves nothing,
reads no row and charges nothing, and the failed ledger stays as it is, the record of the spend.
A statistics file that does not match its ledger is refused (``InputError``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..accounting import LEDGER_SUFFIX, Accountant, numbered
from ..common import InputError, check_regular, is_engine_url, parse_json, special_kind, write_atomic
from .local import DraftAnswers, ValueCounts
from .make import make_draft
from .plan import METHOD, DraftPlan
from .report import DPDraft, accountant_for

RELEASED_FORMAT = "privsyn-fed-draft-released/1"
RELEASED_SUFFIX = ".draft-released.json"
#: A ledger file larger than this is not read as a failed draft's (a draft's ledger is small).
MAX_LEDGER_BYTES = 64 << 20


def released_path(ledger: Path) -> Path:
    """Where the draft with ``ledger`` keeps its released values: ``X.ledger.json`` ->
    ``X.draft-released.json`` (``L.json`` -> ``L.draft-released.json``)."""
    name = ledger.name
    stem = name[: -len(LEDGER_SUFFIX)] if name.endswith(LEDGER_SUFFIX) and name != LEDGER_SUFFIX else ledger.stem
    return ledger.with_name(stem + RELEASED_SUFFIX)


def plan_key(plan: DraftPlan, tables: Sequence[str | Path]) -> dict[str, Any]:
    """What a retry must share with the failed draft to reuse its values: the plan's public facts and
    the tables (resolved paths), as JSON would read them back."""
    key = {
        "epsilon": plan.epsilon,
        "delta": plan.delta,
        "columns": list(plan.columns),
        "categorical_max": plan.categorical_max,
        "bins": plan.bins,
        "missing_values": list(plan.missing_values),
        "edges": plan.edges,
        "include": list(plan.include),
        "exclude": list(plan.exclude),
        "parties": None if plan.split is None else [plan.split.parties, plan.split.collusion],
        "tables": [t if is_engine_url(t) else str(Path(t).resolve()) for t in tables],
    }
    return json.loads(json.dumps(key))


class KeptAnswers:
    """A ``DraftAnswers`` that passes every answer of ``inner`` on and keeps a copy of it, so that a
    draft that fails can keep what it released (``keep``)."""

    def __init__(self, inner: DraftAnswers, plan: DraftPlan, tables: Sequence[str | Path]):
        self.inner, self.key = inner, plan_key(plan, tables)
        self.listing = inner.listing
        self.released: dict[str, Any] = {"profile": None, "bounds": {}, "values": {}, "atoms": {}}

    def profile(self) -> np.ndarray:
        """The noisy profile (``DraftAnswers.profile``), kept."""
        noisy = self.inner.profile()
        self.released["profile"] = np.asarray(noisy).tolist()
        return noisy

    def bounds(self, name: str, grid: str = "fine") -> np.ndarray:
        """The noisy bounds histogram of ``name`` over ``grid``, kept."""
        noisy = self.inner.bounds(name, grid)
        self.released["bounds"][name] = np.asarray(noisy).tolist()
        return noisy

    def values(self, name: str, present: float, sigma_profile: float) -> ValueCounts:
        """The listed values of ``name`` with their noisy counts, kept."""
        found = self.inner.values(name, present, sigma_profile)
        self.released["values"][name] = {
            "listed": {str(v): int(c) for v, c in found.listed.items()},
            "passed": int(found.passed),
            "rest": float(found.rest),
            "spread": float(found.spread),
            "extent": None if found.extent is None else [float(x) for x in found.extent],
        }
        return found

    def atoms(self, name: str) -> dict[float, int]:
        """The numbers of ``name`` that passed the atoms' threshold, with their noisy counts, kept."""
        found = self.inner.atoms(name)
        self.released["atoms"][name] = [[float(v), int(c)] for v, c in found.items()]
        return found

    def keep(self, ledger: Path, acc: Accountant, sources: Sequence[Any]) -> bool:
        """Write what was released beside ``ledger`` (atomically) and record its SHA-256 in the ledger
        (``details.draft.released_sha256``); False when the file could not be written (a retry then
        spends again)."""
        document = {
            "format": RELEASED_FORMAT,
            "ledger": ledger.name,
            "plan": self.key,
            "sources": [str(s) for s in sources],
            "listing": self.listing,
            **self.released,
        }
        data = (json.dumps(document, indent=1, ensure_ascii=False) + "\n").encode()
        try:
            write_atomic(released_path(ledger), lambda fh: fh.write(data), binary=True)
        except OSError:
            return False
        acc.note(draft={**acc.details["draft"], "released_sha256": hashlib.sha256(data).hexdigest()})
        return True


class ReplayAnswers:
    """A ``DraftAnswers`` that returns the values a failed draft released (``KeptAnswers.keep``):
    nothing is read and nothing is charged."""

    def __init__(self, document: dict[str, Any], where: Path):
        self.document, self.where = document, where
        self.listing = str(document.get("listing", ""))

    def _get(self, kind: str, name: str) -> Any:
        try:
            return self.document[kind][name]
        except (KeyError, TypeError):
            raise InputError(f"{self.where}: holds no {kind} of column '{name}' to reuse") from None

    def profile(self) -> np.ndarray:
        """The noisy profile the failed draft released."""
        return np.asarray(self.document["profile"])

    def bounds(self, name: str, grid: str = "fine") -> np.ndarray:
        """The noisy bounds histogram of ``name`` the failed draft released (over the ``grid`` its noisy
        profile chose, as this replay's does)."""
        return np.asarray(self._get("bounds", name))

    def values(self, name: str, present: float, sigma_profile: float) -> ValueCounts:
        """The values of ``name`` the failed draft listed, with their noisy counts."""
        v = self._get("values", name)
        extent = v.get("extent")
        return ValueCounts(
            {str(k): int(c) for k, c in v["listed"].items()},
            int(v["passed"]),
            v["rest"],
            v["spread"],
            None if extent is None else (float(extent[0]), float(extent[1])),
        )

    def atoms(self, name: str) -> dict[float, int]:
        """The numbers of ``name`` that passed the failed draft's atoms' threshold, with their noisy counts."""
        return {float(v): int(c) for v, c in self._get("atoms", name)}


@dataclass
class Replay:
    """A failed draft of the same plan whose released values a retry reuses: its ledger (path and
    contents) and its statistics file (path and contents)."""

    ledger_path: Path
    ledger: dict[str, Any]
    released_path: Path
    document: dict[str, Any]

    def decide(self, plan: DraftPlan) -> DPDraft:
        """The draft decided again from the released values alone (an accountant that writes nothing
        and is charged nothing)."""
        acc = accountant_for(plan)
        result = make_draft(ReplayAnswers(self.document, self.released_path), plan, acc)
        assert not acc.released
        return result


def _read_json(path: Path) -> Any:
    """The JSON in a regular file of reasonable size, or None (a file this is not about)."""
    try:
        if special_kind(path) is not None or not path.is_file() or path.stat().st_size > MAX_LEDGER_BYTES:
            return None
        return parse_json(path.read_text(encoding="utf-8"), path, "ledger file")
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None


def _failed_draft(ledger: Any) -> bool:
    """Whether ``ledger`` is a failed DP draft's that kept its released values."""
    if not isinstance(ledger, dict) or ledger.get("method") != METHOD or ledger.get("status") != "failed":
        return False
    draft = (ledger.get("details") or {}).get("draft") if isinstance(ledger.get("details"), dict) else None
    return isinstance(draft, dict) and isinstance(draft.get("released_sha256"), str) and bool(draft.get("unfound"))


def failed_drafts(ledger: Path) -> list[Path]:
    """The ledgers of failed drafts that kept their released values, at ``ledger`` and at the numbered
    files beside it (``kept_ledger.numbered``: 2, 3, ... while they exist), in that order."""
    paths = [ledger]
    for n in range(2, 1000):
        if not os.path.lexists(numbered(ledger, n)):
            break
        paths.append(numbered(ledger, n))
    return [p for p in paths if _failed_draft(_read_json(p))]


def _same_plan(ledger: dict[str, Any], plan: DraftPlan) -> bool:
    """Whether ``ledger`` records ``plan``: as planned, or with the coarse bounds grid the noisy row
    count chose (``DraftPlan.with_rows``, which the ledger records in place of the fine one)."""
    details = ledger.get("details") or {}
    draft = details.get("draft") or {}
    recorded = lambda p: all(draft.get(k) == v for k, v in json.loads(json.dumps(p.record())).items())  # noqa: E731
    return (
        ledger.get("epsilon_budget") == plan.epsilon
        and ledger.get("delta_budget") == plan.delta
        and details.get("columns") == list(plan.columns)
        and (recorded(plan) or recorded(replace(plan, grid="coarse")))
    )


def previous(candidates: Sequence[Path], plan: DraftPlan, tables: Sequence[str | Path]) -> Replay | None:
    """The latest of the failed drafts ``candidates`` (``failed_drafts``) made with this plan over these
    tables, or None (a retry with another plan is a new spend). ``InputError`` when its statistics file
    is missing or is not the one its ledger records."""
    key = plan_key(plan, tables)
    for path in reversed(candidates):
        ledger = _read_json(path)
        if not _failed_draft(ledger) or not _same_plan(ledger, plan):
            continue
        kept = released_path(path)
        recorded = ledger["details"]["draft"]["released_sha256"]
        check_regular(kept, f"the released values of {path}")
        try:
            data = kept.read_bytes()
        except OSError as exc:
            raise InputError(
                f"{kept}: cannot read the values that {path} records as released ({exc.strerror or exc}); "
                "put it back, or give another --ledger to draft again (a new spend)"
            ) from None
        if hashlib.sha256(data).hexdigest() != recorded:
            raise InputError(
                f"{kept}: not the file of released values that {path} records (its SHA-256 differs): it was "
                "changed or replaced, so nothing is reused; put the original back, or give another --ledger to "
                "draft again (a new spend)"
            )
        try:
            document = parse_json(data.decode("utf-8"), kept, "file of released values")
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise InputError(f"{kept}: not a file of released values") from None
        if not isinstance(document, dict) or document.get("format") != RELEASED_FORMAT:
            raise InputError(f"{kept}: not a file of released values ({RELEASED_FORMAT})")
        if document.get("plan") == key:
            return Replay(path, ledger, kept, document)
    return None
