"""The k-parent DAG task and its exact Bayesian model averaging (our extension, not the paper's).

Claim id served: ``ext-dag-posterior`` (exact set posterior = brute force; k = 1 is the tree task bit for bit).
Random kernel families: :func:`random_dag_kernels`.

The task
--------
A run fixes d ≥ 2 states, an order k ≥ 1 and a *kernel family* ``kernels = (π_1, ..., π_k)``: π_m is a table of
shape (d**m, d) with ``π_m[row(a_1..a_m), c] = π_m(c | a_1, ..., a_m)``, rows summing to one. A parent set
S = (s_1 < ... < s_m) is read in position order and its values are encoded first-parent-most-significant::

    row(x_S) = ((x_{s_1}·d + x_{s_2})·d + ...)·d + x_{s_m},

so ``π_m.reshape((d,)*m + (d,))[x_{s_1}, ..., x_{s_m}, c]`` is the same number. Each context draws a DAG: position
h draws its parent set S_h uniformly among the subsets of {0, ..., h−1} of size min(k, h), independently over h,
and the L + 1 examples of the context share it. x_0 ~ μ₀ (``init``) and x_h ~ π_m(· | x_{S_h}) with m = |S_h| =
min(k, h): positions h ≥ k use the order-k kernel π_k; a position h < k has the single possible parent set
{0, ..., h−1} and uses the *separate* order-h kernel π_h (one kernel per order, drawn like π_k).

``init=None`` means the stationary law of the order-1 kernel π_1 (for k = 1 this is the tree task's default, so
x_0 and x_1 share their marginal). For k ≥ 2 there is in general no law μ₀ that makes every marginal equal: the
law of x_h depends on the *joint* law of its parents, which are dependent through shared ancestors. "Stationary"
for a DAG therefore means only this choice of μ₀; every function also takes a given μ₀.

Candidate parent sets: all k-subsets of {0, ..., H−1} in colex order, so position h's candidates are a prefix
(the first C(h, k)); for k = 1 the tree's (H, H) layout bit for bit. Details: docs/notes/ext-dag-posterior.md.

Exact posterior: P(S_h = S | context) ∝ Π_l π_k(x^l_h | x^l_S) for the C(h, k) candidates (uniform prior; the
posterior factorises over positions because the likelihood does and the prior does).
"""
from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp

from bma_verify.numerics.validation import (SUM_TOL, check_init, check_positive_int, check_rng, check_tokens,
                                            finite_float_array, integer_array)
from bma_verify.numerics.bma import query_loss
from bma_verify.numerics.task import draw_children, draw_roots, flat_cdf, random_kernel, stationary_distribution

#: Largest candidate list handled (C(H, k) sets): bounds the (..., L, H, C) score tensor.
MAX_CANDIDATES = 20_000


# ----------------------------------------------------------------------------------------------------------
# Validation


def check_dag_kernels(kernels, name: str = "kernels") -> tuple[np.ndarray, ...]:
    """A kernel family (π_1, ..., π_k), π_m of shape (d**m, d), row-stochastic, d >= 2.

    A single square (d, d) array is accepted as the k = 1 family (π,). Returns a tuple of float64 arrays.
    """
    if isinstance(kernels, np.ndarray) and kernels.ndim == 2:
        if kernels.shape[0] != kernels.shape[1]:
            raise ValueError(f"{name} given as one array must be a square (d, d) kernel (the k = 1 family); got "
                             f"shape {kernels.shape}. For k >= 2 pass the sequence (π_1, ..., π_k) of tables, "
                             f"π_m of shape (d**m, d), lower orders included")
        kernels = (kernels,)
    if not isinstance(kernels, (list, tuple)) or len(kernels) == 0:
        raise ValueError(f"{name} must be a non-empty sequence (π_1, ..., π_k) of tables, π_m of shape (d**m, d); "
                         f"got {type(kernels).__name__}")
    first = finite_float_array(kernels[0], f"{name}[0]")
    if first.ndim != 2 or first.shape[0] != first.shape[1]:
        raise ValueError(f"{name}[0] (the order-1 kernel π_1) must be a square (d, d) table; got shape {first.shape}")
    d = first.shape[1]
    if d < 2:
        raise ValueError(f"{name}[0] must have d >= 2 states, got d = {d}")
    out = []
    for m, table in enumerate(kernels, start=1):
        arr = first if m == 1 else finite_float_array(table, f"{name}[{m - 1}]")
        expected = (d**m, d)
        if arr.shape != expected:
            raise ValueError(f"{name}[{m - 1}] (the order-{m} kernel π_{m}) must have shape (d**{m}, d) = {expected} "
                             f"(one row per value of its {m} parents, in position order); got {arr.shape}")
        if np.any(arr < 0):
            raise ValueError(f"{name}[{m - 1}] must have non-negative entries (found min {arr.min():.3g})")
        worst = float(np.max(np.abs(arr.sum(axis=1) - 1.0)))
        if worst > SUM_TOL:
            raise ValueError(f"{name}[{m - 1}] must be row-stochastic (each row sums to 1: π_{m}[row, c] = "
                             f"π_{m}(c | parents)); worst row sum is off by {worst:.3g}")
        out.append(arr)
    return tuple(out)


def _check_order(k, name: str = "k") -> int:
    return check_positive_int(k, name, minimum=1)


def _check_H_k(H: int, k: int) -> tuple[int, int]:
    H = check_positive_int(H, "H", minimum=2)
    k = _check_order(k)
    if k > H - 1:
        raise ValueError(f"k must be at most H - 1 = {H - 1} (otherwise no position chooses its parent set); "
                         f"got k = {k}")
    return H, k


def check_parent_sets(parent_sets, k: int | None = None, H: int | None = None, name: str = "parent_sets"
                      ) -> np.ndarray:
    """A (..., H, k) int array: row h holds the min(k, h) parents of position h in increasing order, each in
    0..h−1, then −1 padding; row 0 is all −1. Returns int64."""
    arr = integer_array(parent_sets, name, "an integer array of shape (..., H, k)")
    if arr.ndim < 2:
        raise ValueError(f"{name} must have shape (..., H, k) (row h: the parents of position h), got {arr.shape}")
    n_pos, width = arr.shape[-2], arr.shape[-1]
    if k is not None and width != k:
        raise ValueError(f"{name} must have k = {k} columns (one per parent), got {width}")
    if H is not None and n_pos != H:
        raise ValueError(f"{name} must have H = {H} rows (matching the tokens), got {n_pos}")
    if n_pos < 2 or width < 1 or width > n_pos - 1:
        raise ValueError(f"{name} must have H >= 2 rows and 1 <= k <= H - 1 columns, got shape {arr.shape}")
    for h in range(n_pos):
        m = min(width, h)
        row = arr[..., h, :]
        if np.any(row[..., m:] != -1):
            raise ValueError(f"{name}[..., {h}, {m}:] must be -1 (position {h} has min(k, h) = {m} parents; "
                             f"pad the row with -1)")
        if m == 0:
            continue
        used = row[..., :m]
        if np.any(used < 0) or np.any(used >= h):
            raise ValueError(f"{name}[..., {h}, :{m}] must be earlier positions in 0..{h - 1}")
        if m > 1 and np.any(np.diff(used, axis=-1) <= 0):
            raise ValueError(f"{name}[..., {h}, :{m}] must list distinct parents in increasing position order")
    return arr


def _check_context(context, d: int, k: int) -> np.ndarray:
    context = check_tokens(context, d, "context", min_ndim=2)
    H = context.shape[-1]
    if H < 2:
        raise ValueError(f"context must have H >= 2 positions on its last axis, got shape {context.shape}")
    if k > H - 1:
        raise ValueError(f"kernels has order k = {k}, which needs H >= k + 1 positions; context has H = {H}")
    return context


# ----------------------------------------------------------------------------------------------------------
# Candidate sets and encoding


def dag_candidate_sets(H: int, k: int) -> np.ndarray:
    """All k-subsets of {0, ..., H−1} in colex order, each in increasing order.

    Position h >= k chooses among the first C(h, k) rows (the sets with largest element < h).

    Returns
    -------
    (C(H, k), k) int64.
    """
    H, k = _check_H_k(H, k)
    count = math.comb(H, k)
    if count > MAX_CANDIDATES:
        raise ValueError(f"C(H, k) = {count} candidate sets exceeds {MAX_CANDIDATES}; use a smaller H or k")
    sets = sorted(itertools.combinations(range(H), k), key=lambda s: s[::-1])
    return np.asarray(sets, dtype=np.int64).reshape(count, k)


def dag_candidate_counts(H: int, k: int) -> np.ndarray:
    """Number of possible parent sets of each position: C(h, min(k, h)) (1 for h < k, including h = 0). (H,) int64."""
    H, k = _check_H_k(H, k)
    return np.array([math.comb(h, min(k, h)) for h in range(H)], dtype=np.int64)


def choice_counts(H: int, k: int) -> np.ndarray:
    """C(h, k) for h >= k, 0 for h < k: the number of live columns of posterior row h."""
    return np.array([math.comb(h, k) if h >= k else 0 for h in range(H)], dtype=np.int64)


def encode_parent_values(tokens, d: int) -> np.ndarray:
    """row(x_S) = Σ_i x_{s_i} d^{m−1−i} over the last axis (first parent most significant). (...,) int64."""
    tokens = np.asarray(tokens)
    idx = tokens[..., 0]
    for i in range(1, tokens.shape[-1]):
        idx = idx * d + tokens[..., i]
    # C order, so arrays indexed by it are laid out as the tree code's (a 0-d code stays 0-d)
    return idx if np.ndim(idx) == 0 else np.ascontiguousarray(idx)


def parent_sets_from_choices(choices, H: int, k: int) -> np.ndarray:
    """Parent sets (..., H, k) from candidate indices (..., H − k) of positions k..H−1 (colex order)."""
    H, k = _check_H_k(H, k)
    choices = np.asarray(choices, dtype=np.int64)
    if choices.shape[-1:] != (H - k,):
        raise ValueError(f"choices must have H - k = {H - k} entries on its last axis, got shape {choices.shape}")
    limits = choice_counts(H, k)[k:]
    if np.any(choices < 0) or np.any(choices >= limits):
        raise ValueError(f"choices[..., j] must be in 0..C(k + j, k) - 1 (position k + j has C(k + j, k) candidates)")
    sets = dag_candidate_sets(H, k)
    out = np.full(choices.shape[:-1] + (H, k), -1, dtype=np.int64)
    for h in range(1, k):
        out[..., h, :h] = np.arange(h)
    out[..., k:, :] = sets[choices]
    return out


def parent_set_index(parent_sets) -> np.ndarray:
    """Index of each position's parent set in the colex candidate list (−1 for rows h < k). (..., H) int64."""
    parent_sets = check_parent_sets(parent_sets)
    H, k = parent_sets.shape[-2:]
    lookup = {tuple(s): i for i, s in enumerate(dag_candidate_sets(H, k).tolist())}
    out = np.full(parent_sets.shape[:-1], -1, dtype=np.int64)
    flat = parent_sets.reshape(-1, H, k)
    flat_out = out.reshape(-1, H)
    for b in range(flat.shape[0]):
        for h in range(k, H):
            flat_out[b, h] = lookup[tuple(flat[b, h].tolist())]
    return out


# ----------------------------------------------------------------------------------------------------------
# Sampling


def random_dag_kernels(d: int, k: int, *, alpha: float = 1.0, eps: float = 0.0, rng: np.random.Generator
                       ) -> tuple[np.ndarray, ...]:
    """A random kernel family (π_1, ..., π_k), π_m of shape (d**m, d).

    π_m stacks d**(m−1) draws of ``numerics.random_kernel(d, alpha=alpha, eps=eps, rng=rng)`` (orders in turn,
    m = 1 first): each row is Dirichlet(α·1) mixed as (1 − d·ε)·P + ε, so every entry is >= ε. k = 1 gives
    ``(random_kernel(d, ...),)`` on the same stream.
    """
    d = check_positive_int(d, "d", minimum=2)
    k = _check_order(k)
    rng = check_rng(rng)
    return tuple(np.concatenate([random_kernel(d, alpha=alpha, eps=eps, rng=rng) for _ in range(d ** (m - 1))])
                 for m in range(1, k + 1))


def random_parent_sets(H: int, k: int, *, rng: np.random.Generator) -> np.ndarray:
    """A random DAG: S_h uniform among the min(k, h)-subsets of {0..h−1}, independently over h.

    Drawn as a uniform index into the C(h, k) colex candidates of each position h >= k (one vectorised
    ``rng.integers`` call; k = 1 consumes the stream exactly as ``numerics.random_parents``).

    Returns
    -------
    (H, k) int64 (see :func:`check_parent_sets`).
    """
    H, k = _check_H_k(H, k)
    rng = check_rng(rng)
    choices = rng.integers(0, choice_counts(H, k)[k:])
    return parent_sets_from_choices(choices, H, k)


def resolve_dag_init(kernels: tuple, init) -> np.ndarray:
    """The law of x_0: ``init`` checked as a law on d states, or the stationary law of the order-1 table
    ``kernels[0]`` when it is None."""
    d = kernels[0].shape[1]
    return stationary_distribution(kernels[0]) if init is None else check_init(init, d)


def _draw_tokens(kernels: tuple, parent_sets: np.ndarray, init: np.ndarray, u: np.ndarray) -> np.ndarray:
    """x (B, n, H) by inversion from uniforms u (H, B, n); parent_sets (B, H, k)."""
    d = kernels[0].shape[1]
    H, B, n = u.shape
    x = np.empty((B, n, H), dtype=np.int64)
    x[:, :, 0] = draw_roots(init, u[0])
    flats = [flat_cdf(table) for table in kernels]
    rows = np.arange(B)
    k = len(kernels)
    for h in range(1, H):
        m = min(k, h)
        parents = parent_sets[:, h, :m]  # (B, m)
        values = x[rows[:, None], :, parents]  # (B, m, n)
        code = encode_parent_values(np.moveaxis(values, 1, -1), d)  # (B, n)
        x[:, :, h] = draw_children(flats[m - 1], d, code, u[h])
    return x


def sample_dag_chains(kernels, parent_sets, n: int, *, rng: np.random.Generator, init=None) -> np.ndarray:
    """n independent sequences on one DAG: x_0 ~ init, x_h ~ π_{|S_h|}(· | x_{S_h}).

    Parameters
    ----------
    kernels : (π_1, ..., π_k); parent_sets : (H, k); n : int >= 0; rng : numpy Generator;
    init : (d,) or None (the stationary law of π_1).

    Returns
    -------
    (n, H) int64 tokens, Fortran-ordered (each position contiguous) like ``numerics.sample_chains``; k = 1 gives
    its draws bit for bit on the same stream.
    """
    kernels = check_dag_kernels(kernels)
    k = len(kernels)
    parent_sets = check_parent_sets(parent_sets, k=k)
    if parent_sets.ndim != 2:
        raise ValueError(f"parent_sets must be one DAG of shape (H, k), got shape {parent_sets.shape}")
    n = check_positive_int(n, "n", minimum=0)
    rng = check_rng(rng)
    init = resolve_dag_init(kernels, init)
    H = parent_sets.shape[0]
    u = rng.random((H, 1, n))
    x = _draw_tokens(kernels, parent_sets[None], init, u)[0]  # (n, H)
    return np.asfortranarray(x)  # each position contiguous, the layout of numerics.sample_chains


class DagTaskBatch(NamedTuple):
    """A batch of in-context DAG tasks: each of the B contexts has its own DAG.

    parent_sets : (B, H, k) int64; context : (B, L, H) int64; query : (B, H) int64 (example L + 1).
    """
    parent_sets: np.ndarray
    context: np.ndarray
    query: np.ndarray


def sample_dag_task(kernels, n_contexts: int, L: int, H: int, *, rng: np.random.Generator, init=None
                    ) -> DagTaskBatch:
    """``n_contexts`` tasks: a random DAG each (:func:`random_parent_sets`), then L + 1 examples on it.

    The stream is consumed as ``numerics.sample_task`` does (parent choices, then one uniform per token), so
    k = 1 gives the tree task's batch bit for bit (with ``parent_sets[..., 0]`` in place of ``parents``).
    """
    kernels = check_dag_kernels(kernels)
    k = len(kernels)
    B = check_positive_int(n_contexts, "n_contexts", minimum=1)
    L = check_positive_int(L, "L", minimum=0)
    H, k = _check_H_k(H, k)
    rng = check_rng(rng)
    init = resolve_dag_init(kernels, init)
    choices = rng.integers(0, choice_counts(H, k)[k:], size=(B, H - k))
    parent_sets = parent_sets_from_choices(choices, H, k)
    u = rng.random((H, B, L + 1))
    x = _draw_tokens(kernels, parent_sets, init, u)
    return DagTaskBatch(parent_sets=parent_sets, context=x[:, :L, :], query=x[:, L, :])


# ----------------------------------------------------------------------------------------------------------
# Exact posterior and predictive


def _order_of(log_table: np.ndarray) -> tuple[int, int]:
    if log_table.ndim != 2:
        raise ValueError(f"log_table must be a (d**k, d) table, got shape {log_table.shape}")
    rows, d = log_table.shape
    if d < 2:
        raise ValueError(f"log_table must have d >= 2 columns, got {d}")
    k = max(1, round(math.log(rows) / math.log(d))) if rows > 1 else 0
    if k < 1 or d**k != rows:
        raise ValueError(f"log_table must have d**k rows for some k >= 1 (d = {d} columns); got {rows} rows")
    return k, d


def dag_set_scores(log_table, context) -> np.ndarray:
    """score[..., h, c] = Σ_l T[row(x^l_{S_c}), x^l_h] for every candidate set S_c (colex list), all h.

    With ``T = log π_k`` this is the log-likelihood of S_c as the parent set of h (the score of a pair-attention
    head for k = 2); k = 1 is ``numerics.selector_scores`` with the same arithmetic.

    Parameters
    ----------
    log_table : (d**k, d) real table (−inf allowed: the log of a kernel with zeros).
    context : (..., L, H) int tokens.

    Returns
    -------
    (..., H, C(H, k)) float64, every (h, c) pair (the mask h > max S_c is applied by the posterior).
    """
    T = np.asarray(log_table, dtype=np.float64)
    k, d = _order_of(T)
    if np.any(np.isnan(T)) or np.any(T == np.inf):
        raise ValueError("log_table must not contain NaN or +inf (−inf marks impossible transitions)")
    context = _check_context(context, d, k)
    sets = dag_candidate_sets(context.shape[-1], k)  # (C, k)
    code = encode_parent_values(context[..., sets], d)  # (..., L, C)
    pair = T[code[..., None, :], context[..., :, None]]  # (..., L, H, C)
    return pair.sum(axis=-3)


def dag_log_posterior(scores, k: int) -> np.ndarray:
    """Log-softmax of (..., H, C) scores over the live candidates of each row (c < C(h, k)); −inf elsewhere and on
    rows h < k. A row whose candidates are all −inf comes out NaN (k = 1: ``numerics.causal_log_softmax``)."""
    s = np.asarray(scores, dtype=np.float64)
    k = _check_order(k)
    H, C = s.shape[-2:]
    live = np.arange(C)[None, :] < choice_counts(H, k)[:, None]  # (H, C)
    rows = np.where(live, s, -np.inf)[..., k:, :]  # (..., H-k, C)
    out = np.full(s.shape, -np.inf)
    with np.errstate(invalid="ignore"):
        out[..., k:, :] = rows - logsumexp(rows, axis=-1, keepdims=True)
    return out


def log_tables(kernels: tuple) -> tuple:
    """The natural log of each checked table of ``kernels`` (log 0 = −inf), in the same order."""
    with np.errstate(divide="ignore"):
        return tuple(np.log(t) for t in kernels)


def dag_parent_posterior(kernels, context) -> np.ndarray:
    """P(S_h = S_c | context) under the uniform prior over the C(h, k) candidates of each position h >= k.

    Parameters
    ----------
    kernels : (π_1, ..., π_k) (only π_k enters: positions h < k have no choice).
    context : (..., L, H) int tokens; leading axes are batch axes.

    Returns
    -------
    (..., H, C(H, k)) float64; row h >= k sums to one over c < C(h, k) (colex list :func:`dag_candidate_sets`);
    rows h < k and the remaining entries are zero. k = 1: exactly ``numerics.parent_posterior``.

    Raises
    ------
    ValueError
        if the context has probability zero under every candidate of some position.
    """
    kernels = check_dag_kernels(kernels)
    k = len(kernels)
    log_posterior = dag_log_posterior(dag_set_scores(log_tables(kernels)[-1], context), k)
    if np.any(np.isnan(log_posterior)):
        raise ValueError("context is impossible under kernels: some position has zero likelihood for every "
                         "candidate parent set")
    return np.exp(log_posterior)


def _check_query(query, context: np.ndarray, d: int) -> np.ndarray:
    query = check_tokens(query, d, "query")
    if query.shape != context.shape[:-2] + context.shape[-1:]:
        raise ValueError(f"query must have shape {context.shape[:-2] + context.shape[-1:]} "
                         f"(leading axes of context, then H); got {query.shape}")
    return query


def dag_bma_predictive(kernels, context, query, init=None) -> np.ndarray:
    """P_BMA(x^{L+1}_h = s | context, query prefix).

    Row h >= k: Σ_c P(S_h = S_c | context) π_k(· | x^{L+1}_{S_c}); row 0 < h < k: π_h(· | x^{L+1}_0..x^{L+1}_{h−1})
    (the only parent set); row 0: ``init`` (stationary law of π_1 when None). k = 1: exactly
    ``numerics.bma_predictive``.

    Parameters
    ----------
    kernels : (π_1, ..., π_k); context : (..., L, H) int; query : (..., H) int; init : (d,) or None.

    Returns
    -------
    (..., H, d) float64.
    """
    kernels = check_dag_kernels(kernels)
    k, d = len(kernels), kernels[0].shape[1]
    context = _check_context(context, d, k)
    query = _check_query(query, context, d)
    init = resolve_dag_init(kernels, init)
    posterior = dag_parent_posterior(kernels, context)  # (..., H, C)
    sets = dag_candidate_sets(context.shape[-1], k)
    rows = kernels[-1][encode_parent_values(query[..., sets], d)]  # (..., C, d)
    predictive = posterior @ rows  # (..., H, d)
    for h in range(1, k):
        predictive[..., h, :] = kernels[h - 1][encode_parent_values(query[..., :h], d)]
    predictive[..., 0, :] = init
    return predictive


def dag_oracle_loss(kernels, parent_sets, query) -> float:
    """Mean over h >= 1 of −log π(x_h | x_{S_h}): the loss of a predictor that knows the DAG."""
    kernels = check_dag_kernels(kernels)
    k, d = len(kernels), kernels[0].shape[1]
    query = check_tokens(query, d, "query")
    parent_sets = check_parent_sets(parent_sets, k=k, H=query.shape[-1])
    if parent_sets.shape[:-1] != query.shape:
        raise ValueError(f"parent_sets must have shape {query.shape + (k,)} to match query, got {parent_sets.shape}")
    logs = log_tables(kernels)
    total = []
    for h in range(1, query.shape[-1]):
        m = min(k, h)
        values = np.take_along_axis(query, parent_sets[..., h, :m], axis=-1)  # (..., m)
        total.append(logs[m - 1][encode_parent_values(values, d), query[..., h]])
    return float(-np.mean(np.stack(total, axis=-1)))


def dag_bma_loss(kernels, context, query, init=None) -> float:
    """Mean over h >= 1 (and batch) of −log P_BMA(x^{L+1}_h | context, prefix), in nats per token."""
    return query_loss(dag_bma_predictive(kernels, context, query, init), query)
