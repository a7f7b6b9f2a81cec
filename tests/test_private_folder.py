"""Private temporary folders (``common.private_folder``): a folder whose process was killed
(SIGKILL: no cleanup runs) is removed by the next one made, while a live process's folder, a folder
being made and a folder without a lock are kept; a DuckDB silo's spill folder is one of them."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from privsyn_fed.common.private_folder import LOCK, private_folder, sweep

pytest.importorskip("fcntl", reason="no fcntl.flock on this platform: folders are made, never swept")

PREFIX = "privsyn-fed-test-"


def _killed_child(tmp: Path, code: str) -> Path:
    """Run ``code`` in a child whose temporary directory is ``tmp``; it prints a folder's path and
    kills itself with SIGKILL. The folder it left."""
    script = code + "\nimport os, signal, sys\nprint(path, flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n"
    proc = subprocess.run(
        [sys.executable, "-c", script], env={**os.environ, "TMPDIR": str(tmp)}, capture_output=True, text=True
    )
    assert proc.returncode == -9, proc.stderr
    left = Path(proc.stdout.strip())
    assert left.parent == tmp and left.is_dir()
    return left


@pytest.fixture
def tmp_root(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_a_killed_processs_folder_is_removed_by_the_next_and_a_live_ones_is_kept(tmp_root):
    code = (
        "from privsyn_fed.common.private_folder import private_folder\n"
        f"f = private_folder({PREFIX!r}); path = f.path\n"
        "open(path + '/spill.bin', 'wb').write(b'x' * 1_000_000)\n"
    )
    dead = _killed_child(tmp_root, code)
    live = private_folder(PREFIX)  # this process's: its lock is held
    unlocked = Path(tempfile.mkdtemp(prefix=PREFIX, dir=tmp_root))  # being made, or another version's
    other_kind = _killed_child(tmp_root, code.replace(PREFIX, "privsyn-fed-other-"))
    assert not dead.exists()  # removed when `live` was made
    assert Path(live.path).is_dir() and (Path(live.path) / LOCK).exists()
    assert sweep(PREFIX) == [] and Path(live.path).is_dir() and unlocked.is_dir()
    assert other_kind.is_dir()  # another prefix: not this sweep's
    live.remove()
    assert not Path(live.path).exists()
    assert sweep("privsyn-fed-other-") == [str(other_kind)] and not other_kind.exists()


def test_a_duckdb_silos_spill_folder_left_by_a_killed_release_is_removed_by_the_next(tmp_root):
    duckdb = pytest.importorskip("duckdb", reason="DuckDB is not installed (pip install 'privsyn-fed[engines]')")
    import privsyn_fed as pf
    from privsyn_fed.silo import Silo
    from privsyn_fed.silo.engine_store import SPILL_PREFIX

    db = tmp_root / "silo.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t AS SELECT (i % 7)::BIGINT AS x, ['a', 'b'][1 + i % 2] AS y FROM range(5000) r(i)")
    con.close()
    schema = {
        "columns": [
            {"name": "x", "type": "numeric", "lower": 0, "upper": 6, "integer": True, "bins": 7},
            {"name": "y", "type": "categorical", "categories": ["a", "b"]},
        ]
    }
    (tmp_root / "schema.json").write_text(json.dumps(schema))
    code = (
        "import privsyn_fed as pf, glob, tempfile\n"
        "from privsyn_fed.silo import Silo\n"
        f"silo = Silo.load('duckdb://{db}?table=t', pf.Schema.load({str(tmp_root / 'schema.json')!r}))\n"
        f"(path,) = glob.glob(tempfile.gettempdir() + '/{SPILL_PREFIX}*')\n"
    )
    dead = _killed_child(tmp_root, code)
    silo = Silo.load(f"duckdb://{db}?table=t", pf.Schema.from_dict(schema))
    assert not dead.exists()
    (mine,) = tmp_root.glob(f"{SPILL_PREFIX}*")
    assert silo.marginal((0,)).sum() == 5000
    del silo  # the store's finalizer removes its folder
    gc.collect()
    assert not mine.exists()
