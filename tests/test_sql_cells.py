"""A column's cells computed by an engine (``silo.sql_cells``) equal the project's own encoding: for
random schemas (equal-width, integer, log-scale and explicit bins, atoms, missing values, categories
with and without a catch-all) DuckDB's marginal counts equal ``Silo.marginal``'s, edge values and
rounding halves included."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.silo.sql_cells import POSTGRES, counts_from_rows, marginal_sql


def _numeric(rng: np.random.Generator, name: str) -> tuple[dict, np.ndarray]:
    integer = bool(rng.integers(2))
    lower = float(rng.choice([0, -5, 18, 0.5])) if not integer else float(rng.integers(-10, 20))
    upper = lower + (float(rng.integers(1, 200)) if integer else float(rng.choice([0.7, 7.0, 70.0, 1e3])))
    col: dict = {"name": name, "type": "numeric", "lower": lower, "upper": upper, "integer": integer}
    kind = rng.choice(["width", "log", "edges"])
    bins = int(rng.integers(1, 12))
    if kind == "width":
        col["bins"] = bins
    elif kind == "log":
        col["bins"], col["scale"] = bins, "log"
    else:
        cuts = np.unique(np.round(rng.uniform(lower, upper, 4), 0 if integer else 3))
        cuts = [float(c) for c in cuts if lower < c < upper]
        if cuts:
            col["edges"] = cuts
        else:
            col["bins"] = bins
    grid = np.linspace(lower, upper, 101)
    values = np.concatenate(
        [
            rng.uniform(lower - 3, upper + 3, 300),
            grid,  # every equal-width edge, where float division may round either way
            np.array(col.get("edges", [])),
            lower + np.arange(0, 20) + 0.5,  # rounding halves
        ]
    )
    if integer:
        values = np.round(values, 1)
    if rng.integers(2):
        atoms = sorted({float(np.round(v)) if integer else float(v) for v in rng.choice(grid[1:-1], 2)})
        col["atoms"] = atoms
        values = np.concatenate([values, np.repeat(atoms, 5)])
    if rng.integers(2):
        col["missing"] = True
        values[rng.random(len(values)) < 0.1] = np.nan
    return col, values


def _categorical(rng: np.random.Generator, name: str, n: int) -> tuple[dict, np.ndarray]:
    cats = ["a", "b", "NA x", " c"][: int(rng.integers(1, 5))]
    col: dict = {"name": name, "type": "categorical", "categories": [c.strip() for c in cats]}
    pool = [*cats, "zz", " a "]
    if rng.integers(2):
        col["categories"].append("other")
        col["unknown"] = "other"
    else:
        pool = [c for c in pool if c.strip() in col["categories"]]
    values = rng.choice(np.array(pool, dtype=object), n)
    if rng.integers(2):
        col["missing"] = True
        values[rng.random(n) < 0.1] = None
    return col, values


@pytest.mark.parametrize("seed", range(12))
def test_duckdb_counts_every_marginal_as_the_silo_does(seed):
    duckdb = pytest.importorskip("duckdb", reason="DuckDB is not installed (pip install duckdb)")
    rng = np.random.default_rng(seed)
    (c1, v1), (c2, v2) = _numeric(rng, "x"), _numeric(rng, "y")
    n = min(len(v1), len(v2))
    c3, v3 = _categorical(rng, "g", n)
    schema = pf.Schema.from_dict({"columns": [c1, c2, c3]})
    df = pd.DataFrame({"x": v1[:n], "y": v2[:n], "g": v3})
    silo = pf.Silo.from_frame(df, schema, "s")
    con = duckdb.connect()
    con.register("t", df)
    for clique in [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]:
        rows = con.execute(marginal_sql(schema, clique, "t")).fetchall()
        assert np.array_equal(counts_from_rows(schema, clique, rows), silo.marginal(clique)), (seed, clique)
    con.close()


def test_an_edge_value_lands_in_the_bin_of_the_cut_points_not_of_a_division():
    """18.7 on the cut point 18 + 0.7 of explicit edges: bin 1, as ``searchsorted`` puts it, though
    ``(18.7 - 18) / 0.7`` is 0.999... in floating point."""
    duckdb = pytest.importorskip("duckdb", reason="DuckDB is not installed (pip install duckdb)")
    schema = pf.Schema.from_dict(
        {"columns": [{"name": "x", "type": "numeric", "lower": 18, "upper": 25, "edges": [18.7, 19.4]}]}
    )
    df = pd.DataFrame({"x": [18.7, 18.69999, 19.4, 25.0]})
    con = duckdb.connect()
    con.register("t", df)
    rows = con.execute(marginal_sql(schema, (0,), "t")).fetchall()
    assert (
        counts_from_rows(schema, (0,), rows).tolist()
        == [1, 1, 2]
        == pf.Silo.from_frame(df, schema).marginal((0,)).tolist()
    )


def test_a_category_the_schema_refuses_has_no_cell():
    duckdb = pytest.importorskip("duckdb", reason="DuckDB is not installed (pip install duckdb)")
    schema = pf.Schema.from_dict({"columns": [{"name": "g", "type": "categorical", "categories": ["a"]}]})
    con = duckdb.connect()
    con.register("t", pd.DataFrame({"g": ["a", "b"]}))
    rows = con.execute(marginal_sql(schema, (0,), "t")).fetchall()
    with pytest.raises(ValueError, match="refuses"):
        counts_from_rows(schema, (0,), rows)


def test_all_cliques_of_three_columns_in_one_pass_equal_the_separate_counts():
    duckdb = pytest.importorskip("duckdb", reason="DuckDB is not installed (pip install duckdb)")
    rng = np.random.default_rng(5)
    cols = [_numeric(rng, f"v{i}") for i in range(3)]
    n = min(len(v) for _, v in cols)
    schema = pf.Schema.from_dict({"columns": [c for c, _ in cols]})
    df = pd.DataFrame({c["name"]: v[:n] for c, v in cols})
    con = duckdb.connect()
    con.register("t", df)
    silo = pf.Silo.from_frame(df, schema)
    for clique in itertools.combinations(range(3), 2):
        rows = con.execute(marginal_sql(schema, clique, "t")).fetchall()
        assert np.array_equal(counts_from_rows(schema, clique, rows), silo.marginal(clique))


# ---- PostgreSQL: the tests' own server (conftest.postgres) ------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_postgresql_counts_every_marginal_as_the_silo_does(postgres, seed):
    con = postgres.connect()
    rng = np.random.default_rng(100 + seed)
    (c1, v1), (c2, v2) = _numeric(rng, "x"), _numeric(rng, "y")
    n = min(len(v1), len(v2))
    c3, v3 = _categorical(rng, "g", n)
    schema = pf.Schema.from_dict({"columns": [c1, c2, c3]})
    df = pd.DataFrame({"x": v1[:n], "y": v2[:n], "g": v3})
    table = f"t{seed}"
    con.execute(f"DROP TABLE IF EXISTS {table}")
    con.execute(f"CREATE TABLE {table} (x double precision, y double precision, g text)")
    with con.cursor().copy(f"COPY {table} (x, y, g) FROM STDIN") as copy:
        for x, y, g in df.itertuples(index=False):
            copy.write_row((None if np.isnan(x) else x, None if np.isnan(y) else y, g))
    silo = pf.Silo.from_frame(df, schema, "s")
    for clique in [(0,), (1,), (2,), (0, 1), (0, 1, 2)]:
        rows = con.execute(marginal_sql(schema, clique, table, POSTGRES)).fetchall()
        assert np.array_equal(counts_from_rows(schema, clique, rows), silo.marginal(clique)), (seed, clique)
    con.close()
