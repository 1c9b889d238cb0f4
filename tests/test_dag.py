"""The k-parent DAG task (our extension): sampling, exact parent-set posterior and BMA predictive.

References: brute-force Bayes over every DAG with the full likelihood (``numerics.dag_enumeration``), naive
Python products written out here, and — for k = 1 — today's tree functions, which must be reproduced bit for bit.
"""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from bma_verify import numerics as nm
from bma_verify.numerics import strategies as bst
from bma_verify.numerics.dag import choice_counts
from bma_verify.numerics.dag_agreement import transposed_parent_order


def _instance(seed, d=3, k=2, H=5, L=4, eps=0.03, stationary=True):
    rng = np.random.default_rng(seed)
    kernels = nm.random_dag_kernels(d, k, alpha=0.7, eps=eps, rng=rng)
    init = None if stationary else rng.dirichlet(np.ones(d))
    batch = nm.sample_dag_task(kernels, 1, L, H, rng=rng, init=init)
    return kernels, init, batch.context[0], batch.query[0], batch.parent_sets[0]


def _naive_log_likelihood(kernels, parent_sets, x, init):
    """log μ₀(x_0) + Σ_h log π(x_h | x_S_h), indexing each table as a (d,)*m + (d,) tensor (no row encoding)."""
    d = kernels[0].shape[1]
    law0 = nm.stationary_distribution(kernels[0]) if init is None else init
    total = math.log(law0[x[0]])
    for h in range(1, len(x)):
        S = [int(s) for s in parent_sets[h] if s >= 0]
        table = kernels[len(S) - 1].reshape((d,) * len(S) + (d,))
        total += math.log(table[tuple(x[s] for s in S) + (x[h],)])
    return total


# ----------------------------------------------------------------------------------------------------------
# Candidate sets, encoding, sampling


@pytest.mark.parametrize("H,k", [(2, 1), (5, 1), (5, 2), (6, 3), (7, 2)])
def test_candidate_sets_are_colex_and_each_position_uses_a_prefix(H, k):
    # Reference: itertools.combinations of range(h), sorted by reversed tuple (colex), position by position.
    sets = [tuple(s) for s in nm.dag_candidate_sets(H, k).tolist()]
    assert sets == sorted(itertools.combinations(range(H), k), key=lambda s: s[::-1])
    for h in range(k, H):
        own = sorted(itertools.combinations(range(h), k), key=lambda s: s[::-1])
        assert sets[:math.comb(h, k)] == own
    assert nm.dag_candidate_counts(H, k).tolist() == [math.comb(h, min(k, h)) for h in range(H)]


def test_parent_set_index_inverts_parent_sets_from_choices():
    # Reference: the choices the parent sets were built from.
    rng = np.random.default_rng(0)
    H, k = 7, 2
    choices = rng.integers(0, choice_counts(H, k)[k:], size=(5, H - k))
    sets = nm.parent_sets_from_choices(choices, H, k)
    np.testing.assert_array_equal(nm.parent_set_index(sets)[:, k:], choices)
    assert np.all(nm.parent_set_index(sets)[:, :k] == -1)


def test_encoding_matches_the_tensor_view_of_the_table():
    # Reference: π_m.reshape((d,)*m + (d,)) indexed by the parent values in position order.
    rng = np.random.default_rng(1)
    d, k = 3, 3
    table = nm.random_dag_kernels(d, k, rng=rng)[-1]
    for values in itertools.product(range(d), repeat=k):
        row = nm.encode_parent_values(np.array(values), d)
        np.testing.assert_array_equal(table[row], table.reshape((d,) * k + (d,))[values])


def test_k1_sampling_reproduces_the_tree_sampler_bit_for_bit():
    # Reference: numerics.random_kernel / random_parents / sample_task / sample_chains on the same seed.
    for H in (2, 5, 9):
        a, b = np.random.default_rng(H), np.random.default_rng(H)
        kernel = nm.random_kernel(3, alpha=0.5, eps=0.02, rng=a)
        (dag_kernel,) = nm.random_dag_kernels(3, 1, alpha=0.5, eps=0.02, rng=b)
        np.testing.assert_array_equal(kernel, dag_kernel)
        np.testing.assert_array_equal(nm.random_parents(H, rng=a), nm.random_parent_sets(H, 1, rng=b)[:, 0])
        tree, dag = nm.sample_task(kernel, 4, 6, H, rng=a), nm.sample_dag_task((kernel,), 4, 6, H, rng=b)
        np.testing.assert_array_equal(tree.parents, dag.parent_sets[..., 0])
        np.testing.assert_array_equal(tree.context, dag.context)
        np.testing.assert_array_equal(tree.query, dag.query)
        chains = nm.sample_chains(kernel, tree.parents[0], 50, rng=a)
        np.testing.assert_array_equal(chains, nm.sample_dag_chains(kernel, dag.parent_sets[0], 50, rng=b))


def test_random_kernels_have_the_documented_shapes_and_floor():
    # Reference: the documented construction, rows of shape (d**m, d) with every entry >= eps.
    kernels = nm.random_dag_kernels(3, 3, alpha=0.3, eps=0.05, rng=np.random.default_rng(2))
    assert [t.shape for t in kernels] == [(3, 3), (9, 3), (27, 3)]
    for t in kernels:
        assert t.min() >= 0.05 - 1e-15
        np.testing.assert_allclose(t.sum(1), 1.0, atol=1e-15)


def test_random_parent_sets_are_uniform_over_candidates():
    # Reference: the uniform law over the C(h, k) subsets; a chi-square-like bound on 6000 draws per subset count.
    rng = np.random.default_rng(3)
    H, k, n = 6, 2, 6000
    index = nm.parent_set_index(np.stack([nm.random_parent_sets(H, k, rng=rng) for _ in range(n)]))
    for h in range(k, H):
        counts = np.bincount(index[:, h], minlength=math.comb(h, k))
        expected = n / math.comb(h, k)
        assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected)), (h, counts)


def test_sampled_set_joints_match_the_exact_joint():
    # Reference: the exact joint P(x_S, x_h) from the product formula; each cell within 5 standard errors.
    rng = np.random.default_rng(4)
    kernels = nm.random_dag_kernels(2, 2, alpha=0.6, eps=0.05, rng=rng)
    parent_sets = np.array([[-1, -1], [0, -1], [0, 1], [1, 2], [0, 3]])
    init = np.array([0.3, 0.7])
    x = nm.sample_dag_chains(kernels, parent_sets, 40_000, rng=rng, init=init)
    law = nm.DagLaw(kernels, parent_sets, init)
    for S, h in (((1, 2), 3), ((0, 3), 4), ((1, 2), 4)):
        exact = law.joint(S, (h,))  # (4, 2)
        code = nm.encode_parent_values(x[:, list(S)], 2)
        empirical = np.bincount(code * 2 + x[:, h], minlength=8).reshape(4, 2) / x.shape[0]
        stderr = np.sqrt(exact * (1 - exact) / x.shape[0])
        assert np.all(np.abs(empirical - exact) < 5 * stderr + 1e-12), (S, h)


def test_dag_sequence_log_likelihood_equals_a_naive_product():
    # Reference: the naive product over positions with tensor-indexed tables (no row encoding).
    kernels, init, context, query, parent_sets = _instance(5, d=3, k=3, H=6, stationary=False)
    got = nm.dag_sequence_log_likelihood(kernels, parent_sets, np.vstack([context, query[None]]), init)
    expected = [_naive_log_likelihood(kernels, parent_sets, x, init) for x in np.vstack([context, query[None]])]
    np.testing.assert_allclose(got, expected, rtol=1e-13)


def test_joint_tensor_equals_sequence_enumeration():
    # Reference: brute_force_dag_joint, which sums full sequence likelihoods over every sequence.
    kernels, init, _, _, parent_sets = _instance(6, d=3, k=2, H=6, stationary=False)
    law = nm.DagLaw(kernels, parent_sets, init)
    for positions in ((0, 5), (1, 2, 4), (2, 3, 5), (0, 1, 2, 3, 4, 5)):
        np.testing.assert_allclose(law.marginal(positions), nm.brute_force_dag_joint(kernels, parent_sets, positions,
                                                                                      init), atol=1e-15)
    # an overlapping pair of sets: P(x_{1,3} = a, x_{3,4} = b) vanishes unless the shared x_3 agrees
    joint = law.joint((1, 3), (3, 4))
    triple = nm.brute_force_dag_joint(kernels, parent_sets, (1, 3, 4), init)
    for a1, a3, b4 in itertools.product(range(3), repeat=3):
        assert joint[a1 * 3 + a3, a3 * 3 + b4] == pytest.approx(triple[a1, a3, b4], abs=1e-15)
    assert joint.sum() == pytest.approx(1.0) and np.count_nonzero(joint) == 27


# ----------------------------------------------------------------------------------------------------------
# Posterior and predictive


@pytest.mark.parametrize("seed,d,k,H,L", [(0, 3, 2, 5, 4), (1, 2, 2, 6, 5), (2, 3, 3, 5, 3), (3, 2, 3, 6, 6),
                                          (4, 2, 1, 5, 4), (5, 3, 2, 4, 0)])
def test_parent_posterior_equals_enumeration_over_all_dags(seed, d, k, H, L):
    # Reference: Bayes' rule over all Π C(h, k) DAGs with the full likelihood, marginalised per position.
    kernels, init, context, _, _ = _instance(seed, d=d, k=k, H=H, L=L, stationary=seed % 2 == 0)
    expected = nm.brute_force_dag_posterior(kernels, context, init)
    np.testing.assert_allclose(nm.dag_parent_posterior(kernels, context), expected, atol=1e-12)


@pytest.mark.parametrize("seed,d,k,H", [(0, 3, 2, 5), (1, 2, 3, 5), (2, 2, 2, 6)])
def test_bma_predictive_equals_enumerated_posterior_predictive(seed, d, k, H):
    # Reference: enumeration over DAGs conditioning on the context AND the query prefix x^{L+1}_{<h}.
    kernels, init, context, query, _ = _instance(seed, d=d, k=k, H=H, L=3, stationary=seed % 2 == 1)
    expected = nm.brute_force_dag_predictive(kernels, context, query, init)
    np.testing.assert_allclose(nm.dag_bma_predictive(kernels, context, query, init=init), expected, atol=1e-12)


@pytest.mark.parametrize("H", [2, 3, 8, 9, 16])
def test_k1_posterior_predictive_and_losses_equal_the_tree_functions_bit_for_bit(H):
    # Reference: numerics.parent_posterior / bma_predictive / selector_scores / bma_loss / oracle_loss. The
    # arithmetic is the same (same gathered log-likelihoods, same axis sums, same masked logsumexp over H columns,
    # same matmul), so the results are identical, not merely close.
    rng = np.random.default_rng(H)
    kernel = nm.random_kernel(3, alpha=0.5, eps=0.01, rng=rng)
    batch = nm.sample_task(kernel, 6, 7, H, rng=rng)
    context = batch.context.reshape(2, 3, 7, H)
    query = batch.query.reshape(2, 3, H)
    np.testing.assert_array_equal(nm.dag_parent_posterior((kernel,), context), nm.parent_posterior(kernel, context))
    np.testing.assert_array_equal(nm.dag_set_scores(np.log(kernel), context), nm.selector_scores(np.log(kernel),
                                                                                                 context))
    for init in (None, rng.dirichlet(np.ones(3))):
        np.testing.assert_array_equal(nm.dag_bma_predictive(kernel, context, query, init),
                                      nm.bma_predictive(kernel, context, query, init))
    assert nm.dag_bma_loss(kernel, batch.context, batch.query) == nm.bma_loss(kernel, batch.context, batch.query)
    assert nm.dag_oracle_loss(kernel, batch.parents[..., None], batch.query) == nm.oracle_loss(kernel, batch.parents,
                                                                                               batch.query)


def test_posterior_is_batched_over_leading_axes():
    # Reference: the same function called context by context.
    rng = np.random.default_rng(7)
    kernels = nm.random_dag_kernels(3, 2, eps=0.01, rng=rng)
    batch = nm.sample_dag_task(kernels, 6, 5, 6, rng=rng)
    batched = nm.dag_parent_posterior(kernels, batch.context.reshape(2, 3, 5, 6))
    looped = np.array([nm.dag_parent_posterior(kernels, c) for c in batch.context]).reshape(batched.shape)
    np.testing.assert_allclose(batched, looped, atol=1e-15)


def test_posterior_concentrates_on_the_true_sets_for_long_contexts():
    # Reference: the sampled parent sets; with L = 3000 examples the log-likelihoods are ~ -1e3 (a naive exp
    # would give 0/0) and the posterior is one-hot on the truth for an informative kernel.
    rng = np.random.default_rng(8)
    kernels = nm.random_dag_kernels(3, 2, alpha=0.3, eps=0.01, rng=rng)
    batch = nm.sample_dag_task(kernels, 3, 3000, 6, rng=rng)
    post = nm.dag_parent_posterior(kernels, batch.context)
    assert np.all(np.isfinite(post))
    np.testing.assert_allclose(post[:, 2:].sum(-1), 1.0, atol=1e-12)
    truth = nm.parent_set_index(batch.parent_sets)[:, 2:]
    np.testing.assert_array_equal(post[:, 2:].argmax(-1), truth)
    assert nm.dag_oracle_loss(kernels, batch.parent_sets, batch.query) <= nm.dag_bma_loss(
        kernels, batch.context, batch.query) + 1e-9


@given(bst.dag_instances(min_eps=0.01, max_d=3, max_k=2, max_H=5), st.data())
def test_posterior_rows_are_laws_over_the_live_candidates_and_match_enumeration(instance, data):
    # Reference: brute-force enumeration over all DAGs (a property over Hypothesis' instances). μ₀ cancels in
    # the posterior; the reference uses the stationary law of π_1 (positive here), since a drawn μ₀ may give the
    # context's x_0 probability zero.
    kernels, _, _ = instance
    H = data.draw(st.integers(len(kernels) + 1, 5))
    context = data.draw(bst.contexts(kernels[0].shape[1], H, max_L=4))
    post = nm.dag_parent_posterior(kernels, context)
    live = choice_counts(H, len(kernels))
    for h in range(H):
        np.testing.assert_allclose(post[h, :live[h]].sum(), 1.0 if live[h] else 0.0, atol=1e-12)
        assert np.all(post[h, live[h]:] == 0)
    np.testing.assert_allclose(post, nm.brute_force_dag_posterior(kernels, context), atol=1e-11)


@given(bst.dag_instances(min_eps=0.01, max_k=3, max_H=6))
def test_strategies_give_valid_instances(instance):
    # Reference: the package's own validators and the documented floor.
    kernels, parent_sets, init = instance
    checked = nm.check_dag_kernels(kernels)
    assert min(t.min() for t in checked) >= 0.01 - 1e-12
    nm.check_parent_sets(parent_sets, k=len(kernels))
    if init is not None:
        np.testing.assert_allclose(init.sum(), 1.0)


def test_permuting_the_context_examples_leaves_the_posterior_unchanged():
    # Reference: the posterior of the unpermuted context (exchangeability of the L examples).
    kernels, _, context, _, _ = _instance(9, d=3, k=2, H=6, L=6)
    perm = np.random.default_rng(0).permutation(context.shape[0])
    np.testing.assert_allclose(nm.dag_parent_posterior(kernels, context[perm]),
                               nm.dag_parent_posterior(kernels, context), atol=1e-14)


# ----------------------------------------------------------------------------------------------------------
# Validation


def _good():
    return nm.random_dag_kernels(3, 2, eps=0.02, rng=np.random.default_rng(0))


@pytest.mark.parametrize("bad,match", [
    ([], "non-empty sequence"),
    ("abc", "non-empty sequence"),
    (np.ones((9, 3)) / 3, "square"),
    ((np.ones((3, 3)) / 3, np.ones((3, 3)) / 3), r"kernels\[1\].*shape \(d\*\*2, d\) = \(9, 3\)"),
    ((np.ones((3, 3)) / 3, np.full((9, 3), 0.5)), r"kernels\[1\] must be row-stochastic"),
    ((np.ones((3, 3)) / 3, np.tile([[1.2, -0.1, -0.1]], (9, 1))), r"kernels\[1\] must have non-negative"),
    ((np.full((3, 3), np.nan),), r"kernels\[0\] must contain only finite"),
    ((np.ones((1, 1)),), "d >= 2"),
])
def test_bad_kernels_raise_value_errors_naming_the_argument(bad, match):
    with pytest.raises(ValueError, match=match):
        nm.check_dag_kernels(bad)
    context = np.zeros((2, 4), dtype=np.int64)
    with pytest.raises(ValueError, match=match):
        nm.dag_parent_posterior(bad, context)


@pytest.mark.parametrize("bad,match", [
    ([[-1, -1], [0, -1], [1, 0], [0, 2]], "increasing position order"),
    ([[-1, -1], [0, -1], [0, 2], [0, 1]], r"earlier positions in 0\.\.1"),
    ([[-1, -1], [0, 1], [0, 1], [0, 1]], r"parent_sets\[\.\.\., 1, 1:\] must be -1"),
    ([[0, -1], [0, -1], [0, 1], [0, 1]], r"parent_sets\[\.\.\., 0, 0:\] must be -1"),
    ([[-1, -1], [0, -1], [0, 1], [1, 1]], "distinct"),
    ([[-1.5, -1], [0, -1], [0, 1], [0, 1]], "integer array"),
    ([-1, 0, 1], r"shape \(\.\.\., H, k\)"),
])
def test_bad_parent_sets_raise_value_errors_naming_the_argument(bad, match):
    with pytest.raises(ValueError, match=match):
        nm.check_parent_sets(bad, k=2)
    with pytest.raises(ValueError, match=match):
        nm.sample_dag_chains(_good(), bad, 3, rng=np.random.default_rng(0))


def test_bad_task_arguments_raise_value_errors_naming_the_argument():
    kernels = _good()
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="k must be at most H - 1"):
        nm.dag_candidate_sets(3, 3)
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        nm.random_parent_sets(5, 0, rng=rng)
    with pytest.raises(ValueError, match="rng must be a numpy.random.Generator"):
        nm.random_dag_kernels(3, 2, rng=0)
    with pytest.raises(ValueError, match="eps must satisfy d\\*eps <= 1"):
        nm.random_dag_kernels(3, 2, eps=0.5, rng=rng)
    with pytest.raises(ValueError, match="context must hold tokens in 0..2"):
        nm.dag_parent_posterior(kernels, np.full((2, 4), 3))
    with pytest.raises(ValueError, match="needs H >= k \\+ 1"):
        nm.dag_parent_posterior(kernels, np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="query must have shape"):
        nm.dag_bma_predictive(kernels, np.zeros((2, 4), dtype=np.int64), np.zeros(5, dtype=np.int64))
    with pytest.raises(ValueError, match="init must be a probability vector of length d = 3"):
        nm.sample_dag_task(kernels, 2, 3, 5, rng=rng, init=[0.5, 0.5])
    with pytest.raises(ValueError, match="L must be an integer >= 0"):
        nm.sample_dag_task(kernels, 2, -1, 5, rng=rng)
    with pytest.raises(ValueError, match="log_table must have d\\*\\*k rows"):
        nm.dag_set_scores(np.zeros((5, 3)), np.zeros((2, 4), dtype=np.int64))


def test_impossible_context_raises():
    # A kernel with zeros: x_h = 0 is impossible after parents (0, 0) for every candidate.
    order1 = np.array([[0.5, 0.5], [0.5, 0.5]])
    order2 = np.array([[0.0, 1.0], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]])
    context = np.zeros((1, 4), dtype=np.int64)
    with pytest.raises(ValueError, match="impossible"):
        nm.dag_parent_posterior((order1, order2), context)


def test_transposed_parent_order_swaps_the_first_two_parents():
    # Reference: the tensor view π[a, b, c, x] of the table; the planted table must read π[b, a, c, x].
    rng = np.random.default_rng(0)
    kernels = nm.random_dag_kernels(3, 3, rng=rng)
    planted = transposed_parent_order(kernels)
    top, new = kernels[-1].reshape(3, 3, 3, 3), planted[-1].reshape(3, 3, 3, 3)
    np.testing.assert_array_equal(new, top.transpose(1, 0, 2, 3))
    np.testing.assert_array_equal(planted[0], kernels[0])
    with pytest.raises(ValueError, match="k >= 2"):
        transposed_parent_order(kernels[:1])
