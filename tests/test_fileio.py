import pytest

from privsyn_fed.common import write_atomic

from .conftest import mode, umask


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "ledger.json"
    target.write_text("old\n")

    def half_then_fail(fh):
        fh.write("partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_atomic(target, half_then_fail)
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.json"]


def test_successful_write_replaces(tmp_path):
    target = tmp_path / "out.csv"
    write_atomic(target, lambda fh: fh.write("a,b\n1,2\n"))
    assert target.read_text() == "a,b\n1,2\n"


def test_write_atomic_modes(tmp_path):
    from privsyn_fed.common import write_atomic
    from privsyn_fed.common.fileio import SHAREABLE

    with umask(0o022):
        write_atomic(tmp_path / "private.txt", lambda fh: fh.write("x"))
        write_atomic(tmp_path / "shared.txt", lambda fh: fh.write("x"), mode=SHAREABLE)
    with umask(0o077):
        write_atomic(tmp_path / "strict.txt", lambda fh: fh.write("x"), mode=SHAREABLE)
    assert [mode(tmp_path / n) for n in ("private.txt", "shared.txt", "strict.txt")] == [0o600, 0o644, 0o600]
