"""Training on the selective-induction task (model/selective_training.py), its batched numerics, and the
reproduction check of ``footnote1-selective-induction`` (reports/checks/selective.py).

References: the term-by-term functions of numerics.selective_induction (``windows``, ``bayes_predictive``) for the
batched ones; the hand-set construction (Theorem 1's weights on the window view, float64, large β), which must
read as the lag posterior and the Bayes-optimal predictive through the same evaluation the check uses (a wrong
candidate index h − κ would show there); fake runs for the check's rule and control.
"""
import numpy as np
import pytest
import torch

import numerics as nm
import bma_verify.reports.checks.selective as S
from bma_verify.model.selective_training import (SelectiveTrainConfig, build_selective_model, eval_batch,
                                      evaluate_selective_model, run_kernel, train_selective)
from bma_verify.model.structured import StructuredConfig, StructuredTransformer
from bma_verify.numerics.selective_induction import (bayes_at_last, bayes_predictive, padded_kernel,
                                          sample_selective_induction, window_batch, windows)
from bma_verify.reports.core import CheckContext, settle


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


@pytest.mark.parametrize("lags,t", [([1, 2, 3], 8), ([2, 5], 3), ([4], 2), ([1, 3], 0)])
def test_bayes_at_last_equals_the_term_by_term_likelihood(lags, t):
    rng = np.random.default_rng(1)
    P = nm.random_kernel(3, alpha=0.5, eps=0.02, rng=rng)
    init = np.array([0.2, 0.5, 0.3])
    x, _ = sample_selective_induction(P, lags, 6, max(t, 1), rng=rng)
    got = bayes_at_last(P, lags, x[:, :t], init=init)
    for i in range(6):
        ref = bayes_predictive(P, lags, x[i, :t], init=init)
        np.testing.assert_allclose(got["lag_posterior"][i], ref["lag_posterior"][t], atol=1e-13)
        np.testing.assert_allclose(got["predictive"][i], ref["predictive"][t], atol=1e-13)


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


def test_the_construction_reads_as_the_lag_posterior_through_the_evaluation():
    config = SelectiveTrainConfig(eval_contexts=300)
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
    assert off["lag_gap"] > 0.05 and 0 < off["token_gap"] <= off["lag_gap"] + 1e-12
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


def test_config_validation():
    with pytest.raises(ValueError, match="L must be at least the largest lag"):
        SelectiveTrainConfig(lags=(1, 5), L=4)
    with pytest.raises(ValueError, match="distinct positive integers"):
        SelectiveTrainConfig(lags=(0, 2))
    with pytest.raises(ValueError, match="K must be an integer"):
        SelectiveTrainConfig(K=0)


def _final(lag, query, uniform_lag, uniform_query, se=0.001):
    return {"lag_gap": lag, "lag_gap_se": se, "query_gap": query, "query_gap_se": se, "token_gap": lag / 2,
            "lag_lpa_model": 0.5, "lag_lpa_bayes": 0.45, "uniform_lag_gap": uniform_lag, "uniform_lag_gap_se": se,
            "uniform_lag_query_gap": uniform_query, "uniform_lag_query_gap_se": se}


def _run(final, seed=1):
    config = SelectiveTrainConfig(steps=10).__dict__ | {"lags": [1, 2, 3], "seed": seed}
    return {"config": config, "kernel": [[0.5, 0.5], [0.5, 0.5]], "init": _final(0.4, 0.3, 0.4, 0.1),
            "final": final, "converged": True, "laws": {"posterior": np.full((3, 3), 1 / 3),
                                                        "attention": np.full((3, 3), 1 / 3)}}


@pytest.mark.parametrize("finals,expected", [
    ([_final(0.02, 0.002, 0.4, 0.1)], ("pass", "")),                          # reaches it, control rejected
    ([_final(0.5, 0.03, 0.4, 0.1)], ("fail", "")),                            # does not
    ([_final(0.02, 0.002, 0.4, 0.1), _final(0.5, 0.03, 0.4, 0.1)],
     ("inconclusive", "the runs disagree: 1 of 2 kernels pass")),  # one kernel reproduces it, one does not
])
def test_rule_across_runs(monkeypatch, finals, expected):
    monkeypatch.setattr(S, "selective_runs", lambda ctx: [_run(f, i) for i, f in enumerate(finals)])
    out = S.footnote1_selective_training(CheckContext(tier="quick", seed=0))
    assert out.control.rejected
    verdict, reason = settle(out)
    assert verdict == expected[0] and reason.startswith(expected[1])


def test_an_uninformative_kernel_withholds_the_pass(monkeypatch):
    # the kernel's rows alike: the uniform-lag predictor is itself within the tolerance, so nothing was tested
    monkeypatch.setattr(S, "selective_runs", lambda ctx: [_run(_final(0.02, 0.002, 0.01, 0.005))])
    out = S.footnote1_selective_training(CheckContext(tier="quick", seed=0))
    verdict, reason = settle(out)
    assert not out.control.rejected and verdict == "inconclusive" and "not discriminating" in reason


def test_the_check_runs_small_with_its_figure(monkeypatch, tmp_path):
    monkeypatch.setitem(S.SIZES, "quick", {"steps": 30, "eval_contexts": 200})
    out = S.footnote1_selective_training(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert out.verdict in ("pass", "fail") and out.figures == ["footnote1_selective_training.png"]
    assert out.control.rejected  # the report seed's kernel makes the lag matter (control 0.44 / 0.033 nats)
    assert (tmp_path / "footnote1_selective_training.png").exists()
    assert out.measured["runs"][0]["final"]["uniform_lag_query_gap"] > 0.0


def test_shared_schedule_and_plateau_rule():
    # reference: the closed form of a linear warm-up then a half cosine to zero
    from bma_verify.model._common import plateaued, warmup_cosine_lr
    assert warmup_cosine_lr(0.1, 10, 110, 0) == pytest.approx(0.01)
    assert warmup_cosine_lr(0.1, 10, 110, 10) == pytest.approx(0.1)
    assert warmup_cosine_lr(0.1, 10, 110, 60) == pytest.approx(0.05)
    assert warmup_cosine_lr(0.1, 10, 110, 110) == pytest.approx(0.0, abs=1e-15)
    assert plateaued([1.0] * 40 + [0.5] * 40) and not plateaued(list(np.linspace(1.0, 0.0, 80)))
