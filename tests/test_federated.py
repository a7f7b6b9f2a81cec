"""DistAIM and FLAIM: aggregator traffic, sound score sensitivities, closed-form ledgers, parallel
composition, awkward silos, sampling."""

import copy
import io
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

import privsyn_fed as pf
from privsyn_fed.aggregation import InProcessAggregator
from privsyn_fed.audit import audit_ledger
from privsyn_fed.methods import allocation, core
from privsyn_fed.methods.distaim import distaim_params
from privsyn_fed.methods.federated import ClientSampler, TotalEstimator, default_sample_rate
from privsyn_fed.methods.flaim import score_sensitivity
from privsyn_fed.methods.workload import downward_closure
from privsyn_fed.silo import LocalScoresQuery, MarginalsQuery
from privsyn_fed.silo.scores import heterogeneity_gap, local_score

from .conftest import assert_audit_objects_only_to_the_seed, make_frame


def silos_from(schema, sizes, seed=0):
    return [pf.Silo.from_frame(make_frame(n, seed + k), schema, name=f"silo{k}") for k, n in enumerate(sizes)]


def npy_size(array) -> int:
    buf = io.BytesIO()
    np.save(buf, array)
    return len(buf.getvalue())


# ---- aggregator ------------------------------------------------------------------------------


def test_aggregator_sums_exactly_and_counts_the_bytes_of_each_payload(schema):
    silos = silos_from(schema, [50, 70, 90])
    agg = InProcessAggregator(silos)
    total = agg.open_exact_sum_for_checks(MarginalsQuery(((0, 2),)), ["silo0", "silo2"], label="t", round_index=3)
    assert total.dtype == np.int64
    assert np.array_equal(total, silos[0].marginal([0, 2]) + silos[2].marginal([0, 2]))
    agg.open_exact_sum_for_checks(MarginalsQuery(((1,),)), ["silo2"], label="t", round_index=4)
    sent = agg.traffic.per_silo(agg.silo_names)
    assert sent["silo0"]["sent"] == npy_size(silos[0].marginal([0, 2]))
    assert sent["silo2"]["sent"] == npy_size(silos[2].marginal([0, 2])) + npy_size(silos[2].marginal([1]))
    assert sent["silo1"] == {"sent": 0, "received": 0}
    assert agg.traffic.sent["silo2"][4] == npy_size(silos[2].marginal([1]))
    agg.broadcast({"a": np.zeros(10), "b": np.ones((2, 3))}, ["silo1"], round_index=5)
    assert agg.traffic.per_silo(["silo1"])["silo1"]["received"] == npy_size(np.zeros(10)) + npy_size(np.ones((2, 3)))


def test_counts_do_not_wrap(schema):
    """Sums are int64: far above the 16-bit limit the research code wrapped at."""
    big = pf.Silo("big", np.zeros((70_000, 5), dtype=np.int64), schema)
    agg = InProcessAggregator([big, big.with_rows(big.rows(), name="big2")])
    assert agg.open_exact_sum_for_checks(MarginalsQuery(((2,),)), ["big", "big2"], label="t")[0] == 140_000


# ---- sensitivities (property tests on D and D plus one record in one silo) -------------------


def _random_case(data, seed):
    rng = np.random.default_rng(seed)
    shape = data.draw(st.lists(st.integers(1, 4), min_size=2, max_size=4))
    n = data.draw(st.integers(0, 30))
    codes = np.stack([rng.integers(0, k, n) for k in shape], axis=1) if n else np.zeros((0, len(shape)), int)
    extra = np.array([[rng.integers(0, k) for k in shape]])
    clique = sorted(rng.choice(len(shape), size=data.draw(st.integers(1, len(shape))), replace=False).tolist())
    probs = rng.dirichlet(np.ones(int(np.prod([shape[i] for i in clique]))))
    proxy = [rng.dirichlet(np.ones(k)) for k in shape]
    return shape, codes, extra, clique, probs, proxy


def _marginal(codes, shape, clique):
    dims = [shape[i] for i in clique]
    if len(codes) == 0:
        return np.zeros(int(np.prod(dims)), dtype=np.int64)
    return np.bincount(
        np.ravel_multi_index(tuple(codes[:, i] for i in clique), dims), minlength=int(np.prod(dims))
    ).astype(np.int64)


def _local(codes, shape, clique, probs, proxy, weight, sigma, variant):
    counts = _marginal(codes, shape, clique)
    gap = 0.0
    if variant == "private":
        gap = heterogeneity_gap([_marginal(codes, shape, [i]) for i in range(len(shape))], proxy, clique)
    return local_score(weight, counts, probs, sigma, gap)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**31), st.floats(0.5, 80), st.integers(1, 9), st.sampled_from(["naive", "private"]), st.data())
def test_flaim_local_score_sensitivity_holds(seed, sigma, weight, variant, data):
    """|u_k(q; D_k + x) - u_k(q; D_k)| <= 2w (naive) or 4w (with the heterogeneity proxy)."""
    shape, codes, extra, clique, probs, proxy = _random_case(data, seed)
    before = _local(codes, shape, clique, probs, proxy, weight, sigma, variant)
    after = _local(np.vstack([codes, extra]), shape, clique, probs, proxy, weight, sigma, variant)
    assert abs(after - before) <= score_sensitivity(weight, variant) + 1e-9


def _site_case(seed: int):
    """A schema with a silo column ``site`` (3 silos) and two other columns, and silo ``s1``'s rows."""
    rng = np.random.default_rng(seed)
    schema = pf.Schema.from_dict(
        {
            "columns": [
                {"name": "a", "type": "categorical", "categories": ["0", "1", "2"]},
                {"name": "site", "type": "categorical", "categories": ["s0", "s1", "s2"]},
                {"name": "b", "type": "categorical", "categories": ["0", "1"]},
            ]
        }
    )
    n = int(rng.integers(1, 40))
    frame = pd.DataFrame({"a": rng.integers(0, 3, n).astype(str), "site": "s1", "b": rng.integers(0, 2, n).astype(str)})
    return schema, frame


def _site_scores(schema, frame, probs, proxy, variant):
    silo = pf.Silo.from_frame(frame, schema, name="s1", site=("site", "s1"))
    cliques = ((0, 1), (1, 2), (0, 1, 2), (0, 2))
    query = LocalScoresQuery(
        cliques,
        (1.0, 2.0, 3.0, 1.0),
        tuple(probs[c] for c in cliques),
        7.0,
        proxy if variant == "private" else None,
    )
    return query(silo)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from(["naive", "private"]))
def test_flaim_scores_with_a_silo_column_keep_their_sensitivity(seed, variant):
    """Scored against the model's slice of the silo's own value (and with that column's gap 0), a
    record added to the silo moves each score by at most its sensitivity (2w naive, 4w private)."""
    rng = np.random.default_rng(seed)
    schema, frame = _site_case(seed)
    shape = schema.shape
    probs = {
        c: rng.dirichlet(np.ones(int(np.prod([shape[i] for i in c])))) for c in ((0, 1), (1, 2), (0, 1, 2), (0, 2))
    }
    proxy = tuple(rng.dirichlet(np.ones(k)) for k in shape)
    added = pd.concat(
        [frame, pd.DataFrame({"a": [str(rng.integers(0, 3))], "site": ["s1"], "b": [str(rng.integers(0, 2))]})]
    )
    before = _site_scores(schema, frame, probs, proxy, variant)
    after = _site_scores(schema, added, probs, proxy, variant)
    assert np.all(np.abs(after - before) <= np.array([1.0, 2.0, 3.0, 1.0]) * score_sensitivity(1.0, variant) + 1e-9)


def test_a_silo_is_scored_against_its_own_slice_of_the_silo_column():
    """A silo whose rows follow the model's distribution given its own site value has no error on a
    marginal with the silo column, however the model spreads the other sites' mass: only the noise
    term is left, over the slice's 3 cells (a measurement's noise on the other sites' 6 cells is no
    error the silo's rows can show). Without the slice its own site would count as an error of
    2 n (1 - p(site))."""
    schema, _ = _site_case(0)
    frame = pd.DataFrame({"a": ["0"] * 30 + ["1"] * 10, "site": "s1", "b": "0"})
    joint = np.zeros((3, 3))
    joint[:, 1] = [0.75, 0.25, 0.0]
    joint = 0.3 * joint + 0.7 * np.full((3, 3), 1 / 9) * np.array([1, 0, 1])  # other sites' mass
    joint /= joint.sum()
    probs = {
        (0, 1): joint.ravel(),
        (1, 2): np.full(6, 1 / 6),
        (0, 1, 2): np.full(18, 1 / 18),
        (0, 2): np.full(6, 1 / 6),
    }
    scores = _site_scores(schema, frame, probs, None, "naive")
    noise = math.sqrt(2 / math.pi) * 7.0 * 3
    assert scores[0] == pytest.approx(-noise)
    unsliced = local_score(1.0, np.bincount([1, 1, 1] * 10 + [4] * 10, minlength=9), joint.ravel(), 7.0)
    assert unsliced + math.sqrt(2 / math.pi) * 7.0 * 9 > 40  # its error term, where the slice's is 0


def test_a_clique_with_the_silo_column_scores_as_the_same_clique_without_it():
    """Where the model's slice of the silo's own value is the model's marginal of the other columns
    (the model knows nothing yet of how sites differ), a silo scores ``(a, site, b)`` as it scores
    ``(a, b)``: the silo column adds no cells to its noise term, so its own rows cannot prefer the
    clique without it for the clique's size alone."""
    schema, frame = _site_case(3)
    rng = np.random.default_rng(3)
    ab = rng.dirichlet(np.ones(6)).reshape(3, 2)
    independent = np.einsum("ab,s->asb", ab, np.full(3, 1 / 3)).ravel()
    probs = {(0, 1): np.full(9, 1 / 9), (1, 2): np.full(6, 1 / 6), (0, 1, 2): independent, (0, 2): ab.ravel()}
    scores = _site_scores(schema, frame, probs, None, "naive")
    assert scores[2] / 3.0 == pytest.approx(scores[3] / 1.0)  # the weights are 3 and 1


def test_flaim_private_score_really_needs_4w():
    """A concrete neighbour pair where the private score moves by more than 2w (so 2w, the
    research code's claim scaled to counts, would be unsound)."""
    shape, w, sigma = [2, 2], 1.0, 1.0
    proxy = [np.array([0.968, 0.032]), np.array([0.0, 1.0])]
    probs = np.array([0.092, 0.026, 0.301, 0.581])
    codes = np.array([[1, 1]] * 3)
    extra = np.array([[1, 0]])
    before = _local(codes, shape, [0, 1], probs, proxy, w, sigma, "private")
    after = _local(np.vstack([codes, extra]), shape, [0, 1], probs, proxy, w, sigma, "private")
    assert abs(after - before) > 2 * w
    assert abs(after - before) <= 4 * w


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**31), st.floats(0.5, 80), st.integers(1, 9), st.data())
def test_distaim_pooled_score_sensitivity_holds(seed, sigma, weight, data):
    """``w (||A_r - N_t p_r||_1 - ...)`` with the pool's true size N_t moves by at most 2w."""
    shape, codes, extra, clique, probs, _ = _random_case(data, seed)

    def score(c):
        counts = _marginal(c, shape, clique)
        return core.aim_score(weight, counts, len(c) * probs, sigma)

    assert abs(score(np.vstack([codes, extra])) - score(codes)) <= 2 * weight + 1e-9


# ---- closed-form ledgers ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def module_schema():
    from .conftest import SCHEMA

    return pf.Schema.from_dict(SCHEMA)


@pytest.fixture(scope="module")
def flaim_runs(module_schema):
    silos = silos_from(module_schema, [120, 1, 80])  # one silo of a single row
    silos.append(pf.Silo.from_frame(make_frame(60, 9).assign(label="no"), module_schema, name="no-yes"))
    out = {}
    for variant in ("naive", "private"):
        out[variant] = pf.synthesize(silos, "flaim", 1.0, 1e-6, seed=3, variant=variant, rounds=3, workload_size=4)
    out["naive-s2"] = pf.synthesize(
        silos, "flaim", 1.0, 1e-6, seed=4, variant="naive", rounds=2, local_steps=2, workload_size=4
    )
    out["private-sampled"] = pf.synthesize(
        silos, "flaim", 1.0, 1e-6, seed=3, variant="private", rounds=3, workload_size=4, sample_rate=0.75
    )
    return out


@pytest.mark.parametrize(
    "variant,T,s", [("naive", 3, 1), ("private", 3, 1), ("naive-s2", 2, 2), ("private-sampled", 3, 1)]
)
def test_flaim_ledger_equals_the_closed_form(flaim_runs, variant, T, s):
    """G unit releases: T (2s - 1) + d, and T d for the 1-ways only where private FLAIM samples its
    silos (the proxy's rounds); private FLAIM's sums of c marginals have sensitivity sqrt(c) and
    sigma sqrt(c / s), every other Gaussian sigma."""
    result = flaim_runs[variant]
    led = result.ledger
    d, alpha, rho = 5, 0.9, led["rho_budget"]
    private = variant.startswith("private")
    gaussians = T * (2 * s - 1) + (T * d if variant == "private-sampled" else d)  # FLAIM with the 2s-1 rule
    sigma = math.sqrt(gaussians / (2 * alpha * rho))
    eps = math.sqrt(8 * (1 - alpha) * rho / (T * s))
    assert led["rho_spent"] == pytest.approx(gaussians / (2 * sigma**2) + T * s * eps**2 / 8, rel=1e-12)
    assert led["rho_spent"] == pytest.approx(rho, rel=1e-12)
    gauss = [e for e in led["entries"] if e["mechanism"] == "gaussian"]
    ems = [e for e in led["entries"] if e["mechanism"] == "exponential"]
    proxies = [e for e in gauss if "(proxy)" in e["query"]]
    assert len(proxies) == (T - 1 if variant == "private-sampled" else 0)
    for e in gauss:
        sums = private and "sums of the chosen marginals" in e["query"]
        chosen = e["query"].count("; ") + 1 if sums else s
        assert e["sensitivity_l2"] == pytest.approx(math.sqrt(chosen) if sums else e["sensitivity_l2"])
        assert e["sigma"] == pytest.approx(sigma * math.sqrt(chosen / s) if sums else sigma)
    assert all(e["epsilon"] == pytest.approx(eps) for e in ems)
    assert len(ems) == T * s
    assert sum((e["sensitivity_l2"] / e["sigma"]) ** 2 for e in gauss) == pytest.approx(gaussians / sigma**2)
    assert all(e["sensitivity"] == (4 if private else 2) * max_weight(result) for e in ems)
    assert_audit_objects_only_to_the_seed(led)


def max_weight(result):
    """The largest workload weight of the run's downward closure (recomputed here)."""
    names = result.data.columns.tolist()
    return max(downward_closure([tuple(names.index(c) for c in cl) for cl in result.info["workload"]]).values())


def test_parallel_composition_only_for_silo_local_mechanisms(flaim_runs):
    for result in flaim_runs.values():
        for e in result.ledger["entries"]:
            if e.get("parallel_over"):
                # each silo runs it on its own (disjoint) rows, once
                assert e["parallel_over"] == "silos" and e["where"] == "silo"
                assert len(e["silos"]) == len(set(e["silos"])) >= 1
            else:
                # anything over the union of silos composes sequentially
                assert e["where"] == "aggregator"
    sequential = sum(e["rho"] for e in flaim_runs["naive"].ledger["entries"])
    assert sequential == pytest.approx(flaim_runs["naive"].ledger["rho_spent"])


def test_local_steps_never_repeat_a_marginal_within_a_round(flaim_runs):
    """s = 2: the two selections of one silo in one round are distinct, so each record is in at
    most s of the round's sums, and the round's measurement carries sensitivity sqrt(s)."""
    led = flaim_runs["naive-s2"].ledger
    rounds = [
        e
        for e in led["entries"]
        if e["mechanism"] == "gaussian" and e["where"] == "aggregator" and e.get("round", 0) > 0
    ]
    assert rounds and all(e["sensitivity_l2"] == pytest.approx(math.sqrt(2)) for e in rounds)
    local = [e for e in led["entries"] if e["mechanism"] == "gaussian" and e["where"] == "silo"]
    assert len(local) == 2  # s - 1 = 1 local measurement per round, T = 2 rounds


def test_flaim_output_respects_schema_and_sizes(flaim_runs, module_schema):
    for result in flaim_runs.values():
        assert list(result.data.columns) == module_schema.names
        assert 100 <= len(result.data) <= 600  # noisy estimate of 261 rows
        assert result.info["traffic"]["bytes_sent_total"] > 0


def test_distaim_ledger_is_central_aims_and_pools_each_silo_once(module_schema):
    silos = silos_from(module_schema, [150, 1, 90])
    silos.append(pf.Silo.from_frame(make_frame(60, 9).assign(label="no"), module_schema, name="no-yes"))
    result = pf.synthesize(silos, "distaim", 1.0, 1e-6, seed=5, rounds=3, workload_size=4)
    led = result.ledger
    d, T = 5, 3
    params = distaim_params(led["rho_budget"], T, d, 0.9)
    ems = [e for e in led["entries"] if e["mechanism"] == "exponential"]
    gauss = [e for e in led["entries"] if e["mechanism"] == "gaussian"]
    assert len(ems) == T and len(gauss) == T + d
    assert all(not e.get("parallel_over") for e in led["entries"])
    assert all(e["sensitivity"] == 2 * max_weight(result) for e in ems)
    assert gauss[0]["sigma"] == pytest.approx(params.sigma)
    assert led["rho_spent"] == pytest.approx(led["rho_budget"], rel=1e-9)
    assert_audit_objects_only_to_the_seed(led)
    # every silo sends its candidate answers once: with p = 1 all are pooled in round 1
    traffic = result.info["traffic"]
    assert traffic["silos_active"] == 4 and result.info["pooled_silos"] == 4


def _annealing_distaim(schema, epsilon: float, **options):
    silos = silos_from(schema, [2500, 2000, 1500], seed=3)
    return pf.synthesize(silos, "distaim", epsilon, 1e-9, seed=6, rows=20, pgm_iters=50, **options).ledger


@pytest.mark.parametrize("epsilon", [1.0, 10.0])
def test_a_planned_distaim_over_every_silo_runs_aims_schedule(module_schema, epsilon):
    """Every silo in every round and no T given: AIM's plan (``T = R + alpha d`` units), its noise,
    annealing down to fewer rounds than planned, the last round spending what is left; it audits
    (the dependence step left out: at epsilon 1 the rule would run it on these 6,000 rows)."""
    led = _annealing_distaim(module_schema, epsilon, find_dependence=False)
    schedule, d, alpha = led["details"]["schedule"], 5, 0.9
    assert schedule["anneals"] is True and schedule["rounds"] > 0
    assert schedule["units"] == pytest.approx(schedule["rounds"] + alpha * d)
    rest = led["rho_budget"] - led["entries"][0]["rho"]
    cells = [c for c in _closure_cells(led) if c > 0]
    assert schedule["rounds"] == allocation.plan_aim(schedule["noisy_total"], rest, alpha, d, cells)
    start = core.initial_params(rest, schedule["units"], alpha)
    oneways = led["entries"][1 : 1 + d]
    assert [e["sigma"] for e in oneways] == pytest.approx([start.sigma] * d)
    ems = [e for e in led["entries"] if e["mechanism"] == "exponential"]
    assert len(ems) == led["details"]["rounds"] < schedule["rounds"]  # annealed: each round costs more
    assert ems[0]["epsilon"] == pytest.approx(start.epsilon)
    assert any(e["epsilon"] > ems[0]["epsilon"] * 1.5 for e in ems[1:-1]) or len(ems) <= 2
    assert led["rho_spent"] == pytest.approx(led["rho_budget"], rel=1e-9)
    assert_audit_objects_only_to_the_seed(led)


def _closure_cells(led) -> list[int]:
    """The cells of each multi-way candidate (the workload's closure) of a ledger (0 for a 1-way)."""
    shape, index = led["details"]["shape"], {c: i for i, c in enumerate(led["details"]["columns"])}
    closure = downward_closure([tuple(sorted(index[c] for c in cl)) for cl in led["details"]["workload"]])
    return [math.prod(shape[i] for i in cl) if len(cl) > 1 else 0 for cl in closure]


def test_a_sampled_or_given_distaim_keeps_its_fixed_rounds(module_schema):
    """Silos sampled, or T given: exactly the rounds planned or given, no annealing recorded."""
    sampled = _annealing_distaim(module_schema, 10.0, sample_rate=0.7)
    assert "anneals" not in sampled["details"]["schedule"] and "units" not in sampled["details"]["schedule"]
    rounds = sampled["details"]["schedule"]["rounds"]
    assert 0 < rounds <= allocation.FEDERATED_ROUNDS and sampled["details"]["rounds"] == rounds
    assert sum(e["mechanism"] == "exponential" for e in sampled["entries"]) == rounds
    given_t = _annealing_distaim(module_schema, 10.0, rounds=4)
    assert "schedule" not in given_t["details"] and given_t["details"]["rounds"] == 4
    for led in (sampled, given_t):
        assert_audit_objects_only_to_the_seed(led)


def _annealing_flaim(schema, epsilon: float, **options):
    silos = silos_from(schema, [2500, 2000, 1500], seed=3)
    return pf.synthesize(
        silos, "flaim", epsilon, 1e-9, seed=6, rows=20, pgm_iters=50, find_dependence=False, **options
    ).ledger


@pytest.mark.parametrize("epsilon", [1.0, 10.0])
def test_a_planned_private_flaim_over_every_silo_runs_aims_schedule(module_schema, epsilon):
    """Private FLAIM, every silo in every round, one local step, no T given: AIM's plan for
    ``N_hat / sqrt(K)`` rows and AIM's start; each round's ``c`` sums at ``sigma sqrt(c)``, annealing
    down to fewer rounds than planned, the last round spending what is left; it audits."""
    led = _annealing_flaim(module_schema, epsilon)
    schedule, d, alpha = led["details"]["schedule"], 5, 0.9
    assert schedule["anneals"] is True and schedule["rounds"] > 0
    assert schedule["units"] == pytest.approx(schedule["rounds"] + alpha * d)
    rest = led["rho_budget"] - led["entries"][0]["rho"]
    cells = [c for c in _closure_cells(led) if c > 0]
    assert schedule["rounds"] == allocation.plan_flaim_annealed(schedule["noisy_total"], rest, alpha, d, cells, 3)
    start = core.initial_params(rest, schedule["units"], alpha)
    assert [e["sigma"] for e in led["entries"][1 : 1 + d]] == pytest.approx([start.sigma] * d)
    ems = [i for i, e in enumerate(led["entries"]) if e["mechanism"] == "exponential"]
    assert len(ems) == led["details"]["rounds"] < schedule["rounds"]  # annealed: each round costs more
    first, sums = led["entries"][ems[0]], led["entries"][ems[0] + 1]
    assert first["epsilon"] == pytest.approx(start.epsilon)
    chosen = round(sums["sensitivity_l2"] ** 2)  # a record is in each of the c sums
    assert 1 <= chosen <= 3 and sums["sigma"] == pytest.approx(start.sigma * math.sqrt(chosen))
    assert any(led["entries"][i]["epsilon"] == pytest.approx(2 * start.epsilon) for i in ems[1:-1]) or len(ems) <= 2
    assert led["rho_spent"] == pytest.approx(led["rho_budget"], rel=1e-9)
    assert_audit_objects_only_to_the_seed(led)
    quieter = copy.deepcopy(led)  # a round's sums quieter than kept or annealed noise allows
    quieter["entries"][ems[0] + 1]["sigma"] /= 3
    quieter["entries"][ems[0] + 1]["rho"] *= 9
    assert not audit_ledger(quieter).ok


def test_a_flaim_that_cannot_anneal_keeps_its_fixed_rounds(module_schema):
    """Sampled silos, two local steps, the naive variant or ``T`` given: ``T`` rounds, no annealing."""
    for options in ({"sample_rate": 0.7}, {"local_steps": 2}, {"variant": "naive"}):
        led = _annealing_flaim(module_schema, 10.0, **options)
        schedule, steps = led["details"]["schedule"], options.get("local_steps", 1)
        assert "anneals" not in schedule and "units" not in schedule
        assert 0 < schedule["rounds"] <= allocation.FEDERATED_ROUNDS and led["details"]["rounds"] == schedule["rounds"]
        assert sum(e["mechanism"] == "exponential" for e in led["entries"]) == schedule["rounds"] * steps
        assert_audit_objects_only_to_the_seed(led)
    given_t = _annealing_flaim(module_schema, 10.0, rounds=4)
    assert "schedule" not in given_t["details"] and given_t["details"]["rounds"] == 4
    assert_audit_objects_only_to_the_seed(given_t)


def test_the_audit_refutes_an_annealing_schedule_that_was_tampered_with(module_schema):
    led = _annealing_distaim(module_schema, 10.0)
    fixed = copy.deepcopy(led)  # the same releases, claimed as a fixed-round schedule
    del fixed["details"]["schedule"]["anneals"]
    assert not audit_ledger(fixed).ok
    louder = copy.deepcopy(led)
    louder["details"]["schedule"]["anneals"] = "yes"
    with pytest.raises(pf.InputError, match="details.schedule.anneals' must be true or false"):
        audit_ledger(louder)
    units = copy.deepcopy(led)
    units["details"]["schedule"]["units"] += 1
    assert any("units, but" in p for p in audit_ledger(units).problems)
    for options in ({"local_steps": 2}, {"variant": "naive"}):  # a flaim that does not anneal
        flaim = pf.synthesize(silos_from(module_schema, [300, 300]), "flaim", 1.0, 1e-9, seed=1, rows=10, **options)
        flaim.ledger["details"]["schedule"]["anneals"] = True
        assert any("or a private flaim over every silo" in p for p in audit_ledger(flaim.ledger).problems)
    quieter = copy.deepcopy(led)  # a round quieter than kept or annealed noise allows
    i = next(k for k, e in enumerate(quieter["entries"]) if e["mechanism"] == "exponential") + 1
    quieter["entries"][i]["sigma"] /= 3
    quieter["entries"][i]["rho"] *= 9
    assert not audit_ledger(quieter).ok


def test_oracle_is_marked_not_private_and_fails_the_audit(module_schema):
    silos = silos_from(module_schema, [80, 60])
    result = pf.synthesize(silos, "flaim", 1.0, 1e-6, seed=1, variant="oracle", rounds=1, workload_size=2)
    assert "NO differential-privacy guarantee" in result.ledger["non_private"]
    report = audit_ledger(result.ledger)
    assert not report.ok and any("NOT PRIVATE" in p for p in report.problems)


# ---- sampling and totals -----------------------------------------------------------------------


def test_client_sampling_is_poisson_nonempty_and_data_independent():
    names = [f"c{i}" for i in range(200)]
    a = ClientSampler(names, 0.1, np.random.default_rng(7))
    b = ClientSampler(list(names), 0.1, np.random.default_rng(7))
    draws = [a.draw() for _ in range(50)]
    assert draws == [b.draw() for _ in range(50)]  # only the generator decides
    picked = sum(len(x) for x in draws)
    assert binomtest(picked, 200 * 50, 0.1).pvalue > 1e-3
    tiny = ClientSampler(["x", "y"], 0.01, np.random.default_rng(0))
    assert all(tiny.draw() for _ in range(20))
    assert default_sample_rate(99) == 1.0 and default_sample_rate(100) == 0.1


def test_total_estimator_combines_noise_and_prior():
    est = TotalEstimator(10, per_silo=100.0)
    assert est.population == 1000
    # a precise noisy sum dominates; a hopelessly noisy one defers to the prior m * per_silo
    assert est.estimate(480.0, 1, 1.0, contributors=5) == pytest.approx(480.0, rel=1e-3)
    assert est.estimate(-5000.0, 10_000, 100.0, contributors=5) == pytest.approx(500.0, rel=0.01)
    assert TotalEstimator(3).estimate(-4.0, 3, 1.0, 1) == 1.0


# ---- bad input ---------------------------------------------------------------------------------


def test_method_needs_two_silos_and_a_valid_sample_rate(module_schema):
    one = silos_from(module_schema, [40])
    with pytest.raises(pf.InputError, match="at least 2 silos"):
        pf.synthesize(one, "flaim", 1.0, 1e-6, seed=0)
    two = silos_from(module_schema, [40, 40])
    for rate in (0, 1.5, -0.1):
        with pytest.raises(pf.InputError, match="^sample_rate must lie"):
            pf.synthesize(two, "distaim", 1.0, 1e-6, seed=0, sample_rate=rate)
    with pytest.raises(pf.InputError, match="variant"):
        pf.synthesize(two, "flaim", 1.0, 1e-6, seed=0, variant="bogus")
    with pytest.raises(pf.InputError, match="does not apply"):
        pf.synthesize(two, "distaim", 1.0, 1e-6, seed=0, variant="naive")
    with pytest.raises(pf.InputError, match="given twice"):
        pf.synthesize([two[0], two[0]], "flaim", 1.0, 1e-6, seed=0)


def test_a_rounds_sums_anneal_when_they_moved_the_model_less_than_the_rounds_noise():
    """``sum ||M'_q - M_q||_1 <= sqrt(2/pi) sum_q (sigma_q / sqrt(c)) n_q``: AIM's test for one
    sum; c sums at ``sigma sqrt(c)`` each are held to the round's ``sigma``; nothing measured, no
    annealing."""
    before, sigma = np.full(10, 5.0), 2.0
    edge = math.sqrt(2 / math.pi) * sigma * 10  # the expected L1 noise on 10 cells
    for moved, anneals in ((0.99 * edge, True), (1.01 * edge, False)):
        after = before + moved / 10
        assert core.should_anneal(before, after, sigma) is anneals
        assert core.sums_should_anneal([(before, after, sigma)]) is anneals
        two = [(before, after, sigma * math.sqrt(2)), (before, before, sigma * math.sqrt(2))]
        assert core.sums_should_anneal(two) is (moved <= 2 * edge)  # 20 cells at sigma
    assert core.sums_should_anneal([]) is False
