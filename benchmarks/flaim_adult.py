"""Benchmark: the FLAIM paper's Table 2 (Adult column) and its label-skew sweep, reproduced.

Setting (FLAIM paper, section 5): UCI Adult's training file (32,561 rows) split into 100 clients
by k-means clustering (feature skew); the test file (16,281 rows) is the holdout; p = 0.1,
epsilon 1 (delta 1e-9 here), T = 10 global rounds, 64 seeded three-way marginals, numeric
columns in 32 uniform bins between public bounds. Methods: central AIM on the pooled rows,
DistAIM, NaiveFLAIM, AugFLAIM (Private). Reported per method (mean and standard deviation over
seeds): workload error, holdout negative log-likelihood (nats per row), ROC-AUC for `income` of
a gradient-boosted tree trained on the synthetic rows, and the measured bytes per client.

    .venv/bin/python benchmarks/flaim_adult.py table --seeds 3            # Table 2, Adult column
    .venv/bin/python benchmarks/flaim_adult.py sweep --seeds 3            # Dirichlet label skew
    .venv/bin/python benchmarks/flaim_adult.py report                     # markdown from results

Each run appends one JSON line to `benchmarks/out/flaim_adult.jsonl`, so a long run can be
split over several processes (`--methods aim` in one, the rest in another) and resumed.
Noise is real (OpenDP, unseeded); the seed only names the repetition.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from adult import load_adult  # noqa: E402

import privsyn_fed as pf  # noqa: E402
from privsyn_fed.evaluation import evaluate, partition  # noqa: E402

TRAIN_ROWS = 32_561  # adult.data; the rest of adult.csv is adult.test
CLIENTS = 100
METHODS = {
    "aim": ("aim", {}),
    "distaim": ("distaim", {"rounds": 10, "sample_rate": 0.1}),
    "naiveflaim": ("flaim", {"rounds": 10, "sample_rate": 0.1, "variant": "naive"}),
    "augflaim": ("flaim", {"rounds": 10, "sample_rate": 0.1, "variant": "private"}),
}
PAPER = {"aim": (0.20, 19.3), "distaim": (0.42, 21.41), "augflaim": (0.43, 21.74), "naiveflaim": (0.80, 29.28)}
LABELS = {"aim": "AIM (central)", "distaim": "DistAIM", "augflaim": "AugFLAIM (Private)", "naiveflaim": "NaiveFLAIM"}


def load(out: Path):
    csv, schema_path = load_adult(out)
    df = pd.read_csv(csv, dtype=str, keep_default_na=False)
    return (
        df.iloc[:TRAIN_ROWS].reset_index(drop=True),
        df.iloc[TRAIN_ROWS:].reset_index(drop=True),
        pf.Schema.load(schema_path),
    )


def client_silos(train: pd.DataFrame, schema, scheme: str, alpha: float | None) -> list[pf.Silo]:
    part = partition(train, CLIENTS, scheme, label="income", alpha=alpha or 0.5, seed=0)
    return [
        pf.Silo.from_frame(train.iloc[rows].reset_index(drop=True), schema, name=f"client{k:03d}")
        for k, rows in enumerate(part.parts())
    ]


def run_one(silos, train, test, schema, key: str, epsilon: float, delta: float) -> dict:
    method, options = METHODS[key]
    start = time.monotonic()
    result = pf.synthesize(silos, method, epsilon, delta, **options)
    seconds = time.monotonic() - start
    report = evaluate(train, result.data, schema, holdout_df=test, label="income", model=result.model)
    traffic = result.info.get("traffic") or {}
    per_client = (
        traffic.get("mean_bytes_sent_per_active_silo", 0) + traffic.get("mean_bytes_received_per_active_silo", 0)
    ) / 1e6
    return {
        "method": key,
        "seconds": seconds,
        "workload_error": report["workload"]["error"],
        "nll": report["nll"]["mean"],
        "nll_median": report["nll"]["median"],
        "auc": report["tstr"]["auc_synthetic"],
        "auc_real": report["tstr"]["auc_real"],
        "mb_per_client": per_client if traffic else None,
        "rho_spent": result.ledger["rho_spent"],
        "rho_budget": result.ledger["rho_budget"],
        "rounds": result.info["rounds"],
    }


def run(args, scheme: str, alphas, methods) -> None:
    out = Path(args.out)
    train, test, schema = load(out)
    results = out / "flaim_adult.jsonl"
    for alpha in alphas:
        silos = client_silos(train, schema, scheme, alpha)
        for seed in range(args.seeds):
            for key in methods:
                row = run_one(silos, train, test, schema, key, args.epsilon, args.delta)
                row.update({"scheme": scheme, "alpha": alpha, "seed": seed, "epsilon": args.epsilon})
                with open(results, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)


def fmt(values, digits=3):
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    return f"{np.mean(values):.{digits}f} ± {np.std(values, ddof=1) if len(values) > 1 else 0:.{digits}f}"


def independent_reference(args) -> tuple[float, float]:
    """Workload error and holdout NLL of the independent model of the exact training 1-ways
    (rows drawn column by column; NLL with add-one-half smoothing)."""
    from privsyn_fed.evaluation import encode, workload_error
    from privsyn_fed.methods import sample_workload

    train, test, schema = load(Path(args.out))
    a, b = encode(train, schema, "train"), encode(test, schema, "test")
    rng = np.random.default_rng(0)
    shuffled = np.stack([rng.permutation(a[:, j]) for j in range(a.shape[1])], axis=1)
    err = workload_error(a, shuffled, schema.shape, sample_workload(len(schema.names), 3, 64, 0))
    nll = 0.0
    for j, k in enumerate(schema.shape):
        p = np.bincount(a[:, j], minlength=k) + 0.5
        nll -= np.log(p[b[:, j]] / p.sum()).mean()
    return err, nll


def report(args) -> None:
    rows = [json.loads(l) for l in open(Path(args.out) / "flaim_adult.jsonl")]
    table = [r for r in rows if r["scheme"] == "cluster"]
    print(
        "| Method | Workload error | Paper | Holdout NLL mean (median) | Paper | Test AUC | MB per client "
        "| Time (s) | Runs |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for key in ("aim", "distaim", "augflaim", "naiveflaim"):
        rs = [r for r in table if r["method"] == key]
        if not rs:
            continue
        mb = [r["mb_per_client"] for r in rs]
        print(
            f"| {LABELS[key]} | {fmt([r['workload_error'] for r in rs])} | {PAPER[key][0]} | "
            f"{fmt([r['nll'] for r in rs], 2)} ({fmt([r.get('nll_median') for r in rs], 2)}) | {PAPER[key][1]} | "
            f"{fmt([r['auc'] for r in rs])} | "
            f"{fmt(mb, 4) if any(m is not None for m in mb) else 'n/a (pooled)'} | "
            f"{fmt([r['seconds'] for r in rs], 0)} | {len(rs)} |"
        )
    if table:
        print(f"\nAUC of the same classifier trained on the real training rows: {fmt([r['auc_real'] for r in table])}")
        err, nll = independent_reference(args)
        print(
            f"Reference (not private): the product of the exact 1-way marginals has workload error "
            f"{err:.3f} and holdout NLL {nll:.2f} (its AUC is 0.5)."
        )
    sweep = [r for r in rows if r["scheme"] == "dirichlet"]
    if sweep:
        print(
            "\n| Dirichlet alpha | AugFLAIM (Private) error | NaiveFLAIM error | AugFLAIM AUC | NaiveFLAIM AUC | Runs |"
        )
        print("|---|---|---|---|---|---|")
        for alpha in sorted({r["alpha"] for r in sweep}):
            aug = [r for r in sweep if r["alpha"] == alpha and r["method"] == "augflaim"]
            naive = [r for r in sweep if r["alpha"] == alpha and r["method"] == "naiveflaim"]
            print(
                f"| {alpha} | {fmt([r['workload_error'] for r in aug])} | "
                f"{fmt([r['workload_error'] for r in naive])} | "
                f"{fmt([r['auc'] for r in aug])} | {fmt([r['auc'] for r in naive])} | {len(aug)}+{len(naive)} |"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["table", "sweep", "report"])
    ap.add_argument("--seeds", type=int, default=3, help="repetitions per method (default 3)")
    ap.add_argument(
        "--methods",
        default="aim,distaim,augflaim,naiveflaim",
        help="comma-separated subset of aim,distaim,augflaim,naiveflaim",
    )
    ap.add_argument("--alphas", default="0.1,0.5,1", help="Dirichlet concentrations for the sweep")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--out", default=str(HERE / "out"))
    args = ap.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        ap.error(f"unknown method {unknown[0]}")
    if args.what == "table":
        run(args, "cluster", [None], methods)
    elif args.what == "sweep":
        run(
            args,
            "dirichlet",
            [float(a) for a in args.alphas.split(",")],
            [m for m in methods if m in ("augflaim", "naiveflaim")] or ["augflaim", "naiveflaim"],
        )
    else:
        report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
