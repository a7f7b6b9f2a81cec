"""The lifecycle of one checked release (``run_release``), so that its ledger, its budget reservation
and its files always tell the same story:
  1. the request was checked before (``request.ReleaseRequest.of``): nothing here re-checks it;
  2. the silos are read (and bounded per privacy unit); the method runs, every mechanism charging
     the ledger before its noisy value exists;
  3. the caller's files are staged under temporary names (``stage``);
  4. the ledger is marked ``complete``, then the reservation is settled at the ledger's spend;
  5. the staged files are renamed into place.
Any failure or interrupt before step 5 discards the staged files and marks the ledger ``failed``
with what it spent; ``budget_store.reserved``, which holds the reservation, then settles it at
that spend (at zero only when no mechanism ran), or leaves it counted in full if it cannot.
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path
from typing import Any, Callable, Sequence, cast

from ..accounting import Accountant, Reservation, UnitAccountant, epsilon_to_rho
from ..aggregation import Aggregator, InProcessAggregator
from ..common import InputError, OptionError, Progress, ProgressCallback, Silent, Staged, checkpoint
from ..noise import noise_source
from ..schema import divided_note
from ..silo import SiloLike, identifier_warning, read_silos, site_record
from .request import ReleaseRequest
from .result import SynthResult, refuse_existing

#: Notes of a release: for the operator of each silo (private: never released), and on its public schema.
log = logging.getLogger("privsyn_fed.release")

#: Up to this many rows the synthetic table is drawn inside the run (a failure fails the run);
#: larger tables are drawn chunk by chunk when read or written.
EAGER_ROWS = 2_000_000


def run_release(
    request: ReleaseRequest,
    silos: Sequence[SiloLike],
    *,
    aggregator: Aggregator | None = None,
    reservation: Reservation | None = None,
    stage: Callable[[SynthResult, dict], Staged] | None = None,
    ledger_path: str | Path | None = None,
    overwrite: bool = False,
    progress: bool | Progress | ProgressCallback = False,
) -> SynthResult:
    """Run the release ``request`` over ``silos`` (``Silo``, frames or paths; over MPC party 0's own,
    none on a compute server) and return its ``SynthResult``.

    ``aggregator`` (federated methods) combines the silos' statistics (default: the in-process
    trusted aggregator); an MPC aggregator's parties must have accepted ``request.terms()``.
    ``reservation`` (``budget_store.reserved``, booked for this run's budget) is settled here at what
    the ledger spent when the run completes. ``stage(result, final_ledger)`` writes the release's
    files under temporary names; they are published once the ledger is complete and the
    reservation settled. ``ledger_path`` makes the ledger durable (written before each noisy value
    is released); an existing file is refused unless ``overwrite`` (or it is ``reservation``'s
    opening ledger). ``progress``: True shows a display on stderr; a callable gets
    ``(fraction, message)``."""
    secure = aggregator is not None and aggregator.secure
    if secure != request.mpc:
        raise ValueError("a request over MPC runs with an MPC aggregator, and only such a request does")
    if request.unit is not None and aggregator is not None and not secure:
        raise OptionError(
            "privacy_unit with a given in-process aggregator is not available: its silos are read without the "
            "unit's bound; pass the silos instead",
            "privacy_unit",
            "aggregator",
        )
    if not silos and aggregator is None:
        raise InputError("no silos given")
    ledger_path, kept = _ledger_path(ledger_path, reservation, overwrite)
    if not (isinstance(progress, (bool, Progress)) or callable(progress)):
        raise OptionError(
            f"progress must be True, False or a callable(fraction, message), not {progress!r}", "progress"
        )
    schema, names = request.schema, list(request.silo_names or ())
    # over MPC ``silos`` is party 0's own silo and ``names`` every party's: its site is the first
    sites = None if request.silo_column is None else [(request.silo_column, n) for n in names[: len(silos)]]
    read = read_silos(silos, schema, request.unit, request.seed, sites=sites)
    _check_distinct(read, schema, request.allow_identical_silos)
    # the store knows the silos it charged: the same data under another dataset id is refused here,
    # before any statistic is computed (``accounting.fingerprints``)
    matched = [] if reservation is None else reservation.charge_silos(read)
    reporter = _reporter(request.method, progress)
    if kept is not None:
        reporter.log(f"{kept} is another run's ledger in the budget store and is kept; this run's is {ledger_path}")
    if matched:
        reporter.log(
            f"the silos match those the budget store charged under dataset(s) {', '.join(map(repr, matched))}; "
            "--new-dataset said the data differ, and the store records that it was said"
        )
    _notes(read, request)
    divided = divided_note(schema)  # public: the schema's own bins and rules
    if divided:
        log.warning(divided)
    return _run(request, read, aggregator, reservation, stage, ledger_path, reporter)


def _run(request, silos, aggregator, reservation, stage, ledger_path, reporter) -> SynthResult:
    """Steps 2 to 5 of the lifecycle, on read silos."""
    from ..methods import METHODS, MethodRun, expected_oneway_error, fit_warning, no_joint_warning
    from ..methods.output import SyntheticRows, default_rows
    from ..saved_model import ReleasedModel

    spec, schema, opts = METHODS[request.method], request.schema, request.options
    agg = None if spec.central else (aggregator or InProcessAggregator(silos))
    noise = noise_source(request.seed)
    own = spec.ledger_details(schema, opts)
    details = {
        "silos": request.silos,
        "columns": schema.names,
        "column_types": [c.type for c in schema.columns],
        "shape": list(schema.shape),
        "noise": noise.name,
        "options": own.pop("options"),
        **(agg.ledger_details(noise) if agg is not None else {}),
    }
    if request.silo_column is not None:
        details["silo_column"] = site_record(request.silo_column, list(request.silo_names or ()))
    details.update(own)  # the method's own (a workload)
    if reservation is not None:
        if reservation.rho < epsilon_to_rho(request.epsilon, request.delta) * (1 - 1e-12):
            raise ValueError("the reservation is smaller than this run's budget")
        details["budget_store"] = reservation.tag()
    acc = Accountant(
        request.epsilon,
        request.delta,
        request.method,
        seeded=noise.seeded,
        ledger_path=ledger_path,
        threat_model=spec.threat_model(agg),
        details=details,
        unit=request.unit,
    )
    # the method plans for one row; its charges are recorded for one unit (``UnitAccountant``)
    unit = request.unit
    charged = acc if unit is None else cast(Accountant, UnitAccountant(acc, unit.factor))
    if reservation is not None:
        reservation.bind(acc)
    if agg is not None:
        agg.bind_release(acc)
    staged = None
    try:
        # the method's public randomness (which silos take part, the encoding's draws), never the data
        seed = request.seed
        public_seed = None if seed is None else seed + 3
        fitted = spec.run(MethodRun(silos, agg, charged, noise, opts, public_seed, reporter))
        poor_fit = fit_warning(fitted.info.get("fit"), naive_sums=fitted.info.get("variant") == "naive")
        no_joint = no_joint_warning(fitted.info.get("fit"), len(schema.names), 1 if unit is None else unit.factor)
        for warning in (poor_fit, no_joint):
            if warning is not None:
                reporter.warn(warning)
        model = ReleasedModel(request.method, schema, fitted.sampler)
        count = request.rows if request.rows is not None else default_rows(model.total)
        output = SyntheticRows(model, count, secrets.randbits(63) if seed is None else seed + 1)
        info = {
            "rounds": fitted.rounds,
            "workload": [list(c) for c in fitted.workload],
            "rows": count,
            "noisy_total": float(fitted.sampler.total),
            **fitted.info,
        }
        if request.rows is None and count < fitted.sampler.total - 0.5:
            reporter.log(
                f"the model's noisy total is {fitted.sampler.total:.4g} rows; drawing {count:,} "
                "(the default cap; rows= or --rows asks for more)"
            )
        result = SynthResult(output, {}, request.method, info, acc, model)
        if count <= EAGER_ROWS:
            result._data = output.frame()
        sigmas = fitted.info.get("oneway_sigmas")
        final = {
            "rounds": fitted.rounds,
            "rows": count,
            **expected_oneway_error(sigmas, schema, fitted.sampler.total, charged.rho_budget),
            **{k: v for k, v in fitted.info.items() if k == "traffic"},
            "model_sha256": model.digest(),
        }
        previewed = acc.preview("complete", **final)
        if stage is not None:
            staged = stage(result, previewed)
        checkpoint()  # the last safe point: after it the release is committed
        acc.finish("complete", updated=previewed["updated"], **final)
        if reservation is not None:
            reservation.settle(acc.rho_spent, "complete")
    except BaseException as exc:
        if staged is not None:
            staged.discard()
        for note in _abandon(acc):
            exc.add_note(note)
        raise
    finally:
        if agg is not None:
            agg.bind_release(None)
        reporter.close()
    result.ledger = model.ledger = acc.ledger()
    if staged is not None:
        staged.publish()
    return result


def _ledger_path(ledger_path, reservation: Reservation | None, overwrite: bool) -> tuple[Any, Any]:
    """``(the ledger's path, a kept ledger or None)``: a ledger the budget store references
    (``kept_ledger``) is never replaced, and the run writes beside it (the reservation's opening
    ledger); any other existing file is refused unless ``overwrite``."""
    kept, opening = None, None if reservation is None or reservation.opening is None else reservation.opening.path
    if ledger_path is not None and opening is not None and Path(opening).resolve() != Path(ledger_path).resolve():
        if reservation is not None and reservation.kept_run is not None:
            kept, ledger_path = ledger_path, opening
    if ledger_path is not None and (opening is None or Path(opening).resolve() != Path(ledger_path).resolve()):
        refuse_existing(ledger_path, overwrite, " (ledger_path)")
    return ledger_path, kept


def _check_distinct(silos, schema, allow_identical: bool) -> None:
    """Every silo was read with the release's schema, none is given twice, and two silos hold the
    same rows only where ``allow_identical`` says they really are different people's."""
    seen: dict = {}
    for s in silos:
        if s.schema.to_dict() != schema.to_dict():
            raise InputError(f"{s.name}: silo was read with a different schema")
        if s.name in seen.values():
            raise InputError(f"{s.name}: the same silo is given twice")
        twin = seen.get(s.fingerprint())
        if twin is not None and not allow_identical:
            raise InputError(
                f"{s.name} and {twin} hold the same rows: every record would count twice while the "
                "ledger charges once (--allow-identical-silos, or allow_identical_silos=True in Python, if they "
                "really are different people's rows)"
            )
        seen[s.fingerprint()] = s.name


def _reporter(method: str, progress) -> Progress:
    if isinstance(progress, Progress):
        return progress
    if callable(progress):
        return Progress(method, enabled=False, callback=progress)
    return Progress(method) if progress else Silent(method)


def _notes(silos, request: ReleaseRequest) -> None:
    """Each silo's private notes, logged once for its operator (warnings of ``privsyn_fed.release``;
    the command line shows them on stderr): identifier-like columns, values clipped to the schema's
    bounds, rows left out by the privacy unit's bounds. Never released."""
    unit = request.unit
    for s in silos:
        who = f"for the operator of {s.name}"
        for col, reason in s.identifiers.items():
            log.warning(identifier_warning(s.name, col, reason))
        for col, n in s.clipped.items():
            if n:
                log.warning(
                    f"{who}: {n} value(s) of '{col}' lay outside the schema's bounds and were clipped "
                    "(private; not released)"
                )
        if s.unit_dropped:
            log.warning(
                f"{who}: {s.unit_dropped} row(s) beyond {unit.max_rows if unit else 1} per unit "
                "(--max-rows-per-unit) were left out (private; not released)"
            )
        if s.unit_elsewhere:
            log.warning(
                f"{who}: {s.unit_elsewhere} row(s) of units kept in {unit.max_silos if unit else 1} other "
                "silo(s) (--max-silos-per-unit) were left out (private; not released)"
            )


def _abandon(acc: Accountant) -> list[str]:
    """Mark a run that did not complete: ledger ``failed`` with its spend (no ledger at all when
    nothing was charged). Returns a note on what was recorded, or could not be (a full disk).
    The budget reservation is settled by ``budget_store.reserved``, which holds it."""
    notes = []
    acc.status = "failed"
    if acc.released or acc.non_private is not None:
        try:
            acc.finish("failed")
            if acc.ledger_path is not None:
                notes.append(f"the ledger {acc.ledger_path} records rho {acc.rho_spent:.6g} spent (status failed)")
        except Exception as exc:  # the ledger on disk still holds every charge written so far
            notes.append(f"the ledger could not be marked failed ({' '.join(str(exc).split())})")
    return notes
