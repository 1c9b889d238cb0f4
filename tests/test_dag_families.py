"""Families of standard attention vs the k-parent set posterior (model/dag_families.py); the check of claim
ext-dag-families is tested in tests/claims/test_ext_dag_families.py.

Compared against: the exact set posterior of numerics.dag (the 2-simplicial family contains it, so its best fit
must reach ~0; at k = 1 the bilinear families contain the tree BMA); a planted product-of-experts target that
lies in every standard family (fits to ~0).
"""
import numpy as np
import pytest

import bma_verify.model.dag_families as M
from bma_verify.numerics.dag import random_dag_kernels, sample_dag_task
from bma_verify.numerics.bma import parent_posterior
from bma_verify.numerics.task import random_kernel, sample_task


def _task(k, L=3, n=60, seed=0, d=3, H=5):
    rng = np.random.default_rng(seed)
    kernels = random_dag_kernels(d, k, eps=0.01, rng=rng)
    batch = sample_dag_task(kernels, n, L, H, rng=rng)
    return kernels, batch


def test_simplicial_family_fits_the_exact_posterior_to_zero():
    # Reference: T = log π_2 gives the posterior exactly, so the best in-sample KL is 0 (fitter's resolution).
    kernels, batch = _task(2)
    lp = M.exact_log_posterior(kernels, batch.context)
    fit = M.fit_family("simplicial", batch.context, lp, 2, 3)
    assert fit.converged and fit.gap < 1e-10


@pytest.mark.parametrize("family", ["heads", "poe", "poe_slots"])
def test_bilinear_families_fit_the_tree_posterior_at_k1(family):
    # Reference: at k = 1 every standard family is the tree's bilinear selector, which contains W = log π.
    kernels, batch = _task(1)
    lp = M.exact_log_posterior(kernels, batch.context)
    fit = M.fit_family(family, batch.context, lp, 1, 3)
    assert fit.gap < 1e-9


def test_k1_exact_log_posterior_is_the_tree_posterior():
    # Reference: numerics.parent_posterior on the same contexts (k = 1 candidate c is parent c).
    rng = np.random.default_rng(3)
    kernel = random_kernel(3, rng=rng)
    batch = sample_task(kernel, 10, 4, 5, rng=rng)
    np.testing.assert_allclose(np.exp(M.exact_log_posterior((kernel,), batch.context)),
                               parent_posterior(kernel, batch.context), atol=1e-12)


@pytest.mark.parametrize("family", ["heads", "poe", "poe_slots"])
def test_standard_families_leave_a_gap_at_k2(family):
    # Reference: the exact posterior's score Σ_l log π(x_h | x_a, x_b) is not additive in a and b.
    kernels, batch = _task(2, n=120)
    lp = M.exact_log_posterior(kernels, batch.context)
    fit = M.fit_family(family, batch.context, lp, 2, 3)
    kl = M.per_context_kl(lp, M.family_log_law_np(family, fit.theta, batch.context, 2, 3), 2)
    mean, se = M.mean_and_se(kl)
    assert mean > 3 * se and mean > 1e-3


@pytest.mark.parametrize("family", ["heads", "poe", "poe_slots", "simplicial"])
def test_planted_product_of_experts_target_fits_to_zero(family):
    # Reference: the planted target lies in every family (W_i = W; T[a, b, h] = W[a, h] + W[b, h]).
    kernels, batch = _task(2)
    target = M.planted_poe_log_posterior(np.log(kernels[0]), 2)
    lp = target(kernels, batch.context)
    fit = M.fit_family(family, batch.context, lp, 2, 3)
    assert fit.gap < 1e-9


def test_heads_with_equal_matrices_is_the_product_of_experts():
    # Reference: Q ∝ α(a)α(b) + α(b)α(a) = 2 exp(s(a) + s(b)) / Z², the poe law.
    kernels, batch = _task(2)
    W = np.random.default_rng(1).normal(size=(3, 3))
    heads = M.family_log_law_np("heads", np.concatenate([W.ravel(), W.ravel()]), batch.context, 2, 3)
    poe = M.family_log_law_np("poe", W.ravel(), batch.context, 2, 3)
    np.testing.assert_allclose(heads[:, 2:], poe[:, 2:], atol=1e-12)
    assert np.allclose(np.exp(heads[:, 2:]).sum(-1), 1.0)


def test_family_validation():
    with pytest.raises(ValueError, match="family must be one of"):
        M.n_parameters("ffn", 3, 2)
    kernels, batch = _task(2)
    with pytest.raises(ValueError, match="log_posterior must have shape"):
        M.fit_family("poe", batch.context, np.zeros((2, 2, 2)), 2, 3)

