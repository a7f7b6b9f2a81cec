"""The Python API as a caller meets it: it logs and calls back and prints nothing, replaces no file
unless asked, and its option errors name the Python argument, not the command-line flag."""

from __future__ import annotations

import dataclasses
import json
import logging
import math

import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError, OptionError

from .conftest import make_frame


# ---- a quiet API that keeps files ------------------------------------------------------------------------
def test_the_api_logs_and_calls_back_and_prints_nothing(schema, capsys, caplog):
    calls = []
    silos = [make_frame(100, seed=k) for k in range(2)]
    with caplog.at_level(logging.INFO, logger="privsyn_fed"):
        result = pf.synthesize(silos, "independent", schema=schema, rows=5, progress=lambda f, m: calls.append((f, m)))
    assert result.rows == 5
    assert calls and all(0 < f <= 1 + 1e-9 and isinstance(m, str) for f, m in calls)
    assert any(r.name == "privsyn_fed.progress" and r.levelno == logging.INFO for r in caplog.records)
    out, err = capsys.readouterr()
    assert out == "" and err == ""
    with pytest.raises(OptionError, match="^progress must be"):
        pf.synthesize(silos, "independent", schema=schema, progress="yes")


def test_the_api_replaces_no_file_unless_asked(schema, tmp_path):
    ledger, csv = tmp_path / "run.ledger.json", tmp_path / "run.csv"
    ledger.write_text("keep")
    silos = [make_frame(60, seed=k) for k in range(2)]
    missing = tmp_path / "not-there.csv"
    with pytest.raises(InputError) as info:  # refused before any silo is read
        pf.synthesize([missing, missing], "independent", schema=schema, ledger_path=ledger)
    assert str(info.value) == f"{ledger}: already exists (ledger_path); pass overwrite=True to replace it"
    assert ledger.read_text() == "keep"
    result = pf.synthesize(silos, "independent", schema=schema, rows=5, ledger_path=ledger, overwrite=True)
    assert json.loads(ledger.read_text())["status"] == "complete"
    csv.write_text("keep")
    with pytest.raises(InputError, match="run.csv: already exists; pass overwrite=True"):
        result.to_csv(csv)
    assert csv.read_text() == "keep"
    result.to_csv(csv, overwrite=True)
    assert len(pd.read_csv(csv)) == 5


# ---- option errors in the caller's language ----------------------------------------------------------
BAD_VALUES = [-1, 0, 2, 2.5, 10**9, 1e300, math.nan, "bogus", [["nowhere"]], True, None]


def test_every_method_option_error_names_the_python_argument(schema):
    from privsyn_fed.methods import METHODS
    from privsyn_fed.release import ReleaseRequest

    def prepare(method, schema, silos, epsilon, delta, **given):
        return ReleaseRequest.of(method, epsilon, delta, schema, None, silos=silos, **given)

    for method, spec in METHODS.items():
        for f in dataclasses.fields(spec.options_class):
            refused = 0
            for value in BAD_VALUES:
                try:
                    prepare(method, schema, 3, epsilon=1.0, delta=1e-9, **{f.name: value})
                except InputError as exc:
                    refused += 1
                    assert "--" not in str(exc), (method, f.name, value, str(exc))
                    if isinstance(exc, OptionError):
                        assert f.name in exc.names and f.name in str(exc), (method, f.name, str(exc))
            assert refused, (method, f.name)
    for name, value in [("epsilon", -1), ("delta", 2), ("rows", -3), ("seed", -1)]:
        with pytest.raises(OptionError, match=f"^{name} ") as info:
            prepare("aim", schema, 3, **{"epsilon": 1.0, "delta": 1e-9, name: value})
        assert "--" not in str(info.value)


def test_draft_and_budget_errors_name_the_python_argument(tmp_path):
    from privsyn_fed.accounting.budget_store import BudgetStore

    for kwargs, name in [({"categorical_max": -1}, "categorical_max"), ({"bins": 0}, "bins")]:
        with pytest.raises(OptionError, match=f"^{name} ") as info:
            pf.Schema.draft(pd.DataFrame({"a": [1, 2]}), **kwargs)
        assert "--" not in str(info.value)
    store = BudgetStore(tmp_path / "b.db")
    with pytest.raises(OptionError, match="total_epsilon") as info:
        store.reserve("d", epsilon=1.0, delta=1e-9, method="aim")
    assert "--" not in str(info.value)
    store.reserve("d", epsilon=0.1, delta=1e-9, method="aim", total_epsilon=2.0).settle(0.0, "rejected")
    with pytest.raises(OptionError, match="^delta must be 1e-09") as info:
        store.reserve("d", epsilon=0.1, delta=1e-8, method="aim")
    assert info.value.renamed(lambda n: "--" + n).startswith("--delta must be 1e-09")
