"""Partitions for experiments: deterministic, every row exactly once, no empty client, skew."""

import json

import numpy as np
import pandas as pd
import pytest

from privsyn_fed import InputError
from privsyn_fed.cli import main
from privsyn_fed.evaluation import partition

from .conftest import make_frame


@pytest.fixture(scope="module")
def frame():
    return make_frame(600, seed=11)


@pytest.mark.parametrize("scheme", ["iid", "dirichlet", "cluster", "quantity"])
def test_every_row_exactly_once_deterministic_and_nonempty(frame, scheme):
    a = partition(frame, 7, scheme, label="label", alpha=0.3, seed=5)
    b = partition(frame, 7, scheme, label="label", alpha=0.3, seed=5)
    assert np.array_equal(a.assignment, b.assignment)
    rows = np.concatenate(a.parts())
    assert sorted(rows.tolist()) == list(range(len(frame)))  # each row once
    assert all(len(p) >= 1 for p in a.parts())
    if scheme != "cluster":  # k-means may land on the same clusters from another start
        assert not np.array_equal(
            partition(frame, 7, scheme, label="label", alpha=0.3, seed=6).assignment, a.assignment
        )


def test_iid_sizes_are_balanced(frame):
    sizes = [len(p) for p in partition(frame, 7, "iid", seed=0).parts()]
    assert max(sizes) - min(sizes) <= 1


def test_dirichlet_small_alpha_skews_labels_more_than_large_alpha(frame):
    def skew(alpha):
        parts = partition(frame, 6, "dirichlet", label="label", alpha=alpha, seed=2).parts()
        overall = (frame["label"] == "yes").mean()
        return np.mean([abs((frame["label"].iloc[p] == "yes").mean() - overall) for p in parts])

    assert skew(0.1) > skew(100.0)
    assert skew(100.0) < 0.1


def test_cluster_partition_separates_feature_space(frame):
    parts = partition(frame, 4, "cluster", seed=0).parts()
    means = [frame["age"].iloc[p].mean() for p in parts]
    assert max(means) - min(means) > 10  # clusters differ in a standardised feature


def test_bad_requests_are_input_errors(frame):
    with pytest.raises(InputError, match="label"):
        partition(frame, 3, "dirichlet")
    with pytest.raises(InputError, match="non-empty"):
        partition(frame.head(3), 5, "iid")
    with pytest.raises(InputError, match="alpha"):
        partition(frame, 3, "quantity", alpha=0)


def test_cli_writes_clients_and_manifest(frame, tmp_path, capsys):
    data = tmp_path / "data.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "parts"
    assert (
        main(
            [
                "partition",
                str(data),
                "--clients",
                "5",
                "--scheme",
                "dirichlet",
                "--label",
                "label",
                "--alpha",
                "0.5",
                "--seed",
                "3",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["clients"] == 5 and manifest["rows"] == 600
    total = 0
    for entry in manifest["files"]:
        df = pd.read_csv(out / entry["file"], keep_default_na=False)
        assert len(df) == entry["rows"] and list(df.columns) == list(frame.columns)
        assert entry["label_histogram"] == {k: int(v) for k, v in df["label"].value_counts().sort_index().items()}
        total += len(df)
    assert total == 600
    # a non-empty folder is not overwritten without --force
    assert main(["partition", str(data), "--clients", "5", "--scheme", "iid", "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (
        main(
            [
                "partition",
                str(tmp_path / "missing.csv"),
                "--clients",
                "2",
                "--scheme",
                "iid",
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
