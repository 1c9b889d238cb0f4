"""model/pair_attention.py: the 2-simplicial construction for k-parent DAGs (``ext-dag-construction``).

References: numerics.dag_parent_posterior / dag_bma_predictive (exact BMA), numerics.dag_set_scores (the score
written with token indices), and for k = 1 the tree construction model.construction.bma_construction.
"""
import numpy as np
import pytest
import torch

from bma_verify import numerics as nm
from bma_verify.model.construction import bma_construction
from bma_verify.model.pair_attention import (PairAttentionConfig, PairAttentionTransformer, construction_errors,
                                             pair_construction)


def _task(seed, d=3, k=2, H=6, L=4, B=3):
    rng = np.random.default_rng(seed)
    kernels = nm.random_dag_kernels(d, k, alpha=0.7, eps=0.02, rng=rng)
    return kernels, nm.sample_dag_task(kernels, B, L, H, rng=rng)


@pytest.mark.parametrize("k,d,H,L", [(2, 3, 6, 4), (3, 2, 6, 3)])
def test_scores_with_exact_copies_equal_the_indexed_set_scores(k, d, H, L):
    # Reference: numerics.dag_set_scores (T indexed by encoded parent values), with copies replaced by one-hots.
    kernels, batch = _task(1, d=d, k=k, H=H, L=L)
    model = pair_construction(kernels, L, 1.0, max_H=H)
    T = np.log(kernels[-1])
    onehots = torch.nn.functional.one_hot(torch.as_tensor(batch.context), d).double()  # (B, L, H, d)
    v = onehots.permute(0, 2, 1, 3)  # (B, H, K=L, d): slot = example
    got = model.set_scores(v, H).detach().numpy()
    np.testing.assert_allclose(got, nm.dag_set_scores(T, batch.context), atol=1e-12)


@pytest.mark.parametrize("k,d,H,L", [(2, 3, 6, 4), (3, 2, 6, 3), (2, 2, 5, 6)])
def test_construction_reaches_the_set_posterior_exponentially_in_beta(k, d, H, L):
    kernels, batch = _task(2, d=d, k=k, H=H, L=L)
    out = construction_errors(kernels, batch.context, batch.query, [4, 8, 16, 32])
    assert out["posterior_error"][-1] < 1e-9 and out["predictive_error"][-1] < 1e-9
    assert out["posterior_error"][0] > 1e3 * out["posterior_error"][2]  # e^-beta decay between beta = 4 and 16
    # a wrong table (parents transposed) does not converge
    top = kernels[-1].reshape((d,) * k + (d,))
    axes = [1, 0] + list(range(2, k + 1))
    wrong = np.log(top.transpose(axes).reshape(d**k, d))
    assert construction_errors(kernels, batch.context, batch.query, [32], table=wrong)["posterior_error"][0] > 0.05


def test_k1_is_the_tree_construction():
    # Reference: model.construction.bma_construction (same copier; T = log π is the block of W_KQ).
    rng = np.random.default_rng(3)
    kernel = nm.random_kernel(3, eps=0.02, rng=rng)
    batch = nm.sample_task(kernel, 4, 5, 7, rng=rng)
    for beta in (1.0, 6.0):
        with torch.no_grad():
            a1, f1 = pair_construction((kernel,), 5, beta, max_H=7)(batch.context, batch.query)
            a0, f0 = bma_construction(kernel, 5, beta, max_H=7)(batch.context, batch.query)
        np.testing.assert_allclose(a1.exp().numpy(), a0.exp().numpy(), atol=1e-14)
        np.testing.assert_allclose(f1[:, 1:].numpy(), f0[:, 1:].numpy(), atol=1e-13)


def test_model_reuses_the_tree_copier_and_trains():
    # The copier is StructuredTransformer's (same parameters); gradients flow to T, W_OV, w_L, w_H.
    config = PairAttentionConfig(d=2, k=2, max_H=5, max_L=3, K=2, init_std=0.5)
    model = PairAttentionTransformer(config, generator=torch.Generator().manual_seed(0)).double()
    assert not hasattr(model, "W_KQ") and model.T.shape == (4, 2) and model.W_OV.shape == (4, 2)
    kernels, batch = _task(4, d=2, k=2, H=5, L=3)
    loss = model.loss(batch.context, batch.query)
    loss.backward()
    for p in (model.T, model.W_OV, model.w_L, model.w_H):
        assert p.grad is not None and torch.isfinite(p.grad).all()
    att = model.parent_attention(batch.context, batch.query)
    np.testing.assert_allclose(att[:, 2:].sum(-1).detach().numpy(), 1.0, atol=1e-12)


def test_bad_arguments_raise():
    kernels, _ = _task(5)
    with pytest.raises(ValueError, match="L must be an integer >= 1"):
        pair_construction(kernels, 0, 1.0)
    with pytest.raises(ValueError, match="table must have shape"):
        pair_construction(kernels, 2, 1.0, table=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        PairAttentionConfig(d=2, k=0, max_H=4, max_L=2, K=2)
    zero = (kernels[0], np.where(np.arange(9)[:, None] == 0, np.array([1.0, 0.0, 0.0]), kernels[1]))
    with pytest.raises(ValueError, match="strictly positive"):
        pair_construction(zero, 2, 1.0)
