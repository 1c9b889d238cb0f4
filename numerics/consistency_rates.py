"""Theorem 2 (consistency): the error rate of the posterior's argmax against L, beside the Hoeffding bound
(``thm2-consistency``), from blocks of sampled contexts."""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from bma_verify.numerics.validation import check_kernel, check_parents, check_positive_int
from bma_verify.numerics.claim_sweeps import item_rng
from bma_verify.numerics.dpi_sweep import lemma4_terms
from bma_verify.numerics.information import pairwise_joint
from bma_verify.numerics.task import sample_chains

_THM2_TAG = 2

# ----------------------------------------------------------------------------------------------------------
# Theorem 2: error rate of the posterior's argmax against L


#: Contexts per block: the unit of randomness of the Theorem 2 sweep (chunks are whole blocks).
THM2_BLOCK = 500


def hoeffding_bound(L, gap, eps, exponent_factor: float = 1.0) -> np.ndarray:
    """exp(−L Δ² / (2 log²(1/ε))): Hoeffding's bound on P(score(pa) ≤ score(h')) (``thm2-consistency``).

    Each example contributes log π(x_h|x_pa) − log π(x_h|x_{h'}) ∈ [log ε, log(1/ε)], an interval of width
    2 log(1/ε), with mean Δ (the Lemma 4 gap). Broadcasts over L and gap. ``exponent_factor`` multiplies the
    exponent: a factor > 1 is a bound that does not follow from Hoeffding (the negative control of
    ``thm2-consistency`` uses 4, i.e. the bound to the fourth power).
    """
    if not 0.0 < eps < 1.0:
        raise ValueError(f"eps must be in (0, 1) (the kernel's smallest entry); got {eps}")
    gap = np.asarray(gap, dtype=np.float64)
    exponent = np.asarray(L, dtype=np.float64) * np.maximum(gap, 0.0) ** 2 / (2.0 * np.log(1.0 / eps) ** 2)
    return np.exp(-exponent_factor * exponent)


def thm2_counts_chunk(seed, kernel, parents, Ls, block_start: int, block_stop: int, init=None) -> dict:
    """Counts for context blocks ``block_start..block_stop-1`` (THM2_BLOCK contexts each) at every L in ``Ls``.

    For each L and each sampled context of L examples on the fixed tree, the BMA scores
    score(h, h') = Σ_l log π(x^l_h | x^l_{h'}) decide: ``pair_errors[i, p]`` counts score(pa) ≤ score(h') for
    pair p; ``argmax_errors[i, h]`` counts positions where some h' ≠ pa(h) scores at least score(pa) (the
    posterior's argmax is not uniquely the true parent).

    Returns
    -------
    dict with ``contexts`` (int), ``pair_errors`` (len(Ls), P) and ``argmax_errors`` (len(Ls), H) int arrays.
    """
    kernel = check_kernel(kernel)
    parents = check_parents(parents)
    H = parents.shape[0]
    log_kernel = np.log(kernel)
    h_idx, hp_idx = _candidate_pairs(parents)
    pair_errors = np.zeros((len(Ls), h_idx.size), dtype=np.int64)
    argmax_errors = np.zeros((len(Ls), H), dtype=np.int64)
    for i, L in enumerate(Ls):
        L = check_positive_int(int(L), "L", 1)
        for block in range(block_start, block_stop):
            rng = item_rng(seed, _THM2_TAG, i, block)
            x = sample_chains(kernel, parents, THM2_BLOCK * L, rng=rng, init=init).reshape(THM2_BLOCK, L, H)
            # scores[b, h, h'] = Σ_l log π(x^l_h | x^l_h')
            scores = log_kernel[x[:, :, None, :], x[:, :, :, None]].sum(1)  # (B, H, H)
            parent_score = scores[:, np.arange(1, H), parents[1:]]  # (B, H-1)
            lose = scores[:, h_idx, hp_idx] >= scores[:, h_idx, parents[h_idx]]  # (B, P)
            pair_errors[i] += lose.sum(0)
            masked = np.where(np.tril(np.ones((H, H), dtype=bool), -1), scores, -np.inf)  # (B, H, H)
            masked[:, np.arange(1, H), parents[1:]] = -np.inf
            argmax_errors[i, 1:] += (masked[:, 1:].max(-1) >= parent_score).sum(0)
    return {"contexts": (block_stop - block_start) * THM2_BLOCK, "pair_errors": pair_errors,
            "argmax_errors": argmax_errors}


def _candidate_pairs(parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h, h_prime = np.tril_indices(parents.shape[0], k=-1)
    keep = h_prime != parents[h]
    return h[keep], h_prime[keep]


def thm2_error_rates(seed, kernel, parents, Ls, n_blocks: int, init=None, chunk_blocks: int | None = None) -> dict:
    """Empirical P(score(pa) ≤ score(h')) per pair and argmax error per position against L, with Wilson
    intervals and the Hoeffding bound with the exact Lemma 4 gap Δ (``thm2-consistency``).

    The ``chunk_blocks`` argument only splits the work; the result is the same for any value.

    Returns
    -------
    dict: ``L`` (list), ``pairs`` (list of (h, h')), ``gap`` (P,), ``eps``, ``pair_rate`` / ``pair_low`` /
    ``pair_high`` / ``bound`` (len(L), P), ``argmax_rate`` (len(L), H), ``contexts``.
    """
    kernel = check_kernel(kernel)
    parents = check_parents(parents)
    n_blocks = check_positive_int(n_blocks, "n_blocks", 1)
    chunk_blocks = n_blocks if chunk_blocks is None else check_positive_int(chunk_blocks, "chunk_blocks", 1)
    parts = [thm2_counts_chunk(seed, kernel, parents, Ls, b, min(b + chunk_blocks, n_blocks), init)
             for b in range(0, n_blocks, chunk_blocks)]
    contexts = sum(p["contexts"] for p in parts)
    pair_errors = sum(p["pair_errors"] for p in parts)
    argmax_errors = sum(p["argmax_errors"] for p in parts)
    h_idx, hp_idx = _candidate_pairs(parents)
    gap = np.array([
        lemma4_terms(kernel, pairwise_joint(kernel, parents, int(parents[h]), int(h), init),
                     pairwise_joint(kernel, parents, int(hp), int(h), init))["lhs"]
        for h, hp in zip(h_idx, hp_idx)])
    eps = float(kernel.min())
    low, high = wilson_interval(pair_errors, contexts)
    return {"L": [int(L) for L in Ls], "pairs": [(int(a), int(b)) for a, b in zip(h_idx, hp_idx)], "gap": gap,
            "eps": eps, "pair_rate": pair_errors / contexts, "pair_low": low, "pair_high": high,
            "bound": hoeffding_bound(np.asarray(Ls)[:, None], gap[None, :], eps),
            "argmax_rate": argmax_errors / contexts, "contexts": contexts}


def wilson_interval(successes, trials: int, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for a binomial proportion (valid near 0, unlike the normal interval)."""
    z = float(ndtri(0.5 + level / 2.0))
    p = np.asarray(successes, dtype=np.float64) / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * np.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
