"""Reading a JSON (or YAML) document a user gives (a schema, a workload, a policy, a ledger, a model's
metadata, a federation file): every way it can fail is one line, and a document nested deeper than
``MAX_NESTING`` or holding a number literal longer than ``MAX_NUMBER_CHARS`` characters is refused
(deep nesting exhausts a parser's stack; converting a long integer costs quadratic time, and Python
refuses one of more than 4,300 digits). A number is checked before it is converted; YAML's nesting
as it is read, JSON's once it is read (its parser refuses what would exhaust its stack first)."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from .errors import InputError

MAX_NESTING = 64
"""The deepest nesting of arrays and objects (YAML sequences and mappings) any input may have."""

MAX_NUMBER_CHARS = 1_000
"""The longest number literal (digits, sign, point and exponent) any input may hold."""

TOO_DEEP = f"nested too deeply: more than {MAX_NESTING} levels"


class _Refused(Exception):
    """A limit passed while parsing (turned into one ``InputError`` naming the document)."""


def _number(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(literal: str) -> Any:
        if len(literal) > MAX_NUMBER_CHARS:
            raise _Refused(f"a number of {len(literal)} characters, more than {MAX_NUMBER_CHARS}")
        return convert(literal)

    return parse


def _check_nesting(value: Any) -> None:
    """``_Refused`` when the arrays and objects of a parsed JSON ``value`` nest deeper than ``MAX_NESTING``."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > MAX_NESTING:
            raise _Refused(TOO_DEEP)
        stack.extend((child, depth + 1) for child in children)


@contextmanager
def _one_line(source: str | Path, what: str) -> Iterator[None]:
    """A limit passed, a stack exhausted or a value refused while parsing: one ``InputError`` naming
    ``source``. A format's own syntax error (``json.JSONDecodeError``, ``yaml.YAMLError``) passes
    through for its parser's caller to word."""
    try:
        yield
    except _Refused as exc:
        raise InputError(f"{source}: not a {what} ({exc})") from None
    except RecursionError:
        raise InputError(f"{source}: not a {what} (nested too deeply to read)") from None
    except ValueError as exc:
        if isinstance(exc, (InputError, json.JSONDecodeError)):  # a parse_constant's own refusal, or syntax
            raise
        raise InputError(f"{source}: not a {what} ({' '.join(str(exc).split())})") from None


def parse_json(text: str, source: str | Path, what: str, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """The JSON value of ``text`` read from ``source`` (a file, named in the error); ``InputError``
    when it is not JSON, nests deeper than ``MAX_NESTING`` or holds a number literal longer than
    ``MAX_NUMBER_CHARS``. ``parse_constant`` is ``json.loads``'s (it may refuse NaN and Infinity)."""
    try:
        with _one_line(source, what):
            value = json.loads(text, parse_int=_number(int), parse_float=_number(float), parse_constant=parse_constant)
            _check_nesting(value)
            return value
    except json.JSONDecodeError as exc:  # raised through ``_one_line``, which leaves syntax errors to each format
        raise InputError(f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def parse_yaml(text: str, source: str | Path, what: str) -> Any:
    """The YAML value of ``text`` read from ``source``, with ``parse_json``'s limits and errors."""
    import yaml

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.depth += 1
            try:
                if self.depth > MAX_NESTING:
                    raise _Refused(TOO_DEEP)
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    def scalar(convert: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def construct(loader: Any, node: Any) -> Any:
            _number(str)(str(node.value))
            return convert(loader, node)

        return construct

    Loader.add_constructor("tag:yaml.org,2002:int", scalar(yaml.SafeLoader.construct_yaml_int))
    Loader.add_constructor("tag:yaml.org,2002:float", scalar(yaml.SafeLoader.construct_yaml_float))
    try:
        with _one_line(source, what):
            return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        raise InputError(f"{source}: not valid YAML ({' '.join(str(exc).split())})") from None


def read_json(
    path: str | Path, what: str, option: str | None = None, parse_constant: Callable[[str], Any] | None = None
) -> Any:
    """The JSON value in ``path``; ``InputError`` naming the file (``what`` it should be, and the
    ``option`` that gave it) when it is missing, a folder, unreadable, not UTF-8, not JSON, or past
    ``parse_json``'s limits. ``parse_constant`` is ``json.loads``'s (it may refuse NaN and Infinity)."""
    path = Path(path)
    given = f" ({option})" if option else ""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found{given}") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a {what}{given}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the {what} ({exc})") from None
    return parse_json(text, path, what, parse_constant)
