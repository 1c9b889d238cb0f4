"""The continuous (DS) task of claim ``prop2-ds-quadratic``: sampler, exact posterior, BMA and losses.

Model: x_0 ~ N(0, I_d) and x_h = ρ Aᵀ x_pa(h) + √(1−ρ²) η with η ~ N(0, I_d), A orthogonal (fixed for a run),
ρ ∈ (0, 1), and the same random recursive trees as the discrete task (pa(h) ~ U{0..h−1}). Every marginal is
N(0, I_d). Tokens are stored as row vectors, so ``Aᵀ x`` (column convention) is ``x @ A`` in code.

The exact posterior over pa(h) given L context examples uses the full Gaussian conditional likelihood with a
uniform prior over h' < h:

    score(h, h') = Σ_l log N(x^l_h; ρ Aᵀ x^l_{h'}, (1−ρ²) I)
                 = ρ/(1−ρ²) Σ_l x^{lᵀ}_{h'} A x^l_h − ρ²/(2(1−ρ²)) Σ_l ‖Aᵀ x^l_{h'}‖² + const(h).

The second (key-only, quadratic) term varies with h', which is why no bilinear score reproduces it.

Shapes: ``context`` (..., L, H, d), ``query`` (..., H, d), ``parents`` (..., H); attention and posterior
(..., H, H) with row h a distribution over h' < h (row 0 and entries h' >= h are zero), as in
``numerics.parent_posterior``.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp

from bma_verify.numerics.validation import check_parents, check_positive_int, check_rng
from bma_verify.numerics.bma import causal_log_softmax

_LOG_2PI = math.log(2.0 * math.pi)


# ----------------------------------------------------------------------------------------------- validation

def check_rho(rho, name: str = "rho") -> float:
    """Return ``rho`` as a float, or raise ValueError unless 0 < rho < 1 (finite)."""
    try:
        value = float(rho)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number in (0, 1), got {rho!r}") from None
    if not (0.0 < value < 1.0):
        raise ValueError(f"{name} must lie strictly between 0 and 1 (the DS correlation), got {rho!r}")
    return value


def check_orthogonal(A, name: str = "A", atol: float = 1e-8) -> np.ndarray:
    """Return ``A`` as a float64 (d, d) array, or raise ValueError unless it is finite and AᵀA = I."""
    arr = np.asarray(A, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] < 1:
        raise ValueError(f"{name} must be a square (d, d) orthogonal matrix, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN or inf entries)")
    err = float(np.max(np.abs(arr.T @ arr - np.eye(arr.shape[0]))))
    if err > atol:
        raise ValueError(f"{name} must be orthogonal (AᵀA = I); max |AᵀA − I| = {err:.3g}; "
                         "draw one with numerics.ds.random_orthogonal")
    return arr


def check_vectors(x, d: int, name: str, min_ndim: int = 2) -> np.ndarray:
    """Return ``x`` as float64 with last axis d and at least ``min_ndim`` axes; reject non-finite entries."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim < min_ndim or arr.shape[-1] != d:
        raise ValueError(f"{name} must have at least {min_ndim} axes and last axis of length d={d} "
                         f"(one R^d vector per token), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN or inf entries)")
    return arr


def _check_attention(attention, H: int, name: str = "attention") -> np.ndarray:
    arr = np.asarray(attention, dtype=np.float64)
    if arr.ndim < 2 or arr.shape[-2:] != (H, H):
        raise ValueError(f"{name} must have shape (..., H, H) with H={H}, got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and non-negative")
    return arr


def _check_model(A, rho) -> tuple[np.ndarray, float]:
    return check_orthogonal(A), check_rho(rho)


# ------------------------------------------------------------------------------------------------- sampling

class DSTaskBatch(NamedTuple):
    """A batch of DS contexts: every context has its own tree shared by its L context examples and query."""

    parents: np.ndarray  # (B, H) int64, parents[:, 0] = -1
    context: np.ndarray  # (B, L, H, d)
    query: np.ndarray  # (B, H, d)


def random_orthogonal(d: int, *, rng) -> np.ndarray:
    """A Haar-distributed orthogonal (d, d) matrix: QR of a Gaussian matrix with the signs of R fixed.

    Claim ``prop2-ds-quadratic``: A is drawn once per run from the run's Generator.
    """
    d = check_positive_int(d, "d", 1)
    rng = check_rng(rng)
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))  # sign fix makes the law Haar, not QR-algorithm dependent


def random_parent_trees(n: int, H: int, *, rng) -> np.ndarray:
    """(n, H) int64 independent random recursive trees: parents[:, 0] = -1, parents[:, h] ~ U{0..h-1}."""
    n = check_positive_int(n, "n", 1)
    H = check_positive_int(H, "H", 2)
    rng = check_rng(rng)
    h = np.arange(H)
    parents = np.floor(rng.random((n, H)) * h).astype(np.int64)  # (n, H); floor(u·h) ~ U{0..h-1}
    parents[:, 0] = -1
    return parents


def sample_ds_chains(A, rho, parents, n: int, *, rng) -> np.ndarray:
    """Sample examples of the DS model on trees ``parents``.

    Parameters
    ----------
    A : (d, d) orthogonal
    rho : float in (0, 1)
    parents : (H,) or (B, H) int
        One tree, or one tree per batch row.
    n : int
        Examples per tree.
    rng : numpy.random.Generator

    Returns
    -------
    (n, H, d) for one tree, (B, n, H, d) for a batch of trees.
    """
    A, rho = _check_model(A, rho)
    n = check_positive_int(n, "n", 1)
    rng = check_rng(rng)
    par = check_parents(parents)
    single = par.ndim == 1
    if par.ndim > 2:
        raise ValueError(f"parents must have shape (H,) or (B, H), got {par.shape}")
    par = par.reshape(-1, par.shape[-1])
    B, H = par.shape
    d = A.shape[0]
    x = np.empty((B, n, H, d))  # (B, n, H, d)
    noise = rng.standard_normal((B, n, H, d))
    x[:, :, 0] = noise[:, :, 0]  # x_0 ~ N(0, I)
    sigma = math.sqrt(1.0 - rho * rho)
    rows = np.arange(B)
    for h in range(1, H):
        pa = x[rows, :, par[:, h]]  # (B, n, d): each tree's parent of position h
        x[:, :, h] = rho * (pa @ A) + sigma * noise[:, :, h]  # row form of ρ Aᵀ x_pa + √(1−ρ²) η
    return x[0] if single else x


def sample_ds_task(A, rho, n_contexts: int, L: int, H: int, *, rng) -> DSTaskBatch:
    """``n_contexts`` contexts, each with its own random tree, L context examples and one query example."""
    n_contexts = check_positive_int(n_contexts, "n_contexts", 1)
    L = check_positive_int(L, "L", 0)
    rng = check_rng(rng)
    parents = random_parent_trees(n_contexts, H, rng=rng)
    x = sample_ds_chains(A, rho, parents, L + 1, rng=rng)  # (B, L+1, H, d)
    return DSTaskBatch(parents, x[:, :L], x[:, L])


# ------------------------------------------------------------------------------------------ exact posterior

def ds_log_likelihood_scores(A, rho, context) -> np.ndarray:
    """Full Gaussian conditional log-likelihood score(h, h') = Σ_l log N(x^l_h; ρAᵀx^l_{h'}, (1−ρ²)I).

    Returns (..., H, H) with −inf where h' >= h (row 0 is all −inf). Claim ``prop2-ds-quadratic``.
    """
    A, rho = _check_model(A, rho)
    x = check_vectors(context, A.shape[0], "context", min_ndim=3)
    *lead, L, H, d = x.shape
    var = 1.0 - rho * rho
    y = x @ A  # (..., L, H, d): Aᵀ x per token (row form)
    cross = np.einsum("...lhi,...lgi->...hg", x, y)  # (..., H, H): Σ_l x_hᵀ Aᵀ x_g
    sq_query = np.einsum("...lhi,...lhi->...h", x, x)  # (..., H): Σ_l ‖x_h‖²
    sq_key = np.einsum("...lgi,...lgi->...g", y, y)  # (..., H): Σ_l ‖Aᵀ x_g‖²
    sq_dist = sq_query[..., :, None] - 2.0 * rho * cross + rho * rho * sq_key[..., None, :]  # (..., H, H)
    scores = -0.5 * sq_dist / var - 0.5 * L * d * (_LOG_2PI + math.log(var))
    return np.where(np.tril(np.ones((H, H), dtype=bool), k=-1), scores, -np.inf)


def ds_score_terms(A, rho, context) -> tuple[np.ndarray, np.ndarray]:
    """The two h'-dependent parts of the exact score: (bilinear (..., H, H), key-only quadratic (..., H)).

    bilinear[h, h'] = ρ/(1−ρ²) Σ_l x^{lᵀ}_{h'} A x^l_h and quadratic[h'] = −ρ²/(2(1−ρ²)) Σ_l ‖Aᵀ x^l_{h'}‖²;
    the exact score is their sum plus a term that depends on h only (Proposition 2).
    """
    A, rho = _check_model(A, rho)
    x = check_vectors(context, A.shape[0], "context", min_ndim=3)
    var = 1.0 - rho * rho
    y = x @ A  # (..., L, H, d)
    bilinear = rho / var * np.einsum("...lhi,...lgi->...hg", x, y)  # (..., H, H)
    quadratic = -0.5 * rho * rho / var * np.einsum("...lgi,...lgi->...g", y, y)  # (..., H)
    return bilinear, quadratic


def ds_log_parent_posterior(A, rho, context) -> np.ndarray:
    """log P(pa(h) = h' | context), (..., H, H); −inf on row 0 and h' >= h (no underflow on sharp rows)."""
    return causal_log_softmax(ds_log_likelihood_scores(A, rho, context))


def ds_parent_posterior(A, rho, context) -> np.ndarray:
    """Exact DS posterior P(pa(h) = h' | context), (..., H, H), uniform prior over h' < h.

    Claim ``prop2-ds-quadratic``. With L = 0 examples the rows are uniform over h' < h. Batched: 10^4
    contexts at d=5, H=10, L=10 take well under a second.
    """
    return np.exp(ds_log_parent_posterior(A, rho, context))


# --------------------------------------------------------------------------------- predictive and losses

def ds_predictive_mean(attention, A, rho, query) -> np.ndarray:
    """Mean of the mixture Σ_{h'} attention[h, h'] N(ρAᵀx_{h'}, (1−ρ²)I): (..., H, d); row 0 = 0 (prior)."""
    A, rho = _check_model(A, rho)
    q = check_vectors(query, A.shape[0], "query")
    att = _check_attention(attention, q.shape[-2])
    return rho * (att @ q) @ A  # (..., H, d)


def ds_mixture_log_density(attention, A, rho, query) -> np.ndarray:
    """log Σ_{h'<h} attention[h, h'] N(x_h; ρAᵀx_{h'}, (1−ρ²)I) per position, (..., H); row 0: log N(x_0; 0, I).

    With ``attention = ds_parent_posterior(...)`` this is the exact BMA posterior-predictive log-density; with
    a one-hot attention on the true parents it is the oracle's.
    """
    A, rho = _check_model(A, rho)
    q = check_vectors(query, A.shape[0], "query")
    *lead, H, d = q.shape
    att = _check_attention(attention, H)
    var = 1.0 - rho * rho
    mean = rho * (q @ A)  # (..., H, d): the conditional mean given each candidate parent
    sq = np.sum((q[..., :, None, :] - mean[..., None, :, :]) ** 2, axis=-1)  # (..., H, H): ‖x_h − ρAᵀx_{h'}‖²
    log_comp = -0.5 * sq / var - 0.5 * d * (_LOG_2PI + math.log(var))  # (..., H, H)
    with np.errstate(divide="ignore"):
        log_att = np.log(att)
    out = np.empty(q.shape[:-1])
    out[..., 1:] = logsumexp(log_att[..., 1:, :] + log_comp[..., 1:, :], axis=-1)
    out[..., 0] = -0.5 * np.sum(q[..., 0, :] ** 2, axis=-1) - 0.5 * d * _LOG_2PI
    return out


def ds_predictive_log_density(A, rho, context, query) -> np.ndarray:
    """Exact BMA posterior-predictive log-density log p(x^{L+1}_h | context, x^{L+1}_{<h}), (..., H)."""
    return ds_mixture_log_density(ds_parent_posterior(A, rho, context), A, rho, query)


def ds_bma_mean(A, rho, context, query) -> np.ndarray:
    """Exact BMA posterior-predictive mean E[x^{L+1}_h | context, x^{L+1}_{<h}], (..., H, d)."""
    return ds_predictive_mean(ds_parent_posterior(A, rho, context), A, rho, query)


def one_hot_parents(parents) -> np.ndarray:
    """(..., H, H) attention putting all mass on the true parent (row 0 zero): the oracle's attention."""
    par = check_parents(parents)
    H = par.shape[-1]
    flat = par.reshape(-1, H)
    out = np.zeros(flat.shape + (H,))
    out[np.arange(flat.shape[0])[:, None], np.arange(1, H), flat[:, 1:]] = 1.0  # (n, H-1) index pairs
    return out.reshape(par.shape + (H,))


def squared_error(mean, query) -> float:
    """Mean over positions h >= 1 (and batch) of ‖x_h − mean_h‖² (the prediction loss of a point predictor)."""
    m = np.asarray(mean, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    if m.shape != q.shape:
        raise ValueError(f"mean must have the shape of query {q.shape}, got {m.shape}")
    return float(np.mean(np.sum((q[..., 1:, :] - m[..., 1:, :]) ** 2, axis=-1)))


def gaussian_nll(mean, query, variance) -> float:
    """Mean over h >= 1 of −log N(x_h; mean_h, variance·I): the NLL of any point predictor with that variance."""
    m = np.asarray(mean, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    var = float(variance)
    if not (var > 0 and math.isfinite(var)):
        raise ValueError(f"variance must be a positive finite number, got {variance!r}")
    d = q.shape[-1]
    return 0.5 * squared_error(m, q) / var + 0.5 * d * (_LOG_2PI + math.log(var))


def mixture_nll(attention, A, rho, query) -> float:
    """Mean over h >= 1 of −log Σ_{h'} attention[h,h'] N(x_h; ρAᵀx_{h'}, (1−ρ²)I)."""
    return float(-np.mean(ds_mixture_log_density(attention, A, rho, query)[..., 1:]))


def ds_bma_loss(A, rho, context, query, kind: str = "nll") -> float:
    """BMA loss on the query, mean over h >= 1: ``"nll"`` (exact predictive density) or ``"mse"`` (its mean)."""
    post = ds_parent_posterior(A, rho, context)
    if kind == "nll":
        return mixture_nll(post, A, rho, query)
    if kind == "mse":
        return squared_error(ds_predictive_mean(post, A, rho, query), query)
    raise ValueError(f"kind must be 'nll' or 'mse', got {kind!r}")


def ds_oracle_loss(A, rho, parents, query, kind: str = "nll") -> float:
    """The oracle's loss (knows the tree): −log N(x_h; ρAᵀx_pa(h), (1−ρ²)I) or ‖x_h − ρAᵀx_pa(h)‖², h >= 1."""
    att = one_hot_parents(parents)
    if kind == "nll":
        return mixture_nll(att, A, rho, query)
    if kind == "mse":
        return squared_error(ds_predictive_mean(att, A, rho, query), query)
    raise ValueError(f"kind must be 'nll' or 'mse', got {kind!r}")


def posterior_kl(log_posterior, log_attention) -> np.ndarray:
    """Per-context mean over h >= 1 of KL(P_h ‖ A_h), from logs; shape (...,).

    This is the expected excess L_pa of an attention A over BMA given the context:
    E[−log A_{h,pa(h)} | context] − E[−log P_{h,pa(h)} | context] = KL(P_h ‖ A_h), so its mean over contexts
    is the L_pa gap to BMA, with a smaller variance than the sampled difference of losses. Taking logs keeps
    sharp rows (large L) exact where probabilities would underflow to 0.

    Parameters
    ----------
    log_posterior, log_attention : (..., H, H), −inf on row 0 and on entries h' >= h
    """
    lp = np.asarray(log_posterior, dtype=np.float64)
    la = np.asarray(log_attention, dtype=np.float64)
    if lp.shape != la.shape or lp.ndim < 2 or lp.shape[-1] != lp.shape[-2]:
        raise ValueError(f"log_posterior and log_attention must have the same shape (..., H, H), got "
                         f"{lp.shape} and {la.shape}")
    H = lp.shape[-1]
    allowed = np.tril(np.ones((H, H), dtype=bool), k=-1)[1:]  # (H-1, H)
    lp, la = lp[..., 1:, :], la[..., 1:, :]
    p = np.exp(lp)
    # p·(log p − log a) with 0·(anything) = 0 where p underflows, and +inf where a = 0 < p.
    with np.errstate(invalid="ignore"):
        terms = np.where(allowed & (p > 0), p * (lp - la), 0.0)  # (..., H-1, H)
    return np.mean(np.sum(terms, axis=-1), axis=-1)
