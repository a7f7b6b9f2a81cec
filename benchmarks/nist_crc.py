"""Our methods beside the NIST CRC Data and Metrics Archive's published entries on NIST's ACS
excerpts (MA and TX 2019): SDNist v2.3's k-marginal score (``evaluate --kmarginal``, 0 to 1000,
higher is better) with its pMSE and unique exact matches, the share of rows that break its age and
housing consistency rules (``acs_bins.RULES``), and the train-on-synthetic, test-on-real ROC-AUC of
a rare label. The same measures of a random 10% of the real rows (three draws) are the reference.

Every release spends ``epsilon`` in all, as the archive's entries state theirs: ``--draft-share`` of
it (default 0.1) on a DP schema draft of the silos' skewed numeric columns (``schema draft --dp
--edges quantiles --exclude`` every other column: their cut points), the rest on the release, each at half of ``delta``
(basic composition). Categories, bounds and coded values (atoms: POVPIP's 501, WGTP's and NOC's 0)
come from the public data dictionary, with the atoms the draft finds (DENSITY's, one per PUMA); a
skewed column whose bounds the draft does not find gets 32 bins on a log scale. SDNist's consistency
rules are declared as public constraints (``--no-rules`` leaves them out), and the bins they divide
are cut where their ranges end (``schema cut-at-rules``). The silos are the
excerpt's PUMAs: one file per PUMA, named after it and without the PUMA column, which the federated
methods restore with ``--silo-column PUMA`` (each silo's name is its rows' PUMA); central AIM pools
the rows with their PUMA. AIM, DistAIM and FLAIM declare the
metric's own workload (every pair of the other columns together with PUMA); ``aim+target`` also
names the label (``--target``), as does ``fedtda+target``. Fed-TDA's copula models no atoms, so its
releases use the schema without them. TSTR: a gradient-boosted tree trained
on the synthetic rows scores every real row (which the release saw too; a fifth of TX's rows holds
about 55 positives of DEAR, too few for an AUC to within 0.05); ``real`` is the same tree cross-fitted
on the real rows (each fifth scored by a tree trained on the other four), so both AUCs are over the
same rows, and the gap between them has a paired bootstrap standard error (rows drawn again, 200
times). The 10% subsample's tree scores the rows outside it.

    python benchmarks/nist_crc.py --states ma tx --epsilons 1 10 --seeds 3

The excerpts are read from ``../shared/data/nist-acs-excerpts`` beside the checkout (``--excerpts``);
the national excerpt (``--states national``, 27,253 rows from 20 PUMAs) is not there, and
``--national`` names its CSV (``NATIONAL``). INDP is left out (271 industry codes; the k-marginal ignores it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from acs_bins import (  # noqa: E402
    EXCERPTS,
    SHAPED,
    SKIP,
    dictionary_schema,
    evaluated,
    inconsistency_rates,
    run,
    with_rules,
)

import privsyn_fed as pf  # noqa: E402
from privsyn_fed.evaluation import encode, label_auc, label_probabilities  # noqa: E402
from privsyn_fed.schema import cut_at_rules  # noqa: E402

#: The archive's published k-marginal scores (bundle 1.0, all features) for the same excerpt and epsilon.
PUBLISHED = {
    ("ma", 1.0): "Private-GSD 717",
    ("ma", 10.0): "Private-GSD 876",
    ("tx", 1.0): "Private-GSD 733",
    ("tx", 10.0): "Private-GSD 867",
    ("national", 1.0): "MWEM+PGM 847",
}
METHODS = ("aim", "aim+target", "distaim", "flaim", "fedtda", "fedtda+target", "independent")
GRAPHICAL = ("aim", "aim+target", "distaim", "flaim")
#: Where the national excerpt (27,253 rows, 20 PUMAs; not in ``shared/data``) is published.
NATIONAL = (
    "national2019.csv from the usnistgov/SDNist repository, "
    "'nist community data excerpts/ACSDataExcerpts/national/' (a Git LFS file in its latest commits)"
)


def shaped_schema(folder: Path, state: str, silos: list[Path], epsilon: float, delta: float, work: Path) -> dict:
    """The dictionary's schema with the cut points a DP draft of the silos proposes for the skewed
    numeric columns (``SHAPED``)."""
    schema = dictionary_schema(folder, state)
    out = work / "draft.json"
    header = silos[0].read_text().split("\n", 1)[0].split(",")
    unread = [a for name in header if name not in SHAPED for a in ("--exclude", name)]  # the draft reads only those
    run(
        "schema", "draft", *map(str, silos), "--out", str(out), "--dp", f"{epsilon:.6g}", "--delta", f"{delta:.3g}",
        "--bins", "32", "--edges", "quantiles", "--missing-value", "N", "--leave-unfound", "--force", *unread,
    )  # fmt: skip
    drafted = {c["name"]: c for c in json.loads(out.read_text())["columns"]}
    for c in schema["columns"]:
        if c["type"] != "numeric":
            continue
        found = drafted.get(c["name"], {})
        cuts = found.get("edges")
        if c["name"] in SHAPED and cuts:
            c["edges"] = [e for e in cuts if c["lower"] < e < c["upper"] or c.get("integer") and e == c["upper"]]
        else:
            c["bins"] = 32
            if c["name"] in SHAPED:  # bounds not found: equal widths on a log scale, a public choice
                c["scale"] = "log"
        atoms = set(c.get("atoms", [])) | {a for a in found.get("atoms", []) if c["lower"] <= a <= c["upper"]}
        if atoms:
            c["atoms"] = sorted(atoms)
    return schema


def release(method: str, schema: Path, silos: list[Path], pooled: Path, epsilon: float, delta: float,
            label: str, workload: Path, out: Path, share: float | None = None) -> float:  # fmt: skip
    """One release (a ``+target`` method's at the label's budget ``share``, None: the default); its seconds."""
    name = method.split("+")[0]
    if name == "fedtda":  # its copula models no atoms: they are left out, and their values fall in their bins
        doc = json.loads(schema.read_text())
        doc["columns"] = [{k: v for k, v in c.items() if k != "atoms"} for c in doc["columns"]]
        schema = schema.with_name("schema-without-atoms.json")
        schema.write_text(json.dumps(doc))
    inputs = [pooled] if name == "aim" else silos
    extra = ["--workload", str(workload)] if method in GRAPHICAL else []
    extra += ["--target", label] if method.endswith("+target") else []
    extra += ["--target-share", f"{share:g}"] if method.endswith("+target") and share is not None else []
    extra += ["--silo-column", "PUMA"] if name != "aim" else []
    start = time.monotonic()
    run(
        "synth", "--method", name, "--schema", str(schema), *[a for s in inputs for a in ("--silo", str(s))],
        "--epsilon", f"{epsilon:.6g}", "--delta", f"{delta:.3g}", "--out", str(out), "--quiet", "--force", *extra,
    )  # fmt: skip
    return time.monotonic() - start


def cross_fitted(codes: np.ndarray, schema: pf.Schema, label: str, folds: int = 5) -> np.ndarray:
    """Each real row's label probabilities from a tree trained on the other folds (seeded folds)."""
    fold = np.random.default_rng(0).integers(0, folds, len(codes))
    out = np.zeros((len(codes), schema.shape[schema.names.index(label)]))
    for f in range(folds):
        out[fold == f] = label_probabilities(codes[fold != f], codes[fold == f], schema, label)
    return out


def gap_se(y: np.ndarray, real: np.ndarray, syn: np.ndarray, draws: int = 200) -> float:
    """Paired bootstrap standard error of ``AUC(real) - AUC(syn)`` over the rows scored by both."""
    rng = np.random.default_rng(0)
    gaps = []
    for _ in range(draws):
        k = rng.integers(0, len(y), len(y))
        a, b = label_auc(y[k], real[k]), label_auc(y[k], syn[k])
        if a is not None and b is not None:
            gaps.append(a - b)
    return float(np.std(gaps, ddof=1)) if len(gaps) > 1 else float("nan")


def measured(pooled: Path, out: Path, schema_path: Path, schema_dict: dict, codes, real_proba, schema, label: str,
             scored: np.ndarray | None = None) -> dict:  # fmt: skip
    """One table's measures against the real rows: k-marginal, pMSE, unique exact matches (share of
    the unique real rows), inconsistency rates, TSTR AUC over the real rows ``scored`` (all: None)
    and its gap to the cross-fitted real AUC with the gap's standard error."""
    ev = evaluated(pooled, out, schema_path, out.with_suffix(".json"))
    syn = pd.read_csv(out, dtype=str, keep_default_na=False)
    rates = inconsistency_rates(schema_dict, syn)
    scored = np.ones(len(codes), dtype=bool) if scored is None else scored
    y = codes[scored, schema.names.index(label)]
    proba = label_probabilities(encode(syn, schema, "synthetic"), codes[scored], schema, label)
    auc, real_auc = label_auc(y, proba), label_auc(y, real_proba[scored])
    gap = float("nan") if auc is None or real_auc is None else real_auc - auc
    return {
        "kmarginal": ev["kmarginal"]["score"], "pmse": ev["pmse"]["score"],
        "exact": ev["unique_exact_matches"]["matched_share"], "age": rates["age"], "housing": rates["housing"],
        "auc": float("nan") if auc is None else auc, "auc_gap": gap,
        "auc_gap_se": gap_se(y, real_proba[scored], proba),
    }  # fmt: skip


def summary(name: str, rows: list[dict], seconds: list[float] | None) -> str:
    """One line: each measure's mean (and standard deviation across the rows)."""
    sd = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0  # noqa: E731
    col = lambda k: [r[k] for r in rows]  # noqa: E731
    return (
        f"  {name:12s} k-marginal {statistics.mean(col('kmarginal')):6.1f} +- {sd(col('kmarginal')):4.1f}  "
        f"age {statistics.mean(col('age')):6.2%}  housing {statistics.mean(col('housing')):6.2%}  "
        f"pMSE {statistics.mean(col('pmse')):.4f}  exact {statistics.mean(col('exact')):6.2%}  "
        f"AUC {statistics.mean(col('auc')):.3f} +- {sd(col('auc')):.3f} "
        f"(gap {statistics.mean(col('auc_gap')):.3f}, se {statistics.mean(col('auc_gap_se')):.3f})"
        + ("" if seconds is None else f"  {statistics.mean(seconds):5.0f} s ({min(seconds):.0f} to {max(seconds):.0f})")
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--states", nargs="+", choices=("ma", "tx", "national"), default=["ma", "tx"])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 10.0], help="epsilon in all (draft + release)")
    ap.add_argument("--delta", type=float, default=1e-5, help="delta in all (default 1e-5, as the archive's entries)")
    ap.add_argument("--draft-share", type=float, default=0.1, help="share of epsilon the DP schema draft spends")
    ap.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, of {', '.join(METHODS)}")
    ap.add_argument("--label", default="DEAR", help="the rare label of the TSTR AUC (and of aim+target)")
    ap.add_argument(
        "--target-shares",
        nargs="+",
        type=float,
        default=[None],
        help="the +target methods' --target-share, each on the same draft (default: the methods' own)",
    )
    ap.add_argument("--seeds", type=int, default=3, help="releases per method (unseeded noise; mean and sd reported)")
    ap.add_argument("--no-rules", action="store_true", help="leave SDNist's consistency rules out of the schema")
    ap.add_argument("--excerpts", type=Path, default=EXCERPTS)
    ap.add_argument("--national", type=Path, help=f"the national excerpt's CSV (``--states national``; {NATIONAL})")
    args = ap.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        ap.error(f"unknown method {unknown[0]!r}; choose among {', '.join(METHODS)}")
    rows = []
    for state in args.states:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            if state == "national" and not (args.national and args.national.is_file()):
                ap.error(f"--states national needs --national PATH: {NATIONAL}")
            source = args.national if state == "national" else args.excerpts / f"{state}2019.csv"
            real = pd.read_csv(source, dtype=str).drop(columns=list(SKIP))
            pooled = work / "real.csv"
            real.to_csv(pooled, index=False)
            silos = []
            for puma, part in real.groupby("PUMA"):  # the silo's name is its PUMA, not a column of its file
                silos.append(work / f"{puma}.csv")
                part.drop(columns=["PUMA"]).to_csv(silos[-1], index=False)
            (work / "workload.json").write_text(json.dumps([["PUMA", "*", "*"]]))
            for epsilon in args.epsilons:
                draft_eps, release_eps = epsilon * args.draft_share, epsilon * (1 - args.draft_share)
                schema_dict = shaped_schema(args.excerpts, state, silos, draft_eps, args.delta / 2, work)
                if not args.no_rules:  # the rules, and the bins cut where their ranges end (`schema cut-at-rules`)
                    schema_dict = cut_at_rules(pf.Schema.from_dict(with_rules(schema_dict))).to_dict()
                schema_path = work / "schema.json"
                schema_path.write_text(json.dumps(schema_dict))
                schema = pf.Schema.from_dict(schema_dict)
                codes = encode(real, schema, "real")
                real_proba = cross_fitted(codes, schema, args.label)
                real_auc = label_auc(codes[:, schema.names.index(args.label)], real_proba)
                print(f"{state.upper()} epsilon {epsilon:g}: {len(real)} rows, {len(silos)} PUMA silos; "
                      f"real rows' cross-fitted AUC ({args.label}) {real_auc:.3f}", flush=True)  # fmt: skip
                tenth = []
                for s in range(3):  # the reference: a random 10% of the real rows
                    out = work / f"subsample-{s}.csv"
                    part = real.sample(frac=0.1, random_state=s)
                    part.to_csv(out, index=False)
                    outside = ~real.index.isin(part.index)
                    tenth.append(
                        measured(pooled, out, schema_path, schema_dict, codes, real_proba, schema, args.label, outside)
                    )
                print(summary("10% of rows", tenth, None), flush=True)
                rows.append({"state": state, "epsilon": epsilon, "method": "subsample", "measures": tenth})
                runs = [
                    (m, share) for m in methods for share in (args.target_shares if m.endswith("+target") else [None])
                ]
                for method, share in runs:
                    name = method if share is None else f"{method}@{share:g}"
                    measures, seconds = [], []
                    for s in range(args.seeds):
                        out = work / f"{name}-{s}.csv"
                        seconds.append(
                            release(
                                method,
                                schema_path,
                                silos,
                                pooled,
                                release_eps,
                                args.delta / 2,
                                args.label,
                                work / "workload.json",
                                out,
                                share,
                            )  # fmt: skip
                        )
                        measures.append(
                            measured(pooled, out, schema_path, schema_dict, codes, real_proba, schema, args.label)
                        )
                    rows.append({
                        "state": state, "epsilon": epsilon, "method": name, "measures": measures,
                        "seconds": seconds, "real_auc": real_auc, "published": PUBLISHED.get((state, epsilon), ""),
                    })  # fmt: skip
                    print(summary(name, measures, seconds), flush=True)
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
