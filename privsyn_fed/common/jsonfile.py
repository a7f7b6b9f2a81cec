"""Reading a JSON file a user gives (a ledger, a policy): every way it can fail is one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from .errors import InputError


def read_json(
    path: str | Path, what: str, option: str | None = None, parse_constant: Callable[[str], Any] | None = None
) -> Any:
    """The JSON value in ``path``; ``InputError`` naming the file (``what`` it should be, and the
    ``option`` that gave it) when it is missing, a folder, unreadable, not UTF-8, not JSON or nested
    too deeply to parse. ``parse_constant`` is ``json.loads``'s (it may refuse NaN and Infinity)."""
    path = Path(path)
    given = f" ({option})" if option else ""
    try:
        return json.loads(path.read_text(encoding="utf-8"), parse_constant=parse_constant)
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found{given}") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a {what}{given}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise InputError(f"{path}: not a {what} (JSON nested too deeply to read)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the {what} ({exc})") from None
