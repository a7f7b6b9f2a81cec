"""Hostile model files: every damaged, oversized, padded or tampered model given to `sample` or
`evaluate --model` is refused in one line naming the file (exit 2), or samples rows inside its own
schema, within seconds and without allocating more than the reader's caps.

The walks flip bits and truncate the file at positions spread over the whole file (zip headers,
compressed members, the central directory), as ``test_special_files`` walks input positions.
"""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
import time
import zipfile
from typing import Any, cast

import numpy as np
import pandas as pd
import pytest

import privsyn_fed as pf
from privsyn_fed.saved_model import _digest

from .conftest import SCHEMA, assert_one_line_error, make_frame, run_cli

#: A process given this much address space can sample a small model, and cannot allocate any of
#: the sizes a hostile header claims.
ADDRESS_SPACE = 1536 * 2**20


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Unseeded (loadable) small AIM and Fed-TDA models of the test schema, as file contents."""
    folder = tmp_path_factory.mktemp("models")
    schema = pf.Schema.from_dict(SCHEMA)
    frames = [make_frame(400, 0), make_frame(300, 1)]
    out = {}
    for method, options in (("aim", {"rounds": 6}), ("fedtda", {})):
        path = folder / f"{method}.model"
        pf.Synthesizer(method, epsilon=1.0, delta=1e-9, **options).fit(frames, schema=schema).save(path)
        out[method] = path.read_bytes()
    return out


def _parts(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return json.loads(str(z["meta"])), {k: z[k] for k in z.files if k != "meta"}


def _rewritten(data: bytes, change, redigest: bool = True) -> bytes:
    """The model ``data`` with its meta and arrays passed through ``change``; with ``redigest`` its
    ledger records the changed model's digest (a consistent forgery), else the old one (stale)."""
    meta, arrays = _parts(data)
    change(meta, arrays)
    if redigest:
        meta["ledger"]["details"]["model_sha256"] = _digest({k: v for k, v in meta.items() if k != "ledger"}, arrays)
    buf = io.BytesIO()
    contents: dict[str, Any] = {"meta": np.array(json.dumps(meta)), **arrays}
    np.savez_compressed(buf, **contents)
    return buf.getvalue()


def _assert_inside_schema(frame: pd.DataFrame) -> None:
    """Every row is a row of the test schema: values within bounds, whole where integer, categories
    listed, missing only where allowed."""
    columns: list[dict[str, Any]] = cast(list, SCHEMA["columns"])
    assert list(frame.columns) == [c["name"] for c in columns]
    for col in columns:
        values = frame[col["name"]]
        present = values.dropna()
        if not col.get("missing"):
            assert len(present) == len(values), col["name"]
        if col["type"] == "numeric":
            x = present.astype(float)
            assert x.between(col["lower"], col["upper"]).all(), (col["name"], list(x))
            if col.get("integer"):
                assert (x == np.floor(x)).all(), col["name"]
        else:
            assert set(present.astype(str)) <= set(col["categories"]), (col["name"], set(present))


def _sample(path, out, capsys):
    out.unlink(missing_ok=True)
    return run_cli("sample", path, "--rows", "5", "--out", out, "--seed", "1", capsys=capsys)


def _refused_or_inside(proc, path, out) -> bool:
    """True when refused in one line naming ``path`` (exit 2); else rows inside the schema (exit 0)."""
    assert proc.returncode in (0, 2), proc.stderr
    if proc.returncode == 2:
        assert_one_line_error(proc, str(path))
        return True
    _assert_inside_schema(pd.read_csv(out, keep_default_na=False, na_values=[""]))
    return False


@pytest.mark.parametrize("method", ["aim", "fedtda"])
def test_every_bit_flip_and_truncation_is_refused_or_samples_inside_the_schema(method, models, tmp_path, capsys):
    good = models[method]
    path, out = tmp_path / "m.model", tmp_path / "o.csv"
    bits = len(good) * 8
    step = max(1, bits // 240) | 1  # odd: every bit position within a byte is reached
    refused = 0
    for bit in range(3, bits, step):
        damaged = bytearray(good)
        damaged[bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(damaged))
        refused += _refused_or_inside(_sample(path, out, capsys), path, out)
    assert refused > bits // step // 2  # most flips damage the file; those that do not change nothing read
    for length in range(0, len(good), max(1, len(good) // 60)):
        path.write_bytes(good[:length])
        proc = _sample(path, out, capsys)
        assert_one_line_error(proc, str(path))


def _with_member(data: bytes, name: str, write) -> bytes:
    """``data`` with member ``name`` replaced (or added) by what ``write(fh)`` writes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            if info.filename != name:
                z.writestr(info, src.read(info))
        with z.open(name, "w", force_zip64=True) as fh:
            write(fh)
    return buf.getvalue()


def _huge_header(fh) -> None:
    np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
    fh.write(bytes(64))


#: ``privsyn-fed`` in a process that cannot map more than ``ADDRESS_SPACE`` bytes: the limit is set
#: by the child itself before the package loads (no ``preexec_fn``, which forks a threaded parent).
LIMITED_CLI = [
    sys.executable,
    "-c",
    "import resource, runpy; "
    f"resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE}, {ADDRESS_SPACE})); "
    "runpy.run_module('privsyn_fed', run_name='__main__', alter_sys=True)",
]


@pytest.mark.parametrize(
    "method, forge, message",
    [
        ("aim", lambda d: _with_member(d, "factor0.npy", _huge_header), "claims 8,000,000,000,000 bytes"),
        (
            "fedtda",
            lambda d: _rewritten(d, lambda m, a: m["model"]["encoding"]["bins"].__setitem__(0, 10**9), redigest=False),
            "bins",
        ),
    ],
    ids=["npy-header-1e12", "fedtda-bins-1e9"],
)
def test_huge_sizes_in_a_header_are_refused_quickly_in_bounded_memory(method, forge, message, models, tmp_path):
    """In a process that cannot map more than 1.5 GiB, the claimed sizes are refused before anything
    of that size is allocated (no MemoryError, no kill)."""
    path = tmp_path / "huge.model"
    path.write_bytes(forge(models[method]))
    start = time.monotonic()
    proc = subprocess.run(
        [*LIMITED_CLI, "sample", str(path), "--rows", "5", "--out", str(tmp_path / "o.csv")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert_one_line_error(proc, str(path), message)
    assert time.monotonic() - start < 120


def test_a_member_outside_the_documented_set_is_refused_unread(models, tmp_path, capsys):
    path, out = tmp_path / "m.model", tmp_path / "o.csv"
    path.write_bytes(_with_member(models["aim"], "payload.npy", lambda fh: np.lib.format.write_array(fh, np.zeros(9))))
    assert_one_line_error(_sample(path, out, capsys), str(path), "'payload' outside a model's documented contents")

    def zeros(fh) -> None:  # 2 GiB of zeros, 2 MB compressed
        np.lib.format.write_array_header_1_0(fh, {"descr": "|u1", "fortran_order": False, "shape": (2**31,)})
        chunk = bytes(2**24)
        for _ in range(2**31 // len(chunk)):
            fh.write(chunk)

    buf = io.BytesIO(models["fedtda"])
    with (
        zipfile.ZipFile(buf, "a", zipfile.ZIP_DEFLATED, compresslevel=1) as z,
        z.open("zeros.npy", "w", force_zip64=True) as fh,
    ):
        zeros(fh)
    path.write_bytes(buf.getvalue())
    start = time.monotonic()
    proc = subprocess.run(
        [*LIMITED_CLI, "sample", str(path), "--rows", "5", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert_one_line_error(proc, str(path), "'zeros' outside a model's documented contents")
    assert time.monotonic() - start < 60


def _set(key_path, value):
    def change(meta, arrays):
        target = meta
        for key in key_path[:-1]:
            target = target[key]
        target[key_path[-1]] = value(target[key_path[-1]]) if callable(value) else value

    return change


def _array(name, index, value):
    def change(meta, arrays):
        arrays[name] = arrays[name].copy()
        arrays[name][index] = value

    return change


def _nan_edges(meta, arrays):
    bins = meta["model"]["encoding"]["bins"][1]  # income: a float column
    meta["model"]["encoding"]["edges"][1] = [math.nan] * (bins - 1)


def _repeated_axis(meta, arrays):
    cliques = meta["model"]["cliques"]
    i = next(i for i, c in enumerate(cliques) if len(c) > 1)
    cliques[i] = [cliques[i][0]] * len(cliques[i])


FORGERIES = {
    "fedtda-nan-edges": ("fedtda", _nan_edges),
    "fedtda-1e300-factor": ("fedtda", _array("factor", (4, 0), 1e300)),
    "fedtda-negative-mass": ("fedtda", _array("encoding:1:mass", (0, 0), -1.0)),
    "fedtda-nan-probs": ("fedtda", _array("encoding:2:probs", 0, math.nan)),
    "fedtda-order-out-of-range": ("fedtda", _array("encoding:2:order", 0, 7)),
    "fedtda-bins-1e9": ("fedtda", _set(["model", "encoding", "bins", 0], 10**9)),
    "fedtda-short-lam": ("fedtda", _set(["model", "encoding", "lam"], lambda v: v[:2])),
    "fedtda-zero-bins": ("fedtda", _set(["model", "encoding", "bins", 1], 0)),
    "fedtda-lam-one": ("fedtda", _set(["model", "encoding", "lam", 2], 1.0)),
    "fedtda-infinite-total": ("fedtda", _set(["total"], math.inf)),
    "aim-1e300-factor": ("aim", _array("factor0", 0, 1e300)),
    "aim-nan-factor": ("aim", _array("factor0", 0, math.nan)),
    "aim-repeated-axis": ("aim", _repeated_axis),
    "aim-parent-out-of-range": ("aim", _set(["model", "parents", 0], 10**6)),
}


@pytest.mark.parametrize("redigest", [True, False], ids=["consistent-digest", "stale-digest"])
@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_model_with_parameters_out_of_range_is_refused_in_one_line(forgery, redigest, models, tmp_path, capsys):
    """Consistently re-digested (the ledger records the forged model's digest) or not, a model whose
    parameters are out of range, malformed or would draw rows outside its schema is refused."""
    method, change = FORGERIES[forgery]
    path, out = tmp_path / "m.model", tmp_path / "o.csv"
    path.write_bytes(_rewritten(models[method], lambda m, a: None, redigest))  # the control: rewritten, unchanged
    assert _sample(path, out, capsys).returncode == 0
    _assert_inside_schema(pd.read_csv(out, keep_default_na=False, na_values=[""]))
    path.write_bytes(_rewritten(models[method], change, redigest))
    assert_one_line_error(_sample(path, out, capsys), str(path))
    assert not out.exists()


def _legacy(factor0) -> bytes:
    """A model in the older format (independent cliques, no ledger) whose first factor is ``factor0``."""
    schema = pf.Schema.from_dict(SCHEMA)
    arrays = {f"f{i}": np.full(n, 1.0 / n) for i, n in enumerate(schema.shape)}
    arrays["f0"] = np.asarray(factor0, dtype=float)
    meta = {"format": "privsyn-fed-model/1", "cliques": [[n] for n in schema.names], "total": 700.0}
    buf = io.BytesIO()
    contents: dict[str, Any] = {"meta": np.array(json.dumps(meta)), **arrays}
    np.savez_compressed(buf, **contents)
    return buf.getvalue()


@pytest.mark.parametrize("bad", ["negative", "nan", "huge", None])
def test_evaluate_refuses_an_older_model_with_bad_factors(bad, schema_path, tmp_path, capsys):
    n = pf.Schema.from_dict(SCHEMA).shape[0]
    factor = np.full(n, 1.0 / n)
    if bad is not None:
        factor[1] = {"negative": -0.5, "nan": math.nan, "huge": 1e300}[bad]
    model, real, hold = tmp_path / "old.model", tmp_path / "real.csv", tmp_path / "hold.csv"
    model.write_bytes(_legacy(factor))
    make_frame(300, 0).to_csv(real, index=False)
    make_frame(100, 5).to_csv(hold, index=False)
    argv = ["evaluate", "--real", real, "--synthetic", real, "--schema", schema_path, "--holdout", hold]
    proc = run_cli(*argv, "--model", model, "--json", tmp_path / "e.json", capsys=capsys)
    if bad is None:
        assert proc.returncode == 0, proc.stderr
        nll = json.loads((tmp_path / "e.json").read_text())["nll"]
        assert 0 < nll["mean"] < 40
    else:
        assert_one_line_error(proc, str(model), "damaged")


def test_a_reader_never_trusts_the_archive_listing(models, tmp_path, capsys):
    """A member whose listing states a size other than its header implies is refused, as is a
    member stored twice, or one of another dtype (complex, text)."""
    path, out = tmp_path / "m.model", tmp_path / "o.csv"
    cases = {
        "complex": _with_member(
            models["aim"], "factor0.npy", lambda fh: np.lib.format.write_array(fh, np.zeros(3, complex))
        ),
        "text": _with_member(models["aim"], "factor0.npy", lambda fh: np.lib.format.write_array(fh, np.array(["a"]))),
        "longer": _with_member(
            models["aim"], "factor0.npy", lambda fh: (np.lib.format.write_array(fh, np.zeros(3)), fh.write(bytes(99)))
        ),
    }
    for name, data in cases.items():
        path.write_bytes(data)
        assert_one_line_error(_sample(path, out, capsys), str(path), "factor0")


@pytest.mark.parametrize("field", ["nested", "long-number"])
def test_metadata_nested_deeply_or_with_a_huge_number_is_refused(field, models, tmp_path, capsys):
    """The metadata is read with the JSON limits of every other input: no RecursionError, no
    quadratic integer parsing."""
    text = json.dumps(_parts(models["aim"])[0])
    value = "[" * 100_000 + "]" * 100_000 if field == "nested" else "9" * 5000
    forged = text[:-1] + f', "extra": {value}}}'
    path, out = tmp_path / "m.model", tmp_path / "o.csv"
    path.write_bytes(
        _with_member(models["aim"], "meta.npy", lambda fh: np.lib.format.write_array(fh, np.array(forged)))
    )
    assert_one_line_error(_sample(path, out, capsys), str(path))
