"""The Python API: ``synthesize(silos, method=..., epsilon=..., delta=...)``."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .accounting import Accountant, epsilon_to_rho
from .accounting.budget_store import Reservation
from .aggregate import Aggregator, InProcessAggregator
from .encode import decode_codes
from .errors import InputError
from .fileio import write_atomic
from .mechanisms import noise_source
from .progress import Progress, Silent
from .schema import Schema
from .silo import Silo

METHODS = ("aim", "distaim", "flaim", "fedtda")
#: Fewest silos each method accepts.
MIN_SILOS = {"aim": 1, "distaim": 2, "flaim": 2, "fedtda": 1}


@dataclass
class SynthResult:
    """A synthetic table, the ledger of the release that produced it, and run details."""

    data: pd.DataFrame
    ledger: dict[str, Any]
    method: str
    info: dict[str, Any]
    accountant: Accountant | None = field(default=None, repr=False)
    #: The fitted graphical model the rows were sampled from (for holdout likelihoods).
    model: Any = field(default=None, repr=False)

    def to_csv(self, path: str | Path) -> None:
        write_csv_atomic(self.data, Path(path))


def write_csv_atomic(df: pd.DataFrame, path: Path) -> None:
    write_atomic(path, lambda fh: df.to_csv(fh, index=False, na_rep=""))


def check_budget_args(epsilon: float, delta: float) -> None:
    if not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon) or epsilon <= 0:
        raise InputError(f"epsilon must be a positive finite number, not {epsilon!r}")
    if not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise InputError(f"delta must lie strictly between 0 and 1, not {delta!r}")


def synthesize(silos: Sequence[Silo], method: str = "aim", epsilon: float = 1.0, delta: float = 1e-9, *,
               rows: int | None = None, seed: int | None = None, ledger_path: str | Path | None = None,
               progress: bool | Progress = False, aggregator: Aggregator | None = None,
               reservation: Reservation | None = None, **options: Any) -> SynthResult:
    """Release one synthetic table of the silos' union under (epsilon, delta)-DP.

    ``seed`` makes the run reproducible by drawing noise from a seeded generator; such a release
    is marked ``seeded`` in its ledger and carries no real guarantee (tests and demos only).
    ``ledger_path`` makes the ledger durable: it is written before each noisy value is released.
    ``aggregator`` (federated methods) combines the silos' statistics; the default is the
    in-process trusted aggregator. ``reservation`` (from ``BudgetStore.reserve``, booked for
    this run's epsilon and delta) is settled with what the ledger spent, whether the run
    completes or fails. Method options are keyword arguments: ``AIMOptions`` for
    ``aim``, ``FederatedOptions`` for ``distaim``, ``FLAIMOptions`` for ``flaim``.
    """
    if method not in METHODS:
        raise InputError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
    check_budget_args(epsilon, delta)
    n_silos = len(aggregator.silo_names) if aggregator is not None else len(silos)
    if n_silos < MIN_SILOS[method]:
        raise InputError(f"method {method} needs at least {MIN_SILOS[method]} silos, got {n_silos}")
    schema: Schema = silos[0].schema
    seen = set()
    for s in silos:
        if s.schema.to_dict() != schema.to_dict():
            raise InputError(f"{s.name}: silo was read with a different schema")
        if s.name in seen:
            raise InputError(f"{s.name}: the same silo is given twice")
        seen.add(s.name)
    if rows is not None and (not isinstance(rows, (int, np.integer)) or rows < 1):
        raise InputError(f"rows must be a positive integer, not {rows!r}")
    reporter = progress if isinstance(progress, Progress) else (Progress(method) if progress else Silent())

    opts, threat, run = _method(method, silos, aggregator, options)
    noise = noise_source(seed)
    details = {"silos": n_silos, "columns": schema.names, "noise": noise.name,
               "options": {k: v for k, v in vars(opts).items() if k != "workload"}}
    if hasattr(aggregator, "ledger_details"):
        details["mpc"] = aggregator.ledger_details()
        details["noise"] = aggregator.noise_name
    if method != "fedtda":
        from .methods.aim import workload_cliques
        details["workload"] = [[schema.names[i] for i in cl] for cl in workload_cliques(schema.names, opts)]
    if reservation is not None:
        if reservation.rho < epsilon_to_rho(epsilon, delta) * (1 - 1e-12):
            raise ValueError("the reservation is smaller than this run's budget")
        details["budget_store"] = {"path": str(reservation.store.path), "dataset_id": reservation.dataset,
                                   "run": reservation.run}
    acc = Accountant(epsilon, delta, method, seeded=noise.seeded, ledger_path=ledger_path,
                     threat_model=threat, details=details)
    try:
        result = run(acc, noise, opts, rows, seed, reporter)
        rng = np.random.default_rng(None if seed is None else seed + 2)
        data = result.data if result.data is not None else decode_codes(result.codes, schema, rng)
    except BaseException:
        acc.finish("failed")
        if reservation is not None:
            reservation.settle(acc.rho_spent, "failed")
        raise
    finally:
        reporter.close()
    info = {"rounds": result.rounds, "workload": [list(c) for c in result.workload], "rows": len(data),
            **result.info}
    acc.finish("complete", rounds=result.rounds, rows=len(data),
               **{k: v for k, v in result.info.items() if k == "traffic"})
    if reservation is not None:
        reservation.settle(acc.rho_spent, "complete")
    return SynthResult(data, acc.ledger(), method, info, acc, result.model)


def _method(method: str, silos: Sequence[Silo], aggregator: Aggregator | None, options: dict[str, Any]):
    """Options, threat model and a runner ``(acc, noise, opts, rows, seed, progress)`` for ``method``."""
    def seeds(seed):       # client sampling, then sampling rows from the model
        return (None, None) if seed is None else (seed + 3, seed + 1)

    if method == "aim":
        from .methods.aim import THREAT_MODEL, AIMOptions, run_aim
        opts = _options(AIMOptions, options)
        return opts, THREAT_MODEL, lambda acc, noise, o, rows, seed, prog: run_aim(
            Silo.pooled(silos), acc, noise, o, rows, sample_seed=seeds(seed)[1], progress=prog)
    agg = aggregator or InProcessAggregator(silos)
    if method == "distaim":
        from .methods.distaim import run_distaim, threat_model
        from .methods.federated import FederatedOptions
        opts = _options(FederatedOptions, options)
        return opts, threat_model(agg), lambda acc, noise, o, rows, seed, prog: run_distaim(
            agg, acc, noise, o, rows, *seeds(seed), progress=prog)
    if method == "fedtda":
        from .methods.fedtda import FedTDAOptions, run_fedtda, threat_model
        opts = _options(FedTDAOptions, options)
        return opts, threat_model(agg), lambda acc, noise, o, rows, seed, prog: run_fedtda(
            agg, acc, noise, o, rows, *seeds(seed), progress=prog)
    from .methods.flaim import FLAIMOptions, run_flaim, threat_model
    opts = _options(FLAIMOptions, options)
    return opts, threat_model(agg), lambda acc, noise, o, rows, seed, prog: run_flaim(
        agg, acc, noise, o, rows, *seeds(seed), progress=prog)


def _options(cls, options: dict[str, Any]):
    known = set(cls.__dataclass_fields__)
    unknown = sorted(set(options) - known)
    if unknown:
        raise InputError(f"option {unknown[0]!r} does not apply to this method; it takes: {', '.join(sorted(known))}")
    opts = cls(**options)
    opts.validate()
    return opts
