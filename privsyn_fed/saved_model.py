"""A release's model, kept: fit once, sample many (``synth --model-out``, ``privsyn-fed sample``,
``pf.load_model``).

The file is one ``.npz`` archive read with ``allow_pickle=False`` (it cannot run code when loaded):
``meta``, a JSON text with the format, the method, the model's kind, the schema, the noisy total, the
model's own header, and the release's ledger; and the model's arrays. ``digest`` is the SHA-256 of
everything but the ledger (the JSON header with sorted keys, then each array's name, dtype, shape
and bytes in name order); the ledger records it as ``details.model_sha256``. Loading refuses a file
whose ledger does not audit, is not complete, or does not describe this model (method, columns,
cells, digest).

The file is read by ``model.archive``'s bounded reader (sizes checked against caps before anything
is allocated, only the documented members, each within the size its header implies), and the digest
is computed twice: over the file as read (every member and every metadata field but the ledger,
which holds the digest) and over the model rebuilt from it. Both must match the ledger's. Files
saved before these checks have the same digest and load unchanged: the reader refuses what could
not be checked (an extra member) rather than ignoring it. Every parameter is range-checked
(``model.checks``) before a sampler is built, so a model that passes draws rows inside its schema.

Sampling a released model is post-processing of the release: any number of rows, any seed, any
public condition, at no further privacy cost and with no new ledger entry.
"""

from __future__ import annotations

import hashlib
import io
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .common import InputError
from .model import (
    LEGACY_FORMAT,
    MODEL_FORMAT,
    Condition,
    CopulaModel,
    GraphicalModel,
    JunctionTree,
    check_factors,
    check_total,
    conditions_from,
    read_model_archive,
)
from .schema import Schema

KINDS = {GraphicalModel.kind: GraphicalModel, CopulaModel.kind: CopulaModel}

Sampler = GraphicalModel | CopulaModel
#: Below this many expected rows of the real table meeting the conditions, sampling given them warns.
FEW_ROWS = 1.0


class ImprobableConditionWarning(UserWarning):
    """The model expects fewer than ``FEW_ROWS`` real rows to meet the conditions rows are drawn given."""


def improbable_warning(total: float, probability: float, rows: int, conditions: Sequence[Condition]) -> str | None:
    """The warning when conditions are improbable: the model expects ``total * p`` rows of the real
    table to meet them (``total`` the release's noisy row count, ``p`` their probability under the
    model); below ``FEW_ROWS`` the drawn rows come from the model's fit alone, not from rows like them.
    None without conditions or when enough rows are expected. Post-processing: both numbers are released."""
    expected = total * probability
    if not conditions or expected >= FEW_ROWS:
        return None
    from .common import terminal_text

    text = terminal_text(" and ".join(c.describe() for c in conditions))
    return (
        f"the model expects about {expected:.2g} rows with {text} in the real table (of about {total:,.0f} "
        f"rows), so the {rows:,} rows drawn are extrapolated from the model, not from data"
    )


#: What a model's malformed header or arrays raise while its sampler is built (all become one line).
DAMAGED = (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError, OverflowError)


@dataclass
class ReleasedModel:
    """A release's fitted model: ``sample`` rows from it (given public conditions), ``save`` it,
    read its ``ledger``."""

    method: str
    schema: Schema
    sampler: Sampler
    ledger: dict[str, Any] | None = None

    @property
    def total(self) -> float:
        """The release's noisy row count."""
        return float(self.sampler.total)

    @property
    def kind(self) -> str:
        """``junction-tree`` (the AIM family, independent) or ``copula`` (Fed-TDA)."""
        return self.sampler.kind

    def conditions(self, where: Mapping[str, Any] | Sequence[str] | Sequence[Condition] | None) -> list[Condition]:
        """``where`` as checked conditions on the schema (``model.conditions.conditions_from``)."""
        if where and all(isinstance(c, Condition) for c in where):
            return [c for c in where if isinstance(c, Condition)]
        return conditions_from(where, self.schema)  # type: ignore[arg-type]

    def given(self, where: Mapping[str, Any] | Sequence[str] | Sequence[Condition] | None) -> Sampler:
        """The model's sampler given public conditions (``model.conditions``); ``InputError`` names a
        condition that is malformed or has probability 0."""
        return self.sampler.given(self.conditions(where))

    def sample(self, rows: int, seed: int | None = None, where: Any = None) -> pd.DataFrame:
        """``rows`` synthetic rows (a data frame of values, as the release's CSV holds them), given
        ``where`` (``model.conditions.conditions_from``) when it is set; ``seed`` fixes these draws
        only; rows that break the schema's public constraints are never drawn (``output.constrained``).
        An ``ImprobableConditionWarning`` says when the model expects fewer than one real row to meet
        ``where`` (``improbable_warning``). Spends nothing."""
        from .methods.output import check_rows, constrained

        check_rows(rows)
        conditions = self.conditions(where)
        sampler = self.sampler.given(conditions)
        line = improbable_warning(self.total, sampler.probability, int(rows), conditions)
        if line is not None:
            warnings.warn(line, ImprobableConditionWarning, stacklevel=2)
        return constrained(sampler, self.schema).sample(int(rows), seed)

    # ---- the file -------------------------------------------------------------------------------

    def _parts(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        header, arrays = self.sampler.to_arrays()
        meta = {
            "format": MODEL_FORMAT,
            "method": self.method,
            "kind": self.kind,
            "schema": self.schema.to_dict(),
            "total": self.total,
            "model": header,
        }
        return meta, arrays

    def digest(self) -> str:
        """SHA-256 (hex) of the model without its ledger (module docstring)."""
        meta, arrays = self._parts()
        return _digest(meta, arrays)

    def to_bytes(self) -> bytes:
        """The file's contents."""
        meta, arrays = self._parts()
        meta["ledger"] = self.ledger
        buf = io.BytesIO()
        contents: dict[str, Any] = {"meta": np.array(json.dumps(meta)), **arrays}
        np.savez_compressed(buf, **contents)
        return buf.getvalue()

    def save(self, path: str | Path, overwrite: bool = False) -> None:
        """Write the model to ``path`` atomically; an existing file is refused unless ``overwrite``."""
        from .common import write_atomic

        if Path(path).exists() and not overwrite:
            raise InputError(f"{path}: already exists (overwrite=True replaces it)")
        data = self.to_bytes()
        write_atomic(path, lambda fh: fh.write(data), binary=True)

    @classmethod
    def load(cls, path: str | Path) -> "ReleasedModel":
        """Read and check a saved model (module docstring); ``InputError`` names the problem."""
        meta, arrays = read_archive(path)
        if meta.get("format") == LEGACY_FORMAT:
            raise InputError(
                f"{path}: a model saved without its release's ledger (an older format); it serves "
                "`evaluate --model` only. Release again with --model-out to sample from it"
            )
        if meta.get("format") != MODEL_FORMAT:
            raise InputError(f"{path}: not a privsyn-fed model file (format {meta.get('format')!r})")
        try:
            schema = Schema.from_dict(meta["schema"], source=f"{path} (its schema)")
            kind = KINDS[meta["kind"]]
            sampler: Sampler = kind.from_arrays(schema, float(meta["total"]), meta["model"], arrays)  # type: ignore[attr-defined]
            method, ledger = str(meta["method"]), meta.get("ledger")
        except InputError:
            raise
        except DAMAGED as exc:
            raise InputError(f"{path}: the model is damaged ({_reason(exc)})") from None
        model = cls(method, schema, sampler, ledger)
        model.check_ledger(str(path))
        _check_file_digest(path, meta, arrays)
        return model

    def check_ledger(self, where: str) -> None:
        """Refuse (``InputError``) a model whose ledger does not audit or does not describe it."""
        from .audit import audit_ledger

        led = self.ledger
        if not isinstance(led, dict):
            raise InputError(f"{where}: the model carries no ledger of its release")
        try:
            report = audit_ledger(led)
        except InputError as exc:
            raise InputError(f"{where}: its ledger is not a ledger ({exc})") from None
        if not report.ok:
            raise InputError(f"{where}: its ledger does not audit: {report.problems[0]}")
        details = led.get("details") or {}
        facts = (
            ("status", led.get("status"), "complete"),
            ("method", led.get("method"), self.method),
            ("columns", details.get("columns"), self.schema.names),
            ("cells per column", details.get("shape"), list(self.schema.shape)),
            ("model digest", details.get("model_sha256"), self.digest()),
        )
        for what, recorded, actual in facts:
            if recorded != actual:
                raise InputError(
                    f"{where}: its ledger's {what} ({_short(recorded)}) does not match the model's ({_short(actual)})"
                )


def read_archive(path: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The ``meta`` JSON and the arrays of a saved model file, read with ``allow_pickle=False``;
    ``InputError`` when it is missing or unreadable."""
    from .common import check_regular

    check_regular(Path(path), "model")
    try:
        with open(path, "rb") as fh:
            archive = fh.read(4) == b"PK\x03\x04"
    except FileNotFoundError:
        raise InputError(f"{path}: model file not found") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({_reason(exc)})") from None
    if not archive:
        raise InputError(f"{path}: not a privsyn-fed model file (not an .npz archive)")
    return read_model_archive(path)


def likelihood_model(path: str | Path) -> JunctionTree:
    """The junction tree of a saved graphical or independent model (checked against its ledger), or
    of a file in the older format, for holdout likelihoods; ``InputError`` for a copula."""
    meta, arrays = read_archive(path)
    if meta.get("format") == LEGACY_FORMAT:
        try:
            cliques = [tuple(str(a) for a in c) for c in meta["cliques"]]
            factors = [(c, np.asarray(arrays[f"f{i}"], dtype=np.float64)) for i, c in enumerate(cliques)]
            check_total(float(meta["total"]))
            check_factors(factors, None)
            return JunctionTree(factors, [-1] * len(factors), float(meta["total"]))
        except DAMAGED as exc:
            raise InputError(f"{path}: the model is damaged ({_reason(exc)})") from None
    model = ReleasedModel.load(path)
    if not isinstance(model.sampler, GraphicalModel):
        raise InputError(f"{path}: a {model.method} model (a copula) has no holdout likelihood here")
    return model.sampler.tree


def load_model(path: str | Path) -> ReleasedModel:
    """A model saved by ``synth --model-out`` or ``ReleasedModel.save``, checked against its ledger."""
    return ReleasedModel.load(path)


def _check_file_digest(path: str | Path, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Refuse a file whose contents as read (every member, every metadata field but the ledger) do
    not have the digest its ledger records (``check_ledger`` has compared the rebuilt model's)."""
    ledger = meta.get("ledger")
    details = ledger.get("details") if isinstance(ledger, dict) else None
    recorded = details.get("model_sha256") if isinstance(details, dict) else None
    if not isinstance(recorded, str):
        return
    actual = _digest({k: v for k, v in meta.items() if k != "ledger"}, arrays)
    if recorded != actual:
        raise InputError(
            f"{path}: its ledger's model digest ({_short(recorded)}) does not match the file's ({_short(actual)})"
        )


def _digest(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256(json.dumps(meta, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"\n{name}:{a.dtype.str}:{list(a.shape)}\n".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
