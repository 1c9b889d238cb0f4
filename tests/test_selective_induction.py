"""numerics/selective_induction.py: the task of D'Angelo et al. (default) and our per-lag variant.

References: enumeration of the whole sequence space (the joint law of lag and tokens written from each task's
definition, marginalised by brute force) for the lag posterior and the predictive; a chi-square test of the
sampler's law against that joint law; the pinned case of their definition.
"""
import itertools

import numpy as np
import pytest
from scipy.stats import chisquare

import bma_verify.numerics as nm
from bma_verify.numerics.selective_induction import (TASKS, bayes_at_last, bayes_predictive, check_lags, check_task,
                                                     construction_at_last, construction_predictive,
                                                     enumerated_loglik_gap, expected_loglik_gap, log_likelihoods,
                                                     max_likelihood_weights, padded_kernel, prefix_lengths,
                                                     sample_selective_induction, selective_head_weights, windows)

PINNED = np.array([[0.9, 0.1], [0.2, 0.8]])


def joint_law(kernel, lags, sequence, task):
    """P(x, κ) for every κ, from the task's definition (first k̂ or first κ tokens from μ), (|K|,)."""
    mu = nm.stationary_distribution(kernel)
    hat = max(lags)
    out = []
    for kappa in lags:
        prefix = hat if task == "dangelo" else kappa
        out.append(np.prod([mu[x] if s < prefix else kernel[sequence[s - kappa], x] for s, x in enumerate(sequence)])
                   / len(lags))
    return np.array(out)


def brute_force(kernel, lags, prefix, T, task):
    """Lag posterior and predictive of x_t given the prefix (length t < T), by summing the joint over the tail."""
    d, t = kernel.shape[0], len(prefix)
    joint = np.zeros((len(lags), d))
    for tail in itertools.product(range(d), repeat=T - t):
        seq = tuple(prefix) + tail
        joint[:, seq[t]] += joint_law(kernel, lags, seq, task)
    return joint.sum(1) / joint.sum(), joint.sum(0) / joint.sum()


def test_pinned_case_of_their_definition_gives_equal_lag_posterior():
    # x = (0, 0, 1), K = {1, 2}: both lags explain x_2 = 1 by P*(1 | 0) and share μ(0)² for the first k̂ = 2 tokens
    got = bayes_predictive(PINNED, [1, 2], np.array([0, 0, 1]))
    np.testing.assert_allclose(got["lag_posterior"][3], [0.5, 0.5], atol=1e-15)
    posterior, _ = brute_force(PINNED, [1, 2], (0, 0, 1), 4, "dangelo")
    np.testing.assert_allclose(posterior, [0.5, 0.5], atol=1e-15)
    # our per-lag variant: lag 1 also explains x_1 = 0 by P*(0 | 0) = 0.9 against μ(0) = 2/3
    ours = bayes_predictive(PINNED, [1, 2], np.array([0, 0, 1]), task="per_lag")["lag_posterior"][3]
    np.testing.assert_allclose(ours, [0.9 * 0.1 / (0.9 * 0.1 + 2 / 3 * 0.1), 2 / 3 * 0.1 / (0.9 * 0.1 + 2 / 3 * 0.1)])


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("lags", [[1, 2, 3], [1, 3]])
def test_bayes_predictive_equals_enumeration(task, lags):
    rng = np.random.default_rng(1)
    P = nm.random_kernel(2, alpha=0.6, eps=0.05, rng=rng)
    T = 6
    x, _ = sample_selective_induction(P, lags, 1, T, rng=rng, task=task)
    got = bayes_predictive(P, lags, x[0], task=task)
    for t in range(T):
        posterior, predictive = brute_force(P, lags, tuple(x[0][:t]), T, task)
        np.testing.assert_allclose(got["lag_posterior"][t], posterior, atol=1e-13)
        np.testing.assert_allclose(got["predictive"][t], predictive, atol=1e-13)


@pytest.mark.parametrize("task", TASKS)
def test_sampler_law_passes_chi_square_against_the_joint_law(task):
    lags, T, n = [1, 2], 4, 40_000
    x, kappa = sample_selective_induction(PINNED, lags, n, T, rng=np.random.default_rng(3), task=task)
    cells = list(itertools.product(range(len(lags)), itertools.product(range(2), repeat=T)))
    expected = np.array([joint_law(PINNED, lags, seq, task)[j] for j, seq in cells]) * n
    index = {(j, seq): i for i, (j, seq) in enumerate(cells)}
    observed = np.zeros(len(cells))
    for row, k in zip(x, kappa):
        observed[index[(lags.index(int(k)), tuple(int(v) for v in row))]] += 1
    assert chisquare(observed, expected).pvalue > 1e-3
    # the other task's law is rejected by the same test on the same draws
    other = "per_lag" if task == "dangelo" else "dangelo"
    wrong = np.array([joint_law(PINNED, lags, seq, other)[j] for j, seq in cells]) * n
    assert chisquare(observed, wrong).pvalue < 1e-6


def test_sampler_with_a_fixed_lag_and_bad_lag():
    x, kappa = sample_selective_induction(PINNED, [1, 3], 5, 6, rng=np.random.default_rng(0), lag=3)
    assert np.all(kappa == 3) and x.shape == (5, 6)
    with pytest.raises(ValueError, match="lag must be one of"):
        sample_selective_induction(PINNED, [1, 3], 5, 6, rng=np.random.default_rng(0), lag=2)


@pytest.mark.parametrize("lags", [[1, 2, 3], [2, 5], [4]])
def test_construction_on_their_windows_equals_their_bayes_and_the_shifted_lag_does_not(lags):
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


def test_per_lag_construction_equals_per_lag_bayes_and_differs_from_theirs():
    rng = np.random.default_rng(4)
    P = nm.random_kernel(3, alpha=0.5, eps=0.02, rng=rng)
    x, _ = sample_selective_induction(P, [1, 2, 3], 4, 10, rng=rng)
    for seq in x:
        ours = construction_predictive(P, [1, 2, 3], seq, task="per_lag")["predictive"]
        np.testing.assert_allclose(ours, bayes_predictive(P, [1, 2, 3], seq, task="per_lag")["predictive"],
                                   atol=1e-13)
    assert max(np.abs(construction_predictive(P, [1, 2, 3], s, task="per_lag")["predictive"]
                      - bayes_predictive(P, [1, 2, 3], s)["predictive"]).max() for s in x) > 1e-3


def test_dropping_the_first_tokens_is_bayes_on_their_task_only():
    rng = np.random.default_rng(5)
    P = nm.random_kernel(3, alpha=0.5, eps=0.02, rng=rng)
    for task in TASKS:
        x, _ = sample_selective_induction(P, [1, 4], 4, 10, rng=rng, task=task)
        gap = max(np.abs(bayes_predictive(P, [1, 4], s, task=task, drop_first_tokens=True)["predictive"]
                         - bayes_predictive(P, [1, 4], s, task=task)["predictive"]).max() for s in x)
        assert (gap <= 1e-13) if task == "dangelo" else (gap > 1e-3)


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("lags,t", [([1, 2, 3], 8), ([2, 5], 3), ([4], 2), ([1, 3], 0)])
def test_bayes_at_last_equals_the_term_by_term_likelihood(task, lags, t):
    rng = np.random.default_rng(1)
    P = nm.random_kernel(3, alpha=0.5, eps=0.02, rng=rng)
    init = np.array([0.2, 0.5, 0.3])
    x, _ = sample_selective_induction(P, lags, 6, max(t, 1), rng=rng, task=task)
    got = bayes_at_last(P, lags, x[:, :t], init=init, task=task)
    for i in range(6):
        ref = bayes_predictive(P, lags, x[i, :t], init=init, task=task)
        np.testing.assert_allclose(got["lag_posterior"][i], ref["lag_posterior"][t], atol=1e-13)
        np.testing.assert_allclose(got["predictive"][i], ref["predictive"][t], atol=1e-13)


def test_construction_at_last_is_the_last_row_of_the_construction():
    rng = np.random.default_rng(6)
    P = nm.random_kernel(4, alpha=0.5, eps=0.02, rng=rng)
    x, _ = sample_selective_induction(P, [1, 2, 3], 5, 9, rng=rng)
    for task in TASKS:
        got = construction_at_last(P, [1, 2, 3], x, task=task)
        for i in range(5):
            np.testing.assert_allclose(
                got[i], construction_predictive(P, [1, 2, 3], x[i], task=task)["lag_posterior"][9], atol=1e-13)


def test_selective_head_weights_follow_their_formula_and_sharpen_with_beta():
    rng = np.random.default_rng(7)
    P = nm.random_kernel(3, alpha=0.5, eps=0.02, rng=rng)
    lags = [1, 2]
    x, _ = sample_selective_induction(P, lags, 2, 7, rng=rng)
    for beta in (1.0, 100.0):
        got = selective_head_weights(P, lags, x, beta)
        for i in range(2):
            p = np.array([[P[x[i, s - k], x[i, s]] for k in lags] for s in range(2, 7)])
            score = beta * (p / p.sum(1, keepdims=True)).sum(0) / (7 - 2)
            np.testing.assert_allclose(got[i], np.exp(score) / np.exp(score).sum(), rtol=1e-12)
    assert np.all(selective_head_weights(P, lags, x, 1e4).max(1) > 0.99)
    with pytest.raises(ValueError, match="longer than max"):
        selective_head_weights(P, lags, x[:, :2], 1.0)


def test_log_likelihoods_and_max_likelihood_weights():
    ll = log_likelihoods(PINNED, [1, 2], np.array([[0, 0, 1]]))
    mu0 = nm.stationary_distribution(PINNED)[0]
    np.testing.assert_allclose(ll[0], [2 * np.log(mu0) + np.log(0.1)] * 2)
    np.testing.assert_array_equal(max_likelihood_weights([[0.0, 1.0, 1.0], [2.0, 0.0, 0.0]]),
                                  [[0, 1, 0], [1, 0, 0]])


def test_padded_kernel_windows_and_prefixes():
    tilde = padded_kernel(PINNED)
    np.testing.assert_allclose(tilde.sum(1), 1.0)
    np.testing.assert_allclose(tilde[2, :2], nm.stationary_distribution(PINNED))
    assert np.all(tilde[:, 2] == 0)
    context, query = windows(np.array([0, 1, 1]), 2, 3, 2)
    np.testing.assert_array_equal(context, [[2, 2, 0], [2, 0, 1]])
    np.testing.assert_array_equal(query, [0, 1, 1])
    context, query = windows(np.array([0, 1, 1, 0]), 4, 3, 2, first=2)
    np.testing.assert_array_equal(context, [[0, 1, 1], [1, 1, 0]])
    np.testing.assert_array_equal(query, [1, 0, 2])
    np.testing.assert_array_equal(prefix_lengths([1, 3]), [3, 3])
    np.testing.assert_array_equal(prefix_lengths([1, 3], "per_lag"), [1, 3])


def test_bad_lags_and_tasks_raise():
    with pytest.raises(ValueError, match="distinct positive integers"):
        check_lags([1, 1])
    with pytest.raises(ValueError, match="distinct positive integers"):
        check_lags([0, 2])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        check_lags([])
    with pytest.raises(ValueError, match="task must be one of"):
        check_task("theirs")


@pytest.mark.parametrize("d,lags,T", [(2, [1, 2, 3], 7), (3, [1, 2, 4], 6), (2, [2, 3, 6], 9), (3, [1, 3], 6)])
def test_closed_form_loglik_gap_equals_enumeration_and_is_positive(d, lags, T):
    P = nm.random_kernel(d, alpha=0.5, eps=0.02, rng=np.random.default_rng(d * T))
    for k_star in lags:
        closed = expected_loglik_gap(P, lags, k_star, T)
        np.testing.assert_allclose(closed, enumerated_loglik_gap(P, lags, k_star, T), atol=1e-12)
        assert closed[lags.index(k_star)] == 0 and all(g > 0 for k, g in zip(lags, closed) if k != k_star)


def test_loglik_gap_is_zero_when_every_row_is_mu():
    mu = nm.stationary_distribution(PINNED)
    np.testing.assert_allclose(enumerated_loglik_gap(np.tile(mu, (2, 1)), [1, 2], 1, 6), 0.0, atol=1e-15)
    with pytest.raises(ValueError, match="true_lag must be one of"):
        expected_loglik_gap(PINNED, [1, 2], 3, 6)
