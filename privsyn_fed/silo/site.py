"""The silo as a column (``synth --silo-column NAME``, ``silo_column=`` in Python).

Each silo's name (``--silo NAME=PATH``, else its file's name without its table extensions) becomes
a public attribute of its rows: the schema's categorical column ``NAME``, whose categories are the
silos' names. A silo file need not hold the column; where it does, every row must hold the silo's
own name. Every party knows its own value, so a marginal with the column is counted within each
silo: silo ``s`` contributes only to the cells where the column is ``s``, and the sum over silos is
the union's marginal. One record still moves one cell by one, so no sensitivity changes. The
release keeps each site's one-way marginal (its share of the rows) and the marginals it measures
together with the column, not every distribution within a site (the rest is the model's fit).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..common import InputError, OptionError, is_engine_url, parse_engine_url
from ..schema import CategoricalColumn, Schema

#: Table file extensions left out of a silo's default name (``north.csv.gz`` is ``north``).
TABLE_EXTENSIONS = (".gz", ".csv", ".tsv", ".txt", ".parquet", ".pq")


def split_silo_arg(arg: str) -> tuple[str | None, str]:
    """``(name, path)`` of a ``--silo`` value: ``NAME=PATH`` names the silo, a plain path does not
    (``name`` None). A value that is an existing file, or whose part before ``=`` holds a path
    separator, is a path as it stands."""
    name, sep, path = arg.partition("=")
    if not sep or Path(arg).exists() or "/" in name or "\\" in name:
        return None, arg
    if not name.strip() or not path:
        raise InputError(f"--silo {arg}: NAME=PATH needs a name and a path")
    return name, path


def default_silo_name(path: str | Path) -> str:
    """A silo file's name without its table extensions: ``data/north.csv.gz`` is ``north``; an
    engine's table's, its table's name (``EngineTable.name``)."""
    if is_engine_url(path):
        return parse_engine_url(str(path)).name
    name = Path(path).name
    while True:
        stem, dot, ext = name.rpartition(".")
        if not dot or not stem or f".{ext.lower()}" not in TABLE_EXTENSIONS:
            return name
        name = stem


def silo_names(args: Sequence[str]) -> list[tuple[str, str]]:
    """``(name, path)`` of each ``--silo`` value (``split_silo_arg``, ``default_silo_name``)."""
    out = []
    for arg in args:
        name, path = split_silo_arg(arg)
        out.append((name if name is not None else default_silo_name(path), path))
    return out


def check_silo_column(schema: Schema, column: str | None, names: Sequence[str] | None) -> None:
    """A silo column is a categorical column of ``schema`` whose categories are exactly the silos'
    ``names``, each silo named once; ``OptionError`` naming what is wrong. (Public facts: checked
    before any budget is reserved or any silo read.) ``names`` None (not known yet: the other
    organisations' parties tell them once they have joined): the column alone is checked."""
    if column is None:
        return
    if column not in schema.names:
        raise OptionError(f"silo_column {column!r} is not a column of the schema", "silo_column")
    col = schema.column(column)
    if not isinstance(col, CategoricalColumn):
        raise OptionError(
            f"silo_column {column!r} is numeric in the schema; declare it categorical, its categories the silos' names",
            "silo_column",
        )
    if col.missing or col.unknown is not None:
        raise OptionError(
            f"silo_column {column!r} allows missing or unknown values in the schema; every row holds its silo's "
            "name, so remove them",
            "silo_column",
        )
    if names is None:
        return
    twice = sorted({n for n in names if list(names).count(n) > 1})
    if twice:
        raise OptionError(
            f"silo_column {column!r}: two silos are named {twice[0]!r}; name each silo once (--silo NAME=PATH)",
            "silo_column",
        )
    unknown = [n for n in names if n not in col.categories]
    if unknown:
        raise OptionError(
            f"silo_column {column!r}: silo {unknown[0]!r} is not one of the column's categories "
            f"({', '.join(col.categories)}); name the silo after its category with --silo NAME=PATH",
            "silo_column",
        )
    spare = [c for c in col.categories if c not in names]
    if spare:
        raise OptionError(
            f"silo_column {column!r}: category {spare[0]!r} names no silo; the column's categories must be the "
            "silos' names",
            "silo_column",
        )


def site_record(column: str, names: Sequence[str]) -> dict:
    """How the ledger records the silo column: its name and the silos' names, in silo order."""
    return {"column": column, "silos": list(names)}
