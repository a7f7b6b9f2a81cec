"""The silo as a column (``synth --silo-column``): each silo's name is a public attribute of its rows.

Each silo's rows take its name (``--silo NAME=PATH``, else the file's name without extensions) in a
categorical schema column; the files need not hold it. Checks: names and refusals before any
output, the column set and checked on reading, the sensitivity of marginals with the column on D
and D plus one record, each method keeping the silos' distributions, the ledger record and its
audit, and ``evaluate``'s per-silo measures.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.audit import audit_ledger
from privsyn_fed.common import InputError, OptionError
from privsyn_fed.evaluation import evaluate
from privsyn_fed.silo import Silo
from privsyn_fed.silo.site import check_silo_column, default_silo_name, split_silo_arg

from .conftest import assert_audit_objects_only_to_the_seed, assert_one_line_error, run_cli, synth_argv

SITES = ("north", "south", "east")
#: Each site's share of sick rows and its age range: the sites differ strongly.
SICK = {"north": 0.1, "south": 0.5, "east": 0.9}
SITE_SCHEMA = {
    "columns": [
        {"name": "site", "type": "categorical", "categories": list(SITES)},
        {"name": "age", "type": "numeric", "lower": 0, "upper": 100, "bins": 10, "integer": True},
        {"name": "sick", "type": "categorical", "categories": ["y", "n"]},
    ]
}


def site_frame(site: str, n: int, seed: int) -> pd.DataFrame:
    """A site's rows without the site column: ages 20 apart from site to site, its own share sick."""
    rng = np.random.default_rng(seed)
    k = SITES.index(site)
    age = rng.integers(20 + 20 * k, 40 + 20 * k, n)
    return pd.DataFrame({"age": age, "sick": np.where(rng.random(n) < SICK[site], "y", "n")})


@pytest.fixture
def sites(tmp_path):
    """The schema's path and one CSV per site, named after it, without the site column."""
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SITE_SCHEMA))
    paths = []
    for k, site in enumerate(SITES):
        paths.append(tmp_path / f"{site}.csv")
        site_frame(site, 500, seed=k).to_csv(paths[-1], index=False)
    return schema, paths


def test_a_silo_is_named_by_name_equals_path_or_by_its_file(tmp_path):
    assert split_silo_arg("north=data/a.csv") == ("north", "data/a.csv")
    assert split_silo_arg("data/a=b.csv") == (None, "data/a=b.csv")  # a path separator before '='
    existing = tmp_path / "x=y.csv"
    existing.write_text("a\n1\n")
    assert split_silo_arg(str(existing)) == (None, str(existing))  # an existing file is a path
    assert default_silo_name("data/north.csv.gz") == "north"
    assert default_silo_name("25-00503.parquet") == "25-00503"
    assert default_silo_name("site.v2.csv") == "site.v2"
    with pytest.raises(InputError, match="needs a name and a path"):
        split_silo_arg("north=")


def test_the_silo_column_must_be_a_categorical_column_whose_categories_are_the_silos():
    schema = pf.Schema.from_dict(SITE_SCHEMA)
    check_silo_column(schema, "site", ["east", "north", "south"])
    for column, names, fragment in [
        ("region", SITES, "not a column"),
        ("age", SITES, "numeric"),
        ("site", ("north", "south", "west"), "'west' is not one of"),
        ("site", ("north", "south"), "'east' names no silo"),
        ("site", ("north", "north", "south", "east"), "two silos are named 'north'"),
    ]:
        with pytest.raises(OptionError, match=fragment):
            check_silo_column(schema, column, list(names))


def test_a_silo_without_the_column_takes_its_name_and_one_with_it_is_checked(tmp_path):
    schema = pf.Schema.from_dict(SITE_SCHEMA)
    frame = site_frame("south", 50, seed=0)
    silo = Silo.from_frame(frame, schema, "s", site=("site", "south"))
    assert (silo.rows()[:, 0] == SITES.index("south")).all()
    path = tmp_path / "south.csv"
    frame.assign(site="south").to_csv(path, index=False)
    held = Silo.load(path, schema, site=("site", "south"))
    assert (held.rows() == silo.rows()).all()
    bad = frame.assign(site="south")
    bad.loc[7, "site"] = "north"
    bad.to_csv(path, index=False)
    with pytest.raises(InputError, match=r"row 9, column 'site': holds 'north'") as exc:
        Silo.load(path, schema, site=("site", "south"))
    assert "north" not in exc.value.shareable()  # what a party would relay names no value


@pytest.mark.parametrize("seed", range(4))
def test_a_marginal_with_the_silo_column_moves_by_one_record_at_most(seed):
    """Sensitivity on D and D plus one record: each silo counts its own slice, the union's marginal is
    their sum, and a record added to any silo moves exactly one cell by one (L1 = L2 = 1)."""
    schema = pf.Schema.from_dict(SITE_SCHEMA)
    rng = np.random.default_rng(seed)
    frames = {s: site_frame(s, int(rng.integers(5, 40)), seed=seed * 10 + k) for k, s in enumerate(SITES)}
    silos = [Silo.from_frame(f, schema, s, site=("site", s)) for s, f in frames.items()]
    clique = (0, 1, 2)
    before = sum(s.marginal(clique) for s in silos)
    target = SITES[int(rng.integers(3))]
    extra = pd.DataFrame({"age": [int(rng.integers(0, 101))], "sick": [rng.choice(["y", "n"])]})
    grown = {s: pd.concat([f, extra], ignore_index=True) if s == target else f for s, f in frames.items()}
    after = sum(Silo.from_frame(f, schema, s, site=("site", s)).marginal(clique) for s, f in grown.items())
    diff = after - before
    assert np.abs(diff).sum() == 1 and np.sqrt((diff**2).sum()) == 1
    site_of_cell = np.unravel_index(int(np.argmax(diff)), [schema.shape[i] for i in clique])[0]
    assert SITES[site_of_cell] == target  # counted within its own silo


@pytest.mark.parametrize("method", ["aim", "distaim", "flaim", "fedtda", "independent"])
def test_every_method_releases_the_silo_column_and_audits(tmp_path, sites, method, capsys):
    schema, paths = sites
    out = tmp_path / f"{method}.csv"
    argv = synth_argv(method, schema=schema, silos=paths, out=out, epsilon=4.0, seed=3, silo_column="site")
    code, _, err = run_cli(*argv, "--quiet", capsys=capsys)
    assert code == 0, err
    syn = pd.read_csv(out)
    assert set(syn["site"]) <= set(SITES) and list(syn.columns) == ["site", "age", "sick"]
    shares = syn["site"].value_counts(normalize=True)
    assert all(abs(shares[s] - 1 / 3) < 0.05 for s in SITES), shares  # each site a third of the rows
    ledger = json.loads(out.with_suffix(".ledger.json").read_text())
    assert ledger["details"]["silo_column"] == {"column": "site", "silos": list(SITES)}
    assert_audit_objects_only_to_the_seed(ledger)


@pytest.mark.parametrize("method", ["aim", "distaim"])
def test_a_release_with_the_silo_column_keeps_each_sites_distribution(tmp_path, sites, method, capsys):
    schema, paths = sites
    out = tmp_path / "syn.csv"
    argv = synth_argv(method, schema=schema, silos=paths, out=out, epsilon=4.0, seed=5, silo_column="site")
    assert run_cli(*argv, "--quiet", capsys=capsys).returncode == 0
    syn = pd.read_csv(out)
    for k, site in enumerate(SITES):
        rows = syn[syn["site"] == site]
        assert abs((rows["sick"] == "y").mean() - SICK[site]) < 0.1, (site, (rows["sick"] == "y").mean())
        assert abs(rows["age"].median() - (30 + 20 * k)) < 10, (site, rows["age"].median())


def test_silos_named_on_the_command_line_and_in_python(tmp_path, sites, capsys):
    schema, paths = sites
    renamed = [tmp_path / f"file{k}.csv" for k in range(3)]
    for src, dst in zip(paths, renamed):
        dst.write_bytes(src.read_bytes())
    out = tmp_path / "named.csv"
    silos = [f"{s}={p}" for s, p in zip(SITES, renamed)]
    argv = synth_argv("aim", schema=schema, silos=silos, out=out, epsilon=2.0, seed=1, silo_column="site")
    assert run_cli(*argv, "--quiet", capsys=capsys).returncode == 0
    frames = {s: site_frame(s, 300, seed=k) for k, s in enumerate(SITES)}
    result = pf.synthesize(frames, "flaim", 2.0, 1e-9, schema=schema, seed=2, silo_column="site")
    assert result.ledger["details"]["silo_column"]["silos"] == list(SITES)
    with pytest.raises(OptionError, match=r"pass silos as a dict \{name: frame\}"):
        pf.synthesize(list(frames.values()), "aim", 2.0, 1e-9, schema=schema, seed=2, silo_column="site")


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--silo-column", "region"], "'region' is not a column of the schema"),
        (["--silo-column", "age"], "numeric in the schema"),
        (["--silo-column", "site", "--silo", "west=WEST"], "'west' is not one of the column's categories"),
    ],
)
def test_a_bad_silo_column_is_refused_in_one_line_before_any_output(tmp_path, sites, extra, fragment):
    schema, paths = sites
    if "west=WEST" in extra:
        extra[extra.index("west=WEST")] = f"west={paths[0]}"
        paths = paths[1:]
    out = tmp_path / "refused.csv"
    proc = run_cli(*synth_argv("distaim", schema=schema, silos=paths, out=out, seed=1), *extra)
    assert_one_line_error(proc, fragment)
    assert not out.exists() and not out.with_suffix(".ledger.json").exists()


def test_a_silo_file_holding_another_silos_name_is_refused_naming_the_row(tmp_path, sites):
    schema, paths = sites
    frame = pd.read_csv(paths[1]).assign(site="south")
    frame.loc[3, "site"] = "east"
    frame.to_csv(paths[1], index=False)
    out = tmp_path / "refused.csv"
    proc = run_cli(*synth_argv("aim", schema=schema, silos=paths, out=out, seed=1, silo_column="site"))
    assert_one_line_error(proc, str(paths[1]), "row 5", "column 'site'")
    assert not out.exists()


def test_the_audit_refutes_a_tampered_silo_column_record(tmp_path, sites, capsys):
    schema, paths = sites
    out = tmp_path / "syn.csv"
    argv = synth_argv("independent", schema=schema, silos=paths, out=out, seed=1, silo_column="site")
    assert run_cli(*argv, "--quiet", "--report", tmp_path / "privacy.md", capsys=capsys).returncode == 0
    assert "**Silo column:** 'site' holds each row's silo (north, south, east)" in (tmp_path / "privacy.md").read_text()
    ledger = json.loads(out.with_suffix(".ledger.json").read_text())
    for change, fragment in [
        (lambda s: s["silos"].append("west"), "names 4 silos, but the release had 3"),
        (lambda s: s.update(silos=["north", "north", "east"]), "names a silo twice"),
        (lambda s: s.update(column="age"), "must be categorical with one cell per silo"),
        (lambda s: s.update(column="postcode"), "is not a column of the release"),
        (lambda s: s.pop("silos"), "must record its column and the silos' names"),
    ]:
        tampered = json.loads(json.dumps(ledger))
        change(tampered["details"]["silo_column"])
        problems = audit_ledger(tampered).problems
        assert any(fragment in p for p in problems), (fragment, problems)


def test_evaluate_compares_the_rows_within_each_silo(tmp_path, sites, capsys):
    """Hand-computed: a synthetic table that swaps the north and south rows keeps the union's 1-ways of
    'sick' but not each site's."""
    schema = pf.Schema.from_dict(SITE_SCHEMA)
    real = pd.DataFrame({"site": ["north"] * 4 + ["south"] * 4, "age": [25] * 8, "sick": list("ynnn") + list("yyyn")})
    syn = real.assign(site=["south"] * 4 + ["north"] * 4)
    report = evaluate(real, syn, schema, silo_column="site", workload_size=None)["per_silo"]
    north = report["silos"]["north"]
    assert north["rows"] == {"real": 4, "synthetic": 4} and north["share"]["real"] == 0.5
    assert north["mean_tv"] == pytest.approx(0.25)  # age agrees (0), sick 1/4 against 3/4 (0.5)
    assert report["silos"]["east"]["mean_tv"] is None  # no rows on either side
    schema_path, paths = sites
    out = tmp_path / "syn.csv"
    argv = synth_argv("aim", schema=schema_path, silos=paths, out=out, epsilon=4.0, seed=2, silo_column="site")
    assert run_cli(*argv, "--quiet", capsys=capsys).returncode == 0
    code, text, err = run_cli(
        "evaluate", *[a for p in paths for a in ("--real", p)], "--synthetic", out, "--schema", schema_path,
        "--silo-column", "site", "--json", tmp_path / "ev.json", capsys=capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "per silo ('site')" in text
    silos = json.loads((tmp_path / "ev.json").read_text())["per_silo"]["silos"]
    assert set(silos) == set(SITES) and all(s["workload_error"] < 0.5 for s in silos.values())


def test_the_quality_report_after_a_release_shows_each_silo(tmp_path, sites, capsys):
    schema, paths = sites
    out, page = tmp_path / "syn.csv", tmp_path / "quality.html"
    argv = synth_argv("aim", schema=schema, silos=paths, out=out, epsilon=4.0, seed=2, silo_column="site")
    code, _, err = run_cli(*argv, "--quiet", "--quality-report", page, capsys=capsys)
    assert code == 0, err
    text = page.read_text()
    assert "Per silo (&#x27;site&#x27;)" in text
    assert all(f"<td>{s}</td>" in text for s in SITES)


def test_distaim_over_mpc_gives_each_partys_rows_its_silos_name_and_audits(tmp_path, sites):
    schema, paths = sites
    out = tmp_path / "mpc.csv"
    argv = synth_argv("distaim", schema=schema, silos=paths, out=out, epsilon=4.0, seed=3, silo_column="site")
    proc = run_cli(*argv, "--mpc", "--quiet")
    assert proc.returncode == 0, proc.stderr
    syn = pd.read_csv(out)
    for site in SITES:
        assert abs((syn[syn["site"] == site]["sick"] == "y").mean() - SICK[site]) < 0.1, site
    ledger = json.loads(out.with_suffix(".ledger.json").read_text())
    assert ledger["details"]["silo_column"] == {"column": "site", "silos": list(SITES)}
    assert_audit_objects_only_to_the_seed(ledger)
    copies = sorted(tmp_path.glob("*.csv.ledgers/*.json"))
    assert len(copies) == 2  # parties 1 and 2
    for copy in copies:
        assert_audit_objects_only_to_the_seed(json.loads(copy.read_text()))


def test_a_party_accepts_a_silo_column_only_with_its_own_name_in_it(tmp_path):
    from privsyn_fed.mpc.party_session import PartySession
    from privsyn_fed.mpc.policy import Refused
    from privsyn_fed.mpc.request import ReleaseRequest

    schema = pf.Schema.from_dict(SITE_SCHEMA)
    session = PartySession(schema, str(tmp_path / "south.csv"), 1, 3, channel=object())
    session._check_site(("site", ("north", "south", "east")))
    with pytest.raises(Refused, match="names this party's silo 'east', but it is 'south'"):
        session._check_site(("site", ("north", "east", "south")))
    with pytest.raises(Refused, match="the release's silo column: .*numeric"):
        session._check_site(("age", ("north", "south", "east")))
    request = ReleaseRequest("distaim", 1.0, 1e-9, "a" * 64, False, 3, 1, site=("site", ("north", "south", "east")))
    assert ReleaseRequest.from_wire(request.to_wire(), 3) == request
    twice, short = {"column": "site", "silos": ["north", "north", "east"]}, {"column": "site", "silos": ["north"]}
    for bad in (twice, short, "x"):
        with pytest.raises(Refused, match="silo column is not a column with one distinct silo name per party"):
            ReleaseRequest.from_wire({**request.to_wire(), "silo_column": bad}, 3)


def _across_hosts(tmp_path, schema, silos, extra0=()):
    """Party 0 (`synth --mpc --federation`), party 1 (`mpc-party`) and the dealer, each its own
    process with its own certificate over loopback TLS; party 1's silo is ``silos[1]`` (a
    ``--silo`` value). Returns party 0's process, the others' outputs and party 0's CSV."""
    from privsyn_fed.mpc.launch import local_federation

    from .conftest import CLI, finish, start

    folder = tmp_path / "federation"
    folder.mkdir(mode=0o700)
    fed = local_federation(folder, 2)
    out = tmp_path / "hosts.csv"
    party1 = ["mpc-party", *fed.args(1), "--mpc-timeout", "60", "--schema", str(schema), "--silo", silos[1]]
    procs = {
        "party1": start(CLI + [*party1, "--seed", "4", "--ledger", str(tmp_path / "p1.ledger.json")]),
        "dealer": start(CLI + ["mpc-dealer", *fed.args(2), "--mpc-timeout", "60"]),
    }
    argv = synth_argv("distaim", schema=schema, silos=[silos[0]], out=out, epsilon=4.0, seed=4, silo_column="site")
    party0 = run_cli(*argv, "--mpc", *fed.args(0), "--mpc-timeout", "60", "--quiet", *extra0)
    return party0, finish(procs), out


@pytest.fixture
def two_sites(tmp_path):
    """A schema whose silo column has two sites, north and south, and their files (``file0.csv``,
    ``file1.csv``: the names say nothing of the sites)."""
    schema = tmp_path / "schema.json"
    two = {"columns": [{**SITE_SCHEMA["columns"][0], "categories": ["north", "south"]}, *SITE_SCHEMA["columns"][1:]]}
    schema.write_text(json.dumps(two))
    for k, site in enumerate(("north", "south")):
        site_frame(site, 400, seed=k).to_csv(tmp_path / f"file{k}.csv", index=False)
    return schema, [tmp_path / "file0.csv", tmp_path / "file1.csv"]


def test_the_silo_column_across_hosts_takes_each_partys_own_name(tmp_path, two_sites):
    schema, files = two_sites
    party0, outputs, out = _across_hosts(tmp_path, schema, [f"north={files[0]}", f"south={files[1]}"])
    assert party0.returncode == 0, (party0.stderr, outputs)
    syn = pd.read_csv(out)
    assert abs((syn[syn["site"] == "south"]["sick"] == "y").mean() - SICK["south"]) < 0.1
    assert abs((syn[syn["site"] == "north"]["sick"] == "y").mean() - SICK["north"]) < 0.1
    ledger = json.loads(out.with_suffix(".ledger.json").read_text())
    assert ledger["details"]["silo_column"] == {"column": "site", "silos": ["north", "south"]}
    assert_audit_objects_only_to_the_seed(json.loads((tmp_path / "p1.ledger.json").read_text()))


def test_across_hosts_a_silo_named_outside_the_categories_stops_the_release_before_any_output(tmp_path, two_sites):
    schema, files = two_sites
    party0, _, out = _across_hosts(tmp_path, schema, [f"north={files[0]}", f"west={files[1]}"])
    assert_one_line_error(party0, "silo 'west' is not one of the column's categories", "north, west")
    assert not out.exists() and not out.with_suffix(".ledger.json").exists()
