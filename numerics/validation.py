"""Argument checks for the public functions of ``numerics`` (and of ``theory``, ``model`` and ``reports``, which
validate their inputs with the same rules).

It offers ``check_rng``, ``check_positive_int``, ``finite_float_array``, ``check_kernel`` (and
``check_single_kernel``), ``check_distribution``, ``check_init``, ``check_joint``, ``check_parents`` and
``check_tokens``, with ``SUM_TOL``, the tolerance on "sums to one". Each checker returns the validated value (arrays
as float64 or int64) or raises ``ValueError`` naming the argument, what was expected, and what was received.

Public functions validate their arguments once, at the boundary, and hand the validated arrays to helpers that
trust them: a module's own helpers carry a leading underscore; a helper that other modules call is public and ends
in ``_unchecked`` (``task.stationary_distribution_unchecked``), saying that it checks nothing.
"""
from __future__ import annotations

import numbers

import numpy as np

#: Tolerance on "sums to one" for kernels, laws and joints.
SUM_TOL = 1e-9


def check_rng(rng, name: str = "rng") -> np.random.Generator:
    """``rng`` itself, if it is a ``numpy.random.Generator`` (a seed or ``None`` is refused: every draw is explicit)."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"{name} must be a numpy.random.Generator (e.g. numpy.random.default_rng(0)), got {type(rng).__name__}"
        )
    return rng


def check_positive_int(value, name: str, minimum: int = 1) -> int:
    """``value`` as an ``int``, if it is an integer (NumPy's included, ``bool`` not) at or above ``minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def finite_float_array(x, name: str) -> np.ndarray:
    """``x`` as a float64 array of finite numbers (any shape); ``ValueError`` naming ``name`` otherwise."""
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of real numbers: {exc}") from None
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain only finite numbers (found NaN or inf)")
    return arr


def check_kernel(kernel, name: str = "kernel", *, single: bool = False) -> np.ndarray:
    """A (..., d, d) row-stochastic matrix with d >= 2: ``kernel[i, j] = π(j | i)``; ``single``: exactly (d, d)."""
    arr = finite_float_array(kernel, name)
    if arr.ndim < 2 or arr.shape[-1] != arr.shape[-2]:
        raise ValueError(f"{name} must be a square (d, d) matrix (optionally with leading batch axes), got shape {arr.shape}")
    if arr.shape[-1] < 2:
        raise ValueError(f"{name} must have d >= 2 states, got d = {arr.shape[-1]}")
    if np.any(arr < 0):
        raise ValueError(f"{name} must have non-negative entries (found min {arr.min():.3g})")
    rows = arr.sum(axis=-1)
    if np.any(np.abs(rows - 1.0) > SUM_TOL):
        worst = float(np.max(np.abs(rows - 1.0)))
        raise ValueError(f"{name} must be row-stochastic (each row sums to 1: kernel[i, j] = π(j | i)); "
                         f"worst row sum is off by {worst:.3g}")
    if single:
        check_single_kernel(arr, name)
    return arr


def check_single_kernel(kernel: np.ndarray, name: str = "kernel") -> np.ndarray:
    """``kernel`` (already validated by :func:`check_kernel`) is one (d, d) matrix, not a batch."""
    if kernel.ndim != 2:
        raise ValueError(f"{name} must be a single (d, d) matrix, got shape {kernel.shape}")
    return kernel


def check_distribution(p, name: str) -> np.ndarray:
    """A (..., m) float64 array of probability vectors: non-negative, each summing to 1 within ``SUM_TOL``."""
    arr = finite_float_array(p, name)
    if arr.ndim < 1:
        raise ValueError(f"{name} must be a 1-D probability vector, got a scalar")
    if np.any(arr < 0):
        raise ValueError(f"{name} must have non-negative entries (found min {arr.min():.3g})")
    if np.any(np.abs(arr.sum(axis=-1) - 1.0) > SUM_TOL):
        raise ValueError(f"{name} must sum to 1 (sums to {arr.sum(axis=-1)})")
    return arr


def check_init(init, d: int, name: str = "init") -> np.ndarray:
    """A probability vector of length d (the law μ₀ of the first token)."""
    arr = check_distribution(init, name)
    if arr.shape != (d,):
        raise ValueError(f"{name} must be a probability vector of length d = {d}, got shape {arr.shape}")
    return arr


def check_joint(joint, name: str = "joint") -> np.ndarray:
    """A (..., m, n) joint distribution: non-negative, each trailing matrix sums to 1."""
    arr = finite_float_array(joint, name)
    if arr.ndim < 2:
        raise ValueError(f"{name} must be a 2-D joint distribution P[x, y] (optionally batched), got shape {arr.shape}")
    if np.any(arr < 0):
        raise ValueError(f"{name} must have non-negative entries (found min {arr.min():.3g})")
    total = arr.sum(axis=(-2, -1))
    if np.any(np.abs(total - 1.0) > SUM_TOL):
        raise ValueError(f"{name} must sum to 1 over its last two axes (sums to {np.asarray(total).ravel()[:3]})")
    return arr


def integer_array(value, name: str, what: str = "an integer array") -> np.ndarray:
    """``value`` as an int64 array: integer dtypes as they are, floats only when every entry is a finite whole
    number; anything else raises ValueError naming ``name`` and what it must be."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(np.isfinite(arr))
                                           and np.all(arr == np.round(arr))):
        raise ValueError(f"{name} must be {what}, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def check_parents(parents, H: int | None = None, name: str = "parents", *, single: bool = False) -> np.ndarray:
    """A (..., H) int array: parents[..., 0] = -1 and 0 <= parents[..., h] < h (a tree rooted at position 0).

    ``single``: exactly one tree, shape (H,)."""
    arr = integer_array(parents, name)
    if single and arr.ndim != 1:
        raise ValueError(f"{name} must be one tree of shape (H,), got shape {arr.shape}")
    if arr.ndim < 1:
        raise ValueError(f"{name} must be a 1-D array of length H, got a scalar")
    if arr.shape[-1] < 2:
        raise ValueError(f"{name} must have length H >= 2, got H = {arr.shape[-1]}")
    if H is not None and arr.shape[-1] != H:
        raise ValueError(f"{name} must have length H = {H} (matching the tokens), got {arr.shape[-1]}")
    positions = np.arange(arr.shape[-1])
    wrong = np.where(positions == 0, arr != -1, (arr < 0) | (arr >= positions))
    if np.any(wrong):  # the first wrong entry, by its index and value, and the rule it breaks
        index = tuple(int(i) for i in np.argwhere(wrong)[0])
        h, value = index[-1], int(arr[index])
        rule = "must be -1" if h == 0 else ("must be >= 0" if value < 0 else f"must be < {h}")
        raise ValueError(f"{name}[{', '.join(map(str, index))}] = {value} {rule}: a tree over earlier positions has "
                         f"{name}[0] = -1 (the root) and 0 <= {name}[h] < h for h >= 1")
    return arr


def check_tokens(x, d: int, name: str, min_ndim: int = 1) -> np.ndarray:
    """An int array of tokens in {0, ..., d-1} with at least ``min_ndim`` axes."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer array of tokens in 0..{d - 1}, got dtype {arr.dtype}")
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} axes, got shape {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= d):
        raise ValueError(f"{name} must hold tokens in 0..{d - 1} (d = {d}), found {arr.min()}..{arr.max()}")
    return arr.astype(np.int64)
