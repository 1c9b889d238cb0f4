"""Lemma 4 and Theorem 3 for parent *sets* on the k-parent DAG task (issue 15 §2; our extension, not the paper's).

Claim ids served (proposed for the registry): ``ext-dag-lemma4-sets``, ``ext-dag-thm3-sets``.

Setting (see :mod:`numerics.dag`): position h has the true parent set T = S_h (k positions, read in position
order) and x_h ~ π(· | x_T) with π = π_k a (D, d) table, D = d**k. Another candidate set S ⊂ {0..h−1} of size k
is made of non-descendants of h, so x_h ⊥ x_S | x_T (the local Markov property of the DAG). Everything below is
built from a symbolic joint r(a, b) = P(x_T = a, x_S = b) over D × D values and a symbolic table π; the only
structural fact used is the Markov property, through Q(b, c) = Σ_a r(a, b) π(c | a) = P(x_S = b, x_h = c).
Overlapping sets are the special case where r vanishes off the pairs that agree on the shared positions.

Lemma 4 for sets (:func:`derive_dag_lemma4`)
    Δ = E log π(x_h | x_T) − E log π(x_h | x_S) = [I(x_h; x_T) − I(x_h; x_S)] + E_{x_S} KL(q(·|x_S) ‖ π(·|x_S))
      = Σ_{a,b} r(a, b) KL(π(·|a) ‖ π(·|b)).
    The last form says exactly when the inequality Δ > 0 is strict: iff some (a, b) with r(a, b) > 0 has
    π(·|a) ≠ π(·|b). The derivation exhibits both cases: Δ ≡ 0 when S shares T's first parent and π ignores the
    rest (residual), Δ ≠ 0 for disjoint sets under the same π (witness).

Theorem 3 for sets (:func:`derive_dag_thm3`)
    Mixture output over C candidate sets: −∂ℓ/∂p̂_c at p̂ = 0 is (1/C)(r_c / r̄ − 1) (as for trees, with C in place
    of h). J form: J(T) = E[π(x_h|x_T)/P(x_h)] − 1 = I_χ²(x_T; x_h); and for another set,
    J(T) − J(S) = ½ Σ_c Σ_{a,b} r(a,b) (π(c|a) − π(c|b))² / P(c)  +  ½ Σ_c [m_T(c) − m_S(c)] / P(c),
    m_X(c) = Σ_x P(x_X = x) π(c|x)². The first term is >= 0; the second vanishes when x_T and x_S have the same law
    (trees with a stationary μ₀: every position has law μ), which is why the J form ranks the true parent first
    there; on a DAG the laws of parent tuples differ (shared ancestors), so the J form can fail.
"""
from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
import sympy as sp

from bma_verify import numerics
from bma_verify.numerics._validate import check_positive_int, check_rng
from bma_verify.numerics.dag_information import DagLaw, dag_chi2_gain, dag_init_gradient, dag_lemma4_terms
from bma_verify.theory.derivation import (Derivation, ErrorTracker, Perturbation, Verification, complex_step_gradient,
                               labelled)

CLAIM_LEMMA4 = "ext-dag-lemma4-sets"
CLAIM_THM3 = "ext-dag-thm3-sets"


def joint_table_symbols(name: str, rows: int, cols: int) -> sp.Matrix:
    """A symbolic joint law on rows x cols cells: positive entries, the last one 1 minus the rest."""
    free = [sp.Symbol(f"{name}_{a}_{b}", positive=True) for a in range(rows) for b in range(cols)][:-1]
    return sp.Matrix(rows, cols, [*free, 1 - sp.Add(*free)])


def stochastic_table(name: str, rows: int, d: int) -> sp.Matrix:
    """A symbolic row-stochastic (rows, d) table K[a, c] = K(c | a); each row's last entry is 1 minus the rest."""
    out = []
    for a in range(rows):
        free = [sp.Symbol(f"{name}_{a}_{c}", positive=True) for c in range(d - 1)]
        out.append([*free, 1 - sp.Add(*free)])
    return sp.Matrix(out)


def _split_logs(expr: sp.Expr) -> sp.Expr:
    return sp.expand(sp.expand_log(expr, force=True))


def lemma4_expressions(r: sp.Matrix, pi: sp.Matrix) -> dict[str, sp.Expr]:
    """Every term of Lemma 4 for sets from its definition, for a joint r (D x D) of (x_T, x_S) and a table π (D x d).

    Returns ``loglik_true``, ``loglik_candidate``, ``mi_true``, ``mi_candidate``, ``expected_kl``, ``pair_kl``,
    ``gap`` (LHS), ``decomposition`` (RHS).
    """
    D, d = pi.shape
    law_T = [sp.Add(*r.row(a)) for a in range(D)]
    law_S = [sp.Add(*r.col(b)) for b in range(D)]
    Q = sp.Matrix(D, d, lambda b, c: sp.Add(*[r[a, b] * pi[a, c] for a in range(D)]))  # P(x_S = b, x_h = c)
    joint_T = sp.Matrix(D, d, lambda a, c: law_T[a] * pi[a, c])  # P(x_T = a, x_h = c)
    child = [sp.Add(*joint_T.col(c)) for c in range(d)]
    cells = list(itertools.product(range(D), range(d)))
    loglik_true = sp.Add(*[joint_T[a, c] * sp.log(pi[a, c]) for a, c in cells])
    loglik_candidate = sp.Add(*[Q[b, c] * sp.log(pi[b, c]) for b, c in cells])
    mi_true = sp.Add(*[joint_T[a, c] * sp.log(joint_T[a, c] / (law_T[a] * child[c])) for a, c in cells])
    mi_candidate = sp.Add(*[Q[b, c] * sp.log(Q[b, c] / (law_S[b] * child[c])) for b, c in cells])
    expected_kl = sp.Add(*[law_S[b] * (Q[b, c] / law_S[b]) * sp.log((Q[b, c] / law_S[b]) / pi[b, c])
                           for b, c in cells])
    pair_kl = sp.Add(*[r[a, b] * pi[a, c] * sp.log(pi[a, c] / pi[b, c])
                       for a in range(D) for b in range(D) for c in range(d) if r[a, b] != 0])
    gap = loglik_true - loglik_candidate
    return {"loglik_true": loglik_true, "loglik_candidate": loglik_candidate, "mi_true": mi_true,
            "mi_candidate": mi_candidate, "expected_kl": expected_kl, "pair_kl": pair_kl, "gap": gap,
            "decomposition": (mi_true - mi_candidate) + expected_kl}


def lemma4_residuals(results) -> dict[str, sp.Expr]:
    """The derivation's own checks: gap − decomposition and gap − pair_kl, logs split and expanded."""
    return {"gap_minus_decomposition": _split_logs(results["gap"] - results["decomposition"]),
            "gap_minus_pair_kl": _split_logs(results["gap"] - results["pair_kl"])}


def _overlap_joint(d: int, k: int) -> sp.Matrix:
    """r for T = (u, v), S = (u, w) sharing the first parent u: r((u,v),(u',w)) = s(u, v, w) if u = u', else 0."""
    rest = d ** (k - 1)
    s = joint_table_symbols("s", d * rest, rest)  # s[(u, v), w]
    D = d**k
    return sp.Matrix(D, D, lambda a, b: s[a, b % rest] if a // rest == b // rest else 0)


@lru_cache(maxsize=None)
def derive_dag_lemma4(d: int = 2, k: int = 2) -> Derivation:
    """Lemma 4 for parent sets, for a symbolic joint of (x_T, x_S) and a symbolic (d**k, d) kernel.

    Returns
    -------
    Derivation
        results (in ``r_a_b`` and ``pi_a_c``): the terms of :func:`lemma4_expressions`; residuals
        ``gap_minus_decomposition`` and ``gap_minus_pair_kl`` (= 0), ``gap_overlap_kernel_ignores_rest`` (Δ ≡ 0
        when S shares T's first parent and π(c | u, v) = f(c | u)); witness ``gap_disjoint_kernel_ignores_rest``
        (the same π on a generic joint, at a rational point: not 0, so only the overlap makes Δ vanish).
    """
    d = check_positive_int(d, "d", minimum=2)
    k = check_positive_int(k, "k", minimum=2)
    D = d**k
    r = joint_table_symbols("r", D, D)
    pi = stochastic_table("pi", D, d)
    results = lemma4_expressions(r, pi)
    residuals = lemma4_residuals(results)

    f = stochastic_table("f", d, d)
    rest = d ** (k - 1)
    ignoring = sp.Matrix(D, d, lambda a, c: f[a // rest, c])  # π(c | u, v) = f(c | u)
    overlap = lemma4_expressions(_overlap_joint(d, k), ignoring)
    residuals["gap_overlap_kernel_ignores_rest"] = _split_logs(overlap["gap"])
    disjoint = lemma4_expressions(r, ignoring)["gap"]
    point = {s: sp.Rational(1, D * D) for s in r.free_symbols}
    point.update({s: sp.Rational(1 + (i % (d - 1 or 1)), 2 * d + i) for i, s in
                  enumerate(sorted(f.free_symbols, key=lambda s: s.name))})
    witness = sp.expand_log(disjoint.subs(point), force=True)
    steps: tuple[tuple[str, sp.Basic | str], ...] = (
        (f"Joint of (x_T, x_S), d = {d}, k = {k} (D = {D} values each)", labelled("r", r)),
        (f"Kernel π_{k} as a ({D}, {d}) table", labelled(r"\pi", pi)),
        ("LHS: E log π(x_h | x_T) − E log π(x_h | x_S), with P(x_S, x_h) = Σ_a r(a, ·) π(·|a) (x_h ⊥ x_S | x_T)",
         sp.Eq(sp.Symbol(r"\Delta"), results["gap"])),
        ("LHS − [I(x_h; x_T) − I(x_h; x_S) + E KL(q ‖ π)], logs split and expanded",
         residuals["gap_minus_decomposition"]),
        ("LHS − Σ_{a,b} r(a,b) KL(π(·|a) ‖ π(·|b)): the form that decides strictness",
         residuals["gap_minus_pair_kl"]),
        ("S shares T's first parent, π(c | u, v) = f(c | u): the gap", residuals["gap_overlap_kernel_ignores_rest"]),
        ("The same π with a generic (disjoint-set) joint, at a rational point: the gap", witness),
    )
    return Derivation(CLAIM_LEMMA4, steps, results, residuals=residuals,
                      witnesses={"gap_disjoint_kernel_ignores_rest": witness})


def dropped_kl_term(results) -> dict[str, sp.Basic]:
    """Negative control: the decomposition without its E KL(q ‖ π) term."""
    return {"decomposition": results["mi_true"] - results["mi_candidate"]}


@lru_cache(maxsize=None)
def perturb_dag_lemma4(d: int = 2, k: int = 2, perturbation: Perturbation = dropped_kl_term) -> Derivation:
    """:func:`derive_dag_lemma4` with ``perturbation`` applied and its residuals re-derived."""
    def recheck(results):
        return Derivation(CLAIM_LEMMA4, (), {}, lemma4_residuals(results))

    return derive_dag_lemma4(d, k).perturbed(perturbation, recheck)


def _draw_point(rng, d: int, k: int, H: int, want_overlap: bool):
    """A random DAG instance, a position h with >= 2 candidates, and a candidate S ≠ T (overlapping if asked and
    possible)."""
    kernels = numerics.random_dag_kernels(d, k, alpha=0.8, eps=0.01, rng=rng)
    parent_sets = numerics.random_parent_sets(H, k, rng=rng)
    h = int(rng.integers(k + 1, H))
    T = tuple(int(s) for s in parent_sets[h])
    others = [S for S in itertools.combinations(range(h), k) if S != T]
    pool = [S for S in others if (len(set(S) & set(T)) > 0) == want_overlap] or others
    return kernels, parent_sets, h, T, pool[int(rng.integers(len(pool)))]


def verify_dag_lemma4(rng, *, n_points: int = 12, d: int = 2, k: int = 2, H: int = 6,
                      perturbation: Perturbation | None = None) -> Verification:
    """Evaluate every derived term at random DAG instances and compare with :mod:`numerics.dag_information`.

    At each point: a random kernel family (entries >= 0.01), a random DAG on H positions, μ₀ stationary (even
    points) or Dirichlet(1) (odd points), a position h > k and a candidate S ≠ T, overlapping T on alternate
    points. r = P(x_T, x_S) from the DAG's exact joint; the independent side is
    ``numerics.dag_information.dag_lemma4_terms``, which computes P(x_T, x_h) and P(x_S, x_h) directly from the
    joint law (not through r and the Markov property). Slack ``gap_positive``: the derived gap (>= 0).
    ``perturbation``: verify :func:`perturb_dag_lemma4` instead (a negative control).
    """
    rng = check_rng(rng)
    n_points = check_positive_int(n_points, "n_points")
    derivation = derive_dag_lemma4(d, k) if perturbation is None else perturb_dag_lemma4(d, k, perturbation)
    D = d**k
    r, pi = joint_table_symbols("r", D, D), stochastic_table("pi", D, d)
    args = [*list(r)[:-1], *[pi[a, c] for a in range(D) for c in range(d - 1)]]
    names = ("gap", "decomposition", "mi_true", "mi_candidate", "expected_kl", "pair_kl")
    fns = {name: sp.lambdify(args, derivation.results[name], "numpy") for name in names}
    tracker = ErrorTracker()
    for i in range(n_points):
        kernels, parent_sets, h, T, S = _draw_point(rng, d, k, H, want_overlap=i % 2 == 1)
        init = None if i % 2 == 0 else rng.dirichlet(np.ones(d))
        law = DagLaw(kernels, parent_sets, init)
        joint = law.joint(T, S)
        values = [*joint.ravel()[:-1], *kernels[-1][:, :-1].ravel()]
        got = {name: float(f(*values)) for name, f in fns.items()}
        ref = dag_lemma4_terms(kernels, parent_sets, h, S, init)
        tracker.compare("gap", got["gap"], ref["lhs"])
        tracker.compare("decomposition", got["decomposition"], ref["rhs"])
        tracker.compare("mi_true", got["mi_true"], ref["mi_true"])
        tracker.compare("mi_candidate", got["mi_candidate"], ref["mi_candidate"])
        tracker.compare("expected_kl", got["expected_kl"], ref["kl"])
        tracker.compare("pair_kl", got["pair_kl"], ref["kl_true_vs_candidate"])
        tracker.bound("gap_positive", 0.0, got["gap"])
    return tracker.result(CLAIM_LEMMA4, n_points)


# ----------------------------------------------------------------------------------------------------------
# Theorem 3 for sets


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


# ----------------------------------------------------------------------------------------------------------
# The 2-simplicial construction (Theorem 1 analogue for sets; ``ext-dag-construction``)

CLAIM_CONSTRUCTION = "ext-dag-construction"
#: The context of the symbolic derivation: L = 2 examples on H = 4 positions, d = 2 (position 3 chooses among
#: {0,1}, {0,2}, {1,2}; position 2's set is {0,1}, position 1's is {0}).
CONSTRUCTION_CONTEXT = ((0, 1, 1, 0), (1, 1, 0, 1))


def _trilinear(T: sp.Matrix, u, w, y, d: int) -> sp.Expr:
    """Σ_{i,j,c} u_i w_j T[i·d + j, c] y_c: the 2-simplicial score of one example."""
    return sp.Add(*[u[i] * w[j] * T[i * d + j, c] * y[c] for i in range(d) for j in range(d) for c in range(d)])


def construction_expressions(T_of, pi2: sp.Matrix, context=CONSTRUCTION_CONTEXT, d: int = 2) -> dict:
    """Posterior of S_3 by Bayes over the three DAGs with the full likelihood (symbolic μ₀, π_1, π_2), the softmax
    of the trilinear score of one-hot copies with table ``T_of(pi2)``, and the first-order change of the score when
    every copy is v = (1 − η) e_x + η u (u a symbolic law: the copier's error)."""
    mu = sp.Matrix([sp.Symbol("mu_0", positive=True), 1 - sp.Symbol("mu_0", positive=True)])
    pi1 = stochastic_table("p1", d, d)
    sets = [(0, 1), (0, 2), (1, 2)]
    likelihood = []
    for S in sets:
        total = sp.Integer(1)
        for x in context:
            total *= mu[x[0]] * pi1[x[0], x[1]] * pi2[x[0] * d + x[1], x[2]] * pi2[x[S[0]] * d + x[S[1]], x[3]]
        likelihood.append(total)
    posterior = [lk / sp.Add(*likelihood) for lk in likelihood]
    T = T_of(pi2)
    onehot = lambda v: [sp.Integer(int(i == v)) for i in range(d)]  # noqa: E731
    scores = [sp.Add(*[_trilinear(T, onehot(x[S[0]]), onehot(x[S[1]]), onehot(x[3]), d) for x in context])
              for S in sets]
    weights = [sp.exp(s) for s in scores]
    softmax = [w / sp.Add(*weights) for w in weights]
    eta = sp.Symbol("eta", nonnegative=True)
    u = [sp.Symbol(f"u_{i}", nonnegative=True) for i in range(d - 1)]
    u = [*u, 1 - sp.Add(*u)]
    soft = lambda v: [(1 - eta) * e + eta * ui for e, ui in zip(onehot(v), u)]  # noqa: E731
    x = context[0]
    S = sets[0]
    score_eta = _trilinear(T, soft(x[S[0]]), soft(x[S[1]]), soft(x[3]), d)
    stated_slope = (_trilinear(T, u, onehot(x[S[1]]), onehot(x[3]), d) + _trilinear(T, onehot(x[S[0]]), u, onehot(x[3]), d)
                    + _trilinear(T, onehot(x[S[0]]), onehot(x[S[1]]), u, d)
                    - 3 * _trilinear(T, onehot(x[S[0]]), onehot(x[S[1]]), onehot(x[3]), d))
    return {"posterior": posterior, "softmax": softmax, "score_eta": score_eta, "stated_slope": stated_slope,
            "eta": eta, "scores": scores}


def log_table(pi2: sp.Matrix) -> sp.Matrix:
    return pi2.applyfunc(sp.log)


def transposed_log_table(pi2: sp.Matrix, d: int = 2) -> sp.Matrix:
    """Negative control: T[a·d + b, c] = log π(c | b, a) (the parents' order transposed)."""
    return sp.Matrix(pi2.rows, pi2.cols, lambda r, c: sp.log(pi2[(r % d) * d + r // d, c]))


@lru_cache(maxsize=None)
def derive_dag_construction(table=None) -> Derivation:
    """Theorem 1 for sets (k = 2): with exact copies and T = log π_2, the softmax over pairs of the 2-simplicial
    score Σ_l T[x^l_a, x^l_b, x^l_h] is the exact set posterior (Bayes over every DAG, full likelihood, symbolic μ₀,
    π_1, π_2); with the copier's soft copies v = (1 − η)e_x + ηu the score moves by η·[Σ of the three one-slot
    substitutions − 3·score] + O(η²), so with η = O(e^{−β}) (the tree copier, ``thm1-construction``) the
    attention error is O(e^{−β}).

    Residuals: posterior_c − softmax_c (c = 0, 1, 2; powers and logs combined) and ∂score/∂η at 0 minus the stated
    slope. ``table`` maps π_2 to T (the control passes :func:`transposed_log_table`).
    """
    pi2 = stochastic_table("pi", 4, 2)
    out = construction_expressions(table or log_table, pi2)
    residuals = {}
    for c, (p, s) in enumerate(zip(out["posterior"], out["softmax"])):
        combined = sp.powsimp(sp.expand_log(sp.logcombine(s, force=True), force=True), force=True)
        combined = sp.simplify(sp.exp(sp.expand_log(sp.log(combined), force=True)))
        residuals[f"posterior_minus_softmax_{c}"] = sp.simplify(sp.cancel(sp.together(p - combined)))
    slope = sp.diff(out["score_eta"], out["eta"]).subs(out["eta"], 0)
    residuals["score_slope_minus_stated"] = sp.expand(slope - out["stated_slope"])
    steps = (
        ("Context: L = 2, H = 4, d = 2; position 3 chooses S ∈ {{0,1}, {0,2}, {1,2}}", str(CONSTRUCTION_CONTEXT)),
        ("Set posterior by Bayes over the three DAGs (full likelihood)", labelled(r"P(S_3 = \{0,1\} \mid \cdot)",
                                                                                  out["posterior"][0])),
        ("2-simplicial scores of one-hot copies with T = log π_2", labelled("s", sp.Matrix(out["scores"]))),
        ("posterior − softmax(scores), per candidate", sp.Matrix([residuals[f"posterior_minus_softmax_{c}"]
                                                                   for c in range(3)])),
        ("∂ score/∂η at η = 0 minus the stated slope (copies (1−η)e_x + ηu)", residuals["score_slope_minus_stated"]),
    )
    return Derivation(CLAIM_CONSTRUCTION, steps, {"posterior_0": out["posterior"][0],
                                                  "softmax_0": out["softmax"][0]}, residuals)
