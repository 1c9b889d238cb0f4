"""Hypothesis strategies for kernels, trees, laws, contexts and joint distributions (public API).

Use them in your own property tests::

    from hypothesis import given
    from bma_verify.numerics import strategies as bst

    @given(bst.instances(min_eps=0.01))
    def test_something(instance):
        kernel, parents, init = instance
        ...

Every strategy shrinks towards small, simple instances (d = 2, short trees, uniform rows), so a failure is
reported on the smallest instance Hypothesis can find. To that end the sizes are drawn first and the draws after
them keep one layout whatever the size (weights for max_d states, of which the last d are used; parent choices for
max_H positions, of which the first H are used): Hypothesis can then shrink d or H alone without the later values
changing meaning.
"""
from __future__ import annotations

from math import comb

import numpy as np
from hypothesis import strategies as st

from bma_verify.numerics.dag import parent_sets_from_choices

#: Raw weights: exact zeros (impossible transitions) or numbers in [1e-6, 1]; rows are normalised afterwards.
#: Subnormal weights are excluded on purpose: they test floating-point underflow, not the mathematics.
_WEIGHT = st.one_of(st.just(0.0), st.floats(min_value=1e-6, max_value=1.0))


def _normalise_rows(weights: np.ndarray) -> np.ndarray:
    sums = weights.sum(axis=-1, keepdims=True)
    uniform = np.full_like(weights, 1.0 / weights.shape[-1])
    return np.where(sums > 1e-12, weights / np.where(sums > 1e-12, sums, 1.0), uniform)


#: Up to this many states the weights are drawn for max_d states whatever d (the layout that lets d shrink alone);
#: beyond it, for d states only (max_d² weights per example would slow every draw). The same for max_H positions.
PADDED_MAX_D = 8
PADDED_MAX_H = 32


def _size(draw, low: int, high: int, fixed: int | None) -> int:
    return draw(st.integers(low, high)) if fixed is None else fixed


def _fraction(draw, low: float, high: float) -> float:
    """A number in [low, high] drawn as a fraction of the interval: it shrinks to ``low`` and keeps its meaning
    when ``high`` changes with a shrunk size."""
    return low if high <= low else low + draw(st.floats(0.0, 1.0)) * (high - low)


def _weights(draw, rows: int, cols: int, max_rows: int, max_cols: int) -> np.ndarray:
    """(rows, cols) raw weights: the bottom-right block of a (max_rows, max_cols) draw when that is small enough.

    Bottom-right because Hypothesis' shrinker zeroes the weights a failure does not need and moves the others
    towards the end of the draw: they stay inside the block as d shrinks (measured against the top-left block
    and a draw of d × d weights: docs/notes/search-counterexamples.md)."""
    padded = max_rows * max_cols <= PADDED_MAX_D**2
    shape = (max_rows, max_cols) if padded else (rows, cols)
    flat = draw(st.lists(_WEIGHT, min_size=shape[0] * shape[1], max_size=shape[0] * shape[1]))
    return np.array(flat, dtype=np.float64).reshape(shape)[shape[0] - rows:, shape[1] - cols:]


@st.composite
def kernels(draw, min_d: int = 2, max_d: int = 5, min_eps: float = 0.0, max_eps: float | None = None,
            d: int | None = None) -> np.ndarray:
    """Row-stochastic (d, d) kernels with every entry >= eps, eps drawn in [min_eps, max_eps].

    ``max_eps`` defaults to 1/(2d); pass ``d`` to fix the size. The kernel is (1 − d·eps)·P + eps with P's rows
    drawn as normalised weights. Shrinks towards d = min_d, eps = min_eps and uniform rows.
    """
    widest = max_d if d is None else d  # a fixed d never shrinks: no padding needed
    d = _size(draw, min_d, max_d, d)
    hi = 0.5 / d if max_eps is None else min(max_eps, 1.0 / d)
    if min_eps > hi:
        raise ValueError(f"min_eps must be <= max_eps (and <= 1/d = {1.0 / d:.4g}), got {min_eps} > {hi}")
    eps = _fraction(draw, min_eps, hi)
    P = _normalise_rows(_weights(draw, d, d, widest, widest))
    kernel = (1.0 - d * eps) * P + eps
    return kernel / kernel.sum(axis=1, keepdims=True)


@st.composite
def parent_trees(draw, min_H: int = 2, max_H: int = 8, H: int | None = None) -> np.ndarray:
    """Trees as parent arrays: parents[0] = -1, parents[h] in 0..h-1.

    Shrinking drives H to min_H and every parents[h] to 0 (the star rooted at 0), the simplest tree.
    """
    drawn = max_H if H is None and max_H <= PADDED_MAX_H else None  # one layout whatever H, when H can shrink
    H = _size(draw, min_H, max_H, H)
    choices = [draw(st.integers(0, h - 1)) for h in range(1, drawn or H)]
    return np.asarray([-1] + choices[:H - 1], dtype=np.int64)


@st.composite
def init_distributions(draw, d: int, min_mass: float = 0.0, max_d: int | None = None) -> np.ndarray:
    """Probability vectors of length d with every entry >= min_mass (min_mass <= 1/d); shrinks to uniform.

    ``max_d`` (>= d) draws weights for max_d states and uses the last d, so that d can shrink alone.
    """
    weights = _weights(draw, 1, d, 1, d if max_d is None else max(d, max_d))
    p = _normalise_rows(weights)[0]
    p = (1.0 - d * min_mass) * p + min_mass
    return p / p.sum()


@st.composite
def joint_distributions(draw, min_d: int = 2, max_d: int = 5) -> np.ndarray:
    """Joint laws P[x, y] of shape (m, n), m and n drawn in [min_d, max_d], summing to one."""
    m = draw(st.integers(min_d, max_d))
    n = draw(st.integers(min_d, max_d))
    weights = _weights(draw, m, n, max_d, max_d).reshape(1, m * n)
    return _normalise_rows(weights)[0].reshape(m, n)


def contexts(d: int, H: int, min_L: int = 0, max_L: int = 6):
    """Token arrays of shape (L, H) with entries in 0..d-1 (any tokens: pair them with a positive kernel)."""
    return st.integers(min_L, max_L).flatmap(
        lambda L: st.lists(st.lists(st.integers(0, d - 1), min_size=H, max_size=H), min_size=L, max_size=L)
        .map(lambda rows: np.asarray(rows, dtype=np.int64).reshape(L, H)))


@st.composite
def instances(draw, min_d: int = 2, max_d: int = 5, min_H: int = 2, max_H: int = 8, min_eps: float = 0.0,
              max_eps: float | None = None, stationary: bool | None = None):
    """(kernel, parents, init) triples; ``init`` is None (stationary) or a drawn law.

    ``stationary=True`` always gives None, ``False`` always a drawn law, ``None`` either.
    """
    kernel = draw(kernels(min_d=min_d, max_d=max_d, min_eps=min_eps, max_eps=max_eps))
    parents = draw(parent_trees(min_H=min_H, max_H=max_H))
    use_stationary = draw(st.booleans()) if stationary is None else stationary
    init = None if use_stationary else draw(init_distributions(kernel.shape[0], max_d=max_d))
    return kernel, parents, init


# ----------------------------------------------------------------------------------------------------------
# The k-parent DAG task (our extension, claims ext-dag-*; see numerics.dag)


@st.composite
def dag_kernel_families(draw, min_d: int = 2, max_d: int = 3, min_k: int = 1, max_k: int = 2,
                        min_eps: float = 0.0, max_eps: float | None = None, d: int | None = None,
                        k: int | None = None) -> tuple:
    """Kernel families (π_1, ..., π_k) of the DAG task: π_m of shape (d**m, d), every entry >= eps.

    Options: ``d`` / ``k`` fix the number of states / the order (else drawn in [min_d, max_d] / [min_k, max_k]);
    eps is drawn in [min_eps, max_eps] (max_eps defaults to 1/(2d)) and shared by all orders; each table is
    (1 − d·eps)·P + eps with P's rows normalised weights (as :func:`kernels`). Shrinks towards d = 2, k = min_k,
    uniform rows.
    """
    d = draw(st.integers(min_d, max_d)) if d is None else d
    k = draw(st.integers(min_k, max_k)) if k is None else k
    hi = 0.5 / d if max_eps is None else min(max_eps, 1.0 / d)
    if min_eps > hi:
        raise ValueError(f"min_eps must be <= max_eps (and <= 1/d = {1.0 / d:.4g}), got {min_eps} > {hi}")
    eps = draw(st.floats(min_value=min_eps, max_value=hi)) if hi > min_eps else min_eps
    tables = []
    for m in range(1, k + 1):
        rows = d**m
        weights = np.array(draw(st.lists(st.lists(_WEIGHT, min_size=d, max_size=d), min_size=rows, max_size=rows)))
        table = (1.0 - d * eps) * _normalise_rows(weights) + eps
        tables.append(table / table.sum(axis=1, keepdims=True))
    return tuple(tables)


@st.composite
def dag_parent_sets(draw, k: int, min_H: int | None = None, max_H: int = 6, H: int | None = None) -> np.ndarray:
    """DAGs as (H, k) parent-set arrays (``numerics.check_parent_sets``); H in [max(min_H, k + 1), max_H].

    Each position h >= k picks one of its C(h, k) candidates (colex order); shrinks to S_h = {0, ..., k−1}.
    """
    low = k + 1 if min_H is None else max(min_H, k + 1)
    H = draw(st.integers(low, max(low, max_H))) if H is None else H
    choices = [draw(st.integers(0, comb(h, k) - 1)) for h in range(k, H)]
    return parent_sets_from_choices(np.asarray(choices, dtype=np.int64), H, k)


@st.composite
def dag_instances(draw, min_d: int = 2, max_d: int = 3, min_k: int = 1, max_k: int = 2, min_H: int | None = None,
                  max_H: int = 6, min_eps: float = 0.0, max_eps: float | None = None,
                  stationary: bool | None = None):
    """(kernels, parent_sets, init) triples of the DAG task; ``init`` None (the stationary law of π_1) or a law.

    ``stationary=True`` always gives None, ``False`` always a drawn law, ``None`` either. The other options are
    those of :func:`dag_kernel_families` and :func:`dag_parent_sets`.
    """
    kernels = draw(dag_kernel_families(min_d=min_d, max_d=max_d, min_k=min_k, max_k=max_k, min_eps=min_eps,
                                       max_eps=max_eps))
    parent_sets = draw(dag_parent_sets(len(kernels), min_H=min_H, max_H=max_H))
    use_stationary = draw(st.booleans()) if stationary is None else stationary
    init = None if use_stationary else draw(init_distributions(kernels[0].shape[1]))
    return kernels, parent_sets, init
