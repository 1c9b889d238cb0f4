"""Brute-force references by enumeration: every tree, every sequence.

These functions do not use the factorisations that the fast code relies on (the posterior factorising over
positions, pairwise joints through the lowest common ancestor): they write down the full likelihood and sum.
They are the independent reference for ``bma-score-identity`` and for the exact checks of
``lemma3-strict-dpi`` and ``thm3-init-gradient``, and they refuse sizes where enumeration is impractical.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from bma_verify.numerics.validation import check_init, check_kernel, check_parents, check_positive_int, check_tokens
from bma_verify.numerics.task import stationary_distribution

MAX_TREES = 40_320  # (H-1)! trees; 8! = 40320, i.e. H <= 9
MAX_SEQUENCES = 2_000_000  # d^H sequences held in memory at once (int8 tokens, float64 weights)


def all_trees(H: int) -> np.ndarray:
    """Every recursive tree on H positions, as parent arrays.

    Parameters
    ----------
    H : int
        Number of positions (H >= 2).

    Returns
    -------
    (T, H) int64 array with T = (H-1)!; row t has ``parents[0] = -1`` and ``0 <= parents[h] < h``.
    """
    check_positive_int(H, "H", 2)
    count = math.factorial(H - 1)
    if count > MAX_TREES:
        raise ValueError(f"H must be at most 9 to enumerate trees ((H-1)! = {count} > {MAX_TREES}); got H={H}")
    choices = itertools.product(*[range(h) for h in range(1, H)])
    trees = np.array([(-1, *c) for c in choices], dtype=np.int64).reshape(count, H)  # (T, H)
    return trees


def all_sequences(d: int, H: int) -> np.ndarray:
    """Every token sequence of length H over d states, in lexicographic order.

    Returns
    -------
    (d**H, H) int8 array (int8 keeps the 2e6-row limit at a few tens of MB).
    """
    check_positive_int(d, "d", 2)
    check_positive_int(H, "H", 1)
    if d**H > MAX_SEQUENCES:
        raise ValueError(
            f"d**H must be at most {MAX_SEQUENCES} to enumerate sequences; got d={d}, H={H} (d**H = {d**H}). "
            "Use a smaller d or H, or the Monte Carlo method."
        )
    grids = np.indices((d,) * H, dtype=np.int8).reshape(H, -1)  # (H, d**H)
    return np.ascontiguousarray(grids.T)  # (d**H, H)


def sequence_log_likelihood(kernel, parents, sequences, init=None) -> np.ndarray:
    """log P(x_0..x_{H-1}) = log μ₀(x_0) + Σ_{h≥1} log π(x_h | x_pa(h)) for every row of ``sequences``.

    Parameters
    ----------
    kernel : (d, d) row-stochastic array.
    parents : (H,) parent array of a recursive tree.
    sequences : (..., H) int tokens.
    init : (d,) law of x_0, default the stationary law of ``kernel``.

    Returns
    -------
    (...,) float64, ``-inf`` where the sequence has probability zero.
    """
    kernel = check_kernel(kernel)
    d = kernel.shape[0]
    sequences = np.asarray(sequences)
    parents = check_parents(parents, H=sequences.shape[-1])
    init = stationary_distribution(kernel) if init is None else check_init(init, d)
    sequences = check_tokens(sequences, d, "sequences").astype(np.int64)
    return sequence_log_likelihood_unchecked(kernel, parents, sequences, init)


def sequence_log_likelihood_unchecked(kernel: np.ndarray, parents: np.ndarray, sequences: np.ndarray,
                             init: np.ndarray) -> np.ndarray:
    """:func:`sequence_log_likelihood` on arrays already checked (int tokens, ``init`` a law): it checks nothing."""
    with np.errstate(divide="ignore"):
        log_kernel = np.log(kernel)  # (d, d)
        total = np.log(init)[sequences[..., 0]]  # (...,)
    for h in range(1, sequences.shape[-1]):
        total = total + log_kernel[sequences[..., parents[h]], sequences[..., h]]
    return total


def sequence_distribution(kernel, parents, init=None) -> tuple[np.ndarray, np.ndarray]:
    """All d^H sequences of the tree model and their probabilities, by the full product formula.

    Returns
    -------
    sequences : (d**H, H) int8
    probabilities : (d**H,) float64, summing to 1.
    """
    kernel = check_kernel(kernel)
    parents = check_parents(parents)
    sequences = all_sequences(kernel.shape[0], parents.shape[0])
    if parents.shape[-1] != sequences.shape[-1]:  # a batch of trees: only one tree has a sequence law
        raise ValueError(f"parents must have length H = {sequences.shape[-1]} (matching the tokens), "
                         f"got {parents.shape[-1]}")
    init = _law_of_x0(kernel, init)
    log_probabilities = sequence_log_likelihood_unchecked(kernel, parents, sequences.astype(np.int64), init)
    probabilities = np.exp(log_probabilities)  # (d**H,)
    return sequences, probabilities


def _law_of_x0(kernel: np.ndarray, init) -> np.ndarray:
    """The validated law of x_0: ``init``, or the stationary law of ``kernel`` when None."""
    return stationary_distribution(kernel) if init is None else check_init(init, kernel.shape[0])


def brute_force_joint(kernel, parents, positions, init=None) -> np.ndarray:
    """Exact joint law of x at ``positions`` by summing the full likelihood over every sequence.

    The reference for :func:`numerics.pairwise_joint` and the batched joints of :mod:`numerics.claims`
    (``lemma3-strict-dpi``). Returns an array with one axis of length d per position.
    """
    sequences, probabilities = sequence_distribution(kernel, parents, init)
    d = np.asarray(kernel).shape[0]
    positions = [int(p) for p in positions]
    joint = np.zeros((d,) * len(positions))
    np.add.at(joint, tuple(sequences[:, p].astype(np.int64) for p in positions), probabilities)
    return joint


def brute_force_parent_posterior(kernel, context, init=None) -> np.ndarray:
    """P(pa(h) = h' | context) by Bayes' rule over every tree with the full likelihood (``bma-score-identity``).

    The prior is uniform over the (H-1)! recursive trees (equivalently, independent uniform parents); the
    likelihood of a tree is Π_l μ₀(x^l_0) Π_{h≥1} π(x^l_h | x^l_pa(h)) over the L context examples. The
    posterior over trees is normalised once, then marginalised to each position's parent. Nothing here uses
    the fact that the posterior factorises over positions, so agreement with :func:`numerics.parent_posterior`
    tests that factorisation.

    Parameters
    ----------
    kernel : (d, d) row-stochastic array.
    context : (L, H) int tokens, L >= 0 (L = 0 gives the uniform prior).
    init : (d,) law of x_0; it cancels in the posterior but is kept so the likelihood is the full one.

    Returns
    -------
    (H, H) float64: row h is the posterior over h' < h; entries with h' >= h and row 0 are zero.
    """
    kernel = check_kernel(kernel)
    context = np.asarray(context)
    if context.ndim != 2:
        raise ValueError(f"context must be an (L, H) token array; got shape {context.shape}")
    H = context.shape[1]
    trees = all_trees(H)  # (T, H)
    init = _law_of_x0(kernel, init)
    context = check_tokens(context, kernel.shape[0], "sequences")
    # log-likelihood of the L examples under each tree: sum over examples of the full sequence likelihood.
    log_like = np.zeros(trees.shape[0])
    for tree_index, tree in enumerate(trees):
        log_like[tree_index] = sequence_log_likelihood_unchecked(kernel, tree, context, init).sum()
    finite = np.isfinite(log_like)
    if not finite.any():
        raise ValueError("context must have positive probability under at least one tree for this kernel")
    weights = np.zeros_like(log_like)
    weights[finite] = np.exp(log_like[finite] - log_like[finite].max())
    weights /= weights.sum()  # (T,) posterior over whole trees
    posterior = np.zeros((H, H))
    for h in range(1, H):
        np.add.at(posterior[h], trees[:, h], weights)
    return posterior
