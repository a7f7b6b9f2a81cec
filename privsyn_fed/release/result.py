"""What a release returns: ``SynthResult`` (the synthetic rows, the ledger, the model and run
details), and the refusal to replace an existing file without being told to."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import pandas as pd

from ..accounting import Accountant
from ..common import InputError, write_atomic

if TYPE_CHECKING:
    from ..methods.output import SyntheticRows


@dataclass
class SynthResult:
    """A synthetic table, the ledger of the release that produced it, and run details."""

    output: SyntheticRows
    ledger: dict[str, Any]
    method: str
    info: dict[str, Any]
    accountant: Accountant | None = field(default=None, repr=False)
    #: The release's model (``model.ReleasedModel``): more rows, rows given public conditions,
    #: ``save`` for later; its ``ledger`` is this release's.
    model: Any = field(default=None, repr=False)
    _data: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def rows(self) -> int:
        """The number of synthetic rows."""
        return self.output.count

    @property
    def data(self) -> pd.DataFrame:
        """The whole table (drawn on first use when it was too large to draw during the run)."""
        if self._data is None:
            self._data = self.output.frame()
        return self._data

    def chunks(self) -> Iterator[pd.DataFrame]:
        """The table in frames: the whole of it when already drawn, else chunk by chunk
        (``SyntheticRows.chunks``)."""
        if self._data is not None:
            yield self._data
        else:
            yield from self.output.chunks()

    def write_csv(self, fh) -> None:
        """Write the table as CSV to the open text file ``fh``, chunk by chunk: one header, missing
        values as empty cells."""
        from ..methods.output import write_csv

        write_csv(self.chunks(), fh)

    def to_csv(self, path: str | Path, overwrite: bool = False) -> None:
        """Write the table as CSV to ``path``, atomically (``fileio.write_atomic``); an existing file
        is replaced only when ``overwrite``."""
        refuse_existing(path, overwrite)
        write_atomic(Path(path), self.write_csv)


def refuse_existing(path: str | Path, overwrite: bool, what: str = "") -> None:
    """``InputError`` for a ``path`` that exists (a dangling link included) unless ``overwrite``."""
    p = Path(path)
    if not overwrite and (p.exists() or p.is_symlink()):
        raise InputError(f"{p}: already exists{what}; pass overwrite=True to replace it")
