"""Model checks: the Theorem 1 construction loaded into the real model class, the Theorem 3 gradient by autograd,
and the paper's experiments trained with :mod:`model.presets` (SPEC.md §4, kind ``model``; one ``exact``).

Every check applies its decision rule twice in the same call: to the real input and to a negative control known
to be false (SPEC §4.1): a construction with a planted wrong selector, the Theorem 3 gradient in a form it does
not have, BMA reading only the last ceil(L/2) examples, the model at its initialisation, a row-shifted W_tf, the
grid of an ideal reader of min(L, L') examples. The rule is one ``_decide_*`` function per check, called on both.

Trained runs are shared through ``ctx.cache`` (fig2's run serves exp-fig2, exp-fig3 and thm2; fig6's serves
exp-fig6, which prop1-invariance cites). A trained value is judged against its threshold with a noise band
(``NOISE_BAND``, measured): a value within the band of its threshold reads "within run-to-run noise of the
threshold", and a run whose L_pa is not within ``converged_parent_gap`` of BMA's is not converged
(``converged=False``), so it never reads pass.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import torch

from bma_verify import numerics
from bma_verify.model import analysis, figures
from bma_verify.model.presets import FIG5_R2_PREFIX, fig5_readings, train_preset_runs
from bma_verify.model.training import build_model, eval_batch
from bma_verify.reports.core import CheckContext, CheckOutcome, Control, Table, save_figure

#: Thresholds of the trained checks, each with the control it separates (quick tier, seed 0: fig2's held-out
#: contexts; robustness's in brackets).
THRESHOLDS = {
    "quick": {
        # L_pa − BMA's L_pa (nats) at the run's own L below which a run counts as converged (``converged``): BMA
        # reading the last 5 of 10 examples is +0.331 [+0.378], reading 9 of 10 +0.049 [+0.056]. No band: the flag
        # itself can flip between CPU settings (fig2 at 1500 steps, seed 0: 0.034 default vs 0.066 avx2; fig5's
        # L = 5 run: 0.039 vs 0.188), and a run it withholds reads "not converged", never pass or fail
        "converged_parent_gap": 0.05,
        # query-loss gap to BMA (nats/token): BMA reading the last 5 of 10 examples is +0.033 [+0.047], 7 of 10
        # +0.018 [+0.027]; the old 0.05 let BMA reading 4 of 10 (+0.043) through. Converged runs: 0.002-0.005
        "gap": 0.015,
        # BMA's parent accuracy minus the run's: BMA reading 5 of 10 falls short by 0.133 [0.159]; at L' = 2 and 5
        # BMA reading 1 of 2 and 3 of 5 falls short by 0.086 and 0.097 (thm2). Converged runs: 0.003-0.016
        "accuracy_shortfall": 0.05,
        # (1/d)‖σ(W_OV) − π‖₁: the model at its initialisation (W_OV = 0, σ uniform) reads 0.63 on fig2's π.
        # Converged runs: 0.017-0.028
        "w_ov_error": 0.25,
        # off-block energy of W_KQ among the copying heads: the model at its initialisation has no copying head
        # (nothing to measure: rejected). Converged runs: 0.03-0.14
        "off_block": 0.25,
        # fig6 (paper: 0.0278): the trained W_tf row-shifted (+ b1ᵀ, b ~ N(0, 1); Prop. 1) reads 0.69; the trained
        # W_tf itself 0.039-0.045 (within the band: inconclusive on this host, pass on the reference's)
        "column_error": 0.05,
        # fig5: L_pa^{L'} within this of BMA's counts as "near BMA"; BMA reading only min(L, L') of the L'
        # examples (the control) is 0.22-1.5 nats above BMA at every L' > L on fig5's contexts
        "near_bma": 0.10,
    },
    # the paper's sizes: tighter where a converged run has room below the threshold plus its band
    "full": {"converged_parent_gap": 0.05, "gap": 0.008, "accuracy_shortfall": 0.02, "w_ov_error": 0.10,
             "off_block": 0.15, "column_error": 0.05, "near_bma": 0.10},
}
#: Run-to-run noise of each decided value: a value within this of its threshold reads "within run-to-run noise of
#: the threshold" (inconclusive). Measured as the range (max − min) of the value over ATEN_CPU_CAPABILITY=
#: default|avx2 (× OMP_NUM_THREADS=1|2 for the 400-step fig2 runs), seed fixed, quick tier: the same run on the
#: same data moves this much with the CPU kernels alone. Every pass or fail of a trained check needs a converged
#: run, so the bands come from converged runs (fig2 at 1500 steps, seed 0; fig6 seed 0; fig5 seeds 0-1), rounded
#: up; the 400-step fig2 runs (not converged, seeds 0 / 1 / 2) are given for comparison.
#: The 1000-step fig2 run of today's preset (converged) moves less than every band over OMP_NUM_THREADS=1|2 ×
#: ATEN_CPU_CAPABILITY=default|avx2|auto: gap 0.0008, accuracy 0.0041 (thm2, L' = 1), off-block 0.0028, W_OV 0.0006.
NOISE_BAND = {
    # converged: 0.0012 (fig2 1500 steps), 0.0009 (fig6), 0.0013 (fig5 L = 5); 400-step fig2: 0.0002 / 0.0033 / 0.0125
    "gap_to_bma": 0.003,
    # parent accuracy, also per L' (thm2) and against a control: converged ≤ 0.0055 (fig2 1500 steps, per L'),
    # 0.0003 (fig5, fig6); 400-step fig2: 0.0016 / 0.0067 / 0.030 (up to 0.023 at L' = 5)
    "accuracy": 0.01,
    # converged: 0.050 (fig2 1500 steps), 0.065 (fig6), 0.044 (fig5 L = 5); 400-step fig2: 0.048 / 0.071 / 0.043,
    # and another host read 0.277 where the reference reads 0.238 (issue 12)
    "off_block": 0.075,
    # converged: 0.011 (fig2 1500 steps), 0.005 (fig6), 0.002 (fig5); 400-step fig2: 0.016 / 0.002 / 0.021
    "w_ov_error": 0.025,
    # fig6 seed 0: 0.0411 default vs 0.0453 avx2, 0.0392 in the reference report (range 0.0061)
    "column_error": 0.007,
    # one entry of fig5's L_pa^{L'} grid: ≤ 0.036 (seed 1, L = 5 at L' = 1); seed 0's L = 5 run converged under
    # default and stalled under avx2 (own-L gap 0.039 vs 0.188), moving its row by up to 0.33
    "fig5_gap": 0.04,
    # mean over L' of a row: ≤ 0.0098 (seed 1, L = 5), 0.0034 even for seed 0's stalled L = 5 run
    "fig5_mean_gap": 0.015,
}
#: Regression tolerances of trained values (the reference report: quick tier, seed 0). fig2's run (1000 steps,
#: converged) was measured over OMP_NUM_THREADS=1|2 × ATEN_CPU_CAPABILITY=default|avx2|auto (AVX-512 here); the
#: range is in the comment, and the tolerance leaves about three times that for other CPUs.
TRAINED_TOL = {
    "gap_to_bma": {"abs": 0.003},  # query loss and its gap: 0.00076 (0.00051-0.00127)
    "parent_loss_gap": {"abs": 0.01},  # L_pa and its gap: 0.0007 (0.0111-0.0118)
    "parent_accuracy": {"abs": 0.01},  # 0.0023 (0.7951-0.7974)
    "accuracy_by_L": {"abs": 0.015},  # thm2, per L': 0.0041 at L' = 1
    "off_block": {"abs": 0.015},  # 0.0028 (0.0272-0.0300)
    "w_ov_error": {"abs": 0.005},  # 0.0006 (0.0063-0.0069)
    "column_error": {"abs": 0.01},  # fig6: 0.0061
    "row_error": {"abs": 0.005},  # fig6: 0.0029
    "fig6_parent_loss_gap": {"abs": 0.02},  # fig6: 0.014 (0.020-0.034)
    "fig5_mean_gap": {"abs": 0.01},  # 0.0089 (L = 5 row)
    "fig5_gap": {"abs": 0.35},  # 0.34: the L = 5 run stalls under avx2 (see NOISE_BAND)
    "fig5_own_gap": {"abs": 0.16},  # 0.152 (the same run)
}
SIZES = {"quick": {"contexts": 64, "thm3_samples": 20_000, "L_grid": (1, 2, 4, 8, 16), "L_contexts": 200},
         "full": {"contexts": 512, "thm3_samples": 200_000, "L_grid": (1, 2, 4, 8, 16, 32, 64), "L_contexts": 1000}}
#: β of the construction checks: the copies are exact to float64 (error ~ (L + H) e^{−β}).
LARGE_BETA = 40.0
#: Largest error of the construction against BMA that reads as "equal" (float64 copies at β = 40 give 1e-15).
CONSTRUCTION_TOL = 1e-6
#: Theorem 1's error rate in β: the copied example's logit leads every other by β, so the error falls as e^{−β}.
#: The fit (errors between 1e-10 and 1e-2, β = 12..24) gives 0.99999 on the report's seed; |rate − 1| above this
#: fails (a copier with β halved in w_H would read 0.5).
RATE_TOL = 0.05
def _runs(ctx: CheckContext, name: str, output: str = "mixture", replicate: int = 0) -> dict:
    """The preset's trained runs for this report (trained once, then taken from ``ctx.cache``, on ``ctx.device``);
    ``replicate`` r > 0 trains the same runs on a further seed derived from the report seed."""
    name = "fig2" if name == "fig3" else name  # fig3 reads the parameters of fig2's run
    key = (f"model.presets:{name}:{output}:{ctx.tier}:{ctx.seed}:{ctx.device}"
           + (f":replicate{replicate}" if replicate else ""))
    if key not in ctx.cache:
        seed = ctx.seed_for(f"model:{name}" + (f":replicate{replicate}" if replicate else ""))
        ctx.cache[key] = train_preset_runs(name, tier=ctx.tier, seed=seed, device=ctx.device, quiet=ctx.quiet,
                                           output=output)
    return ctx.cache[key]


def _figure(ctx: CheckContext, filename: str, draw) -> list[str]:
    if ctx.figures_dir is None:
        return []
    draw(ctx.figure_path(filename))
    return [filename]


def _kernel(ctx: CheckContext, name: str, d: int) -> np.ndarray:
    return numerics.random_kernel(d, alpha=1.0, eps=0.01, rng=ctx.rng(name))


# ---------------------------------------------------------------------------------------------------------------
# How a trained value is judged: against its threshold, with its noise band.

def _side(value: float, threshold: float, band: float, *, upper: bool = True) -> str:
    """'pass' when ``value`` is on the claimed side of ``threshold`` by more than ``band``, 'fail' when it is on
    the other side by more than ``band``, 'noise' in between. A NaN (nothing to measure) fails."""
    if value is None or not math.isfinite(value):
        return "fail"
    margin = (threshold - value) if upper else (value - threshold)
    return "pass" if margin > band else ("fail" if margin < -band else "noise")


def _combine(sides: dict) -> str:
    """One 'fail' fails the rule, else one 'noise' leaves it undecided, else it passes."""
    values = list(sides.values())
    return "fail" if "fail" in values else ("noise" if "noise" in values else "pass")


def _rule_text(sides: dict) -> str:
    """'rule: gap_to_bma pass, accuracy_shortfall fail' (what each decided quantity read)."""
    return "rule: " + ", ".join(f"{k} {v}" for k, v in sides.items())


def _noise_reason(sides: dict) -> str:
    return "within run-to-run noise of the threshold: " + ", ".join(k for k, v in sides.items() if v == "noise")


def _converged(ctx: CheckContext, metrics: dict) -> bool:
    """A run is converged when its L_pa is within ``converged_parent_gap`` nats of BMA's at its own L."""
    return bool(metrics["parent_loss_gap"] <= THRESHOLDS[ctx.tier]["converged_parent_gap"])


def _not_converged_reason(ctx: CheckContext, metrics: dict) -> str:
    return (f"not converged: L_pa {metrics['parent_loss_gap']:+.3f} nats from BMA's at the run's own L "
            f"(converged ≤ {THRESHOLDS[ctx.tier]['converged_parent_gap']})")


def _verdict(ctx: CheckContext, status: str, converged: bool, metrics: dict, sides: dict) -> tuple[str, str]:
    """(verdict, reason) of a trained check from its rule's status: a rule that fails on a run that has not
    converged is inconclusive (an optimisation shortfall of ours is not evidence against the paper)."""
    if status == "pass":
        return "pass", ""
    if status == "fail" and converged:
        return "fail", ""
    return "inconclusive", (_not_converged_reason(ctx, metrics) if not converged else _noise_reason(sides))


def _half(L: int) -> int:
    return math.ceil(L / 2)


def _run_assumptions(ctx: CheckContext, run) -> list[str]:
    """The choices of a structured run that the paper leaves open (a reproduction names them)."""
    c = run.config
    return [f"structured transformer (RPE copier, bilinear selector) with K = {c.K} copier heads for L = {c.L} "
            f"examples and the {c.output} output rule",
            f"{c.steps} steps at batch {c.batch_size}, π with Dirichlet({c.alpha:g}) rows ({ctx.tier} tier; "
            "thresholds and noise bands stated for this size)",
            f"converged = L_pa within {THRESHOLDS[ctx.tier]['converged_parent_gap']} nats of BMA's at the run's L"]


# ---------------------------------------------------------------------------------------------------------------
# Constructions (as-stated, exact-ish): the same error rule on the construction and on a planted wrong one.

def _decide_construction(errors: dict) -> str:
    """pass when every listed error is at most ``CONSTRUCTION_TOL``."""
    return "pass" if all(e <= CONSTRUCTION_TOL for e in errors.values()) else "fail"


def _construction_against_bma(ctx: CheckContext, name: str,
                              selector=None) -> tuple[dict, np.ndarray, numerics.TaskBatch]:
    kernel = _kernel(ctx, name, 5)
    batch = numerics.sample_task(kernel, SIZES[ctx.tier]["contexts"], 6, 10, rng=ctx.rng(name + ":contexts"))
    planted = None if selector is None else selector(kernel)
    errors = analysis.construction_errors_vs_beta(kernel, batch.context, batch.query, [LARGE_BETA], planted)
    return errors, kernel, batch


def bma_score_identity(ctx: CheckContext) -> CheckOutcome:
    """The constructed StructuredTransformer's A^(2) equals ``numerics.parent_posterior`` (β = 40, float64)."""
    errors, kernel, batch = _construction_against_bma(ctx, "bma-score-identity")
    err = errors["attention_error"][0]
    verdict = _decide_construction({"attention": err})
    # control: W_KQ blocks (log π)ᵀ, the likelihood read child → parent: Σ_l log π(x^l_h' | x^l_h)
    wrong, _, _ = _construction_against_bma(ctx, "bma-score-identity", lambda k: np.log(k).T)
    wrong_err = wrong["attention_error"][0]
    control = Control("the construction with (log π)ᵀ in W_KQ (Σ_l log π(x^l_h' | x^l_h), child → parent)",
                      {"max_attention_l1_error": wrong_err}, _decide_construction({"attention": wrong_err}) == "fail")
    return CheckOutcome(
        verdict=verdict,
        measured={"max_attention_l1_error": err, "beta": LARGE_BETA, "contexts": len(batch.query), "d": 5, "L": 6,
                  "H": 10},
        threshold={"max_attention_l1_error": CONSTRUCTION_TOL},
        summary=f"Theorem 1 weights in StructuredTransformer: max_h ‖A^(2)_h − posterior_h‖₁ = {err:.2e} over "
                f"{len(batch.query)} contexts at β = {LARGE_BETA:g}; with (log π)ᵀ in W_KQ the same rule reads "
                f"{wrong_err:.2f} (control).",
        instance=None if verdict == "pass" else {"kernel": kernel.tolist(), "context": batch.context[0].tolist()},
        control=control,
        # measured spread 6e-17 over OMP_NUM_THREADS=1|2 × ATEN_CPU_CAPABILITY=default|avx2, 0 against the reference
        # report; 1e-12 leaves a ×10^4 margin and is a millionth of the threshold
        tolerances={"max_attention_l1_error": {"abs": 1e-12}})


def thm1_construction(ctx: CheckContext) -> CheckOutcome:
    """Constructed weights in the real class: attention and prediction (mixture rule) equal BMA to 1e-6."""
    errors, kernel, batch = _construction_against_bma(ctx, "thm1-construction")
    att, pred = errors["attention_error"][0], errors["predictive_error"][0]
    verdict = _decide_construction({"attention": att, "predictive": pred})
    # control: W + b1ᵀ, a row shift, which Prop. 1 says changes A^(2) (a column shift would not)
    b = ctx.rng("thm1-construction:row-shift").normal(size=5)
    wrong, _, _ = _construction_against_bma(ctx, "thm1-construction", lambda k: analysis.row_shift(np.log(k), b))
    w_att, w_pred = wrong["attention_error"][0], wrong["predictive_error"][0]
    control = Control("the construction with log π + b1ᵀ in W_KQ (a row shift, b ~ N(0, 1); Prop. 1: changes A^(2))",
                      {"max_attention_l1_error": w_att, "max_predictive_error": w_pred},
                      _decide_construction({"attention": w_att, "predictive": w_pred}) == "fail")
    return CheckOutcome(
        verdict=verdict,
        measured={"max_attention_l1_error": att, "max_predictive_error": pred, "beta": LARGE_BETA},
        threshold={"max_attention_l1_error": CONSTRUCTION_TOL, "max_predictive_error": CONSTRUCTION_TOL},
        summary=f"bma_construction(π, L=6, β={LARGE_BETA:g}, 'mixture'): attention error {att:.2e}, predictive "
                f"error {pred:.2e} against numerics.bma_predictive; a row-shifted W_KQ reads {w_att:.2f} and "
                f"{w_pred:.2f} (control).",
        instance=None if verdict == "pass" else {"kernel": kernel.tolist(), "context": batch.context[0].tolist(),
                                                 "query": batch.query[0].tolist()},
        control=control,
        # measured spread ≤ 6e-17 over OMP_NUM_THREADS=1|2 × ATEN_CPU_CAPABILITY=default|avx2 and against the
        # reference report; 1e-12 leaves a ×10^4 margin and is a millionth of the threshold
        tolerances={"max_attention_l1_error": {"abs": 1e-12}, "max_predictive_error": {"abs": 1e-12}})


def _decide_curves(vs_beta: dict, fit: dict, vs_L: dict) -> dict:
    """The rule of ``thm1_construction_curves``: the β half (error falls, reaches the tolerance, at rate 1) and
    the L half (the last mean error is below the first by more than four combined standard errors, both rules)."""
    err = vs_beta["attention_error"]
    beta_ok = (analysis.is_monotone(err, increasing=False, slack=1e-13) and err[-1] <= CONSTRUCTION_TOL
               and abs(fit["rate"] - 1.0) <= RATE_TOL)
    L_ok = all(vs_L[r]["mean"][-1] + 2 * vs_L[r]["stderr"][-1] < vs_L[r]["mean"][0] - 2 * vs_L[r]["stderr"][0]
               for r in ("logit", "mixture"))
    return {"beta": bool(beta_ok), "L": bool(L_ok)}


def thm1_construction_curves(ctx: CheckContext) -> CheckOutcome:
    """Error of the construction against β (exponential fit) and against L (prediction → π(·|x_pa))."""
    kernel = _kernel(ctx, "thm1-curves", 5)
    batch = numerics.sample_task(kernel, SIZES[ctx.tier]["contexts"], 6, 10, rng=ctx.rng("thm1-curves:contexts"))
    betas = [1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0, 20.0, 24.0, 32.0, 40.0]
    Ls = SIZES[ctx.tier]["L_grid"]

    def curves(selector, rng_name):
        vs_beta = analysis.construction_errors_vs_beta(kernel, batch.context, batch.query, betas, selector)
        fit = analysis.exponential_rate(betas, vs_beta["attention_error"])
        vs_L = analysis.construction_error_vs_L(kernel, Ls, 10, SIZES[ctx.tier]["L_contexts"], rng=ctx.rng(rng_name),
                                                selector=selector)
        return vs_beta, fit, vs_L

    vs_beta, fit, vs_L = curves(None, "thm1-curves:L")
    decided = _decide_curves(vs_beta, fit, vs_L)
    ok = decided["beta"] and decided["L"]
    # controls, one per half of the rule: a row-shifted W_KQ for the β half (the error must not vanish), and a zero
    # W_KQ (a selector at initialisation, averaging the candidates) for the L half (the error must not fall)
    b = ctx.rng("thm1-curves:row-shift").normal(size=5)
    shifted = curves(analysis.row_shift(np.log(kernel), b), "thm1-curves:L-control")
    uniform = curves(np.zeros((5, 5)), "thm1-curves:L-control")
    control = Control(
        "β half: the construction with log π + b1ᵀ in W_KQ (row shift, b ~ N(0, 1)); L half: W_KQ = 0 (a selector "
        "at initialisation); each half's rule must reject its planted construction",
        {"row_shift_attention_error_at_largest_beta": shifted[0]["attention_error"][-1],
         "row_shift_fitted_rate": shifted[1]["rate"],
         "zero_selector_logit_error_vs_L": uniform[2]["logit"]["mean"]},
        not _decide_curves(*shifted)["beta"] and not _decide_curves(*uniform)["L"])
    rows = [[b_, e, p] for b_, e, p in zip(betas, vs_beta["attention_error"], vs_beta["predictive_error"])]
    L_rows = [[L, vs_L["logit"]["mean"][i], vs_L["logit"]["stderr"][i], vs_L["mixture"]["mean"][i],
               vs_L["mixture"]["stderr"][i]] for i, L in enumerate(Ls)]

    def draw(path):
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
        axes[0].semilogy(betas, np.maximum(vs_beta["attention_error"], 1e-17), "o-", label="max ‖A − posterior‖₁")
        axes[0].semilogy(betas, np.exp(fit["log_C"] - fit["rate"] * np.asarray(betas)), "k--",
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

    return CheckOutcome(
        verdict="pass" if ok else "fail",
        measured={"beta": betas, "attention_error": vs_beta["attention_error"],
                  "predictive_error": vs_beta["predictive_error"], "fitted_rate": fit["rate"],
                  "fitted_beta": fit["x_fitted"], "L": list(Ls), "logit_error_vs_L": vs_L["logit"]["mean"],
                  "mixture_error_vs_L": vs_L["mixture"]["mean"]},
        threshold={"attention_error_at_largest_beta": CONSTRUCTION_TOL, "rate": f"1 ± {RATE_TOL}",
                   "rate_fitted_on": "errors in (1e-10, 1e-2]: above rounding, past the saturated start",
                   "L": "last mean + 2 SE below first mean − 2 SE, both rules"},
        summary=f"Attention error decays like exp(−{fit['rate']:.3f}·β) (fit over β = "
                f"{', '.join(f'{x:g}' for x in fit['x_fitted'])}, errors in (1e-10, 1e-2]; theory rate 1: the copied "
                f"example's logit leads by β); ‖f_h − π(·|x_pa)‖₁ falls from {vs_L['logit']['mean'][0]:.3f} to "
                f"{vs_L['logit']['mean'][-1]:.3f} (logit rule) as L goes {Ls[0]} → {Ls[-1]}. Controls: a row-shifted "
                f"W_KQ keeps an error of {shifted[0]['attention_error'][-1]:.2f} at β = {betas[-1]:g}; a zero W_KQ's "
                f"error stays at {uniform[2]['logit']['mean'][0]:.2f} → {uniform[2]['logit']['mean'][-1]:.2f}.",
        tables=[Table("error against β (L = 6, H = 10, d = 5)", ["β", "max ‖A − posterior‖₁", "max |f − P_BMA|"],
                      rows),
                Table("prediction against π(·|x_pa) (β = 50)", ["L", "logit mean", "logit SE", "mixture mean",
                                                                  "mixture SE"], L_rows)],
        figures=_figure(ctx, "thm1_construction_curves.png", draw),
        instance=None if ok else {"kernel": kernel.tolist()},
        control=control,
        # errors: measured spread ≤ 1.1e-16 over OMP_NUM_THREADS=1|2 × ATEN_CPU_CAPABILITY=default|avx2 and
        # ≤ 2.2e-15 against the reference report (another build); 1e-12 is a ×400 margin. The rate, fitted above
        # 1e-10 only: spread 0 over those settings; an error of 1e-13 on the smallest fitted point (1.8e-9) would
        # move it by ~5e-6, so 1e-4 (a five-hundredth of RATE_TOL). The old fit, which reached 3e-15, moved 4.5e-5.
        tolerances={"attention_error": {"abs": 1e-12}, "predictive_error": {"abs": 1e-12},
                    "fitted_rate": {"abs": 1e-4}, "logit_error_vs_L": {"abs": 1e-12},
                    "mixture_error_vs_L": {"abs": 1e-12}})


# ---------------------------------------------------------------------------------------------------------------
# Theorem 3 at initialisation (as-stated, the model's autograd gradient).

def _decide_gradient(result: dict) -> str:
    """fail when the per-chain closed form is off by > 1e-10 or the mean is > 6 standard errors from its exact
    expectation; pass when within 4; inconclusive in between."""
    if result["closed_form_max_error"] > 1e-10 or result["max_z"] > 6:
        return "fail"
    return "pass" if result["max_z"] <= 4 else "inconclusive"


def thm3_init_gradient(ctx: CheckContext) -> CheckOutcome:
    """Autograd gradient of StructuredTransformer at p̂ = 0 vs the closed form, and its mean vs init_gradient."""
    d, H = 3, 6
    kernel = _kernel(ctx, "thm3-model", d)
    parents = numerics.random_parents(H, rng=ctx.rng("thm3-model:tree"))
    inits = {"stationary": None, "non-stationary": ctx.rng("thm3-model:init").dirichlet(np.ones(d))}
    n = SIZES[ctx.tier]["thm3_samples"]

    def compare(form: str) -> dict:
        # the same chains (same generator seed) for both forms: only the closed form differs
        results = {label: analysis.init_gradient_comparison(kernel, parents, init, n, form=form,
                                                            rng=ctx.rng(f"thm3-model:{label}"))
                   for label, init in inits.items()}
        finite = [z for r in results.values() for row in r["rows"] for z in row["z"] if math.isfinite(z)]
        return {"results": results,
                "closed_form_max_error": max(r["closed_form_max_error"] for r in results.values()),
                "max_z": max(r["max_z"] for r in results.values()), "max_finite_z": max(finite, default=0.0)}

    real, wrong = compare("pibar"), compare("marginal")
    verdict = _decide_gradient(real)
    control = Control("the paper's approximate form as if it were exact: π̄ replaced by the marginal P(x_h), "
                      "expectation (1/h) J(h')",
                      {"closed_form_max_error": wrong["closed_form_max_error"], "max_z": wrong["max_z"],
                       # h = 1 has one candidate: the gradient is exactly 0 there (z infinite against J ≠ 0)
                       "max_z_where_the_stderr_is_positive": wrong["max_finite_z"]},
                      _decide_gradient(wrong) == "fail")
    results = real["results"]
    closed, z = real["closed_form_max_error"], real["max_z"]
    parent_top = all(row["argmax_is_parent"] for r in results.values() for row in r["rows"])
    rows = [[label, row["h"], row["parent"], np.round(row["autograd_mean"], 5).tolist(),
             np.round(row["stderr"], 5).tolist(), np.round(row["exact"], 5).tolist()]
            for label, r in results.items() for row in r["rows"]]
    return CheckOutcome(
        verdict=verdict,
        measured={"closed_form_max_error": closed, "max_z": z, "n": n, "true_parent_has_largest_exact_gradient":
                  parent_top, "parents": parents.tolist()},
        threshold={"closed_form_max_error": 1e-10, "max_z_pass": 4, "max_z_fail": 6},
        summary=f"Per context, autograd −∂ℓ/∂p̂ through the real model equals (1/h)(π(x_h|x_h')/π̄ − 1) to "
                f"{closed:.1e}; its mean over {n} chains matches numerics.init_gradient (exact) with largest "
                f"|z| = {z:.2f} over all h, h' and both μ₀. Control: with the marginal P(x_h) in place of π̄ the same "
                f"rule reads error {wrong['closed_form_max_error']:.2f}, |z| = {wrong['max_finite_z']:.3g} (h ≥ 2; "
                f"infinite at h = 1).",
        tables=[Table("mean autograd gradient vs exact expectation", ["μ₀", "h", "pa(h)", "autograd mean", "SE",
                                                                       "exact"], rows)],
        instance=None if verdict != "fail" else {"kernel": kernel.tolist(), "parents": parents.tolist()},
        control=control,
        # closed form: 3.3e-16 everywhere, spread 0 over OMP_NUM_THREADS=1|2 × ATEN_CPU_CAPABILITY=default|avx2
        # and against the reference; 1e-12 is a hundredth of its threshold. max_z is a statistic of seeded chains
        # that only rounding moves: spread 0 over those settings, 1.9e-14 against the reference; 1e-9
        tolerances={"closed_form_max_error": {"abs": 1e-12}, "max_z": {"abs": 1e-9}})


# ---------------------------------------------------------------------------------------------------------------
# fig2 (and the same rule for robustness's runs).

def _fig2_sides(ctx: CheckContext, metrics: dict) -> dict:
    """Each quantity fig2 decides, against its threshold with its noise band (see THRESHOLDS, NOISE_BAND). L_pa
    near BMA's is the run's ``converged`` flag: a run without it cannot pass whatever these read."""
    t = THRESHOLDS[ctx.tier]
    return {"gap_to_bma": _side(metrics["gap_to_bma"], t["gap"], NOISE_BAND["gap_to_bma"]),
            "accuracy_shortfall": _side(metrics["bma_parent_accuracy"] - metrics["parent_accuracy"],
                                        t["accuracy_shortfall"], NOISE_BAND["accuracy"])}


def _half_bma_control(ctx: CheckContext, run) -> tuple[dict, dict]:
    """BMA reading the last ceil(L/2) examples of the run's held-out contexts, and fig2's rule on it."""
    batch = eval_batch(run.config, run.kernel, run.config.L)  # the contexts run.metrics were measured on
    half = analysis.truncated_bma_metrics(run.kernel, batch, _half(run.config.L))
    return half, _fig2_sides(ctx, half)


def _control_measured(metrics: dict, sides: dict) -> dict:
    return {k: metrics[k] for k in ("examples", "L", "gap_to_bma", "parent_loss_gap", "parent_accuracy",
                                    "bma_parent_accuracy")} | {"rule": sides}


def _loss_split_rows(metrics: dict, label: str) -> list:
    return [[label, metrics["query_loss"], metrics["bma_loss"], metrics["gap_to_bma"], metrics["parent_loss"],
             metrics["bma_parent_loss"], metrics.get("logit_floor_loss"), metrics.get("output_rule_gap"),
             metrics["parent_accuracy"], metrics["bma_parent_accuracy"], metrics["oracle_loss"]]]


LOSS_COLUMNS = ["run", "query loss", "BMA loss", "gap", "L_pa", "BMA L_pa", "logit-rule floor",
                "floor − BMA (output-rule part)", "parent acc.", "BMA acc.", "oracle loss"]


def _fig2_threshold(ctx: CheckContext, half: dict) -> dict:
    """fig2's thresholds, each with its band and what the control (``half``, BMA reading half the examples) read."""
    t, control = THRESHOLDS[ctx.tier], f"BMA reading {half['examples']} of {half['L']}"
    return {"converged_parent_gap": f"L_pa − BMA's ≤ {t['converged_parent_gap']} ({control}: "
                                    f"{half['parent_loss_gap']:+.3f})",
            "gap_to_bma": f"≤ {t['gap']} ± {NOISE_BAND['gap_to_bma']} ({control}: {half['gap_to_bma']:.3f})",
            "accuracy_shortfall": f"≤ {t['accuracy_shortfall']} ± {NOISE_BAND['accuracy']} ({control}: "
                                  f"{half['bma_parent_accuracy'] - half['parent_accuracy']:.3f})",
            "tier": ctx.tier}


def exp_fig2_attention(ctx: CheckContext) -> CheckOutcome:
    """fig2: trained A^(2) on the true parent, query loss and L_pa against BMA; logit-rule run at full tier."""
    run = _runs(ctx, "fig2")["fig2"]
    m = run.metrics
    sides = _fig2_sides(ctx, m)
    converged = _converged(ctx, m)
    verdict, reason = _verdict(ctx, _combine(sides), converged, m, sides)
    chance = analysis.chance_parent_accuracy(run.config.H)
    if verdict != "pass" and ctx.full and m["parent_accuracy"] <= chance + 0.02:
        # a paper-size run that ends no better than picking h' < h at random counts against the claim
        verdict, reason = "fail", ""
    half, half_sides = _half_bma_control(ctx, run)
    control = Control(f"BMA reading only the last {half['examples']} of {half['L']} examples on the same contexts",
                      _control_measured(half, half_sides), _combine(half_sides) == "fail")
    rows = _loss_split_rows(m, "mixture rule")
    measured = {k: m[k] for k in ("query_loss", "bma_loss", "gap_to_bma", "parent_loss", "bma_parent_loss",
                                  "parent_loss_gap", "parent_accuracy", "bma_parent_accuracy", "oracle_loss",
                                  "logit_floor_loss", "output_rule_gap", "steps")}
    if ctx.full:  # the paper's logit rule: its gap splits into selection (L_pa) and output-rule (floor) parts
        logit = _runs(ctx, "fig2", output="logit")["fig2"].metrics
        rows += _loss_split_rows(logit, "logit rule")
        measured["logit_rule"] = {k: logit[k] for k in ("query_loss", "gap_to_bma", "parent_loss_gap",
                                                        "logit_floor_loss", "parent_accuracy")}
        # the floor is the Theorem 1 logit model (exact BMA attention, W_OV = log π); a trained logit model may
        # sit below it by sharpening its attention, so this difference can be negative
        measured["logit_rule"]["gap_to_floor"] = logit["query_loss"] - logit["logit_floor_loss"]
    batch = eval_batch(run.config, run.kernel, run.config.L)
    figs = _figure(ctx, "fig2_attention.png", lambda p: figures.attention_heatmaps(run.model, run.kernel, batch, p))
    figs += _figure(ctx, "fig2_parent_loss.png", lambda p: figures.training_curves(m, p))
    return CheckOutcome(
        verdict=verdict, measured=measured,
        threshold=_fig2_threshold(ctx, half)
        | {"fail_if_parent_accuracy_at_most_chance_plus_0.02_full_tier": chance},
        summary=f"{ctx.tier} tier, {m['steps']} steps: L_pa {m['parent_loss_gap']:+.3f} nats from BMA's; query "
                f"loss {m['query_loss']:.4f} vs BMA {m['bma_loss']:.4f} (gap {m['gap_to_bma']:.4f}); parent accuracy "
                f"{m['parent_accuracy']:.3f} vs BMA's {m['bma_parent_accuracy']:.3f}; logit-rule floor "
                f"{m['logit_floor_loss']:.4f} (+{m['output_rule_gap']:.4f} over BMA); {_rule_text(sides)}. "
                f"Control: BMA reading the last "
                f"{half['examples']} of {half['L']} examples (L_pa {half['parent_loss_gap']:+.3f}, gap "
                f"{half['gap_to_bma']:.4f}, accuracy {half['parent_accuracy']:.3f}) is "
                f"{'rejected' if control.rejected else 'NOT rejected'}.",
        tables=[Table("losses (nats/token) on held-out contexts", LOSS_COLUMNS, rows)],
        figures=figs, instance=None if verdict != "fail" else {"config": m["config"], "kernel": m["kernel"]},
        control=control, reason=reason, converged=converged, assumptions=_run_assumptions(ctx, run),
        tolerances={"query_loss": TRAINED_TOL["gap_to_bma"], "gap_to_bma": TRAINED_TOL["gap_to_bma"],
                    "parent_loss": TRAINED_TOL["parent_loss_gap"], "parent_loss_gap": TRAINED_TOL["parent_loss_gap"],
                    "parent_accuracy": TRAINED_TOL["parent_accuracy"],
                    # the full tier's logit-rule run: not in the quick reference; L_pa's tolerance for its values
                    "logit_rule": TRAINED_TOL["parent_loss_gap"]})


# ---------------------------------------------------------------------------------------------------------------
# fig3: the parameters of fig2's run.

def _fig3_sides(ctx: CheckContext, summary: dict) -> dict:
    t = THRESHOLDS[ctx.tier]
    peaks = summary["w_H_peak_offsets"]
    return {"w_H_peaks_at_0": "pass" if peaks and all(p == 0 for p in peaks) else "fail",
            "off_block_fraction": _side(summary["off_block_fraction"], t["off_block"], NOISE_BAND["off_block"]),
            "softmax_W_OV_error": _side(summary["softmax_W_OV_error"], t["w_ov_error"], NOISE_BAND["w_ov_error"])}


def exp_fig3_parameters(ctx: CheckContext) -> CheckOutcome:
    """fig3: w_H peaks at offset 0 (copying heads), W_KQ block-diagonal, σ(W_OV) ≈ π (same run as fig2)."""
    run = _runs(ctx, "fig3")["fig2"]
    L, H = run.config.L, run.config.H
    summary = analysis.parameter_summary(run.model, run.kernel, L, H)
    sides = _fig3_sides(ctx, summary)
    converged = _converged(ctx, run.metrics)
    verdict, reason = _verdict(ctx, _combine(sides), converged, run.metrics, sides)
    # control: the same architecture at the initialisation the run started from (same generator seed)
    initial = build_model(run.config, torch.Generator().manual_seed(run.config.seed)).double()
    init_summary = analysis.parameter_summary(initial, run.kernel, L, H)
    init_sides = _fig3_sides(ctx, init_summary)
    control = Control("the same model at its initialisation (the run's first step)",
                      {"copying_heads": len(init_summary["copying_heads"]),
                       "off_block_fraction": init_summary["off_block_fraction"],
                       "softmax_W_OV_error": init_summary["softmax_W_OV_error"], "rule": init_sides},
                      _combine(init_sides) == "fail")
    copying = summary["copying_heads"]
    t = THRESHOLDS[ctx.tier]
    figs = _figure(ctx, "fig3_parameters.png", lambda p: figures.parameter_figure(run.model, run.kernel, L, H, p))
    figs += _figure(ctx, "fig3_copier_heads.png", lambda p: figures.copier_figure(run.model, L, H, p))
    return CheckOutcome(
        verdict=verdict,
        measured={"copying_heads": len(copying), "heads": run.model.K,
                  "examples_covered": len(summary["examples_covered"]),
                  "copying_heads_peaking_at_0": sum(p == 0 for p in summary["w_H_peak_offsets"]),
                  "off_block_fraction": summary["off_block_fraction"],
                  "softmax_W_OV_error": summary["softmax_W_OV_error"],
                  "parent_loss_gap": run.metrics["parent_loss_gap"]},
        threshold={"off_block_fraction": f"≤ {t['off_block']} ± {NOISE_BAND['off_block']} (the model at its "
                                         f"initialisation: {len(init_summary['copying_heads'])} copying heads)",
                   "softmax_W_OV_error": f"≤ {t['w_ov_error']} ± {NOISE_BAND['w_ov_error']} (at initialisation: "
                                         f"{init_summary['softmax_W_OV_error']:.2f})",
                   "w_H_peaks_at_0": "every copying head", "converged_parent_gap": t["converged_parent_gap"]},
        summary=f"{len(copying)} of {run.model.K} heads copy one context example at the same position (examples "
                f"covered: {len(summary['examples_covered'])}/{L}); w_H peaks at offset 0 for "
                f"{sum(p == 0 for p in summary['w_H_peak_offsets'])} of them; off-block energy of W_KQ "
                f"{summary['off_block_fraction']:.3f} (threshold {t['off_block']} ± {NOISE_BAND['off_block']}); "
                f"(1/d)‖σ(W_OV) − π‖₁ = {summary['softmax_W_OV_error']:.3f}. Control: the model at its "
                f"initialisation ({len(init_summary['copying_heads'])} copying heads, σ(W_OV) error "
                f"{init_summary['softmax_W_OV_error']:.2f}) is {'rejected' if control.rejected else 'NOT rejected'}; "
                f"{_rule_text(sides)}.",
        figures=figs, control=control, reason=reason, converged=converged, assumptions=_run_assumptions(ctx, run),
        instance=None if verdict != "fail" else {"config": run.metrics["config"], "kernel": run.metrics["kernel"]},
        # counts, seed 0 over OMP_NUM_THREADS=1|2 × ATEN_CPU_CAPABILITY=default|avx2 and the reference: copying
        # heads 9-13 (range 4; every one peaks at offset 0), examples covered 7-8 (range 1)
        tolerances={"off_block_fraction": TRAINED_TOL["off_block"], "softmax_W_OV_error": TRAINED_TOL["w_ov_error"],
                    "parent_loss_gap": TRAINED_TOL["parent_loss_gap"], "copying_heads": {"abs": 4},
                    "copying_heads_peaking_at_0": {"abs": 4}, "examples_covered": {"abs": 1}})


# ---------------------------------------------------------------------------------------------------------------
# Theorem 2 on the trained model.

def _thm2_rule(ctx: CheckContext, Ls: list, acc: list, bma: list, se: float) -> dict:
    """Accuracy near BMA's at every L' (shortfall within the threshold, with its band), rising with L' (within
    2 SE per step) and by more than 4 SE from the smallest L' to the largest."""
    t = THRESHOLDS[ctx.tier]
    sides = {f"accuracy_shortfall_L{L}": _side(b - a, t["accuracy_shortfall"], NOISE_BAND["accuracy"])
             for L, a, b in zip(Ls, acc, bma)}
    sides["increasing"] = "pass" if analysis.is_monotone(acc, increasing=True, slack=2 * se) else "fail"
    sides["rise"] = "pass" if acc[-1] > acc[0] + 4 * se else "fail"
    return sides


def thm2_consistency(ctx: CheckContext) -> CheckOutcome:
    """Trained model's parent accuracy against L' (up to the training L) beside BMA's."""
    run = _runs(ctx, "fig2")["fig2"]
    by_L = run.metrics["by_test_L"]
    Ls = sorted(int(k) for k in by_L if int(k) <= run.config.L)
    acc = [by_L[str(L)]["parent_accuracy"] for L in Ls]
    bma = [by_L[str(L)]["bma_parent_accuracy"] for L in Ls]
    n = run.config.eval_contexts * (run.config.H - 1)
    se = float(np.sqrt(0.25 / n))  # the largest binomial standard error of an accuracy over n positions
    sides = _thm2_rule(ctx, Ls, acc, bma, se)
    converged = _converged(ctx, run.metrics)
    verdict, reason = _verdict(ctx, _combine(sides), converged, run.metrics, sides)
    # control: BMA reading the last ceil(L'/2) of the L' examples at every L', on the same contexts
    halves = [analysis.truncated_bma_metrics(run.kernel, eval_batch(run.config, run.kernel, L), _half(L)) for L in Ls]
    half_acc = [h["parent_accuracy"] for h in halves]
    half_sides = _thm2_rule(ctx, Ls, half_acc, bma, se)
    control = Control("BMA reading only the last ceil(L'/2) of the L' examples, at every L'",
                      {"L_test": Ls, "parent_accuracy": half_acc, "rule": half_sides}, _combine(half_sides) == "fail")
    t = THRESHOLDS[ctx.tier]
    return CheckOutcome(
        verdict=verdict,
        measured={"L_test": Ls, "parent_accuracy": acc, "bma_parent_accuracy": bma, "accuracy_stderr_bound": se},
        threshold={"accuracy_shortfall_every_L": f"≤ {t['accuracy_shortfall']} ± {NOISE_BAND['accuracy']} (BMA "
                                                 "reading ceil(L'/2) of L': up to "
                                                 f"{max(b - h for h, b in zip(half_acc, bma)):.3f})",
                   "monotone_slack": 2 * se, "min_rise": 4 * se, "converged_parent_gap": t["converged_parent_gap"]},
        summary=f"Parent accuracy of the fig2 model rises {acc[0]:.3f} → {acc[-1]:.3f} as L' goes {Ls[0]} → {Ls[-1]} "
                f"(BMA {bma[0]:.3f} → {bma[-1]:.3f}; largest shortfall "
                f"{max(b - a for a, b in zip(acc, bma)):.3f}, threshold {t['accuracy_shortfall']}); "
                f"{_rule_text(sides)}. Control: BMA "
                f"reading half the examples ({half_acc[0]:.3f} → {half_acc[-1]:.3f}) is "
                f"{'rejected' if control.rejected else 'NOT rejected'}.",
        tables=[Table("parent accuracy against L'", ["L'", "model", "BMA", "BMA reading ceil(L'/2)"],
                      [[L, a, b, h] for L, a, b, h in zip(Ls, acc, bma, half_acc)])],
        control=control, reason=reason, converged=converged, assumptions=_run_assumptions(ctx, run),
        tolerances={"parent_accuracy": TRAINED_TOL["accuracy_by_L"]})



# ---------------------------------------------------------------------------------------------------------------
# fig5: generalisation across L' under a named reading.

#: The reading fig5 is run under: what our model does with example offsets beyond the training L.
FIG5_READING = ("reading R1: example offsets beyond the training L share the weight of offset L (clipped relative "
                "positions, Shaw et al. 2018), with K = 2L + 4 copier heads; the paper does not state its rule for "
                "offsets beyond the training range")


FIG5_READING_R2 = ("reading R2 (full tier): every run gets the same head budget (K = 2·max L + 4) and an example-offset "
                   "table covering every test L' (w_L up to offset max L'); offsets never seen in training keep their "
                   "random initial values (no gradient reaches them, weight decay 0)")


FIG5_READING_R3 = ("reading R3: selector only, each trained W_tf (read from W_KQ and the copier heads) applied to "
                   "exact copies of the L' examples, as in Theorem 1's construction (how well the learned selector is "
                   "calibrated, whatever the copier does at L' ≠ L)")


def _reading_word(status: str) -> str:
    return {"pass": "reproduced", "fail": "not reproduced"}.get(status, "undecided (within noise)")


def _fig5_rule(ctx: CheckContext, train_L: list, L_test: list, grid: dict) -> dict:
    """Both halves of fig5's claim on a grid {training L: [L_pa^{L'} − BMA's for L' in L_test]}.

    "Near BMA for many L'": some training L is within ``near_bma`` nats of BMA at ≥ half of the tested L' (pass when
    below ``near_bma`` minus the noise band there, fail when not even below ``near_bma`` plus the band, else noise;
    ``near_count`` counts the former).
    "Smaller training L generalizes better": Spearman's ρ(training L, mean gap over L') > 0 at every shift of the
    mean gaps within their noise band.
    """
    near, band = THRESHOLDS[ctx.tier]["near_bma"], NOISE_BAND["fig5_gap"]
    many = math.ceil(len(L_test) / 2)
    clearly = {L: int(sum(g < near - band for g in grid[L])) for L in train_L}
    possibly = {L: int(sum(g <= near + band for g in grid[L])) for L in train_L}
    mean_gap = [float(np.mean(grid[L])) for L in train_L]
    rank = analysis.spearman_range(train_L, mean_gap, NOISE_BAND["fig5_mean_gap"])
    sides = {"near_bma_for_many_L": ("pass" if max(clearly.values()) >= many
                                     else "fail" if max(possibly.values()) < many else "noise"),
             "smaller_L_generalizes_better": ("pass" if rank["low"] > 0 else "fail" if rank["high"] < 0 else "noise")}
    return {"sides": sides, "near_count": clearly, "many": many, "mean_gap": mean_gap, "spearman": rank}


#: Training seeds of fig5 at the full tier (the report seed's and one more); the quick tier trains one.
FIG5_FULL_SEEDS = 2


def exp_fig5_generalization(ctx: CheckContext) -> CheckOutcome:
    """fig5 under named readings (R1 end to end, R2 with one head budget at the full tier, R3 selector only):
    L_pa^{L'} − BMA's for each training L; near BMA for many L'? smaller L better? Reproduced when a reading
    reproduces it, not reproduced when none does. The full tier trains every run on FIG5_FULL_SEEDS seeds: a
    reading reproduces the claim when it does on every seed, fails it when it fails on every seed, and is
    undecided otherwise (figures and tables show the report seed's runs; each seed's ρ is in ``by_seed``)."""
    outcome, info = _fig5_one_seed(ctx, _runs(ctx, "fig5"))
    if not ctx.full:
        return outcome
    infos = [info] + [_fig5_one_seed(replace(ctx, figures_dir=None), _runs(ctx, "fig5", replicate=r))[1]
                      for r in range(1, FIG5_FULL_SEEDS)]
    readings = {name: ("pass" if all(i["readings"][name] == "pass" for i in infos)
                       else "fail" if all(i["readings"][name] == "fail" for i in infos) else "noise")
                for name in info["readings"]}
    status = ("pass" if "pass" in readings.values() else "fail" if all(v == "fail" for v in readings.values())
              else "noise")
    converged = all(i["converged"] for i in infos)
    worst = max((i["worst"] for i in infos), key=lambda m: m["parent_loss_gap"])
    verdict, reason = _verdict(ctx, status, converged, worst, {f"reading {k}": v for k, v in readings.items()})
    by_seed = [{"seed": i["seed"], "converged": i["converged"], "own_L_parent_loss_gap": i["own_L_parent_loss_gap"],
                **{name: {"rule": rule["sides"], "reading": i["readings"][name],
                          "mean_parent_loss_gap": rule["mean_gap"], "spearman": rule["spearman"]}
                   for name, rule in i["rules"].items()}} for i in infos]
    seeds_text = (f"Over {len(infos)} training seeds ({', '.join(str(i['seed']) for i in infos)}), a reading counts "
                  "when it holds on every seed: " + "; ".join(
                      f"{name} {_reading_word(v)} (ρ = " + " / ".join(f"{i['rules'][name]['spearman']['rho']:+.2f}"
                                                                    for i in infos) + ")"
                      for name, v in readings.items()) + ". The rest is the report seed's run: ")
    return replace(outcome, verdict=verdict, reason=reason, converged=converged,
                   measured={**outcome.measured, "readings": readings, "by_seed": by_seed},
                   summary=seeds_text + outcome.summary,
                   instance=None if verdict != "fail" else outcome.instance)


def _fig5_one_seed(ctx: CheckContext, runs_all: dict) -> tuple[CheckOutcome, dict]:
    """fig5's outcome on one seed's runs, and what the seeds are combined from (readings, rules, convergence)."""
    by_reading = fig5_readings(runs_all)
    runs = by_reading["R1"]
    labels = sorted(runs, key=lambda s: runs[s].config.L)
    train_L = [runs[k].config.L for k in labels]
    L_test = sorted(int(k) for k in runs[labels[0]].metrics["by_test_L"])

    def end_to_end(group: dict) -> dict:
        return {group[k].config.L: [group[k].metrics["by_test_L"][str(L)]["parent_loss"]
                                    - group[k].metrics["by_test_L"][str(L)]["bma_parent_loss"] for L in L_test]
                for k in labels}

    grid = end_to_end(runs)
    rule = _fig5_rule(ctx, train_L, L_test, grid)
    trained = [runs[k] for k in labels] + [by_reading["R2"][k] for k in labels if "R2" in by_reading]
    own_gap = {k: runs[k].metrics["parent_loss_gap"] for k in labels}  # each run's L_pa gap at its own L
    own_gap_r2 = {k: by_reading["R2"][k].metrics["parent_loss_gap"] for k in labels} if "R2" in by_reading else {}
    converged = all(_converged(ctx, r.metrics) for r in trained)
    first = runs[labels[0]]
    batches = {L: eval_batch(first.config, first.kernel, L) for L in L_test}  # the contexts every run is tested on
    # reading R3, selector only: each trained W_tf on exact copies of the L' examples (Theorem 1's copier)
    selectors = {k: analysis.effective_selector_matrices(runs[k].model, runs[k].config.L, runs[k].config.H)["W_tf"]
                 for k in labels}
    grid_r3 = {runs[k].config.L: [analysis.selector_only_parent_loss(selectors[k], first.kernel,
                                                                      batches[L])["parent_loss_gap"] for L in L_test]
               for k in labels}
    rule_r3 = _fig5_rule(ctx, train_L, L_test, grid_r3)
    readings = {"R1": _combine(rule["sides"])}
    r2 = None
    if "R2" in by_reading:  # reading R2: shared head budget, offsets beyond the training L untrained
        grid_r2 = end_to_end(by_reading["R2"])
        rule_r2 = _fig5_rule(ctx, train_L, L_test, grid_r2)
        readings["R2"] = _combine(rule_r2["sides"])
        r2 = {"grid": grid_r2, "rule": rule_r2}
    readings["R3"] = _combine(rule_r3["sides"])
    worst = max((r.metrics for r in trained), key=lambda m: m["parent_loss_gap"])
    # the claim is reproduced when some plausible reading reproduces it, and not reproduced when none does
    status = ("pass" if "pass" in readings.values() else "fail" if all(v == "fail" for v in readings.values())
              else "noise")
    verdict, reason = _verdict(ctx, status, converged, worst, {f"reading {k}": v for k, v in readings.items()})
    # control: an ideal reader of min(L, L') examples (BMA reading the last min(L, L') of the L' examples), the
    # grid a model that uses exactly its training L examples would give; larger L is better there, so the
    # "smaller L generalizes better" half must reject it
    control_grid = {Lt: [analysis.truncated_bma_metrics(first.kernel, batches[L], min(Lt, L))["parent_loss_gap"]
                         for L in L_test] for Lt in train_L}
    control_rule = _fig5_rule(ctx, train_L, L_test, control_grid)
    control = Control("the grid of BMA reading only the last min(L, L') of the L' examples (an ideal reader of its "
                      "training L examples: larger L generalizes better)",
                      {"mean_gap": control_rule["mean_gap"], "spearman": control_rule["spearman"],
                       "near_count": control_rule["near_count"], "rule": control_rule["sides"]},
                      _combine(control_rule["sides"]) == "fail")
    t = THRESHOLDS[ctx.tier]
    figs = _figure(ctx, "fig5_grid.png",
                   lambda p: figures.generalization_grid({k: runs[k].metrics for k in labels}, p))
    if r2 is not None:
        figs += _figure(ctx, "fig5_grid_R2.png", lambda p: figures.generalization_grid(
            {k: by_reading["R2"][k].metrics for k in labels}, p))
    sp = rule["spearman"]
    r2_measured, r2_text, r2_tables, r2_assumptions = {}, "", [], []
    if r2 is not None:
        rr = r2["rule"]
        r2_measured = {"R2_shared_budget": {
            "mean_parent_loss_gap": dict(zip(labels, rr["mean_gap"])),
            "test_L_near_bma": {f"L{L}": n for L, n in rr["near_count"].items()},
            "spearman_train_L_vs_mean_gap": rr["spearman"]["rho"], "grid": {k: r2["grid"][runs[k].config.L]
                                                                           for k in labels},
            "own_L_parent_loss_gap": own_gap_r2,
            "rule": rr["sides"]}}
        r2_text = (f"R2 (shared head budget, untrained offsets beyond L) {_reading_word(readings['R2'])}: mean gap "
                   + ", ".join(f"L = {L}: {g:.3f}" for L, g in zip(train_L, rr["mean_gap"]))
                   + f", Spearman ρ = {rr['spearman']['rho']:+.2f}, near BMA (clear of the band) at "
                   + ", ".join(f"{n}" for n in rr["near_count"].values()) + " L'. ")
        r2_tables = [Table("reading R2 (shared head budget, untrained offsets beyond L): L_pa^{L'} − BMA (nats)",
                           ["train L"] + [f"L'={L}" for L in L_test], [[k] + r2["grid"][runs[k].config.L]
                                                                       for k in labels])]
        r2_assumptions = [f"{FIG5_READING_R2}: {_reading_word(readings['R2'])}"]
    info = {"seed": first.config.seed, "readings": readings, "converged": converged, "worst": worst,
            "own_L_parent_loss_gap": {**own_gap, **{FIG5_R2_PREFIX + k: g for k, g in own_gap_r2.items()}},
            "rules": {"R1": rule, **({"R2": r2["rule"]} if r2 is not None else {}), "R3": rule_r3}}
    return CheckOutcome(
        verdict=verdict,
        measured={"readings": readings, **r2_measured,
                  "R3_selector_only": {"mean_parent_loss_gap": dict(zip(labels, rule_r3["mean_gap"])),
                                       "test_L_near_bma": {f"L{L}": n for L, n in rule_r3["near_count"].items()},
                                       "spearman_train_L_vs_mean_gap": rule_r3["spearman"]["rho"],
                                       "grid": {k: grid_r3[runs[k].config.L] for k in labels},
                                       "rule": rule_r3["sides"]},
                  "mean_parent_loss_gap": dict(zip(labels, rule["mean_gap"])),
                  "test_L_near_bma": {f"L{L}": n for L, n in rule["near_count"].items()},
                  "spearman_train_L_vs_mean_gap": sp["rho"],
                  "own_L_parent_loss_gap": own_gap,
                  "grid": {k: grid[runs[k].config.L] for k in labels}, "L_test": L_test},
        threshold={"near_bma": f"L_pa^{{L'}} − BMA's < {t['near_bma']} nats (band ±{NOISE_BAND['fig5_gap']})",
                   "many": f"at least {rule['many']} of the {len(L_test)} tested L' (half), for some training L",
                   "smaller_L_generalizes_better": "Spearman ρ(training L, mean gap over L') > 0 at every shift of "
                                                   f"the mean gaps by ±{NOISE_BAND['fig5_mean_gap']} (the ideal "
                                                   f"reader of min(L, L'): {control_rule['spearman']['rho']:+.2f})",
                   "converged_parent_gap": t["converged_parent_gap"]},
        summary=f"Readings: R1 (end to end, clipped offsets) {_reading_word(readings['R1'])}; "
                + (f"R2 (shared head budget) {_reading_word(readings['R2'])}; " if r2 is not None else "")
                + f"R3 (selector only: each trained W_tf on exact copies of the L' examples) "
                  f"{_reading_word(readings['R3'])}. " + r2_text +
                f"R3: mean gap " + ", ".join(f"L = {L}: {g:.3f}" for L, g in zip(train_L, rule_r3["mean_gap"]))
                + f", Spearman ρ = {rule_r3['spearman']['rho']:+.2f}, near BMA (clear of the band) at "
                + ", ".join(f"{n}" for n in rule_r3["near_count"].values()) + f" L'. "
                f"R1 in detail: run under {FIG5_READING.split(':')[0]} (clipped offsets, K = 2L + 4 heads). Near BMA "
                f"(below {t['near_bma']} nats by more than the noise band {NOISE_BAND['fig5_gap']}) at "
                + ", ".join(f"{n} of {len(L_test)} L' for L = {L}" for L, n in rule["near_count"].items())
                + f" ('many' = {rule['many']}): {rule['sides']['near_bma_for_many_L']}. Mean gap over L' ∈ {{"
                + ", ".join(map(str, L_test)) + "}: "
                + ", ".join(f"L = {L}: {g:.3f}" for L, g in zip(train_L, rule["mean_gap"]))
                + f"; Spearman ρ(L, mean gap) = {sp['rho']:+.2f} (range {sp['low']:+.2f}..{sp['high']:+.2f} within "
                  f"noise; the claim needs > 0): {rule['sides']['smaller_L_generalizes_better']}."
                + ("" if converged else " Not every run converged at its own L.")
                + f" Control: an ideal reader of min(L, L') examples (ρ = {control_rule['spearman']['rho']:+.2f}) is "
                  f"{'rejected' if control.rejected else 'NOT rejected'}. Each copier head copies one example, so a "
                  "model trained at L cannot use more than L examples at L' > L under R1, and its heads for offsets "
                  "beyond L' read the wrong examples at L' < L.",
        tables=[Table("reading R1 (end to end): L_pa^{L'} − BMA (nats)", ["train L"] + [f"L'={L}" for L in L_test],
                      [[k] + grid[runs[k].config.L] for k in labels])] + r2_tables + [
                Table("reading R3 (selector only, exact copies): L_pa^{L'} − BMA (nats)",
                      ["train L"] + [f"L'={L}" for L in L_test], [[k] + grid_r3[runs[k].config.L] for k in labels]),
                Table("control: BMA reading min(L, L') of L' examples, L_pa − BMA", ["train L"]
                      + [f"L'={L}" for L in L_test], [[f"L{L}"] + control_grid[L] for L in train_L])],
        figures=figs, control=control, reason=reason, converged=converged, assumptions=[
            f"{FIG5_READING}: {_reading_word(readings['R1'])}", *r2_assumptions,
            f"{FIG5_READING_R3}: {_reading_word(readings['R3'])}",
            f"'near BMA' = L_pa^{{L'}} within {t['near_bma']} nats of BMA's; 'many' = at least half of the tested L', "
            "for at least one training L (the lenient reading)",
            "'smaller training L generalizes better' = the mean of L_pa^{L'} − BMA's over the tested L' rises with "
            "the training L (Spearman ρ > 0)"],
        instance=None if verdict != "fail" else {
            "mean_parent_loss_gap": dict(zip(labels, rule["mean_gap"])), "kernel": first.kernel.tolist(),
            "reproduce": f"bma-verify train --preset fig5 --tier {ctx.tier} --seed {first.config.seed}"},
        tolerances={"mean_parent_loss_gap": TRAINED_TOL["fig5_mean_gap"], "grid": TRAINED_TOL["fig5_gap"],
                    "own_L_parent_loss_gap": TRAINED_TOL["fig5_own_gap"],
                    # the L = 5 run is near BMA at 1 L' under default and 0 under avx2 (seed 0); ρ is −1 under both
                    "test_L_near_bma": {"abs": 1}, "spearman_train_L_vs_mean_gap": {"abs": 0.0},
                    # R3 reads the same trained runs through their W_tf: R1's spreads, not measured apart
                    "R3_selector_only.mean_parent_loss_gap": TRAINED_TOL["fig5_mean_gap"],
                    "R3_selector_only.grid": TRAINED_TOL["fig5_gap"], "R3_selector_only.test_L_near_bma": {"abs": 1},
                    # R2 is trained at the full tier only (no quick reference); R1's spreads
                    "R2_shared_budget.mean_parent_loss_gap": TRAINED_TOL["fig5_mean_gap"],
                    "R2_shared_budget.grid": TRAINED_TOL["fig5_gap"], "R2_shared_budget.test_L_near_bma": {"abs": 1},
                    "R2_shared_budget.own_L_parent_loss_gap": TRAINED_TOL["fig5_own_gap"],
                    "R2_shared_budget.spearman_train_L_vs_mean_gap": {"abs": 0.0}}), info


# ---------------------------------------------------------------------------------------------------------------
# fig6 (and Prop. 1's model evidence, which cites it).

def _column_sides(ctx: CheckContext, column_error: float, row_error: float) -> dict:
    band = NOISE_BAND["column_error"]
    return {"column_error": _side(column_error, THRESHOLDS[ctx.tier]["column_error"], band),
            "column_below_row": _side(column_error, row_error, band)}


def exp_fig6_column_alignment(ctx: CheckContext) -> CheckOutcome:
    """fig6 (d=20, H=50, L=3): (1/d)‖σ_col(W_tf) − σ_col(log π)‖₁ < 0.05 and below the row error."""
    run = _runs(ctx, "fig6")["fig6"]
    selector = analysis.effective_selector_matrices(run.model, run.config.L, run.config.H)
    W_tf = selector["W_tf"]
    col, row = analysis.column_softmax_error(W_tf, run.kernel), analysis.row_softmax_error(W_tf, run.kernel)
    m = {"column_error": col, "row_error": row, "examples_covered": len(selector["offsets"]),
         "parent_loss_gap": run.metrics["parent_loss_gap"], "paper": {"column_error": 0.0278, "row_error": 0.350},
         "steps": run.metrics["steps"]}
    sides = _column_sides(ctx, col, row)
    converged = _converged(ctx, run.metrics)
    verdict, reason = _verdict(ctx, _combine(sides), converged, run.metrics, sides)
    # control: the trained W_tf + b1ᵀ (a row shift: Prop. 1 says it changes A^(2); it leaves the row softmax alone)
    shifted = analysis.row_shift(W_tf, ctx.rng("fig6:row-shift").normal(size=run.config.d))
    c_col, c_row = analysis.column_softmax_error(shifted, run.kernel), analysis.row_softmax_error(shifted, run.kernel)
    c_sides = _column_sides(ctx, c_col, c_row)
    control = Control("the trained W_tf + b1ᵀ (a row shift, b ~ N(0, 1); Prop. 1: changes A^(2))",
                      {"column_error": c_col, "row_error": c_row, "rule": c_sides}, _combine(c_sides) == "fail")
    figs = _figure(ctx, "fig6_columns.png", lambda p: figures.column_alignment_figure(
        run.model, run.kernel, run.config.L, run.config.H, p))
    t = THRESHOLDS[ctx.tier]
    return CheckOutcome(
        verdict=verdict, measured=m,
        threshold={"column_error": f"< {t['column_error']} ± {NOISE_BAND['column_error']} (W_tf + b1ᵀ: {c_col:.3f})",
                   "column_below_row": f"by more than {NOISE_BAND['column_error']}",
                   "converged_parent_gap": t["converged_parent_gap"]},
        summary=f"W_tf = mean over the L context examples of the bilinear form the selector applies to that example's "
                f"same-position token pairs (W_KQ blocks weighted by the heads' copy mass): column error "
                f"{col:.4f}, row error {row:.4f} (paper 0.0278 vs 0.350) after {m['steps']} steps, L_pa "
                f"{m['parent_loss_gap']:+.3f} from BMA's; {_rule_text(sides)}. Control: W_tf + b1ᵀ reads column error "
                f"{c_col:.3f} and is {'rejected' if control.rejected else 'NOT rejected'}.",
        figures=figs, instance=None if verdict != "fail" else {"kernel": run.kernel.tolist()},
        control=control, reason=reason, converged=converged,
        assumptions=_run_assumptions(ctx, run) + [
            "W_tf read per context example from W_KQ and the copier heads' same-position mass, averaged over the "
            "examples"],
        # every setting covers all three examples (seed 0)
        tolerances={"column_error": TRAINED_TOL["column_error"], "row_error": TRAINED_TOL["row_error"],
                    "parent_loss_gap": TRAINED_TOL["fig6_parent_loss_gap"], "examples_covered": {"abs": 0}})


# ---------------------------------------------------------------------------------------------------------------
# Robustness (Appendix G): other architectures at the fig2 setting, judged by fig2's rule.

def _robustness_reading(ctx: CheckContext, run, half: dict) -> dict:
    """One run's reading: fig2's rule; a run no better than BMA reading half its examples fails, unless it has
    fewer layer-1 heads than examples (under-provisioned: it cannot give each example its own copier head, which
    the hand-set standard model that equals BMA needs), which reads inconclusive and says so."""
    m, c = run.metrics, run.config
    sides = _fig2_sides(ctx, m)
    converged = _converged(ctx, m)
    under = c.K < c.L
    # better than the control by more than the band of an accuracy
    vs_control = _side(m["parent_accuracy"], half["parent_accuracy"], NOISE_BAND["accuracy"], upper=False)
    below = vs_control == "fail"
    below_text = (f"ends no better than its control (parent accuracy {m['parent_accuracy']:.3f} vs "
                  f"{half['parent_accuracy']:.3f} for BMA reading the last {half['examples']} of {half['L']} examples)")
    under_text = (f"under-provisioned: K = {c.K} layer-1 heads for L = {c.L} examples (the hand-set standard model "
                  "that equals BMA gives each example its own head)")
    status = _combine(sides)
    if status == "pass" and converged:
        verdict, reason = "pass", ""
    elif below and not under:
        verdict, reason = "fail", below_text
    elif under:
        verdict, reason = "inconclusive", under_text + (f"; it {below_text}" if below else "")
    elif not converged:  # fig2's rule may pass on an unconverged run: that reads not converged, never pass
        verdict, reason = "inconclusive", _not_converged_reason(ctx, m)
    else:
        verdict, reason = _verdict(ctx, status, converged, m, sides)
    return {"verdict": verdict, "reason": reason, "converged": converged, "under_provisioned": under,
            "below_control": below, "sides": sides}


def _scale(config) -> dict:
    return {"d": config.d, "H": config.H, "L": config.L}


def _scale_text(config) -> str:
    position = f", {config.position} positions" if config.model == "standard" else ""
    return f"d = {config.d}, H = {config.H}, L = {config.L}{position}"


def _objective_assumptions(runs: dict, labels) -> list[str]:
    """The training objective of each deciding run whose loss weighs the examples (``example_weight_power``), a
    choice of ours that the claim's result rests on, named with the value each run used."""
    return [f"{label} trains on the language-model loss of every example with example l weighted by l^"
            f"{runs[label].config.example_weight_power:g} (our choice: an example offset of L exists only in the "
            "query example's terms, and the plain objective, every example alike, left the oldest example the "
            "worst copied and the report seed's quick run not converged; model.presets.standard_config)"
            + (f", evaluated as a {runs[label].config.ema:g} moving average of its weights"
               if runs[label].config.ema else "")
            for label in labels if runs[label].config.example_weight_power]


def exp_robustness(ctx: CheckContext) -> CheckOutcome:
    """Appendix G: absolute-PE and standard (FFN, pre-norm) transformers at the fig2 setting (the quick tier's
    standard run at a declared reduced scale)."""
    runs = _runs(ctx, "robustness")
    # a run whose layer 1 starts as the copier is a diagnostic of the selector alone: it does not decide the claim
    diagnostic = {label for label, r in runs.items() if r.config.layer1_init == "copy"}
    figs, by_examples, equivalent, readings, halves, heads = [], {}, {}, {}, {}, {}
    for label, r in runs.items():
        batch = eval_batch(r.config, r.kernel, r.config.L)  # the contexts r.metrics were measured on
        figs += _figure(ctx, f"robustness_{label}_attention.png",
                        lambda p, r=r, batch=batch: figures.attention_heatmaps(r.model, r.kernel, batch, p))
        if r.config.model == "standard":  # where its layer-1 heads go: do they divide the examples among them?
            heads[label] = analysis.standard_head_summary(r.model, batch)
            figs += _figure(ctx, f"robustness_{label}_heads.png", lambda p, s=heads[label], label=label:
                            figures.standard_heads_figure(s, p, title=label))
        # how much evidence the run uses: BMA reading only the last m examples, and the m that matches the run
        by_examples[label] = analysis.bma_accuracy_by_examples(r.kernel, batch.context, batch.parents)
        equivalent[label] = analysis.examples_equivalent(r.metrics["parent_accuracy"], by_examples[label])
        halves[label] = analysis.truncated_bma_metrics(r.kernel, batch, _half(r.config.L))
        readings[label] = _robustness_reading(ctx, r, halves[label])
    deciding = [label for label in runs if label not in diagnostic]
    decided = [readings[label]["verdict"] for label in deciding]
    verdict = ("pass" if all(v == "pass" for v in decided) else "fail" if "fail" in decided else "inconclusive")
    reason = "" if verdict == "pass" else "; ".join(f"{label}: {readings[label]['reason']}" for label in deciding
                                                    if readings[label]["verdict"] == verdict)
    converged = all(readings[label]["converged"] for label in deciding)
    # control: fig2's rule on BMA reading the last ceil(L/2) examples of each deciding run's contexts
    control_sides = {label: _fig2_sides(ctx, halves[label]) for label in deciding}
    control = Control(
        "BMA reading only the last ceil(L/2) examples of each deciding run's held-out contexts, judged by fig2's "
        "rule (and the bar a deciding run must beat)",
        {label: _control_measured(halves[label], control_sides[label]) for label in deciding},
        all(_combine(s) == "fail" for s in control_sides.values()))
    under = [label for label in deciding if readings[label]["under_provisioned"]]
    chance = {label: analysis.chance_parent_accuracy(r.config.H) for label, r in runs.items()}
    failed = [label for label in deciding if readings[label]["verdict"] == "fail"]
    return CheckOutcome(
        verdict=verdict, reason=reason, converged=converged, control=control,
        instance={label: {"config": runs[label].metrics["config"], "kernel": runs[label].kernel.tolist()}
                  for label in failed} or None,
        measured={label: {k: r.metrics[k] for k in ("query_loss", "bma_loss", "gap_to_bma", "parent_loss",
                                                      "bma_parent_loss", "parent_loss_gap", "parent_accuracy",
                                                      "bma_parent_accuracy", "steps")}
                  | {"heads": r.config.K, "layer1_init": r.config.layer1_init, "scale": _scale(r.config),
                     "position": r.config.position if r.config.model == "standard" else None,
                     "chance_parent_accuracy": chance[label],
                     "counts_toward_verdict": label not in diagnostic,
                     "under_provisioned": readings[label]["under_provisioned"],
                     "below_control": readings[label]["below_control"],
                     "examples_equivalent": equivalent[label],
                     **({"layer1_heads": {k: heads[label][k] for k in ("example_offset", "position_offset",
                                                                         "same_position_mass", "covered")}}
                        if label in heads else {}),
                     "bma_parent_accuracy_last_m_examples": by_examples[label].tolist(),
                     "verdict": readings[label]["verdict"]}
                  for label, r in runs.items()},
        threshold=_fig2_threshold(ctx, halves[deciding[0]])
        | {"fail": "a deciding run with K ≥ L whose parent accuracy is below that of BMA reading the last ceil(L/2) "
                   "examples by more than the band"},
        summary="; ".join(f"{label} ({_scale_text(r.config)}, {r.config.K} heads"
                          + (", under-provisioned" if readings[label]["under_provisioned"] else "")
                          + f"): parent accuracy {r.metrics['parent_accuracy']:.3f} vs BMA "
                          f"{r.metrics['bma_parent_accuracy']:.3f}, L_pa {r.metrics['parent_loss_gap']:+.3f}, gap "
                          f"{r.metrics['gap_to_bma']:.4f} ({readings[label]['verdict']}"
                          + (f": {readings[label]['reason']}" if readings[label]["reason"] else "")
                          + f"), the accuracy of BMA reading the last {equivalent[label]:.1f} of {r.config.L} examples"
                          + (f"; its layer-1 heads copy examples {heads[label]['covered'] or 'none'} at the same "
                             f"position (of 1..{r.config.L})" if label in heads else "")
                          for label, r in runs.items())
                + "; chance (uniform over h' < h) " + ", ".join(sorted({f"{chance[label]:.3f} at H = {r.config.H}"
                                                                      for label, r in runs.items()}))
                + ". Control: BMA reading the last ceil(L/2) examples is "
                  f"{'rejected' if control.rejected else 'NOT rejected'} by fig2's rule."
                + (f" Under-provisioned (K < L, reported, not counted as a failure): {', '.join(under)}." if under
                   else "")
                + (f" Diagnostic, not counted in the verdict: {', '.join(sorted(diagnostic))} starts layer 1 as "
                   "that copier (one head per example) and layer 2 at random, so it measures whether the standard "
                   "selector learns BMA's parent selection once the copies exist." if diagnostic else ""),
        assumptions=[
            "deciding runs: " + ", ".join(f"{label} ({runs[label].config.model}, {_scale_text(runs[label].config)}, "
                                          f"K = {runs[label].config.K}, {runs[label].config.steps} steps)"
                                          for label in deciding)
            + "; each trained from a standard initialisation",
            *_objective_assumptions(runs, deciding),
            "the standard transformer reads positions through a learned bias per layer-1 head over the (example, "
            "position) offset (relative positions, as T5 and Swin do; model/standard.py), our choice: with absolute "
            "position embeddings its heads piled onto a few recent examples; the quick tier trains it at a reduced "
            "scale that two cores can afford (stated with each run above), the full tier at the paper's fig2 "
            "setting",
            "a run whose layer 1 starts as the BMA copier (layer1_init='copy') is a diagnostic and never decides",
            "a deciding run with K ≥ L that ends no better than BMA reading the last ceil(L/2) examples fails its "
            "reading; one with K < L is under-provisioned and reads inconclusive",
            "fig2's thresholds and noise bands (measured on fig2's structured run) apply to every architecture"],
        tables=[Table("losses (nats/token)", LOSS_COLUMNS,
                      sum((_loss_split_rows(r.metrics, k) for k, r in runs.items()), []))],
        figures=figs,
        # measured: this host (ATEN auto = avx2, OMP_NUM_THREADS=1) against the reference report moved the
        # absolute-PE run by 0.0019 in gap and query loss, 0.011 in L_pa, 0.0063 in accuracy and 0.19 in examples
        # equivalent, the standard runs by < 0.001 in each; about twice that. The quick tier's runs since issue 13's
        # last pass (report seed 0; ATEN_CPU_CAPABILITY=default|avx2|avx512 at one thread and OMP_NUM_THREADS=2):
        # absolute-PE (batch 512) L_pa gap 0.0143-0.0149, accuracy 0.8823-0.8830, gap 0.00177-0.00181; the
        # standard run (weighted loss, weight average) the same to six decimals in all four; another machine's CPU
        # can move every value further
        tolerances={key: tol for label in runs for key, tol in (
            (f"{label}.query_loss", {"abs": 0.004}), (f"{label}.gap_to_bma", {"abs": 0.004}),
            (f"{label}.parent_loss", {"abs": 0.02}), (f"{label}.parent_loss_gap", {"abs": 0.02}),
            (f"{label}.parent_accuracy", {"abs": 0.012}), (f"{label}.examples_equivalent", {"abs": 0.4}))})
