"""A cell's input error is one line in a value-free form: an MPC party prints only that form and
party 0 relays it without the value, while party 0 shows its own value to its own operator."""

from __future__ import annotations

import subprocess
import sys

import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError
from privsyn_fed.mpc.launch import local_federation

from .conftest import (
    assert_one_line_error,
    killed_at_exit,
    make_frame,
    run_cli,
    start,
    start_dealer,
    start_party,
    synth_argv,
)

SECRET = "Jane Doe, HIV+"


def put_cell(path, row: int, column: str, value: str) -> None:
    """Replace one cell of a CSV (row counted as CSV lines, the header being line 1)."""
    import pandas as pd

    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    df.loc[row - 2, column] = value
    df.to_csv(path, index=False)  # pandas quotes the value: it holds a comma


@pytest.mark.parametrize(
    "column, value, problem",
    [
        ("sex", SECRET, "category 'Jane Doe, HIV+' is not in the schema"),
        ("income", SECRET, "'Jane Doe, HIV+' is not a number"),
    ],
)
def test_a_cell_error_has_a_value_free_form(schema, column, value, problem):
    df = make_frame(20, seed=1).astype(str)
    df.loc[4, column] = value
    with pytest.raises(InputError) as info:
        pf.Silo.from_frame(df, schema, name="b.csv")
    assert str(info.value).startswith(f"b.csv: row 6, column '{column}': {problem}")
    public = info.value.shareable()
    assert public.startswith(f"b.csv: row 6, column '{column}': a value that is not")
    assert SECRET not in public and "Jane" not in public and "not shown to the other parties" in public


#: Party 0 with a declared release: the parties read their silos only once it passed their policies.
PARTY0 = (
    "import sys\n"
    "from privsyn_fed.mpc import ReleaseTerms\n"
    "from privsyn_fed.mpc.launch import coordinator\n"
    "schema, silo, federation, cert, key = sys.argv[1:]\n"
    "with coordinator(schema, [silo], federation=federation, cert=cert, key=key, timeout_s=60,\n"
    "                 release=ReleaseTerms('fedtda', 1.0, 1e-9)) as agg:\n"
    "    agg.begin()\n"
)


def test_mpc_party_prints_only_the_value_free_form(schema_path, silo_paths, tmp_path):
    put_cell(silo_paths[1], 6, "sex", SECRET)
    fed = local_federation(tmp_path, 2)
    procs = [
        start_party(fed, 1, "--schema", schema_path, "--silo", silo_paths[1], stdin=subprocess.DEVNULL),
        start_dealer(fed, 2, stdin=subprocess.DEVNULL),
        start([sys.executable, "-c", PARTY0, schema_path, silo_paths[0], *fed.args(0)[1::2]], stdin=subprocess.DEVNULL),
    ]
    with killed_at_exit(procs):
        out, err = procs[0].communicate(timeout=120)
        for p in procs[1:]:
            p.communicate(timeout=60)
    assert procs[0].returncode == 2, err
    assert_one_line_error(err, f"{silo_paths[1]}: row 6, column 'sex'")
    assert SECRET not in err + out and "read " not in out  # ready (its arguments checked), never past reading


def test_synth_mpc_relays_a_party_error_without_its_value(schema_path, silo_paths, tmp_path):
    put_cell(silo_paths[1], 6, "sex", SECRET)
    assert f'"{SECRET}"' in silo_paths[1].read_text()
    out = tmp_path / "syn.csv"
    run = run_cli(
        *synth_argv("fedtda", schema=schema_path, silos=silo_paths[:2], out=out, quiet=True, mpc=True), timeout=180
    )
    assert_one_line_error(run, str(silo_paths[1]), "row 6", "column 'sex'")
    assert SECRET not in run.stderr + run.stdout and "Jane" not in run.stderr + run.stdout
    assert not out.exists()


def test_party_0_shows_its_own_value_to_its_own_operator(schema_path, silo_paths, tmp_path, capsys):
    put_cell(silo_paths[0], 6, "sex", "Z")
    out = tmp_path / "syn.csv"
    proc = run_cli(
        *synth_argv("fedtda", schema=schema_path, silos=silo_paths[:2], out=out, quiet=True, mpc=True), capsys=capsys
    )
    assert_one_line_error(proc, "category 'Z' is not in the schema")
