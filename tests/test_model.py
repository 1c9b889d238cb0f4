"""Tests of model/: no leakage, the Theorem 1 construction against BMA, the Theorem 3 gradient, bad configs.

References are independent of the code under test: ``numerics`` BMA and brute-force tree enumeration for the
construction, a gradient formula written out here for autograd, hand-computed softmaxes for Prop. 1.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bma_verify import numerics
from bma_verify.model import analysis
from bma_verify.model.absolute import AbsoluteConfig, AbsolutePETransformer
from bma_verify.model.construction import bma_construction
from bma_verify.model.presets import preset_configs, train_preset
from bma_verify.model.standard import StandardConfig, StandardTransformer
from bma_verify.model.structured import StructuredConfig, StructuredTransformer
from bma_verify.model.training import (TrainConfig, build_model, eval_batch, evaluate, learning_rate, run_kernel, train,
                            update_average)
from bma_verify.numerics.enumeration import brute_force_parent_posterior
from bma_verify.numerics.strategies import kernels


def _randomized(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Every parameter random (a zero W_KQ would hide a leak through the selector)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model.double()


MODELS = {
    "structured": lambda: StructuredTransformer(StructuredConfig(d=4, max_H=7, max_L=3, K=5, output="mixture")),
    "structured-logit": lambda: StructuredTransformer(StructuredConfig(d=4, max_H=7, max_L=3, K=5, output="logit")),
    "absolute": lambda: AbsolutePETransformer(AbsoluteConfig(d=4, max_H=7, max_L=3, K=5)),
    "standard": lambda: StandardTransformer(StandardConfig(d=4, max_H=7, max_L=3, K=4, width=16)),
}


@pytest.mark.parametrize("name", MODELS)
def test_query_token_never_reaches_its_own_prediction(name):
    # changing x^{L+1}_h or any later query token must leave row h of predict and parent_attention unchanged
    model = _randomized(MODELS[name](), seed=1).eval()
    rng = np.random.default_rng(0)
    context = torch.from_numpy(rng.integers(0, 4, (2, 3, 7)))
    query = torch.from_numpy(rng.integers(0, 4, (2, 7)))
    with torch.no_grad():
        probs, att = model.predict(context, query), model.parent_attention(context, query)
        for h in range(1, 7):
            changed = query.clone()
            changed[:, h:] = (changed[:, h:] + 1 + torch.from_numpy(rng.integers(0, 3, (2, 7 - h)))) % 4
            probs2, att2 = model.predict(context, changed), model.parent_attention(context, changed)
            assert torch.equal(probs2[:, h], probs[:, h]), f"{name}: x_h or later leaked into row {h}"
            assert torch.equal(att2[:, h], att[:, h])
            # control: the same change does move a later row (the test could see a leak if there were one)
            if h < 6:
                assert not torch.allclose(probs2[:, h + 1:], probs[:, h + 1:])


@pytest.mark.parametrize("name", MODELS)
def test_attention_rows_are_laws_over_earlier_positions(name):
    model = _randomized(MODELS[name](), seed=2).eval()
    rng = np.random.default_rng(1)
    with torch.no_grad():
        att = model.parent_attention(rng.integers(0, 4, (3, 2, 6)), rng.integers(0, 4, (3, 6))).numpy()
        probs = model.predict(rng.integers(0, 4, (3, 2, 6)), rng.integers(0, 4, (3, 6))).numpy()
    assert np.all(np.triu(att) == 0)  # h' >= h and row 0 are zero
    np.testing.assert_allclose(att[:, 1:].sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-12)


@settings(max_examples=15)
@given(kernel=kernels(min_d=2, max_d=4, min_eps=0.02), seed=st.integers(0, 2**32 - 1), L=st.integers(1, 4))
def test_construction_equals_bma(kernel, seed, L):
    # reference: numerics.bma_predictive and parent_posterior (written with NumPy from the BMA formula)
    rng = np.random.default_rng(seed)
    batch = numerics.sample_task(kernel, 8, L, 6, rng=rng)
    model = bma_construction(kernel, L, 40.0, "mixture", max_H=6)
    with torch.no_grad():
        att = model.parent_attention(batch.context, batch.query).numpy()
        probs = model.predict(batch.context, batch.query).numpy()
    np.testing.assert_allclose(att, numerics.parent_posterior(kernel, batch.context), atol=1e-6)
    np.testing.assert_allclose(probs[:, 1:], numerics.bma_predictive(kernel, batch.context, batch.query)[:, 1:],
                               atol=1e-6)


def test_construction_attention_equals_posterior_by_tree_enumeration():
    # reference: the posterior from the full likelihood summed over every tree (numerics.enumeration)
    rng = np.random.default_rng(3)
    kernel = numerics.random_kernel(3, eps=0.05, rng=rng)
    batch = numerics.sample_task(kernel, 3, 4, 5, rng=rng)
    model = bma_construction(kernel, 4, 40.0, max_H=5)
    with torch.no_grad():
        att = model.parent_attention(batch.context, batch.query).numpy()
    for b in range(3):
        np.testing.assert_allclose(att[b], brute_force_parent_posterior(kernel, batch.context[b]), atol=1e-6)


def test_construction_error_decays_like_exp_minus_beta():
    # the target key's logit leads the runner-up by β, so the error ~ C e^{−β}: a fitted rate near 1
    rng = np.random.default_rng(4)
    kernel = numerics.random_kernel(4, eps=0.02, rng=rng)
    batch = numerics.sample_task(kernel, 16, 5, 8, rng=rng)
    betas = [8.0, 12.0, 16.0, 20.0, 24.0]
    errors = analysis.construction_errors_vs_beta(kernel, batch.context, batch.query, betas)
    fit = analysis.exponential_rate(betas, errors["attention_error"])
    assert 0.8 < fit["rate"] < 1.2
    assert all(np.diff(errors["attention_error"]) < 0)


def test_logit_rule_prediction_tends_to_the_parent_row_as_L_grows():
    rng = np.random.default_rng(5)
    kernel = numerics.random_kernel(4, eps=0.02, rng=rng)
    curve = analysis.construction_error_vs_L(kernel, [1, 32], 8, 300, rng=rng)
    for rule in ("logit", "mixture"):
        mean, se = curve[rule]["mean"], curve[rule]["stderr"]
        assert mean[1] + 3 * se[1] < mean[0] - 3 * se[0]


def test_logit_rule_has_a_floor_above_bma_with_exact_attention():
    # geometric vs arithmetic mixture: with BMA attention the logit rule's loss is above BMA's (Jensen)
    rng = np.random.default_rng(6)
    kernel = numerics.random_kernel(5, eps=0.01, rng=rng)
    batch = numerics.sample_task(kernel, 512, 10, 10, rng=rng)
    with torch.no_grad():
        probs = bma_construction(kernel, 10, 50.0, "logit", max_H=10).predict(batch.context, batch.query).numpy()
    floor = numerics.query_loss(probs, batch.query)
    bma = numerics.bma_loss(kernel, batch.context, batch.query)
    assert floor > bma


def _closed_form(kernel, query, h):
    """(1/h)(π(x_h|x_h')/π̄ − 1) written out with loops: the reference for autograd."""
    out = np.zeros((len(query), h))
    for n, x in enumerate(query):
        lik = np.array([kernel[x[j], x[h]] for j in range(h)])
        out[n] = (lik / lik.mean() - 1.0) / h
    return out


def test_autograd_selector_gradient_equals_closed_form():
    rng = np.random.default_rng(7)
    kernel = numerics.random_kernel(3, eps=0.05, rng=rng)
    query = rng.integers(0, 3, (50, 6))
    grad = analysis.selector_score_gradient(kernel, query)
    for h in range(1, 6):
        np.testing.assert_allclose(grad[:, h, :h], _closed_form(kernel, query, h), rtol=0, atol=1e-10)


def test_mean_autograd_gradient_matches_exact_expectation_with_non_stationary_init():
    # reference: numerics.init_gradient(method="exact") (enumeration over all prefixes); compared within 4.5 SE
    rng = np.random.default_rng(8)
    kernel = numerics.random_kernel(3, eps=0.05, rng=rng)
    parents = np.array([-1, 0, 1, 0, 2])
    result = analysis.init_gradient_comparison(kernel, parents, np.array([0.7, 0.2, 0.1]), 20_000, rng=rng)
    assert result["closed_form_max_error"] < 1e-10
    assert result["max_z"] < 4.5


def test_gradient_check_catches_a_planted_output_rule_bug(monkeypatch):
    # plant: the construction returns the logit rule, whose gradient is not the Theorem 3 closed form
    import bma_verify.model.analysis as module
    real = module.bma_construction
    monkeypatch.setattr(module, "bma_construction", lambda k, L, b, output="mixture", **kw: real(k, L, b, "logit", **kw))
    rng = np.random.default_rng(9)
    kernel = numerics.random_kernel(3, eps=0.05, rng=rng)
    result = analysis.init_gradient_comparison(kernel, np.array([-1, 0, 1, 0]), None, 2000, rng=rng)
    assert result["closed_form_max_error"] > 1e-3


def test_column_softmax_error_is_blind_to_column_shifts_only():
    # Prop. 1: W + 1aᵀ keeps σ_col; W + b1ᵀ keeps σ_row (= π for W = log π). References computed by hand here.
    rng = np.random.default_rng(10)
    kernel = numerics.random_kernel(4, eps=0.02, rng=rng)
    a, b = rng.normal(size=4), rng.normal(size=4)
    W = np.log(kernel)
    assert analysis.column_softmax_error(W + a[None, :] * 0 + np.ones((4, 1)) * a[None, :], kernel) < 1e-12
    assert analysis.row_softmax_error(W + b[:, None], kernel) < 1e-12
    assert analysis.column_softmax_error(W + b[:, None], kernel) > 1e-3
    by_hand = np.abs(np.exp(W + a) / np.exp(W + a).sum(1, keepdims=True) - kernel).sum() / 4
    assert np.isclose(analysis.row_softmax_error(W + a[None, :], kernel), by_hand)


@pytest.mark.parametrize("kwargs, word", [({"L": 0}, "L"), ({"K": 0}, "K"), ({"output": "sum"}, "output"),
                                          ({"model": "mlp"}, "model"), ({"d": 1}, "d"),
                                          ({"layer1_init": "oracle"}, "layer1_init")])
def test_bad_train_config_names_the_argument(kwargs, word):
    with pytest.raises(ValueError, match=word):
        TrainConfig(**kwargs)


def test_unknown_preset_and_absent_device_are_refused(tmp_path):
    with pytest.raises(ValueError, match="preset"):
        train_preset("fig4", out=tmp_path)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="cuda"):
            train_preset("fig2", device="cuda", steps=1, out=tmp_path)
    with pytest.raises(ValueError, match="device"):
        TrainConfig(device="tpu")
    with pytest.raises(ValueError, match="steps"):
        preset_configs("fig2", steps=0)


def test_bad_tokens_and_kernels_are_refused():
    model = MODELS["structured"]()
    with pytest.raises(ValueError, match="query"):
        model.predict(torch.zeros(1, 2, 5, dtype=torch.long), torch.full((1, 5), 4))
    with pytest.raises(ValueError, match="context"):
        model.predict(torch.zeros(1, 2, 5), torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="H"):
        model.predict(torch.zeros(1, 2, 9, dtype=torch.long), torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="strictly positive"):
        bma_construction(np.eye(3), 2, 10.0)
    with pytest.raises(ValueError, match="L"):
        bma_construction(np.full((3, 3), 1 / 3), 0, 10.0)


def test_checkpoint_resume_gives_identical_metrics(tmp_path):
    config = TrainConfig(d=3, H=5, L=2, K=3, steps=8, batch_size=16, eval_every=2, checkpoint_every=2,
                         eval_contexts=64, warmup=2)
    whole = train(config, out=tmp_path / "whole").metrics
    train(config, out=tmp_path / "split", stop_at=4)
    resumed = train(config, out=tmp_path / "split", resume=True).metrics
    for key in ("query_loss", "parent_loss", "parent_accuracy", "bma_loss", "steps"):
        assert resumed[key] == whole[key], key
    for key in ("step", "query_loss", "parent_loss", "train_loss"):
        assert resumed["curves"][key] == whole["curves"][key], key


def test_models_are_reproducible_from_the_seed():
    config = TrainConfig(model="standard", d=3, H=5, L=2, K=2, width=8)
    a, b = build_model(config, torch.Generator().manual_seed(3)), build_model(config, torch.Generator().manual_seed(3))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_train_preset_writes_metrics_and_figures(tmp_path):
    metrics = train_preset("fig2", steps=3, tier="quick", out=tmp_path, quiet=True)
    written = __import__("json").loads((tmp_path / "metrics.json").read_text())
    for key in ("query_loss", "bma_loss", "oracle_loss", "parent_loss", "bma_parent_loss", "parent_accuracy",
                "bma_parent_accuracy", "steps", "seconds", "curves", "logit_floor_loss"):
        assert key in written and key in metrics
    assert written["steps"] == 3
    for name in metrics["figures"]:
        assert (tmp_path / name).stat().st_size < 300_000


def test_parameter_analyses_read_the_construction_exactly():
    # on the Theorem 1 weights the answers are known: head k copies offset k+1 at offset h − h' = 0, every W_e is
    # log π, W_KQ has no off-block energy, and σ_col(W_tf) = σ_col(log π)
    kernel = numerics.random_kernel(4, eps=0.02, rng=np.random.default_rng(11))
    built = bma_construction(kernel, 3, 40.0, max_H=6)
    copier = analysis.copier_summary(built, 3, 6)
    assert copier["example_offset"] == [1, 2, 3] and copier["w_H_peak_offset"] == [0, 0, 0]
    selector = analysis.effective_selector_matrices(built, 3, 6)
    assert selector["offsets"] == [1, 2, 3] and selector["off_block_fraction"] == 0.0
    np.testing.assert_allclose(selector["W_tf"], np.log(kernel), atol=1e-12)
    assert analysis.column_softmax_error(selector["W_tf"], kernel) < 1e-12


def test_effective_selector_weights_split_heads_by_their_copy_mass():
    # head 0 puts mass p on example offset 1 and 1 − p on offset 2 (both at the same position, exactly), head 1
    # copies offset 2. Written out by hand: the same-example pairs of offset 1 see p² A, those of offset 2 see
    # (1−p)² A + B + (1−p)(C + Cᵀ-slot), where A, B are the heads' own blocks and C the blocks between them.
    d, H, p = 3, 5, 0.7
    model = StructuredTransformer(StructuredConfig(d=d, max_H=H, max_L=2, K=2, beta=1.0)).double()
    rng = np.random.default_rng(5)
    blocks = rng.normal(size=(2, d, 2, d))  # [key head, i, query head, j]
    with torch.no_grad():
        model.w_H.fill_(-200.0)
        model.w_H[:, H - 1] = 0.0  # offset h − h' = 0 only
        model.w_L.copy_(torch.tensor([[-200.0, np.log(p / (1 - p)), 0.0], [-200.0, -200.0, 0.0]]))
        model.W_KQ.copy_(torch.tensor(blocks.reshape(2 * d, 2 * d)))
    selector = analysis.effective_selector_matrices(model, 2, H)
    A, B, C01, C10 = blocks[0, :, 0], blocks[1, :, 1], blocks[0, :, 1], blocks[1, :, 0]
    np.testing.assert_allclose(selector["W"][0], p ** 2 * A, atol=1e-9)
    np.testing.assert_allclose(selector["W"][1], (1 - p) ** 2 * A + B + (1 - p) * (C01 + C10), atol=1e-9)
    np.testing.assert_allclose(selector["W_tf"], selector["W"].mean(0), atol=1e-12)
    np.testing.assert_allclose(selector["copy_mass"], [p, 1 + (1 - p)], atol=1e-9)
    assert selector["offsets"] == [1, 2] and selector["heads"] == {"1": [0], "2": [1]}


def test_bma_accuracy_by_examples_equals_tree_enumeration_on_the_last_m_examples():
    # reference: the parent posterior from the full likelihood over every tree (numerics.enumeration), computed
    # on the last m examples by hand, its argmax scored against the true parents; m = 0 is a uniform pick.
    # Candidates whose tokens agree in all m examples have bit-identical scores, and argmax takes the first of
    # them; the enumeration's sums round differently, so the reference takes the first candidate within 1e-9.
    rng = np.random.default_rng(11)
    kernel = numerics.random_kernel(3, eps=0.05, rng=rng)
    batch = numerics.sample_task(kernel, 40, 4, 5, rng=rng)
    by_m = analysis.bma_accuracy_by_examples(kernel, batch.context, batch.parents)
    assert len(by_m) == 5
    assert by_m[0] == pytest.approx(np.mean([1, 1 / 2, 1 / 3, 1 / 4]))
    for m in range(1, 5):
        hits = []
        for b in range(40):
            post = brute_force_parent_posterior(kernel, batch.context[b, 4 - m:])  # (H, H)
            for h in range(1, 5):
                best = int(np.flatnonzero(post[h, :h] >= post[h, :h].max() - 1e-9)[0])
                hits.append(best == batch.parents[b, h])
        assert by_m[m] == pytest.approx(np.mean(hits), abs=1e-12), (m, by_m[m] * 160, sum(hits))


def test_examples_equivalent_inverts_the_accuracy_curve():
    by_m = np.array([0.3, 0.45, 0.6, 0.6, 0.8])  # chance, then m = 1..4 (a flat step: the first m counts)
    assert analysis.examples_equivalent(0.45, by_m) == pytest.approx(1.0)
    assert analysis.examples_equivalent(0.525, by_m) == pytest.approx(1.5)
    assert analysis.examples_equivalent(0.6, by_m) == pytest.approx(2.0)
    assert analysis.examples_equivalent(0.7, by_m) == pytest.approx(3.5)
    assert analysis.examples_equivalent(0.375, by_m) == pytest.approx(0.5)
    assert analysis.examples_equivalent(0.2, by_m) == 0.0  # at or below chance
    assert analysis.examples_equivalent(0.9, by_m) == 4.0  # above BMA with every example: capped at L


# --- fig2 at the floor (issue 13): the preset, the w_L delay, the weight average, the schedule -------------------

FIG2_QUICK_STEPS = 1000


@pytest.mark.parametrize("tier, steps, contexts", [("full", 2000, 4096), ("quick", FIG2_QUICK_STEPS, 1024)])
def test_fig2_and_fig3_configs_are_the_measured_preset(tier, steps, contexts):
    # reference: the configuration model/presets.py records its measurements for (issue 13); fig3 is fig2's run
    fig2 = preset_configs("fig2", tier=tier)["fig2"]
    assert preset_configs("fig3", tier=tier) == {"fig2": fig2}
    assert (fig2.model, fig2.output, fig2.d, fig2.H, fig2.L, fig2.K, fig2.beta, fig2.init_std) == (
        "structured", "mixture", 5, 10, 10, 32, 10.0, 0.1)
    assert (fig2.lr, fig2.selector_lr_scale, fig2.grad_clip, fig2.batch_size, fig2.warmup) == (0.03, 0.3, 1.0, 256, 50)
    assert (fig2.w_L_delay, fig2.ema) == (100, 0.99)
    assert (fig2.weight_decay, fig2.selector_weight_decay) == (0.0, 0.1)
    assert (fig2.steps, fig2.eval_contexts, fig2.test_L) == (steps, contexts, (1, 2, 5, 10))
    assert preset_configs("fig2", tier=tier, steps=7, seed=3)["fig2"] == replace(fig2, steps=7, seed=3)


def test_fig2s_recipe_reaches_fig5s_full_tier_only():
    # fig2's w_L delay, W_KQ decay and weight average: every full-tier fig5 run takes them (the L = 20 run did not
    # converge without them); the quick fig5 runs, fig6 and robustness keep the plain schedule they were measured with
    # (robustness's standard run: a 0.99 weight average with its late-example-weighted loss, model.presets.
    # standard_config, and no w_L delay or W_KQ decay)
    from bma_verify.model.presets import FIG5_FULL_RECIPE

    recipe = lambda c: {"w_L_delay": c.w_L_delay, "selector_weight_decay": c.selector_weight_decay, "ema": c.ema}
    plain = {"w_L_delay": 0, "selector_weight_decay": None, "ema": 0.0}
    assert FIG5_FULL_RECIPE != plain
    assert all(recipe(c) == FIG5_FULL_RECIPE for c in preset_configs("fig5", tier="full").values())
    for name, tier in [("fig5", "quick"), ("fig6", "quick"), ("fig6", "full"),
                       ("robustness", "quick"), ("robustness", "full")]:
        for label, c in preset_configs(name, tier=tier).items():
            expected = dict(plain, ema=0.99) if (name, label) == ("robustness", "standard") else plain
            assert recipe(c) == expected, (name, tier, label)


def test_learning_rate_schedule_by_hand():
    # reference: warm-up (step + 1)/warmup · lr, then lr·(0.1 + 0.9(1 + cos πt)/2) from the warm-up's end
    c = TrainConfig(lr=0.1, steps=110, warmup=10)
    assert learning_rate(c, 0) == pytest.approx(0.01)
    assert learning_rate(c, 9) == pytest.approx(0.1)
    assert learning_rate(c, 60) == pytest.approx(0.1 * (0.1 + 0.9 * 0.5))
    assert learning_rate(c, 110) == pytest.approx(0.01)
    for bad in ({"ema": 1.0}, {"ema": -0.1}, {"w_L_delay": -1}, {"selector_weight_decay": -0.1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            TrainConfig(**bad)


def test_w_L_stays_at_its_initial_value_during_the_delay_and_learns_after():
    # reference: the run's own seeded initialisation (build_model with the run's generator seed)
    config = TrainConfig(d=3, H=5, L=2, K=3, steps=6, batch_size=16, eval_contexts=32, warmup=1, w_L_delay=3)
    initial = build_model(config, torch.Generator().manual_seed(config.seed))
    held = train(config, stop_at=3).model
    assert torch.equal(held.w_L, initial.w_L)
    assert not torch.equal(held.w_H, initial.w_H) and not torch.equal(held.W_KQ, initial.W_KQ)
    assert not torch.equal(train(config).model.w_L, initial.w_L)


def test_relative_example_biases_stay_during_the_delay_and_learn_after():
    # reference: the run's own seeded initialisation; the position biases and every other weight learn throughout
    config = TrainConfig(model="standard", position="relative", d=3, H=4, L=2, K=2, width=8, steps=6,
                         batch_size=8, eval_contexts=16, warmup=1, w_L_delay=3)
    initial = build_model(config, torch.Generator().manual_seed(config.seed))
    held = train(config, stop_at=3).model
    assert torch.equal(held.rel_example, initial.rel_example)
    assert not torch.equal(held.rel_position, initial.rel_position) and not torch.equal(held.q2.weight,
                                                                                          initial.q2.weight)
    assert not torch.equal(train(config).model.rel_example, initial.rel_example)


def test_position_applies_to_the_standard_transformer_only():
    with pytest.raises(ValueError, match="position applies to the standard transformer only"):
        TrainConfig(model="structured", position="relative")
    with pytest.raises(ValueError, match="position must be one of"):
        TrainConfig(model="standard", position="alibi")


def test_selector_weight_decay_applies_to_W_KQ_only():
    # the optimiser groups train() builds, read back by parameter name: W_KQ alone gets its own decay and lr scale,
    # w_L alone its delayed start; the others keep the optimiser's defaults
    from bma_verify.model.training import param_groups

    model = build_model(TrainConfig(d=3, H=5, L=2, K=3))
    groups = param_groups(model, TrainConfig(d=3, H=5, L=2, K=3, weight_decay=0.01, selector_weight_decay=0.2,
                                             w_L_delay=4))
    by_name = {name: g for g in groups for name, p in model.named_parameters() if any(p is q for q in g["params"])}
    assert by_name["W_KQ"]["weight_decay"] == 0.2 and by_name["W_KQ"]["lr_scale"] == 0.3
    assert "weight_decay" not in by_name["W_OV"] and "weight_decay" not in by_name["w_L"]  # the optimiser default
    assert by_name["w_L"]["start"] == 4 and by_name["w_H"]["start"] == 0 and by_name["W_OV"]["start"] == 0
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_weight_average_is_the_moving_average_of_the_iterates():
    # reference: the last iterates of the same run without the average (stopped after each step), averaged here
    # with the decay min(ema, k/(k+9)) after step k
    config = TrainConfig(d=3, H=5, L=2, K=3, steps=5, batch_size=16, eval_contexts=32, warmup=1, ema=0.5,
                         dtype="float64")
    plain = replace(config, ema=0.0)
    average = build_model(plain, torch.Generator().manual_seed(plain.seed)).double()
    for k in range(1, 6):
        update_average(average, train(plain, stop_at=k).model, min(0.5, k / (k + 9)))
    averaged = train(config)
    for p, q in zip(averaged.model.parameters(), average.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-12)
    # the metrics are those of the average, not of the last iterate
    held = eval_batch(config, averaged.kernel, config.L)
    assert averaged.metrics["query_loss"] == pytest.approx(evaluate(average, averaged.kernel, held)["query_loss"],
                                                           rel=0, abs=1e-12)
    assert averaged.metrics["query_loss"] != evaluate(train(plain).model, averaged.kernel, held)["query_loss"]


def test_resume_across_the_delay_with_a_weight_average_is_exact(tmp_path):
    config = TrainConfig(d=3, H=5, L=2, K=3, steps=8, batch_size=16, eval_every=2, checkpoint_every=2,
                         eval_contexts=64, warmup=2, w_L_delay=3, ema=0.9)
    whole = train(config, out=tmp_path / "whole")
    train(config, out=tmp_path / "split", stop_at=2)
    resumed = train(config, out=tmp_path / "split", resume=True)
    assert resumed.metrics["curves"]["query_loss"] == whole.metrics["curves"]["query_loss"]
    assert all(torch.equal(p, q) for p, q in zip(resumed.model.parameters(), whole.model.parameters()))


def test_a_short_seeded_fig2_run_moves_the_loss_toward_bma():
    # 200 steps of the fig2 preset at batch 128 after its w_L delay: the held-out gap to BMA must fall below a
    # quarter of the gap of the same seeded model at its initialisation (reference: that model, evaluated on the
    # same held-out contexts), and parent accuracy must rise above chance (a uniform pick among h' < h). Measured
    # (seed 1): gap 0.026 against 0.274 at init (batch 64 stalls near 0.078 with an example uncovered)
    delay = preset_configs("fig2", tier="quick")["fig2"].w_L_delay
    config = preset_configs("fig2", tier="quick", steps=delay + 200, seed=1)["fig2"]
    config = replace(config, batch_size=128, eval_contexts=512, eval_every=config.steps, test_L=())
    kernel = run_kernel(config)
    held = eval_batch(config, kernel, config.L)
    before = evaluate(build_model(config, torch.Generator().manual_seed(config.seed)), kernel, held)
    run = train(config)
    gap_before = before["query_loss"] - run.metrics["bma_loss"]
    assert run.metrics["gap_to_bma"] < gap_before / 4, (run.metrics["gap_to_bma"], gap_before)
    assert run.metrics["parent_accuracy"] > analysis.chance_parent_accuracy(config.H) + 0.1


@pytest.mark.slow
def test_quick_tier_fig2_run_reaches_bma_parent_loss():
    # what `make report` trains (report seed 0): L_pa within 0.02 nats of BMA's L_pa on the held-out contexts
    from bma_verify.reports.core import CheckContext

    seed = CheckContext(seed=0).seed_for("model:fig2")
    run = train(preset_configs("fig2", tier="quick", seed=seed, device="cpu")["fig2"])
    assert run.metrics["parent_loss_gap"] <= 0.02, run.metrics["parent_loss_gap"]
    assert run.metrics["gap_to_bma"] <= 0.005


def test_test_L_rows_carry_standard_errors_over_contexts():
    # reference: the Theorem 1 construction at β = 40 is BMA, so its paired gap has ~0 spread while its own L_pa
    # varies from context to context; the standard error is scipy's sem of the per-context values
    from scipy.stats import sem

    from bma_verify import numerics
    from bma_verify.model.training import evaluate_test_L, model_outputs

    config = TrainConfig(d=3, H=5, L=2, K=2, eval_contexts=64, test_L=(3,), dtype="float64")
    kernel = run_kernel(config)
    model = bma_construction(kernel, L=3, beta=40.0)
    rows = evaluate_test_L(model, kernel, config)
    for L_test in (3,):  # the construction has one head per example of L' = 3
        row = rows[str(L_test)]
        batch = eval_batch(config, kernel, L_test)
        attention, _ = model_outputs(model, batch.context, batch.query)
        per = numerics.parent_loss_by_context(np.clip(attention, 1e-300, None), batch.parents)
        assert row["parent_loss_se"] == pytest.approx(sem(per), rel=1e-9) and row["parent_loss_se"] > 1e-3
        assert row["parent_loss_gap_se"] < 1e-6


def test_fig5_reading_r2_offsets_never_seen_in_training_keep_their_initial_values():
    # reference: the run's own seeded initialisation; at training L = 2 only example offsets 0..2 are ever used,
    # so w_L[:, 3:] (offsets up to offset_range = 5) gets no gradient and AdamW (weight decay 0) leaves it as it was
    config = TrainConfig(d=3, H=5, L=2, K=3, offset_range=5, steps=8, batch_size=16, eval_contexts=32, warmup=1,
                         test_L=(1, 5))
    initial = build_model(config, torch.Generator().manual_seed(config.seed))
    run = train(config)
    assert run.model.w_L.shape == (3, 6)
    assert torch.equal(run.model.w_L[:, 3:], initial.w_L[:, 3:])
    assert not torch.equal(run.model.w_L[:, :3], initial.w_L[:, :3])
    # R1 (offset_range None): the table stops at the training L and offsets beyond it share w_L[L]
    assert build_model(replace(config, offset_range=None)).w_L.shape == (3, 3)
    for bad in (1, 2.5, True):
        with pytest.raises(ValueError, match="offset_range"):
            replace(config, offset_range=bad)
    with pytest.raises(ValueError, match="offset_range"):
        TrainConfig(model="absolute", offset_range=12)


def test_fig5_full_tier_runs_reading_r2_with_one_head_budget_and_the_whole_offset_table():
    from bma_verify.model.presets import FIG5_R2_PREFIX, FIG5_TEST_L, FIG5_TRAIN_L, fig5_heads, fig5_readings

    full = preset_configs("fig5", tier="full")
    r2 = {k.removeprefix(FIG5_R2_PREFIX): c for k, c in full.items() if k.startswith(FIG5_R2_PREFIX)}
    assert sorted(c.L for c in r2.values()) == sorted(FIG5_TRAIN_L)
    assert {(c.K, c.offset_range) for c in r2.values()} == {(fig5_heads(max(FIG5_TRAIN_L)), max(FIG5_TEST_L))}
    for label, c in r2.items():  # the same run as R1's but for the head budget, the offset table, W_KQ's lr, steps
        assert replace(c, K=full[label].K, offset_range=None, steps=full[label].steps,
                       selector_lr_scale=full[label].selector_lr_scale) == full[label]
        assert c.selector_lr_scale < full[label].selector_lr_scale
        # R2 at L = 20 trains longer (0.058 nats above BMA's L_pa after 4000 steps, 0.049 after 6000)
        assert c.steps == (6000 if c.L >= 20 else full[label].steps)
    assert not any(k.startswith(FIG5_R2_PREFIX) for k in preset_configs("fig5", tier="quick"))
    assert set(fig5_readings(full)) == {"R1", "R2"} and fig5_readings(full)["R2"].keys() == r2.keys()


def test_the_copy_initialised_diagnostic_runs_at_the_full_tier_only():
    # it never decides exp-robustness and took two of the quick report's minutes
    assert set(preset_configs("robustness", tier="quick")) == {"absolute", "standard"}
    full = preset_configs("robustness", tier="full")
    assert full["standard-copy-init"].layer1_init == "copy"
    assert all(c.layer1_init == "mimetic" for k, c in full.items() if k != "standard-copy-init")


def test_the_deciding_standard_run_reads_relative_positions_from_scratch_at_a_stated_scale():
    # model.presets.standard_config: the quick tier at the declared reduced scale, the full tier at fig2's setting;
    # both from scratch (mimetic layer 1) with at least one layer-1 head per example (K >= L)
    from bma_verify.model.presets import STANDARD_EXAMPLE_WEIGHT_POWER, STANDARD_QUICK_SCALE

    fig2 = preset_configs("fig2", tier="full")["fig2"]
    for tier, scale in (("quick", STANDARD_QUICK_SCALE), ("full", {"d": fig2.d, "H": fig2.H, "L": fig2.L})):
        c = preset_configs("robustness", tier=tier, seed=5)["standard"]
        assert {"d": c.d, "H": c.H, "L": c.L} == scale and c.seed == 5
        assert (c.model, c.position, c.layer1_init) == ("standard", "relative", "mimetic") and c.K >= c.L
        assert c.example_weight_power == STANDARD_EXAMPLE_WEIGHT_POWER > 0  # the oldest example's terms (issue 13)
    assert STANDARD_QUICK_SCALE["L"] < fig2.L and STANDARD_QUICK_SCALE["H"] < fig2.H
    # the claim's statement (reports/registry.py, a string: the registry does not import torch) names that scale
    from bma_verify.reports.registry import get_claim

    assert "d = {d}, H = {H}, L = {L}".format(**STANDARD_QUICK_SCALE) in get_claim("exp-robustness").statement


def _reachable_extremes_by_permutations(x, y, band):
    """Reference for spearman_range: every ordering of n ≤ 6 values, kept when a point of the box realises it
    (placed left to right, each as low as its interval and the previous point allow) and scored by scipy."""
    import itertools

    from scipy.stats import spearmanr

    values = []
    for order in itertools.permutations(range(len(y))):
        z, last = np.empty(len(y)), -np.inf
        for i in order:
            z[i] = last = max(last + 1e-12, y[i] - band)
        if all(z[i] <= y[i] + band + 1e-9 for i in range(len(y))):
            values.append(spearmanr(x, z).statistic)
    return min(values), max(values)


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 6).flatmap(lambda n: st.tuples(
    st.lists(st.integers(1, 4), min_size=n, max_size=n),  # training L with ties allowed
    st.lists(st.integers(0, 100).map(lambda k: k / 100), min_size=n, max_size=n, unique=True),
    st.integers(0, 50).map(lambda k: k / 100 + 0.0037))))  # no y_j - y_i equals 2 band exactly
def test_spearman_range_is_exact_over_the_box(case):
    # Reference: brute force over every ordering reachable inside the box |z - y| <= band, scored by scipy.
    x, y, band = (np.asarray(v, float) for v in case)
    if np.ptp(x) == 0:
        return
    got = analysis.spearman_range(x, y, float(band))
    low, high = _reachable_extremes_by_permutations(x, y, float(band))
    assert got["low"] == pytest.approx(low, abs=1e-9) and got["high"] == pytest.approx(high, abs=1e-9)
    assert got["low"] <= got["rho"] + 1e-9 <= got["high"] + 2e-9


def test_spearman_range_sees_orderings_inside_the_box_not_only_its_corners():
    # The fig5 R3 row of seed 1 (full tier): ρ ≥ 0.5 at every corner of the box, but this point inside it (each
    # value moved by at most the band) reverses the first four and has ρ = 0 by scipy, so the sign is not robust.
    from scipy.stats import spearmanr

    x, y, band = [1, 2, 5, 10, 20], np.array([0.0025, 0.0038, 0.0055, 0.0089, 0.0527]), 0.015
    inside = np.array([0.0174, 0.0158, 0.0115, 0.0089, 0.0527])
    assert np.all(np.abs(inside - y) <= band)
    got = analysis.spearman_range(x, y, band)
    assert got["low"] <= spearmanr(x, inside).statistic == pytest.approx(0.0)
    assert got["rho"] == pytest.approx(1.0) and got["low"] == 0.0  # exactly 0: not "> 0", so not robust
    with pytest.raises(ValueError, match="band"):
        analysis.spearman_range(x, y, -0.1)
