"""The rows a release writes: a tiny epsilon still gives a release, the default row count is capped,
and large outputs are drawn in chunks with bounded memory."""

from __future__ import annotations

import pandas as pd

from .conftest import run_cli, synth


def test_a_tiny_epsilon_still_gives_a_release(schema_path, silo_paths, tmp_path, capsys):
    out = tmp_path / "o.csv"
    code, _, err = run_cli(*synth(schema_path, silo_paths, out, epsilon="1e-12", rows=50), capsys=capsys)
    assert code == 0, err
    assert len(pd.read_csv(out)) == 50


def test_the_default_row_count_is_capped():
    from privsyn_fed.methods.output import DEFAULT_MAX_ROWS, default_rows

    assert default_rows(3.2e12) == DEFAULT_MAX_ROWS
    assert default_rows(float("inf")) == DEFAULT_MAX_ROWS
    assert default_rows(-5e9) == 1 and default_rows(812.4) == 812


def test_large_outputs_are_drawn_in_chunks_with_bounded_memory(schema, silo_paths):
    from privsyn_fed import Silo, synthesize
    from privsyn_fed.methods.output import CHUNK_ROWS

    silos = [Silo.from_csv(p, schema) for p in silo_paths]
    result = synthesize(silos, "fedtda", 1.0, 1e-9, rows=2 * CHUNK_ROWS + 7, seed=1)
    sizes = [len(c) for c in result.output.chunks()]
    assert max(sizes) <= CHUNK_ROWS and sum(sizes) == 2 * CHUNK_ROWS + 7
    first = next(result.output.chunks())
    assert first.equals(next(result.output.chunks()))  # the same rows every time they are read
