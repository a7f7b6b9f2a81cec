"""The MPC stack, Flower, the engines and Spark are extras: without them every in-process command works and
never imports them, and a command that needs one stops with one line saying how to install it.

Each command runs in a child process of this Python whose import system answers, for torch,
CrypTen, onnx, omegaconf, Flower, DuckDB, psycopg, ADBC's PostgreSQL driver, PyMySQL and pyspark
(or the ones a test names), as if they were not installed (a ``sys.meta_path`` finder that raises
``ModuleNotFoundError`` and notes every name asked for).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from .conftest import SCHEMA, assert_one_line_error, make_frame

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = (
    "torch",
    "crypten",
    "onnx",
    "omegaconf",
    "flwr",
    "duckdb",
    "psycopg",
    "adbc_driver_postgresql",
    "pymysql",
    "pyspark",
)

NOT_INSTALLED = """
import json, sys

blocked, asked = set(json.loads(sys.argv[1])), sys.argv[2]


class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            with open(asked, "a") as fh:
                fh.write(name + "\\n")
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
"""
RUNNER = NOT_INSTALLED + "from privsyn_fed.cli import main\n\nsys.exit(main(json.loads(sys.argv[3])))\n"


def without(blocked, *argv, cwd: Path, code: str = RUNNER) -> tuple[subprocess.CompletedProcess, list[str]]:
    """``privsyn-fed ARGV`` (or other ``code`` after the finder) in ``cwd`` with ``blocked`` not
    installed: the finished process and the blocked modules it tried to import."""
    asked = cwd / "asked.txt"
    asked.unlink(missing_ok=True)
    args = [sys.executable, "-c", code, json.dumps(list(blocked)), str(asked), json.dumps([str(a) for a in argv])]
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)
    tried = asked.read_text().split() if asked.exists() else []
    asked.unlink(missing_ok=True)
    return proc, tried


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """Two small silos, a holdout, the schema, and an AIM release with its model, made without the extras."""
    folder = tmp_path_factory.mktemp("extras")
    (folder / "schema.json").write_text(json.dumps(SCHEMA))
    for k, n in enumerate([400, 300]):
        make_frame(n, seed=k).to_csv(folder / f"silo{k}.csv", index=False)
    make_frame(300, seed=7).to_csv(folder / "holdout.csv", index=False)
    proc, tried = without(EXTRAS, *release_argv("aim"), "--model-out", "aim.model", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    assert tried == []
    return folder


def release_argv(method: str) -> list[str]:
    return ["synth", "--method", method, "--schema", "schema.json", "--silo", "silo0.csv", "--silo", "silo1.csv",
            "--epsilon", "1", "--delta", "1e-9", "--out", f"{method}.csv", "--force"]  # fmt: skip


@pytest.mark.parametrize("method", ["distaim", "flaim", "fedtda", "independent"])
def test_every_method_runs_in_process_without_the_extras(work, method):
    proc, tried = without(EXTRAS, *release_argv(method), cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert tried == [] and (work / f"{method}.csv").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["schema", "draft", "silo0.csv", "--out", "draft.json", "--force"],
        ["schema", "draft", "silo0.csv", "silo1.csv", "--dp", "8", "--delta", "1e-9", "--leave-unfound",
         "--out", "draft-dp.json", "--force"],
        ["audit", "aim.ledger.json"],
        ["sample", "aim.model", "--rows", "50", "--out", "more.csv", "--force"],
        ["evaluate", "--real", "silo0.csv", "--synthetic", "aim.csv", "--schema", "schema.json",
         "--holdout", "holdout.csv"],
    ],
    ids=["schema-draft", "schema-draft-dp", "audit", "sample", "evaluate"],
)  # fmt: skip
def test_drafts_audit_sample_and_evaluate_run_without_the_extras(work, argv):
    proc, tried = without(EXTRAS, *argv, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert tried == []


MEMBER = ["--federation", "federation.json", "--cert", "cert.pem", "--key", "key.pem"]


@pytest.mark.parametrize(
    "argv, what",
    [
        (["synth", "--method", "distaim", "--mpc", "--schema", "schema.json", "--silo", "silo0.csv", "--silo",
          "silo1.csv", "--epsilon", "1", "--delta", "1e-9", "--out", "mpc.csv"], "--mpc"),
        (["synth", "--method", "fedtda", "--mpc", "--servers", "2", "--schema", "schema.json", "--silo",
          "silo0.csv", "--silo", "silo1.csv", "--epsilon", "1", "--delta", "1e-9", "--out", "mpc.csv"], "--mpc"),
        (["schema", "draft", "silo0.csv", "silo1.csv", "--dp", "1", "--delta", "1e-9", "--mpc", "--out",
          "mpc-draft.json"], "--mpc"),
        (["mpc-party", *MEMBER, "--schema", "schema.json", "--silo", "silo0.csv"], "mpc-party"),
        (["mpc-server", *MEMBER, "--schema", "schema.json"], "mpc-server"),
        (["mpc-dealer", *MEMBER], "mpc-dealer"),
        (["mpc-demo"], "mpc-demo"),
    ],
    ids=["synth-mpc", "synth-mpc-servers", "schema-draft-mpc", "mpc-party", "mpc-server", "mpc-dealer", "mpc-demo"],
)  # fmt: skip
def test_mpc_commands_say_how_to_install_the_extra(work, argv, what):
    before = sorted(work.rglob("*"))
    proc, tried = without(EXTRAS, *argv, cwd=work)
    line = assert_one_line_error(proc, f"{what} needs the MPC extra", "pip install 'privsyn-fed[mpc]'")
    assert "pip install --no-deps crypten==0.4.1" in line and "sklearn" in line, line
    assert {"torch", "crypten"} <= set(tried)  # looked up, not imported: nothing below them was asked for
    assert all("." not in name for name in tried), tried
    assert sorted(work.rglob("*")) == before  # nothing written: no output, no ledger, no ledgers folder


def test_superlink_says_how_to_install_the_agent_extra(tmp_path):
    """A federation kit for site agents is made without Flower; a release through them needs it."""
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    argv = ["federation", "init", "--out", "kit", "--name", "agents", "--schema", "schema.json"]
    argv += ["--party", "Coordinator@127.0.0.1:7001", "--party", "Office@127.0.0.1:7002"]
    argv += ["--dealer", "Trust@127.0.0.1:7003", "--site-port", "7004", "--superlink", "127.0.0.1:7005"]
    argv += ["--site", "a=Clinic A", "--site", "b=Clinic B"]
    proc, tried = without(EXTRAS, *argv, cwd=tmp_path)
    assert proc.returncode == 0 and tried == [], proc.stderr
    party0 = tmp_path / "kit" / "party-0"
    before = sorted(tmp_path.rglob("*"))
    argv = ["synth", "--method", "fedtda", "--mpc", *MEMBER, "--schema", tmp_path / "schema.json", "--epsilon", "1",
            "--delta", "1e-9", "--out", "release.csv", "--superlink", "127.0.0.1:7005"]  # fmt: skip
    proc, tried = without(["flwr"], *argv, cwd=party0)
    assert_one_line_error(proc, "--superlink needs the agent extra", "pip install 'privsyn-fed[agent]'")
    assert sorted(tmp_path.rglob("*")) == before


def test_a_site_and_the_mpc_modules_load_without_the_extras(tmp_path):
    """A site (`site run`) needs neither torch nor CrypTen: it sends sealed shares; the MPC modules
    import torch and CrypTen only where they compute on shares."""
    modules = "privsyn_fed.site.client, privsyn_fed.mpc.aggregator, privsyn_fed.mpc.servers, privsyn_fed.mpc.secure"
    proc, tried = without(EXTRAS, cwd=tmp_path, code=NOT_INSTALLED + f"import {modules}\n")
    assert proc.returncode == 0 and tried == [], proc.stderr


@pytest.mark.parametrize(
    "silo",
    [
        "duckdb://silos.duckdb?table=north",
        "north=postgresql://analyst@127.0.0.1:5432/clinic?table=visits",
        "north=mysql://analyst@127.0.0.1:3306/clinic?table=visits",
    ],
)
def test_a_silo_in_an_engine_says_how_to_install_the_engines_extra(work, silo):
    before = sorted(work.rglob("*"))
    argv = ["synth", "--method", "aim", "--schema", "schema.json", "--silo", silo, "--silo", "silo1.csv",
            "--epsilon", "1", "--delta", "1e-9", "--out", "engine.csv"]  # fmt: skip
    proc, tried = without(["duckdb", "psycopg", "adbc_driver_postgresql", "pymysql"], *argv, cwd=work)
    assert_one_line_error(proc, "needs the engines extra", "pip install 'privsyn-fed[engines]'")
    assert set(tried) == {
        "duckdb",
        "psycopg",
        "adbc_driver_postgresql",
        "pymysql",
    }  # looked up, not imported: nothing below them was asked for
    assert sorted(work.rglob("*")) == before


def test_a_silo_in_sqlite_needs_no_extra(work):
    import sqlite3

    import pandas as pd

    with sqlite3.connect(work / "silos.db") as con:
        pd.read_csv(work / "silo0.csv").to_sql("north", con, index=False, if_exists="replace")
    con.close()
    argv = ["synth", "--method", "aim", "--schema", "schema.json", "--silo", "sqlite://silos.db?table=north",
            "--silo", "silo1.csv", "--epsilon", "1", "--delta", "1e-9", "--out", "sqlite.csv"]  # fmt: skip
    proc, tried = without(EXTRAS, *argv, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert tried == [] and (work / "sqlite.csv").exists()


def test_a_silo_in_spark_says_how_to_install_the_spark_extra(work):
    before = sorted(work.rglob("*"))
    argv = ["synth", "--method", "aim", "--schema", "schema.json", "--silo", "spark://local[2]?table=north",
            "--epsilon", "1", "--delta", "1e-9", "--out", "spark.csv"]  # fmt: skip
    proc, tried = without(["pyspark"], *argv, cwd=work)
    assert_one_line_error(proc, "needs the spark extra", "pip install 'privsyn-fed[spark]'", "Java 17")
    assert tried == ["pyspark"]
    assert sorted(work.rglob("*")) == before


def test_a_silo_through_spark_connect_says_how_to_install_its_client(work):
    argv = ["synth", "--method", "aim", "--schema", "schema.json", "--silo", "sc://localhost:15002?table=north",
            "--epsilon", "1", "--delta", "1e-9", "--out", "connect.csv"]  # fmt: skip
    proc, tried = without(["grpc_status"], *argv, cwd=work)
    assert_one_line_error(proc, "needs the spark extra", "(no grpc_status)", "pip install 'privsyn-fed[spark]'")
    assert "Java" not in proc.stderr  # a Spark Connect client needs no Java
    assert tried == ["grpc_status"]


def test_the_extras_are_found_where_make_install_installed_them():
    from privsyn_fed.common.extras import (
        AGENT_MODULES,
        CONNECT_MODULES,
        ENGINE_MODULES,
        MPC_MODULES,
        SPARK_MODULES,
        missing,
    )

    assert missing(MPC_MODULES + AGENT_MODULES + ENGINE_MODULES + SPARK_MODULES + CONNECT_MODULES) == []


def test_core_dependencies_leave_out_the_mpc_stack_and_flower():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(requirements: list[str]) -> set[str]:
        return {re.match(r"[A-Za-z0-9._-]+", req).group().lower() for req in requirements}

    core, extras = names(project["dependencies"]), project["optional-dependencies"]
    engines = {"duckdb", "psycopg", "adbc-driver-postgresql", "pymysql"}
    assert not core & {"torch", "crypten", "onnx", "omegaconf", "flwr", "pyspark", *engines}, core
    assert "scikit-learn" in core  # evaluate and partition
    assert {"torch", "onnx", "omegaconf"} <= names(extras["mpc"])
    assert names(extras["agent"]) == {"flwr"} and "flwr==1.42.0" in extras["agent"]
    assert names(extras["engines"]) == engines
    assert names(extras["spark"]) == {"pyspark"}


def test_help_lists_the_mpc_commands_without_the_extras(tmp_path):
    proc, tried = without(EXTRAS, "--help", cwd=tmp_path)
    assert proc.returncode == 0 and "mpc-party" in proc.stdout and tried == []
