"""Tests of model/: no leakage, the Theorem 1 construction against BMA, the Theorem 3 gradient, the parameter
analyses. Training is tested in tests/test_training.py, the presets in tests/test_presets.py.

References are independent of the code under test: ``numerics`` BMA and brute-force tree enumeration for the
construction, a gradient formula written out here for autograd, hand-computed softmaxes for Prop. 1.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bma_verify import numerics
from bma_verify.model import analysis
from bma_verify.model.absolute import AbsoluteConfig, AbsolutePETransformer
from bma_verify.model.construction import bma_construction
from bma_verify.model.task_shaped import TaskShapedConfig, TaskShapedTransformer
from bma_verify.model.structured import StructuredConfig, StructuredTransformer
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
    "task-shaped": lambda: TaskShapedTransformer(TaskShapedConfig(d=4, max_H=7, max_L=3, K=4, width=16)),
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
