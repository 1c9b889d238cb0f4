"""Hypothesis strategies for kernels, trees, laws, contexts and joint distributions (public API).

Use them in your own property tests::

    from hypothesis import given
    from bma_verify.numerics import strategies as bst

    @given(bst.instances())
    def test_something(instance):
        kernel, parents, init = instance
        ...

By default the strategies draw what the theorems speak about: kernels with every entry >= ε > 0 (so a unique
stationary law) whose rows differ (δ(π) >= :data:`MIN_DOBRUSHIN`: information flows), and laws μ₀ with full
support. ``degenerate=True`` draws the whole space instead (zero entries, reducible and uniform kernels, point
masses), where the strict inequalities of the paper may be ties; even then ``init`` is None only with a kernel
whose stationary law is unique.

Every strategy shrinks towards small, simple instances (d = 2, short trees, simple rows), so a failure is
reported on the smallest instance Hypothesis can find. To that end the sizes are drawn first and the draws after
them keep one layout whatever the size (weights for max_d states, of which the last d are used; parent choices for
max_H positions, of which the first H are used): Hypothesis can then shrink d or H alone without the later values
changing meaning.
"""
from __future__ import annotations

from math import comb

import numpy as np
from hypothesis import strategies as st

from bma_verify.numerics.contraction import dobrushin_coefficients
from bma_verify.numerics.dag import parent_sets_from_choices
from bma_verify.numerics.task import stationary_distribution

#: Raw weights: exact zeros (impossible transitions) or numbers in [1e-6, 1]; rows are normalised afterwards.
#: Subnormal weights are excluded on purpose: they test floating-point underflow, not the mathematics.
_WEIGHT = st.one_of(st.just(0.0), st.floats(min_value=1e-6, max_value=1.0))


#: The default floors ε and min_mass are this share of mass spread uniformly, divided by d (0.01 at d = 5): bounded
#: away from 0, and valid for every d (both must stay below 1/(2d) and 1/d).
DEFAULT_FLOOR_TIMES_D = 0.05
#: Non-degenerate kernels have δ(π) >= this: I(x_h; x_pa(h)) is then far above the rounding of I (~1e-16 nats), so
#: a strict inequality of the paper is not decided by rounding.
MIN_DOBRUSHIN = 0.05


def _floor(value: float | None, d: int, name: str, degenerate: bool) -> float:
    """The lower bound ``name`` (min_eps or min_mass): its default when None, and > 0 unless degenerate."""
    if value is None:
        return 0.0 if degenerate else DEFAULT_FLOOR_TIMES_D / d
    if not degenerate and not value > 0.0:
        raise ValueError(f"{name} must be > 0 (the theorems assume it), got {value}; pass degenerate=True to draw "
                         "degenerate instances")
    return value


def _is_informative(kernel: np.ndarray) -> bool:
    return float(dobrushin_coefficients(kernel)) >= MIN_DOBRUSHIN


def _has_unique_stationary_law(kernel: np.ndarray) -> bool:
    # the criterion of stationary_distribution itself, so that a test passing init=None never meets its ValueError
    try:
        stationary_distribution(kernel)
    except ValueError:
        return False
    return True


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


def kernels(min_d: int = 2, max_d: int = 5, min_eps: float | None = None, max_eps: float | None = None,
            d: int | None = None, degenerate: bool = False) -> st.SearchStrategy:
    """Row-stochastic (d, d) kernels with every entry >= eps, eps drawn in [min_eps, max_eps].

    ``min_eps`` defaults to 0.05/d and ``max_eps`` to 1/(2d); pass ``d`` to fix the size. The kernel is
    (1 − d·eps)·P + eps with P's rows drawn as normalised weights; draws with δ(π) < :data:`MIN_DOBRUSHIN` (rows
    nearly equal: no information flows) are rejected. ``degenerate=True`` allows min_eps = 0 (its default then:
    zero entries, reducible kernels) and keeps uninformative kernels. Shrinks towards d = min_d, eps = min_eps and
    the simplest rows.
    """
    drawn = _kernel_draws(min_d, max_d, min_eps, max_eps, d, degenerate)
    return drawn if degenerate else drawn.filter(_is_informative)


@st.composite
def _kernel_draws(draw, min_d: int, max_d: int, min_eps: float | None, max_eps: float | None, d: int | None,
                  degenerate: bool) -> np.ndarray:
    widest = max_d if d is None else d  # a fixed d never shrinks: no padding needed
    d = _size(draw, min_d, max_d, d)
    low = _floor(min_eps, d, "min_eps", degenerate)
    hi = 0.5 / d if max_eps is None else min(max_eps, 1.0 / d)
    if low > hi:
        raise ValueError(f"min_eps must be <= max_eps (and <= 1/d = {1.0 / d:.4g}), got {low} > {hi}")
    if not degenerate and 1.0 - d * low < MIN_DOBRUSHIN:  # δ(π) <= 1 − d·eps (Doeblin): nothing informative left
        raise ValueError(f"min_eps must be <= (1 − {MIN_DOBRUSHIN})/d = {(1 - MIN_DOBRUSHIN) / d:.4g} for an "
                         f"informative kernel, got {low}; pass degenerate=True to draw uninformative kernels")
    eps = _fraction(draw, low, hi)
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
def init_distributions(draw, d: int, min_mass: float | None = None, max_d: int | None = None,
                       degenerate: bool = False) -> np.ndarray:
    """Probability vectors of length d with every entry >= min_mass (default 0.05/d; <= 1/d); shrinks to uniform.

    ``max_d`` (>= d) draws weights for max_d states and uses the last d, so that d can shrink alone.
    ``degenerate=True`` allows min_mass = 0 (its default then: laws without full support, point masses).
    """
    min_mass = _floor(min_mass, d, "min_mass", degenerate)
    if min_mass > 1.0 / d:
        raise ValueError(f"min_mass must be <= 1/d = {1.0 / d:.4g}, got {min_mass}")
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
def instances(draw, min_d: int = 2, max_d: int = 5, min_H: int = 2, max_H: int = 8, min_eps: float | None = None,
              max_eps: float | None = None, stationary: bool | None = None, min_mass: float | None = None,
              degenerate: bool = False):
    """(kernel, parents, init) triples; ``init`` is None (stationary) or a drawn law.

    ``stationary=True`` always gives None, ``False`` always a drawn law, ``None`` either. The kernel is drawn by
    :func:`kernels` (``min_eps``, ``max_eps``), the law by :func:`init_distributions` (``min_mass``);
    ``degenerate=True`` passes on to both, and ``init`` is then None only with a kernel whose stationary law is
    unique (the law None stands for).
    """
    use_stationary = draw(st.booleans()) if stationary is None else stationary
    kernel_strategy = kernels(min_d=min_d, max_d=max_d, min_eps=min_eps, max_eps=max_eps, degenerate=degenerate)
    if degenerate and use_stationary:
        kernel_strategy = kernel_strategy.filter(_has_unique_stationary_law)
    kernel = draw(kernel_strategy)
    parents = draw(parent_trees(min_H=min_H, max_H=max_H))
    init = None if use_stationary else draw(init_distributions(kernel.shape[0], min_mass=min_mass, max_d=max_d,
                                                               degenerate=degenerate))
    return kernel, parents, init


# ----------------------------------------------------------------------------------------------------------
# The k-parent DAG task (our extension, claims ext-dag-*; see numerics.dag)


def dag_kernel_families(min_d: int = 2, max_d: int = 3, min_k: int = 1, max_k: int = 2,
                        min_eps: float | None = None, max_eps: float | None = None, d: int | None = None,
                        k: int | None = None, degenerate: bool = False) -> st.SearchStrategy:
    """Kernel families (π_1, ..., π_k) of the DAG task: π_m of shape (d**m, d), every entry >= eps.

    Options: ``d`` / ``k`` fix the number of states / the order (else drawn in [min_d, max_d] / [min_k, max_k]);
    eps is drawn in [min_eps, max_eps] (defaults 0.05/d and 1/(2d)) and shared by all orders; each table is
    (1 − d·eps)·P + eps with P's rows normalised weights (as :func:`kernels`), and families with a table of
    δ < :data:`MIN_DOBRUSHIN` are rejected. ``degenerate=True`` allows min_eps = 0 (its default then) and keeps
    uninformative tables. Shrinks towards d = 2, k = min_k, uniform rows.
    """
    drawn = _dag_kernel_draws(min_d, max_d, min_k, max_k, min_eps, max_eps, d, k, degenerate)
    return drawn if degenerate else drawn.filter(lambda tables: all(_is_informative(t) for t in tables))


@st.composite
def _dag_kernel_draws(draw, min_d: int, max_d: int, min_k: int, max_k: int, min_eps: float | None,
                      max_eps: float | None, d: int | None, k: int | None, degenerate: bool) -> tuple:
    d = draw(st.integers(min_d, max_d)) if d is None else d
    k = draw(st.integers(min_k, max_k)) if k is None else k
    low = _floor(min_eps, d, "min_eps", degenerate)
    hi = 0.5 / d if max_eps is None else min(max_eps, 1.0 / d)
    if low > hi:
        raise ValueError(f"min_eps must be <= max_eps (and <= 1/d = {1.0 / d:.4g}), got {low} > {hi}")
    eps = draw(st.floats(min_value=low, max_value=hi)) if hi > low else low
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
                  max_H: int = 6, min_eps: float | None = None, max_eps: float | None = None,
                  stationary: bool | None = None, min_mass: float | None = None, degenerate: bool = False):
    """(kernels, parent_sets, init) triples of the DAG task; ``init`` None (the stationary law of π_1) or a law.

    ``stationary=True`` always gives None, ``False`` always a drawn law, ``None`` either. The other options are
    those of :func:`dag_kernel_families`, :func:`dag_parent_sets` and :func:`init_distributions`; with
    ``degenerate=True``, ``init`` is None only when π_1 has a unique stationary law.
    """
    use_stationary = draw(st.booleans()) if stationary is None else stationary
    families = dag_kernel_families(min_d=min_d, max_d=max_d, min_k=min_k, max_k=max_k, min_eps=min_eps,
                                   max_eps=max_eps, degenerate=degenerate)
    if degenerate and use_stationary:
        families = families.filter(lambda tables: _has_unique_stationary_law(tables[0]))
    kernels = draw(families)
    parent_sets = draw(dag_parent_sets(len(kernels), min_H=min_H, max_H=max_H))
    init = None if use_stationary else draw(init_distributions(kernels[0].shape[1], min_mass=min_mass,
                                                               degenerate=degenerate))
    return kernels, parent_sets, init
