"""Training on the selective-induction task (model/selective_training.py) and the batched window view.

References: the definition of the windows entry by entry; the hand-set construction (Theorem 1's weights on the
window view, float64, large β), which must read as the lag posterior and the Bayes-optimal predictive through the
same evaluation the check uses, on their task and on our per-lag variant (a wrong candidate index h − κ or a wrong
window range would show there).
"""
import numpy as np
import pytest
import torch

from bma_verify.model.selective_training import (SelectiveTrainConfig, build_selective_model, eval_batch,
                                                 evaluate_selective_model, make_batch, run_kernel,
                                                 train_selective, truncated_bayes_evaluation)
from bma_verify.model.structured import StructuredConfig, StructuredTransformer
from bma_verify.numerics.selective_induction import (bayes_at_last, padded_kernel, sample_selective_induction,
                                                     window_batch, windows)


@pytest.mark.parametrize("t", [0, 1, 3, 7])
def test_window_batch_follows_the_definition(t):
    # reference: the definition entry by entry, context[s, p] = x_{s−width+1+p} (pad before the sequence), the
    # query the window ending at t (pad at t = T); ``windows`` is one row of it
    width, pad = 3, 2
    x, _ = sample_selective_induction(np.array([[0.7, 0.3], [0.4, 0.6]]), [1, 2], 5, 7, rng=np.random.default_rng(0))
    context, query = window_batch(x, t, width, pad)
    assert context.shape == (5, t, width) and query.shape == (5, width)
    token = lambda row, j: pad if j < 0 or j >= x.shape[1] else x[row, j]  # noqa: E731
    for i in range(5):
        for s in range(t):
            assert list(context[i, s]) == [token(i, s - width + 1 + p) for p in range(width)]
        assert list(query[i]) == [token(i, t - width + 1 + p) for p in range(width)]
        c, q = windows(x[i], t, width, pad)
        np.testing.assert_array_equal(c, context[i])
        np.testing.assert_array_equal(q, query[i])


def test_batched_functions_reject_bad_input():
    with pytest.raises(ValueError, match="sequences must be a 2-D integer array"):
        window_batch(np.zeros(4, dtype=int), 2, 3, 2)
    with pytest.raises(ValueError, match="t must be at most"):
        window_batch(np.zeros((2, 4), dtype=int), 5, 3, 2)
    with pytest.raises(ValueError, match="prefixes must be 2-D"):
        bayes_at_last(np.array([[0.5, 0.5], [0.5, 0.5]]), [1], np.zeros(3, dtype=int))


def _constructed(config: SelectiveTrainConfig, kernel, beta=40.0) -> StructuredTransformer:
    """Theorem 1's weights on the window view: head k copies the window at example offset k + 1, W_KQ = W_OV =
    log π̃ (the pad column, never a child, at −60)."""
    d, L, H = config.d + 1, config.L, config.width
    model = StructuredTransformer(StructuredConfig(d=d, max_H=H, max_L=L, K=L, beta=beta, init_std=0.0)).double()
    with np.errstate(divide="ignore"):
        W = torch.as_tensor(np.maximum(np.log(padded_kernel(kernel)), -60.0))
    with torch.no_grad():
        model.w_L.zero_()
        model.w_H.zero_()
        model.w_L[torch.arange(L), torch.arange(L) + 1] = 1.0
        model.w_H[:, H - 1] = 1.0
        model.W_KQ.copy_(torch.block_diag(*([W] * L)))
        model.W_OV.copy_(W)
    return model


@pytest.mark.parametrize("task", ["dangelo", "per_lag"])
def test_the_construction_reads_as_the_lag_posterior_through_the_evaluation(task):
    config = SelectiveTrainConfig(eval_contexts=300, task=task)
    kernel = run_kernel(config)
    batch = eval_batch(config, kernel)
    out = evaluate_selective_model(_constructed(config, kernel), config, batch)
    assert out["lag_gap"] < 1e-8 and out["token_gap"] < 1e-8 and abs(out["query_gap"]) < 1e-8
    assert abs(out["candidate_mass"] - 1.0) < 1e-10
    assert out["lag_lpa_model"] == pytest.approx(out["lag_lpa_bayes"], abs=1e-8)
    # the same weights with the lag read off by one (example offsets k + 2): no longer the posterior; the law
    # pushed forward to the parent's token is closer (data processing: KL can only shrink)
    shifted = _constructed(config, kernel)
    with torch.no_grad():
        shifted.w_L.zero_()
        shifted.w_L[torch.arange(config.L - 1), torch.arange(config.L - 1) + 2] = 1.0
    off = evaluate_selective_model(shifted, config, batch)
    assert off["lag_gap"] > 0.01 and 0 < off["token_gap"] <= off["lag_gap"] + 1e-12
    # the control computed a second way: the construction with W_KQ = 0 attends uniformly over h' < h, the lag
    # candidates, and mixes π̃'s rows: it is the uniform-lag predictor, so its gaps are the control's
    uniform = _constructed(config, kernel)
    with torch.no_grad():
        uniform.W_KQ.zero_()
    flat = evaluate_selective_model(uniform, config, batch, keep=7)
    assert flat["query_gap"] == pytest.approx(out["uniform_lag_query_gap"], abs=1e-10)
    assert flat["lag_gap"] == pytest.approx(out["uniform_lag_gap"], abs=1e-10)
    np.testing.assert_allclose(flat["attention"], np.full((7, 3), 1 / 3), atol=1e-12)
    # the uniform-lag control is the posterior's KL to uniform, and the model at init reads uniform attention
    init = evaluate_selective_model(build_selective_model(config, torch.Generator().manual_seed(0)), config, batch)
    assert init["lag_gap"] == pytest.approx(out["uniform_lag_gap"], abs=1e-5)


def test_short_training_lowers_the_gap_and_is_seeded():
    config = SelectiveTrainConfig(steps=80, batch_size=64, eval_contexts=300, warmup=10)
    run = train_selective(config)
    assert run["final"]["query_gap"] < run["init"]["query_gap"] - 0.05
    assert run["losses"][-1][1] < run["losses"][0][1]
    again = train_selective(SelectiveTrainConfig(steps=5, batch_size=32, eval_contexts=50))
    assert again["final"] == train_selective(SelectiveTrainConfig(steps=5, batch_size=32, eval_contexts=50))["final"]


def test_their_batch_windows_lie_inside_the_sequence():
    config = SelectiveTrainConfig(L=5)
    batch = make_batch(run_kernel(config), config, 4, np.random.default_rng(0))
    assert batch["sequences"].shape == (4, 3 + 5 + 1) and batch["context"].shape == (4, 5, 4)
    assert batch["context"].max() < config.d and batch["query"].max() < config.d  # no pad token
    np.testing.assert_array_equal(batch["query"], batch["sequences"][:, 5:9])
    np.testing.assert_array_equal(batch["context"][:, 0], batch["sequences"][:, 0:4])


def test_config_validation():
    with pytest.raises(ValueError, match="L must be at least the largest lag"):
        SelectiveTrainConfig(lags=(1, 5), L=4, task="per_lag")
    with pytest.raises(ValueError, match="task must be one of"):
        SelectiveTrainConfig(task="theirs")
    with pytest.raises(ValueError, match="distinct positive integers"):
        SelectiveTrainConfig(lags=(0, 2))
    with pytest.raises(ValueError, match="K must be an integer"):
        SelectiveTrainConfig(K=0)


def test_shared_schedule_and_plateau_rule():
    # reference: the closed form of a linear warm-up then a half cosine to zero
    from bma_verify.model.convergence import last_quarters_flat
    from bma_verify.model.loop import warmup_cosine
    rate = warmup_cosine(0.1, 10, 110)
    assert rate(0) == pytest.approx(0.01)
    assert rate(10) == pytest.approx(0.1)
    assert rate(60) == pytest.approx(0.05)
    assert rate(110) == pytest.approx(0.0, abs=1e-15)
    assert warmup_cosine(0.1, 10, 110, floor=0.1)(110) == pytest.approx(0.01)  # the tree runs' floor
    assert last_quarters_flat([1.0] * 40 + [0.5] * 40) and not last_quarters_flat(list(np.linspace(1.0, 0.0, 80)))


def test_bayes_reading_fewer_windows_is_its_kl_to_the_full_lag_posterior():
    # reference: the lag posterior by brute force, softmax over κ of Σ_{t−m ≤ s < t} log P*(x_s | x_{s−κ})
    config = SelectiveTrainConfig(eval_contexts=30, seed=3)
    kernel = run_kernel(config)
    batch = eval_batch(config, kernel)
    x, t, lags = batch["sequences"], config.target, np.asarray(config.lags)

    def posterior(m):
        loglik = np.array([[sum(np.log(kernel[seq[s - k], seq[s]]) for s in range(t - m, t)) for k in lags]
                           for seq in x])
        w = np.exp(loglik - loglik.max(1, keepdims=True))
        return w / w.sum(1, keepdims=True)

    p, q = posterior(config.L), posterior(3)
    np.testing.assert_allclose(p, batch["lag_posterior"], atol=1e-12)
    expected = (p * (np.log(p) - np.log(q))).sum(1).mean()
    assert truncated_bayes_evaluation(kernel, config, batch, 3)["lag_gap"] == pytest.approx(expected, rel=1e-9)
    assert truncated_bayes_evaluation(kernel, config, batch, config.L)["lag_gap"] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="windows must be an integer in 1..8"):
        truncated_bayes_evaluation(kernel, config, batch, 9)
