"""Conditioning a model's rows on the schema's public constraints by rejection sampling.

The constraints are public, so keeping only the allowed rows of a model's draws is post-processing:
``draw_allowed`` draws rows from a model and keeps those that break no constraint (``draw_kept``, the
rejection loop itself, also serves a sample's ``--where`` conditions). It spends no budget.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ..common import InputError, checkpoint
from ..schema import Constraint, Constraints, constraints_of, violations

#: The most rows ``draw_allowed`` draws per row it keeps: a model whose rows are forbidden more often
#: than ``1 - 1/MAX_REJECTION`` of the time is refused.
MAX_REJECTION = 1000
#: Rows drawn before the acceptance rate is judged against ``MAX_REJECTION``.
MIN_ESTIMATE = 10_000
#: Fewest and most rows drawn in one batch after the first.
MIN_BATCH = 1_024
MAX_BATCH = 500_000


def batch_seed(seed: int, batch: int) -> int:
    """The seed of batch ``batch`` (from 1) of a draw seeded ``seed``: ``SeedSequence([seed, batch])``."""
    state = np.random.SeedSequence([int(seed), int(batch)]).generate_state(1, dtype=np.uint64)
    return int(state[0]) % 2**63


def draw_allowed(
    draw: Callable[[int, int], pd.DataFrame], rows: int, seed: int, constraints: Constraints
) -> pd.DataFrame:
    """``rows`` rows of ``draw`` that break none of the constraints (``draw_kept``; ``constraints``: a
    ``Schema`` or its ``constraints``). When the model's rows are independent with law ``P``, each
    kept row has law ``P(x | x allowed) = P(x) 1[x allowed] / P(allowed)``: the model conditioned on
    the constraints. When a batch's rows are exchangeable but spread evenly over ``P`` (stratified), a
    kept row's law is ``E[N_x / N_allowed]`` over the batch's counts, which equals it up to ``O(1/n)``.
    ``InputError`` names the share of drawn rows that breaks each constraint."""
    found, source = constraints_of(constraints)
    if not found:
        return draw(rows, seed)
    broken = np.zeros(len(found), dtype=np.int64)

    def keep(frame: pd.DataFrame) -> np.ndarray:
        v = violations(found, frame, "the model's rows")
        broken[:] += v.sum(axis=0)
        return np.asarray(~v.any(axis=1))

    return draw_kept(draw, rows, seed, keep, lambda drawn, allowed: _refusal(source, found, drawn, allowed, broken))


def draw_kept(
    draw: Callable[[int, int], pd.DataFrame],
    rows: int,
    seed: int,
    keep: Callable[[pd.DataFrame], np.ndarray],
    refusal: Callable[[int, int], str],
    max_rejection: int = MAX_REJECTION,
) -> pd.DataFrame:
    """``rows`` rows of ``draw`` that ``keep`` accepts, by rejection: exactly ``draw``'s rows given
    acceptance, in the order drawn.

    Batches are drawn with ``draw(n, s)``: the first of ``rows`` rows with ``s = seed`` (so when every
    row is kept the result is ``draw(rows, seed)``), the later ones with ``batch_seed(seed, b)`` and
    sized by the acceptance rate seen so far. ``InputError(refusal(drawn, kept))`` when fewer than one
    row in ``max_rejection`` is kept (judged after ``MIN_ESTIMATE`` rows), or ``max_rejection * rows +
    MIN_ESTIMATE`` rows have been drawn."""
    cap = max_rejection * rows + MIN_ESTIMATE
    kept: list[pd.DataFrame] = []
    have = drawn = allowed = 0
    size, b = rows, 0
    while True:
        frame = draw(size, seed if b == 0 else batch_seed(seed, b))
        ok = keep(frame)
        drawn += len(frame)
        allowed += int(ok.sum())
        part = frame[ok].iloc[: rows - have]
        kept.append(part)
        have += len(part)
        if have >= rows:
            break
        if (drawn >= MIN_ESTIMATE and allowed * max_rejection < drawn) or drawn >= cap:
            raise InputError(refusal(drawn, allowed))
        checkpoint()
        rate = (allowed + 1) / (drawn + 2)
        size = int(min(MAX_BATCH, cap - drawn, max(MIN_BATCH, math.ceil((rows - have) / rate * 1.2))))
        b += 1
    if len(kept) == 1 and len(kept[0]) == len(frame):
        return kept[0]
    return pd.concat(kept, ignore_index=True).reset_index(drop=True)


def _refusal(source: str, found: Sequence[Constraint], drawn: int, allowed: int, broken: np.ndarray) -> str:
    shares = "; ".join(f"{c.label} ({c.describe()}): {_percent(n / drawn)}" for c, n in zip(found, broken) if n)
    return (
        f"{source}: the model's rows break the schema's constraints too often to be conditioned on them: "
        f"{_percent(1 - allowed / drawn)} of {drawn:,} rows drawn are forbidden, more than the "
        f"{1 - 1 / MAX_REJECTION:.1%} a release may reject ({shares}); check that the constraints together "
        "allow some rows, or give the release more budget so that its model fits them closer"
    )


def _percent(share: float) -> str:
    """A share as a percentage, with more digits where two would round it to 100%."""
    text = f"{share:.2%}"
    return f"{share:.4%}" if text == "100.00%" and share < 1 else text
