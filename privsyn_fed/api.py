"""The Python API: ``synthesize(silos, method=..., epsilon=..., delta=...)``."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .accounting import Accountant
from .encode import decode_codes
from .errors import InputError
from .fileio import write_atomic
from .mechanisms import noise_source
from .progress import Progress, Silent
from .schema import Schema
from .silo import Silo

METHODS = ("aim",)


@dataclass
class SynthResult:
    """A synthetic table, the ledger of the release that produced it, and run details."""

    data: pd.DataFrame
    ledger: dict[str, Any]
    method: str
    info: dict[str, Any]
    accountant: Accountant | None = field(default=None, repr=False)

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
               progress: bool | Progress = False, **options: Any) -> SynthResult:
    """Release one synthetic table of the silos' union under (epsilon, delta)-DP.

    ``seed`` makes the run reproducible by drawing noise from a seeded generator; such a release
    is marked ``seeded`` in its ledger and carries no real guarantee (tests and demos only).
    ``ledger_path`` makes the ledger durable: it is written before each noisy value is released.
    Method options (for ``aim``: see ``AIMOptions``) are passed as keyword arguments.
    """
    if method not in METHODS:
        raise InputError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
    check_budget_args(epsilon, delta)
    if not silos:
        raise InputError("at least one silo is needed")
    schema: Schema = silos[0].schema
    for s in silos[1:]:
        if s.schema.to_dict() != schema.to_dict():
            raise InputError(f"{s.name}: silo was read with a different schema")
    if rows is not None and (not isinstance(rows, (int, np.integer)) or rows < 1):
        raise InputError(f"rows must be a positive integer, not {rows!r}")
    reporter = progress if isinstance(progress, Progress) else (Progress(method) if progress else Silent())

    from .methods.aim import THREAT_MODEL, AIMOptions, run_aim

    opts = AIMOptions(**options)
    opts.validate()
    noise = noise_source(seed)
    acc = Accountant(epsilon, delta, method, seeded=noise.seeded, ledger_path=ledger_path,
                     threat_model=THREAT_MODEL,
                     details={"silos": len(silos), "noise": noise.name,
                              "options": {k: v for k, v in vars(opts).items() if k != "workload"}})
    try:
        result = run_aim(Silo.pooled(silos), acc, noise, opts, rows,
                         sample_seed=None if seed is None else seed + 1, progress=reporter)
        rng = np.random.default_rng(None if seed is None else seed + 2)
        data = decode_codes(result.codes, schema, rng)
    except BaseException:
        acc.finish("failed")
        raise
    finally:
        reporter.close()
    info = {"rounds": result.rounds, "workload": [list(c) for c in result.workload], "rows": len(data)}
    acc.finish("complete", rounds=result.rounds, workload_size=len(result.workload), rows=len(data))
    return SynthResult(data, acc.ledger(), method, info, acc)
