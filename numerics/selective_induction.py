"""The selective-induction task of D'Angelo, Croce and Flammarion (ICLR 2025), as the paper's footnote 1 describes
it, and the mapping of the BMA construction onto it. Claim id served: ``footnote1-selective-induction`` (a claim
of the paper: its construction covers this task).

The task (built from that description; the original code is not used)
-----------------------------------------------------------------------
A fixed kernel P* (d × d, ``P[i, j] = P*(j | i)``) with stationary law μ, and a set of lags K ⊂ {1, 2, …}. Each
sequence draws κ uniformly from K; x_0, …, x_{κ−1} are i.i.d. μ and x_t ~ P*(· | x_{t−κ}) for t ≥ κ (κ interleaved
stationary chains). ``init`` replaces μ for the first tokens when given.

Bayes-optimal prediction of x_t from x_{<t} (:func:`bayes_predictive`, written directly from the likelihood):
w_κ(t) ∝ Π_{s<t} P*(x_s | x_{s−κ}) with the convention P*(x_s | x_{s−κ}) := μ(x_s) for s < κ, and
P(x_t = · | x_{<t}) = Σ_κ w_κ(t) P*(· | x_{t−κ}) (μ for t < κ).

The mapping of the tree construction (:func:`construction_predictive`)
---------------------------------------------------------------------
One example of the tree task = one window of the sequence itself. For the target position t, the context holds the
L = t windows (x̃_{s−κmax}, …, x̃_{s−1}, x_s), s = 0..t−1, and the query is the window ending at t, with H = κmax + 1
positions, x̃ = a padding token d (BOS) at negative indices. In every window the child is position h = κmax and
the lag κ is the parent h' = κmax − κ, shared by all windows as the tree task's parent is shared by its examples:
candidates h' = t − κ in sequence coordinates. The tree kernel on d + 1 tokens is π̃ = [[P*, 0], [μ, 0]] (the pad
row is μ: a token with no lag-predecessor is drawn from μ). The tree BMA posterior of the last row is then
∝ Π_l π̃(x^l_h | x^l_{h'}) = Π_{s<t} P*(x_s | x_{s−κ}) (with the μ convention), restricted to the candidates
{κmax − κ : κ ∈ K} under the uniform prior, and its predictive Σ_κ w_κ π̃(· | x̃_{t−κ}) is the Bayes-optimal one:
this is computed with ``numerics.bma.selector_scores`` on the windows, the same score the constructed transformer
computes with exact copies.
"""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from bma_verify.numerics._validate import check_init, check_kernel, check_positive_int, check_rng, check_tokens
from bma_verify.numerics.bma import selector_scores
from bma_verify.numerics.task import stationary_distribution


def check_lags(lags) -> np.ndarray:
    """Distinct positive integer lags, sorted. (|K|,) int64."""
    arr = np.asarray(lags)
    if arr.ndim != 1 or arr.size < 1 or arr.dtype.kind not in "iu":
        raise ValueError(f"lags must be a non-empty 1-D array of positive integers, got {lags!r}")
    arr = np.unique(arr.astype(np.int64))
    if arr.size != np.asarray(lags).size or np.any(arr < 1):
        raise ValueError(f"lags must be distinct positive integers, got {lags!r}")
    return arr


def _law0(kernel, init):
    return stationary_distribution(kernel) if init is None else check_init(init, kernel.shape[0])


def _prepared(kernel, lags, tokens, name: str, ndim: int, init):
    """Validated (kernel, lags, tokens with ``ndim`` axes, μ or ``init``, log P*, log μ) for the Bayes functions."""
    kernel = check_kernel(kernel, single=True)
    lags = check_lags(lags)
    x = check_tokens(np.asarray(tokens), kernel.shape[0], name)
    if x.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {x.shape}")
    law0 = _law0(kernel, init)
    with np.errstate(divide="ignore"):
        log_k, log0 = np.log(kernel), np.log(law0)
    return kernel, lags, x, law0, log_k, log0


def sample_selective_induction(kernel, lags, n: int, T: int, *, rng: np.random.Generator, init=None):
    """n sequences of length T: κ ~ uniform(K), x_{<κ} i.i.d. μ (or ``init``), x_t ~ P*(· | x_{t−κ}).

    Returns
    -------
    tokens (n, T) int64, lags (n,) int64 (the drawn κ of each sequence).
    """
    kernel = check_kernel(kernel, single=True)
    lags = check_lags(lags)
    n = check_positive_int(n, "n", 1)
    T = check_positive_int(T, "T", 1)
    rng = check_rng(rng)
    law0 = _law0(kernel, init)
    kappa = lags[rng.integers(0, lags.size, size=n)]
    u = rng.random((n, T))
    x = np.zeros((n, T), dtype=np.int64)  # zeros: early rows read x[:, 0] before it is drawn (then discarded)
    cdf0, cdf = np.cumsum(law0), np.cumsum(kernel, axis=1)
    for t in range(T):
        early = t < kappa
        first = np.minimum(np.searchsorted(cdf0, u[:, t], side="right"), kernel.shape[0] - 1)
        prev = x[np.arange(n), np.maximum(t - kappa, 0)]
        later = np.minimum((cdf[prev] <= u[:, t, None]).sum(axis=1), kernel.shape[0] - 1)
        x[:, t] = np.where(early, first, later)
    return x, kappa


def bayes_predictive(kernel, lags, sequence, init=None) -> dict:
    """P(x_t = · | x_{<t}) for t = 0..T (T = len(sequence); row T predicts the next token) and the lag posterior,
    from the likelihood written term by term (Python loops; the reference).

    Returns
    -------
    {"predictive": (T + 1, d), "lag_posterior": (T + 1, |K|)}.
    """
    kernel, lags, x, law0, log_k, log0 = _prepared(kernel, lags, sequence, "sequence", 1, init)
    T, d = x.size, kernel.shape[0]
    predictive, posterior = np.zeros((T + 1, d)), np.zeros((T + 1, lags.size))
    for t in range(T + 1):
        loglik = np.array([sum(log0[x[s]] if s < kappa else log_k[x[s - kappa], x[s]] for s in range(t))
                           for kappa in lags])
        w = np.exp(loglik - logsumexp(loglik))
        posterior[t] = w
        for weight, kappa in zip(w, lags):
            predictive[t] += weight * (law0 if t < kappa else kernel[x[t - kappa]])
    return {"predictive": predictive, "lag_posterior": posterior}


def padded_kernel(kernel, init=None) -> np.ndarray:
    """π̃ on d + 1 tokens: rows 0..d−1 are [P*(· | i), 0], the pad row d is [μ, 0] (module docstring)."""
    kernel = check_kernel(kernel, single=True)
    d = kernel.shape[0]
    out = np.zeros((d + 1, d + 1))
    out[:d, :d] = kernel
    out[d, :d] = _law0(kernel, init)
    return out


def windows(sequence, t: int, width: int, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """The tree-task view at target t: context (t, width) windows ending at s = 0..t−1, query window ending at t
    (the query's last entry is x_t if t < len(sequence), else the pad token: it is never read).
    One row of :func:`window_batch`."""
    context, query = window_batch(np.asarray(sequence, dtype=np.int64)[None], t, width, pad)
    return context[0], query[0]


def construction_predictive(kernel, lags, sequence, init=None, *, lag_shift: int = 0, table=None) -> dict:
    """The tree BMA construction mapped onto the sequence (module docstring): for each target t, the selector score
    Σ_l W[x^l_{h'}, x^l_h] (``numerics.bma.selector_scores``, W = log π̃) over the windows, softmax over the
    candidates h' = κmax − κ (κ ∈ K), and the mixture Σ π̃(· | query_{h'}).

    ``lag_shift`` (control): read candidate h' = κmax − κ − lag_shift (lag off by ``lag_shift``); ``table`` (control):
    a (d, d) kernel used in place of P* in the scores (the output rows keep P*).

    Returns
    -------
    {"predictive": (T + 1, d), "lag_posterior": (T + 1, |K|)}.
    """
    kernel = check_kernel(kernel, single=True)
    lags = check_lags(lags)
    x = check_tokens(np.asarray(sequence), kernel.shape[0], "sequence")
    d, T = kernel.shape[0], x.size
    width = int(lags.max()) + 1 + int(lag_shift)  # H = κmax + 1 (+ the shift, so shifted candidates exist)
    h = width - 1
    tilde = padded_kernel(kernel, init)
    with np.errstate(divide="ignore"):
        W = np.log(padded_kernel(kernel if table is None else table, init))
    candidates = h - lags - int(lag_shift)
    predictive, posterior = np.zeros((T + 1, d)), np.zeros((T + 1, lags.size))
    for t in range(T + 1):
        context, query = windows(x, t, width, d)
        if t == 0:
            scores = np.zeros(lags.size)
        else:
            scores = selector_scores(W, context[None])[0][h, candidates]  # (|K|,)
        w = np.exp(scores - logsumexp(scores))
        posterior[t] = w
        predictive[t] = (w @ tilde[query[candidates]])[:d]
    return {"predictive": predictive, "lag_posterior": posterior}


def truncated_weights_predictive(kernel, lags, sequence) -> np.ndarray:
    """A variant of ours (not Bayes-optimal): weights Π_{κ ≤ s < t} P*(x_s | x_{s−κ}) without the μ(x_s) terms of the
    first tokens. (T + 1, d). Used to show those terms matter (they depend on κ)."""
    kernel = check_kernel(kernel, single=True)
    lags = check_lags(lags)
    x = np.asarray(sequence, dtype=np.int64)
    law0 = stationary_distribution(kernel)
    out = np.zeros((x.size + 1, kernel.shape[0]))
    for t in range(x.size + 1):
        loglik = np.array([sum(np.log(kernel[x[s - kappa], x[s]]) for s in range(kappa, t)) for kappa in lags])
        w = np.exp(loglik - logsumexp(loglik))
        for weight, kappa in zip(w, lags):
            out[t] += weight * (law0 if t < kappa else kernel[x[t - kappa]])
    return out


def window_batch(sequences, t: int, width: int, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """The window view of every row of ``sequences`` (n, T) at one target 0 ≤ t ≤ T: context (n, t, width), the
    windows ending at s = 0..t−1 (x_{s−width+1}, …, x_s, the pad token before the sequence), and query (n, width),
    the window ending at t (its last entry x_t, the pad when t = T: it is never read). int64.
    """
    x = np.asarray(sequences)
    if x.ndim != 2 or x.dtype.kind not in "iu":
        raise ValueError(f"sequences must be a 2-D integer array (n, T), got shape {x.shape} dtype {x.dtype}")
    t = check_positive_int(t, "t", 0)
    width = check_positive_int(width, "width", 2)
    if t > x.shape[1]:
        raise ValueError(f"t must be at most the sequence length {x.shape[1]}, got {t}")
    n = x.shape[0]
    padded = np.concatenate([np.full((n, width - 1), pad, dtype=np.int64), x.astype(np.int64),
                             np.full((n, 1), pad, dtype=np.int64)], axis=1)
    starts = np.arange(t + 1)[:, None] + np.arange(width)[None, :]  # (t + 1, width): window ending at s
    rows = padded[:, starts]  # (n, t + 1, width)
    return rows[:, :t], rows[:, t]


def bayes_at_last(kernel, lags, prefixes, init=None) -> dict:
    """:func:`bayes_predictive`'s last row for every row of ``prefixes`` (n, t), vectorised: the lag posterior
    P(κ | x_{<t}) and the predictive P(x_t = · | x_{<t}).

    Returns
    -------
    {"lag_posterior": (n, |K|), "predictive": (n, d), "lag_rows": (n, |K|, d)} float64; ``lag_rows[:, j]`` is
    the law of x_t under lag κ_j (P*(· | x_{t−κ_j}), μ when t < κ_j), so any lag weights give a predictor.
    """
    kernel, lags, x, law0, log_k, log0 = _prepared(kernel, lags, prefixes, "prefixes", 2, init)
    n, t = x.shape
    loglik = np.zeros((n, lags.size))
    rows = np.zeros((n, lags.size, kernel.shape[0]))
    for j, kappa in enumerate(lags):
        k = min(int(kappa), t)
        loglik[:, j] = log0[x[:, :k]].sum(1) + log_k[x[:, :t - k], x[:, k:]].sum(1)
        rows[:, j] = law0 if t < kappa else kernel[x[:, t - kappa]]
    w = np.exp(loglik - logsumexp(loglik, axis=1, keepdims=True))
    return {"lag_posterior": w, "predictive": np.einsum("nj,njd->nd", w, rows), "lag_rows": rows}
