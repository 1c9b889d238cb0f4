"""Exact pairwise laws on the tree and the information measures of Lemma 3 and Theorem 3 (nats).

Claim ids served: ``lemma3-strict-dpi``, ``lemma4-loglik-gap``, ``thm3-init-gradient``.
"""
from __future__ import annotations

import numpy as np
from scipy.special import entr, rel_entr

from bma_verify.numerics.validation import check_distribution, check_init, check_joint, check_kernel, check_parents
from bma_verify.numerics.task import stationary_distribution, stationary_distribution_unchecked


def depths(parents) -> np.ndarray:
    """Depth of every position in the tree (root = 0). (H,) int64."""
    return depths_unchecked(check_parents(parents, single=True))


def depths_unchecked(parents: np.ndarray) -> np.ndarray:
    """:func:`depths` of one tree already checked by ``check_parents``: it checks nothing."""
    depth = np.zeros(parents.shape[0], dtype=np.int64)
    for h in range(1, parents.shape[0]):  # parents[h] < h, so its depth is already known
        depth[h] = depth[parents[h]] + 1
    return depth


def lowest_common_ancestor(parents, i: int, j: int) -> int:
    """The deepest position that is an ancestor of both i and j (a position is its own ancestor)."""
    parents = check_parents(parents)
    _check_positions(parents, i, j)
    return _lowest_common_ancestor(parents, i, j)


def _check_positions(parents: np.ndarray, i: int, j: int) -> None:
    H = parents.shape[-1]
    for name, v in (("i", i), ("j", j)):
        if not (0 <= v < H):
            raise ValueError(f"{name} must be a position in 0..{H - 1}, got {v}")


def _lowest_common_ancestor(parents: np.ndarray, i: int, j: int) -> int:
    ancestors_i = set()
    a = i
    while a != -1:
        ancestors_i.add(a)
        a = int(parents[a])
    b = j
    while b not in ancestors_i:
        b = int(parents[b])
    return b


def marginal(kernel, parents, i: int, init=None) -> np.ndarray:
    """Exact law of x_i: μ₀ π^{depth(i)}. (d,)"""
    kernel = check_kernel(kernel)
    d = kernel.shape[0]
    init = stationary_distribution(kernel) if init is None else check_init(init, d)
    parents = check_parents(parents, single=True)
    if not (0 <= i < parents.shape[0]):
        raise ValueError(f"i must be a position in 0..{parents.shape[0] - 1}, got {i}")
    return marginal_unchecked(kernel, parents, i, init)


def marginal_unchecked(kernel: np.ndarray, parents: np.ndarray, i: int, init: np.ndarray) -> np.ndarray:
    """:func:`marginal` on arrays already checked (one tree, ``init`` a law): it checks nothing."""
    return init @ np.linalg.matrix_power(kernel, int(depths_unchecked(parents)[i]))


def pairwise_joint(kernel, parents, i: int, j: int, init=None) -> np.ndarray:
    """Exact joint law P(x_i = a, x_j = b) on the tree.

    With c the lowest common ancestor of i and j, x_i and x_j are independent given x_c, reached through
    depth(i) − depth(c) and depth(j) − depth(c) applications of the kernel:
    P = (π^{a})ᵀ diag(μ₀ π^{depth(c)}) π^{b}.

    Parameters
    ----------
    kernel : (d, d)
    parents : (H,) tree
    i, j : positions (any order; i == j gives diag of the marginal)
    init : (d,) law of x_0; None = stationary

    Returns
    -------
    (d, d) float64, rows indexed by x_i, columns by x_j.
    """
    kernel = check_kernel(kernel, single=True)
    parents = check_parents(parents)
    d = kernel.shape[0]
    init = stationary_distribution_unchecked(kernel) if init is None else check_init(init, d)
    _check_positions(parents, i, j)
    if parents.ndim != 1:
        raise ValueError(f"parents must be one tree of shape (H,), got shape {parents.shape}")
    return pairwise_joint_unchecked(kernel, parents, i, j, init)


def pairwise_joint_unchecked(kernel: np.ndarray, parents: np.ndarray, i: int, j: int, init: np.ndarray) -> np.ndarray:
    """:func:`pairwise_joint` on arrays already checked (one tree, positions in range, ``init`` a law): it checks
    nothing."""
    c = _lowest_common_ancestor(parents, i, j)
    depth = depths_unchecked(parents)
    law_c = init @ np.linalg.matrix_power(kernel, int(depth[c]))  # (d,)
    to_i = np.linalg.matrix_power(kernel, int(depth[i] - depth[c]))  # (d, d): x_c -> x_i
    to_j = np.linalg.matrix_power(kernel, int(depth[j] - depth[c]))  # (d, d): x_c -> x_j
    return to_i.T @ (law_c[:, None] * to_j)


def entropy(p) -> float | np.ndarray:
    """Shannon entropy −Σ p log p in nats (0 log 0 = 0), over the last axis."""
    p = check_distribution(p, "p")
    H = entr(p).sum(axis=-1)
    return float(H) if np.ndim(H) == 0 else H


def _marginals(joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return joint.sum(axis=-1), joint.sum(axis=-2)


def mutual_information(joint) -> float | np.ndarray:
    """I(X; Y) = Σ P log P / (p_x p_y) in nats, from a joint P[x, y] (batched over leading axes).

    ``rel_entr`` defines 0·log(0/q) = 0; P > 0 never meets p_x p_y = 0 since P ≤ each marginal.
    """
    joint = check_joint(joint)
    px, py = _marginals(joint)
    value = rel_entr(joint, px[..., :, None] * py[..., None, :]).sum(axis=(-2, -1))
    value = np.maximum(value, 0.0)  # rounding can give −1e-17 for independent laws
    return float(value) if np.ndim(value) == 0 else value


def chi2_mutual_information(joint) -> float | np.ndarray:
    """I_χ²(X; Y) = Σ P² / (p_x p_y) − 1 (nats-free; χ² divergence of P from p_x ⊗ p_y).

    Cells with p_x p_y = 0 carry P = 0 and contribute 0 (the 0²/0 = 0 convention of the χ² divergence).
    """
    joint = check_joint(joint)
    px, py = _marginals(joint)
    product = px[..., :, None] * py[..., None, :]
    ratio = np.divide(joint**2, product, out=np.zeros_like(joint), where=product > 0)
    value = np.maximum(ratio.sum(axis=(-2, -1)) - 1.0, 0.0)
    return float(value) if np.ndim(value) == 0 else value


def dobrushin_coefficient(kernel) -> float | np.ndarray:
    """δ(K) = max_{y, y'} TV(K(·|y), K(·|y')) = max ½ Σ_z |K(z|y) − K(z|y')| (batched over leading axes)."""
    kernel = check_kernel(kernel)
    diff = np.abs(kernel[..., :, None, :] - kernel[..., None, :, :]).sum(axis=-1)  # (..., d, d)
    value = 0.5 * diff.max(axis=(-2, -1))
    return float(value) if np.ndim(value) == 0 else value
