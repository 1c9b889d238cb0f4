"""Brute-force references for the foundation tests: enumerate every tree and every sequence.

These are deliberately naive (Python loops over all trees / all d^H sequences, the full likelihood
μ(x_0) Π_h π(x_h | x_pa(h)) with no factorisation), so they are independent of the vectorised code under test.
"""
from __future__ import annotations

import itertools

import numpy as np


def all_trees(H: int):
    """Every parent array on H positions ((H-1)! of them)."""
    for choice in itertools.product(*[range(h) for h in range(1, H)]):
        yield np.array((-1,) + choice)


def sequence_likelihood(kernel, init, parents, x) -> float:
    p = init[x[0]]
    for h in range(1, len(x)):
        p *= kernel[x[parents[h]], x[h]]
    return float(p)


def tree_posterior(kernel, init, context, query_prefix=None):
    """[(tree, posterior weight)] from Bayes' rule on the full likelihood of the context (and a query prefix)."""
    H = context.shape[-1]
    trees, weights = [], []
    for tree in all_trees(H):
        w = 1.0
        for x in context:
            w *= sequence_likelihood(kernel, init, tree, x)
        if query_prefix is not None:
            k = len(query_prefix)
            w *= init[query_prefix[0]] if k else 1.0
            for h in range(1, k):
                w *= kernel[query_prefix[tree[h]], query_prefix[h]]
        trees.append(tree)
        weights.append(w)
    weights = np.array(weights)
    return trees, weights / weights.sum()


def enumerated_parent_posterior(kernel, init, context) -> np.ndarray:
    H = context.shape[-1]
    trees, post = tree_posterior(kernel, init, context)
    out = np.zeros((H, H))
    for tree, w in zip(trees, post):
        for h in range(1, H):
            out[h, tree[h]] += w
    return out


def enumerated_predictive(kernel, init, context, query) -> np.ndarray:
    """P(x^{L+1}_h = s | context, x^{L+1}_{<h}) by enumerating trees with the query prefix in the likelihood."""
    H, d = context.shape[-1], kernel.shape[0]
    out = np.zeros((H, d))
    out[0] = init
    for h in range(1, H):
        trees, post = tree_posterior(kernel, init, context, query_prefix=query[:h])
        for tree, w in zip(trees, post):
            out[h] += w * kernel[query[tree[h]]]
    return out


def enumerated_joint(kernel, init, parents, i: int, j: int) -> np.ndarray:
    """P(x_i, x_j) by summing the full likelihood over all d^H sequences."""
    d, H = kernel.shape[0], len(parents)
    joint = np.zeros((d, d))
    for x in itertools.product(range(d), repeat=H):
        joint[x[i], x[j]] += sequence_likelihood(kernel, init, parents, x)
    return joint
