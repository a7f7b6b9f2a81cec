"""The Python API: ``synthesize(silos, method=..., epsilon=..., delta=...)``.

A release moves through one lifecycle, so that its ledger, its budget reservation and its files
always tell the same story:
  1. ``prepare`` checks everything that needs no private data (the command line calls it before
     it reserves any budget or reads any silo);
  2. the method runs; every mechanism charges the ledger before its noisy value exists;
  3. the caller's files are staged under temporary names (``write_outputs``);
  4. the ledger is marked ``complete``, then the reservation is settled at the ledger's spend;
  5. the staged files are renamed into place.
Any failure or interrupt before step 5 discards the staged files and marks the ledger ``failed``
with what it spent; ``budget_store.reserved``, which holds the reservation, then settles it at
that spend (at zero only when no mechanism ran), or leaves it counted in full if it cannot.

The methods (``methods.METHODS``) are imported when a release is checked, so that importing the
package, as an MPC party's process does, loads no method code.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence, cast

import numpy as np
import pandas as pd

from .accounting import Accountant, epsilon_to_rho
from .accounting.budget_store import Reservation
from .accounting.ledger import UnitAccountant
from .accounting.unit import PrivacyUnit, unit_of
from .aggregation import Aggregator, InProcessAggregator
from .common import InputError, OptionError, Progress, ProgressCallback, Silent, Staged, checkpoint, write_atomic
from .noise import noise_source
from .schema import Schema
from .silo import Silo
from .silo.identifier_scan import identifier_warning
from .silo.reading import SiloLike, read_silos
from .silo.site import check_silo_column, default_silo_name, site_record

if TYPE_CHECKING:
    from .methods import MethodOptions
    from .methods.output import SyntheticRows

#: Notes of a release (clipped values: private, for the operator only); progress has its own logger.
log = logging.getLogger("privsyn_fed.api")

#: The largest epsilon and delta a release may state (the conversions are exact up to them).
MAX_EPSILON = 1000.0
MAX_DELTA = 0.1
#: The smallest delta: far below any useful one, and its shares (a DP draft splits delta among its
#: columns' thresholds) stay normal floating-point numbers.
MIN_DELTA = 1e-100
#: Up to this many rows the synthetic table is drawn inside the run (a failure fails the run);
#: larger tables are drawn chunk by chunk when read or written.
EAGER_ROWS = 2_000_000


@dataclass
class SynthResult:
    """A synthetic table, the ledger of the release that produced it, and run details."""

    output: SyntheticRows
    ledger: dict[str, Any]
    method: str
    info: dict[str, Any]
    accountant: Accountant | None = field(default=None, repr=False)
    #: The release's model (``model.ReleasedModel``): more rows, rows given public conditions,
    #: ``save`` for later; its ``ledger`` is this release's.
    model: Any = field(default=None, repr=False)
    _data: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def rows(self) -> int:
        """The number of synthetic rows."""
        return self.output.count

    @property
    def data(self) -> pd.DataFrame:
        """The whole table (drawn on first use when it was too large to draw during the run)."""
        if self._data is None:
            self._data = self.output.frame()
        return self._data

    def chunks(self) -> Iterator[pd.DataFrame]:
        """The table in frames: the whole of it when already drawn, else chunk by chunk
        (``SyntheticRows.chunks``)."""
        if self._data is not None:
            yield self._data
        else:
            yield from self.output.chunks()

    def write_csv(self, fh) -> None:
        """Write the table as CSV to the open text file ``fh``, chunk by chunk: one header, missing
        values as empty cells."""
        from .methods.output import write_csv

        write_csv(self.chunks(), fh)

    def to_csv(self, path: str | Path, overwrite: bool = False) -> None:
        """Write the table as CSV to ``path``, atomically (``fileio.write_atomic``); an existing file
        is replaced only when ``overwrite``."""
        refuse_existing(path, overwrite)
        write_atomic(Path(path), self.write_csv)


def refuse_existing(path: str | Path, overwrite: bool, what: str = "") -> None:
    """``InputError`` for a ``path`` that exists (a dangling link included) unless ``overwrite``."""
    p = Path(path)
    if not overwrite and (p.exists() or p.is_symlink()):
        raise InputError(f"{p}: already exists{what}; pass overwrite=True to replace it")


def check_budget_args(epsilon: float, delta: float) -> None:
    """``0 < epsilon <= MAX_EPSILON`` and ``MIN_DELTA <= delta < MAX_DELTA``: beyond them the zCDP
    conversion no longer has a meaningful (or a finite) answer."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0 < epsilon <= MAX_EPSILON:
        raise OptionError(f"epsilon must be a positive number up to {MAX_EPSILON:g}, not {epsilon!r}", "epsilon")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not MIN_DELTA <= delta < MAX_DELTA:
        raise OptionError(
            f"delta must lie from {MIN_DELTA:g} up to (not including) {MAX_DELTA:g} (use far less than one "
            f"over the number of rows, e.g. 1e-9), not {delta!r}",
            "delta",
        )


def check_seed(seed: int | None) -> None:
    """``seed`` is ``None`` or a whole number from 0 to ``2^63 - 17``; ``OptionError`` otherwise."""
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**63 - 16
    ):
        raise OptionError(f"seed must be a whole number from 0 to 2^63 - 17, not {seed!r}", "seed")


def prepare(
    method: str,
    schema: Schema,
    n_silos: int,
    *,
    epsilon: float,
    delta: float,
    rows: int | None = None,
    seed: int | None = None,
    mpc: bool = False,
    privacy_unit: str | None = None,
    max_rows_per_unit: int | None = None,
    max_silos_per_unit: int | None = None,
    silo_column: str | None = None,
    silo_names: Sequence[str] = (),
    **options: Any,
) -> MethodOptions:
    """Every check of a release request that needs no private data: the method, the budget,
    the number of silos, the row count, the seed, whether the method runs over MPC (``mpc``), the
    privacy unit (``check_unit``), the silo column against the silos' names (``site.check_silo_column``),
    and the method's options against the public schema (workload and model sizes, round counts).
    Returns the method's validated options; raises ``InputError`` naming what is wrong (an
    ``OptionError`` for the value of a named argument)."""
    from .methods import METHODS
    from .methods.output import check_rows

    if method not in METHODS:
        raise InputError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
    spec = METHODS[method]
    check_budget_args(epsilon, delta)
    if n_silos < spec.min_silos:
        raise InputError(f"method {method} needs at least {spec.min_silos} silos, got {n_silos}")
    if mpc and not spec.mpc:
        raise OptionError(
            f"mpc runs method {' or '.join(n for n, s in METHODS.items() if s.mpc)}; "
            f"{method} over MPC is not available",
            "mpc",
            "method",
        )
    check_rows(rows)
    check_seed(seed)
    check_unit(unit_of(privacy_unit, max_rows_per_unit, max_silos_per_unit, mpc), schema, n_silos, mpc)
    check_silo_column(schema, silo_column, silo_names)
    if schema.private_draft:
        raise InputError(
            f'{schema.source}: this schema was drafted from private rows (its "_draft" note says so), and a '
            "release over it would publish bounds and categories read off those rows; replace them with public "
            'knowledge (or draft with `schema draft --dp`), then delete the "_draft" note (in Python: '
            "schema.reviewed())"
        )
    opts = method_options(method, options)
    opts.check_schema(schema)
    if mpc:
        opts.check_mpc()
    return opts


def check_unit(unit: PrivacyUnit | None, schema: Schema, n_silos: int, mpc: bool) -> None:
    """A privacy unit's public checks: its column is not a schema column (an identifier is never a
    model attribute), and a unit is in no more silos than there are. (Over MPC, ``mpc``, each party
    bounds its own rows and costs its steps for the unit from the release request.)"""
    if unit is None:
        return
    if unit.column in schema.names:
        raise OptionError(
            f"privacy_unit '{unit.column}' is also a schema column; an identifier must never be released, so "
            "remove it from the schema",
            "privacy_unit",
        )
    if unit.max_silos > n_silos:
        raise OptionError(
            f"max_silos_per_unit {unit.max_silos} is more than the {n_silos} silo(s) of this release",
            "max_silos_per_unit",
        )


def method_options(method: str, options: dict[str, Any]) -> MethodOptions:
    """The options of ``method`` (a known method) as its options class, checked without the schema:
    no unknown option, each of its type, each in its range; ``InputError`` (``OptionError``) otherwise."""
    from .methods import METHODS
    from .methods.base import check_option_types

    cls = METHODS[method].options_class
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise InputError(
            f"option {unknown[0]!r} does not apply to method {method}; it takes: {', '.join(sorted(known))}"
        )
    check_option_types(cls, options)
    opts = cls(**options)
    opts.validate()
    return opts


def synthesize(
    silos: Sequence[SiloLike] | Mapping[str, SiloLike],
    method: str = "aim",
    epsilon: float = 1.0,
    delta: float = 1e-9,
    *,
    schema: Schema | str | Path | None = None,
    rows: int | None = None,
    seed: int | None = None,
    ledger_path: str | Path | None = None,
    overwrite: bool = False,
    progress: bool | Progress | ProgressCallback = False,
    aggregator: Aggregator | None = None,
    reservation: Reservation | None = None,
    write_outputs: Callable[["SynthResult", dict], Staged] | None = None,
    allow_identical_silos: bool = False,
    privacy_unit: str | None = None,
    max_rows_per_unit: int | None = None,
    max_silos_per_unit: int | None = None,
    silo_column: str | None = None,
    **options: Any,
) -> SynthResult:
    """Release one synthetic table of the silos' union under (epsilon, delta)-DP.

    Each silo is a ``Silo``, a pandas data frame or the path of a table (CSV, gzip CSV or Parquet);
    frames and paths need ``schema`` (a ``Schema`` or a schema file's path) and are read with every
    check a ``--silo`` file gets, after the request itself has been checked. ``silos`` may be a
    dict from each silo's name to the silo.

    ``silo_column`` names a categorical column of the schema whose categories are the silos'
    names (the dict's keys, else each path's file name without its extensions): each silo's rows
    take its name there (``silo.site``), so the release keeps each silo's share of the rows and the
    marginals it measures together with the column (not every distribution within a silo). The
    silos' tables need not hold the column; where one does, every row must hold its name.
    ``seed`` makes the run reproducible by drawing noise from a seeded generator; such a release
    is marked ``seeded`` in its ledger and carries no real guarantee (tests and demos only).
    ``ledger_path`` makes the ledger durable: it is written before each noisy value is released;
    an existing file there is refused unless ``overwrite`` (or it is the opening ledger of
    ``reservation``). ``progress``: True shows a progress display on stderr; a callable is called
    as ``progress(fraction, message)`` at each step (``fraction``: the share of the budget spent).
    Either way each step and note is logged (logger ``privsyn_fed.progress``); nothing is
    printed to stdout.
    ``aggregator`` (federated methods) combines the silos' statistics; the default is the
    in-process trusted aggregator. ``reservation`` (from ``budget_store.reserved``, booked for
    this run's epsilon and delta) is settled here at what the ledger spent when the run
    completes; when it fails, the ``reserved`` block settles it. ``write_outputs(result,
    final_ledger)`` stages the release's files and returns the ``Staged`` set; they are
    published only once the ledger is complete and the reservation settled (see the module
    docstring). Two silos holding the same rows (in any order) are
    refused unless ``allow_identical_silos``. Method options are keyword arguments of the
    method's options class (``methods.METHODS[method].options_class``).

    ``privacy_unit`` names a column that identifies a person or an account (not a schema column):
    each silo then keeps at most ``max_rows_per_unit`` (K, default 1) rows per unit, chosen by a
    keyed hash of the unit and the row's position (a key drawn for this release and never stored),
    a unit found in more than ``max_silos_per_unit`` (M, default 1) silos keeps its rows in M of
    them, chosen by a keyed hash of the unit and the silo (``read_silos``), and the guarantee is
    for adding or removing one unit: every sensitivity is ``K M`` times one row's
    (``accounting.unit``). Over MPC no process sees another silo's units: M has no default, and
    the ledger records it as declared. The identifier is never released. Silos given as ``Silo``
    must have been read with the same unit and K, and only where no other silo can share their
    units (one silo, or M at least the number of silos).
    """
    n_silos = len(aggregator.silo_names) if aggregator is not None else len(silos)
    if not silos and not getattr(aggregator, "holds_no_silo", False):  # compute servers hold none
        raise InputError("no silos given")
    names, silos = _named(silos, silo_column)
    if silo_column is not None and aggregator is not None:
        names = _declared_site_names(aggregator, silo_column)
    kept, opening = None, None if reservation is None or reservation.opening is None else reservation.opening.path
    if ledger_path is not None and opening is not None and Path(opening).resolve() != Path(ledger_path).resolve():
        if reservation is not None and reservation.kept_run is not None:
            # the store references ``ledger_path`` (``kept_ledger``): never replaced, the run writes beside it
            kept, ledger_path = ledger_path, opening
    if ledger_path is not None and (opening is None or Path(opening).resolve() != Path(ledger_path).resolve()):
        refuse_existing(ledger_path, overwrite, " (ledger_path)")
    if not (isinstance(progress, (bool, Progress)) or callable(progress)):
        raise OptionError(
            f"progress must be True, False or a callable(fraction, message), not {progress!r}", "progress"
        )
    schema = _schema_of(silos, schema if schema is not None or silos else getattr(aggregator, "schema", None))
    opts = prepare(
        method,
        schema,
        n_silos,
        epsilon=epsilon,
        delta=delta,
        rows=rows,
        seed=seed,
        mpc=aggregator is not None and aggregator.secure,
        privacy_unit=privacy_unit,
        max_rows_per_unit=max_rows_per_unit,
        max_silos_per_unit=max_silos_per_unit,
        silo_column=silo_column,
        silo_names=names,
        **options,
    )
    unit = unit_of(privacy_unit, max_rows_per_unit, max_silos_per_unit, aggregator is not None and aggregator.secure)
    if unit is not None and aggregator is not None and not aggregator.secure:
        raise OptionError(
            "privacy_unit with a given in-process aggregator is not available: its silos are read without the "
            "unit's bound; pass the silos instead",
            "privacy_unit",
            "aggregator",
        )
    # over MPC ``silos`` is party 0's own silo and ``names`` every party's: its site is the first
    sites = None if silo_column is None else [(silo_column, n) for n in names[: len(silos)]]
    silos = read_silos(silos, schema, unit, seed, sites=sites)
    seen: dict = {}
    for s in silos:
        if s.schema.to_dict() != schema.to_dict():
            raise InputError(f"{s.name}: silo was read with a different schema")
        if s.name in seen.values():
            raise InputError(f"{s.name}: the same silo is given twice")
        twin = seen.get(s.fingerprint())
        if twin is not None and not allow_identical_silos:
            raise InputError(
                f"{s.name} and {twin} hold the same rows: every record would count twice while the "
                "ledger charges once (allow_identical_silos=True if they really are different "
                "people's rows)"
            )
        seen[s.fingerprint()] = s.name
    # the store knows the silos it charged: the same data under another dataset id is refused here,
    # before any statistic is computed (``accounting.fingerprints``)
    matched = [] if reservation is None else reservation.charge_silos(silos)
    if isinstance(progress, Progress):
        reporter = progress
    elif callable(progress):
        reporter = Progress(method, enabled=False, callback=progress)
    else:
        reporter = Progress(method) if progress else Silent(method)
    if kept is not None:
        reporter.log(f"{kept} is another run's ledger in the budget store and is kept; this run's is {ledger_path}")
    if matched:
        reporter.log(
            f"the silos match those the budget store charged under dataset(s) {', '.join(map(repr, matched))}; "
            "--new-dataset said the data differ, and the store records that it was said"
        )
    for s in silos:
        for col, reason in getattr(s, "identifiers", {}).items():  # private, as below
            log.warning(identifier_warning(s.name, col, reason))
        for col, n in s.clipped.items():
            if n:  # private: for this process's operator only, never released
                log.info(f"{s.name}: {n} value(s) of '{col}' lay outside the schema's bounds and were clipped")
        if s.unit_dropped:  # private, as above
            log.info(f"{s.name}: {s.unit_dropped} row(s) beyond {unit.max_rows if unit else 1} per unit were left out")
        if s.unit_elsewhere:  # private, as above
            log.info(
                f"{s.name}: {s.unit_elsewhere} row(s) of units kept in {unit.max_silos if unit else 1} other silo(s) "
                "were left out"
            )

    from .methods import METHODS, Release
    from .methods.output import SyntheticRows, default_rows
    from .saved_model import ReleasedModel

    spec = METHODS[method]
    agg = None if spec.central else (aggregator or InProcessAggregator(silos))
    threat = spec.threat_model(agg)
    noise = noise_source(seed)
    details = {
        "silos": n_silos,
        "columns": schema.names,
        "column_types": [c.type for c in schema.columns],
        "shape": list(schema.shape),
        "noise": noise.name,
        "options": {k: v for k, v in vars(opts).items() if k != "workload"},
        **(agg.ledger_details(noise) if agg is not None else {}),
        **({"silo_column": site_record(silo_column, names)} if silo_column is not None else {}),
    }
    if spec.graphical:  # options of the AIM family
        from .methods.aim import AIMOptions, workload_of

        cliques, weights = workload_of(schema.names, cast(AIMOptions, opts))
        details["workload"] = [[schema.names[i] for i in cl] for cl in cliques]
        if weights is not None:
            details["workload_weights"] = list(weights)
        if cast(AIMOptions, opts).workload is not None:  # given, not sampled: the options say so
            details["options"]["workload"] = "explicit"
    if reservation is not None:
        if reservation.rho < epsilon_to_rho(epsilon, delta) * (1 - 1e-12):
            raise ValueError("the reservation is smaller than this run's budget")
        details["budget_store"] = reservation.tag()
    acc = Accountant(
        epsilon,
        delta,
        method,
        seeded=noise.seeded,
        ledger_path=ledger_path,
        threat_model=threat,
        details=details,
        unit=unit,
    )
    # the method plans for one row; its charges are recorded for one unit (``UnitAccountant``)
    charged = acc if unit is None else cast(Accountant, UnitAccountant(acc, unit.factor))
    if reservation is not None:
        reservation.bind(acc)
    if agg is not None:
        agg.bind_release(acc)
    staged = None
    try:
        # the method's public randomness (which silos take part, the encoding's draws), never the data
        public_seed = None if seed is None else seed + 3
        fitted = spec.run(Release(silos, agg, charged, noise, opts, public_seed, reporter))
        model = ReleasedModel(method, schema, fitted.sampler)
        count = rows if rows is not None else default_rows(model.total)
        output = SyntheticRows(model, count, secrets.randbits(63) if seed is None else seed + 1)
        info = {
            "rounds": fitted.rounds,
            "workload": [list(c) for c in fitted.workload],
            "rows": count,
            "noisy_total": float(fitted.sampler.total),
            **fitted.info,
        }
        if rows is None and count < fitted.sampler.total - 0.5:
            reporter.log(
                f"the model's noisy total is {fitted.sampler.total:.4g} rows; drawing {count:,} "
                "(the default cap; rows= or --rows asks for more)"
            )
        result = SynthResult(output, {}, method, info, acc, model)
        if count <= EAGER_ROWS:
            result._data = output.frame()
        final = {
            "rounds": fitted.rounds,
            "rows": count,
            **expected_oneway_error(fitted.info.get("oneway_sigmas"), schema, fitted.sampler.total, charged.rho_budget),
            **{k: v for k, v in fitted.info.items() if k == "traffic"},
            "model_sha256": model.digest(),
        }
        previewed = acc.preview("complete", **final)
        if write_outputs is not None:
            staged = write_outputs(result, previewed)
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


def _schema_of(silos: Sequence[SiloLike], schema: Schema | str | Path | None) -> Schema:
    """The release's schema: ``schema`` (loaded when a path), else the first silo's."""
    if isinstance(schema, (str, Path)):
        return Schema.load(schema)
    if schema is not None:
        return schema
    first = silos[0]
    if isinstance(first, Silo) and all(isinstance(s, Silo) for s in silos):
        return first.schema
    raise InputError("silos given as data frames or paths need schema= (a Schema or a schema file's path)")


def _declared_site_names(aggregator: Aggregator, silo_column: str) -> list[str]:
    """The silos' names of a release over MPC with a silo column: the parties accepted them in the
    release request (``coordinator(release=...)`` with the site); party 0's silo is the first."""
    request = getattr(aggregator, "request", None)
    site = getattr(request, "site", None)
    if not aggregator.secure or site is None or site[0] != silo_column:
        raise OptionError(
            "silo_column with a given aggregator needs the MPC parties to have accepted it in the release request "
            "(mpc.launch.coordinator's release with the silo column)",
            "silo_column",
            "aggregator",
        )
    return list(site[1])


def _named(silos: Sequence[SiloLike] | Mapping[str, SiloLike], silo_column: str | None) -> tuple[list[str], list]:
    """``(names, silos)``: a dict's keys and values, else each silo's name (a ``Silo``'s site
    name, a path's file name without its extensions, ``frame i`` for the i-th frame); with a
    ``silo_column``, frames must be named by a dict."""
    if isinstance(silos, Mapping):
        for name in silos:
            if not isinstance(name, str) or not name:
                raise InputError(f"silos: a silo's name must be a non-empty text, not {name!r}")
        return list(silos), list(silos.values())
    names = []
    for i, s in enumerate(silos):
        if isinstance(s, Silo):
            names.append(s.site[1] if s.site is not None else s.name)
        elif isinstance(s, (str, Path)):
            names.append(default_silo_name(s))
        elif silo_column is not None:
            raise OptionError(
                "silo_column needs each silo's name: pass silos as a dict {name: frame}", "silo_column", "silos"
            )
        else:
            names.append(f"frame {i + 1}")
    return names, list(silos)


def expected_oneway_error(sigmas: Sequence[float] | None, schema: Schema, total: float, rho: float) -> dict[str, float]:
    """The release's expected mean 1-way total variation distance from its own noise scales and
    noisy total (public): ``TVD_j ~ (1/2) sqrt(2/pi) sigma_j c_j / N`` for column ``j`` with ``c_j``
    cells (an upper estimate: it ignores the clipping of negative counts), beside the same for
    the independent method at this budget (``sigma = sqrt(d / (2 rho))``), which puts every bit of
    the budget on the 1-ways and so has the least 1-way noise any release can have."""
    if not sigmas or not all(math.isfinite(s) for s in sigmas):
        return {}
    from .methods.independent import oneway_sigma

    cells = np.array(schema.shape, dtype=float)
    scale = 0.5 * math.sqrt(2.0 / math.pi) / max(float(total), 1.0)
    own = float(np.mean(scale * np.asarray(sigmas, dtype=float) * cells))
    base = float(np.mean(scale * oneway_sigma(rho, len(cells)) * cells))
    return {"expected_oneway_tvd": own, "expected_oneway_tvd_independent": base}


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
