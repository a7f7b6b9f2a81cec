"""Evaluation measures: exact values on known cases, the CLI, and the model likelihood."""

import itertools
import json

import numpy as np
import pytest

import privsyn_fed as pf
from privsyn_fed.cli import main
from privsyn_fed.evaluation import evaluate, workload_error
from privsyn_fed.methods import pgm

from .conftest import make_frame


def test_identical_tables_score_perfectly(schema):
    real = make_frame(400, 1)
    report = evaluate(real, real.copy(), schema, holdout_df=make_frame(300, 2), label="label")
    assert report["workload"]["error"] == 0.0
    assert report["mean_tv"] == 0.0 and report["mean_ks"] == 0.0
    assert report["pairs"]["correlation_similarity"] == pytest.approx(1.0)
    assert report["pairs"]["contingency_similarity"] == pytest.approx(1.0)
    assert report["tstr"]["auc_synthetic"] == pytest.approx(report["tstr"]["auc_real"])
    assert report["tstr"]["auc_real"] > 0.75  # label depends on income
    assert report["dcr"]["exact_copies_of_train"] > 0.3  # a copy sits on its own records


def test_unrelated_synthetic_data_scores_worse(schema):
    real = make_frame(400, 1)
    noise = make_frame(400, 3)
    rng = np.random.default_rng(0)
    for col in noise.columns:  # break every dependence
        noise[col] = rng.permutation(noise[col].to_numpy())
    good = evaluate(real, make_frame(400, 4), schema, holdout_df=make_frame(300, 2), label="label")
    bad = evaluate(real, noise, schema, holdout_df=make_frame(300, 2), label="label")
    assert bad["workload"]["error"] > good["workload"]["error"]
    assert bad["tstr"]["auc_synthetic"] < good["tstr"]["auc_synthetic"]
    assert bad["pairs"]["correlation_similarity"] < good["pairs"]["correlation_similarity"]


def test_workload_error_matches_a_hand_computation():
    real = np.array([[0, 0], [1, 1]])
    syn = np.array([[0, 0], [0, 0]])
    # 1-way of column 0: |0.5 - 1| + |0.5 - 0| = 1; the 2-way: 0.5 + 0.5 = 1
    assert workload_error(real, syn, [2, 2], [(0,)]) == pytest.approx(1.0)
    assert workload_error(real, syn, [2, 2], [(0, 1)]) == pytest.approx(1.0)


def test_model_likelihood_is_a_normalised_distribution():
    """exp(log p(x)) over every cell of a small domain sums to one, and matches the model's
    own marginal of all columns."""
    names, shape = ["a", "b", "c"], [2, 3, 2]
    rng = np.random.default_rng(0)
    codes = np.stack([rng.integers(0, k, 200) for k in shape], axis=1)
    silo = pf.Silo(
        "s",
        codes,
        pf.Schema.from_dict(
            {
                "columns": [
                    {"name": n, "type": "categorical", "categories": [str(i) for i in range(k)]}
                    for n, k in zip(names, shape)
                ]
            }
        ),
    )
    meas = [
        (("a", "b"), silo.marginal([0, 1]).astype(float), 1.0),
        (("b", "c"), silo.marginal([1, 2]).astype(float), 1.0),
    ]
    model = pgm.ModelFitter(pgm.make_domain(names, shape), iters=300).fit(meas)
    cells = np.array(list(itertools.product(*[range(k) for k in shape])))
    reader = pgm.MarginalReader(model)
    p = np.exp(reader.log_likelihood(cells, names))
    assert p.sum() == pytest.approx(1.0, rel=1e-9)
    assert np.allclose(p * reader.total, reader(("a", "b", "c")), rtol=1e-6)


def test_cli_evaluate_writes_json(schema_path, tmp_path, capsys):
    paths = {}
    for name, seed in (("real", 1), ("syn", 4), ("hold", 2)):
        paths[name] = tmp_path / f"{name}.csv"
        make_frame(300, seed).to_csv(paths[name], index=False)
    out = tmp_path / "eval.json"
    assert (
        main(
            [
                "evaluate",
                "--real",
                str(paths["real"]),
                "--synthetic",
                str(paths["syn"]),
                "--schema",
                str(schema_path),
                "--holdout",
                str(paths["hold"]),
                "--label",
                "label",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    assert 0 < report["workload"]["error"] < 2 and "auc_synthetic" in report["tstr"]
    assert "workload error" in capsys.readouterr().out
    assert (
        main(
            [
                "evaluate",
                "--real",
                str(paths["real"]),
                "--synthetic",
                str(paths["syn"]),
                "--schema",
                str(schema_path),
                "--label",
                "nope",
                "--holdout",
                str(paths["hold"]),
            ]
        )
        == 2
    )
    assert "nope" in capsys.readouterr().err


def test_fidelity_is_zero_for_a_copy_and_grows_with_distortion(schema):
    real = make_frame(500, 1)
    assert evaluate(real, real.copy(), schema)["fidelity"] == {"jsd": 0.0, "wd": 0.0}
    shifted = real.copy()
    shifted["income"] = (shifted["income"] + 30).clip(upper=100)
    shifted["sex"] = "F"
    fid = evaluate(real, shifted, schema)["fidelity"]
    assert fid["wd"] > 0.1 and fid["jsd"] > 0.1


def test_label_probabilities_and_auc(schema):
    """Each row's label probabilities sum to 1 over the label's cells; a cell the training rows lack
    gets 0; one cell only gives a constant predictor (AUC 0.5); the AUC is `tstr_auc`'s."""
    from privsyn_fed.evaluation import encode, label_auc, label_probabilities, tstr_auc

    train, test = encode(make_frame(400, 1), schema, "train"), encode(make_frame(300, 2), schema, "test")
    j = schema.names.index("label")
    proba = label_probabilities(train, test, schema, "label")
    assert proba.shape == (300, schema.shape[j]) and np.allclose(proba.sum(axis=1), 1.0)
    assert label_auc(test[:, j], proba) == tstr_auc(train, test, schema, "label") > 0.75
    one = train[train[:, j] == train[0, j]]
    constant = label_probabilities(one, test, schema, "label")
    assert np.all(constant[:, train[0, j]] == 1.0) and label_auc(test[:, j], constant) == 0.5
    assert label_auc(test[test[:, j] == test[0, j], j], proba[test[:, j] == test[0, j]]) is None
    k = schema.names.index("region")  # a label of several cells: one-against-rest, cells it lacks at 0
    lacking = train[train[:, k] != train[0, k]]
    many = label_probabilities(lacking, test, schema, "region")
    assert np.all(many[:, train[0, k]] == 0.0) and np.allclose(many.sum(axis=1), 1.0)
    assert 0.0 <= label_auc(test[:, k], many) <= 1.0
