"""Every example in examples/ runs as written, on small sizes, and produces what it promises.

Each example runs as a subprocess in its own temporary folder: Python examples with this
interpreter, shell examples with bash and this interpreter's bin folder first on PATH (so that
`python` and `privsyn-fed` are the installed ones).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.audit import audit_ledger, load_ledger

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SCHEMA = json.loads((resources.files("privsyn_fed.demo") / "cps1988.schema.json").read_text())
COLUMNS = [c["name"] for c in SCHEMA["columns"]]
BIN = Path(sys.executable).parent


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run an example; it must exit 0."""
    full_env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})}
    proc = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return proc


def check_release(csv: Path, ledger_path: Path, method: str, epsilon: float) -> tuple[pd.DataFrame, dict]:
    """The CSV has the schema's columns with values inside the schema's domain; the ledger is a
    complete, unseeded release of ``method`` at ``epsilon`` that passes the audit."""
    data = pd.read_csv(csv, dtype=str, keep_default_na=False)
    assert list(data.columns) == COLUMNS
    assert len(data) > 0
    for col in SCHEMA["columns"]:
        values = data[col["name"]]
        if col["type"] == "categorical":
            assert set(values) <= set(col["categories"]), col["name"]
        else:
            numbers = pd.to_numeric(values)
            assert numbers.between(col["lower"], col["upper"]).all(), col["name"]
    ledger = load_ledger(ledger_path)
    assert ledger["method"] == method and ledger["status"] == "complete" and not ledger["seeded"]
    assert ledger["epsilon"] == pytest.approx(epsilon, rel=1e-6)
    report = audit_ledger(ledger)
    assert report.ok, report.problems
    return data, ledger


def shown_block(marker: str) -> str:
    """The bash block under ``<!-- MARKER: ... -->`` in README.md or a page of docs/ (the same text
    wherever it is shown: tests/test_docs.py checks that)."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        block = re.search(rf"<!-- {marker}: [^\n]*-->\n```bash\n(.*?)```", page.read_text(), re.S)
        if block:
            return block.group(1)
    raise AssertionError(f"no page shows the {marker} block")


def test_readme_lists_every_example_and_every_example_is_tested():
    examples = sorted(p.name for p in EXAMPLES.iterdir() if p.suffix in (".py", ".sh"))
    assert examples == [
        "budget_and_audit.sh",
        "federated_flaim.py",
        "fit_once_sample_many.py",
        "local_mpc.sh",
        "own_data.py",
        "quickstart.py",
        "sites.py",
    ]
    readme = (EXAMPLES / "README.md").read_text()
    tests = Path(__file__).read_text()
    for name in examples:
        assert f"`{name}`" in readme, name
        assert f'EXAMPLES / "{name}"' in tests, name


def test_the_readme_walkthrough_works_when_pasted(tmp_path):
    """The "From your own data" block (README and docs/walkthrough.md), run as written by bash from a
    folder that has the repository's virtual environment at ``.venv`` (as the repository root has)."""
    block = shown_block("walkthrough")
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    proc = run(["bash", "-e", "-c", block], cwd=tmp_path)
    own = tmp_path / "demo-out" / "own"
    assert "_draft" in json.loads((own / "draft.json").read_text())  # the plain draft carries its note
    for name, method in (("synthetic", "aim"), ("dp-synthetic", "aim")):
        ledger = load_ledger(own / f"{name}.ledger.json")
        assert ledger["method"] == method and audit_ledger(ledger).ok
        assert list(pd.read_csv(own / f"{name}.csv").columns) == COLUMNS
    assert audit_ledger(load_ledger(own / "dp-schema.ledger.json")).ok
    assert "<svg" in (own / "quality.html").read_text()
    assert "run 2: aim" in proc.stdout  # the DP draft and the release drew on one budget


def test_the_walk_across_organisations_works_when_pasted(tmp_path):
    """The "Across organisations" block (docs/sites.md), run as written: provisioning, each party's
    policy and store, the release over TLS, and the audits of party 0's ledger and of each party's copy."""
    block = shown_block("across organisations")
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    proc = run(["bash", "-e", "-c", block], cwd=tmp_path)
    orgs = tmp_path / "demo-out" / "orgs"
    release = load_ledger(orgs / "release.ledger.json")
    assert release["method"] == "distaim" and audit_ledger(release).ok
    assert "TLS 1.3" in json.dumps(release["details"])
    sites = ["northeast", "midwest", "south", "west"]
    assert release["details"]["mpc"]["layout"] == "sites and servers" and release["details"]["mpc"]["sites"] == sites
    for site in sites:
        copy = load_ledger(orgs / f"site-{site}.ledger.json")
        assert audit_ledger(copy).ok and copy["status"] == "complete" and "pooled" in copy["details"]["site"]
        assert (orgs / "kit" / f"site-{site}" / "key.pem").stat().st_mode & 0o777 == 0o600
    for j in (1, 2):  # each server's own copy states the release's spend
        [copy] = [load_ledger(p) for p in (orgs / "kit" / f"party-{j}" / "ledgers").glob("*.ledger.json")]
        assert audit_ledger(copy).ok and copy["rho_spent"] == pytest.approx(release["rho_spent"], rel=1e-12)
    assert list(pd.read_csv(orgs / "release.csv").columns) == COLUMNS
    assert proc.stdout.count("OK: ") == 5 and "complete" in proc.stdout  # the audits and a site's settled store


def test_quickstart(tmp_path):
    out = tmp_path / "out"
    proc = run(
        [
            sys.executable,
            str(EXAMPLES / "quickstart.py"),
            "--out",
            str(out),
            "--rows",
            "900",
            "--silos",
            "3",
            "--synthetic-rows",
            "250",
            "--epsilon",
            "0.8",
        ],
        cwd=tmp_path,
    )
    assert sorted(p.name for p in (out / "silos").iterdir()) == ["silo_0.csv", "silo_1.csv", "silo_2.csv"]
    assert sum(len(pd.read_csv(p)) for p in (out / "silos").iterdir()) == 900
    data, ledger = check_release(out / "synthetic.csv", out / "synthetic.ledger.json", "aim", 0.8)
    assert len(data) == 250
    assert ledger["details"]["silos"] == 3
    assert json.loads((out / "schema.json").read_text()) == SCHEMA
    assert "epsilon 0.8 at delta 1e-09" in proc.stdout
    assert "audit: OK" in proc.stdout


def test_fit_once_sample_many(tmp_path):
    out = tmp_path / "out"
    proc = run(
        [sys.executable, str(EXAMPLES / "fit_once_sample_many.py"), "--out", str(out), "--rows", "900"], cwd=tmp_path
    )
    model = pf.load_model(out / "release.model")
    assert model.method == "aim" and audit_ledger(model.ledger).ok and not model.ledger["seeded"]
    assert model.ledger == load_ledger(out / "release.ledger.json")  # the file's ledger is the release's
    assert len(pd.read_csv(out / "many.csv")) == 9000
    given = pd.read_csv(out / "south-parttime.csv")
    assert len(given) == 1000 and set(given["region"]) == {"south"} and set(given["parttime"]) == {"yes"}
    assert given["experience"].between(0, 10).all()
    assert "sampling added no entry" in proc.stdout and "ledger audit: OK" in proc.stdout


def test_own_data(tmp_path):
    out = tmp_path / "out"
    proc = run([sys.executable, str(EXAMPLES / "own_data.py"), "--out", str(out), "--rows", "1200"], cwd=tmp_path)
    data, ledger = check_release(out / "synthetic.csv", out / "synthetic.ledger.json", "aim", 1.0)
    assert len(data) == 1000 and ledger["details"]["silos"] == 2
    reviewed = pf.Schema.from_dict(json.loads((out / "schema.json").read_text()))
    assert reviewed.to_dict() == pf.Schema.from_dict(SCHEMA).to_dict()  # the reviewed schema is the public one
    assert "NOT PRIVATE" in proc.stdout and "-> public" in proc.stdout  # the draft was reviewed, and said so
    page = (out / "quality.html").read_text()
    assert page.count("<svg") >= len(COLUMNS) + 3 and "Not differentially private" in page
    assert "audit: OK" in proc.stdout


def test_federated_flaim(tmp_path):
    out = tmp_path / "out"
    proc = run(
        [
            sys.executable,
            str(EXAMPLES / "federated_flaim.py"),
            "--out",
            str(out),
            "--rows",
            "1200",
            "--clients",
            "4",
            "--alpha",
            "0.5",
            "--rounds",
            "2",
            "--synthetic-rows",
            "300",
        ],
        cwd=tmp_path,
    )
    assert sum(line.startswith("client_") for line in proc.stdout.splitlines()) == 4
    data, ledger = check_release(out / "flaim.csv", out / "flaim.ledger.json", "flaim", 1.0)
    assert len(data) == 300
    assert ledger["details"]["silos"] == 4
    assert ledger["details"]["options"]["variant"] == "private"
    assert ledger["details"]["rounds"] == 2
    measures = json.loads((out / "flaim.eval.json").read_text())
    assert measures["rows"] == {"real": 1200, "synthetic": 300}
    error = measures["workload"]["error"]
    assert 0 < error < 2
    assert f"workload error {error:.3f}" in proc.stdout
    assert "audit OK" in proc.stdout


def test_sites(tmp_path):
    out = tmp_path / "out"
    proc = run([sys.executable, str(EXAMPLES / "sites.py"), "--out", str(out), "--rows", "1500"], cwd=tmp_path)
    data, ledger = check_release(out / "sites.csv", out / "sites.ledger.json", "distaim", 1.0)
    regions = ["northeast", "midwest", "south", "west"]
    assert ledger["details"]["silo_column"] == {"column": "region", "silos": sorted(regions)}
    assert sorted(p.name for p in out.glob("*.csv") if p.stem in regions) == sorted(f"{r}.csv" for r in regions)
    assert all("region" not in pd.read_csv(out / f"{r}.csv", nrows=1).columns for r in regions)
    per_silo = json.loads((out / "sites.eval.json").read_text())["per_silo"]["silos"]
    for region in regions:
        share = per_silo[region]["share"]
        assert abs(share["real"] - share["synthetic"]) < 0.05, (region, share)
        assert f"  {region}: share of rows" in proc.stdout
    assert set(data["region"]) == set(regions)
    assert "audit OK" in proc.stdout


def test_local_mpc(tmp_path):
    out = tmp_path / "out"
    proc = run(
        ["bash", str(EXAMPLES / "local_mpc.sh"), str(out)],
        cwd=tmp_path,
        env={"ROWS": "900", "PARTIES": "3", "METHOD": "distaim", "ROUNDS": "2", "COLLUSION": "1"},
    )
    assert sorted(p.name for p in (out / "silos").glob("client_*.csv")) == [
        "client_000.csv",
        "client_001.csv",
        "client_002.csv",
    ]
    data, ledger = check_release(out / "synthetic.csv", out / "synthetic.ledger.json", "distaim", 1.0)
    # the row count is the model's noisy estimate of the 900 real rows
    assert 450 < len(data) < 1350
    assert ledger["details"]["silos"] == 3
    assert ledger["details"]["rounds"] == 2
    assert "mpc" in ledger["details"]
    assert ledger["entries"] and {e["where"] for e in ledger["entries"]} == {"mpc"}
    assert "OK:" in proc.stdout
    assert "distaim over MPC" in proc.stdout
    assert all(e["distributed"] == {"parties": 3, "collusion": 1} for e in ledger["entries"])
    assert "noise drawn by the 3 parties, withstanding 1 colluding" in proc.stdout


def test_budget_and_audit(tmp_path):
    out = tmp_path / "out"
    proc = run(
        ["bash", str(EXAMPLES / "budget_and_audit.sh"), str(out)],
        cwd=tmp_path,
        env={"ROWS": "1000", "EPSILON": "1", "TOTAL_EPSILON": "1.5", "SYNTHETIC_ROWS": "200"},
    )
    ledgers = []
    for name in ("release1", "release2"):
        data, ledger = check_release(out / f"{name}.csv", out / f"{name}.ledger.json", "aim", 1.0)
        assert len(data) == 200
        assert ledger["details"]["budget_store"]["dataset_id"] == "cps1988-sample"
        ledgers.append(ledger)
        assert proc.stdout.count(f"OK: {out / name}.ledger.json") == 1
    # the third release was refused with the documented exit status, and wrote nothing
    assert "release 3 exit status: 1" in proc.stdout
    assert not (out / "release3.csv").exists() and not (out / "release3.ledger.json").exists()
    # the store: two settled runs, committed exactly what their ledgers spent, unchanged by the refusal
    shown = subprocess.run(
        [str(BIN / "privsyn-fed"), "budget", "show", "--budget-store", str(out / "budget.db"), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    (budget,) = json.loads(shown.stdout)
    before = json.loads((out / "budget-before-refusal.json").read_text())[0]
    assert budget["total_epsilon"] == 1.5
    assert [r["status"] for r in budget["runs"]] == ["complete", "complete"]
    assert budget["rho_committed"] == pytest.approx(sum(l["rho_spent"] for l in ledgers), rel=1e-9)
    assert budget["rho_committed"] == before["rho_committed"]
    assert budget["runs"] == before["runs"]
