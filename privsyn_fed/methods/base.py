"""What a method is to its callers: options that describe themselves, the run a method is handed,
and the ``Method`` protocol of the registry (``methods.METHODS``).

* A method's options are a dataclass whose fields are made by ``option``: each field's metadata
  holds its help text (which states the default, taken from the field itself) and, for the
  options the command line offers, its flag and how the flag's value is read. Their checks
  (``validate``, ``check_schema``, ``check_mpc``) raise ``OptionError`` naming the option by its
  Python name (``alpha must lie in (0, 1)``); the command line names it by its flag.
* ``MethodRun``: one run of a method: the silos, the aggregator that is a federated method's only
  way to them, the accountant every release is charged to, the noise, the validated options, the
  seed of the method's public randomness, and progress.
* ``Method``: a registry entry: the facts ``api`` and ``cli`` read, the threat model a ledger
  states, the sensitivity of the selection score (checked against the audit's own table), and
  ``run(run) -> MethodResult``.
"""

from __future__ import annotations

import collections.abc
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol, Sequence

import numpy as np

from ..accounting import Accountant
from ..aggregation import Aggregator
from ..common import OptionError, Progress
from ..noise import NoiseSource
from ..schema import Schema
from ..silo import Silo
from .core import MethodResult


def option(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    aliases: Sequence[str] = (),
    metavar: str | None = None,
    group: str | None = None,
    positive: bool = False,
    choices: Sequence[str] | None = None,
    from_flag: Callable[[Any], Any] | None = None,
) -> Any:
    """A field of an options dataclass, with ``default`` and its description as metadata.

    ``help`` says what the option does; ``{default}`` in it becomes ``default`` as written
    (``shown``), so the text cannot disagree with the field. Options the command line offers have
    a ``flag`` (and other names for it, ``aliases``) with its ``metavar`` and the ``group`` of
    options the help lists it under; the flag's
    value is read by the field's type (a number, a whole number, a switch for a ``bool``, text),
    as a whole number of at least 1 when ``positive``, among ``choices`` when given, and then
    passed through ``from_flag`` when given (text to a tuple, a command line's 0 to None).
    """
    metadata: dict[str, Any] = {"help": help.replace("{default}", shown(default))}
    if flag is not None:
        metadata.update(flag=flag, aliases=tuple(aliases), metavar=metavar, group=group, positive=positive)
        if choices is not None:
            metadata["choices"] = tuple(choices)
        if from_flag is not None:
            metadata["from_flag"] = from_flag
    return field(default=default, metadata=metadata)


def shown(value: Any) -> str:
    """``value`` as a help text writes it: numbers in their shortest form (``80``, ``0.9``, ``1e-6``)."""
    if isinstance(value, float):
        return re.sub(r"e([+-])0*(\d)", lambda m: "e" + m.group(1).lstrip("+") + m.group(2), f"{value:g}")
    return str(value)


def check_option_types(options_class: type, options: dict[str, Any]) -> None:
    """Refuse (``OptionError``, naming the option) a value not of its field's type: a whole number
    for ``int``, a real number for ``float`` (neither a bool), ``True`` or ``False`` for ``bool``,
    text for ``str``, a list or tuple (of the element type) for ``Sequence``; ``None`` where allowed."""
    hints = typing.get_type_hints(options_class)
    for name, value in options.items():
        if name not in hints:
            continue
        hint = hints[name]
        kinds = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        optional = type(None) in kinds
        if value is None and optional:
            continue
        kinds = tuple(k for k in kinds if k is not type(None))
        if not any(_fits(value, k) for k in kinds):
            wanted = " or ".join(_described(k) for k in kinds) + (" or None" if optional else "")
            raise OptionError(f"{name} must be {wanted}, not {value!r}", name)


def _fits(value: Any, kind: Any) -> bool:
    if kind is Any:  # checked by the option's own parser (a declared workload's entries)
        return True
    if typing.get_origin(kind) is collections.abc.Sequence:
        (item,) = typing.get_args(kind)
        return isinstance(value, (list, tuple, np.ndarray)) and all(_fits(v, item) for v in value)
    if isinstance(value, (bool, np.bool_)):
        return kind is bool
    if kind is int:
        return isinstance(value, (int, np.integer))
    if kind is float:
        return isinstance(value, (int, float, np.integer, np.floating))
    return isinstance(kind, type) and isinstance(value, kind)


def _described(kind: Any, plural: bool = False) -> str:
    if typing.get_origin(kind) is collections.abc.Sequence:
        return ("lists" if plural else "a list") + " of " + _described(typing.get_args(kind)[0], plural=True)
    names = {int: ("a whole number", "whole numbers"), float: ("a number", "numbers"), str: ("text", "text")}
    return names[kind][plural] if kind in names else ("True or False" if kind is bool else str(kind))


class MethodOptions(Protocol):
    """What every method's options dataclass offers (``release.ReleaseRequest.of`` calls these in order)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def validate(self) -> None:
        """Refuse (``OptionError``) a value outside its range."""

    def check_schema(self, schema: Schema) -> None:
        """Refuse what does not fit the public schema (workload and model sizes, round counts)."""

    def check_mpc(self) -> None:
        """Refuse what cannot run over MPC."""


@dataclass(frozen=True)
class MethodRun:
    """One run of a method: what it reads, what pays for it, and how it reports."""

    #: The silos. A central method pools their rows (``Silo.pooled``); a federated one never
    #: touches them and reaches them only through ``aggregator``.
    silos: Sequence[Silo]
    #: The aggregator of a federated method (None for a central one).
    aggregator: Aggregator | None
    #: Charged for every release before its noisy value exists (``mechanisms``).
    accountant: Accountant
    noise: NoiseSource
    #: The method's validated options (an instance of its ``options_class``).
    options: Any
    #: Seeds the method's public randomness (which silos take part, an encoding's draws), never
    #: the noise; None draws it fresh.
    seed: int | None
    progress: Progress


class Method(Protocol):
    """A synthesis method as the registry holds it."""

    @property
    def name(self) -> str:
        """What ``--method`` and ``synthesize(method=...)`` call it."""

    @property
    def options_class(self) -> type[MethodOptions]:
        """Its options dataclass."""

    @property
    def min_silos(self) -> int:
        """The fewest silos it accepts."""

    @property
    def mpc(self) -> bool:
        """Whether ``--mpc`` can run it (every statistic through the aggregator protocol, none pooled)."""

    @property
    def graphical(self) -> bool:
        """Whether it fits a graphical model over a workload (AIM family: rounds, workload)."""

    @property
    def central(self) -> bool:
        """Whether a trusted curator pools the silos' rows (no aggregator)."""

    def threat_model(self, aggregator: Aggregator | None) -> str:
        """The ledger's threat model of a run over ``aggregator`` (None for a central method)."""

    def selection_sensitivity(self, max_weight: float, opts: Any) -> float | None:
        """Sensitivity of the selection score for workload weights up to ``max_weight`` (None: the
        method selects nothing)."""

    def ledger_details(self, schema: Schema, opts: Any) -> dict[str, Any]:
        """The ledger's record of a run's options (``options``) and anything the method fixes from
        them before it runs (the AIM family's ``workload``)."""

    def run(self, run: MethodRun) -> MethodResult:
        """Run on ``run``, every privacy cost charged to ``run.accountant``; the sampler,
        the model, the rounds run, the workload and run details."""


def options_record(opts: Any) -> dict[str, Any]:
    """``{"options": ...}``: every option of ``opts`` as given, for the ledger."""
    return {"options": dict(vars(opts))}


#: A federated method's runner: ``(aggregator, accountant, noise, options, seed, progress)``.
FederatedRunner = Callable[[Aggregator, Accountant, NoiseSource, Any, "int | None", Progress], MethodResult]


@dataclass(frozen=True)
class FederatedMethod:
    """A ``Method`` that coordinates the silos through the run's aggregator only: ``run`` calls
    ``runner(aggregator, accountant, noise, options, seed, progress)``."""

    name: str
    options_class: type[MethodOptions]
    min_silos: int
    graphical: bool
    runner: FederatedRunner
    #: The ledger's threat model of a run over an aggregator.
    threat: Callable[[Aggregator | None], str]
    #: The selection score's sensitivity per unit of the largest workload weight (None: no selection).
    selection: Callable[[float, Any], float] | None = None
    mpc: bool = True
    central: bool = False
    #: The ledger's record of the options (``Method.ledger_details``).
    details: Callable[[Schema, Any], dict[str, Any]] = field(default=lambda schema, opts: options_record(opts))

    def threat_model(self, aggregator: Aggregator | None) -> str:
        """``threat(aggregator)``."""
        return self.threat(aggregator)

    def ledger_details(self, schema: Schema, opts: Any) -> dict[str, Any]:
        """``details(schema, opts)``."""
        return self.details(schema, opts)

    def selection_sensitivity(self, max_weight: float, opts: Any) -> float | None:
        """``selection(max_weight, opts)``, or None when the method selects nothing."""
        return None if self.selection is None else self.selection(max_weight, opts)

    def run(self, run: MethodRun) -> MethodResult:
        """``runner`` over ``run.aggregator``; ``run.seed`` seeds its public randomness."""
        return self.runner(run.aggregator, run.accountant, run.noise, run.options, run.seed, run.progress)
