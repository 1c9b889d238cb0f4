"""Measurements on constructed and trained models: what the report's model checks package.

Claim ids served: ``thm1-construction``, ``bma-score-identity``, ``thm3-init-gradient``, ``prop1-invariance``,
``exp-fig3-parameters``, ``exp-fig6-column-alignment``.
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
    """W_e = Σ_{k, k' copying example e} W_KQ[k, k'] for every example offset e some head copies.

    With exact copies the selector score is Σ_e x^e_{h'}ᵀ W_e x^e_h, so W_e plays the role of W_tf = log π for
    example e. A head counts as copying e when ≥ ``min_mass`` of its attention is on example e at position h.
    Returns ``offsets`` (sorted), ``W`` (n_e, d, d), ``W_tf`` (the mean over e), ``heads`` per offset,
    ``off_block_fraction`` = ‖blocks between heads of different examples‖_F² / ‖all blocks of copying heads‖_F².
    """
    summary = copier_summary(model, L, H)
    d, K = model.d, model.K
    W_KQ = model.W_KQ.detach().double().cpu().numpy().reshape(K, d, K, d)  # [k, i, k', j]
    groups: dict[int, list[int]] = {}
    for k in range(K):
        offset = summary["example_offset"][k]
        if offset >= 1 and summary["offset_mass"][k] >= min_mass and summary["same_position_mass"][k] >= min_mass:
            groups.setdefault(offset, []).append(k)
    offsets = sorted(groups)
    W = np.stack([sum(W_KQ[k, :, k2, :] for k in groups[e] for k2 in groups[e]) for e in offsets]) if offsets \
        else np.zeros((0, d, d))
    copying = [k for e in offsets for k in groups[e]]
    total = sum(float((W_KQ[k, :, k2, :] ** 2).sum()) for k in copying for k2 in copying)
    inside = sum(float((W_KQ[k, :, k2, :] ** 2).sum()) for e in offsets for k in groups[e] for k2 in groups[e])
    return {"offsets": offsets, "heads": {str(e): groups[e] for e in offsets}, "W": W,
            "W_tf": W.mean(0) if offsets else np.zeros((d, d)),
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
