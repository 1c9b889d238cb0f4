"""Claim ext-dag-construction (ours): a 2-simplicial (trilinear) attention layer after the tree model's copier
implements k-parent BMA exactly.

Two checks: symbolic (theory.dag_construction: Bayes over every DAG with symbolic μ₀, π_1, π_2 equals the pair
softmax; the first-order soft-copy error) and model (model.pair_attention in float64: error vs the copier scale β
against the exact set posterior and BMA predictive). Controls: a wrong table T, π_2's parents transposed.
History: docs/notes/ext-dag-construction.md.
"""
from __future__ import annotations

import numpy as np
import sympy as sp
import torch

from bma_verify.model.construction import bma_construction
from bma_verify.model.pair_attention import construction_errors, pair_construction
from bma_verify.numerics.dag import dag_parent_posterior, random_dag_kernels, sample_dag_task
from bma_verify.numerics.dag_agreement import transposed_parent_order
from bma_verify.numerics.task import random_kernel, sample_task
from bma_verify.reports.checks.dag_common import IDENTITY_ATOL, combine_verdicts
from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.core import (CheckContext, CheckOutcome, Control, ControlMargin, PositiveControl, Table,
                                     new_figure, save_figure)
from bma_verify.theory.dag_construction import (CONSTRUCTION_CONTEXT, derive_dag_construction, log_table,
                                                transposed_log_table)

#: Random kernels at which the symbolic posterior is compared with numerics.dag_parent_posterior.
SIZES = {"quick": {"symbolic_points": 6}, "full": {"symbolic_points": 24}}
#: β values of the construction sweep; the rate is fitted only where the error lies in FIT_RANGE (well above
#: rounding, past the pre-asymptotic start).
CONSTRUCTION_BETAS = (1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0)
FIT_RANGE = (1e-11, 1e-2)
#: At the largest β the constructed attention must equal the set posterior to this (rounding is ~1e-13).
CONSTRUCTION_ATOL = 1e-9
#: Smallest fitted decay rate of log(error) per unit β that reads as exponential (the construction gives ≈ 1).
MIN_RATE = 0.5
#: (k, d, H, L) of the model check's instances.
MODEL_CASES = ((2, 3, 6, 4), (3, 2, 6, 3), (2, 2, 5, 6))


def decide_construction(final_error: float, rate: float) -> str:
    """pass iff the error at the largest β is ≤ CONSTRUCTION_ATOL and log(error) falls at least MIN_RATE per unit β."""
    return "pass" if final_error <= CONSTRUCTION_ATOL and rate >= MIN_RATE else "fail"


def fit_rate(betas, errors) -> float:
    """Decay rate r of error ≈ C·e^(−rβ), fitted on the errors inside FIT_RANGE (0 when fewer than two)."""
    betas, errors = np.asarray(betas), np.asarray(errors)
    keep = (errors > FIT_RANGE[0]) & (errors < FIT_RANGE[1])
    if keep.sum() < 2:
        return 0.0
    return float(-np.polyfit(betas[keep], np.log(errors[keep]), 1)[0])


def construction_cases(rng: np.random.Generator) -> tuple[list[dict], list[dict]]:
    """Errors vs β of the construction with T = log π_k and with the wrong T (parents transposed), per instance."""
    cases, control_cases = [], []
    for k, d, H, L in MODEL_CASES:
        kernels = random_dag_kernels(d, k, alpha=0.7, eps=0.02, rng=rng)
        batch = sample_dag_task(kernels, 4, L, H, rng=rng)
        errors = construction_errors(kernels, batch.context, batch.query, CONSTRUCTION_BETAS)
        wrong = construction_errors(kernels, batch.context, batch.query, CONSTRUCTION_BETAS,
                                    table=np.log(transposed_parent_order(kernels)[-1]))
        for store, e in ((cases, errors), (control_cases, wrong)):
            final = max(e["posterior_error"][-1], e["predictive_error"][-1])
            rate = fit_rate(e["beta"], e["posterior_error"])
            store.append({"k": k, "d": d, "H": H, "L": L, "final_error": final, "rate": rate,
                          "posterior_error": e["posterior_error"], "verdict": decide_construction(final, rate)})
    return cases, control_cases


def exponential_ideal(cases: list[dict]) -> PositiveControl:
    """The rule on its ideal: per instance, errors falling exactly as e^(−β) (the construction's O(e^(−β)), rate 1)
    from that instance's own error at the smallest β, fitted and judged as the real errors are."""
    betas = np.asarray(CONSTRUCTION_BETAS)
    ideal = [c["posterior_error"][0] * np.exp(betas[0] - betas) for c in cases]
    finals, rates = [float(e[-1]) for e in ideal], [fit_rate(betas, e) for e in ideal]
    verdict = combine_verdicts(decide_construction(f, r) for f, r in zip(finals, rates))
    return PositiveControl("errors falling exactly as e^(−β) from each instance's own error at the smallest β, judged "
                           "by the same rule (final error and fitted rate; the k = 1 comparison is not re-run)",
                           {"final_errors": finals, "rates": rates}, verdict == "pass")


def tree_difference(rng: np.random.Generator) -> float:
    """k = 1: the pair model is the tree construction (same copier; T = log π as one block of W_KQ); the largest
    difference of their attention and predictions."""
    kernel = random_kernel(3, alpha=0.7, eps=0.02, rng=rng)
    tree_batch = sample_task(kernel, 4, 4, 6, rng=rng)
    with torch.no_grad():
        a1, f1 = pair_construction((kernel,), 4, 8.0, max_H=6)(tree_batch.context, tree_batch.query)
        a0, f0 = bma_construction(kernel, 4, 8.0, max_H=6)(tree_batch.context, tree_batch.query)
    return float(max((a1.exp() - a0.exp()).abs().max(), (f1 - f0)[:, 1:].abs().max()))


def beta_figure(ctx: CheckContext, cases: list[dict], control_cases: list[dict]) -> str:
    """Error vs β per instance (dotted: the wrong T); returns the figure's file name."""
    fig, ax = new_figure(figsize=(6, 3.5))
    for c in cases:
        ax.semilogy(CONSTRUCTION_BETAS, np.maximum(c["posterior_error"], 1e-17), "o-",
                    label=f"k={c['k']}, d={c['d']}, H={c['H']}, L={c['L']}")
    for c in control_cases:
        ax.semilogy(CONSTRUCTION_BETAS, np.maximum(c["posterior_error"], 1e-17), "x:", color="0.5")
    ax.set_xlabel("copier scale β")
    ax.set_ylabel("max |A − set posterior|")
    ax.set_title("2-simplicial construction (dotted: wrong T, control)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    filename = "ext_dag_construction_beta.png"
    save_figure(fig, ctx.figure_path(filename))  # PNG at FIGURE_DPI and an SVG copy
    return filename


def _model_summary(final: float, rates: list, k1_difference: float, control_cases: list, control: Control) -> str:
    return (f"The tree copier followed by (k+1)-linear attention with T = log π_k (float64) reaches the exact set "
            f"posterior and BMA predictive: max error {final:.1e} at β = {CONSTRUCTION_BETAS[-1]:g}, decaying as "
            f"e^(−rβ) with r = {', '.join(f'{r:.2f}' for r in rates)} (k = 2, 3); k = 1 equals the tree "
            f"construction to {k1_difference:.1e}; with T's parents transposed the error stays "
            f"≥ {min(c['final_error'] for c in control_cases):.2f} (control, "
            f"{'rejected' if control.rejected else 'NOT rejected'}).")


def _model_table(cases: list[dict], control_cases: list[dict]) -> Table:
    rows = [[c["k"], c["d"], c["H"], c["L"], f"{c['final_error']:.1e}", f"{c['rate']:.3f}", c["verdict"],
             f"{w['final_error']:.3f}", w["verdict"]] for c, w in zip(cases, control_cases)]
    return Table("construction vs β", ["k", "d", "H", "L", f"error at β={CONSTRUCTION_BETAS[-1]:g}", "rate",
                                       "verdict", "wrong-T error (control)", "control verdict"], rows)


def ext_dag_construction_model(ctx: CheckContext) -> CheckOutcome:
    """The 2-simplicial construction (model.pair_attention, float64): tree copier + (k+1)-linear attention with
    T = log π_k. Its attention and prediction against the exact set posterior and BMA predictive as β grows, for
    k = 2 and 3 (and k = 1 against the tree construction); exponential decay fitted where the error is well above
    rounding.

    Control: the same model with a wrong T (π_k's first two parents transposed), judged by the same rule.
    """
    rng = ctx.rng("ext-dag-construction")
    cases, control_cases = construction_cases(rng)
    k1_difference = tree_difference(rng)
    verdict = combine_verdicts([c["verdict"] for c in cases] + ["pass" if k1_difference <= 1e-12 else "fail"])
    control_verdict = combine_verdicts(c["verdict"] for c in control_cases)
    control = Control("the construction with a wrong table T = log π_k with its first two parents transposed, "
                      "judged by the same rule", {"final_errors": [c["final_error"] for c in control_cases],
                                                  "rates": [c["rate"] for c in control_cases]},
                      rejected=control_verdict != "pass",
                      # one failing instance rejects: the final error furthest above CONSTRUCTION_ATOL
                      margin=ControlMargin("final_error", max(c["final_error"] for c in control_cases),
                                           CONSTRUCTION_ATOL))
    figure = beta_figure(ctx, cases, control_cases)
    final = max(c["final_error"] for c in cases)
    rates = [c["rate"] for c in cases]
    return CheckOutcome(
        verdict=verdict,
        measured={"final_error": final, "rates": rates, "k1_difference_to_tree": k1_difference,
                  "betas": list(CONSTRUCTION_BETAS)},
        threshold={"final_error": CONSTRUCTION_ATOL, "rate": f">= {MIN_RATE}", "k1_difference_to_tree": 1e-12},
        summary=_model_summary(final, rates, k1_difference, control_cases, control),
        tables=[_model_table(cases, control_cases)], figures=[figure], control=control,
        positive_control=exponential_ideal(cases),
        # float64 torch. final_error is rounding: abs 1e-11 (100x below CONSTRUCTION_ATOL). Rounding moves the
        # fitted rates (≈ 1.000, fitted on errors in FIT_RANGE) by ≤ 3e-6: rel 1e-4, far below the effect
        tolerances={"final_error": {"abs": 1e-11}, "rates": {"rel": 1e-4}, "k1_difference_to_tree": {"abs": 1e-13}})


def symbolic_run(ctx: CheckContext, table) -> tuple:
    """The derivation with ``table`` (None: T = log π_2), its residual status, the largest |derived − numerics|
    posterior over random kernels, and the verdict."""
    derivation = derive_dag_construction(table)
    expr = derivation.results["softmax_0"]
    symbols = sorted(expr.free_symbols, key=lambda s: s.name)
    fn = sp.lambdify(symbols, expr, "numpy")
    rng = ctx.rng("ext-dag-construction/symbolic")
    error = 0.0
    for _ in range(SIZES[ctx.tier]["symbolic_points"]):
        kernels = random_dag_kernels(2, 2, alpha=0.8, eps=0.02, rng=rng)
        values = {f"pi_{r}_0": kernels[1][r, 0] for r in range(4)}
        got = float(fn(*[values[s.name] for s in symbols]))
        ref = dag_parent_posterior(kernels, np.array(CONSTRUCTION_CONTEXT))[3, 0]
        error = max(error, abs(got - ref))
    status = derivation.status()
    verdict = "pass" if all(status.values()) and error <= IDENTITY_ATOL else "fail"
    return derivation, status, error, verdict


def ext_dag_construction_symbolic(ctx: CheckContext) -> CheckOutcome:
    """Theorem 1 for sets, symbolically (theory.dag_construction.derive_dag_construction): softmax over pairs of the
    2-simplicial score with T = log π_2 equals the set posterior from Bayes over every DAG (symbolic μ₀, π_1, π_2),
    and the score's first-order change under soft copies; the derived posterior evaluated at random kernels against
    ``numerics.dag_parent_posterior``.

    Control: T = log π_2 with its parents transposed, through the same residuals and numeric comparison.
    """
    derivation, status, error, verdict = symbolic_run(ctx, None)
    _, c_status, c_error, c_verdict = symbolic_run(ctx, transposed_log_table)
    # the control's path with the true table must pass, so the control is rejected for what was planted (not a
    # positive control: it is not independent of the derivation, and must never turn a failure into "not testable")
    _, p_status, p_error, p_verdict = symbolic_run(ctx, log_table)
    control = Control("T = log π_2 with its two parents transposed, through the same residuals and numeric "
                      "comparison (the same path with the true table must pass)",
                      {"identities_failed": [k for k, ok in c_status.items() if not ok], "max_abs_error": c_error,
                       "same_path_unplanted": {"identities_failed": [k for k, ok in p_status.items() if not ok],
                                               "max_abs_error": float(p_error), "passed": p_verdict == "pass"}},
                      rejected=c_verdict != "pass" and p_verdict == "pass")
    return CheckOutcome(
        verdict=verdict,
        measured={"identities": status, "max_abs_error": error},
        threshold={"residuals": "exactly 0", "max_abs_error": IDENTITY_ATOL},
        summary=f"With exact copies and T = log π_2, softmax over pairs of Σ_l T[x^l_a, x^l_b, x^l_h] equals the set "
                f"posterior from Bayes over every DAG with symbolic μ₀, π_1, π_2 (L = 2, H = 4; "
                f"{sum(status.values())}/{len(status)} identities hold, including the first-order change of the score "
                f"under soft copies, so the copier's O(e^(−β)) error passes to the attention); at "
                f"{SIZES[ctx.tier]['symbolic_points']} random kernels the derived posterior equals "
                f"numerics.dag_parent_posterior to {error:.1e}; with T's parents transposed "
                f"{len(control.measured['identities_failed'])} identities fail and the error is {c_error:.2f} "
                f"(control, {'rejected' if control.rejected else 'NOT rejected'}).",
        derivation=derivation.latex_steps(), control=control,
        # rounding of a lambdified ratio (≤ 1e-15): abs 1e-12
        tolerances={"max_abs_error": {"abs": 1e-12}})


CLAIM = Claim("ext-dag-construction",
      "Ours: a 2-simplicial (trilinear) attention layer after the tree model's copier implements k-parent BMA "
      "exactly.",
      "With T = log π_k, softmax over candidate sets of Σ_l T[x^l_S, x^l_h] (copies exact) is the set posterior; "
      "with the copier at scale β the attention error is O(e^{−β}); k = 1 is the tree construction.",
      (Check("symbolic", ext_dag_construction_symbolic,
             "Bayes over every DAG with symbolic μ₀, π_1, π_2 equals the pair softmax; first-order soft-copy error"),
       Check("model", ext_dag_construction_model,
             "model.pair_attention in float64: error vs β against the exact set posterior and BMA predictive "
             "(k = 2, 3), k = 1 vs bma_construction")), section="beyond")
