"""``thm3-init-gradient``: the selector's gradient at initialisation, derived with ``sympy.diff``.

Mixture output (the ``mixture`` rule of docs/claims.md): f(x_h) = Σ_k softmax(p̂)_k r_k with r_k = π(x_h | x_k)
over the h candidates k = 0..h-1, ℓ = −log f(x_h). Differentiating and setting p̂ = 0 gives −∂ℓ/∂p̂_j = (1/h)(r_j / r̄ − 1), r̄ the mean
of the r_k. Replacing r̄ by the marginal P(x_h) and taking the expectation under the tree, the true parent's term
is J(pa) = E[π(x_h | x_pa) / P(x_h)] − 1, which the derivation shows equals I_χ²(x_pa; x_h) = Σ (P(a,c) −
P(a)P(c))² / (P(a)P(c)) for a symbolic joint. A non-parent's J(h') = Σ Q(a,c) π(c|a) / P(c) − 1 (Q the joint of
x_{h'} and x_h) is a cross term, not I_χ²(x_{h'}; x_h) (exhibited).

Logit output: f = softmax(Σ_k A_k log π(·|x_k)) (σ(W_OV) = π). Its derivative at p̂ = 0 is
−∂ℓ/∂p̂_j = (1/h)[(λ_j − λ̄)(x_h) − E_{s∼f}(λ_j − λ̄)(s)], λ_k = log π(·|x_k), λ̄ the mean over candidates and
f = softmax(λ̄) (the normalised geometric mean of the candidates' rows): a log-likelihood contrast, whose
expectation for the true parent is (1/h) Σ_s (π(s|x_pa) − f(s)) (λ_pa − λ̄)(s) — a Shannon (log-ratio) quantity
of Lemma 4's kind, not χ²-mutual information.
"""
from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np
import sympy as sp

from bma_verify import numerics
from bma_verify.numerics.gradient import chi2_gain, init_gradient
from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.theory.derivation import (Derivation, ErrorTracker, Perturbation, Verification, complex_step_gradient,
                                          labelled, probability_vector, stochastic_matrix)

CLAIM = "thm3-init-gradient"


def score_symbols(h: int) -> list[sp.Symbol]:
    """The selector scores p̂_0..p̂_{h-1} of the h candidates."""
    return list(sp.symbols(f"phat_0:{h}", real=True))


def likelihood_symbols(h: int) -> list[sp.Symbol]:
    """r_k = π(x_h | x_k) for the h candidates (positive)."""
    return list(sp.symbols(f"r_0:{h}", positive=True))


def log_row_symbols(h: int, d: int) -> sp.Matrix:
    """λ[k, s] = log π(s | x_k): the log rows of the h candidates' tokens (real)."""
    return sp.Matrix(h, d, lambda k, s: sp.Symbol(f"lambda_{k}{s}", real=True))


def _softmax(v: list[sp.Expr]) -> list[sp.Expr]:
    e = [sp.exp(x) for x in v]
    total = sp.Add(*e)
    return [x / total for x in e]


def _mixture_gradient(h: int) -> tuple[sp.Expr, list[sp.Expr]]:
    """ℓ(p̂) for the mixture output and −∂ℓ/∂p̂_j at p̂ = 0, j = 0..h-1."""
    phat, r = score_symbols(h), likelihood_symbols(h)
    loss = -sp.log(sp.Add(*[a * rk for a, rk in zip(_softmax(phat), r)]))
    at_zero = {p: 0 for p in phat}
    # At p̂ = 0 every exponential is 1, so the derivative is a rational function of r: cancel suffices.
    return loss, [sp.factor(sp.cancel(-sp.diff(loss, p).subs(at_zero))) for p in phat]


def _logit_gradient(h: int, d: int, target: int) -> tuple[sp.Expr, list[sp.Expr], list[sp.Expr]]:
    """ℓ(p̂) for the logit output with x_h = target; −∂ℓ/∂p̂_j at 0 (derived) and the contrast form."""
    phat, lam = score_symbols(h), log_row_symbols(h, d)
    A = _softmax(phat)
    logits = [sp.Add(*[A[k] * lam[k, s] for k in range(h)]) for s in range(d)]
    loss = -(logits[target] - sp.log(sp.Add(*[sp.exp(z) for z in logits])))
    at_zero = {p: 0 for p in phat}
    derived = [sp.simplify(-sp.diff(loss, p).subs(at_zero)) for p in phat]
    mean = [sp.Add(*[lam[k, s] for k in range(h)]) / h for s in range(d)]
    f = _softmax(mean)
    contrast = [(lam[j, target] - mean[target] - sp.Add(*[f[s] * (lam[j, s] - mean[s]) for s in range(d)])) / h
                for j in range(h)]
    return loss, derived, contrast


@lru_cache(maxsize=None)
def derive_thm3_init_gradient(h_values: tuple[int, ...] = (2, 3, 4), d_values: tuple[int, ...] = (2, 3),
                              logit_h: int = 2, logit_d: int = 3) -> Derivation:
    """Derivatives at p̂ = 0 for both output rules, and J(pa) = I_χ² for symbolic joints.

    Returns
    -------
    Derivation
        results: ``mixture_gradient_h{h}`` (1 x h, in r_k), ``J_parent_d{d}`` and ``chi2_mi_d{d}`` (in the
        parent law m and kernel pi), ``J_candidate_d{d}`` (in the candidate–parent joint r and pi),
        ``logit_gradient`` (1 x logit_h, in λ, target token 0); residuals: the mixture gradient minus
        (1/h)(r_j/r̄ − 1), J(pa) − I_χ², the logit gradient minus its contrast form, and the gradients'
        zero sum; witness: J(h') − I_χ²(x_{h'}; x_h) for d = 2.
    """
    steps: list[tuple[str, sp.Basic | str]] = []
    results: dict[str, sp.Basic] = {}
    residuals: dict[str, sp.Basic] = {}
    witnesses: dict[str, sp.Basic] = {}
    for h in h_values:
        loss, grad = _mixture_gradient(h)
        r = likelihood_symbols(h)
        r_bar = sp.Add(*r) / h
        stated = [(rj / r_bar - 1) / h for rj in r]  # the stated form, compared, not used to build grad
        results[f"mixture_gradient_h{h}"] = sp.Matrix(1, h, grad)
        residuals[f"mixture_gradient_minus_stated_h{h}"] = sp.Matrix(1, h, [sp.cancel(g - s) for g, s in
                                                                            zip(grad, stated)])
        residuals[f"mixture_gradient_sums_to_zero_h{h}"] = sp.cancel(sp.Add(*grad))
        if h == h_values[-1]:
            steps.append((f"Mixture output, h = {h}: ℓ(p̂)", labelled(r"\ell(\hat p)", loss)))
        steps.append((f"h = {h}: −∂ℓ/∂p̂_j at p̂ = 0 (sympy.diff), j = 0..{h - 1}",
                      labelled(r"-\nabla \ell(0)", sp.Matrix(1, h, grad))))
        steps.append((f"h = {h}: minus (1/h)(r_j / r̄ − 1)", residuals[f"mixture_gradient_minus_stated_h{h}"]))

    for d in d_values:
        m, pi, joint, child = parent_child_joint(d)
        cells = list(itertools.product(range(d), range(d)))
        J = sp.Add(*[joint[a, c] * pi[a, c] / child[c] for a, c in cells]) - 1  # E[π(x_h|x_pa)/P(x_h)] − 1
        chi2 = sp.Add(*[(joint[a, c] - m[a] * child[c]) ** 2 / (m[a] * child[c]) for a, c in cells])
        results[f"J_parent_d{d}"], results[f"chi2_mi_d{d}"] = J, chi2
        residuals[f"J_parent_minus_chi2_mi_d{d}"] = j_parent_minus_chi2_mi(J, chi2, pi)
        steps.append((f"d = {d}: J(pa) = E[π(x_h|x_pa)/P(x_h)] − 1 minus I_χ²(x_pa; x_h) from its definition",
                      residuals[f"J_parent_minus_chi2_mi_d{d}"]))
        # A non-parent h': joint r(a, b) of (x_{h'}, x_pa); Q = r π is the joint of (x_{h'}, x_h).
        rj = sp.Matrix(d, d, lambda a, b: sp.Symbol(f"q_{a}{b}", positive=True))
        rj[d - 1, d - 1] = 1 - (sp.Add(*rj) - rj[d - 1, d - 1])
        Q = rj * pi
        law_c = [sp.Add(*Q.col(c)) for c in range(d)]
        law_a = [sp.Add(*Q.row(a)) for a in range(d)]
        J_candidate = sp.Add(*[Q[a, c] * pi[a, c] / law_c[c] for a, c in cells]) - 1
        results[f"J_candidate_d{d}"] = J_candidate
        if d == d_values[0]:
            chi2_candidate = sp.Add(*[(Q[a, c] - law_a[a] * law_c[c]) ** 2 / (law_a[a] * law_c[c])
                                      for a, c in cells])
            # Evaluated at an exact rational point: nonzero, so J(h') is not the χ²-MI of (x_{h'}, x_h).
            point = {s: sp.Rational(k + 1, 3 * d * d + 7) for k, s in enumerate(sorted(
                (J_candidate - chi2_candidate).free_symbols, key=lambda s: s.name))}
            witnesses[f"J_candidate_minus_its_chi2_mi_d{d}"] = sp.cancel((J_candidate - chi2_candidate).subs(point))
            steps.append((f"d = {d}: J(h') − I_χ²(x_{{h'}}; x_h) at a rational point (not zero)",
                          witnesses[f"J_candidate_minus_its_chi2_mi_d{d}"]))

    loss, derived, contrast = _logit_gradient(logit_h, logit_d, target=0)
    results["logit_gradient"] = sp.Matrix(1, logit_h, derived)
    residuals["logit_gradient_minus_contrast"] = sp.Matrix(1, logit_h, [
        sp.simplify(sp.expand(sp.powsimp(g - c))) for g, c in zip(derived, contrast)])
    steps.append((f"Logit output (h = {logit_h}, d = {logit_d}, x_h = 0): ℓ(p̂)", labelled(r"\ell(\hat p)", loss)))
    steps.append(("Logit output: −∂ℓ/∂p̂_j at 0 (sympy.diff)", labelled(r"-\nabla\ell(0)", results["logit_gradient"])))
    steps.append(("Minus (1/h)[(λ_j − λ̄)(x_h) − Σ_s softmax(λ̄)_s (λ_j − λ̄)(s)]: a log-likelihood contrast",
                  residuals["logit_gradient_minus_contrast"]))
    return Derivation(CLAIM, tuple(steps), results, residuals, witnesses)


def parent_child_joint(d: int) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix, list[sp.Expr]]:
    """The parent law m, kernel π, joint P(x_pa = a, x_h = c) = m_a π(c|a) and the law P(x_h = c) of the child."""
    m, pi = probability_vector("m", d), stochastic_matrix("pi", d)
    joint = sp.Matrix(d, d, lambda a, c: m[a] * pi[a, c])  # (x_pa, x_h)
    return m, pi, joint, [sp.Add(*joint.col(c)) for c in range(d)]


def j_parent_minus_chi2_mi(J: sp.Expr, chi2: sp.Expr, pi: sp.Matrix) -> sp.Expr:
    """J − I_χ², cancelled per denominator and expanded: the zero polynomial when J(pa) = I_χ²(x_pa; x_h).

    Terms are grouped by the kernel-dependent factors of their denominators (one group per law of x_h at
    token c, each term having the single denominator P(c)·m_a), each group is cancelled, then the sum is
    expanded: much faster than cancelling the whole sum at d = 3. The derivation's own check, also applied to
    a perturbed J.
    """
    kernel_symbols = set(pi.free_symbols)
    groups: dict[frozenset, list[sp.Expr]] = {}
    for term in sp.Add.make_args(J - chi2):
        factors = (f.base if f.is_Pow else f for f in sp.Mul.make_args(sp.denom(term)))
        key = frozenset(f for f in factors if f.free_symbols & kernel_symbols)
        groups.setdefault(key, []).append(term)
    return sp.expand(sp.Add(*[sp.cancel(sp.Add(*terms)) for terms in groups.values()]))


def kernel_mean_for_marginal(results) -> dict[str, sp.Basic]:
    """Negative control: J(pa) with the law P(x_h) replaced by the unweighted mean of the kernel's rows.

    π̄(c) = (1/d) Σ_a π(c|a) is the law of x_h only when x_pa is uniform; J computed with this wrong mean is not
    I_χ²(x_pa; x_h), so the residual and the comparison with ``numerics.chi2_mutual_information`` must reject it.
    """
    out = {}
    for name, J in results.items():
        if name.startswith("J_parent_d"):
            d = int(name.removeprefix("J_parent_d"))
            _, pi, _, child = parent_child_joint(d)
            out[name] = J.xreplace({child[c]: sp.Add(*pi.col(c)) / d for c in range(d)})
    return out


@lru_cache(maxsize=None)
def perturb_thm3_init_gradient(h_values: tuple[int, ...] = (2, 3, 4), d_values: tuple[int, ...] = (2, 3),
                               logit_h: int = 2, logit_d: int = 3,
                               perturbation: Perturbation = kernel_mean_for_marginal) -> Derivation:
    """:func:`derive_thm3_init_gradient` with ``perturbation`` applied and ``J_parent_minus_chi2_mi_d{d}`` re-derived."""
    def recheck(results):
        residuals = {}
        for d in d_values:
            _, pi, _, _ = parent_child_joint(d)
            residuals[f"J_parent_minus_chi2_mi_d{d}"] = j_parent_minus_chi2_mi(results[f"J_parent_d{d}"],
                                                                              results[f"chi2_mi_d{d}"], pi)
        return Derivation(CLAIM, (), {}, residuals)

    return derive_thm3_init_gradient(h_values, d_values, logit_h, logit_d).perturbed(perturbation, recheck)


def _mixture_loss(r: np.ndarray):
    return lambda phat: -np.log(np.sum(np.exp(phat) / np.sum(np.exp(phat)) * r))


def _logit_loss(lam: np.ndarray, target: int):
    def loss(phat):
        A = np.exp(phat) / np.sum(np.exp(phat))  # (h,)
        z = A @ lam  # (d,) output logits
        return -(z[target] - np.log(np.sum(np.exp(z))))
    return loss


def verify_thm3_init_gradient(rng, *, n_points: int = 12, H: int = 5, perturbation: Perturbation | None = None,
                              h_values: tuple[int, ...] = (2, 3, 4), d_values: tuple[int, ...] = (2, 3),
                              logit_h: int = 2, logit_d: int = 3) -> Verification:
    """Compare the derived gradients and J with independent numerics at random points.

    * ``mixture_gradient_h{h}`` at random r vs the complex-step derivative of ℓ (NumPy), and its expectation
      over every configuration x_0..x_h (probabilities by the tree's product formula) vs
      ``numerics.init_gradient(..., method="exact")``, with both stationary and random μ₀;
    * ``J_parent_d{d}`` vs ``numerics.chi2_mutual_information(pairwise_joint(pa, h))`` and
      ``numerics.gradient.chi2_gain``; ``J_candidate_d{d}`` vs ``chi2_gain`` at a non-parent;
      (``init_gradient`` and ``chi2_gain`` are imported from ``numerics.gradient``.)
    * ``logit_gradient`` at random log rows vs the complex-step derivative of the logit loss.

    ``perturbation``: verify the results of :func:`perturb_thm3_init_gradient` instead (a negative control).
    """
    rng = check_rng(rng)
    n_points = check_positive_int(n_points, "n_points")
    args = (tuple(h_values), tuple(d_values), logit_h, logit_d)
    derivation = (derive_thm3_init_gradient(*args) if perturbation is None
                  else perturb_thm3_init_gradient(*args, perturbation=perturbation))
    results = derivation.results
    mixture = {h: sp.lambdify(likelihood_symbols(h), results[f"mixture_gradient_h{h}"], "numpy") for h in h_values}
    J_parent, J_candidate = {}, {}
    for d in d_values:
        m, pi = probability_vector("m", d), stochastic_matrix("pi", d)
        pi_args = [pi[i, j] for i in range(d) for j in range(d - 1)]
        J_parent[d] = sp.lambdify([*list(m)[:-1], *pi_args], results[f"J_parent_d{d}"], "numpy")
        q = [sp.Symbol(f"q_{a}{b}", positive=True) for a in range(d) for b in range(d)][:-1]
        J_candidate[d] = sp.lambdify([*q, *pi_args], results[f"J_candidate_d{d}"], "numpy")
    lam = log_row_symbols(logit_h, logit_d)
    logit = sp.lambdify(list(lam), results["logit_gradient"], "numpy")

    tracker = ErrorTracker()
    for i in range(n_points):
        h = h_values[i % len(h_values)]
        d = d_values[i % len(d_values)]
        r = rng.uniform(0.05, 1.0, size=h)
        tracker.compare(f"mixture_gradient_h{h}", np.ravel(mixture[h](*r)),
                        -complex_step_gradient(_mixture_loss(r), np.zeros(h)))
        kernel = numerics.random_kernel(d, eps=0.02, rng=rng)
        parents = numerics.random_parents(max(H, h + 1), rng=rng)
        init = None if i % 2 == 0 else rng.dirichlet(np.ones(d))  # stationary and non-stationary μ₀
        law0 = numerics.stationary_distribution(kernel) if init is None else init
        expected = np.zeros(h)
        for x in itertools.product(range(d), repeat=h + 1):
            prob = law0[x[0]] * np.prod([kernel[x[parents[g]], x[g]] for g in range(1, h + 1)])
            expected += prob * np.ravel(mixture[h](*[kernel[x[k], x[h]] for k in range(h)]))
        tracker.compare("expected_mixture_gradient", expected,
                        init_gradient(kernel, parents, h, init=init, method="exact"))

        pa = int(parents[h])
        m = numerics.marginal(kernel, parents, pa, init=init)
        pi_values = kernel[:, :-1].ravel()
        gains = chi2_gain(kernel, parents, h, init=init)
        J = J_parent[d](*m[:-1], *pi_values)
        tracker.compare("J_parent_vs_chi2_mi", J, numerics.chi2_mutual_information(
            numerics.pairwise_joint(kernel, parents, pa, h, init=init)))
        tracker.compare("J_parent_vs_chi2_gain", J, gains[pa])
        others = [g for g in range(h) if g != pa]
        if others:
            hp = int(rng.choice(others))
            joint = numerics.pairwise_joint(kernel, parents, hp, pa, init=init)  # (x_{h'}, x_pa)
            tracker.compare("J_candidate_vs_chi2_gain", J_candidate[d](*joint.ravel()[:-1], *pi_values), gains[hp])

        lam_values = np.log(rng.dirichlet(np.ones(logit_d), size=logit_h))  # (h, d) log rows
        tracker.compare("logit_gradient", np.ravel(logit(*lam_values.ravel())),
                        -complex_step_gradient(_logit_loss(lam_values, 0), np.zeros(logit_h)))
    return tracker.result(CLAIM, n_points)
