"""The best score of a given family against the exact DS posterior (claim ``prop2-ds-quadratic``).

A *bilinear* selector scores candidate h' for position h as Σ_l x^{lᵀ}_{h'} W x^l_h; the *key-norm* family
adds c·Σ_l ‖x^l_{h'}‖². Proposition 2 says the exact posterior is in the key-norm family (W = ρ/(1−ρ²) A,
c = −ρ²/(2(1−ρ²))) but not in the bilinear one. We fit the parameters by minimising the expected
cross-entropy (equivalently the expected KL(posterior ‖ attention), the L_pa gap to BMA) on sampled contexts.
The score is linear in (W, c) and the cross-entropy of a softmax is convex in its logits, so the objective is
convex and L-BFGS with the analytic gradient finds its global minimum: the in-sample gap is the best any
member of the family achieves on those contexts (a downward-biased estimate of the population optimum), and
the gap on fresh contexts is an upward-biased one. Both are reported.

The negative control of the exact check fits the same families to :func:`bilinear_only_log_posterior`, a
posterior that *is* bilinear (the exact score without its key-only term): there the best bilinear W must reach
zero gap, to the fit's resolution.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
from scipy.optimize import minimize
from scipy.special import log_softmax
from tqdm import tqdm

from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.numerics.bma import causal_log_softmax, parent_loss
from bma_verify.numerics.ds import (check_orthogonal, check_rho, check_vectors, ds_log_parent_posterior, ds_score_terms,
                                    posterior_kl, sample_ds_task)


def exact_score_parameters(A, rho) -> tuple[np.ndarray, float]:
    """(W, c) with which the key-norm score equals the exact DS log-likelihood score up to a term in h only.

    W = ρ/(1−ρ²) A and c = −ρ²/(2(1−ρ²)) (Proposition 2; ‖Aᵀx‖ = ‖x‖ since A is orthogonal).
    """
    A = check_orthogonal(A)
    rho = check_rho(rho)
    var = 1.0 - rho * rho
    return rho / var * A, -0.5 * rho * rho / var


def bilinear_only_log_posterior(A, rho, context) -> np.ndarray:
    """log of the 'posterior' whose score is only the bilinear part of the exact DS score, (..., H, H).

    softmax over h' < h of ρ/(1−ρ²) Σ_l x^{lᵀ}_{h'} A x^l_h: the exact posterior with the key-only quadratic
    term of Proposition 2 removed. It lies in the bilinear family (W = ρ/(1−ρ²) A) by construction, so it is
    the negative control of ``prop2-ds-quadratic``'s exact check: a rule that finds a bilinear gap here is not
    discriminating. Same conventions as ``ds_log_parent_posterior`` (−inf on row 0 and h' >= h).
    """
    bilinear, _ = ds_score_terms(A, rho, context)  # (..., H, H)
    return causal_log_softmax(bilinear)


def score_log_attention(W, context, key_norm_coef: float = 0.0) -> np.ndarray:
    """Log-attention of the bilinear (+ key-norm) selector with exact copies, (..., H, H).

    score[h, h'] = Σ_l x^{lᵀ}_{h'} W x^l_h + c Σ_l ‖x^l_{h'}‖², log-softmax over h' < h (−inf elsewhere).
    """
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != W.shape[1] or not np.all(np.isfinite(W)):
        raise ValueError(f"W must be a finite square (d, d) matrix, got shape {W.shape}")
    c = float(key_norm_coef)
    if not np.isfinite(c):
        raise ValueError(f"key_norm_coef must be finite, got {key_norm_coef!r}")
    x = check_vectors(context, W.shape[0], "context", min_ndim=3)
    scores = np.einsum("...lgi,...lhi->...hg", x, x @ W.T)  # (..., H, H): Σ_l x_g W x_h
    if c != 0.0:
        scores = scores + c * np.einsum("...lgi,...lgi->...g", x, x)[..., None, :]
    return causal_log_softmax(scores)


def score_attention(W, context, key_norm_coef: float = 0.0) -> np.ndarray:
    """Attention (probabilities) of :func:`score_log_attention`, (..., H, H); row 0 zero."""
    return np.exp(score_log_attention(W, context, key_norm_coef))


class ScoreFit(NamedTuple):
    """Result of :func:`fit_score`: parameters, in-sample gap (nats per position) and optimiser status."""
    W: np.ndarray  # (d, d)
    key_norm_coef: float  # 0.0 for the bilinear family
    gap: float  # mean over fitting contexts and h >= 1 of KL(posterior ‖ attention)
    converged: bool
    n_iter: int


def fit_score(context, posterior, *, key_norm: bool = False, W0=None, tol: float = 1e-10,
              maxiter: int = 500) -> ScoreFit:
    """Minimise mean_{contexts, h>=1} KL(posterior_h ‖ softmax(score)_h) over W (and c when ``key_norm``).

    Parameters
    ----------
    context : (B, L, H, d) float
    posterior : (B, H, H) the exact posterior on these contexts (``ds_parent_posterior``)
    key_norm : bool
        Add the key-norm feature c Σ_l ‖x^l_{h'}‖² to the family.
    W0 : (d, d) or None
        Starting point (zeros when None); the objective is convex, so it only affects speed.

    Returns
    -------
    ScoreFit
    """
    x = check_vectors(context, np.shape(context)[-1], "context", min_ndim=4)
    B, L, H, d = x.shape
    P = np.asarray(posterior, dtype=np.float64)
    if P.shape != (B, H, H):
        raise ValueError(f"posterior must have shape (B, H, H) = {(B, H, H)}, got {P.shape}")
    allowed = np.tril(np.ones((H, H), dtype=bool), k=-1)
    allowed[0, 0] = True  # row 0 has no candidate; a dummy entry keeps its softmax finite, P is zero there
    xh = np.ascontiguousarray(x.transpose(0, 2, 1, 3))  # (B, H, L, d): position-major, so reshapes are free
    xt = xh.reshape(B, H, L * d)  # (B, H, L·d): each position's L tokens side by side
    xt_T = np.ascontiguousarray(xt.transpose(0, 2, 1))  # (B, L·d, H)
    key_sq = np.einsum("blgi,blgi->bg", x, x)  # (B, H): Σ_l ‖x_g‖²
    n_rows = B * (H - 1)
    neg_entropy = float(np.sum(P[P > 0] * np.log(P[P > 0]))) / n_rows
    n_w = d * d

    def objective(theta):
        W = theta[:n_w].reshape(d, d)
        qt = (xh @ W.T).reshape(B, H, L * d)  # (B, H, L·d): W x^l_h
        scores = qt @ xt_T  # (B, H, H): [h, g] = Σ_l x_g W x_h
        if key_norm:
            scores = scores + theta[n_w] * key_sq[:, None, :]
        logp = log_softmax(np.where(allowed, scores, -np.inf), axis=-1)  # (B, H, H)
        logp = np.where(allowed, logp, 0.0)
        value = -float(np.sum(P * logp)) / n_rows + neg_entropy  # = mean KL(P ‖ softmax)
        G = (np.where(allowed, np.exp(logp), 0.0) - P) / n_rows  # (B, H, H): d value / d score
        G[:, 0, :] = 0.0
        u = (G @ xt).reshape(-1, d)  # (B·H·L, d): Σ_g G[h, g] x^l_g
        grad_W = u.T @ xh.reshape(-1, d)  # (d, d): Σ G[h,g] x^l_g x^{lᵀ}_h
        grad = grad_W.ravel()
        if key_norm:
            grad = np.append(grad, np.sum(G.sum(axis=1) * key_sq))
        return value, grad

    theta0 = np.zeros(n_w + int(key_norm))
    if W0 is not None:
        theta0[:n_w] = np.asarray(W0, dtype=np.float64).ravel()
    res = minimize(objective, theta0, jac=True, method="L-BFGS-B",
                   options={"maxiter": maxiter, "ftol": tol, "gtol": 1e-9})
    coef = float(res.x[n_w]) if key_norm else 0.0
    return ScoreFit(res.x[:n_w].reshape(d, d), coef, float(res.fun), bool(res.success), int(res.nit))


def mean_and_se(values) -> tuple[float, float]:
    """Sample mean and its standard error (ddof = 1) of a 1-D array of i.i.d. per-context values."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size < 2:
        raise ValueError(f"values must hold at least 2 samples for a standard error, got {v.size}")
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size))


def score_gap_curve(A, rho, H: int, L_values, *, n_fit: int, n_eval: int, rng, key_norm: bool = False,
                    target: Callable | None = None, quiet: bool = True) -> dict:
    """For every L' in ``L_values``: fit the best score of the family, then measure its L_pa gap to the target.

    Claim ``prop2-ds-quadratic`` (exact check). The fit starts from zero (uniform attention) whatever the
    target, so it is handed nothing: the objective is convex and the start only changes where L-BFGS stops
    (history: docs/notes/prop2-ds-quadratic.md).

    Parameters
    ----------
    target : callable (A, rho, context) -> log-posterior (..., H, H), optional
        The posterior the family is fitted to; None is the exact DS posterior (``ds_log_parent_posterior``).
        The negative control passes :func:`bilinear_only_log_posterior`.

    Returns
    -------
    dict of lists aligned with ``L_values``: ``gap_fit`` (in-sample, a lower estimate of the best gap) with
    ``gap_fit_se``, ``gap_eval`` (fresh contexts, an upper estimate) with ``gap_eval_se``, ``W`` (d×d lists),
    ``key_norm_coef``, ``converged``, ``n_iter``, ``bma_parent_loss`` (L_pa of the target posterior on the
    evaluation contexts), ``fit_parent_loss``.
    """
    A = check_orthogonal(A)
    rho = check_rho(rho)
    n_fit = check_positive_int(n_fit, "n_fit", 2)
    n_eval = check_positive_int(n_eval, "n_eval", 2)
    rng = check_rng(rng)
    log_posterior = ds_log_parent_posterior if target is None else target
    out = {k: [] for k in ("L", "gap_fit", "gap_fit_se", "gap_eval", "gap_eval_se", "W", "key_norm_coef",
                           "converged", "n_iter", "bma_parent_loss", "fit_parent_loss")}

    for L in tqdm(list(L_values), disable=quiet, desc="bilinear fit" if not key_norm else "key-norm fit"):
        L = check_positive_int(int(L), "L_values entry", 1)
        fit_task = sample_ds_task(A, rho, n_fit, L, H, rng=rng)
        fit_log_post = log_posterior(A, rho, fit_task.context)  # (n_fit, H, H)
        fit = fit_score(fit_task.context, np.exp(fit_log_post), key_norm=key_norm)
        fit_kl = posterior_kl(fit_log_post, score_log_attention(fit.W, fit_task.context, fit.key_norm_coef))
        eval_task = sample_ds_task(A, rho, n_eval, L, H, rng=rng)
        log_post = log_posterior(A, rho, eval_task.context)  # (n_eval, H, H)
        log_att = score_log_attention(fit.W, eval_task.context, fit.key_norm_coef)
        post, att = np.exp(log_post), np.exp(log_att)
        g_fit, g_fit_se = mean_and_se(fit_kl)
        g_eval, g_eval_se = mean_and_se(posterior_kl(log_post, log_att))
        out["L"].append(L)
        out["gap_fit"].append(g_fit)
        out["gap_fit_se"].append(g_fit_se)
        out["gap_eval"].append(g_eval)
        out["gap_eval_se"].append(g_eval_se)
        out["W"].append(fit.W.tolist())
        out["key_norm_coef"].append(fit.key_norm_coef)
        out["converged"].append(fit.converged)
        out["n_iter"].append(fit.n_iter)
        out["bma_parent_loss"].append(parent_loss(post, eval_task.parents))
        out["fit_parent_loss"].append(parent_loss(att, eval_task.parents))
    return out
