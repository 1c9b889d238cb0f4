"""What standard attention can reach on the k-parent DAG task (claim ``ext-dag-families``, ours).

Each family below is a set of laws Q_h over the candidate parent sets of position h (the colex list of
:func:`numerics.dag_candidate_sets`; row h >= k reads the first C(h, k) sets), computed from *exact* copies of the
context (x^l_a is the one-hot of the token: the copier is taken as perfect, so the gap measured is the selector's
alone, as in Proposition 2 for DS). For k = 2 and a set S = {a < b} of position h:

``heads`` (a) — k bilinear selector heads over single positions, **multiplied**:
    s_i(h, a) = Σ_l W_i[x^l_a, x^l_h], α_i = softmax over a < h (one head per parent slot, i = 1..k);
    Q_h({a, b}) ∝ α_1(a) α_2(b) + α_1(b) α_2(a), normalised over a ≠ b (two independent single-position draws,
    conditioned on being distinct). The a = b mass a real two-head readout wastes is removed, so the fitted gap
    is a *lower* bound for that model. Parameters: k matrices d×d. Not log-linear (a sum of two products), so
    the fit is non-convex and uses several starts (:func:`fit_family`).
``poe`` (b, one W) — product of experts over single parents: score(S) = Σ_{a∈S} Σ_l W[x^l_a, x^l_h], softmax over
    the C(h, k) sets. Parameters: one d×d W. Log-linear, so the fit is convex. ``heads`` with W_1 = W_2 is this.
``poe_slots`` (b, one W per slot) — score(S) = Σ_i Σ_l W_i[x^l_{s_i}, x^l_h] with s_1 < s_2 in position order.
    Parameters: k matrices d×d. Log-linear, convex. Contains ``poe``.
``simplicial`` (c) — 2-simplicial (trilinear for k = 2): score(S) = Σ_l T[row(x^l_S), x^l_h], T of shape
    (d**k, d). Log-linear, convex. Contains BMA (T = log π_k), so its best in-sample gap is 0: fitting it is the
    control of the fitter.
For k = 1 all four families are the tree's bilinear selector (``heads``, ``poe`` and ``poe_slots`` coincide;
``simplicial`` has T = W), which contains the tree BMA (W = log π).

The fit minimises mean_{contexts, h >= k} KL(P_h ‖ Q_h) over the family's parameters (the expected excess L_pa
over BMA: E[−log Q_h(S_h) | context] − E[−log P_h(S_h) | context] = KL(P_h ‖ Q_h)), by scipy's L-BFGS-B with the
gradient from torch autograd in float64. The in-sample gap is the best any member reaches on those contexts (a
downward-biased estimate of the family's population optimum: a gap found there is a gap of every member); the gap
on fresh contexts is an upward-biased one. Both come with standard errors over contexts.
"""
from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np
import torch
from scipy.optimize import minimize

from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.numerics.dag import (check_dag_kernels, choice_counts, dag_candidate_sets, dag_log_posterior,
                                     dag_set_scores, encode_parent_values, sample_dag_task)

FAMILIES = ("heads", "poe", "poe_slots", "simplicial")
FAMILY_LABELS = {
    "heads": "(a) k bilinear heads, multiplied",
    "poe": "(b) product of experts, one W",
    "poe_slots": "(b') product of experts, W per slot",
    "simplicial": "(c) 2-simplicial (trilinear)",
}
#: Random starts of the non-convex ``heads`` fit, besides the start at the ``poe`` and ``poe_slots`` optima.
HEADS_RANDOM_STARTS = 2


def _check_family(family: str) -> str:
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    return family


def n_parameters(family: str, d: int, k: int) -> int:
    """Number of real parameters of a family member."""
    _check_family(family)
    if family == "poe":
        return d * d
    if family == "simplicial":
        return d ** (k + 1)
    return k * d * d


class _Features(NamedTuple):
    """Everything a family's scores are built from, for B contexts of H positions (float64 torch)."""

    single: torch.Tensor  # (B, H, H, d*d): count over l of (x^l_a, x^l_h) pairs, [b, h, a, i*d + j]
    sets: torch.Tensor  # (C, k) candidate sets (colex)
    live: torch.Tensor  # (H, C) bool: c < C(h, k), rows h < k all False
    context: torch.Tensor  # (B, L, H) int64
    d: int
    k: int


def _features(context: np.ndarray, d: int, k: int) -> _Features:
    ctx = torch.as_tensor(np.asarray(context, dtype=np.int64))
    B, L, H = ctx.shape
    pair = ctx[:, :, None, :] * d + ctx[:, :, :, None]  # (B, L, H[h], H[a]): x_a*d + x_h
    single = torch.nn.functional.one_hot(pair, d * d).to(torch.float64).sum(1)  # (B, H, H, d*d)
    sets = torch.as_tensor(dag_candidate_sets(H, k))
    counts = torch.as_tensor(choice_counts(H, k))
    live = torch.arange(sets.shape[0])[None, :] < counts[:, None]
    return _Features(single, sets, live, ctx, d, k)


def _single_scores(f: _Features, W: torch.Tensor) -> torch.Tensor:
    """s[b, h, a] = Σ_l W[x^l_a, x^l_h], (B, H, H)."""
    return f.single @ W.reshape(-1)


def _masked_log_softmax(scores: torch.Tensor, live: torch.Tensor, k: int) -> torch.Tensor:
    """Log-softmax over the live candidates of rows h >= k; −inf elsewhere. scores (B, H, C)."""
    out = torch.full_like(scores, float("-inf"))
    rows = scores[:, k:].masked_fill(~live[k:], float("-inf"))
    out[:, k:] = torch.log_softmax(rows, dim=-1)
    return out


def family_log_law(family: str, theta: torch.Tensor, f: _Features) -> torch.Tensor:
    """log Q_h(S_c) of the family member ``theta`` (flat float64), (B, H, C); −inf off the live candidates."""
    _check_family(family)
    d, k, sets = f.d, f.k, f.sets
    if family == "simplicial":
        T = theta.reshape(d ** k, d)
        ctx = f.context.numpy()
        code = torch.as_tensor(encode_parent_values(ctx[..., sets.numpy()], d))  # (B, L, C)
        idx = code[:, :, None, :] * d + f.context[:, :, :, None]  # (B, L, H, C)
        scores = T.reshape(-1)[idx].sum(1)  # (B, H, C)
        return _masked_log_softmax(scores, f.live, k)
    if family == "poe":
        s = _single_scores(f, theta.reshape(d, d))  # (B, H, H)
        scores = s[:, :, sets].sum(-1)  # (B, H, C)
        return _masked_log_softmax(scores, f.live, k)
    Ws = theta.reshape(k, d, d)
    if family == "poe_slots":
        scores = sum(_single_scores(f, Ws[i])[:, :, sets[:, i]] for i in range(k))  # (B, H, C)
        return _masked_log_softmax(scores, f.live, k)
    # heads: α_i over single positions a < h, Q ∝ Σ over orderings of Π_i α_i(s_σ(i)), normalised over the sets
    H = f.single.shape[1]
    allowed = torch.ones(H, H, dtype=torch.bool).tril(-1)[k:]  # rows h >= k (each has a candidate)
    log_alpha = [torch.log_softmax(_single_scores(f, Ws[i])[:, k:].masked_fill(~allowed, float("-inf")), dim=-1)
                 for i in range(k)]  # each (B, H-k, H)
    # a large finite floor in place of −inf: a row of masked terms then has a finite logsumexp and a zero (not
    # NaN) gradient; those entries are masked again below
    log_alpha = [a.masked_fill(~allowed, -1e30) for a in log_alpha]
    terms = [sum(log_alpha[i][:, :, sets[:, perm[i]]] for i in range(k))
             for perm in itertools.permutations(range(k))]  # each (B, H-k, C)
    raw = torch.logsumexp(torch.stack(terms), dim=0)  # (B, H-k, C); −inf at a masked parent
    scores = torch.cat([torch.zeros_like(raw[:, :1]).expand(-1, k, -1), raw], dim=1)  # rows h < k unused
    return _masked_log_softmax(scores, f.live, k)


def _objective_value(log_q: torch.Tensor, P: torch.Tensor, log_P: torch.Tensor, k: int) -> torch.Tensor:
    """Per-context mean over h >= k of KL(P_h ‖ Q_h), (B,)."""
    pos = P[:, k:] > 0
    diff = torch.where(pos, log_P[:, k:] - log_q[:, k:], torch.zeros_like(log_q[:, k:]))
    return (P[:, k:] * diff).sum(-1).mean(-1)


def per_context_kl(log_posterior, log_law, k: int) -> np.ndarray:
    """Per-context mean over rows h >= k of KL(P_h ‖ Q_h) (nats), from logs (..., H, C). (...,) float64."""
    lp = np.asarray(log_posterior, dtype=np.float64)[..., k:, :]
    lq = np.asarray(log_law, dtype=np.float64)[..., k:, :]
    p = np.exp(lp)
    with np.errstate(invalid="ignore"):
        terms = np.where(p > 0, p * (lp - lq), 0.0)
    return terms.sum(-1).mean(-1)


class FamilyFit(NamedTuple):
    """Result of :func:`fit_family`."""

    family: str
    theta: np.ndarray  # flat parameters
    gap: float  # in-sample mean KL (nats per position h >= k)
    converged: bool
    n_iter: int


def _minimise(family: str, f: _Features, P, log_P, theta0: np.ndarray, maxiter: int, tol: float):
    P_t, logP_t = torch.as_tensor(P), torch.as_tensor(log_P)

    def objective(theta_np):
        theta = torch.tensor(theta_np, dtype=torch.float64, requires_grad=True)
        value = _objective_value(family_log_law(family, theta, f), P_t, logP_t, f.k).mean()
        value.backward()
        return float(value.detach()), theta.grad.numpy().astype(np.float64)

    return minimize(objective, theta0, jac=True, method="L-BFGS-B",
                    options={"maxiter": maxiter, "ftol": tol, "gtol": 1e-10, "maxcor": 30})


def fit_family(family: str, context, log_posterior, k: int, d: int, *, maxiter: int = 1000, tol: float = 1e-14,
               rng: np.random.Generator | None = None) -> FamilyFit:
    """The family member closest to the target on these contexts: argmin mean_{b, h>=k} KL(P_h ‖ Q_h).

    Parameters
    ----------
    family : one of :data:`FAMILIES`; context : (B, L, H) int tokens; log_posterior : (B, H, C(H, k)) log of the
    target law (−inf off the candidates), e.g. ``dag_log_posterior(dag_set_scores(log π_k, context), k)``;
    rng : for the random starts of the non-convex ``heads`` fit (default: a fixed generator).

    The convex families start from zero (uniform laws); ``heads`` starts from the ``poe`` optimum (W_i = W, which
    is that member exactly), from the ``poe_slots`` optimum and from :data:`HEADS_RANDOM_STARTS` random points,
    and keeps the best.
    """
    _check_family(family)
    f = _features(context, d, k)
    P = np.exp(np.asarray(log_posterior, dtype=np.float64))
    log_P = np.asarray(log_posterior, dtype=np.float64)
    if P.shape != (f.context.shape[0], f.context.shape[2], f.sets.shape[0]):
        raise ValueError(f"log_posterior must have shape (B, H, C(H, k)) = "
                         f"{(f.context.shape[0], f.context.shape[2], f.sets.shape[0])}, got {P.shape}")
    n = n_parameters(family, d, k)
    if family != "heads":
        res = _minimise(family, f, P, log_P, np.zeros(n), maxiter, tol)
        return FamilyFit(family, res.x, float(res.fun), bool(res.success), int(res.nit))
    rng = np.random.default_rng(0) if rng is None else check_rng(rng)
    poe = fit_family("poe", context, log_posterior, k, d, maxiter=maxiter, tol=tol)
    slots = fit_family("poe_slots", context, log_posterior, k, d, maxiter=maxiter, tol=tol)
    starts = [np.tile(poe.theta, k), slots.theta]
    scale = max(1.0, float(np.abs(slots.theta).max()))
    starts += [slots.theta + rng.normal(0.0, 0.5 * scale, n) for _ in range(HEADS_RANDOM_STARTS)]
    best = None
    for start in starts:
        res = _minimise(family, f, P, log_P, start, maxiter, tol)
        if best is None or res.fun < best.fun:
            best = res
    return FamilyFit(family, best.x, float(best.fun), bool(best.success), int(best.nit))


def family_log_law_np(family: str, theta, context, k: int, d: int) -> np.ndarray:
    """log Q (B, H, C) of a fitted member on (new) contexts, NumPy float64."""
    f = _features(context, d, k)
    with torch.no_grad():
        return family_log_law(family, torch.as_tensor(np.asarray(theta, dtype=np.float64)), f).numpy()


def exact_log_posterior(kernels, context) -> np.ndarray:
    """log P(S_h = S_c | context), (B, H, C): the exact set posterior (numerics.dag), kept in logs."""
    kernels = check_dag_kernels(kernels)
    with np.errstate(divide="ignore"):
        log_top = np.log(kernels[-1])
    return dag_log_posterior(dag_set_scores(log_top, context), len(kernels))


def planted_poe_log_posterior(W, k: int):
    """A target that lies in every standard family: softmax over sets of Σ_{a∈S} Σ_l W[x^l_a, x^l_h].

    The negative control of ``ext-dag-families``: ``poe`` (W), ``poe_slots`` (W per slot) and ``heads``
    (W_1 = W_2 = W) all contain it, so a rule that finds a gap here is not discriminating. Returns a function
    (kernels, context) -> log-law (B, H, C), the signature of :func:`exact_log_posterior`.
    """
    W = np.asarray(W, dtype=np.float64)

    def target(kernels, context):
        d = W.shape[0]
        f = _features(context, d, k)
        with torch.no_grad():
            return family_log_law("poe", torch.as_tensor(W.reshape(-1)), f).numpy()

    return target


def mean_and_se(values) -> tuple[float, float]:
    """Sample mean and its standard error (ddof = 1) over i.i.d. per-context values."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size < 2:
        raise ValueError(f"values must hold at least 2 samples for a standard error, got {v.size}")
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))


def family_gap_curve(kernels, H: int, L_values, families=FAMILIES, *, n_fit: int, n_eval: int,
                     rng: np.random.Generator, target=None, maxiter: int = 1000) -> dict:
    """For every L' and family: fit the best member on ``n_fit`` contexts, measure its gap to the target there
    (in-sample) and on ``n_eval`` fresh contexts (held out), each with its standard error over contexts.

    Parameters
    ----------
    kernels : (π_1, ..., π_k) of the task; target : callable (kernels, context) -> log-law (B, H, C), default
    :func:`exact_log_posterior` (the control passes :func:`planted_poe_log_posterior`).

    Returns
    -------
    {"L": [...], "families": {family: {"gap_fit", "gap_fit_se", "gap_eval", "gap_eval_se", "converged",
    "n_iter"}: lists aligned with L}} (floats, bools, ints).
    """
    kernels = check_dag_kernels(kernels)
    k, d = len(kernels), kernels[0].shape[1]
    n_fit = check_positive_int(n_fit, "n_fit", 2)
    n_eval = check_positive_int(n_eval, "n_eval", 2)
    rng = check_rng(rng)
    target = exact_log_posterior if target is None else target
    families = tuple(_check_family(fam) for fam in families)
    out = {"L": [], "families": {fam: {key: [] for key in ("gap_fit", "gap_fit_se", "gap_eval", "gap_eval_se",
                                                            "converged", "n_iter")} for fam in families}}
    for L in L_values:
        L = check_positive_int(int(L), "L_values entry", 1)
        fit_task = sample_dag_task(kernels, n_fit, L, H, rng=rng)
        eval_task = sample_dag_task(kernels, n_eval, L, H, rng=rng)
        fit_lp = target(kernels, fit_task.context)
        eval_lp = target(kernels, eval_task.context)
        out["L"].append(L)
        for fam in families:
            fit = fit_family(fam, fit_task.context, fit_lp, k, d, maxiter=maxiter, rng=rng)
            g_fit = per_context_kl(fit_lp, family_log_law_np(fam, fit.theta, fit_task.context, k, d), k)
            g_eval = per_context_kl(eval_lp, family_log_law_np(fam, fit.theta, eval_task.context, k, d), k)
            row = out["families"][fam]
            for key, (m, se) in (("gap_fit", mean_and_se(g_fit)), ("gap_eval", mean_and_se(g_eval))):
                row[key].append(m)
                row[key + "_se"].append(se)
            row["converged"].append(fit.converged)
            row["n_iter"].append(fit.n_iter)
    return out
