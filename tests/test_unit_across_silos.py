"""A person in several silos: in process the release keeps each unit in at most M silos (a keyed
choice of silos that ignores values), so D and D minus one unit spread over more silos than M
differ by at most K rows in each of at most M silos, for every method; over MPC M has no default
and is recorded as a declaration; a site's policy can require a unit and bound the declared M."""

from __future__ import annotations

import collections
import copy
import json

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.accounting.unit import PrivacyUnit, unit_of
from privsyn_fed.audit import audit_ledger
from privsyn_fed.common import InputError, OptionError
from privsyn_fed.release import run as lifecycle
from privsyn_fed.silo.units import silo_masks, unit_hashes

from .conftest import SCHEMA, assert_one_line_error, make_frame, run_cli, synth_argv

METHODS = ["aim", "distaim", "flaim", "fedtda", "independent"]


def shared_people(n_units: int, n_silos: int, seed: int, rows=(1, 4)) -> list[pd.DataFrame]:
    """Silos of one clinic network: each person is seen at a random set of 1 to ``n_silos`` silos,
    with 1 to 3 rows at each; ``pid`` names the person (the same text in every silo)."""
    rng = np.random.default_rng(seed)
    parts: list[list[str]] = [[] for _ in range(n_silos)]
    for u in range(n_units):
        where = rng.choice(n_silos, size=int(rng.integers(1, n_silos + 1)), replace=False)
        for s in where:
            parts[s] += [f"P{seed}-{u:04d}"] * int(rng.integers(rows[0], rows[1]))
    out = []
    for s, ids in enumerate(parts):
        frame = make_frame(len(ids), seed * 10 + s)
        frame["pid"] = ids
        out.append(frame.sample(frac=1.0, random_state=s).reset_index(drop=True))
    return out


def schema_obj() -> pf.Schema:
    return pf.Schema.from_dict(json.loads(json.dumps(SCHEMA)))


def without(frames: list[pd.DataFrame], pid: str) -> list[pd.DataFrame]:
    return [f[f["pid"] != pid].reset_index(drop=True) for f in frames]


def widest_unit(frames: list[pd.DataFrame]) -> str:
    """The person seen at the most silos."""
    seen = collections.Counter(p for f in frames for p in set(f["pid"]))
    return seen.most_common(1)[0][0]


def rows_of(silo) -> collections.Counter:
    return collections.Counter(map(tuple, silo.rows().tolist()))


# ---- the choice of silos ----------------------------------------------------------------------


@pytest.mark.parametrize("m", [1, 2, 3])
def test_each_unit_keeps_its_rows_in_at_most_m_silos(m):
    frames = shared_people(200, 4, seed=m)
    key = "0123456789abcdef"
    hashes = [unit_hashes(f["pid"], key, "pid", f"s{i}", 1) for i, f in enumerate(frames)]
    masks = silo_masks(hashes, m, key)
    kept_at = collections.defaultdict(set)
    seen_at = collections.defaultdict(set)
    for s, (f, mask) in enumerate(zip(frames, masks)):
        for pid, keep in zip(f["pid"], mask):
            seen_at[pid].add(s)
            if keep:
                kept_at[pid].add(s)
    assert max(len(v) for v in seen_at.values()) > m  # the table really spreads people wider than M
    for pid, silos in seen_at.items():
        assert len(kept_at[pid]) == min(m, len(silos))  # never more than M, and never fewer than it could
        assert kept_at[pid] <= silos
    for f, mask in zip(frames, masks):  # a unit keeps all or none of its rows in a silo
        assert (f.assign(k=mask).groupby("pid")["k"].nunique() == 1).all()


def test_the_choice_of_silos_ignores_values_and_other_units():
    frames = shared_people(150, 3, seed=7)
    key = "fedcba9876543210"
    pid = widest_unit(frames)
    masks = silo_masks([unit_hashes(f["pid"], key, "pid", "s", 1) for f in frames], 1, key)
    fewer = without(frames, pid)
    others = silo_masks([unit_hashes(f["pid"], key, "pid", "s", 1) for f in fewer], 1, key)
    for f, mask, g, other in zip(frames, masks, fewer, others):
        np.testing.assert_array_equal(mask[(f["pid"] != pid).to_numpy()], other)  # nobody else moves
    revalued = [make_frame(len(f), 99 + i).assign(pid=f["pid"]) for i, f in enumerate(frames)]
    again = silo_masks([unit_hashes(f["pid"], key, "pid", "s", 1) for f in revalued], 1, key)
    for a, b in zip(masks, again):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("k,m", [(1, 1), (2, 1), (1, 2), (3, 2)])
@pytest.mark.parametrize("seed", range(4))
def test_d_and_d_minus_a_unit_spread_wider_than_m_differ_by_k_rows_in_m_silos(k, m, seed):
    frames = shared_people(80, 4, seed=seed)
    pid = widest_unit(frames)
    assert sum(pid in set(f["pid"]) for f in frames) > m
    unit = unit_of("pid", k, m)
    full = lifecycle.read_silos(frames, schema_obj(), unit, seed=seed)
    fewer = lifecycle.read_silos(without(frames, pid), schema_obj(), unit, seed=seed)
    touched = 0
    for a, b in zip(full, fewer):
        extra = rows_of(a) - rows_of(b)
        assert not (rows_of(b) - rows_of(a))  # D minus the unit keeps nothing D does not
        assert sum(extra.values()) <= k
        touched += bool(extra)
    assert touched <= m


# ---- every method: the silos it reads, and what its ledger states ------------------------------


def _release(method, frames, seed=5, k=2):
    opts = {"rounds": 6} if method in ("aim", "distaim", "flaim") else {}
    return pf.synthesize(
        frames,
        method=method,
        epsilon=1.0,
        delta=1e-9,
        schema=schema_obj(),
        seed=seed,
        privacy_unit="pid",
        max_rows_per_unit=k,
        max_silos_per_unit=1,
        **opts,
    )


@pytest.mark.parametrize("method", METHODS)
def test_every_method_reads_d_and_d_minus_a_wide_unit_within_k_m_rows(method, monkeypatch):
    frames = shared_people(60, 3, seed=11)
    pid = widest_unit(frames)
    read = []

    def spy(*args, **kwargs):
        silos = real(*args, **kwargs)
        read.append(silos)
        return silos

    real = lifecycle.read_silos
    monkeypatch.setattr(lifecycle, "read_silos", spy)
    ledger = _release(method, frames).ledger
    _release(method, without(frames, pid))
    full, fewer = read
    shape = schema_obj().shape
    flat = lambda silos: np.concatenate(
        [
            np.bincount(  # noqa: E731
                np.ravel_multi_index(s.rows().T, shape), minlength=int(np.prod(shape))
            )
            for s in silos
        ]
    )
    assert np.abs(flat(full) - flat(fewer)).sum() <= 2 * 1  # the whole histogram of every silo: K M rows
    assert ledger["privacy_unit"]["max_silos_bound"] == "enforced"
    report = audit_ledger(ledger)
    assert not any("max_silos" in p or "silo(s) per unit" in w for p in report.problems for w in report.warnings)
    assert report.summary["privacy_unit"].endswith("in at most 1 silo(s) (enforced)")


def test_the_charged_sensitivity_covers_a_person_at_several_clinics(monkeypatch):
    """The 1-way marginals the ledger charges for move by no more than its sensitivity when one
    person seen at every clinic is removed (without the bound across silos, they moved further)."""
    frames = shared_people(60, 3, seed=12, rows=(3, 4))
    pid = widest_unit(frames)
    read = []
    real = lifecycle.read_silos
    monkeypatch.setattr(lifecycle, "read_silos", lambda *a, **kw: read.append(real(*a, **kw)) or read[-1])
    ledger = _release("independent", frames, k=3).ledger
    _release("independent", without(frames, pid), k=3)
    schema = schema_obj()
    oneways = lambda silos: np.concatenate(
        [  # noqa: E731
            np.bincount(np.concatenate([s.rows()[:, j] for s in silos]), minlength=n)
            for j, n in enumerate(schema.shape)
        ]
    )
    moved = float(np.linalg.norm(oneways(read[0]) - oneways(read[1])))
    charged = max(e["sensitivity_l2"] for e in ledger["entries"] if e["mechanism"] == "gaussian")
    assert moved > 0 and moved <= charged + 1e-9


def test_silos_read_before_the_release_cannot_be_bounded_across_silos():
    frames = shared_people(40, 3, seed=13)
    silos = [pf.Silo.from_frame(f, schema_obj(), f"s{i}", unit="pid", max_rows=2) for i, f in enumerate(frames)]
    with pytest.raises(OptionError, match="holds no identifiers|hold no identifiers"):
        pf.synthesize(silos, method="independent", schema=schema_obj(), seed=1, privacy_unit="pid", max_rows_per_unit=2)
    # with M at least the number of silos there is nothing to match: accepted, and enforced
    led = pf.synthesize(
        silos,
        method="independent",
        schema=schema_obj(),
        seed=1,
        privacy_unit="pid",
        max_rows_per_unit=2,
        max_silos_per_unit=3,
    ).ledger
    assert led["privacy_unit"]["max_silos_bound"] == "enforced"


def _files(tmp_path, frames):
    """The silos as CSV files, and the schema's file."""
    paths = []
    for i, f in enumerate(frames):
        paths.append(tmp_path / f"clinic{i}.csv")
        f.to_csv(paths[-1], index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    return paths, schema


def test_the_command_line_bounds_people_across_silo_files(tmp_path):
    paths, schema = _files(tmp_path, shared_people(60, 3, seed=14))
    out = tmp_path / "out.csv"
    store = ["--budget-store", tmp_path / "b.db", "--dataset-id", "clinics", "--total-epsilon", "3"]
    proc = run_cli(*synth_argv("independent", schema=schema, silos=paths, out=out, privacy_unit="pid"), *store)
    assert proc.returncode == 0, proc.stderr
    assert "other silo(s) (--max-silos-per-unit) were left out" in proc.stderr
    audited = run_cli("audit", out.with_suffix(".ledger.json"))
    assert "in at most 1 silo(s) (enforced)" in audited.stdout and "WARNING" not in audited.stdout
    shown = run_cli("budget", "show", *store[:2]).stdout
    assert "privacy unit 'pid': at most 1 row(s) per silo (enforced), in at most 1 silo(s) (enforced)" in shown


# ---- over MPC: declared, and a site's policy ---------------------------------------------------


def test_over_mpc_the_silo_bound_has_no_default():
    with pytest.raises(OptionError, match="declare"):
        unit_of("pid", 2, None, mpc=True)
    assert unit_of("pid", 2, 3, mpc=True) == PrivacyUnit("pid", 2, 3, silos_enforced=False)
    assert unit_of("pid", 2, None).max_silos == 1 and unit_of("pid", 2, None).silos_enforced


def test_the_command_line_refuses_a_unit_over_mpc_without_m(tmp_path):
    paths, schema = _files(tmp_path, shared_people(20, 3, seed=15))
    out = tmp_path / "out.csv"
    argv = synth_argv("distaim", schema=schema, silos=paths, out=out, mpc=True, privacy_unit="pid")
    assert_one_line_error(run_cli(*argv), "--max-silos-per-unit")
    assert not out.exists() and not out.with_suffix(".ledger.json").exists()


def _policy(tmp_path, unit_rule):
    from privsyn_fed.mpc.policy import load_policy

    path = tmp_path / "policy.json"
    path.write_text(
        json.dumps(
            {
                "max_epsilon": 2.0,
                "max_delta": 1e-6,
                "methods": ["distaim"],
                "schema_sha256": "0" * 64,
                "privacy_unit": unit_rule,
            }
        )
    )
    return load_policy(path)


def test_a_site_policy_requires_a_unit_and_bounds_the_declared_m(tmp_path):
    from privsyn_fed.mpc.request import ReleaseRequest

    policy = _policy(tmp_path, {"column": "pid", "min_silos_per_unit": 2, "max_silos_per_unit": 4})

    def request(unit):
        return ReleaseRequest("distaim", 1.0, 1e-9, "0" * 64, False, 6, 5, unit)

    assert "requires privacy unit 'pid'" in policy.refusal(request(None))
    assert "requires privacy unit 'pid'" in policy.refusal(request(PrivacyUnit("mrn", 1, 3, False)))
    assert "min_silos_per_unit is 2" in policy.refusal(request(PrivacyUnit("pid", 1, 1, False)))
    assert "max_silos_per_unit 4" in policy.refusal(request(PrivacyUnit("pid", 1, 5, False)))
    assert policy.refusal(request(PrivacyUnit("pid", 2, 3, False))) is None
    assert _policy(tmp_path, {"column": "pid"}).refusal(request(PrivacyUnit("pid", 1, 6, False))) is None


@pytest.mark.parametrize(
    "rule,fragment",
    [
        ("pid", "must be an object with a 'column'"),
        ({"column": "pid", "silos": 2}, "unknown field 'privacy_unit.silos'"),
        ({"column": "pid", "min_silos_per_unit": 0}, "privacy_unit.min_silos_per_unit' must be a whole number"),
        ({"column": "pid", "min_silos_per_unit": 3, "max_silos_per_unit": 2}, "is above its max_silos_per_unit"),
    ],
)
def test_a_bad_unit_rule_in_a_policy_is_one_line(rule, fragment, tmp_path):
    with pytest.raises(InputError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        _policy(tmp_path, rule)


# ---- the audit: enforced where it can be, declared where it cannot -----------------------------


@pytest.fixture(scope="module")
def unit_ledger():
    return _release("independent", shared_people(40, 3, seed=16)).ledger


def test_the_audit_refuses_m_enforced_over_mpc(unit_ledger):
    led = copy.deepcopy(unit_ledger)
    led["details"]["mpc"] = {"parties": 3, "collusion": 2, "provider": "TTP", "debug": False, "noise": "x"}
    assert any("can only be declared" in p for p in audit_ledger(led).problems)


def test_the_audit_warns_of_a_declared_or_unqualified_m(unit_ledger):
    for bound, says in (("declared", "declared by the release's user"), (None, "not recorded as enforced")):
        led = copy.deepcopy(unit_ledger)
        if bound is None:
            del led["privacy_unit"]["max_silos_bound"]
        else:
            led["privacy_unit"]["max_silos_bound"] = bound
        report = audit_ledger(led)
        assert any(says in w for w in report.warnings)
        assert not any("max_silos" in p for p in report.problems)
    led = copy.deepcopy(unit_ledger)
    led["privacy_unit"]["max_silos_bound"] = "checked"
    assert any("max_silos_bound is 'checked'" in p for p in audit_ledger(led).problems)
