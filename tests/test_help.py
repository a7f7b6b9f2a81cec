"""The command line's own words: ``--version``, each subcommand's help page, options of the other
action refused, ``--mpc-timeout`` on every MPC command, and what ``synth --help`` says of outputs and
of MPC."""

from __future__ import annotations

import argparse
from importlib.metadata import version

import pytest

from privsyn_fed.cli import build_parser, main

from .conftest import assert_one_line_error


def help_page(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


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


def test_synth_help_says_how_outputs_are_written(capsys):
    page = " ".join(help_page(capsys, "synth").split())
    assert "(mode 0600)" in page and "written 0644" in page


def test_synth_help_describes_mpc(capsys):
    with pytest.raises(SystemExit) as info:
        main(["synth", "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert "not available in this version" not in out
    assert "trusted aggregator" in out and "With --mpc" in out and "secret shares" in out
