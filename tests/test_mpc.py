"""Secure computation: real party processes (CrypTen over the TLS mesh on loopback) and the dealer."""

from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privsyn_fed as pf
from privsyn_fed.accounting import Accountant
from privsyn_fed.audit import audit_ledger
from privsyn_fed.mechanisms import pooled_exponential_mechanism
from privsyn_fed.methods.core import Problem
from privsyn_fed.mpc import secure
from privsyn_fed.mpc.launch import coordinator, local_federation
from privsyn_fed.mpc.noise import discrete_gaussian, rounded_gumbel, rounded_gumbel_pmf
from privsyn_fed.silo import MarginalsQuery

from .conftest import (
    CLI,
    SCHEMA,
    assert_audit_objects_only_to_the_seed,
    assert_one_line_error,
    finish,
    killed_at_exit,
    make_frame,
    run_cli,
    start,
    start_dealer,
    start_party,
    synth_argv,
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mpc")
    (tmp / "schema.json").write_text(json.dumps(SCHEMA))
    paths = []
    for k, n in enumerate([400, 300, 300]):
        paths.append(tmp / f"silo{k}.csv")
        make_frame(n, seed=10 + k).to_csv(paths[-1], index=False)
    return tmp, tmp / "schema.json", paths


@pytest.fixture(scope="module")
def world(files):
    """Three silo parties and the dealer, for the whole module; party 0 is this process."""
    _, schema_path, paths = files
    before = _parties()
    # the parties wait for party 0 while the tests between this module's uses of the world run (minutes on a
    # busy machine): the default timeout, not a shorter one
    with coordinator(schema_path, paths, timeout_s=600, checks=True) as agg:  # exact sums for the checks below
        yield agg
    assert _parties() - before == set(), "party processes were left behind"


def _parties() -> set[int]:
    """Live party and dealer processes started from this test process: those that inherited its
    ``PYTEST_XDIST_WORKER`` (none when the tests run in one process), orphans included, so that
    the parties of tests running beside it in another worker are not counted."""
    return {
        pid
        for pid, _, state, cmd in _processes()
        if state != "Z"
        and "privsyn_fed" in cmd
        and ("mpc-party" in cmd or "mpc-dealer" in cmd)
        and _worker(pid) == os.environ.get("PYTEST_XDIST_WORKER", "")
    }


def _left_behind(before: set[int], wait: float = 30.0) -> set[int]:
    """The party processes that are not in ``before`` once those of the run just ended have had up to
    ``wait`` seconds to notice and stop on their own (longer on a busy machine)."""
    deadline = time.monotonic() + wait
    while _parties() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    return _parties() - before


def _worker(pid: int) -> str | None:
    """The ``PYTEST_XDIST_WORKER`` a process inherited ("" if none; None if it has gone)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            names = dict(v.partition(b"=")[::2] for v in fh.read().split(b"\0") if v)
    except OSError:
        return None
    return names.get(b"PYTEST_XDIST_WORKER", b"").decode()


def _processes():
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            yield int(entry), int(fields[1]), fields[0], cmd


def _plain(paths, schema_path, query):
    schema = pf.Schema.load(schema_path)
    return sum(query(pf.Silo.from_csv(p, schema)) for p in paths)


def test_three_party_secure_sum_is_exact_and_a_share_hides_it(world, files):
    _, schema_path, paths = files
    query = MarginalsQuery(((0, 2), (1, 3, 4), ()))
    share, opened = world.exact_sum_and_share_for_checks(query, world.silo_names)
    expected = _plain(paths, schema_path, query)
    assert opened.dtype == np.int64 and np.array_equal(opened, expected)
    assert not np.array_equal(share, expected)
    # a share is a uniform ring element: its top bit is a fair coin, whatever the counts are (two-sided
    # binomial test at level 1e-6: the unseeded shares fail it once in a million runs)
    from scipy.stats import binomtest

    assert binomtest(int(np.sum(share < 0)), share.size, 0.5).pvalue > 1e-6
    # sums over a subset of the silos are exact too
    part = world.open_exact_sum_for_checks(query, world.silo_names[1:], label="two silos")
    assert np.array_equal(part, _plain(paths[1:], schema_path, query))


def _discrete_gaussian_sum_pmf(sigma: float, parties: int, k: np.ndarray) -> np.ndarray:
    """The pmf of the sum of ``parties`` independent ``N_Z(0, sigma^2)`` on the integers ``k``."""
    one = np.exp(-(k.astype(float) ** 2) / (2 * sigma**2))
    one /= one.sum()
    total = one
    for _ in range(parties - 1):
        total = np.convolve(total, one)
    mid, half = len(total) // 2, len(k) // 2
    return total[mid - half : mid + half + 1]


def test_noise_added_inside_mpc_is_the_sum_of_every_partys_discrete_gaussian(world, files):
    """Each of the 3 parties adds its own N_Z(0, sigma^2): the opened noise is their sum (variance
    3 sigma^2, and the convolution's shape and tails), not one discrete Gaussian."""
    _, schema_path, paths = files
    query = MarginalsQuery(((0, 1, 2, 3, 4),))  # 8*6*2*4*2 = 768 cells
    exact = _plain(paths, schema_path, query)
    sigma, parties = 7.0, len(world.silo_names)
    noise = np.concatenate(
        [
            world.noisy_sum(query, world.silo_names, sigma=sigma, noise=None, round_index=0, label="t") - exact
            for _ in range(4)
        ]
    )
    n, total_var = len(noise), parties * sigma**2
    var = float(np.mean(noise.astype(float) ** 2))
    lo, hi = stats.chi2.ppf([1e-4, 1 - 1e-4], n) * total_var / n
    assert lo < var < hi
    # the test has power: one party's noise alone (variance sigma^2) is far outside the band
    assert not lo < sigma**2 < hi
    k = np.arange(-150, 151)
    pmf = _discrete_gaussian_sum_pmf(sigma, parties, k)
    sd = math.sqrt(total_var)
    tail = pmf[np.abs(k) > 2.5 * sd].sum()
    assert stats.binomtest(int(np.sum(np.abs(noise) > 2.5 * sd)), n, tail).pvalue > 1e-4
    edges = [-np.inf, -2.5 * sd, -1.5 * sd, -0.5 * sd, 0.5 * sd, 1.5 * sd, 2.5 * sd, np.inf]
    observed = np.histogram(noise, bins=edges)[0]
    expected = np.array([pmf[(k >= a) & (k < b)].sum() for a, b in zip(edges[:-1], edges[1:])]) * n
    assert stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue > 1e-4


def _summed_gumbel_selection(u: np.ndarray, scale: float, parties: int) -> np.ndarray:
    """``P[argmax_r u_r + N_r = r]`` for ``N_r`` the sum of ``parties`` independent Gumbels of scale
    ``scale`` (numerically: the density and CDF of the sum on a fine grid)."""
    step = 0.002
    x = np.arange(-12.0, 40.0, step)
    g = np.exp(-x - np.exp(-x)) * step
    density = g
    for _ in range(parties - 1):
        density = np.convolve(density, g)
    grid = np.arange(len(density)) * step + parties * x[0]
    cdf = np.cumsum(density)
    z = (u - u.max()) / scale
    out = []
    for r in range(len(u)):
        others = np.ones_like(grid)
        for s_ in range(len(u)):
            if s_ != r:
                others *= np.interp(grid + z[r] - z[s_], grid, cdf, left=0.0, right=1.0)
        out.append(float(np.sum(density * others)))
    p = np.array(out)
    return p / p.sum()


def test_secure_select_sums_the_gumbels_of_parties_0_to_t(world, files):
    """Chi-square of secure selections against the noisy max with the sum of t + 1 = 3 parties'
    Gumbels (the world's default threshold t = 2); charged as one exponential mechanism, eps^2/8,
    with the rounding slack covered."""
    _, schema_path, paths = files
    schema = pf.Schema.load(schema_path)
    prob = Problem.build(schema.names, schema.shape, [(0,), (1,), (2,), (3,), (4,)])
    pool = world.pool({q: prob.columns(q) for q in prob.candidates})
    pool.add(world.silo_names, round_index=1)
    plain_pool = _plain(paths, schema_path, pool.query)
    uniform = {q: np.full(prob.cells(q), 1.0 / prob.cells(q)) for q in prob.candidates}
    arrays = pool.storage.select_arrays(pool, prob.candidates, uniform, sigma=5.0)
    u = secure.integer_scores(plain_pool, **arrays)
    # an epsilon that spreads the choice over several candidates (public: computed from the test data)
    span = float(np.sort(u)[-1] - np.sort(u)[-3])
    eps = 4 * 2.0 * 2**secure.SCORE_BITS / span
    acc = Accountant(1000.0, 1e-9, "distaim")  # the largest budget; the draws need a big one
    draws = 3000
    picks = pooled_exponential_mechanism(
        acc,
        pool,
        None,
        prob.candidates,
        uniform,
        sigma=5.0,
        epsilon=eps,
        sensitivity=2.0,
        round_index=1,
        query="t",
        draws=draws,
    )
    e = acc.entries[-1]
    scale = e["fixed_point"]["gumbel_scale_grid_units"]
    assert world.parties_noise.selection_parties == 3
    p = _summed_gumbel_selection(u.astype(float), scale, 3)
    keys = list(prob.candidates)
    observed = np.array([picks.count(q) for q in keys])
    big = p * draws >= 5
    obs = np.append(observed[big], observed[~big].sum())
    exp_ = np.append(p[big], p[~big].sum()) * draws
    keep = exp_ > 0
    assert stats.chisquare(obs[keep], exp_[keep]).pvalue > 1e-3
    # the test has power: the same draws reject one Gumbel (a single exponential mechanism)
    q = _summed_gumbel_selection(u.astype(float), scale, 1)
    assert stats.chisquare(observed, q * draws).pvalue < 1e-3
    # charged as the planned exponential mechanism; the sampling epsilon covers the rounding slack
    assert e["where"] == "mpc" and math.isclose(e["epsilon"], eps) and math.isclose(e["rho"], eps**2 / 8)
    assert e["distributed"] == {"parties": 3, "collusion": 2} and e["noise_from"].startswith("parties")
    assert e["fixed_point"]["epsilon_sampled"] + e["fixed_point"]["rounding_slack"] <= eps * (1 + 1e-12)


def test_real_valued_sums_are_exact_to_the_grid_and_fedtda_runs_on_shares(world, files):
    """Fed-TDA's second moments travel as a declared query with its encoding; the opened sum is
    the plaintext sum to within one grid step per party, and a whole Fed-TDA release over the
    parties charges the rounding in its sensitivity."""
    from privsyn_fed.mpc.aggregator import REAL_BITS
    from privsyn_fed.silo import ICDM, Encoding, NumericHistogramQuery, SecondMomentsQuery

    _, schema_path, paths = files
    schema = pf.Schema.load(schema_path)
    rng = np.random.default_rng(2)
    icdm = [ICDM(rng.dirichlet(np.ones(n))) for n in schema.shape]
    query = SecondMomentsQuery(Encoding(schema, icdm, [None] * len(schema.columns), 3.0), seed=7)
    opened = world.open_exact_sum_for_checks(query, world.silo_names, label="t")
    assert np.allclose(opened, _plain(paths, schema_path, query), rtol=0, atol=3 * 2.0**-REAL_BITS)
    hist = NumericHistogramQuery(1, 4)
    assert np.array_equal(
        world.open_exact_sum_for_checks(hist, world.silo_names, label="t"), _plain(paths, schema_path, hist)
    )

    result = pf.api.synthesize_over(world, "fedtda", 1.0, 1e-9, seed=4)
    assert len(result.data) > 0 and list(result.data.columns) == schema.names
    entries = result.ledger["entries"]
    assert all(e["where"] == "mpc" for e in entries)
    moments = entries[-1]
    assert moments["fixed_point"]["rounding_l2"] > 0
    assert math.isclose(
        moments["sensitivity_l2"], moments["fixed_point"]["sensitivity_planned"] + moments["fixed_point"]["rounding_l2"]
    )
    assert math.isclose(result.ledger["rho_spent"], result.ledger["rho_budget"], rel_tol=1e-9)
    # the parties' noise on the real moments lies on the 2^-16 grid, on counts on the integers
    assert moments["distributed"]["grid"] == 2.0**-REAL_BITS and "grid" not in entries[0]["distributed"]
    assert_audit_objects_only_to_the_seed(result.ledger)


def test_flaim_over_mpc_selects_in_each_silo_and_sums_masked_batches_on_shares(world, files):
    from privsyn_fed.silo import LocalScoresQuery

    _, schema_path, paths = files
    names = world.silo_names
    # sums over different silos, released together: each part answered only by its own silos
    q1, q2 = MarginalsQuery(((0, 2),)), MarginalsQuery(((3,),))
    batch, among = world.batch([(q1, names[:1]), (q2, names[1:])])
    assert among == names
    opened = world.open_exact_sum_for_checks(batch, among, label="t")
    assert np.array_equal(
        opened, np.concatenate([_plain(paths[:1], schema_path, q1), _plain(paths[1:], schema_path, q2)])
    )
    # each silo selects on its own rows: with a huge epsilon it picks its own best-scoring option
    schema = pf.Schema.load(schema_path)
    cliques = ((0,), (1,), (2, 4))
    probs = tuple(
        np.full(int(np.prod([schema.shape[i] for i in c])), 1.0 / np.prod([schema.shape[i] for i in c]))
        for c in cliques
    )
    query = LocalScoresQuery(cliques, (1.0, 1.0, 1.0), probs, 1.0)
    picks = world.local_select(dict.fromkeys(names, query), scale=2.0 * 2.0 / 1e9, noise=None, round_index=0)
    for name, path in zip(names, paths):
        assert picks[name] == int(np.argmax(query(pf.Silo.from_csv(path, schema))))

    result = pf.api.synthesize_over(world, "flaim", 1.0, 1e-9, rounds=2, variant="private", seed=5)
    entries = result.ledger["entries"]
    selections = [e for e in entries if e["mechanism"] == "exponential"]
    assert selections and all(e["where"] == "silo" and e["parallel_over"] == "silos" for e in selections)
    assert all(e["where"] == "mpc" for e in entries if e["mechanism"] == "gaussian")
    assert_audit_objects_only_to_the_seed(result.ledger)
    assert len(result.data) > 0


def test_integer_scores_have_the_stated_sensitivity(files):
    """D versus D plus one record: |u_r(D) - u_r(D')| <= 2^f * 2 w_r for the secure scores."""
    _, schema_path, paths = files
    schema = pf.Schema.load(schema_path)
    silo = pf.Silo.from_csv(paths[0], schema)
    prob = Problem.build(schema.names, schema.shape, [(0, 2), (1, 3, 4), (2, 4)])
    keys = list(prob.candidates)
    query = MarginalsQuery(tuple(tuple(prob.columns(q)) for q in keys))
    rng = np.random.default_rng(5)
    starts = np.concatenate([[0], np.cumsum([prob.cells(q) for q in keys])[:-1]])
    cells = np.concatenate([np.arange(s, s + prob.cells(q)) for s, q in zip(starts, keys)])
    seg = np.concatenate([np.full(prob.cells(q), i) for i, q in enumerate(keys)])
    weights = np.array([prob.candidates[q] for q in keys], dtype=np.int64)
    for trial in range(20):
        model = np.concatenate(
            [np.floor(rng.dirichlet(np.ones(prob.cells(q))) * 2**secure.SCORE_BITS) for q in keys]
        ).astype(np.int64)
        offsets = rng.integers(0, 2**30, len(keys))
        extra = np.array([[rng.integers(0, s) for s in schema.shape]])
        d = query(silo)
        d_plus = query(silo.with_rows(np.vstack([silo.rows(), extra])))
        args = dict(
            cells=cells,
            segment_ids=seg,
            model=model,
            weights=weights,
            offsets=offsets,
            total_cells=np.arange(prob.cells(keys[0])),
        )
        diff = np.abs(secure.integer_scores(d_plus, **args) - secure.integer_scores(d, **args))
        assert np.all(diff <= 2**secure.SCORE_BITS * 2 * weights)


def test_exactly_rounded_gumbel_has_the_rounded_distribution():
    bits = random.Random(3).getrandbits
    draws = np.concatenate([rounded_gumbel(1, 2.5, bits) for _ in range(6000)])
    ks, counts = np.unique(draws, return_counts=True)
    p = rounded_gumbel_pmf(ks, 2.5)
    big = p * len(draws) >= 5
    observed = np.append(counts[big], counts[~big].sum())
    expected = np.append(p[big], 1 - p[big].sum()) * len(draws)
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    z = discrete_gaussian(4000, 3.0)
    assert z.dtype == np.int64 and 8.0 < z.var() < 10.0


def test_distaim_over_mpc_end_to_end_from_the_command_line(files, tmp_path):
    _, schema_path, paths = files
    out = tmp_path / "syn.csv"
    model = tmp_path / "syn.model"
    args = synth_argv(
        "distaim",
        schema=schema_path,
        silos=paths,
        out=out,
        mpc=True,
        rounds=2,
        collusion=1,
        quiet=True,
        model_out=model,
        target="label",  # its 2-ways are summed on shares too, each party costing them
    )
    run = run_cli(*args, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "over MPC" in run.stdout and "communication:" in run.stdout
    # the model released over MPC is kept with its ledger, and samples given a public value
    kept = pf.load_model(model)
    assert kept.ledger == json.loads(out.with_suffix(".ledger.json").read_text())
    assert set(kept.sample(300, where={"sex": "M"})["sex"]) == {"M"}
    data = pd.read_csv(out)
    assert list(data.columns) == [c["name"] for c in SCHEMA["columns"]] and len(data) > 0
    ledger = json.loads(out.with_suffix(".ledger.json").read_text())
    assert ledger["status"] == "complete" and ledger["details"]["mpc"]["provider"].startswith("TTP")
    assert all(e["where"] == "mpc" for e in ledger["entries"])
    assert [e["query"] for e in ledger["entries"][:4]] == [
        f"marginal({c}, label) with the target" for c in ("age", "income", "sex", "region")
    ]
    audit = run_cli("audit", out.with_suffix(".ledger.json"))
    assert audit.returncode == 0, audit.stdout + audit.stderr
    # every party drew its own noise, split for the chosen collusion threshold; no dealer noise
    assert all(e["distributed"] == {"parties": 3, "collusion": 1} for e in ledger["entries"])
    assert all(e["noise_from"].startswith("parties") for e in ledger["entries"])
    assert not audit_ledger(ledger).warnings
    # a threshold that the per-party sigmas do not carry fails: with t=2 the one honest party's
    # sigma costs twice as much as with t=1's two
    tampered = json.loads(json.dumps(ledger))
    measure = next(e for e in tampered["entries"] if e["mechanism"] == "gaussian")
    measure["distributed"]["collusion"] = 2
    assert any("recorded rho" in p for p in audit_ledger(tampered).problems)
    for threshold in (0, 3):  # every party sees the release; and one party must stay honest
        measure["distributed"]["collusion"] = threshold
        assert any("collusion threshold" in p for p in audit_ledger(tampered).problems)
    # the audit recomputes each selection's fixed-point slack: sampling at the full epsilon is caught
    select = next(e for e in ledger["entries"] if e["mechanism"] == "exponential")
    select["fixed_point"]["epsilon_sampled"] = select["epsilon"]
    select["fixed_point"]["gumbel_scale_grid_units"] = 2**16 * 2 * select["sensitivity"] / select["epsilon"]
    assert any("rounding slack" in p for p in audit_ledger(ledger).problems)
    # an entry of an earlier version, with the dealer's noise, is flagged
    select["noise_from"] = "dealer, secret-shared"
    assert any("dealt by the dealer" in w for w in audit_ledger(ledger).warnings)
    del select["fixed_point"]
    assert any("fixed-point parameters" in p for p in audit_ledger(ledger).problems)


def test_a_killed_party_stops_every_other_party_with_a_clear_error(files, tmp_path):
    """Parties started as on separate hosts (--federation); party 2 is killed mid-run."""
    _, schema_path, paths = files
    before = _parties()
    (tmp_path / "fed").mkdir(mode=0o700)
    fed = local_federation(tmp_path / "fed", 3)
    out, ledger = tmp_path / "syn.csv", tmp_path / "syn.ledger.json"
    party0 = synth_argv(
        "distaim", schema=schema_path, silos=paths[:1], out=out, mpc=True, mpc_timeout=60, rounds=30, quiet=True
    )
    procs = {
        "party0": start([*CLI, *party0, *fed.args(0)]),
        "party1": start_party(fed, 1, "--rank", 1, "--schema", schema_path, "--silo", paths[1]),
        "party2": start_party(fed, 2, "--rank", 2, "--schema", schema_path, "--silo", paths[2]),
        "dealer": start_dealer(fed, 3),
    }
    with killed_at_exit(procs):
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # wait until a few rounds have been opened
            try:
                if len(json.loads(ledger.read_text())["entries"]) >= 8:
                    break
            except (OSError, ValueError):
                pass
            assert procs["party0"].poll() is None, procs["party0"].communicate()[1]
            time.sleep(0.2)
        else:
            pytest.fail("the run did not get going")
        os.kill(procs["party2"].pid, signal.SIGKILL)
        results = finish(procs, timeout=90)
    assert procs["party0"].returncode == 1
    err0 = results["party0"][1].strip().splitlines()
    assert len(err0) == 1 and "lost contact" in err0[0] and "no CSV was written" in err0[0], err0
    assert procs["party1"].returncode == 1 and "lost contact" in results["party1"][1]
    assert "Traceback" not in results["party0"][1] + results["party1"][1]
    assert not out.exists()
    record = json.loads(ledger.read_text())
    assert record["status"] == "failed" and len(record["entries"]) >= 8
    assert _left_behind(before) == set()


COMPARE = """
import sys
import numpy as np
from privsyn_fed.mpc import secure, world

rank, federation, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
world.join(world.membership(world.Access(federation, cert, key), rank=rank, timeout_s=60))
values = np.array([0, -1, 1, 2**62, -(2**62), 2**62 - 1, -(2**62) + 1, 12345, -98765, 7, -7], dtype=np.int64)
values = np.concatenate([values, np.random.default_rng(3).integers(-(2**62), 2**62, 2000)])
x = secure.share_sum(values if rank == 0 else None, [0], len(values))
below = secure.below_zero(x).get_plain_text().numpy()
assert np.array_equal(below, (values < 0).astype(np.int64)), "comparison differs"
print("exact", flush=True)
world.leave()
"""


@pytest.mark.parametrize("parties", [2, 3, 4])
def test_the_secure_comparison_is_exact_on_edge_values(parties, tmp_path):
    """``secure.below_zero`` (carry-save adders, then one adder's sign) against the plain sign, on
    0, +-1, +-2^62 and 2,000 random values, for 2, 3 and 4 parties (no, one and two carry-save rounds)."""
    (tmp_path / "fed").mkdir(mode=0o700)
    fed = local_federation(tmp_path / "fed", parties)
    procs = [start([sys.executable, "-c", COMPARE, str(k), *fed.args(k)[1::2]]) for k in range(parties)]
    dealer = start_dealer(fed, parties)
    with killed_at_exit([*procs, dealer]):
        outs = [p.communicate(timeout=120) for p in procs]
        dealer.communicate(timeout=60)
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and "exact" in out, err[-2000:]


def test_one_process_can_coordinate_two_releases_in_turn(files):
    """CrypTen keeps its dealer client past ``uninit``; a second run in the same process (a notebook,
    a benchmark) must set it up anew, or the parties wait for it forever."""
    _, schema_path, paths = files
    script = (
        "import sys, privsyn_fed as pf\n"
        "from privsyn_fed.mpc.launch import coordinator\n"
        "from privsyn_fed.api import synthesize_over\n"
        "for i in range(2):\n"
        "    with coordinator(sys.argv[1], sys.argv[2:], timeout_s=60) as agg:\n"
        "        r = synthesize_over(agg, 'independent', 1.0, 1e-9)\n"
        "        print('released', len(r.data))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(schema_path), *map(str, paths)], capture_output=True, text=True, timeout=240
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("released") == 2


def test_the_dealer_is_a_peer_of_party_0_not_its_child(world):
    """In the local layout party 0 starts the other parties as its children, and the dealer through
    an intermediate that exits, so the dealer's parent is not party 0."""
    me = os.getpid()
    mine = [cmd for _, ppid, state, cmd in _processes() if ppid == me and state != "Z" and "mpc-party" in cmd]
    assert mine, "the world's parties are this process's children"
    federation = re.search(r"--federation (\S+)", mine[0]).group(1)
    dealers = [
        (pid, ppid)
        for pid, ppid, state, cmd in _processes()
        if state != "Z" and "mpc-dealer" in cmd and f"--federation {federation} " in cmd + " "
    ]
    assert len(dealers) == 1 and dealers[0][1] != me


def test_a_party_killed_while_the_parties_draw_noise_leaves_no_csv_and_a_failed_ledger(tmp_path):
    """One Gaussian release of about 200,000 cells: each party draws as many exact discrete Gaussians
    (seconds). Party 2 is killed as soon as the release is charged, while the parties draw."""
    schema = json.loads(json.dumps(SCHEMA))
    for column in schema["columns"]:
        if column["name"] in ("age", "income"):
            column.update({"bins": 100_000, "integer": False})
    schema_path = tmp_path / "wide.schema.json"
    schema_path.write_text(json.dumps(schema))
    paths = []
    for k in range(3):
        paths.append(tmp_path / f"s{k}.csv")
        make_frame(200, seed=40 + k).to_csv(paths[-1], index=False)
    out, ledger = tmp_path / "syn.csv", tmp_path / "syn.ledger.json"
    before = _parties()
    args = synth_argv("independent", schema=schema_path, silos=paths, out=out, mpc=True, quiet=True)
    party0 = start([*CLI, *args])
    with killed_at_exit([party0]):
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                entries = json.loads(ledger.read_text())["entries"]
            except (OSError, ValueError):
                entries = []
            if any(e.get("cells", 0) > 100_000 for e in entries):
                break
            assert party0.poll() is None, party0.communicate()[1]
            time.sleep(0.01)
        else:
            pytest.fail("the release was never charged")
        victim = [pid for pid, ppid, _, cmd in _processes() if ppid == party0.pid and "--rank 2" in cmd]
        assert len(victim) == 1
        os.kill(victim[0], signal.SIGKILL)
        _, err = party0.communicate(timeout=120)
    assert party0.returncode == 1, err
    assert_one_line_error(err, "party 2", "no CSV was written")
    assert not out.exists()
    record = json.loads(ledger.read_text())
    assert record["status"] == "failed" and record["entries"][-1]["distributed"]["parties"] == 3
    assert _left_behind(before) == set()  # the dealer and party 1 notice and stop on their own


@pytest.mark.parametrize(
    "args, message",
    [
        (["--method", "flaim", "--mpc", "--variant", "oracle"], "flaim over MPC runs one local step"),
        (["--method", "flaim", "--mpc", "--local-steps", "2"], "flaim over MPC runs one local step"),
        (["--method", "aim", "--mpc"], "aim over MPC is not available"),
        (["--method", "distaim", "--rendezvous", "tcp://127.0.0.1:1"], "replaced by --federation FILE"),
        (["--method", "distaim", "--mpc", "--rendezvous", "tcp://127.0.0.1:1"], "replaced by --federation FILE"),
        (["--method", "distaim", "--federation", "f.json"], "belong to --mpc"),
        (["--method", "distaim", "--collusion", "1"], "belong to --mpc"),
        (["--method", "distaim", "--superlink", "127.0.0.1:7005"], "--superlink belongs to --mpc"),
        (["--method", "distaim", "--mpc", "--superlink", "127.0.0.1:7005"], "--superlink goes with --federation"),
        (["--method", "distaim", "--mpc", "--collusion", "2"], "with 2 parties the threshold lies in 1..1"),
        (["--method", "fedtda", "--mpc", "--collusion", "0"], "threshold lies in 1..1"),
    ],
)
def test_mpc_usage_errors_are_one_line(files, tmp_path, args, message):
    _, schema_path, paths = files
    method, *extra = args[1:]  # each case opens with --method
    run = run_cli(*synth_argv(method, schema=schema_path, silos=paths[:2], out=tmp_path / "o.csv"), *extra, timeout=60)
    assert_one_line_error(run, message)


def test_a_bad_csv_at_another_party_stops_the_launch_with_its_message(files, tmp_path):
    _, schema_path, paths = files
    before = _parties()
    bad = tmp_path / "bad.csv"
    bad.write_text("age,income,sex,region,label\n30,20,X,north,no\n")
    run = run_cli(
        *synth_argv("distaim", schema=schema_path, silos=[paths[0], bad], out=tmp_path / "o.csv", mpc=True, quiet=True),
        timeout=120,
    )
    assert_one_line_error(run, "bad.csv", "sex")
    assert not (tmp_path / "o.csv").exists()
    assert _parties() - before == set()


def test_a_party_with_another_schema_is_named_and_nothing_is_written(files, tmp_path):
    _, schema_path, paths = files
    before = _parties()
    other = json.loads(schema_path.read_text())
    other["columns"][0]["bins"] = 4
    (tmp_path / "other.json").write_text(json.dumps(other))
    (tmp_path / "fed").mkdir(mode=0o700)
    fed = local_federation(tmp_path / "fed", 2)
    party = start_party(fed, 1, "--schema", tmp_path / "other.json", "--silo", paths[1])
    dealer = start_dealer(fed, 2)
    with killed_at_exit([party, dealer]):
        args = synth_argv("distaim", schema=schema_path, silos=paths[:1], out=tmp_path / "o.csv", mpc=True, quiet=True)
        run = run_cli(*args, *fed.args(0), timeout=120)
        party_err = party.communicate(timeout=60)[1]
        dealer.communicate(timeout=60)
    assert_one_line_error(run, "party-1: loaded a different schema")
    assert party.returncode == 1 and "schema differs" in party_err
    assert not (tmp_path / "o.csv").exists() and not (tmp_path / "o.ledger.json").exists()
    assert _parties() - before == set()


def test_rounded_real_answers_keep_the_charged_sensitivity(files):
    """D versus D plus one record (the records of D keep their encoding randomness): a silo's
    second moments rounded to the shared grid move by at most the planned sensitivity B^2 plus the
    charged rounding slack sqrt(cells) 2^-16."""
    from privsyn_fed.mpc.aggregator import REAL_BITS
    from privsyn_fed.mpc.answers import ring_answer
    from privsyn_fed.silo import ICDM, Encoding
    from privsyn_fed.silo.copula import upper

    class Fixed:  # a real-valued answer handed to the party's grid rounding
        real = True

        def __init__(self, value):
            self.value = value

        def __call__(self, silo):
            return self.value

    _, schema_path, paths = files
    schema = pf.Schema.load(schema_path)
    silo = pf.Silo.from_csv(paths[0], schema)
    rng = np.random.default_rng(11)
    bound = 2.0
    encoding = Encoding(
        schema, [ICDM(rng.dirichlet(np.ones(n))) for n in schema.shape], [None] * len(schema.columns), bound
    )
    cells = encoding.width * (encoding.width + 1) // 2
    slack = math.sqrt(cells) * 2.0**-REAL_BITS
    for trial in range(10):
        extra = np.array([[rng.integers(0, s) for s in schema.shape]])
        x = encoding.encode(
            np.vstack([silo.rows(), extra]),
            np.full((len(silo.rows()) + 1, len(schema.columns)), np.nan),
            np.random.default_rng(trial),
        )
        d, d_plus = upper(x[:-1].T @ x[:-1]), upper(x.T @ x)
        moved = (ring_answer(Fixed(d_plus), silo, 0, [0]) - ring_answer(Fixed(d), silo, 0, [0])) * 2.0**-REAL_BITS
        assert np.linalg.norm(moved) <= bound**2 + slack
        assert np.linalg.norm(d_plus - d) <= bound**2 + 1e-9


@pytest.mark.parametrize(
    "method, options",
    [
        ("distaim", {"rounds": 2}),
        ("flaim", {"rounds": 2, "variant": "naive"}),
        ("flaim", {"rounds": 2, "variant": "private"}),
        ("fedtda", {}),
        ("independent", {}),
    ],
    ids=["distaim", "flaim-naive", "flaim-private", "fedtda", "independent"],
)
def test_one_method_code_charges_the_same_mechanisms_over_both_aggregators(world, files, method, options):
    """Parity: the same run (fixed seed) over the in-process aggregator and over MPC charges the
    same sequence of (mechanism, query, rho); only where the noise is drawn, the sampler and
    rounding-grown sensitivities differ. Which marginals a selection picks depends on its noise
    (drawn by different samplers), so a query's list of marginals is compared as ``(..)``."""
    _, schema_path, paths = files
    schema = pf.Schema.load(schema_path)
    silos = [pf.Silo.from_csv(p, schema) for p in paths]
    for silo, name in zip(silos, world.silo_names):
        silo.name = name
    options = {"workload_size": 4, **options} if method in ("distaim", "flaim") else options
    plain = pf.synthesize(silos, method, 4.0, 1e-9, seed=9, rows=20, **options)
    secure = pf.api.synthesize_over(world, method, 4.0, 1e-9, seed=9, rows=20, **options)

    def charges(ledger):
        return [
            (e["mechanism"], re.sub(r"\([^)]*\)(; \([^)]*\))*", "(..)", e["query"]), round(e["rho"], 9))
            for e in ledger["entries"]
        ]

    assert charges(secure.ledger) == charges(plain.ledger)
    assert {e["where"] for e in secure.ledger["entries"]} <= {"mpc", "silo"}
    assert {e["where"] for e in plain.ledger["entries"]} <= {"aggregator", "silo"}
