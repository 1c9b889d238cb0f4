"""``lemma3-strict-dpi``: Dobrushin and Doeblin contraction bounds, and closed forms for the binary symmetric channel.

Lemma 3 needs an α < 1 with I(x_h; x_{h'}) <= α I(x_h; x_pa(h)) for non-parents h'. The candidates the package
reports are contraction coefficients of the channel x_pa(h) → x_{h'}; this module derives, for a symbolic
kernel K:

* the Dobrushin coefficient δ(K) = max_{y,y'} ½ Σ_z |K(z|y) − K(z|y')| (d = 2 in closed form, d = 3 as a Max
  of Abs terms that ``numerics`` evaluates), and the identity ½ Σ_z |a_z − b_z| = 1 − Σ_z min(a_z, b_z);
* the Doeblin bound: writing K(z|y) = ε + r_{yz} with r >= 0, Σ_z min(K(z|y), K(z|y')) >= dε, so
  δ(K) <= 1 − dε (the slack is a sum of Min(r, s) terms, which SymPy proves nonnegative);
* for BSC(p) with a uniform input: I, I_χ², the χ²-contraction coefficient (second singular value squared of
  diag(√P_X) K diag(1/√P_Y)) = (1 − 2p)², and δ = |1 − 2p|.
"""
from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np
import sympy as sp

from bma_verify import numerics
from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.numerics.contraction import chi2_contraction, doeblin_bound
from bma_verify.theory.derivation import Derivation, ErrorTracker, Perturbation, Verification, stochastic_matrix

CLAIM = "lemma3-strict-dpi"

P_BSC = sp.Symbol("p", positive=True)  # crossover probability of the BSC, 0 < p < 1
EPS = sp.Symbol("epsilon", positive=True)


def total_variation(row_a, row_b) -> sp.Expr:
    """½ Σ_z |a_z − b_z| of two symbolic rows (the definition)."""
    return sp.Rational(1, 2) * sp.Add(*[sp.Abs(a - b) for a, b in zip(row_a, row_b)])


def dobrushin_expression(kernel: sp.Matrix) -> sp.Expr:
    """δ(K) = max over row pairs of their total variation (the definition; Max of Abs terms)."""
    d = kernel.shape[0]
    pairs = [sp.simplify(total_variation(kernel.row(y), kernel.row(yp))) for y, yp in itertools.combinations(range(d), 2)]
    return sp.Max(*pairs)


@lru_cache(maxsize=None)
def derive_lemma3_strict_dpi(d_general: int = 3) -> Derivation:
    """Dobrushin and Doeblin bounds for a symbolic kernel; BSC closed forms; α candidates as expressions.

    Returns
    -------
    Derivation
        results: ``dobrushin_d2`` (in K_00, K_10), ``alpha_dobrushin`` (δ for the symbolic d_general x d_general
        kernel ``K_ij``, free entries j < d−1), ``alpha_doeblin`` (1 − d·Min of its entries),
        ``bsc_mutual_information``, ``bsc_chi2_mutual_information``, ``bsc_chi2_contraction``, ``bsc_dobrushin``
        (in p); residuals: the TV/min identities, the BSC closed forms minus the stated ones;
        nonnegatives: the Doeblin slack (1 − dε) − TV(K(·|y), K(·|y')) for a kernel ε + r, every row pair;
        definition: the decomposition of that slack into Σ_z min(r_yz, r_y'z) (bookkeeping, zero by construction).
    """
    d_general = check_positive_int(d_general, "d_general", minimum=2)
    steps: list[tuple[str, sp.Basic]] = []

    # TV = 1 − Σ min: per coordinate |a − b| = a + b − 2 min(a, b) (case split via Piecewise), then Σ a = Σ b = 1.
    a, b = sp.symbols("a b", real=True)
    coordinate = sp.simplify((sp.Abs(a - b) - (a + b - 2 * sp.Min(a, b))).rewrite(sp.Piecewise))
    steps.append(("|a − b| − (a + b − 2 min(a, b)), simplified over both cases", coordinate))

    K2 = stochastic_matrix("K", 2)
    dobrushin_d2 = dobrushin_expression(K2)
    steps.append(("Dobrushin coefficient of a symbolic 2 x 2 kernel", sp.Eq(sp.Symbol(r"\delta(K)"), dobrushin_d2)))

    K = stochastic_matrix("K", d_general)
    alpha_dobrushin = dobrushin_expression(K)
    alpha_doeblin = 1 - d_general * sp.Min(*K)
    steps.append((f"Dobrushin coefficient of a symbolic {d_general} x {d_general} kernel",
                  sp.Eq(sp.Symbol(r"\delta(K)"), alpha_dobrushin)))
    steps.append(("Doeblin candidate α", sp.Eq(sp.Symbol(r"\alpha_{\mathrm{Doeblin}}"), alpha_doeblin)))

    # Doeblin: K(z|y) = ε + r_{yz} with r >= 0 and rows summing to one.
    d = d_general
    r = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"r_{i}{j}", nonnegative=True))
    lower = (EPS * sp.ones(d, d) + r)
    tv_min_form = [1 - sp.Add(*[sp.Min(lower[y, z], lower[yp, z]) for z in range(d)])
                   for y, yp in itertools.combinations(range(d), 2)]
    # min(ε + r, ε + s) = ε + min(r, s), again by the case split.
    r_, s_ = sp.symbols("r s", nonnegative=True)
    shift_min = sp.simplify((sp.Min(EPS + r_, EPS + s_) - EPS - sp.Min(r_, s_)).rewrite(sp.Piecewise))
    steps.append(("min(ε + r, ε + s) − ε − min(r, s), simplified over both cases", shift_min))
    slack = [sp.Add(*[sp.Min(r[y, z], r[yp, z]) for z in range(d)]) for y, yp in itertools.combinations(range(d), 2)]
    # Apply that lemma (every Min here has arguments ε + r) and the rest is linear: expand to 0.
    pulled = [tv.replace(sp.Min, lambda *args: EPS + sp.Min(*[arg - EPS for arg in args])) for tv in tv_min_form]
    slack_residual = sp.Matrix([sp.expand(1 - d * EPS - tv - sl) for tv, sl in zip(pulled, slack)])
    steps.append((f"(1 − {d}ε) − TV(K(·|y), K(·|y')) − Σ_z min(r_yz, r_y'z), each row pair", slack_residual))
    steps.append(("Slack of the Doeblin bound δ(K) ≤ 1 − dε (first row pair; a sum of minima of r ≥ 0)",
                  sp.GreaterThan(slack[0], 0, evaluate=False)))

    # Binary symmetric channel with a uniform input: joint P = ½ K.
    p = P_BSC
    bsc = sp.Matrix([[1 - p, p], [p, 1 - p]])
    joint = bsc / 2
    px = [sum(joint.row(i)) for i in range(2)]
    py = [sum(joint.col(j)) for j in range(2)]
    mi = sp.expand(sp.expand_log(sp.Add(*[joint[i, j] * sp.log(joint[i, j] / (px[i] * py[j]))
                                            for i in range(2) for j in range(2)]), force=True))
    chi2 = sp.factor(sp.Add(*[joint[i, j] ** 2 / (px[i] * py[j]) for i in range(2) for j in range(2)]) - 1)
    B = sp.diag(*[sp.sqrt(v) for v in px]) * bsc * sp.diag(*[1 / sp.sqrt(v) for v in py])
    singular_sq = sorted((sp.factor(e) for e in (B.T * B).eigenvals()), key=lambda e: sp.count_ops(e))
    eta = [e for e in singular_sq if e != 1][0]  # the top singular value of B is 1; η_χ² is the other one squared
    results = {
        "dobrushin_d2": dobrushin_d2, "alpha_dobrushin": alpha_dobrushin, "alpha_doeblin": alpha_doeblin,
        "bsc_mutual_information": mi, "bsc_chi2_mutual_information": chi2, "bsc_chi2_contraction": eta,
    }
    bsc_part = bsc_closed_forms(results)
    steps += [
        ("BSC(p), uniform input: I = Σ P log P/(P_X P_Y)", sp.Eq(sp.Symbol("I"), mi)),
        ("BSC(p): I_χ² = Σ P²/(P_X P_Y) − 1", sp.Eq(sp.Symbol(r"I_{\chi^2}"), chi2)),
        ("BSC(p): squared singular values of diag(√P_X) K diag(1/√P_Y)", sp.Matrix(singular_sq)),
        ("BSC(p): Dobrushin coefficient", sp.Eq(sp.Symbol(r"\delta"), bsc_part.results["bsc_dobrushin"])),
    ]
    residuals = {"abs_min_identity": coordinate, "shifted_min_identity": shift_min, **bsc_part.residuals}
    # Once min(ε + r, ε + s) = ε + min(r, s) (the shifted_min_identity residual) is applied, the decomposition
    # (1 − dε) − TV = Σ_z min(r_yz, r_y'z) is bookkeeping that expands to 0 by construction: a definition.
    definitions = {"doeblin_slack_decomposition": slack_residual}
    pairs = list(itertools.combinations(range(d), 2))
    nonnegatives = {f"doeblin_slack_rows_{y}{yp}": sl for (y, yp), sl in zip(pairs, slack)}
    return Derivation(CLAIM, tuple(steps), {**results, **bsc_part.results}, residuals, nonnegatives=nonnegatives,
                      definitions=definitions)


def bsc_closed_forms(results) -> Derivation:
    """The BSC(p) Dobrushin coefficient from ``dobrushin_d2``, and every BSC result minus its stated closed form.

    Returns a partial :class:`Derivation`: result ``bsc_dobrushin``; residuals (the stated closed forms:
    η = (1 − 2p)², δ = |1 − 2p|, I_χ² = (1 − 2p)², and I = log 2 − h(p)) ``bsc_chi2_mi_minus_stated``,
    ``bsc_contraction_minus_stated``, ``bsc_dobrushin_minus_stated``, ``bsc_mi_minus_log2_entropy``. The
    derivation's own code, also applied to perturbed results.
    """
    p = P_BSC
    delta_bsc = sp.simplify(results["dobrushin_d2"].subs({sp.Symbol("K_00", positive=True): 1 - p,
                                                          sp.Symbol("K_10", positive=True): p}))
    residuals = {
        "bsc_chi2_mi_minus_stated": sp.simplify(results["bsc_chi2_mutual_information"] - (1 - 2 * p) ** 2),
        "bsc_contraction_minus_stated": sp.simplify(results["bsc_chi2_contraction"] - (1 - 2 * p) ** 2),
        "bsc_dobrushin_minus_stated": sp.simplify(delta_bsc - sp.Abs(1 - 2 * p)),
        "bsc_mi_minus_log2_entropy": sp.simplify(sp.expand_log(
            results["bsc_mutual_information"] - (sp.log(2) + p * sp.log(p) + (1 - p) * sp.log(1 - p)), force=True)),
    }
    return Derivation(CLAIM, (), {"bsc_dobrushin": delta_bsc}, residuals)


def dropped_half_in_total_variation(results) -> dict[str, sp.Basic]:
    """Negative control: the Dobrushin coefficients with Σ_z |K(z|y) − K(z|y')| in place of ½ Σ_z (the ½ dropped).

    Re-derived for the BSC this gives 2|1 − 2p|; it exceeds the Doeblin bound and disagrees with
    ``numerics.dobrushin_coefficient``.
    """
    return {"dobrushin_d2": 2 * results["dobrushin_d2"], "alpha_dobrushin": 2 * results["alpha_dobrushin"]}


@lru_cache(maxsize=None)
def perturb_lemma3_strict_dpi(d_general: int = 3,
                              perturbation: Perturbation = dropped_half_in_total_variation) -> Derivation:
    """:func:`derive_lemma3_strict_dpi` with ``perturbation`` applied and the BSC closed forms re-derived."""
    return derive_lemma3_strict_dpi(d_general).perturbed(perturbation, bsc_closed_forms)


def _kernel_args(K: sp.Matrix) -> list[sp.Symbol]:
    """The free symbols K_ij (j < d−1) of :func:`stochastic_matrix` in row order."""
    d = K.shape[0]
    return [K[i, j] for i in range(d) for j in range(d - 1)]


def verify_lemma3_strict_dpi(rng, *, n_points: int = 30, d_general: int = 3,
                             perturbation: Perturbation | None = None) -> Verification:
    """Evaluate the derived α candidates and BSC closed forms against ``numerics`` at random points.

    Random kernels (d_general x d_general, entrywise >= ε with random ε): ``alpha_dobrushin`` vs
    ``numerics.dobrushin_coefficient``, ``alpha_doeblin`` vs ``numerics.contraction.doeblin_bound``, with slacks
    δ <= Doeblin bound and η_χ²(stationary law, K) <= δ (``numerics.contraction.chi2_contraction``). Random
    p in (0, 1): the BSC forms vs ``numerics.mutual_information``, ``chi2_mutual_information``,
    ``chi2_contraction`` and ``dobrushin_coefficient`` of the BSC. The α candidates and ``dobrushin_d2`` are
    definitions typed in on both sides (listed apart); the evidence is the slacks and the BSC closed forms.
    ``perturbation``: verify the results of :func:`perturb_lemma3_strict_dpi` instead (a negative control).
    """
    rng = check_rng(rng)
    n_points = check_positive_int(n_points, "n_points")
    derivation = (derive_lemma3_strict_dpi(d_general) if perturbation is None
                  else perturb_lemma3_strict_dpi(d_general, perturbation=perturbation))
    results = derivation.results
    K = stochastic_matrix("K", d_general)
    args = _kernel_args(K)
    f_dob = sp.lambdify(args, results["alpha_dobrushin"], "numpy")
    f_doe = sp.lambdify(args, results["alpha_doeblin"], "numpy")
    K2 = stochastic_matrix("K", 2)
    f_d2 = sp.lambdify(_kernel_args(K2), results["dobrushin_d2"], "numpy")
    bsc = {name: sp.lambdify([P_BSC], results[name], "numpy")
           for name in ("bsc_mutual_information", "bsc_chi2_mutual_information", "bsc_chi2_contraction",
                        "bsc_dobrushin")}
    tracker = ErrorTracker()
    for _ in range(n_points):
        eps = float(rng.uniform(0.0, 1.0 / d_general))
        kernel = numerics.random_kernel(d_general, alpha=float(rng.uniform(0.2, 2.0)), eps=eps, rng=rng)
        flat = kernel[:, :-1].ravel()
        delta = numerics.dobrushin_coefficient(kernel)
        tracker.compare("alpha_dobrushin", f_dob(*flat), delta, definition=True)
        tracker.compare("alpha_doeblin", f_doe(*flat), doeblin_bound(kernel), definition=True)
        tracker.bound("dobrushin_below_doeblin", f_dob(*flat), f_doe(*flat))
        law = numerics.stationary_distribution(kernel)
        tracker.bound("chi2_contraction_below_dobrushin", chi2_contraction(law, kernel), f_dob(*flat))
        kernel2 = numerics.random_kernel(2, rng=rng)
        tracker.compare("dobrushin_d2", f_d2(*kernel2[:, :-1].ravel()), numerics.dobrushin_coefficient(kernel2),
                        definition=True)
        p = float(rng.uniform(0.01, 0.99))
        channel = np.array([[1 - p, p], [p, 1 - p]])
        joint = channel / 2
        tracker.compare("bsc_mutual_information", bsc["bsc_mutual_information"](p), numerics.mutual_information(joint))
        tracker.compare("bsc_chi2_mutual_information", bsc["bsc_chi2_mutual_information"](p),
                        numerics.chi2_mutual_information(joint))
        tracker.compare("bsc_chi2_contraction", bsc["bsc_chi2_contraction"](p),
                        chi2_contraction(np.full(2, 0.5), channel))
        tracker.compare("bsc_dobrushin", bsc["bsc_dobrushin"](p), numerics.dobrushin_coefficient(channel))
    return tracker.result(CLAIM, n_points)
