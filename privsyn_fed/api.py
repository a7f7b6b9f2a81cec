"""The Python API: ``synthesize(silos, method=..., epsilon=..., delta=...)``.

A front door: it names the silos, loads the schema, checks the request once
(``release.ReleaseRequest.of``) and runs it (``release.run_release``: read, run, stage, settle,
publish). The methods (``methods.METHODS``) are imported when a release is checked, so that
importing the package, as an MPC party's process does, loads no method code.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .common import InputError, OptionError, Progress, ProgressCallback
from .release import ReleaseRequest, SynthResult, run_release
from .schema import Schema
from .silo import Silo, SiloLike, default_silo_name

if TYPE_CHECKING:
    from .mpc import MPCAggregator

__all__ = ["SynthResult", "synthesize", "synthesize_over"]


def synthesize(
    silos: Sequence[SiloLike] | Mapping[str, SiloLike],
    method: str = "aim",
    epsilon: float = 1.0,
    delta: float = 1e-9,
    *,
    schema: Schema | str | Path | None = None,
    ledger_path: str | Path | None = None,
    overwrite: bool = False,
    progress: bool | Progress | ProgressCallback = False,
    **given: Any,
) -> SynthResult:
    """Release one synthetic table of the silos' union under (epsilon, delta)-DP.

    Each silo is a ``Silo``, a pandas data frame or the path of a table (CSV, gzip CSV or Parquet);
    frames and paths need ``schema`` (a ``Schema`` or a schema file's path) and are read with every
    check a ``--silo`` file gets, after the request itself has been checked. ``silos`` may be a
    dict from each silo's name to the silo.

    ``ledger_path`` makes the ledger durable: it is written before each noisy value is released;
    an existing file there is refused unless ``overwrite``. ``progress``: True shows a progress
    display on stderr; a callable is called as ``progress(fraction, message)`` at each step
    (``fraction``: the share of the budget spent). Either way each step and note is logged (logger
    ``privsyn_fed.progress``); nothing is printed to stdout.

    ``given``: the release options (``release.OPTIONS``), then the method's options (keyword
    arguments of ``methods.METHODS[method].options_class``):

    * ``rows``: rows to draw (default: the model's noisy total, capped);
    * ``seed``: noise from a seeded generator, so the run is reproducible; such a release is marked
      ``seeded`` in its ledger and carries no real guarantee (tests and demos only);
    * ``allow_identical_silos``: two silos holding the same rows (in any order) are refused unless True;
    * ``silo_column``: a categorical column of the schema whose categories are the silos' names (the
      dict's keys, else each path's file name without its extensions): each silo's rows take its
      name there (``silo.site``), so the release keeps each silo's share of the rows and the
      marginals it measures together with the column (not every distribution within a silo). The
      silos' tables need not hold the column; where one does, every row must hold its name;
    * ``privacy_unit``: a column that identifies a person or an account (not a schema column): each
      silo then keeps at most ``max_rows_per_unit`` (K, default 1) rows per unit, chosen by a keyed
      hash of the unit and the row's position (a key drawn for this release and never stored); a
      unit found in more than ``max_silos_per_unit`` (M, default 1) silos keeps its rows in M of
      them, chosen by a keyed hash of the unit and the silo (``read_silos``), and the guarantee is
      for adding or removing one unit: every sensitivity is ``K M`` times one row's
      (``accounting.unit``). The identifier is never released. Silos given as ``Silo`` must have
      been read with the same unit and K, and only where no other silo can share their units.

    Over MPC parties, ``synthesize_over``.
    """
    if not silos:
        raise InputError("no silos given")
    if given.get("mpc"):
        raise OptionError(
            "mpc needs the parties: start them with mpc.coordinator and release with synthesize_over",
            "mpc",
        )
    names, listed = _named(silos, given.get("silo_column"))
    request = ReleaseRequest.of(method, epsilon, delta, _schema_of(listed, schema), names, **given)
    return run_release(request, listed, ledger_path=ledger_path, overwrite=overwrite, progress=progress)


def synthesize_over(
    aggregator: MPCAggregator,
    method: str = "distaim",
    epsilon: float = 1.0,
    delta: float = 1e-9,
    *,
    ledger_path: str | Path | None = None,
    overwrite: bool = False,
    progress: bool | Progress | ProgressCallback = False,
    **given: Any,
) -> SynthResult:
    """``synthesize`` over MPC parties: ``aggregator`` is party 0's (``mpc.coordinator``, or
    ``mpc.launch_servers.servers_coordinator`` for sites and compute servers), whose schema and
    silo names the release takes; party 0's own silo is read by it (none on a compute server).
    ``given`` as for ``synthesize``."""
    request = ReleaseRequest.of(method, epsilon, delta, aggregator.schema, aggregator.silo_names, mpc=True, **given)
    return run_release(
        request,
        [] if aggregator.own is None else [aggregator.own],
        aggregator=aggregator,
        ledger_path=ledger_path,
        overwrite=overwrite,
        progress=progress,
    )


def _schema_of(silos: Sequence[SiloLike], schema: Schema | str | Path | None) -> Schema:
    """The release's schema: ``schema`` (loaded when a path), else the first silo's."""
    if isinstance(schema, (str, Path)):
        return Schema.load(schema)
    if schema is not None:
        return schema
    first = silos[0]
    if isinstance(first, Silo) and all(isinstance(s, Silo) for s in silos):
        return first.schema
    raise InputError("silos given as data frames or paths need schema= (a Schema or a schema file's path)")


def _named(silos: Sequence[SiloLike] | Mapping[str, SiloLike], silo_column: str | None) -> tuple[list[str], list]:
    """``(names, silos)``: a dict's keys and values, else each silo's name (a ``Silo``'s site
    name, a path's file name without its extensions, ``frame i`` for the i-th frame); with a
    ``silo_column``, frames must be named by a dict."""
    if isinstance(silos, Mapping):
        for name in silos:
            if not isinstance(name, str) or not name:
                raise InputError(f"silos: a silo's name must be a non-empty text, not {name!r}")
        return list(silos), list(silos.values())
    names = []
    for i, s in enumerate(silos):
        if isinstance(s, Silo):
            names.append(s.site[1] if s.site is not None else s.name)
        elif isinstance(s, (str, Path)):
            names.append(default_silo_name(s))
        elif silo_column is not None:
            raise OptionError(
                "silo_column needs each silo's name: pass silos as a dict {name: frame}", "silo_column", "silos"
            )
        else:
            names.append(f"frame {i + 1}")
    return names, list(silos)
