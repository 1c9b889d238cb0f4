"""Contraction coefficients of channels: the candidate α of ``lemma3-strict-dpi``.

For an input law P on {0..m-1} and a channel K (rows = inputs, K[x, y] = K(y | x)):

- η_χ²(P, K) = (second singular value of diag(√P) K diag(1/√(PK)))², the squared maximal correlation of
  the joint P(x) K(y|x);
- η_KL(P, K) = sup_{Q ≠ P} D(QK ‖ PK) / D(Q ‖ P), equivalently sup over U − X − Y of I(U; Y) / I(U; X);
- δ(K) = max_{x, x'} TV(K(·|x), K(·|x')), the Dobrushin coefficient (η_TV);
- the Doeblin bound 1 − d·min K (for a square channel) ≥ δ(K).

They are ordered η_χ²(P, K) ≤ η_KL(P, K) ≤ δ(K) ≤ 1 − d·min K. Every function broadcasts over leading axes.
"""
from __future__ import annotations

import numpy as np
from scipy.special import rel_entr, xlogy

from bma_verify.numerics.validation import check_kernel

_SUPPORT_TOL = 1e-300


def _as_channel(channel, name: str = "channel") -> np.ndarray:
    """A row-stochastic array (..., m, k): nonnegative, finite, rows summing to 1."""
    channel = np.asarray(channel, dtype=np.float64)
    if channel.ndim < 2 or channel.shape[-1] < 1 or channel.shape[-2] < 1:
        raise ValueError(f"{name} must be a row-stochastic array of shape (..., m, k); got shape {channel.shape}")
    if not np.all(np.isfinite(channel)) or np.any(channel < 0):
        raise ValueError(f"{name} must have finite nonnegative entries")
    if not np.allclose(channel.sum(-1), 1.0, atol=1e-9):
        raise ValueError(f"{name} must have rows summing to 1 (row-stochastic)")
    return channel


def _as_law(law, m: int, name: str = "input_law") -> np.ndarray:
    law = np.asarray(law, dtype=np.float64)
    if law.shape[-1:] != (m,) or not np.all(np.isfinite(law)) or np.any(law < 0):
        raise ValueError(f"{name} must be a probability vector of length {m} (nonnegative, finite)")
    if not np.allclose(law.sum(-1), 1.0, atol=1e-9):
        raise ValueError(f"{name} must sum to 1")
    return law


def dobrushin_coefficients(channel) -> np.ndarray:
    """δ(K) = max_{x,x'} ½ Σ_y |K(y|x) − K(y|x')| for a batch of channels.

    Parameters
    ----------
    channel : (..., m, k) row-stochastic.

    Returns
    -------
    (...,) float64 in [0, 1]. (``numerics.dobrushin_coefficient`` is the single-kernel version.)
    """
    return dobrushin_coefficients_unchecked(_as_channel(channel))


def dobrushin_coefficients_unchecked(channel: np.ndarray) -> np.ndarray:
    """:func:`dobrushin_coefficients` of channels already checked (row-stochastic): it checks nothing."""
    diffs = 0.5 * np.abs(channel[..., :, None, :] - channel[..., None, :, :]).sum(-1)  # (..., m, m)
    return diffs.max(axis=(-1, -2))


def doeblin_bound(kernel) -> float:
    """1 − d·min π, the Doeblin upper bound on δ(π) for a kernel with π ≥ ε (``lemma3-strict-dpi``)."""
    kernel = check_kernel(kernel)
    return float(1.0 - kernel.shape[0] * kernel.min())


def normalised_joint(input_law, channel) -> np.ndarray:
    """B = diag(√P) K diag(1/√(PK)) restricted to positive output mass; its top singular value is 1.

    Returns
    -------
    (..., m, k) float64 (columns with zero output mass are zero).
    """
    channel = _as_channel(channel)
    return _normalised_joint(_as_law(input_law, channel.shape[-2]), channel)


def _normalised_joint(input_law: np.ndarray, channel: np.ndarray) -> np.ndarray:
    output = np.einsum("...x,...xy->...y", input_law, channel)  # (..., k)
    inv_sqrt_out = np.where(output > _SUPPORT_TOL, 1.0 / np.sqrt(np.maximum(output, _SUPPORT_TOL)), 0.0)
    return np.sqrt(input_law)[..., :, None] * channel * inv_sqrt_out[..., None, :]  # (..., m, k)


def chi2_contraction(input_law, channel) -> np.ndarray:
    """η_χ²(P, K): the squared second singular value of the normalised joint (squared maximal correlation).

    Parameters
    ----------
    input_law : (..., m) law P of the channel input.
    channel : (..., m, k) row-stochastic K.

    Returns
    -------
    (...,) float64 in [0, 1]; 0 when the input or the output has a single state.
    """
    channel = _as_channel(channel)
    return chi2_contraction_unchecked(_as_law(input_law, channel.shape[-2]), channel)


def chi2_contraction_unchecked(input_law: np.ndarray, channel: np.ndarray) -> np.ndarray:
    """:func:`chi2_contraction` of a law and channels already checked: it checks nothing."""
    B = _normalised_joint(input_law, channel)  # (..., m, k)
    if min(B.shape[-2:]) < 2:
        return np.zeros(B.shape[:-2])
    singular = np.linalg.svd(B, compute_uv=False)  # (..., min(m, k)), descending
    return np.clip(singular[..., 1] ** 2, 0.0, 1.0)


def _relative_divergence_terms(t: np.ndarray) -> np.ndarray:
    """f(t) = (1+t) log(1+t) − t ≥ 0 elementwise, so that D(Q ‖ P) = Σ P·f(Q/P − 1) without cancellation.

    For small |t| f is taken from its series Σ_{k≥2} (−t)^k / (k(k−1)) (8 terms are exact to double precision
    for |t| < 0.05), so the divergence keeps full relative precision as Q approaches P, where the η_χ² limit
    of the contraction ratio lives.
    """
    small = np.abs(t) < 0.05
    ts = np.where(small, t, 0.0)
    series = np.zeros_like(t)
    for k in range(9, 1, -1):
        series += (-ts) ** k / (k * (k - 1))
    direct = xlogy(1.0 + t, 1.0 + t) - t
    return np.where(small, series, direct)


def _contraction_ratio(theta, p, K):
    """Ratio D(QK ‖ PK)/D(Q ‖ P) and its gradient in θ for tilted laws Q ∝ P·exp(θ) (batched).

    Shapes: theta (N, S, m), p (N, 1, m), K (N, 1, m, k). Returns ratio (N, S) and gradient (N, S, m).
    With q = Q: ∂D/∂q = log(q/p) and ∂D(QK‖PK)/∂q = K log(qK/pK) (the +1 terms cancel on the simplex), and
    ∂q/∂θ = diag(q) − q qᵀ.
    """
    theta = theta - theta.max(-1, keepdims=True)
    weights = p * np.exp(theta)  # (N, S, m)
    z = weights.sum(-1, keepdims=True)
    q = weights / z
    # Q/P − 1 = Σ_j q_j expm1(θ_i − θ_j): no cancellation when the tilt is small (Q near P)
    t = (q[..., None, :] * np.expm1(theta[..., :, None] - theta[..., None, :])).sum(-1)  # (N, S, m)
    t = np.where(p > 0, t, 0.0)
    out = (p[..., :, None] * K).sum(-2)  # (N, 1, k) law of the output under P
    t_out = np.divide(((p * t)[..., :, None] * K).sum(-2), out, out=np.zeros_like(out * t[..., :1]),
                      where=out > 0)  # (N, S, k)
    denominator = (p * _relative_divergence_terms(t)).sum(-1)  # (N, S)
    numerator = (out * _relative_divergence_terms(t_out)).sum(-1)  # (N, S)
    safe = denominator > 1e-14  # below this the rounding of t (~1e-16) would dominate the ratio
    ratio = np.where(safe, numerator / np.where(safe, denominator, 1.0), 0.0)
    # the gradient only steers the search (the value above is exact); at Q or QK with a zero entry the
    # logarithms are −∞, so non-finite components are zeroed instead of propagated
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        d_den = np.log1p(np.where(p > 0, t, 0.0))  # (N, S, m)
        d_num = (K * np.log1p(t_out)[..., None, :]).sum(-1)  # (N, S, m)
        d_ratio = (d_num - ratio[..., None] * d_den) / np.where(safe, denominator, 1.0)[..., None]
        gradient = q * (d_ratio - (q * d_ratio).sum(-1, keepdims=True))  # (N, S, m)
    gradient = np.where(safe[..., None] & np.isfinite(gradient), gradient, 0.0)
    return ratio, gradient


def kl_contraction_batch(input_laws, channels, seeds=None, *, steps: int = 300) -> np.ndarray:
    """η_KL(P, K) = sup_{Q ≠ P} D(QK ‖ PK) / D(Q ‖ P) for a batch of (P, K), computed numerically.

    Q ranges over the support of P (elsewhere D(Q ‖ P) = ∞), parametrised as the tilt Q ∝ P·exp(θ); Adam
    ascends the ratio (analytic gradient, all starts and all channels at once, each independently, so a
    channel's value does not depend on the rest of the batch) from: every point mass of the support (also
    evaluated exactly), Q = P tilted along ± the second left singular vector of the normalised joint at three
    scales (the ratio tends to η_χ² as the tilt vanishes), 8 fixed Dirichlet(1) draws, and the caller's
    ``seeds`` (laws Q; e.g. the conditional laws P(x | u) of a known U − X − Y chain, which makes the result at
    least that chain's I(U; Y)/I(U; X)). The best ratio met at any step is returned: the ratio at an actual Q
    (both divergences computed from Q/P − 1 without cancellation), hence a lower bound on η_KL up to rounding,
    and at least η_χ²; the certified upper bound is the Dobrushin coefficient of K.

    Parameters
    ----------
    input_laws : (N, m) laws P.
    channels : (N, m, k) row-stochastic K.
    seeds : (N, S0, m) extra starting laws, or None.
    steps : Adam steps.

    Returns
    -------
    (N,) float64.
    """
    channels = _as_channel(channels)
    if channels.ndim != 3:
        raise ValueError(f"channels must have shape (N, m, k); got {channels.shape}")
    p = _as_law(input_laws, channels.shape[-2])
    if p.shape != channels.shape[:2]:
        raise ValueError(f"input_laws must have shape {channels.shape[:2]}; got {p.shape}")
    N, m, _ = channels.shape
    p = np.where(p > _SUPPORT_TOL, p, 0.0)
    p = p / p.sum(-1, keepdims=True)
    support = p > 0  # (N, m)

    # exact values at the point masses δ_i of the support: D(K_i ‖ PK) / log(1/p_i)
    out = np.einsum("nx,nxy->ny", p, channels)  # (N, k)
    vertex_num = rel_entr(channels, out[:, None, :]).sum(-1)  # (N, m)
    with np.errstate(divide="ignore"):
        vertex_den = -np.log(np.where(support, p, 1.0))
    vertex = np.where(support & (vertex_den > 1e-12), vertex_num / np.where(vertex_den > 1e-12, vertex_den, 1.0), 0.0)
    best = np.where(support.sum(-1) >= 2, vertex.max(-1), 0.0)  # (N,)
    best = np.maximum(best, chi2_contraction_unchecked(p, channels))

    u = np.linalg.svd(_normalised_joint(p, channels))[0]  # (N, m, m)
    direction = np.divide(u[..., 1], np.sqrt(p), out=np.zeros_like(p), where=support)  # (N, m)
    direction /= np.maximum(np.abs(direction).max(-1, keepdims=True), 1e-300)
    thetas = [4.0 * np.eye(m)[None].repeat(N, 0)]  # (N, m, m): towards each point mass
    thetas += [s * direction[:, None, :] for s in (1e-3, -1e-3, 0.3, -0.3, 1.0, -1.0)]
    fixed = np.random.default_rng(0).dirichlet(np.ones(m), size=8)  # the same 8 starts for every channel
    thetas.append(np.log(np.divide(fixed[None], p[:, None, :], out=np.ones((N, 8, m)), where=support[:, None, :])))
    if seeds is not None:
        seeds = np.asarray(seeds, dtype=np.float64)
        thetas.append(np.log(np.clip(np.divide(seeds, p[:, None, :], out=np.ones_like(seeds),
                                               where=support[:, None, :]), 1e-300, None)))
    theta = np.concatenate(thetas, axis=1)  # (N, S, m)
    theta = np.where(support[:, None, :], np.clip(theta, -50.0, 50.0), 0.0)
    p_b, K_b = p[:, None, :], channels[:, None, :, :]
    m1, m2 = np.zeros_like(theta), np.zeros_like(theta)
    lr, b1, b2 = 0.05, 0.9, 0.999
    for step in range(1, steps + 1):
        ratio, gradient = _contraction_ratio(theta, p_b, K_b)
        best = np.maximum(best, np.where(support.sum(-1) >= 2, ratio.max(-1), 0.0))
        m1 = b1 * m1 + (1 - b1) * gradient
        m2 = b2 * m2 + (1 - b2) * gradient**2
        theta = theta + lr * (m1 / (1 - b1**step)) / (np.sqrt(m2 / (1 - b2**step)) + 1e-12)
    ratio, _ = _contraction_ratio(theta, p_b, K_b)
    best = np.maximum(best, np.where(support.sum(-1) >= 2, ratio.max(-1), 0.0))
    return np.minimum(best, 1.0)


def kl_contraction(input_law, channel, *, seeds=(), steps: int = 300) -> float:
    """η_KL(P, K) for one input law (m,) and channel (m, k) (``lemma3-strict-dpi``); see
    :func:`kl_contraction_batch` for the method and the guarantees. ``seeds``: extra starting laws Q."""
    channel = _as_channel(channel)
    if channel.ndim != 2:
        raise ValueError(f"channel must be a single (m, k) channel; got shape {channel.shape}")
    seeds = np.asarray(list(seeds), dtype=np.float64).reshape(1, -1, channel.shape[0]) if len(seeds) else None
    return float(kl_contraction_batch(np.asarray(input_law, dtype=np.float64)[None], channel[None], seeds,
                                      steps=steps)[0])
