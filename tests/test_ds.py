"""The continuous (DS) task of prop2-ds-quadratic: sampler, exact posterior, BMA predictive, losses, bad input.

Independent references: the joint Gaussian law of a whole example under a given tree (covariance built from
the tree, ρ and A through the lowest common ancestor, evaluated with scipy.stats.multivariate_normal), and
enumeration of every tree (H = 4: 3! = 6 trees).
"""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import multivariate_normal

from bma_verify.numerics import parent_loss
from bma_verify.numerics.ds import (check_orthogonal, check_rho, ds_bma_loss, ds_bma_mean, ds_log_likelihood_scores,
                                    ds_mixture_log_density, ds_oracle_loss, ds_parent_posterior,
                                    ds_predictive_log_density, ds_predictive_mean, ds_score_terms, gaussian_nll,
                                    mixture_nll, one_hot_parents, posterior_kl, random_orthogonal, random_parent_trees,
                                    sample_ds_chains, sample_ds_task, squared_error)


def all_trees(H):
    """Every random recursive tree on H positions (parents[h] in 0..h-1): (H-1)! of them."""
    for rest in itertools.product(*[range(h) for h in range(1, H)]):
        yield np.array((-1,) + rest)


def path_to_root(parents, i):
    path = [i]
    while parents[path[-1]] >= 0:
        path.append(int(parents[path[-1]]))
    return path


def tree_covariance(A, rho, parents):
    """(H·d, H·d) covariance of a flattened example: x_i = (ρAᵀ)^k x_a + noise, a = lca(i, j).

    Cov(x_i, x_j) = (ρAᵀ)^{k_i} ((ρAᵀ)^{k_j})ᵀ with k_i, k_j the depths of i, j below their common ancestor
    (every marginal is N(0, I) because A is orthogonal). Written from the tree, not from the sampler.
    """
    H, d = len(parents), A.shape[0]
    M = rho * A.T
    cov = np.zeros((H * d, H * d))
    for i in range(H):
        for j in range(H):
            pi, pj = path_to_root(parents, i), path_to_root(parents, j)
            lca = next(a for a in pi if a in pj)
            ki, kj = pi.index(lca), pj.index(lca)
            cov[i * d:(i + 1) * d, j * d:(j + 1) * d] = (np.linalg.matrix_power(M, ki)
                                                         @ np.linalg.matrix_power(M, kj).T)
    return cov


def log_density(A, rho, parents, x):
    """log p(x) of examples x (..., H', d) under the tree restricted to its first H' positions."""
    Hp, d = x.shape[-2], x.shape[-1]
    cov = tree_covariance(A, rho, parents[:Hp])
    return multivariate_normal(np.zeros(Hp * d), cov).logpdf(x.reshape(*x.shape[:-2], Hp * d))


def instance(seed, d=3, rho=0.6, L=3, H=4):
    rng = np.random.default_rng(seed)
    A = random_orthogonal(d, rng=rng)
    task = sample_ds_task(A, rho, 1, L, H, rng=rng)
    return A, rho, task.context[0], task.query[0], task.parents[0]


def brute_force_tree_posterior(A, rho, context):
    """P(tree | context) for every tree, from the joint Gaussian density of each example."""
    H = context.shape[1]
    trees = list(all_trees(H))
    logw = np.array([np.sum(log_density(A, rho, t, context)) for t in trees])  # uniform prior over trees
    w = np.exp(logw - logw.max())
    return trees, w / w.sum()


@pytest.mark.parametrize("seed", range(4))
def test_exact_posterior_equals_enumeration_of_trees(seed):
    # Reference: Bayes over all 6 trees with each example's joint Gaussian density, marginalised to pa(h).
    A, rho, context, _, _ = instance(seed)
    trees, w = brute_force_tree_posterior(A, rho, context)
    H = context.shape[1]
    expected = np.zeros((H, H))
    for t, wt in zip(trees, w):
        expected[np.arange(1, H), t[1:]] += wt
    np.testing.assert_allclose(ds_parent_posterior(A, rho, context), expected, atol=1e-10)


@given(d=st.integers(1, 3), H=st.integers(2, 4), L=st.integers(0, 3), rho=st.floats(0.05, 0.95),
       seed=st.integers(0, 2 ** 32 - 1))
def test_exact_posterior_equals_enumeration_for_any_instance(d, H, L, rho, seed):
    # Same reference as above over random sizes, ρ and A (L = 0: the prior, uniform rows).
    rng = np.random.default_rng(seed)
    A = random_orthogonal(d, rng=rng)
    context = sample_ds_task(A, rho, 1, max(L, 1), H, rng=rng).context[0][:L]  # (L, H, d)
    trees, w = brute_force_tree_posterior(A, rho, context)
    expected = np.zeros((H, H))
    for t, wt in zip(trees, w):
        expected[np.arange(1, H), t[1:]] += wt
    np.testing.assert_allclose(ds_parent_posterior(A, rho, context), expected, atol=1e-9)


def test_score_is_bilinear_plus_key_only_quadratic_term():
    # Proposition 2: full log-likelihood score − (bilinear + quadratic(h')) depends on h only.
    A, rho, context, _, _ = instance(7, d=4, L=5, H=6)
    full = ds_log_likelihood_scores(A, rho, context)
    bilinear, quadratic = ds_score_terms(A, rho, context)
    rest = full - bilinear - quadratic[None, :]
    for h in range(2, 6):
        np.testing.assert_allclose(rest[h, :h], rest[h, 0], rtol=1e-12, atol=1e-9)
    assert np.ptp(quadratic) > 0.1  # the key-only term really varies with h'


@pytest.mark.parametrize("seed", range(3))
def test_bma_predictive_density_and_mean_equal_enumeration(seed):
    # Reference: p(x^q_h | context, x^q_{<h}) = Σ_T P(T | ctx) p(x^q_{<=h} | T) / Σ_T P(T | ctx) p(x^q_{<h} | T),
    # and the mean from Gaussian conditioning under each tree, weighted the same way.
    A, rho, context, query, _ = instance(100 + seed)
    trees, w = brute_force_tree_posterior(A, rho, context)
    H, d = query.shape
    got_logp = ds_predictive_log_density(A, rho, context, query)
    got_mean = ds_bma_mean(A, rho, context, query)
    assert got_logp[0] == pytest.approx(multivariate_normal(np.zeros(d)).logpdf(query[0]), abs=1e-12)
    np.testing.assert_allclose(got_mean[0], 0.0)
    for h in range(1, H):
        num = np.array([log_density(A, rho, t, query[:h + 1]) for t in trees])
        den = np.array([log_density(A, rho, t, query[:h]) for t in trees])
        expected = math.log(np.sum(w * np.exp(num))) - math.log(np.sum(w * np.exp(den)))
        assert got_logp[h] == pytest.approx(expected, abs=1e-9)
        prefix_weight = w * np.exp(den)
        mean = np.zeros(d)
        for t, wt in zip(trees, prefix_weight / prefix_weight.sum()):
            cov = tree_covariance(A, rho, t[:h + 1])
            cross, prior = cov[h * d:, :h * d], cov[:h * d, :h * d]
            mean += wt * cross @ np.linalg.solve(prior, query[:h].ravel())
        np.testing.assert_allclose(got_mean[h], mean, atol=1e-9)


def test_sampler_covariances_match_the_tree():
    # Reference: tree_covariance (from ρ, A and the tree); every empirical covariance entry within 5 standard
    # errors, SE² = (Σ_ii Σ_jj + Σ_ij²) / n for Gaussian data.
    rng = np.random.default_rng(11)
    d, rho, n = 3, 0.7, 40_000
    A = random_orthogonal(d, rng=rng)
    parents = np.array([-1, 0, 1, 1, 0, 3])
    x = sample_ds_chains(A, rho, parents, n, rng=rng).reshape(n, -1)  # (n, H·d)
    exact = tree_covariance(A, rho, parents)
    emp = x.T @ x / n  # mean is 0 by construction
    se = np.sqrt((np.outer(np.diag(exact), np.diag(exact)) + exact ** 2) / n)
    z = np.abs(emp - exact) / se
    assert z.max() < 5.0, f"max z = {z.max():.2f} at {np.unravel_index(z.argmax(), z.shape)}"


def test_batched_sampler_uses_each_rows_tree():
    # Reference: the model's definition. With each row's own parents, η = (x_h − ρAᵀx_pa(h)) / √(1−ρ²) must be
    # i.i.d. N(0, 1): mean within 5 SE of 0, and the mean square within 5 SE of 1 (Var η² = 2).
    rng = np.random.default_rng(3)
    d, rho = 4, 0.6
    A = random_orthogonal(d, rng=rng)
    task = sample_ds_task(A, rho, 2000, 2, 6, rng=rng)
    x = np.concatenate([task.context, task.query[:, None]], axis=1)  # (B, L+1, H, d)
    pa = np.take_along_axis(x, task.parents[:, None, 1:, None], axis=2)  # (B, L+1, H-1, d)
    eta = ((x[:, :, 1:] - rho * pa @ A) / math.sqrt(1 - rho ** 2)).ravel()
    n = eta.size
    assert abs(eta.mean()) < 5 / math.sqrt(n)
    assert abs(np.mean(eta ** 2) - 1.0) < 5 * math.sqrt(2 / n)
    # a wrong tree (everyone's parent is 0) must fail the same test
    wrong = ((x[:, :, 2:] - rho * x[:, :, :1] @ A) / math.sqrt(1 - rho ** 2)).ravel()
    assert abs(np.mean(wrong ** 2) - 1.0) > 5 * math.sqrt(2 / wrong.size)


def test_random_parent_trees_are_uniform():
    # Reference: parents[h] ~ U{0..h-1}; chi-square-free check, each count within 5 SE of n/h.
    n, H = 30_000, 6
    par = random_parent_trees(n, H, rng=np.random.default_rng(0))
    assert np.all(par[:, 0] == -1)
    for h in range(1, H):
        counts = np.bincount(par[:, h], minlength=h)
        assert len(counts) == h
        p = 1.0 / h
        assert np.all(np.abs(counts - n * p) <= 5 * math.sqrt(n * p * (1 - p)))


def test_random_orthogonal_is_orthogonal_and_seeded():
    A = random_orthogonal(6, rng=np.random.default_rng(5))
    np.testing.assert_allclose(A.T @ A, np.eye(6), atol=1e-12)
    np.testing.assert_array_equal(A, random_orthogonal(6, rng=np.random.default_rng(5)))


def test_oracle_nll_and_mse_match_their_expectations():
    # Reference: E[−log N(x_h; ρAᵀx_pa, (1−ρ²)I)] = d/2·log(2πe(1−ρ²)) and E‖x_h − ρAᵀx_pa‖² = d(1−ρ²);
    # per-context values are i.i.d., compared within 5 standard errors.
    rng = np.random.default_rng(2)
    d, rho = 4, 0.5
    A = random_orthogonal(d, rng=rng)
    task = sample_ds_task(A, rho, 4000, 1, 7, rng=rng)
    per_ctx_nll = np.array([ds_oracle_loss(A, rho, p, q) for p, q in zip(task.parents[:400], task.query[:400])])
    nll_expected = 0.5 * d * math.log(2 * math.pi * math.e * (1 - rho ** 2))
    assert abs(per_ctx_nll.mean() - nll_expected) < 5 * per_ctx_nll.std(ddof=1) / math.sqrt(400)
    mse = ds_oracle_loss(A, rho, task.parents, task.query, kind="mse")
    # ‖noise‖²(1−ρ²)·χ²_d per position: variance 2d(1−ρ²)² over 4000·6 positions
    assert abs(mse - d * (1 - rho ** 2)) < 5 * math.sqrt(2 * d) * (1 - rho ** 2) / math.sqrt(4000 * 6)


def test_point_predictor_nll_with_the_oracle_mean_is_the_oracle_loss():
    # Two code paths: a one-hot mixture density (ds_oracle_loss) and a point Gaussian at the oracle's mean.
    A, rho, context, query, parents = instance(21, d=4, L=2, H=7)
    oracle_mean = ds_predictive_mean(one_hot_parents(parents), A, rho, query)
    assert gaussian_nll(oracle_mean, query, 1 - rho ** 2) == pytest.approx(ds_oracle_loss(A, rho, parents, query),
                                                                           rel=1e-12)
    assert squared_error(oracle_mean, query) == pytest.approx(ds_oracle_loss(A, rho, parents, query, kind="mse"))
    with pytest.raises(ValueError, match="variance"):
        gaussian_nll(oracle_mean, query, 0.0)
    with pytest.raises(ValueError, match="kind"):
        ds_bma_loss(A, rho, context, query, kind="l1")


def test_bma_beats_a_uniform_attention_and_is_beaten_by_the_oracle():
    # Reference: BMA is the Bayes predictor; the per-context difference to uniform attention is ≥ 0 in mean.
    rng = np.random.default_rng(4)
    A = random_orthogonal(3, rng=rng)
    rho = 0.6
    task = sample_ds_task(A, rho, 3000, 4, 6, rng=rng)
    post = ds_parent_posterior(A, rho, task.context)
    uniform = ds_parent_posterior(A, rho, task.context[:, :0])  # L = 0: uniform rows
    diff = (-ds_mixture_log_density(uniform, A, rho, task.query)[:, 1:].mean(-1)
            + ds_mixture_log_density(post, A, rho, task.query)[:, 1:].mean(-1))
    assert diff.mean() - 3 * diff.std(ddof=1) / math.sqrt(diff.size) > 0
    assert ds_bma_loss(A, rho, task.context, task.query) == pytest.approx(mixture_nll(post, A, rho, task.query))
    assert ds_oracle_loss(A, rho, task.parents, task.query) < ds_bma_loss(A, rho, task.context, task.query)


def test_posterior_kl_is_the_expected_parent_loss_gap():
    # Reference: L_pa(A) − L_pa(BMA) sampled over true parents (foundation's parent_loss), within 5 SE.
    rng = np.random.default_rng(8)
    A = random_orthogonal(3, rng=rng)
    rho = 0.6
    task = sample_ds_task(A, rho, 6000, 2, 6, rng=rng)
    log_post = np.log(np.clip(ds_parent_posterior(A, rho, task.context), 1e-300, None))
    att = ds_parent_posterior(A, 0.3, task.context)  # a wrong-ρ attention
    with np.errstate(divide="ignore"):
        kl = posterior_kl(log_post, np.log(att))
    per = np.array([parent_loss(a, p) - parent_loss(np.exp(lp), p)
                    for a, lp, p in zip(att, log_post, task.parents)])
    assert abs(per.mean() - kl.mean()) < 5 * per.std(ddof=1) / math.sqrt(per.size)
    assert np.all(kl >= -1e-12)


def test_one_hot_parents_puts_mass_on_the_parent():
    par = np.array([[-1, 0, 0, 2], [-1, 0, 1, 1]])
    att = one_hot_parents(par)
    assert att.shape == (2, 4, 4)
    assert parent_loss(att, par) == 0.0
    np.testing.assert_array_equal(att.sum(-1)[:, 1:], 1.0)


# ------------------------------------------------------------------------------------------------ bad input

@pytest.mark.parametrize("rho", [0.0, -0.2, 1.0, 1.5, float("nan"), float("inf"), "x"])
def test_bad_rho_is_rejected(rho):
    with pytest.raises(ValueError, match="rho"):
        check_rho(rho)
    A = np.eye(2)
    with pytest.raises(ValueError, match="rho"):
        sample_ds_task(A, rho, 2, 1, 3, rng=np.random.default_rng(0))


@given(st.floats(0.05, 3.0), st.integers(2, 5))
def test_non_orthogonal_A_is_rejected(scale, d):
    A = random_orthogonal(d, rng=np.random.default_rng(d)) * (1.0 + scale)
    with pytest.raises(ValueError, match="orthogonal"):
        check_orthogonal(A)
    with pytest.raises(ValueError, match="A must be orthogonal"):
        ds_parent_posterior(A, 0.5, np.zeros((1, 3, d)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_inputs_are_rejected(bad):
    A, rho, context, query, _ = instance(0)
    ctx = context.copy()
    ctx[1, 2, 0] = bad
    with pytest.raises(ValueError, match="context must be finite"):
        ds_parent_posterior(A, rho, ctx)
    q = query.copy()
    q[2, 1] = bad
    with pytest.raises(ValueError, match="query must be finite"):
        ds_predictive_log_density(A, rho, context, q)
    A_bad = A.copy()
    A_bad[0, 0] = bad
    with pytest.raises(ValueError, match="A must be finite"):
        ds_parent_posterior(A_bad, rho, context)


def test_wrong_shapes_are_rejected():
    A = np.eye(3)
    with pytest.raises(ValueError, match="last axis of length d=3"):
        ds_parent_posterior(A, 0.5, np.zeros((2, 4, 2)))
    with pytest.raises(ValueError, match="square"):
        check_orthogonal(np.eye(3)[:2])
    with pytest.raises(ValueError, match="parents"):
        sample_ds_chains(A, 0.5, np.array([-1, 1, 0]), 3, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="rng"):
        sample_ds_task(A, 0.5, 2, 1, 3, rng=0)
    with pytest.raises(ValueError, match="mean must have the shape"):
        squared_error(np.zeros((3, 2)), np.zeros((4, 2)))
