"""A release's model, kept: exact conditioning of the junction tree, samples that follow the model,
the saved file checked against its ledger, and `privsyn-fed sample` spending nothing."""

from __future__ import annotations

import io
import json
import sqlite3
import zipfile

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privsyn_fed as pf
from privsyn_fed.model import CopulaModel, GraphicalModel, conditions_from
from privsyn_fed.model.factor_tree import JunctionTree

from .conftest import SCHEMA, assert_one_line_error, make_frame, run_cli, synth_argv


def _chain(seed: int) -> tuple[JunctionTree, np.ndarray]:
    """A random junction tree (A,B) <- (B,C) <- (C,D) and its joint, computed by brute force."""
    rng = np.random.default_rng(seed)
    ab = rng.dirichlet(np.ones(6)).reshape(2, 3)
    c_given_b = rng.dirichlet(np.ones(4), size=3)  # (B, C)
    d_given_c = rng.dirichlet(np.ones(2), size=4)  # (C, D)
    d_given_c[1] = [1.0, 0.0]  # a structural zero
    tree = JunctionTree([(("C", "D"), d_given_c), (("B", "C"), c_given_b), (("A", "B"), ab)], [1, 2, -1], 1000.0)
    joint = np.einsum("ab,bc,cd->abcd", ab, c_given_b, d_given_c)
    return tree, joint


def _joint(tree: JunctionTree) -> np.ndarray:
    operands = []
    for clique, table in tree.factors:
        operands += [table, ["ABCD".index(a) for a in clique]]
    return np.einsum(*operands, [0, 1, 2, 3])


def test_conditioning_the_junction_tree_is_exact():
    tree, joint = _chain(1)
    assert np.allclose(_joint(tree), joint)
    w_a, w_d = np.array([0.25, 1.0]), np.array([0.0, 1.0])
    given, p = tree.conditioned({"A": w_a, "D": w_d})
    weighted = joint * w_a[:, None, None, None] * w_d[None, None, None, :]
    assert p == pytest.approx(weighted.sum())
    assert np.allclose(_joint(given), weighted / weighted.sum())
    # evidence the model gives no mass: probability 0, and the model refuses to sample it
    _, p = tree.conditioned({"C": np.array([0.0, 1.0, 0.0, 0.0]), "D": np.array([0.0, 1.0])})
    assert p == 0


def test_samples_follow_the_model_and_its_conditionals():
    """Chi-square of 40,000 draws against the model's joint (and a conditional): the stratified
    draws have the model's distribution, and a cell of probability 0 is never drawn."""
    tree, joint = _chain(2)
    rng = np.random.default_rng(7)
    for evidence in ({}, {"A": np.array([0.0, 1.0]), "C": np.array([1.0, 1.0, 0.0, 0.5])}):
        model, _ = tree.conditioned(evidence)
        expected = _joint(model).ravel()
        codes = model.sample_codes(40_000, rng, ["A", "B", "C", "D"])
        counts = np.bincount(np.ravel_multi_index(codes.T, joint.shape), minlength=joint.size)
        assert counts[expected == 0].sum() == 0
        keep = expected > 0
        _, pvalue = stats.chisquare(counts[keep], expected[keep] / expected[keep].sum() * counts.sum())
        assert pvalue > 1e-3, pvalue


def test_a_numeric_range_weights_each_bin_by_the_share_of_its_values_inside():
    schema = pf.Schema.from_dict(SCHEMA)
    (age,) = conditions_from({"age": (30, 40)}, schema)
    col = schema.columns[0]  # whole numbers 18..90 in 8 bins
    w = age.weights(schema)
    lo, hi = pf.schema.bin_edges(col)
    for b in range(col.n_bins):
        inside = max(0, min(hi[b], 40) - max(lo[b], 30) + 1)
        assert w[b] == pytest.approx(inside / (hi[b] - lo[b] + 1))
    for bad, message in (
        ({"age": (50, 40)}, "is empty"),
        ({"income": 5.0}, "has probability 0; give a range"),
        ({"sex": "X"}, "category 'X' is not in the schema"),
        ({"age": [20, 30]}, "one number or one range"),
        ({"nope": 1}, "no column 'nope'"),
    ):
        with pytest.raises(pf.InputError, match=message):
            conditions_from(bad, schema)


@pytest.fixture(scope="module")
def frames():
    return [make_frame(400, 0), make_frame(300, 1)]


RELEASES = {
    "independent": {},
    "fedtda": {},
    "aim": {"rounds": 6, "workload_size": 4},
    "flaim": {"rounds": 2, "workload_size": 3},
    "distaim": {"rounds": 2, "workload_size": 3},
}


@pytest.mark.parametrize("method", list(RELEASES))
def test_a_saved_model_round_trips_and_samples_given_public_values(method, frames, tmp_path):
    schema = pf.Schema.from_dict(SCHEMA)
    model = pf.Synthesizer(method, epsilon=2.0, delta=1e-9, **RELEASES[method]).fit(frames, schema=schema)
    assert model.ledger["details"]["model_sha256"] == model.digest()
    path = tmp_path / "release.model"
    model.save(path)
    with pytest.raises(pf.InputError, match="already exists"):
        model.save(path)
    loaded = pf.load_model(path)
    assert loaded.ledger == model.ledger and loaded.method == method
    pd.testing.assert_frame_equal(loaded.sample(500, seed=4), model.sample(500, seed=4))
    rows = loaded.sample(2_000, seed=5, where={"sex": "F", "age": (30, 40), "region": ["north", None]})
    assert len(rows) == 2_000 and set(rows["sex"]) == {"F"}
    assert rows["age"].between(30, 40).all()
    assert (rows["region"].isna() | (rows["region"] == "north")).all()  # north or missing, in the model's shares
    assert list(rows.columns) == schema.names


def test_the_staged_model_holds_the_ledger_as_written_even_when_the_clock_ticks(frames, tmp_path, monkeypatch):
    """Each reading of the clock a second later: the model staged before the ledger is finished
    still holds the finished ledger, stamp included, and so does the result."""
    import itertools

    from privsyn_fed.accounting import ledger as ledger_module
    from privsyn_fed.common import Staged
    from privsyn_fed.release import ReleaseRequest, run_release

    clock = (f"2026-01-01T00:{s // 60:02d}:{s % 60:02d}+00:00" for s in itertools.count())
    monkeypatch.setattr(ledger_module, "_now", lambda: next(clock))
    path, kept = tmp_path / "release.ledger.json", {}

    def write_outputs(result, final_ledger):
        kept["ledger"] = final_ledger
        staged = Staged()
        staged.add(tmp_path / "release.model", lambda fh: fh.write(b"x"), binary=True)
        return staged

    request = ReleaseRequest.of("independent", 1.0, 1e-9, pf.Schema.from_dict(SCHEMA), ["a", "b", "c"][: len(frames)])
    result = run_release(request, frames, ledger_path=path, stage=write_outputs)
    on_disk = json.loads(path.read_text())
    assert kept["ledger"] == on_disk == result.ledger
    assert on_disk["created"] < on_disk["updated"]


def test_the_copula_conditions_by_rejection_with_the_models_conditional(frames):
    """Rows of the copula given sex=F against the copula's unconditioned rows filtered to sex=F:
    the region distributions agree (chi-square, two samples)."""
    schema = pf.Schema.from_dict(SCHEMA)
    model = pf.Synthesizer("fedtda", epsilon=2.0, delta=1e-9).fit(frames, schema=schema, seed=11)
    assert isinstance(model.sampler, CopulaModel)
    given = model.sample(20_000, seed=1, where={"sex": "F"})
    plain = model.sample(60_000, seed=2)
    plain = plain[plain["sex"] == "F"]
    table = pd.crosstab(
        np.r_[np.zeros(len(given)), np.ones(len(plain))], pd.concat([given, plain])["region"].fillna("-").to_numpy()
    )
    assert stats.chi2_contingency(table.to_numpy())[1] > 1e-3
    with pytest.raises(pf.InputError, match=r"none of 20,000 rows drawn from the model meets it"):
        model.sample(10, where={"age": (90, 90), "income": (99.9, 100), "sex": "F", "label": "no"})


def test_the_synthesizer_checks_its_options_before_any_data():
    for kwargs, message in (
        ({"alpha": 2}, "alpha must lie in"),
        ({"nope": 1}, "option 'nope' does not apply to method aim"),
        ({"epsilon": 0}, "epsilon must be a positive number"),
        ({"method": "gan"}, "method must be one of"),
    ):
        with pytest.raises(pf.InputError, match=message) as refused:
            pf.Synthesizer(**{"method": "aim", **kwargs})
        assert "--" not in str(refused.value)
    with pytest.raises(pf.InputError, match="fit the synthesizer first"):
        pf.Synthesizer().sample(10)


def test_a_condition_of_probability_zero_is_refused(frames):
    schema = pf.Schema.from_dict(SCHEMA)
    probs = [np.full(n, 1.0 / n) for n in schema.shape]
    probs[2] = np.array([1.0, 0.0])  # the model never draws sex=M
    model = GraphicalModel.independent(probs, schema, 100.0)
    with pytest.raises(pf.InputError, match="sex = M has probability 0 under the model"):
        model.given(conditions_from({"sex": "M"}, schema))


def _rewrite(path, change):
    """The model file at ``path`` with its meta and arrays passed through ``change``."""
    with np.load(path, allow_pickle=False) as z:
        meta, arrays = json.loads(str(z["meta"])), {k: z[k] for k in z.files if k != "meta"}
    change(meta, arrays)
    buf = io.BytesIO()
    np.savez(buf, meta=np.array(json.dumps(meta)), **arrays)
    path.write_bytes(buf.getvalue())


def test_a_tampered_or_unaudited_model_is_refused(frames, tmp_path):
    schema = pf.Schema.from_dict(SCHEMA)
    path = tmp_path / "m.model"
    pf.Synthesizer("independent", epsilon=1.0, delta=1e-9).fit(frames, schema=schema).save(path)
    good = path.read_bytes()

    def more_mass(meta, arrays):
        arrays["factor0"] = arrays["factor0"][::-1].copy()

    def spent_less(meta, arrays):
        meta["ledger"]["epsilon"] /= 2

    def other_method(meta, arrays):
        meta["method"] = "aim"

    for change, message in (
        (more_mass, "model digest"),
        (spent_less, "its ledger does not audit"),
        (other_method, "ledger's method"),
    ):
        path.write_bytes(good)
        _rewrite(path, change)
        with pytest.raises(pf.InputError, match=message):
            pf.load_model(path)
    # a member outside the documented set is refused by name, unread
    path.write_bytes(good)
    with zipfile.ZipFile(path, "a") as z, z.open("evil.npy", "w") as fh:
        np.lib.format.write_array(fh, np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(pf.InputError, match="'evil' outside a model's documented contents, refused"):
        pf.load_model(path)
    # an array that would unpickle (run code) is never loaded
    with zipfile.ZipFile(io.BytesIO(good)) as src, zipfile.ZipFile(path, "w") as z:
        for info in src.infolist():
            if info.filename != "factor0.npy":
                z.writestr(info, src.read(info))
        with z.open("factor0.npy", "w") as fh:
            np.lib.format.write_array(fh, np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(pf.InputError, match="an array that only unpickling could read, refused") as refused:
        pf.load_model(path)
    assert "allow_pickle" not in str(refused.value)  # no advice to load it unsafely
    (tmp_path / "table.csv").write_text("a,b\n1,2\n")
    with pytest.raises(pf.InputError, match=r"not a privsyn-fed model file \(not an .npz archive\)"):
        pf.load_model(tmp_path / "table.csv")
    # a seeded release is not private: its model does not load either
    seeded = pf.Synthesizer("independent", epsilon=1.0, delta=1e-9).fit(frames, schema=schema, seed=3)
    seeded.save(tmp_path / "seeded.model")
    with pytest.raises(pf.InputError, match="SEEDED RUN"):
        pf.load_model(tmp_path / "seeded.model")


def test_sampling_from_the_command_line_spends_nothing(schema_path, silo_paths, tmp_path, capsys):
    out, model, store = tmp_path / "syn.csv", tmp_path / "syn.model", tmp_path / "budget.sqlite"
    args = synth_argv(
        "independent", schema=schema_path, silos=silo_paths, out=out, model_out=model, budget_store=store, quiet=True
    )
    args += ["--dataset-id", "toy", "--total-epsilon", "5"]
    code, _, err = run_cli(*args, capsys=capsys)
    assert code == 0, err
    ledger = out.with_suffix(".ledger.json").read_bytes()
    dump = "\n".join(sqlite3.connect(store).iterdump())
    more = tmp_path / "more.csv"
    code, stdout, err = run_cli(
        "sample", model, "--rows", "2500", "--out", more, "--where", "region=south|east", "--seed", "9", capsys=capsys
    )
    assert code == 0, err
    rows = pd.read_csv(more)
    assert len(rows) == 2500 and set(rows["region"]) == {"south", "east"}
    assert "no budget spent and no ledger entry" in stdout and "--seed 9 fixes these draws only" in stdout
    assert out.with_suffix(".ledger.json").read_bytes() == ledger
    assert "\n".join(sqlite3.connect(store).iterdump()) == dump
    code, _, err = run_cli("sample", model, "--rows", "10", "--out", more, capsys=capsys)
    assert_one_line_error(err, "more.csv", status=2) and code == 2
    code, _, err = run_cli(
        "sample", model, "--rows", "10", "--out", tmp_path / "x.csv", "--where", "age=200", capsys=capsys
    )
    assert_one_line_error(err, "outside the column's bounds", status=2)
    assert not (tmp_path / "x.csv").exists()


def test_the_readme_fit_once_blocks_work_when_pasted(tmp_path, capsys, monkeypatch):
    """README's "Fit once, sample many": its commands (in this process) and its Python block, on
    two silos named as there."""
    import re
    import shlex
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    shell, python = re.search(
        r"<!-- fit once: [^\n]*-->\n```bash\n(.*?)```\n\n```python\n(.*?)```", text, re.S
    ).groups()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    make_frame(500, 0).to_csv("a.csv", index=False)
    make_frame(400, 1).to_csv("b.csv", index=False)
    for command in shell.replace("\\\n", " ").strip().splitlines():
        argv = shlex.split(command)
        assert argv[0] == "privsyn-fed"
        code, _, err = run_cli(*argv[1:], capsys=capsys)
        assert code == 0, (command, err)
    south = pd.read_csv("south.csv")
    assert len(pd.read_csv("more.csv")) == 100_000 and len(south) == 5000
    assert set(south["region"]) == {"south"} and south["age"].between(30, 40).all()
    scope: dict = {}
    exec(python, scope)  # noqa: S102 (the README's own example)
    assert len(scope["rows"]) == 100_000 and set(scope["south"]["region"]) == {"south"}
    assert pf.load_model("api.model").ledger == scope["model"].ledger
