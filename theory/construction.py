"""``thm1-construction``: the copier's attention as a function of β, its one-hot limit and its leading error.

Layer 1 of the construction (the model of docs/claims.md): head k's logit from the query example's row g to a key
at example offset o = (L+1) − l' (o = 0 is the query example itself) and position h'' is β·(w_L[o] + w_H[g − h'']), with
w_L[o] = δ_{o,k} and w_H[r] = δ_{r,0}. The query example's keys at h'' >= g are masked. Keys fall into four
classes: the copied token (o = k, h'' = g; logit 2β), the copied example's other positions and the other context
examples' position g (logit β), and the rest (logit 0), including the g visible keys of the query example.

The derivation sums e^{logit} over all keys with SymPy (the indicator identity e^{β(δ+δ')} = (1 + (e^β−1)δ)
(1 + (e^β−1)δ') makes the double sum a product), so the normaliser, the weights, their β → ∞ limit and the
leading error (L + H − 2)·e^{−β} are derived for symbolic L, H, g, k.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import sympy as sp
from scipy.special import softmax

from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.theory.derivation import Derivation, ErrorTracker, Perturbation, Verification

CLAIM = "thm1-construction"

BETA = sp.Symbol("beta", positive=True)
L_SYM = sp.Symbol("L", integer=True, positive=True)
H_SYM = sp.Symbol("H", integer=True, positive=True)
G_SYM = sp.Symbol("g", integer=True, nonnegative=True)  # the query example's row (position) being computed
K_SYM = sp.Symbol("k", integer=True, positive=True)  # the head, copying example offset k


@lru_cache(maxsize=None)
def derive_thm1_construction() -> Derivation:
    """The constructed copier's attention weights as functions of β, with limit and leading error.

    Returns
    -------
    Derivation
        results (expressions in beta, L, H, g): ``normaliser``, ``weight_copied`` (the copied token),
        ``weight_near`` (each of the L + H − 2 keys with logit β), ``weight_far`` (each key with logit 0),
        ``limit_copied`` (= 1), ``leading_error_coefficient`` (c in 1 − weight_copied ~ c·e^{−β}),
        ``copy_l1_error`` (‖v − e_copied‖₁ when every other key holds a token different from the copied one;
        an upper bound otherwise).
        residuals: ``indicator_identity`` (all four indicator cases), ``weights_sum_to_one``,
        ``limit_copied_minus_one``, ``limits_other_classes`` and ``leading_error_minus_claim``.
    """
    beta, L, H, g, k = BETA, L_SYM, H_SYM, G_SYM, K_SYM
    o, r = sp.Symbol("o", integer=True), sp.Symbol("h''", integer=True)
    E = sp.exp(beta)

    # e^{β(δ + δ')} = (1 + (e^β − 1)δ)(1 + (e^β − 1)δ') for indicators δ, δ' in {0, 1}: check all four cases.
    d1, d2 = sp.symbols("delta delta'")
    lhs, rhs = sp.exp(beta * (d1 + d2)), (1 + (E - 1) * d1) * (1 + (E - 1) * d2)
    indicator = sp.Matrix(2, 2, lambda i, j: sp.simplify((lhs - rhs).subs({d1: i, d2: j})))

    # Context keys: offsets o = 1..L (examples l' = L+1−o), positions h'' = 0..H−1; the logit separates.
    sum_offsets = sp.Sum(1 + (E - 1) * sp.KroneckerDelta(o, k), (o, 1, L)).doit()
    sum_positions = sp.Sum(1 + (E - 1) * sp.KroneckerDelta(r, g), (r, 0, H - 1)).doit()
    # The head copies an existing example (1 <= k <= L) at an existing position (0 <= g <= H−1).
    valid = sp.Q.le(k, L) & sp.Q.le(g, H - 1) & sp.Q.ge(g, 0)
    sum_offsets, sum_positions = sp.refine(sum_offsets, valid), sp.refine(sum_positions, valid)
    # Query example (offset 0, w_L[0] = 0): visible keys h'' < g, none at offset g − h'' = 0, so logit 0 each.
    # (The same indicator identity; δ_{0,k} = 0 since k >= 1.)
    sum_query = sp.Sum((1 + (E - 1) * sp.KroneckerDelta(0, k)) * (1 + (E - 1) * sp.KroneckerDelta(r, g)),
                       (r, 0, g - 1)).doit()
    normaliser = sp.expand(sum_offsets * sum_positions + sum_query)
    weights = copier_weights(normaliser)
    weight_copied, leading = weights.results["weight_copied"], weights.results["leading_error_coefficient"]
    t = sp.Symbol("t", positive=True)  # t = e^{−β}
    series = sp.series(sp.simplify((1 - weight_copied).subs(beta, -sp.log(t))), t, 0, 3).removeO()

    A = sp.Symbol(r"A^{(1)}_{k,\,g \to (L+1-k,\,g)}")
    steps: tuple[tuple[str, sp.Basic], ...] = (
        ("Indicator identity e^{β(δ+δ')} − (1 + (e^β−1)δ)(1 + (e^β−1)δ') for δ, δ' ∈ {0, 1}", indicator),
        ("Sum over the context examples' offsets o = 1..L (head k: w_L[o] = δ_{o,k})",
         sp.Eq(sp.Symbol(r"\sum_{o=1}^{L} e^{\beta w_L[o]}"), sum_offsets)),
        ("Sum over positions h'' = 0..H−1 (w_H[g − h''] = δ_{h'',g})",
         sp.Eq(sp.Symbol(r"\sum_{h''=0}^{H-1} e^{\beta w_H[g-h'']}"), sum_positions)),
        ("Normaliser: context keys (the double sum factorises) plus the g visible query keys",
         sp.Eq(sp.Symbol("Z"), normaliser)),
        ("Weight on the copied token x^{L+1−k}_g", sp.Eq(A, weight_copied)),
        ("Weights sum to one: residual", weights.residuals["weights_sum_to_one"]),
        ("Limit as β → ∞ (copied token; then the logit-β and logit-0 keys)",
         sp.Matrix([weights.results["limit_copied"], *weights.residuals["limits_other_classes"]])),
        ("Leading error: lim_{β→∞} (1 − A)·e^{β}", sp.Eq(sp.Symbol(r"c"), leading)),
        ("Series of 1 − A in t = e^{−β}", sp.Eq(1 - A, series)),
        ("L1 error of the copy (distinct tokens elsewhere)",
         sp.Eq(sp.Symbol(r"\|v - e\|_1"), weights.results["copy_l1_error"])),
    )
    results = {"normaliser": normaliser, **weights.results}
    residuals = {"indicator_identity": indicator, **weights.residuals}
    return Derivation(CLAIM, steps, results, residuals)


def copier_weights(normaliser: sp.Expr) -> Derivation:
    """The copier's weights from its normaliser Z, their β → ∞ limits, the leading error and the identities.

    Returns a partial :class:`Derivation` (no steps): results ``weight_copied`` = e^{2β}/Z, ``weight_near`` =
    e^β/Z, ``weight_far`` = 1/Z, ``limit_copied``, ``leading_error_coefficient``, ``copy_l1_error``; residuals
    ``weights_sum_to_one`` (with the class sizes read off the factored sum), ``limit_copied_minus_one``,
    ``limits_other_classes`` and ``leading_error_minus_claim``. The derivation's own code, also applied to a
    perturbed normaliser.
    """
    beta, L, H, g = BETA, L_SYM, H_SYM, G_SYM
    E = sp.exp(beta)
    weight_copied = E**2 / normaliser
    weight_near = E / normaliser
    weight_far = 1 / normaliser
    n_near, n_far = (L - 1) + (H - 1), (L - 1) * (H - 1) + g  # class sizes read off the factored sum
    total = sp.simplify(weight_copied + n_near * weight_near + n_far * weight_far - 1)

    limit_copied = sp.limit(weight_copied, beta, sp.oo)
    limits_other = sp.Matrix([sp.limit(weight_near, beta, sp.oo), sp.limit(weight_far, beta, sp.oo)])
    leading = sp.simplify(sp.limit((1 - weight_copied) * E, beta, sp.oo))
    # With every other key holding a different token, the copy v = Σ_keys A·e_token has L1 distance
    # (1 − A_copied) + Σ_others A = 2(1 − A_copied) from e_copied (an upper bound in general).
    copy_l1 = sp.simplify(2 * (1 - weight_copied))
    results = {
        "weight_copied": weight_copied, "weight_near": weight_near, "weight_far": weight_far,
        "limit_copied": limit_copied, "leading_error_coefficient": leading, "copy_l1_error": copy_l1,
    }
    residuals = {
        "weights_sum_to_one": total,
        "limit_copied_minus_one": sp.simplify(limit_copied - 1),
        "limits_other_classes": limits_other,
        # The claim: the error is exponential in β with coefficient = the number of logit-β keys.
        "leading_error_minus_claim": sp.simplify(leading - n_near),
    }
    return Derivation(CLAIM, (), results, residuals)


def dropped_query_keys(results) -> dict[str, sp.Basic]:
    """Negative control: the normaliser without the g visible keys of the query example (a dropped term).

    The weights re-derived from it no longer sum to one and disagree with the enumeration whenever g >= 1.
    """
    kept = [term for term in sp.Add.make_args(results["normaliser"]) if G_SYM not in term.free_symbols]
    return {"normaliser": sp.Add(*kept)}


@lru_cache(maxsize=None)
def perturb_thm1_construction(perturbation: Perturbation = dropped_query_keys) -> Derivation:
    """:func:`derive_thm1_construction` with ``perturbation`` applied; weights and identities re-derived."""
    return derive_thm1_construction().perturbed(perturbation, lambda results: copier_weights(results["normaliser"]))


def copier_attention_by_enumeration(L: int, H: int, g: int, k: int, beta: float) -> np.ndarray:
    """Layer-1 attention of head k at the query example's row g over all (L+1)·H keys, by direct enumeration.

    Keys in raster order (example l' = 0..L, position h''), example L being the query; masked keys get 0.
    This is the independent NumPy twin of the derivation (it builds every logit from w_L, w_H and softmaxes).
    """
    w_L = np.zeros(L + 1)
    w_L[k] = 1.0
    w_H = np.zeros(2 * H - 1)  # offsets −(H−1)..(H−1)
    w_H[H - 1] = 1.0
    logits = np.full((L + 1, H), -np.inf)
    for lp in range(L + 1):
        for hpp in range(H):
            if lp == L and hpp >= g:
                continue  # no leakage: the query example's keys at or after g are masked
            logits[lp, hpp] = beta * (w_L[L - lp] + w_H[g - hpp + H - 1])
    return softmax(logits.ravel()).reshape(L + 1, H)  # (L+1, H)


def verify_thm1_construction(rng, *, n_points: int = 30, perturbation: Perturbation | None = None) -> Verification:
    """Compare the derived weights with :func:`copier_attention_by_enumeration` at random (L, H, g, k, β).

    Compared: the copied token's weight, the largest and smallest other weight, and the leading-error
    coefficient against the numeric (1 − A_copied)·e^β at β = 15, whose distance from the coefficient is
    O((L + H)² e^{−β}): the slack ``leading_error_remainder`` is 4(L + H)² − e^β·distance (must be >= 0).
    ``perturbation``: verify the results of :func:`perturb_thm1_construction` instead (a negative control).
    """
    rng = check_rng(rng)
    n_points = check_positive_int(n_points, "n_points")
    derivation = (derive_thm1_construction() if perturbation is None
                  else perturb_thm1_construction(perturbation=perturbation))
    results = derivation.results
    syms = [BETA, L_SYM, H_SYM, G_SYM]
    f = {name: sp.lambdify(syms, results[name], "numpy")
         for name in ("weight_copied", "weight_near", "weight_far", "leading_error_coefficient", "copy_l1_error")}
    tracker = ErrorTracker()
    for _ in range(n_points):
        L, H = int(rng.integers(1, 7)), int(rng.integers(2, 9))
        g, k = int(rng.integers(0, H)), int(rng.integers(1, L + 1))
        beta = float(rng.uniform(0.0, 6.0))
        A = copier_attention_by_enumeration(L, H, g, k, beta)  # (L+1, H)
        copied = A[L - k, g]
        others = np.delete(A.ravel(), (L - k) * H + g)  # every other key (masked ones carry 0)
        args = (beta, L, H, g)
        tracker.compare("weight_copied", f["weight_copied"](*args), copied)
        # A logit-β key: the copied example at another position.
        tracker.compare("weight_near", f["weight_near"](*args), A[L - k, (g + 1) % H])
        # A logit-0 key, where one exists: another context example at another position, or a visible query key.
        if L >= 2:
            tracker.compare("weight_far", f["weight_far"](*args), A[(L - k + 1) % L, (g + 1) % H])
        elif g >= 1:
            tracker.compare("weight_far", f["weight_far"](*args), A[L, 0])
        # Copy error with distinct tokens elsewhere: L1 distance of the attention from the one-hot on the copy.
        tracker.compare("copy_l1_error", f["copy_l1_error"](*args), (1 - copied) + others.sum())
        # In units of e^{−β}: (1 − A)e^β − c = O((L + H)² e^{−β}), so e^β·|(1 − A)e^β − c| <= 4(L + H)². At
        # β = 15 that remainder (~1e-5) is far above the rounding of (1 − A)e^β (~1e-14), and the slack, an O(10)
        # number, is judged at the verifier's tolerance meaningfully (in absolute units it would be ~1e-11,
        # below the 1e-9 tolerance, and could not fail).
        big = 15.0
        A_big = copier_attention_by_enumeration(L, H, g, k, big)
        rest = np.delete(A_big.ravel(), (L - k) * H + g).sum()  # 1 − A_copied, summed without cancellation
        remainder = abs(rest * np.exp(big) - f["leading_error_coefficient"](*args))
        tracker.bound("leading_error_remainder", remainder * np.exp(big), 4.0 * (L + H) ** 2)
    return tracker.result(CLAIM, n_points)
