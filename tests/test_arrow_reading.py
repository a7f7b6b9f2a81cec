"""The Arrow route of reading a silo gives exactly the pandas route's rows, or declines.

``Silo.load`` reads CSV and Parquet through Arrow (``read_arrow_chunks``, ``encode_batch``) and falls
back to pandas (``read_chunks``, ``encode_frame``) wherever Arrow might read other cells. Each test
compares the two routes on the same file: the same codes, values and clipped counts, the same error
message, and the Arrow route taken (not declined) for ordinary files.
"""

from __future__ import annotations

import gzip
import json
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import privsyn_fed as pf
from privsyn_fed.common import InputError
from privsyn_fed.common.tables import NotArrowReadable, read_arrow_chunks
from privsyn_fed.schema.encode_arrow import PLAIN_NUMBER, WHITESPACE
from privsyn_fed.silo.silo import _read_store

SCHEMA = {
    "columns": [
        {"name": "city", "type": "categorical", "categories": ["São Paulo", "NA", "x y", "Zürich"], "missing": True,
         "missing_values": ["?"]},
        {"name": "grade", "type": "categorical", "categories": ["a", "b", "other"], "unknown": "other"},
        {"name": "score", "type": "numeric", "lower": -10, "upper": 10, "bins": 8, "missing": True},
        {"name": "count", "type": "numeric", "lower": 0, "upper": 100, "integer": True,
         "edges": [10, 20, 50]},
        {"name": "code", "type": "categorical", "categories": ["1", "2", "3"]},
    ]
}  # fmt: skip

CITY = ["São Paulo", " NA", "x y ", "\u00a0Zürich\u2003", "", "?", "null", "\tx y"]
GRADE = ["a", " b", "c", "other", "zz"]
SCORE = ["1.5", "-0", "+3", ".25", "1e1", "-1E-3", "", "NaN", "12", "-20.5", "7.", " 4 "]
COUNT = ["0", "15", "20", "49", "50", "100", "130", "-5", "33"]


@pytest.fixture
def schema(tmp_path) -> pf.Schema:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    return pf.Schema.load(path)


def _rows(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "city": rng.choice(CITY, n),
            "grade": rng.choice(GRADE, n),
            "score": rng.choice(SCORE, n),
            "count": rng.choice(COUNT, n),
            "code": rng.choice(["1", "2", "3"], n),
            "note": rng.choice(["ignored", "also, ignored"], n),  # a column the schema does not hold
        }
    )


def _both(path, schema, site=None, chunk_rows=1000):
    """The rows, values and clipped counts by each route; the Arrow route must not decline."""
    source = str(path)
    columns = [c for c in schema.names if site is None or c != site[0]]
    out = []
    for arrow in (True, False):
        store, clipped, _ = _read_store(path, schema, source, chunk_rows, columns, site, None, arrow=arrow)
        parts = list(store.parts(with_values=True))
        codes = np.concatenate([c for c, _ in parts]).astype(np.int64)
        values = np.concatenate([v for _, v in parts])
        store.close()
        out.append((codes, values, clipped))
    return out


def _assert_same(arrow, pandas):
    assert np.array_equal(arrow[0], pandas[0])
    assert np.array_equal(arrow[1], pandas[1], equal_nan=True)
    assert arrow[2] == pandas[2]


def test_csv_and_gzip_give_the_pandas_rows(schema, tmp_path):
    df = _rows(3000)
    plain, packed = tmp_path / "t.csv", tmp_path / "t.csv.gz"
    df.to_csv(plain, index=False)
    with gzip.open(packed, "wt", newline="") as fh:
        df.to_csv(fh, index=False, lineterminator="\r\n")
    for path in (plain, packed):
        arrow, pandas = _both(path, schema)
        _assert_same(arrow, pandas)
        assert len(arrow[0]) == 3000 and arrow[2]["count"] > 0 and arrow[2]["score"] > 0
        assert (arrow[0][:, 2] == 8).any()  # missing scores in the missing cell
    silo = pf.Silo.load(plain, schema)
    assert silo.true_size() == 3000


def test_batches_across_blocks_and_quoted_line_breaks(schema, tmp_path, monkeypatch):
    from privsyn_fed.common import tables

    monkeypatch.setattr(tables, "ARROW_BLOCK_BYTES", 4096)  # many batches
    df = _rows(2000, seed=1)
    df.loc[::7, "city"] = "x y"  # written unquoted; a quoted cell with a line break below
    df["note"] = np.where(np.arange(2000) % 5 == 0, "two\nlines", "one")
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    batches = list(read_arrow_chunks(path, columns=schema.names))
    assert len(batches) > 10
    assert [b.first_row for b in batches] == list(2 + np.cumsum([0] + [b.batch.num_rows for b in batches[:-1]]))
    _assert_same(*_both(path, schema))


def test_parquet_typed_columns_give_the_pandas_rows(schema, tmp_path):
    n = 2500
    rng = np.random.default_rng(2)
    score = rng.normal(0, 8, n)
    score[rng.random(n) < 0.1] = np.nan
    table = pa.table(
        {
            "city": pa.array([None if v == "" else v for v in rng.choice(CITY, n)], pa.string()),
            "grade": pa.array(rng.choice(GRADE, n)).dictionary_encode(),
            "score": pa.array(score),
            "count": pa.array(rng.integers(-5, 130, n)),
            "code": pa.array(rng.integers(1, 4, n)),  # a categorical column stored as whole numbers
        }
    )
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=700)
    _assert_same(*_both(path, schema, chunk_rows=600))


def test_silo_column_the_table_lacks(schema, tmp_path):
    df = _rows(500, seed=3).drop(columns=["grade"])
    path = tmp_path / "a.csv"
    df.to_csv(path, index=False)
    arrow, pandas = _both(path, schema, site=("grade", "b"))
    _assert_same(arrow, pandas)
    assert (arrow[0][:, 1] == 1).all()


def test_quote_in_a_cell_declines_to_pandas(schema, tmp_path):
    path = tmp_path / "t.csv"
    lines = ["city,grade,score,count,code"] + ['x y, "a",1,2,1'] * 3  # pandas skips the space before a quote
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(NotArrowReadable):
        list(read_arrow_chunks(path, columns=schema.names))
    silo = pf.Silo.load(path, schema)
    assert silo.rows()[:, 1].tolist() == [0, 0, 0]  # "a", as pandas reads it


def _outcome(path, schema, arrow: bool):
    """The rows, or the error's message, by one route."""
    try:
        store, _, _ = _read_store(path, schema, str(path), 1000, schema.names, None, None, arrow=arrow)
    except (InputError, NotArrowReadable) as exc:
        return type(exc).__name__, str(exc)
    rows = np.concatenate([c for c, _ in store.parts()]).astype(np.int64).tolist()
    store.close()
    return "rows", rows


@pytest.mark.parametrize(
    "body, fragment",
    [
        (b"x y,a,1,2,4\n", "column 'code': category '4' is not in the schema"),
        (b"x y,a,abc,2,1\n", "column 'score': 'abc' is not a number"),
        (b"x y,a,inf,2,1\n", "column 'score': 'inf' is not a number"),
        (b"x y,a,1,,1\n", "column 'count': missing value"),
        (b"x y,a,1,2\n", ""),  # a short row: pandas' reading decides
        (b"x y,a,1,2,1,9\n", ""),  # a long row: pandas' reading decides
        (b"x y,a,1,2,\xff1\n", "is not UTF-8 text"),
        (b'x y,"a\nb",1,2,1\n', ""),
    ],
)
def test_errors_are_the_pandas_routes(schema, tmp_path, body, fragment):
    path = tmp_path / "bad.csv"
    good = b"x y,a,1,2,1\n" * 50
    path.write_bytes(b"city,grade,score,count,code\n" + good + body + good)
    slow = _outcome(path, schema, arrow=False)
    try:
        silo = pf.Silo.load(path, schema)
        fast = ("rows", silo.rows().tolist())
    except InputError as exc:
        fast = ("InputError", str(exc))
    assert fast == slow
    if fragment:
        assert fast[0] == "InputError" and fragment in fast[1], fast


def test_plain_numbers_parse_as_pandas_parses_them():
    """Arrow's parse of ``PLAIN_NUMBER`` texts equals pandas' ``to_numeric`` to the bit."""
    rng = np.random.default_rng(4)
    digits = np.array(list("0123456789"))
    texts = []
    for _ in range(20000):
        whole = "".join(rng.choice(digits, rng.integers(1, 22)))
        frac = "".join(rng.choice(digits, rng.integers(0, 22)))
        text = rng.choice(["", "-", "+"]) + whole + ("." + frac if rng.random() < 0.7 else "")
        if rng.random() < 0.3:
            text += f"e{rng.integers(-320, 320)}"
        texts.append(text)
    texts += ["0", "-0", ".5", "5.", "1e308", "2e308", "4.9e-324", "9007199254740993", "18446744073709551617"]
    array = pa.array(texts)
    assert pc.all(pc.match_substring_regex(array, PLAIN_NUMBER)).as_py()
    ours = pc.cast(array, pa.float64()).to_numpy()
    theirs = pd.to_numeric(pd.Series(texts, dtype=object)).to_numpy(float)
    assert np.array_equal(ours, theirs)
    for text in ["0x10", "1_000", "inf", "nan", "1e", "e5", "--1", "1d5", "١٢", " 1", ""]:
        assert not pc.match_substring_regex(pa.array([text]), PLAIN_NUMBER)[0].as_py(), text


def test_trimming_strips_what_python_strips():
    rng = np.random.default_rng(5)
    pool = list(WHITESPACE) + list("ab é\u200b")  # U+200B is not white space to Python
    texts = ["".join(rng.choice(pool, rng.integers(0, 8))) for _ in range(5000)]
    trimmed = pc.utf8_trim(pa.array(texts), characters=WHITESPACE).to_pylist()
    assert trimmed == [t.strip() for t in texts]
    assert sorted(WHITESPACE) == [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]


def test_unit_hashes_are_the_pandas_routes(schema, tmp_path):
    from privsyn_fed.common import read_chunks
    from privsyn_fed.silo.silo import _unit_hashes
    from privsyn_fed.silo.units import new_key, unit_hashes

    df = _rows(3000, seed=6)
    df["person"] = [f" p{i % 700} " for i in range(3000)]
    csv, parquet = tmp_path / "t.csv", tmp_path / "t.parquet"
    df.to_csv(csv, index=False)
    df.to_parquet(parquet)
    key = new_key()
    for path in (csv, parquet):
        list(read_arrow_chunks(path, columns=["person"]))  # the Arrow route does not decline
        ours = _unit_hashes(path, "person", key, str(path), 1000)
        theirs = np.concatenate(
            [
                unit_hashes(c.frame["person"], key, "person", str(path), c.first_row)
                for c in read_chunks(path, 1000, columns=["person"])
            ]
        )
        assert np.array_equal(ours, theirs)
        assert len(np.unique(ours)) == 700


def _open_csv_readers() -> int:
    import gc

    gc.collect()
    return sum(type(o).__name__ == "CSVStreamingReader" for o in gc.get_objects())


def test_an_error_mid_file_leaves_no_arrow_reader_open(schema, tmp_path, monkeypatch):
    """An Arrow CSV reader left open until the interpreter exits can abort it (a fatal error, exit
    status 134, seen with an uncaught error on a 1M-row silo): every reader is closed as the error
    leaves ``Silo.load``, even while the error's traceback is still held."""
    from privsyn_fed.common import tables

    monkeypatch.setattr(tables, "ARROW_BLOCK_BYTES", 4096)  # many batches: the error comes mid-file
    rows = _rows(3000, seed=7)
    rows["person"] = np.arange(len(rows)).astype(str)
    rows.loc[1500, "code"] = "9"  # a category outside the schema, mid-file
    path = tmp_path / "t.csv"
    rows.to_csv(path, index=False)
    before = _open_csv_readers()
    with pytest.raises(ValueError, match="16-byte") as caught:  # hashing refuses the key: not our error
        pf.Silo.load(path, schema, unit="person", unit_key="short")
    assert caught.tb is not None and _open_csv_readers() == before  # the traceback's frames still held
    with pytest.raises(InputError, match="row 1502, column 'code'") as caught_too:
        pf.Silo.load(path, schema)
    assert caught_too.tb is not None and _open_csv_readers() == before


def test_reading_a_parquet_file_holds_one_batch_not_the_file(tmp_path):
    """Arrow's memory while a Parquet file of 40 row groups (37 MB) is read a batch at a time stays
    near one batch's: the reader does not keep the row groups it has read."""
    path = tmp_path / "groups.parquet"
    rng = np.random.default_rng(0)
    with pq.ParquetWriter(path, pa.schema([("x", pa.float64()), ("y", pa.int64())])) as writer:
        for _ in range(40):
            writer.write_table(pa.table({"x": rng.normal(size=50_000), "y": rng.integers(0, 2**40, 50_000)}))
    before = pa.total_allocated_bytes()
    peak = 0
    for chunk in read_arrow_chunks(path, 10_000):
        peak = max(peak, pa.total_allocated_bytes() - before)
    assert chunk.first_row == 40 * 50_000 - 10_000 + 1
    assert peak < path.stat().st_size / 4, (peak, path.stat().st_size)
