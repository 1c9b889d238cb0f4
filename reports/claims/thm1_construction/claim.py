"""Claim thm1-construction: the two-layer construction with W_KQ = log π implements BMA as β → ∞.

The paper states the limit β → ∞ (with "≈"); the exponential rate e^{−β} is our reading, so its check reads
"stronger". Checks: the copier softmax as a function of β, its one-hot limit and leading error (symbolic); the
construction's error falling to rounding as β grows and its prediction tending to π(·|x_pa) as L grows (exact, as
stated); the error's exponential rate in β (exact, stronger); the constructed weights in StructuredTransformer
against BMA (model). Negative controls: the normaliser without its query keys (symbolic), a row-shifted and a zero
W_KQ (exact), a copier with β halved (rate), a row-shifted W_KQ (model).

Measured values behind the tolerances: docs/notes/thm1-construction.md.
"""
import matplotlib.pyplot as plt
import numpy as np
import sympy as sp

from bma_verify import numerics
from bma_verify.model import analysis
from bma_verify.reports.checks.construction import (CONSTRUCTION_TOL, CONTEXTS, LARGE_BETA, construction_against_bma,
                                                    decide_construction, limit_control)
from bma_verify.reports.checks.symbolic import SymbolicCheck, run_symbolic, symbolic_outcome
from bma_verify.reports.checks.trained import draw_figure, seeded_kernel
from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.core import (CheckContext, CheckOutcome, Control, ControlMargin, PositiveControl, Table,
                                     save_figure)
from bma_verify.theory.construction import (derive_thm1_construction, dropped_query_keys, perturb_thm1_construction,
                                            verify_thm1_construction)

SYMBOLIC = SymbolicCheck(
    claim="thm1-construction",
    derive=derive_thm1_construction, perturb=perturb_thm1_construction, verify=verify_thm1_construction,
    perturbation=dropped_query_keys, control="the copier normaliser without the g visible query keys",
    sizes={"quick": {"n_points": 30}, "full": {"n_points": 200}},
    # The slack 4(L + H)² − e^β·|(1 − A)e^β − c| at β = 15 is an O(10) number carrying the rounding of
    # (1 − A)e^β times e^15 (~3e-8 at most); bit-identical across environments at one seed; abs 1e-6 (x30).
    tolerances={"min_slacks.leading_error_remainder": {"abs": 1e-6}},
)


def symbolic_check(ctx: CheckContext) -> CheckOutcome:
    """Copier weights vs β: the one-hot limit and the leading error (L + H − 2)e^{−β}."""
    run = run_symbolic(ctx, SYMBOLIC, [()])
    derivation = run.derivations[0]
    leading = derivation.results["leading_error_coefficient"]
    return symbolic_outcome(ctx, SYMBOLIC, run,
                            f"The constructed copier puts weight e^(2β)/Z on the copied token, Z derived for "
                            f"symbolic L, H, g; the weight → 1 as β → ∞ with 1 − A ~ ({leading})·e^(−β) "
                            f"(exponential in β); compared with a direct enumeration of all (L+1)·H logits.",
                            {"leading_error_coefficient": str(leading),
                             "weight_copied": sp.sstr(derivation.results["weight_copied"])})



#: Grid of the error-against-L curve and its contexts per L, per tier.
CURVE_SIZES = {"quick": {"L_grid": (1, 2, 4, 8, 16), "L_contexts": 200},
               "full": {"L_grid": (1, 2, 4, 8, 16, 32, 64), "L_contexts": 1000}}
#: β grid of the error-against-β curve.
BETAS = [1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0, 20.0, 24.0, 32.0, 40.0]
#: Our reading of Theorem 1's error rate in β (``rate_check``): the copied example's logit leads every other by β,
#: so the error falls as e^{−β}. The fit (errors between 1e-10 and 1e-2, β = 12..24) gives 0.99999 on the report's
#: seed; |rate − 1| above this fails (a copier with β halved in w_H reads 0.5, the rate check's control).
RATE_TOL = 0.05


def decide_curves(vs_beta: dict, fit: dict, vs_L: dict) -> dict:
    """The rule of ``exact_check`` (the limits as stated): the β half (the error falls and reaches the tolerance)
    and the L half (the last mean error is below the first by more than four combined standard errors, both
    rules). The fitted rate is ``rate_check``'s."""
    err = vs_beta["attention_error"]
    beta_ok = analysis.is_monotone(err, increasing=False, slack=1e-13) and err[-1] <= CONSTRUCTION_TOL
    L_ok = all(vs_L[r]["mean"][-1] + 2 * vs_L[r]["stderr"][-1] < vs_L[r]["mean"][0] - 2 * vs_L[r]["stderr"][0]
               for r in ("logit", "mixture"))
    return {"beta": bool(beta_ok), "L": bool(L_ok)}


def _curves(ctx: CheckContext, kernel, batch, selector, rng_name: str) -> tuple[dict, dict, dict]:
    """Error against β (with its exponential fit) and prediction error against L, for one W_KQ (None: log π)."""
    sizes = CURVE_SIZES[ctx.tier]
    vs_beta = analysis.construction_errors_vs_beta(kernel, batch.context, batch.query, BETAS, selector)
    fit = analysis.exponential_rate(BETAS, vs_beta["attention_error"])
    vs_L = analysis.construction_error_vs_L(kernel, sizes["L_grid"], 10, sizes["L_contexts"], rng=ctx.rng(rng_name),
                                            selector=selector)
    return vs_beta, fit, vs_L


def _curves_control(ctx: CheckContext, kernel, batch) -> tuple[Control, tuple, tuple]:
    """One control per half of the rule: a row-shifted W_KQ for the β half (the error must not vanish), and a zero
    W_KQ (a selector at initialisation, averaging the candidates) for the L half (the error must not fall)."""
    b = ctx.rng("thm1-curves:row-shift").normal(size=5)
    shifted = _curves(ctx, kernel, batch, analysis.row_shift(np.log(kernel), b), "thm1-curves:L-control")
    uniform = _curves(ctx, kernel, batch, np.zeros((5, 5)), "thm1-curves:L-control")
    control = Control(
        "β half: the construction with log π + b1ᵀ in W_KQ (row shift, b ~ N(0, 1)); L half: W_KQ = 0 (a selector "
        "at initialisation); each half's rule must reject its planted construction",
        {"row_shift_attention_error_at_largest_beta": shifted[0]["attention_error"][-1],
         "row_shift_fitted_rate": shifted[1]["rate"],
         "zero_selector_logit_error_vs_L": uniform[2]["logit"]["mean"]},
        not decide_curves(*shifted)["beta"] and not decide_curves(*uniform)["L"],
        # the β half's number against its tolerance; the L half compares two intervals of one curve (no fixed bar)
        margin=ControlMargin("row_shift_attention_error_at_largest_beta", shifted[0]["attention_error"][-1],
                             CONSTRUCTION_TOL))
    return control, shifted, uniform


def ideal_curves_control(ctx: CheckContext, vs_beta: dict) -> PositiveControl:
    """Each half of the rule on its ideal: for β, errors falling exactly as e^{−β} (the symbolic check's leading
    term) from the check's own error at the smallest β; for L, BMA itself (numerics.bma_predictive, no model) on
    fresh contexts in both rule slots. It fails if the β grid cannot reach CONSTRUCTION_TOL at that rate, or if
    the L grid and contexts cannot resolve BMA's own fall towards π(·|x_pa)."""
    err = vs_beta["attention_error"]
    leading = {"attention_error": list(err[0] * np.exp(BETAS[0] - np.asarray(BETAS)))}
    sizes = CURVE_SIZES[ctx.tier]
    kernel = seeded_kernel(ctx, "thm1-curves", 5)
    bma = analysis.construction_error_vs_L(kernel, sizes["L_grid"], 10, sizes["L_contexts"],
                                           rng=ctx.rng("thm1-curves:L-ideal"), reader="bma")
    decided = decide_curves(leading, None, bma)
    return PositiveControl("β half: errors falling exactly as e^{−β} from the check's own error at the smallest β; L "
                           "half: BMA itself (numerics.bma_predictive) on fresh contexts; each judged by its half "
                           "of the same rule", {"leading_error_at_largest_beta": leading["attention_error"][-1],
                                                "bma_error_vs_L": bma["mixture"]["mean"],
                                                "bma_stderr_vs_L": bma["mixture"]["stderr"], **decided},
                           decided["beta"] and decided["L"])


def _draw_curves(path, vs_beta: dict, fit: dict, vs_L: dict, Ls) -> None:
    """Left: error against β with its fit; right: prediction error against L, both output rules."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    axes[0].semilogy(BETAS, np.maximum(vs_beta["attention_error"], 1e-17), "o-", label="max ‖A − posterior‖₁")
    axes[0].semilogy(BETAS, np.exp(fit["log_C"] - fit["rate"] * np.asarray(BETAS)), "k--",
                     label=f"fit rate {fit['rate']:.3f}")
    axes[0].set_xlabel("copier inverse temperature β")
    axes[0].set_ylabel("max ‖A^(2) − posterior‖₁ (L = 6, H = 10)")
    axes[0].legend(fontsize=7)
    for rule in ("logit", "mixture"):
        axes[1].errorbar(Ls, vs_L[rule]["mean"], yerr=vs_L[rule]["stderr"], marker="o", label=rule)
    axes[1].set_xscale("log")
    axes[1].set_xlabel("context examples L")
    axes[1].set_ylabel("mean ‖f_h − π(·|x_pa)‖₁ (± 1 SE)")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)


def _curves_summary(vs_beta: dict, fit: dict, vs_L: dict, Ls, shifted: tuple, uniform: tuple) -> str:
    return (f"Attention error falls to {vs_beta['attention_error'][-1]:.1e} at β = {BETAS[-1]:g} (threshold "
            f"{CONSTRUCTION_TOL:g}; its rate, {fit['rate']:.3f}, is the rate check's); ‖f_h − π(·|x_pa)‖₁ falls from {vs_L['logit']['mean'][0]:.3f} to "
            f"{vs_L['logit']['mean'][-1]:.3f} (logit rule) as L goes {Ls[0]} → {Ls[-1]}. Controls: a row-shifted "
            f"W_KQ keeps an error of {shifted[0]['attention_error'][-1]:.2f} at β = {BETAS[-1]:g}; a zero W_KQ's "
            f"error stays at {uniform[2]['logit']['mean'][0]:.2f} → {uniform[2]['logit']['mean'][-1]:.2f}.")


def exact_check(ctx: CheckContext) -> CheckOutcome:
    """Error of the construction against β (exponential fit) and against L (prediction → π(·|x_pa)).

    Control: a row-shifted and a zero W_KQ. Positive control: the leading term e^{−β} and BMA itself
    (:func:`ideal_curves_control`).
    """
    kernel = seeded_kernel(ctx, "thm1-curves", 5)
    batch = numerics.sample_task(kernel, CONTEXTS[ctx.tier], 6, 10, rng=ctx.rng("thm1-curves:contexts"))
    Ls = CURVE_SIZES[ctx.tier]["L_grid"]
    vs_beta, fit, vs_L = _curves(ctx, kernel, batch, None, "thm1-curves:L")
    decided = decide_curves(vs_beta, fit, vs_L)
    ok = decided["beta"] and decided["L"]
    control, shifted, uniform = _curves_control(ctx, kernel, batch)
    rows = [[b_, e, p] for b_, e, p in zip(BETAS, vs_beta["attention_error"], vs_beta["predictive_error"])]
    L_rows = [[L, vs_L["logit"]["mean"][i], vs_L["logit"]["stderr"][i], vs_L["mixture"]["mean"][i],
               vs_L["mixture"]["stderr"][i]] for i, L in enumerate(Ls)]
    return CheckOutcome(
        verdict="pass" if ok else "fail",
        measured={"beta": BETAS, "attention_error": vs_beta["attention_error"],
                  "predictive_error": vs_beta["predictive_error"], "L": list(Ls),
                  "logit_error_vs_L": vs_L["logit"]["mean"],
                  "mixture_error_vs_L": vs_L["mixture"]["mean"]},
        threshold={"attention_error_at_largest_beta": CONSTRUCTION_TOL, "attention_error": "non-increasing in β",
                   "L": "last mean + 2 SE below first mean − 2 SE, both rules"},
        summary=_curves_summary(vs_beta, fit, vs_L, Ls, shifted, uniform),
        tables=[Table("error against β (L = 6, H = 10, d = 5)", ["β", "max ‖A − posterior‖₁", "max |f − P_BMA|"],
                      rows),
                Table("prediction against π(·|x_pa) (β = 50)", ["L", "logit mean", "logit SE", "mixture mean",
                                                                  "mixture SE"], L_rows)],
        figures=draw_figure(ctx, "thm1_construction_curves.png",
                            lambda path: _draw_curves(path, vs_beta, fit, vs_L, Ls)),
        instance=None if ok else {"kernel": kernel.tolist()},
        control=control, positive_control=ideal_curves_control(ctx, vs_beta),
        # errors: measured spread ≤ 1.1e-16 over OMP_NUM_THREADS=1|2 × ATEN_CPU_CAPABILITY=default|avx2 and
        # ≤ 2.2e-15 against the reference report (another build); 1e-12 is a ×400 margin.
        # History: docs/notes/thm1-construction.md.
        tolerances={"attention_error": {"abs": 1e-12}, "predictive_error": {"abs": 1e-12},
                    "logit_error_vs_L": {"abs": 1e-12},
                    "mixture_error_vs_L": {"abs": 1e-12}})


def _rate_ok(fit: dict) -> bool:
    """The rate check's rule: the fitted exponential rate is 1 ± RATE_TOL (NaN, too few points to fit, is not)."""
    return abs(fit["rate"] - 1.0) <= RATE_TOL


def rate_check(ctx: CheckContext) -> CheckOutcome:
    """Our reading of the β limit's speed: the attention error falls as e^{−β} (fitted rate 1 ± RATE_TOL).

    Control: a copier whose β is halved (its errors at β/2 fitted against β: rate 1/2), judged by the same rule.
    """
    kernel = seeded_kernel(ctx, "thm1-curves", 5)
    batch = numerics.sample_task(kernel, CONTEXTS[ctx.tier], 6, 10, rng=ctx.rng("thm1-curves:contexts"))
    errors = analysis.construction_errors_vs_beta(kernel, batch.context, batch.query, BETAS)["attention_error"]
    fit = analysis.exponential_rate(BETAS, errors)
    halved = analysis.exponential_rate(BETAS, analysis.construction_errors_vs_beta(
        kernel, batch.context, batch.query, [b / 2 for b in BETAS])["attention_error"])
    ok = _rate_ok(fit)
    control = Control("a copier with β halved in w_H (its errors at β/2, fitted against β)",
                      {"fitted_rate": halved["rate"]}, not _rate_ok(halved),
                      margin=ControlMargin("fitted_rate", halved["rate"], 1.0 - RATE_TOL, passes_below=False))
    # the ideal: the leading term's rate exactly (errors C e^{−β}), through the check's error at the smallest β
    ideal = analysis.exponential_rate(BETAS, errors[0] * np.exp(BETAS[0] - np.asarray(BETAS)))
    positive = PositiveControl("errors falling exactly as e^{−β} from the check's own error at the smallest β, fitted "
                               "and judged by the same rule", {"fitted_rate": ideal["rate"],
                                                               "fitted_beta": ideal["x_fitted"]}, _rate_ok(ideal))
    return CheckOutcome(
        verdict="pass" if ok else "fail",
        measured={"fitted_rate": fit["rate"], "fitted_beta": fit["x_fitted"]},
        threshold={"rate": f"1 ± {RATE_TOL}",
                   "rate_fitted_on": "errors in (1e-10, 1e-2]: above rounding, past the saturated start"},
        summary=f"Attention error decays like exp(−{fit['rate']:.3f}·β) (fit over β = "
                f"{', '.join(f'{x:g}' for x in fit['x_fitted'])}, errors in (1e-10, 1e-2]; theory rate 1: the "
                f"copied example's logit leads by β); a copier with β halved reads {halved['rate']:.3f} (control, "
                f"{'rejected' if control.rejected else 'NOT rejected'}).",
        instance=None if ok else {"kernel": kernel.tolist()}, control=control, positive_control=positive,
        # the rate, fitted above 1e-10 only: spread 0 over OMP_NUM_THREADS=1|2 × ATEN_CPU_CAPABILITY=default|avx2;
        # an error of 1e-13 on the smallest fitted point (1.8e-9) would move it by ~5e-6, so 1e-4 (a five-hundredth
        # of RATE_TOL). History: docs/notes/thm1-construction.md.
        tolerances={"fitted_rate": {"abs": 1e-4}})


def model_check(ctx: CheckContext) -> CheckOutcome:
    """Constructed weights in the real class: attention and prediction (mixture rule) equal BMA to 1e-6."""
    errors, kernel, batch = construction_against_bma(ctx, "thm1-construction")
    att, pred = errors["attention_error"][0], errors["predictive_error"][0]
    verdict = decide_construction({"attention": att, "predictive": pred})
    # control: W + b1ᵀ, a row shift, which Prop. 1 says changes A^(2) (a column shift would not)
    b = ctx.rng("thm1-construction:row-shift").normal(size=5)
    wrong, _, _ = construction_against_bma(ctx, "thm1-construction", lambda k: analysis.row_shift(np.log(k), b))
    w_att, w_pred = wrong["attention_error"][0], wrong["predictive_error"][0]
    control = Control("the construction with log π + b1ᵀ in W_KQ (a row shift, b ~ N(0, 1); Prop. 1: changes A^(2))",
                      {"max_attention_l1_error": w_att, "max_predictive_error": w_pred},
                      decide_construction({"attention": w_att, "predictive": w_pred}) == "fail",
                      margin=ControlMargin("max_attention_l1_error", w_att, CONSTRUCTION_TOL))
    return CheckOutcome(
        verdict=verdict,
        measured={"max_attention_l1_error": att, "max_predictive_error": pred, "beta": LARGE_BETA},
        threshold={"max_attention_l1_error": CONSTRUCTION_TOL, "max_predictive_error": CONSTRUCTION_TOL},
        summary=f"bma_construction(π, L=6, β={LARGE_BETA:g}, 'mixture'): attention error {att:.2e}, predictive "
                f"error {pred:.2e} against numerics.bma_predictive; a row-shifted W_KQ reads {w_att:.2f} and "
                f"{w_pred:.2f} (control).",
        instance=None if verdict == "pass" else {"kernel": kernel.tolist(), "context": batch.context[0].tolist(),
                                                 "query": batch.query[0].tolist()},
        control=control, positive_control=limit_control(kernel, batch, ("attention", "predictive")),
        # measured spread ≤ 6e-17 over OMP_NUM_THREADS=1|2 × ATEN_CPU_CAPABILITY=default|avx2 and against the
        # reference report; 1e-12 leaves a ×10^4 margin and is a millionth of the threshold
        tolerances={"max_attention_l1_error": {"abs": 1e-12}, "max_predictive_error": {"abs": 1e-12}})


CLAIM = Claim(
    "thm1-construction",
    "Theorem 1: a two-layer transformer with K = L copier heads and W_KQ = log π implements BMA as β → ∞, "
    "and its prediction tends to π(· | x_pa(h)) as L → ∞.",
    "As stated: with the construction, max_h ‖A^(2)_h − posterior_h‖₁ → 0 as β → ∞, and the prediction "
    "→ π(· | x_pa(h)) as L → ∞. Stronger (ours): the error falls as e^{−β} (rate 1 in β).",
    (
        Check("symbolic", symbolic_check,
              "copier softmax as a function of β: one-hot limit and leading exponential error term"),
        Check("exact", exact_check, "error against β (falls to rounding) and against L, float64"),
        Check("exact", rate_check, "the error's exponential rate in β (our reading of the limit's speed)",
              reading="stronger"),
        Check("model", model_check,
              "the constructed weights loaded into StructuredTransformer reproduce BMA"),
    ),
)
