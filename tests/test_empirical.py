"""The empirical privacy check: it stays at or below the claim for the real mechanisms and
catches deliberately broken ones (fixed seeds for the checks' own randomness)."""

import pytest

from privsyn_fed.audit import empirical_check
from privsyn_fed.audit.empirical import aim_round_runner, clopper_pearson, exponential_runner, gaussian_runner
from privsyn_fed.cli import main
from privsyn_fed.noise import OpenDPNoise, SeededNoise


class HalfScaleNoise(SeededNoise):
    """A broken sampler: the ledger is charged for sigma but only sigma/2 is added."""

    def gaussian_counts(self, counts, sigma):
        return super().gaussian_counts(counts, sigma / 2)


def test_clopper_pearson_bounds_cover_the_estimate():
    lo, hi = clopper_pearson(30, 1000, 0.025)
    assert lo < 0.03 < hi and 0.018 < lo and hi < 0.045
    assert clopper_pearson(0, 100, 0.025)[0] == 0 and clopper_pearson(100, 100, 0.025)[1] == 1


@pytest.mark.parametrize("epsilon", [1.0, 2.0])
def test_gaussian_check_passes_the_real_mechanism_and_catches_half_noise(epsilon):
    good = empirical_check("gaussian", gaussian_runner(epsilon, 1e-5, SeededNoise(11)), epsilon, 1e-5, 200_000)
    bad = empirical_check("gaussian", gaussian_runner(epsilon, 1e-5, HalfScaleNoise(11)), epsilon, 1e-5, 200_000)
    assert good.consistent and good.epsilon_lower_bound > 0.3 * epsilon  # informative, below the claim
    assert not bad.consistent and bad.epsilon_lower_bound > epsilon


def test_exponential_check_catches_an_understated_sensitivity():
    good = empirical_check("exponential", exponential_runner(1.0, 1e-5, SeededNoise(5)), 1.0, 1e-5, 15_000)
    bad = empirical_check(
        "exponential", exponential_runner(1.0, 1e-5, SeededNoise(5), sensitivity_factor=0.5), 1.0, 1e-5, 15_000
    )
    assert good.consistent
    assert not bad.consistent and bad.epsilon_lower_bound > 1.0


def test_aim_round_and_the_opendp_sampler_stay_below_their_claims():
    assert empirical_check("aim-round", aim_round_runner(1.0, 1e-5, SeededNoise(2)), 1.0, 1e-5, 4000).consistent
    # the real (unseedable) OpenDP sampler: a lower bound above the claim would need a genuine leak
    assert empirical_check("gaussian", gaussian_runner(2.0, 1e-5, OpenDPNoise()), 2.0, 1e-5, 40_000).consistent


def test_cli_empirical(capsys):
    assert main(["audit", "--empirical", "--mechanism", "gaussian", "--epsilon", "2", "--trials", "20000"]) == 0
    assert "OK: gaussian: epsilon >=" in capsys.readouterr().out
    assert main(["audit", "--empirical", "--mechanism", "gaussian"]) == 2
    assert "needs --mechanism and --epsilon" in capsys.readouterr().err
    assert main(["audit"]) == 2
