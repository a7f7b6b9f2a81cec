"""Aggregators: how per-silo statistics are combined, and what each silo sends and receives.

A federated method never reads a silo's rows. It asks its aggregator, through the ``Aggregator``
protocol below, for noisy results only: noisy sums over sets of silos (``noisy_sum``, several of
them at once with ``batch``), selections and measurements each silo makes on its own rows
(``local_select``, ``local_noisy_answers``), and DistAIM's pool (``pool``). Every one of those is
called by ``mechanisms``, which charges the ledger first; the aggregator is the noise backend.

``InProcessAggregator`` is the trusted aggregator that every simulation uses: all silos live in
this process. Each payload is really serialised (numpy's ``.npy`` wire format) and deserialised,
and its size is recorded per silo and per round, so communication is measured, not computed.
``mpc.aggregator.MPCAggregator`` (secret sharing among silo processes) implements the same
protocol with the noise added on shares.

An exact sum exists only as ``open_exact_sum_for_checks``: it is refused once a release run has
bound its accountant (``bind_release``), unless that run's ledger declares it non-private.
"""

from __future__ import annotations

import io
from collections import defaultdict
from typing import Any, Iterable, Mapping, Protocol, Sequence

import numpy as np

from ..accounting import PartiesNoise
from ..noise import NoiseSource, add_gaussian
from ..schema import Schema
from ..silo import ConcatQuery, MaskedQuery, Query, Silo, aim_score, concat
from .pool import Pool


def to_wire(array: np.ndarray) -> bytes:
    """The bytes a party sends for one array (``.npy``: a short header, then the raw values)."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def from_wire(payload: bytes) -> np.ndarray:
    """The array ``to_wire`` encoded."""
    return np.load(io.BytesIO(payload), allow_pickle=False)


class Aggregator(Protocol):
    """Everything a method may ask of the silos (through ``mechanisms``, for anything noisy)."""

    #: Recorded as ``where`` on the ledger entries of noise added to this aggregator's sums.
    where: str
    #: Who sees what; stated in the ledger's threat model.
    threat_model: str
    #: The public schema every silo was read with.
    schema: Schema
    #: Whether sums are computed on secret shares (no process sees an exact sum).
    secure: bool
    #: Noise drawn by each party and summed (None: one sampler draws it); a noisy sum's ``sigma``
    #: is then each party's, and the mechanisms cost the sum (``accounting.distributed``).
    parties_noise: PartiesNoise | None

    @property
    def silo_names(self) -> list[str]:
        """The silos, in a fixed order."""

    def bind_release(self, accountant: Any) -> None:
        """Bind a release's accountant (None when it ends): while one is bound, exact sums are
        refused unless its ledger declares the run non-private."""

    def broadcast(self, payload: Mapping[str, np.ndarray], to: Sequence[str], *, round_index: int) -> None:
        """Send public arrays (the model, the proxy, the encoding) to the silos ``to``."""

    def batch(self, parts: Sequence[tuple[Query, Sequence[str]]]) -> tuple[Query, list[str]]:
        """One query for several ``(query, silos)`` parts, each answered only by its own silos."""

    def rounding_l2(self, query: Query) -> float:
        """Extra L2 sensitivity that this backend's rounding of ``query``'s answers adds."""

    def noise_grid(self, query: Query) -> float:
        """The step of the lattice the parties' noise lies on for ``query`` (1 for counts)."""

    def noise_fields(self, noise: NoiseSource, *, local: bool = False) -> dict[str, Any]:
        """Ledger fields saying where the noise comes from (``local``: drawn by each silo)."""

    def noisy_sum(
        self, query: Query, among: Sequence[str], *, sigma: float, noise: NoiseSource, round_index: int, label: str
    ) -> np.ndarray:
        """``sum_{k in among} query(silo_k) + N(0, sigma^2)`` per cell; the exact sum is never released."""

    def local_select(
        self, queries: Mapping[str, Query], *, scale: float, noise: NoiseSource, round_index: int
    ) -> dict[str, int]:
        """Each silo ``k`` takes the noisy max (Gumbel ``scale``) of its own scores ``queries[k]``."""

    def local_noisy_answers(
        self, queries: Mapping[str, Query], *, sigma: float, noise: NoiseSource, round_index: int
    ) -> dict[str, np.ndarray]:
        """Each silo ``k`` adds ``N(0, sigma^2)`` to its own answer to ``queries[k]``."""

    def pool(self, cliques: Mapping[tuple[str, ...], Sequence[int]]) -> Pool:
        """An empty pool of answers to the candidate marginals ``cliques`` (name -> columns)."""

    def open_exact_sum_for_checks(
        self, query: Query, among: Sequence[str], *, label: str, round_index: int = 0
    ) -> np.ndarray:
        """The exact sum, for checks and non-private test modes only (refused in a private release)."""

    def ledger_details(self, noise: NoiseSource) -> dict[str, Any]:
        """Fields of the ledger's ``details`` that describe this aggregator and its noise."""

    def traffic_summary(self) -> dict[str, Any] | None:
        """Measured communication (bytes per silo, rounds), if this aggregator records it."""


def refuse_exact_sum_in_release(release: Any, label: str) -> None:
    """Raise unless no release is bound or the bound release is declared non-private."""
    if release is not None and getattr(release, "non_private", None) is None:
        raise PermissionError(
            f"{label}: an exact sum is refused during a private release; only noisy results leave the aggregator"
        )


def batched(parts: Sequence[tuple[Query, Sequence[str]]], names: Sequence[str]) -> tuple[Query, list[str]]:
    """``concat`` of the parts and the union of their silos; each part is a ``MaskedQuery`` over its
    silos' ranks (positions in ``names``) unless every part has the same silos."""
    union = [n for n in names if any(n in among for _, among in parts)]
    if all(sorted(among) == sorted(union) for _, among in parts):
        return concat([q for q, _ in parts]), union
    rank = {n: r for r, n in enumerate(names)}
    return concat([MaskedQuery(q, tuple(sorted(rank[n] for n in among))) for q, among in parts]), union


def check_declared(query: Any, label: str) -> Query:
    """``query`` if it is a declared query (``privsyn_fed.silo.queries``); a ``TypeError`` otherwise."""
    if not isinstance(query, Query):
        raise TypeError(f"{label}: only declared queries (privsyn_fed.silo.queries) can be sent to silos")
    return query


class Traffic:
    """Bytes sent (silo to aggregator) and received (aggregator to silo), per silo and round."""

    def __init__(self) -> None:
        self.sent: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.received: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))

    def add_sent(self, silo: str, round_index: int, nbytes: int) -> None:
        """Count ``nbytes`` sent by ``silo`` to the aggregator in round ``round_index``."""
        self.sent[silo][round_index] += nbytes

    def add_received(self, silo: str, round_index: int, nbytes: int) -> None:
        """Count ``nbytes`` received by ``silo`` from the aggregator in round ``round_index``."""
        self.received[silo][round_index] += nbytes

    def per_silo(self, names: Iterable[str]) -> dict[str, dict[str, int]]:
        """Total bytes sent and received by each silo."""
        return {n: {"sent": sum(self.sent[n].values()), "received": sum(self.received[n].values())} for n in names}

    def summary(self, names: Sequence[str]) -> dict[str, float]:
        """Totals, and the mean over silos that took part at least once (bytes)."""
        per = self.per_silo(names)
        active = [v for v in per.values() if v["sent"] or v["received"]]
        total_sent = sum(v["sent"] for v in per.values())
        total_received = sum(v["received"] for v in per.values())
        return {
            "silos": len(names),
            "silos_active": len(active),
            "bytes_sent_total": total_sent,
            "bytes_received_total": total_received,
            "mean_bytes_sent_per_active_silo": total_sent / max(1, len(active)),
            "mean_bytes_received_per_active_silo": total_received / max(1, len(active)),
            "max_bytes_per_silo": max((v["sent"] + v["received"] for v in per.values()), default=0),
        }


class InProcessAggregator:
    """A trusted aggregator in this process: sums the silos' serialised answers in the clear,
    then adds the noise it is handed."""

    where = "aggregator"
    secure = False
    parties_noise: PartiesNoise | None = None
    threat_model = (
        "a trusted aggregator (in this process) receives each sampled silo's statistics "
        "and sees their exact sum before adding the noise; the released values are DP "
        "against everyone else, not against the aggregator"
    )

    def __init__(self, silos: Sequence[Silo]):
        names = [s.name for s in silos]
        if len(set(names)) != len(names):
            raise ValueError("silo names must be distinct")
        if not silos:
            raise ValueError("an aggregator needs at least one silo")
        self._silos = {s.name: s for s in silos}
        self.schema = silos[0].schema
        self.traffic = Traffic()
        self.release: Any = None

    @property
    def silo_names(self) -> list[str]:
        """The silos' names, in the order they were given."""
        return list(self._silos)

    def bind_release(self, accountant: Any) -> None:
        """Bind a release's accountant (None unbinds); exact sums are then refused unless it is non-private."""
        self.release = accountant

    def broadcast(self, payload: Mapping[str, np.ndarray], to: Sequence[str], *, round_index: int) -> None:
        """Count ``payload``'s serialised bytes as received by each silo in ``to``; in-process, nothing travels."""
        nbytes = sum(len(to_wire(np.asarray(v))) for v in payload.values())
        for name in to:
            self.traffic.add_received(name, round_index, nbytes)

    def batch(self, parts: Sequence[tuple[Query, Sequence[str]]]) -> tuple[Query, list[str]]:
        """``batched`` over this aggregator's silos."""
        return batched(parts, self.silo_names)

    def rounding_l2(self, query: Query) -> float:
        """0: answers are summed exactly (int64 or float64), never rounded."""
        return 0.0  # answers are summed exactly, in float64 or int64

    def noise_grid(self, query: Query) -> float:
        """1: unused, as one sampler draws the noise here (``parties_noise`` is None)."""
        return 1.0

    def noise_fields(self, noise: NoiseSource, *, local: bool = False) -> dict[str, Any]:
        """``{"sampler": noise.name}``: local or not, the noise is drawn in this process."""
        return {"sampler": noise.name}

    def noisy_sum(
        self, query: Query, among: Sequence[str], *, sigma: float, noise: NoiseSource, round_index: int, label: str
    ) -> np.ndarray:
        """Sum the silos' answers in the clear, then add ``N(0, sigma^2)`` from ``noise`` (discrete for counts)."""
        return add_gaussian(noise, self._exact_sum(query, among, round_index, label), sigma)

    def local_select(
        self, queries: Mapping[str, Query], *, scale: float, noise: NoiseSource, round_index: int
    ) -> dict[str, int]:
        """Each silo's ``noise.noisy_argmax`` of its own scores (Gumbel ``scale``), drawn in this process."""
        out = {}
        for name, query in queries.items():
            scores = np.asarray(check_declared(query, "local selection")(self._silos[name]), dtype=float)
            if scores.size == 0 or not np.all(np.isfinite(scores)):
                raise ValueError(f"{name}: a selection needs a non-empty vector of finite scores")
            out[name] = noise.noisy_argmax(scores, scale)
        return out

    def local_noisy_answers(
        self, queries: Mapping[str, Query], *, sigma: float, noise: NoiseSource, round_index: int
    ) -> dict[str, np.ndarray]:
        """Each silo's own answer plus ``N(0, sigma^2)`` from ``noise`` (discrete for counts)."""
        return {
            name: add_gaussian(noise, np.asarray(check_declared(q, "local answer")(self._silos[name])), sigma)
            for name, q in queries.items()
        }

    def pool(self, cliques: Mapping[tuple[str, ...], Sequence[int]]) -> Pool:
        """An empty pool whose answers are kept in the clear here (``PlainPoolStorage``)."""
        return Pool(cliques, self.schema.shape, lambda length: PlainPoolStorage(self))

    def open_exact_sum_for_checks(
        self, query: Query, among: Sequence[str], *, label: str, round_index: int = 0
    ) -> np.ndarray:
        """The exact sum in the clear; refused while a private release is bound."""
        refuse_exact_sum_in_release(self.release, label)
        return self._exact_sum(query, among, round_index, label)

    def ledger_details(self, noise: NoiseSource) -> dict[str, Any]:
        """``details.noise`` of the ledger: the noise source's name."""
        return {"noise": noise.name}

    def traffic_summary(self) -> dict[str, Any] | None:
        """The measured bytes of every silo (``Traffic.summary``)."""
        return self.traffic.summary(self.silo_names)

    def _exact_sum(self, query: Query, among: Sequence[str], round_index: int, label: str) -> np.ndarray:
        """``sum_{k in among} query(silo_k)`` (a masked part over its own silos only): int64 for
        counts, float64 otherwise. Each silo's answer to each part travels as one payload."""
        if not among:
            raise ValueError(f"{label}: no silo to sum over")
        check_declared(query, label)
        parts = query.parts if isinstance(query, ConcatQuery) else (query,)
        sums = []
        for part in parts:
            inner, silos = part, among
            if isinstance(part, MaskedQuery):
                inner, silos = part.query, [self.silo_names[r] for r in part.ranks]
            sums.append(self._sum_over(inner, silos, round_index))
        return np.concatenate([s.astype(float) for s in sums]) if query.real else np.concatenate(sums)

    def _sum_over(self, query: Query, among: Sequence[str], round_index: int) -> np.ndarray:
        total = None
        for name in among:
            payload = to_wire(np.asarray(query(self._silos[name])))
            self.traffic.add_sent(name, round_index, len(payload))
            value = from_wire(payload)
            value = value.astype(np.int64 if np.issubdtype(value.dtype, np.integer) else np.float64)
            total = value if total is None else total + value
        return total


class PlainPoolStorage:
    """A pool's answers in the clear, inside a trusted in-process aggregator."""

    def __init__(self, agg: InProcessAggregator):
        self.agg = agg
        self.where = agg.where
        self.parties_noise: PartiesNoise | None = None
        self.answers: np.ndarray | None = None

    def accumulate(self, query: Query, silos: Sequence[str], round_index: int) -> None:
        """Add the exact sum of ``silos``' answers to ``query`` to the pooled answers."""
        total = self.agg._exact_sum(query, silos, round_index, "candidate answers")
        self.answers = total if self.answers is None else self.answers + total

    def selection(self, epsilon: float, sensitivity: float, noise: NoiseSource) -> tuple[float, dict[str, Any]]:
        """Gumbel scale ``2 sensitivity / epsilon`` for ``noise.noisy_argmax``; no fixed-point rounding here."""
        return 2.0 * sensitivity / epsilon, {"sampler": noise.name}

    def measurement_fields(self, noise: NoiseSource) -> dict[str, Any]:
        """``{"sampler": noise.name}``: the noise is drawn in the clear by this aggregator."""
        return {"sampler": noise.name}

    def select(
        self,
        pool: Pool,
        cands: Mapping[tuple[str, ...], float],
        model_marginals: Mapping[tuple[str, ...], np.ndarray],
        *,
        sigma: float,
        scale: float,
        noise: NoiseSource,
        draws: int,
    ) -> list[int]:
        """AIM's score against ``N_t p_r`` (``N_t`` the pool's true size, never released)."""
        answers = self._answers()
        n_pool = int(answers[pool.cells(pool.keys[0])].sum())
        scores = np.array(
            [
                aim_score(w, answers[pool.cells(q)], n_pool * np.ravel(model_marginals[q]), sigma)
                for q, w in cands.items()
            ]
        )
        if scores.size == 0 or not np.all(np.isfinite(scores)):
            raise ValueError("a selection needs a non-empty vector of finite scores")
        return [noise.noisy_argmax(scores, scale) for _ in range(draws)]

    def measure(self, cells: np.ndarray, sigma: float, noise: NoiseSource) -> np.ndarray:
        """``A[cells] + N(0, sigma^2)`` from ``noise``, in the clear (discrete for counts)."""
        return add_gaussian(noise, self._answers()[cells], sigma)

    def _answers(self) -> np.ndarray:
        if self.answers is None:
            raise ValueError("the pool is empty: no silo has contributed yet")
        return self.answers
