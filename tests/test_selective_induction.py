"""numerics/selective_induction.py and the ``footnote1-selective-induction`` check.

References: the task's definition (empirical frequencies of the generator against μ ⊗ P* within 5 standard
errors; uniform lags), the Bayes-optimal predictive written term by term, and enumeration of the whole sequence
space for the lag posterior (a third, independent computation).
"""
import itertools

import numpy as np
import pytest

import numerics as nm
import bma_verify.reports.checks.ext_dag as E
from bma_verify.numerics.selective_induction import (bayes_predictive, check_lags, construction_predictive, padded_kernel,
                                          sample_selective_induction, truncated_weights_predictive, windows)
from bma_verify.reports.core import CheckContext, settle


def test_generator_draws_uniform_lags_and_the_lagged_transition_law():
    rng = np.random.default_rng(0)
    P = nm.random_kernel(3, alpha=0.7, eps=0.05, rng=rng)
    mu = nm.stationary_distribution(P)
    x, kappa = sample_selective_induction(P, [1, 3], 40_000, 6, rng=rng)
    assert abs((kappa == 3).mean() - 0.5) < 5 * np.sqrt(0.25 / kappa.size)
    for lag in (1, 3):
        seqs = x[kappa == lag]
        pairs = np.zeros((3, 3))
        np.add.at(pairs, (seqs[:, 5 - lag], seqs[:, 5]), 1)
        freq, expected = pairs / pairs.sum(), mu[:, None] * P
        assert np.all(np.abs(freq - expected) < 5 * np.sqrt(expected / seqs.shape[0]) + 1e-12)
        np.testing.assert_allclose(np.bincount(seqs[:, 0], minlength=3) / seqs.shape[0], mu, atol=0.02)


def test_bayes_lag_posterior_equals_enumeration_of_the_joint_law():
    # Reference: P(κ | x_{<t}) ∝ P(x_{<t} | κ) with P(x_{<t} | κ) by summing the full-length joint over the tail.
    rng = np.random.default_rng(1)
    P = nm.random_kernel(2, alpha=0.6, eps=0.05, rng=rng)
    mu = nm.stationary_distribution(P)
    lags, T = [1, 2, 3], 5
    def joint(seq, lag):
        return np.prod([mu[seq[s]] if s < lag else P[seq[s - lag], seq[s]] for s in range(len(seq))])
    x, _ = sample_selective_induction(P, lags, 1, T, rng=rng)
    got = bayes_predictive(P, lags, x[0])
    for t in range(T + 1):
        marg = np.array([sum(joint(tuple(x[0][:t]) + tail, lag) for tail in itertools.product(range(2), repeat=T - t))
                         for lag in lags])
        np.testing.assert_allclose(got["lag_posterior"][t], marg / marg.sum(), atol=1e-13)


@pytest.mark.parametrize("lags", [[1, 2, 3], [2, 5], [4]])
def test_construction_equals_bayes_and_the_shifted_lag_does_not(lags):
    rng = np.random.default_rng(2)
    P = nm.random_kernel(3, alpha=0.5, eps=0.02, rng=rng)
    x, _ = sample_selective_induction(P, lags, 3, 10, rng=rng)
    for seq in x:
        exact, built = bayes_predictive(P, lags, seq), construction_predictive(P, lags, seq)
        np.testing.assert_allclose(built["predictive"], exact["predictive"], atol=1e-13)
        np.testing.assert_allclose(built["lag_posterior"], exact["lag_posterior"], atol=1e-13)
    if len(lags) > 1:
        assert max(np.abs(construction_predictive(P, lags, s, lag_shift=1)["predictive"]
                          - bayes_predictive(P, lags, s)["predictive"]).max() for s in x) > 1e-3
        assert max(np.abs(truncated_weights_predictive(P, lags, s) - bayes_predictive(P, lags, s)["predictive"]).max()
                   for s in x) > 1e-3


def test_padded_kernel_and_windows():
    P = np.array([[0.9, 0.1], [0.2, 0.8]])
    tilde = padded_kernel(P)
    np.testing.assert_allclose(tilde.sum(1), 1.0)
    np.testing.assert_allclose(tilde[2, :2], nm.stationary_distribution(P))
    assert np.all(tilde[:, 2] == 0)
    context, query = windows(np.array([0, 1, 1]), 2, 3, 2)
    np.testing.assert_array_equal(context, [[2, 2, 0], [2, 0, 1]])
    np.testing.assert_array_equal(query, [0, 1, 1])


def test_bad_lags_raise():
    with pytest.raises(ValueError, match="distinct positive integers"):
        check_lags([1, 1])
    with pytest.raises(ValueError, match="distinct positive integers"):
        check_lags([0, 2])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        check_lags([])


def test_footnote1_check_passes_and_rejects_the_off_by_one_lag(tmp_path, monkeypatch):
    ctx = CheckContext(tier="quick", seed=0, figures_dir=tmp_path)
    outcome = E.footnote1_selective_induction(ctx)
    assert settle(outcome) == ("pass", "")
    assert outcome.measured["max_error"] <= 1e-13
    assert outcome.control.rejected and outcome.control.measured["max_error"] > 0.05
    assert outcome.findings[0].status == "refuted"
    # with the planted shift made harmless (0), the control passes and the pass is withheld
    import bma_verify.numerics.selective_induction as S

    real = S.construction_predictive
    monkeypatch.setattr(S, "construction_predictive",
                        lambda *a, lag_shift=0, **k: real(*a, **k))
    harmless = E.footnote1_selective_induction(ctx)
    verdict, reason = settle(harmless)
    assert verdict == "inconclusive" and "not discriminating" in reason
