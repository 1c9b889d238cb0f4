"""The selector's gradient at initialisation (``thm3-init-gradient``).

Setting (the mixture output rule of docs/claims.md): f(x_h) = Σ_{h'<h} A_{h'} π(x_h | x_{h'}), A = softmax(p̂)
over the h candidates h' = 0..h-1, loss ℓ = −log f(x_h). Then −∂ℓ/∂p̂_{h'} = A_{h'} (π(x_h | x_{h'}) / f(x_h) − 1), and at
p̂ = 0 (A uniform, f = π̄ the mean of π(x_h | x_k) over the candidates)

    −∂ℓ/∂p̂_{h'} = (1/h) (π(x_h | x_{h'}) / π̄(x_h) − 1).

:func:`init_gradient` is the expectation of this over x_0..x_h drawn from the tree (exactly by enumeration,
or by Monte Carlo). :func:`chi2_gain` is the approximate form: π̄ replaced by the marginal law P(x_h), which
gives E = (1/h) J(h') with J(h') = E[π(x_h | x_{h'}) / P(x_h)] − 1 and J(pa(h)) = I_χ²(x_pa(h); x_h).
``denominator="marginal"`` in :func:`init_gradient` and :func:`init_gradient_samples` computes that approximate
form by the same enumeration (or sampling) as the exact one, so "E = (1/h) J" is checked between two independent
computations (enumeration over sequences here, pairwise joints in :func:`chi2_gain`).
"""
from __future__ import annotations

import numpy as np

from bma_verify.numerics.validation import check_init, check_kernel, check_parents, check_positive_int, check_rng
from bma_verify.numerics.enumeration import MAX_SEQUENCES, all_sequences, sequence_log_likelihood_unchecked
from bma_verify.numerics.estimators import mean_estimate
from bma_verify.numerics.information import marginal_unchecked, pairwise_joint_unchecked
from bma_verify.numerics.task import sample_chains_unchecked, stationary_distribution_unchecked

#: Configurations x_0..x_h per block when summing the exact expectation (bounds memory to ~100 MB).
_BLOCK = 1 << 17


def _validate(kernel, parents, h: int, init):
    kernel = check_kernel(kernel, single=True)
    parents = check_parents(parents, single=True)
    h = check_positive_int(h, "h", 1)
    if h >= parents.shape[0]:
        raise ValueError(f"h must be a position in 1..{parents.shape[0] - 1} (it needs h candidates), got {h}")
    if init is not None:
        init = check_init(init, kernel.shape[0])
    return kernel, parents, h, init


def _law_of_x0(kernel: np.ndarray, init) -> np.ndarray:
    """μ₀: the validated ``init``, or the stationary law when None (resolved where it is first needed)."""
    return stationary_distribution_unchecked(kernel) if init is None else init


def init_gradient_samples(kernel, tokens, law=None) -> np.ndarray:
    """−∂ℓ/∂p̂_{h'} at p̂ = 0 for each sampled prefix x_0..x_h (``thm3-init-gradient``).

    Parameters
    ----------
    kernel : (d, d) with ``kernel[i, j] = π(j | i)``.
    tokens : (n, h+1) int tokens x_0..x_h (the last column is the predicted token x_h).
    law : (d,) or None. None: the exact gradient, with π̄(x_h) (the mixture at uniform attention) in the
        denominator. A law P(x_h): the approximate form of the paper, P(x_h) in place of π̄(x_h).

    Returns
    -------
    (n, h) float64: (1/h)(π(x_h | x_{h'}) / π̄(x_h) − 1) for h' = 0..h-1 (each row sums to 0), or with
    P(x_h) in the denominator.
    """
    tokens = np.asarray(tokens)
    h = tokens.shape[-1] - 1
    likelihood = kernel[tokens[:, :h], tokens[:, h:]]  # (n, h): π(x_h | x_{h'}) for every candidate h'
    if law is None:
        denominator = likelihood.mean(axis=1, keepdims=True)  # (n, 1): π̄(x_h), the mixture at uniform A
    else:
        denominator = np.asarray(law, dtype=np.float64)[tokens[:, h:]]  # (n, 1): P(x_h)
    return (likelihood / denominator - 1.0) / h


def init_gradient(kernel, parents, h: int, init=None, method: str = "exact", n: int = 100_000, rng=None,
                  denominator: str = "mixture"):
    """Expected −∂ℓ/∂p̂_{h'} at initialisation over the h candidates h' = 0..h-1 (``thm3-init-gradient``).

    Parameters
    ----------
    kernel : (d, d) kernel π, used both to generate the tree data and as σ(W_OV).
    parents : (H,) tree with H > h; only parents[:h+1] matter.
    h : the predicted position (0-based, h >= 1); there are h candidate parents.
    init : (d,) law μ₀ of x_0, default the stationary law (any law: stationarity is not assumed).
    method : "exact" sums over the d^(h+1) configurations of x_0..x_h with their exact probabilities and
        refuses d^(h+1) > 2e6 (``numerics.enumeration.MAX_SEQUENCES``); "monte-carlo" averages n sampled
        prefixes.
    n : number of Monte Carlo samples.
    rng : numpy Generator (required for "monte-carlo").
    denominator : "mixture" (π̄(x_h), the gradient itself) or "marginal" (the exact law P(x_h) in its place:
        the approximate form, whose expectation is (1/h) J(h'), :func:`chi2_gain`).

    Returns
    -------
    "exact": (h,) float64 array (sums to 0). "monte-carlo": an :class:`numerics.estimators.Estimate` whose
    ``.estimate`` and ``.stderr`` are (h,) arrays.
    """
    kernel, parents, h, init = _validate(kernel, parents, h, init)
    prefix = parents[: h + 1]
    if denominator not in ("mixture", "marginal"):
        raise ValueError(f"denominator must be 'mixture' or 'marginal'; got {denominator!r}")
    # (d,) P(x_h) for the approximate form
    law = None if denominator == "mixture" else marginal_unchecked(kernel, parents, h, _law_of_x0(kernel, init))
    if method == "exact":
        d = kernel.shape[0]
        if d ** (h + 1) > MAX_SEQUENCES:
            raise ValueError(
                f"method='exact' enumerates d**(h+1) configurations and refuses more than {MAX_SEQUENCES}; got "
                f"d={d}, h={h} (d**(h+1) = {d ** (h + 1)}). Use method='monte-carlo'."
            )
        return _exact_init_gradient(kernel, parents, h, _law_of_x0(kernel, init), law)
    if method == "monte-carlo":
        n = check_positive_int(n, "n", 2)
        rng = check_rng(rng)
        tokens = sample_chains_unchecked(kernel, prefix, n, rng, _law_of_x0(kernel, init))  # (n, h+1)
        return mean_estimate(init_gradient_samples(kernel, tokens, law))
    raise ValueError(f"method must be 'exact' or 'monte-carlo'; got {method!r}")


def _exact_init_gradient(kernel: np.ndarray, parents: np.ndarray, h: int, init: np.ndarray, law) -> np.ndarray:
    """The exact expectation of :func:`init_gradient` on validated arrays (``init`` a law, d^(h+1) within
    ``MAX_SEQUENCES``; ``law`` None for π̄ or P(x_h) for the approximate form): a sum over every x_0..x_h."""
    prefix = parents[: h + 1]
    tokens = all_sequences(kernel.shape[0], h + 1)  # (d**(h+1), h+1)
    total = np.zeros(h)
    for start in range(0, tokens.shape[0], _BLOCK):
        block = tokens[start:start + _BLOCK].astype(np.int64)  # (b, h+1)
        weights = np.exp(sequence_log_likelihood_unchecked(kernel, prefix, block, init))  # (b,)
        # impossible configurations (kernel or init zeros) may have π̄(x_h) = 0: they carry no weight
        possible = weights > 0
        total += weights[possible] @ init_gradient_samples(kernel, block[possible], law)  # (h,)
    return total


def chi2_gain(kernel, parents, h: int, init=None) -> np.ndarray:
    """J(h') = E[π(x_h | x_{h'}) / P(x_h)] − 1 for h' = 0..h-1, exactly from pairwise joints (``thm3-init-gradient``).

    With the marginal P(x_h) in place of π̄ the expected gradient is (1/h) J(h'); for the true parent
    J(pa(h)) = Σ P(a, b)² / (P(a) P(b)) − 1 = I_χ²(x_pa(h); x_h).

    Returns
    -------
    (h,) float64.
    """
    kernel, parents, h, init = _validate(kernel, parents, h, init)
    return _chi2_gain(kernel, parents, h, _law_of_x0(kernel, init))


def _chi2_gain(kernel: np.ndarray, parents: np.ndarray, h: int, init: np.ndarray) -> np.ndarray:
    """:func:`chi2_gain` on validated arrays (one tree with more than h positions, ``init`` a law)."""
    law_h = marginal_unchecked(kernel, parents, h, init)  # (d,)
    inv_law_h = np.divide(1.0, law_h, out=np.zeros_like(law_h), where=law_h > 0)
    gain = np.empty(h)
    for candidate in range(h):
        joint = pairwise_joint_unchecked(kernel, parents, candidate, h, init)  # (d, d): P(x_{h'} = a, x_h = b)
        gain[candidate] = (joint * kernel * inv_law_h[None, :]).sum() - 1.0
    return gain


def approximate_init_gradient(kernel, parents, h: int, init=None) -> np.ndarray:
    """(1/h) J(h'): the expected init gradient with P(x_h) in place of π̄ (``thm3-init-gradient``). (h,)"""
    return chi2_gain(kernel, parents, h, init) / h
