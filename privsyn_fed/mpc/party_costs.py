"""What each step of a release costs a silo party's rows, as the party itself works it out.

Party 0 charges its ledger for every step; a party that took its word for it would answer
whatever party 0 asked. So every command that touches this party's rows is costed here, by the
party, from public facts it checks itself, before it answers (``party_ledger`` charges the cost
to the party's own accountant through ``mechanisms``, the one module that charges a ledger):

* a noisy sum (``noisy_sum``): the L2 sensitivity one record of this silo has on the answer it
  shares (``own_rows``: ``sqrt(m + sum B^4)`` for ``m`` count marginals and second moments clipped
  to norm ``B``, plus the grid rounding of real answers; zero when it does not contribute), at the
  per-party sigma party 0 states, costed by ``accounting.distributed`` over the request's
  ``n - t`` honest parties;
* DistAIM's pooled selection (``select``): the score's sensitivity recomputed from the arrays that
  the party itself scores with (weights, the model's integer marginals, how often a cell of its
  pool appears), ``eps = 2^f 2 Delta / b + 4 / b`` from the Gumbel scale ``b`` it is given (the
  rounding slack included), each draw ``eps^2 / 8``; ``t + 1`` parties must add Gumbels;
* DistAIM's pooled measurement (``measure``): sensitivity ``sqrt`` of the cells one record can be
  in, at the stated sigma, as a noisy sum;
* FLAIM's selection in the silo (``local_select``): ``eps = 2 Delta / scale`` with ``Delta`` of the
  scores it computes (``2 max w``, ``4 max w`` with the heterogeneity proxy), ``eps^2 / 8``.
With a privacy unit in the request (K rows in each of up to M silos), this party's silo keeps at
most K rows per unit and every sensitivity above is multiplied by ``K M``, as party 0's ledger
records them (``ledger.UnitAccountant``).
A step of another method than the accepted one, an exact ``sum`` and a sigma below half a grid
step are refused (``policy.Refused``); the pool takes this silo's answers once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..silo import ConcatQuery, LocalScoresQuery, MarginalsQuery, MaskedQuery, NumericHistogramQuery, SecondMomentsQuery
from .grid import LOCAL_SAMPLER, REAL_BITS, SCORE_BITS, grid_rounding_l2
from .noise import gumbel_rounding_slack
from .policy import ONE_WAY_SUMS, SUM_KINDS, Refused
from .request import ReleaseRequest

#: Caps on the public integers of a secure selection: beyond them a score could wrap around the ring.
MAX_WEIGHT = 1 << 16
MAX_OFFSET = 1 << 48
MAX_DRAWS = 1 << 20


@dataclass
class Charge:
    """One mechanism a step runs over this party's rows, as the party costs it."""

    mechanism: str  # gaussian or exponential
    query: str
    sensitivity: float
    scale: float  # the sigma of each party's noise, or the epsilon of one selection
    where: str = "mpc"
    cells: int = 0
    grid: float = 1.0
    draws: int = 1
    fields: dict[str, Any] = field(default_factory=dict)
    #: A thresholded histogram of values drawn in the party's own process (a DP schema draft's).
    threshold: float | None = None


@dataclass
class PoolState:
    """What a party knows of DistAIM's shared pool: its length, the sizes of its cliques (from the
    query that filled it) and whether this silo's answers are in it."""

    length: int
    sizes: list[int] | None = None
    mine: bool = False

    def clique_of(self) -> np.ndarray:
        """The clique of each of the pool's cells."""
        assert self.sizes is not None
        return np.repeat(np.arange(len(self.sizes)), self.sizes)


def _kind(q: Any) -> str:
    kinds = {
        MarginalsQuery: "marginals",
        NumericHistogramQuery: "numeric_histogram",
        SecondMomentsQuery: "second_moments",
        ConcatQuery: "concat",
        MaskedQuery: "masked",
        LocalScoresQuery: "local_scores",
    }
    return kinds.get(type(q), type(q).__name__)


def _check_columns(cliques: Sequence[Sequence[int]], schema) -> None:
    d = len(schema.columns)
    for clique in cliques:
        if any(not 0 <= int(i) < d for i in clique) or len(set(clique)) != len(clique):
            raise Refused(f"a clique {tuple(clique)} names columns outside the schema or twice")


def own_rows(q: Any, schema, rank: int, method: str | None, target: int | None = None) -> tuple[int, list[float]]:
    """``(m, bounds)``: one record of this party's silo is in ``m`` count cells of the answer to ``q``
    (one per marginal or histogram) and in one clipped second-moment sum per bound in ``bounds``;
    ``method`` (None: any) limits the kinds of query accepted (and the release's ``target`` column
    adds its 2-ways to those of a method that sums 1-ways only). ``Refused`` for any other query."""
    kind = _kind(q)
    if method is not None and kind not in SUM_KINDS[method]:
        raise Refused(f"{method} sends no noisy sum of {kind.replace('_', ' ')} queries")
    if isinstance(q, MarginalsQuery):
        _check_columns(q.cliques, schema)
        if method in ONE_WAY_SUMS and any(len(c) > 2 or len(c) == 2 and target not in c for c in q.cliques):
            raise Refused(
                f"{method} sums row totals, 1-way marginals and its target's 2-ways only, not other marginals "
                "over several columns"
            )
        return len(q.cliques), []
    if isinstance(q, NumericHistogramQuery):
        if not (0 <= q.column < len(schema.columns) and schema.columns[q.column].type == "numeric"):
            raise Refused("a numeric histogram of a column that is not numeric")
        if not 1 <= q.refine <= 64:
            raise Refused(f"a numeric histogram split {q.refine} ways")
        return 1, []
    if isinstance(q, SecondMomentsQuery):
        bound = float(q.encoding.bound)
        if not (math.isfinite(bound) and bound > 0):
            raise Refused("second moments with a clipping bound that is not a positive number")
        return 0, [bound]
    if isinstance(q, ConcatQuery):
        m, bounds = 0, list[float]()
        for part in q.parts:
            pm, pb = own_rows(part, schema, rank, method, target)
            m, bounds = m + pm, bounds + pb
        return m, bounds
    if isinstance(q, MaskedQuery):
        return own_rows(q.query, schema, rank, method, target) if rank in q.ranks else (0, [])
    raise Refused(f"a {kind.replace('_', ' ')} query is never summed")


def _among(raw: Any, parties: int) -> list[int]:
    if not isinstance(raw, list) or not raw or any(isinstance(r, bool) or not isinstance(r, int) for r in raw):
        raise Refused("the command does not list the parties that answer it")
    if len(set(raw)) != len(raw) or not all(0 <= r < parties for r in raw):
        raise Refused(f"the command lists parties {raw} of {parties}")
    return sorted(raw)


def _positive(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise Refused(f"{what} must be a positive number, not {value!r}")
    return float(value)


def _label(cmd: dict, fallback: str) -> str:
    text = cmd.get("label")
    return " ".join(text.split())[:200] if isinstance(text, str) and text.strip() else fallback


def noisy_sum_charge(
    q: Any,
    cmd: dict,
    schema,
    rank: int,
    method: str | None,
    parties: int,
    factor: float = 1.0,
    target: int | None = None,
) -> Charge | None:
    """The cost of party 0's ``noisy_sum`` of ``q`` to this party's rows, or None when they are not
    in the sum; ``Refused`` for a command the party does not answer. ``factor``: ``K M`` of the
    release's privacy unit (one record: 1), which multiplies the sensitivity, rounding included;
    ``target``: the release's target column (its 2-ways are summed too)."""
    among = _among(cmd.get("among"), parties)
    sigma = _positive(cmd.get("sigma"), "sigma")
    try:
        size = q.size(schema)
    except (IndexError, ValueError, TypeError, KeyError) as exc:
        raise Refused(f"a query that does not fit the schema ({exc})") from None
    m, bounds = own_rows(q, schema, rank, method, target)
    if rank not in among or (m == 0 and not bounds):
        return None
    planned = math.sqrt(m + sum(b**4 for b in bounds))
    slack = grid_rounding_l2(q, schema)
    rule: dict[str, Any] = {"count_marginals": m, "clip_bounds": bounds, "rounding_l2": slack}
    fields: dict[str, Any] = {"own_rows": rule}
    if slack:
        fields["fixed_point"] = {"sensitivity_planned": planned, "rounding_l2": slack}
    return Charge(
        "gaussian",
        _label(cmd, f"noisy sum of {size} cells"),
        (planned + slack) * factor,
        sigma,
        cells=size,
        grid=math.ldexp(1.0, -REAL_BITS) if q.real else 1.0,
        fields=fields,
    )


def pool_new_check(cmd: dict) -> PoolState:
    """The state of a new pool of ``length`` cells."""
    length = cmd.get("length")
    if isinstance(length, bool) or not isinstance(length, int) or not 0 < length <= 1 << 40:
        raise Refused(f"a pool of {length!r} cells")
    return PoolState(length)


def pool_add_check(q: Any, cmd: dict, pool: PoolState | None, schema, rank: int, parties: int) -> bool:
    """Whether this party's answers go into the pool (``Refused`` if the pool would take them twice,
    or the answers do not fit it); no release: the pool stays in shares."""
    if pool is None:
        raise Refused("no pool to add to (pool_new first)")
    if not isinstance(q, MarginalsQuery):
        raise Refused("the pool holds marginal counts only")
    _check_columns(q.cliques, schema)
    sizes = [int(np.prod([schema.shape[i] for i in c], dtype=np.int64)) for c in q.cliques]
    if sum(sizes) != pool.length or (pool.sizes is not None and sizes != pool.sizes):
        raise Refused("answers laid out unlike the pool's cells")
    among = _among(cmd.get("among"), parties)
    if rank in among and pool.mine:
        raise Refused("this silo's answers are in the pool already; a second copy would double their sensitivity")
    pool.sizes = sizes
    return rank in among


def _int_array(arrays: dict, key: str) -> np.ndarray:
    a = arrays.get(key)
    if not isinstance(a, np.ndarray) or a.dtype != np.int64 or a.ndim != 1:
        raise Refused(f"the selection's {key} is not a list of whole numbers")
    return a


def _hits(positions: np.ndarray, groups: np.ndarray, n_groups: int, pool: PoolState) -> np.ndarray:
    """For each group of ``positions`` (pool cells), the most entries of it one record can move:
    per clique of the pool, how often its most repeated cell appears, summed over the cliques."""
    clique_of, n_cliques, length = pool.clique_of(), len(pool.sizes or []), pool.length
    keys, counts = np.unique(groups.astype(np.int64) * length + positions, return_counts=True)
    by_clique = (keys // length) * n_cliques + clique_of[keys % length]
    unique, inverse = np.unique(by_clique, return_inverse=True)
    most = np.zeros(len(unique))
    np.maximum.at(most, inverse, counts)
    return np.bincount(unique // n_cliques, weights=most, minlength=n_groups)


def _pool_positions(a: np.ndarray, pool: PoolState, what: str) -> np.ndarray:
    if a.size == 0 or a.min() < 0 or a.max() >= pool.length:
        raise Refused(f"the {what} are not cells of the pool")
    return a


def select_charge(
    cmd: dict, arrays: dict, pool: PoolState | None, request: ReleaseRequest | None, parties: int
) -> Charge | None:
    """The cost of DistAIM's secure selection to this party's rows (None when they are not pooled)."""
    if pool is None or pool.sizes is None:
        raise Refused("no filled pool to select on")
    cells = _pool_positions(_int_array(arrays, "cells"), pool, "candidates' cells")
    total = _pool_positions(_int_array(arrays, "total_cells"), pool, "cells that count the pool")
    segments, model = _int_array(arrays, "segment_ids"), _int_array(arrays, "model")
    weights, offsets = _int_array(arrays, "weights"), _int_array(arrays, "offsets")
    R = len(weights)
    if R == 0 or len(offsets) != R or not len(segments) == len(model) == len(cells):
        raise Refused("the selection's arrays do not line up")
    if segments.min() < 0 or segments.max() >= R:
        raise Refused("a cell of the selection belongs to no candidate")
    if weights.min() < 0 or weights.max() > MAX_WEIGHT or model.min() < 0 or model.max() > 1 << SCORE_BITS:
        raise Refused("the selection's weights or model marginals are out of range")
    if np.abs(offsets).max() > MAX_OFFSET:
        raise Refused("the selection's offsets are out of range")
    scale = _positive(cmd.get("scale"), "the Gumbel scale")
    draws = cmd.get("draws")
    if isinstance(draws, bool) or not isinstance(draws, int) or not 1 <= draws <= MAX_DRAWS:
        raise Refused(f"{draws!r} draws")
    noise_parties = cmd.get("noise_parties")
    t = request.collusion if request is not None else 0  # outside a release (checks mode): any number
    if isinstance(noise_parties, bool) or not isinstance(noise_parties, int) or not t + 1 <= noise_parties <= parties:
        raise Refused(
            f"Gumbels from {noise_parties!r} parties: a coalition of {t} must miss one, so at least {t + 1} add one"
        )
    if not pool.mine:
        return None
    factor = request.factor if request is not None else 1.0  # K M of a privacy unit
    unit = 1 << SCORE_BITS
    in_segment = np.maximum(1.0, _hits(cells, segments, R, pool))
    in_total = max(1.0, float(_hits(total, np.zeros(len(total), dtype=np.int64), 1, pool)[0]))
    model_mass = np.maximum(1.0, np.bincount(segments, weights=model.astype(float), minlength=R) / unit)
    per_candidate = weights * (in_segment + in_total * model_mass)
    delta = float(per_candidate.max()) * factor
    if delta == 0:
        return None
    eps_sampled = math.ldexp(2.0 * delta, SCORE_BITS) / scale
    slack = gumbel_rounding_slack(scale)
    return Charge(
        "exponential",
        _label(cmd, f"select among {R} candidate marginals (pooled)"),
        delta,
        eps_sampled + slack,
        draws=draws,
        fields={
            "candidates": R,
            "fixed_point": {
                "score_bits": SCORE_BITS,
                "epsilon_sampled": eps_sampled,
                "gumbel_scale_grid_units": scale,
                "rounding_slack": slack,
            },
            "own_rows": {"score": "pooled", "max_weight": float(weights.max())},
        },
    )


def measure_charge(cmd: dict, arrays: dict, pool: PoolState | None, factor: float = 1.0) -> Charge | None:
    """The cost of a measurement of pooled cells to this party's rows (None when they are not
    pooled); ``factor``: ``K M`` of the release's privacy unit."""
    if pool is None or pool.sizes is None:
        raise Refused("no filled pool to measure")
    cells = _pool_positions(_int_array(arrays, "cells"), pool, "measured cells")
    sigma = _positive(cmd.get("sigma"), "sigma")
    if not pool.mine:
        return None
    m = int(_hits(cells, np.zeros(len(cells), dtype=np.int64), 1, pool)[0])
    return Charge(
        "gaussian",
        _label(cmd, f"pooled marginal of {len(cells)} cells"),
        math.sqrt(m) * factor,
        sigma,
        cells=len(cells),
        fields={"own_rows": {"count_marginals": m, "clip_bounds": [], "rounding_l2": 0.0}},
    )


def local_select_charge(q: Any, cmd: dict, schema, rank: int, parties: int, factor: float = 1.0) -> Charge | None:
    """The cost of this silo's own selection with the scores ``q`` (None when it does not select);
    ``factor``: ``K M`` of the release's privacy unit, which multiplies the score's sensitivity."""
    if not isinstance(q, LocalScoresQuery):
        raise Refused("a silo selects with its scores query only")
    among = _among(cmd.get("among"), parties)
    scale = _positive(cmd.get("scale"), "the selection's scale")
    _check_columns(q.cliques, schema)
    R = len(q.cliques)
    if R == 0 or len(q.weights) != R or len(q.probs) != R:
        raise Refused("the scores query's candidates, weights and model marginals do not line up")
    weights = np.array(q.weights, dtype=float)
    if not (np.all(np.isfinite(weights)) and weights.min() >= 0 and math.isfinite(q.sigma)):
        raise Refused("the scores query's weights or sigma are not finite, non-negative numbers")
    mass = []
    for clique, p in zip(q.cliques, q.probs):
        if not clique:
            raise Refused("a candidate of the scores query has no column")
        p = np.asarray(p, dtype=float)
        cells = int(np.prod([schema.shape[i] for i in clique], dtype=np.int64))
        if p.size != cells or not np.all(np.isfinite(p)) or p.min() < 0:
            raise Refused("a model marginal of the scores query is not a non-negative table of its cells")
        mass.append(max(1.0, float(p.sum())))
    per_candidate = weights * (1.0 + np.array(mass))
    if q.proxy is not None:
        if len(q.proxy) != len(schema.columns):
            raise Refused("the heterogeneity proxy does not have one 1-way per column")
        proxy_mass = []
        for i, s in enumerate(q.proxy):
            s = np.asarray(s, dtype=float)
            if s.size != schema.shape[i] or not np.all(np.isfinite(s)) or s.min() < 0:
                raise Refused("a 1-way of the heterogeneity proxy is not a non-negative table of its cells")
            proxy_mass.append(max(1.0, float(s.sum())))
        per_candidate += weights * np.array([1.0 + max(proxy_mass[i] for i in c) for c in q.cliques])
    if rank not in among:
        return None
    delta = float(per_candidate.max()) * factor
    if delta == 0:
        return None
    return Charge(
        "exponential",
        _label(cmd, f"this silo's selection among {R} candidates"),
        delta,
        2.0 * delta / scale,
        where="silo",
        fields={
            "candidates": R,
            "sampler": LOCAL_SAMPLER,
            "own_rows": {
                "score": "local private" if q.proxy is not None else "local naive",
                "max_weight": float(weights.max()),
            },
        },
    )
