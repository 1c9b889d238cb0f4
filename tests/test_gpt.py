"""The standard GPT of exp-robustness and its KL judgement against BMA (model/gpt.py, model/gpt_training.py).

References: the same model run on a truncated stream (causality), a plain loop over tokens (stream layout, KL),
numerics' BMA on an uninformative context (the uniform-parent mixture), and SDPA's own output (attention weights).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bma_verify import numerics
from bma_verify.model.gpt import GPT, GPTConfig, apply_rotary, rotary_tables
from bma_verify.model.gpt_training import (bma_reading, bma_reading_levels, gpt_loss, kl_per_context, kl_references,
                                           query_attention_summary, query_predictive, stream_tokens, train_gpt,
                                           uniform_parent_predictive)
from bma_verify.model.train_config import GPTOptions, TrainConfig
from bma_verify.model.training import eval_batch, run_kernel

READINGS = [(2, "absolute"), (2, "rope"), (3, "absolute"), (3, "rope")]


def _model(depth: int, position: str, *, d=4, n_tokens=24, seed=0) -> GPT:
    return GPT(GPTConfig(d=d, n_tokens=n_tokens, depth=depth, width=32, heads=4, position=position),
               generator=torch.Generator().manual_seed(seed))


def _batch(d=4, H=4, L=3, n=64, seed=0):
    kernel = numerics.random_kernel(d, alpha=1.0, eps=0.01, rng=np.random.default_rng(seed))
    return kernel, numerics.sample_task(kernel, n, L, H, rng=np.random.default_rng(seed + 1))


@pytest.mark.parametrize("depth,position", READINGS)
def test_changing_a_future_token_never_changes_an_earlier_prediction(depth, position):
    # reference: the same model on the same stream with one token changed at position t; every logit before t
    # must be equal (to float precision) and some logit from t on must move
    model = _model(depth, position).eval()
    tokens = torch.randint(0, 5, (3, 24), generator=torch.Generator().manual_seed(1))
    base = model(tokens)
    for t in (5, 17, 23):
        changed = tokens.clone()
        changed[:, t] = (changed[:, t] + 1) % 5
        out = model(changed)
        assert torch.allclose(out[:, :t], base[:, :t], atol=1e-6), (depth, position, t)
        assert not torch.allclose(out[:, t:], base[:, t:], atol=1e-4)


@pytest.mark.parametrize("depth,position", READINGS)
def test_a_prefix_alone_gives_the_same_predictions(depth, position):
    # reference: the model run on the first t tokens only (nothing after them exists)
    model = _model(depth, position).eval()
    tokens = torch.randint(0, 5, (2, 24), generator=torch.Generator().manual_seed(2))
    full = model(tokens)
    for t in (1, 9, 24):
        assert torch.allclose(model(tokens[:, :t]), full[:, :t], atol=1e-6)


def test_the_stream_lays_examples_end_to_end_behind_bos():
    # reference: a loop writing BOS, then x^1_0 … x^1_{H-1}, …, the query, shifted by one for the inputs
    _, batch = _batch()
    inputs, targets = stream_tokens(batch.context, batch.query, d=4)
    for b in range(3):
        stream = [int(x) for example in batch.context[b] for x in example] + [int(x) for x in batch.query[b]]
        assert targets[b].tolist() == stream and inputs[b].tolist() == [4] + stream[:-1]


def test_query_predictive_reads_the_rows_that_predict_the_query_tokens():
    # reference: softmax of the full-stream logits at input positions L·H + h, taken by hand
    kernel, batch = _batch(n=8)
    model = _model(2, "absolute", n_tokens=16)
    probs = query_predictive(model, batch.context, batch.query)
    inputs, _ = stream_tokens(batch.context, batch.query, d=4)
    by_hand = model(inputs).softmax(-1)[:, 12:].double().detach().numpy()
    np.testing.assert_allclose(probs, by_hand, atol=1e-6)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-12)


def test_loss_is_the_mean_next_token_cross_entropy_over_every_token():
    # reference: −log softmax at each target, averaged over all (L + 1)·H tokens in a loop
    _, batch = _batch(n=4)
    model = _model(2, "rope", n_tokens=16)
    inputs, targets = stream_tokens(batch.context, batch.query, d=4)
    logp = model(inputs).log_softmax(-1).detach()
    by_hand = -np.mean([float(logp[b, t, targets[b, t]]) for b in range(4) for t in range(16)])
    assert float(gpt_loss(model, batch.context, batch.query).detach()) == pytest.approx(by_hand, rel=1e-5)


def test_kl_per_context_matches_a_loop_and_treats_zero_mass_as_zero():
    # reference: Σ_s p log(p/q) in plain Python over h ≥ 1, skipping p = 0
    rng = np.random.default_rng(3)
    p, q = rng.dirichlet(np.ones(3), size=(5, 4)), rng.dirichlet(np.ones(3), size=(5, 4))
    p[0, 2] = [0.0, 0.5, 0.5]
    loop = [np.mean([sum(p[b, h, s] * math.log(p[b, h, s] / q[b, h, s]) for s in range(3) if p[b, h, s] > 0)
                     for h in range(1, 4)]) for b in range(5)]
    np.testing.assert_allclose(kl_per_context(p, q), loop, rtol=1e-12)
    assert np.all(kl_per_context(p, p) == 0.0)


def test_uniform_parent_mixture_is_bma_on_an_uninformative_context():
    # reference: numerics' BMA predictive on a context whose every token is the same value (all parents score
    # alike, so the posterior is uniform over h' < h), and a loop averaging π(· | x_h') over h' < h
    kernel, batch = _batch(n=16)
    mix = uniform_parent_predictive(kernel, batch.query)
    flat = np.zeros_like(batch.context)
    np.testing.assert_allclose(mix[:, 1:], numerics.bma_predictive(kernel, flat, batch.query)[:, 1:], atol=1e-12)
    b, h = 5, 3
    np.testing.assert_allclose(mix[b, h], np.mean([kernel[batch.query[b, j]] for j in range(h)], axis=0))
    np.testing.assert_allclose(bma_reading(kernel, batch, 3), numerics.bma_predictive(kernel, batch.context,
                                                                                      batch.query))


def test_reference_levels_are_ordered_from_no_example_to_bma():
    # more examples read, closer to BMA: KL(uniform) > KL(ceil(L/2)) > KL(L − 1) > KL(BMA) = 0 on 2048 contexts,
    # each step by many standard errors (levels from bma_reading_levels, whose m = L − 1 entry is the bar)
    config = TrainConfig(model=GPTOptions(), d=5, H=6, L=4, eval_contexts=2048, seed=1000, device="cpu")
    kernel = run_kernel(config)
    batch = eval_batch(config, kernel, 4)
    ref, levels = kl_references(kernel, batch), bma_reading_levels(kernel, batch)
    assert ref["kl_uniform_parent"] > ref["kl_bma_half"] > ref["kl_bma_minus_one"] > 0.0 == ref["kl_by_examples"][4]
    assert [p["kl"] for p in levels] == pytest.approx(ref["kl_by_examples"], abs=1e-15)
    for a, b in zip(levels[:-1], levels[1:]):
        assert a["kl"] - b["kl"] > 4 * max(a["gap_se"], b["gap_se"], 1e-12)
    assert ref["kl_true_parent"] > 0.0


def test_attention_weights_reproduce_the_fused_attention_output():
    # reference: F.scaled_dot_product_attention's output, against weights @ v from the diagnostic's weights
    model = _model(2, "rope").eval()
    x = torch.randn(2, 24, 32, generator=torch.Generator().manual_seed(4))
    attn, rotary = model.blocks[0].attn, (model.rotary_cos, model.rotary_sin)
    q, k, v = attn.queries_keys_values(x, rotary)
    fused = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(attn.weights(x, rotary) @ v, fused, atol=1e-5, rtol=1e-5)


def test_rotary_scores_depend_only_on_the_offset():
    # reference: the same query and key vectors placed at (t, s) and (t + 7, s + 7) give the same dot product
    cos, sin = rotary_tables(32, 8)
    q, k = torch.randn(8), torch.randn(8)
    rot = lambda v, t: apply_rotary(v[None, None, None], cos[t:t + 1], sin[t:t + 1])[0, 0, 0]
    assert float(rot(q, 12) @ rot(k, 3)) == pytest.approx(float(rot(q, 19) @ rot(k, 10)), rel=1e-5)


def test_gpt2_initialisation_scales():
    # reference: N(0, 0.02) weights and N(0, 0.02/√(2·depth)) residual projections, zero biases; the sample std of
    # a 64×256 matrix lies within 5% of its scale
    model = GPT(GPTConfig(d=5, n_tokens=16, depth=2, width=64, heads=4), generator=torch.Generator().manual_seed(0))
    assert float(model.blocks[0].mlp.fc.weight.detach().std()) == pytest.approx(0.02, rel=0.05)
    assert float(model.blocks[0].mlp.proj.weight.detach().std()) == pytest.approx(0.02 / 2, rel=0.05)
    assert float(model.blocks[1].attn.qkv.bias.detach().abs().max()) == 0.0


def test_bad_sizes_are_refused_with_the_argument_named():
    with pytest.raises(ValueError, match="width"):
        GPTConfig(d=5, n_tokens=10, width=30, heads=4)
    with pytest.raises(ValueError, match="position"):
        GPTOptions(position="alibi")
    with pytest.raises(ValueError, match="n_tokens"):
        _model(2, "absolute", n_tokens=8)(torch.zeros(1, 9, dtype=torch.long))


def test_a_short_run_moves_the_held_out_kl_below_its_start_and_records_attention():
    # 150 steps at the quick scale: the held-out KL at the end is below the first evaluation's (the same run's
    # curve), and the attention diagnostic names a head per layer
    config = TrainConfig(model=GPTOptions(depth=2, width=32, heads=4), d=5, H=4, L=3, batch_size=32, steps=150,
                         lr=3e-3, warmup=15, eval_every=30, eval_contexts=256, seed=1001, device="cpu")
    run = train_gpt(config)
    curve = run.metrics["curves"]["kl"]
    assert curve[-1] < curve[0] and run.metrics["kl"] == pytest.approx(curve[-1])
    attention = run.metrics["attention"]
    assert [a["layer"] for a in attention] == [1, 2] and all(0 <= a["parent_accuracy"] <= 1 for a in attention)
    again = query_attention_summary(run.model, eval_batch(config, run.kernel, 3), run.kernel)
    assert again == attention
