"""Measurements on constructed and trained models: what the report's model checks package.

Claim ids served: ``thm1-construction``, ``bma-score-identity``, ``thm3-init-gradient``, ``prop1-invariance``,
``exp-fig2-attention``, ``exp-fig3-parameters``, ``exp-fig5-generalization``, ``exp-fig6-column-alignment``,
``exp-robustness``.

Besides the measurements, the planted inputs the report's negative controls feed to the same decision rules: a
construction with a wrong selector block (:func:`row_shift`, a transposed log π, a zero block), the Theorem 3
gradient in the paper's marginal form, BMA reading only the last m examples (:func:`truncated_bma_metrics`).
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.stats import rankdata, spearmanr

from bma_verify import numerics
from bma_verify.model.construction import bma_construction
from bma_verify.model.structured import StructuredTransformer
from bma_verify.model.training import model_outputs
from bma_verify.numerics.gradient import chi2_gain, init_gradient, init_gradient_samples
from bma_verify.numerics.information import marginal


def row_shift(W, b) -> np.ndarray:
    """W + b1ᵀ: adds b[i] to row i (the key token's row), which changes A^(2) (Prop. 1; a planted wrong selector)."""
    W, b = np.asarray(W, float), np.asarray(b, float)
    return W + b[:, None]


def _construction(kernel, L: int, beta: float, output: str, max_H: int, selector=None) -> StructuredTransformer:
    """The Theorem 1 model, with every diagonal W_KQ block replaced by ``selector`` (d, d) when given."""
    model = bma_construction(kernel, L, beta, output, max_H=max_H)
    if selector is not None:
        block = torch.as_tensor(np.asarray(selector, float), dtype=model.W_KQ.dtype)  # (d, d)
        with torch.no_grad():
            model.W_KQ.copy_(torch.block_diag(*([block] * L)))  # (Ld, Ld)
    return model


def construction_errors_vs_beta(kernel, context, query, betas, selector=None) -> dict:
    """Distance of the Theorem 1 model (mixture rule) from BMA at each β, on the given contexts.

    ``selector`` (d, d), when given, replaces log π in every W_KQ block: a planted wrong construction for the
    checks' negative controls (e.g. :func:`row_shift` of log π, or (log π)ᵀ).

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
        model = _construction(kernel, L, float(beta), "mixture", context.shape[2], selector)
        attention, probs = model_outputs(model, context, query)
        att_err.append(float(np.abs(attention - posterior).sum(-1).max()))
        pred_err.append(float(np.abs(probs - predictive)[:, 1:].max()))
    return {"beta": [float(b) for b in betas], "attention_error": att_err, "predictive_error": pred_err}


def exponential_rate(x, errors, floor: float = 1e-10, ceiling: float = 1e-2) -> dict:
    """Least-squares fit log(error) = log(C) − rate·x over the points with floor < error <= ceiling.

    The floor keeps rounding out of the fit: errors within a few decades of machine precision move from one CPU
    to another (a fit that included 6e-13 and 3e-15 moved its rate by 4.5e-5 across machines). The ceiling keeps
    the saturated start (errors of order 1 before the leading exponential term dominates) out of it.

    Returns ``rate``, ``log_C``, ``n_points`` and ``x_fitted`` (the rate is NaN with fewer than two usable points).
    """
    x, errors = np.asarray(x, float), np.asarray(errors, float)
    keep = (errors > floor) & (errors <= ceiling)
    fitted = x[keep].tolist()
    if keep.sum() < 2:
        return {"rate": float("nan"), "log_C": float("nan"), "n_points": int(keep.sum()), "x_fitted": fitted}
    slope, intercept = np.polyfit(x[keep], np.log(errors[keep]), 1)
    return {"rate": float(-slope), "log_C": float(intercept), "n_points": int(keep.sum()), "x_fitted": fitted}


def construction_error_vs_L(kernel, Ls, H: int, n_contexts: int, *, rng: np.random.Generator,
                            beta: float = 50.0, selector=None, reader: str = "construction") -> dict:
    """Mean over contexts and h >= 1 of ‖f_h − π(·|x_pa(h))‖₁ for the Theorem 1 model at each L, both rules.

    ``selector`` (d, d), when given, replaces log π in every W_KQ block (a planted wrong construction; a zero
    block is a selector at initialisation, which averages the candidates whatever L is). ``reader`` ``"bma"`` puts
    ``numerics.bma_predictive`` in the model's place for both rules (``thm1-construction``'s positive control: the
    ideal the construction approximates, computed without the model).

    Returns a dict with ``L`` and, per rule, ``mean`` and ``stderr`` (standard error over contexts).
    """
    if reader not in ("construction", "bma"):
        raise ValueError(f"reader must be 'construction' or 'bma', got {reader!r}")
    out: dict = {"L": [int(L) for L in Ls]}
    for rule in ("logit", "mixture"):
        means, errs = [], []
        for L in Ls:
            batch = numerics.sample_task(kernel, n_contexts, int(L), H, rng=rng)
            if reader == "bma":
                probs = numerics.bma_predictive(kernel, batch.context, batch.query)
            else:
                _, probs = model_outputs(_construction(kernel, int(L), beta, rule, H, selector), batch.context,
                                         batch.query)
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


#: The closed forms :func:`init_gradient_comparison` can hold the autograd gradient against: ``pibar`` is the exact
#: one, (1/h)(π(x_h|x_h')/π̄(x_h) − 1) with π̄ the mean over the h candidates; ``marginal`` puts the marginal law
#: P(x_h) in place of π̄ (the paper's "≈", expectation (1/h) J(h')), which the autograd gradient does not equal.
GRADIENT_FORMS = ("pibar", "marginal")


def gradient_form(kernel, parents, h: int, init, tokens, form: str) -> tuple[np.ndarray, np.ndarray]:
    """(per-sample closed form (n, h), its exact expectation (h,)) of −∂ℓ/∂p̂ in ``form``."""
    if form == "pibar":
        return init_gradient_samples(kernel, tokens), init_gradient(kernel, parents, h, init=init, method="exact")
    law_h = marginal(kernel, parents, h, init)  # (d,): P(x_h)
    likelihood = kernel[tokens[:, :h], tokens[:, h:]]  # (n, h): π(x_h | x_{h'})
    return (likelihood / law_h[tokens[:, h:]] - 1.0) / h, chi2_gain(kernel, parents, h, init) / h


def init_gradient_comparison(kernel, parents, init, n: int, *, rng: np.random.Generator,
                             form: str = "pibar", reader: str = "autograd") -> dict:
    """Autograd gradient of the real model against a closed form and against that form's exact expectation.

    Per sampled chain: max |autograd − closed form| over h, h'. Averaged over n chains: the largest
    |mean − exact expectation| / standard error over all (h, h'). ``form`` (one of :data:`GRADIENT_FORMS`):
    ``pibar`` is the closed form of ``thm3-init-gradient`` with the expectation of
    ``numerics.init_gradient(method="exact")``; ``marginal`` is the planted wrong one of the check's negative
    control (π̄ replaced by P(x_h), expectation (1/h) J(h') from ``numerics.chi2_gain``). ``reader``
    ``"closed-form"`` puts the closed form itself in the model's place (the check's positive control: the ideal
    model, whose means can still miss the exact expectation if that expectation is wrong or the sample unlucky).
    """
    if form not in GRADIENT_FORMS:
        raise ValueError(f"form must be one of {GRADIENT_FORMS}, got {form!r}")
    if reader not in ("autograd", "closed-form"):
        raise ValueError(f"reader must be 'autograd' or 'closed-form', got {reader!r}")
    parents = np.asarray(parents)
    H = parents.shape[0]
    query = numerics.sample_chains(kernel, parents, n, rng=rng, init=init)  # (n, H)
    grad = selector_score_gradient(kernel, query) if reader == "autograd" else None  # (n, H, H)
    closed_error, z_max, rows = 0.0, 0.0, []
    for h in range(1, H):
        closed, exact = gradient_form(kernel, parents, h, init, query[:, : h + 1], form)  # (n, h), (h,)
        read = closed if grad is None else grad[:, h, :h]
        closed_error = max(closed_error, float(np.abs(read - closed).max()))
        mean = read.mean(0)
        se = read.std(0, ddof=1) / np.sqrt(n)
        # at h = 1 the gradient is exactly 0 for every chain (one candidate): se = 0 and any nonzero
        # expectation gives an infinite z, which is right
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(se > 0, np.abs(mean - exact) / se, np.where(np.abs(mean - exact) > 0, np.inf, 0.0))
        z_max = max(z_max, float(z.max()))
        rows.append({"h": h, "parent": int(parents[h]), "autograd_mean": mean.tolist(), "stderr": se.tolist(),
                     "exact": np.asarray(exact).tolist(), "z": z.tolist(),
                     "argmax_is_parent": bool(np.argmax(exact) == parents[h])})
    return {"closed_form_max_error": closed_error, "max_z": z_max, "rows": rows, "n": int(n), "form": form}


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


def task_shaped_head_summary(model, batch: numerics.TaskBatch, *, min_mass: float = 0.5) -> dict:
    """Where each layer-1 head of a :class:`model.task_shaped.TaskShapedTransformer` goes, from the query example:
    the analogue of :func:`copier_summary` (fig3) for the task-shaped model.

    Returns ``example_mass`` (K, L+1): mean attention mass per example offset L − l' (0 = the query example's own
    earlier positions); ``position_mass`` (K, 2H−1): mean mass per position offset h − h' (index H − 1 + offset);
    ``example_offset`` and ``position_offset`` (K,), their argmax; ``same_position_mass`` (K,), the mass on
    h' = h; ``covered`` the example offsets 1..L read by a head with ≥ ``min_mass`` on one example and on the
    same position (what BMA needs: one such head per example).
    """
    L, H = batch.context.shape[1], batch.context.shape[2]
    with torch.no_grad():
        att = model.layer1_query_attention(torch.as_tensor(batch.context), torch.as_tensor(batch.query))
    att = att.double().mean(0).cpu().numpy()  # (K, H, (L+1)H)
    K = att.shape[0]
    att = att.reshape(K, H, L + 1, H)  # [head, query h, example l', key h']
    by_example = att.sum(-1).mean(1)[:, ::-1]  # (K, L+1): index = offset L − l'
    offsets = np.arange(H)[:, None] - np.arange(H)[None, :]  # h − h'
    by_position = np.zeros((K, 2 * H - 1))
    for h in range(H):
        for h2 in range(H):
            by_position[:, H - 1 + offsets[h, h2]] += att[:, h, :, h2].sum(-1) / H
    same = by_position[:, H - 1]
    heads = [(int(by_example[k].argmax()), float(by_example[k].max()), float(same[k])) for k in range(K)]
    covered = sorted({o for o, mass, s in heads if o >= 1 and mass >= min_mass and s >= min_mass})
    return {"example_mass": by_example.tolist(), "position_mass": by_position.tolist(),
            "example_offset": [o for o, _, _ in heads], "position_offset": (by_position.argmax(1) - (H - 1)).tolist(),
            "same_position_mass": same.tolist(), "covered": covered, "uncovered": sorted(set(range(1, L + 1)) -
                                                                                         set(covered))}


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


def truncated_bma_metrics(kernel, batch: numerics.TaskBatch, m: int) -> dict:
    """BMA that reads only the last ``m`` of the L context examples, measured on ``batch`` like a trained run.

    The negative control of the trained checks (``exp-fig2-attention``, ``thm2-consistency``,
    ``exp-robustness``, ``exp-fig5-generalization``): a selector that is Bayes-optimal on part of the evidence,
    so it is near BMA in every respect a loose threshold looks at, yet does not do what BMA does.

    Returns
    -------
    dict with the keys of a run's metrics that the checks decide on: ``query_loss``, ``gap_to_bma``,
    ``parent_loss``, ``parent_loss_gap``, ``parent_accuracy`` (of the truncated BMA), ``bma_loss``,
    ``bma_parent_loss``, ``bma_parent_accuracy`` (of BMA reading all L), and ``examples`` = m, ``L``.
    """
    context, query, parents = np.asarray(batch.context), np.asarray(batch.query), np.asarray(batch.parents)
    L = context.shape[1]
    if not 1 <= m <= L:
        raise ValueError(f"m must be in 1..L = {L}, got {m}")
    full = numerics.parent_posterior(kernel, context)  # (B, H, H)
    part = numerics.parent_posterior(kernel, context[:, L - m:])  # (B, H, H)
    out = {"examples": int(m), "L": int(L),
           "query_loss": numerics.bma_loss(kernel, context[:, L - m:], query),
           "bma_loss": numerics.bma_loss(kernel, context, query),
           "parent_loss": numerics.parent_loss(part, parents), "bma_parent_loss": numerics.parent_loss(full, parents),
           "parent_accuracy": numerics.parent_accuracy(part, parents),
           "bma_parent_accuracy": numerics.parent_accuracy(full, parents)}
    out["gap_to_bma"] = out["query_loss"] - out["bma_loss"]
    out["parent_loss_gap"] = out["parent_loss"] - out["bma_parent_loss"]
    return out


def parameter_summary(model: StructuredTransformer, kernel, L: int, H: int) -> dict:
    """What ``exp-fig3-parameters`` decides on, for a trained model or the same model at its initialisation.

    Returns ``copying_heads`` (heads with ≥ 0.5 of their mass on one example at the same position, by example),
    ``examples_covered`` (offsets 1..L with such a head), ``w_H_peak_offsets`` (argmax_o w_H[o] of each copying
    head), ``off_block_fraction`` of W_KQ among the copying heads (NaN without any) and
    ``softmax_W_OV_error`` = (1/d)‖σ(W_OV) − π‖₁.
    """
    copier = copier_summary(model, L, H)
    selector = effective_selector_matrices(model, L, H)
    copying = [k for e in selector["offsets"] for k in selector["heads"][str(e)]]
    return {"copying_heads": copying, "examples_covered": selector["offsets"],
            "w_H_peak_offsets": [copier["w_H_peak_offset"][k] for k in copying],
            "off_block_fraction": selector["off_block_fraction"],
            "softmax_W_OV_error": row_softmax_error(model.W_OV.detach().double().cpu().numpy(), kernel)}


def spearman_range(x, y, band: float) -> dict:
    """Spearman's rank correlation of ``x`` with ``y``, and its exact range when every y moves by at most ``band``.

    The range is over the whole box {z : |z_i − y_i| ≤ band}, not only its corners: ρ depends on z through its
    ordering alone, and an ordering of the z is reachable in the box exactly when it never puts j before i where
    y_j + band < y_i − band (intervals of equal width: placing each z as low as the order allows then stays inside
    every interval). ρ is affine in Σ_i rank_x(i) · position_z(i) (z has no ties; ties in x take average ranks), so
    its extremes over the reachable orderings come from a dynamic programme over the sets of elements placed first
    (n ≤ 16). A sign that holds over the whole range is not a product of run-to-run noise in y. (The corners alone
    are not enough: y = (0.0025, 0.0038, 0.0055, 0.0089, 0.0527) with band 0.015 has ρ ≥ 0.5 at every corner, yet
    z = (0.0174, 0.0158, 0.0115, 0.0089, 0.0527), inside the box, reverses the first four and gives ρ = 0.)

    Returns ``rho``, ``low``, ``high``.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) != len(y) or not 2 <= len(x) <= 16:
        raise ValueError(f"x and y must have the same length in 2..16, got {len(x)} and {len(y)}")
    if not (np.isfinite(band) and band >= 0):
        raise ValueError(f"band must be a finite number >= 0, got {band!r}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("x and y must be finite")

    def rho(values) -> float:
        if np.ptp(values) == 0 or np.ptp(x) == 0:
            return 0.0
        if len(x) == 2:  # two points: ρ is the sign of their agreement
            return float(np.sign(x[1] - x[0]) * np.sign(values[1] - values[0]))
        return float(spearmanr(x, values).statistic)

    n = len(x)
    if np.ptp(x) == 0:
        return {"rho": 0.0, "low": 0.0, "high": 0.0}
    rx = rankdata(x)  # average ranks where x ties
    # must_precede[j]: bit mask of the i that every reachable ordering places before j (y_i + band < y_j − band)
    must_precede = [sum(1 << i for i in range(n) if y[i] + band < y[j] - band) for j in range(n)]
    best = {0: (0.0, 0.0)}  # placed set -> (min, max) of Σ rank_x · position over its reachable orderings
    for size in range(n):
        layer = {}
        for placed, (lo, hi) in best.items():
            for j in range(n):
                if placed >> j & 1 or must_precede[j] & ~placed:
                    continue
                gain = rx[j] * (size + 1)
                key = placed | 1 << j
                old = layer.get(key)
                layer[key] = (lo + gain, hi + gain) if old is None else (min(old[0], lo + gain), max(old[1], hi + gain))
        best = layer
    lo_sum, hi_sum = best[(1 << n) - 1]
    positions = np.arange(1, n + 1, dtype=float)
    # Pearson correlation of (rank_x, positions) as a function of Σ rank_x · position
    scale = n * np.std(rx) * np.std(positions)
    offset = n * rx.mean() * positions.mean()
    # rounded: ρ takes finitely many values, and a 1e-16 residue must not decide the sign of an exact 0
    extremes = tuple(round(float(e), 12) for e in ((lo_sum - offset) / scale, (hi_sum - offset) / scale))
    if n == 2:  # ties in z are reachable at the box's edge; keep the two-point sign rule's values
        extremes = tuple(float(np.sign(e)) for e in extremes)
    return {"rho": rho(y), "low": float(min(extremes)), "high": float(max(extremes))}


def selector_only_parent_loss(W_tf, kernel, batch: numerics.TaskBatch) -> dict:
    """fig5 reading R3, "selector only": the trained selector W_tf applied to exact copies of the L' examples.

    The copier is replaced by Theorem 1's exact copies, so only the selector's calibration is measured: the score of
    h' is Σ_l W_tf[x^l_h', x^l_h] and A = its causal softmax (``numerics.selector_attention``). With W_tf = log π
    (or any column shift of it, Prop. 1) this is the BMA posterior and the gap is 0 (``exp-fig5-generalization``).

    Returns
    -------
    dict with ``parent_loss`` (of the selector), ``bma_parent_loss`` and their difference ``parent_loss_gap``, nats.
    """
    context, parents = np.asarray(batch.context), np.asarray(batch.parents)
    attention = numerics.selector_attention(np.asarray(W_tf, dtype=np.float64), context)  # (B, H, H)
    posterior = numerics.parent_posterior(kernel, context)  # (B, H, H)
    out = {"parent_loss": numerics.parent_loss(attention, parents),
           "bma_parent_loss": numerics.parent_loss(posterior, parents)}
    out["parent_loss_gap"] = out["parent_loss"] - out["bma_parent_loss"]
    return out
