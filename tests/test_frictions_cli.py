"""Command-line details a new user meets: `evaluate` over several real files, `--version`, each
subcommand's own `--help`, `--mpc-timeout` on every MPC command, the privacy report's header and
rounds, the quality report's workload label, and the modes outputs are written with."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import stat
from contextlib import contextmanager
from importlib.metadata import version

import pytest

from privsyn_fed.cli import build_parser

from .conftest import SCHEMA, assert_one_line_error, make_frame, run_cli, synth_argv


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@contextmanager
def umask(mask: int):
    before = os.umask(mask)
    try:
        yield
    finally:
        os.umask(before)


def help_page(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


# ---- evaluate over several real files -------------------------------------------------------------
@pytest.fixture
def tables(tmp_path):
    paths = {}
    for name, n, seed in (("a", 120, 1), ("b", 90, 2), ("c", 60, 3), ("syn", 100, 4), ("h1", 50, 5), ("h2", 40, 6)):
        paths[name] = tmp_path / f"{name}.csv"
        make_frame(n, seed).to_csv(paths[name], index=False)
    return paths


def evaluate_argv(schema_path, tables, *extra):
    reals = [x for k in "abc" for x in ("--real", tables[k])]
    return ["evaluate", *reals, "--synthetic", tables["syn"], "--schema", schema_path, "--workload-size", 4, *extra]


def test_evaluate_takes_the_union_of_every_real_and_holdout_file(schema_path, tables, tmp_path, capsys):
    out = tmp_path / "eval.json"
    holdouts = ["--holdout", tables["h1"], "--holdout", tables["h2"]]
    code, stdout, err = run_cli(*evaluate_argv(schema_path, tables, *holdouts, "--json", out), capsys=capsys)
    assert code == 0, err
    assert stdout.splitlines()[0] == (
        "compared 270 real rows (the union of 3 files) with 100 synthetic rows; holdout 90 rows (the union of 2 files)"
    )
    report = json.loads(out.read_text())
    assert report["rows"] == {"real": 270, "synthetic": 100, "holdout": 90}
    assert report["files"]["real"] == [str(tables[k]) for k in "abc"]


def test_evaluate_notes_the_columns_of_a_real_file_it_ignores(schema_path, tables, capsys):
    make_frame(120, 1).assign(zip="02134", ssn="x").to_csv(tables["a"], index=False)
    code, stdout, err = run_cli(*evaluate_argv(schema_path, tables), capsys=capsys)
    assert code == 0, err
    assert f"privsyn-fed: note: {tables['a']} (--real): columns not in the schema, ignored: 'zip', 'ssn'" in err
    assert stdout.startswith("compared 270 real rows")


def test_evaluate_names_the_real_file_at_fault(schema_path, tables, capsys):
    lines = tables["b"].read_text().splitlines()
    lines[4] = lines[4].replace(",F,", ",X,").replace(",M,", ",X,")
    tables["b"].write_text("\n".join(lines) + "\n")
    run = run_cli(*evaluate_argv(schema_path, tables), capsys=capsys)
    assert_one_line_error(run, f"{tables['b']} (--real): row 5, column 'sex'")
    assert not run.stdout


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--synthetic", "other.csv"], "--synthetic given twice"),
        (["--schema", "other.json"], "--schema given twice"),
        (["--json", "x.json", "--json", "y.json"], "--json given twice"),
    ],
)
def test_evaluate_refuses_a_one_file_option_given_twice(extra, fragment, schema_path, tables, capsys):
    with pytest.raises(SystemExit) as exc:
        run_cli(*evaluate_argv(schema_path, tables, *extra), capsys=capsys)
    assert exc.value.code == 2
    assert_one_line_error(capsys.readouterr().err, fragment)


def test_evaluate_refuses_a_real_file_given_twice_or_also_as_holdout(schema_path, tables, capsys):
    run = run_cli(*evaluate_argv(schema_path, tables, "--real", tables["a"]), capsys=capsys)
    assert_one_line_error(run, "given twice as --real")
    run = run_cli(*evaluate_argv(schema_path, tables, "--holdout", tables["c"]), capsys=capsys)
    assert_one_line_error(run, "--holdout", "is the same file as --real")


# ---- --version and help pages ----------------------------------------------------------------------
def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"privsyn-fed {version('privsyn-fed')}"


def _groups(parser: argparse.ArgumentParser, path=()):
    """Every (command path, parser) with subcommands of its own, and their children."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield path, parser, dict(action.choices)
            for name, child in action.choices.items():
                yield from _groups(child, (*path, name))


def test_every_subcommand_has_its_own_help_page(capsys):
    groups = [(path, children) for path, _, children in _groups(build_parser()) if path]
    assert {path for path, _ in groups} >= {("budget",), ("schema",), ("federation",)}
    for path, children in groups:
        pages = {name: help_page(capsys, *path, name) for name in children}
        for name, page in pages.items():
            assert page.startswith(f"usage: privsyn-fed {' '.join(path)} {name} "), page[:200]
        assert len(set(pages.values())) == len(pages)
    show, settle = help_page(capsys, "budget", "show"), help_page(capsys, "budget", "settle")
    assert "--dataset-id" in show and "--run" not in show
    assert "--run" in settle and "--json" not in settle


def test_budget_options_of_the_other_action_are_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["budget", "show", "--budget-store", "s.db", "--run", "3"])
    assert exc.value.code == 2
    assert_one_line_error(capsys.readouterr().err, "--run")


# ---- --mpc-timeout ---------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["mpc-party", "--schema", "s.json", "--silo", "a.csv"], ["mpc-dealer"]])
def test_mpc_commands_take_mpc_timeout_and_still_the_former_timeout(command, capsys):
    parser = build_parser()
    assert parser.parse_args([*command, "--mpc-timeout", "7"]).mpc_timeout == 7
    assert parser.parse_args([*command, "--timeout", "8"]).mpc_timeout == 8
    page = help_page(capsys, command[0])
    assert "--mpc-timeout" in page and "--timeout" not in page.replace("--mpc-timeout", "")  # the former: hidden


# ---- the privacy report and file modes -------------------------------------------------------------
def test_release_report_names_its_csv_and_the_rounds_that_ran_and_is_shareable(
    schema_path, silo_paths, tmp_path, capsys
):
    out, report = tmp_path / "syn.csv", tmp_path / "privacy.md"
    with umask(0o022):
        run = run_cli(*synth_argv(schema=schema_path, silos=silo_paths, out=out, seed=3, report=report), capsys=capsys)
    assert run.returncode == 0, run.stderr
    ran = re.search(r"mechanism calls over (\d+) rounds?\n", run.stdout)
    assert ran, run.stdout
    text = report.read_text()
    assert text.startswith("# Privacy report: syn.csv (aim release)")
    assert f"* **Rounds:** {ran.group(1)} ran" in text
    assert hashlib.sha256(out.read_bytes()).hexdigest() in text
    assert f"privsyn-fed {version('privsyn-fed')}" in text
    assert re.search(r"\* \*\*Date:\*\* \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", text)
    assert (mode(out), mode(out.with_suffix(".ledger.json")), mode(report)) == (0o600, 0o600, 0o644)

    audit_report = tmp_path / "audit.html"
    with umask(0o027):
        run_cli("audit", out.with_suffix(".ledger.json"), "--report", audit_report, capsys=capsys)
    assert mode(audit_report) == 0o640
    assert "made from the ledger syn.ledger.json alone" in audit_report.read_text()


def test_report_states_rounds_ran_beside_the_rounds_planned():
    from privsyn_fed.audit.report import _rounds

    ran_fewer = _rounds({"details": {"rounds": 11, "schedule": {"rounds": 23}}})
    assert ran_fewer.startswith("11 ran (the schedule planned up to 23")
    assert _rounds({"details": {"rounds": 5, "schedule": {"rounds": 5}}}) == "5 ran"
    assert _rounds({"details": {}}) is None


def test_write_atomic_modes(tmp_path):
    from privsyn_fed.common import write_atomic
    from privsyn_fed.common.fileio import SHAREABLE

    with umask(0o022):
        write_atomic(tmp_path / "private.txt", lambda fh: fh.write("x"))
        write_atomic(tmp_path / "shared.txt", lambda fh: fh.write("x"), mode=SHAREABLE)
    with umask(0o077):
        write_atomic(tmp_path / "strict.txt", lambda fh: fh.write("x"), mode=SHAREABLE)
    assert [mode(tmp_path / n) for n in ("private.txt", "shared.txt", "strict.txt")] == [0o600, 0o644, 0o600]


def test_synth_help_says_how_outputs_are_written(capsys):
    page = " ".join(help_page(capsys, "synth").split())
    assert "(mode 0600)" in page and "written 0644" in page


# ---- the quality report's workload figure ----------------------------------------------------------
def test_quality_report_labels_fit_their_figures_with_long_column_names(tmp_path, monkeypatch):
    import matplotlib

    import privsyn_fed as pf
    from privsyn_fed.evaluation import quality

    long = {c["name"]: c["name"] + "_of_the_respondent_in_full" for c in SCHEMA["columns"]}
    schema = json.loads(json.dumps(SCHEMA))
    for c in schema["columns"]:
        c["name"] = long[c["name"]]
    (tmp_path / "s.json").write_text(json.dumps(schema))
    clipped = []
    draw = quality._Figures.draw

    def checked(self, make, title):
        fig = make()
        with matplotlib.rc_context(self.RC):
            fig.draw_without_rendering()  # the layout, as savefig computes it
            box = fig.bbox
            for ax in fig.axes:
                for label in (ax.xaxis.label, ax.yaxis.label):
                    e = label.get_window_extent()
                    if label.get_text() and (e.x0 < box.x0 - 1 or e.x1 > box.x1 + 1):
                        clipped.append((title, label.get_text()))
        return draw(self, lambda: fig, title)

    monkeypatch.setattr(quality._Figures, "draw", checked)
    rows = lambda n, seed: make_frame(n, seed).rename(columns=long)
    quality.build_report(
        rows(150, 1), rows(120, 4), pf.Schema.load(tmp_path / "s.json"), quality.Sources(["r.csv"], "s.csv", "s.json")
    )
    assert not clipped
