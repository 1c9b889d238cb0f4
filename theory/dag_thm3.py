"""Theorem 3 for parent sets, derived with SymPy (claim ``ext-dag-thm3-sets``; our extension, not the paper's).

:func:`derive_dag_thm3`: mixture output over C candidate sets: −∂ℓ/∂p̂_c at p̂ = 0 is (1/C)(r_c / r̄ − 1) (as for
trees, with C in place of h). J form: J(T) = E[π(x_h|x_T)/P(x_h)] − 1 = I_χ²(x_T; x_h); and for another set,

    J(T) − J(S) = ½ Σ_c Σ_{a,b} r(a,b) (π(c|a) − π(c|b))² / P(c)  +  ½ Σ_c [m_T(c) − m_S(c)] / P(c),

m_X(c) = Σ_x P(x_X = x) π(c|x)². The first term is >= 0; the second vanishes when x_T and x_S have the same law
(trees with a stationary μ₀: every position has law μ), which is why the J form ranks the true parent first there;
on a DAG the laws of parent tuples differ (shared ancestors), so the J form can fail.
"""
from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
import sympy as sp

from bma_verify import numerics
from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.numerics.dag_gradient import dag_chi2_gain, dag_init_gradient
from bma_verify.numerics.dag_law import DagLaw
from bma_verify.theory.dag_tables import joint_table_symbols, stochastic_table
from bma_verify.theory.derivation import (Derivation, ErrorTracker, Perturbation, Verification, complex_step_gradient,
                                          labelled)

CLAIM_THM3 = "ext-dag-thm3-sets"


def _softmax(v):
    e = [sp.exp(x) for x in v]
    total = sp.Add(*e)
    return [x / total for x in e]


def likelihood_symbols(C: int) -> list[sp.Symbol]:
    """r_c = π(x_h | x_{S_c}) for the C candidate sets (positive)."""
    return list(sp.symbols(f"r_0:{C}", positive=True))


def mixture_gradient(C: int) -> tuple[sp.Expr, list[sp.Expr]]:
    """ℓ(p̂) = −log Σ_c softmax(p̂)_c r_c and −∂ℓ/∂p̂_c at p̂ = 0 (sympy.diff), c = 0..C−1."""
    phat = list(sp.symbols(f"phat_0:{C}", real=True))
    r = likelihood_symbols(C)
    loss = -sp.log(sp.Add(*[a * rc for a, rc in zip(_softmax(phat), r)]))
    at_zero = {p: 0 for p in phat}
    return loss, [sp.factor(sp.cancel(-sp.diff(loss, p).subs(at_zero))) for p in phat]


def thm3_j_expressions(r: sp.Matrix, pi: sp.Matrix) -> dict[str, sp.Expr]:
    """J(T), J(S), I_χ²(x_S; x_h) and the two terms of J(T) − J(S), for r = P(x_T, x_S) and π (D x d).

    Each J term is Σ_c N(c) / P(c) − 1 with a polynomial numerator N(c) per output token c; the numerators are
    returned too (``numerators``: name -> list over c) so identities can be checked token by token.
    """
    D, d = pi.shape
    law_T = [sp.Add(*r.row(a)) for a in range(D)]
    law_S = [sp.Add(*r.col(b)) for b in range(D)]
    joint_T = sp.Matrix(D, d, lambda a, c: law_T[a] * pi[a, c])
    Q = sp.Matrix(D, d, lambda b, c: sp.Add(*[r[a, b] * pi[a, c] for a in range(D)]))  # P(x_S = b, x_h = c)
    child = [sp.Add(*joint_T.col(c)) for c in range(d)]
    numerators = {
        "J_true": [sp.Add(*[joint_T[a, c] * pi[a, c] for a in range(D)]) for c in range(d)],
        "J_candidate": [sp.Add(*[Q[b, c] * pi[b, c] for b in range(D)]) for c in range(d)],
        "J_gap_distance": [sp.Rational(1, 2) * sp.Add(*[r[a, b] * (pi[a, c] - pi[b, c]) ** 2
                                                        for a in range(D) for b in range(D)]) for c in range(d)],
        "J_gap_mismatch": [sp.Rational(1, 2) * (sp.Add(*[law_T[a] * pi[a, c] ** 2 for a in range(D)])
                                                - sp.Add(*[law_S[b] * pi[b, c] ** 2 for b in range(D)]))
                           for c in range(d)],
    }
    out = {name: sp.Add(*[n / child[c] for c, n in enumerate(nums)]) for name, nums in numerators.items()}
    out["J_true"] -= 1
    out["J_candidate"] -= 1
    out["chi2_candidate"] = sp.Add(*[(Q[b, c] - law_S[b] * child[c]) ** 2 / (law_S[b] * child[c])
                                     for b in range(D) for c in range(d)])
    out["numerators"] = numerators
    return out


def chi2_identity_residual(m: sp.Matrix, pi: sp.Matrix) -> sp.Expr:
    """J(T) − I_χ²(x_T; x_h) for a symbolic law m of x_T (D values) and π (D x d), cancelled token by token."""
    D, d = pi.shape
    joint = sp.Matrix(D, d, lambda a, c: m[a] * pi[a, c])
    child = [sp.Add(*joint.col(c)) for c in range(d)]
    per_token = [sp.cancel(sp.Add(*[joint[a, c] * pi[a, c] / child[c]
                                    - (joint[a, c] - m[a] * child[c]) ** 2 / (m[a] * child[c]) for a in range(D)]))
                 for c in range(d)]
    return sp.expand(sp.Add(*per_token) - 1)


@lru_cache(maxsize=None)
def derive_dag_thm3(C_values: tuple[int, ...] = (3, 6), d: int = 2, k: int = 2) -> Derivation:
    """Init gradients of the mixture over candidate sets, and the J (χ²) form for sets.

    Returns
    -------
    Derivation
        results: ``mixture_gradient_C{C}`` (1 x C, in r_c); ``J_true``, ``J_candidate``, ``J_gap_distance``,
        ``J_gap_mismatch`` (in ``r_a_b`` = P(x_T = a, x_S = b) and ``pi_a_c``); residuals: the gradient minus
        (1/C)(r_c/r̄ − 1) and its zero sum; J(T) − I_χ²(x_T; x_h) (for a symbolic law ``m`` of x_T); per output
        token c, the numerator of J(T) − J(S) − distance − mismatch (all over P(c)); witness: J(S) − I_χ²(x_S;
        x_h) at a rational point (J of a wrong set is not its χ²-information).
    """
    d = check_positive_int(d, "d", minimum=2)
    k = check_positive_int(k, "k", minimum=1)
    steps: list[tuple[str, sp.Basic | str]] = []
    results: dict[str, sp.Basic] = {}
    residuals: dict[str, sp.Basic] = {}
    for C in C_values:
        _, grad = mixture_gradient(C)
        r = likelihood_symbols(C)
        r_bar = sp.Add(*r) / C
        stated = [(rc / r_bar - 1) / C for rc in r]
        results[f"mixture_gradient_C{C}"] = sp.Matrix(1, C, grad)
        residuals[f"mixture_gradient_minus_stated_C{C}"] = sp.Matrix(1, C, [sp.cancel(g - s)
                                                                            for g, s in zip(grad, stated)])
        residuals[f"mixture_gradient_sums_to_zero_C{C}"] = sp.cancel(sp.Add(*grad))
        steps.append((f"C = {C} candidate sets: −∂ℓ/∂p̂_c at p̂ = 0 (sympy.diff)",
                      labelled(r"-\nabla \ell(0)", results[f"mixture_gradient_C{C}"])))
    D = d**k
    rj, pi = joint_table_symbols("r", D, D), stochastic_table("pi", D, d)
    J = thm3_j_expressions(rj, pi)
    for name in ("J_true", "J_candidate", "J_gap_distance", "J_gap_mismatch"):
        results[name] = J[name]
    m_free = sp.symbols(f"m_0:{D - 1}", positive=True)
    m = sp.Matrix([*m_free, 1 - sp.Add(*m_free)])
    residuals["J_true_minus_chi2"] = chi2_identity_residual(m, pi)
    nums = J["numerators"]
    residuals["J_gap_minus_decomposition"] = sp.Matrix(1, d, [
        sp.expand(nums["J_true"][c] - nums["J_candidate"][c] - nums["J_gap_distance"][c] - nums["J_gap_mismatch"][c])
        for c in range(d)])
    # J(S) − I_χ²(x_S; x_h) at an exact rational point (a valid joint and kernel): not zero
    cells = sorted(rj.free_symbols, key=lambda s: s.name)  # D² − 1 free cells: weights 1, 2, ... (dependent)
    point = {s: sp.Rational(i + 1, D * D * (D * D + 1) // 2) for i, s in enumerate(cells)}
    point.update({s: sp.Rational(1 + i, 2 * (D + d) + i) for i, s in
                  enumerate(sorted(pi.free_symbols, key=lambda s: s.name))})
    witness = sp.nsimplify((J["J_candidate"] - J["chi2_candidate"]).subs(point))
    steps += [
        (f"d = {d}, k = {k}: J(T) − I_χ²(x_T; x_h) for a law m of x_T", residuals["J_true_minus_chi2"]),
        ("Per token c: numerator of J(T) − J(S) − ½Σ r(a,b)(π(c|a) − π(c|b))²/P(c) − ½[m_T(c) − m_S(c)]/P(c)",
         residuals["J_gap_minus_decomposition"]),
        ("J(S) − I_χ²(x_S; x_h) at a rational point (not zero)", witness),
    ]
    return Derivation(CLAIM_THM3, tuple(steps), results, residuals,
                      witnesses={"J_candidate_minus_its_chi2": witness})


def dropped_minus_one(results) -> dict[str, sp.Basic]:
    """Negative control: the mixture gradients without their −1 (every entry positive, no zero sum)."""
    out = {}
    for name, expr in results.items():
        if name.startswith("mixture_gradient_C"):
            C = expr.shape[1]
            r = likelihood_symbols(C)
            out[name] = sp.Matrix(1, C, [rc / (sp.Add(*r) / C) / C for rc in r])
    return out


@lru_cache(maxsize=None)
def perturb_dag_thm3(C_values: tuple[int, ...] = (3, 6), d: int = 2, k: int = 2,
                     perturbation: Perturbation = dropped_minus_one) -> Derivation:
    """:func:`derive_dag_thm3` with ``perturbation`` applied and the gradient residuals re-derived."""
    def recheck(results):
        residuals = {}
        for C in C_values:
            grad = list(results[f"mixture_gradient_C{C}"])
            r = likelihood_symbols(C)
            stated = [(rc / (sp.Add(*r) / C) - 1) / C for rc in r]
            residuals[f"mixture_gradient_minus_stated_C{C}"] = sp.Matrix(1, C, [sp.cancel(g - s)
                                                                                for g, s in zip(grad, stated)])
            residuals[f"mixture_gradient_sums_to_zero_C{C}"] = sp.cancel(sp.Add(*grad))
        return Derivation(CLAIM_THM3, (), {}, residuals)

    return derive_dag_thm3(tuple(C_values), d, k).perturbed(perturbation, recheck)


def verify_dag_thm3(rng, *, n_points: int = 8, C_values: tuple[int, ...] = (3, 6), d: int = 2, k: int = 2,
                    H: int = 5, perturbation: Perturbation | None = None) -> Verification:
    """Compare the derived gradients and J terms with independent numerics at random points.

    * ``mixture_gradient_C{C}`` at random r vs the complex-step derivative of ℓ (NumPy), and its expectation over
      every configuration x_0..x_h (probabilities by the product formula, written out here) vs
      ``numerics.dag_init_gradient(..., method="exact")`` at the position h with C(h, k) = C;
    * ``J_true`` vs ``numerics.chi2_mutual_information(P(x_T, x_h))`` and ``numerics.dag_chi2_gain``;
      ``J_candidate`` vs ``dag_chi2_gain`` at a random other set (r = P(x_T, x_S) from the exact joint);
      ``J_gap_distance + J_gap_mismatch`` vs the difference of the two gains.
    μ₀ alternates between the stationary law of π_1 and a Dirichlet(1) draw.
    """
    rng = check_rng(rng)
    n_points = check_positive_int(n_points, "n_points")
    derivation = (derive_dag_thm3(tuple(C_values), d, k) if perturbation is None
                  else perturb_dag_thm3(tuple(C_values), d, k, perturbation))
    results = derivation.results
    mixture = {C: sp.lambdify(likelihood_symbols(C), results[f"mixture_gradient_C{C}"], "numpy") for C in C_values}
    D = d**k
    r, pi = joint_table_symbols("r", D, D), stochastic_table("pi", D, d)
    args = [*list(r)[:-1], *[pi[a, c] for a in range(D) for c in range(d - 1)]]
    J = {name: sp.lambdify(args, results[name], "numpy")
         for name in ("J_true", "J_candidate", "J_gap_distance", "J_gap_mismatch")}
    position_of = {math.comb(h, k): h for h in range(k + 1, H)}
    tracker = ErrorTracker()
    for i in range(n_points):
        C = C_values[i % len(C_values)]
        if C not in position_of:
            raise ValueError(f"C_values must be C(h, k) for some k < h < H = {H}; got C = {C}")
        h = position_of[C]
        rv = rng.uniform(0.05, 1.0, size=C)
        loss = lambda p, rv=rv: -np.log(np.sum(np.exp(p) / np.sum(np.exp(p)) * rv))  # noqa: E731
        tracker.compare(f"mixture_gradient_C{C}", np.ravel(mixture[C](*rv)),
                        -complex_step_gradient(loss, np.zeros(C)))

        kernels = numerics.random_dag_kernels(d, k, alpha=0.8, eps=0.02, rng=rng)
        parent_sets = numerics.random_parent_sets(H, k, rng=rng)
        init = None if i % 2 == 0 else rng.dirichlet(np.ones(d))
        law0 = numerics.stationary_distribution(kernels[0]) if init is None else init
        sets = [S for S in sorted(itertools.combinations(range(h), k), key=lambda s: s[::-1])]
        expected = np.zeros(C)
        for x in itertools.product(range(d), repeat=h + 1):
            prob = law0[x[0]]
            for g in range(1, h + 1):
                m = min(k, g)
                row = 0
                for s in parent_sets[g, :m]:
                    row = row * d + x[s]
                prob *= kernels[m - 1][row, x[g]]
            like = []
            for S in sets:
                row = 0
                for s in S:
                    row = row * d + x[s]
                like.append(kernels[-1][row, x[h]])
            expected += prob * np.ravel(mixture[C](*like))
        tracker.compare("expected_mixture_gradient", expected,
                        dag_init_gradient(kernels, parent_sets, h, init=init, method="exact"))

        law = DagLaw(kernels, parent_sets, init)
        T = law.true_set(h)
        S = sets[int(rng.integers(len(sets)))]
        while S == T:
            S = sets[int(rng.integers(len(sets)))]
        joint = law.joint(T, S)
        values = [*joint.ravel()[:-1], *kernels[-1][:, :-1].ravel()]
        gains = dag_chi2_gain(kernels, parent_sets, h, init)
        J_true = float(J["J_true"](*values))
        tracker.compare("J_true_vs_chi2_mi", J_true, numerics.chi2_mutual_information(law.joint(T, (h,))))
        tracker.compare("J_true_vs_chi2_gain", J_true, gains[sets.index(T)])
        tracker.compare("J_candidate_vs_chi2_gain", float(J["J_candidate"](*values)), gains[sets.index(S)])
        tracker.compare("J_gap_decomposition", float(J["J_gap_distance"](*values) + J["J_gap_mismatch"](*values)),
                        gains[sets.index(T)] - gains[sets.index(S)])
    return tracker.result(CLAIM_THM3, n_points)
