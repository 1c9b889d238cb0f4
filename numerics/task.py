"""The discrete task: kernels, random recursive trees, chains and in-context batches (docs/claims.md, "The task")."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.linalg import lapack

from bma_verify.numerics.validation import (check_init, check_kernel, check_parents, check_positive_int, check_rng)


def random_kernel(d: int, *, alpha: float = 1.0, eps: float = 0.0, rng: np.random.Generator) -> np.ndarray:
    """A random transition kernel with rows Dirichlet(α·1), mixed so that every entry is at least ``eps``.

    Parameters
    ----------
    d : int
        Number of states, d >= 2.
    alpha : float
        Dirichlet concentration (> 0); small α gives peaked rows (informative kernels).
    eps : float
        Entrywise lower bound, 0 <= eps <= 1/d: the kernel is (1 − d·eps)·P + eps.
    rng : numpy.random.Generator

    Returns
    -------
    (d, d) float64, ``kernel[i, j] = π(j | i)``; rows sum to one.
    """
    d = check_positive_int(d, "d", minimum=2)
    if not (np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be a positive finite Dirichlet concentration, got {alpha!r}")
    if not (np.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be a non-negative lower bound, got {eps!r}")
    if d * eps > 1 + 1e-12:
        raise ValueError(f"eps must satisfy d*eps <= 1 (rows must still sum to 1); got d*eps = {d * eps:.6g}")
    rng = check_rng(rng)
    P = rng.dirichlet(np.full(d, float(alpha)), size=d)  # (d, d)
    kernel = (1.0 - d * eps) * P + eps
    return kernel / kernel.sum(axis=1, keepdims=True)  # remove rounding drift


def stationary_distribution(kernel) -> np.ndarray:
    """The stationary law μ with μ π = μ.

    Solved as the square system (πᵀ − I) μ = 0 with its last equation replaced by Σ μ = 1 (one LU factorisation,
    ~⅔ d³ operations; the least-squares solve of the stacked (d + 1) × d system it replaced took ~10x longer at
    d = 2000 and gives the same law within rounding). For a reducible kernel the stationary law is not unique, the
    system is singular, and a ``ValueError`` says so.

    Returns
    -------
    (d,) float64 probability vector.
    """
    return stationary_distribution_unchecked(check_kernel(kernel, single=True))


def stationary_distribution_unchecked(kernel: np.ndarray) -> np.ndarray:
    """:func:`stationary_distribution` of a (d, d) kernel already checked by ``check_kernel``: it checks nothing."""
    d = kernel.shape[0]
    A = kernel.T - np.eye(d)
    A[-1] = 1.0  # the d equations of μπ = μ sum to 0 = 0: one is redundant, normalisation takes its place
    b = np.zeros(d)
    b[-1] = 1.0
    lu, piv, info = lapack.dgetrf(A)
    # singular to working precision, in the sense of least squares' rank (σ_min ≤ d·eps·σ_max); the 1-norm
    # reciprocal condition estimate is within a factor d of σ_min/σ_max
    if info != 0 or lapack.dgecon(lu, np.abs(A).sum(0).max(), norm="1")[0] <= d * np.finfo(float).eps:
        raise ValueError("kernel has no unique stationary law (it is reducible); pass init explicitly")
    mu = lapack.dgetrs(lu, piv, b)[0]
    mu = np.clip(mu, 0.0, None)
    return mu / mu.sum()


def random_parents(H: int, *, rng: np.random.Generator) -> np.ndarray:
    """A random recursive tree: parents[0] = -1 and parents[h] ~ Uniform{0, ..., h-1} independently.

    Returns
    -------
    (H,) int64.
    """
    H = check_positive_int(H, "H", minimum=2)
    rng = check_rng(rng)
    parents = np.empty(H, dtype=np.int64)
    parents[0] = -1
    parents[1:] = rng.integers(0, np.arange(1, H))
    return parents


def random_tree_instance(ranges: dict, *, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kernel, parents, μ₀) of a sweep: d and H uniform in ``ranges["d"]``, ``ranges["H"]`` (inclusive), π with
    Dirichlet(1) rows mixed to min π = ε, d·ε uniform in ``ranges["eps_times_d"]``, a random recursive tree and a
    Dirichlet(1) μ₀ (not stationary in general)."""
    rng = check_rng(rng)
    d = int(rng.integers(ranges["d"][0], ranges["d"][1] + 1))
    H = int(rng.integers(ranges["H"][0], ranges["H"][1] + 1))
    kernel = random_kernel(d, eps=float(rng.uniform(*ranges["eps_times_d"])) / d, rng=rng)
    parents = random_parents(H, rng=rng)
    return kernel, parents, rng.dirichlet(np.ones(d))


def flat_cdf(kernel: np.ndarray) -> np.ndarray:
    """Row CDFs of a checked (d, d) kernel laid end to end, row i shifted by i, for one ``searchsorted`` over all
    parent states: the (d·d,) table :func:`draw_children` draws from."""
    d = kernel.shape[0]
    cdf = np.cumsum(kernel, axis=1)
    cdf[:, -1] = 1.0  # the last entry is exactly one, so a uniform in [0, 1) never falls past its row
    return (cdf + np.arange(d)[:, None]).ravel()


#: Beyond this many bytes of row CDFs, the keys of a draw are searched in sorted order: the binary searches then walk
#: the table in order instead of missing the cache at random (d = 2000, 20 000 draws: 24 ms unsorted, 7 ms sorted;
#: d = 5, 10^6 draws: sorting would cost 5x the search).
SORTED_SEARCH_BYTES = 2**20


def draw_children(cdf_table: np.ndarray, d: int, parent_tokens: np.ndarray, u: np.ndarray) -> np.ndarray:
    """x ~ π(· | parent) by inversion: the first j with cdf[parent, j] > u, for ``cdf_table`` = :func:`flat_cdf` of
    π and uniforms ``u`` in [0, 1) shaped like ``parent_tokens``. Int64 tokens, shaped like ``parent_tokens``."""
    keys = parent_tokens + u
    if cdf_table.nbytes <= SORTED_SEARCH_BYTES:
        idx = np.searchsorted(cdf_table, keys, side="right")
    else:  # the same indices, found in the order of the keys
        flat_keys = keys.ravel()
        order = np.argsort(flat_keys)
        idx = np.empty(flat_keys.size, dtype=np.int64)
        idx[order] = np.searchsorted(cdf_table, flat_keys[order], side="right")
        idx = idx.reshape(keys.shape)
    return np.minimum(idx - parent_tokens * d, d - 1)


def draw_roots(init: np.ndarray, u: np.ndarray) -> np.ndarray:
    """x_0 ~ ``init`` (a checked (d,) law) by inversion of the uniforms ``u`` in [0, 1); tokens shaped like ``u``."""
    cdf = np.cumsum(init)
    cdf[-1] = 1.0
    return np.minimum(np.searchsorted(cdf, u, side="right"), init.size - 1)


def sample_chains(kernel, parents, n: int, *, rng: np.random.Generator, init=None) -> np.ndarray:
    """n independent chains on one tree: x_0 ~ init, x_h ~ π(· | x_{parents[h]}).

    Parameters
    ----------
    kernel : (d, d)
    parents : (H,) int tree
    n : int >= 0 chains
    rng : numpy.random.Generator
    init : (d,) or None
        Law of x_0; None means the stationary law of the kernel.

    Returns
    -------
    (n, H) int64 tokens (a Fortran-ordered view: each position is stored contiguously, which is how
    the sampler fills it).
    """
    kernel = check_kernel(kernel, single=True)
    parents = check_parents(parents, single=True)
    n = check_positive_int(n, "n", minimum=0)
    rng = check_rng(rng)
    init = stationary_distribution_unchecked(kernel) if init is None else check_init(init, kernel.shape[0])
    return sample_chains_unchecked(kernel, parents, n, rng, init)


def sample_chains_unchecked(kernel: np.ndarray, parents: np.ndarray, n: int, rng: np.random.Generator,
                   init: np.ndarray) -> np.ndarray:
    """:func:`sample_chains` on arrays already checked (``init`` a law, not None): it checks nothing."""
    d, H = kernel.shape[0], parents.shape[0]
    u = rng.random((H, n))  # one uniform per token, position-major so each position is a contiguous draw
    x = np.empty((H, n), dtype=np.int64)  # position-major: parent and child rows are contiguous
    x[0] = draw_roots(init, u[0])
    flat = flat_cdf(kernel)
    for h in range(1, H):
        x[h] = draw_children(flat, d, x[parents[h]], u[h])
    return x.T


class TaskBatch(NamedTuple):
    """A batch of in-context tasks: each of the B contexts has its own tree.

    parents : (B, H) int64
    context : (B, L, H) int64, the L in-context examples
    query : (B, H) int64, example L+1
    """

    parents: np.ndarray
    context: np.ndarray
    query: np.ndarray


def sample_task(kernel, n_contexts: int, L: int, H: int, *, rng: np.random.Generator, init=None) -> TaskBatch:
    """Sample ``n_contexts`` tasks: a random tree each, then L + 1 examples on that tree.

    Parameters
    ----------
    kernel : (d, d), fixed for the batch
    n_contexts : int >= 1
    L : int >= 0 in-context examples (the query is one more example on the same tree)
    H : int >= 2 positions
    rng : numpy.random.Generator
    init : (d,) or None (stationary)

    Returns
    -------
    TaskBatch(parents (B, H), context (B, L, H), query (B, H)).
    """
    kernel = check_kernel(kernel, single=True)
    B = check_positive_int(n_contexts, "n_contexts", minimum=1)
    L = check_positive_int(L, "L", minimum=0)
    H = check_positive_int(H, "H", minimum=2)
    rng = check_rng(rng)
    d = kernel.shape[0]
    init = stationary_distribution_unchecked(kernel) if init is None else check_init(init, d)
    parents = np.empty((B, H), dtype=np.int64)
    parents[:, 0] = -1
    parents[:, 1:] = rng.integers(0, np.arange(1, H), size=(B, H - 1))
    u = rng.random((H, B, L + 1))
    x = np.empty((B, L + 1, H), dtype=np.int64)
    x[:, :, 0] = draw_roots(init, u[0])
    flat = flat_cdf(kernel)
    rows = np.arange(B)
    for h in range(1, H):
        parent_tokens = x[rows, :, parents[:, h]]  # (B, L+1)
        x[:, :, h] = draw_children(flat, d, parent_tokens, u[h])
    return TaskBatch(parents=parents, context=x[:, :L, :], query=x[:, L, :])
