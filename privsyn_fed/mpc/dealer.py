"""The dealer: CrypTen's trusted third party (TTP), extended with the noise of the DP mechanisms.

It runs as its own process with rank ``parties`` and never receives data: only sizes and noise
parameters. Besides CrypTen's correlated randomness (Beaver triples, wrap counts, random bits) it
serves two requests from party 0:
  * ``dp_gaussian(size, sigma)``: exact discrete Gaussian noise;
  * ``dp_gumbel(size, scale)``: exactly rounded Gumbel noise.
Each is secret-shared like CrypTen's own tuples: parties ``1..n-1`` draw their shares from the
generator they share with the dealer; party 0 receives ``noise - sum(other shares)``. No party
learns the noise; the dealer learns no data and no opened value (see SECURITY.md: it must
collude with no party and must not see the released outputs).
"""

from __future__ import annotations

import torch

from .crypten_shim import import_crypten
from .noise import ExactDealerNoise, SeededDealerNoise


def run_dealer(seed: int | None = None) -> None:
    """Serve the parties until party 0 sends ``terminate`` (blocks; call after ``configure``)."""
    import_crypten()
    from crypten.mpc.provider.ttp_provider import TTPServer

    noise = ExactDealerNoise() if seed is None else SeededDealerNoise(seed)

    class Dealer(TTPServer):
        def _shared(self, values) -> torch.Tensor:
            value = torch.as_tensor(values, dtype=torch.long)
            return value - self._get_additive_PRSS(value.size(), remove_rank=True)

        def dp_gaussian(self, size, sigma):
            return self._shared(noise.gaussian(int(torch.Size(size).numel()), float(sigma)).reshape(tuple(size)))

        def dp_gumbel(self, size, scale):
            return self._shared(noise.gumbel(int(torch.Size(size).numel()), float(scale)).reshape(tuple(size)))

        def dp_mode(self):
            """1 when the noise is seeded (not private), else 0: recorded in the ledger."""
            return torch.tensor([1 if noise.seeded else 0], dtype=torch.long)

    Dealer()
