"""Sessions of Spark Connect: a Spark cluster reached as a client, over gRPC, without a JVM here.

A Spark Connect silo is ``sc://HOST:PORT?table=T`` or ``?query=SQL`` (``engines``); ``use_ssl=true``
asks for TLS, checked against the system's roots (or gRPC's ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``).
The server's token comes from ``SPARK_CONNECT_AUTHENTICATE_TOKEN``, Spark's own variable, never from
the URL (a ``token`` there is refused, its value never repeated). To ``localhost`` the channel uses
gRPC's local credentials (the token travels only over loopback), elsewhere TLS. ``sc://?table=V``
names a view in the session of the Spark Connect data frames given to ``pf.synthesize``
(``frames_as_tables`` registers it).

This process opens one session per server (``connect_session``), kept until the process ends (a
call the server does not answer is retried for about 17 s, and at exit the session is released
once, without retries, so a server already gone does not hold the process); the
rows and counts are computed by the server's Spark, its Python workers running the same
``mapInArrow`` code as a classic session's (so they need pyarrow and privsyn-fed installed).
"""

from __future__ import annotations

import atexit
import socket
from contextlib import suppress
from typing import Any, Protocol

from .errors import InputError, first_line

#: The parameters an ``sc://`` URL takes besides ``table`` and ``query``.
CONNECT_PARAMETERS = ("use_ssl",)
#: Spark Connect sessions of this process: by connection string, and ``"sc:"`` for the frames' session.
SESSIONS: dict[str, Any] = {}
#: The target of the Spark Connect data frames' session (``sc://?table=V``).
FRAMES = "sc:"
#: Retries of a call the server did not answer (Spark's policy, backing off 4x from 50 ms): about
#: 17 s before the call fails, rather than Spark's 10 minutes.
RETRIES = 5


class EngineTable(Protocol):
    """What this module reads of ``engines.EngineTable`` (a Protocol: ``engines`` imports this module)."""

    @property
    def target(self) -> str:
        """Spark Connect's connection string (``sc://HOST:PORT``, ``/;use_ssl=true``), or ``FRAMES``."""


def connect_target(text: str, address: str, given: dict[str, str]) -> str:
    """The connection string of an ``sc://`` URL's ``address`` (``HOST:PORT``; "" for the frames'
    session) and parameters; ``InputError`` for a token, another parameter, or a bad address."""
    for key in given:
        if key.lower() in ("token", "password", "secret"):
            raise InputError(
                f"{text.split('?', 1)[0]}?...: the URL holds the secret {key}; put the token in "
                "SPARK_CONNECT_AUTHENTICATE_TOKEN instead (a URL shows in process lists and shell histories)"
            )
        if key not in CONNECT_PARAMETERS:
            raise InputError(f"{text}: a Spark Connect URL takes ?table= or ?query= and use_ssl=true, not ?{key}=")
    if not address:
        return FRAMES
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "/" in address:
        raise InputError(f"{text}: {address!r} is not HOST:PORT; name the Spark Connect server as sc://HOST:PORT?...")
    ssl = given.get("use_ssl", "false").lower()
    if ssl not in ("true", "false"):
        raise InputError(f"{text}: use_ssl is true or false, not {given['use_ssl']!r}")
    return f"sc://{address}" + ("/;use_ssl=true" if ssl == "true" else "")


def connect_session(t: EngineTable, shown: str, timeout: float = 10.0) -> Any:
    """This process's session on ``t``'s Spark Connect server, opened on first use: the server must
    accept a connection within ``timeout`` seconds and the session a first query (the token)."""
    if t.target in SESSIONS:
        return SESSIONS[t.target]
    if t.target == FRAMES:
        raise InputError(f"{shown}: no Spark Connect data frames were given; name the server as sc://HOST:PORT?...")
    from pyspark.errors import PySparkException
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession  # not pyspark.sql's: that one turns the process to Connect

    address = t.target.removeprefix("sc://").split("/", 1)[0]
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise InputError(f"{shown}: no Spark Connect server answers at {address} ({exc.strerror or exc})") from None
    try:
        session = SparkSession.builder.remote(t.target).create()
        session.client.set_retry_policies([DefaultPolicy(max_retries=RETRIES)])
        session.sql("SELECT 1").collect()
    except (PySparkException, OSError, ValueError) as exc:
        raise InputError(f"{shown}: Spark Connect refused the session ({connect_error(exc)})") from None
    SESSIONS[t.target] = session
    atexit.register(_stop, session)
    return session


def connect_error(exc: BaseException) -> str:
    """A Spark Connect error in one line: gRPC's status and detail where the call failed there."""
    details = getattr(exc, "_details", None) or getattr(exc, "details", None)
    if callable(details):
        details = details()
    text = first_line(exc)
    if "UNAUTHENTICATED" in str(exc) or (details and "token" in str(details).lower()):
        return "the server refused the token; set SPARK_CONNECT_AUTHENTICATE_TOKEN to the server's token"
    return text


def register_frames_session(session: Any, shown: str) -> None:
    """Make ``session`` the one ``sc://?table=V`` reads (the Spark Connect frames' session); frames
    of two sessions are refused, as one process reads Spark silos through one session."""
    held = SESSIONS.get(FRAMES)
    if held is not None and held is not session:
        raise InputError(f"{shown}: a Spark Connect data frame of another session; give frames of one session")
    SESSIONS[FRAMES] = session


def forget_frames_session() -> None:
    """The frames are read: ``sc://?table=V`` names no session any more."""
    SESSIONS.pop(FRAMES, None)


def _stop(session: Any) -> None:
    """Release the session on its server at exit, once: a server already gone is not waited for."""
    with suppress(Exception):
        session.client.set_retry_policies([])
        session.stop()
