"""Names reach every output as text, never as markup or terminal control: the Markdown privacy
report keeps its table and headings whatever a ledger's names hold, progress lines and messages show
control characters escaped, a library's warning never precedes a one-line error, output piped into
``head`` ends quietly, and a CSV's header is read without its rows."""

import csv
import io
import json
import logging
import re
import shlex
import subprocess
import sys

import pytest

from privsyn_fed.cli import main
from privsyn_fed.common import Progress, notes_on_stderr, read_header
from privsyn_fed.common.escaping import markdown_text, terminal_text

from .conftest import CLI, assert_one_line_error
from .test_accounting import sample_ledger

#: Each character that could break out of a Markdown cell or reach a terminal as control.
DANGEROUS = {
    "newline": "a\n# H1",
    "pipe": "a|b",
    "hash": "# H1",
    "script": "<script>alert(1)</script>",
    "escape": "\x1b[31mred\x1b[0m",
    "return": "a\rb",
    "nul": "a\x00b",
    "bell": "a\x07b",
    "c1": "a\x9bb",
    "separator": "a\u2028b",
    "bidi": "a\u202eb",
    "backtick": "`a` *b* _c_ [d](e)",
}
HEADINGS = {"## Cumulative budget by step", "## Mechanisms", "## Every entry"}
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _tampered_ledger(name: str) -> dict:
    led = sample_ledger()
    led["method"] = f"aim {name}"
    led["details"]["silo_column"] = {"column": name, "silos": [name, "north"]}
    for entry in led["entries"]:
        entry["query"] = f"marginal({name}, b)"
    return led


def _table(lines: list[str], heading: str) -> list[str]:
    start = lines.index(heading) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def _cells(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row)) - 1


@pytest.mark.parametrize("case", sorted(DANGEROUS))
def test_the_markdown_privacy_report_keeps_its_structure_whatever_a_name_holds(case, tmp_path, capsys):
    led = _tampered_ledger(DANGEROUS[case])
    path, report = tmp_path / "l.json", tmp_path / "r.md"
    path.write_text(json.dumps(led))
    assert main(["audit", str(path), "--report", str(report), "--force"]) in (0, 1)  # written, pass or fail
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\r" not in err
    text = report.read_text()
    lines = text.split("\n")
    assert not CONTROL.search(text) and "<script" not in text
    headings = [line for line in lines if line.startswith("#")]
    assert headings[0].startswith("# Privacy report: ") and set(headings[1:]) == HEADINGS, headings
    facts = [line for line in lines[1 : lines.index("## Cumulative budget by step")] if line.strip()]
    assert all(line.startswith("* **") for line in facts), facts
    entries = _table(lines, "## Every entry")
    assert len(entries) == 2 + len(led["entries"]) and {_cells(r) for r in entries} == {4}, entries
    mechanisms = _table(lines, "## Mechanisms")
    assert len(mechanisms) >= 3 and {_cells(r) for r in mechanisms} == {8}, mechanisms


@pytest.mark.parametrize("case", sorted(DANGEROUS))
def test_markdown_text_is_one_line_of_plain_text(case):
    text = markdown_text(DANGEROUS[case])
    assert "\n" not in text and not CONTROL.search(text) and "<" not in text and ">" not in text
    assert not re.search(r"(?<!\\)[|#`*_\[\]]", text), text


@pytest.mark.parametrize("tty", [False, True])
@pytest.mark.parametrize("case", sorted(DANGEROUS))
def test_progress_lines_show_control_characters_escaped(case, tty):
    stream = io.StringIO()
    stream.isatty = lambda: tty
    progress = Progress(f"aim{DANGEROUS[case]}", stream=stream)
    progress.update(0.5, f"selected marginal({DANGEROUS[case]})")
    progress.log(f"kept {DANGEROUS[case]}")
    progress.close()
    out = stream.getvalue()
    assert not CONTROL.search(out.removeprefix("\r" if tty else "")), repr(out)
    assert out.count("\n") == 2 and out.count("\r") == (1 if tty else 0), repr(out)
    if case == "escape":
        assert "\\x1b[31m" in out


def test_notes_and_errors_show_control_characters_escaped(tmp_path, capsys):
    with notes_on_stderr():
        logging.getLogger("privsyn_fed.schema").warning("column '\x1b[2Jx\x07' is ignored")
    missing = tmp_path / "led\x1b[31m\x9b.json"
    assert main(["audit", str(missing)]) == 2
    err = capsys.readouterr().err
    assert not CONTROL.search(err) and "\\x1b[2Jx\\x07" in err and "led\\x1b[31m\\x9b.json" in err, repr(err)
    assert terminal_text("a\nb", keep="\n") == "a\nb" and terminal_text("a\nb") == "a\\nb"


WARNS_THEN = r"""
import sys, warnings
import numpy as np
from privsyn_fed import cli
from privsyn_fed.common import InputError

def command(args):
    np.log(np.array([-1.0]))  # RuntimeWarning: invalid value encountered in log
    np.zeros(1).__setitem__(0, np.complex128(1 + 1j))  # ComplexWarning
    if sys.argv[1] == "fail":
        raise InputError("model.npz: not a model file")
    return 0

cli.budget.run = command
sys.exit(cli.main(["budget", "show", "--budget-store", "b.db"]))
"""


def test_a_numpy_warning_goes_into_the_one_line_error_and_is_a_clean_note_otherwise(tmp_path):
    failed = subprocess.run([sys.executable, "-c", WARNS_THEN, "fail"], capture_output=True, text=True, cwd=tmp_path)
    line = assert_one_line_error(failed, "model.npz: not a model file")
    assert "RuntimeWarning: invalid value encountered in log" in line and "np.log" not in line
    ran = subprocess.run([sys.executable, "-c", WARNS_THEN, "run"], capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stderr.splitlines()
    assert len(lines) == 2 and all(line.startswith("privsyn-fed: note: ") for line in lines), ran.stderr
    assert "RuntimeWarning" in lines[0] and "ComplexWarning" in lines[1] and "np." not in ran.stderr


@pytest.fixture(scope="module")
def full_store(tmp_path_factory):
    """A budget store whose ``budget show`` is larger than a pipe's buffer."""
    from privsyn_fed.accounting.budget_store import BudgetStore

    path = tmp_path_factory.mktemp("store") / "b.db"
    store = BudgetStore(path)
    for i in range(400):
        store.reserve(f"d{i}", epsilon=0.01, delta=1e-9, method="aim", total_epsilon=2.0)
    return path


@pytest.mark.parametrize("reader", ["head -1", "true"])
def test_budget_show_piped_into_a_reader_that_stops_ends_quietly(full_store, reader):
    command = shlex.join(CLI) + f" budget show --budget-store {full_store} | {reader}; exit ${{PIPESTATUS[0]}}"
    proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
    assert proc.stderr == "" and proc.returncode == 141, proc.stderr
    assert len(proc.stdout.splitlines()) == (1 if reader == "head -1" else 0)


def _read_bytes() -> int:
    with open("/proc/self/io") as fh:
        return int(next(line for line in fh if line.startswith("rchar")).split()[1])


HEADERS = ["age,sex,job\n", '\n\r\n"a\nb","c,d", e\r\n', ",".join(map(str, range(3000))) + "\n"]


@pytest.mark.parametrize("header", HEADERS)
def test_a_csv_header_is_read_without_the_rows_after_it(tmp_path, header):
    path = tmp_path / "silo.csv"
    path.write_text(header + "".join(f"{i},{i % 7},x\n" for i in range(100_000)))
    read_header(path)  # whatever a first call loads
    before = _read_bytes()
    names = read_header(path)
    read = _read_bytes() - before
    assert len(names) == len(next(csv.reader(io.StringIO(header.lstrip("\r\n")))))
    assert read <= 2 * len(header.encode()) + 2048, read
