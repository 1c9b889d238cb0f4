"""Monte Carlo estimators of I and I_χ² (lemma3-strict-dpi): values against dit, intervals by their coverage."""
import dit
import numpy as np
import pytest
from scipy.stats import binom, chi2, kstest

from bma_verify import numerics as nm
from bma_verify.numerics.estimators import (chi2_mutual_information_estimate, empirical_joint, mean_estimate,
                                            mutual_information_estimate, mutual_information_ratio_estimate)

#: A fixed joint law with I well above 1/n for the n used below (the delta-method regime).
JOINT = np.array([[0.20, 0.05, 0.05],
                  [0.04, 0.22, 0.04],
                  [0.06, 0.04, 0.30]])
REPS = 300


def _draw_pairs(joint, n, rng):
    cells = rng.choice(joint.size, size=n, p=joint.ravel())
    return cells // joint.shape[1], cells % joint.shape[1]


def _coverage_band(reps, level=0.95, alpha=1e-3):
    """Two-sided binomial acceptance band for the number of intervals (out of reps) containing the truth."""
    return binom.ppf(alpha / 2, reps, level), binom.isf(alpha / 2, reps, level)


def test_plug_in_value_matches_dit_on_the_empirical_joint():
    # independent reference: dit's Shannon mutual information (bits) of the same empirical law
    rng = np.random.default_rng(0)
    x, y = _draw_pairs(JOINT, 5000, rng)
    joint = empirical_joint(x, y, 3)
    reference = dit.shannon.mutual_information(dit.Distribution.from_ndarray(joint), [0], [1]) * np.log(2)
    assert mutual_information_estimate(x, y, 3, method="plug-in").value == pytest.approx(reference, abs=1e-12)
    assert chi2_mutual_information_estimate(x, y, 3, method="plug-in").value == pytest.approx(
        nm.chi2_mutual_information(joint), abs=1e-12)


@pytest.mark.parametrize("method", ["plug-in", "miller-madow"])
def test_mutual_information_interval_has_nominal_coverage(method):
    # over REPS independent samples the 95% interval must contain the exact I at a binomially plausible rate
    truth = nm.mutual_information(JOINT)
    rng = np.random.default_rng(1)
    hits = sum(mutual_information_estimate(*_draw_pairs(JOINT, 2000, rng), 3, method=method).contains(truth)
               for _ in range(REPS))
    low, high = _coverage_band(REPS)
    assert low <= hits <= high


@pytest.mark.parametrize("method", ["plug-in", "bias-corrected"])
def test_chi2_information_interval_has_nominal_coverage(method):
    truth = nm.chi2_mutual_information(JOINT)
    rng = np.random.default_rng(2)
    hits = sum(chi2_mutual_information_estimate(*_draw_pairs(JOINT, 2000, rng), 3, method=method).contains(truth)
               for _ in range(REPS))
    low, high = _coverage_band(REPS)
    assert low <= hits <= high


def test_miller_madow_removes_most_of_the_small_sample_bias():
    # at small n the plug-in bias −(m_x−1)(m_y−1)/(2n) dominates; its mean error, with a standard error from
    # the replicates, must exceed Miller–Madow's
    truth = nm.mutual_information(JOINT)
    rng = np.random.default_rng(3)
    plug, mm = [], []
    for _ in range(400):
        x, y = _draw_pairs(JOINT, 60, rng)
        plug.append(mutual_information_estimate(x, y, 3, method="plug-in").value - truth)
        mm.append(mutual_information_estimate(x, y, 3, method="miller-madow").value - truth)
    plug_bias, mm_bias = mean_estimate(np.array(plug)), mean_estimate(np.array(mm))
    assert plug_bias.low > 0  # the plug-in is biased upwards, significantly at n = 60
    assert abs(mm_bias.value) + 3 * mm_bias.stderr < plug_bias.value


def test_delta_method_stderr_matches_the_spread_over_replicates():
    # the reported stderr (influence function) against the standard deviation of independent replicates
    rng = np.random.default_rng(4)
    estimates = [mutual_information_estimate(*_draw_pairs(JOINT, 3000, rng), 3) for _ in range(REPS)]
    spread = np.std([e.value for e in estimates], ddof=1)
    reported = np.mean([e.stderr for e in estimates])
    # the sample sd of REPS normal replicates has relative standard error 1/sqrt(2(REPS-1)) ≈ 4%
    assert reported == pytest.approx(spread, rel=4 * (2 * (REPS - 1)) ** -0.5)


def test_ratio_interval_has_nominal_coverage():
    # chain Y − X − Z: the ratio I(Y; Z)/I(Y; X) from shared samples, truth from the exact joints
    kernel = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]])
    parents = np.array([-1, 0, 0])
    truth = nm.mutual_information(nm.pairwise_joint(kernel, parents, 1, 2)) / nm.mutual_information(
        nm.pairwise_joint(kernel, parents, 0, 1))
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(REPS):
        x = nm.sample_chains(kernel, parents, 3000, rng=rng)
        hits += mutual_information_ratio_estimate(x[:, 2], x[:, 0], x[:, 1], 3).contains(truth)
    low, high = _coverage_band(REPS)
    assert low <= hits <= high


def test_mean_estimate_interval_has_nominal_coverage():
    rng = np.random.default_rng(6)
    hits = sum(mean_estimate(rng.exponential(2.0, size=200)).contains(2.0) for _ in range(REPS))
    low, high = _coverage_band(REPS)
    assert low <= hits <= high


#: Near independence (the G statistic's law): samples per estimate and seeded replicates.
NEAR_ZERO_N, NEAR_ZERO_REPS = 2000, 200


def _near_zero_estimates(joint, seed: int, method: str = "plug-in") -> list:
    rng = np.random.default_rng(seed)
    return [mutual_information_estimate(*_draw_pairs(joint, NEAR_ZERO_N, rng), joint.shape[0], method=method)
            for _ in range(NEAR_ZERO_REPS)]


def test_interval_at_independence_covers_zero_at_the_rate_of_the_chi2_law():
    # I = 0: the interval misses 0 only when G lies in the upper α/2 tail of χ²((d−1)²), so its coverage is
    # P(χ²(4) ≤ its 97.5% quantile) = 0.975 exactly; the delta method's interval (width ~0) would miss 0 always
    independent = np.full((3, 3), 1 / 9)
    estimates = _near_zero_estimates(independent, 11)
    assert all(e.g_statistic is not None for e in estimates)
    hits = sum(bool(e.contains(0.0)) for e in estimates)
    expected = chi2.cdf(chi2.isf(0.025, 4), 4)
    assert expected == pytest.approx(0.975)
    low, high = _coverage_band(NEAR_ZERO_REPS, level=expected)
    assert low <= hits <= high


def test_plug_in_bias_at_independence_is_the_chi2_mean():
    # E Î_plugin = E G/(2n) ≈ (d−1)²/(2n) nats at independence; Miller–Madow removes it
    estimates = _near_zero_estimates(np.full((3, 3), 1 / 9), 12)
    values = np.array([e.value for e in estimates])
    se = values.std(ddof=1) / np.sqrt(values.size)
    assert values.mean() == pytest.approx(4 / (2 * NEAR_ZERO_N), abs=4 * se)
    corrected = np.array([e.value for e in _near_zero_estimates(np.full((3, 3), 1 / 9), 12, "miller-madow")])
    assert corrected.mean() == pytest.approx(0.0, abs=4 * se)


def test_agreement_z_near_independence_is_standard_normal():
    # I = 2.5/n (λ = 5 against 4 degrees of freedom): the normal quantile of G under χ²(4, 2n·I) is N(0, 1)
    # within a KS test; the coverage of the interval is nominal
    tilt = 0.032
    joint = np.full((3, 3), 1 / 9) + tilt * np.array([[2, -1, -1], [-1, 2, -1], [-1, -1, 2]]) / 9
    truth = nm.mutual_information(joint)
    noncentrality = 2 * NEAR_ZERO_N * truth  # the instance must sit near independence, not at it
    assert noncentrality > 1 and noncentrality < 10, noncentrality
    estimates = [e for e in _near_zero_estimates(joint, 13) if e.g_statistic is not None]
    assert len(estimates) >= 0.99 * NEAR_ZERO_REPS
    z = np.array([e.agreement_z(truth) for e in estimates])
    assert kstest(z, "norm").pvalue > 1e-3
    low, high = _coverage_band(len(estimates))
    assert low <= sum(bool(e.contains(truth)) for e in estimates) <= high


def test_ratio_with_a_numerator_near_independence_keeps_its_interval():
    # Y − X − Z with Z nearly independent of Y: the ratio interval (Bonferroni of the two intervals) contains the
    # exact ratio, and the agreement z is that of the numerator's G law (no collapse of the delta method)
    kernel = np.array([[0.52, 0.48], [0.47, 0.53]])
    parents = np.array([-1, 0, 0])
    truth = nm.mutual_information(nm.pairwise_joint(kernel, parents, 1, 2)) / nm.mutual_information(
        nm.pairwise_joint(kernel, parents, 0, 1))
    rng = np.random.default_rng(14)
    hits, z = 0, []
    for _ in range(100):
        x = nm.sample_chains(kernel, parents, 20_000, rng=rng)
        ratio = mutual_information_ratio_estimate(x[:, 2], x[:, 0], x[:, 1], 2)
        assert ratio.g_statistic is not None
        hits += bool(ratio.contains(truth))
        z.append(ratio.agreement_z(truth))
    assert hits >= binom.ppf(1e-3, 100, 0.95) and np.max(np.abs(z)) < 4


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="method"):
        mutual_information_estimate([0, 1], [1, 0], 2, method="jackknife")
    with pytest.raises(ValueError, match="x and y"):
        mutual_information_estimate([0, 1, 1], [1, 0], 2)
    with pytest.raises(ValueError, match="x"):
        mutual_information_estimate([0, 5], [1, 0], 2)
    with pytest.raises(ValueError, match="samples"):
        mean_estimate([1.0])
    with pytest.raises(ValueError, match="level"):
        mean_estimate([1.0, 2.0], level=1.5)
