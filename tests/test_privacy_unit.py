"""A privacy unit (``--privacy-unit``, ``--max-rows-per-unit K``, ``--max-silos-per-unit M``): each silo
keeps at most K rows per unit, independently of the values; every sensitivity is K M times one row's;
the ledger states the unit and the audit recomputes every sensitivity from K and M; the identifier
never leaves the silo."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.accounting.unit import PrivacyUnit, unit_of
from privsyn_fed.audit import audit_ledger
from privsyn_fed.audit.unit import in_row_units
from privsyn_fed.common import InputError, OptionError
from privsyn_fed.schema import encode_frame
from privsyn_fed.silo import Silo, aim_score
from privsyn_fed.silo.units import keep_mask, unit_hashes

from .conftest import SCHEMA, assert_one_line_error, make_frame, run_cli, synth_argv

SECRET = "SECRETID"


def panel(n_units: int, seed: int, rows_per_unit=(1, 9), prefix: str = SECRET) -> pd.DataFrame:
    """Rows of ``n_units`` people, each with a random number of rows (a panel), identified by ``pid``."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(rows_per_unit[0], rows_per_unit[1], n_units)
    frame = make_frame(int(counts.sum()), seed)
    frame["pid"] = np.repeat([f"{prefix}-{seed}-{u:05d}" for u in range(n_units)], counts)
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)  # a unit's rows are scattered


def schema_obj() -> pf.Schema:
    return pf.Schema.from_dict(json.loads(json.dumps(SCHEMA)))


def mask_of(frame: pd.DataFrame, k: int, key: str) -> np.ndarray:
    return keep_mask(unit_hashes(frame["pid"], key, "pid", "t", 1), k, key)


# ---- the bounding --------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 5])
def test_each_unit_keeps_at_most_k_rows_and_units_with_fewer_keep_all(k):
    frame = panel(60, seed=k)
    keep = mask_of(frame, k, "0123456789abcdef")
    kept = frame["pid"][keep].value_counts()
    have = frame["pid"].value_counts()
    assert kept.max() <= k
    assert (kept == np.minimum(have[kept.index], k)).all()
    assert set(kept.index) == set(have.index)  # every unit keeps at least one row


def test_the_bounding_ignores_the_values_of_the_schema_columns():
    """Two tables that differ only in their values keep the same row positions."""
    a = panel(50, seed=3)
    b = make_frame(len(a), seed=99)
    b["pid"] = a["pid"]
    key = "00112233445566aa"
    schema = schema_obj()
    sa = Silo.from_frame(a, schema, "a", unit="pid", max_rows=2, unit_key=key)
    sb = Silo.from_frame(b, schema, "b", unit="pid", max_rows=2, unit_key=key)
    keep = mask_of(a, 2, key)
    assert keep.sum() < len(a)
    for frame, silo in ((a, sa), (b, sb)):
        codes, _, _ = encode_frame(frame.drop(columns="pid"), schema, "t", with_values=True)
        np.testing.assert_array_equal(silo.rows(), codes[keep])


def test_removing_one_unit_changes_no_other_units_rows():
    """The bounded tables of D and D minus one unit differ by that unit's kept rows only."""
    frame = panel(40, seed=5)
    key = "fedcba9876543210"
    keep = mask_of(frame, 3, key)
    for victim in frame["pid"].unique()[:10]:
        others = (frame["pid"] != victim).to_numpy()
        np.testing.assert_array_equal(mask_of(frame[others].reset_index(drop=True), 3, key), keep[others])


def test_the_key_changes_which_rows_are_kept():
    frame = panel(80, seed=6)
    assert (mask_of(frame, 1, "aaaaaaaaaaaaaaaa") != mask_of(frame, 1, "bbbbbbbbbbbbbbbb")).any()


def test_a_silo_read_from_disk_is_bounded_as_a_frame_is(tmp_path):
    frame = panel(70, seed=7)
    path = tmp_path / "s.csv"
    frame.to_csv(path, index=False)
    key = "0f0f0f0f0f0f0f0f"
    loaded = Silo.load(path, schema_obj(), chunk_rows=37, unit="pid", max_rows=2, unit_key=key)
    framed = Silo.from_frame(frame, schema_obj(), "f", unit="pid", max_rows=2, unit_key=key)
    np.testing.assert_array_equal(loaded.rows(), framed.rows())
    assert loaded.unit == ("pid", 2) and loaded.unit_dropped == len(frame) - loaded.true_size() > 0


def test_an_empty_identifier_is_refused_naming_the_row(tmp_path):
    frame = panel(5, seed=8)
    frame.loc[3, "pid"] = ""
    path = tmp_path / "s.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(InputError, match=r"row 5: the privacy unit column 'pid' is empty"):
        Silo.load(path, schema_obj(), unit="pid", max_rows=1)


# ---- sensitivities: D and D minus one unit (all its K rows, in up to M silos) -----------------------


def _silos(frames, k, key="1234567890abcdef"):
    return [
        Silo.from_frame(f, schema_obj(), f"s{i}", unit="pid", max_rows=k, unit_key=key) for i, f in enumerate(frames)
    ]


@pytest.mark.parametrize("k,m", [(1, 1), (3, 1), (2, 2), (4, 3)])
def test_marginals_and_scores_move_by_at_most_k_m_times_one_row(k, m):
    """A unit with rows in ``m`` silos: every marginal summed over the silos moves by at most ``K M``
    in L1 and in L2 (not sqrt), and AIM's score by at most ``K M w``."""
    rng = np.random.default_rng(100 * k + m)
    shared = [f"P-shared-{u}" for u in range(5)]
    frames = []
    for _ in range(m):  # five units present in every silo, with many rows in one cell
        extra = make_frame(12 * len(shared), int(rng.integers(1 << 30)))
        extra[["age", "sex", "region", "label"]] = [40, "F", "north", "no"]
        extra["pid"] = np.repeat(shared, 12)
        frames.append(pd.concat([panel(30, seed=int(rng.integers(1 << 30)), prefix="P"), extra], ignore_index=True))
    full = _silos(frames, k)
    cliques = [(0,), (2, 3), (0, 2, 4), ()]
    worst_l2 = 0.0
    for victim in shared[:3]:
        removed = _silos([f[f["pid"] != victim].reset_index(drop=True) for f in frames], k)
        for cl in cliques:
            a = sum(s.marginal(cl) for s in full)
            b = sum(s.marginal(cl) for s in removed)
            diff = (a - b).astype(float)
            assert np.abs(diff).sum() <= k * m and np.sqrt((diff**2).sum()) <= k * m
            worst_l2 = max(worst_l2, float(np.sqrt((diff**2).sum())))
            if cl:
                model = np.full(a.size, a.sum() / a.size)
                w = float(len(cl))
                sigma = 3.0
                du = aim_score(w, a, model, sigma) - aim_score(w, b, model, sigma)
                assert abs(du) <= k * m * w + 1e-9
    assert worst_l2 == k * m  # the bound is reached: L2 is K M, not sqrt(K M)


def _unit_pair(k, m, seed):
    """Bounded silos of D and of D minus one unit that has many rows in each of ``m`` silos."""
    rng = np.random.default_rng(seed)
    frames = []
    for _ in range(m):
        extra = make_frame(3 * k + 2, int(rng.integers(1 << 30)))
        extra["pid"] = "P-victim"
        frames.append(pd.concat([panel(25, seed=int(rng.integers(1 << 30)), prefix="P"), extra], ignore_index=True))
    full = _silos(frames, k)
    removed = _silos([f[f["pid"] != "P-victim"].reset_index(drop=True) for f in frames], k)
    return full, removed


@pytest.mark.parametrize("k,m", [(2, 1), (3, 2), (8, 3)])
def test_federated_scores_and_moments_move_by_at_most_k_m_times_one_row(k, m):
    """FLAIM's local scores (per silo: K times 2w or 4w), DistAIM's pooled score (2 K M w) and Fed-TDA's
    clipped second moments summed over the silos (K M B^2 in L2) on D and D minus one unit."""
    from privsyn_fed.methods.flaim import score_sensitivity
    from privsyn_fed.silo import ICDM, Encoding, SecondMomentsQuery
    from privsyn_fed.silo.scores import heterogeneity_gap, local_score

    schema = schema_obj()
    full, removed = _unit_pair(k, m, seed=10 * k + m)
    rng = np.random.default_rng(k)
    clique, w, sigma = (0, 2), 2.0, 4.0
    probs = rng.dirichlet(np.ones(schema.shape[0] * schema.shape[2]))
    proxy = [rng.dirichlet(np.ones(n)) for n in schema.shape]
    for a, b in zip(full, removed):  # each silo on its own rows
        for variant in ("naive", "private"):

            def u(s):
                gap = 0.0
                if variant == "private":
                    gap = heterogeneity_gap([s.marginal([i]) for i in range(len(schema.shape))], proxy, clique)
                return local_score(w, s.marginal(clique), probs, sigma, gap)

            assert abs(u(a) - u(b)) <= k * score_sensitivity(w, variant) + 1e-9

    def pooled(silos):
        counts = sum(s.marginal(clique) for s in silos)
        return aim_score(w, counts, sum(s.true_size() for s in silos) * probs, sigma)

    assert abs(pooled(full) - pooled(removed)) <= 2 * k * m * w + 1e-9
    # Fed-TDA: each row's encoding is drawn independently of the others, so D and D minus the unit
    # are compared with every other row's draws held fixed: the sums differ by the unit's own rows.
    bound = 3.0
    icdm = [ICDM(rng.dirichlet(np.ones(n))) for n in schema.shape]
    query = SecondMomentsQuery(Encoding(schema, icdm, [None] * len(schema.columns), bound), seed=7)
    diff = 0.0
    for a, b in zip(full, removed):  # the unit's rows are the last ones kept in each silo
        own = a.rows()[b.true_size() :]
        assert 1 <= len(own) <= k and np.array_equal(a.rows()[: b.true_size()], b.rows())
        diff = diff + sum(np.asarray(query(a.with_rows(row[None, :])), dtype=float) for row in own)
    assert np.sqrt((np.asarray(diff) ** 2).sum()) <= k * m * bound**2 + 1e-9


# ---- end to end: every method's ledger records K M times one row's sensitivities --------------


def _release(method, frames, k, m, epsilon=1.0, **extra):
    return pf.synthesize(
        frames,
        method=method,
        epsilon=epsilon,
        delta=1e-9,
        schema=schema_obj(),
        seed=11,
        privacy_unit="pid",
        max_rows_per_unit=k,
        max_silos_per_unit=m,
        **extra,
    )


@pytest.fixture(scope="module")
def frames():
    return [panel(120, seed=s) for s in (21, 22, 23)]


@pytest.fixture(scope="module")
def ledgers(frames):
    """Each method's ledger with K = 2, M = 2 (and a row-level one for comparison)."""
    out = {}
    for method in ("aim", "distaim", "flaim", "fedtda", "independent"):
        extra = {"rounds": 6} if method in ("aim", "distaim", "flaim") else {}
        out[method] = _release(method, frames, 2, 2, **extra).ledger
        out[method + "/row"] = pf.synthesize(
            [f.drop(columns="pid") for f in frames],
            method=method,
            epsilon=1.0,
            delta=1e-9,
            schema=schema_obj(),
            seed=11,
            **extra,
        ).ledger
    return out


@pytest.mark.parametrize("method", ["aim", "distaim", "flaim", "fedtda", "independent"])
def test_the_ledger_states_the_unit_and_passes_the_audit(method, ledgers):
    led = ledgers[method]
    assert led["neighbouring"] == "add/remove one unit ('pid') with at most 2 rows in each of at most 2 silos"
    assert led["privacy_unit"] == {
        "column": "pid",
        "max_rows_per_unit": 2,
        "max_silos_per_unit": 2,
        "sensitivity_factor": 4,
        "max_silos_bound": "enforced",
    }
    problems = audit_ledger(led).problems
    assert len(problems) == 1 and problems[0].startswith("SEEDED RUN"), problems
    assert led["rho_spent"] == pytest.approx(led["rho_budget"], rel=1e-9)


@pytest.mark.parametrize("method", ["aim", "distaim", "flaim", "fedtda", "independent"])
def test_every_sensitivity_is_k_m_times_the_row_one(method, ledgers):
    """Entry by entry, the unit's sensitivity is 4 (K M) times what the same step records for one row,
    and the noise grows so that the cost stays within the same budget."""
    unit, row = ledgers[method]["entries"], ledgers[method + "/row"]["entries"]
    assert [e["mechanism"] for e in unit][:3] == [e["mechanism"] for e in row][:3]
    first = unit[0]
    key = "sensitivity_l2" if first["mechanism"] == "gaussian" else "sensitivity"
    assert first[key] == pytest.approx(4 * row[0][key])
    for e in in_row_units(ledgers[method])["entries"]:  # back in row units, each is a sound row value
        if e["mechanism"] == "gaussian":
            assert e["sensitivity_l2"] >= 1 - 1e-12
    gaussians = [(u, r) for u, r in zip(unit, row) if u["mechanism"] == r["mechanism"] == "gaussian"]
    assert gaussians and all(u["sigma"] > r["sigma"] for u, r in gaussians)


def test_the_identifier_never_appears_in_any_output(frames, tmp_path):
    result = _release("flaim", frames, 3, 1, rounds=5)
    model = result.model.to_bytes()
    texts = [result.data.to_csv(index=False), json.dumps(result.ledger), model.decode("latin-1")]
    assert not any(SECRET in t for t in texts)
    assert "pid" not in result.data.columns and list(result.data.columns) == schema_obj().names


def test_planning_sees_k(frames):
    """The data-size-aware schedule plans from the noisy total and K: more rows per unit, more noise
    per statistic, fewer rounds (at an epsilon where one row per unit affords several)."""
    plans = []
    for k in (1, 8):
        led = _release("aim", frames, k, 1, epsilon=30.0, max_model_size=1.0, pgm_iters=50).ledger
        plans.append(led["details"]["schedule"])
        assert led["entries"][0]["query"].startswith("total number of rows")
        assert led["entries"][0]["sensitivity_l2"] == k
    assert plans[1]["noisy_total"] > plans[0]["noisy_total"]  # more rows are kept with K = 8 ...
    assert 0 < plans[1]["rounds"] < plans[0]["rounds"]  # ... but each is measured with 8x the noise


# ---- audit tampering ----------------------------------------------------------------------------


def _tampered(ledger, k=None, m=None):
    led = copy.deepcopy(ledger)
    unit = led["privacy_unit"]
    unit["max_rows_per_unit"] = k or unit["max_rows_per_unit"]
    unit["max_silos_per_unit"] = m or unit["max_silos_per_unit"]
    unit["sensitivity_factor"] = unit["max_rows_per_unit"] * unit["max_silos_per_unit"]
    led["neighbouring"] = PrivacyUnit("pid", unit["max_rows_per_unit"], unit["max_silos_per_unit"]).relation
    return led


@pytest.mark.parametrize("method", ["aim", "flaim", "fedtda", "independent", "distaim"])
@pytest.mark.parametrize("change", [{"k": 3}, {"m": 3}, {"k": 1, "m": 1}])
def test_a_ledger_whose_sensitivities_do_not_match_its_unit_fails(method, change, ledgers):
    problems = audit_ledger(_tampered(ledgers[method], **change)).problems
    assert any("sensitivity" in p or "sigma" in p or "noise" in p for p in problems), problems


def test_a_unit_record_that_disagrees_with_its_relation_fails(ledgers):
    led = copy.deepcopy(ledgers["aim"])
    led["neighbouring"] = "add/remove one record"
    assert any("privacy_unit states" in p for p in audit_ledger(led).problems)
    led = copy.deepcopy(ledgers["aim"])
    led["privacy_unit"]["sensitivity_factor"] = 2
    assert any("not a valid unit" in p for p in audit_ledger(led).problems)
    led = copy.deepcopy(ledgers["aim"])
    del led["privacy_unit"]
    assert any("neighbouring relation" in p for p in audit_ledger(led).problems)


def test_a_row_ledger_claiming_a_unit_fails(ledgers):
    led = copy.deepcopy(ledgers["independent/row"])
    led["privacy_unit"] = PrivacyUnit("pid", 2, 1).record()
    led["neighbouring"] = PrivacyUnit("pid", 2, 1).relation
    assert any("sensitivity" in p for p in audit_ledger(led).problems)


# ---- refusals ------------------------------------------------------------------------------------


def test_api_refusals(frames):
    with pytest.raises(OptionError, match="max_rows_per_unit must be a whole number of at least 1"):
        _release("aim", frames, 0, 1)
    with pytest.raises(OptionError, match="max_rows_per_unit bounds a privacy unit"):
        unit_of(None, 2, None)
    with pytest.raises(OptionError, match="'age' is also a schema column"):
        pf.synthesize(frames, schema=schema_obj(), privacy_unit="age")
    with pytest.raises(OptionError, match="max_silos_per_unit 4 is more than the 3 silo"):
        _release("aim", frames, 1, 4)
    with pytest.raises(InputError, match="no column 'person'"):
        pf.synthesize(frames, schema=schema_obj(), privacy_unit="person")
    from privsyn_fed.aggregation import InProcessAggregator
    from privsyn_fed.release import ReleaseRequest, run_release

    bounded = _silos(frames, 2)
    request = ReleaseRequest.of(
        "flaim", 1.0, 1e-9, schema_obj(), [s.name for s in bounded], privacy_unit="pid", max_rows_per_unit=2
    )
    with pytest.raises(OptionError, match="privacy_unit with a given in-process aggregator is not available"):
        run_release(request, bounded, aggregator=InProcessAggregator(bounded))
    unbounded = Silo.from_frame(frames[0], schema_obj(), "x")
    with pytest.raises(InputError, match="read without a privacy unit"):
        pf.synthesize([unbounded], schema=schema_obj(), privacy_unit="pid")


@pytest.fixture
def panel_paths(tmp_path):
    paths = []
    for s in (31, 32):
        p = tmp_path / f"silo{s}.csv"
        panel(40, seed=s).to_csv(p, index=False)
        paths.append(p)
    return paths


@pytest.mark.parametrize(
    "options,fragment",
    [
        ({"privacy_unit": "person"}, "no column 'person' (the privacy unit)"),
        ({"privacy_unit": "age"}, "--privacy-unit 'age' is also a schema column"),
        ({"privacy_unit": "pid", "max_rows_per_unit": 0}, "must be at least 1"),
        ({"max_rows_per_unit": 2}, "--max-rows-per-unit bounds a privacy unit: give --privacy-unit too"),
        ({"privacy_unit": "pid", "max_silos_per_unit": 3}, "--max-silos-per-unit 3 is more than the 2 silo"),
    ],
)
def test_cli_refusals_are_one_line(options, fragment, schema_path, panel_paths, tmp_path, capsys):
    out = tmp_path / "out.csv"
    proc = run_cli(*synth_argv("aim", schema=schema_path, silos=panel_paths, out=out, **options))
    err = proc.stderr.strip().splitlines()[-1] if proc.returncode == 2 and "usage:" in proc.stderr else None
    if err is not None:  # argparse's own refusal of a value: usage line, then the error
        assert fragment in err
    else:
        assert_one_line_error(proc, fragment)
    assert not out.exists()


def test_cli_release_with_a_unit(schema_path, panel_paths, tmp_path):
    out = tmp_path / "out.csv"
    argv = synth_argv(
        "independent",
        schema=schema_path,
        silos=panel_paths,
        out=out,
        seed=3,
        privacy_unit="pid",
        max_rows_per_unit=4,
        report=tmp_path / "report.md",
    )
    proc = run_cli(*argv)
    assert proc.returncode == 0, proc.stderr
    led = json.loads(out.with_suffix(".ledger.json").read_text())
    assert led["privacy_unit"]["max_rows_per_unit"] == 4 and led["entries"][0]["sensitivity_l2"] == pytest.approx(
        4 * np.sqrt(5)
    )
    for text in (out.read_text(), out.with_suffix(".ledger.json").read_text(), proc.stdout, proc.stderr):
        assert SECRET not in text
    report = (tmp_path / "report.md").read_text()
    assert "one unit ('pid') with at most 4 rows" in report and "protected less" not in report
    help_text = run_cli("synth", "--help").stdout
    assert "--privacy-unit COLUMN" in help_text and "--max-rows-per-unit K" in help_text
    assert "--max-silos-per-unit M" in help_text


def test_a_row_level_report_says_a_person_with_several_rows_is_protected_less(ledgers):
    from privsyn_fed.audit import render_report

    text = render_report(ledgers["independent/row"], "r.md")
    assert "a person with several rows is protected less" in text


# ---- over MPC: every party bounds its own rows and costs its steps for the unit -----------------


def test_the_release_request_carries_the_unit_and_a_party_checks_it():
    from privsyn_fed.mpc.policy import Refused
    from privsyn_fed.mpc.request import ReleaseRequest

    request = ReleaseRequest("distaim", 1.0, 1e-9, "0" * 64, False, 3, 1, PrivacyUnit("pid", 2, 2, False))
    wire = request.to_wire()
    assert wire["privacy_unit"] == {
        "column": "pid",
        "max_rows_per_unit": 2,
        "max_silos_per_unit": 2,
        "sensitivity_factor": 4,
        "max_silos_bound": "declared",
    }
    back = ReleaseRequest.from_wire(wire, 3)
    assert back == request and back.factor == 4
    assert ReleaseRequest.from_wire({k: v for k, v in wire.items() if k != "privacy_unit"}, 3).factor == 1
    for bad in (
        {**wire["privacy_unit"], "max_rows_per_unit": 0},
        {**wire["privacy_unit"], "sensitivity_factor": 1},
        {**wire["privacy_unit"], "max_silos_per_unit": 4, "sensitivity_factor": 8},
        "pid",
    ):
        with pytest.raises(Refused, match="privacy unit"):
            ReleaseRequest.from_wire({**wire, "privacy_unit": bad}, 3)


def test_a_party_costs_each_step_at_k_m_times_one_record():
    from privsyn_fed.mpc.party_costs import PoolState, measure_charge, noisy_sum_charge
    from privsyn_fed.silo import MarginalsQuery

    schema = schema_obj()
    q = MarginalsQuery(((0,), (2,), (3,)))
    row = noisy_sum_charge(q, {"among": [0, 1], "sigma": 4.0}, schema, 1, "independent", 2)
    unit = noisy_sum_charge(q, {"among": [0, 1], "sigma": 4.0}, schema, 1, "independent", 2, 6.0)
    assert row is not None and unit is not None and unit.sensitivity == pytest.approx(6 * row.sensitivity)
    pool = PoolState(10, sizes=[8, 2], mine=True)
    cells = {"cells": np.arange(8, dtype=np.int64)}
    one, six = measure_charge({"sigma": 3.0}, cells, pool), measure_charge({"sigma": 3.0}, cells, pool, 6.0)
    assert one is not None and six is not None and six.sensitivity == 6 * one.sensitivity


def test_mpc_end_to_end_with_a_unit_column(tmp_path):
    paths = []
    for s in (41, 42, 43):
        paths.append(tmp_path / f"s{s}.csv")
        panel(40, seed=s).to_csv(paths[-1], index=False)
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps(SCHEMA))
    out = tmp_path / "out.csv"
    argv = synth_argv(
        "distaim",
        schema=schema_path,
        silos=paths,
        out=out,
        mpc=True,
        rounds=2,
        collusion=1,
        privacy_unit="pid",
        max_rows_per_unit=2,
        max_silos_per_unit=2,
        report=tmp_path / "report.md",
    )
    run = run_cli(*argv, timeout=300)
    assert run.returncode == 0, run.stderr
    # over MPC no process sees the other silos' units: M is the user's declaration, and says so
    assert "in at most 2 silo(s) (declared, not checked on the data)" in (tmp_path / "report.md").read_text()
    ledger = json.loads(out.with_suffix(".ledger.json").read_text())
    copies = sorted(tmp_path.glob("s4*.csv.ledgers/*.ledger.json"))
    assert len(copies) == 2  # parties 1 and 2 keep their own copies
    relation = "add/remove one unit ('pid') with at most 2 rows in each of at most 2 silos"
    for path in [out.with_suffix(".ledger.json"), *copies]:
        led = json.loads(path.read_text())
        assert led["neighbouring"] == relation and led["privacy_unit"]["sensitivity_factor"] == 4
        assert led["privacy_unit"]["max_silos_bound"] == "declared"
        audited = run_cli("audit", path)
        assert audited.returncode == 0 and "declared by the release's user, not checked on the data" in audited.stdout
        gaussians = [e for e in led["entries"] if e["mechanism"] == "gaussian"]
        assert gaussians and all(e["sensitivity_l2"] == pytest.approx(4.0) for e in gaussians)
        tampered = _tampered(led, k=1)
        assert any("sensitivity" in p for p in audit_ledger(tampered).problems), path
    assert any(e["mechanism"] == "exponential" and e["where"] == "mpc" for e in ledger["entries"])
    outputs = [out, *copies, out.with_suffix(".ledger.json")]
    assert not any(SECRET in p.read_text() for p in outputs)
    assert SECRET not in run.stdout + run.stderr


ROOT = Path(__file__).resolve().parents[1]


# ---- what the docs say of several rows per person -----------------------------------------------------
@pytest.mark.parametrize("doc", ["README.md", "SECURITY.md"])
def test_the_docs_say_what_the_guarantee_means_for_several_rows_per_person(doc):
    text = " ".join((ROOT / doc).read_text().split())
    assert "group privacy" in text and "rows per person" in text
