"""Drafting a schema: plain drafts always pass the release's own input validation on the rows they
were read from; DP drafts charge every fact read from the rows (sensitivities checked on D and D
plus one record), write a ledger that audit re-derives and that tampering fails, and draw on the
budget store; a data dictionary in CSV gives a schema or one line naming the file, line and column."""

import gzip
import json
import math
import os
import sqlite3
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privsyn_fed as pf
from privsyn_fed import audit as audit_module
from privsyn_fed import draft_dp
from privsyn_fed.accounting import epsilon_to_rho
from privsyn_fed.accounting.budget_store import BudgetStore
from privsyn_fed.audit import audit_ledger, load_ledger
from privsyn_fed.cli import main
from privsyn_fed.common import InputError, OptionError
from privsyn_fed.draft_dp.cells import PROFILE_CELLS, CellKinds
from privsyn_fed.schema import PrivateDraftWarning, draft_table, profile_chunks
from privsyn_fed.schema.cells import MISSING_TOKENS
from privsyn_fed.schema.dictionary import read_dictionary
from privsyn_fed.schema.draft import DRAFT_NOTE_KEY, draft_frame, round_outward

from .conftest import assert_one_line_error, run_cli, synth_argv

ACS = "/work/shared/data/nist-acs-excerpts"


def quiet_draft(df, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivateDraftWarning)
        return pf.Schema.draft(df, **kw)


# ---- rounding -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "lo, hi, integer, expected",
    [
        (17, 90, True, (10, 90)),
        (1, 99, True, (0, 100)),
        (0.13, 0.97, False, (0.1, 1.0)),
        (-3.7, 12.2, False, (-10, 20)),
        (1000, 1003, True, (1000, 1003)),
        (5, 5, True, (5, 5)),
        (0.3, 0.3, False, (0.3, 0.3)),
        (0, 0, False, (0, 0)),
        (-1e300, 1e300, False, (-9e15, 9e15)),
    ],
)
def test_bounds_round_outward_to_multiples_of_a_power_of_ten(lo, hi, integer, expected):
    assert round_outward(lo, hi, integer) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.floats(-1e15, 1e15, allow_nan=False, allow_subnormal=True),
    st.floats(0, 1e15, allow_nan=False),
    st.booleans(),
)
def test_rounded_bounds_contain_the_values(lo, width, integer):
    hi = lo + width
    if integer:
        lo, hi = math.floor(lo), math.ceil(hi)
    lower, upper = round_outward(lo, hi, integer)
    assert lower <= lo and hi <= upper
    if integer:
        assert lower == int(lower) and upper == int(upper)


# ---- plain drafts pass the release's validation ---------------------------------------------------
AWKWARD = {
    "ints": st.integers(-(2**62), 2**62),
    "small_ints": st.integers(-5, 5),
    "floats": st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False),
    "tiny": st.floats(-1e-6, 1e-6, allow_nan=False),
    "text": st.sampled_from(["a", " a ", "b", "Zürich", "x, y", "1", " 5", "2.5", "-3", "1e3", "0x10", "inf", "True"]),
    "one": st.just("only"),
}
MISSING = st.sampled_from([None, np.nan, "", "NA", "null", "None", "N/A"])


@st.composite
def mixed_tables(draw):
    n = draw(st.integers(1, 25))
    columns = {}
    for j in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from([*AWKWARD, "all_missing", "numbers_as_text", "mixed"]))
        p_missing = draw(st.sampled_from([0.0, 0.0, 0.3]))
        cells = []
        for _ in range(n):
            if kind == "all_missing" or draw(st.floats(0, 1)) < p_missing:
                cells.append(draw(MISSING))
            elif kind == "numbers_as_text":
                cells.append(str(draw(AWKWARD["floats"])))
            elif kind == "mixed":
                cells.append(draw(st.one_of(AWKWARD["text"], AWKWARD["small_ints"], AWKWARD["floats"])))
            else:
                cells.append(draw(AWKWARD[kind]))
        columns[f"c{j}_{kind}"] = cells
    return pd.DataFrame(columns)


@settings(max_examples=40, deadline=None)
@given(mixed_tables(), st.integers(0, 6), st.integers(1, 40))
def test_a_drafted_schema_always_passes_the_validation_of_its_own_rows(tmp_path_factory, df, k, bins):
    """Python frames (typed as given) and the same table as a CSV file (text): the draft of either,
    loaded by the release's own readers, never fails on the rows it was read from."""
    tmp = tmp_path_factory.mktemp("draft")
    try:
        result = draft_frame(df, categorical_max=k, bins=bins)
    except InputError as exc:  # every column left out (more than k distinct words in each)
        assert "no column could be drafted" in str(exc)
        return
    pf.Silo.from_frame(df.drop(columns=result.dropped), pf.Schema.from_dict({"columns": result.columns}))
    csv = tmp / "t.csv"
    df.to_csv(csv, index=False)
    drafted = draft_table(csv, categorical_max=k, bins=bins)
    kept = tmp / "kept.csv"
    pd.read_csv(csv, dtype=str, keep_default_na=False).drop(columns=drafted.dropped).to_csv(kept, index=False)
    pf.Silo.load(kept, pf.Schema.from_dict({"columns": drafted.columns}))
    # the document written by the command loads as it is
    path = tmp / "schema.json"
    from privsyn_fed.schema import draft_document, plain_note, write_document

    write_document(path, draft_document(drafted.columns, plain_note(str(csv), drafted.dropped)))
    loaded = pf.Schema.load(path)
    assert loaded.private_draft and loaded.to_dict()[DRAFT_NOTE_KEY]["drafted_from"] == "t.csv"  # its note kept
    assert loaded.reviewed().to_dict() == pf.Schema.from_dict({"columns": drafted.columns}).to_dict()


def test_schema_draft_reads_every_dtype_and_warns():
    df = pd.DataFrame(
        {
            "age": pd.array([17, 45, None, 90], dtype="Int64"),
            "income": [1000.5, np.nan, -3.25, 2000.0],
            "sex": pd.Categorical(["F", "M", "F", None]),
            "flag": [True, False, True, True],
            "code": ["2", "10", "2", "NA"],
            "when": pd.to_datetime(["2020-01-01", "2021-01-01", None, "2020-01-01"]),
        }
    )
    with pytest.warns(PrivateDraftWarning, match="NOT PRIVATE"):
        schema = pf.Schema.draft(df, categorical_max=2, bins=8)
    assert isinstance(schema, pf.Schema)
    cols = {c.name: c for c in schema.columns}
    assert cols["age"].type == "numeric" and cols["age"].integer and cols["age"].missing
    assert (cols["age"].lower, cols["age"].upper, cols["age"].bins) == (10, 90, 8)
    assert cols["income"].type == "numeric" and not cols["income"].integer
    assert cols["sex"].categories == ("F", "M") and cols["sex"].missing
    assert cols["flag"].categories == ("False", "True")
    assert cols["code"].categories == ("2", "10")  # numbers by value, a missing token left out
    pf.Silo.from_frame(df, schema)


def test_categorical_max_decides_categorical_numeric_or_left_out():
    n = 30
    df = pd.DataFrame(
        {
            "few": ["a", "b", "c"] * 10,
            "many_numbers": [str(i) for i in range(n)],
            "many_words": [f"id-{i}" for i in range(n)],
            "one": ["x"] * n,
        }
    )
    result = draft_frame(df, categorical_max=5)
    kinds = {c["name"]: c["type"] for c in result.columns}
    assert kinds == {"few": "categorical", "many_numbers": "numeric", "one": "categorical"}
    assert result.dropped == ["many_words"]
    assert any("many_words" in n and "--categorical-max" in n for n in result.notes)
    assert draft_frame(df, categorical_max=100).dropped == []


def test_numbers_with_a_few_codes_are_drafted_numeric_with_the_codes_missing(tmp_path):
    """A column of numbers with a code for "not applicable" (the ACS excerpts' ``N``) is numeric with
    the code read as missing, said in a note; more codes than ``MAX_CODES``, more code cells than
    numbers, or an infinity leave it as text, which the draft leaves out."""
    rng = np.random.default_rng(0)
    n = 400
    numbers = [str(v) for v in rng.integers(0, 10**6, n)]
    coded = np.where(rng.random(n) < 0.2, "N", numbers)
    coded[:7] = "X"
    df = pd.DataFrame(
        {
            "income": coded,
            "four_codes": np.where(np.arange(n) % 5 == 0, [f"c{i % 4}" for i in range(n)], numbers),
            "mostly_codes": np.where(np.arange(n) % 3 == 0, numbers, "N"),
            "infinite": np.where(np.arange(n) == 0, "inf", np.where(np.arange(n) % 4 == 0, "N", numbers)),
        }
    )
    csv = tmp_path / "silo.csv"
    df.to_csv(csv, index=False)
    result = draft_table(csv, categorical_max=20)
    spec = {c["name"]: c for c in result.columns}
    assert set(spec) == {"income"} and set(result.dropped) == {"four_codes", "mostly_codes", "infinite"}
    assert spec["income"]["type"] == "numeric" and spec["income"]["missing"] is True
    assert spec["income"]["missing_values"] == ["N", "X"]
    note = next(n for n in result.notes if "'income'" in n)
    assert "'N' (" in note and "'X' (7 cells)" in note and "read as missing" in note
    schema = pf.Schema.from_dict({"columns": result.columns})
    kept = tmp_path / "kept.csv"
    df[["income"]].to_csv(kept, index=False)
    silo = pf.Silo.load(kept, schema)
    assert int((silo.rows()[:, 0] == schema.columns[0].missing_cell).sum()) == int(
        (df["income"].isin(["N", "X"])).sum()
    )


def test_a_skewed_column_is_cut_at_its_quantiles_its_extremes_and_zero(tmp_path, capsys):
    """Incomes (lognormal, a point mass at 0, a few losses) in equal widths over their rounded bounds
    put most values in one bin that reaches far below the least loss, and a release then draws many
    losses; a plain draft cuts such a column at its quantiles, its extremes and 0 instead (and says
    so), and leaves an even column its equal widths. Seeded releases of each draft (4,000 rows)."""
    rng = np.random.default_rng(3)
    n = 4000
    income = np.round(rng.lognormal(10, 1.1, n))
    income[rng.random(n) < 0.15] = 0
    income[:8] = -rng.integers(100, 9000, 8)
    df = pd.DataFrame({"income": income.astype(int), "age": rng.integers(18, 90, n)})
    data = tmp_path / "t.csv"
    df.to_csv(data, index=False)
    result = draft_table(data, bins=32)
    spec = {c["name"]: c for c in result.columns}
    cuts = spec["income"]["edges"]
    assert "bins" not in spec["income"] and spec["age"]["bins"] == 32 and "edges" not in spec["age"]
    assert {int(income.min()), 0, int(income.max())} <= set(cuts) and cuts == sorted(set(cuts))
    assert any("'income'" in n and "at its quantiles" in n for n in result.notes)
    assert draft_table(data, bins=32, edges="uniform").columns[0]["bins"] == 32
    with pytest.raises(OptionError, match="edges must be one of auto, uniform, quantiles"):
        draft_table(data, edges="deciles")
    negative = {}
    for name, columns in (("quantiles", result.columns), ("uniform", draft_table(data, edges="uniform").columns)):
        schema, out = tmp_path / f"{name}.json", tmp_path / f"{name}.csv"
        schema.write_text(json.dumps({"columns": columns}))
        assert run_cli(*synth_argv(schema=schema, silos=[data], out=out, seed=4), capsys=capsys).returncode == 0
        negative[name] = float((pd.read_csv(out)["income"] < 0).mean())
    # real: 0.2%; the noise on the two bins below 0 keeps some losses, equal widths a third and more
    assert negative["quantiles"] < 0.1 < 0.3 < negative["uniform"], negative


def test_parquet_stored_types_are_respected(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    table = pa.table(
        {
            "small_float": pa.array([0.5, 1.5, 0.5, None], pa.float64()),
            "small_int": pa.array([1, 2, 1, 2], pa.int64()),
            "text_numbers": pa.array([str(i) for i in range(4)], pa.string()),
            "nothing": pa.array([None] * 4, pa.null()),
            "flag": pa.array([True, False, None, True], pa.bool_()),
        }
    )
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    result = draft_table(path, categorical_max=2)
    kinds = {c["name"]: c["type"] for c in result.columns}
    # a double column is never categorical, a text one never numeric, a null one never anything
    assert kinds == {"small_float": "numeric", "small_int": "categorical", "flag": "categorical"}
    assert sorted(result.dropped) == ["nothing", "text_numbers"]
    kept = tmp_path / "kept.parquet"
    pq.write_table(table.drop_columns(result.dropped), kept)
    pf.Silo.load(kept, pf.Schema.from_dict({"columns": result.columns}))


# ---- the command ----------------------------------------------------------------------------------
@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(1)
    n = 300
    df = pd.DataFrame(
        {
            "age": rng.integers(17, 91, n),
            "income": rng.normal(5e4, 1e4, n).round(2),
            "sex": rng.choice(["F", "M"], n),
            "region": rng.choice(["north", "south", "", "N"], n),
        }
    )
    path = tmp_path / "data.csv"
    df.to_csv(path, index=False)
    return path


def test_draft_command_writes_a_loadable_schema_with_its_warning(table, tmp_path, capsys):
    out = tmp_path / "schema.json"
    code, stdout, err = run_cli(
        "schema",
        "draft",
        table,
        "--out",
        out,
        "--bins",
        "16",
        "--missing-value",
        "N",
        "--categorical-max",
        "3",
        capsys=capsys,
    )
    assert code == 0, err
    assert "wrote" in stdout and "NOT PRIVATE" in err
    doc = json.loads(out.read_text())
    assert list(doc)[0] == DRAFT_NOTE_KEY and doc[DRAFT_NOTE_KEY]["privacy"].startswith("none")
    assert "NOT PRIVATE" in doc[DRAFT_NOTE_KEY]["warning"]
    schema = pf.Schema.load(out)
    region = schema.column("region")
    assert region.categories == ("north", "south") and region.missing and region.missing_values == ("N",)
    assert schema.column("age").bins == 16 and schema.column("age").integer
    assert not list(tmp_path.glob(".*.tmp"))
    pf.Silo.load(table, schema)


def test_draft_then_synth_on_the_same_table(table, tmp_path, capsys):
    out = tmp_path / "schema.json"
    assert run_cli("schema", "draft", table, "--out", out, "--missing-value", "N", capsys=capsys).returncode == 0
    synthetic, ledger = tmp_path / "synthetic.csv", tmp_path / "synthetic.ledger.json"
    store = {"budget_store": tmp_path / "b.db", "dataset_id": "t", "total_epsilon": 2}
    args = synth_argv("independent", schema=out, silos=[table], out=synthetic, quiet=True, **store)
    # a draft still carrying its not-private note is refused before any budget is reserved
    proc = run_cli(*args, capsys=capsys)
    assert_one_line_error(proc, str(out), 'delete the "_draft" note')
    assert not synthetic.exists() and not ledger.exists()
    assert not (tmp_path / "b.db").exists()  # nothing reserved: the store was not even made
    # reviewed: the note deleted (here the bounds are kept as drafted)
    document = json.loads(out.read_text())
    del document[DRAFT_NOTE_KEY]
    out.write_text(json.dumps(document))
    code, stdout, err = run_cli(*args, capsys=capsys)
    assert code == 0, err
    assert list(pd.read_csv(synthetic).columns) == ["age", "income", "sex", "region"]


def test_a_private_draft_is_refused_by_the_api_until_reviewed(table):
    df = pd.read_csv(table, dtype=str, keep_default_na=False)
    with pytest.warns(PrivateDraftWarning):
        drafted = pf.Schema.draft(df, missing_values=["N"])
    assert drafted.private_draft
    with pytest.raises(InputError, match=r"drafted from private rows .*schema\.reviewed\(\)"):
        pf.synthesize([df], schema=drafted, method="independent", epsilon=1.0, delta=1e-9)
    result = pf.synthesize([df], schema=drafted.reviewed(), method="independent", epsilon=1.0, delta=1e-9)
    assert result.ledger["status"] == "complete"


def test_draft_refuses_to_replace_without_force_and_a_missing_folder(table, tmp_path, capsys):
    out = tmp_path / "schema.json"
    out.write_text("keep")
    proc = run_cli("schema", "draft", table, "--out", out, capsys=capsys)
    assert_one_line_error(proc, str(out), "--force")
    assert out.read_text() == "keep"
    assert run_cli("schema", "draft", table, "--out", out, "--force", capsys=capsys).returncode == 0
    assert pf.Schema.load(out)
    missing = tmp_path / "no" / "schema.json"
    proc = run_cli("schema", "draft", table, "--out", missing, capsys=capsys)
    assert_one_line_error(proc, str(missing), "does not exist")
    assert not missing.parent.exists()


def _truncated_gzip(tmp_path):
    path = tmp_path / "t.csv.gz"
    data = gzip.compress(("a,b\n" + "1,2\n" * 50_000).encode())
    path.write_bytes(data[: len(data) // 2])
    return path


def _written(name, content):
    def make(folder):
        path = folder / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path

    return make


def _bad_line_far_down(folder):
    """A CSV whose header reads but whose rows fail, far enough down that reading the header alone
    does not reach them."""
    return _written("far.csv", "a,b\n" + "1,2\n" * 300_000 + "1,2,3\n")(folder)


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda p: p / "absent.csv", "not found"),
        (_written("empty.csv", ""), "empty"),
        (_written("header.csv", "a,b\n"), "no rows"),
        (_truncated_gzip, "truncated or corrupt"),
        (_written("bad.parquet", b"not parquet at all"), "Parquet"),
        (_bad_line_far_down, "line 300002"),
    ],
)
@pytest.mark.parametrize("dp", [False, True])
def test_bad_data_is_one_line_and_writes_nothing(make, fragment, dp, tmp_path, capsys):
    data = make(tmp_path)
    out, store = tmp_path / "schema.json", tmp_path / "budget.db"
    extra = ["--dp", "50", "--delta", "1e-6", "--budget-store", store, "--dataset-id", "d", "--total-epsilon", "60"]
    proc = run_cli("schema", "draft", data, "--out", out, *(extra if dp else []), capsys=capsys)
    if dp and fragment == "no rows":  # under DP an empty table is drafted like any other (nothing is refused)
        return
    assert_one_line_error(proc, str(data), fragment)
    assert not out.exists() and not out.with_suffix(".ledger.json").exists()
    if dp and store.exists():  # a refused request charges nothing
        assert BudgetStore(store).budget("d").rho_committed == 0


# ---- a data dictionary ----------------------------------------------------------------------------
DICTIONARY = """name,type,min,max,categories,bins,integer,missing,missing_values,description
age,numeric,0,120,,,true,,,Age in years
income,numeric,-10000,1e6,,16,,true,N,"Income, dollars"
sex,categorical,,,F|M,,,,,
region,categorical,,,north | south|east,,no,yes,,
"""


def test_dictionary_gives_a_public_schema(tmp_path, capsys):
    path = tmp_path / "dict.csv"
    path.write_text(DICTIONARY)
    out = tmp_path / "schema.json"
    code, stdout, err = run_cli("schema", "from-dictionary", path, "--out", out, "--bins", "8", capsys=capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert DRAFT_NOTE_KEY not in doc
    schema = pf.Schema.load(out)
    assert schema.to_dict() == read_dictionary(path, bins=8).to_dict()
    age, income, region = schema.column("age"), schema.column("income"), schema.column("region")
    assert (age.lower, age.upper, age.integer, age.bins) == (0, 120, True, 8)
    assert (income.lower, income.upper, income.bins, income.missing_values) == (-10000, 1e6, 16, ("N",))
    assert income.missing and region.missing and region.categories == ("north", "south", "east")


@pytest.mark.parametrize(
    "row, fragment",
    [
        ("age,numeric,,120,,,,,,", "line 2, column 'min': numeric column 'age' needs a min"),
        ("age,numeric,0,,,,,,,", "line 2, column 'max'"),
        ("age,numeric,0,x,,,,,,", "line 2, column 'max': column 'age': 'x' is not a number"),
        ("sex,categorical,,,,,,,,", "line 2, column 'categories'"),
        ("sex,categorical,,,F||M,,,,,", "line 2, column 'categories': an empty item"),
        ("sex,text,,,F|M,,,,,", "line 2, column 'type'"),
        (",numeric,0,1,,,,,,", "line 2, column 'name'"),
        ("age,numeric,0,1,,,maybe,,,", "line 2, column 'integer'"),
        ("age,numeric,5,1,,,,,,", 'line 2: column \'age\': "lower" (5) is above "upper" (1)'),
        ("age,numeric,0,1,,,,,,\nage,numeric,0,1,,,,,,", "line 3, column 'name': 'age' is already declared on line 2"),
    ],
)
def test_dictionary_faults_name_the_file_line_and_column(row, fragment, tmp_path, capsys):
    path = tmp_path / "dict.csv"
    path.write_text("name,type,min,max,categories,bins,integer,missing,missing_values,description\n" + row + "\n")
    out = tmp_path / "schema.json"
    proc = run_cli("schema", "from-dictionary", path, "--out", out, capsys=capsys)
    assert_one_line_error(proc, str(path), fragment)
    assert not out.exists()


def test_dictionary_header_faults(tmp_path, capsys):
    path = tmp_path / "dict.csv"
    path.write_text("name,type,catgories\nsex,categorical,F|M\n")
    proc = run_cli("schema", "from-dictionary", path, "--out", tmp_path / "s.json", capsys=capsys)
    assert_one_line_error(proc, str(path), "line 1: unknown column 'catgories'")


@pytest.mark.skipif(not os.path.exists(f"{ACS}/data_dictionary.json"), reason="the NIST ACS excerpts are not here")
def test_the_public_acs_dictionary_as_csv_gives_a_schema_its_excerpts_pass(tmp_path):
    """NIST's ACS data dictionary (JSON) written as the CSV a spreadsheet would hold: its codes and
    ranges, 'N' as the missing value, INDP (codes listed only in the PUMS documentation) as a whole
    number in 0..9999."""
    import csv

    spec = json.loads(open(f"{ACS}/data_dictionary.json").read())
    header = pd.read_csv(f"{ACS}/ma2019.csv", nrows=0).columns
    rows = []
    for name in header:
        values = spec[name].get("values", {})
        codes = [k for k in values if k not in ("min", "max", "N")]
        na = "N" in values or name == "INDP"  # INDP's codes include N (not applicable) in the PUMS documentation
        row = {"name": name, "missing": "true" if na else "", "missing_values": "N" if na else ""}
        if "min" in values or name == "INDP":
            lo, hi = (values["min"], values["max"]) if "min" in values else (0, 9999)
            hi = max([hi, *[float(c) for c in codes]])  # POVPIP's 501 code
            whole = all(float(v).is_integer() for v in (lo, hi)) and name != "DENSITY"
            row.update(type="numeric", min=lo, max=hi, integer="true" if whole else "false")
        else:
            row.update(type="categorical", categories="|".join(codes))
        rows.append(row)
    path = tmp_path / "acs.csv"
    with open(path, "w", newline="") as fh:
        fields = ["name", "type", "min", "max", "categories", "integer", "missing", "missing_values"]
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    schema = read_dictionary(path)
    assert len(schema.columns) == 24
    pf.Silo.load(f"{ACS}/ma2019.csv", schema)


# ---- DP drafts: sensitivities on D and D plus one record -------------------------------------------
CELL = st.one_of(
    st.integers(-1000, 1000),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.sampled_from(["a", "b", "c", "", "NA", "x1", "7", "2.5", "inf"]),
)


@st.composite
def table_and_record(draw):
    d = draw(st.integers(1, 4))
    n = draw(st.integers(0, 12))
    rows = [[draw(CELL) for _ in range(d)] for _ in range(n)]
    extra = [draw(CELL) for _ in range(d)]
    names = [f"c{j}" for j in range(d)]
    cap = draw(st.integers(1, 6))
    return names, rows, extra, cap


def _frame(names, rows):
    return pd.DataFrame([[str(v) for v in r] for r in rows], columns=names, dtype=object).reindex(columns=names)


def _profiles(names, rows, cap, grid=None):
    frame = _frame(names, rows) if rows else pd.DataFrame({n: pd.Series([], dtype=object) for n in names})
    return profile_chunks([frame], names, cap, grid=grid)


def _vector(names, rows, cap):
    """The DP draft's profile vector of ``rows``: its profiles and its counts of each kind of cell."""
    frame = _frame(names, rows) if rows else pd.DataFrame({n: pd.Series([], dtype=object) for n in names})
    kinds = CellKinds(names)
    profiles = profile_chunks(kinds.watch([frame]), names, cap)
    return draft_dp.profile_vector(profiles, [kinds.counts[n] for n in names])


@settings(max_examples=150, deadline=None)
@given(table_and_record())
def test_one_record_moves_the_profile_by_at_most_sqrt_1_plus_2d(case):
    names, rows, extra, cap = case
    d, w = len(names), len(PROFILE_CELLS)
    before, after = _vector(names, rows, cap), _vector(names, rows + [extra], cap)
    diff = after - before
    assert diff[0] == 1 and set(np.unique(diff)) <= {0, 1}
    per_column = diff[1:].reshape(d, w)
    assert np.all(per_column[:, : w - 1].sum(axis=1) <= 1)  # missing, non-number, decimal places: exclusive
    assert np.linalg.norm(diff) <= draft_dp.profile_sensitivity(d) + 1e-12


@settings(max_examples=150, deadline=None)
@given(table_and_record())
def test_one_record_moves_one_interval_of_the_bounds_histogram_by_one(case):
    """The bounds histogram over the public grid's intervals: one record's number adds one to one
    interval (a missing cell or text adds nothing) -- sensitivity 1, on a public domain."""
    names, rows, extra, cap = case
    grid = draft_dp.BOUNDS_GRID
    for p, q in zip(_profiles(names, rows, cap, grid), _profiles(names, rows + [extra], cap, grid)):
        diff = q.intervals - p.intervals
        assert len(diff) == len(grid) + 1 and set(np.unique(diff)) <= {0, 1} and diff.sum() <= 1
        assert diff.sum() == q.numbers - p.numbers


def test_intervals_cover_the_line_once():
    grid = draft_dp.BOUNDS_GRID
    assert np.all(np.diff(grid) > 0) and grid[-1] == -grid[0] == 9e15 and 0 in grid
    x = np.array([-1e300, -9e15, -0.0015, 0.0, 0.001, 17.0, 90.0, 501.0, 9e15, 1e300])
    (p,) = profile_chunks([pd.DataFrame({"x": x})], ["x"], 100, grid=grid)
    assert p.intervals.sum() == len(x)
    for i in np.flatnonzero(p.intervals):
        lo, hi = draft_dp.interval_edges(int(i))
        assert np.any((x >= lo) & (x < hi)) or i in (0, len(grid))


@settings(max_examples=150, deadline=None)
@given(table_and_record())
def test_one_record_moves_one_value_count_by_one(case):
    """The thresholded histogram's counts (every value, uncapped): one value's count grows by one, or
    one new value appears with count one -- sensitivity 1, plus the event a new value passes."""
    names, rows, extra, _ = case
    for p, q in zip(_profiles(names, rows, 2**62), _profiles(names, rows + [extra], 2**62)):
        keys = set(p.counts) | set(q.counts)
        diff = {k: q.counts.get(k, 0) - p.counts.get(k, 0) for k in keys}
        assert sorted(diff.values()) in ([0] * (len(keys) - 1) + [1], [0] * len(keys))


@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.0, 13.9])
def test_threshold_delta_bounds_the_exact_discrete_gaussian_tail(sigma):
    tau = draft_dp.threshold_for(sigma, 1e-6)
    k = np.arange(-int(60 * sigma) - 60, int(60 * sigma) + 60)
    mass = np.exp(-(k.astype(float) ** 2) / (2 * sigma**2))
    exact = mass[k >= tau - 1].sum() / mass.sum()  # P(1 + Z >= tau)
    assert exact <= draft_dp.threshold_delta(sigma, tau) <= 1e-6
    assert draft_dp.threshold_delta(sigma, tau - 1) > 1e-6 or tau == 2
    assert audit_module.threshold_delta(sigma, tau) == draft_dp.threshold_delta(sigma, tau)


def test_the_budget_is_split_as_planned():
    plan = draft_dp.plan_draft(1.0, 1e-9, ["a", "b", "c"], 50, 32)
    assert plan.delta_conversion + 3 * plan.delta_target == pytest.approx(1e-9)
    assert plan.rho_budget == pytest.approx(epsilon_to_rho(1.0, 0.5e-9))
    spent = draft_dp.profile_sensitivity(3) ** 2 / (2 * plan.sigma_profile**2)
    assert spent + 3 * plan.rho_column == pytest.approx(plan.rho_budget)
    # a numeric column's rho: its bounds histogram and its atoms' histogram (a categorical one: its values)
    assert 1 / (2 * plan.sigma_column**2) + 1 / (2 * plan.sigma_atoms**2) == pytest.approx(plan.rho_column)
    assert 1 / (2 * plan.sigma_values**2) == pytest.approx(plan.rho_column)
    assert draft_dp.threshold_delta(plan.sigma_values, plan.threshold) <= plan.delta_target
    assert draft_dp.threshold_delta(plan.sigma_atoms, plan.atom_threshold) <= plan.delta_target
    # an empty interval of the bounds histogram passes its threshold with probability <= 1e-3 / 3,404
    cells = len(draft_dp.BOUNDS_GRID) + 1
    assert cells * 0.5 * math.erfc((plan.bound_rows - 1) / (plan.sigma_column * math.sqrt(2))) <= 1e-3
    assert cells * 0.5 * math.erfc((plan.bound_rows - 2) / (plan.sigma_column * math.sqrt(2))) > 1e-3


def test_the_audit_keeps_the_drafts_rules():
    assert audit_module.DRAFT_SEEN_SIGMAS == draft_dp.SEEN_SIGMAS
    assert audit_module.DRAFT_DISTINCT_GUARD == draft_dp.DISTINCT_GUARD


# ---- DP drafts: the command, the ledger, the budget store -----------------------------------------
@pytest.fixture
def dp_table(tmp_path):
    rng = np.random.default_rng(7)
    n = 2000
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 91, n),
            "income": rng.uniform(0, 1e5, n).round(2),
            "sex": rng.choice(["F", "M"], n),
            "city": rng.choice(["Austin", "Boston", "NA"], n),
            "id": [f"person-{i}" for i in range(n)],
        }
    )
    path = tmp_path / "people.csv"
    df.to_csv(path, index=False)
    return path


def dp_args(data, out, epsilon="50", *extra):
    return ["schema", "draft", data, "--out", out, "--dp", epsilon, "--delta", "1e-6", *extra]


def test_dp_draft_releases_a_usable_schema_and_a_ledger_that_audits(dp_table, tmp_path, capsys):
    """At epsilon 50 over 2,000 rows every decision below holds but with probability under 1e-5."""
    out = tmp_path / "schema.json"
    code, stdout, err = run_cli(*dp_args(dp_table, out), capsys=capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    note = doc[DRAFT_NOTE_KEY]
    assert note["privacy"] == "differential privacy" and note["dp"]["ledger"] == "schema.ledger.json"
    cols = {c["name"]: c for c in doc["columns"]}
    assert set(cols) == {"age", "income", "sex", "city"}
    assert cols["age"]["integer"] and 10 <= cols["age"]["lower"] <= 20 and 89 <= cols["age"]["upper"] <= 100
    # the grid's intervals fit the values (a tenth of a decade wide): 1,000 of 0..100,000 hold about 20 rows
    assert not cols["income"].get("integer") and cols["income"]["decimals"] == 2
    assert 0 <= cols["income"]["lower"] <= 2000 and cols["income"]["upper"] == 99999.99  # 2 decimal places
    assert cols["sex"]["categories"] == ["F", "M", "(other)"] and cols["sex"]["unknown"] == "(other)"
    assert cols["city"]["categories"] == ["Austin", "Boston", "(other)"] and cols["city"]["missing"]
    assert "id" in err and "left out" in err
    ledger = load_ledger(tmp_path / "schema.ledger.json")
    report = audit_ledger(ledger)
    assert report.ok, report.problems
    assert ledger["method"] == "schema-draft" and ledger["status"] == "complete"
    thresholds = [e for e in ledger["entries"] if "threshold" in e]
    # the atoms of 'age' and 'income', the categories of 'sex' and 'city'; 'id' left out from the profile alone
    assert [e["column"] for e in thresholds] == ["age", "income", "sex", "city"]
    assert ledger["details"]["draft"]["identifiers"] == ["id"]
    assert ledger["delta"] == pytest.approx(ledger["delta_conversion"] + sum(e["delta"] for e in thresholds))
    assert ledger["delta"] <= 1e-6 and ledger["epsilon"] <= 50 * (1 + 1e-9)
    assert run_cli("audit", tmp_path / "schema.ledger.json", capsys=capsys).returncode == 0
    kept = tmp_path / "kept.csv"
    pd.read_csv(dp_table, dtype=str, keep_default_na=False).drop(columns=["id"]).to_csv(kept, index=False)
    pf.Silo.load(kept, pf.Schema.load(out))


def _tamper_profile_sensitivity(led):
    led["entries"][0]["sensitivity_l2"] = 1.0
    led["entries"][0]["rho"] = 1 / (2 * led["entries"][0]["sigma"] ** 2)


def _tamper_delta(led):
    e = next(e for e in led["entries"] if "threshold" in e)
    e["delta"] /= 10


def _tamper_threshold(led):
    e = next(e for e in led["entries"] if "threshold" in e)
    e["threshold"] -= 1


def _tamper_total_delta(led):
    led["delta"] = led["delta_conversion"]


def _tamper_drop_bounds(led):
    i = next(i for i, e in enumerate(led["entries"]) if e.get("column") == "age")
    gone = led["entries"].pop(i)
    for j, e in enumerate(led["entries"]):
        e["step"] = j + 1
    led["rho_spent"] -= gone["rho"]
    from privsyn_fed.accounting import rho_to_epsilon

    led["epsilon"] = rho_to_epsilon(led["rho_spent"], led["delta_conversion"])


def _tamper_bounds_sensitivity(led):
    e = next(e for e in led["entries"] if e.get("column") == "income")
    e["sensitivity_l2"] = 0.5
    e["rho"] = 0.125 / e["sigma"] ** 2


def _tamper_profile(led):
    w = len(PROFILE_CELLS)
    # 'sex' would have been numbers, of too many distinct values for a code: a bounds histogram
    led["details"]["draft"]["profile"][2 + w * 2] = 0
    led["details"]["draft"]["profile"][w * 3] = 10**6


def _tamper_conversion(led):
    led["delta_conversion"] *= 2


def _tamper_cells(led):
    led["entries"][0]["cells"] = 3


def _tamper_column(led):
    led["entries"][-1]["column"] = "nobody"


@pytest.mark.parametrize(
    "tamper, fragment",
    [
        (_tamper_profile_sensitivity, "below the sound value sqrt(1 + 2 x 5)"),
        (_tamper_delta, "recorded delta"),
        (_tamper_threshold, "recorded delta"),
        (_tamper_total_delta, "plus the entries' deltas"),
        (_tamper_drop_bounds, "missing: bounds of 'age'"),
        (_tamper_bounds_sensitivity, "L2 sensitivity at least 1"),
        (_tamper_profile, "missing: bounds of 'sex'; unexpected: categories of 'sex'"),
        (_tamper_conversion, "converts to"),
        (_tamper_cells, "cells"),
        (_tamper_column, "unexpected: categories of 'nobody'"),
    ],
)
def test_tampering_with_a_drafting_ledger_fails_the_audit(tamper, fragment, dp_table, tmp_path, capsys):
    out = tmp_path / "schema.json"
    assert run_cli(*dp_args(dp_table, out), capsys=capsys).returncode == 0
    led = load_ledger(tmp_path / "schema.ledger.json")
    tamper(led)
    problems = audit_ledger(led).problems
    assert any(fragment in p for p in problems), problems
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(led))
    code, stdout, _ = run_cli("audit", path, capsys=capsys)
    assert code == 1 and "FAILED" in stdout


def test_a_release_ledger_cannot_carry_a_threshold_delta_unaccounted():
    led = {
        "format": "privsyn-fed-ledger/1",
        "method": "independent",
        "neighbouring": "add/remove one record",
        "epsilon": 1.0,
        "delta": 1e-9,
        "rho_budget": 1.0,
        "rho_spent": 0.5,
        "seeded": False,
        "status": "running",
        "entries": [
            {"step": 1, "mechanism": "gaussian", "query": "q", "rho": 0.5, "where": "curator"}
            | {"sensitivity_l2": 1.0, "sigma": 1.0, "threshold": 10.0, "delta": 1e-3}
        ],
    }
    assert any("delta_conversion" in p for p in audit_ledger(led).problems)


def test_too_small_a_budget_is_refused_before_anything(dp_table, tmp_path, capsys):
    out, store = tmp_path / "schema.json", tmp_path / "budget.db"
    BudgetStore(store).reserve("d", epsilon=0.01, delta=1e-6, method="aim", total_epsilon=5).settle(0.0, "rejected")
    before = store.read_bytes()
    extra = ["--budget-store", store, "--dataset-id", "d"]
    proc = run_cli(*dp_args(dp_table, out, "0.01", *extra), capsys=capsys)
    assert_one_line_error(proc, "--dp 0.01 is too small", "column 'age'", "--dp needs at least")
    need = float(proc.stderr.split("at least ")[1].split()[0])
    assert not out.exists() and not (tmp_path / "schema.ledger.json").exists()
    assert store.read_bytes() == before  # nothing reserved
    # the epsilon it names suffices to plan the draft (which, so coarse, may leave columns to fill in by hand)
    assert run_cli(*dp_args(dp_table, out, str(need), "--leave-unfound"), capsys=capsys).returncode == 0


def test_dp_draft_draws_on_the_budget_store_and_settles_at_its_spend(dp_table, tmp_path, capsys):
    out, store = tmp_path / "schema.json", tmp_path / "budget.db"
    extra = ["--budget-store", store, "--dataset-id", "people", "--total-epsilon", "60"]
    code, _, err = run_cli(*dp_args(dp_table, out, "50", *extra), capsys=capsys)
    assert code == 0, err
    ledger = load_ledger(tmp_path / "schema.ledger.json")
    assert ledger["details"]["budget_store"]["dataset_id"] == "people"
    (run,) = BudgetStore(store).budget("people").runs
    assert run["status"] == "complete" and run["method"] == "schema-draft"
    assert run["rho_spent"] == pytest.approx(ledger["rho_spent"])
    slack = BudgetStore(store).run(run["id"])["delta_slack"]
    assert slack == pytest.approx(ledger["delta"] - ledger["delta_conversion"])
    budget = BudgetStore(store).budget("people")
    assert budget.rho_total == pytest.approx(epsilon_to_rho(60, 1e-6 - slack))  # the thresholds' deltas are spent
    # a second draft of 50 does not fit in what is left: refused, nothing charged or written
    out2 = tmp_path / "again.json"
    code, _, err = run_cli(
        *dp_args(dp_table, out2, "50", "--budget-store", store, "--dataset-id", "people"), capsys=capsys
    )
    assert code == 1 and "refused" in err and "no silo was read" in err
    assert not out2.exists() and not (tmp_path / "again.ledger.json").exists()
    assert len(BudgetStore(store).budget("people").runs) == 1


def test_a_draft_failing_on_its_rows_settles_at_zero(tmp_path, capsys):
    data = _bad_line_far_down(tmp_path)
    store = tmp_path / "budget.db"
    extra = ["--budget-store", store, "--dataset-id", "d", "--total-epsilon", "60"]
    proc = run_cli(*dp_args(data, tmp_path / "s.json", "50", *extra), capsys=capsys)
    assert_one_line_error(proc, "line 300002")
    assert not (tmp_path / "s.json").exists() and not (tmp_path / "s.ledger.json").exists()
    (run,) = BudgetStore(store).budget("d").runs
    assert run["status"] == "rejected" and run["rho_spent"] == 0
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT delta_slack FROM runs").fetchone()[0] == 0


def test_the_store_converts_at_delta_less_the_thresholds_deltas(tmp_path):
    store = BudgetStore(tmp_path / "b.db")
    r = store.reserve("d", epsilon=1.0, delta=1e-6, method="schema-draft", total_epsilon=2.0, delta_slack=4e-7)
    assert r.rho == pytest.approx(epsilon_to_rho(1.0, 6e-7))
    r.settle(r.rho, "complete", 1e-7)
    budget = store.budget("d")
    assert budget.delta_slack == pytest.approx(1e-7)
    assert budget.rho_total == pytest.approx(epsilon_to_rho(2.0, 9e-7))
    with pytest.raises(ValueError, match="beyond its reserved slack"):
        store.reserve("d", epsilon=0.1, delta=1e-6, method="schema-draft", delta_slack=1e-8).settle(0, "complete", 1e-7)


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--dp", "1"], "--dp needs --delta"),
        (["--delta", "1e-9"], "belong to --dp"),
        (["--dp", "1", "--delta", "1e-9", "--dataset-id", "x"], "need --budget-store"),
        (["--dp", "1", "--delta", "1e-9", "--budget-store", "b.db"], "needs --dataset-id"),
        (["--dp", "1", "--delta", "0.5"], "--delta must lie"),
        (["--categorical-max", "-1"], "--categorical-max"),
        (["--missing-value", " N"], "--missing-value"),
    ],
)
def test_option_faults_are_one_line(args, fragment, table, tmp_path, capsys):
    out = tmp_path / "schema.json"
    proc = run_cli("schema", "draft", table, "--out", out, *args, capsys=capsys)
    assert_one_line_error(proc, fragment)
    assert not out.exists()


def test_help_explains_the_commands(capsys):
    for args in (["schema", "draft", "--help"], ["schema", "from-dictionary", "--help"]):
        with pytest.raises(SystemExit) as exit:
            main(args)
        assert exit.value.code == 0
        text = capsys.readouterr().out
        assert ("NOT PRIVATE" in text and "--dp" in text) or "separated by '|'" in text


def test_missing_tokens_are_the_schemas():
    # the draft's notion of a missing cell is the validation's own
    frame = pd.DataFrame({"x": list(MISSING_TOKENS) + ["1"]})
    (p,) = profile_chunks([frame], ["x"], 10)
    assert p.missing == len(MISSING_TOKENS) and p.present == 1
    with pytest.raises(InputError, match="no rows"):
        draft_frame(frame.iloc[:0])
    assert quiet_draft(frame).column("x").missing


def test_dp_ledger_goes_where_asked_and_never_onto_an_input(dp_table, tmp_path, capsys):
    out, ledger = tmp_path / "schema.json", tmp_path / "drafting.json"
    assert run_cli(*dp_args(dp_table, out, "50", "--ledger", ledger), capsys=capsys).returncode == 0
    assert audit_ledger(load_ledger(ledger)).ok and not (tmp_path / "schema.ledger.json").exists()
    proc = run_cli(*dp_args(dp_table, tmp_path / "other.json", "50", "--ledger", dp_table, "--force"), capsys=capsys)
    assert_one_line_error(proc, "--ledger", "same file")
    assert pd.read_csv(dp_table).shape == (2000, 5)
    proc = run_cli(*dp_args(dp_table, out, "50", "--ledger", ledger), capsys=capsys)
    assert_one_line_error(proc, "already exists")


def test_from_dictionary_replaces_only_with_force(tmp_path, capsys):
    path, out = tmp_path / "dict.csv", tmp_path / "schema.json"
    path.write_text(DICTIONARY)
    out.write_text("keep")
    proc = run_cli("schema", "from-dictionary", path, "--out", out, capsys=capsys)
    assert_one_line_error(proc, str(out), "--force")
    assert out.read_text() == "keep"
    assert run_cli("schema", "from-dictionary", path, "--out", out, "--force", capsys=capsys).returncode == 0
    proc = run_cli("schema", "from-dictionary", path, "--out", tmp_path / "no" / "s.json", capsys=capsys)
    assert_one_line_error(proc, "does not exist")
