"""Theorem 3's J form under a stationary μ₀: the proof steps derived with SymPy (``thm3-init-gradient``).

The repaired statement (ours, "what holds instead"): with x_0 drawn from the stationary law μ of π and π > 0
entrywise, J(pa) > J(h') for every other candidate h' < h. The chain, for a candidate with law p, conditional q of
x_h given x_{h'}, child law P_h = p·q, left = √p, right = √P_h, M_q = diag(√p) q diag(1/√P_h), M_π the same with
π, A = M_q − left·rightᵀ and B = M_π − left·rightᵀ:

1. J(h') = Σ p(a) q(c|a) π(c|a)/P_h(c) − 1 equals ⟨A, B⟩_F (any laws: derived, residual 0), and ‖A‖²_F equals
   I_χ²(x_{h'}; x_h) from its definition;
2. M_π·right = left for any laws; leftᵀ·M_π = rightᵀ exactly when p·π = P_h, which the stationary law μ (solved
   from μπ = μ) satisfies (residual 0), a non-stationary law does not (witness); ‖B‖² − I_χ²(x_pa; x_h) equals
   Σ_a (p − m)(a) Σ_c π(c|a)²/P_h(c), m the parent's law, so it vanishes when the candidate and the parent share a
   law (stationary μ₀);
3. Cauchy–Schwarz: ‖A‖²‖B‖² − ⟨A, B⟩² = ½ Σ (A_i B_j − A_j B_i)² (Lagrange's identity, residual 0; slack a sum
   of squares);
4. χ² strong DPI for U − X − Y: at d = 2 I_χ²(U; Y) = η·I_χ²(U; X) exactly, η = det(N)² the squared second
   singular value of N = diag(√P_X) K diag(1/√P_Y) (whose other singular value is 1 by step 2); for d ≥ 3 the
   inequality is checked numerically (``numerics.thm3_stationary``), not derived here.

Then J(h') ≤ ‖A‖‖B‖ ≤ √(η·I_χ²(x_pa; x_h))·√(I_χ²(x_pa; x_h)) = √η·J(pa) < J(pa).
"""
from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np
import sympy as sp

from bma_verify import numerics
from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.numerics.thm3_stationary import proof_chain
from bma_verify.theory.derivation import (Derivation, ErrorTracker, Perturbation, Verification, probability_vector,
                                          stochastic_matrix)

CLAIM = "thm3-init-gradient"


def _cells(d: int):
    return list(itertools.product(range(d), range(d)))


def column_law_symbols(d: int) -> list[sp.Symbol]:
    """w_c: placeholders for the child law P_h(c), substituted by its definition after expanding."""
    return list(sp.symbols(f"w_0:{d}", positive=True))


def factor_matrices(p: sp.Matrix, kernel: sp.Matrix, w: list) -> tuple[sp.Matrix, sp.Matrix]:
    """M = diag(√p) kernel diag(1/√w) and the rank-one left·rightᵀ = √p √wᵀ."""
    d = kernel.shape[0]
    M = sp.Matrix(d, d, lambda a, c: sp.sqrt(p[a]) * kernel[a, c] / sp.sqrt(w[c]))
    return M, sp.Matrix(d, d, lambda a, c: sp.sqrt(p[a]) * sp.sqrt(w[c]))


def frobenius(X: sp.Matrix, Y: sp.Matrix) -> sp.Expr:
    """⟨X, Y⟩_F = Σ X_ij Y_ij."""
    return sp.Add(*[x * y for x, y in zip(X, Y)])


def law_symbols(name: str, d: int) -> list[sp.Symbol]:
    """A law's entries as d free positive symbols: normalisation (Σ = 1) is substituted last (:func:`_zero`), so
    that no denominator carries a sum."""
    return list(sp.symbols(f"{name}_0:{d}", positive=True))


def chi2_information(joint: sp.Matrix, rows: list, cols: list) -> sp.Expr:
    """I_χ² = Σ (P(a, c) − P(a)P(c))² / (P(a)P(c)) of a symbolic joint with marginals ``rows`` and ``cols``."""
    d = joint.shape[0]
    return sp.Add(*[(joint[a, c] - rows[a] * cols[c]) ** 2 / (rows[a] * cols[c]) for a, c in _cells(d)])


def _zero(expr: sp.Expr, w: list, law: list, laws: tuple = ()) -> sp.Expr:
    """Expand with the placeholders w, substitute w = law, then each law's normalisation, expand again: the zero
    polynomial when the identity holds (the w-denominator terms must cancel before any substitution)."""
    expanded = sp.expand(sp.expand(expr).subs(dict(zip(w, law))))
    for symbols in laws:
        expanded = sp.expand(expanded.subs(symbols[-1], 1 - sp.Add(*symbols[:-1])))
    return expanded


def stationary_law(kernel: sp.Matrix) -> sp.Matrix:
    """μ solving μπ = μ, Σ μ = 1 (sympy.solve of the linear system)."""
    d = kernel.shape[0]
    mu = sp.symbols(f"mu_0:{d}")
    equations = [sp.Add(*[mu[a] * kernel[a, c] for a in range(d)]) - mu[c] for c in range(d - 1)]
    solution = sp.solve([*equations, sp.Add(*mu) - 1], mu, dict=True)[0]
    return sp.Matrix([sp.factor(solution[m]) for m in mu])


def _identity_steps(d: int, steps, results, residuals) -> None:
    """Step 1: J(h') = ⟨A, B⟩ and ‖A‖² = I_χ²(x_{h'}; x_h) for symbolic p, q, π (w = P_h = p·q)."""
    p, q, pi, w = law_symbols("p", d), stochastic_matrix("q", d), stochastic_matrix("pi", d), column_law_symbols(d)
    law = [sp.Add(*[p[a] * q[a, c] for a in range(d)]) for c in range(d)]  # P_h = p·q
    M_q, rank_one = factor_matrices(p, q, w)
    M_pi, _ = factor_matrices(p, pi, w)
    A, B = M_q - rank_one, M_pi - rank_one
    J = sp.Add(*[p[a] * q[a, c] * pi[a, c] / w[c] for a, c in _cells(d)]) - 1  # E[π(x_h|x_h')/P(x_h)] − 1
    results[f"frobenius_d{d}"] = sp.expand(frobenius(A, B))
    results[f"norm_a_squared_d{d}"] = sp.expand(frobenius(A, A))
    residuals[f"J_minus_frobenius_d{d}"] = _zero(J - frobenius(A, B), w, law, (p,))
    joint = sp.Matrix(d, d, lambda a, c: p[a] * q[a, c])
    residuals[f"norm_a_squared_minus_chi2_d{d}"] = _zero(frobenius(A, A) - chi2_information(joint, p, w), w, law, (p,))
    steps.append((f"d = {d}: J(h') − ⟨A, B⟩_F (A, B: M_q, M_π minus √p√P_hᵀ)", residuals[f"J_minus_frobenius_d{d}"]))
    steps.append((f"d = {d}: ‖A‖²_F − I_χ²(x_h'; x_h)", residuals[f"norm_a_squared_minus_chi2_d{d}"]))


def _singular_pair_steps(d: int, steps, results, residuals, witnesses) -> None:
    """Step 2: (√μ, √μ) is a singular pair of M_π with value 1 under the stationary law, and the π side."""
    pi, mu = stochastic_matrix("pi", d), law_symbols("mu", d)
    solved = stationary_law(pi)
    M_mu, _ = factor_matrices(mu, pi, mu)
    root = sp.Matrix([sp.sqrt(x) for x in mu])
    at_mu = dict(zip(mu, solved))
    # M_π√μ − √μ, and √μ_c·(√μᵀM_π − √μᵀ)_c = (μπ − μ)_c: zero at the solved μ
    residuals[f"right_singular_d{d}"] = (M_mu * root - root).applyfunc(sp.expand)
    left = [sp.expand(sp.sqrt(mu[c]) * e) for c, e in enumerate(root.T * M_mu - root.T)]
    residuals[f"left_singular_stationary_d{d}"] = sp.Matrix(1, d, [sp.cancel(e.subs(at_mu)) for e in left])
    results[f"stationary_law_d{d}"] = solved
    p, m, w = law_symbols("p", d), law_symbols("m", d), column_law_symbols(d)
    law = [sp.Add(*[m[a] * pi[a, c] for a in range(d)]) for c in range(d)]  # P_h = m·π (x_pa → x_h)
    point = {s: sp.Rational(k + 2, 5 * d * d + 3) for k, s in enumerate([*p[:-1], *m[:-1], *pi[:, :-1]])}
    point.update({p[-1]: 1 - sp.Add(*p[:-1]), m[-1]: 1 - sp.Add(*m[:-1])})
    # (p·π − P_h) at a rational point with p ≠ m: the left singular equation fails without stationarity
    witnesses[f"left_singular_non_stationary_d{d}"] = sp.Matrix(1, d, [
        sp.nsimplify((sp.Add(*[p[a] * pi[a, c] for a in range(d)]) - law[c]).subs(point).subs(point))
        for c in range(d)])
    M_pi, rank_one = factor_matrices(p, pi, w)
    B = M_pi - rank_one
    gap = frobenius(B, B) - chi2_information(sp.Matrix(d, d, lambda a, c: m[a] * pi[a, c]), m, w)
    mismatch = sp.Add(*[(p[a] - m[a]) * pi[a, c] ** 2 / w[c] for a, c in _cells(d)])
    results[f"pi_side_gap_d{d}"] = sp.expand(gap)
    residuals[f"pi_side_gap_minus_mismatch_d{d}"] = _zero(gap - mismatch, w, law, (p, m))
    residuals[f"pi_side_gap_equal_laws_d{d}"] = _zero(gap.subs(dict(zip(p, m))), w, law, (m,))
    steps.append((f"d = {d}: M_π√μ − √μ and √μ∘(√μᵀM_π − √μᵀ) with μ solved from μπ = μ",
                  sp.Matrix.hstack(residuals[f"right_singular_d{d}"], residuals[f"left_singular_stationary_d{d}"].T)))
    steps.append((f"d = {d}: p·π − P_h for a non-stationary law at a rational point (not 0)",
                  witnesses[f"left_singular_non_stationary_d{d}"]))
    steps.append((f"d = {d}: ‖B‖² − I_χ²(x_pa; x_h) − Σ_a (p − m)(a) Σ_c π(c|a)²/P_h(c)",
                  residuals[f"pi_side_gap_minus_mismatch_d{d}"]))


def _cauchy_schwarz_step(d: int, steps, results, residuals, nonnegatives) -> None:
    """Step 3: Lagrange's identity ‖A‖²‖B‖² − ⟨A, B⟩² = ½ Σ (A_i B_j − A_j B_i)² for real d × d matrices."""
    A = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"A_{i}{j}", real=True))
    B = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"B_{i}{j}", real=True))
    a, b = list(A), list(B)
    squares = sp.Add(*[(a[i] * b[j] - a[j] * b[i]) ** 2 for i in range(d * d) for j in range(i + 1, d * d)])
    gap = frobenius(A, A) * frobenius(B, B) - frobenius(A, B) ** 2
    results[f"cauchy_schwarz_gap_d{d}"] = gap
    residuals[f"cauchy_schwarz_minus_squares_d{d}"] = sp.expand(gap - squares)
    nonnegatives[f"cauchy_schwarz_squares_d{d}"] = squares
    steps.append((f"d = {d}: ‖A‖²‖B‖² − ⟨A, B⟩² − Σ_{{i<j}}(A_iB_j − A_jB_i)²",
                  residuals[f"cauchy_schwarz_minus_squares_d{d}"]))


def _sdpi_step(steps, results, residuals) -> None:
    """Step 4 at d = 2: I_χ²(U; Y) = det(N)²·I_χ²(U; X) for U − X − Y (binary), N the normalised X → Y joint."""
    r = probability_vector("r", 4)
    joint_ux = sp.Matrix(2, 2, list(r))  # P(U = u, X = x)
    K = stochastic_matrix("k", 2)  # X → Y
    joint_uy = joint_ux * K
    law_u = [sp.Add(*joint_ux.row(u)) for u in range(2)]
    law_x = [sp.Add(*joint_ux.col(x)) for x in range(2)]
    law_y = [sp.Add(*joint_uy.col(y)) for y in range(2)]
    N, _ = factor_matrices(law_x, K, law_y)
    eta = sp.factor(N.det() ** 2)
    results["sdpi_eta_d2"] = eta
    # each side put over one denominator and factored first: cancelling the difference directly takes ~20 s
    chi2_uy, chi2_ux = (sp.factor(sp.together(chi2_information(j, law_u, law))) for j, law in
                        ((joint_uy, law_y), (joint_ux, law_x)))
    residuals["sdpi_equality_d2"] = sp.cancel(chi2_uy - eta * chi2_ux)
    steps.append(("d = 2: η = det(diag(√P_X) K diag(1/√P_Y))²", eta))
    steps.append(("d = 2: I_χ²(U; Y) − η·I_χ²(U; X) for U − X − Y", residuals["sdpi_equality_d2"]))


@lru_cache(maxsize=None)
def derive_thm3_stationary(d_values: tuple[int, ...] = (2, 3)) -> Derivation:
    """The proof steps of J(pa) > J(h') under a stationary μ₀ (steps 1–3 for each d, step 4 at d = 2).

    Returns
    -------
    Derivation
        results: ``frobenius_d{d}`` ⟨A, B⟩ and ``norm_a_squared_d{d}`` ‖A‖² (in p, q, π), ``pi_side_gap_d{d}``
        ‖B‖² − I_χ²(x_pa; x_h) (in p, m, π), ``stationary_law_d{d}`` (in π), ``cauchy_schwarz_gap_d{d}`` (in A,
        B), ``sdpi_eta_d2`` (in r, k); residuals (0 when the step holds) and witnesses (the left singular equation
        with a non-stationary law, not 0); nonnegatives: the sums of squares of Lagrange's identity.
    """
    steps: list = []
    results: dict = {}
    residuals: dict = {}
    witnesses: dict = {}
    nonnegatives: dict = {}
    for d in d_values:
        _identity_steps(d, steps, results, residuals)
        _singular_pair_steps(d, steps, results, residuals, witnesses)
        _cauchy_schwarz_step(d, steps, results, residuals, nonnegatives)
    _sdpi_step(steps, results, residuals)
    return Derivation(CLAIM, tuple(steps), results, residuals, witnesses, nonnegatives)


def candidate_law_for_parent_law(results) -> dict[str, sp.Basic]:
    """Negative control: the π side taken under the parent's law where the candidate's belongs (p ← m in B).

    With the candidate's law written as the parent's, ‖B‖² − I_χ²(x_pa; x_h) would vanish for every μ₀: the step
    that needs stationarity. Replacing ``pi_side_gap_d{d}`` by that zero claims it; the residual against the
    mismatch form and the numeric comparison with ``numerics.thm3_stationary`` on non-stationary instances must
    reject it.
    """
    out = {}
    for name, gap in results.items():
        if name.startswith("pi_side_gap_d"):
            d = int(name.removeprefix("pi_side_gap_d"))
            out[name] = gap.subs(dict(zip(law_symbols("p", d), law_symbols("m", d))))
    return out


@lru_cache(maxsize=None)
def perturb_thm3_stationary(d_values: tuple[int, ...] = (2, 3),
                            perturbation: Perturbation = candidate_law_for_parent_law) -> Derivation:
    """:func:`derive_thm3_stationary` with ``perturbation`` applied and the π-side residuals re-derived."""
    def recheck(results):
        residuals = {}
        for d in d_values:
            pi, p, m, w = stochastic_matrix("pi", d), law_symbols("p", d), law_symbols("m", d), column_law_symbols(d)
            law = [sp.Add(*[m[a] * pi[a, c] for a in range(d)]) for c in range(d)]
            mismatch = sp.Add(*[(p[a] - m[a]) * pi[a, c] ** 2 / w[c] for a, c in _cells(d)])
            residuals[f"pi_side_gap_minus_mismatch_d{d}"] = _zero(results[f"pi_side_gap_d{d}"] - mismatch, w, law,
                                                                  (p, m))
        return Derivation(CLAIM, (), {}, residuals)

    return derive_thm3_stationary(d_values).perturbed(perturbation, recheck)


def _random_instance(rng, d: int):
    """A positive kernel, a random tree with H = 5, a Dirichlet μ₀, h = 4 and a candidate h' ≠ pa(h)."""
    kernel = numerics.random_kernel(d, eps=0.05 / d, rng=rng)
    parents = numerics.random_parents(5, rng=rng)
    init = rng.dirichlet(np.ones(d))
    others = [g for g in range(4) if g != parents[4]]
    return kernel, parents, init, int(rng.choice(others))


def verify_thm3_stationary(rng, *, n_points: int = 12, d_values: tuple[int, ...] = (2, 3),
                           perturbation: Perturbation | None = None) -> Verification:
    """Compare the derived steps with independent numerics at random instances (non-stationary μ₀ included).

    * ``frobenius_d{d}`` at (p, q, π) of a random tree's candidate vs ``numerics.chi2_gain`` (J by its definition);
    * ``norm_a_squared_d{d}`` vs ``numerics.chi2_mutual_information`` of the candidate–child joint;
    * ``pi_side_gap_d{d}`` at (p, m, π) vs ``numerics.thm3_stationary.proof_chain``'s ``pi_side_gap``;
    * ``stationary_law_d{d}`` vs ``numerics.stationary_distribution``;
    * ``cauchy_schwarz_gap_d{d}`` at random matrices vs NumPy's ‖A‖²‖B‖² − ⟨A, B⟩², and its slack ≥ 0;
    * ``sdpi_eta_d2`` vs ``numerics.chi2_contraction``, and η·I_χ²(U; X) vs I_χ²(U; Y) by NumPy.

    ``perturbation``: verify the results of :func:`perturb_thm3_stationary` instead (a negative control).
    """
    rng = check_rng(rng)
    n_points = check_positive_int(n_points, "n_points")
    derivation = (derive_thm3_stationary(tuple(d_values)) if perturbation is None
                  else perturb_thm3_stationary(tuple(d_values), perturbation=perturbation))
    results = derivation.results
    tracker = ErrorTracker()
    for i in range(n_points):
        d = d_values[i % len(d_values)]
        kernel, parents, init, candidate = _random_instance(rng, d)
        h = 4
        joint = numerics.pairwise_joint(kernel, parents, candidate, h, init=init)
        p = joint.sum(axis=1)
        q = joint / p[:, None]
        m = numerics.marginal(kernel, parents, int(parents[h]), init=init)
        values = {"p": p, "q": q, "pi": kernel, "m": m, "w": joint.sum(axis=0)}  # w: the law P(x_h)
        tracker.compare("frobenius_vs_chi2_gain", _evaluate(results[f"frobenius_d{d}"], values),
                        numerics.chi2_gain(kernel, parents, h, init=init)[candidate])
        tracker.compare("norm_a_squared_vs_chi2_mi", _evaluate(results[f"norm_a_squared_d{d}"], values),
                        numerics.chi2_mutual_information(joint))
        chain = proof_chain(kernel, parents, h, init)
        tracker.compare("pi_side_gap_vs_proof_chain", _evaluate(results[f"pi_side_gap_d{d}"], values),
                        chain["pi_side_gap"][list(chain["candidates"]).index(candidate)])
        tracker.compare("stationary_law", np.ravel(_evaluate(results[f"stationary_law_d{d}"], values)),
                        numerics.stationary_distribution(kernel))
        A, B = rng.normal(size=(d, d)), rng.normal(size=(d, d))
        cs = _evaluate(results[f"cauchy_schwarz_gap_d{d}"], {"A": A, "B": B})
        tracker.compare("cauchy_schwarz_gap", cs, (A * A).sum() * (B * B).sum() - (A * B).sum() ** 2)
        tracker.bound("cauchy_schwarz", 0.0, cs)
        joint_ux = rng.dirichlet(np.ones(4)).reshape(2, 2)
        K = numerics.random_kernel(2, eps=0.01, rng=rng)
        eta = _evaluate(results["sdpi_eta_d2"], {"r": joint_ux.ravel(), "k": K})
        tracker.compare("sdpi_eta_vs_chi2_contraction", eta, numerics.chi2_contraction(joint_ux.sum(axis=0), K))
        tracker.compare("sdpi_equality", eta * numerics.chi2_mutual_information(joint_ux),
                        numerics.chi2_mutual_information(joint_ux @ K))
    return tracker.result(CLAIM, n_points)


def _evaluate(expr, values: dict):
    """Evaluate ``expr`` with each named symbolic array (``p_i``, ``pi_ij``, ``A_ij``, …) set from ``values``."""
    f, names = _lambdified(sp.sympify(expr))
    args = []
    for name, index in names:
        array = np.asarray(values[name])
        args.append(array[index] if array.ndim > 1 else array[index[0]])
    return np.asarray(f(*args), dtype=float)


@lru_cache(maxsize=None)
def _lambdified(expr: sp.Basic):
    """``expr`` lambdified over its free symbols, with each symbol's (array name, index) parsed from its name."""
    symbols = sorted(expr.free_symbols, key=lambda s: s.name)
    names = []
    for symbol in symbols:
        name, _, index = symbol.name.rpartition("_")
        names.append((name, tuple(int(k) for k in index)))
    return sp.lambdify(symbols, expr, "numpy"), names
