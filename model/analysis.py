"""Measurements on constructed and trained models: what the report's model checks package.

Claim ids served: ``thm1-construction``, ``bma-score-identity``, ``thm3-init-gradient``, ``prop1-invariance``,
``exp-fig3-parameters``, ``exp-fig6-column-alignment``, ``exp-robustness``.
"""
from __future__ import annotations

import numpy as np
import torch

import numerics
from model.construction import bma_construction
from model.structured import StructuredTransformer
from model.training import model_outputs
from numerics.gradient import init_gradient, init_gradient_samples


def construction_errors_vs_beta(kernel, context, query, betas) -> dict:
    """Distance of the Theorem 1 model (mixture rule) from BMA at each β, on the given contexts.

    Returns
    -------
    dict with ``beta``, ``attention_error`` = max over contexts and h of ‖A^(2)_h − posterior_h‖₁ and
    ``predictive_error`` = max |f − P_BMA| over contexts, h >= 1 and states.
    """
    L = context.shape[1]
    posterior = numerics.parent_posterior(kernel, context)  # (B, H, H)
    predictive = numerics.bma_predictive(kernel, context, query)  # (B, H, d)
    att_err, pred_err = [], []
    for beta in betas:
        model = bma_construction(kernel, L, float(beta), "mixture", max_H=context.shape[2])
        attention, probs = model_outputs(model, context, query)
        att_err.append(float(np.abs(attention - posterior).sum(-1).max()))
        pred_err.append(float(np.abs(probs - predictive)[:, 1:].max()))
    return {"beta": [float(b) for b in betas], "attention_error": att_err, "predictive_error": pred_err}


def exponential_rate(x, errors, floor: float = 1e-13) -> dict:
    """Least-squares fit log(error) = log(C) − rate·x over the points above the float64 floor.

    Returns ``rate``, ``log_C`` and ``n_points`` (the rate is NaN with fewer than two usable points).
    """
    x, errors = np.asarray(x, float), np.asarray(errors, float)
    keep = errors > floor
    if keep.sum() < 2:
        return {"rate": float("nan"), "log_C": float("nan"), "n_points": int(keep.sum())}
    slope, intercept = np.polyfit(x[keep], np.log(errors[keep]), 1)
    return {"rate": float(-slope), "log_C": float(intercept), "n_points": int(keep.sum())}


def construction_error_vs_L(kernel, Ls, H: int, n_contexts: int, *, rng: np.random.Generator,
                            beta: float = 50.0) -> dict:
    """Mean over contexts and h >= 1 of ‖f_h − π(·|x_pa(h))‖₁ for the Theorem 1 model at each L, both rules.

    Returns a dict with ``L`` and, per rule, ``mean`` and ``stderr`` (standard error over contexts).
    """
    out: dict = {"L": [int(L) for L in Ls]}
    for rule in ("logit", "mixture"):
        means, errs = [], []
        for L in Ls:
            batch = numerics.sample_task(kernel, n_contexts, int(L), H, rng=rng)
            model = bma_construction(kernel, int(L), beta, rule, max_H=H)
            _, probs = model_outputs(model, batch.context, batch.query)
            parent_tokens = np.take_along_axis(batch.query, batch.parents[:, 1:], axis=1)  # (B, H-1)
            target = kernel[parent_tokens]  # (B, H-1, d)
            per_context = np.abs(probs[:, 1:] - target).sum(-1).mean(-1)  # (B,)
            means.append(float(per_context.mean()))
            errs.append(float(per_context.std(ddof=1) / np.sqrt(n_contexts)))
        out[rule] = {"mean": means, "stderr": errs}
    return out


def selector_score_gradient(kernel, query) -> np.ndarray:
    """−∂ℓ/∂p̂ at p̂ = 0 by autograd through :class:`StructuredTransformer` (``thm3-init-gradient``).

    The model is the Theorem 1 construction (exact copier, σ(W_OV) = π, mixture rule) with W_KQ = 0, so every
    selector score p̂ is zero. ℓ is the sum over h >= 1 of −log f_h(x_h), so row h of the result is −∂ℓ_h/∂p̂_h.

    Parameters
    ----------
    kernel : (d, d) strictly positive
    query : (n, H) int tokens (the query example; the context does not enter at p̂ = 0)

    Returns
    -------
    (n, H, H) float64; row h holds the gradient for candidates h' < h (zero elsewhere).
    """
    query = torch.as_tensor(np.asarray(query), dtype=torch.long)
    n, H = query.shape
    model = bma_construction(kernel, 1, 50.0, "mixture", max_H=H)
    with torch.no_grad():
        model.W_KQ.zero_()
    context = query[:, None, :]  # any context: with W_KQ = 0 the scores do not depend on it
    v = model.copies(context, query)  # (n, H, K, d)
    scores = model.selector_scores(v)  # (n, H, H), all zero
    scores.retain_grad()
    _, log_probs = model.attend_and_output(scores, query)
    loss = -log_probs.gather(-1, query[..., None])[:, 1:, 0].sum()
    loss.backward()
    grad = -scores.grad.double().numpy()  # (n, H, H)
    return np.tril(grad, k=-1)


def init_gradient_comparison(kernel, parents, init, n: int, *, rng: np.random.Generator) -> dict:
    """Autograd gradient of the real model against the closed form and against ``numerics.init_gradient``.

    Per sampled chain: max |autograd − (1/h)(π(x_h|x_{h'})/π̄ − 1)| over h, h'. Averaged over n chains: the
    largest |mean − exact expectation| / standard error over all (h, h'), with the exact expectation from
    ``numerics.init_gradient(method="exact")``.
    """
    parents = np.asarray(parents)
    H = parents.shape[0]
    query = numerics.sample_chains(kernel, parents, n, rng=rng, init=init)  # (n, H)
    grad = selector_score_gradient(kernel, query)  # (n, H, H)
    closed_error, z_max, rows = 0.0, 0.0, []
    for h in range(1, H):
        closed = init_gradient_samples(kernel, query[:, : h + 1])  # (n, h)
        closed_error = max(closed_error, float(np.abs(grad[:, h, :h] - closed).max()))
        mean = grad[:, h, :h].mean(0)
        se = grad[:, h, :h].std(0, ddof=1) / np.sqrt(n)
        exact = init_gradient(kernel, parents, h, init=init, method="exact")
        z = np.abs(mean - exact) / np.maximum(se, 1e-300)
        z_max = max(z_max, float(z.max()))
        rows.append({"h": h, "parent": int(parents[h]), "autograd_mean": mean.tolist(), "stderr": se.tolist(),
                     "exact": np.asarray(exact).tolist(), "argmax_is_parent": bool(np.argmax(exact) == parents[h])})
    return {"closed_form_max_error": closed_error, "max_z": z_max, "rows": rows, "n": int(n)}


def copier_summary(model: StructuredTransformer, L: int, H: int) -> dict:
    """Which example each copier head reads, and how much of its mass sits on the same position h.

    Returns ``example_offset`` (K,) argmax over example offsets L+1−l' of the mean mass (0 = the query example),
    ``offset_mass`` (K,) that mass, ``same_position_mass`` (K,) and ``w_H_peak_offset`` (K,) = argmax_o w_H[o].
    """
    with torch.no_grad():
        att = model.copier_attention(L, H).double().cpu().numpy()  # (K, H, (L+1)H)
    K = att.shape[0]
    att = att.reshape(K, H, L + 1, H)  # [head, query h, example l', key h']
    by_example = att.sum(-1).mean(1)[:, ::-1]  # (K, L+1): index = offset L − l'
    same = np.stack([att[:, h, :, h].sum(-1) for h in range(H)], 1).mean(1)  # (K,)
    w_H = model.w_H.detach().double().cpu().numpy()  # (K, 2 max_H − 1)
    return {"example_offset": by_example.argmax(1).tolist(), "offset_mass": by_example.max(1).tolist(),
            "same_position_mass": same.tolist(),
            "w_H_peak_offset": (w_H.argmax(1) - (model.config.max_H - 1)).tolist()}


def effective_selector_matrices(model: StructuredTransformer, L: int, H: int, *, min_mass: float = 0.5) -> dict:
    """The bilinear form the selector applies to same-example, same-position token pairs, per context example.

    With copies v_h[k] = Σ_n a_k(h, n) e_{x_n}, the score v_{h'}ᵀ W_KQ v_h holds the term x^l_{h'}ᵀ W_l x^l_h with
    W_l(h, h') = Σ_{k,k'} a_k(h', (l, h')) a_{k'}(h, (l, h)) W_KQ[k, k'] (key head k, query head k'). BMA's score
    Σ_l log π(x^l_h | x^l_{h'}) is exactly such a sum with W_l = log π, so W_l is what plays the role of W_tf
    for example l (``exp-fig6-column-alignment``, ``exp-fig3-parameters``). Heads that split their mass count
    in proportion; with exact copies W_l is the sum of the W_KQ blocks of the heads that copy example l.

    Returns
    -------
    ``offsets`` the example offsets L+1−l (1..L) whose same-position copy mass, summed over heads and averaged
    over h, is ≥ ``min_mass``; ``W`` (L, d, d) W_l averaged over pairs h' < h, in offset order 1..L;
    ``W_tf`` the mean of W over all L examples; ``heads`` per covered offset, the heads with ≥ ``min_mass`` of
    their attention on that example at the same position; ``off_block_fraction`` =
    ‖W_KQ blocks between heads of different examples‖_F² / ‖all blocks among those heads‖_F².
    """
    d, K = model.d, model.K
    with torch.no_grad():
        att = model.copier_attention(L, H).double().cpu().numpy().reshape(K, H, L + 1, H)  # [k, h, l, h_key]
    W_KQ = model.W_KQ.detach().double().cpu().numpy().reshape(K, d, K, d)  # [k, i, k', j]
    same = np.stack([att[:, h, :, h] for h in range(H)], axis=1)[:, :, :L]  # (K, H, L): a_k(h, (l, h))
    pairs = np.tril(np.ones((H, H)), -1)  # [query h, key h'] with h' < h
    # C[l, k, k'] = mean over h' < h of a_k(h', (l, h')) a_k'(h, (l, h))
    C = np.einsum("kpl,qhl,hp->lkq", same, same, pairs) / pairs.sum()  # (L, K, K)
    W = np.einsum("lkq,kiqj->lij", C, W_KQ)[::-1]  # (L, d, d), offset 1 (the newest example) first
    mass = same.sum(0).mean(0)[::-1]  # (L,) same-position copy mass per offset
    offsets = [e + 1 for e in range(L) if mass[e] >= min_mass]
    per_head = same.mean(1)[:, ::-1]  # (K, L): head k's mean mass on (offset e+1, same position)
    groups = {e: [k for k in range(K) if per_head[k, e - 1] >= min_mass] for e in offsets}
    copying = [k for e in offsets for k in groups[e]]
    total = sum(float((W_KQ[k, :, k2, :] ** 2).sum()) for k in copying for k2 in copying)
    inside = sum(float((W_KQ[k, :, k2, :] ** 2).sum()) for e in offsets for k in groups[e] for k2 in groups[e])
    return {"offsets": offsets, "heads": {str(e): groups[e] for e in offsets}, "W": np.ascontiguousarray(W),
            "W_tf": W.mean(0), "copy_mass": mass.tolist(),
            "off_block_fraction": (1.0 - inside / total) if total > 0 else float("nan")}


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    z = np.exp(x - x.max(axis=axis, keepdims=True))
    return z / z.sum(axis=axis, keepdims=True)


def column_softmax_error(W, kernel) -> float:
    """(1/d)‖σ_col(W) − σ_col(log π)‖₁: softmax down each column (the shift Prop. 1 leaves free is per column)."""
    W, kernel = np.asarray(W, float), np.asarray(kernel, float)
    return float(np.abs(softmax(W, 0) - softmax(np.log(kernel), 0)).sum() / kernel.shape[0])


def row_softmax_error(W, kernel) -> float:
    """(1/d)‖σ_row(W) − σ_row(log π)‖₁ = (1/d)‖σ_row(W) − π‖₁ (not identified by the selector, Prop. 1)."""
    W, kernel = np.asarray(W, float), np.asarray(kernel, float)
    return float(np.abs(softmax(W, 1) - kernel).sum() / kernel.shape[0])


def chance_parent_accuracy(H: int) -> float:
    """Parent accuracy of a selector that picks h' < h uniformly at random: mean over h = 1..H-1 of 1/h."""
    return float(np.mean(1.0 / np.arange(1, H)))


def is_monotone(values, *, increasing: bool = True, slack: float = 0.0) -> bool:
    """Whether ``values`` never move against the claimed direction by more than ``slack``."""
    steps = np.diff(np.asarray(values, float))
    return bool(np.all(steps >= -slack) if increasing else np.all(steps <= slack))


def bma_accuracy_by_examples(kernel, context, parents) -> np.ndarray:
    """BMA's parent accuracy when it reads only the last m context examples, for m = 0..L (index m).

    m = 0 is a uniform pick among h' < h (:func:`chance_parent_accuracy`); m = L is BMA itself. Examples are i.i.d.,
    so which m are kept changes nothing in expectation; the last m are the ones a recency-leaning model reads.
    """
    context = np.asarray(context)
    L, H = context.shape[1], context.shape[2]
    by_m = [chance_parent_accuracy(H)]
    for m in range(1, L + 1):
        by_m.append(numerics.parent_accuracy(numerics.parent_posterior(kernel, context[:, L - m:]), parents))
    return np.array(by_m)


def examples_equivalent(accuracy: float, by_examples) -> float:
    """How many context examples BMA needs to match ``accuracy``: m where ``by_examples`` (from
    :func:`bma_accuracy_by_examples`) first reaches it, interpolated linearly between whole m; 0 at or below
    chance, L when it is above BMA's own accuracy with all L examples."""
    by_examples = np.asarray(by_examples, float)
    if accuracy <= by_examples[0]:
        return 0.0
    reached = np.flatnonzero(by_examples >= accuracy)
    if not len(reached):
        return float(len(by_examples) - 1)
    m = int(reached[0])
    below, above = by_examples[m - 1], by_examples[m]
    return float(m - 1 + (accuracy - below) / (above - below))
