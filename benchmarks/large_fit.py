"""The refits of an AIM release on a 20M-row silo: where their time goes and what would shorten it.

  capture     the measurements of a finished release, rebuilt for study: each ``marginal(...)``
              entry of its ledger (in order, with its round and sigma) counted again on the silo
              and given fresh Gaussian noise at the ledger's sigma (a benchmark of the fitter, not
              a release: its output never leaves this machine)
  steps       seconds per mirror-descent step of the model after round R: our numpy estimator,
              mbi's compiled one (float64) and mbi's MirrorDescent in float64 and in float32
  trajectory  the refit of round R warm-started from a 1,000-step fit of round R-1: every 100
              steps, the loss and how far the measured marginals are from their measurements in
              units of their expected noise (mean over measurements of ``|M(mu) - y|_1 /
              (sqrt(2/pi) sigma cells)``); with mbi's first step (``2 / (L N)``), with the step the
              previous refit ended on, and with mbi's accelerated estimators

Used for the "Where a 20M-row AIM release's time goes" table in benchmarks/README.md:

  python benchmarks/large_silos.py run --rows 20000000 --formats parquet --methods aim   # a ledger
  python benchmarks/large_fit.py capture --ledger L.ledger.json --silo out/large/adult-20000000.parquet
  python benchmarks/large_fit.py steps --round 24
  python benchmarks/large_fit.py trajectory --round 24
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "large"
CAPTURED = OUT / "measurements.pkl"
SCHEMA = OUT / "adult.schema.json"


def capture(ledger: Path, silo_path: Path, schema_path: Path) -> None:
    import privsyn_fed as pf
    from privsyn_fed.schema import Schema

    entries = json.loads(ledger.read_text())["entries"]
    schema = Schema.load(str(schema_path))
    silo = pf.Silo.load(str(silo_path), schema)
    names = [c.name for c in schema.columns]
    rng = np.random.default_rng(0)
    measured = []
    for e in entries:
        m = re.match(r"marginal\((.*)\)", e["query"])
        if m:
            clique = tuple(x.strip() for x in m.group(1).split(","))
            index = tuple(names.index(c) for c in clique)
            counts = silo.marginals([index])[index].astype(float)
            measured.append((clique, counts + rng.normal(0.0, e["sigma"], counts.shape), e["sigma"], e.get("round", 0)))
    CAPTURED.write_bytes(pickle.dumps({"names": names, "shape": schema.shape, "measurements": measured}))
    print(f"{len(measured)} measurements, rounds up to {max(r for *_, r in measured)}: {CAPTURED}")


def problem(round_: int):
    """The domain and the merged measurements up to round ``round_``."""
    from privsyn_fed.methods import pgm

    d = pickle.loads(CAPTURED.read_bytes())
    domain = pgm.make_domain(d["names"], d["shape"])
    return domain, pgm.merge_measurements([(c, y, s) for c, y, s, r in d["measurements"] if r <= round_])


def misfit(answers, measurements) -> float:
    """Mean over measurements of ``|M(mu) - y|_1 / (sqrt(2/pi) sigma cells)``, the model's answers
    ``M(mu)`` given in the measurements' order."""
    return float(
        np.mean(
            [
                np.abs(a - m.values).sum() / (math.sqrt(2 / math.pi) * m.stddev * m.values.size)
                for a, m in zip(answers, measurements)
            ]
        )
    )


def ours_per_step(round_: int, estimator: str, steps: int) -> str:
    from privsyn_fed.methods import pgm
    from privsyn_fed.methods.clique_tree import junction_tree_cells

    domain, ms = problem(round_)
    fitter = pgm.ModelFitter(domain, iters=steps, tol=None, numpy_cells=10**12 if estimator == "numpy" else 0)
    seconds = []
    for _ in range(2):  # the second fit compiles nothing new
        start = time.perf_counter()
        fitter.fit([(m.clique, m.values, m.stddev) for m in ms])
        seconds.append(time.perf_counter() - start)
    cells = junction_tree_cells(domain, [m.clique for m in ms])
    per_step = seconds[1] / steps * 1e3
    return f"{cells:,} cells, ours ({estimator}): {per_step:.1f} ms a step, first fit {seconds[0]:.1f} s"


def mbi_per_step(round_: int, precision: str, steps: int) -> str:
    import jax

    jax.config.update("jax_enable_x64", precision == "float64")
    import mbi
    from mbi import LinearMeasurement, estimation

    from privsyn_fed.methods.mirror import minimum_variance_total

    domain, ms = problem(round_)
    theirs = mbi.Domain(list(domain.attributes), list(domain.shape))
    dtype = np.float64 if precision == "float64" else np.float32
    lm = [LinearMeasurement(np.asarray(m.values, dtype=dtype), m.clique, stddev=float(m.stddev)) for m in ms]
    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        model = estimation.MirrorDescent().estimate(theirs, lm, iters=steps, known_total=minimum_variance_total(ms))
        marginals = {c: np.asarray(model.marginals[c].values) for c in model.marginals.cliques}
        seconds.append(time.perf_counter() - start)
    (OUT / f"marginals-{precision}.pkl").write_bytes(pickle.dumps(marginals))
    return f"mbi MirrorDescent ({precision}): {seconds[1] / steps * 1e3:.1f} ms a step"


def steps_report(round_: int, steps: int) -> None:
    for args in (["ours", "numpy"], ["ours", "compiled"], ["mbi", "float64"], ["mbi", "float32"]):
        cmd = [sys.executable, __file__, "_steps", *args, "--round", str(round_), "--steps", str(steps)]
        print(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip(), flush=True)
    a, b = (pickle.loads((OUT / f"marginals-{p}.pkl").read_bytes()) for p in ("float64", "float32"))
    worst = max(float(np.abs(a[k] - b[k].astype(float)).max()) for k in a)
    print(f"float32 against float64 after {steps} steps: at most {worst:.2f} rows apart in a cell")


def descend(plan, theta, total, alpha, steps, every, report):
    """Mirror descent with Armijo line search (``mirror.NumpyMirrorDescent``'s iterates) from
    ``theta`` and first step ``alpha``, reporting its marginals every ``every`` steps."""
    mu = plan.marginals(theta, total)
    loss, grad = plan.loss(mu)
    for k in range(1, steps):
        theta2 = theta - alpha * grad
        mu2 = plan.marginals(theta2, total)
        loss2, grad2 = plan.loss(mu2)
        if loss - loss2 >= 0.5 * alpha * float(grad @ (mu - mu2)):
            theta, mu, loss, grad, alpha = theta2, mu2, loss2, grad2, 1.01 * alpha
        else:
            alpha *= 0.5
        if (k + 1) % every == 0:
            report(k + 1, loss, mu)
    return theta, mu, alpha


def trajectory(round_: int) -> None:
    from privsyn_fed.methods import compiled, pgm
    from privsyn_fed.methods.graphical import FittedModel
    from privsyn_fed.methods.mirror import Plan, expanded_tables, lipschitz, minimum_variance_total

    def numpy_fit(ms, warm, alpha=None, label=""):
        total, plan = minimum_variance_total(ms), Plan(domain, ms)
        tables = expanded_tables(None if warm is None else warm.potentials, domain, plan.cliques)
        theta = plan.flatten([tables[c] for c in plan.cliques])
        first = 2.0 / (lipschitz(domain, ms) * total) if alpha is None else alpha
        ends = np.cumsum([m.values.size for m in ms])[:-1]
        points = []

        def report(k, loss, mu):
            points.append(f"{k}: {loss:.3g} / {misfit(np.split(plan._query(mu), ends), ms):.1f}")

        start = time.perf_counter()
        theta, mu, alpha = descend(plan, theta, total, first, 1000, 100, report)
        if label:
            seconds = time.perf_counter() - start
            print(f"{label} ({seconds:.0f} s); step: loss / misfit in noise units: {', '.join(points)}", flush=True)
        tables = dict(zip(plan.cliques, plan.tables(theta)))
        model = FittedModel(domain, list(plan.cliques), tables, dict(zip(plan.cliques, plan.tables(mu))), total)
        return model, alpha * lipschitz(domain, ms)

    domain, before = problem(round_ - 1)
    _, after = problem(round_)
    warm, scaled_alpha = numpy_fit(before, None)
    numpy_fit(after, warm, label="mbi's first step")
    numpy_fit(after, warm, alpha=scaled_alpha / lipschitz(domain, after), label="the previous refit's last step")

    from mbi import estimation

    for name in ("InteriorGradient", "DualAveraging"):
        for iters in (250, 1000):
            model = getattr(estimation, name)().estimate(
                compiled.mbi_domain(domain),
                compiled.mbi_measurements(after, domain),
                iters=iters,
                warm_start=compiled.expand_potentials(warm.potentials, domain, [m.clique for m in after]),
                known_total=minimum_variance_total(after),
            )
            read = pgm.MarginalReader(compiled.fitted(model))
            far = misfit([read(m.clique) for m in after], after)
            print(f"mbi {name}, {iters} steps from the same start: misfit {far:.1f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["capture", "steps", "trajectory", "_steps"])
    ap.add_argument("which", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--ledger", type=Path, help="the release's ledger (capture)")
    ap.add_argument("--silo", type=Path, default=OUT / "adult-20000000.parquet", help="its silo (capture)")
    ap.add_argument("--schema", type=Path, default=SCHEMA)
    ap.add_argument("--round", type=int, default=24, help="the round whose refit is studied")
    ap.add_argument("--steps", type=int, default=200, help="steps timed (steps)")
    args = ap.parse_args()
    if args.step == "capture":
        if args.ledger is None:
            ap.error("capture needs --ledger")
        capture(args.ledger, args.silo, args.schema)
    elif args.step == "steps":
        steps_report(args.round, args.steps)
    elif args.step == "_steps":
        kind, setting = args.which
        print((ours_per_step if kind == "ours" else mbi_per_step)(args.round, setting, args.steps))
    else:
        trajectory(args.round)
    return 0


if __name__ == "__main__":
    sys.exit(main())
