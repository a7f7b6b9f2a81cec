"""The bounded reader of a saved model file (``privsyn_fed.saved_model``): a zip archive of ``.npy``
members, read without unpickling and without trusting any size the file states.

* The archive's listing is checked first: at most ``MAX_MEMBERS`` members, each a ``.npy`` member
  named once, ``meta.npy`` among them.
* ``meta`` (a JSON text) is read first, within ``MAX_META_BYTES``; it names the model's format and
  kind, from which the documented set of members follows (``documented_members``). A member outside
  that set is refused by name before anything of it is read, as is a member the set lacks.
* Each member's ``.npy`` header is read (at most ``HEADER_BYTES``) and its shape and dtype checked
  against the caps before anything is allocated: only plain numbers (booleans, integers, floats;
  text for ``meta``), whose sizes stay within ``MAX_ARRAY_BYTES`` over the whole file.
* A member's data is then read through a stream that stops one byte past the size its header
  implies: a member that decompresses to more (or whose listing states another size) is refused
  without decompressing the rest, and memory grows only with data actually read.
* Every failure of the archive or its compression (a bit flip, a truncated file, an unsupported
  compression) is one ``InputError`` naming the file.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..common import InputError, parse_json

#: The format of a saved model.
MODEL_FORMAT = "privsyn-fed-model/2"
#: Models written before the ledger was kept with them (likelihoods only: ``evaluate --model``).
LEGACY_FORMAT = "privsyn-fed-model/1"

#: The most members an archive may list: a Fed-TDA model has at most three per column (and one per
#: column for its label tables), so this bounds tables of more than ten thousand columns.
MAX_MEMBERS = 65_536
#: The largest ``meta`` member (text is stored as 4 bytes a character, so 16 Mi characters): a
#: schema of the widest columns the schema allows and a ledger of thousands of rounds take a few MiB
#: of JSON, and the objects parsed from 16 Mi characters stay within a few hundred MiB.
MAX_META_BYTES = 64 * 2**20
#: The most bytes all of a model's arrays may hold together: AIM's default model cap is 16 MB, and
#: a cap raised to 2 GiB needs a machine of 16 GiB; a header claiming more is refused unread.
MAX_ARRAY_BYTES = 2 * 2**30
#: The longest ``.npy`` header read (NumPy's own default limit for headers it trusts).
HEADER_BYTES = 10_000
#: Data is read this much at a time, so memory grows with the bytes a member really holds.
CHUNK_BYTES = 16 * 2**20

#: The kinds of dtype an array member may have: booleans, integers, floats.
ARRAY_KINDS = "biuf"


def read_model_archive(path: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``meta`` (a JSON object) and the arrays of the model file at ``path`` (module docstring);
    ``InputError`` naming the file for anything wrong with it."""
    try:
        with zipfile.ZipFile(path) as z:
            return _read(path, z)
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(f"{path}: model file not found") from None
    except MemoryError:
        raise InputError(f"{path}: not a readable privsyn-fed model file (too large for this memory)") from None
    except Exception as exc:  # zipfile, zlib, bz2, lzma and struct raise many kinds for a damaged file
        raise InputError(f"{path}: not a readable privsyn-fed model file ({_reason(exc)})") from None


def _read(path: str | Path, z: zipfile.ZipFile) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    infos = z.infolist()
    if len(infos) > MAX_MEMBERS:
        raise InputError(f"{path}: not a privsyn-fed model file ({len(infos):,} members, more than {MAX_MEMBERS:,})")
    members: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        name = info.filename
        if not name.endswith(".npy") or name[:-4] in members:
            raise InputError(f"{path}: not a privsyn-fed model file (member {name!r} is not one array stored once)")
        members[name[:-4]] = info
    if "meta" not in members:
        raise InputError(f"{path}: not a privsyn-fed model file (no meta member)")
    budget = [MAX_META_BYTES]
    text = _member(path, z, members["meta"], "meta", budget, lambda dt: dt.kind == "U")
    if text.shape != ():
        raise InputError(f"{path}: not a privsyn-fed model file (its meta member is not one text)")
    meta = parse_json(str(text[()]), path, "privsyn-fed model file's metadata")
    if not isinstance(meta, dict):
        raise InputError(f"{path}: not a privsyn-fed model file")
    expected = documented_members(path, meta)
    _check_names(path, set(members) - {"meta"}, expected)
    budget = [MAX_ARRAY_BYTES]
    arrays = {
        name: _member(path, z, members[name], name, budget, lambda dt: dt.kind in ARRAY_KINDS)
        for name in sorted(expected)
    }
    return meta, arrays


def _check_names(path: str | Path, present: set[str], expected: set[str]) -> None:
    extra, lacking = sorted(present - expected), sorted(expected - present)
    if extra:
        raise InputError(
            f"{path}: holds a member {extra[0]!r} outside a model's documented contents, refused"
            + (f" (and {len(extra) - 1:,} more)" if len(extra) > 1 else "")
        )
    if lacking:
        raise InputError(f"{path}: the model is damaged (it lacks its member {lacking[0]!r})")


def documented_members(path: str | Path, meta: dict[str, Any]) -> set[str]:
    """The array members (besides ``meta``) a model file of ``meta``'s format and kind holds; an
    unknown format is refused, and a malformed ``meta`` is a damaged model."""
    fmt = meta.get("format")
    if fmt not in (MODEL_FORMAT, LEGACY_FORMAT):
        raise InputError(f"{path}: not a privsyn-fed model file (format {_short(fmt)})")
    try:
        if fmt == LEGACY_FORMAT:
            return {f"f{i}" for i in range(_length(meta["cliques"]))}
        model, kind = meta["model"], meta["kind"]
        if kind == "junction-tree":
            return {f"factor{i}" for i in range(_length(model["cliques"]))}
        if kind != "copula":
            raise ValueError(f"a model of kind {_short(kind)}")
        columns = meta["schema"]["columns"]
        names = [str(c["name"]) for c in columns[: _length(columns)]]
        bins = model["encoding"]["bins"]
        if _length(bins) != len(names):
            raise ValueError("the encoding's bins do not follow the schema's columns")
        out = {"factor"}
        for j in range(len(names)):
            out |= {f"encoding:{j}:probs", f"encoding:{j}:order"}
            if bins[j] is not None:
                out.add(f"encoding:{j}:mass")
        if "label" in model:
            target = names.index(str(model["label"]["column"]))
            out |= {"label:prior"} | {f"label:{j}" for j in range(len(names)) if j != target}
        return out
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"{path}: the model is damaged ({_reason(exc)})") from None


def _length(value: Any) -> int:
    """The length of a list naming members (each entry names at least one), at most ``MAX_MEMBERS``."""
    if not isinstance(value, list):
        raise TypeError("a list was expected")
    if len(value) > MAX_MEMBERS:
        raise ValueError(f"a list of {len(value):,} entries names more members than a model file may hold")
    return len(value)


def _member(
    path: str | Path,
    z: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    name: str,
    budget: list[int],
    allowed: Callable[[np.dtype], bool],
) -> np.ndarray:
    """One member's array, its header checked against ``budget[0]`` (bytes left) before its data is
    read, and the data read through a stream that stops one byte past its implied size."""
    with z.open(info) as fh:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh, max_header_size=HEADER_BYTES)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh, max_header_size=HEADER_BYTES)
        else:
            raise InputError(f"{path}: member {name!r} is an array of an unknown .npy version {version}")
        if dtype.hasobject:
            raise InputError(f"{path}: holds an array that only unpickling could read, refused (member {name!r})")
        if not allowed(dtype) or dtype.fields is not None or dtype.subdtype is not None or dtype.itemsize == 0:
            raise InputError(f"{path}: member {name!r} holds {dtype}, not plain numbers, refused")
        if any(not isinstance(n, int) or n < 0 for n in shape) or len(shape) > 32:
            raise InputError(f"{path}: member {name!r} has an impossible shape")
        size = math.prod(shape) * dtype.itemsize
        if size > budget[0]:
            cap, what = (MAX_META_BYTES, "metadata") if name == "meta" else (MAX_ARRAY_BYTES, "arrays")
            raise InputError(
                f"{path}: member {name!r} claims {size:,} bytes, more than the {budget[0]:,} left of the "
                f"{cap:,} a model file's {what} may hold, refused"
            )
        budget[0] -= size
        if info.file_size != fh.tell() + size:
            raise InputError(
                f"{path}: member {name!r} is damaged (the archive states {info.file_size:,} bytes; its header implies "
                f"{fh.tell() + size:,})"
            )
        data = bytearray()
        while len(data) < size:
            chunk = fh.read(min(CHUNK_BYTES, size - len(data)))
            if not chunk:
                raise InputError(f"{path}: member {name!r} is truncated")
            data += chunk
        if fh.read(1):
            raise InputError(f"{path}: member {name!r} holds more than its header's {size:,} bytes, refused")
    array = np.frombuffer(data, dtype=dtype)
    return array.reshape(shape, order="F" if fortran else "C")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__
