"""SDNist's pMSE and unique exact matches (``evaluation.sdnist_measures``): hand-computed cases,
their bounds, a seeded statistical check, and the command line."""

import json

import numpy as np
import pandas as pd
import pytest

from privsyn_fed.cli import main
from privsyn_fed.evaluation.sdnist_measures import pmse, unique_exact_matches

from .conftest import make_frame


def test_unique_exact_matches_by_hand():
    real = pd.DataFrame({"n": [1, 1, 2, 3, 4.0], "c": ["a", "a", "b", "c", None]})
    syn = pd.DataFrame({"n": ["2", "2", "3.0", "9", "4"], "c": ["b", "b", "c", "z", ""], "extra": range(5)})
    out = unique_exact_matches(real, syn)
    # (1, a) twice is not unique; (2, b), (3, c) and (4, missing) are, and the synthetic rows repeat
    # all three: "3.0" reads as 3, and a missing cell as the empty text is the same "N"
    assert out == {"unique_real": 3, "unique_share": 0.6, "matched": 3, "matched_share": 1.0}
    assert unique_exact_matches(real, syn.iloc[[3]])["matched"] == 0
    with pytest.raises(ValueError, match="no column in common"):
        unique_exact_matches(real, syn[["extra"]])


def test_pmse_bounds():
    real = pd.DataFrame({"a": ["x"] * 60 + ["y"] * 40, "b": ["u", "v"] * 50})
    same = pmse(real, real)
    assert same["score"] == 0.0 and same["largest"] == 0.25
    apart = pmse(real, real.assign(a="z").iloc[:50])  # a single split tells every row
    c = 50 / 150
    assert apart["score"] == pytest.approx(c * (1 - c)) and apart["largest"] == pytest.approx(c * (1 - c))
    with pytest.raises(ValueError, match="need rows"):
        pmse(real, real.iloc[:0])


def test_pmse_tells_a_shifted_table_from_a_sample_of_the_same_one():
    """Seeded: a second sample of the same distribution scores near 0; one whose pair of columns is
    independent where the real one's are not scores well above it."""
    rng = np.random.default_rng(0)
    n = 4000
    x = rng.integers(0, 4, n)
    real = pd.DataFrame({"x": x, "y": (x + (rng.random(n) < 0.1)) % 4})
    x2 = rng.integers(0, 4, n)
    again = pd.DataFrame({"x": x2, "y": (x2 + (rng.random(n) < 0.1)) % 4})
    apart = pd.DataFrame({"x": rng.integers(0, 4, n), "y": rng.integers(0, 4, n)})
    near, far = pmse(real, again)["score"], pmse(real, apart)["score"]
    assert near < 0.002
    assert far > 0.05 and far > 20 * near


def test_evaluate_prints_and_writes_them(tmp_path, schema_path, capsys):
    real, syn, out = tmp_path / "real.csv", tmp_path / "syn.csv", tmp_path / "eval.json"
    make_frame(300, 1).to_csv(real, index=False)
    make_frame(300, 2).to_csv(syn, index=False)
    args = ["evaluate", "--real", str(real), "--synthetic", str(syn), "--schema", str(schema_path), "--json", str(out)]
    assert main(args) == 0
    assert "pmse" not in json.loads(out.read_text())  # with the k-marginal only
    capsys.readouterr()
    assert main([*args, "--kmarginal", "--force"]) == 0
    report = json.loads(out.read_text())
    p, u = report["pmse"], report["unique_exact_matches"]
    assert 0 <= p["score"] <= p["largest"] == pytest.approx(0.25)
    assert u["unique_real"] > 0 and 0 <= u["matched"] <= u["unique_real"]
    printed = capsys.readouterr().out
    assert f"pMSE {p['score']:.4f}" in printed and f"{u['unique_real']:,} real rows unique" in printed
