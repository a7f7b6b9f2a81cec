"""``common.csv_text``: a frame's CSV text is pandas' ``to_csv(index=False, na_rep="")`` byte for
byte, whichever of Arrow and pandas writes it."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privsyn_fed.common import csv_text


def pandas_text(frames: list[pd.DataFrame]) -> str:
    out = io.StringIO()
    for i, part in enumerate(frames):
        part.to_csv(out, index=False, header=i == 0, na_rep="")
    return out.getvalue()


def ours(frames: list[pd.DataFrame]) -> str:
    out = io.StringIO()
    for i, part in enumerate(frames):
        csv_text.write_frame(part, out, header=i == 0)
    return out.getvalue()


def arrow_used(part: pd.DataFrame) -> bool:
    return part.shape[1] > 1 and csv_text._arrow_columns(part) is not None


FLOATS = [3.0, -0.0, 0.1, 1e-7, 1e-5, 1e-4, 1e15, 1e16, 1e20, 2.5e-300, 12345.678, np.inf, -np.inf, np.nan]


def mixed_frame(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    floats = rng.normal(size=rows) * 10.0 ** rng.integers(-9, 13, rows)
    floats[: len(FLOATS)] = FLOATS[:rows]
    frame = pd.DataFrame(
        {
            "age": rng.integers(0, 100, rows),
            "income": floats,
            "visits": pd.array(rng.integers(-5, 9, rows), dtype="Int64"),
            "county": pd.Series(rng.choice(["North", "Süd", " spaced ", "a;b", "it's"], rows), dtype=object),
            "label": pd.Series(rng.choice(["yes", "no"], rows), dtype="str"),
        }
    )
    frame.loc[frame.index[::7], "visits"] = pd.NA
    frame.loc[frame.index[::5], "county"] = None
    frame.loc[frame.index[::11], "label"] = np.nan
    frame.loc[frame.index[::13], "income"] = np.nan
    return frame


def test_numbers_text_and_missing_cells_are_pandas_bytes_through_arrow():
    frames = [mixed_frame(3000, 1), mixed_frame(2000, 2)]
    assert all(arrow_used(f) for f in frames)
    assert ours(frames) == pandas_text(frames)


@pytest.mark.parametrize("value", ["a,b", 'say "hi"', "two\nlines", "cr\rhere"])
def test_a_value_that_may_need_quotes_is_written_by_pandas(value):
    frame = mixed_frame(50, 3)
    frame.loc[7, "county"] = value
    frame.loc[8, "label"] = value
    assert not arrow_used(frame)
    assert ours([frame]) == pandas_text([frame])
    if "\r" not in value:  # pandas' line ends are "\n": it quotes a "\r" no more than Arrow would
        assert ours([frame]).count(f'"{value}"'.replace('"hi"', '""hi""')) == 2


@pytest.mark.parametrize(
    "column",
    [
        pd.Series([True, False, True]),
        pd.Series(["a", "b", "a"], dtype="category"),
        pd.Series([1, "two", 3.5], dtype=object),
        pd.Series(pd.to_datetime(["2020-01-01", "2021-06-30", None])),
        pd.Series(np.array([1.5, 2.25, np.nan], dtype=np.float32)),
    ],
)
def test_columns_arrow_would_write_otherwise_are_written_by_pandas(column):
    frame = pd.DataFrame({"x": [1, 2, 3], "y": column})
    assert not arrow_used(frame)
    assert ours([frame]) == pandas_text([frame])


def test_a_single_column_with_an_empty_cell_keeps_pandas_quotes():
    frame = pd.DataFrame({"only": pd.Series(["a", None, "b"], dtype=object)})
    assert ours([frame]) == pandas_text([frame]) == 'only\na\n""\nb\n'


def test_an_empty_frame_writes_its_header_only():
    frame = mixed_frame(10, 4).iloc[:0]
    assert ours([frame]) == pandas_text([frame]) == "age,income,visits,county,label\n"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=40),
    st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6), min_size=1, max_size=40),
    st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), min_size=1, max_size=40),
)
def test_any_floats_text_and_integers(floats, texts, integers):
    rows = min(len(floats), len(texts), len(integers))
    frame = pd.DataFrame({"f": floats[:rows], "t": pd.Series(texts[:rows], dtype=object), "i": integers[:rows]})
    assert ours([frame, frame]) == pandas_text([frame, frame])


def test_the_quote_check_reads_only_the_array_s_own_values():
    import pyarrow as pa

    for kind in (pa.string(), pa.large_string()):
        values = pa.array(["a", 'b"', "ü,", None, "d"], type=kind)
        assert csv_text._needs_quotes(values)
        assert csv_text._needs_quotes(values.slice(2, 1))
        assert not csv_text._needs_quotes(values.slice(3))
        assert not csv_text._needs_quotes(values.slice(0, 1))
        assert not csv_text._needs_quotes(pa.array([None, None], type=kind))
        assert not csv_text._needs_quotes(pa.array(["Zürich", "naïve"], type=kind))


def test_a_utf8_file_gets_arrow_s_bytes_after_the_text_written_before(tmp_path):
    frames = [mixed_frame(500, 5), mixed_frame(700, 6), mixed_frame(300, 7)]
    frames[1].loc[3, "county"] = "needs, quotes"  # the middle chunk goes through pandas
    path = tmp_path / "rows.csv"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write("")  # nothing buffered yet; the header is pandas' own
        for i, part in enumerate(frames):
            csv_text.write_frame(part, fh, header=i == 0)
    assert [arrow_used(f) for f in frames] == [True, False, True]
    assert path.read_bytes().decode("utf-8") == pandas_text(frames)
