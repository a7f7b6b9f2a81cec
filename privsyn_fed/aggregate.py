"""Aggregators: how per-silo statistics are combined, and what each silo sends and receives.

A federated method never reads another silo's rows. It asks an aggregator for the **sum over a
set of silos** of a statistic each silo computes on its own rows (``request(silo)``), and it
broadcasts public values (the model) to silos. The aggregator returns the exact sum: the method
then passes it through a mechanism that charges the ledger before anything is released.

``InProcessAggregator`` is the trusted aggregator that every simulation uses: all silos live in
this process. Each payload is really serialised (numpy's ``.npy`` wire format) and deserialised,
and its size is recorded per silo and per round, so communication is measured, not computed.
``mpc.aggregator.MPCAggregator`` (secret sharing among silo processes) implements the same
interface, plus ``noisy_sum`` (noise added on shares) and ``pool`` (DistAIM's pool as shares).
"""
from __future__ import annotations

import io
from collections import defaultdict
from typing import Callable, Iterable, Mapping, Protocol, Sequence

import numpy as np

from .silo import Silo

Request = Callable[[Silo], np.ndarray]


def to_wire(array: np.ndarray) -> bytes:
    """The bytes a party sends for one array (``.npy``: a short header, then the raw values)."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def from_wire(payload: bytes) -> np.ndarray:
    return np.load(io.BytesIO(payload), allow_pickle=False)


class Aggregator(Protocol):
    """What methods may ask of the silos."""

    #: Recorded as ``where`` on the ledger entries of noise added to this aggregator's sums.
    where: str
    #: Who sees the exact sums; stated in the ledger's threat model.
    threat_model: str

    @property
    def silo_names(self) -> list[str]: ...

    def sum(self, request: Request, among: Sequence[str], *, round: int, label: str) -> np.ndarray:
        """``sum_{k in among} request(silo_k)``: int64 for counts, float64 otherwise."""

    def broadcast(self, payload: Mapping[str, np.ndarray], to: Sequence[str], *, round: int) -> None:
        """Send public arrays (the model, the proxy) to the silos ``to``."""

    def local(self, name: str) -> Silo:
        """The silo ``name``, for computation that stays on that silo (a local selection)."""


class Traffic:
    """Bytes sent (silo to aggregator) and received (aggregator to silo), per silo and round."""

    def __init__(self) -> None:
        self.sent: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.received: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))

    def add_sent(self, silo: str, round: int, nbytes: int) -> None:
        self.sent[silo][round] += nbytes

    def add_received(self, silo: str, round: int, nbytes: int) -> None:
        self.received[silo][round] += nbytes

    def per_silo(self, names: Iterable[str]) -> dict[str, dict[str, int]]:
        return {n: {"sent": sum(self.sent[n].values()), "received": sum(self.received[n].values())}
                for n in names}

    def summary(self, names: Sequence[str]) -> dict[str, float]:
        """Totals, and the mean over silos that took part at least once (bytes)."""
        per = self.per_silo(names)
        active = [v for v in per.values() if v["sent"] or v["received"]]
        total_sent = sum(v["sent"] for v in per.values())
        total_received = sum(v["received"] for v in per.values())
        return {"silos": len(names), "silos_active": len(active),
                "bytes_sent_total": total_sent, "bytes_received_total": total_received,
                "mean_bytes_sent_per_active_silo": total_sent / max(1, len(active)),
                "mean_bytes_received_per_active_silo": total_received / max(1, len(active)),
                "max_bytes_per_silo": max((v["sent"] + v["received"] for v in per.values()), default=0)}


class InProcessAggregator:
    """A trusted aggregator in this process: sums the silos' serialised answers in the clear."""

    where = "aggregator"
    threat_model = ("a trusted aggregator (in this process) receives each sampled silo's statistics "
                    "and sees their exact sum before adding the noise; the released values are DP "
                    "against everyone else, not against the aggregator")

    def __init__(self, silos: Sequence[Silo]):
        names = [s.name for s in silos]
        if len(set(names)) != len(names):
            raise ValueError("silo names must be distinct")
        self._silos = {s.name: s for s in silos}
        self.traffic = Traffic()

    @property
    def silo_names(self) -> list[str]:
        return list(self._silos)

    def local(self, name: str) -> Silo:
        return self._silos[name]

    def sum(self, request: Request, among: Sequence[str], *, round: int, label: str) -> np.ndarray:
        if not among:
            raise ValueError(f"{label}: no silo to sum over")
        total = None
        for name in among:
            payload = to_wire(np.asarray(request(self._silos[name])))
            self.traffic.add_sent(name, round, len(payload))
            value = from_wire(payload)
            value = value.astype(np.int64 if np.issubdtype(value.dtype, np.integer) else np.float64)
            total = value if total is None else total + value
        return total

    def broadcast(self, payload: Mapping[str, np.ndarray], to: Sequence[str], *, round: int) -> None:
        nbytes = sum(len(to_wire(np.asarray(v))) for v in payload.values())
        for name in to:
            self.traffic.add_received(name, round, nbytes)


def traffic_summary(agg: Aggregator) -> dict[str, float] | None:
    """The aggregator's measured traffic over all silos, if it records any."""
    traffic = getattr(agg, "traffic", None)
    return traffic.summary(agg.silo_names) if traffic is not None else None
