"""AIM's run-to-run spread on NIST's national ACS excerpt (27,253 rows from 20 PUMAs in 16 states,
one silo each, the k-marginal's workload declared): ``--runs`` releases of the same command, each
one ``privsyn-fed synth`` process, with its wall time, peak memory, rounds, final model size (the
junction tree's cells, from ``--model-out``), structural zeros held, and k-marginal score.

Then the worst case of the fitting that the options allow (``worst_fit_steps``), in seconds at
the cost of a step per cell measured on the largest final model of the runs (``--step-steps``
steps of the numpy estimator; a step's cost is about proportional to the cells).

    python benchmarks/national_spread.py --national national2019.csv --runs 12

The national excerpt is not in ``shared/data``: ``--national`` names its CSV (``nist_crc.NATIONAL``
says where it is published). As in ``nist_crc.py``, a tenth of epsilon drafts the skewed columns'
cut points (one draft for every release), SDNist's rules are declared, INDP is left out, and the
releases spend the rest at half of delta, each with its own fresh noise (a seeded release's model
does not load). Results go to ``benchmarks/out/national``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from acs_bins import EXCERPTS, SKIP, evaluated, with_rules  # noqa: E402
from aim_adult import timed  # noqa: E402
from nist_crc import NATIONAL, shaped_schema  # noqa: E402

import privsyn_fed as pf  # noqa: E402
from privsyn_fed.methods import pgm  # noqa: E402
from privsyn_fed.methods.graphical import Measurement  # noqa: E402
from privsyn_fed.methods.mirror import NumpyMirrorDescent  # noqa: E402
from privsyn_fed.schema import cut_at_rules  # noqa: E402

OUT = HERE / "out" / "national"


def prepare(national: Path, epsilon: float, delta: float, work: Path) -> tuple[Path, list[Path], Path, Path]:
    """The pooled rows, one silo file per PUMA (without the column), the workload and the schema."""
    real = pd.read_csv(national, dtype=str).drop(columns=list(SKIP))
    pooled = work / "real.csv"
    real.to_csv(pooled, index=False)
    silos = []
    for puma, part in real.groupby("PUMA"):
        silos.append(work / f"{puma}.csv")
        part.drop(columns=["PUMA"]).to_csv(silos[-1], index=False)
    workload = work / "workload.json"
    workload.write_text(json.dumps([["PUMA", "*", "*"]]))
    schema = shaped_schema(EXCERPTS, "national", silos, epsilon / 10, delta / 2, work)
    schema_path = work / "schema.json"
    schema_path.write_text(json.dumps(cut_at_rules(pf.Schema.from_dict(with_rules(schema))).to_dict()))
    return pooled, silos, workload, schema_path


def model_cells(path: Path) -> tuple[int, list[tuple[str, ...]]]:
    """The saved model's junction-tree cells and its factors' column sets."""
    tree = pf.load_model(path).sampler.tree
    return sum(t.size for _, t in tree.factors), [c for c, _ in tree.factors]


def step_seconds(schema_path: Path, cliques: list[tuple[str, ...]], steps: int) -> tuple[float, int]:
    """Seconds per step of the numpy mirror descent fitting the cliques ``cliques`` (random
    targets of 27,000 rows: a step's cost does not depend on the values) and the model's cells."""
    schema = pf.Schema.from_dict(json.loads(schema_path.read_text()))
    domain = pgm.make_domain(schema.names, schema.shape)
    rng = np.random.default_rng(0)
    measurements = [Measurement(c, rng.dirichlet(np.ones(domain.size(c))) * 27_000, 10.0) for c in cliques]
    cells = sum(domain.size(c) for c in cliques)
    NumpyMirrorDescent().estimate(domain, measurements, 27_000.0, 2)  # warms numpy's caches
    start = time.perf_counter()
    NumpyMirrorDescent().estimate(domain, measurements, 27_000.0, steps)
    return (time.perf_counter() - start) / steps, cells


def worst_fit_cell_steps(options: dict, planned_rounds: int) -> float:
    """The most cell-steps an AIM release's fits can take. Round ``t``'s refit is at most
    ``pgm_iters`` steps on a model of at most ``L s_t`` cells, ``L`` the size limit
    (``max_model_size`` MB at 8 bytes a cell) and ``s_t`` the budget share spent once the round's
    marginal is measured (AIM's candidate filter). A round spends at least ``1 / T`` of the budget
    (``T`` the planned rounds; annealing only raises it), so ``s_t`` grows by at least ``1 / T``
    a round up to 1 and ``sum_t s_t <= (T + 1) / 2``. The final fit is at most ``pgm_iters +
    final_iters`` steps at ``L``."""
    limit = options["max_model_size"] * 2**20 / 8
    rounds = (planned_rounds + 1) / 2 * options["pgm_iters"]
    return limit * (rounds + options["pgm_iters"] + options["final_iters"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--national", type=Path, required=True, help=NATIONAL)
    ap.add_argument("--runs", type=int, default=12, help="releases of the same command")
    ap.add_argument("--epsilon", type=float, default=1.0, help="epsilon in all (a tenth drafts the bins)")
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--step-steps", type=int, default=50, help="steps timed on the largest final model")
    ap.add_argument("--timeout", type=float, default=3600.0)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    pooled, silos, workload, schema_path = prepare(args.national, args.epsilon, args.delta, OUT)
    runs = []
    for run in range(1, args.runs + 1):
        out = OUT / f"aim-{run}.csv"
        model = out.with_suffix(".model.npz")
        cmd = [sys.executable, "-m", "privsyn_fed", "synth", "--method", "aim", "--schema", str(schema_path)]
        cmd += [a for s in silos for a in ("--silo", str(s))] + ["--silo-column", "PUMA", "--workload", str(workload)]
        cmd += ["--epsilon", f"{0.9 * args.epsilon:.6g}", "--delta", f"{args.delta / 2:.3g}"]
        cmd += ["--out", str(out), "--model-out", str(model), "--force"]
        wall, peak, rc = timed(cmd, out.with_suffix(".log"), args.timeout)
        if rc != 0:
            raise SystemExit(f"run {run}: synth exited {rc}; see {out.with_suffix('.log')}")
        details = json.loads(out.with_suffix(".ledger.json").read_text())["details"]
        cells, cliques = model_cells(model)
        held = [line for line in out.with_suffix(".log").read_text().splitlines() if "structural zeros of" in line]
        score = evaluated(pooled, out, schema_path, out.with_suffix(".json"))["kmarginal"]["score"]
        runs.append({
            "run": run, "seconds": wall, "peak_mb": peak, "rounds": details["rounds"],
            "planned_rounds": details["schedule"]["rounds"], "final_cells": cells, "cliques": cliques,
            "zeros_held": held[-1].split("final fit: ")[-1] if held else "", "kmarginal": score,
            "options": details["options"],
        })  # fmt: skip
        print(f"run {run}: {wall:.1f} s, {peak:.0f} MB, {details['rounds']} rounds, final model {cells:,} cells, "
              f"k-marginal {score:.1f}", flush=True)  # fmt: skip
    seconds = [r["seconds"] for r in runs]
    print(f"wall time {statistics.median(seconds):.1f} s median, {min(seconds):.1f} to {max(seconds):.1f}")
    largest = max(runs, key=lambda r: r["final_cells"])
    per_step, cells = step_seconds(schema_path, largest["cliques"], args.step_steps)
    planned = max(r["planned_rounds"] for r in runs)
    worst = per_step / cells * worst_fit_cell_steps(largest["options"], planned)
    print(
        f"a step on the largest final model ({cells:,} cells): {per_step * 1e3:.1f} ms, "
        f"{per_step / cells * 1e9:.1f} ns a cell; the fits of a release with {planned} planned rounds "
        f"take at most {worst:.0f} s (worst_fit_cell_steps)"
    )
    (OUT / "spread.json").write_text(json.dumps({"runs": runs, "step_seconds": per_step, "step_cells": cells,
                                                 "worst_fit_seconds": worst}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
