"""The dealer: CrypTen's trusted third party (TTP), as a process of its own.

It runs with rank ``parties`` and never receives data or noise parameters: it deals CrypTen's
correlated randomness (Beaver triples, wrap counts, random bits), secret-shared like any share.
The DP noise is drawn by the parties themselves (``mpc.noise``), so the dealer knows none of it.
It must still collude with no party: with one party's shares and the randomness it dealt, it
could unmask the values that party computed on (SECURITY.md).
"""

from __future__ import annotations

from .crypten_shim import import_crypten


def run_dealer() -> None:
    """Serve the parties until party 0 sends ``terminate`` (blocks; call after ``configure``)."""
    import_crypten()
    from crypten.mpc.provider.ttp_provider import TTPServer

    TTPServer()
