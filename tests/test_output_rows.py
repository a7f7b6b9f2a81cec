"""The rows a release writes: a tiny epsilon still gives a release, the default row count is capped,
and large outputs are drawn in chunks with bounded memory, the next chunk drawn while one is
written."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest

from privsyn_fed.common import InputError
from privsyn_fed.methods import output

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


class _Recording:
    """A sampler whose rows depend on the seed alone; it notes each draw's thread and can fail the
    ``fail_at``-th draw."""

    total = 100.0

    def __init__(self, fail_at: int | None = None):
        self.threads: list[str] = []
        self.fail_at = fail_at
        self.drawn = threading.Event()  # set by every draw after the first

    def sample(self, rows: int, seed: int) -> pd.DataFrame:
        self.threads.append(threading.current_thread().name)
        if len(self.threads) > 1:
            self.drawn.set()
        if len(self.threads) == self.fail_at:
            raise InputError("the draw failed")
        return pd.DataFrame({"x": np.random.default_rng(seed).integers(0, 1000, rows)})


def _draw_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("privsyn-fed-draw")]


def test_each_chunk_is_its_seeds_rows_and_the_next_is_drawn_while_one_is_handled(monkeypatch):
    monkeypatch.setattr(output, "CHUNK_ROWS", 10)
    sampler = _Recording()
    chunks = output.SyntheticRows(sampler, 35, seed=4).chunks()
    first = next(chunks)
    assert sampler.drawn.wait(10)  # the second chunk is drawn before it is asked for
    parts = [first, *chunks]
    seeds = np.random.SeedSequence(4).generate_state(4, dtype=np.uint64)
    expected = [_Recording().sample(n, int(s) % 2**63) for n, s in zip([10, 10, 10, 5], seeds)]
    assert all(a.equals(b) for a, b in zip(parts, expected)) and len(parts) == 4
    assert sampler.threads[0] == threading.current_thread().name
    assert all(name.startswith("privsyn-fed-draw") for name in sampler.threads[1:])
    assert _draw_threads() == []


def test_a_failed_draw_surfaces_at_its_chunk_and_a_stopped_read_leaves_no_thread(monkeypatch):
    monkeypatch.setattr(output, "CHUNK_ROWS", 10)
    chunks = output.SyntheticRows(_Recording(fail_at=3), 50, seed=1).chunks()
    assert len(next(chunks)) == 10 and len(next(chunks)) == 10
    with pytest.raises(InputError, match="the draw failed"):
        next(chunks)
    assert _draw_threads() == []
    stopped = output.SyntheticRows(_Recording(), 50, seed=1).chunks()
    next(stopped)
    stopped.close()  # as a write that fails, or a signal, leaves the loop
    assert _draw_threads() == []
