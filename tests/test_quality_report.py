"""The visual quality report: its page (self-contained, one figure per column, heatmaps, workload,
TSTR and DCR), `evaluate --report` and `synth --quality-report` (paths checked before anything is
read or reserved, refused under --mpc, a failure that leaves the release in place), Parquet input,
and the page as a headless Chromium renders it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed import evaluation
from privsyn_fed.evaluation import encode, quality, workload_error
from privsyn_fed.evaluation.utility import association_matrix, cramers_v, marginal_errors

from .conftest import SCHEMA, assert_one_line_error, make_frame, run_cli, synth_argv

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@pytest.fixture
def tables(tmp_path):
    """Real, synthetic and holdout CSVs of the shared schema (small: the tests stay fast)."""
    paths = {}
    for name, n, seed in (("real", 400, 1), ("syn", 300, 4), ("hold", 200, 2)):
        paths[name] = tmp_path / f"{name}.csv"
        make_frame(n, seed).to_csv(paths[name], index=False)
    return paths


def evaluate_args(schema_path, tables, *extra):
    return ["evaluate", "--real", tables["real"], "--synthetic", tables["syn"], "--schema", schema_path, *extra]


def svgs(page: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", page, flags=re.S)


def figure_labels(page: str) -> list[str]:
    return re.findall(r'<svg\b[^>]*aria-label="([^"]*)"', page)


# ---- the page ---------------------------------------------------------------------------------------
def test_evaluate_report_is_a_self_contained_page_with_every_figure(schema_path, tables, tmp_path, capsys):
    out = tmp_path / "quality.html"
    args = evaluate_args(schema_path, tables, "--holdout", tables["hold"], "--label", "label", "--report", out)
    code, stdout, err = run_cli(*args, capsys=capsys)
    assert code == 0, err
    assert f"wrote {out}" in stdout and "NOT differentially private" in stdout
    page = out.read_text(encoding="utf-8")
    # self-contained: no address to fetch, no script, stylesheet or font from elsewhere
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<(script|link|iframe|object|embed)\b", page)
    assert "@import" not in page and "url(http" not in page
    for value in re.findall(r'\b(?:src|href)="([^"]*)"', page):
        assert value.startswith(("#", "data:image/png;base64,")), value
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "ids repeat across figures"
    # the header: what was compared, and that the page is not private
    assert str(tables["real"]) in page and str(tables["syn"]) in page and str(tables["hold"]) in page
    assert "Not differentially private" in page and "Handle it like the real data" in page
    labels = figure_labels(page)
    columns = [c["name"] for c in SCHEMA["columns"]]
    for name in columns:  # one figure per column
        assert sum(label.startswith(f"{name}: real and synthetic") for label in labels) == 1, labels
    assert {"real", "synthetic", "difference (synthetic - real)"} <= set(labels)
    assert "Cram\u00e9r's V" in page
    assert "error of each workload marginal" in labels
    assert "train on synthetic, test on real" in labels and "distance to closest record" in labels
    assert len(labels) == len(columns) + 3 + 1 + 2 == len(svgs(page))
    assert page.count('class="guide"') == 7  # summary, columns, numeric, association, workload, TSTR, DCR


def test_report_without_holdout_has_no_tstr_or_dcr(schema):
    page = quality.build_report(
        make_frame(300, 1), make_frame(300, 4), schema, quality.Sources(["real.csv"], "syn.csv", "schema.json")
    )
    labels = figure_labels(page)
    assert "error of each workload marginal" in labels
    assert not any("train on synthetic" in x or "closest record" in x for x in labels)
    assert 'id="tstr"' not in page and 'id="dcr"' not in page


def test_many_categories_and_bins_are_capped(tmp_path):
    """A column of 200 categories shows the 30 most frequent in the real rows and "other"; a column of
    600 bins is merged into at most 60 bars; labels with markup stay text."""
    cats = [f"c{i}" for i in range(200)]
    schema = pf.Schema.from_dict(
        {
            "columns": [
                {"name": "many", "type": "categorical", "categories": cats, "missing": True},
                {"name": "fine", "type": "numeric", "lower": 0, "upper": 600, "bins": 600},
                {"name": "<b>x</b>", "type": "categorical", "categories": ["<i>", "$5$"]},
            ]
        }
    )
    rng = np.random.default_rng(0)
    weights = np.r_[np.full(10, 5.0), np.ones(190)]

    def frame(n):
        return pd.DataFrame(
            {
                "many": rng.choice(cats, n, p=weights / weights.sum()),
                "fine": rng.uniform(0, 600, n).round(1),
                "<b>x</b>": rng.choice(["<i>", "$5$"], n),
            }
        )

    page = quality.build_report(frame(500), frame(400), schema, quality.Sources(["r.csv"], "s.csv", "x.json"))
    labels = figure_labels(page)
    assert "&lt;b&gt;x&lt;/b&gt;: real and synthetic shares by category" in labels
    assert "<b>x</b>" not in page and "<i>" not in page
    bars = quality._categorical_bars(schema.columns[0], np.r_[weights / weights.sum(), 0.0], np.full(201, 1 / 201))
    assert len(bars[0]) == quality.MAX_BARS + 2 and bars[0][-2:] == ["other (170 categories)", "(missing)"]
    assert set(bars[0][:10]) == {f"c{i}" for i in range(10)}  # the most frequent in the real rows come first
    assert bars[1].sum() == pytest.approx(1.0) and bars[2].sum() == pytest.approx(1.0)
    svg = next(s for s in svgs(page) if 'aria-label="fine:' in s)
    assert len(svg) < 150_000


def test_association_and_marginal_errors(schema):
    real = encode(make_frame(2000, 1), schema, "real")
    v = association_matrix(real, schema.shape)
    assert np.allclose(v, v.T, equal_nan=True) and np.isnan(np.diag(v)).all()
    names = schema.names
    assert v[names.index("income"), names.index("label")] > 0.5  # label depends on income
    assert v[names.index("region"), names.index("sex")] < 0.05  # drawn independently
    copy = np.column_stack([real[:, 0], real[:, 0]])
    assert cramers_v(copy, [schema.shape[0]] * 2, 0, 1) == pytest.approx(1.0, abs=0.01)
    syn = encode(make_frame(1500, 4), schema, "synthetic")
    workload = [(0, 1, 2), (1, 3, 4), (2, 3, 4)]
    errors = marginal_errors(real, syn, schema.shape, workload)
    assert errors.shape == (3,) and (errors > 0).all() and (errors <= 2).all()
    assert errors.mean() == pytest.approx(workload_error(real, syn, schema.shape, workload))


# ---- evaluate --report: paths ---------------------------------------------------------------------
@pytest.mark.parametrize("case", ["suffix", "no_folder", "exists", "is_input"])
def test_evaluate_report_bad_path_exits_2_and_writes_nothing(case, schema_path, tables, tmp_path, capsys):
    report = {
        "suffix": tmp_path / "quality.md",
        "no_folder": tmp_path / "absent" / "quality.html",
        "exists": tmp_path / "old.html",
        "is_input": tables["syn"],
    }[case]
    if case == "exists":
        report.write_text("earlier")
    before = sorted(p.name for p in tmp_path.iterdir())
    js = tmp_path / "eval.json"
    proc = run_cli(*evaluate_args(schema_path, tables, "--report", report, "--json", js), capsys=capsys)
    line = assert_one_line_error(proc)
    assert str(report) in line or "--report" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, no temporary file left
    if case == "exists":
        assert report.read_text() == "earlier"


# ---- Parquet ----------------------------------------------------------------------------------------
def test_report_works_when_real_is_parquet(schema_dict, tmp_path, capsys):
    """Parquet numbers arrive as floats; a category stored as a whole number (sex: 0/1) still reads as
    the schema's text, and the measures equal those of the same rows as CSV."""
    sex = next(c for c in schema_dict["columns"] if c["name"] == "sex")
    sex["categories"] = ["0", "1"]
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps(schema_dict))
    frames = {}
    for name, n, seed in (("real", 400, 1), ("syn", 300, 4)):
        df = make_frame(n, seed)
        df["sex"] = (df["sex"] == "M").astype(int)
        frames[name] = df
        df.to_csv(tmp_path / f"{name}.csv", index=False)
    frames["real"].to_parquet(tmp_path / "real.parquet", index=False)
    results = {}
    for real in ("real.csv", "real.parquet"):
        js, page = tmp_path / f"{real}.json", tmp_path / f"{real}.html"
        args = ["evaluate", "--real", tmp_path / real, "--synthetic", tmp_path / "syn.csv", "--schema", schema_path]
        code, _, err = run_cli(*args, "--json", js, "--report", page, capsys=capsys)
        assert code == 0, err
        results[real] = json.loads(js.read_text())
        assert len(svgs(page.read_text())) == len(schema_dict["columns"]) + 4
    csv, parquet = results["real.csv"], results["real.parquet"]
    assert parquet["workload"]["error"] == pytest.approx(csv["workload"]["error"])
    for name, measures in csv["columns"].items():
        assert parquet["columns"][name] == pytest.approx(measures), name
    assert parquet["columns"]["sex"]["tv"] < 0.1  # the categories were matched, not all missing or refused


# ---- synth --quality-report ---------------------------------------------------------------------------
def test_synth_quality_report_writes_the_release_and_the_page(schema_path, silo_paths, tmp_path, capsys):
    out, report, hold = tmp_path / "syn.csv", tmp_path / "quality.html", tmp_path / "hold.csv"
    make_frame(200, 9).to_csv(hold, index=False)
    args = synth_argv(
        "independent",
        schema=schema_path,
        silos=silo_paths,
        out=out,
        quiet=True,
        seed=0,
        quality_report=report,
        quality_holdout=hold,
        quality_label="label",
    )
    code, stdout, err = run_cli(*args, capsys=capsys)
    assert code == 0, err
    assert out.exists() and out.with_suffix(".ledger.json").exists() and report.exists()
    line = [x for x in stdout.splitlines() if x.startswith(f"wrote {report}")]
    assert len(line) == 1 and "non-private" in line[0] and "real" in line[0]
    page = report.read_text()
    assert all(str(p) in page for p in silo_paths) and str(out) in page and str(hold) in page
    labels = figure_labels(page)
    assert "train on synthetic, test on real" in labels and "distance to closest record" in labels
    assert f"real {sum(len(pd.read_csv(p)) for p in silo_paths):,}" in page  # the union of the silos


def test_synth_quality_report_with_mpc_is_refused_before_anything(schema_path, silo_paths, tmp_path, capsys):
    out, report, store = tmp_path / "syn.csv", tmp_path / "quality.html", tmp_path / "budget.db"
    args = synth_argv(
        "independent",
        schema=schema_path,
        silos=silo_paths,
        out=out,
        quiet=True,
        seed=0,
        mpc=True,
        quality_report=report,
        budget_store=store,
        dataset_id="d",
        total_epsilon=3,
    )
    before = sorted(p.name for p in tmp_path.iterdir())
    assert_one_line_error(run_cli(*args, capsys=capsys), "--mpc")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no CSV, ledger, report or budget store


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--quality-report", "QUALITY.md"], "suffix .html"),
        (["--quality-report", "EXISTS"], "already exists"),
        (["--quality-holdout", "HOLD"], "belong to --quality-report"),
        (["--quality-report", "QUALITY.html", "--quality-label", "label"], "needs --quality-holdout"),
        (["--quality-report", "QUALITY.html", "--quality-holdout", "HOLD", "--quality-label", "nope"], "'nope'"),
        (["--quality-report", "QUALITY.html", "--quality-holdout", "SILO"], "same file"),
        (["--quality-report", "QUALITY.html", "--quality-holdout", "BADHOLD"], "missing column"),
    ],
)
def test_synth_quality_options_are_checked_before_the_release(
    extra, fragment, schema_path, silo_paths, tmp_path, capsys
):
    hold, bad = tmp_path / "hold.csv", tmp_path / "badhold.csv"
    make_frame(50, 9).to_csv(hold, index=False)
    make_frame(50, 9).drop(columns="label").to_csv(bad, index=False)
    (tmp_path / "exists.html").write_text("earlier")
    names = {
        "QUALITY.md": tmp_path / "q.md",
        "QUALITY.html": tmp_path / "q.html",
        "EXISTS": tmp_path / "exists.html",
        "HOLD": hold,
        "BADHOLD": bad,
        "SILO": silo_paths[0],
    }
    out, store = tmp_path / "syn.csv", tmp_path / "budget.db"
    args = synth_argv(
        "independent",
        schema=schema_path,
        silos=silo_paths,
        out=out,
        quiet=True,
        seed=0,
        budget_store=store,
        dataset_id="d",
        total_epsilon=3,
    )
    before = sorted(p.name for p in tmp_path.iterdir())
    assert_one_line_error(run_cli(*args, *[names.get(x, x) for x in extra], capsys=capsys), fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing reserved, released or written


def test_a_failing_quality_report_leaves_the_release(schema_path, silo_paths, tmp_path, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no figures today")

    monkeypatch.setattr(evaluation, "build_report", broken)  # the face the command line uses
    out, report = tmp_path / "syn.csv", tmp_path / "quality.html"
    args = synth_argv(
        "independent", schema=schema_path, silos=silo_paths, out=out, quiet=True, seed=0, quality_report=report
    )
    code, stdout, err = run_cli(*args, capsys=capsys)
    assert code == 1
    lines = [line for line in err.splitlines() if "quality report" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "not written" in lines[0] and "no figures today" in lines[0] and str(out) in lines[0]
    assert out.exists() and json.loads(out.with_suffix(".ledger.json").read_text())["status"] == "complete"
    assert not report.exists() and f"wrote {out}" in stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".quality.html")]


# ---- the page in a browser ---------------------------------------------------------------------------
PROBE = """<script>
(function () {
  var rects = Array.prototype.map.call(document.querySelectorAll("svg"), function (s) {
    var r = s.getBoundingClientRect();
    return [r.width, r.height];
  });
  var pre = document.createElement("pre");
  pre.id = "probe-rects";
  pre.textContent = JSON.stringify(rects);
  document.body.appendChild(pre);
})();
</script>"""


def run_browser(browser: str, args: list[str], profile, timeout: float = 90.0) -> tuple[str, str]:
    """Run headless Chromium in its own process group; kill the whole group afterwards."""
    cmd = [browser, "--headless=new", "--disable-gpu", "--no-sandbox", "--no-first-run", f"--user-data-dir={profile}"]
    proc = subprocess.Popen(
        cmd + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{browser} did not finish within {timeout:.0f} s")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # helpers (zygote, utility processes) left behind
        except ProcessLookupError:
            pass
    return out, err


def test_page_renders_in_headless_chromium(schema, tmp_path):
    browser = next((b for b in map(shutil.which, BROWSERS) if b), None)
    if browser is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium) to render the page")
    page = quality.build_report(
        make_frame(400, 1),
        make_frame(300, 4),
        schema,
        quality.Sources(["real.csv"], "syn.csv", "schema.json", "hold.csv"),
        holdout_df=make_frame(200, 2),
        label="label",
    )
    n_figures = len(svgs(page))
    report = tmp_path / "quality.html"
    report.write_text(page, encoding="utf-8")
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")

    dom, log = run_browser(
        browser, ["--enable-logging=stderr", "--v=0", "--dump-dom", probed.as_uri()], tmp_path / "profile"
    )
    console = [line for line in log.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console, console
    found = re.search(r'<pre id="probe-rects">(.*?)</pre>', dom, flags=re.S)
    assert found, "the page did not load: " + log[-500:]
    rects = json.loads(found.group(1))
    assert len(rects) == n_figures >= 10
    assert all(w > 50 and h > 50 for w, h in rects), rects

    shot = tmp_path / "quality.png"
    run_browser(browser, [f"--screenshot={shot}", "--window-size=1200,3000", report.as_uri()], tmp_path / "profile")
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    with Image.open(shot) as im:
        assert im.size == (1200, 3000)
        pixels = np.asarray(im.convert("RGB"))
    blue = np.all(np.abs(pixels.astype(int) - [31, 119, 180]) < 12, axis=-1)
    assert blue.sum() > 2000  # the real rows' bars are drawn, not a blank page


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
