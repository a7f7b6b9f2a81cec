"""How far a release's model is from its own measurements (``methods.fit_check``): the noise's
expectation at the truth (seeded), both warnings, and a FLAIM release over silos that differ,
which ``synth`` warns about, against DistAIM and AIM on the same rows, which it does not."""

import logging

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.cli import main
from privsyn_fed.methods.fit_check import FIT_ALARM, fit_against_independent, fit_warning, no_joint_warning

NAMES = ["a", "b", "c"]
SHAPE = {"a": 4, "b": 5, "c": 6}


def joint(rng) -> np.ndarray:
    """A dependent joint table of counts over a, b, c (about 30,000 rows)."""
    p = rng.dirichlet(np.full(4 * 5 * 6, 0.5)).reshape(4, 5, 6)
    return 30_000 * p


def reader(table: np.ndarray):
    """Marginals of ``table`` by column names, as a release's estimate gives them."""

    def estimate(clique):
        axes = tuple(i for i, n in enumerate(NAMES) if n not in clique)
        out = table.sum(axis=axes)
        order = [c for c in NAMES if c in clique]
        return np.transpose(out, [order.index(c) for c in clique])

    return estimate


def test_the_truth_is_as_far_from_noisy_measurements_as_the_noise_says():
    """Seeded: 200 noisy measurements of the true marginals; the truth's squared standardised
    distance to them is a chi-square with ``noise`` degrees of freedom (mean ``noise``, sd
    ``sqrt(2 noise)``), and the independent product is far further."""
    rng = np.random.default_rng(0)
    truth = joint(rng)
    estimate, measurements = reader(truth), []
    for k in range(200):
        clique = [("a", "b"), ("b", "c"), ("a", "b", "c"), ("c", "a")][k % 4]
        sigma = float(rng.uniform(2, 20))
        y = estimate(clique).ravel() + rng.normal(0, sigma, estimate(clique).size)
        measurements.append((clique, y, sigma))
    fit = fit_against_independent(estimate, measurements, NAMES)
    assert fit["measurements"] == 200 and fit["noise"] == 50 * (20 + 30 + 120 + 24)
    assert abs(fit["model"] - fit["noise"]) < 4 * np.sqrt(2 * fit["noise"])
    assert fit["independent"] > 10 * fit["noise"]
    assert fit_warning(fit) is None


def test_measurements_that_disagree_and_a_fit_worse_than_independent_are_warned_about():
    rng = np.random.default_rng(1)
    truth = joint(rng)
    estimate = reader(truth)
    other = reader(joint(rng))  # another table's marginals: they contradict the truth's
    measurements = [(("a", "b"), estimate(("a", "b")).ravel(), 1.0), (("a", "b"), other(("a", "b")).ravel(), 1.0)]
    fit = fit_against_independent(estimate, measurements, NAMES)
    assert fit["model"] >= FIT_ALARM * fit["noise"]
    assert "times further from the release's own 2 multi-way measurements" in fit_warning(fit)
    assert "--variant" not in fit_warning(fit)  # naive FLAIM's cause is named for naive FLAIM only
    assert "try --variant private" in fit_warning(fit, naive_sums=True)
    # far from its measurements but closer than the independent product: no advice to compare with it
    far = fit_warning({"measurements": 3, "model": 50.0, "independent": 500.0, "noise": 10.0})
    assert "5.0 times further" in far and "closer than the independent method's 50.0 times" in far
    assert "--baseline" not in far and "--final-iters" in far
    assert "try --variant private" in fit_warning(fit, naive_sums=True)
    # the truth's 1-ways, with the pair's dependence reflected: twice as far as the independent product
    bc = estimate(("b", "c"))
    product = np.multiply.outer(bc.sum(axis=1), bc.sum(axis=0)) / bc.sum()

    def reflected(clique):
        return 2 * product - bc if clique == ("b", "c") else estimate(clique)

    sigma = float(np.sqrt(((product - bc) ** 2).sum() / 10))  # the independent product at 10, the model at 40
    worse = fit_against_independent(reflected, [(("b", "c"), bc.ravel(), sigma)], NAMES)
    assert worse["noise"] == 30 and worse["independent"] == pytest.approx(10)
    assert worse["model"] == pytest.approx(40) and worse["model"] < FIT_ALARM * worse["noise"]
    assert "worse than the independent method would" in fit_warning(worse)
    assert "compare them with `privsyn-fed evaluate --baseline`" in fit_warning(worse)
    # within the sums' standard deviation (sqrt(60)) of the independent product: no warning
    assert fit_warning({**worse, "model": worse["independent"] + 7.0}) is None
    assert fit_warning({"measurements": 0, "model": 0.0, "independent": 0.0, "noise": 0.0}) is None


def federation(seed: int = 0) -> tuple[dict[str, pd.DataFrame], pf.Schema]:
    """Four silos whose columns relate differently (b follows a in two of them, not in the others)."""
    rng = np.random.default_rng(seed)
    frames = {}
    for k in range(4):
        n = 1500
        a = rng.integers(0, 4, n)
        b = (a + k) % 4 if k % 2 == 0 else rng.integers(0, 4, n)
        c = np.where(rng.random(n) < 0.8, (b + a) % 3, rng.integers(0, 3, n))
        frames[f"s{k}"] = pd.DataFrame({"a": a, "b": b, "c": c, "d": rng.integers(0, 5, n)}).astype(str)
    columns = [{"name": n, "type": "categorical", "categories": [str(v) for v in range(m)]} for n, m in
               [("a", 4), ("b", 4), ("c", 3), ("d", 5)]]  # fmt: skip
    columns.append({"name": "site", "type": "categorical", "categories": list(frames)})
    return frames, pf.Schema.from_dict({"columns": columns})


@pytest.mark.parametrize("method", ["distaim", "aim", "flaim"])
def test_releases_over_the_union_fit_their_measurements(method, caplog):
    """Private FLAIM sums each chosen marginal over every silo that chose, so it fits too."""
    frames, schema = federation()
    with caplog.at_level(logging.WARNING, logger="privsyn_fed"):
        result = pf.synthesize(frames, method, 1.0, 1e-9, schema=schema, seed=0, silo_column="site")
    fit = result.info["fit"]
    assert fit["measurements"] > 0 and fit["model"] < 1.5 * fit["noise"]
    assert not any("times further" in r.getMessage() for r in caplog.records)


def test_a_release_with_no_joint_measurement_is_said_to_be_the_independent_methods():
    """``joint`` counts the measurements over two or more columns, merged bins included; with none,
    the warning says the columns are independent, and names --max-rows-per-unit only for a unit of
    more than one row."""
    rng = np.random.default_rng(2)
    estimate = reader(joint(rng))
    oneways = [((n,), estimate((n,)).ravel(), 5.0) for n in NAMES]
    fit = fit_against_independent(estimate, oneways, NAMES)
    assert fit["joint"] == 0 and fit["measurements"] == 0
    message = no_joint_warning(fit, len(NAMES))
    assert message is not None and "independent of each other" in message and "max-rows-per-unit" not in message
    assert "--max-rows-per-unit" in no_joint_warning(fit, len(NAMES), unit_factor=8)
    assert "max-rows-per-unit" not in no_joint_warning(fit, len(NAMES), unit_factor=1)  # one row a unit already
    assert no_joint_warning(fit, 1) is None  # one column: nothing to depend on
    merged = (("a", "b"), estimate(("a", "b")).ravel()[:4], 5.0, ((0, 2), (0, 3)))
    assert fit_against_independent(estimate, [*oneways, merged], NAMES)["joint"] == 1
    assert no_joint_warning(fit_against_independent(estimate, [*oneways, merged], NAMES), len(NAMES)) is None


def test_synth_says_when_its_budget_ran_out_at_the_one_ways(tmp_path, capsys):
    """A panel of 300 people with 8 rows each, every row kept (--max-rows-per-unit 8): at epsilon
    0.3 the budget over eight-fold sensitivities measures the 1-ways only, and synth says the
    columns are independent; the same rows without a unit at epsilon 4 leave room for rounds, and
    it does not."""
    rng = np.random.default_rng(3)
    person = np.repeat(np.arange(300), 8)
    a = rng.integers(0, 4, person.size)
    frame = pd.DataFrame({"id": person, "a": a, "b": (a + rng.integers(0, 2, person.size)) % 4, "c": a % 3})
    frame.astype(str).to_csv(tmp_path / "panel.csv", index=False)
    columns = [{"name": n, "type": "categorical", "categories": [str(v) for v in range(m)]} for n, m in
               [("a", 4), ("b", 4), ("c", 3)]]  # fmt: skip
    pf.Schema.from_dict({"columns": columns}).save(tmp_path / "schema.json")
    args = [
        "synth",
        "--method",
        "aim",
        "--schema",
        str(tmp_path / "schema.json"),
        "--silo",
        str(tmp_path / "panel.csv"),
    ]
    args += ["--delta", "1e-9", "--seed", "0", "--out", str(tmp_path / "out.csv"), "--force"]
    assert main([*args, "--epsilon", "0.3", "--privacy-unit", "id", "--max-rows-per-unit", "8"]) == 0
    err = capsys.readouterr().err
    assert "0 rounds" in err and "the synthetic columns are independent of each other" in err
    assert "--max-rows-per-unit" in err
    assert main([*args, "--epsilon", "4"]) == 0
    err = capsys.readouterr().err
    assert "0 rounds" not in err and "independent of each other" not in err


def test_synth_warns_about_naive_flaim_over_silos_that_differ(tmp_path, capsys):
    """Naive FLAIM sums a marginal over the silos that chose it, scaled to the union: biased here."""
    frames, schema = federation()
    schema.save(tmp_path / "schema.json")
    silos = []
    for name, frame in frames.items():
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
        silos += ["--silo", str(tmp_path / f"{name}.csv")]
    args = ["synth", "--method", "flaim", "--variant", "naive", "--schema", str(tmp_path / "schema.json"), *silos]
    args += ["--silo-column", "site", "--rounds", "7"]
    code = main([*args, "--epsilon", "1", "--delta", "1e-9", "--seed", "0", "--out", str(tmp_path / "out.csv")])
    err = capsys.readouterr().err
    assert code == 0 and (tmp_path / "out.csv").exists()
    assert "times further from the release's own" in err and "try --variant private or --method distaim" in err


class _Counted:
    """A ``pgm.ModelFitter`` that records the steps each fit was given."""

    def __init__(self, fitter):
        self.fitter, self.calls = fitter, []

    def __getattr__(self, name):
        return getattr(self.fitter, name)

    def fit(self, measurements, iters=None):
        self.calls.append(iters)
        return self.fitter.fit(measurements, iters)


def _fitted(measurements, iters):
    from privsyn_fed.methods import pgm

    fitter = pgm.ModelFitter(pgm.make_domain(NAMES, [SHAPE[n] for n in NAMES]), iters=iters, tol=None)
    fitter.fit(measurements)
    return _Counted(fitter)


def _measured(table, cliques, sigma, rng):
    estimate = reader(table)
    return [(c, estimate(c).ravel() + rng.normal(0, sigma, estimate(c).size), sigma) for c in cliques]


class _Log:
    def __init__(self):
        self.lines = []

    def log(self, message):
        self.lines.append(message)


def test_the_final_fit_runs_only_where_the_last_refit_stopped_far_and_brings_the_model_closer():
    """Seeded. Three 2-ways of a 30,000-row table at sigma 1 (millions of rows' precision): 5 steps
    leave the model far from them, and the final fit takes it to within ``FIT_ALARM`` times the
    noise, in blocks of the fitter's steps, never more than asked; a model already near its
    measurements is returned as it is, with no step taken."""
    from privsyn_fed.methods import pgm
    from privsyn_fed.methods.core import final_fit

    rng = np.random.default_rng(3)
    measurements = _measured(joint(rng), [("a", "b"), ("b", "c"), ("a", "c")], 1.0, rng)
    short = _fitted(measurements, iters=5)
    far = fit_against_independent(pgm.MarginalReader(short.model), measurements, NAMES)
    assert far["model"] >= FIT_ALARM * far["noise"]
    log = _Log()
    model, estimate, fit = final_fit(short, measurements, NAMES, 2000, log)
    assert fit["model"] < far["model"] / 10
    assert short.calls and all(c == 5 for c in short.calls) and 5 * len(short.calls) <= 2000
    assert fit == fit_against_independent(estimate, measurements, NAMES) and model is short.model
    assert "final fit: the model is" in log.lines[0]

    capped = _fitted(measurements, iters=5)
    final_fit(capped, measurements, NAMES, 7, _Log())
    assert capped.calls == [5, 2]

    loose = _measured(joint(rng), [("a", "b"), ("b", "c")], 30.0, rng)
    near, log = _fitted(loose, iters=500), _Log()
    before = near.model
    model, _, fit = final_fit(near, loose, NAMES, 1000, log)
    assert model is before and near.calls == [] and log.lines == []
    assert fit["model"] < FIT_ALARM * fit["noise"]


def test_the_final_fit_stops_when_more_steps_do_not_bring_the_model_closer():
    """Seeded. Two tables' 2-ways over the same pair at sigma 1 contradict each other: no model fits
    both, so a block that barely moves the fit ends the final fit long before its 5,000 steps."""
    from privsyn_fed.methods.core import final_fit

    rng = np.random.default_rng(4)
    measurements = _measured(joint(rng), [("a", "b"), ("b", "c")], 1.0, rng)
    measurements += _measured(joint(rng), [("a", "c"), ("a", "b", "c")], 1.0, rng)
    fitter = _fitted(measurements, iters=200)
    _, _, fit = final_fit(fitter, measurements, NAMES, 5000, _Log())
    assert fit["model"] >= FIT_ALARM * fit["noise"]
    assert 1 <= len(fitter.calls) < 5000 // 200
