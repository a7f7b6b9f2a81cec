"""One release's request, checked once: ``ReleaseRequest.of(method, epsilon, delta, schema, names,
**given)``.

Every check that needs no private data happens here, in one place, before any budget is reserved
or any silo read: the method and whether it runs over MPC, the budget (``accounting.limits``), the
number of silos, the row count, the seed, the privacy unit, the silo column against the silos'
names, a schema drafted from private rows, and the method's options against the public schema.
The command line, the Python API and the object API build the same request; a request that exists
is a checked one (it is immutable). A release option is one field of ``ReleaseRequest`` with
``option()`` metadata: ``of`` takes it by name, the command line's flag of the same ``dest``
reaches it, and everything else given is the method's options.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ..accounting import PrivacyUnit, check_budget_args, unit_of
from ..common import InputError, OptionError
from ..schema import Schema
from ..silo import check_silo_column

if TYPE_CHECKING:
    from ..methods import MethodOptions
    from ..mpc import ReleaseTerms


def option(default: Any = None) -> Any:
    """A release option: a field that ``ReleaseRequest.of`` takes by name (and the command line by
    its flag's ``dest``)."""
    return field(default=default, metadata={"option": True})


@dataclass(frozen=True)
class ReleaseRequest:
    """The public request of one release, checked (``of``)."""

    method: str
    epsilon: float
    delta: float
    schema: Schema = field(repr=False)
    #: The silos' names (None across hosts until the other parties join and say theirs).
    silo_names: tuple[str, ...] | None
    #: How many silos (or sites) take part.
    silos: int
    #: The method's checked options (an instance of its ``options_class``).
    options: MethodOptions = field(repr=False)
    #: Whether the release runs over MPC (``--mpc``).
    mpc: bool = option(False)
    rows: int | None = option()
    seed: int | None = option()
    privacy_unit: str | None = option()
    max_rows_per_unit: int | None = option()
    max_silos_per_unit: int | None = option()
    silo_column: str | None = option()
    allow_identical_silos: bool = option(False)

    @classmethod
    def of(
        cls,
        method: str,
        epsilon: float,
        delta: float,
        schema: Schema,
        silo_names: Sequence[str] | None,
        *,
        silos: int | None = None,
        **given: Any,
    ) -> ReleaseRequest:
        """The checked request of a release of ``method`` at ``(epsilon, delta)`` over ``schema`` and the
        silos ``silo_names`` (``silos`` counts them where the names are not known yet). ``given``: the
        release options (``OPTIONS``) and the method's options; ``InputError`` (``OptionError`` for a
        named argument's value) naming what is wrong."""
        from ..methods import METHODS

        if method not in METHODS:
            raise InputError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
        own = {k: v for k, v in given.items() if k in OPTIONS}
        names = None if silo_names is None else tuple(silo_names)
        count = len(names) if silos is None and names is not None else silos
        if count is None:
            raise ValueError("silos= is needed where the silos' names are not known")
        check_budget_args(epsilon, delta)
        spec = METHODS[method]
        if count < spec.min_silos:
            raise InputError(f"method {method} needs at least {spec.min_silos} silos, got {count}")
        mpc = bool(own.get("mpc", False))
        if mpc and not spec.mpc:
            raise OptionError(
                f"mpc runs method {' or '.join(n for n, s in METHODS.items() if s.mpc)}; "
                f"{method} over MPC is not available",
                "mpc",
                "method",
            )
        from ..methods.output import check_rows

        check_rows(own.get("rows"))
        _check_seed(own.get("seed"))
        unit = unit_of(own.get("privacy_unit"), own.get("max_rows_per_unit"), own.get("max_silos_per_unit"), mpc)
        _check_unit(unit, schema, count)
        check_silo_column(schema, own.get("silo_column"), names)
        if schema.private_draft:
            raise InputError(
                f'{schema.source}: this schema was drafted from private rows (its "_draft" note says so), and a '
                "release over it would publish bounds and categories read off those rows; replace them with public "
                'knowledge (or draft with `schema draft --dp`), then delete the "_draft" note (in Python: '
                "schema.reviewed())"
            )
        opts = method_options(method, {k: v for k, v in given.items() if k not in OPTIONS})
        opts.check_schema(schema)
        if mpc:
            opts.check_mpc()
        return cls(method, float(epsilon), float(delta), schema, names, count, opts, **own)

    def with_silo_names(self, names: Sequence[str]) -> ReleaseRequest:
        """The request once the silos' names are known (over MPC across hosts, when the parties have
        joined): the same request, its silo column checked against them."""
        check_silo_column(self.schema, self.silo_column, names)
        return dataclasses.replace(self, silo_names=tuple(names), silos=len(names))

    @property
    def unit(self) -> PrivacyUnit | None:
        """The privacy unit (column, K, M), or None: the guarantee is for one record."""
        return unit_of(self.privacy_unit, self.max_rows_per_unit, self.max_silos_per_unit, self.mpc)

    @property
    def target(self) -> str | None:
        """The method's target column (``--target``), if any."""
        return getattr(self.options, "target", None)

    def terms(self) -> ReleaseTerms:
        """What MPC parties and sites check against their own policies (``mpc.request``): method,
        budget, unit, target and the silo column with the silos' names (None across hosts: the
        parties say theirs)."""
        from ..mpc import ReleaseTerms

        site = None if self.silo_column is None else (self.silo_column, self.silo_names)
        return ReleaseTerms(self.method, self.epsilon, self.delta, self.unit, self.target, site)


#: The release options by name (the fields marked ``option()``).
OPTIONS = tuple(f.name for f in dataclasses.fields(ReleaseRequest) if f.metadata.get("option"))


def method_options(method: str, options: Mapping[str, Any]) -> MethodOptions:
    """The options of ``method`` (a known method) as its options class, checked without the schema:
    no unknown option, each of its type, each in its range; ``InputError`` (``OptionError``) otherwise."""
    from ..methods import METHODS, check_option_types

    cls = METHODS[method].options_class
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise InputError(
            f"option {unknown[0]!r} does not apply to method {method}; it takes: {', '.join(sorted(known))}"
        )
    check_option_types(cls, dict(options))
    opts = cls(**options)
    opts.validate()
    return opts


def _check_seed(seed: int | None) -> None:
    """``seed`` is ``None`` or a whole number from 0 to ``2^63 - 17``; ``OptionError`` otherwise."""
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**63 - 16
    ):
        raise OptionError(f"seed must be a whole number from 0 to 2^63 - 17, not {seed!r}", "seed")


def _check_unit(unit: PrivacyUnit | None, schema: Schema, n_silos: int) -> None:
    """A privacy unit's public checks: its column is not a schema column (an identifier is never a
    model attribute), and a unit is in no more silos than there are. (Over MPC each party bounds its
    own rows and costs its steps for the unit from the release's terms.)"""
    if unit is None:
        return
    if unit.column in schema.names:
        raise OptionError(
            f"privacy_unit '{unit.column}' is also a schema column; an identifier must never be released, so "
            "remove it from the schema",
            "privacy_unit",
        )
    if unit.max_silos > n_silos:
        raise OptionError(
            f"max_silos_per_unit {unit.max_silos} is more than the {n_silos} silo(s) of this release",
            "max_silos_per_unit",
        )
