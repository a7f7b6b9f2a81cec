"""One silo under two names, twice under MPC, or the same rows in two silo objects: refused unless
the flag that names the risk is given."""

from __future__ import annotations

import os
import shutil

import pandas as pd
import pytest

from privsyn_fed.accounting.budget_store import BudgetStore

from .conftest import assert_one_line_error, make_frame, run_cli, synth


@pytest.mark.parametrize("spelling", ["absolute", "dotdot", "symlink", "hardlink", "identical-string"])
def test_one_silo_under_two_names_is_refused(spelling, schema_path, silo_paths, tmp_path, capsys):
    first = silo_paths[0]
    (tmp_path / "sub").mkdir()
    second = {
        "absolute": lambda: first.resolve(),
        "dotdot": lambda: tmp_path / "sub" / ".." / first.name,
        "symlink": lambda: (tmp_path / "l.csv").symlink_to(first) or tmp_path / "l.csv",
        "hardlink": lambda: os.link(first, tmp_path / "h.csv") or tmp_path / "h.csv",
        "identical-string": lambda: first,
    }[spelling]()
    out = tmp_path / "o.csv"
    proc = run_cli(*synth(schema_path, [first, second, silo_paths[1]], out), capsys=capsys)
    assert_one_line_error(proc, "same file")
    assert not out.exists() and not out.with_suffix(".ledger.json").exists()


def test_one_silo_twice_under_mpc_is_refused_before_any_party_starts(schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "o.csv"
    proc = run_cli(*synth(schema_path, [silo_paths[0], silo_paths[0]], out, mpc=True), capsys=capsys)
    assert_one_line_error(proc, "given twice as --silo")


def test_silos_with_identical_contents_need_the_flag_that_names_the_risk(schema_path, silo_paths, tmp_path, capsys):
    copy = tmp_path / "copy.csv"
    shutil.copyfile(silo_paths[0], copy)
    store = tmp_path / "b.db"
    out = tmp_path / "o.csv"
    args = synth(schema_path, [silo_paths[0], copy], out, budget_store=store, dataset_id="d", total_epsilon=3)
    proc = run_cli(*args, capsys=capsys)
    assert_one_line_error(proc, "identical contents")
    assert "--allow-identical-silos" in proc.stderr and not out.exists()
    run_row = BudgetStore(store).budget("d").runs[0]
    assert run_row["status"] == "rejected" and run_row["rho_spent"] == 0.0  # nothing was spent
    code, _, err = run_cli(*synth(schema_path, [silo_paths[0], copy], out, allow_identical_silos=True), capsys=capsys)
    assert code == 0, err


def test_the_api_refuses_the_same_rows_under_two_silo_objects(schema):
    from privsyn_fed import Silo, synthesize
    from privsyn_fed.common import InputError

    frame = make_frame(200, 4)
    shuffled = frame.sample(frac=1.0, random_state=1)  # the same rows in another order
    silos = [Silo.from_frame(frame, schema, name="a"), Silo.from_frame(shuffled, schema, name="b")]
    with pytest.raises(InputError, match="hold the same rows"):
        synthesize(silos, "fedtda", 1.0, 1e-9)
    one_more = pd.concat([shuffled, frame.iloc[:1]])  # a neighbouring table is not refused
    assert synthesize([silos[0], Silo.from_frame(one_more, schema, name="c")], "fedtda", 1.0, 1e-9, rows=5)
    assert synthesize(silos, "fedtda", 1.0, 1e-9, rows=5, allow_identical_silos=True)
