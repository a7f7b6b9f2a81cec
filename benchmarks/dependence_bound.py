"""What measuring dependence can buy on a small table: an oracle bound, not a release.

A release that finds dependence pays twice: for finding which pairs of columns depend on each
other, and for measuring them, both out of the budget its 1-ways would otherwise get. This script
removes the first cost. It reads the real rows to pick the pairs (so it is not private and never
a release) and then measures them as a release would, so its error bounds what any such release
can reach on the same rows and budget:

* ``independent``: every 1-way with the whole budget, ``sigma = sqrt(d / (2 rho))``, projected onto
  the histograms of the noisy total (the independent method's model).
* ``oracle K g s``: the 1-ways with ``1 - s`` of the budget; the ``K`` pairs of the maximum spanning
  forest of the pairs' true dependence (the L1 distance of the pair's table on ``g`` quantile groups
  a column, from the real 1-ways, to the product of its margins) measured on those groups with
  ``s``: ``sigma = sqrt(K / (2 s rho))`` each (a merged marginal has sensitivity 1). Fitted with
  the releases' estimator.
* ``free K g s``: the same pairs, but the 1-ways keep the whole budget (the pairs cost nothing of
  theirs: ``1 + s`` of the budget in all).

Each seed is one subsample (as ``small_tables.py`` draws it) and one draw of numpy Gaussian noise
per configuration; ``rho`` is epsilon's at delta 1e-9, less the planning total's 1%. The error is
``small_tables.py``'s: the 3-way workload error of as many synthetic rows as real ones. The
verdict compares with ``independent`` paired by seed, as ``small_tables.py`` does (``<`` when the
mean difference is below minus its standard deviation).

    python benchmarks/dependence_bound.py run --tables adult,credit,cps1988 --sizes 1000,3000 --seeds 10
    python benchmarks/dependence_bound.py report
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from small_tables import load, run_or_report, verdict  # noqa: E402

from privsyn_fed.accounting.conversions import epsilon_to_rho  # noqa: E402
from privsyn_fed.evaluation import encode, workload_error  # noqa: E402
from privsyn_fed.methods import core, pgm, sample_workload  # noqa: E402
from privsyn_fed.methods.allocation import TOTAL_SHARE  # noqa: E402
from privsyn_fed.methods.coarse import coarsen  # noqa: E402
from privsyn_fed.methods.dependence import dependence, quantile_starts, spanning_forest  # noqa: E402
from privsyn_fed.methods.independent import independent_model  # noqa: E402
from privsyn_fed.silo import marginal_counts  # noqa: E402

OUT = HERE / "out" / "dependence_bound.jsonl"
#: (kind, pairs, groups, share); pairs 0 means the whole forest (at most d - 1).
CONFIGS = [("independent", 0, 0, 0.0)] + [
    (kind, k, g, s)
    for kind, shares in (("oracle", (0.1, 0.2)), ("free", (0.1,)))
    for k in (3, 6, 0)
    for g in (2, 4, 8)
    for s in shares
]


def pair_table(codes: np.ndarray, shape: list[int], pair: tuple[int, int], starts) -> np.ndarray:
    i, j = pair
    table = marginal_counts(codes, shape, [i, j]).astype(float).reshape(shape[i], shape[j])
    return coarsen(table, (starts[i], starts[j]))


def release(codes, schema, rho: float, config, rng: np.random.Generator) -> np.ndarray:
    """One configuration's synthetic codes (module docstring)."""
    kind, k, groups, share = config
    names, shape = list(schema.names), list(schema.shape)
    d = len(names)
    ones = [marginal_counts(codes, shape, [j]).astype(float) for j in range(d)]
    sigma1 = math.sqrt(d / (2 * (1 - (share if kind == "oracle" else 0.0)) * rho))
    noisy = [o + rng.normal(0, sigma1, o.size) for o in ones]
    if kind == "independent":
        return independent_model(noisy, schema).tree.sample_codes(len(codes), rng, names)
    measurements: list[tuple] = [((names[j],), noisy[j], sigma1) for j in range(d)]
    # the releases' quantile groups and dependence score, on the real rows (noise 0: not private)
    starts = [quantile_starts(o, groups, o.sum()) for o in ones]
    pairs = list(combinations(range(d), 2))
    tables = {p: pair_table(codes, shape, p, starts) for p in pairs}
    forest = spanning_forest(pairs, [dependence(tables[p], 0.0) for p in pairs])
    chosen = forest[: k or len(forest)]
    sigma2 = math.sqrt(len(chosen) / (2 * share * rho))
    for i, j in chosen:
        y = tables[(i, j)].ravel()
        measurements.append(((names[i], names[j]), y + rng.normal(0, sigma2, y.size), sigma2, (starts[i], starts[j])))
    fitted = pgm.ModelFitter(pgm.make_domain(names, shape)).fit(measurements)
    return core.graphical_sampler(fitted, schema).tree.sample_codes(len(codes), rng, names)


def run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rho = epsilon_to_rho(args.epsilon, 1e-9) * (1 - TOTAL_SHARE)
    with out.open("a") as fh:
        for table in args.tables.split(","):
            full, schema = load(table)
            workload = sample_workload(len(schema.names), 3, 64, 0)
            for size in [int(s) for s in args.sizes.split(",")]:
                for seed in range(args.seeds):
                    order = np.random.default_rng(seed).permutation(len(full))
                    codes = encode(full.iloc[order[:size]].reset_index(drop=True), schema, "real")
                    for n, config in enumerate(CONFIGS):
                        syn = release(codes, schema, rho, config, np.random.default_rng([seed, n]))
                        kind, k, g, s = config
                        row = {"table": table, "rows": size, "epsilon": args.epsilon, "seed": seed, "kind": kind}
                        row |= {"pairs": k, "groups": g, "share": s}
                        row["error"] = workload_error(codes, syn, list(schema.shape), workload)
                        fh.write(json.dumps(row) + "\n")
                        fh.flush()
                    print(f"{table} {size} seed {seed}: done", flush=True)


def report(args: argparse.Namespace) -> None:
    rows = pd.DataFrame([json.loads(line) for line in Path(args.out).read_text().splitlines()])
    print("| table | rows | independent | best oracle (K pairs, g groups, share s) | best free | oracle `<` |")
    print("|---|---|---|---|---|---|")
    for (table, n), g in rows.groupby(["table", "rows"]):
        base = g[g.kind == "independent"].set_index("seed").error
        cells: dict[str, list[tuple[float, float, str, str]]] = {}
        for (kind, k, groups, share), c in g[g.kind != "independent"].groupby(["kind", "pairs", "groups", "share"]):
            own = c.set_index("seed").error
            diff = (own - base).dropna()
            label = f"{'all' if k == 0 else k}, {groups}, {share:g}"
            cells.setdefault(kind, []).append((diff.mean(), diff.std(ddof=1), label, verdict(own, base)))
        best = {kind: min(v) for kind, v in cells.items()}
        wins = sum(v == "<" for *_, v in cells["oracle"])
        text = {kind: f"{m:+.3f} +- {sd:.3f} {v} ({label})" for kind, (m, sd, label, v) in best.items()}
        print(
            f"| {table} | {int(n):,} | {base.mean():.3f} +- {base.std(ddof=1):.3f} | {text['oracle']} | "
            f"{text['free']} | {wins} of {len(cells['oracle'])} |"
        )


def main() -> None:
    options: dict[str, dict[str, Any]] = {
        "--tables": {"default": "adult,credit,cps1988"},
        "--sizes": {"default": "1000,3000"},
        "--epsilon": {"type": float, "default": 1.0},
        "--seeds": {"type": int, "default": 10},
    }
    run_or_report(__doc__ or "", OUT, options, run, report)


if __name__ == "__main__":
    main()
