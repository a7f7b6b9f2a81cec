"""Joining the MPC world: the TLS mesh, CrypTen set-up, the command channel and traffic counts.

Every process (party ``0..n-1`` and the dealer, rank ``n``) joins with the same federation file
(``federation``: the members, where each listens, the CA) and its own certificate and key
(``certs``), which name its role. ``join`` forms the mutually authenticated TLS 1.3 mesh
(``tls.Mesh``), installs CrypTen's communicator over it (``communicator``) and seeds CrypTen's
generators and its dealer client. There is no unencrypted mode, on one machine or across several.

Party 0 coordinates: it sends each step as a command (a JSON header plus int64/float64 arrays,
never pickles) to the others, who follow. Only public values travel in commands: cliques, model
marginals, noise scales.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..common import InputError, MPCError, first_line
from . import DEFAULT_TIMEOUT_S, certs
from . import federation as federation_file
from .crypten_shim import import_crypten

__all__ = ["DEFAULT_TIMEOUT_S", "MPCError", "Access", "Membership", "Channel", "membership", "join", "leave"]

# torch is imported only once it is needed (a member that cannot reach the others says so without
# loading it). Its C++ log is off unless the user sets TORCH_CPP_LOG_LEVEL: torch reads it when it
# loads, so import this module first.
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")

#: How a member without credentials is told to get them.
PROVISION = (
    "every MPC connection is TLS 1.3 with a certificate on both sides (there is no unencrypted mode): "
    "have the federation's certificates issued with `privsyn-fed federation init` and give this "
    "member --federation FILE --cert CERT.pem --key KEY.pem"
)


@dataclass(frozen=True)
class Access:
    """What a member was given to join: the federation file, its certificate and key, and
    optionally another address to listen on than the file's (``(host, port)``: behind NAT)."""

    federation: str | Path | None
    cert: str | Path | None = None
    key: str | Path | None = None
    listen: tuple[str, int] | None = None


@dataclass
class Membership:
    """One process's place in the MPC world: the federation, its rank (the dealer's is the number
    of parties), its credentials and the timeout of joining and of every exchange."""

    federation: federation_file.Federation
    rank: int
    credentials: certs.Credentials
    timeout_s: float = DEFAULT_TIMEOUT_S
    listen: tuple[str, int] | None = None

    @property
    def parties(self) -> int:
        """``n``, the silo parties."""
        return self.federation.parties


def membership(
    access: Access, *, rank: int | None = None, parties: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
) -> Membership:
    """Check what a member was given (``InputError``, one line naming the file at fault): the
    federation file, a certificate of its CA naming a member's role and organisation (the rank, if
    given, must be that role's), the certificate's key, and ``parties`` if given."""
    if access.federation is None:
        raise InputError(f"--federation FILE is needed: {PROVISION}")
    fed = federation_file.load(access.federation)
    if access.cert is None or access.key is None:
        raise InputError(f"--federation needs --cert and --key; {PROVISION}")
    creds = certs.load_credentials(access.cert, access.key)
    source = f"--cert {access.cert}"
    certs.check_issued_by(creds.cert_pem, fed.ca_pem, source)
    role = creds.identity.role
    mine = fed.rank_of(role)
    if mine is None:
        raise InputError(f"{source}: names {role}, not a member of federation {fed.name!r} ({fed.source})")
    if rank is not None and rank != mine:
        raise InputError(f"{source}: names {role}, but this member was started as rank {rank}")
    member = fed.members[mine]
    if creds.identity.organisation != member.organisation:
        raise InputError(
            f"{source}: names {role} of {creds.identity.organisation!r}, but {fed.source} gives "
            f"{member.organisation!r} for {role}"
        )
    if member.sha256 and creds.identity.sha256 != member.sha256:
        raise InputError(f"{source}: not the certificate {fed.source} pins for {role} (sha256 differs)")
    if parties is not None and parties != fed.parties:
        raise InputError(f"--parties {parties}, but {fed.source} has {fed.parties} silo parties")
    return Membership(fed, mine, creds, timeout_s, access.listen)


def configure():
    """CrypTen's configuration (TTP provider, traffic counting); returns crypten."""
    crypten = import_crypten()
    crypten.cfg.mpc.provider = "TTP"  # a dealer process; the trusted-first-party mode is never used
    crypten.cfg.communicator.verbose = True
    return crypten


def join(m: Membership):
    """Connect this member to every other (blocks until the mesh is complete or ``m.timeout_s``
    has passed: ``MPCError``), set up CrypTen over it; returns crypten."""
    from .tls import JoinError, Mesh

    mesh = Mesh(m.federation, m.rank, m.credentials, m.timeout_s, listen=m.listen)
    _switch_often()
    try:
        mesh.join()
    except JoinError as exc:
        _switch_often(False)
        raise cannot_join(m, str(exc)) from None
    _share_cores(m)
    try:
        crypten = configure()
        from .communicator import TLSCommunicator, install, start_ttp_client

        install(TLSCommunicator(mesh))
        if m.rank < m.parties:
            crypten._setup_prng()
            start_ttp_client()
    except RuntimeError as exc:
        leave()
        mesh.close(orderly=False)
        raise cannot_join(m, first_line(exc)) from None
    return crypten


#: Seconds between the interpreter's thread switches while a member is joined (Python's default is 0.005).
#: A reader thread takes the GIL once per TLS record (16 KiB) it decrypts; while the main thread
#: computes in Python, each take waits for a switch, so at the default a busy party received
#: 320 MB in 65 s instead of 0.3 s; at 1e-4 s, in 0.75 s.
SWITCH_INTERVAL_S = 1e-4
_saved_switch: list[float] = []


def _switch_often(on: bool = True) -> None:
    if on and not _saved_switch:
        _saved_switch.append(sys.getswitchinterval())
        sys.setswitchinterval(min(SWITCH_INTERVAL_S, _saved_switch[0]))
    elif not on and _saved_switch:
        sys.setswitchinterval(_saved_switch.pop())


_saved_threads: list[int] = []


def members_here(m: Membership) -> int:
    """How many members of ``m``'s federation listen on this member's host (all of them when
    every address is loopback: the local layout)."""
    fed = m.federation
    if fed.loopback:
        return len(fed.members)
    mine = fed.members[m.rank].host
    return sum(1 for member in fed.members if member.host == mine)


def torch_threads(m: Membership) -> int:
    """The torch threads a member uses: the cores it may run on divided among the members on its
    host (at least 1). Members that share cores with more threads than cores spend most of their
    time spinning at the end of parallel loops while a thread they wait for is not running."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // members_here(m))


def _share_cores(m: Membership | None) -> None:
    """Set torch's threads for ``m`` while it is joined (``None``: restore them); a user's own
    ``OMP_NUM_THREADS`` is left as it is."""
    if m is not None and not _saved_threads and "OMP_NUM_THREADS" not in os.environ:
        import torch

        _saved_threads.append(torch.get_num_threads())
        torch.set_num_threads(torch_threads(m))
    elif m is None and _saved_threads:
        import torch

        torch.set_num_threads(_saved_threads.pop())


def cannot_join(m: Membership, reason: str) -> MPCError:
    """The ``MPCError`` saying that this party (or the dealer) could not join the others, and why."""
    who = m.federation.who(m.rank)
    return MPCError(
        f"{who} could not join federation {m.federation.name!r} ({m.parties} parties and the dealer): {reason}"
    )


def leave() -> None:
    """Disconnect (party 0 also tells the dealer to stop), restore CrypTen's own communicator, and
    forget the dealer's client: a later ``join`` in this process sets it up with the new dealer."""
    if "privsyn_fed.mpc.communicator" not in sys.modules:
        _switch_often(False)
        _share_cores(None)
        return  # never joined: nothing to close
    from crypten.mpc.provider.ttp_provider import TTPClient

    from .communicator import TLSCommunicator, uninstall

    inst = TLSCommunicator.instance
    try:
        if inst is not None:
            inst.close()
    finally:
        uninstall()
        TTPClient.uninit()
        _switch_often(False)
        _share_cores(None)


def transport() -> str:
    """What carries this run's traffic, for the ledger."""
    from .communicator import TLSCommunicator

    inst = TLSCommunicator.instance
    name = f" of federation {inst.mesh.federation.name!r}" if inst is not None else ""
    return (
        f"TLS 1.3 between every pair of processes, mutually authenticated by certificates{name} "
        "(each naming its role: party-k or dealer)"
    )


class Channel:
    """Party 0 sends commands to parties ``1..n-1`` on the mesh's command channel.

    A command is one frame to each party: the JSON header followed by its int64/float64 arrays'
    raw bytes. ``bytes`` and ``broadcasts`` count the commands sent (or received) and their size."""

    def __init__(self):
        from .communicator import current

        self.comm = current()
        self.bytes = 0
        self.broadcasts = 0

    def send(self, header: dict, arrays: dict[str, np.ndarray] | None = None) -> None:
        """Send a command from party 0 to every other party: a JSON header and its int64/float64 arrays."""
        payload = _payload(header, arrays)
        for k in range(1, self.comm.get_world_size()):
            self.comm.send_command(payload, k)
        self.bytes += payload.numel()
        self.broadcasts += 1

    def send_each(self, messages: list[tuple[dict, dict[str, np.ndarray]]]) -> None:
        """Send party ``k`` its own command ``messages[k]`` (``k >= 1``; ``messages[0]`` is party 0's,
        not sent): what is sealed for one server goes to that server alone."""
        for k in range(1, self.comm.get_world_size()):
            payload = _payload(*messages[k])
            self.comm.send_command(payload, k)
            self.bytes += payload.numel()
        self.broadcasts += 1

    def receive(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The next command from party 0: its header and its arrays (int64 or float64 only)."""
        t = self.comm.recv_command(0)
        self.bytes += t.numel()
        self.broadcasts += 1
        if t.dtype.is_floating_point or t.element_size() != 1 or t.numel() < 8:
            raise MPCError("party 0 sent a command that is not one")
        payload = t.numpy().tobytes()
        size = int.from_bytes(payload[:8], "little")
        try:
            header = json.loads(payload[8 : 8 + size].decode())
            layout = header.pop("_arrays")
        except (ValueError, KeyError, AttributeError, RecursionError):
            raise MPCError("party 0 sent a command that is not JSON with its arrays' layout") from None
        arrays, offset = {}, 8 + size
        for name, dtype, shape in layout:
            if dtype not in ("int64", "float64"):
                raise MPCError(f"unexpected array type {dtype!r} in a command")
            count = int(np.prod(shape, dtype=np.int64))
            if offset + 8 * count > len(payload):
                raise MPCError("party 0 sent a command shorter than its arrays")
            arrays[name] = np.frombuffer(payload, dtype=dtype, count=count, offset=offset).reshape(shape).copy()
            offset += count * 8
        return header, arrays


def _payload(header: dict, arrays: dict[str, np.ndarray] | None):
    """One command as it travels: the JSON header's length (8 bytes), the header, the arrays' bytes."""
    import torch

    arrays = {k: np.ascontiguousarray(v) for k, v in (arrays or {}).items()}
    odd = [k for k, v in arrays.items() if v.dtype not in (np.int64, np.float64)]
    if odd:
        raise TypeError(f"command arrays must be int64 or float64: {', '.join(odd)}")
    header = {**header, "_arrays": [[k, str(v.dtype), list(v.shape)] for k, v in arrays.items()]}
    raw = json.dumps(header).encode()
    size = len(raw).to_bytes(8, "little")
    return torch.frombuffer(bytearray(size + raw + b"".join(v.tobytes() for v in arrays.values())), dtype=torch.uint8)


def traffic() -> dict[str, int]:
    """This party's communication so far, as CrypTen counts it (rounds and bytes it sent)."""
    import crypten.communicator as comm

    stats = comm.get().get_communication_stats()
    return {"rounds": int(stats["rounds"]), "bytes": int(stats["bytes"])}


def gather_to_party0(values: list[float]) -> list[list[float]] | None:
    """Every party sends ``values`` (same length) to party 0; party 0 gets one list per party."""
    import torch

    from .communicator import current

    comm = current()
    t = torch.tensor(values, dtype=torch.float64)
    if comm.get_rank() != 0:
        comm.send_command(t, 0)
        return None
    rows = [list(map(float, values))]
    for k in range(1, comm.get_world_size()):
        got = comm.recv_command(k)
        if got.dtype != torch.float64 or got.numel() != len(values):
            raise MPCError(f"party {k} replied with {got.numel()} {got.dtype} values where {len(values)} were due")
        rows.append(got.tolist())
    return rows


def gather_bytes(channel: Channel, raw: bytes) -> list[bytes] | None:
    """Every party sends ``raw`` (of any length) to party 0, which gets one per party (the others
    None): the lengths first, then party 0 tells every party the longest, and each sends its bytes
    zero-padded to it."""
    from .communicator import current

    lengths = gather_to_party0([float(len(raw))])
    if current().get_rank() == 0:
        assert lengths is not None
        longest = int(max(row[0] for row in lengths))
        channel.send({"op": "bytes", "length": longest})
    else:
        cmd, _ = channel.receive()
        if cmd.get("op") != "bytes" or isinstance(cmd.get("length"), bool) or not isinstance(cmd.get("length"), int):
            raise MPCError(f"party 0 sent {cmd.get('op')!r} where it owed the length of the replies")
        longest = cmd["length"]
    if len(raw) > longest:
        raise MPCError(f"party 0 asked for {longest} bytes where this party has {len(raw)}")
    rows = gather_to_party0([float(b) for b in raw.ljust(longest, b"\0")] or [0.0])
    if rows is None or lengths is None:
        return None
    return [bytes(int(b) for b in row[: int(n[0])]) for row, n in zip(rows, lengths)]
