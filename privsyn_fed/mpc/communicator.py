"""CrypTen's communicator over the TLS mesh (``tls.Mesh``), installed without changing CrypTen.

``TLSCommunicator`` implements CrypTen 0.4.1's ``Communicator`` (and the parts of its
``DistributedCommunicator`` that CrypTen's TTP code uses: ``isend``, ``irecv``, ``get_ttp_rank``
and the groups ``main_group``, ``ttp_group``, ``ttp_comm_group``). Every collective is one step:
the source sends to every member of the group and each receiver combines what arrives. CrypTen's
own ``_logging`` counts the traffic by method name, as it does for its own communicator, so
``get_communication_stats`` reports the same rounds and bytes; ``all_reduce`` (every opening of
shares) counts itself: one round and the ``2 (n - 1)`` copies sent and received.

Every CrypTen module reads the communicator through ``crypten.communicator.get()`` at call time,
so ``install`` replaces that module's ``get``, ``is_initialized``, ``uninit`` and ``_init``
(``uninstall`` restores them). The dealer's seeds and barriers, which CrypTen's TTP client and
server send with ``torch.distributed`` directly, go through the mesh (``start_ttp_client``,
``dealer.Dealer``), uncounted as before.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.distributed as dist

from . import tls
from .crypten_shim import import_crypten

import_crypten()  # CrypTen's package first, through the shim (its ONNX import moved in torch 2.9)
from crypten.communicator.communicator import Communicator, _logging  # noqa: E402

_COMBINE: dict[Any, Callable[..., Any]] = {
    dist.ReduceOp.SUM: torch.Tensor.add_,
    dist.ReduceOp.BXOR: torch.Tensor.bitwise_xor_,
}


class Group:
    """Stands in for a torch.distributed process group: its members (global ranks) and channel."""

    __slots__ = ("name", "ranks", "channel")

    def __init__(self, name: str, ranks: tuple[int, ...], channel: int):
        self.name, self.ranks, self.channel = name, ranks, channel

    def __repr__(self) -> str:
        return f"Group({self.name}, {list(self.ranks)})"


class Request:
    """What ``isend`` and ``irecv`` return: ``wait()`` completes the transfer (a send is done already)."""

    def __init__(self, finish: Callable[[], None] | None = None):
        self._finish = finish

    def wait(self) -> None:
        """Complete the transfer (receive into the buffer given to ``irecv``)."""
        finish, self._finish = self._finish, None
        if finish is not None:
            finish()

    def is_completed(self) -> bool:
        """Whether ``wait`` has nothing left to do."""
        return self._finish is None


class TLSCommunicator(Communicator):
    """CrypTen's communicator for one member of the mesh: party ``rank`` of ``n``, or the dealer (rank ``n``)."""

    BYTES_PER_ELEMENT = 8
    instance: "TLSCommunicator | None" = None

    def __init__(self, mesh: tls.Mesh):
        self.mesh = mesh
        self.rank = mesh.rank
        self.world_size = n = mesh.parties
        self.main_group = Group("main", tuple(range(n)), tls.MAIN)
        self.ttp_group = Group("ttp", tuple(range(n + 1)), tls.TTP)
        self.ttp_comm_group = Group("ttp_comm", (0, n), tls.TTP_COMM)
        self.command_group = Group("command", tuple(range(n)), tls.COMMAND)
        self.ttp_initialized = True
        self.reset_communication_stats()
        self._name = f"rank{self.rank}"

    # ---- CrypTen's class interface ----
    @classmethod
    def is_initialized(cls) -> bool:
        """Whether a communicator is installed."""
        return cls.instance is not None

    @classmethod
    def get(cls) -> "TLSCommunicator":
        """The installed communicator."""
        if cls.instance is None:
            raise RuntimeError("CrypTen's communicator is not set up: join the MPC world first")
        return cls.instance

    @classmethod
    def initialize(cls, rank, world_size, init_ttp=False):
        """Not used: members join with ``world.join``, which builds the mesh first."""
        raise RuntimeError("join the MPC world with privsyn_fed.mpc.world.join, not crypten.init")

    @classmethod
    def shutdown(cls) -> None:
        """Leave: party 0 tells the dealer to stop; every connection is closed."""
        inst = cls.instance
        if inst is not None:
            inst.close()

    # ---- the uncounted primitives ----
    def _group(self, group: Group | None) -> Group:
        group = self.main_group if group is None else group
        if self.rank not in group.ranks:
            raise ValueError(f"rank {self.rank} is not in group {group.name}")
        return group

    def _send(self, tensor: torch.Tensor, dst: int, group: Group | None = None) -> None:
        group = self._group(group)
        if dst not in group.ranks or dst == self.rank:
            raise ValueError(f"cannot send to rank {dst} in group {group.name}")
        self.mesh.send_tensor(dst, group.channel, tensor.data if isinstance(tensor, torch.Tensor) else tensor)

    def _recv(self, src: int, group: Group | None = None) -> torch.Tensor:
        group = self._group(group)
        if src is None or src not in group.ranks or src == self.rank:
            raise ValueError(f"cannot receive from rank {src} in group {group.name}")
        return self.mesh.take_tensor(src, group.channel)

    def _recv_into(self, tensor: torch.Tensor, src: int, group: Group | None = None) -> torch.Tensor:
        received = self._recv(src, group)
        target = tensor.data
        if received.dtype != target.dtype or received.numel() != target.numel():
            raise RuntimeError(
                f"protocol error: {self.mesh.who(src)} sent {received.numel()} {received.dtype} elements "
                f"where {target.numel()} {target.dtype} were due"
            )
        target.copy_(received.reshape(target.shape))
        return tensor

    def _barrier(self, group: Group | None = None) -> None:
        group = self._group(group)
        others = [r for r in group.ranks if r != self.rank]
        for r in others:
            self.mesh.send_barrier(r, group.channel)
        for r in others:
            self.mesh.take_barrier(r, group.channel)

    def _others(self, group: Group) -> list[int]:
        return [r for r in group.ranks if r != self.rank]

    # ---- the command channel (party 0's commands and the replies; not CrypTen's, so uncounted) ----
    def send_command(self, tensor: torch.Tensor, dst: int) -> None:
        """Send ``tensor`` to ``dst`` on the command channel."""
        self._send(tensor, dst, self.command_group)

    def recv_command(self, src: int) -> torch.Tensor:
        """The next tensor from ``src`` on the command channel."""
        return self._recv(src, self.command_group)

    # ---- CrypTen's communicator interface ----
    @_logging
    def send(self, tensor, dst, group=None):
        """Send ``tensor`` to ``dst``."""
        self._send(tensor, dst, group)

    @_logging
    def recv(self, tensor, src=None, group=None):
        """Receive a tensor like ``tensor`` from ``src``."""
        return self._recv_into(tensor.clone(), src, group)

    @_logging
    def isend(self, tensor, dst, group=None):
        """Send ``tensor`` to ``dst`` now; the request is complete."""
        self._send(tensor, dst, group)
        return Request()

    @_logging
    def irecv(self, tensor, src=None, group=None):
        """Receive from ``src`` into ``tensor`` when the request is waited for."""
        return Request(lambda: self._recv_into(tensor, src, group))

    @_logging
    def scatter(self, scatter_list, src, size=None, device=None):
        """Party ``src`` sends ``scatter_list[k]`` to party ``k``; each gets its own."""
        if self.rank == src:
            for r in self._others(self.main_group):
                self._send(scatter_list[r], r)
            return scatter_list[self.rank].data
        if size is None:
            size = scatter_list[self.rank].size()
        return self._recv_into(torch.empty(size=size, dtype=torch.long), src)

    @_logging
    def reduce(self, input, dst, op=dist.ReduceOp.SUM, batched=False):
        """The combination (``op``: sum or xor) of every party's ``input`` at ``dst``; None elsewhere."""
        combine = _combine(op)
        tensors = list(input) if batched else [input]
        if self.rank != dst:
            for t in tensors:
                self._send(t, dst)
            return None
        result = [t.clone().data for t in tensors]
        for r in self._others(self.main_group):
            for t in result:
                combine(t, _same(self._recv(r), t, self.mesh.who(r)))
        return result if batched else result[0]

    def all_reduce(self, input, op=dist.ReduceOp.SUM, batched=False):
        """Every party gets the combination of every party's ``input``, in one exchange: each sends
        its tensors to every other party and combines what it receives (one round; ``2 (n - 1)``
        times the elements counted)."""
        combine = _combine(op)
        results = [x.clone() for x in input] if batched else [input.clone()]
        peers = self._others(self.main_group)
        for result in results:
            for r in peers:
                self._send(result, r)
        for r in peers:
            for result in results:
                combine(result.data, _same(self._recv(r), result.data, self.mesh.who(r)))
        self._log_communication(2 * (self.world_size - 1) * sum(r.nelement() for r in results))
        return results if batched else results[0]

    @_logging
    def gather(self, tensor, dst):
        """Every party's ``tensor``, in rank order, at ``dst``; ``[None]`` elsewhere."""
        if self.rank != dst:
            self._send(tensor, dst)
            return [None]
        return [
            tensor.data if r == dst else self._recv_into(torch.empty_like(tensor.data), r)
            for r in range(self.world_size)
        ]

    @_logging
    def all_gather(self, tensor):
        """Every party's ``tensor``, in rank order, at every party."""
        for r in self._others(self.main_group):
            self._send(tensor, r)
        return [
            tensor.data.clone() if r == self.rank else self._recv_into(torch.empty_like(tensor.data), r)
            for r in range(self.world_size)
        ]

    @_logging
    def broadcast(self, input, src, group=None, batched=False):
        """``src``'s tensor(s) into every member's ``input`` (filled in place, and returned)."""
        group = self._group(group)
        tensors = list(input) if batched else [input]
        if self.rank == src:
            for r in self._others(group):
                for t in tensors:
                    self._send(t, r, group)
        else:
            for t in tensors:
                self._recv_into(t, src, group)
        return input

    @_logging
    def barrier(self):
        """Wait until every party has reached the barrier."""
        self._barrier(self.main_group)

    @_logging
    def send_obj(self, obj, dst, group=None):
        """Send ``obj`` (tagged JSON: ``tls.encode_obj``'s types) to ``dst``."""
        group = self._group(group)
        self.mesh.send_obj(dst, group.channel, obj)

    @_logging
    def recv_obj(self, src, group=None):
        """The next object from ``src``."""
        group = self._group(group)
        return self.mesh.take_obj(src, group.channel)

    @_logging
    def broadcast_obj(self, obj, src, group=None):
        """``src``'s ``obj`` at every member of the group."""
        group = self._group(group)
        if self.rank == src:
            for r in self._others(group):
                self.mesh.send_obj(r, group.channel, obj)
            return obj
        return self.mesh.take_obj(src, group.channel)

    def get_world_size(self) -> int:
        """The number of silo parties (the dealer is not counted, as in CrypTen)."""
        return self.world_size

    def get_rank(self) -> int:
        """This member's rank (the dealer's is the number of parties)."""
        return self.rank

    def get_ttp_rank(self) -> int:
        """The dealer's rank."""
        return self.world_size

    def set_name(self, name):
        """Set this party's name (CrypTen's file save and load)."""
        if not isinstance(name, str):
            raise TypeError(f"a party's name is text, not {type(name).__name__}")
        self._name = name

    def get_name(self):
        """This party's name."""
        return self._name

    def get_distributed_backend(self) -> str:
        """What carries the traffic."""
        return "tls"

    # ---- leaving ----
    def close(self) -> None:
        """Party 0 tells the dealer to stop (as CrypTen's shutdown does); every connection is closed."""
        try:
            if self.rank == 0 and self.mesh.failure() is None:
                self.mesh.send_obj(self.get_ttp_rank(), tls.TTP, "terminate")
        except (RuntimeError, ValueError):
            pass  # the dealer is gone already
        finally:
            self.mesh.close()


def _combine(op) -> Callable[..., Any]:
    try:
        return _COMBINE[op]
    except KeyError:
        raise ValueError(f"reductions with {op} are not supported over MPC here") from None


def _same(received: torch.Tensor, like: torch.Tensor, who: str) -> torch.Tensor:
    if received.dtype != like.dtype or received.shape != like.shape:
        if received.dtype == like.dtype and received.numel() == like.numel():
            return received.reshape(like.shape)
        raise RuntimeError(
            f"protocol error: {who} sent {list(received.shape)} {received.dtype} where {list(like.shape)} "
            f"{like.dtype} was due"
        )
    return received


# ---- installing into CrypTen ---------------------------------------------------------------------

_SAVED: dict[str, Any] = {}
_REPLACED = ("get", "is_initialized", "uninit", "_init")


def install(inst: TLSCommunicator) -> None:
    """Make ``inst`` the communicator every CrypTen module gets from ``crypten.communicator.get()``."""
    import crypten.communicator as comm

    if not _SAVED:
        _SAVED.update({name: getattr(comm, name) for name in _REPLACED})
    TLSCommunicator.instance = inst
    comm.get = TLSCommunicator.get
    comm.is_initialized = TLSCommunicator.is_initialized
    comm.uninit = TLSCommunicator.shutdown
    comm._init = _no_init


def uninstall() -> None:
    """Restore CrypTen's own communicator functions; forget the installed communicator."""
    import crypten.communicator as comm

    for name, value in _SAVED.items():
        setattr(comm, name, value)
    _SAVED.clear()
    TLSCommunicator.instance = None


def current() -> TLSCommunicator:
    """The installed communicator (``RuntimeError`` if none)."""
    return TLSCommunicator.get()


def _no_init(*args, **kwargs) -> None:
    raise RuntimeError("join the MPC world with privsyn_fed.mpc.world.join, not crypten.init")


_CLIENT_CLASS: type | None = None


def start_ttp_client() -> None:
    """Set up CrypTen's dealer client (a party's side of the TTP): its generator seeded by the
    dealer over the mesh, then the barrier of everyone with the dealer."""
    global _CLIENT_CLASS
    from crypten.mpc.provider.ttp_provider import TTPClient

    if _CLIENT_CLASS is None:
        base = getattr(TTPClient, "_TTPClient__TTPClient")

        class MeshTTPClient(base):  # type: ignore[misc, valid-type]
            """CrypTen's TTP client with its seed and barrier over the mesh."""

            def _setup_generators(self):
                c = current()
                seed = torch.empty(size=(), dtype=torch.long)
                c._recv_into(seed, c.get_ttp_rank(), self.ttp_group)
                c._barrier(self.ttp_group)
                self.generator = torch.Generator(device="cpu")
                self.generator.manual_seed(seed.item())
                self.generator_cuda = None

        _CLIENT_CLASS = MeshTTPClient
    setattr(TTPClient, "_TTPClient__instance", _CLIENT_CLASS())
