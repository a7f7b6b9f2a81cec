"""A party or dealer that cannot join its federation says so in one line within its timeout, and
the timeout must be positive and finite."""

from __future__ import annotations

import time

import pytest

from privsyn_fed.mpc.launch import local_federation

from .conftest import assert_one_line_error, run_cli


@pytest.fixture
def lone_federation(tmp_path):
    """A federation of two silo parties and the dealer on loopback of which only one member runs."""
    folder = tmp_path / "fed"
    folder.mkdir(mode=0o700)
    return local_federation(folder, 2)


@pytest.mark.parametrize("command", ["mpc-party", "mpc-dealer"])
def test_a_process_that_cannot_join_says_so_in_one_line_within_its_timeout(
    command, schema_path, silo_paths, lone_federation
):
    rank = 1 if command == "mpc-party" else 2
    args = [*lone_federation.args(rank), "--mpc-timeout", "3"]
    if command == "mpc-party":
        args += ["--schema", str(schema_path), "--silo", str(silo_paths[1])]
    port = lone_federation.federation.members[0].port  # nothing listens there
    start = time.monotonic()
    run = run_cli(command, *args, timeout=60)
    elapsed = time.monotonic() - start
    assert_one_line_error(run, "could not join", f"127.0.0.1:{port}", "within 3 s", status=1)
    assert elapsed < 3 + 12, f"took {elapsed:.1f} s with --mpc-timeout 3"  # 3 s plus start-up on a busy machine


@pytest.mark.parametrize("command", ["mpc-party", "mpc-dealer"])
@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf"])
def test_the_join_timeout_must_be_positive_and_finite(
    command, timeout, schema_path, silo_paths, capsys, lone_federation
):
    rank = 1 if command == "mpc-party" else 2
    args = [command, *lone_federation.args(rank), "--mpc-timeout", timeout]
    if command == "mpc-party":
        args += ["--schema", schema_path, "--silo", silo_paths[1]]
    assert_one_line_error(run_cli(*args, capsys=capsys), "--mpc-timeout must be a positive number of seconds")
