"""Partitions for experiments: deterministic, every row exactly once, no empty client, skew."""

import json

import numpy as np
import pandas as pd
import pytest

from privsyn_fed import InputError
from privsyn_fed.cli import main
from privsyn_fed.evaluation import partition

from .conftest import assert_one_line_error, make_frame, run_cli, snapshot


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


def test_partition_force_leaves_no_stale_client_files(tmp_path, capsys):
    data = tmp_path / "data.csv"
    make_frame(800, 0).to_csv(data, index=False)
    out = tmp_path / "clients"
    split = ["partition", data, "--scheme", "iid", "--out", out]
    assert run_cli(*split, "--clients", "5", capsys=capsys).returncode == 0
    assert run_cli(*split, "--clients", "3", "--force", capsys=capsys).returncode == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == ["client_000.csv", "client_001.csv", "client_002.csv", "manifest.json"]
    total = sum(len(pd.read_csv(out / f)) for f in files if f.endswith(".csv"))
    assert total == 800  # every record in exactly one client file
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftovers


def test_partition_force_never_replaces_a_folder_of_other_files_or_its_own_input(tmp_path, capsys):
    data = tmp_path / "data.csv"
    make_frame(50, 0).to_csv(data, index=False)
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    before = snapshot(tmp_path)
    proc = run_cli("partition", data, "--clients", "2", "--scheme", "iid", "--out", tmp_path, "--force", capsys=capsys)
    assert_one_line_error(proc, "lies inside --out")
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("keep")
    before = snapshot(tmp_path)
    proc = run_cli("partition", data, "--clients", "2", "--scheme", "iid", "--out", other, "--force", capsys=capsys)
    assert_one_line_error(proc, "which partition did not write")
    assert snapshot(tmp_path) == before
    # the table to split, as one of the client files of the folder being replaced
    clients = tmp_path / "clients"
    assert (
        run_cli("partition", data, "--clients", "2", "--scheme", "iid", "--out", clients, capsys=capsys).returncode == 0
    )
    proc = run_cli(
        "partition",
        clients / "client_000.csv",
        "--clients",
        "2",
        "--scheme",
        "iid",
        "--out",
        clients,
        "--force",
        capsys=capsys,
    )
    assert_one_line_error(proc, "lies inside --out")
