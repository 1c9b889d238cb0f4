"""Lemma 3's proved α* = 1 − ε/(1 − (d − 1)ε): the minorisation steps derived with SymPy (``lemma3-strict-dpi``; ours).

The proof (``numerics.lemma3_alpha``) bounds δ of the channel x_pa → x_h' by δ of its first step F and then
δ(F) ≤ 1 − Σ_y min_x F(y|x) (TV = 1 − Σ min, derived in ``theory.dpi``). What is new is the minorisation of a
reverse step R(a|b) = P(x_g = a)π(b|a)/P(x_pa = b), with π = ε + u (u ≥ 0 entrywise) and g the law of x_g:

1. R(a|b) − ε·g(a)/P(x_pa = b) = g(a)·u(b|a)/P(x_pa = b) ≥ 0, so Σ_a min_b R(a|b) ≥ ε/max_b P(x_pa = b);
2. 1 − (d − 1)ε − P(x_pa = b) = Σ_a g(a) Σ_{c≠b} u(c|a) ≥ 0 when Σ g = 1, so max_b P(x_pa = b) ≤ 1 − (d − 1)ε.

Together: δ(R) ≤ 1 − ε/(1 − (d − 1)ε) = α*. The SDPI (η_KL ≤ δ) and the submultiplicativity of δ are cited
theorems, evaluated numerically only.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import sympy as sp

from bma_verify import numerics
from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.numerics.lemma3_alpha import first_step
from bma_verify.theory.derivation import Derivation, ErrorTracker, Verification

CLAIM = "lemma3-strict-dpi"


def excess_symbols(d: int, b: int) -> sp.Matrix:
    """u(c|a) = π(c|a) − ε ≥ 0 for c ≠ b (free, nonnegative); column b is left out (it is 1 minus the rest)."""
    return sp.Matrix(d, d, lambda a, c: 0 if c == b else sp.Symbol(f"u_{a}{c}", nonnegative=True))


def kernel_from_excess(d: int, b: int, eps: sp.Symbol) -> sp.Matrix:
    """π = ε + u off column b, π(b|a) = 1 − Σ_{c≠b} π(c|a): row-stochastic by construction."""
    u = excess_symbols(d, b)
    rows = []
    for a in range(d):
        row = [eps + u[a, c] for c in range(d)]
        row[b] = 1 - sp.Add(*[row[c] for c in range(d) if c != b])
        rows.append(row)
    return sp.Matrix(rows)


@lru_cache(maxsize=None)
def derive_lemma3_alpha(d: int = 3) -> Derivation:
    """The two minorisation steps of α* for a symbolic kernel π ≥ ε and law g of pa's parent (column b = 0).

    Returns
    -------
    Derivation
        results: ``reverse_step`` (d x d, R[b, a] = P(x_g = a | x_pa = b), in g, ε, u with π(·|a) built so that
        π(b|a) = ε + w(a) for a free w ≥ 0 at b = 0), ``pa_law`` P(x_pa = ·); residuals: R minus g·π/P(x_pa)'s
        minorisation form, 1 − (d − 1)ε − P(x_pa = 0) minus its sum-of-excess form; nonnegatives: the two slacks.
    """
    eps = sp.Symbol("epsilon", positive=True)
    g = list(sp.symbols(f"g_0:{d}", positive=True))
    pi = kernel_from_excess(d, 0, eps)  # π(0|a) is the dependent entry
    law = [sp.Add(*[g[a] * pi[a, c] for a in range(d)]) for c in range(d)]  # P(x_pa = c) = Σ_a g(a) π(c|a)
    reverse = sp.Matrix(d, d, lambda c, a: g[a] * pi[a, c] / law[c])  # Bayes reversal, from the joint g(a)π(c|a)
    steps, residuals, nonnegatives = [], {}, {}
    # step 1 at a column c ≠ 0, where π(c|a) = ε + u(c|a) with u free: the slack is g·u/P, manifestly ≥ 0 (any
    # column is such a column after relabelling the states)
    c = 1
    u = excess_symbols(d, 0)
    for a in range(d):
        slack = reverse[c, a] - eps * g[a] / law[c]
        manifest = g[a] * u[a, c] / law[c]
        residuals[f"reverse_minorisation_minus_slack_a{a}"] = sp.cancel(slack - manifest)
        nonnegatives[f"reverse_minorisation_a{a}"] = manifest
    steps.append((f"d = {d}: R(a|b) − ε g(a)/P(x_pa = b) − g(a)u(b|a)/P(x_pa = b), a = 0..{d - 1}",
                  sp.Matrix([residuals[f"reverse_minorisation_minus_slack_a{a}"] for a in range(d)])))
    # step 2 at b = 0 (the dependent column): 1 − (d − 1)ε − P(x_pa = 0), with Σ g = 1 written as its defect
    defect = 1 - sp.Add(*g)
    excess = sp.Add(*[g[a] * u[a, cc] for a in range(d) for cc in range(1, d)])
    residuals["pa_law_bound_minus_excess"] = sp.expand(1 - (d - 1) * eps - law[0] - excess
                                                       - defect * (1 - (d - 1) * eps))
    nonnegatives["pa_law_bound"] = excess
    steps.append((f"d = {d}: 1 − (d − 1)ε − P(x_pa = b) − Σ_a g(a)Σ_{{c≠b}} u(c|a) − (1 − Σg)(1 − (d − 1)ε)",
                  residuals["pa_law_bound_minus_excess"]))
    results = {"reverse_step": reverse, "pa_law": sp.Matrix(law), "kernel": pi}
    return Derivation(CLAIM, tuple(steps), results, residuals, {}, nonnegatives)


def verify_lemma3_alpha(rng, *, n_points: int = 12, d: int = 3) -> Verification:
    """Compare the derived reverse step with ``numerics.lemma3_alpha.first_step`` on the chain x_0 → x_1 → x_2
    (g = μ₀, a random Dirichlet law), and bound each minorisation at random points.

    Each point draws ε and u ≥ 0 with every row's excess below 1 − dε, builds π from them, and checks
    R ≥ ε g/P(x_pa = b) entrywise and max_b P(x_pa = b) ≤ 1 − (d − 1)ε (slacks), with the NumPy kernel.
    """
    rng = check_rng(rng)
    n_points = check_positive_int(n_points, "n_points")
    derivation = derive_lemma3_alpha(d)
    eps = sp.Symbol("epsilon", positive=True)
    g = list(sp.symbols(f"g_0:{d}", positive=True))
    u = [s for s in excess_symbols(d, 0) if s != 0]
    args = [eps, *g, *u]
    reverse = sp.lambdify(args, derivation.results["reverse_step"], "numpy")
    kernel_of = sp.lambdify(args, derivation.results["kernel"], "numpy")
    law_of = sp.lambdify(args, derivation.results["pa_law"], "numpy")
    tracker = ErrorTracker()
    for _ in range(n_points):
        e = rng.uniform(0.01, 0.9 / d)
        excess = rng.dirichlet(np.ones(d), size=d) * (1 - d * e)  # (d, d): row a's excess over ε, summing to 1 − dε
        g_values = rng.dirichlet(np.ones(d))
        values = [e, *g_values, *excess[:, 1:].ravel()]
        kernel = np.asarray(kernel_of(*values), dtype=float)
        tracker.compare("kernel_construction", kernel, e + excess, definition=True)  # not evidence
        R = np.asarray(reverse(*values), dtype=float)
        step, _ = first_step(kernel, np.array([-1, 0, 1]), 0, 1, g_values)
        tracker.compare("reverse_step_vs_first_step", R, step)
        law = np.ravel(law_of(*values))
        tracker.bound("reverse_minorisation", e * g_values[None, :] / law[:, None], R)
        tracker.bound("pa_law_bound", law.max(), 1 - (d - 1) * e)
        tracker.bound("alpha_star_bounds_dobrushin", numerics.dobrushin_coefficient(R),
                      1 - e / (1 - (d - 1) * e))
    return tracker.result(CLAIM, n_points)
