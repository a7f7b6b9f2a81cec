"""``privsyn-fed mpc-demo``: real party processes computing DistAIM's steps on secret shares.

Each party gets generated rows (a CSV of its own); party 0 (this process) coordinates. The demo
prints party 0's share of a secret sum next to the opened sum and checks the latter against the
plaintext sum (computable here only because the demo generated every party's rows), then runs a
few DistAIM rounds (secure select and measure) and reports wall time, rounds and bytes per party.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..schema import Schema
from ..silo import MarginalsQuery, Silo

DEMO_SCHEMA = {
    "columns": [
        {"name": "age", "type": "numeric", "lower": 18, "upper": 90, "bins": 8, "integer": True},
        {"name": "hours", "type": "numeric", "lower": 0, "upper": 80, "bins": 8},
        {"name": "sex", "type": "categorical", "categories": ["F", "M"]},
        {"name": "sector", "type": "categorical", "categories": ["public", "private", "self"]},
        {"name": "income", "type": "categorical", "categories": ["<=50K", ">50K"]},
    ]
}


def generated_rows(n: int, seed: int) -> pd.DataFrame:
    """Correlated rows (hours and income depend on age, sex and sector); parties differ by seed."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 91, n)
    sex = rng.choice(["F", "M"], n)
    sector = rng.choice(["public", "private", "self"], n, p=[0.2, 0.65, 0.15])
    hours = np.clip(38 + np.where(sex == "M", 4, 0) + np.where(sector == "self", 8, 0) + rng.normal(0, 9, n), 0, 80)
    score = 0.04 * (age - 40) + 0.05 * (hours - 40) + np.where(sex == "M", 0.6, 0) + rng.normal(0, 1, n)
    income = np.where(score > 0.8, ">50K", "<=50K")
    return pd.DataFrame({"age": age, "hours": hours.round(1), "sex": sex, "sector": sector, "income": income})


def run_demo(
    parties: int = 3, rows: int = 2000, rounds: int = 3, epsilon: float = 1.0, seed: int = 0, out=print
) -> int:
    """Run the demo (``parties`` processes of ``rows`` generated rows, a secure sum checked against the
    plaintext one, DistAIM for ``rounds`` rounds at ``epsilon``), printing through ``out``; returns
    the exit status (1 if the opened sum differs)."""
    from ..common import InputError
    from ..mpc import coordinator
    from ..release import ReleaseRequest, run_release

    if parties < 2:
        raise InputError("--parties must be at least 2")
    with tempfile.TemporaryDirectory(prefix="privsyn-fed-demo-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "schema.json").write_text(json.dumps(DEMO_SCHEMA))
        paths = []
        for k in range(parties):
            paths.append(tmp / f"party{k}.csv")
            generated_rows(rows, seed + k).to_csv(paths[-1], index=False)
        out(
            f"starting {parties} party processes and a dealer on loopback (TLS 1.3, mutually authenticated); "
            f"{rows} generated rows each"
        )
        start = time.monotonic()
        with coordinator(tmp / "schema.json", paths, checks=True) as agg:  # the parties open the exact sum
            joined = time.monotonic()
            out(f"all parties joined in {joined - start:.1f} s")
            schema = Schema.load(tmp / "schema.json")
            query = MarginalsQuery(((2, 4),))  # sex x income
            share, opened = agg.exact_sum_and_share_for_checks(query, agg.silo_names, "demo sum")
            plain = np.sum([Silo.load(p, schema).marginal((2, 4)) for p in paths], axis=0)
            out("\nsecure sum of the (sex x income) counts over all parties:")
            out(f"  {'cell':<16} {'party 0 holds (its share)':>28} {'opened sum':>12} {'plaintext sum':>14}")
            labels = [f"{s}, {i}" for s in ("F", "M") for i in ("<=50K", ">50K")]
            for lab, sh, op, pl in zip(labels, share, opened, plain):
                out(f"  {lab:<16} {int(sh):>28d} {int(op):>12d} {int(pl):>14d}")
            if not np.array_equal(opened, plain):
                out("  MISMATCH: the opened sum differs from the plaintext sum")
                return 1
            out("  the opened sum equals the plaintext sum exactly; a share alone is uniformly random in Z_2^64")
            out(f"\nDistAIM, {rounds} rounds at epsilon={epsilon:g}: select and measure on secret shares")
            before = time.monotonic()
            request = ReleaseRequest.of("distaim", epsilon, 1e-9, schema, agg.silo_names, mpc=True, rounds=rounds)
            result = run_release(request, [agg.own], aggregator=agg, ledger_path=tmp / "ledger.json")
            run_s = time.monotonic() - before
            for e in result.ledger["entries"]:
                if e["mechanism"] == "exponential":
                    continue
                out(
                    f"  opened {e['query']}: {e['cells']} noisy cells (each party added its own noise "
                    f"of sigma {e['sigma']:.1f} on shares)"
                )
            traffic = result.info["traffic"]["parties"]
        total_s = time.monotonic() - start
    out(
        f"\nreleased {len(result.data)} synthetic rows; epsilon {result.ledger['epsilon']:.3f} at delta 1e-9 "
        f"({len(result.ledger['entries'])} mechanisms, noise '{result.ledger['details']['noise']}')"
    )
    out(
        f"wall time: {total_s:.1f} s in all ({run_s:.1f} s for DistAIM, {run_s / rounds:.1f} s per round "
        "including the initial 1-ways and model fits)"
    )
    out("communication per party (CrypTen's count of rounds and bytes, plus the command channel):")
    for k, t in enumerate(traffic):
        out(f"  party {k}: {t['rounds']:.0f} rounds, {(t['bytes'] + t['command_bytes']) / 1e6:.2f} MB")
    return 0
