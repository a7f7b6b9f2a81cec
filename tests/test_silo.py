import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privsyn_fed as pf
from privsyn_fed.common import InputError


def test_marginal_matches_naive_count(schema, silo_paths):
    silo = pf.Silo.from_csv(silo_paths[0], schema)
    rows = silo.rows()
    for clique in [(0,), (2, 4), (0, 1, 3)]:
        shape = [schema.shape[i] for i in clique]
        expected = np.zeros(shape, dtype=np.int64)
        for r in rows:
            expected[tuple(r[i] for i in clique)] += 1
        got = silo.marginal(clique)
        assert got.dtype == np.int64
        assert np.array_equal(got, expected.ravel())


def test_pooled_marginal_is_sum_of_silos(schema, silo_paths):
    silos = [pf.Silo.from_csv(p, schema) for p in silo_paths]
    pooled = pf.Silo.pooled(silos)
    assert np.array_equal(pooled.marginal((1, 2)), sum(s.marginal((1, 2)) for s in silos))


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 60), st.integers(0, 2**31), st.data())
def test_marginal_changes_by_at_most_one_in_l1_when_a_record_is_added(n, seed, data):
    """Property: ||M_r(D + x) - M_r(D)||_1 = 1 for every clique r (add/remove sensitivity 1)."""
    shape = [3, 4, 2, 5]
    schema = pf.Schema.from_dict(
        {
            "columns": [
                {"name": f"c{i}", "type": "categorical", "categories": [str(k) for k in range(m)]}
                for i, m in enumerate(shape)
            ]
        }
    )
    rng = np.random.default_rng(seed)
    rows = np.stack([rng.integers(0, m, n) for m in shape], axis=1)
    extra = np.array([[data.draw(st.integers(0, m - 1)) for m in shape]])
    d = pf.Silo("d", rows, schema)
    d_plus = d.with_rows(np.concatenate([rows, extra]))
    for k in range(1, 5):
        for clique in itertools.combinations(range(4), k):
            diff = np.abs(d_plus.marginal(clique) - d.marginal(clique)).sum()
            assert diff == 1


def test_missing_and_extra_columns_name_the_file(tmp_path, schema):
    p = tmp_path / "bad.csv"
    p.write_text("age,income,sex,region\n30,1,F,north\n")
    with pytest.raises(InputError, match=r"bad.csv: missing column 'label'"):
        pf.Silo.from_csv(p, schema)
    p.write_text("age,income,sex,region,label,zip\n30,1,F,north,no,123\n")
    assert pf.Silo.from_csv(p, schema).true_size() == 1  # a column not in the schema is ignored


def test_empty_silo_is_an_error(tmp_path, schema):
    p = tmp_path / "empty.csv"
    p.write_text("age,income,sex,region,label\n")
    with pytest.raises(InputError, match="empty.csv: the table has no rows"):
        pf.Silo.from_csv(p, schema)
    p.write_text("")
    with pytest.raises(InputError, match="empty.csv: the file is empty"):
        pf.Silo.from_csv(p, schema)
