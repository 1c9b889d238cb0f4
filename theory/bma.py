"""``bma-score-identity``: the parent posterior derived with Bayes' rule from the factorised likelihood.

The context is L examples on one unknown tree T (``T[g] = pa(g)``), each drawn as x^l_0 ~ μ₀ and
x^l_g ~ π(· | x^l_{T[g]}). The likelihood factorises over examples and positions, so under the uniform prior
over trees the marginal posterior of pa(h) is a ratio of sums of products. SymPy factors that ratio; the
derivation shows it equals the softmax over h' < h of score(h, h') = Σ_l log π(x^l_h | x^l_{h'}) (μ₀ and every
other position's factor cancel), and that the bilinear form Σ_k e_{x^k_{h'}}ᵀ W e_{x^k_h} with W = log π is that
score.

Tokens are kept symbolic (integer symbols x_l_h) and π is an undefined positive function ``pi(parent,
child)``, so the derivation holds for every d; the bilinear part is checked with a symbolic d x d kernel for
d = 2 and 3.
"""
from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np
import sympy as sp

from bma_verify import numerics
from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.theory.derivation import (Derivation, ErrorTracker, Perturbation, Verification, labelled,
                                          probability_vector, stochastic_matrix)

CLAIM = "bma-score-identity"

#: π(child | parent) as an undefined positive function of (parent token, child token): kernel[parent, child].
PI = sp.Function("pi", positive=True)
#: μ₀, the law of the first token; it must cancel from the posterior.
MU0 = sp.Function("mu_0", positive=True)
#: IndexedBase names the lambdified expressions use in place of PI and MU0.
KERNEL, INIT = sp.IndexedBase("kernel"), sp.IndexedBase("init")


def context_symbols(L: int, H: int) -> list[list[sp.Symbol]]:
    """Token symbols ``x[l][h]`` (0-based example l and position h), integers in {0..d-1}."""
    return [[sp.Symbol(f"x_{l}_{h}", integer=True, nonnegative=True) for h in range(H)] for l in range(L)]


def tree_likelihood(x: list[list[sp.Symbol]], tree: tuple[int, ...]) -> sp.Expr:
    """P(context | T) = Π_l μ₀(x^l_0) Π_{g ≥ 1} π(x^l_g | x^l_{T[g]}); ``tree[g - 1]`` is the parent of g."""
    factors = []
    for row in x:
        factors.append(MU0(row[0]))
        factors.extend(PI(row[parent], row[g]) for g, parent in enumerate(tree, start=1))
    return sp.Mul(*factors)


@lru_cache(maxsize=None)
def derive_bma_score_identity(H: int = 4, L: int = 2, bilinear_d: tuple[int, ...] = (2, 3)) -> Derivation:
    """Derive P(pa(h) = h' | context) by Bayes' rule and show it is the softmax of the log-likelihood score.

    Parameters
    ----------
    H, L : int
        Positions and context examples of the symbolic context (every tree over H positions is enumerated).
    bilinear_d : tuple of int
        Vocabulary sizes at which the bilinear form e_aᵀ (log π) e_b is expanded with a symbolic kernel.

    Returns
    -------
    Derivation
        results ``posterior_bayes`` and ``posterior`` (H x H matrices in ``pi``, ``mu_0`` and the tokens; row h
        over h' < h), ``posterior_d{d}`` (the same with symbolic kernel entries p_ij on the fixed context
        :func:`example_context`), ``bilinear_d{d}`` (uᵀ log(P) v for symbolic probability vectors u, v);
        residuals ``posterior_minus_softmax`` and ``posterior_minus_softmax_d{d}`` (H x H, zero); definition
        ``bilinear_minus_log_kernel_d{d}`` (zero by construction once W = log π entrywise).
    """
    H = check_positive_int(H, "H", minimum=2)
    L = check_positive_int(L, "L", minimum=1)
    x = context_symbols(L, H)
    trees = list(itertools.product(*[range(g) for g in range(1, H)]))  # every T with T[g] < g
    likelihood = {tree: tree_likelihood(x, tree) for tree in trees}
    # Uniform prior over trees: it cancels between numerator and evidence, so only likelihoods appear.
    evidence = sp.Add(*likelihood.values())

    bayes = sp.zeros(H, H)
    simplified = sp.zeros(H, H)
    for h in range(1, H):
        for hp in range(h):
            bayes[h, hp] = sp.Add(*[v for tree, v in likelihood.items() if tree[h - 1] == hp]) / evidence
            simplified[h, hp] = sp.factor(bayes[h, hp])
    residual = softmax_residual(simplified, L)

    h_show = H - 1
    score_symbol = sp.Function("score")
    hp_sym = sp.Symbol("h'")
    steps: list[tuple[str, sp.Basic]] = [
        (f"Factorised likelihood of the context (L = {L}) for the tree T = (0, …, 0) (all parents at 0)",
         sp.Eq(sp.Symbol(r"P(\mathrm{ctx} \mid T)"), likelihood[trees[0]])),
        (f"Bayes' rule, uniform prior over the {len(trees)} trees; marginal posterior of pa({h_show}) = 0",
         sp.Eq(sp.Symbol(rf"P(\mathrm{{pa}}({h_show}) = 0 \mid \mathrm{{ctx}})"), bayes[h_show, 0])),
        ("Factor: μ₀ and every other position's factor cancel",
         sp.Eq(sp.Symbol(rf"P(\mathrm{{pa}}({h_show}) = 0 \mid \mathrm{{ctx}})"), simplified[h_show, 0])),
        ("Score: the log-likelihood of candidate h' summed over examples",
         sp.Eq(score_symbol(h_show, hp_sym),
               sp.Sum(sp.log(PI(sp.Symbol("x^l_{h'}"), sp.Symbol(f"x^l_{h_show}"))), (sp.Symbol("l"), 1, L)))),
        ("Residual posterior − softmax_{h'<h} score(h, h') for every (h, h'), after simplify", residual),
    ]

    results = {"posterior_bayes": bayes, "posterior": simplified}
    residuals = {"posterior_minus_softmax": residual}
    definitions = {}
    for d in bilinear_d:
        kernel = stochastic_matrix("p", d)
        # The same Bayes computation with the kernel's entries as symbols, on one fixed context of tokens.
        context = example_context(d, L, H)
        posterior_d, residual_d = _posterior_with_symbolic_kernel(kernel, context, trees)
        results[f"posterior_d{d}"] = posterior_d
        residuals[f"posterior_minus_softmax_d{d}"] = residual_d
        steps.append((f"d = {d}, symbolic kernel p, context {context.tolist()}: P(pa({H - 1}) = h' | ctx), "
                      f"h' = 0..{H - 2}", labelled(r"P(\mathrm{pa} \mid \mathrm{ctx})",
                                                   posterior_d[H - 1, :H - 1])))
        steps.append((f"d = {d}: posterior minus softmax of Σ_l log p[x^l_h', x^l_h], every (h, h')", residual_d))
        W = kernel.applyfunc(sp.log)  # W = log π entrywise
        one_hot = sp.eye(d)
        # e_aᵀ W e_b for every token pair: the bilinear form picks the single entry log π(b | a). With W defined
        # as log π entrywise this is zero by construction: shown as a definition, not counted as evidence.
        definitions[f"bilinear_minus_log_kernel_d{d}"] = sp.Matrix(
            d, d, lambda a, b: sp.simplify((one_hot[:, a].T * W * one_hot[:, b])[0, 0] - sp.log(kernel[a, b])))
        u, v = probability_vector("u", d), probability_vector("v", d)
        results[f"bilinear_d{d}"] = (u.T * W * v)[0, 0]
        steps.append((f"d = {d}: e_aᵀ (log π) e_b − log π(b | a) for all a, b (symbolic kernel; by construction)",
                      definitions[f"bilinear_minus_log_kernel_d{d}"]))
    return Derivation(CLAIM, tuple(steps), results, residuals, definitions=definitions)


def softmax_residual(posterior: sp.Matrix, L: int) -> sp.Matrix:
    """posterior[h, h'] − softmax_{h'<h} Σ_l log π(x^l_h | x^l_{h'}), simplified, for every (h, h' < h).

    The derivation's own check of the claim (zero when it holds); also applied to a perturbed posterior.
    """
    H = posterior.shape[0]
    x = context_symbols(L, H)
    residual = sp.zeros(H, H)
    for h in range(1, H):
        score = [sp.Add(*[sp.log(PI(x[l][hp], x[l][h])) for l in range(L)]) for hp in range(h)]
        softmax_norm = sp.Add(*[sp.exp(s) for s in score])
        for hp in range(h):
            residual[h, hp] = sp.simplify(posterior[h, hp] - sp.exp(score[hp]) / softmax_norm)
    return residual


def transposed_kernel(results) -> dict[str, sp.Basic]:
    """Negative control: the factored posterior with π(x_{h'} | x_h) in place of π(x_h | x_{h'}) (kernel transposed).

    Still a softmax over candidates, but of the wrong score: the claim's residual and the comparison with
    ``numerics.parent_posterior`` must reject it.
    """
    return {"posterior": results["posterior"].replace(PI, lambda parent, child: PI(child, parent))}


@lru_cache(maxsize=None)
def perturb_bma_score_identity(H: int = 4, L: int = 2, bilinear_d: tuple[int, ...] = (2, 3),
                               perturbation: Perturbation = transposed_kernel) -> Derivation:
    """:func:`derive_bma_score_identity` with ``perturbation`` applied and ``posterior_minus_softmax`` re-derived."""
    def recheck(results):
        return Derivation(CLAIM, (), {}, {"posterior_minus_softmax": softmax_residual(results["posterior"], L)})

    return derive_bma_score_identity(H, L, bilinear_d).perturbed(perturbation, recheck)


def example_context(d: int, L: int, H: int) -> np.ndarray:
    """A fixed, deterministic (L, H) token context: x^l_h = (h + l·h(h+1)/2 + l) mod d (rows differ)."""
    l, h = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
    return ((h + l * h * (h + 1) // 2 + l) % d).astype(np.int64)


def _posterior_with_symbolic_kernel(kernel: sp.Matrix, context: np.ndarray, trees) -> tuple[sp.Matrix, sp.Matrix]:
    """Bayes' rule over all trees with kernel entries as symbols (μ₀ symbolic too); residual vs the softmax."""
    L, H = context.shape
    d = kernel.shape[0]
    mu0 = sp.symbols(f"mu_0:{d}", positive=True)
    likelihood = {}
    for tree in trees:
        factors = [mu0[context[l, 0]] for l in range(L)]
        factors += [kernel[context[l, parent], context[l, g]] for l in range(L) for g, parent in enumerate(tree, 1)]
        likelihood[tree] = sp.Mul(*factors)
    evidence = sp.Add(*likelihood.values())
    posterior, residual = sp.zeros(H, H), sp.zeros(H, H)
    for h in range(1, H):
        scores = [sp.Add(*[sp.log(kernel[context[l, hp], context[l, h]]) for l in range(L)]) for hp in range(h)]
        weights = [sp.powsimp(sp.expand(sp.exp(s), power_exp=True)) for s in scores]  # exp(Σ log p) = Π p
        for hp in range(h):
            marginal = sp.Add(*[v for tree, v in likelihood.items() if tree[h - 1] == hp])
            posterior[h, hp] = sp.factor(sp.cancel(marginal / evidence))
            residual[h, hp] = sp.cancel(posterior[h, hp] - weights[hp] / sp.Add(*weights))
    return posterior, residual


def _kernel_form(expr: sp.Basic) -> sp.Basic:
    """Replace the undefined functions by array lookups so lambdify indexes NumPy arrays."""
    return expr.replace(PI, lambda a, b: KERNEL[a, b]).replace(MU0, lambda a: INIT[a])


def verify_bma_score_identity(rng, *, n_points: int = 20, d_values: tuple[int, ...] = (2, 3), H: int = 4,
                              L: int = 2, perturbation: Perturbation | None = None) -> Verification:
    """Compare the derived posterior with ``numerics.parent_posterior`` on random kernels and contexts.

    At each point: a random kernel (d cycles through ``d_values``), a random μ₀ and a random token context
    (L, H). Both the Bayes-rule form and the factored form are compared with ``numerics.parent_posterior``
    (a log-sum-exp softmax of ``selector_scores``: independent of this enumeration over trees), and the
    bilinear form Σ_l u_lᵀ (log π) v_l at one-hot u, v with ``numerics.selector_scores(log π, context)`` (a
    definition on both sides: listed apart).

    Parameters
    ----------
    rng : numpy.random.Generator
    perturbation : Perturbation, optional
        Verify the results of :func:`perturb_bma_score_identity` instead (a negative control).
    """
    rng = check_rng(rng)
    n_points = check_positive_int(n_points, "n_points")
    args = (H, L, tuple(sorted(set(d_values))))
    derivation = (derive_bma_score_identity(*args) if perturbation is None
                  else perturb_bma_score_identity(*args, perturbation=perturbation))
    results = derivation.results
    x = context_symbols(L, H)
    tokens = [s for row in x for s in row]
    forms = {name: sp.lambdify([KERNEL, INIT, *tokens], _kernel_form(results[name]), "numpy")
             for name in ("posterior_bayes", "posterior")}
    bilinear = {d: _lambdify_bilinear(results[f"bilinear_d{d}"], d) for d in d_values}
    posterior_d = {d: sp.lambdify(_kernel_symbols(d), results[f"posterior_d{d}"], "numpy") for d in d_values}
    tracker = ErrorTracker()
    for i in range(n_points):
        d = d_values[i % len(d_values)]
        kernel = numerics.random_kernel(d, alpha=1.0, eps=0.02, rng=rng)
        init = rng.dirichlet(np.ones(d))
        context = rng.integers(0, d, size=(L, H))
        expected = numerics.parent_posterior(kernel, context)  # (H, H)
        for name, f in forms.items():
            tracker.compare(name, np.asarray(f(kernel, init, *context.ravel()), dtype=float), expected)
        one_hot = np.eye(d)[context]  # (L, H, d)
        score = np.zeros((H, H))
        for l in range(L):
            for h in range(H):
                for hp in range(H):
                    score[h, hp] += bilinear[d](kernel, one_hot[l, hp], one_hot[l, h])
        tracker.compare(f"bilinear_score_d{d}", score, numerics.selector_scores(np.log(kernel), context),
                        definition=True)
        fixed = example_context(d, L, H)
        tracker.compare(f"posterior_d{d}", np.asarray(posterior_d[d](*kernel[:, :-1].ravel()), dtype=float),
                        numerics.parent_posterior(kernel, fixed))
    return tracker.result(CLAIM, n_points)


def _kernel_symbols(d: int) -> list[sp.Symbol]:
    """The free entries p_ij (j < d-1) of the symbolic kernel, in row order (the last column is 1 − the rest)."""
    return [sp.Symbol(f"p_{i}{j}", positive=True) for i in range(d) for j in range(d - 1)]


def _lambdify_bilinear(expr: sp.Basic, d: int):
    """f(kernel, u, v) for the derived uᵀ log(P) v (probability vectors given by their first d-1 entries)."""
    p = _kernel_symbols(d)
    u = sp.symbols(f"u_0:{d - 1}", positive=True)
    v = sp.symbols(f"v_0:{d - 1}", positive=True)
    f = sp.lambdify([*p, *u, *v], expr, "numpy")
    return lambda kernel, uu, vv: f(*kernel[:, :-1].ravel(), *uu[:-1], *vv[:-1])
