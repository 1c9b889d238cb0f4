"""``prop2-ds-quadratic``: the DS Gaussian log-likelihood has a key-only quadratic term no bilinear score has.

DS model: x_h = ρ Aᵀ x_pa(h) + √(1−ρ²) η, η ~ N(0, I_d), A orthogonal. The BMA score of candidate h' is
Σ_l log N(x^l_h; ρ Aᵀ x^l_{h'}, (1−ρ²) I). The derivation writes the Gaussian density from its definition with
symbolic vectors (d = 2: A a rotation; d = 3: A the Cayley transform of a symbolic skew matrix), expands the log,
and splits the polynomial by degree in the query x_h and the key x_{h'}: a bilinear term ρ/(1−ρ²) x_{h'}ᵀ A x_h,
a key-only term −ρ²/(2(1−ρ²)) ‖Aᵀ x_{h'}‖² and a query-only part (const(h)). The key-only term's Hessian in
x_{h'} is −ρ²/(1−ρ²) I ≠ 0, while the Hessian in x_{h'} of every bilinear score x_{h'}ᵀ W x_h is 0; so the
difference (BMA score − bilinear score) has Hessian −ρ²/(1−ρ²) I for every W, and no W reproduces the posterior
(up to a function of h alone, which is all the softmax over h' ignores).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import sympy as sp
from scipy.stats import multivariate_normal

from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.numerics.ds import ds_log_likelihood_scores, ds_score_terms
from bma_verify.theory.derivation import Derivation, ErrorTracker, Perturbation, Verification, labelled

CLAIM = "prop2-ds-quadratic"

RHO = sp.Symbol("rho", positive=True)


def orthogonal_symbolic(d: int) -> tuple[sp.Matrix, list[sp.Symbol]]:
    """A symbolic orthogonal d x d matrix and its parameters (d = 2: rotation by θ; d >= 3: Cayley transform)."""
    if d == 2:
        theta = sp.Symbol("theta", real=True)
        return sp.Matrix([[sp.cos(theta), -sp.sin(theta)], [sp.sin(theta), sp.cos(theta)]]), [theta]
    params = sp.symbols(f"c_0:{d * (d - 1) // 2}", real=True)
    S = sp.zeros(d, d)
    for n, (i, j) in enumerate((i, j) for i in range(d) for j in range(i + 1, d)):
        S[i, j], S[j, i] = params[n], -params[n]
    # (I − S)(I + S)^{-1} is orthogonal for skew S (and I + S is always invertible).
    return sp.simplify((sp.eye(d) - S) * (sp.eye(d) + S).inv()), list(params)


def vector_symbols(name: str, d: int) -> sp.Matrix:
    return sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"{name}_{i}", real=True))


@lru_cache(maxsize=None)
def derive_prop2_ds_quadratic(d: int = 2) -> Derivation:
    """Expand the DS Gaussian log-likelihood and separate bilinear, key-only and query-only terms.

    Returns
    -------
    Derivation
        results (in rho, the A parameters, query ``y_i`` = x_h and key ``x_i`` = x_{h'}): ``log_likelihood``,
        ``bilinear``, ``key_quadratic``, ``query_only``, ``key_hessian`` (d x d), ``bilinear_key_hessian``,
        ``difference_hessian``; residuals: A orthogonal, the terms minus the stated forms, the bilinear Hessian
        (zero) and the Hessian of (score − x_{h'}ᵀ W x_h) minus the key-only Hessian (independent of W);
        witness: the key-only Hessian (nonzero); definition: the split reassembling the log-likelihood.
    """
    d = check_positive_int(d, "d", minimum=2)
    A, params = orthogonal_symbolic(d)
    x, y = vector_symbols("x", d), vector_symbols("y", d)  # key x_{h'}, query x_h
    var = 1 - RHO**2
    mean = RHO * A.T * x
    resid = y - mean
    # The N(mean, var·I) density from its definition, then its log with products and powers split.
    density = (2 * sp.pi * var) ** sp.Rational(-d, 2) * sp.exp(-(resid.T * resid)[0, 0] / (2 * var))
    log_density = sp.expand_log(sp.log(density), force=True)
    log_lik = sp.expand(log_density)

    split = split_log_likelihood({"A": A, "log_likelihood": log_lik})
    bilinear, key = split.results["bilinear"], split.results["key_quadratic"]
    key_hessian, bilinear_hessian = split.results["key_hessian"], split.results["bilinear_key_hessian"]
    difference_hessian = split.results["difference_hessian"]
    residuals = {"A_orthogonal": sp.simplify(A.T * A - sp.eye(d)), **split.residuals}

    steps: tuple[tuple[str, sp.Basic | str], ...] = (
        (f"Orthogonal A (d = {d})", labelled("A", A)),
        ("log N(x_h; ρAᵀx_{h'}, (1−ρ²)I) from the density (then expanded into monomials of x_h, x_{h'})",
         labelled(r"\log p(x_h \mid x_{h'})", log_density)),
        ("Terms with both x_h and x_{h'}: bilinear", labelled(r"\mathrm{bilinear}", sp.factor(bilinear))),
        ("Terms with x_{h'} only: key-only quadratic", labelled(r"\mathrm{key}", sp.factor(key))),
        ("Key-only term + ρ²/(2(1−ρ²))‖x_{h'}‖² (A orthogonal)", residuals["key_quadratic_is_norm_of_key"]),
        ("Hessian of the key-only term in x_{h'}", labelled(r"\nabla^2_{x_{h'}} \mathrm{key}", key_hessian)),
        ("Hessian in x_{h'} of a bilinear score x_{h'}ᵀ W x_h", labelled(r"\nabla^2_{x_{h'}} x_{h'}^\top W x_h",
                                                                        bilinear_hessian)),
        ("Hessian in x_{h'} of (log-likelihood − x_{h'}ᵀ W x_h), for every W",
         labelled(r"\nabla^2_{x_{h'}}(\log p - x_{h'}^\top W x_h)", difference_hessian)),
    )
    return Derivation(CLAIM, steps, {"A": A, "log_likelihood": log_lik, **split.results}, residuals,
                      witnesses=split.witnesses, definitions=split.definitions)


def split_log_likelihood(results) -> Derivation:
    """Split ``log_likelihood`` (a polynomial in the key x and query y) into bilinear, key-only and query-only terms.

    Returns a partial :class:`Derivation`: results ``bilinear``, ``key_quadratic``, ``query_only``,
    ``key_hessian``, ``bilinear_key_hessian``, ``difference_hessian`` (of log-likelihood − x_{h'}ᵀ W x_h);
    residuals: the terms minus the stated forms (with ``results["A"]``),
    the bilinear Hessian (zero) and the Hessian of (log-likelihood − x_{h'}ᵀ W x_h) minus the key-only Hessian;
    witness ``key_hessian`` (nonzero); definition ``split_reassembles`` (the monomials put back together: zero by
    construction). The derivation's own code, also applied to a perturbed log-likelihood.
    """
    A, log_lik = results["A"], results["log_likelihood"]
    d = A.shape[0]
    x, y = vector_symbols("x", d), vector_symbols("y", d)  # key x_{h'}, query x_h
    var = 1 - RHO**2
    poly = sp.Poly(log_lik, *x, *y)
    parts = {"bilinear": [], "key": [], "query": []}
    for monomial, coeff in poly.terms():
        deg_x, deg_y = sum(monomial[:d]), sum(monomial[d:])
        term = coeff * sp.Mul(*[v**e for v, e in zip([*x, *y], monomial)])
        if deg_x and deg_y:
            parts["bilinear"].append(term)
        elif deg_x:
            parts["key"].append(term)
        else:
            parts["query"].append(term)
    bilinear, key, query = (sp.Add(*parts[k]) for k in ("bilinear", "key", "query"))

    stated_bilinear = RHO / var * (x.T * A * y)[0, 0]
    stated_key = -RHO**2 / (2 * var) * ((A.T * x).T * (A.T * x))[0, 0]
    key_hessian = sp.simplify(sp.hessian(key, list(x)))
    W = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"W_{i}{j}", real=True))
    bilinear_W = (x.T * W * y)[0, 0]
    bilinear_hessian = sp.hessian(bilinear_W, list(x))
    difference_hessian = sp.simplify(sp.hessian(log_lik - bilinear_W, list(x)))
    residuals = {
        "bilinear_minus_stated": sp.simplify(bilinear - stated_bilinear),
        "key_quadratic_minus_stated": sp.simplify(key - stated_key),
        "key_quadratic_is_norm_of_key": sp.simplify(key + RHO**2 / (2 * var) * (x.T * x)[0, 0]),
        "key_hessian_minus_scaled_identity": sp.simplify(key_hessian + RHO**2 / var * sp.eye(d)),
        "bilinear_key_hessian": bilinear_hessian,
        "difference_hessian_minus_key_hessian": sp.simplify(difference_hessian - key_hessian),
    }
    results = {"bilinear": bilinear, "key_quadratic": key, "query_only": query, "key_hessian": key_hessian,
               "bilinear_key_hessian": bilinear_hessian, "difference_hessian": difference_hessian}
    return Derivation(CLAIM, (), results, residuals, witnesses={"key_hessian": key_hessian},
                      definitions={"split_reassembles": sp.simplify(bilinear + key + query - log_lik)})


def dropped_key_quadratic(results) -> dict[str, sp.Basic]:
    """Negative control: the DS score without its key-only term −ρ²/(2(1−ρ²))‖Aᵀx_{h'}‖² (a bilinear score).

    Re-split, its key-only part and key Hessian vanish: the stated form, the Hessian witness and the comparison
    with ``scipy.stats`` and ``numerics.ds`` must reject it.
    """
    return {"log_likelihood": results["log_likelihood"] - results["key_quadratic"]}


@lru_cache(maxsize=None)
def perturb_prop2_ds_quadratic(d: int = 2, perturbation: Perturbation = dropped_key_quadratic) -> Derivation:
    """:func:`derive_prop2_ds_quadratic` with ``perturbation`` applied; the split and its identities re-derived."""
    return derive_prop2_ds_quadratic(d).perturbed(perturbation, split_log_likelihood)


def verify_prop2_ds_quadratic(rng, *, n_points: int = 20, d_values: tuple[int, ...] = (2, 3), L: int = 3,
                              H: int = 4, perturbation: Perturbation | None = None) -> Verification:
    """Compare the derived terms with ``numerics.ds`` and SciPy at random ρ, A and vectors.

    * ``log_likelihood`` vs ``scipy.stats.multivariate_normal.logpdf``; summed over L examples, vs
      ``numerics.ds.ds_log_likelihood_scores`` for every (h, h' < h);
    * ``bilinear`` and ``key_quadratic`` summed over examples vs ``numerics.ds.ds_score_terms``;
    * ``key_hessian`` vs second differences (step 1, exact for a quadratic) of the numerics score in x_{h'}.

    ``perturbation``: verify the results of :func:`perturb_prop2_ds_quadratic` instead (a negative control).
    """
    rng = check_rng(rng)
    n_points = check_positive_int(n_points, "n_points")
    fns = {}
    for d in d_values:
        results = (derive_prop2_ds_quadratic(d) if perturbation is None
                   else perturb_prop2_ds_quadratic(d, perturbation=perturbation)).results
        _, params = orthogonal_symbolic(d)
        args = [RHO, *params, *vector_symbols("x", d), *vector_symbols("y", d)]
        fns[d] = {name: sp.lambdify(args, results[name], "numpy")
                  for name in ("log_likelihood", "bilinear", "key_quadratic", "key_hessian")}
        fns[d]["A"] = sp.lambdify([*params], results["A"], "numpy")
        fns[d]["n_params"] = len(params)
    tracker = ErrorTracker()
    for i in range(n_points):
        d = d_values[i % len(d_values)]
        f = fns[d]
        rho = float(rng.uniform(0.1, 0.95))
        theta = rng.normal(size=f["n_params"])
        A = np.asarray(f["A"](*theta), dtype=float)
        context = rng.normal(size=(L, H, d))  # (L, H, d)
        h, hp = H - 1, int(rng.integers(0, H - 1))
        key, query = context[0, hp], context[0, h]
        args = (rho, *theta, *key, *query)
        tracker.compare("log_likelihood_vs_scipy", f["log_likelihood"](*args),
                        multivariate_normal(mean=rho * A.T @ key, cov=(1 - rho**2) * np.eye(d)).logpdf(query))
        scores = ds_log_likelihood_scores(A, rho, context)  # (H, H)
        bilinear_ref, key_ref = ds_score_terms(A, rho, context)  # (H, H), (H,)
        for g in range(1, H):
            for gp in range(g):
                per_example = [(rho, *theta, *context[l, gp], *context[l, g]) for l in range(L)]
                tracker.compare("score_vs_numerics", sum(f["log_likelihood"](*a) for a in per_example), scores[g, gp])
                tracker.compare("bilinear_vs_numerics", sum(f["bilinear"](*a) for a in per_example),
                                bilinear_ref[g, gp])
                tracker.compare("key_quadratic_vs_numerics", sum(f["key_quadratic"](*a) for a in per_example),
                                key_ref[gp])
        # Second differences of the numerics score (one example) in the key vector: exact for a quadratic.
        single = context[:1]

        def score_at(v):
            c = single.copy()
            c[0, hp] = v
            return ds_log_likelihood_scores(A, rho, c)[h, hp]

        E = np.eye(d)
        hessian = np.array([[score_at(key + E[a] + E[b]) - score_at(key + E[a]) - score_at(key + E[b]) + score_at(key)
                             for b in range(d)] for a in range(d)])
        tracker.compare("key_hessian_vs_second_differences", np.asarray(f["key_hessian"](*args), dtype=float),
                        hessian)
    return tracker.result(CLAIM, n_points)
