"""The factorised DAG posterior and predictive against their references on random instances (``ext-dag-posterior``).

References: Bayes over every DAG with the full likelihood (:mod:`numerics.dag_enumeration`) for k >= 2, and the
tree functions of :mod:`numerics.bma` for k = 1 (bit for bit). :func:`transposed_parent_order` is the planted
wrong kernel family of the controls (reading the parents in the wrong order).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from bma_verify.numerics.bma import bma_predictive, parent_posterior
from bma_verify.numerics.dag import (check_dag_kernels, dag_bma_predictive, dag_parent_posterior, random_dag_kernels,
                                     sample_dag_task)
from bma_verify.numerics.dag_enumeration import brute_force_dag_posterior, brute_force_dag_predictive
from bma_verify.numerics.task import random_kernel, sample_task


def transposed_parent_order(kernels) -> tuple:
    """The planted wrong kernel family: π_k with its first two parents swapped, π'(c | a, b, …) = π(c | b, a, …).

    Reading the parents in the wrong order is the natural bug of a set posterior (the encoding is
    first-parent-most-significant)."""
    kernels = check_dag_kernels(kernels)
    k, d = len(kernels), kernels[0].shape[1]
    if k < 2:
        raise ValueError("transposed_parent_order needs k >= 2 (two parents to swap)")
    top = kernels[-1].reshape((d,) * k + (d,))
    axes = list(range(k + 1))
    axes[0], axes[1] = 1, 0
    return kernels[:-1] + (np.ascontiguousarray(top.transpose(axes)).reshape(d**k, d),)


def dag_posterior_cases(rng: np.random.Generator, n_contexts: int, planted: Callable = transposed_parent_order
                        ) -> list[dict]:
    """Random DAG instances (d ∈ {2, 3}, k ∈ {2, 3}, H ∈ k+2..6, L ∈ 1..4) with the largest difference between the
    factorised and brute-force posterior and predictive, and of the posterior under ``planted(kernels)`` (the
    control's wrong kernel family) from the brute-force posterior."""
    cases = []
    for i in range(n_contexts):
        d = int(rng.integers(2, 4))
        k = int(rng.integers(2, 4))
        H = int(rng.integers(k + 2, 7)) if d == 2 else k + 2
        L = int(rng.integers(1, 5))
        kernels = random_dag_kernels(d, k, alpha=0.7, eps=0.02, rng=rng)
        init = None if i % 2 == 0 else rng.dirichlet(np.ones(d))
        batch = sample_dag_task(kernels, 1, L, H, rng=rng, init=init)
        context, query = batch.context[0], batch.query[0]
        brute = brute_force_dag_posterior(kernels, context, init)
        fast = dag_parent_posterior(kernels, context)
        wrong = dag_parent_posterior(planted(kernels), context)
        brute_pred = brute_force_dag_predictive(kernels, context, query, init)
        fast_pred = dag_bma_predictive(kernels, context, query, init)
        cases.append({"d": d, "k": k, "H": H, "L": L, "init": "stationary" if init is None else "non-stationary",
                      "posterior_error": float(np.abs(fast - brute).max()),
                      "predictive_error": float(np.abs(fast_pred - brute_pred).max()),
                      "planted_error": float(np.abs(wrong - brute).max())})
    return cases


def tree_bit_for_bit(rng: np.random.Generator, n_contexts: int) -> dict:
    """k = 1: ``dag_parent_posterior`` / ``dag_bma_predictive`` against ``parent_posterior`` / ``bma_predictive``
    with ``array_equal`` on random trees; returns the number of differing arrays and the largest difference."""
    mismatches, largest = 0, 0.0
    for i in range(n_contexts):
        d = int(rng.integers(2, 5))
        kernel = random_kernel(d, alpha=0.6, eps=0.01, rng=rng)
        init = None if i % 2 == 0 else rng.dirichlet(np.ones(d))
        batch = sample_task(kernel, 3, int(rng.integers(1, 8)), int(rng.integers(2, 9)), rng=rng, init=init)
        pairs = [(dag_parent_posterior((kernel,), batch.context), parent_posterior(kernel, batch.context)),
                 (dag_bma_predictive((kernel,), batch.context, batch.query, init),
                  bma_predictive(kernel, batch.context, batch.query, init))]
        for a, b in pairs:
            mismatches += int(not np.array_equal(a, b))
            largest = max(largest, float(np.abs(a - b).max()))
    return {"arrays_compared": 2 * n_contexts, "mismatches": mismatches, "max_abs_difference": largest}
