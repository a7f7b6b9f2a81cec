import numpy as np
import pytest
from scipy import stats

from privsyn_fed.accounting import Accountant
from privsyn_fed.common import BudgetExceeded
from privsyn_fed.mechanisms import exponential_mechanism, gaussian_mechanism
from privsyn_fed.noise import OpenDPNoise, SeededNoise, noise_source

# Tests of OpenDP's samplers use fresh system randomness (they cannot be seeded); their acceptance
# regions are set so that a correct sampler fails with probability about 1e-6.
ALPHA = 1e-6


def variance_within_chi2(samples, sigma):
    n = len(samples)
    stat = (n - 1) * np.var(samples, ddof=1) / sigma**2
    return stats.chi2.ppf(ALPHA / 2, n - 1) < stat < stats.chi2.ppf(1 - ALPHA / 2, n - 1)


@pytest.mark.parametrize("integer", [True, False])
def test_gaussian_noise_scale_matches_sigma(integer):
    sigma = 7.5
    acc = Accountant(50.0, 1e-6, "test")
    values = np.zeros(20000, dtype=np.int64 if integer else float)
    noisy = gaussian_mechanism(acc, OpenDPNoise(), values, sigma=sigma, query="q", where="curator")
    assert noisy.dtype == (np.int64 if integer else float)
    # the discrete Gaussian with sigma 7.5 has variance within 1e-10 of sigma^2
    assert variance_within_chi2(noisy, sigma)
    assert abs(noisy.mean()) < stats.norm.ppf(1 - ALPHA / 2) * sigma / np.sqrt(len(noisy))
    assert acc.entries[0]["rho"] == pytest.approx(1 / (2 * sigma**2))


def test_gaussian_noise_scale_detects_wrong_sigma():
    """The check above has power: noise at half the scale fails it."""
    noisy = gaussian_mechanism(
        Accountant(50.0, 1e-6, "test"),
        OpenDPNoise(),
        np.zeros(20000, dtype=np.int64),
        sigma=7.5 / 2,
        query="q",
        where="curator",
    )
    assert not variance_within_chi2(noisy, 7.5)


@pytest.mark.parametrize("source", [OpenDPNoise(), SeededNoise(123)], ids=["opendp", "seeded"])
def test_exponential_mechanism_matches_exact_probabilities(source):
    scores = np.array([0.0, 1.0, 2.0, 4.0, 4.0])
    eps, sens = 1.0, 2.0
    acc = Accountant(2000.0, 1e-6, "test")
    draws = [
        exponential_mechanism(acc, source, scores, epsilon=eps, sensitivity=sens, query="s", where="curator")
        for _ in range(4000)
    ]
    observed = np.bincount(draws, minlength=len(scores))
    p = np.exp(eps * scores / (2 * sens))
    p /= p.sum()
    assert stats.chisquare(observed, p * len(draws)).pvalue > ALPHA
    assert acc.entries[0]["rho"] == pytest.approx(eps**2 / 8)


def test_mechanism_charges_before_release_and_refuses_over_budget():
    class Exploding(SeededNoise):
        def gaussian_counts(self, counts, sigma):
            raise AssertionError("sampled although the charge was refused")

    acc = Accountant(0.01, 1e-9, "test")
    with pytest.raises(BudgetExceeded):
        gaussian_mechanism(acc, Exploding(0), np.zeros(3, dtype=np.int64), sigma=0.1, query="q", where="curator")
    assert acc.entries == []


def test_seeded_noise_is_reproducible_and_marked():
    a, b = noise_source(5), noise_source(5)
    assert a.seeded and not noise_source(None).seeded
    x = np.arange(10, dtype=np.int64)
    assert np.array_equal(a.gaussian_counts(x, 3.0), b.gaussian_counts(x, 3.0))
