"""Hypothesis strategies for kernels, trees, laws, contexts and joint distributions (public API).

Use them in your own property tests::

    from hypothesis import given
    from bma_verify.numerics import strategies as bst

    @given(bst.instances(min_eps=0.01))
    def test_something(instance):
        kernel, parents, init = instance
        ...

Every strategy shrinks towards small, simple instances (d = 2, short trees, uniform rows), so a failure is
reported on the smallest instance Hypothesis can find.
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


@st.composite
def kernels(draw, min_d: int = 2, max_d: int = 5, min_eps: float = 0.0, max_eps: float | None = None,
            d: int | None = None) -> np.ndarray:
    """Row-stochastic (d, d) kernels with every entry >= eps, eps drawn in [min_eps, max_eps].

    ``max_eps`` defaults to 1/(2d); pass ``d`` to fix the size. The kernel is (1 − d·eps)·P + eps with P's rows
    drawn as normalised weights.
    """
    d = draw(st.integers(min_d, max_d)) if d is None else d
    hi = 0.5 / d if max_eps is None else min(max_eps, 1.0 / d)
    if min_eps > hi:
        raise ValueError(f"min_eps must be <= max_eps (and <= 1/d = {1.0 / d:.4g}), got {min_eps} > {hi}")
    eps = draw(st.floats(min_value=min_eps, max_value=hi)) if hi > min_eps else min_eps
    weights = np.array(draw(st.lists(st.lists(_WEIGHT, min_size=d, max_size=d), min_size=d, max_size=d)))
    P = _normalise_rows(weights)
    kernel = (1.0 - d * eps) * P + eps
    return kernel / kernel.sum(axis=1, keepdims=True)


@st.composite
def parent_trees(draw, min_H: int = 2, max_H: int = 8, H: int | None = None) -> np.ndarray:
    """Trees as parent arrays: parents[0] = -1, parents[h] in 0..h-1.

    Shrinking drives every parents[h] to 0 (the star rooted at 0), the simplest tree.
    """
    H = draw(st.integers(min_H, max_H)) if H is None else H
    parents = [-1] + [draw(st.integers(0, h - 1)) for h in range(1, H)]
    return np.asarray(parents, dtype=np.int64)


@st.composite
def init_distributions(draw, d: int, min_mass: float = 0.0) -> np.ndarray:
    """Probability vectors of length d with every entry >= min_mass (min_mass <= 1/d)."""
    weights = np.array(draw(st.lists(_WEIGHT, min_size=d, max_size=d)))
    p = _normalise_rows(weights[None, :])[0]
    p = (1.0 - d * min_mass) * p + min_mass
    return p / p.sum()


@st.composite
def joint_distributions(draw, min_d: int = 2, max_d: int = 5) -> np.ndarray:
    """Joint laws P[x, y] of shape (m, n), m and n drawn in [min_d, max_d], summing to one."""
    m = draw(st.integers(min_d, max_d))
    n = draw(st.integers(min_d, max_d))
    weights = np.array(draw(st.lists(_WEIGHT, min_size=m * n, max_size=m * n))).reshape(1, m * n)
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
    init = None if use_stationary else draw(init_distributions(kernel.shape[0]))
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
