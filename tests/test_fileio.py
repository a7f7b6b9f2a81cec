import pytest

from privsyn_fed.common import write_atomic


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
