"""Bayesian model averaging over parents (docs/claims.md, "The task") and the losses every result is reported in.

Claim ids served: ``bma-score-identity``, ``prop1-invariance``, ``thm2-consistency``.
"""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from bma_verify.numerics.validation import (check_init, check_kernel, check_parents, check_single_kernel, check_tokens,
                                            finite_float_array)
from bma_verify.numerics.task import stationary_distribution_unchecked


def _check_context(context, d: int) -> np.ndarray:
    context = check_tokens(context, d, "context", min_ndim=2)
    if context.shape[-1] < 2:
        raise ValueError(f"context must have H >= 2 positions on its last axis, got shape {context.shape}")
    return context


def selector_scores(W, context) -> np.ndarray:
    """score[..., h, h'] = Σ_l W[x^l_{h'}, x^l_h], the second-layer bilinear score with exact copies.

    Parameters
    ----------
    W : (d, d) real matrix (−inf allowed: log of a kernel with zeros)
    context : (..., L, H) int tokens

    Returns
    -------
    (..., H, H) float64, all pairs (the causal mask is applied by :func:`selector_attention`).
    """
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"W must be a square (d, d) matrix, got shape {W.shape}")
    if np.any(np.isnan(W)) or np.any(W == np.inf):
        raise ValueError("W must not contain NaN or +inf (−inf marks impossible transitions)")
    return _selector_scores(W, _check_context(context, W.shape[0]))


def _selector_scores(W: np.ndarray, context: np.ndarray) -> np.ndarray:
    """:func:`selector_scores` on a validated W and int64 context."""
    # pair[..., l, h, h'] = W[x^l_{h'}, x^l_h]
    pair = W[context[..., None, :], context[..., :, None]]  # (..., L, H, H)
    return pair.sum(axis=-3)


def causal_log_softmax(scores) -> np.ndarray:
    """Row-wise log-softmax over h' < h of (..., H, H) scores; −inf on row 0 and on entries h' >= h.

    The one causal normalisation of the package: the discrete selector and the DS posterior both use it.
    A row whose candidates are all −inf comes out NaN (callers decide what an impossible row means).
    """
    s = np.asarray(scores, dtype=np.float64)
    H = s.shape[-1]
    allowed = np.tril(np.ones((H, H), dtype=bool), k=-1)  # (H, H): h' < h
    rows = np.where(allowed, s, -np.inf)[..., 1:, :]  # (..., H-1, H)
    out = np.full(s.shape, -np.inf)
    with np.errstate(invalid="ignore"):  # −inf − (−inf) = NaN marks an impossible row
        out[..., 1:, :] = rows - logsumexp(rows, axis=-1, keepdims=True)
    return out


def selector_attention(W, context) -> np.ndarray:
    """Causal softmax of :func:`selector_scores`: row h is a law over h' < h; rows and columns >= h are zero.

    Row 0 is all zero (position 0 has no candidate). With ``W = log π`` this is the parent posterior.

    Raises
    ------
    ValueError
        if some row has every candidate at −inf (the context is impossible under W).
    """
    return _attention(selector_scores(W, context))


def _attention(scores: np.ndarray) -> np.ndarray:
    """The causal softmax of (..., H, H) scores; a ValueError when some row is impossible (every candidate −inf)."""
    log_attention = causal_log_softmax(scores)  # (..., H, H)
    if np.any(np.isnan(log_attention)):
        raise ValueError("context is impossible under W: some position has zero likelihood for every candidate parent")
    return np.exp(log_attention)


def _log_kernel(kernel: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(kernel)


def parent_posterior(kernel, context) -> np.ndarray:
    """P(pa(h) = h' | context) under a uniform prior over h' < h (``bma-score-identity``).

    Parameters
    ----------
    kernel : (d, d)
    context : (..., L, H) int tokens; leading axes are batch axes

    Returns
    -------
    (..., H, H) float64; row h sums to one over h' < h (row 0 is zero); entries with h' >= h are zero.
    """
    kernel = check_kernel(kernel, single=True)
    return _parent_posterior(kernel, _check_context(context, kernel.shape[0]))


def _parent_posterior(kernel: np.ndarray, context: np.ndarray) -> np.ndarray:
    """:func:`parent_posterior` on a validated (d, d) kernel and int64 context."""
    return _attention(_selector_scores(_log_kernel(kernel), context))


def bma_predictive(kernel, context, query, init=None) -> np.ndarray:
    """Posterior predictive P_BMA(x^{L+1}_h = s | context, query prefix).

    Row h = Σ_{h'<h} P(pa(h)=h' | context) π(· | x^{L+1}_{h'}); row 0 is ``init`` (stationary when None).

    Parameters
    ----------
    kernel : (d, d)
    context : (..., L, H) int
    query : (..., H) int, the same leading axes
    init : (d,) or None

    Returns
    -------
    (..., H, d) float64.
    """
    kernel, context, query, init = _check_predictive_arguments(kernel, context, query, init)
    return _bma_predictive(kernel, context, query, init)


def _check_predictive_arguments(kernel, context, query, init):
    """The arguments of :func:`bma_predictive`, validated: (kernel (d, d), context, query, init law)."""
    kernel = check_kernel(kernel)
    d = kernel.shape[-1]
    query = check_tokens(query, d, "query")
    context = _check_context(context, d)
    if query.shape != context.shape[:-2] + context.shape[-1:]:
        raise ValueError(f"query must have shape {context.shape[:-2] + context.shape[-1:]} "
                         f"(leading axes of context, then H); got {query.shape}")
    init = None if init is None else check_init(init, d)
    kernel = check_single_kernel(kernel)
    return kernel, context, query, stationary_distribution_unchecked(kernel) if init is None else init


def _bma_predictive(kernel: np.ndarray, context: np.ndarray, query: np.ndarray, init: np.ndarray) -> np.ndarray:
    """:func:`bma_predictive` on validated arrays."""
    posterior = _parent_posterior(kernel, context)  # (..., H, H)
    predictive = posterior @ kernel[query]  # (..., H, H) @ (..., H, d) -> (..., H, d)
    predictive[..., 0, :] = init
    return predictive


def _check_probs_and_query(probs, query) -> tuple[np.ndarray, np.ndarray]:
    probs = finite_float_array(probs, "probs")
    if probs.ndim < 2:
        raise ValueError(f"probs must have shape (..., H, d), got {probs.shape}")
    if np.any(probs < 0):
        raise ValueError("probs must be non-negative probabilities")
    query = check_tokens(query, probs.shape[-1], "query")
    if query.shape != probs.shape[:-1]:
        raise ValueError(f"query must have shape {probs.shape[:-1]} to match probs {probs.shape}; got {query.shape}")
    return probs, query


def _query_loss(probs: np.ndarray, query: np.ndarray) -> float:
    """:func:`query_loss` of validated probabilities (..., H, d) and int64 query tokens (..., H)."""
    picked = np.take_along_axis(probs, query[..., None], axis=-1)[..., 0]  # (..., H)
    with np.errstate(divide="ignore"):  # position 0 has no parent and is excluded from every loss
        return float(-np.mean(np.log(picked[..., 1:])))


def query_loss(probs, query) -> float:
    """Mean over positions h >= 1 (and batch) of −log probs[..., h, query[h]], in nats per token."""
    return _query_loss(*_check_probs_and_query(probs, query))


def bma_loss(kernel, context, query) -> float:
    """Query loss of the BMA predictor: the floor no predictor beats in expectation."""
    kernel, context, query, init = _check_predictive_arguments(kernel, context, query, None)
    return _query_loss(_bma_predictive(kernel, context, query, init), query)


def oracle_loss(kernel, parents, query) -> float:
    """Mean over h >= 1 of −log π(x_h | x_pa(h)): the loss of a predictor that knows the tree."""
    kernel = check_kernel(kernel)
    query = check_tokens(query, kernel.shape[-1], "query")
    parents = check_parents(parents, H=query.shape[-1])
    if parents.shape != query.shape:
        raise ValueError(f"parents must have the shape of query {query.shape}, got {parents.shape}")
    parent_tokens = np.take_along_axis(query, parents[..., 1:], axis=-1)  # (..., H-1)
    with np.errstate(divide="ignore"):
        return float(-np.mean(np.log(kernel[parent_tokens, query[..., 1:]])))


def _attention_at_parents(attention, parents) -> tuple[np.ndarray, np.ndarray]:
    attention = finite_float_array(attention, "attention")
    if attention.ndim < 2 or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"attention must have shape (..., H, H), got {attention.shape}")
    parents = check_parents(parents, H=attention.shape[-1])
    if parents.shape != attention.shape[:-1]:
        raise ValueError(f"parents must have shape {attention.shape[:-1]} to match attention, got {parents.shape}")
    at_parent = np.take_along_axis(attention[..., 1:, :], parents[..., 1:, None], axis=-1)[..., 0]  # (..., H-1)
    return attention, at_parent


def parent_loss(attention, parents) -> float:
    """L_pa: mean over h >= 1 of −log A[..., h, pa(h)] (attention rows over h' < h)."""
    _, at_parent = _attention_at_parents(attention, parents)
    with np.errstate(divide="ignore"):
        return float(-np.mean(np.log(at_parent)))


def parent_loss_by_context(attention, parents) -> np.ndarray:
    """L_pa of each context: −log A[..., h, pa(h)] averaged over h >= 1 only, shape ``attention.shape[:-2]``
    (their mean is :func:`parent_loss`; their spread gives its standard error over contexts)."""
    _, at_parent = _attention_at_parents(attention, parents)
    with np.errstate(divide="ignore"):
        return -np.mean(np.log(at_parent), axis=-1)


def parent_accuracy(attention, parents) -> float:
    """Fraction of positions h >= 1 whose attention argmax over h' < h is the true parent."""
    attention, _ = _attention_at_parents(attention, parents)
    H = attention.shape[-1]
    allowed = np.tril(np.ones((H, H), dtype=bool), k=-1)
    best = np.argmax(np.where(allowed, attention, -np.inf)[..., 1:, :], axis=-1)  # (..., H-1)
    parents = np.asarray(parents)
    return float(np.mean(best == parents[..., 1:]))


def bma_parent_loss(kernel, context, parents) -> float:
    """L_pa of the BMA posterior: mean over h >= 1 of −log P(pa(h) = true parent | context)."""
    return parent_loss(parent_posterior(kernel, context), parents)
