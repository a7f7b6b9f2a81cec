"""Joining the MPC world: environment, CrypTen set-up, the command channel and traffic counts.

Every process (party ``0..n-1`` and the dealer, rank ``n``) calls ``join`` with the same
rendezvous address (``tcp://HOST:PORT`` of party 0's host), the number of parties and its rank;
torch.distributed's gloo backend then connects every pair over TCP. Party 0 coordinates: it
broadcasts each step as a command (a JSON header plus int64/float64 arrays, never pickles) and
the others follow. Only public values travel in commands: cliques, model marginals, noise scales.
"""
from __future__ import annotations

import datetime
import json
import os
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from ..errors import MPCError
from . import DEFAULT_TIMEOUT_S
from .crypten_shim import import_crypten

__all__ = ["DEFAULT_TIMEOUT_S", "MPCError", "Membership", "Channel", "join", "leave"]


@dataclass
class Membership:
    rendezvous: str          # tcp://host:port
    parties: int             # n; the dealer is rank n
    rank: int
    timeout_s: float = DEFAULT_TIMEOUT_S


def configure(m: Membership):
    """Set CrypTen's environment and configuration (TTP provider, traffic counting); returns crypten."""
    os.environ.update({"WORLD_SIZE": str(m.parties), "RANK": str(m.rank), "RENDEZVOUS": m.rendezvous,
                       "DISTRIBUTED_BACKEND": "gloo"})
    crypten = import_crypten()
    crypten.cfg.mpc.provider = "TTP"        # a dealer process; the trusted-first-party mode is never used
    crypten.cfg.communicator.verbose = True
    _set_default_timeout(m.timeout_s)
    return crypten


def _set_default_timeout(seconds: float) -> None:
    """A peer that stops answering fails every collective after ``seconds`` (gloo's default is 30 min)."""
    timeout = datetime.timedelta(seconds=seconds)
    original = getattr(dist.init_process_group, "__wrapped_original__", dist.init_process_group)

    def init_process_group(*args, **kwargs):
        kwargs.setdefault("timeout", timeout)
        return original(*args, **kwargs)

    init_process_group.__wrapped_original__ = original
    dist.init_process_group = init_process_group


def join(m: Membership):
    """Connect this party to the others (blocks until all ranks have joined); returns crypten."""
    crypten = configure(m)
    try:
        crypten.init()
    except Exception as exc:
        raise MPCError(f"could not join the parties at {m.rendezvous} as rank {m.rank} of {m.parties} "
                       f"parties + dealer: {' '.join(str(exc).split())[:300]}") from None
    return crypten


def leave() -> None:
    """Disconnect (party 0 also tells the dealer to stop)."""
    crypten = import_crypten()
    try:
        crypten.uninit()
    except Exception:   # the others may already be gone; nothing is left to protect
        pass


class Channel:
    """Party 0 broadcasts commands to parties ``1..n-1`` over CrypTen's main group."""

    def __init__(self):
        import crypten.communicator as comm
        self.group = comm.get().main_group
        self.bytes = 0

    def _bcast(self, tensor: torch.Tensor) -> torch.Tensor:
        dist.broadcast(tensor, src=0, group=self.group)
        self.bytes += tensor.numel() * tensor.element_size()
        return tensor

    def send(self, header: dict, arrays: dict[str, np.ndarray] | None = None) -> None:
        arrays = arrays or {}
        odd = [k for k, v in arrays.items() if np.asarray(v).dtype not in (np.int64, np.float64)]
        if odd:
            raise TypeError(f"command arrays must be int64 or float64: {', '.join(odd)}")
        header = {**header, "_arrays": [[k, str(np.asarray(v).dtype), list(np.shape(v))]
                                        for k, v in arrays.items()]}
        raw = json.dumps(header).encode()
        self._bcast(torch.tensor([len(raw)], dtype=torch.long))
        self._bcast(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
        for name, value in arrays.items():
            self._bcast(torch.from_numpy(np.ascontiguousarray(value)))

    def receive(self) -> tuple[dict, dict[str, np.ndarray]]:
        n = self._bcast(torch.zeros(1, dtype=torch.long))
        raw = self._bcast(torch.zeros(int(n.item()), dtype=torch.uint8))
        header = json.loads(bytes(raw.numpy()).decode())
        arrays = {}
        for name, dtype, shape in header.pop("_arrays"):
            if dtype not in ("int64", "float64"):
                raise MPCError(f"unexpected array type {dtype!r} in a command")
            t = self._bcast(torch.zeros(tuple(shape), dtype=getattr(torch, dtype)))
            arrays[name] = t.numpy()
        return header, arrays


def traffic() -> dict[str, int]:
    """This party's communication so far, as CrypTen counts it (rounds and bytes it sent)."""
    import crypten.communicator as comm
    stats = comm.get().get_communication_stats()
    return {"rounds": int(stats["rounds"]), "bytes": int(stats["bytes"])}


def gather_to_party0(values: list[float]) -> list[list[float]] | None:
    """Every party sends ``values`` (same length) to party 0; party 0 gets one list per party."""
    import crypten.communicator as comm
    group = comm.get().main_group
    t = torch.tensor(values, dtype=torch.float64)
    rank = dist.get_rank()
    n = comm.get().get_world_size()
    out = [torch.zeros_like(t) for _ in range(n)] if rank == 0 else None
    dist.gather(t, gather_list=out, dst=0, group=group)
    return [o.tolist() for o in out] if rank == 0 else None
