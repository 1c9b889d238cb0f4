"""``prop1-invariance``: the selector is invariant to W + 1aᵀ and not to W + b1ᵀ.

The second-layer score of candidate h' for query position h is Σ_l u^{lᵀ}_{h'} W u^l_h, where u^l_g is the
layer-1 copy of x^l_g. With exact copies u is one-hot; the derivation only uses that u is a probability vector
(1ᵀu = 1), so it also covers soft copies at finite β. Adding 1aᵀ to W adds Σ_l aᵀu^l_h to every candidate's
score (the same for all h'), which the softmax removes; adding b1ᵀ adds Σ_l bᵀu^l_{h'}, which depends on h'.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import sympy as sp

from bma_verify import numerics
from bma_verify.numerics.validation import check_positive_int, check_rng
from bma_verify.theory.derivation import Derivation, ErrorTracker, Perturbation, Verification, probability_vector

CLAIM = "prop1-invariance"


def weight_symbols(d: int) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """A symbolic d x d matrix W and column vectors a, b (all real)."""
    W = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"W_{i}{j}", real=True))
    a = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"a_{i}", real=True))
    b = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"b_{i}", real=True))
    return W, a, b


def copy_symbols(d: int, L: int, H: int) -> list[list[sp.Matrix]]:
    """Probability vectors u[l][g] (the layer-1 copies of x^l_g)."""
    return [[probability_vector(f"u_{l}_{g}", d) for g in range(H)] for l in range(L)]


def selector_row(W: sp.Matrix, u: list[list[sp.Matrix]], h: int) -> list[sp.Expr]:
    """softmax over h' < h of Σ_l u^{lᵀ}_{h'} W u^l_h (the attention row of query position h)."""
    scores = [sp.expand(sp.Add(*[(row[hp].T * W * row[h])[0, 0] for row in u])) for hp in range(h)]
    weights = [sp.exp(s) for s in scores]
    norm = sp.Add(*weights)
    return [w / norm for w in weights]


def _log_odds(row: list[sp.Expr]) -> sp.Expr:
    """log(A_0 / A_1) of an attention row, with the softmax normaliser cancelled."""
    return sp.expand(sp.expand_log(sp.log(sp.powsimp(row[0] / row[1])), force=True))


def _simplified_difference(x: sp.Expr, y: sp.Expr) -> sp.Expr:
    """x − y over one common denominator with its numerator expanded: 0 exactly when x = y identically.

    exp(s + c) is split into exp(s)·exp(c) so that equal products of exponentials meet in the expansion; the
    denominator is a product of sums of exponentials (positive), so the difference vanishes iff the numerator
    does. (``sympy.simplify`` finds the same zero but takes minutes on these softmax ratios, and ``cancel``
    takes tens of seconds on a nonzero difference, the negative control, for its polynomial gcd.)
    """
    numerator, denominator = sp.fraction(sp.together(sp.expand(x - y, power_exp=True, mul=False)))
    return sp.expand(numerator) / denominator


@lru_cache(maxsize=None)
def derive_prop1_invariance(d: int = 2, H: int = 3, L: int = 2) -> Derivation:
    """Softmax of the score with W + 1aᵀ minus that with W simplifies to 0; with W + b1ᵀ it does not.

    Returns
    -------
    Derivation
        results ``attention_column_shift`` (the last row h = H-1 under W + 1aᵀ; list as a 1 x (H-1) matrix)
        and ``attention_row_shift`` (under W + b1ᵀ), in W, a, b and the copies u;
        residual ``column_shift_difference`` (zero); witnesses ``row_shift_log_odds_change`` (the change of
        log(A_0 / A_1) under W + b1ᵀ, nonzero) and ``row_shift_instance`` (the attention difference at a
        concrete point: W = 0, one-hot copies, b = e_0).
    """
    d = check_positive_int(d, "d", minimum=2)
    H = check_positive_int(H, "H", minimum=3)  # h = H-1 must have at least two candidates
    L = check_positive_int(L, "L", minimum=1)
    W, a, b = weight_symbols(d)
    ones = sp.ones(d, 1)
    u = copy_symbols(d, L, H)
    h = H - 1
    base = selector_row(W, u, h)
    column = selector_row(W + ones * a.T, u, h)  # W + 1aᵀ: a added to every row, i.e. a column shift
    row = selector_row(W + b * ones.T, u, h)  # W + b1ᵀ: b added to every column, i.e. a row shift

    # The score shift each perturbation causes, per candidate h' (expanded using 1ᵀu = 1).
    column_shift = [sp.expand(sp.Add(*[(r[hp].T * ones * a.T * r[h])[0, 0] for r in u])) for hp in range(h)]
    row_shift = [sp.expand(sp.Add(*[(r[hp].T * b * ones.T * r[h])[0, 0] for r in u])) for hp in range(h)]
    column_difference = column_shift_residual(sp.Matrix(1, h, column), d, H, L)
    # Under W + b1ᵀ the attention changes; the change is exhibited through the log-odds of candidates 0 and 1,
    # log(A_0 / A_1), whose shift is Σ_l bᵀ(u^l_0 − u^l_1): not identically zero.
    row_log_odds_change = sp.expand(_log_odds(row) - _log_odds(base))

    # A concrete point where the row-shift difference is visibly nonzero: W = 0, b = e_0, copies one-hot
    # with x_{h'} = 0 only for h' = 0 (so candidate 0 gets the extra score L·b_0 = L).
    point = {s: 0 for s in W}
    point.update({b[0]: 1, **{b[i]: 0 for i in range(1, d)}})
    for r in u:
        for g, vec in enumerate(r):
            target = 0 if g == 0 else 1
            point.update({vec[i]: (1 if i == target else 0) for i in range(d - 1)})
    instance = sp.Matrix(1, h, [sp.nsimplify(sp.simplify((r - s).subs(point))) for r, s in zip(row, base)])

    steps: tuple[tuple[str, sp.Basic], ...] = (
        (f"Score shift from W → W + 1aᵀ, per candidate h' = 0..{h - 1} (1ᵀu = 1 used)",
         sp.Matrix(1, h, column_shift)),
        (f"Score shift from W → W + b1ᵀ, per candidate h' = 0..{h - 1}", sp.Matrix(1, h, row_shift)),
        (f"Attention row h = {h} under W + 1aᵀ minus under W, simplified", column_difference),
        ("Under W + b1ᵀ: change of the log-odds log(A_0 / A_1) of candidates 0 and 1 (not zero)",
         row_log_odds_change),
        (f"Row-shift difference at W = 0, b = e_0, x_0 = 0, x_{{h'}} = 1 otherwise (d = {d}, L = {L})", instance),
    )
    results = {"attention_column_shift": sp.Matrix(1, h, column),
               "attention_row_shift": sp.Matrix(1, h, row),
               "row_shift_instance": instance}
    return Derivation(CLAIM, steps, results, residuals={"column_shift_difference": column_difference},
                      witnesses={"row_shift_log_odds_change": row_log_odds_change, "row_shift_instance": instance})


def column_shift_residual(attention: sp.Matrix, d: int, H: int, L: int) -> sp.Matrix:
    """An attention row (1 x (H-1)) claimed equal to that of the unshifted W, minus it, as cancelled fractions.

    The derivation's own check of the invariance (zero when it holds); also applied to a perturbed row.
    """
    W, _, _ = weight_symbols(d)
    base = selector_row(W, copy_symbols(d, L, H), H - 1)
    return sp.Matrix(1, H - 1, [_simplified_difference(c, s) for c, s in zip(attention, base)])


def transposed_column_shift(results) -> dict[str, sp.Basic]:
    """Negative control: the attention under W + a1ᵀ (the shift transposed) posing as the one under W + 1aᵀ.

    Built from the derived W + b1ᵀ row with b renamed a; it changes the attention, so the invariance residual and
    the comparison with the unshifted ``numerics.selector_attention`` must reject it.
    """
    row = results["attention_row_shift"]
    rename = {s: sp.Symbol("a" + s.name[1:], real=True) for s in row.free_symbols if s.name.startswith("b_")}
    return {"attention_column_shift": row.xreplace(rename)}


@lru_cache(maxsize=None)
def perturb_prop1_invariance(d: int = 2, H: int = 3, L: int = 2,
                             perturbation: Perturbation = transposed_column_shift) -> Derivation:
    """:func:`derive_prop1_invariance` with ``perturbation`` applied and ``column_shift_difference`` re-derived."""
    def recheck(results):
        residual = column_shift_residual(results["attention_column_shift"], d, H, L)
        return Derivation(CLAIM, (), {}, {"column_shift_difference": residual})

    return derive_prop1_invariance(d, H, L).perturbed(perturbation, recheck)


def verify_prop1_invariance(rng, *, n_points: int = 20, d: int = 2, H: int = 3, L: int = 2,
                            perturbation: Perturbation | None = None) -> Verification:
    """Evaluate the derived attention rows at random W, a, b and one-hot copies of random contexts.

    Compared with ``numerics.selector_attention``: the W + 1aᵀ row with the attention of the *unshifted* W
    (invariance) and the W + b1ᵀ row with the attention of W + b1ᵀ (the formula); the exhibited instance of
    a nonzero row-shift difference with the difference numerics computes there (slack
    ``row_shift_instance_nonzero`` = ‖instance‖₁ − 1e-6 must be >= 0). ``perturbation``: verify the results of
    :func:`perturb_prop1_invariance` instead (a negative control).
    """
    rng = check_rng(rng)
    n_points = check_positive_int(n_points, "n_points")
    derivation = (derive_prop1_invariance(d, H, L) if perturbation is None
                  else perturb_prop1_invariance(d, H, L, perturbation=perturbation))
    results = derivation.results
    W, a, b = weight_symbols(d)
    u = copy_symbols(d, L, H)
    free_u = [vec[i] for r in u for vec in r for i in range(d - 1)]
    args = [*W, *a, *b, *free_u]
    column = sp.lambdify(args, results["attention_column_shift"], "numpy")
    row = sp.lambdify(args, results["attention_row_shift"], "numpy")
    instance = np.asarray(results["row_shift_instance"], dtype=float)
    tracker = ErrorTracker()
    h = H - 1
    # The exhibited instance: W = 0, b = e_0, x^l_0 = 0 and x^l_{h'} = 1 for h' >= 1, evaluated by numerics.
    context = np.ones((L, H), dtype=np.int64)
    context[:, 0] = 0
    e0 = np.eye(d)[0]
    shifted = numerics.selector_attention(np.outer(e0, np.ones(d)), context)[h, :h]
    tracker.compare("row_shift_instance", instance.ravel(),
                    shifted - numerics.selector_attention(np.zeros((d, d)), context)[h, :h])
    tracker.bound("row_shift_instance_nonzero", 1e-6, np.abs(instance).sum())
    for _ in range(n_points):
        Wn, an, bn = rng.normal(size=(d, d)), rng.normal(size=d), rng.normal(size=d)
        context = rng.integers(0, d, size=(L, H))
        one_hot = np.eye(d)[context]  # (L, H, d)
        values = [*Wn.ravel(), *an, *bn, *one_hot[..., :-1].ravel()]
        A_col = np.asarray(column(*values), dtype=float).ravel()
        A_row = np.asarray(row(*values), dtype=float).ravel()
        A_plain = numerics.selector_attention(Wn, context)[h, :h]
        tracker.compare("column_shift_equals_unshifted", A_col, A_plain)
        tracker.compare("row_shift_formula", A_row, numerics.selector_attention(Wn + np.outer(bn, np.ones(d)),
                                                                                context)[h, :h])
    return tracker.result(CLAIM, n_points)
