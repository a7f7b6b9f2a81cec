"""Non-IID splits of one table into client silos, for experiments (not a private operation).

Schemes, all deterministic for a seed, every row in exactly one client, no client empty:
  * ``iid``: a random permutation cut into K nearly equal parts;
  * ``dirichlet``: label skew (Hsu et al. 2019): for each label value, client shares
    ``q ~ Dir(alpha 1_K)`` split that value's rows; small alpha means strong skew;
  * ``cluster``: feature skew (the FLAIM paper): k-means with K clusters on the standardised
    rows (numeric columns standardised, others one-hot), one client per cluster;
  * ``quantity``: client sizes ``~ Dir(alpha 1_K)``, rows assigned at random.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..common import InputError, write_atomic, write_folder, write_frame

SCHEMES = ("iid", "dirichlet", "cluster", "quantity")


@dataclass
class Partition:
    """``assignment[i]`` is the client of row ``i``."""

    assignment: np.ndarray
    clients: int

    def parts(self) -> list[np.ndarray]:
        """The row indices of each client, in client order."""
        return [np.flatnonzero(self.assignment == k) for k in range(self.clients)]


def partition(
    df: pd.DataFrame, clients: int, scheme: str, *, label: str | None = None, alpha: float = 0.5, seed: int = 0
) -> Partition:
    """Split the rows of ``df`` into ``clients`` clients by ``scheme`` (see the module docstring),
    deterministically for ``seed``: ``label`` is the column ``dirichlet`` skews, ``alpha`` the
    concentration of ``dirichlet`` and ``quantity``; a client left empty gets one row of the largest.
    Refuses bad arguments with ``InputError``."""
    if scheme not in SCHEMES:
        raise InputError(f"unknown scheme {scheme!r}; choose from {', '.join(SCHEMES)}")
    n = len(df)
    if clients < 1:
        raise InputError(f"--clients must be at least 1, not {clients}")
    if clients > n:
        raise InputError(f"cannot split {n} rows into {clients} non-empty clients")
    if scheme in ("dirichlet", "quantity") and not alpha > 0:
        raise InputError(f"--alpha must be positive, not {alpha}")
    if scheme == "dirichlet":
        if label is None:
            raise InputError("scheme dirichlet needs --label COLUMN (the column whose distribution is skewed)")
        if label not in df.columns:
            raise InputError(f"label column '{label}' is not in the data")
    rng = np.random.default_rng(seed)
    if scheme == "iid":
        assignment = np.empty(n, dtype=np.int64)
        assignment[rng.permutation(n)] = np.arange(n) % clients
    elif scheme == "quantity":
        shares = rng.dirichlet(np.full(clients, alpha))
        assignment = rng.choice(clients, size=n, p=shares)
    elif scheme == "dirichlet":
        assignment = np.empty(n, dtype=np.int64)
        values = df[label].astype(str).to_numpy()
        for v in sorted(set(values)):
            rows = rng.permutation(np.flatnonzero(values == v))
            shares = rng.dirichlet(np.full(clients, alpha))
            cuts = (np.cumsum(shares)[:-1] * len(rows)).astype(np.int64)
            for k, part in enumerate(np.split(rows, cuts)):
                assignment[part] = k
    else:
        assignment = _kmeans(df, clients, seed)
    return Partition(_fill_empty(assignment, clients, rng), clients)


def _kmeans(df: pd.DataFrame, clients: int, seed: int) -> np.ndarray:
    from sklearn.cluster import KMeans

    features = []
    for col in df.columns:
        numeric = pd.to_numeric(df[col], errors="coerce")
        if numeric.notna().mean() > 0.95:
            x = numeric.fillna(numeric.median()).to_numpy(dtype=float)
            sd = x.std()
            features.append(((x - x.mean()) / (sd if sd > 0 else 1.0))[:, None])
        else:
            features.append(pd.get_dummies(df[col].astype(str)).to_numpy(dtype=float))
    x = np.hstack(features)
    return KMeans(n_clusters=clients, n_init=3, random_state=seed).fit_predict(x).astype(np.int64)


def _fill_empty(assignment: np.ndarray, clients: int, rng: np.random.Generator) -> np.ndarray:
    """Give each empty client one row taken from the currently largest client."""
    assignment = assignment.copy()
    counts = np.bincount(assignment, minlength=clients)
    for k in np.flatnonzero(counts == 0):
        donor = int(np.argmax(counts))
        row = rng.choice(np.flatnonzero(assignment == donor))
        assignment[row] = k
        counts[donor] -= 1
        counts[k] += 1
    return assignment


#: The files a partition writes; ``--force`` replaces a folder that holds only these.
_OWN_FILE = re.compile(r"client_\d+\.csv|manifest\.json")


def check_partition_folder(out: Path, data: Path, force: bool) -> None:
    """``out`` may be new, an empty folder, or (with ``force``) a folder holding only an earlier
    partition's files; the data file must not be one of them."""
    from ..common import check_name_fits, same_file

    check_name_fits(out, "split")
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder")
    parent = out.resolve().parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{out}: the folder {str(parent)!r} is not writable")
    if same_file(out, data) or data.resolve().is_relative_to(out.resolve()):
        raise InputError(f"{data}: the table to split lies inside --out {out}, which partition replaces")
    if not out.is_dir():
        return
    entries = list(out.iterdir())
    if entries and not force:
        raise InputError(f"{out}: folder is not empty; choose another or pass --force to replace its split")
    foreign = sorted(e.name for e in entries if not (_OWN_FILE.fullmatch(e.name) and e.is_file()))
    if foreign:
        raise InputError(
            f"{out}: holds {foreign[0]!r}, which partition did not write; --force replaces only "
            "a folder of client_*.csv files and manifest.json, so choose another folder"
        )
    if any(same_file(e, data) for e in entries):
        raise InputError(f"{data}: is the same file as one in --out {out}, which partition replaces")


def write_partition(
    df: pd.DataFrame,
    part: Partition,
    out: Path,
    *,
    source: str,
    scheme: str,
    label: str | None,
    alpha: float | None,
    seed: int,
) -> dict[str, Any]:
    """One CSV per client (``client_000.csv`` ...) and ``manifest.json``, written to a new folder
    beside ``out`` that then replaces ``out`` as a whole (no client file of an earlier split
    survives)."""
    return write_folder(out, lambda folder: _write_clients(df, part, folder, source, scheme, label, alpha, seed))


def _write_clients(
    df: pd.DataFrame,
    part: Partition,
    out: Path,
    source: str,
    scheme: str,
    label: str | None,
    alpha: float | None,
    seed: int,
) -> dict[str, Any]:
    """``write_partition``'s files, written into the new folder ``out``."""
    width = max(3, len(str(part.clients - 1)))
    entries = []
    for k, rows in enumerate(part.parts()):
        name = f"client_{k:0{width}d}.csv"
        chunk = df.iloc[rows]
        write_atomic(out / name, lambda fh, c=chunk: write_frame(c, fh, header=True))
        entry: dict[str, Any] = {"file": name, "rows": int(len(rows))}
        if label is not None:
            entry["label_histogram"] = {
                str(v): int(c) for v, c in chunk[label].astype(str).value_counts().sort_index().items()
            }
        entries.append(entry)
    manifest = {
        "source": source,
        "scheme": scheme,
        "clients": part.clients,
        "seed": seed,
        "alpha": alpha if scheme in ("dirichlet", "quantity") else None,
        "label": label,
        "rows": int(len(df)),
        "files": entries,
    }

    def dump(fh):
        json.dump(manifest, fh, indent=2)
        fh.write("\n")

    write_atomic(out / "manifest.json", dump)
    return manifest
