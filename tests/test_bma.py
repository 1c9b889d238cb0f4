"""BMA posterior, predictive and losses (claim bma-score-identity) against brute-force enumeration."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from bma_verify import numerics as nm
from bma_verify.numerics import strategies as bst
from tests.enumeration import enumerated_parent_posterior, enumerated_predictive


def _instance(seed, d=3, H=5, L=4, eps=0.03, stationary=True):
    rng = np.random.default_rng(seed)
    kernel = nm.random_kernel(d, alpha=0.7, eps=eps, rng=rng)
    init = nm.stationary_distribution(kernel) if stationary else rng.dirichlet(np.ones(d))
    batch = nm.sample_task(kernel, 1, L, H, rng=rng, init=init)
    return kernel, init, batch.context[0], batch.query[0], batch.parents[0]


@pytest.mark.parametrize("seed", range(6))
def test_parent_posterior_equals_enumeration_over_all_trees(seed):
    # Reference: Bayes' rule over all (H-1)! trees with the full likelihood μ(x_0) Π π(x_h | x_pa(h)).
    kernel, init, context, _, _ = _instance(seed, stationary=seed % 2 == 0)
    expected = enumerated_parent_posterior(kernel, init, context)
    np.testing.assert_allclose(nm.parent_posterior(kernel, context), expected, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_bma_predictive_equals_enumerated_posterior_predictive(seed):
    # Reference: enumeration over trees, conditioning on context AND the query prefix x^{L+1}_{<h}.
    kernel, init, context, query, _ = _instance(seed, H=5, L=3, stationary=seed % 2 == 1)
    expected = enumerated_predictive(kernel, init, context, query)
    np.testing.assert_allclose(nm.bma_predictive(kernel, context, query, init=init), expected, atol=1e-12)


def test_posterior_is_batched_over_leading_axes():
    # Reference: the same function called context by context.
    rng = np.random.default_rng(3)
    kernel = nm.random_kernel(4, eps=0.01, rng=rng)
    batch = nm.sample_task(kernel, 6, 5, 7, rng=rng)
    context = batch.context.reshape(2, 3, 5, 7)
    batched = nm.parent_posterior(kernel, context)
    looped = np.array([nm.parent_posterior(kernel, c) for c in batch.context]).reshape(2, 3, 7, 7)
    np.testing.assert_allclose(batched, looped, atol=1e-14)


def test_posterior_is_stable_for_long_contexts():
    # Reference: with L = 2000 the log-likelihoods are ~ -1e3; a naive exp would underflow to 0/0.
    rng = np.random.default_rng(4)
    kernel = nm.random_kernel(5, alpha=0.5, eps=0.01, rng=rng)
    batch = nm.sample_task(kernel, 3, 2000, 6, rng=rng)
    post = nm.parent_posterior(kernel, batch.context)
    assert np.all(np.isfinite(post))
    np.testing.assert_allclose(post[:, 1:].sum(-1), 1.0, atol=1e-12)
    # with so many examples the posterior is (almost surely) one-hot on the true parent
    assert nm.parent_accuracy(post, batch.parents) == 1.0


@given(bst.kernels(min_eps=0.01), st.data())
def test_posterior_rows_are_laws_over_earlier_positions(kernel, data):
    H = data.draw(st.integers(2, 7))
    context = data.draw(bst.contexts(kernel.shape[0], H, max_L=5))
    post = nm.parent_posterior(kernel, context)
    assert np.all(post[0] == 0)
    np.testing.assert_allclose(post[1:].sum(axis=1), 1.0, atol=1e-12)
    assert np.all(np.triu(post) == 0)  # zero for h' >= h


@given(bst.kernels(min_eps=0.01), st.data())
def test_adding_a_constant_to_a_column_of_log_kernel_leaves_the_posterior_unchanged(kernel, data):
    # prop1-invariance: W + 1aᵀ adds Σ_l a[x^l_h] to every candidate's score for position h.
    d = kernel.shape[0]
    H = data.draw(st.integers(2, 6))
    context = data.draw(bst.contexts(d, H, min_L=1, max_L=5))
    a = np.array(data.draw(st.lists(st.floats(-5, 5), min_size=d, max_size=d)))
    shifted = nm.selector_attention(np.log(kernel) + a[None, :], context)
    np.testing.assert_allclose(shifted, nm.parent_posterior(kernel, context), atol=1e-9)


def test_adding_a_constant_to_a_row_changes_the_posterior():
    # The converse of prop1-invariance (W + b1ᵀ): row shifts depend on the key's token, so they matter.
    rng = np.random.default_rng(5)
    kernel = nm.random_kernel(4, eps=0.02, rng=rng)
    context = nm.sample_task(kernel, 1, 3, 6, rng=rng).context[0]
    b = np.array([0.0, 1.0, -2.0, 0.5])
    moved = nm.selector_attention(np.log(kernel) + b[:, None], context)
    assert np.abs(moved - nm.parent_posterior(kernel, context)).max() > 1e-3


def test_losses_against_direct_loops():
    # Reference: plain Python loops over contexts and positions.
    rng = np.random.default_rng(6)
    kernel = nm.random_kernel(3, eps=0.05, rng=rng)
    batch = nm.sample_task(kernel, 5, 4, 6, rng=rng)
    pred = nm.bma_predictive(kernel, batch.context, batch.query)
    post = nm.parent_posterior(kernel, batch.context)
    q, p = batch.query, batch.parents
    terms = [(-np.log(pred[b, h, q[b, h]]), -np.log(kernel[q[b, p[b, h]], q[b, h]]), -np.log(post[b, h, p[b, h]]),
              float(np.argmax(post[b, h, :h]) == p[b, h])) for b in range(5) for h in range(1, 6)]
    query_l, oracle_l, parent_l, acc = np.mean(terms, axis=0)
    assert nm.query_loss(pred, q) == pytest.approx(query_l, abs=1e-12)
    assert nm.bma_loss(kernel, batch.context, q) == pytest.approx(query_l, abs=1e-12)
    assert nm.oracle_loss(kernel, p, q) == pytest.approx(oracle_l, abs=1e-12)
    assert nm.parent_loss(post, p) == pytest.approx(parent_l, abs=1e-12)
    assert nm.bma_parent_loss(kernel, batch.context, p) == pytest.approx(parent_l, abs=1e-12)
    assert nm.parent_accuracy(post, p) == pytest.approx(acc)


def test_bma_beats_oracle_free_predictors_and_not_the_oracle_on_average():
    # Reference: BMA is Bayes-optimal, so its expected loss is below a uniform-attention predictor's and
    # above the oracle's (which knows the tree); 2000 contexts make the ordering unambiguous.
    rng = np.random.default_rng(7)
    kernel = nm.random_kernel(5, alpha=0.5, eps=0.01, rng=rng)
    batch = nm.sample_task(kernel, 2000, 5, 8, rng=rng)
    H = 8
    uniform = np.tril(np.ones((H, H)), -1)
    uniform[1:] /= uniform[1:].sum(1, keepdims=True)
    pred_uniform = uniform @ kernel[batch.query]
    pred_uniform[:, 0] = nm.stationary_distribution(kernel)
    bma = nm.bma_loss(kernel, batch.context, batch.query)
    assert nm.oracle_loss(kernel, batch.parents, batch.query) < bma < nm.query_loss(pred_uniform, batch.query)


def test_impossible_context_is_rejected():
    kernel = np.array([[1.0, 0.0], [0.0, 1.0]])
    context = np.array([[0, 1, 0]])  # x_1 = 1 has no possible parent among x_0 = 0
    with pytest.raises(ValueError, match="impossible"):
        nm.parent_posterior(kernel, context)


def test_parent_loss_by_context_averages_to_parent_loss_and_reads_each_context():
    # reference: parent_loss on each context alone (a loop), and on the whole batch for the mean
    rng = np.random.default_rng(4)
    kernel = nm.random_kernel(3, alpha=1.0, eps=0.05, rng=rng)
    batch = nm.sample_task(kernel, 7, 5, 6, rng=rng)  # 7 contexts, L = 5, H = 6
    posterior = nm.parent_posterior(kernel, batch.context)
    per = nm.parent_loss_by_context(posterior, batch.parents)
    assert per.shape == (7,)
    assert per == pytest.approx([nm.parent_loss(posterior[b], batch.parents[b]) for b in range(7)], abs=1e-12)
    assert per.mean() == pytest.approx(nm.parent_loss(posterior, batch.parents), abs=1e-12)
