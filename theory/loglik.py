"""``lemma4-loglik-gap``: E log π(x_h|x_pa) − E log π(x_h|x_{h'}) = [I(x_h;x_pa) − I(x_h;x_{h'})] + E KL(q ‖ π).

Setting: a candidate h' < h with h' ≠ pa(h); given x_pa, x_h ~ π(·|x_pa) is independent of x_{h'} (h' is not a
descendant of h). With a symbolic joint r(a, b) = P(x_{h'} = a, x_pa = b) and a symbolic kernel π, every term is
built from its definition:

* E log π(x_h | x_pa) = Σ_{b,c} P(b) π(c|b) log π(c|b);
* E log π(x_h | x_{h'}) = Σ_{a,c} Q(a,c) log π(c|a), with Q(a,c) = Σ_b r(a,b) π(c|b) the joint of (x_{h'}, x_h);
* I(x_h; x_pa), I(x_h; x_{h'}) = Σ P log P/(P_X P_Y);
* E KL = Σ_a R(a) Σ_c q(c|a) log(q(c|a)/π(c|a)), q(c|a) = Q(a,c)/R(a), R(a) = Σ_b r(a,b).

Logs of quotients are split (``expand_log``) and every distinct log(…) is then an independent atom; the residual
LHS − RHS expands to the zero polynomial, using only the normalisation of r and of the rows of π.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import sympy as sp

from bma_verify import numerics
from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.numerics.dpi_sweep import lemma4_terms
from bma_verify.theory.derivation import (Derivation, ErrorTracker, Perturbation, Verification, labelled,
                                          stochastic_matrix)

CLAIM = "lemma4-loglik-gap"


def joint_symbols(d: int) -> sp.Matrix:
    """A symbolic d x d joint r[a, b] = P(x_{h'} = a, x_pa = b): positive entries, the last is 1 minus the rest."""
    free = [sp.Symbol(f"r_{a}{b}", positive=True) for a in range(d) for b in range(d)][:-1]
    return sp.Matrix(d, d, [*free, 1 - sp.Add(*free)])


def _split_logs(expr: sp.Expr) -> sp.Expr:
    """Expand logs of products and quotients, then expand the polynomial in the log atoms."""
    return sp.expand(sp.expand_log(expr, force=True))


@lru_cache(maxsize=None)
def derive_lemma4_loglik_gap(d: int = 2) -> Derivation:
    """The Lemma 4 identity for symbolic joints, simplified to a zero residual.

    Returns
    -------
    Derivation
        results (in r_ab and pi_ij): ``loglik_parent``, ``loglik_candidate``, ``mi_parent``, ``mi_candidate``,
        ``expected_kl``, ``gap`` (LHS) and ``decomposition`` (RHS); residual ``gap_minus_decomposition`` = 0.
    """
    d = check_positive_int(d, "d", minimum=2)
    r = joint_symbols(d)
    pi = stochastic_matrix("pi", d)
    R = [sp.Add(*r.row(a)) for a in range(d)]  # law of x_{h'}
    P = [sp.Add(*r.col(b)) for b in range(d)]  # law of x_pa
    Q = sp.Matrix(d, d, lambda a, c: sp.Add(*[r[a, b] * pi[b, c] for b in range(d)]))  # joint (x_{h'}, x_h)
    parent_child = sp.Matrix(d, d, lambda b, c: P[b] * pi[b, c])  # joint (x_pa, x_h)
    child = [sp.Add(*parent_child.col(c)) for c in range(d)]  # law of x_h
    cells = [(i, j) for i in range(d) for j in range(d)]

    loglik_parent = sp.Add(*[parent_child[b, c] * sp.log(pi[b, c]) for b, c in cells])
    loglik_candidate = sp.Add(*[Q[a, c] * sp.log(pi[a, c]) for a, c in cells])
    mi_parent = sp.Add(*[parent_child[b, c] * sp.log(parent_child[b, c] / (P[b] * child[c])) for b, c in cells])
    mi_candidate = sp.Add(*[Q[a, c] * sp.log(Q[a, c] / (R[a] * child[c])) for a, c in cells])
    expected_kl = sp.Add(*[R[a] * (Q[a, c] / R[a]) * sp.log((Q[a, c] / R[a]) / pi[a, c]) for a, c in cells])
    gap = loglik_parent - loglik_candidate
    decomposition = (mi_parent - mi_candidate) + expected_kl
    residual = gap_residual({"gap": gap, "decomposition": decomposition})

    steps: tuple[tuple[str, sp.Basic | str], ...] = (
        (f"Joint of (x_{{h'}}, x_pa), d = {d}", labelled("r", r)),
        ("Kernel", labelled(r"\pi", pi)),
        ("Joint of (x_{h'}, x_h): Q = r π (x_h depends on x_{h'} only through x_pa)", labelled("Q", Q)),
        ("LHS: E log π(x_h | x_pa) − E log π(x_h | x_{h'})", sp.Eq(sp.Symbol(r"\Delta"), gap)),
        ("E KL(q(·|x_{h'}) ‖ π(·|x_{h'})) from its definition",
         sp.Eq(sp.Symbol(r"\mathbb{E}\,\mathrm{KL}"), expected_kl)),
        ("LHS − [I(x_h; x_pa) − I(x_h; x_{h'}) + E KL], logs split and expanded", residual),
    )
    results = {"loglik_parent": loglik_parent, "loglik_candidate": loglik_candidate, "mi_parent": mi_parent,
               "mi_candidate": mi_candidate, "expected_kl": expected_kl, "gap": gap,
               "decomposition": decomposition}
    return Derivation(CLAIM, steps, results, residuals={"gap_minus_decomposition": residual})


def gap_residual(results) -> sp.Expr:
    """LHS − RHS of Lemma 4 (``gap − decomposition``), logs split and expanded: the zero polynomial when it holds.

    The derivation's own check, also applied to a perturbed decomposition.
    """
    return _split_logs(results["gap"] - results["decomposition"])


def dropped_kl_term(results) -> dict[str, sp.Basic]:
    """Negative control: the decomposition without its E KL(q ‖ π) term, I(x_h; x_pa) − I(x_h; x_{h'}) alone."""
    return {"decomposition": results["mi_parent"] - results["mi_candidate"]}


@lru_cache(maxsize=None)
def perturb_lemma4_loglik_gap(d: int = 2, perturbation: Perturbation = dropped_kl_term) -> Derivation:
    """:func:`derive_lemma4_loglik_gap` with ``perturbation`` applied and ``gap_minus_decomposition`` re-derived."""
    def recheck(results):
        return Derivation(CLAIM, (), {}, {"gap_minus_decomposition": gap_residual(results)})

    return derive_lemma4_loglik_gap(d).perturbed(perturbation, recheck)


def verify_lemma4_loglik_gap(rng, *, n_points: int = 20, d_values: tuple[int, ...] = (2, 3), H: int = 6,
                             perturbation: Perturbation | None = None) -> Verification:
    """Compare every derived term with ``numerics`` on random kernels, trees and (parent, candidate) pairs.

    At each point: a random kernel (entries >= 0.01), a random tree on H positions, a random μ₀, a position h
    and a candidate h' < h, h' ≠ pa(h) (points where pa(h) is the only candidate are redrawn). r is
    ``numerics.pairwise_joint(h', pa(h))``; the independent side is ``numerics.claims.lemma4_terms`` on the
    joints ``pairwise_joint(pa, h)`` and ``pairwise_joint(h', h)`` (computed by the tree's lowest common
    ancestor, not through r). The slack ``gap_positive`` is the derived gap (Lemma 4 says > 0).
    ``perturbation``: verify the results of :func:`perturb_lemma4_loglik_gap` instead (a negative control).
    """
    rng = check_rng(rng)
    n_points = check_positive_int(n_points, "n_points")
    fns = {}
    for d in d_values:
        results = (derive_lemma4_loglik_gap(d) if perturbation is None
                   else perturb_lemma4_loglik_gap(d, perturbation=perturbation)).results
        r, pi = joint_symbols(d), stochastic_matrix("pi", d)
        args = [*list(r)[:-1], *[pi[i, j] for i in range(d) for j in range(d - 1)]]
        fns[d] = {name: sp.lambdify(args, expr, "numpy") for name, expr in results.items()}
    tracker = ErrorTracker()
    done = 0
    while done < n_points:
        d = d_values[done % len(d_values)]
        parents = numerics.random_parents(H, rng=rng)
        h = int(rng.integers(2, H))
        candidates = [g for g in range(h) if g != parents[h]]
        hp = int(rng.choice(candidates))
        kernel = numerics.random_kernel(d, eps=0.01, rng=rng)
        init = rng.dirichlet(np.ones(d))
        pa = int(parents[h])
        r = numerics.pairwise_joint(kernel, parents, hp, pa, init=init)
        values = [*r.ravel()[:-1], *kernel[:, :-1].ravel()]
        got = {name: float(f(*values)) for name, f in fns[d].items()}
        ref = lemma4_terms(kernel, numerics.pairwise_joint(kernel, parents, pa, h, init=init),
                           numerics.pairwise_joint(kernel, parents, hp, h, init=init))
        tracker.compare("gap", got["gap"], ref["lhs"])
        tracker.compare("decomposition", got["decomposition"], ref["rhs"])
        tracker.compare("mi_parent", got["mi_parent"], ref["mi_parent"])
        tracker.compare("mi_candidate", got["mi_candidate"], ref["mi_candidate"])
        tracker.compare("expected_kl", got["expected_kl"], ref["kl"])
        tracker.bound("gap_positive", 0.0, got["gap"])
        done += 1
    return tracker.result(CLAIM, n_points)
