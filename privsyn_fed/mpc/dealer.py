"""The dealer: CrypTen's trusted third party (TTP), as a process of its own.

It runs with rank ``parties`` and never receives data or noise parameters: it deals CrypTen's
correlated randomness (Beaver triples, wrap counts, random bits), secret-shared like any share.
The DP noise is drawn by the parties themselves (``mpc.noise``), so the dealer knows none of it.
It must still collude with no party: with one party's shares and the randomness it dealt, it
could unmask the values that party computed on (SECURITY.md).

The transport lets the dealer receive nothing but party 0's requests and barriers
(``tls.allowed``), and every request is checked here before it is served (``check_request``):
one of CrypTen's five functions, on the CPU, with sizes of at most ``MAX_ELEMENTS`` elements that
fit together, and ``mul`` or ``matmul`` as the only operations. The seeds the dealer shares with
each party come from the operating system's CSPRNG.
"""

from __future__ import annotations

import os
from typing import Any

from ..common import MPCError
from .crypten_shim import import_crypten

#: The most elements one request may ask for (of either operand or the result): 8 GiB of int64.
MAX_ELEMENTS = 1 << 30
#: CrypTen's TTP functions and the operands each takes.
FUNCTIONS = {"additive": 3, "square": 1, "binary": 2, "wraps": 1, "B2A": 1}


def check_request(message: Any) -> tuple[str, tuple]:
    """``(function, arguments)`` of a request from party 0; ``MPCError`` for anything else."""
    import torch

    if not isinstance(message, dict) or set(message) != {"function", "device", "args", "kwargs"}:
        raise MPCError("party 0 sent the dealer a request that is not CrypTen's (keys)")
    function, device, args, kwargs = (message[k] for k in ("function", "device", "args", "kwargs"))
    if function not in FUNCTIONS:
        raise MPCError(f"party 0 asked the dealer for {str(function)[:40]!r}, not one of {', '.join(FUNCTIONS)}")
    if device not in (None, "cpu"):
        raise MPCError(f"party 0 asked the dealer for randomness on {str(device)[:40]!r}; only the CPU is served")
    if kwargs != {}:
        raise MPCError("party 0 sent the dealer keyword arguments; none are served")
    if not isinstance(args, (tuple, list)) or len(args) != FUNCTIONS[function]:
        raise MPCError(f"party 0 sent the dealer {function} with other arguments than its size(s)")
    sizes = [_size(a) for a in args[: 2 if function in ("additive", "binary") else 1]]
    meta = [torch.empty(s, device="meta") for s in sizes]
    try:
        if function == "additive":
            if args[2] not in ("mul", "matmul"):
                raise MPCError(f"party 0 asked the dealer for a {str(args[2])[:20]!r} triple; only mul and matmul")
            result = getattr(torch, args[2])(*meta).shape
        elif function == "binary":
            result = torch.broadcast_shapes(*sizes)
        else:
            result = sizes[0]
    except RuntimeError as exc:
        raise MPCError(f"party 0 sent the dealer sizes that do not fit together ({str(exc)[:80]})") from None
    if _numel(result) > MAX_ELEMENTS:
        raise MPCError(f"party 0 asked the dealer for {_numel(result)} elements (at most {MAX_ELEMENTS})")
    return function, tuple(sizes) + ((args[2],) if function == "additive" else ())


def _size(value: Any):
    import torch

    if not isinstance(value, (tuple, list)) or len(value) > 8 or not all(type(d) is int and d >= 0 for d in value):
        raise MPCError("party 0 sent the dealer a size that is not up to 8 non-negative integers")
    size = torch.Size(value)
    if _numel(size) > MAX_ELEMENTS:
        raise MPCError(f"party 0 asked the dealer for {_numel(size)} elements (at most {MAX_ELEMENTS})")
    return size


def _numel(size) -> int:
    count = 1
    for d in size:
        count *= int(d)
    return count


def _dealer_class():
    import_crypten()
    import torch
    from crypten.mpc.provider.ttp_provider import TTPServer

    from .communicator import current

    class Dealer(TTPServer):
        """CrypTen's TTP server over the mesh: seeds from the CSPRNG, checked requests."""

        def __init__(self):  # CrypTen's own runs crypten.init() and serves in its constructor
            self.comm = current()
            self.ttp_group = self.comm.ttp_group
            self.comm_group = self.comm.ttp_comm_group
            self.device = "cpu"
            self._setup_generators()

        def _setup_generators(self):
            ws = self.comm.get_world_size()
            seeds = [int.from_bytes(os.urandom(8), "little", signed=True) for _ in range(ws)]
            self.generators = [torch.Generator(device="cpu") for _ in range(ws)]
            self.generators_cuda = [None] * ws
            for i, seed in enumerate(seeds):
                self.generators[i].manual_seed(seed)
                self.comm._send(torch.tensor(seed, dtype=torch.long), i, self.ttp_group)
            self.comm._barrier(self.ttp_group)

        def serve(self) -> None:
            ttp_rank = self.comm.get_ttp_rank()
            while True:
                message = self.comm.recv_obj(0, self.ttp_group)
                if message == "terminate":
                    return
                function, args = check_request(message)
                result = getattr(self, function)(*args)
                self.comm.send_obj(result.size(), 0, self.ttp_group)
                self.comm.broadcast(result, ttp_rank, self.comm_group)

    return Dealer


def run_dealer() -> None:
    """Serve the parties until party 0 sends ``terminate`` (blocks; call after ``world.join``).
    ``RuntimeError`` if a connection breaks, ``MPCError`` for a request that is not CrypTen's."""
    _dealer_class()().serve()
