"""Lemma 4 for parent sets on the k-parent DAG task (claim ``ext-dag-lemma4-sets``; ours, not the paper's).

Every S ⊂ {0..h−1} is a set of non-descendants of h, so x_h ⊥ x_S | x_T (local Markov property) and the true
conditional of x_h given x_T is π(· | x_T). Hence, with q(· | x_S) = P(x_h | x_S),

    Δ = E log π(x_h | x_T) − E log π(x_h | x_S) = [I(x_h; x_T) − I(x_h; x_S)] + E_{x_S} KL(q(·|x_S) ‖ π(·|x_S))
      = E_{(x_T, x_S)} KL(π(· | x_T) ‖ π(· | x_S)).

Both brackets are >= 0 (the first by the DPI on x_h − x_T − x_S). By the last form Δ > 0 **iff** some pair of
values (a, b) with P(x_T = a, x_S = b) > 0 has π(·|a) ≠ π(·|b). When π > 0 and μ₀ > 0 every pair consistent on
the shared positions S ∩ T has positive probability, so: for S disjoint from T (or overlapping at different
ranks) Δ > 0 iff π_k is not constant (some two rows differ); for S sharing positions at the same ranks Δ > 0 iff
π_k depends on the coordinates outside those shared ranks. A kernel that ignores its non-shared parent gives
Δ = 0 and I(x_h; x_S) = I(x_h; x_T) (see :func:`numerics.dag_law.overlap_ratio_one_instance`).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import rel_entr, xlogy

from bma_verify.numerics.dag import dag_candidate_sets, random_dag_kernels
from bma_verify.numerics.dag_law import (INIT_KINDS, DagLaw, check_position_and_set, dag_instance_record,
                                         draw_dag_instance, overlap_ratio_one_instance, sample_for_set)
from bma_verify.numerics.estimators import mean_estimate
from bma_verify.numerics.information import mutual_information


def dag_lemma4_terms(kernels, parent_sets, h: int, S, init=None) -> dict:
    """Exact terms of Lemma 4 for a candidate set S of position h (S may equal the true set T).

    Returns
    -------
    dict of floats: ``lhs`` E log π(x_h|x_T) − E log π(x_h|x_S) (from P(x_T, x_h), P(x_S, x_h) and log π_k),
    ``rhs`` [I(x_h; x_T) − I(x_h; x_S)] + E KL(q ‖ π), ``mi_true``, ``mi_candidate``, ``kl`` E_{x_S} KL(q(·|x_S) ‖
    π(·|x_S)), ``kl_true_vs_candidate`` E_{(x_T, x_S)} KL(π(·|x_T) ‖ π(·|x_S)) (from P(x_T, x_S)), ``overlap``
    |S ∩ T|; and ``T``, ``S`` as tuples.
    """
    law = DagLaw(kernels, parent_sets, init)
    return _lemma4_terms(law, *check_position_and_set(law, h, S))


def _lemma4_terms(law: DagLaw, h: int, S: tuple) -> dict:
    T = law.true_set(h)
    pi = law.kernels[-1]  # (D, d)
    joint_T, joint_S = law.joint(T, (h,)), law.joint(S, (h,))  # (D, d) with x_h on the columns
    lhs = float(xlogy(joint_T, pi).sum() - xlogy(joint_S, pi).sum())
    mi_true, mi_candidate = mutual_information(joint_T), mutual_information(joint_S)
    law_S = joint_S.sum(axis=1)
    kl = float(rel_entr(joint_S, law_S[:, None] * pi).sum())
    r = law.joint(T, S)  # (D, D): P(x_T = a, x_S = b)
    pair_kl = rel_entr(pi[:, None, :], pi[None, :, :]).sum(-1)  # (D, D): KL(π(·|a) ‖ π(·|b))
    kl_pairs = float(np.sum(np.where(r > 0, r * pair_kl, 0.0)))
    return {"lhs": lhs, "rhs": mi_true - mi_candidate + kl, "mi_true": mi_true, "mi_candidate": mi_candidate,
            "kl": kl, "kl_true_vs_candidate": kl_pairs, "overlap": len(set(S) & set(T)), "T": T, "S": S}


def dag_lemma4_monte_carlo(kernels, parent_sets, h: int, S, n: int, *, rng, init=None) -> dict:
    """Monte Carlo Lemma 4 for one (h, S) beside its exact terms.

    From n sampled sequences: ``estimate`` = mean of log π(x_h|x_T) − log π(x_h|x_S) (an unbiased estimate of
    Δ) and ``kl_estimate`` = mean of KL(π(·|x_T) ‖ π(·|x_S)) (the same Δ, Rao–Blackwellised over x_h), each an
    :class:`numerics.estimators.Estimate` with its standard error; ``exact`` = :func:`dag_lemma4_terms`.
    """
    law, h, S, T, x, a, b = sample_for_set(kernels, parent_sets, h, S, n, rng, init)
    pi = law.kernels[-1]
    with np.errstate(divide="ignore"):
        log_pi = np.log(pi)
    samples = log_pi[a, x[:, h]] - log_pi[b, x[:, h]]
    pair_kl = rel_entr(pi[a], pi[b]).sum(-1)
    return {"estimate": mean_estimate(samples), "kl_estimate": mean_estimate(pair_kl),
            "exact": _lemma4_terms(law, h, S)}


def dag_lemma4_sweep(rng: np.random.Generator, n_instances: int) -> dict:
    """Both sides of Lemma 4 for sets on every (h, S ≠ S_h) of random DAG instances, both μ₀ kinds.

    Returns the largest |lhs − rhs| and |lhs − Σ r KL|, the largest |lhs − (I_T − I_S)| (the identity without its
    E KL term: the control of ``ext-dag-lemma4-sets``), the smallest gap and its instance, and the counts (by
    disjoint / overlapping)."""
    out = {"pairs": 0, "disjoint": 0, "overlapping": 0, "identity_error": 0.0, "pair_kl_error": 0.0,
           "error_without_kl": 0.0, "min_gap": np.inf, "min_gap_instance": None, "nonpositive": 0}
    for index in range(n_instances):
        instance = draw_dag_instance(rng)
        kernels, parent_sets, k, H = instance["kernels"], instance["parent_sets"], instance["k"], instance["H"]
        for kind in INIT_KINDS:
            init = None if kind == "stationary" else instance["init"]
            for h in range(k + 1, H):
                T = tuple(int(s) for s in parent_sets[h])
                for S in dag_candidate_sets(H, k)[:math.comb(h, k)].tolist():
                    if tuple(S) == T:
                        continue
                    terms = dag_lemma4_terms(kernels, parent_sets, h, tuple(S), init)
                    out["pairs"] += 1
                    out["overlapping" if terms["overlap"] else "disjoint"] += 1
                    out["identity_error"] = max(out["identity_error"], abs(terms["lhs"] - terms["rhs"]))
                    out["pair_kl_error"] = max(out["pair_kl_error"], abs(terms["lhs"] - terms["kl_true_vs_candidate"]))
                    out["error_without_kl"] = max(out["error_without_kl"],
                                                  abs(terms["lhs"] - (terms["mi_true"] - terms["mi_candidate"])))
                    if terms["lhs"] <= 0:
                        out["nonpositive"] += 1
                    if terms["lhs"] < out["min_gap"]:
                        out["min_gap"] = float(terms["lhs"])
                        out["min_gap_instance"] = dag_instance_record(kernels, parent_sets, init, h=h, S=list(S),
                                                                      T=list(T), gap=float(terms["lhs"]),
                                                                      instance_index=index)
    return out


def lemma4_close_call_instance(t: float, eps: float, rng: np.random.Generator) -> dict:
    """A Lemma 4 instance with a small gap: k = d = 2, H = 4, S_2 = S_3 = {0, 1}, h = 3, S = {0, 2} sharing the
    first parent, and π_2 = (1 − t)·f(c | a) + t·R(c | a, b) (f ignores the second parent, where Δ = 0; R a random
    table). Δ grows as t², so t tunes how close the gap is to 0.

    Draws the planted instance (:func:`numerics.dag_law.overlap_ratio_one_instance`) then R from ``rng``; returns
    ``kernels``, ``parent_sets``, ``h``, ``S``, ``t``.
    """
    base = overlap_ratio_one_instance(2, eps, rng=rng)
    other = random_dag_kernels(2, 2, alpha=1.0, eps=eps, rng=rng)[-1]
    order1, flat = base["kernels"]
    return {"kernels": (order1, (1.0 - t) * flat + t * other), "parent_sets": base["parent_sets"], "h": base["h"],
            "S": base["S"], "t": t}
