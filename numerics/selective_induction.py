"""The selective-induction task of D'Angelo, Croce and Flammarion ("Selective induction heads", ICLR 2025,
arXiv 2509.08184), its Bayes-optimal predictor, and the tree BMA construction mapped onto it. Claims served:
``footnote1-selective-induction`` (the paper's: its construction covers this task) and ``ext-selective-*`` (ours).

The task (their Sec. 4, built from the text; their code is not used)
--------------------------------------------------------------------
A fixed kernel P* (d × d, ``P[i, j] = P*(j | i)``) with stationary law μ, and a set of lags K ⊂ {1, 2, …} with
k̂ = max K. Each sequence draws its lag κ uniformly from K. The first k̂ tokens x_0..x_{k̂−1} are i.i.d. μ,
whatever κ; then x_t ~ P*(· | x_{t−κ}) for t ≥ k̂. So

    P(x_{<t} | κ) = Π_{s < min(t, k̂)} μ(x_s) · Π_{k̂ ≤ s < t} P*(x_s | x_{s−κ}),

and the Bayes-optimal prediction of x_t is Σ_κ w_κ(t) P*(· | x_{t−κ}) with w_κ(t) ∝ P(x_{<t} | κ) (μ for t < k̂).
The μ terms are common to every lag and cancel from w. This is ``task="dangelo"``, the default.

Our earlier variant, ``task="per_lag"`` (ours, not theirs): the first κ tokens are drawn from μ, κ the sequence's
own lag, so a lag-1 sequence follows P* from its second token; its μ terms depend on κ and do not cancel
(``init`` replaces μ for the first tokens in either task).

The mapping of the tree construction (:func:`construction_predictive`)
---------------------------------------------------------------------
One example of the tree task = one window (x_{s−k̂}, …, x_s) of the sequence, H = k̂ + 1 positions; the child is
the last position h = k̂ and lag κ is the parent h' = k̂ − κ, shared by all windows as the tree task's parent is
shared by its examples. On their task the context at target t holds the windows ending at s = k̂..t−1 (every
window inside the sequence) and the query is the window ending at t; the first k̂ tokens enter only as the
windows' earlier positions, their μ terms contribute nothing (they cancel), and for t < k̂ the prediction is μ.
The tree BMA posterior over the candidates {k̂ − κ} is then ∝ Π_{k̂ ≤ s < t} P*(x_s | x_{s−κ}), their lag posterior,
and its predictive is theirs (our per-lag variant's mapping: docs/notes/ext-selective-claim1.md). The score is
``numerics.bma.selector_scores`` on the windows, as the constructed transformer computes it with exact copies.
"""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from bma_verify.numerics.validation import check_init, check_kernel, check_positive_int, check_rng, check_tokens
from bma_verify.numerics.bma import selector_scores
from bma_verify.numerics.task import stationary_distribution

#: ``dangelo``: their definition (first k̂ = max K tokens from μ); ``per_lag``: ours (first κ tokens from μ).
TASKS = ("dangelo", "per_lag")


def check_lags(lags) -> np.ndarray:
    """Distinct positive integer lags, sorted. (|K|,) int64."""
    arr = np.asarray(lags)
    if arr.ndim != 1 or arr.size < 1 or arr.dtype.kind not in "iu":
        raise ValueError(f"lags must be a non-empty 1-D array of positive integers, got {lags!r}")
    arr = np.unique(arr.astype(np.int64))
    if arr.size != np.asarray(lags).size or np.any(arr < 1):
        raise ValueError(f"lags must be distinct positive integers, got {lags!r}")
    return arr


def check_task(task: str) -> str:
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    return task


def prefix_lengths(lags, task: str = "dangelo") -> np.ndarray:
    """How many first tokens are drawn from μ under each lag: k̂ for every lag (theirs) or κ itself (ours)."""
    lags = check_lags(lags)
    return np.full(lags.size, lags.max()) if check_task(task) == "dangelo" else lags.copy()


def _law0(kernel, init):
    return stationary_distribution(kernel) if init is None else check_init(init, kernel.shape[0])


def _prepared(kernel, lags, tokens, name: str, ndim: int, init, task):
    """Validated (kernel, lags, tokens with ``ndim`` axes, μ or ``init``, log P*, log μ, prefixes)."""
    kernel = check_kernel(kernel, single=True)
    lags = check_lags(lags)
    x = check_tokens(np.asarray(tokens), kernel.shape[0], name)
    if x.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {x.shape}")
    law0 = _law0(kernel, init)
    with np.errstate(divide="ignore"):
        log_k, log0 = np.log(kernel), np.log(law0)
    return kernel, lags, x, law0, log_k, log0, prefix_lengths(lags, task)


def sample_selective_induction(kernel, lags, n: int, T: int, *, rng: np.random.Generator, init=None,
                               task: str = "dangelo", lag: int | None = None):
    """n sequences of length T: κ ~ uniform(K) (or every κ = ``lag``), the first k̂ (``per_lag``: κ) tokens
    i.i.d. μ (or ``init``), then x_t ~ P*(· | x_{t−κ}).

    Returns
    -------
    tokens (n, T) int64, lags (n,) int64 (the κ of each sequence).
    """
    kernel = check_kernel(kernel, single=True)
    lags = check_lags(lags)
    n = check_positive_int(n, "n", 1)
    T = check_positive_int(T, "T", 1)
    rng = check_rng(rng)
    prefixes = prefix_lengths(lags, task)
    if lag is None:
        j = rng.integers(0, lags.size, size=n)
    elif int(lag) in lags:
        j = np.full(n, int(np.searchsorted(lags, int(lag))))
    else:
        raise ValueError(f"lag must be one of {lags.tolist()}, got {lag!r}")
    kappa, prefix = lags[j], prefixes[j]
    law0 = _law0(kernel, init)
    u = rng.random((n, T))
    x = np.zeros((n, T), dtype=np.int64)  # zeros: early rows read x[:, 0] before it is drawn (then discarded)
    cdf0, cdf = np.cumsum(law0), np.cumsum(kernel, axis=1)
    for t in range(T):
        first = np.minimum(np.searchsorted(cdf0, u[:, t], side="right"), kernel.shape[0] - 1)
        prev = x[np.arange(n), np.maximum(t - kappa, 0)]
        later = np.minimum((cdf[prev] <= u[:, t, None]).sum(axis=1), kernel.shape[0] - 1)
        x[:, t] = np.where(t < prefix, first, later)
    return x, kappa


def bayes_predictive(kernel, lags, sequence, init=None, *, task: str = "dangelo",
                     drop_first_tokens: bool = False) -> dict:
    """P(x_t = · | x_{<t}) for t = 0..T (T = len(sequence); row T predicts the next token) and the lag posterior,
    from the likelihood written term by term (Python loops; the reference).

    ``drop_first_tokens``: weights without the μ terms of the first tokens (a finding's variant: Bayes-optimal
    exactly when those terms are common to every lag, as on their task).

    Returns
    -------
    {"predictive": (T + 1, d), "lag_posterior": (T + 1, |K|)}.
    """
    kernel, lags, x, law0, log_k, log0, prefixes = _prepared(kernel, lags, sequence, "sequence", 1, init, task)
    T, d = x.size, kernel.shape[0]
    first = 0.0 * log0 if drop_first_tokens else log0
    predictive, posterior = np.zeros((T + 1, d)), np.zeros((T + 1, lags.size))
    for t in range(T + 1):
        loglik = np.array([sum(first[x[s]] if s < p else log_k[x[s - kappa], x[s]] for s in range(t))
                           for kappa, p in zip(lags, prefixes)])
        w = np.exp(loglik - logsumexp(loglik))
        posterior[t] = w
        for weight, kappa, p in zip(w, lags, prefixes):
            predictive[t] += weight * (law0 if t < p else kernel[x[t - kappa]])
    return {"predictive": predictive, "lag_posterior": posterior}


def padded_kernel(kernel, init=None) -> np.ndarray:
    """π̃ on d + 1 tokens: rows 0..d−1 are [P*(· | i), 0], the pad row d is [μ, 0] (module docstring)."""
    kernel = check_kernel(kernel, single=True)
    d = kernel.shape[0]
    out = np.zeros((d + 1, d + 1))
    out[:d, :d] = kernel
    out[d, :d] = _law0(kernel, init)
    return out


def window_batch(sequences, t: int, width: int, pad: int, first: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The window view of every row of ``sequences`` (n, T) at one target first ≤ t ≤ T: context
    (n, t − first, width), the windows ending at s = first..t−1 (x_{s−width+1}, …, x_s, the pad token before the
    sequence), and query (n, width), the window ending at t (its last entry x_t, the pad when t = T: it is never
    read). int64. Their task uses ``first`` = k̂ = width − 1 (no window holds a pad); ours ``first`` = 0.
    """
    x = np.asarray(sequences)
    if x.ndim != 2 or x.dtype.kind not in "iu":
        raise ValueError(f"sequences must be a 2-D integer array (n, T), got shape {x.shape} dtype {x.dtype}")
    t = check_positive_int(t, "t", 0)
    width = check_positive_int(width, "width", 2)
    first = check_positive_int(first, "first", 0)
    if t > x.shape[1]:
        raise ValueError(f"t must be at most the sequence length {x.shape[1]}, got {t}")
    if first > t:
        raise ValueError(f"first must be at most t = {t}, got {first}")
    n = x.shape[0]
    padded = np.concatenate([np.full((n, width - 1), pad, dtype=np.int64), x.astype(np.int64),
                             np.full((n, 1), pad, dtype=np.int64)], axis=1)
    starts = np.arange(first, t + 1)[:, None] + np.arange(width)[None, :]  # window ending at s = first..t
    rows = padded[:, starts]  # (n, t + 1 − first, width)
    return rows[:, :-1], rows[:, -1]


def windows(sequence, t: int, width: int, pad: int, first: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """One row of :func:`window_batch`: context (t − first, width), query (width,)."""
    context, query = window_batch(np.asarray(sequence, dtype=np.int64)[None], t, width, pad, first)
    return context[0], query[0]


def construction_predictive(kernel, lags, sequence, init=None, *, task: str = "dangelo", lag_shift: int = 0,
                            table=None) -> dict:
    """The tree BMA construction mapped onto ``task`` (module docstring): for each target t, the selector score
    Σ_l W[x^l_{h'}, x^l_h] (``numerics.bma.selector_scores``, W = log π̃) over the windows, softmax over the
    candidates h' = k̂ − κ (κ ∈ K), and the mixture Σ π̃(· | query_{h'}). On their task the windows end at
    s ≥ k̂ (+ ``lag_shift``) and t < k̂ predicts μ with the uniform prior.

    ``lag_shift`` (control): read candidate h' = k̂ − κ − lag_shift (lag off by ``lag_shift``); ``table``
    (control): a (d, d) kernel used in place of P* in the scores (the output rows keep P*).

    Returns
    -------
    {"predictive": (T + 1, d), "lag_posterior": (T + 1, |K|)}.
    """
    kernel = check_kernel(kernel, single=True)
    lags = check_lags(lags)
    x = check_tokens(np.asarray(sequence), kernel.shape[0], "sequence")
    d, T = kernel.shape[0], x.size
    width = int(lags.max()) + 1 + int(lag_shift)  # H = k̂ + 1 (+ the shift, so shifted candidates exist)
    h = width - 1
    first = h if check_task(task) == "dangelo" else 0  # their windows lie inside the sequence
    tilde = padded_kernel(kernel, init)
    with np.errstate(divide="ignore"):
        W = np.log(padded_kernel(kernel if table is None else table, init))
    candidates = h - lags - int(lag_shift)
    predictive = np.tile(tilde[d, :d], (T + 1, 1))  # μ before the first window (their task, t < k̂)
    posterior = np.full((T + 1, lags.size), 1.0 / lags.size)
    for t in range(int(lags.max()) if first else 0, T + 1):
        context, query = windows(x, t, width, d, min(first, t))
        scores = selector_scores(W, context[None])[0][h, candidates] if len(context) else np.zeros(lags.size)
        w = np.exp(scores - logsumexp(scores))
        posterior[t] = w
        predictive[t] = (w @ tilde[query[candidates]])[:d]
    return {"predictive": predictive, "lag_posterior": posterior}


def log_likelihoods(kernel, lags, prefixes, init=None, *, task: str = "dangelo") -> np.ndarray:
    """log P(x_{<t} | κ) for every row of ``prefixes`` (n, t) and every κ ∈ K (vectorised), (n, |K|) float64."""
    kernel, lags, x, _, log_k, log0, prefixes_ = _prepared(kernel, lags, prefixes, "prefixes", 2, init, task)
    t = x.shape[1]
    loglik = np.zeros((x.shape[0], lags.size))
    for j, (kappa, p) in enumerate(zip(lags, prefixes_)):
        p = min(int(p), t)
        loglik[:, j] = log0[x[:, :p]].sum(1) + log_k[x[:, p - kappa:t - kappa], x[:, p:]].sum(1)
    return loglik


def lag_rows(kernel, lags, prefixes, init=None, *, task: str = "dangelo") -> np.ndarray:
    """The law of x_t under each lag, (n, |K|, d): P*(· | x_{t−κ}), μ while t is within the lag's first tokens."""
    kernel, lags, x, law0, _, _, prefixes_ = _prepared(kernel, lags, prefixes, "prefixes", 2, init, task)
    t = x.shape[1]
    rows = np.zeros((x.shape[0], lags.size, kernel.shape[0]))
    for j, (kappa, p) in enumerate(zip(lags, prefixes_)):
        rows[:, j] = law0 if t < p else kernel[x[:, t - kappa]]
    return rows


def bayes_at_last(kernel, lags, prefixes, init=None, *, task: str = "dangelo") -> dict:
    """:func:`bayes_predictive`'s last row for every row of ``prefixes`` (n, t), vectorised: the lag posterior
    P(κ | x_{<t}) and the predictive P(x_t = · | x_{<t}).

    Returns
    -------
    {"lag_posterior": (n, |K|), "predictive": (n, d), "lag_rows": (n, |K|, d), "loglik": (n, |K|)} float64;
    ``lag_rows[:, j]`` is the law of x_t under lag κ_j, so any lag weights give a predictor.
    """
    loglik = log_likelihoods(kernel, lags, prefixes, init, task=task)
    rows = lag_rows(kernel, lags, prefixes, init, task=task)
    w = np.exp(loglik - logsumexp(loglik, axis=1, keepdims=True))
    return {"lag_posterior": w, "predictive": np.einsum("nj,njd->nd", w, rows), "lag_rows": rows, "loglik": loglik}


def construction_at_last(kernel, lags, prefixes, *, task: str = "dangelo") -> np.ndarray:
    """The tree construction's lag weights at the last target t of every prefix (n, t), (n, |K|): the selector
    scores of the windows (ending at s = k̂..t−1 on their task, s = 0..t−1 with the pad on ours), softmax over the
    candidates h' = k̂ − κ. The last row of :func:`construction_predictive`'s lag posterior, vectorised."""
    kernel = check_kernel(kernel, single=True)
    lags = check_lags(lags)
    x = check_tokens(np.asarray(prefixes), kernel.shape[0], "prefixes", 2)
    h = int(lags.max())
    first = min(h, x.shape[1]) if check_task(task) == "dangelo" else 0
    context, _ = window_batch(x, x.shape[1], h + 1, kernel.shape[0], first)
    with np.errstate(divide="ignore"):
        scores = selector_scores(np.log(padded_kernel(kernel)), context)[:, h, h - lags]  # (n, |K|)
    return np.exp(scores - logsumexp(scores, axis=1, keepdims=True))


def selective_head_weights(kernel, lags, prefixes, beta: float) -> np.ndarray:
    """Their construction's lag weights (their Prop. 1, Eq. 3) at the last target of every prefix (n, t > k̂):
    w_κ ∝ exp(β / (t − k̂) · Σ_{k̂ ≤ i < t} p̃_{i,κ}), p̃_{i,κ} = P*(x_i | x_{i−κ}) / Σ_{κ'} P*(x_i | x_{i−κ'}) (the
    transition probabilities normalised over the lags). (n, |K|)."""
    kernel = check_kernel(kernel, single=True)
    lags = check_lags(lags)
    x = check_tokens(np.asarray(prefixes), kernel.shape[0], "prefixes", 2)
    h, t = int(lags.max()), x.shape[1]
    if t <= h:
        raise ValueError(f"prefixes must be longer than max(K) = {h}, got length {t}")
    p = np.stack([kernel[x[:, h - kappa:t - kappa], x[:, h:]] for kappa in lags], axis=-1)  # (n, t − k̂, |K|)
    score = beta * (p / p.sum(-1, keepdims=True)).mean(1)
    return np.exp(score - logsumexp(score, axis=1, keepdims=True))


def max_likelihood_weights(loglik) -> np.ndarray:
    """One-hot weights on the maximum-likelihood lag (the first one on ties), (n, |K|)."""
    loglik = np.asarray(loglik, dtype=np.float64)
    return np.eye(loglik.shape[1])[np.argmax(loglik, axis=1)]


def _pair_law(kernel, law0, steps: int) -> np.ndarray:
    """Joint law of (x_s, x_{s+steps·κ*}) on one stationary chain, (d, d); steps = 0: independent draws."""
    if steps == 0:
        return np.outer(law0, law0)
    return law0[:, None] * np.linalg.matrix_power(kernel, steps)


def expected_loglik_gap(kernel, lags, true_lag: int, T: int) -> np.ndarray:
    """E_{κ*}[log P(x_{<T} | κ*) − log P(x_{<T} | κ)] for every κ ∈ K on their task, exactly, (|K|,) (0 at κ*);
    their Claim 1 says every other entry is positive.

    Why a sum of pair terms: the μ terms are common to every lag; each later position s ≥ k̂ adds
    E log P*(x_s | x_{s−κ*}) − E log P*(x_s | x_{s−κ}). Under κ* the sequence is κ* interleaved chains, each
    started by its last μ draw (position ≥ k̂ − κ*): x_{s−κ} and x_s are m = κ/κ* steps apart on one chain when
    κ* divides κ and s − κ ≥ k̂ − κ*, independent μ ⊗ μ otherwise (μ stationary, so every token has law μ).
    """
    kernel = check_kernel(kernel, single=True)
    lags = check_lags(lags)
    T = check_positive_int(T, "T", 1)
    if int(true_lag) not in lags:
        raise ValueError(f"true_lag must be one of {lags.tolist()}, got {true_lag!r}")
    law0, hat, k_star = stationary_distribution(kernel), int(lags.max()), int(true_lag)
    with np.errstate(divide="ignore"):
        log_k = np.where(kernel > 0, np.log(kernel), 0.0)  # 0·log 0 = 0 under any pair law that never visits it
    own = float((_pair_law(kernel, law0, 1) * log_k).sum())
    gaps = np.zeros(lags.size)
    for j, kappa in enumerate(lags):
        positions = max(T - hat, 0)
        linked = max(T - max(hat, hat - k_star + int(kappa)), 0) if kappa % k_star == 0 else 0
        gaps[j] = (linked * (own - float((_pair_law(kernel, law0, int(kappa) // k_star) * log_k).sum()))
                   + (positions - linked) * (own - float((_pair_law(kernel, law0, 0) * log_k).sum())))
    return gaps


def enumerated_loglik_gap(kernel, lags, true_lag: int, T: int) -> np.ndarray:
    """:func:`expected_loglik_gap` by enumerating all d^T sequences with their law under κ* (the reference)."""
    kernel = check_kernel(kernel, single=True)
    lags = check_lags(lags)
    d = kernel.shape[0]
    sequences = np.indices((d,) * T).reshape(T, -1).T  # (d^T, T)
    loglik = log_likelihoods(kernel, lags, sequences)
    j = int(np.searchsorted(lags, int(true_lag)))
    p = np.exp(loglik[:, j])
    return (p[:, None] * np.where(p[:, None] > 0, loglik[:, [j]] - loglik, 0.0)).sum(0)
