"""Brute-force references for the k-parent DAG task: every DAG, every sequence.

Nothing here uses the factorisations the fast code of :mod:`numerics.dag` relies on (the posterior factorising
over positions, the colex prefix structure, the product tensor of :mod:`numerics.dag_law`): each function
writes down the full likelihood μ₀(x_0) Π_{h≥1} π_{|S_h|}(x_h | x_{S_h}) of whole sequences under whole DAGs and
sums. They refuse sizes where enumeration is impractical. Claim ids served: ``ext-dag-posterior``,
``ext-dag-lemma4-sets``.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from bma_verify.numerics.validation import check_positive_int, check_tokens
from bma_verify.numerics.dag import check_dag_kernels, check_parent_sets, log_tables, resolve_dag_init
from bma_verify.numerics.enumeration import MAX_SEQUENCES, all_sequences

#: Largest number of DAGs enumerated (Π_{h≥k} C(h, k)); e.g. k = 2, H = 6 gives 180.
MAX_DAGS = 50_000


def count_dags(H: int, k: int) -> int:
    """Π_{h=k}^{H−1} C(h, k): the number of DAGs of the task (positions h < k have one parent set)."""
    H = check_positive_int(H, "H", 2)
    k = check_positive_int(k, "k", 1)
    if k > H - 1:
        raise ValueError(f"k must be at most H - 1 = {H - 1}; got k = {k}")
    return math.prod(math.comb(h, k) for h in range(k, H))


def all_dags(H: int, k: int) -> np.ndarray:
    """Every DAG of the task as parent sets, in lexicographic order of the per-position choices.

    Built from ``itertools.combinations`` position by position (independently of the colex candidate list).

    Returns
    -------
    (G, H, k) int64 with G = :func:`count_dags`.
    """
    count = count_dags(H, k)
    if count > MAX_DAGS:
        raise ValueError(f"there are {count} DAGs for H = {H}, k = {k}; enumeration refuses more than {MAX_DAGS}")
    per_position = [list(itertools.combinations(range(h), min(k, h))) for h in range(H)]
    out = np.full((count, H, k), -1, dtype=np.int64)
    for g, choice in enumerate(itertools.product(*per_position)):
        for h, parents in enumerate(choice):
            out[g, h, :len(parents)] = parents
    return out


def dag_sequence_log_likelihood(kernels, parent_sets, sequences, init=None) -> np.ndarray:
    """log P(x_0..x_{n−1}) = log μ₀(x_0) + Σ_{1≤h<n} log π(x_h | x_{S_h}) for every row of ``sequences``.

    ``sequences`` (..., n) may be a prefix (n <= H): positions past it are integrated out (they sum to one).

    Returns
    -------
    (...,) float64, −inf where the sequence is impossible.
    """
    kernels = check_dag_kernels(kernels)
    k, d = len(kernels), kernels[0].shape[1]
    parent_sets = check_parent_sets(parent_sets, k=k)
    if parent_sets.ndim != 2:
        raise ValueError(f"parent_sets must be one DAG of shape (H, k); got {parent_sets.shape}")
    sequences = check_tokens(np.asarray(sequences), d, "sequences")
    n = sequences.shape[-1]
    if n > parent_sets.shape[0]:
        raise ValueError(f"sequences must have at most H = {parent_sets.shape[0]} positions, got {n}")
    init = resolve_dag_init(kernels, init)
    logs = log_tables(kernels)
    with np.errstate(divide="ignore"):
        total = np.log(init)[sequences[..., 0]]
    for h in range(1, n):
        m = min(k, h)
        row = np.zeros(sequences.shape[:-1], dtype=np.int64)
        for s in parent_sets[h, :m]:  # first parent most significant
            row = row * d + sequences[..., s]
        total = total + logs[m - 1][row, sequences[..., h]]
    return total


def dag_sequence_distribution(kernels, parent_sets, init=None, n_positions: int | None = None):
    """All d**n sequences of positions 0..n−1 (n = H by default) and their probabilities by the product formula.

    Returns
    -------
    sequences : (d**n, n) int8, lexicographic; probabilities : (d**n,) float64 summing to one.
    """
    kernels = check_dag_kernels(kernels)
    parent_sets = check_parent_sets(parent_sets, k=len(kernels))
    n = parent_sets.shape[-2] if n_positions is None else check_positive_int(n_positions, "n_positions", 1)
    sequences = all_sequences(kernels[0].shape[1], n)
    return sequences, np.exp(dag_sequence_log_likelihood(kernels, parent_sets, sequences, init))


def brute_force_dag_joint(kernels, parent_sets, positions, init=None) -> np.ndarray:
    """Exact joint law of x at ``positions`` (one axis of length d each, in the given order) by summing the full
    likelihood over every sequence of positions 0..max(positions)."""
    positions = [int(p) for p in positions]
    sequences, probabilities = dag_sequence_distribution(kernels, parent_sets, init, max(positions) + 1)
    d = check_dag_kernels(kernels)[0].shape[1]
    joint = np.zeros((d,) * len(positions))
    np.add.at(joint, tuple(sequences[:, p].astype(np.int64) for p in positions), probabilities)
    return joint


def _dag_log_weights(kernels, context, init, dags) -> np.ndarray:
    """Σ_l log P(x^l | G) for every DAG G: the log-likelihood of the whole context. (G,)"""
    return np.array([dag_sequence_log_likelihood(kernels, g, context, init).sum() for g in dags])


def _normalise(log_weights: np.ndarray) -> np.ndarray:
    finite = np.isfinite(log_weights)
    if not finite.any():
        raise ValueError("context must have positive probability under at least one DAG for these kernels")
    weights = np.zeros_like(log_weights)
    weights[finite] = np.exp(log_weights[finite] - log_weights[finite].max())
    return weights / weights.sum()


def brute_force_dag_posterior(kernels, context, init=None) -> np.ndarray:
    """P(S_h = S | context) by Bayes' rule over every DAG with the full likelihood, then marginalised.

    The prior is uniform over the DAGs (equivalently, independent uniform parent sets). The posterior over whole
    DAGs is normalised once and summed per position, so agreement with :func:`numerics.dag_parent_posterior`
    tests its factorisation. The column of a set S is its index in the colex list (found by lookup, not by the
    prefix property).

    Parameters
    ----------
    kernels : (π_1, ..., π_k); context : (L, H) int tokens; init : (d,) or None (cancels; kept for the full
        likelihood).

    Returns
    -------
    (H, C(H, k)): rows h < k zero, as :func:`numerics.dag_parent_posterior`.
    """
    kernels = check_dag_kernels(kernels)
    k = len(kernels)
    context = np.asarray(context)
    if context.ndim != 2:
        raise ValueError(f"context must be an (L, H) token array; got shape {context.shape}")
    H = context.shape[1]
    dags = all_dags(H, k)
    weights = _normalise(_dag_log_weights(kernels, context, init, dags))
    columns = {s: i for i, s in enumerate(sorted(itertools.combinations(range(H), k), key=lambda s: s[::-1]))}
    posterior = np.zeros((H, len(columns)))
    for g, w in zip(dags, weights):
        for h in range(k, H):
            posterior[h, columns[tuple(g[h].tolist())]] += w
    return posterior


def brute_force_dag_predictive(kernels, context, query, init=None) -> np.ndarray:
    """P(x^{L+1}_h = s | context, x^{L+1}_{<h}) over every DAG, with the query prefix in the likelihood.

    For each h and s: Σ_G L(context | G) P(x^{L+1}_{<h}, x^{L+1}_h = s | G), normalised over s; the prefix
    probabilities are full sequence likelihoods of positions 0..h (later positions integrate out).

    Returns
    -------
    (H, d); row 0 is μ₀.
    """
    kernels = check_dag_kernels(kernels)
    k, d = len(kernels), kernels[0].shape[1]
    context, query = np.asarray(context), np.asarray(query)
    H = context.shape[1]
    dags = all_dags(H, k)
    log_context = _dag_log_weights(kernels, context, init, dags)  # (G,)
    out = np.zeros((H, d))
    for h in range(H):
        candidates = np.repeat(query[None, :h + 1], d, axis=0)
        candidates[:, h] = np.arange(d)  # (d, h+1): the prefix with every value of x_h
        log_prefix = np.array([dag_sequence_log_likelihood(kernels, g, candidates, init) for g in dags])  # (G, d)
        joint = log_context[:, None] + log_prefix
        top = np.max(joint[np.isfinite(joint)])
        weights = np.where(np.isfinite(joint), np.exp(joint - top), 0.0).sum(axis=0)  # (d,)
        out[h] = weights / weights.sum()
    return out


def check_enumerable(d: int, n: int) -> None:
    """Raise unless d**n sequences can be enumerated (``numerics.enumeration.MAX_SEQUENCES``)."""
    if d**n > MAX_SEQUENCES:
        raise ValueError(f"d**n = {d**n} sequences exceed {MAX_SEQUENCES}; use a smaller d or H, or Monte Carlo")
