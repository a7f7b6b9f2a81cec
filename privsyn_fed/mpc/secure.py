"""Secure sum, select and measure on integer shares (additive sharing over Z_{2^64}, CrypTen).

Every party calls these functions in the same order with the same public arguments. Values are
shared with precision 0 (plain integers), so sums, public multiples and the comparisons inside
``abs`` and ``argmax`` are exact: no fixed-point rounding anywhere in the data path.

Secure select (DistAIM's exponential mechanism). With the pooled answers ``A`` (shared), the
pool size ``N = sum_j A_{r0 j}`` (shared, read off any candidate), public model marginals
``p_r`` floored to ``P_rj = floor(2^f p_rj)`` (so ``sum_j P_rj <= 2^f``), integer weights ``w_r``
and public offsets ``B_r = round(2^f sqrt(2/pi) sigma n_r)``:
    ``u_r = w_r (sum_j |2^f A_rj - N P_rj| - B_r)``,
which is ``2^f`` times AIM's score against ``P / 2^f``; adding one record moves it by at most
``w_r (2^f + sum_j P_rj) <= 2^f * 2 w_r``, so the sensitivity is ``2^f Delta`` with
``Delta = 2 max w`` (as in the clear). Parties ``0..t`` each add their own rounded Gumbel noise
to each score (scale ``b = 2^f 2 Delta / eps``; the sum ``K_r`` is known to no process), ties are
broken by index (``s_r = (u_r + K_r) R + r``), and only ``argmax_r s_r`` is opened (to party 0):
with one of those draws unknown to a coalition it is an exponential mechanism on shifted scores
(``accounting.distributed``).

Secure measure: ``A_r + Z`` with ``Z`` the sum of every party's own discrete Gaussian noise,
opened to party 0. The dealer deals only CrypTen's correlated randomness, never noise.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .grid import SCORE_BITS

if TYPE_CHECKING:  # torch and CrypTen (the MPC extra) are imported where shares are computed
    import torch


def _crypten():
    from .crypten_shim import import_crypten

    return import_crypten()


def rank() -> int:
    """This process's rank in CrypTen's communicator."""
    import crypten.communicator as comm

    return comm.get().get_rank()


def _from_shares(share: torch.Tensor):
    crypten = _crypten()
    return crypten.mpc.MPCTensor.from_shares(share, precision=0)


def share_sum(mine: np.ndarray | None, contributors: list[int], length: int):
    """``sum_{k in contributors} x_k`` as shares; party ``k`` passes its vector ``x_k`` (others None)."""
    import torch

    _crypten()
    from crypten.mpc.primitives import ArithmeticSharedTensor

    total = torch.zeros(length, dtype=torch.long)
    me = rank()
    for k in contributors:
        value = torch.from_numpy(np.asarray(mine, dtype=np.int64)) if k == me else None
        total += ArithmeticSharedTensor(value, size=(length,), precision=0, src=k).share
    return _from_shares(total)


def zeros(length: int):
    """Shares of the zero vector of ``length`` (every share is zero)."""
    import torch

    return _from_shares(torch.zeros(length, dtype=torch.long))


def parties_noise(noise, kind: str, length: int, parameter: float, parties: int | None = None):
    """Shares of the sum of the own noise of parties ``0..parties-1`` (all by default): each draws
    ``length`` values from its own ``noise`` (``gaussian`` with sigma, or ``gumbel`` with scale) and
    shares them; no process learns the sum. Every party calls this with the same public arguments."""
    contributors = list(range(world_size() if parties is None else parties))
    mine = None
    if rank() in contributors:
        mine = noise.gaussian(length, parameter) if kind == "gaussian" else noise.gumbel(length, parameter)
    return share_sum(mine, contributors, length)


def world_size() -> int:
    """The number of silo parties (the dealer is not one of them)."""
    import crypten.communicator as comm

    return comm.get().get_world_size()


def open_to_party0(x) -> np.ndarray | None:
    """Open shares to party 0 only (the others get None)."""
    value = x.get_plain_text(dst=0)
    return np.asarray(value.numpy(), dtype=np.int64) if rank() == 0 else None


def segment_sums(x, segment_ids: np.ndarray, segments: int):
    """``sum`` of ``x`` within each segment: local on the shares."""
    import torch

    out = torch.zeros(segments, dtype=torch.long)
    out.index_add_(0, torch.from_numpy(np.asarray(segment_ids, dtype=np.int64)), x.share)
    return _from_shares(out)


def gather(x, index: np.ndarray):
    """The entries of ``x`` at ``index``, as shares: local on the shares."""
    import torch

    return _from_shares(x.share[torch.from_numpy(np.asarray(index, dtype=np.int64))])


def add_public(x, value: np.ndarray):
    """``x + c`` for a public integer vector ``c``: party 0 adds it to its share."""
    import torch

    share = x.share.clone()
    if rank() == 0:
        share += torch.from_numpy(np.asarray(value, dtype=np.int64))
    return _from_shares(share)


def add_public_all(x, value: int):
    """``x + c`` for one public integer ``c`` added to every entry (party 0 adds it to its share)."""
    share = x.share.clone()
    if rank() == 0:
        share += int(value)
    return _from_shares(share)


def mul_public(x, value) -> Any:
    """``c * x`` for public integers ``c`` (elementwise): local, exact in the ring."""
    import torch

    c = torch.as_tensor(np.asarray(value, dtype=np.int64))
    return _from_shares(x.share * c)


def gumbel_scale(epsilon: float, sensitivity: float) -> float:
    """Gumbel scale in integer-score units: ``2^f * 2 Delta / eps``."""
    return math.ldexp(2.0 * sensitivity / epsilon, SCORE_BITS)


def secure_select(
    pool,
    cells: np.ndarray,
    segment_ids: np.ndarray,
    model: np.ndarray,
    weights: np.ndarray,
    offsets: np.ndarray,
    total_cells: np.ndarray,
    scale: float,
    noise,
    noise_parties: int,
    draws: int = 1,
) -> list[int] | None:
    """Exponential mechanism on the shared pool (module docstring); party 0 gets the indices.

    ``cells``: pool positions of the candidates' cells; ``segment_ids``: candidate of each;
    ``model``: ``P_rj`` per cell; ``total_cells``: pool positions of one candidate (for ``N``).
    ``draws`` independent selections share the scores, each with fresh noise; parties
    ``0..noise_parties-1`` each add a Gumbel of ``scale`` to every score.
    """
    R = len(weights)
    n_pool = segment_sums(gather(pool, total_cells), np.zeros(len(total_cells), dtype=np.int64), 1)
    x = mul_public(gather(pool, cells), np.full(len(cells), 1 << SCORE_BITS, dtype=np.int64))
    n_cells = _from_shares(n_pool.share.expand(len(cells)).clone())
    delta = x - mul_public(n_cells, model)
    s = segment_sums(delta * (1 - 2 * below_zero(delta)), segment_ids, R)  # |delta|
    u = mul_public(add_public(s, -np.asarray(offsets, dtype=np.int64)), weights)
    u_rows = _from_shares(u.share.unsqueeze(0).expand(draws, R).reshape(-1).clone())
    noisy = u_rows + parties_noise(noise, "gumbel", draws * R, scale, noise_parties)
    ranked = add_public(mul_public(noisy, np.full(draws * R, R, dtype=np.int64)), np.tile(np.arange(R), draws))
    winners = open_to_party0(argmax_of_distinct(_from_shares(ranked.share.reshape(draws, R))))
    if winners is None:
        return None
    if not np.all((winners >= 0) & (winners < R)):
        raise RuntimeError("secure argmax did not open one winner per draw")
    return [int(i) for i in winners]


def below_zero(x):
    """Shares of ``[x < 0]`` (0 or 1) for integer shares ``x``: CrypTen's comparison, with fewer
    sequential ANDs. The parties' ``n`` additive shares become XOR-shared binary summands (each
    party shares its own: no communication); carry-save adders turn three summands into two in one
    round of ANDs (``a ^ b ^ c`` and ``(a & b) ^ (c & (a ^ b)) << 1``), and one carry-lookahead
    adder adds the last two (seven rounds), whose top bit is the sign: 8 rounds for 3 parties
    where summing in a tree of adders takes 14."""
    from crypten.mpc.primitives import BinarySharedTensor, circuit
    from crypten.mpc.primitives.beaver import B2A_single_bit

    share = x.share
    parts = [BinarySharedTensor(share, src=k) for k in range(world_size())]
    while len(parts) > 2:
        a, b, c = parts[:3]
        a_b = a ^ b
        products = BinarySharedTensor.stack([a, c]) & BinarySharedTensor.stack([b, a_b])  # one round
        parts = [a_b ^ c, (products[0] ^ products[1]) << 1, *parts[3:]]
    total = circuit.add(parts[0], parts[1]) if len(parts) == 2 else parts[0]
    sign = B2A_single_bit((total >> 63) & 1)
    return _from_shares(sign.share)


def argmax_of_distinct(x):
    """Shares of ``argmax_r x[d, r]`` for each row ``d`` of distinct integers, in two comparison
    rounds whatever the row length ``R``: all ``R (R - 1)`` pairwise comparisons at once, then
    ``wins_r = #{s: x_s < x_r}``, whose one ``R - 1`` marks the maximum; the index is
    ``sum_r r [wins_r = R - 1]``. Only the index is opened later, never the comparisons."""
    import torch

    rows, R = x.share.shape
    if R == 1:
        return zeros(rows)
    share = x.share
    others = torch.stack([torch.roll(share, j, dims=1) for j in range(1, R)])  # x_{r-j}, j = 1..R-1
    below = below_zero(_from_shares(others - share.unsqueeze(0)))  # [x_{r-j} < x_r]
    wins = _from_shares(below.share.sum(0))
    is_max = 1 - below_zero(add_public_all(wins, -(R - 1)))  # wins_r >= R - 1
    index = is_max.share * torch.arange(R, dtype=torch.long)
    return _from_shares(index.sum(1))


def integer_scores(
    pool: np.ndarray,
    cells: np.ndarray,
    segment_ids: np.ndarray,
    model: np.ndarray,
    weights: np.ndarray,
    offsets: np.ndarray,
    total_cells: np.ndarray,
) -> np.ndarray:
    """The scores ``u_r`` that ``secure_select`` computes on shares, in the clear (for tests and
    the analysis: the exponential mechanism samples ``r`` with probability ~ ``exp(u_r / scale)``)."""
    pool = np.asarray(pool, dtype=np.int64)
    n = pool[total_cells].sum()
    delta = (pool[cells] << SCORE_BITS) - n * np.asarray(model, dtype=np.int64)
    s = np.bincount(segment_ids, weights=np.abs(delta), minlength=len(weights))
    return (np.round(s).astype(np.int64) - offsets) * weights


def secure_measure(pool, cells: np.ndarray, sigma: float, noise) -> np.ndarray | None:
    """``A[cells]`` plus every party's own ``N_Z(0, sigma^2)``, opened to party 0."""
    return open_to_party0(gather(pool, cells) + parties_noise(noise, "gaussian", len(cells), sigma))


def noisy_sum(mine: np.ndarray | None, contributors: list[int], length: int, sigma: float, noise) -> np.ndarray | None:
    """``sum_k x_k`` plus every party's own ``N_Z(0, sigma^2)``, opened to party 0; the exact sum
    is never opened."""
    return open_to_party0(share_sum(mine, contributors, length) + parties_noise(noise, "gaussian", length, sigma))
