"""Inputs whose cost grows fast with their size: a workload's stars, many public constraints, a wide
table to evaluate. Each is counted and refused before it runs long, or runs in seconds, shows its
progress and stops at a safe point on SIGTERM. Bounds are generous: speed is reported, not timed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from .conftest import CLI, assert_one_line_error, run_cli, synth_argv


def binary_table(tmp_path, columns: int, rows: int, seed: int = 0, name: str = "silo.csv"):
    """A schema of ``columns`` two-category columns and a CSV of ``rows`` random rows over it."""
    schema = tmp_path / "schema.json"
    names = [f"c{i}" for i in range(columns)]
    schema.write_text(
        json.dumps({"columns": [{"name": n, "type": "categorical", "categories": ["a", "b"]} for n in names]})
    )
    rng = np.random.default_rng(seed)
    table = tmp_path / name
    pd.DataFrame({n: rng.choice(["a", "b"], rows) for n in names}).to_csv(table, index=False)
    return schema, table


def wait_for(proc, log, text, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text():
            return
        if proc.poll() is not None:
            pytest.fail(f"the command ended before {text!r}: {log.read_text()[-2000:]}")
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    pytest.fail(f"no {text!r} within {timeout} s: {log.read_text()[-2000:]}")


def stops_on_sigterm(proc, log, within: float = 20):
    """SIGTERM the process; it must stop at a safe point within ``within`` seconds."""
    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    try:
        code = proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"still running {within} s after SIGTERM")
    stderr = log.read_text()
    assert code == 128 + signal.SIGTERM, stderr
    assert "interrupted by SIGTERM" in stderr and "Traceback" not in stderr, stderr
    return time.monotonic() - sent


# ---- workloads ----------------------------------------------------------------------------------


def test_five_stars_over_twenty_columns_are_counted_and_refused_at_once(tmp_path):
    """The stars stand for C(20, 5) = 15,504 marginals whose downward closure holds 21,699
    candidates: counted before any is listed, and refused in one line naming both and the limit."""
    from privsyn_fed.methods.workload import MAX_CANDIDATES

    schema, silo = binary_table(tmp_path, 20, 50)
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps([["*"] * 5]))
    argv = synth_argv(schema=schema, silos=[silo], out=tmp_path / "o.csv", workload=workload)
    start = time.monotonic()
    proc = run_cli(*argv, timeout=60)
    line = assert_one_line_error(proc, "workload entry 1", "15,504 marginals", "21,699", f"{MAX_CANDIDATES:,}")
    assert str(workload) in line
    assert time.monotonic() - start < 60
    assert not (tmp_path / "o.csv").exists()


def test_a_sampled_workload_beyond_the_candidate_limit_is_refused_too():
    from privsyn_fed.common import OptionError
    from privsyn_fed.methods.workload import check_size, sample_workload

    cliques = sample_workload(20, 5, None)
    with pytest.raises(OptionError, match="21,699 candidate marginals, more than the 20,000"):
        check_size(cliques, [2] * 20, [f"c{i}" for i in range(20)])


def test_a_large_allowed_workload_reaches_its_safe_points_in_seconds_and_stops_on_sigterm(tmp_path):
    """Four stars over 24 columns: 10,626 marginals, 12,950 candidates, within the limits. Their
    weights are summed column by column (no pass over the workload per candidate), so the run
    reaches its model fit in seconds, and SIGTERM stops it there."""
    schema, silo = binary_table(tmp_path, 24, 200)
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps([["*"] * 4]))
    out = tmp_path / "o.csv"
    argv = synth_argv(schema=schema, silos=[silo], out=out, workload=workload, rounds=200)
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        proc = subprocess.Popen([*CLI, *argv], stdout=subprocess.DEVNULL, stderr=err)
        wait_for(proc, log, "fitting the model", timeout=60)
        stops_on_sigterm(proc, log)
    assert not out.exists()


def test_the_downward_closure_weighs_candidates_as_the_sum_over_the_workload():
    """``w_r = sum_s c_s |r & s|``, computed column by column, equals the sum over the workload."""
    import itertools
    import random

    from privsyn_fed.methods.workload import downward_closure

    rng = random.Random(3)
    for _ in range(50):
        n = rng.randint(1, 9)
        workload = sorted({tuple(sorted(rng.sample(range(n), rng.randint(1, n)))) for _ in range(rng.randint(1, 12))})
        weights = [rng.randint(1, 100) for _ in workload]
        closure = downward_closure(workload, weights)
        subsets = {r for s in workload for k in range(1, len(s) + 1) for r in itertools.combinations(s, k)}
        assert list(closure) == sorted(subsets, key=lambda r: (len(r), r))
        for r, w in closure.items():
            assert w == sum(c * len(set(r) & set(s)) for s, c in zip(workload, weights))


# ---- constraints --------------------------------------------------------------------------------


def test_five_thousand_one_value_forbid_constraints_load_in_seconds(tmp_path):
    """Every command reads the schema: 5,000 constraints over a column of 20,000 categories are
    checked (each alone, then all together) in seconds, not minutes."""
    path = tmp_path / "schema.json"
    columns = [
        {"name": "code", "type": "categorical", "categories": [f"v{i}" for i in range(20_000)]},
        {"name": "age", "type": "numeric", "lower": 0, "upper": 10_000, "integer": True, "bins": 10},
    ]
    constraints = [{"forbid": {"code": f"v{i}"}} for i in range(4_000)]
    constraints += [{"forbid": {"age": i, "code": "v19999"}} for i in range(0, 2_000, 2)]
    path.write_text(json.dumps({"columns": columns, "constraints": constraints}))
    script = (
        "import sys, time; from privsyn_fed.schema import Schema; t = time.monotonic(); "
        "s = Schema.load(sys.argv[1]); print(len(s.constraints), round(time.monotonic() - t, 2))"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    count, seconds = proc.stdout.split()
    assert int(count) == 5_000 and float(seconds) < 30


def test_many_constraints_still_refuse_one_that_forbids_every_row(tmp_path):
    from privsyn_fed.common import InputError
    from privsyn_fed.schema import Schema

    columns = [{"name": "code", "type": "categorical", "categories": [f"v{i}" for i in range(300)]}]
    constraints = [{"forbid": {"code": f"v{i}"}} for i in range(299)]
    Schema.from_dict({"columns": columns, "constraints": constraints})
    with pytest.raises(InputError, match="constraints together forbid every row"):
        Schema.from_dict({"columns": columns, "constraints": [*constraints, {"forbid": {"code": "v299"}}]})
    whole = {"forbid": {"code": [f"v{i}" for i in range(300)]}}
    with pytest.raises(InputError, match=r"constraint #300 .* forbids every row"):
        Schema.from_dict({"columns": columns, "constraints": [*constraints, whole]})


# ---- evaluation ---------------------------------------------------------------------------------


def test_evaluate_shows_its_progress_on_stderr(tmp_path, capsys, monkeypatch):
    from privsyn_fed.evaluation import utility

    monkeypatch.setattr(utility, "PROGRESS_SECONDS", 0.0)  # a line at every step of this small table
    schema, real = binary_table(tmp_path, 6, 100, seed=1, name="real.csv")
    _, synthetic = binary_table(tmp_path, 6, 100, seed=2, name="syn.csv")
    code, out, err = run_cli("evaluate", "--real", real, "--synthetic", synthetic, "--schema", schema, capsys=capsys)
    assert code == 0, err
    assert "[evaluate] column pairs: " in err and " of 15 " in err, err
    assert "contingency similarity" in out and "[evaluate]" not in out


def test_a_wide_evaluation_shows_progress_and_stops_on_sigterm(tmp_path):
    """1,000 columns: half a million column pairs. A progress line comes within seconds, and SIGTERM
    stops the evaluation at its next pair."""
    schema, real = binary_table(tmp_path, 1_000, 300, seed=1, name="real.csv")
    _, synthetic = binary_table(tmp_path, 1_000, 300, seed=2, name="syn.csv")
    log = tmp_path / "stderr.txt"
    args = ["evaluate", "--real", real, "--synthetic", synthetic, "--schema", schema]
    with open(log, "w") as err:
        proc = subprocess.Popen([*CLI, *map(str, args)], stdout=subprocess.DEVNULL, stderr=err)
        wait_for(proc, log, "[evaluate] column pairs: ", timeout=90)
        stops_on_sigterm(proc, log, within=10)


def test_every_three_way_marginal_of_a_wide_table_is_counted_and_refused(tmp_path):
    """``--workload-size 0`` over 200 columns would score C(200, 3) = 1,313,400 marginals: counted
    before any is listed, and refused in one line."""
    schema, real = binary_table(tmp_path, 200, 50, seed=1, name="real.csv")
    args = ["evaluate", "--real", real, "--synthetic", real, "--schema", schema, "--workload-size", 0]
    proc = run_cli(*args, timeout=60)
    assert_one_line_error(proc, "1,313,400 3-way marginals", "1,000,000")
