"""Checks of ``prop2-ds-quadratic`` (the continuous DS setting): the best bilinear score against the exact
posterior (exact), trained bilinear and key-norm models against BMA (model), and the paper's open question 3,
whether an FFN before query-key attention closes the gap (model, a finding of ours: ``prop2_ffn_closes_gap``).

The instance: d = 5, H = 10, ρ = 0.5, A drawn from the report seed (the same A for every check). Every tier
uses the exact (β → ∞) copier. Quick tier: 8 values of L', 250 steps for the bilinear and key-norm models, 400
for the FFN (a SwiGLU FFN per copied example); the three checks together took 116 s on 2 cores shared with
other jobs (load ≈ 6), the FFN 60 s of it. Full tier: L' = 1..30, 3000 and 1500 steps.

Negative controls (SPEC §4.1): the exact check fits the bilinear family to a posterior that is bilinear by
construction and must find no gap there; the model check applies its rule to BMA in the "shows a gap" slot and
to the trained bilinear model in the "closes the gap" slot, and must reject both; the FFN check applies its
rule to the same FFN at its initial weights, which must not close the gap.
"""
from __future__ import annotations

import numpy as np

from bma_verify.numerics.ds import ds_parent_posterior, random_orthogonal, sample_ds_task
from bma_verify.numerics.ds_fit import bilinear_only_log_posterior, exact_score_parameters, score_gap_curve
from bma_verify.reports.core import CheckContext, CheckOutcome, Control, Finding, Table, finding_status, settle

D, H, RHO = 5, 10, 0.5
SMALL_L = 5  # "small L'": L' <= 5
CLOSED_BY_L = 20  # "closing near L' ≈ 20": the bilinear model's gap has closed at every L' >= 20 tested
TRAIN_L = 30  # copier heads = the largest L' the models see (training L' ~ U{1..30})
GAP_TOL = 0.02  # nats: "within training error" of BMA (issue 6 target for the key-norm model)
# The smallest gap the convex fit tells from zero. Fitted from zero to a target inside its family (the
# control's bilinear posterior, or the key-norm fit), L-BFGS stops at in-sample gaps up to 9e-12 (L' <= 5) and
# 6e-9 nats (L' = 30), where z = gap / SE still reads 30-45: the SE alone would call that residual a gap.
# 1e-6 is 150x the largest residual and 4e4x below the claimed gap (0.044 nats at L' = 1).
FIT_RESOLUTION = 1e-6
KEY_NORM_TOL = 1e-4  # nats: the key-norm fit (family containing the posterior) reaches 3e-12 held out at L' <= 3
# Regression tolerances of the exact check. Its values did not move at all over OMP_NUM_THREADS=1|2 x
# ATEN_CPU_CAPABILITY=default|avx2 (seed 0, quick tier). What another platform's rounding can move is where
# L-BFGS stops: perturbing the fits' start by 1e-9 (a rounding-sized change of the path) moved the held-out
# values below by at most 1.7e-8 (gap, L_pa; at L' = 30, where the in-sample optimum is flat) and their SE by
# 1.2e-8; 1000x margin. Every other float moved by <= 5e-13 and keeps the default abs 1e-9.
FIT_TOLERANCES = {"bilinear_gap_eval": {"abs": 2e-5}, "bilinear_gap_eval_se": {"abs": 1.2e-5},
                  "bilinear_parent_loss": {"abs": 2e-5}}
# Spread of the trained check's values over OMP_NUM_THREADS=1|2 x ATEN_CPU_CAPABILITY=default|avx2 (seed 0,
# quick tier): the thread count moves nothing, the instruction set moves the float32 training this much. The
# tolerance is 1000x it. (A second seed moves the gaps by 2e-3 to 1.5e-2 nats: not a regression, the reference
# is rerun at its own seed.) Values not listed moved by 0 (BMA's values, accuracies, integers, flags) and keep
# the default abs 1e-9.
_TRAINED_SPREAD = {
    "bilinear_minus_best_bilinear_gap": 1.1e-9, "bilinear_small_L_gap_lower": 1.2e-9,
    "bilinear_late_L_gap_upper": 7.7e-10, "key_norm_gap_upper": 1.3e-9,
    "bilinear_gap": 1.1e-9, "bilinear_gap_se": 1.5e-10, "bilinear_max_gap": 7.8e-10, "bilinear_parent_loss": 5.5e-9,
    "bilinear_mse": 4.9e-9, "bilinear_mse_excess": 4.9e-9, "bilinear_final_train_loss": 1.9e-8,
    "key_norm_gap": 1.3e-9, "key_norm_gap_se": 3e-11, "key_norm_max_gap": 1.3e-9, "key_norm_parent_loss": 3.2e-9,
    "key_norm_mse": 4.8e-9, "key_norm_mse_excess": 4.8e-9, "key_norm_final_train_loss": 9.6e-9,
}
# The FFN run (SwiGLU per slot, 400 steps), measured the same way: OMP_NUM_THREADS=1|2 x
# ATEN_CPU_CAPABILITY=default|avx2 (seed 0, quick tier); threads moved nothing. 1000x the spread.
_FFN_SPREAD = {"ffn_gap": 1.9e-7, "ffn_gap_se": 4.8e-9, "ffn_max_gap": 1.9e-7, "ffn_gap_upper": 2e-7,
               "ffn_parent_loss": 2.4e-7, "ffn_mse": 1.1e-7, "ffn_mse_excess": 1.1e-7, "ffn_final_train_loss": 4.2e-8,
               "ffn_init_gap_upper": 8.9e-7}
TRAINED_TOLERANCES = {name: {"abs": 1000 * spread} for name, spread in {**_TRAINED_SPREAD, **_FFN_SPREAD}.items()}
FFN_TOLERANCES = {name: {"abs": 1000 * spread} for name, spread in _FFN_SPREAD.items() if name != "ffn_init_gap_upper"}
# The FFN of the paper's open question 3 (issue 14): LLaMA's gated FFN (SwiGLU, no biases) on each copied
# example, with spare residual dimensions, then query-key attention full rank over the residual width, weights
# shared by the K slots like the bilinear W (model.ds.DSModelConfig). Its own steps and rate: it needs more of
# both than the bilinear and key-norm models (250 steps at lr 0.003 left it at 0.13-0.17 nats).
BELOW_BILINEAR_L = 10  # "below the best bilinear W at every L' <= 10"
SIZES = {
    "quick": {"fit_L": (1, 2, 3, 5, 8, 12, 20, 30), "key_norm_L": (1, 3), "n_fit": 800, "n_eval": 800,
              "steps": 250, "batch": 192, "copier": "exact", "model_eval": 800,
              "ffn": {"ffn_hidden": 16, "ffn_spare": 2}, "ffn_steps": 400, "ffn_batch": 128, "ffn_lr": 0.05},
    "full": {"fit_L": tuple(range(1, 31)), "key_norm_L": (1, 2, 3, 5, 8, 12, 20, 30), "n_fit": 4000,
             "n_eval": 4000, "steps": 3000, "batch": 256, "copier": "exact", "model_eval": 4000,
             "ffn": {"ffn_hidden": 16, "ffn_spare": 2}, "ffn_steps": 1500, "ffn_batch": 256, "ffn_lr": 0.02},
}
DERIVATION = [
    ("Gaussian conditional likelihood of candidate h' (uniform prior over h' < h)",
     r"\log P(\mathrm{pa}(h)=h' \mid \mathcal D) = \sum_{l=1}^{L} \log \mathcal N\big(x^l_h;\ \rho A^\top "
     r"x^l_{h'},\ (1-\rho^2) I\big) + \mathrm{const}(h)"),
    ("expand the square", r"= -\frac{1}{2(1-\rho^2)} \sum_l \big(\|x^l_h\|^2 - 2\rho\, x^{l\top}_{h'} A x^l_h "
                          r"+ \rho^2 \|A^\top x^l_{h'}\|^2\big) + \mathrm{const}(h)"),
    ("Proposition 2: a bilinear term and a key-only quadratic term",
     r"= \frac{\rho}{1-\rho^2} \sum_l x^{l\top}_{h'} A x^l_h \;-\; \frac{\rho^2}{2(1-\rho^2)} \sum_l "
     r"\|x^l_{h'}\|^2 + \mathrm{const}(h)"),
    ("the key-norm family contains it; the bilinear family does not (the second term varies with h')",
     r"W^\star = \tfrac{\rho}{1-\rho^2} A,\quad c^\star = -\tfrac{\rho^2}{2(1-\rho^2)}"),
    ("gap of a selector A to BMA, measured exactly given each context",
     r"L_{pa}(A) - L_{pa}(\mathrm{BMA}) = \mathbb E_{\mathcal D} \tfrac{1}{H-1}\sum_{h\ge1} "
     r"\mathrm{KL}\big(P(\mathrm{pa}(h)=\cdot \mid \mathcal D)\,\|\,A_{h\to\cdot}\big)"),
]


def _sizes(ctx: CheckContext) -> dict:
    return SIZES[ctx.tier]


def _instance_A(ctx: CheckContext) -> np.ndarray:
    """The orthogonal A of this report's DS instance (the same for both checks)."""
    return random_orthogonal(D, rng=ctx.rng("prop2-ds-A"))


def _figure(*args, **kwargs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def _save(fig, ctx: CheckContext, filename: str) -> str:
    import matplotlib.pyplot as plt

    fig.savefig(ctx.figure_path(filename), dpi=80, metadata={"Software": None})
    plt.close(fig)
    return filename


def _fit_curves(ctx: CheckContext) -> dict:
    """Best bilinear and best key-norm score at each L' (convex fits), and the control's bilinear fit to a
    posterior that is bilinear; computed once per report."""
    key = ("ds", "fit", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        s = _sizes(ctx)
        A = _instance_A(ctx)
        sizes = {"n_fit": s["n_fit"], "n_eval": s["n_eval"], "quiet": ctx.quiet}
        bilinear = score_gap_curve(A, RHO, H, s["fit_L"], rng=ctx.rng("prop2-bilinear-fit"), **sizes)
        key_norm = score_gap_curve(A, RHO, H, s["key_norm_L"], rng=ctx.rng("prop2-key-norm-fit"), key_norm=True,
                                   **sizes)
        control = score_gap_curve(A, RHO, H, s["fit_L"], rng=ctx.rng("prop2-bilinear-fit-control"),
                                  target=bilinear_only_log_posterior, **sizes)
        ctx.cache[key] = {"A": A, "bilinear": bilinear, "key_norm": key_norm, "control": control}
    return ctx.cache[key]


def _closing_L(L_values, gaps, ses, tol: float):
    """The smallest L' from which on every measured gap's upper 2-SE bound is below ``tol`` (None if never)."""
    upper = np.asarray(gaps) + 2 * np.asarray(ses)
    for i, L in enumerate(L_values):
        if np.all(upper[i:] < tol):
            return int(L)
    return None


def _decide_fit(curve: dict) -> dict:
    """The exact check's rule on one best-bilinear curve (``score_gap_curve``), applied to the real posterior
    and to the control alike.

    gap found: at every L' <= 5 the in-sample gap (the best W on those contexts: a lower estimate of the
    family's optimum) exceeds both 3 standard errors over contexts and the fit's resolution; shrinks: the
    held-out gap at the largest L' is below the largest small-L' held-out gap by more than 3 + 3 SE (and the
    resolution). pass = gap found and shrinks; inconclusive when an L' <= 5 fit did not converge (its
    in-sample gap is then no lower estimate).
    """
    L_values = curve["L"]
    small = [i for i, L in enumerate(L_values) if L <= SMALL_L]
    gap, se = np.asarray(curve["gap_fit"]), np.asarray(curve["gap_fit_se"])
    ev, ev_se = np.asarray(curve["gap_eval"]), np.asarray(curve["gap_eval_se"])
    gap_at = [bool(gap[i] > max(3 * se[i], FIT_RESOLUTION)) for i in small]
    i_peak = max(small, key=lambda i: ev[i])
    margin = (ev[i_peak] - 3 * ev_se[i_peak]) - (ev[-1] + 3 * ev_se[-1])
    shrinks = bool(margin > FIT_RESOLUTION)
    fits_converged = all(curve["converged"][i] for i in small)
    found = all(gap_at)
    verdict = "inconclusive" if not fits_converged else ("pass" if found and shrinks else "fail")
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, gap / np.where(se > 0, se, 1.0), 0.0)
    return {"verdict": verdict, "gap_found": found, "gap_at_small_L": gap_at, "shrinks": shrinks,
            "fits_converged": fits_converged, "i_peak": i_peak, "z": z.tolist()}


def prop2_bilinear_fit(ctx: CheckContext) -> CheckOutcome:
    """Exact check of ``prop2-ds-quadratic``: the best bilinear W against the exact DS posterior, gap vs L'.

    Verdict (:func:`_decide_fit`): pass when the best bilinear W keeps a gap at every L' <= 5 (in-sample gap
    > 3 SE and > the fit's resolution 1e-6 nats) and the gap shrinks by the largest L' (held-out, by 3 + 3
    SE); fail otherwise. Inconclusive when the fitter is not trusted: a fit at L' <= 5 did not converge, or the
    best key-norm score, whose family contains the posterior by construction, misses zero gap by 1e-4 nats.

    Control: the same fit and rule applied to :func:`numerics.ds_fit.bilinear_only_log_posterior` (the exact
    score without its key-only term, a bilinear posterior by construction); the rule must find no gap there.
    """
    s = _sizes(ctx)
    fits = _fit_curves(ctx)
    A, bil, kn, ctl = fits["A"], fits["bilinear"], fits["key_norm"], fits["control"]
    L_values = bil["L"]
    small = [i for i, L in enumerate(L_values) if L <= SMALL_L]
    rule, control_rule = _decide_fit(bil), _decide_fit(ctl)
    i_peak = rule["i_peak"]
    key_norm_closes = max(kn["gap_eval"]) < KEY_NORM_TOL
    closing = _closing_L(L_values, bil["gap_eval"], bil["gap_eval_se"], 0.01)
    _, c_star = exact_score_parameters(A, RHO)
    verdict, reason = rule["verdict"], ""
    if not rule["fits_converged"]:
        reason = "a bilinear fit at L' <= 5 did not converge: its in-sample gap is no lower estimate"
    elif not key_norm_closes:
        verdict = "inconclusive"
        reason = (f"the fitter missed the key-norm family's known optimum (gap {max(kn['gap_eval']):.1e} >= "
                  f"{KEY_NORM_TOL:g}): its bilinear optimum is not trusted")
    measured = {
        "L": L_values, "bilinear_gap_fit": bil["gap_fit"], "bilinear_gap_fit_se": bil["gap_fit_se"],
        "bilinear_gap_fit_z_small_L": [rule["z"][i] for i in small],
        "bilinear_gap_eval": bil["gap_eval"], "bilinear_gap_eval_se": bil["gap_eval_se"],
        "bma_parent_loss": bil["bma_parent_loss"], "bilinear_parent_loss": bil["fit_parent_loss"],
        "bilinear_converged": bil["converged"], "gap_found": rule["gap_found"], "shrinks": rule["shrinks"],
        "key_norm_L": kn["L"], "key_norm_gap_eval": kn["gap_eval"],
        "key_norm_coef": kn["key_norm_coef"], "exact_key_norm_coef": c_star,
        "peak_L": L_values[i_peak], "peak_gap": bil["gap_eval"][i_peak],
        "closing_L_below_0.01": closing, "d": D, "H": H, "rho": RHO, "n_fit": s["n_fit"], "n_eval": s["n_eval"],
    }
    control = Control(
        description="the same fit and rule on a posterior that is bilinear by construction (the exact score "
                    "without its key-only quadratic term): no gap may be found",
        measured={"gap_fit_small_L": [ctl["gap_fit"][i] for i in small],
                  "gap_fit_se_small_L": [ctl["gap_fit_se"][i] for i in small],
                  "z_small_L": [control_rule["z"][i] for i in small], "max_gap_eval": max(ctl["gap_eval"]),
                  "gap_at_small_L": control_rule["gap_at_small_L"], "shrinks": control_rule["shrinks"],
                  "verdict": control_rule["verdict"]},
        rejected=not control_rule["gap_found"])
    rows = [[L, f"{bil['gap_fit'][i]:.4f} ± {bil['gap_fit_se'][i]:.4f}",
             f"{bil['gap_eval'][i]:.4f} ± {bil['gap_eval_se'][i]:.4f}", f"{bil['bma_parent_loss'][i]:.4f}",
             f"{bil['fit_parent_loss'][i]:.4f}", f"{ctl['gap_fit'][i]:.1e}"] for i, L in enumerate(L_values)]
    table = Table("best bilinear W per L' (convex fit): L_pa gap to the exact posterior, nats",
                  ["L'", "gap, fit contexts (lower est.)", "gap, fresh contexts (upper est.)", "L_pa BMA",
                   "L_pa bilinear", "control: gap to a bilinear posterior"], rows)
    kn_table = Table("best key-norm score (W, c) per L' (its family contains the posterior: a check of the fitter)",
                     ["L'", "gap, fresh contexts", "fitted c", "exact c"],
                     [[L, f"{g:.2e}", f"{c:.5f}", f"{c_star:.5f}"]
                      for L, g, c in zip(kn["L"], kn["gap_eval"], kn["key_norm_coef"])])
    fig, ax = _figure(figsize=(6, 3.6))
    ax.errorbar(L_values, bil["gap_eval"], yerr=2 * np.asarray(bil["gap_eval_se"]), marker="o", ms=3,
                label="best bilinear W (fresh contexts, ±2 SE)")
    ax.plot(L_values, bil["gap_fit"], ls="--", lw=1, label="best bilinear W (fit contexts)")
    ax.plot(kn["L"], kn["gap_eval"], marker="s", ms=3, ls=":", label="best key-norm score")
    ax.plot(L_values, ctl["gap_fit"], marker="x", ms=4, ls="-.", lw=1,
            label="control: best bilinear W, bilinear posterior")
    ax.set_xlabel("L' (in-context examples)")
    ax.set_ylabel("L_pa gap to BMA (nats)")
    ax.set_title(f"DS, d={D}, H={H}, ρ={RHO}: Proposition 2 gap")
    ax.legend(fontsize=7)
    fig.tight_layout()
    figures = [_save(fig, ctx, "prop2_bilinear_fit_gap.png")]
    peak = bil["gap_eval"][i_peak]
    z_min = min(rule["z"][i] for i in small)
    summary = (f"best bilinear W: gap {bil['gap_fit'][small[0]]:.4f} nats at L'={L_values[small[0]]} (z >= "
               f"{z_min:.0f} over L' <= {SMALL_L}), peak {peak:.4f} at L'={L_values[i_peak]}, "
               f"{bil['gap_eval'][-1]:.4f} at L'={L_values[-1]}"
               f"{'' if closing is None else f', below 0.01 from L={closing} on'}; fitted to a bilinear "
               f"posterior (control) it reaches {max(ctl['gap_fit'][i] for i in small):.0e}, "
               f"{'no gap' if control.rejected else 'a GAP'} by the same rule; the key-norm score, whose family "
               f"contains the posterior, reaches {max(kn['gap_eval']):.1e} (fitted c = "
               f"{kn['key_norm_coef'][0]:.4f}, exact {c_star:.4f}).")
    instance = None
    if verdict == "fail":
        instance = {"claim": "prop2-ds-quadratic", "A": A.tolist(), "rho": RHO, "d": D, "H": H,
                    "L": L_values, "positive_at_small_L": rule["gap_at_small_L"], "shrinks": rule["shrinks"],
                    "key_norm_closes": bool(key_norm_closes)}
    return CheckOutcome(
        verdict=verdict, measured=measured, reason=reason,
        threshold={"gap": f"gap_fit > max(3 SE, {FIT_RESOLUTION:g}) at every L' <= {SMALL_L}",
                   "shrinks": "gap(L'max) + 3 SE < peak − 3 SE (by > the resolution)",
                   "fitter": f"key-norm held-out gap < {KEY_NORM_TOL:g}; fits at L' <= {SMALL_L} converged"},
        summary=summary, derivation=DERIVATION, tables=[table, kn_table], figures=figures, instance=instance,
        control=control, tolerances=FIT_TOLERANCES,
    )


def _train_config(ctx: CheckContext, **overrides):
    """The training configuration of the report's DS models (the seed derived from the report seed)."""
    from bma_verify.model.ds import TrainConfig

    s = _sizes(ctx)
    options = {"steps": s["steps"], "batch_size": s["batch"], "seed": ctx.seed_for("prop2-ds-train") % (2 ** 31)}
    return TrainConfig(**{**options, **overrides})


def _trained(ctx: CheckContext) -> dict:
    """The bilinear and key-norm models trained and evaluated once per report (shared through ``ctx.cache``);
    the FFN model has its own run (:func:`_trained_ffn`)."""
    from bma_verify.model.ds import DSExperiment, run_ds_experiment

    key = ("ds", "models", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        s = _sizes(ctx)
        exp = DSExperiment(d=D, H=H, L=TRAIN_L, rho=RHO, copier=s["copier"], L_values=s["fit_L"],
                           n_eval=s["model_eval"], train=_train_config(ctx), selectors=("bilinear", "key-norm"))
        ctx.cache[key] = run_ds_experiment(exp, A=_instance_A(ctx), device="cpu", quiet=ctx.quiet)
    return ctx.cache[key]


def _control_models(ctx: CheckContext) -> dict:
    """Evaluation of the model the trained check's gap rule must reject, once per report.

    ``exact-key-norm``: the key-norm selector loaded with the exact (W*, c*) and read-out ρA, which is BMA by
    construction, so it has no gap. (The FFN's control, its initial weights, is evaluated in :func:`_trained_ffn`.)
    """
    import torch

    from bma_verify.model.ds import DSModel, DSModelConfig, evaluate_ds_model

    key = ("ds", "control-models", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        s = _sizes(ctx)
        A = _instance_A(ctx)
        cfg = {"d": D, "H": H, "L": TRAIN_L, "copier": s["copier"]}
        exact = DSModel(DSModelConfig(selector="key-norm", **cfg))
        W, c = exact_score_parameters(A, RHO)
        with torch.no_grad():
            exact.W.copy_(torch.as_tensor(W))
            exact.c.fill_(c)
            exact.W_O.copy_(torch.as_tensor(RHO * A))  # row form of the BMA mean ρAᵀx
        ctx.cache[key] = {"exact-key-norm": evaluate_ds_model(exact, A, RHO, s["fit_L"], n_eval=s["model_eval"],
                                                              rng=ctx.rng("prop2-ds-control-exact-key-norm"))}
    return ctx.cache[key]


def _trained_ffn(ctx: CheckContext) -> dict:
    """The FFN model (open question 3) trained and evaluated once per report, with its control: the same model
    at the initial weights of its run (``train_ds_models`` for one step at learning rate 0 with the same seed:
    the same draws, unchanged). Evaluated on the contexts of the bilinear and key-norm models (paired)."""
    from dataclasses import asdict

    from bma_verify.model.ds import DSModelConfig, evaluate_ds_model, train_ds_models

    key = ("ds", "ffn", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        s = _sizes(ctx)
        A = _instance_A(ctx)
        cfg = DSModelConfig(d=D, H=H, L=TRAIN_L, selector="ffn", copier=s["copier"], **s["ffn"])
        train = _train_config(ctx, steps=s["ffn_steps"], batch_size=s["ffn_batch"], ffn_lr=s["ffn_lr"])
        (model,), (history,) = train_ds_models([cfg], A, RHO, train, quiet=ctx.quiet)
        (init,), _ = train_ds_models([cfg], A, RHO, _train_config(ctx, steps=1, batch_size=2, lr=0.0, ffn_lr=0.0,
                                                                  seed=train.seed))
        evals = {}
        for name, m in (("trained", model), ("init", init)):
            rng = np.random.default_rng(np.random.SeedSequence([train.seed, 7]))  # run_ds_experiment's stream
            evals[name] = evaluate_ds_model(m, A, RHO, s["fit_L"], n_eval=s["model_eval"], rng=rng)
        ctx.cache[key] = {"model": model, "history": history, "eval": evals["trained"], "init_eval": evals["init"],
                          "config": asdict(cfg), "train": asdict(train)}
    return ctx.cache[key]


def _gap_bounds(ev: dict, L_range) -> tuple[float, float]:
    """(largest lower, largest upper) 3-SE bound of a model's L_pa gap over the L' in ``L_range`` (a predicate)."""
    idx = [i for i, L in enumerate(ev["L"]) if L_range(L)]
    g, se = np.asarray(ev["gap"])[idx], np.asarray(ev["gap_se"])[idx]
    return float(np.max(g - 3 * se)), float(np.max(g + 3 * se))


def _closes(ev: dict) -> tuple[bool, float]:
    """'Closes the gap': the upper 3-SE bound of the gap is within GAP_TOL of BMA at every L' tested."""
    upper = _gap_bounds(ev, lambda L: True)[1]
    return upper <= GAP_TOL, upper


def _decide_models(gap_model: dict, closing_model: dict) -> dict:
    """The trained check's rule on two evaluated models (``evaluate_ds_model``), applied to the real pair
    (trained bilinear, trained key-norm) and to the control pair alike.

    shows gap: the gap model's gap exceeds GAP_TOL by 3 SE at some L' <= 5 and is within GAP_TOL (+3 SE) at
    every L' >= 20 tested; closes: :func:`_closes` on the closing model. pass = both.
    """
    small_lower = _gap_bounds(gap_model, lambda L: L <= SMALL_L)[0]
    late_upper = _gap_bounds(gap_model, lambda L: L >= min(CLOSED_BY_L, gap_model["L"][-1]))[1]
    shows_gap = small_lower > GAP_TOL and late_upper <= GAP_TOL
    closes, closing_upper = _closes(closing_model)
    return {"verdict": "pass" if shows_gap and closes else "fail", "shows_gap": bool(shows_gap),
            "closes": bool(closes), "small_L_gap_lower": small_lower, "late_L_gap_upper": late_upper,
            "closing_gap_upper": closing_upper}


def _decide_ffn(ffn: dict, fit: dict) -> dict:
    """The FFN rule (open question 3) on one evaluated model, applied to the trained FFN and to its control (the
    same FFN at its initial weights) alike.

    closes: :func:`_closes` (within GAP_TOL of BMA, upper 3-SE bound, at every L' tested); below bilinear: at
    every L' <= 10 tested, the model's gap + 3 SE is below the best bilinear W's in-sample gap − 3 SE (a lower
    estimate of the family's best: a gap no bilinear score reaches). pass = both.
    """
    closes, upper = _closes(ffn)
    fit_lower = dict(zip(fit["L"], zip(fit["gap_fit"], fit["gap_fit_se"])))
    below_at, not_below_at = [], []
    for i, L in enumerate(ffn["L"]):
        if L <= BELOW_BILINEAR_L and L in fit_lower:
            below = ffn["gap"][i] + 3 * ffn["gap_se"][i] < fit_lower[L][0] - 3 * fit_lower[L][1]
            (below_at if below else not_below_at).append(int(L))
    below_all = bool(below_at) and not not_below_at
    return {"verdict": "pass" if closes and below_all else "fail", "closes": bool(closes), "gap_upper": upper,
            "below_best_bilinear": below_all, "below_at_L": below_at, "not_below_at_L": not_below_at,
            "max_gap": float(max(ffn["gap"]))}


def _ffn_description(ctx: CheckContext) -> str:
    s = _sizes(ctx)
    f = s["ffn"]
    return (f"SwiGLU FFN (LLaMA's gated FFN, no biases; hidden {f['ffn_hidden']}, {f['ffn_spare']} spare residual "
            f"dimension{'s' if f['ffn_spare'] != 1 else ''}) on each copied example, then query-key attention "
            f"full rank over the residual width, weights shared by the {TRAIN_L} slots; {s['ffn_steps']} steps of "
            f"batch {s['ffn_batch']}, Adam lr {s['ffn_lr']} with cosine decay")


def _attention_figure(ctx: CheckContext, result: dict, A: np.ndarray, L: int) -> str:
    from bma_verify.model.ds import model_outputs

    rng = ctx.rng("prop2-ds-attention-context")
    task = sample_ds_task(A, RHO, 1, L, H, rng=rng)
    panels = [("BMA (exact posterior)", ds_parent_posterior(A, RHO, task.context)[0])]
    for name, model in result["models"].items():
        _, log_att = model_outputs(model, task.context, task.query)
        panels.append((f"{name} model", np.exp(log_att[0])))
    fig, axes = _figure(1, len(panels), figsize=(3.0 * len(panels), 3.0))
    for ax, (title, att) in zip(axes, panels):
        ax.imshow(att, vmin=0, vmax=1, cmap="viridis")
        ax.scatter(task.parents[0, 1:], np.arange(1, H), marker="x", c="red", s=18, label="true parent")
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("h' (key)", fontsize=7)
        ax.set_ylabel("h (query)", fontsize=7)
    axes[-1].legend(fontsize=6, loc="upper right", framealpha=0.5)
    fig.suptitle(f"second-layer attention, one context with L'={L} (red x: true parent)", fontsize=9)
    fig.tight_layout()
    return _save(fig, ctx, "prop2_attention_maps.png")


def prop2_trained_models(ctx: CheckContext) -> CheckOutcome:
    """Model check (reproduction) of ``prop2-ds-quadratic``: trained bilinear, key-norm and FFN models vs BMA.

    Verdict (:func:`_decide_models` on the trained bilinear and key-norm models): pass when the bilinear model
    shows the gap (it exceeds 0.02 nats by 3 SE at some L' <= 5 and is within 0.02 nats, +3 SE, at every
    L' >= 20 tested) and the key-norm model closes it (within 0.02 nats, +3 SE, at every L'). The paper's
    "a variant with a quadratic key feature or an FFN closes it" is met by either variant; the key-norm
    family contains BMA by construction, so its closing shows that training reaches that member.

    Control: the same rule with both slots planted false: the gap slot holds the key-norm selector at the exact
    (W*, c*) (BMA itself: no gap), the closing slot the trained bilinear model (its family's best gap is
    0.07 nats at L' = 3, the exact check); the rule must reject both. Converged (stated criterion): the
    bilinear model is within 0.01 nats (+3 + 3 SE) of the best bilinear W's held-out gap at every L' (it
    reached its family's optimum) and the key-norm training loss has flattened (last 10 % of steps within 1 %
    of the 10 % before). A miss with unconverged training is inconclusive, not fail.

    The FFN model (the paper's open question 3) is judged by its own rule (:func:`_decide_ffn`) with its own
    control (the same FFN at its initial weights must not close the gap); it is reported here as
    ``ffn_closes_gap`` and does not decide this check's verdict (its own check: :func:`prop2_ffn_closes_gap`).
    """
    s = _sizes(ctx)
    result = _trained(ctx)
    fits = _fit_curves(ctx)
    controls = _control_models(ctx)
    ffn_run = _trained_ffn(ctx)
    A = np.asarray(result["A"])
    ev = {name: m["eval"] for name, m in result["metrics"].items()}
    ev["ffn"] = ffn_run["eval"]
    histories = {name: m["history"] for name, m in result["metrics"].items()}
    histories["ffn"] = ffn_run["history"]
    L_values = ev["bilinear"]["L"]
    bil, kn, ffn = ev["bilinear"], ev["key-norm"], ev["ffn"]
    rule = _decide_models(bil, kn)
    control_rule = _decide_models(controls["exact-key-norm"], bil)
    control = Control(
        description="the same rule with planted slots: gap slot = the key-norm selector at the exact (W*, c*) "
                    "(BMA, no gap); closing slot = the trained bilinear model (cannot close: Proposition 2)",
        measured={"exact_key_norm_small_L_gap_lower": control_rule["small_L_gap_lower"],
                  "exact_key_norm_max_gap": float(max(controls["exact-key-norm"]["gap"])),
                  "shows_gap": control_rule["shows_gap"],
                  "bilinear_closing_gap_upper": control_rule["closing_gap_upper"],
                  "closes": control_rule["closes"]},
        rejected=not control_rule["shows_gap"] and not control_rule["closes"])
    fit = fits["bilinear"]
    fit_gap = dict(zip(fit["L"], zip(fit["gap_eval"], fit["gap_eval_se"])))
    control_distance = [bil["gap"][i] - fit_gap[L][0] for i, L in enumerate(L_values)]
    bilinear_at_optimum = all(abs(dist) <= 0.01 + 3 * (bil["gap_se"][i] + fit_gap[L][1])
                              for i, (L, dist) in enumerate(zip(L_values, control_distance)))
    key_norm_flat = bool(result["metrics"]["key-norm"]["history"]["converged"])
    converged = bilinear_at_optimum and key_norm_flat
    verdict, reason = rule["verdict"], ""
    if verdict == "fail" and not converged:
        verdict, reason = "inconclusive", "not converged: the rule missed on a run that has not converged"
    # The FFN (open question 3) under its own rule; its control is the FFN at its initial weights.
    ffn_rule, ffn_init_rule = _decide_ffn(ffn, fit), _decide_ffn(ffn_run["init_eval"], fit)
    ffn_below_bilinear = ffn_rule["below_at_L"]
    ffn_closing = _closing_L(L_values, ffn["gap"], ffn["gap_se"], GAP_TOL)
    measured = {"L": L_values, "steps": s["steps"], "copier": s["copier"], "d": D, "H": H, "rho": RHO,
                "train_L_max": TRAIN_L, "bilinear_minus_best_bilinear_gap": control_distance,
                "training_converged": bool(converged), "bilinear_at_family_optimum": bool(bilinear_at_optimum),
                "key_norm_loss_flat": key_norm_flat, "bilinear_shows_gap": rule["shows_gap"],
                "key_norm_closes_gap": rule["closes"], "bilinear_small_L_gap_lower": rule["small_L_gap_lower"],
                "bilinear_late_L_gap_upper": rule["late_L_gap_upper"], "key_norm_gap_upper": rule["closing_gap_upper"],
                "ffn_closes_gap": ffn_rule["verdict"] == "pass", "ffn_gap_upper": ffn_rule["gap_upper"],
                "ffn_init_closes_gap": ffn_init_rule["verdict"] == "pass",
                "ffn_init_gap_upper": ffn_init_rule["gap_upper"],
                "ffn_loss_flat": bool(ffn_run["history"]["converged"]), "ffn_steps": s["ffn_steps"],
                "ffn_closes_gap_from_L": ffn_closing, "ffn_below_best_bilinear_at_L": ffn_below_bilinear}
    for name, e in ev.items():
        tag = name.replace("-", "_")
        measured[f"{tag}_gap"] = e["gap"]
        measured[f"{tag}_gap_se"] = e["gap_se"]
        measured[f"{tag}_max_gap"] = float(max(e["gap"]))
        measured[f"{tag}_parent_loss"] = e["parent_loss"]
        measured[f"{tag}_mse"] = e["mse"]
        measured[f"{tag}_mse_excess"] = e["mse_excess"]
        measured[f"{tag}_parent_accuracy"] = e["parent_accuracy"]
        loss = histories[name]["loss"]
        measured[f"{tag}_final_train_loss"] = float(np.mean(loss[-max(1, len(loss) // 10):]))
    measured["bma_parent_loss"] = bil["bma_parent_loss"]
    measured["bma_mse"] = bil["bma_mse"]
    rows = []
    for i, L in enumerate(L_values):
        rows.append([L] + [f"{ev[n]['gap'][i]:.4f} ± {ev[n]['gap_se'][i]:.4f}" for n in ("bilinear", "key-norm", "ffn")]
                    + [f"{bil['bma_parent_loss'][i]:.4f}"]
                    + [f"{ev[n]['mse_excess'][i]:+.4f}" for n in ("bilinear", "key-norm", "ffn")])
    table = Table("trained models: L_pa gap to BMA (nats, ± SE) and excess squared error over BMA, per L'",
                  ["L'", "gap bilinear", "gap key-norm", "gap FFN", "L_pa BMA", "ΔMSE bilinear", "ΔMSE key-norm",
                   "ΔMSE FFN"], rows)
    fig, ax = _figure(figsize=(6.4, 3.8))
    ax.plot(fit["L"], fit["gap_eval"], color="k", ls="--", lw=1, label="best bilinear W (exact fit)")
    for name in ("bilinear", "key-norm", "ffn"):
        ax.errorbar(L_values, ev[name]["gap"], yerr=2 * np.asarray(ev[name]["gap_se"]), marker="o", ms=3,
                    label=f"trained {name} model")
    ax.plot(L_values, ffn_run["init_eval"]["gap"], color="grey", ls=":", marker="x", ms=3,
            label="FFN model at its initial weights")
    ax.axhline(GAP_TOL, color="grey", lw=0.8, ls=":", label=f"{GAP_TOL} nats")
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("L' (in-context examples at test)")
    ax.set_ylabel("L_pa gap to BMA (nats)")
    ax.set_title(f"DS (d={D}, H={H}, ρ={RHO}), {s['steps']} steps (FFN {s['ffn_steps']}), {s['copier']} copier",
                 fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    figures = [_save(fig, ctx, "prop2_trained_gap.png"),
               _attention_figure(ctx, {"models": {**result["models"], "ffn": ffn_run["model"]}}, A, L=3)]
    summary = (f"bilinear model: gap >= {rule['small_L_gap_lower']:.4f} nats (3-SE lower bound) at L' <= {SMALL_L}, "
               f"<= {rule['late_L_gap_upper']:.4f} at L' >= {CLOSED_BY_L}; key-norm model (its family contains BMA "
               f"by construction) within {rule['closing_gap_upper']:.4f} of BMA at every L' (tolerance {GAP_TOL}); "
               f"control (BMA in the gap slot, the bilinear model in the closing slot) "
               f"{'rejected' if control.rejected else 'NOT rejected'}; FFN model (open question 3, not deciding): "
               f"{'closes' if ffn_rule['verdict'] == 'pass' else 'does not close'} the gap (max "
               f"{ffn_rule['max_gap']:.4f}, below the best bilinear W at L' in {ffn_below_bilinear or 'none'}; "
               f"control, at its initial weights, {ffn_init_rule['gap_upper']:.2f}: "
               f"{'NOT ' if ffn_init_rule['verdict'] == 'pass' else ''}rejected) after {s['ffn_steps']} steps; "
               f"training {'converged' if converged else 'NOT converged'} (bilinear model within "
               f"{max(np.abs(control_distance)):.4f} of its family's optimum).")
    assumptions = [
        "the key-norm model's family contains BMA by construction (W = ρ/(1−ρ²)A, c = −ρ²/(2(1−ρ²))): its "
        "closing the gap shows that training reaches that member, not that a quadratic key feature is learned",
        "'a variant with a quadratic key feature or an FFN closes it' is met by either variant; the FFN model "
        f"({_ffn_description(ctx)}) is judged apart (open question 3) and does not decide this verdict",
        f"'closes' = within {GAP_TOL} nats of BMA (+3 SE) at every L' tested; 'gap at small L'' = above "
        f"{GAP_TOL} nats by 3 SE at some L' <= {SMALL_L}; 'closing near L' ≈ 20' = within {GAP_TOL} (+3 SE) at "
        f"every L' >= {CLOSED_BY_L} tested",
        f"layer 1 is the exact (β → ∞) copier, not trained; training L' ~ U{{1..{TRAIN_L}}} zero-padded, squared "
        f"error on the query, Adam (lr 0.02) with cosine decay, {s['steps']} steps of batch {s['batch']} (the FFN: "
        f"its own run, above)",
    ]
    instance = None
    if verdict == "fail":
        instance = {"claim": "prop2-ds-quadratic", "A": A.tolist(), "rho": RHO, "d": D, "H": H, "L": L_values,
                    "key_norm_gap": kn["gap"], "bilinear_gap": bil["gap"], "steps": s["steps"],
                    "seed": ctx.seed}
    return CheckOutcome(
        verdict=verdict, measured=measured, reason=reason, converged=bool(converged), control=control,
        assumptions=assumptions,
        threshold={"key_norm_gap_upper_max": GAP_TOL, "bilinear_small_L_gap_lower_min": GAP_TOL,
                   f"bilinear_gap_upper_at_L_ge_{CLOSED_BY_L}_max": GAP_TOL,
                   "converged": "bilinear within 0.01 nats (+3 + 3 SE) of the best bilinear W at every L'; "
                                "key-norm loss flat (last 10 % of steps within 1 % of the 10 % before)"},
        summary=summary, derivation=DERIVATION[-1:], tables=[table], figures=figures, instance=instance,
        tolerances=TRAINED_TOLERANCES,
    )


def prop2_ffn_closes_gap(ctx: CheckContext) -> CheckOutcome:
    """Model check (stronger: the paper's open question 3) of ``prop2-ds-quadratic``: does an FFN before
    query-key attention close the DS gap? A finding of ours, never a failure of the paper.

    The model: the exact copier, then a SwiGLU FFN (LLaMA's gated FFN, no biases) with residual on each copied
    example (zero-padded with spare residual dimensions), then query-key attention full rank over the residual
    width, the weights shared by the K slots like the bilinear W; nothing of ‖x‖² is built in (a product of
    two linear maps of u can form it, the training has to find it). Trained on its own (steps and rate of
    ``SIZES[tier]``), evaluated on the contexts of the bilinear and key-norm models.

    Verdict (:func:`_decide_ffn`): pass when the trained FFN is within 0.02 nats of BMA (upper 3-SE bound) at
    every L' tested and below the best bilinear W (in-sample gap, a lower estimate of the family's best, by
    3 + 3 SE) at every L' <= 10 tested: "reproduced at this scale"; fail (finding refuted at this scale) when it
    misses on a converged run; inconclusive when it misses and its training loss has not flattened (last 10 %
    of steps within 1 % of the 10 % before).

    Control: the same rule on the same FFN at its initial weights (the draws of its run, untrained): it must not
    close the gap.
    """
    s = _sizes(ctx)
    fit = _fit_curves(ctx)["bilinear"]
    run = _trained_ffn(ctx)
    ev, init = run["eval"], run["init_eval"]
    rule, control_rule = _decide_ffn(ev, fit), _decide_ffn(init, fit)
    converged = bool(run["history"]["converged"])
    verdict, reason = rule["verdict"], ""
    if verdict == "fail" and not converged:
        verdict, reason = "inconclusive", "not converged: the FFN missed on a run whose loss has not flattened"
    L_values = ev["L"]
    fit_gap = dict(zip(fit["L"], zip(fit["gap_fit"], fit["gap_fit_se"])))
    loss = run["history"]["loss"]
    measured = {"L": L_values, "ffn_gap": ev["gap"], "ffn_gap_se": ev["gap_se"], "ffn_max_gap": rule["max_gap"],
                "ffn_gap_upper": rule["gap_upper"], "ffn_closes_gap": rule["closes"],
                "ffn_below_best_bilinear": rule["below_best_bilinear"],
                "ffn_below_best_bilinear_at_L": rule["below_at_L"],
                "ffn_not_below_best_bilinear_at_L": rule["not_below_at_L"],
                "best_bilinear_gap_fit": [fit_gap[L][0] if L in fit_gap else None for L in L_values],
                "ffn_parent_loss": ev["parent_loss"], "bma_parent_loss": ev["bma_parent_loss"],
                "ffn_mse_excess": ev["mse_excess"],
                "ffn_final_train_loss": float(np.mean(loss[-max(1, len(loss) // 10):])),
                "ffn_loss_flat": converged, "steps": s["ffn_steps"], "batch": s["ffn_batch"], "lr": s["ffn_lr"],
                "ffn_hidden": s["ffn"]["ffn_hidden"], "ffn_spare": s["ffn"]["ffn_spare"],
                "d": D, "H": H, "rho": RHO, "train_L_max": TRAIN_L}
    control = Control(
        description="the same FFN at its initial weights (its run's draws, untrained): must not close the gap",
        measured={"max_gap": control_rule["max_gap"], "gap_upper": control_rule["gap_upper"],
                  "closes": control_rule["closes"], "below_best_bilinear_at_L": control_rule["below_at_L"],
                  "verdict": control_rule["verdict"]},
        rejected=control_rule["verdict"] != "pass")
    rows = [[L, f"{ev['gap'][i]:.4f} ± {ev['gap_se'][i]:.4f}",
             f"{fit_gap[L][0]:.4f} ± {fit_gap[L][1]:.4f}" if L in fit_gap else "—",
             f"{init['gap'][i]:.3f}", f"{ev['mse_excess'][i]:+.4f}"] for i, L in enumerate(L_values)]
    table = Table("FFN model (open question 3): L_pa gap to BMA per L' (nats, ± SE)",
                  ["L'", "gap FFN (trained)", "best bilinear W (fit contexts)", "gap FFN at its initial weights",
                   "ΔMSE FFN"], rows)
    fig, ax = _figure(figsize=(6, 3.6))
    ax.plot(fit["L"], fit["gap_fit"], color="k", ls="--", lw=1, label="best bilinear W (exact fit)")
    ax.errorbar(L_values, ev["gap"], yerr=2 * np.asarray(ev["gap_se"]), marker="o", ms=3,
                label=f"SwiGLU FFN + query-key, {s['ffn_steps']} steps")
    ax.plot(L_values, init["gap"], color="grey", ls=":", marker="x", ms=3, label="control: FFN at initial weights")
    ax.axhline(GAP_TOL, color="grey", lw=0.8, ls=":", label=f"{GAP_TOL} nats")
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("L' (in-context examples at test)")
    ax.set_ylabel("L_pa gap to BMA (nats)")
    ax.set_title(f"DS (d={D}, H={H}, ρ={RHO}): does an FFN close the gap?", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    figures = [_save(fig, ctx, "prop2_ffn_gap.png")]
    scale = f"{ctx.tier} tier: {s['ffn_steps']} steps, hidden {s['ffn']['ffn_hidden']}"
    statement = (f"an FFN before query-key attention closes the DS gap (SwiGLU, {scale}): within {GAP_TOL} nats "
                 f"of BMA at every L' tested and below the best bilinear W at every L' <= {BELOW_BILINEAR_L}")
    summary = (f"{'reproduced' if rule['verdict'] == 'pass' else 'not reproduced'} at scale ({scale}): max gap "
               f"{rule['max_gap']:.4f} nats (upper 3-SE bound {rule['gap_upper']:.4f}, tolerance {GAP_TOL}), below "
               f"the best bilinear W at L' in {rule['below_at_L'] or 'none'}"
               f"{'' if not rule['not_below_at_L'] else ', not at ' + str(rule['not_below_at_L'])}; control "
               f"(the FFN at its initial weights, max gap {control_rule['max_gap']:.2f}) "
               f"{'rejected' if control.rejected else 'NOT rejected'}; training loss "
               f"{'flat' if converged else 'NOT flat'} after {s['ffn_steps']} steps.")
    instance = None
    if verdict == "fail":
        instance = {"claim": "prop2-ds-quadratic", "question": "ffn-closes-gap", "A": _instance_A(ctx).tolist(),
                    "rho": RHO, "d": D, "H": H, "L": L_values, "ffn_gap": ev["gap"], "steps": s["ffn_steps"],
                    "seed": ctx.seed}
    outcome = CheckOutcome(
        verdict=verdict, measured=measured, reason=reason, converged=converged, control=control,
        assumptions=[_ffn_description(ctx), "layer 1 is the exact (β → ∞) copier; training L' ~ U{1..30} "
                     "zero-padded, squared error on the query"],
        threshold={"ffn_gap_upper_max": GAP_TOL,
                   "below_best_bilinear": f"gap + 3 SE < best bilinear in-sample gap − 3 SE at every L' <= "
                                          f"{BELOW_BILINEAR_L}",
                   "converged": "FFN loss flat (last 10 % of steps within 1 % of the 10 % before)"},
        summary=summary, tables=[table], figures=figures, instance=instance, tolerances=FFN_TOLERANCES)
    outcome.findings = [Finding(statement, finding_status(settle(outcome)[0]), instance,
                                f"seed {ctx.seed}, {len(L_values)} values of L', {s['model_eval']} contexts each")]
    return outcome
