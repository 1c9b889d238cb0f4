"""``thm2-consistency``: the Hoeffding bound exp(−L Δ² / (2 log²(1/ε))) derived by the Chernoff method.

For a wrong candidate h', the BMA score difference is S_L = Σ_l Z_l with
Z_l = log π(x^l_h | x^l_pa) − log π(x^l_h | x^l_{h'}) i.i.d., mean Δ (the Lemma 4 gap) and, when π >= ε,
values in [a, b] = [log ε, log(1/ε)]. The derivation starts from the Chernoff bound with Hoeffding's lemma
(E e^{−s(Z − Δ)} <= e^{s²(b−a)²/8}), P(S_L <= 0) <= exp(−sLΔ + L s²(b−a)²/8) for all s > 0, minimises the
exponent over s with ``diff`` and ``solve``, and substitutes the range; then the union bound over the h − 1
wrong candidates and the L that makes it at most a target error probability.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import sympy as sp
from scipy.optimize import minimize_scalar

from bma_verify import numerics
from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.numerics.consistency_rates import hoeffding_bound
from bma_verify.numerics.information import pairwise_joint
from bma_verify.theory.derivation import Derivation, ErrorTracker, Perturbation, Verification, labelled

CLAIM = "thm2-consistency"

L_SYM = sp.Symbol("L", positive=True)
GAP = sp.Symbol("Delta", positive=True)
EPS = sp.Symbol("epsilon", positive=True)
N_WRONG = sp.Symbol("m", positive=True)  # number of wrong candidates, h − 1
TARGET = sp.Symbol("delta", positive=True)  # target probability of choosing a wrong parent


@lru_cache(maxsize=None)
def derive_thm2_consistency() -> Derivation:
    """The bound as an expression in L, Δ, ε, derived from Chernoff + Hoeffding's lemma.

    Returns
    -------
    Derivation
        results ``chernoff_exponent`` (in s, L, Δ, a, b), ``optimal_s``, ``bound`` (in L, Δ, ε),
        ``union_bound`` (in L, Δ, ε, m) and ``sufficient_L`` (in Δ, ε, m, δ);
        residuals ``bound_minus_stated`` (the bound as docs/claims.md states it) and ``union_bound_limit`` (the
        wrong-parent probability bound → 0 as L → ∞); definition ``union_at_sufficient_L_minus_target`` (L* substituted back
        into the equation it solves).
    """
    s, a, b = sp.Symbol("s", positive=True), sp.Symbol("a", real=True), sp.Symbol("b", real=True)
    exponent = -s * L_SYM * GAP + L_SYM * s**2 * (b - a) ** 2 / 8  # log of the Chernoff–Hoeffding bound
    stationary = sp.solve(sp.Eq(sp.diff(exponent, s), 0), s)
    (s_star,) = stationary
    second = sp.simplify(sp.diff(exponent, s, 2))  # L (b−a)²/4 > 0: the stationary point is the minimum
    optimal = sp.simplify(exponent.subs(s, s_star))
    bound = sp.exp(sp.simplify(optimal.subs({a: sp.log(EPS), b: sp.log(1 / EPS)})))
    bound = sp.simplify(sp.powsimp(sp.expand_log(bound, force=True)))
    bound_residual = bound_minus_stated(bound)

    union = N_WRONG * bound
    (sufficient,) = sp.solve(sp.Eq(union, TARGET), L_SYM)
    sufficient = sp.factor(sp.expand_log(sufficient, force=True))  # log((m/δ)^c) → c·log(m/δ): no overflow
    union_residual = sp.simplify(union.subs(L_SYM, sufficient) - TARGET)
    # Consistency: for any Δ > 0 and ε < 1 the probability of a wrong argmax vanishes as L → ∞.
    vanishing = sp.limit(union.subs(EPS, sp.exp(-sp.Symbol("kappa", positive=True))), L_SYM, sp.oo)

    steps: tuple[tuple[str, sp.Basic | str], ...] = (
        ("Chernoff bound with Hoeffding's lemma, Z ∈ [a, b]: log P(S_L ≤ 0) ≤", exponent),
        ("Stationary point in s", sp.Eq(sp.Symbol("s^*"), s_star)),
        ("Second derivative in s (positive: a minimum)", second),
        ("Optimised exponent", optimal),
        ("With a = log ε, b = log(1/ε)", labelled(r"P(S_L \le 0)", bound, r"\le")),
        ("Bound minus the stated exp(−L Δ² / (2 log²(1/ε))) (in the log domain)", bound_residual),
        ("Union bound over the m = h − 1 wrong candidates", labelled(r"P(\widehat{pa} \ne pa)", union, r"\le")),
        ("L that makes the union bound equal to δ", sp.Eq(sp.Symbol("L^*"), sufficient)),
        ("Limit of the union bound as L → ∞ (ε = e^{−κ}, κ > 0)", vanishing),
    )
    results = {"chernoff_exponent": exponent, "optimal_s": s_star, "bound": bound, "union_bound": union,
               "sufficient_L": sufficient}
    residuals = {"bound_minus_stated": bound_residual, "union_bound_limit": vanishing}
    # L* solved from union = δ and substituted back: zero by construction (a definition, not evidence).
    definitions = {"union_at_sufficient_L_minus_target": union_residual}
    return Derivation(CLAIM, steps, results, residuals, definitions=definitions)


def bound_minus_stated(bound: sp.Expr) -> sp.Expr:
    """log(bound) − log(exp(−L Δ² / (2 log²(1/ε)))), logs expanded and simplified: 0 when the bound is as stated.

    The derivation's own check, also applied to a perturbed bound.
    """
    stated = sp.exp(-L_SYM * GAP**2 / (2 * sp.log(1 / EPS) ** 2))
    return sp.simplify(sp.expand_log(sp.log(bound) - sp.log(stated), force=True))


def exponent_times_four(results) -> dict[str, sp.Basic]:
    """Negative control: the Hoeffding bound with its exponent multiplied by 4, exp(−2LΔ²/log²(1/ε)).

    A tighter bound than Chernoff–Hoeffding gives: the residual, the numeric optimum of the Chernoff exponent and
    ``numerics.claims.hoeffding_bound`` must reject it.
    """
    return {"bound": sp.powsimp(results["bound"] ** 4)}


@lru_cache(maxsize=None)
def perturb_thm2_consistency(perturbation: Perturbation = exponent_times_four) -> Derivation:
    """:func:`derive_thm2_consistency` with ``perturbation`` applied and ``bound_minus_stated`` re-derived."""
    def recheck(results):
        return Derivation(CLAIM, (), {}, {"bound_minus_stated": bound_minus_stated(results["bound"])})

    return derive_thm2_consistency().perturbed(perturbation, recheck)


def exact_error_probability(kernel, joint_candidate_parent, L: int) -> float:
    """P(Σ_{l=1}^{L} Z_l <= 0) exactly, Z_l = log π(x_h|x_pa) − log π(x_h|x_{h'}), by convolving Z's law L times.

    ``joint_candidate_parent[a, b]`` = P(x_{h'} = a, x_pa = b); x_h ~ π(·|b). The law of Z has at most d³ atoms;
    atoms are merged at 1e-12 so the support of the sum stays small for the L used here.
    """
    d = kernel.shape[0]
    law: dict[float, float] = {}
    for a in range(d):
        for b in range(d):
            for c in range(d):
                z = round(float(np.log(kernel[b, c]) - np.log(kernel[a, c])), 12)
                law[z] = law.get(z, 0.0) + float(joint_candidate_parent[a, b] * kernel[b, c])
    total = {0.0: 1.0}
    for _ in range(L):
        nxt: dict[float, float] = {}
        for s, ps in total.items():
            for z, pz in law.items():
                key = round(s + z, 9)
                nxt[key] = nxt.get(key, 0.0) + ps * pz
        total = nxt
    return float(sum(p for s, p in total.items() if s <= 1e-9))


def verify_thm2_consistency(rng, *, n_points: int = 12, perturbation: Perturbation | None = None) -> Verification:
    """Check the derived bound three ways at random (L, Δ, ε) and on random small instances.

    * ``bound`` vs ``numerics.claims.hoeffding_bound`` (the bound as numerics states it);
    * ``bound`` vs exp(min_s exponent), the Chernoff exponent minimised numerically (scipy), an independent
      route to the optimum;
    * slack ``bound_holds_exactly``: derived bound − exact P(S_L <= 0) on random d = 2 kernels and trees
      (Δ = E Z from the exact joints, ε = min π), for L in 1..6;
    * slack ``sufficient_L_suffices``: δ − union bound at ⌈L*⌉.

    ``perturbation``: verify the results of :func:`perturb_thm2_consistency` instead (a negative control).
    """
    rng = check_rng(rng)
    n_points = check_positive_int(n_points, "n_points")
    results = (derive_thm2_consistency() if perturbation is None
               else perturb_thm2_consistency(perturbation=perturbation)).results
    f_bound = sp.lambdify([L_SYM, GAP, EPS], results["bound"], "numpy")
    f_union = sp.lambdify([L_SYM, GAP, EPS, N_WRONG], results["union_bound"], "numpy")
    f_L = sp.lambdify([GAP, EPS, N_WRONG, TARGET], results["sufficient_L"], "numpy")
    tracker = ErrorTracker()
    for _ in range(n_points):
        L, eps, gap = int(rng.integers(1, 200)), float(rng.uniform(0.01, 0.45)), float(rng.uniform(0.01, 1.0))
        width = 2.0 * np.log(1.0 / eps)
        tracker.compare("bound_vs_numerics", f_bound(L, gap, eps), hoeffding_bound(L, gap, eps))
        exponent = minimize_scalar(lambda s: -s * L * gap + L * s * s * width**2 / 8, bounds=(0.0, 100.0),
                                   method="bounded", options={"xatol": 1e-12})
        tracker.compare("bound_vs_numeric_chernoff", np.log(f_bound(L, gap, eps)), exponent.fun)
        m, target = int(rng.integers(1, 10)), float(rng.uniform(0.01, 0.5))
        tracker.bound("sufficient_L_suffices", f_union(np.ceil(f_L(gap, eps, m, target)), gap, eps, m), target)

        kernel = numerics.random_kernel(2, eps=float(rng.uniform(0.05, 0.3)), alpha=0.5, rng=rng)
        parents = numerics.random_parents(5, rng=rng)
        h = int(rng.integers(2, 5))
        hp = int(rng.choice([g for g in range(h) if g != parents[h]]))
        pa = int(parents[h])
        joint = pairwise_joint(kernel, parents, hp, pa)  # (d, d): (x_{h'}, x_pa)
        gap_exact = float(sum(joint[a, b] * kernel[b, c] * (np.log(kernel[b, c]) - np.log(kernel[a, c]))
                              for a in range(2) for b in range(2) for c in range(2)))
        for L_small in range(1, 7):
            exact = exact_error_probability(kernel, joint, L_small)
            tracker.bound("bound_holds_exactly", exact, f_bound(L_small, gap_exact, kernel.min()))
    return tracker.result(CLAIM, n_points)
