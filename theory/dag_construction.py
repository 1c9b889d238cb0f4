"""The 2-simplicial construction for parent sets, derived with SymPy (claim ``ext-dag-construction``; ours).

The analogue of Theorem 1 for k = 2: with exact copies and T = log π_2, the softmax over pairs of the trilinear
score Σ_l T[x^l_a, x^l_b, x^l_h] is the set posterior of Bayes over every DAG (:func:`derive_dag_construction`).
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

from bma_verify.theory.dag_tables import stochastic_table
from bma_verify.theory.derivation import Derivation, labelled

CLAIM_CONSTRUCTION = "ext-dag-construction"
#: The context of the symbolic derivation: L = 2 examples on H = 4 positions, d = 2 (position 3 chooses among
#: {0,1}, {0,2}, {1,2}; position 2's set is {0,1}, position 1's is {0}).
CONSTRUCTION_CONTEXT = ((0, 1, 1, 0), (1, 1, 0, 1))


def _trilinear(T: sp.Matrix, u, w, y, d: int) -> sp.Expr:
    """Σ_{i,j,c} u_i w_j T[i·d + j, c] y_c: the 2-simplicial score of one example."""
    return sp.Add(*[u[i] * w[j] * T[i * d + j, c] * y[c] for i in range(d) for j in range(d) for c in range(d)])


def construction_expressions(T_of, pi2: sp.Matrix, context=CONSTRUCTION_CONTEXT, d: int = 2) -> dict:
    """Posterior of S_3 by Bayes over the three DAGs with the full likelihood (symbolic μ₀, π_1, π_2), the softmax
    of the trilinear score of one-hot copies with table ``T_of(pi2)``, and the first-order change of the score when
    every copy is v = (1 − η) e_x + η u (u a symbolic law: the copier's error)."""
    mu = sp.Matrix([sp.Symbol("mu_0", positive=True), 1 - sp.Symbol("mu_0", positive=True)])
    pi1 = stochastic_table("p1", d, d)
    sets = [(0, 1), (0, 2), (1, 2)]
    likelihood = []
    for S in sets:
        total = sp.Integer(1)
        for x in context:
            total *= mu[x[0]] * pi1[x[0], x[1]] * pi2[x[0] * d + x[1], x[2]] * pi2[x[S[0]] * d + x[S[1]], x[3]]
        likelihood.append(total)
    posterior = [lk / sp.Add(*likelihood) for lk in likelihood]
    T = T_of(pi2)
    onehot = lambda v: [sp.Integer(int(i == v)) for i in range(d)]  # noqa: E731
    scores = [sp.Add(*[_trilinear(T, onehot(x[S[0]]), onehot(x[S[1]]), onehot(x[3]), d) for x in context])
              for S in sets]
    weights = [sp.exp(s) for s in scores]
    softmax = [w / sp.Add(*weights) for w in weights]
    eta = sp.Symbol("eta", nonnegative=True)
    u = [sp.Symbol(f"u_{i}", nonnegative=True) for i in range(d - 1)]
    u = [*u, 1 - sp.Add(*u)]
    soft = lambda v: [(1 - eta) * e + eta * ui for e, ui in zip(onehot(v), u)]  # noqa: E731
    x = context[0]
    S = sets[0]
    score_eta = _trilinear(T, soft(x[S[0]]), soft(x[S[1]]), soft(x[3]), d)
    stated_slope = (_trilinear(T, u, onehot(x[S[1]]), onehot(x[3]), d)
                    + _trilinear(T, onehot(x[S[0]]), u, onehot(x[3]), d)
                    + _trilinear(T, onehot(x[S[0]]), onehot(x[S[1]]), u, d)
                    - 3 * _trilinear(T, onehot(x[S[0]]), onehot(x[S[1]]), onehot(x[3]), d))
    return {"posterior": posterior, "softmax": softmax, "score_eta": score_eta, "stated_slope": stated_slope,
            "eta": eta, "scores": scores}


def log_table(pi2: sp.Matrix) -> sp.Matrix:
    return pi2.applyfunc(sp.log)


def transposed_log_table(pi2: sp.Matrix, d: int = 2) -> sp.Matrix:
    """Negative control: T[a·d + b, c] = log π(c | b, a) (the parents' order transposed)."""
    return sp.Matrix(pi2.rows, pi2.cols, lambda r, c: sp.log(pi2[(r % d) * d + r // d, c]))


@lru_cache(maxsize=None)
def derive_dag_construction(table=None) -> Derivation:
    """Theorem 1 for sets (k = 2): with exact copies and T = log π_2, the softmax over pairs of the 2-simplicial
    score Σ_l T[x^l_a, x^l_b, x^l_h] is the exact set posterior (Bayes over every DAG, full likelihood, symbolic μ₀,
    π_1, π_2); with the copier's soft copies v = (1 − η)e_x + ηu the score moves by η·[Σ of the three one-slot
    substitutions − 3·score] + O(η²), so with η = O(e^{−β}) (the tree copier, ``thm1-construction``) the
    attention error is O(e^{−β}).

    Residuals: posterior_c − softmax_c (c = 0, 1, 2; powers and logs combined) and ∂score/∂η at 0 minus the stated
    slope. ``table`` maps π_2 to T (the control passes :func:`transposed_log_table`).
    """
    pi2 = stochastic_table("pi", 4, 2)
    out = construction_expressions(table or log_table, pi2)
    residuals = {}
    for c, (p, s) in enumerate(zip(out["posterior"], out["softmax"])):
        combined = sp.powsimp(sp.expand_log(sp.logcombine(s, force=True), force=True), force=True)
        combined = sp.simplify(sp.exp(sp.expand_log(sp.log(combined), force=True)))
        residuals[f"posterior_minus_softmax_{c}"] = sp.simplify(sp.cancel(sp.together(p - combined)))
    slope = sp.diff(out["score_eta"], out["eta"]).subs(out["eta"], 0)
    residuals["score_slope_minus_stated"] = sp.expand(slope - out["stated_slope"])
    steps = (
        ("Context: L = 2, H = 4, d = 2; position 3 chooses S ∈ {{0,1}, {0,2}, {1,2}}", str(CONSTRUCTION_CONTEXT)),
        ("Set posterior by Bayes over the three DAGs (full likelihood)", labelled(r"P(S_3 = \{0,1\} \mid \cdot)",
                                                                                  out["posterior"][0])),
        ("2-simplicial scores of one-hot copies with T = log π_2", labelled("s", sp.Matrix(out["scores"]))),
        ("posterior − softmax(scores), per candidate", sp.Matrix([residuals[f"posterior_minus_softmax_{c}"]
                                                                   for c in range(3)])),
        ("∂ score/∂η at η = 0 minus the stated slope (copies (1−η)e_x + ηu)", residuals["score_slope_minus_stated"]),
    )
    return Derivation(CLAIM_CONSTRUCTION, steps, {"posterior_0": out["posterior"][0],
                                                  "softmax_0": out["softmax"][0]}, residuals)
