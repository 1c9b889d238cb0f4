"""Lemma 4 for parent sets, derived with SymPy (claim ``ext-dag-lemma4-sets``; our extension, not the paper's).

:func:`derive_dag_lemma4`, for a symbolic joint r of (x_T, x_S) and a symbolic table π (see
:mod:`theory.dag_tables`):

    Δ = E log π(x_h | x_T) − E log π(x_h | x_S) = [I(x_h; x_T) − I(x_h; x_S)] + E_{x_S} KL(q(·|x_S) ‖ π(·|x_S))
      = Σ_{a,b} r(a, b) KL(π(·|a) ‖ π(·|b)).

The last form says exactly when the inequality Δ > 0 is strict: iff some (a, b) with r(a, b) > 0 has
π(·|a) ≠ π(·|b). The derivation exhibits both cases: Δ ≡ 0 when S shares T's first parent and π ignores the rest
(residual), Δ ≠ 0 for disjoint sets under the same π (witness).
"""
from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np
import sympy as sp

from bma_verify import numerics
from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.numerics.dag_law import DagLaw
from bma_verify.numerics.dag_lemma4 import dag_lemma4_terms
from bma_verify.theory.dag_tables import joint_table_symbols, stochastic_table
from bma_verify.theory.derivation import Derivation, ErrorTracker, Perturbation, Verification, labelled

CLAIM_LEMMA4 = "ext-dag-lemma4-sets"


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
    """Evaluate every derived term at random DAG instances and compare with :mod:`numerics.dag_lemma4`.

    At each point: a random kernel family (entries >= 0.01), a random DAG on H positions, μ₀ stationary (even
    points) or Dirichlet(1) (odd points), a position h > k and a candidate S ≠ T, overlapping T on alternate
    points. r = P(x_T, x_S) from the DAG's exact joint; the independent side is
    ``numerics.dag_lemma4.dag_lemma4_terms``, which computes P(x_T, x_h) and P(x_S, x_h) directly from the
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
