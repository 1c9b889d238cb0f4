"""Which α of Lemma 3 is proved, step by step (``lemma3-strict-dpi``; ours).

For h' < h, h' ≠ pa(h), x_h − x_pa − x_{h'} is a Markov chain (h is a leaf of the tree cut at h), so with T the
channel x_pa → x_{h'} (T(a|b) = P(x_{h'} = a | x_pa = b)) and π ≥ ε:

1. SDPI:             I(x_h; x_{h'}) ≤ η_KL(P(x_pa), T)·I(x_h; x_pa) ≤ δ(T)·I(x_h; x_pa);
2. submultiplicative: T is a product of one-step channels along the tree path from pa to h'; its first step F is π
   when h' descends from pa, else the reverse step R(a|b) = P(x_g = a)π(b|a)/P(x_pa = b) to g = pa's parent; so
   δ(T) ≤ δ(F);
3. Doeblin minorisation: δ(F) ≤ 1 − Σ_y min_x F(y|x);
4. uniform bound:    Σ_y min_x π(y|x) ≥ dε and Σ_a min_b R(a|b) ≥ ε/max_b P(x_pa = b) ≥ ε/(1 − (d − 1)ε), so
   α* = 1 − ε/(1 − (d − 1)ε) < 1 bounds the ratio for every pair and every μ₀ (α* ≥ 1 − dε, with equality only
   when dε = 1).

δ(π) is proved by 1–2 whenever h' is not an ancestor of pa (the path then holds a forward π step); the Doeblin
bound 1 − dε is proved the same way for those pairs, and only observed for ancestor pairs under a non-stationary
μ₀ (their first step is a reverse channel, whose minorisation can be as weak as ε/(1 − (d − 1)ε)).
"""
from __future__ import annotations

import numpy as np

from bma_verify.numerics.validation import check_init, check_kernel, check_parents, check_positive_int, check_rng
from bma_verify.numerics.information import (dobrushin_coefficient, lowest_common_ancestor, mutual_information,
                                             pairwise_joint)
from bma_verify.numerics.task import random_tree_instance, stationary_distribution

#: Slacks of :func:`alpha_chain` (each ≥ 0 when its step holds).
STEPS = ("sdpi_slack", "submultiplicative_slack", "minorisation_slack", "uniform_slack")
#: A pair enters the ratio only when I(x_h; x_pa) is at least this (nats): below it the ratio is rounding.
MI_FLOOR = 1e-12
#: Ranges of :func:`alpha_chain_sweep`: d, H (inclusive) and d·min π.
ALPHA_RANGES = {"d": (2, 4), "H": (3, 7), "eps_times_d": (0.02, 0.6)}


def proved_alpha(kernel) -> float:
    """α* = 1 − ε/(1 − (d − 1)ε), ε = min π: Lemma 3's α proved for every pair and every μ₀ (ours). < 1 iff ε > 0."""
    kernel = check_kernel(kernel, single=True)
    eps, d = float(kernel.min()), kernel.shape[0]
    return 1.0 - eps / (1.0 - (d - 1) * eps)


def first_step(kernel, parents, h_prime: int, parent: int, init) -> tuple[np.ndarray, str]:
    """The first one-step channel on the tree path x_pa → x_{h'}: π (h' descends from pa) or the reverse step to
    pa's parent, R[b, a] = P(x_g = a | x_pa = b). Returns (channel (d, d), "kernel" | "reverse")."""
    if lowest_common_ancestor(parents, parent, h_prime) == parent:
        return kernel, "kernel"
    joint = pairwise_joint(kernel, parents, parent, int(parents[parent]), init)  # (x_pa, x_g)
    return joint / joint.sum(axis=1, keepdims=True), "reverse"


def alpha_chain(kernel, parents, h: int, h_prime: int, init=None) -> dict:
    """Every step of the proof of α* for the pair (h, h') (``lemma3-strict-dpi``).

    Returns
    -------
    dict: ``ratio`` I(x_h; x_{h'})/I(x_h; x_pa) (NaN when I(x_h; x_pa) < MI_FLOOR), ``delta_channel`` δ(T),
    ``first`` ("kernel" or "reverse"), ``delta_first`` δ(F), ``minorisation`` 1 − Σ_y min_x F(y|x), ``alpha_proved``
    α*, ``dobrushin`` δ(π), ``doeblin`` 1 − dε, ``relation`` of h' to pa ("ancestor", "descendant", "other"), and the
    slacks of :data:`STEPS`: δ(T) − ratio, δ(F) − δ(T), minorisation − δ(F), α* − minorisation.
    """
    kernel = check_kernel(kernel, single=True)
    parents = check_parents(parents, single=True)
    init = stationary_distribution(kernel) if init is None else check_init(init, kernel.shape[0])
    parent = int(parents[h])
    if not 0 <= h_prime < h or h_prime == parent:
        raise ValueError(f"h_prime must be a position before h = {h} other than its parent {parent}; got {h_prime}")
    mi_parent = float(mutual_information(pairwise_joint(kernel, parents, h, parent, init)))
    mi_candidate = float(mutual_information(pairwise_joint(kernel, parents, h, h_prime, init)))
    ratio = mi_candidate / mi_parent if mi_parent >= MI_FLOOR else np.nan
    joint = pairwise_joint(kernel, parents, parent, h_prime, init)  # (x_pa, x_{h'})
    delta_channel = float(dobrushin_coefficient(joint / joint.sum(axis=1, keepdims=True)))
    step, kind = first_step(kernel, parents, h_prime, parent, init)
    delta_first = float(dobrushin_coefficient(step))
    minorisation = 1.0 - float(step.min(axis=0).sum())
    alpha = proved_alpha(kernel)
    lca = lowest_common_ancestor(parents, parent, h_prime)
    relation = "ancestor" if lca == h_prime else "descendant" if lca == parent else "other"
    return {"ratio": ratio, "delta_channel": delta_channel, "first": kind, "delta_first": delta_first,
            "minorisation": minorisation, "alpha_proved": alpha, "dobrushin": float(dobrushin_coefficient(kernel)),
            "doeblin": 1.0 - kernel.shape[0] * float(kernel.min()), "relation": relation,
            "sdpi_slack": delta_channel - ratio, "submultiplicative_slack": delta_first - delta_channel,
            "minorisation_slack": minorisation - delta_first, "uniform_slack": alpha - minorisation}


def alpha_chain_sweep(rng, n_instances: int, *, ranges: dict = ALPHA_RANGES, factor: float = 0.95) -> dict:
    """:func:`alpha_chain` on every pair of random (kernel with π ≥ ε > 0, tree, μ₀) instances, both μ₀ kinds.

    Parameters
    ----------
    rng : numpy Generator.
    n_instances : instances; each is evaluated under its stationary law and under a Dirichlet μ₀.
    ranges : ``d``, ``H`` and ``eps_times_d`` (d·min π).
    factor : the perturbed steps (negative controls) multiply the right side of steps 2 and 3 by it.

    Returns
    -------
    dict: ``pairs`` (with a ratio), ``min_slack`` per step of :data:`STEPS`, ``max_ratio_over_alpha`` (ratio/α*),
    ``observed``: per candidate (``dobrushin``, ``doeblin``) the pairs and violations, all and ancestor-only, with a
    Dirichlet μ₀; ``control``: the minimum slack of each perturbed step (``submultiplicative`` factor·δ(F) − δ(T),
    ``minorisation`` factor·(1 − Σ min F) − δ(F)) and of δ(T) ≤ δ(π) on ancestor pairs (``reverse_by_dobrushin``,
    the step that does not hold for reverse channels).
    """
    rng = check_rng(rng)
    n_instances = check_positive_int(n_instances, "n_instances")
    min_slack = dict.fromkeys(STEPS, np.inf)
    control = dict.fromkeys(("submultiplicative", "minorisation", "reverse_by_dobrushin"), np.inf)
    observed = {name: {"pairs": 0, "violations": 0, "ancestor_pairs": 0, "ancestor_violations": 0}
                for name in ("dobrushin", "doeblin")}
    pairs, worst_ratio = 0, 0.0
    for _ in range(n_instances):
        kernel, parents, mu0 = random_tree_instance(ranges, rng=rng)
        for init in (None, mu0):
            for h in range(2, len(parents)):
                for h_prime in (g for g in range(h) if g != parents[h]):
                    chain = alpha_chain(kernel, parents, h, h_prime, init)
                    if np.isnan(chain["ratio"]):
                        continue
                    pairs += 1
                    for key in STEPS:
                        min_slack[key] = min(min_slack[key], chain[key])
                    worst_ratio = max(worst_ratio, chain["ratio"] / chain["alpha_proved"])
                    control["submultiplicative"] = min(control["submultiplicative"],
                                                       factor * chain["delta_first"] - chain["delta_channel"])
                    control["minorisation"] = min(control["minorisation"],
                                                  factor * chain["minorisation"] - chain["delta_first"])
                    if chain["relation"] == "ancestor":
                        control["reverse_by_dobrushin"] = min(control["reverse_by_dobrushin"],
                                                              chain["dobrushin"] - chain["delta_channel"])
                    if init is not None:
                        _observe(observed, chain)
    return {"instances": n_instances, "pairs": pairs, "min_slack": min_slack, "max_ratio_over_alpha": worst_ratio,
            "observed": observed, "control": control}


def _observe(observed: dict, chain: dict) -> None:
    """Count a non-stationary pair against the candidates that are only observed on ancestor pairs."""
    ancestor = chain["relation"] == "ancestor"
    for name in observed:
        violated = chain["ratio"] > chain[name] * (1 + 1e-9) + 1e-15
        observed[name]["pairs"] += 1
        observed[name]["violations"] += int(violated)
        observed[name]["ancestor_pairs"] += int(ancestor)
        observed[name]["ancestor_violations"] += int(violated and ancestor)
