"""Model checks: the Theorem 1 construction loaded into the real model class, the Theorem 3 gradient by autograd,
and the paper's experiments trained with :mod:`model.presets` (SPEC.md §4, kind ``model``; one ``exact``).

Trained runs are shared through ``ctx.cache`` (fig2's run serves exp-fig2, exp-fig3 and thm2; fig6's serves
exp-fig6 and prop1). Quick tier: a few hundred steps per run, verdicts against thresholds stated for that size
(``THRESHOLDS``); a run that has not reached them gives "inconclusive", never a fake pass.
"""
from __future__ import annotations

import numpy as np

import numerics
from model import analysis, figures
from model.presets import train_preset_runs
from model.training import eval_batch
from reports.core import CheckContext, CheckOutcome, Table

#: Per tier: query-loss gap to BMA, parent-accuracy shortfall against BMA's, L_pa gap that counts as converged,
#: (1/d)‖σ(W_OV) − π‖₁ and the off-block energy of W_KQ that count as "≈ π" and "block-diagonal".
THRESHOLDS = {
    "quick": {"gap": 0.05, "accuracy_shortfall": 0.10, "converged_parent_gap": 0.10, "w_ov_error": 0.25,
              "off_block": 0.25},
    "full": {"gap": 0.005, "accuracy_shortfall": 0.01, "converged_parent_gap": 0.05, "w_ov_error": 0.10,
             "off_block": 0.10},
}
SIZES = {"quick": {"contexts": 64, "thm3_samples": 20_000, "L_grid": (1, 2, 4, 8, 16), "L_contexts": 200},
         "full": {"contexts": 512, "thm3_samples": 200_000, "L_grid": (1, 2, 4, 8, 16, 32, 64), "L_contexts": 1000}}
#: β of the construction checks: the copies are exact to float64 (error ~ (L + H) e^{−β}).
LARGE_BETA = 40.0
TRAINED_TOL = {"abs": 0.05}


def _runs(ctx: CheckContext, name: str, output: str = "mixture") -> dict:
    """The preset's trained runs for this report (trained once, then taken from ``ctx.cache``)."""
    name = "fig2" if name == "fig3" else name  # fig3 reads the parameters of fig2's run
    key = f"model.presets:{name}:{output}:{ctx.tier}:{ctx.seed}"
    if key not in ctx.cache:
        ctx.cache[key] = train_preset_runs(name, tier=ctx.tier,
                                           seed=ctx.seed_for(f"model:{name}"), device="cpu", quiet=ctx.quiet,
                                           output=output)
    return ctx.cache[key]


def _figure(ctx: CheckContext, filename: str, draw) -> list[str]:
    if ctx.figures_dir is None:
        return []
    draw(ctx.figure_path(filename))
    return [filename]


def _kernel(ctx: CheckContext, name: str, d: int) -> np.ndarray:
    return numerics.random_kernel(d, alpha=1.0, eps=0.01, rng=ctx.rng(name))


def _construction_against_bma(ctx: CheckContext, name: str) -> tuple[dict, np.ndarray, numerics.TaskBatch]:
    kernel = _kernel(ctx, name, 5)
    batch = numerics.sample_task(kernel, SIZES[ctx.tier]["contexts"], 6, 10, rng=ctx.rng(name + ":contexts"))
    errors = analysis.construction_errors_vs_beta(kernel, batch.context, batch.query, [LARGE_BETA])
    return errors, kernel, batch


def bma_score_identity(ctx: CheckContext) -> CheckOutcome:
    """The constructed StructuredTransformer's A^(2) equals ``numerics.parent_posterior`` (β = 40, float64)."""
    errors, kernel, batch = _construction_against_bma(ctx, "bma-score-identity")
    err = errors["attention_error"][0]
    return CheckOutcome(
        verdict="pass" if err <= 1e-6 else "fail",
        measured={"max_attention_l1_error": err, "beta": LARGE_BETA, "contexts": len(batch.query), "d": 5, "L": 6,
                  "H": 10},
        threshold={"max_attention_l1_error": 1e-6},
        summary=f"Theorem 1 weights in StructuredTransformer: max_h ‖A^(2)_h − posterior_h‖₁ = {err:.2e} over "
                f"{len(batch.query)} contexts at β = {LARGE_BETA:g}.",
        instance=None if err <= 1e-6 else {"kernel": kernel.tolist(), "context": batch.context[0].tolist()},
        tolerances={"max_attention_l1_error": {"abs": 1e-9}})


def thm1_construction(ctx: CheckContext) -> CheckOutcome:
    """Constructed weights in the real class: attention and prediction (mixture rule) equal BMA to 1e-6."""
    errors, kernel, batch = _construction_against_bma(ctx, "thm1-construction")
    att, pred = errors["attention_error"][0], errors["predictive_error"][0]
    ok = att <= 1e-6 and pred <= 1e-6
    return CheckOutcome(
        verdict="pass" if ok else "fail",
        measured={"max_attention_l1_error": att, "max_predictive_error": pred, "beta": LARGE_BETA},
        threshold={"max_attention_l1_error": 1e-6, "max_predictive_error": 1e-6},
        summary=f"bma_construction(π, L=6, β={LARGE_BETA:g}, 'mixture'): attention error {att:.2e}, predictive "
                f"error {pred:.2e} against numerics.bma_predictive.",
        instance=None if ok else {"kernel": kernel.tolist(), "context": batch.context[0].tolist(),
                                  "query": batch.query[0].tolist()},
        tolerances={"max_attention_l1_error": {"abs": 1e-9}, "max_predictive_error": {"abs": 1e-9}})


def thm1_construction_curves(ctx: CheckContext) -> CheckOutcome:
    """Error of the construction against β (exponential fit) and against L (prediction → π(·|x_pa))."""
    kernel = _kernel(ctx, "thm1-curves", 5)
    batch = numerics.sample_task(kernel, SIZES[ctx.tier]["contexts"], 6, 10, rng=ctx.rng("thm1-curves:contexts"))
    betas = [1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0, 20.0, 24.0, 32.0, 40.0]
    vs_beta = analysis.construction_errors_vs_beta(kernel, batch.context, batch.query, betas)
    fit = analysis.exponential_rate(betas, vs_beta["attention_error"])
    Ls = SIZES[ctx.tier]["L_grid"]
    vs_L = analysis.construction_error_vs_L(kernel, Ls, 10, SIZES[ctx.tier]["L_contexts"],
                                            rng=ctx.rng("thm1-curves:L"))
    beta_ok = (analysis.is_monotone(vs_beta["attention_error"], increasing=False, slack=1e-13)
               and vs_beta["attention_error"][-1] <= 1e-6 and fit["rate"] > 0.5)
    # L: the last error is below the first by more than four combined standard errors, for both rules
    L_ok = all(vs_L[r]["mean"][-1] + 2 * vs_L[r]["stderr"][-1] < vs_L[r]["mean"][0] - 2 * vs_L[r]["stderr"][0]
               for r in ("logit", "mixture"))
    rows = [[b, e, p] for b, e, p in zip(betas, vs_beta["attention_error"], vs_beta["predictive_error"])]
    L_rows = [[L, vs_L["logit"]["mean"][i], vs_L["logit"]["stderr"][i], vs_L["mixture"]["mean"][i],
               vs_L["mixture"]["stderr"][i]] for i, L in enumerate(Ls)]

    def draw(path):
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
        axes[0].semilogy(betas, np.maximum(vs_beta["attention_error"], 1e-17), "o-", label="max ‖A − posterior‖₁")
        axes[0].semilogy(betas, np.exp(fit["log_C"] - fit["rate"] * np.asarray(betas)), "k--",
                         label=f"fit rate {fit['rate']:.2f}")
        axes[0].set_xlabel("β")
        axes[0].legend(fontsize=7)
        for rule in ("logit", "mixture"):
            axes[1].errorbar(Ls, vs_L[rule]["mean"], yerr=vs_L[rule]["stderr"], marker="o", label=rule)
        axes[1].set_xscale("log")
        axes[1].set_xlabel("L")
        axes[1].set_ylabel("mean ‖f_h − π(·|x_pa)‖₁")
        axes[1].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=80, metadata={"Software": None})
        plt.close(fig)

    return CheckOutcome(
        verdict="pass" if beta_ok and L_ok else "fail",
        measured={"beta": betas, "attention_error": vs_beta["attention_error"],
                  "predictive_error": vs_beta["predictive_error"], "fitted_rate": fit["rate"],
                  "L": list(Ls), "logit_error_vs_L": vs_L["logit"]["mean"], "mixture_error_vs_L": vs_L["mixture"]["mean"]},
        threshold={"attention_error_at_largest_beta": 1e-6, "min_rate": 0.5,
                   "L": "last mean + 2 SE below first mean − 2 SE, both rules"},
        summary=f"Attention error decays like exp(−{fit['rate']:.2f}·β) (fit over {fit['n_points']} points; theory "
                f"rate 1: the target logit leads by β); ‖f_h − π(·|x_pa)‖₁ falls from "
                f"{vs_L['logit']['mean'][0]:.3f} to {vs_L['logit']['mean'][-1]:.3f} (logit rule) as L goes "
                f"{Ls[0]} → {Ls[-1]}.",
        tables=[Table("error against β (L = 6, H = 10, d = 5)", ["β", "max ‖A − posterior‖₁", "max |f − P_BMA|"],
                      rows),
                Table("prediction against π(·|x_pa) (β = 50)", ["L", "logit mean", "logit SE", "mixture mean",
                                                                  "mixture SE"], L_rows)],
        figures=_figure(ctx, "thm1_construction_curves.png", draw),
        instance=None if beta_ok and L_ok else {"kernel": kernel.tolist()},
        tolerances={"attention_error": {"abs": 1e-9}, "predictive_error": {"abs": 1e-9}, "fitted_rate": {"abs": 1e-6},
                    "logit_error_vs_L": {"abs": 1e-9}, "mixture_error_vs_L": {"abs": 1e-9}})


def thm3_init_gradient(ctx: CheckContext) -> CheckOutcome:
    """Autograd gradient of StructuredTransformer at p̂ = 0 vs the closed form, and its mean vs init_gradient."""
    d, H = 3, 6
    kernel = _kernel(ctx, "thm3-model", d)
    parents = numerics.random_parents(H, rng=ctx.rng("thm3-model:tree"))
    inits = {"stationary": None, "non-stationary": ctx.rng("thm3-model:init").dirichlet(np.ones(d))}
    n = SIZES[ctx.tier]["thm3_samples"]
    results = {label: analysis.init_gradient_comparison(kernel, parents, init, n, rng=ctx.rng(f"thm3-model:{label}"))
               for label, init in inits.items()}
    closed = max(r["closed_form_max_error"] for r in results.values())
    z = max(r["max_z"] for r in results.values())
    parent_top = all(row["argmax_is_parent"] for r in results.values() for row in r["rows"])
    verdict = "fail" if closed > 1e-10 or z > 6 else ("pass" if z <= 4 else "inconclusive")
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
                f"|z| = {z:.2f} over all h, h' and both μ₀.",
        tables=[Table("mean autograd gradient vs exact expectation", ["μ₀", "h", "pa(h)", "autograd mean", "SE",
                                                                       "exact"], rows)],
        instance=None if verdict != "fail" else {"kernel": kernel.tolist(), "parents": parents.tolist()},
        tolerances={"closed_form_max_error": {"abs": 1e-10}, "max_z": {"abs": 3.0}})


def _fig2_verdict(ctx: CheckContext, metrics: dict, can_fail: bool = True) -> str:
    t = THRESHOLDS[ctx.tier]
    if (metrics["gap_to_bma"] <= t["gap"]
            and metrics["parent_accuracy"] >= metrics["bma_parent_accuracy"] - t["accuracy_shortfall"]):
        return "pass"
    # only a paper-size run that ends no better than picking h' < h at random counts against the claim
    chance = analysis.chance_parent_accuracy(metrics["config"]["H"])
    return "fail" if can_fail and ctx.full and metrics["parent_accuracy"] <= chance + 0.02 else "inconclusive"


def _loss_split_rows(metrics: dict, label: str) -> list:
    return [[label, metrics["query_loss"], metrics["bma_loss"], metrics["gap_to_bma"], metrics["parent_loss"],
             metrics["bma_parent_loss"], metrics.get("logit_floor_loss"), metrics.get("output_rule_gap"),
             metrics["parent_accuracy"], metrics["bma_parent_accuracy"], metrics["oracle_loss"]]]


LOSS_COLUMNS = ["run", "query loss", "BMA loss", "gap", "L_pa", "BMA L_pa", "logit-rule floor",
                "floor − BMA (output-rule part)", "parent acc.", "BMA acc.", "oracle loss"]


def exp_fig2_attention(ctx: CheckContext) -> CheckOutcome:
    """fig2: trained A^(2) on the true parent, query loss and L_pa against BMA; logit-rule run at full tier."""
    run = _runs(ctx, "fig2")["fig2"]
    m = run.metrics
    verdict = _fig2_verdict(ctx, m)
    rows = _loss_split_rows(m, "mixture rule")
    measured = {k: m[k] for k in ("query_loss", "bma_loss", "gap_to_bma", "parent_loss", "bma_parent_loss",
                                  "parent_accuracy", "bma_parent_accuracy", "oracle_loss", "logit_floor_loss",
                                  "output_rule_gap", "steps")}
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
    t = THRESHOLDS[ctx.tier]
    return CheckOutcome(
        verdict=verdict, measured=measured,
        threshold={"gap_to_bma": t["gap"], "accuracy_shortfall": t["accuracy_shortfall"], "tier": ctx.tier,
                   "fail_if_parent_accuracy_at_most_chance_plus_0.02_full_tier":
                       analysis.chance_parent_accuracy(run.config.H)},
        summary=f"{ctx.tier} tier, {m['steps']} steps: query loss {m['query_loss']:.4f} vs BMA {m['bma_loss']:.4f} "
                f"(gap {m['gap_to_bma']:.4f}); parent accuracy {m['parent_accuracy']:.3f} vs BMA's "
                f"{m['bma_parent_accuracy']:.3f}; logit-rule floor {m['logit_floor_loss']:.4f} "
                f"(+{m['output_rule_gap']:.4f} over BMA).",
        tables=[Table("losses (nats/token) on held-out contexts", LOSS_COLUMNS, rows)],
        figures=figs, instance=None if verdict != "fail" else {"config": m["config"], "kernel": m["kernel"]},
        tolerances={k: TRAINED_TOL for k in ("query_loss", "gap_to_bma", "parent_loss", "parent_accuracy")}
        | {"logit_rule": TRAINED_TOL})


def exp_fig3_parameters(ctx: CheckContext) -> CheckOutcome:
    """fig3: w_H peaks at offset 0 (copying heads), W_KQ block-diagonal, σ(W_OV) ≈ π (same run as fig2)."""
    run = _runs(ctx, "fig3")["fig2"]
    L, H = run.config.L, run.config.H
    copier = analysis.copier_summary(run.model, L, H)
    selector = analysis.effective_selector_matrices(run.model, L, H)
    copying = [k for e in selector["offsets"] for k in selector["heads"][str(e)]]
    peak0 = [copier["w_H_peak_offset"][k] == 0 for k in copying]
    w_ov = analysis.row_softmax_error(run.model.W_OV.detach().double().numpy(), run.kernel)
    t = THRESHOLDS[ctx.tier]
    checks = {"w_H_peaks_at_0": bool(copying) and all(peak0),
              "W_KQ_block_diagonal": bool(selector["off_block_fraction"] <= t["off_block"]),
              "softmax_W_OV_close_to_pi": w_ov <= t["w_ov_error"]}
    converged = run.metrics["parent_loss_gap"] <= t["converged_parent_gap"]
    verdict = "pass" if all(checks.values()) else ("fail" if converged else "inconclusive")
    figs = _figure(ctx, "fig3_parameters.png", lambda p: figures.parameter_figure(run.model, run.kernel, L, H, p))
    figs += _figure(ctx, "fig3_copier_heads.png", lambda p: figures.copier_figure(run.model, L, H, p))
    return CheckOutcome(
        verdict=verdict,
        measured={"copying_heads": len(copying), "heads": run.model.K, "examples_covered": selector["offsets"],
                  "w_H_peak_offsets_of_copying_heads": [copier["w_H_peak_offset"][k] for k in copying],
                  "off_block_fraction": selector["off_block_fraction"], "softmax_W_OV_error": w_ov,
                  "parent_loss_gap": run.metrics["parent_loss_gap"], **checks},
        threshold={"off_block_fraction": t["off_block"], "softmax_W_OV_error": t["w_ov_error"],
                   "converged_parent_gap": t["converged_parent_gap"]},
        summary=f"{len(copying)} of {run.model.K} heads copy one context example at the same position (examples "
                f"covered: {len(selector['offsets'])}/{L}); w_H peaks at offset 0 for {sum(peak0)} of them; "
                f"off-block energy of W_KQ {selector['off_block_fraction']:.3f}; (1/d)‖σ(W_OV) − π‖₁ = {w_ov:.3f}.",
        figures=figs,
        tolerances={"off_block_fraction": TRAINED_TOL, "softmax_W_OV_error": TRAINED_TOL,
                    "parent_loss_gap": TRAINED_TOL, "copying_heads": {"abs": 4},
                    "examples_covered": {"abs": 100}, "w_H_peak_offsets_of_copying_heads": {"abs": 100}})


def thm2_consistency(ctx: CheckContext) -> CheckOutcome:
    """Trained model's parent accuracy against L' (up to the training L) beside BMA's."""
    run = _runs(ctx, "fig2")["fig2"]
    by_L = run.metrics["by_test_L"]
    Ls = sorted(int(k) for k in by_L if int(k) <= run.config.L)
    acc = [by_L[str(L)]["parent_accuracy"] for L in Ls]
    bma = [by_L[str(L)]["bma_parent_accuracy"] for L in Ls]
    n = run.config.eval_contexts * (run.config.H - 1)
    se = float(np.sqrt(0.25 / n))  # the largest binomial standard error of an accuracy over n positions
    increasing = analysis.is_monotone(acc, increasing=True, slack=2 * se)
    converged = run.metrics["parent_loss_gap"] <= THRESHOLDS[ctx.tier]["converged_parent_gap"]
    verdict = "pass" if increasing and acc[-1] > acc[0] + 4 * se else ("fail" if converged else "inconclusive")
    return CheckOutcome(
        verdict=verdict,
        measured={"L_test": Ls, "parent_accuracy": acc, "bma_parent_accuracy": bma, "accuracy_stderr_bound": se},
        threshold={"monotone_slack": 2 * se, "min_rise": 4 * se},
        summary=f"Parent accuracy of the fig2 model rises {acc[0]:.3f} → {acc[-1]:.3f} as L' goes {Ls[0]} → {Ls[-1]} "
                f"(BMA {bma[0]:.3f} → {bma[-1]:.3f}).",
        tables=[Table("parent accuracy against L'", ["L'", "model", "BMA"], [[L, a, b] for L, a, b in zip(Ls, acc, bma)])],
        tolerances={"parent_accuracy": TRAINED_TOL})


def exp_fig5_generalization(ctx: CheckContext) -> CheckOutcome:
    """fig5: L_pa^{L'} − BMA's for each training L; does smaller training L generalize better?"""
    runs = _runs(ctx, "fig5")
    grid = {label: {int(k): row["parent_loss"] - row["bma_parent_loss"] for k, row in r.metrics["by_test_L"].items()}
            for label, r in runs.items()}
    labels = sorted(grid, key=lambda s: int(s[1:]))
    mean_gap = {label: float(np.mean(list(grid[label].values()))) for label in labels}
    near = {label: sum(g <= 0.1 for g in grid[label].values()) for label in labels}
    converged = all(runs[label].metrics["parent_loss_gap"] <= THRESHOLDS[ctx.tier]["converged_parent_gap"]
                    for label in labels)
    smaller_better = analysis.is_monotone([mean_gap[label] for label in labels], increasing=True)
    verdict = "inconclusive" if not converged else ("pass" if smaller_better else "fail")
    L_tests = sorted(grid[labels[0]])
    figs = _figure(ctx, "fig5_grid.png",
                   lambda p: figures.generalization_grid({k: runs[k].metrics for k in labels}, p))
    return CheckOutcome(
        verdict=verdict,
        measured={"mean_parent_loss_gap": mean_gap, "test_L_within_0.1_nats": near,
                  "own_L_parent_loss_gap": {k: runs[k].metrics["parent_loss_gap"] for k in labels},
                  "grid": {k: [grid[k][L] for L in L_tests] for k in labels}, "L_test": L_tests},
        threshold={"statement": "mean over L' of L_pa^{L'} − BMA's increases with the training L",
                   "converged_parent_gap": THRESHOLDS[ctx.tier]["converged_parent_gap"]},
        summary="Mean L_pa^{L'} gap to BMA over L' ∈ {" + ", ".join(map(str, L_tests)) + "}: "
                + ", ".join(f"{k}: {mean_gap[k]:.3f}" for k in labels)
                + ("" if converged else " (not every run converged at its own L: inconclusive)")
                + ". Offsets beyond the training L share w_L[L] (clipped RPE). Each copier head copies one example, so"
                " a model trained at L cannot use more than L examples at L' > L, and its heads for offsets beyond"
                " L' read the wrong examples at L' < L: every row is best near its own L.",
        tables=[Table("L_pa^{L'} − BMA", ["train L"] + [f"L'={L}" for L in L_tests],
                      [[k] + [grid[k][L] for L in L_tests] for k in labels])],
        figures=figs, instance=None if verdict != "fail" else {
            "mean_parent_loss_gap": mean_gap, "kernel": runs[labels[0]].kernel.tolist(),
            "reproduce": f"bma-verify train --preset fig5 --tier {ctx.tier} --seed {runs[labels[0]].config.seed}"},
        tolerances={"mean_parent_loss_gap": {"abs": 0.2}, "grid": {"abs": 0.3}, "test_L_within_0.1_nats": {"abs": 30},
                    "own_L_parent_loss_gap": TRAINED_TOL})


def _column_alignment(ctx: CheckContext) -> tuple[dict, object]:
    run = _runs(ctx, "fig6")["fig6"]
    selector = analysis.effective_selector_matrices(run.model, run.config.L, run.config.H)
    W_tf = selector["W_tf"]
    measured = {"column_error": analysis.column_softmax_error(W_tf, run.kernel),
                "row_error": analysis.row_softmax_error(W_tf, run.kernel),
                "examples_covered": selector["offsets"], "parent_loss_gap": run.metrics["parent_loss_gap"],
                "paper": {"column_error": 0.0278, "row_error": 0.350}, "steps": run.metrics["steps"]}
    return measured, run


def _column_verdict(ctx: CheckContext, m: dict) -> str:
    if m["column_error"] < 0.05 and m["column_error"] < m["row_error"]:
        return "pass"
    converged = m["parent_loss_gap"] <= THRESHOLDS[ctx.tier]["converged_parent_gap"] and m["examples_covered"]
    return "fail" if converged else "inconclusive"


def exp_fig6_column_alignment(ctx: CheckContext) -> CheckOutcome:
    """fig6 (d=20, H=50, L=3): (1/d)‖σ_col(W_tf) − σ_col(log π)‖₁ < 0.05 and below the row error."""
    m, run = _column_alignment(ctx)
    verdict = _column_verdict(ctx, m)
    figs = _figure(ctx, "fig6_columns.png", lambda p: figures.column_alignment_figure(
        run.model, run.kernel, run.config.L, run.config.H, p))
    return CheckOutcome(
        verdict=verdict, measured=m, threshold={"column_error": 0.05, "column_below_row": True},
        summary=f"W_tf = mean over the L context examples of the bilinear form the selector applies to that example's "
                f"same-position token pairs (W_KQ blocks weighted by the heads' copy mass): column error "
                f"{m['column_error']:.4f}, "
                f"row error {m['row_error']:.4f} (paper 0.0278 vs 0.350) after {m['steps']} steps.",
        figures=figs, instance=None if verdict != "fail" else {"kernel": run.kernel.tolist()},
        tolerances={"column_error": TRAINED_TOL, "row_error": TRAINED_TOL, "parent_loss_gap": TRAINED_TOL,
                    "examples_covered": {"abs": 100}})


def prop1_invariance(ctx: CheckContext) -> CheckOutcome:
    """Prop. 1 on the trained fig6 model: σ_col(W_tf) is identified (matches log π's), σ_row is not."""
    m, _ = _column_alignment(ctx)
    verdict = _column_verdict(ctx, m)
    return CheckOutcome(
        verdict=verdict, measured=m, threshold={"column_error": 0.05, "column_below_row": True},
        summary=f"Trained W_tf: column-softmax error {m['column_error']:.4f} vs row-softmax error "
                f"{m['row_error']:.4f}; Prop. 1 leaves column shifts free, so only the column softmax is pinned.",
        tolerances={"column_error": TRAINED_TOL, "row_error": TRAINED_TOL, "parent_loss_gap": TRAINED_TOL,
                    "examples_covered": {"abs": 100}})


def exp_robustness(ctx: CheckContext) -> CheckOutcome:
    """Appendix G: absolute-PE and standard (FFN, pre-norm) transformers at the fig2 setting."""
    runs = _runs(ctx, "robustness")
    # an alternative architecture stuck at chance may be an optimisation failure of ours, not a counterexample
    verdicts = {label: _fig2_verdict(ctx, r.metrics, can_fail=False) for label, r in runs.items()}
    # a run whose layer 1 starts as the copier is a diagnostic of the selector alone: it does not decide the claim
    given_copies = {label for label, r in runs.items() if r.config.layer1_init == "copy"}
    deciding = [v for label, v in verdicts.items() if label not in given_copies]
    verdict = ("pass" if all(v == "pass" for v in deciding)
               else "fail" if any(v == "fail" for v in deciding) else "inconclusive")
    figs, by_examples, equivalent = [], {}, {}
    for label, r in runs.items():
        batch = eval_batch(r.config, r.kernel, r.config.L)  # the contexts r.metrics were measured on
        figs += _figure(ctx, f"robustness_{label}_attention.png",
                        lambda p, r=r, batch=batch: figures.attention_heatmaps(r.model, r.kernel, batch, p))
        # how much evidence the run uses: BMA reading only the last m examples, and the m that matches the run
        by_examples[label] = analysis.bma_accuracy_by_examples(r.kernel, batch.context, batch.parents)
        equivalent[label] = analysis.examples_equivalent(r.metrics["parent_accuracy"], by_examples[label])
    t = THRESHOLDS[ctx.tier]
    chance = analysis.chance_parent_accuracy(next(iter(runs.values())).config.H)
    return CheckOutcome(
        verdict=verdict,
        measured={label: {k: r.metrics[k] for k in ("query_loss", "bma_loss", "gap_to_bma", "parent_loss",
                                                      "bma_parent_loss", "parent_accuracy", "bma_parent_accuracy",
                                                      "steps")}
                  | {"heads": r.config.K, "layer1_init": r.config.layer1_init,
                     "counts_toward_verdict": label not in given_copies, "examples_equivalent": equivalent[label],
                     "bma_parent_accuracy_last_m_examples": by_examples[label].tolist(), "verdict": verdicts[label]}
                  for label, r in runs.items()} | {"chance_parent_accuracy": chance},
        threshold={"gap_to_bma": t["gap"], "accuracy_shortfall": t["accuracy_shortfall"]},
        summary="; ".join(f"{label} ({r.config.K} heads): parent accuracy {r.metrics['parent_accuracy']:.3f} vs BMA "
                          f"{r.metrics['bma_parent_accuracy']:.3f}, gap {r.metrics['gap_to_bma']:.4f} "
                          f"({verdicts[label]}), the accuracy of BMA reading the last {equivalent[label]:.1f} of "
                          f"{r.config.L} examples"
                          for label, r in runs.items())
                + f"; chance (uniform over h' < h) {chance:.3f}. A run that stalls short of BMA is inconclusive: "
                  "an optimisation failure of ours is not evidence against the paper. The hand-set standard "
                  "model that equals BMA gives each example its own layer-1 head (tests/test_model_standard.py); "
                  "a head that averages several examples sums their tokens and loses which token at h went with "
                  "which at h'."
                + (f" Diagnostic, not counted in the verdict: {', '.join(sorted(given_copies))} starts layer 1 as "
                   "that copier (one head per example) and layer 2 at random, so it measures whether the standard "
                   "selector learns BMA's parent selection once the copies exist." if given_copies else ""),
        tables=[Table("losses (nats/token)", LOSS_COLUMNS, sum((_loss_split_rows(r.metrics, k) for k, r in runs.items()), []))],
        figures=figs,
        tolerances={key: tol for label in runs
                    for key, tol in ((label, TRAINED_TOL), (f"{label}.examples_equivalent", {"abs": 0.5}))})
