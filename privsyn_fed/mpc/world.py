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
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..common import MPCError, first_line
from . import DEFAULT_TIMEOUT_S
from .crypten_shim import import_crypten

if TYPE_CHECKING:
    import torch

__all__ = ["DEFAULT_TIMEOUT_S", "MPCError", "Membership", "Channel", "join", "leave"]

# torch is imported only once it is needed (a party that cannot reach party 0 says so without
# loading it). Its C++ log (c10d's connection retries, each with C++ stack frames) is off unless
# the user sets TORCH_CPP_LOG_LEVEL: torch reads it when it loads, so import this module first.
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")

#: Seconds between two tries to reach party 0's rendezvous port.
RETRY_S = 0.25


@dataclass
class Membership:
    """One process's place in the MPC world: the rendezvous, the ``n`` parties (the dealer is rank
    ``n``), its rank and the timeout."""

    rendezvous: str  # tcp://host:port
    parties: int  # n; the dealer is rank n
    rank: int
    timeout_s: float = DEFAULT_TIMEOUT_S


def configure(m: Membership):
    """Set CrypTen's environment and configuration (TTP provider, traffic counting); returns crypten."""
    os.environ.update(
        {"WORLD_SIZE": str(m.parties), "RANK": str(m.rank), "RENDEZVOUS": m.rendezvous, "DISTRIBUTED_BACKEND": "gloo"}
    )
    crypten = import_crypten()
    crypten.cfg.mpc.provider = "TTP"  # a dealer process; the trusted-first-party mode is never used
    crypten.cfg.communicator.verbose = True
    _set_default_timeout(m.timeout_s)
    return crypten


def _set_default_timeout(seconds: float) -> None:
    """A peer that stops answering fails every collective after ``seconds`` (gloo's default is 30 min)."""
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=seconds)
    original = getattr(dist.init_process_group, "__wrapped_original__", dist.init_process_group)

    def init_process_group(*args, **kwargs):
        kwargs.setdefault("timeout", timeout)
        return original(*args, **kwargs)

    init_process_group.__wrapped_original__ = original  # type: ignore[attr-defined]
    dist.init_process_group = init_process_group


def join(m: Membership):
    """Connect this party to the others (blocks until all ranks have joined); returns crypten."""
    reach_party0(m)
    crypten = configure(m)
    try:
        crypten.init()
    except Exception as exc:
        raise cannot_join(m, first_line(exc)) from None
    import crypten.communicator as comm

    use_one_step_all_reduce(comm.get())
    return crypten


def use_one_step_all_reduce(communicator) -> None:
    """Make ``communicator.all_reduce`` (every opening of shares: CrypTen's reveals of Beaver masks
    and of results) one exchange: each party sends its tensors to every other party and combines
    what it receives, a single one-way delay. gloo's ring takes ``2 (n - 1)`` steps in sequence
    (4 for 3 parties), which on a long link is most of a run's time; the price is ``n - 1`` copies
    sent instead of about 2. CrypTen's counts are kept: one round, and the elements sent and
    received."""
    import torch
    import torch.distributed as dist

    me, n, group = communicator.get_rank(), communicator.get_world_size(), communicator.main_group
    peers = [r for r in range(n) if r != me]
    combine = {dist.ReduceOp.SUM: torch.Tensor.add_, dist.ReduceOp.BXOR: torch.Tensor.bitwise_xor_}

    def all_reduce(input, op=dist.ReduceOp.SUM, batched=False):
        if op not in combine:
            raise ValueError(f"all_reduce with {op} is not supported over MPC here")
        results = [x.clone() for x in input] if batched else [input.clone()]
        requests, received = [], []
        for result in results:
            data = result.data.contiguous()
            requests += [dist.isend(data, dst=p, group=group) for p in peers]
            buffers = [torch.empty_like(data) for _ in peers]
            requests += [dist.irecv(b, src=p, group=group) for p, b in zip(peers, buffers)]
            received.append(buffers)
        for request in requests:
            request.wait()
        for result, buffers in zip(results, received):
            for buffer in buffers:
                combine[op](result.data, buffer)
        communicator._log_communication(2 * (n - 1) * sum(r.nelement() for r in results))
        return results if batched else results[0]

    communicator.all_reduce = all_reduce


def reach_party0(m: Membership) -> None:
    """Wait until party 0's rendezvous port accepts a connection, for at most ``m.timeout_s``.

    torch's store client would wait too, but past its timeout (a random backoff of up to that
    long again) and logging each failed try; party 0 itself (rank 0) returns at once.
    """
    if m.rank == 0:
        return
    host, _, port = m.rendezvous.removeprefix("tcp://").rpartition(":")
    deadline = time.monotonic() + m.timeout_s
    while True:
        try:
            socket.create_connection(
                (host.strip("[]"), int(port)), timeout=min(2.0, max(0.1, deadline - time.monotonic()))
            ).close()
            return
        except OSError as exc:
            if time.monotonic() + RETRY_S >= deadline:
                raise cannot_join(
                    m, f"party 0 did not answer within {m.timeout_s:g} s ({exc.strerror or first_line(exc)})"
                ) from None
            time.sleep(RETRY_S)


def cannot_join(m: Membership, reason: str) -> MPCError:
    """The ``MPCError`` saying that this party (or the dealer) could not join the others, and why."""
    who = "the dealer" if m.rank == m.parties else f"party {m.rank}"
    return MPCError(
        f"{who} could not join the parties at {m.rendezvous} ({m.parties} parties and the dealer): {reason}"
    )


def leave() -> None:
    """Disconnect (party 0 also tells the dealer to stop), and forget the dealer's client, which
    ``crypten.uninit`` keeps: a later ``join`` in this process must set it up with the new dealer."""
    crypten = import_crypten()
    from crypten.mpc.provider.ttp_provider import TTPClient

    try:
        crypten.uninit()
    except Exception:  # the others may already be gone; nothing is left to protect
        pass
    TTPClient.uninit()


class Channel:
    """Party 0 broadcasts commands to parties ``1..n-1`` over CrypTen's main group.

    A command is two broadcasts whatever it carries: the sizes (header bytes, payload bytes), then
    one payload of the JSON header followed by its int64/float64 arrays' raw bytes."""

    def __init__(self):
        import crypten.communicator as comm

        self.group = comm.get().main_group
        self.bytes = 0
        self.broadcasts = 0

    def _bcast(self, tensor: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist

        dist.broadcast(tensor, src=0, group=self.group)
        self.bytes += tensor.numel() * tensor.element_size()
        self.broadcasts += 1
        return tensor

    def send(self, header: dict, arrays: dict[str, np.ndarray] | None = None) -> None:
        """Broadcast a command from party 0: a JSON header and its int64/float64 arrays."""
        import torch

        arrays = {k: np.ascontiguousarray(v) for k, v in (arrays or {}).items()}
        odd = [k for k, v in arrays.items() if v.dtype not in (np.int64, np.float64)]
        if odd:
            raise TypeError(f"command arrays must be int64 or float64: {', '.join(odd)}")
        header = {**header, "_arrays": [[k, str(v.dtype), list(v.shape)] for k, v in arrays.items()]}
        raw = json.dumps(header).encode()
        payload = raw + b"".join(v.tobytes() for v in arrays.values())
        self._bcast(torch.tensor([len(raw), len(payload)], dtype=torch.long))
        self._bcast(torch.frombuffer(bytearray(payload), dtype=torch.uint8))

    def receive(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The next command from party 0: its header and its arrays (int64 or float64 only)."""
        import torch

        sizes = self._bcast(torch.zeros(2, dtype=torch.long)).tolist()
        payload = bytes(self._bcast(torch.zeros(int(sizes[1]), dtype=torch.uint8)).numpy())
        header = json.loads(payload[: int(sizes[0])].decode())
        arrays, offset = {}, int(sizes[0])
        for name, dtype, shape in header.pop("_arrays"):
            if dtype not in ("int64", "float64"):
                raise MPCError(f"unexpected array type {dtype!r} in a command")
            count = int(np.prod(shape, dtype=np.int64))
            arrays[name] = np.frombuffer(payload, dtype=dtype, count=count, offset=offset).reshape(shape).copy()
            offset += count * 8
        return header, arrays


def traffic() -> dict[str, int]:
    """This party's communication so far, as CrypTen counts it (rounds and bytes it sent)."""
    import crypten.communicator as comm

    stats = comm.get().get_communication_stats()
    return {"rounds": int(stats["rounds"]), "bytes": int(stats["bytes"])}


def gather_to_party0(values: list[float]) -> list[list[float]] | None:
    """Every party sends ``values`` (same length) to party 0; party 0 gets one list per party."""
    import crypten.communicator as comm
    import torch
    import torch.distributed as dist

    group = comm.get().main_group
    t = torch.tensor(values, dtype=torch.float64)
    rank = dist.get_rank()
    n = comm.get().get_world_size()
    out = [torch.zeros_like(t) for _ in range(n)] if rank == 0 else None
    dist.gather(t, gather_list=out, dst=0, group=group)
    return [o.tolist() for o in out] if rank == 0 else None
