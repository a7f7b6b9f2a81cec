import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privsyn_fed as pf
from privsyn_fed.common import InputError
from privsyn_fed.schema import decode_codes, encode_frame


def frame(**cols):
    return pd.DataFrame({k: [str(v) for v in vals] for k, vals in cols.items()})


def test_encode_bins_categories_and_missing(schema):
    df = frame(
        age=[18, 90, 54],
        income=[0, 100, 50],
        sex=["F", "M", "M"],
        region=["north", "", "east"],
        label=["no", "yes", "no"],
    )
    codes, clipped = encode_frame(df, schema, "t.csv")
    assert codes.dtype == np.int64
    assert codes[:, 0].tolist() == [0, 7, 3]  # 73 ages in 8 bins: 54 -> k=36 -> 36*8//73 = 3
    assert codes[:, 1].tolist() == [0, 5, 3]
    assert codes[:, 3].tolist() == [0, 3, 2]  # missing is the last cell
    assert clipped == {"age": 0, "income": 0}


def test_out_of_bounds_values_are_clipped_and_counted(schema):
    df = frame(age=[5, 200, 30], income=[-1, 50, 1e6], sex=["F"] * 3, region=["north"] * 3, label=["no"] * 3)
    codes, clipped = encode_frame(df, schema, "t.csv")
    assert clipped == {"age": 2, "income": 2}
    assert codes[0, 0] == 0 and codes[1, 0] == 7 and codes[2, 1] == 5


@pytest.mark.parametrize(
    "change, fragment",
    [
        (dict(sex=["F", "X"]), "row 3, column 'sex': category 'X' is not in the schema"),
        (dict(age=["40", "forty"]), "row 3, column 'age': 'forty' is not a number"),
        (dict(label=["no", ""]), "row 3, column 'label': missing value"),
    ],
)
def test_bad_values_name_row_column_value(schema, change, fragment):
    base = dict(age=["40", "41"], income=["1", "2"], sex=["F", "M"], region=["north", "south"], label=["no", "yes"])
    base.update(change)
    with pytest.raises(InputError, match=fragment):
        encode_frame(frame(**base), schema, "t.csv")


def test_unknown_category_maps_to_declared_catch_all():
    s = pf.Schema.from_dict(
        {"columns": [{"name": "c", "type": "categorical", "categories": ["a", "other"], "unknown": "other"}]}
    )
    codes, _ = encode_frame(frame(c=["a", "zzz"]), s, "t")
    assert codes[:, 0].tolist() == [0, 1]


def test_equal_bounds_and_single_category_columns():
    s = pf.Schema.from_dict(
        {
            "columns": [
                {"name": "x", "type": "numeric", "lower": 3, "upper": 3},
                {"name": "c", "type": "categorical", "categories": ["only"]},
            ]
        }
    )
    codes, _ = encode_frame(frame(x=[3, 3.0], c=["only", "only"]), s, "t")
    out = decode_codes(codes, s, np.random.default_rng(0))
    assert out["x"].tolist() == [3.0, 3.0] and out["c"].tolist() == ["only", "only"]


columns = st.one_of(
    st.builds(
        lambda lo, span, bins, integer: {
            "type": "numeric",
            "lower": lo,
            "upper": lo + span,
            "bins": bins,
            "integer": integer,
        },
        st.integers(-1000, 1000),
        st.integers(0, 500),
        st.integers(1, 40),
        st.booleans(),
    ),
    st.builds(
        lambda k, missing: {"type": "categorical", "categories": [f"c{i}" for i in range(k)], "missing": missing},
        st.integers(1, 6),
        st.booleans(),
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(columns, min_size=1, max_size=4), st.integers(0, 2**31), st.integers(1, 50))
def test_encode_then_decode_keeps_categories_and_bounds(specs, seed, n):
    """Property: decoded values stay in bounds, land in the encoded bin, and keep categories."""
    schema = pf.Schema.from_dict({"columns": [dict(s, name=f"col{i}") for i, s in enumerate(specs)]})
    rng = np.random.default_rng(seed)
    raw = {}
    for col in schema.columns:
        if isinstance(col, pf.NumericColumn):
            vals = rng.uniform(col.lower - 10, col.upper + 10, n)
            raw[col.name] = [str(int(round(v))) if col.integer else repr(float(v)) for v in vals]
        else:
            choices = list(col.categories) + ([""] if col.missing else [])
            raw[col.name] = list(rng.choice(choices, n))
    codes, _ = encode_frame(pd.DataFrame(raw), schema, "t")
    out = decode_codes(codes, schema, rng)
    again, clipped = encode_frame(out.astype(object).where(out.notna(), "").astype(str), schema, "t")
    assert np.array_equal(codes, again)  # decoded value falls back into its bin
    assert all(v == 0 for v in clipped.values())  # never outside the bounds
    for col in schema.columns:
        if isinstance(col, pf.CategoricalColumn):
            present = out[col.name].dropna()
            assert set(present) <= set(col.categories)
        elif col.integer:
            assert (out[col.name] == out[col.name].round()).all()
