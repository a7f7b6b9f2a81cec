"""Benchmark: drawing rows from a released model. One AIM release on UCI Adult (epsilon 1, delta
1e-9), then, from that one model, rows drawn by mbi's own sampler (``synthetic_data``, randomised
rounding; how releases were drawn before models were kept) and by the kept model
(``ReleasedModel.sample``: the numpy junction tree), unconditioned and given public values. Reports
wall time per draw and each sample's workload error against the real rows (64 three-way marginals),
so that the two samplers are compared at equal fidelity.

    .venv/bin/python benchmarks/sampling.py [--rows 100000 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from adult import load_adult  # noqa: E402
from workload_error import workload_error  # noqa: E402

import privsyn_fed as pf  # noqa: E402
import privsyn_fed.methods.core as core  # noqa: E402
from privsyn_fed.methods import sample_workload  # noqa: E402
from privsyn_fed.schema import decode_codes  # noqa: E402

WHERE = {"sex": "Female", "age": (30, 40)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cache", default=str(HERE / "out"))
    args = ap.parse_args()
    csv, schema_path = load_adult(Path(args.cache))
    schema = pf.Schema.load(schema_path)
    real = pf.Silo.load(csv, schema)

    fitted = {}  # the mbi model behind the release, kept aside to run mbi's own sampler on it
    keep = core.graphical_sampler

    def capture(model, schema):
        fitted["mbi"] = model
        return keep(model, schema)

    core.graphical_sampler = capture
    start = time.monotonic()
    model = pf.Synthesizer("aim", epsilon=1.0, delta=1e-9).fit([real], rows=10)
    print(f"release: {time.monotonic() - start:.1f} s; model cliques {len(model.sampler.tree.factors)}")
    workload = sample_workload(len(schema.names), 3, 64, 0)

    def mbi_sample(rows: int, seed: int):
        np.random.seed(seed)
        data = fitted["mbi"].synthetic_data(rows=rows).to_dict()
        codes = np.stack([np.asarray(data[n]) for n in schema.names], axis=1).astype(np.int64)
        return decode_codes(codes, schema, np.random.default_rng(seed + 1))

    samplers = {
        "mbi synthetic_data": mbi_sample,
        "kept model": lambda rows, seed: model.sample(rows, seed=seed),
        f"kept model, where {WHERE}": lambda rows, seed: model.sample(rows, seed=seed, where=WHERE),
    }
    print("| sampler | rows | seconds (median of {}) | workload error |".format(args.repeats))
    print("|---|---|---|---|")
    for rows in args.rows:
        for name, draw in samplers.items():
            times, frame = [], None
            for r in range(args.repeats):
                t = time.monotonic()
                frame = draw(rows, r)
                times.append(time.monotonic() - t)
            drawn = pf.Silo.from_frame(frame, schema)
            error = "" if "where" in name else f"{workload_error(real, drawn, workload):.4f}"
            print(f"| {name} | {rows:,} | {float(np.median(times)):.2f} | {error} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
