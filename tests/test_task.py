"""Kernels, trees and samplers of the task against exact laws by chi-square goodness of fit at fixed seeds."""
import numpy as np
import pytest
from scipy import stats

from bma_verify import numerics as nm

# Goodness-of-fit tests use fixed seeds; a p-value below this means the sampler does not follow the exact law.
P_MIN = 1e-4


def _gof(observed_pairs, expected_joint, n):
    d = expected_joint.shape[0]
    counts = np.zeros(expected_joint.size)
    np.add.at(counts, observed_pairs[:, 0] * d + observed_pairs[:, 1], 1)
    expected = expected_joint.ravel() * n
    keep = expected > 0
    assert counts[~keep].sum() == 0, "sampled an impossible pair"
    return stats.chisquare(counts[keep], expected[keep]).pvalue


def test_random_kernel_rows_and_lower_bound():
    rng = np.random.default_rng(0)
    kernel = nm.random_kernel(6, alpha=0.3, eps=0.05, rng=rng)
    np.testing.assert_allclose(kernel.sum(1), 1.0, atol=1e-14)
    assert kernel.min() >= 0.05 - 1e-15
    np.testing.assert_array_equal(kernel, nm.random_kernel(6, alpha=0.3, eps=0.05, rng=np.random.default_rng(0)))


def test_stationary_distribution_is_invariant_and_matches_power_iteration():
    rng = np.random.default_rng(1)
    kernel = nm.random_kernel(5, rng=rng)
    mu = nm.stationary_distribution(kernel)
    np.testing.assert_allclose(mu @ kernel, mu, atol=1e-13)
    np.testing.assert_allclose(mu, np.full(5, 0.2) @ np.linalg.matrix_power(kernel, 200), atol=1e-12)


def _least_squares_stationary(kernel):
    """The stationary law as the package solved it before (least squares on [πᵀ − I; 1ᵀ] μ = [0; 1]), and its rank."""
    d = kernel.shape[0]
    A = np.vstack([kernel.T - np.eye(d), np.ones((1, d))])
    b = np.zeros(d + 1)
    b[-1] = 1.0
    mu, _, rank, _ = np.linalg.lstsq(A, b, rcond=None)
    mu = np.clip(mu, 0.0, None)
    return mu / mu.sum(), rank


@pytest.mark.parametrize("alpha, eps_times_d", [(1.0, 0.0), (0.1, 0.0), (0.5, 0.5), (0.05, 1e-9)])
def test_stationary_law_by_lu_equals_least_squares(alpha, eps_times_d):
    # reference: the least-squares solve it replaced, on d = 2..50 (peaked rows, near-reducible with tiny ε)
    rng = np.random.default_rng(11)
    for d in (2, 3, 5, 8, 13, 21, 34, 50):
        kernel = nm.random_kernel(d, alpha=alpha, eps=eps_times_d / d, rng=rng)
        expected, rank = _least_squares_stationary(kernel)
        assert rank == d
        np.testing.assert_allclose(nm.stationary_distribution(kernel), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kernel", [np.eye(3), np.kron(np.eye(2), np.full((2, 2), 0.5)),
                                    np.array([[1.0, 0, 0], [0.3, 0.4, 0.3], [0, 0, 1.0]])],
                         ids=["identity", "two-blocks", "two-absorbing"])
def test_a_reducible_kernel_has_no_stationary_law(kernel):
    # reference: least squares finds rank < d on these kernels (two closed classes each)
    assert _least_squares_stationary(kernel)[1] < kernel.shape[0]
    with pytest.raises(ValueError, match="reducible"):
        nm.stationary_distribution(kernel)


def test_random_parents_are_uniform_over_earlier_positions():
    rng = np.random.default_rng(2)
    draws = np.array([nm.random_parents(6, rng=rng) for _ in range(4000)])
    assert np.all(draws[:, 0] == -1)
    assert np.all(draws[:, 1] == 0)  # position 1 has a single candidate
    for h in range(2, 6):
        counts = np.bincount(draws[:, h], minlength=h)
        assert len(counts) == h
        assert stats.chisquare(counts).pvalue > P_MIN


@pytest.mark.parametrize("stationary", [True, False])
def test_sample_chains_reproduce_exact_pairwise_joints(stationary):
    rng = np.random.default_rng(3)
    d, H, n = 4, 7, 200_000
    kernel = nm.random_kernel(d, alpha=0.8, eps=0.02, rng=rng)
    parents = nm.random_parents(H, rng=rng)
    init = None if stationary else rng.dirichlet(np.ones(d))
    x = nm.sample_chains(kernel, parents, n, rng=rng, init=init)
    # root law (catches a shuffled or ignored init)
    root = nm.pairwise_joint(kernel, parents, 0, 0, init=init)
    assert _gof(np.stack([x[:, 0], x[:, 0]], 1), root, n) > P_MIN
    for i, j in [(1, 0), (H - 1, parents[H - 1]), (H - 1, 2), (3, 5)]:
        assert _gof(x[:, [i, j]], nm.pairwise_joint(kernel, parents, i, j, init=init), n) > P_MIN, (i, j)


def test_sample_chains_detects_a_transposed_kernel():
    # The GOF test has power: chains drawn from πᵀ (a planted bug) fail against π's exact joint.
    rng = np.random.default_rng(4)
    kernel = nm.random_kernel(3, alpha=0.5, rng=rng)
    transposed = kernel.T / kernel.T.sum(1, keepdims=True)
    parents = np.array([-1, 0])
    x = nm.sample_chains(transposed, parents, 100_000, rng=rng)
    assert _gof(x[:, [1, 0]], nm.pairwise_joint(kernel, parents, 1, 0), 100_000) < P_MIN


def test_sample_chains_is_deterministic_for_a_generator_seed():
    kernel = nm.random_kernel(3, rng=np.random.default_rng(5))
    parents = np.array([-1, 0, 0, 2])
    a = nm.sample_chains(kernel, parents, 1000, rng=np.random.default_rng(9))
    b = nm.sample_chains(kernel, parents, 1000, rng=np.random.default_rng(9))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, nm.sample_chains(kernel, parents, 1000, rng=np.random.default_rng(10)))


def test_sample_task_examples_share_their_context_tree():
    # Pooled over contexts, (x_pa(h), x_h) of every example follows π, and (x_{h'}, x_h) for a non-parent
    # does not in general: checks both that trees are per-context and that examples use them.
    rng = np.random.default_rng(6)
    d, H, L, B = 3, 5, 4, 20_000
    kernel = nm.random_kernel(d, alpha=0.4, eps=0.02, rng=rng)
    batch = nm.sample_task(kernel, B, L, H, rng=rng)
    assert batch.context.shape == (B, L, H) and batch.query.shape == (B, H) and batch.parents.shape == (B, H)
    x = np.concatenate([batch.context, batch.query[:, None]], axis=1)  # (B, L+1, H)
    h = 4
    pa = batch.parents[:, h]
    parent_tokens = x[np.arange(B), :, pa].ravel()
    child_tokens = x[:, :, h].ravel()
    mu = nm.stationary_distribution(kernel)
    pair_law = mu[:, None] * kernel  # stationary: x_pa ~ μ
    assert _gof(np.stack([parent_tokens, child_tokens], 1), pair_law, B * (L + 1)) > P_MIN
    # trees are drawn per context, uniformly
    assert stats.chisquare(np.bincount(pa, minlength=h)).pvalue > P_MIN


@pytest.mark.parametrize("d", [3, 600])
def test_sample_chains_draws_the_inverse_cdf_token_of_each_uniform(d):
    # Reference: inversion written out token by token from the same uniforms (the generator's first (H, n) block):
    # x_h = the first j with cdf(j | x_pa) > u. At d = 600 the row CDFs (2.9 MB) are searched in sorted key order.
    kernel = nm.random_kernel(d, alpha=0.5, eps=0.0, rng=np.random.default_rng(d))
    parents, n = np.array([-1, 0, 1, 1, 0]), 400
    init = np.random.default_rng(1).dirichlet(np.ones(d))
    x = nm.sample_chains(kernel, parents, n, rng=np.random.default_rng(2), init=init)
    u = np.random.default_rng(2).random((len(parents), n))
    cdf, root_cdf = np.cumsum(kernel, axis=1), np.cumsum(init)
    for i in range(n):
        assert x[i, 0] == min(int(np.argmax(root_cdf > u[0, i])) if root_cdf[-1] > u[0, i] else d - 1, d - 1)
        for h in range(1, len(parents)):
            row = cdf[x[i, parents[h]]]
            assert x[i, h] == (int(np.argmax(row > u[h, i])) if row[-1] > u[h, i] else d - 1), (i, h)
