"""Claim prop2-ds-quadratic (the continuous DS setting): the BMA score has a key-only quadratic term that no
bilinear score represents.

Checks: the derivation (symbolic); the best bilinear score against the exact posterior (exact); trained bilinear
and key-norm models against BMA (model, reproduction); the paper's open question 3, whether an FFN before
query-key attention closes the gap (model, a finding of ours). The instance: d = 5, H = 10, ρ = 0.5, A drawn from
the report seed (the same A for every check), the exact (β → ∞) copier in every tier.

Negative controls: the exact check fits the bilinear family to a posterior that is bilinear by construction and
must find no gap there; the trained check applies its rule to BMA in the "shows a gap" slot and to the trained
bilinear model in the "closes the gap" slot, and must reject both; the FFN check applies its rule to the best
bilinear W (the closest selector that cannot close the gap). Both trained checks decide on several training seeds
by the count rule and record their rule's power on the key-norm selector at λ × its exact weights, λ → 1. History
of the values: docs/notes/prop2-ds-quadratic.md.
"""
from __future__ import annotations

from dataclasses import asdict

import numpy as np

from bma_verify.model.convergence import RULE as PLATEAU_RULE
from bma_verify.model.convergence import runs_plateau, trace_plateau
from bma_verify.model.ds import DSExperiment, DSModelConfig, DSTrainConfig, run_ds_experiment
from bma_verify.model.ds_runs import attention_maps, shrunk_key_norm_evaluations, train_and_evaluate
from bma_verify.numerics.ds import random_orthogonal, sample_ds_task
from bma_verify.numerics.ds_fit import bilinear_only_log_posterior, exact_score_parameters, score_gap_curve
from bma_verify.reports.checks.symbolic import SymbolicCheck, run_symbolic, symbolic_outcome
from bma_verify.reports.checks.trained import (confirm_misses, count_verdict, ideal_control, seed_keys, seeds_record,
                                               training_seeds, untrained_record, why_unconfirmed)
from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.claims.prop2_ds_quadratic import report as render
from bma_verify.reports.claims.prop2_ds_quadratic.report import Readings
from bma_verify.reports.core import (CheckContext, CheckOutcome, Control, Finding, PositiveControl, finding_status,
                                     settle)
from bma_verify.reports.core import ControlMargin
from bma_verify.reports.protocol import run_plan
from bma_verify.theory.ds import (derive_prop2_ds_quadratic, dropped_key_quadratic, perturb_prop2_ds_quadratic,
                                  verify_prop2_ds_quadratic)

D, H, RHO = 5, 10, 0.5  # ρ = 0.5 puts the best-bilinear gap's peak at small L' and its closing near L' ≈ 20
SMALL_L = 5  # "small L'": L' <= 5
CLOSED_BY_L = 20  # "closing near L' ≈ 20": the bilinear model's gap has closed at every L' >= 20 tested
TRAIN_L = 30  # copier heads = the largest L' the models see (training L' ~ U{1..30})
GAP_TOL = 0.02  # nats: the claim's reading of the bilinear gap (shown at L' <= 5, closed near L' ≈ 20)
#: nats: "closes the gap", a trained selector within training error of BMA (the key-norm model, the FFN of ours):
#: 2 × the largest upper 3-SE gap bound of the development runs, rounded up to 0.001, by a rule written down before
#: they were measured (seeds 1000-1002, both tiers; docs/notes/prop2-ds-quadratic.md). GAP_TOL accepted the key-norm
#: selector at 0.8 × its exact weights, 0.0125 nats from BMA.
CLOSES_TOL = 0.007
FIT_RESOLUTION = 1e-6  # nats: the smallest gap the convex fit tells from zero (150x its largest residual)
KEY_NORM_TOL = 1e-4  # nats: the key-norm fit (its family contains the posterior) must reach zero gap within this
BELOW_BILINEAR_L = 10  # "below the best bilinear W at every L' <= 10"
READINGS = Readings(d=D, H=H, rho=RHO, small_L=SMALL_L, closed_by_L=CLOSED_BY_L, train_L=TRAIN_L,
                    gap_tol=GAP_TOL, closes_tol=CLOSES_TOL, below_bilinear_L=BELOW_BILINEAR_L)
# Regression tolerances: 1000x the spread measured over threads x instruction sets (seed 0, quick tier); values
# not listed moved by 0 and keep the default abs 1e-9.
FIT_TOLERANCES = {"bilinear_gap_eval": {"abs": 2e-5}, "bilinear_gap_eval_se": {"abs": 1.2e-5},
                  "bilinear_parent_loss": {"abs": 2e-5}}
_TRAINED_SPREAD = {
    "bilinear_minus_best_bilinear_gap": 1.1e-9, "bilinear_small_L_gap_lower": 1.2e-9,
    "bilinear_late_L_gap_upper": 7.7e-10, "key_norm_gap_upper": 1.3e-9,
    "bilinear_gap": 1.1e-9, "bilinear_gap_se": 1.5e-10, "bilinear_max_gap": 7.8e-10, "bilinear_parent_loss": 5.5e-9,
    "bilinear_mse": 4.9e-9, "bilinear_mse_excess": 4.9e-9, "bilinear_final_train_loss": 1.9e-8,
    "key_norm_gap": 1.3e-9, "key_norm_gap_se": 3e-11, "key_norm_max_gap": 1.3e-9, "key_norm_parent_loss": 3.2e-9,
    "key_norm_mse": 4.8e-9, "key_norm_mse_excess": 4.8e-9, "key_norm_final_train_loss": 9.6e-9,
}
_FFN_SPREAD = {"ffn_gap": 1.9e-7, "ffn_gap_se": 4.8e-9, "ffn_max_gap": 1.9e-7, "ffn_gap_upper": 2e-7,
               "ffn_parent_loss": 2.4e-7, "ffn_mse": 1.1e-7, "ffn_mse_excess": 1.1e-7, "ffn_final_train_loss": 4.2e-8}
TRAINED_TOLERANCES = {name: {"abs": 1000 * spread} for name, spread in _TRAINED_SPREAD.items()}
FFN_TOLERANCES = {name: {"abs": 1000 * spread} for name, spread in _FFN_SPREAD.items()}
#: The FFN (open question 3) trains at these tiers only: three seeds of it (11 s each) with the reproduction's three
#: do not fit the quick tier's 40 s (docs/notes/prop2-ds-quadratic.md).
FFN_TIERS = ("full",)
#: Near-miss controls' power curve: the key-norm selector at λ × the exact (W*, c*) (a tempered posterior), λ → 1.
POWER_SCALES = (0.0, 0.5, 0.8, 0.9, 0.95, 1.0)
# The FFN (open question 3) has its own steps and rate: it needs more of both than the bilinear and key-norm models.
SIZES = {
    "quick": {"fit_L": (1, 2, 3, 5, 8, 12, 20, 30), "key_norm_L": (1, 3), "n_fit": 800, "n_eval": 800,
              "steps": 250, "batch": 192, "copier": "exact", "model_eval": 800,
              "ffn": {"ffn_hidden": 16, "ffn_spare": 2}, "ffn_steps": 400, "ffn_batch": 128, "ffn_lr": 0.05},
    "full": {"fit_L": tuple(range(1, 31)), "key_norm_L": (1, 2, 3, 5, 8, 12, 20, 30), "n_fit": 4000,
             "n_eval": 4000, "steps": 3000, "batch": 256, "copier": "exact", "model_eval": 4000,
             "ffn": {"ffn_hidden": 16, "ffn_spare": 2}, "ffn_steps": 1500, "ffn_batch": 256, "ffn_lr": 0.02},
}
def protocol(tier: str) -> dict:
    """What the trained part of prop2-ds-quadratic is decided by at ``tier`` (its pre-registered protocol,
    ``reports.protocol``): sizes, readings, tolerances, the training config and the control's power scales."""
    s = SIZES[tier]
    return {"sizes": s, "readings": READINGS, "task": {"d": D, "H": H, "rho": RHO},
            "training": run_plan(DSTrainConfig(steps=s["steps"], batch_size=s["batch"])),
            "fit_resolution": FIT_RESOLUTION, "key_norm_tol": KEY_NORM_TOL, "ffn_trains": tier in FFN_TIERS,
            "control": {"power_scales": POWER_SCALES}}

SYMBOLIC = SymbolicCheck(
    claim="prop2-ds-quadratic",
    derive=derive_prop2_ds_quadratic, perturb=perturb_prop2_ds_quadratic, verify=verify_prop2_ds_quadratic,
    perturbation=dropped_key_quadratic, control="the DS score without its key-only quadratic term",
    sizes={"quick": {"d_values": (2,), "n_points": 20}, "full": {"d_values": (2, 3), "n_points": 100}},
)


# ------------------------------------------------------------------------------------------------ compute

def _sizes(ctx: CheckContext) -> dict:
    return SIZES[ctx.tier]


def instance_A(ctx: CheckContext) -> np.ndarray:
    """The orthogonal A of this report's DS instance (the same for every check)."""
    return random_orthogonal(D, rng=ctx.rng("prop2-ds-A"))


def _fit_curves(ctx: CheckContext) -> dict:
    """Best bilinear and best key-norm score at each L' (convex fits), and the control's bilinear fit to a
    posterior that is bilinear; computed once per report."""
    key = ("ds", "fit", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        s = _sizes(ctx)
        A = instance_A(ctx)
        sizes = {"n_fit": s["n_fit"], "n_eval": s["n_eval"], "quiet": ctx.quiet}
        bilinear = score_gap_curve(A, RHO, H, s["fit_L"], rng=ctx.rng("prop2-bilinear-fit"), **sizes)
        key_norm = score_gap_curve(A, RHO, H, s["key_norm_L"], rng=ctx.rng("prop2-key-norm-fit"), key_norm=True,
                                   **sizes)
        control = score_gap_curve(A, RHO, H, s["fit_L"], rng=ctx.rng("prop2-bilinear-fit-control"),
                                  target=bilinear_only_log_posterior, **sizes)
        ctx.cache[key] = {"A": A, "bilinear": bilinear, "key_norm": key_norm, "control": control}
    return ctx.cache[key]


def _seeds(ctx: CheckContext) -> list[int]:
    """The report's training seeds of the DS models (3 quick, 5 full; below 1000)."""
    return training_seeds(ctx, "prop2-ds")


def _train_config(ctx: CheckContext, seed: int, **overrides) -> DSTrainConfig:
    """The training configuration of the report's DS models on training seed ``seed``."""
    s = _sizes(ctx)
    return DSTrainConfig(**{"steps": s["steps"], "batch_size": s["batch"], "seed": seed, **overrides})


def _trained(ctx: CheckContext, seed: int) -> dict:
    """The bilinear and key-norm models trained on ``seed`` and evaluated, once per report (``ctx.cache``)."""
    key = ("ds", "models", ctx.tier, ctx.seed, seed)
    if key not in ctx.cache:
        s = _sizes(ctx)
        exp = DSExperiment(d=D, H=H, L=TRAIN_L, rho=RHO, copier=s["copier"], L_values=s["fit_L"],
                           n_eval=s["model_eval"], train=_train_config(ctx, seed), selectors=("bilinear", "key-norm"))
        ctx.cache[key] = run_ds_experiment(exp, A=instance_A(ctx), device="cpu", quiet=ctx.quiet)
    return ctx.cache[key]


def power_evaluations(ctx: CheckContext) -> dict:
    """{λ: evaluation} of the key-norm selector at λ × the exact (W*, c*) for λ in POWER_SCALES (λ = 1 is BMA), on
    the first training seed's evaluation contexts; once per report."""
    key = ("ds", "power", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        s = _sizes(ctx)
        cfg = DSModelConfig(selector="key-norm", d=D, H=H, L=TRAIN_L, copier=s["copier"])
        ctx.cache[key] = shrunk_key_norm_evaluations(instance_A(ctx), RHO, cfg, POWER_SCALES, s["fit_L"],
                                                     n_eval=s["model_eval"], seed=_seeds(ctx)[0])
    return ctx.cache[key]


def _trained_ffn(ctx: CheckContext, seed: int) -> dict:
    """The FFN model (open question 3) trained on ``seed`` and evaluated, once per report."""
    key = ("ds", "ffn", ctx.tier, ctx.seed, seed)
    if key not in ctx.cache:
        s = _sizes(ctx)
        cfg = DSModelConfig(d=D, H=H, L=TRAIN_L, selector="ffn", copier=s["copier"], **s["ffn"])
        train = _train_config(ctx, seed, steps=s["ffn_steps"], batch_size=s["ffn_batch"], ffn_lr=s["ffn_lr"])
        run = train_and_evaluate(cfg, instance_A(ctx), RHO, train, s["fit_L"], n_eval=s["model_eval"],
                                 quiet=ctx.quiet)
        ctx.cache[key] = {**run, "config": asdict(cfg), "train": asdict(train)}
    return ctx.cache[key]


# ------------------------------------------------------------------------------------------------- decide

def _closing_L(L_values, gaps, ses, tol: float):
    """The smallest L' from which on every measured gap's upper 2-SE bound is below ``tol`` (None if never)."""
    upper = np.asarray(gaps) + 2 * np.asarray(ses)
    for i, L in enumerate(L_values):
        if np.all(upper[i:] < tol):
            return int(L)
    return None


def decide_fit(curve: dict) -> dict:
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


def _fit_verdict(rule: dict, key_norm: dict) -> tuple[str, str]:
    """The exact check's verdict: :func:`decide_fit`'s, inconclusive when the fitter is not trusted (a fit at
    L' <= 5 did not converge, or the key-norm fit misses its known optimum by KEY_NORM_TOL)."""
    if not rule["fits_converged"]:
        return rule["verdict"], "a bilinear fit at L' <= 5 did not converge: its in-sample gap is no lower estimate"
    if not max(key_norm["gap_eval"]) < KEY_NORM_TOL:
        return "inconclusive", (f"the fitter missed the key-norm family's known optimum (gap "
                                f"{max(key_norm['gap_eval']):.1e} >= {KEY_NORM_TOL:g}): its bilinear optimum is "
                                f"not trusted")
    return rule["verdict"], ""


def _gap_bounds(ev: dict, L_range) -> tuple[float, float]:
    """(largest lower, largest upper) 3-SE bound of a model's L_pa gap over the L' in ``L_range`` (a predicate)."""
    idx = [i for i, L in enumerate(ev["L"]) if L_range(L)]
    g, se = np.asarray(ev["gap"])[idx], np.asarray(ev["gap_se"])[idx]
    return float(np.max(g - 3 * se)), float(np.max(g + 3 * se))


def closes_gap(ev: dict) -> tuple[bool, float]:
    """'Closes the gap': the upper 3-SE bound of the gap is within CLOSES_TOL of BMA at every L' tested."""
    upper = _gap_bounds(ev, lambda L: True)[1]
    return upper <= CLOSES_TOL, upper


def _decide_models(gap_model: dict, closing_model: dict) -> dict:
    """The trained check's rule on two evaluated models (``evaluate_ds_model``), applied to the real pair
    (trained bilinear, trained key-norm) and to the control pair alike.

    shows gap: the gap model's gap exceeds GAP_TOL by 3 SE at some L' <= 5 and is within GAP_TOL (+3 SE) at
    every L' >= 20 tested; closes: :func:`closes_gap` on the closing model. pass = both.
    """
    small_lower = _gap_bounds(gap_model, lambda L: L <= SMALL_L)[0]
    late_upper = _gap_bounds(gap_model, lambda L: L >= min(CLOSED_BY_L, gap_model["L"][-1]))[1]
    shows_gap = small_lower > GAP_TOL and late_upper <= GAP_TOL
    closes, closing_upper = closes_gap(closing_model)
    return {"verdict": "pass" if shows_gap and closes else "fail", "shows_gap": bool(shows_gap),
            "closes": bool(closes), "small_L_gap_lower": small_lower, "late_L_gap_upper": late_upper,
            "closing_gap_upper": closing_upper}


def judge_models(result: dict) -> tuple[str, dict]:
    """The trained check's rule on a run of the bilinear and key-norm models as a continuation judge
    (``reports.checks.trained.confirm_misses``): the status and its three bounds with their thresholds."""
    rule = _decide_models(result["metrics"]["bilinear"]["eval"], result["metrics"]["key-norm"]["eval"])
    return rule["verdict"], {"small_L_gap_lower": (rule["small_L_gap_lower"], GAP_TOL, False),
                             "late_L_gap_upper": (rule["late_L_gap_upper"], GAP_TOL, True),
                             "closing_gap_upper": (rule["closing_gap_upper"], CLOSES_TOL, True)}


def _trained_convergence(bil: dict, fit: dict, plateau: dict) -> dict:
    """Converged (the trained check's criterion): the bilinear and key-norm runs' loss records have plateaued
    (``plateau``, :func:`model.convergence.trace_plateau` per run). Reported beside it, not deciding: whether the
    bilinear model is within 0.01 nats (+3 + 3 SE) of the best bilinear W's held-out gap at every L'."""
    fit_gap = dict(zip(fit["L"], zip(fit["gap_eval"], fit["gap_eval_se"])))
    distance = [bil["gap"][i] - fit_gap[L][0] for i, L in enumerate(bil["L"])]
    at_optimum = all(abs(dist) <= 0.01 + 3 * (bil["gap_se"][i] + fit_gap[L][1])
                     for i, (L, dist) in enumerate(zip(bil["L"], distance)))
    return {"distance": distance, "at_optimum": at_optimum,
            "key_norm_flat": plateau["runs"]["key-norm"]["plateaued"], "converged": plateau["plateaued"]}


def decide_ffn(ffn: dict, fit: dict) -> dict:
    """The FFN rule (open question 3) on one evaluated model, applied to the trained FFN and to its control (the
    same FFN at its initial weights) alike.

    closes: :func:`closes_gap` (within CLOSES_TOL of BMA, upper 3-SE bound, at every L' tested); below bilinear: at
    every L' <= 10 tested, the model's gap + 3 SE is below the best bilinear W's in-sample gap − 3 SE (a lower
    estimate of the family's best: a gap no bilinear score reaches). pass = both.
    """
    closes, upper = closes_gap(ffn)
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


# ------------------------------------------------------------------------------------------------- checks

def key_norm_positive(key_norm: dict) -> PositiveControl:
    """The fitter on its ideal: the key-norm family (bilinear W plus the key-only term) contains the exact DS
    posterior, so the same fitter must reach it (held-out gap < KEY_NORM_TOL at every L'). This is the rule's
    fitter half; the gap half has no ideal, since the only posterior known to lie outside the bilinear family is
    the one under test. It fails when the fitter misses a known optimum (then no gap it reports is evidence)."""
    worst = float(max(key_norm["gap_eval"]))
    return PositiveControl("the same fitter on the key-norm family, which contains the exact posterior: its held-out "
                           f"gap must stay below {KEY_NORM_TOL:g} nats at every L' it is fitted at",
                           {"max_gap_eval": worst, "L": key_norm["L"]}, worst < KEY_NORM_TOL)


def prop2_bilinear_fit(ctx: CheckContext) -> CheckOutcome:
    """Exact check: the best bilinear W against the exact DS posterior, gap vs L'.

    Verdict (:func:`decide_fit`): pass when the best bilinear W keeps a gap at every L' <= 5 (in-sample gap
    > 3 SE and > the fit's resolution 1e-6 nats) and the gap shrinks by the largest L' (held-out, by 3 + 3
    SE); fail otherwise; inconclusive when the fitter is not trusted (:func:`_fit_verdict`).

    Control: the same fit and rule applied to :func:`numerics.ds_fit.bilinear_only_log_posterior` (the exact
    score without its key-only term, a bilinear posterior by construction); the rule must find no gap there.
    Positive control: the fitter on the key-norm family, which contains the posterior (:func:`key_norm_positive`).
    """
    s, fits = _sizes(ctx), _fit_curves(ctx)
    A, bil, kn, ctl = fits["A"], fits["bilinear"], fits["key_norm"], fits["control"]
    _, c_star = exact_score_parameters(A, RHO)
    small = [i for i, L in enumerate(bil["L"]) if L <= SMALL_L]
    rule, control_rule = decide_fit(bil), decide_fit(ctl)
    verdict, reason = _fit_verdict(rule, kn)
    closing = _closing_L(bil["L"], bil["gap_eval"], bil["gap_eval_se"], 0.01)  # reported, not decided
    control = Control(
        description="the same fit and rule on a posterior that is bilinear by construction (the exact score "
                    "without its key-only quadratic term): no gap may be found",
        measured={"gap_fit_small_L": [ctl["gap_fit"][i] for i in small],
                  "gap_fit_se_small_L": [ctl["gap_fit_se"][i] for i in small],
                  "z_small_L": [control_rule["z"][i] for i in small], "max_gap_eval": max(ctl["gap_eval"]),
                  "gap_at_small_L": control_rule["gap_at_small_L"], "shrinks": control_rule["shrinks"],
                  "verdict": control_rule["verdict"]},
        rejected=not control_rule["gap_found"],
        # the small L' whose in-sample gap lies furthest below its bar max(3 SE, FIT_RESOLUTION) (decide_fit)
        margin=max((ControlMargin("gap_fit", ctl["gap_fit"][i], max(3 * ctl["gap_fit_se"][i], FIT_RESOLUTION),
                                  passes_below=False, units="nats") for i in small), key=lambda m: m.distance))
    instance = None
    if verdict == "fail":
        instance = {"claim": "prop2-ds-quadratic", "A": A.tolist(), "rho": RHO, "d": D, "H": H,
                    "L": bil["L"], "positive_at_small_L": rule["gap_at_small_L"], "shrinks": rule["shrinks"],
                    "key_norm_closes": bool(max(kn["gap_eval"]) < KEY_NORM_TOL)}
    return CheckOutcome(
        verdict=verdict, measured=render.fit_measured(READINGS, s, bil, kn, rule, small, c_star, closing),
        reason=reason,
        threshold={"gap": f"gap_fit > max(3 SE, {FIT_RESOLUTION:g}) at every L' <= {SMALL_L}",
                   "shrinks": "gap(L'max) + 3 SE < peak − 3 SE (by > the resolution)",
                   "fitter": f"key-norm held-out gap < {KEY_NORM_TOL:g}; fits at L' <= {SMALL_L} converged"},
        summary=render.fit_summary(READINGS, bil, kn, ctl, rule, small, c_star, closing, control),
        derivation=render.DERIVATION, tables=render.fit_tables(bil, kn, ctl, c_star),
        figures=[render.fit_figure(ctx, READINGS, bil, kn, ctl)], instance=instance, control=control,
        positive_control=key_norm_positive(kn), tolerances=FIT_TOLERANCES,
    )


def _power_curve(evaluations: dict, judge) -> list[dict]:
    """The rule ``judge(evaluation)`` on the key-norm selector at λ × (W*, c*), λ → 1 (BMA): Control.power."""
    return [{"x": scale, "label": f"key-norm selector at {scale:g} × (W*, c*)", "value": float(max(ev["gap"])),
             "rejected": judge(ev)["verdict"] != "pass"} for scale, ev in evaluations.items()]


def _models_control(bil: dict, power: dict) -> Control:
    """The reproduction's control: the rule with its slots planted false (gap slot: BMA; closing slot: the trained
    bilinear model, the closest model that cannot close the gap), and its power as the closing slot moves from
    the key-norm selector at 0 × (W*, c*) to BMA."""
    rule = _decide_models(power[1.0], bil)
    return Control(
        "the same rule with planted slots: gap slot = the key-norm selector at the exact (W*, c*) (BMA, no gap); "
        "closing slot = the trained bilinear model (cannot close: Proposition 2)",
        {"exact_key_norm_small_L_gap_lower": rule["small_L_gap_lower"],
         "exact_key_norm_max_gap": float(max(power[1.0]["gap"])), "shows_gap": rule["shows_gap"],
         "bilinear_closing_gap_upper": rule["closing_gap_upper"], "closes": rule["closes"]},
        rejected=not rule["shows_gap"] and not rule["closes"],
        # both slots must fail: the margin is the slot nearer its bar
        margin=min(ControlMargin("exact_key_norm_small_L_gap_lower", rule["small_L_gap_lower"], GAP_TOL,
                                 passes_below=False, units="nats"),
                   ControlMargin("bilinear_closing_gap_upper", rule["closing_gap_upper"], CLOSES_TOL, units="nats"),
                   key=lambda m: m.distance),
        power=_power_curve(power, lambda kn: _decide_models(bil, kn)))


def models_ideal_control(fit: dict, power: dict) -> PositiveControl:
    """The reproduction's rule on its ideal pair: gap slot = the best bilinear W at each L' (the exact fit, held out:
    what training the bilinear model can reach), closing slot = the key-norm selector at the exact (W*, c*) (BMA)."""
    rule = _decide_models({"L": fit["L"], "gap": fit["gap_eval"], "gap_se": fit["gap_eval_se"]}, power[1.0])
    return PositiveControl("the same rule on the ideal pair: the best bilinear W at each L' (exact fit, held out) "
                           "and the key-norm selector at the exact (W*, c*) (BMA)", rule, rule["verdict"] == "pass")


def _attention_context(ctx: CheckContext, L: int = 3) -> tuple:
    """(context, query, true parents (H,), L') of the one fresh context the attention figure shows."""
    task = sample_ds_task(instance_A(ctx), RHO, 1, L, H, rng=ctx.rng("prop2-ds-attention-context"))
    return task.context, task.query, task.parents[0], L


def prop2_trained_models(ctx: CheckContext) -> CheckOutcome:
    """Model check (reproduction): trained bilinear and key-norm models vs BMA on the report's training seeds.

    Rule per seed (:func:`_decide_models`): the bilinear model shows the gap (it exceeds 0.02 nats by 3 SE at some
    L' <= 5 and is within 0.02 nats, +3 SE, at every L' >= 20 tested) and the key-norm model closes it (within 0.02
    nats, +3 SE, at every L'); the key-norm family contains BMA by construction, so its closing shows that training
    reaches that member. A seed counts when both runs' loss records have plateaued (fresh batches: held out); the
    verdict is the count rule (``reports.checks.trained.count_verdict``). Control: :func:`_models_control`. The
    FFN model is the check :func:`prop2_ffn_closes_gap`.
    """
    s, seeds, fit, power = _sizes(ctx), _seeds(ctx), _fit_curves(ctx)["bilinear"], power_evaluations(ctx)
    results = [_trained(ctx, seed) for seed in seeds]
    evs = [{name: m["eval"] for name, m in r["metrics"].items()} for r in results]
    tests = [runs_plateau({name: trace_plateau(r["metrics"][name]["history"]["loss"])
                           for name in ("bilinear", "key-norm")}) for r in results]
    rules = [_decide_models(ev["bilinear"], ev["key-norm"]) for ev in evs]
    statuses = [rule["verdict"] for rule in rules]
    more = confirm_misses(ctx, "prop2-ds", results, statuses, tests, judge_models, seed_keys(ctx, "prop2-ds", "models"),
                          objective="training loss (fresh batches)")
    verdict, reason, converged = count_verdict(statuses, tests, more, why_unconfirmed=why_unconfirmed(ctx, "prop2-ds"))
    record = seeds_record(seeds, statuses, tests, [{k: rule[k] for k in ("small_L_gap_lower", "late_L_gap_upper",
                                                                         "closing_gap_upper")} for rule in rules], more)
    ev, rule, result = evs[0], rules[0], results[0]  # the first seed's run: measured, tables and figures
    control = _models_control(ev["bilinear"], power)
    conv = _trained_convergence(ev["bilinear"], fit, tests[0])
    instance = None
    if verdict == "fail":
        instance = {"claim": "prop2-ds-quadratic", "A": np.asarray(result["A"]).tolist(), "rho": RHO, "d": D, "H": H,
                    "L": ev["bilinear"]["L"], "key_norm_gap": ev["key-norm"]["gap"],
                    "bilinear_gap": ev["bilinear"]["gap"], "steps": s["steps"], "training_seeds": seeds}
    context, query, parents, L = _attention_context(ctx)
    panels = attention_maps(result["models"], np.asarray(result["A"]), RHO, context, query)
    return CheckOutcome(
        verdict=verdict, reason=reason, converged=converged, control=control, seeds=record, instance=instance,
        positive_control=models_ideal_control(fit, power),
        measured=render.trained_measured(READINGS, s, ev, {n: m["history"] for n, m in result["metrics"].items()},
                                         rule, conv),
        assumptions=render.trained_assumptions(READINGS, s),
        threshold={"key_norm_gap_upper_max": CLOSES_TOL, "bilinear_small_L_gap_lower_min": GAP_TOL,
                   f"bilinear_gap_upper_at_L_ge_{CLOSED_BY_L}_max": GAP_TOL, "count_rule": record["count_rule"],
                   "converged": f"bilinear and key-norm runs: {PLATEAU_RULE}"},
        summary=render.trained_summary(READINGS, s, rule, control, conv, record), derivation=render.DERIVATION[-1:],
        tables=[render.trained_table(ev)], tolerances=TRAINED_TOLERANCES,
        figures=[render.trained_figure(ctx, READINGS, s, fit, ev), render.attention_figure(ctx, panels, parents, L)])


def _ffn_control(fit: dict, power: dict) -> Control:
    """The FFN rule on the best bilinear W at each L' (the exact check's fit, held out): the closest selector
    that cannot close the gap; its power as the key-norm selector at λ × (W*, c*) moves to BMA."""
    rule = decide_ffn({"L": fit["L"], "gap": fit["gap_eval"], "gap_se": fit["gap_eval_se"]}, fit)
    return Control("the best bilinear W at each L' (the exact fit, on held-out contexts), judged by the same rule",
                   {"max_gap": rule["max_gap"], "gap_upper": rule["gap_upper"], "closes": rule["closes"],
                    "below_best_bilinear_at_L": rule["below_at_L"], "verdict": rule["verdict"]},
                   rejected=rule["verdict"] != "pass", power=_power_curve(power, lambda kn: decide_ffn(kn, fit)),
                   margin=ControlMargin("gap_upper", rule["gap_upper"], CLOSES_TOL, units="nats"))


#: The FFN check's ideal: its power curve's end, BMA itself (what closing the gap means).
FFN_IDEAL = "BMA itself (the key-norm selector at the exact (W*, c*), the power curve's end), judged by the FFN rule"


def _ffn_untrained(ctx: CheckContext, control: Control, statement: str) -> CheckOutcome:
    """The FFN check at a tier that does not train it: its control and power curve, no verdict."""
    reason = (f"{ctx.tier} tier cannot decide: three FFN seeds do not fit its budget; the "
              f"{', '.join(FFN_TIERS)} tier trains them and decides")
    return CheckOutcome(verdict="inconclusive", reason=reason, measured={"control": control.measured},
                        **untrained_record(ctx, reason),
                        control=control, positive_control=ideal_control(control, FFN_IDEAL),
                        summary=render.ffn_untrained_summary(control, reason),
                        findings=[Finding(statement, "open", None, reason)],
                        assumptions=[render.ffn_description(READINGS, _sizes(ctx))])


def prop2_ffn_closes_gap(ctx: CheckContext) -> CheckOutcome:
    """Model check (stronger: the paper's open question 3): does an FFN before query-key attention close the DS
    gap? A finding of ours, never a failure of the paper.

    The model: the exact copier, then a SwiGLU FFN with residual on each copied example (zero-padded with spare
    residual dimensions), then query-key attention full rank over the residual width, the weights shared by the
    K slots like the bilinear W; nothing of ‖x‖² is built in. Trained on the report's training seeds (at the tiers
    of ``FFN_TIERS``), evaluated on the contexts of the bilinear and key-norm models.

    Rule per seed (:func:`decide_ffn`): within CLOSES_TOL of BMA (upper 3-SE bound) at every L' tested and below
    the best bilinear W's in-sample gap (by 3 + 3 SE) at every L' <= 10 tested; a seed counts when its loss record
    has plateaued (:func:`model.convergence.trace_plateau`); the verdict is the count rule. Control:
    :func:`_ffn_control`.
    """
    s, fit = _sizes(ctx), _fit_curves(ctx)["bilinear"]
    control = _ffn_control(fit, power_evaluations(ctx))
    scale = f"{ctx.tier} tier: {s['ffn_steps']} steps, hidden {s['ffn']['ffn_hidden']}"
    statement = (f"an FFN before query-key attention closes the DS gap (SwiGLU, {scale}): within {CLOSES_TOL} nats "
                 f"of BMA at every L' tested and below the best bilinear W at every L' <= {BELOW_BILINEAR_L}")
    if ctx.tier not in FFN_TIERS:
        return _ffn_untrained(ctx, control, statement)
    seeds = _seeds(ctx)
    runs = [_trained_ffn(ctx, seed) for seed in seeds]
    rules = [decide_ffn(r["eval"], fit) for r in runs]
    tests = [trace_plateau(r["history"]["loss"]) for r in runs]
    statuses = [rule["verdict"] for rule in rules]
    verdict, reason, converged = count_verdict(statuses, tests)
    record = seeds_record(seeds, statuses, tests, [{k: rule[k] for k in ("max_gap", "gap_upper")} for rule in rules])
    run, rule = runs[0], rules[0]  # the first seed's run: measured, table and figure
    instance = None if verdict != "fail" else {
        "claim": "prop2-ds-quadratic", "question": "ffn-closes-gap", "A": instance_A(ctx).tolist(), "rho": RHO,
        "d": D, "H": H, "L": run["eval"]["L"], "ffn_gap": run["eval"]["gap"], "steps": s["ffn_steps"],
        "training_seeds": seeds}
    outcome = CheckOutcome(
        verdict=verdict, measured=render.ffn_measured(READINGS, s, run, fit, rule, tests[0]["plateaued"]),
        reason=reason, converged=converged, control=control, positive_control=ideal_control(control, FFN_IDEAL),
        seeds=record, instance=instance,
        assumptions=[render.ffn_description(READINGS, s), "layer 1 is the exact (β → ∞) copier; training L' ~ "
                     "U{1..30} zero-padded, squared error on the query"],
        threshold={"ffn_gap_upper_max": CLOSES_TOL, "count_rule": record["count_rule"],
                   "below_best_bilinear": f"gap + 3 SE < best bilinear in-sample gap − 3 SE at every L' <= "
                                          f"{BELOW_BILINEAR_L}", "converged": f"FFN runs: {PLATEAU_RULE}"},
        summary=render.ffn_summary(READINGS, s, scale, rule, control, record),
        tables=[render.ffn_table(run, fit)], figures=[render.ffn_figure(ctx, READINGS, s, fit, run)],
        tolerances=FFN_TOLERANCES)
    outcome.findings = [Finding(statement, finding_status(settle(outcome)[0]), instance,
                                f"{len(seeds)} training seeds, {len(run['eval']['L'])} values of L', "
                                f"{s['model_eval']} contexts each")]
    return outcome


def symbolic_check(ctx: CheckContext) -> CheckOutcome:
    """The key-only quadratic term of the DS log-likelihood; Hessian argument."""
    sizes = SYMBOLIC.sizes_for(ctx)
    run = run_symbolic(ctx, SYMBOLIC, [(d,) for d in sizes["d_values"]])
    return symbolic_outcome(ctx, SYMBOLIC, run,
                            "The expanded Gaussian log-likelihood splits into ρ/(1−ρ²) x_h'ᵀ A x_h, "
                            "−ρ²/(2(1−ρ²))‖x_h'‖² and query-only terms; the Hessian in x_h' of (score − x_h'ᵀ W x_h) "
                            "is −ρ²/(1−ρ²) I for every W, so no bilinear score reproduces the posterior; compared "
                            "with numerics.ds and scipy.stats.")


CLAIM = Claim(
    "prop2-ds-quadratic",
    "Proposition 2: in the continuous (DS) setting the BMA score has a key-only quadratic term that "
    "bilinear attention cannot represent; the trained model shows a gap to BMA at small L' that closes "
    "near L' ≈ 20.",
    "DS: x_h = ρ Aᵀ x_pa(h) + √(1−ρ²) η. The BMA score is ρ/(1−ρ²) Σ_l x^{lᵀ}_{h'} A x^l_h − "
    "ρ²/(2(1−ρ²)) Σ_l ‖Aᵀ x^l_{h'}‖² + const(h); the key-only quadratic term varies with h', so no "
    "bilinear W reproduces the posterior.",
    (
        Check("symbolic", symbolic_check,
              "expand the Gaussian log-likelihood; Hessian of the quadratic term nonzero, bilinear zero"),
        Check("exact", prop2_bilinear_fit, "best bilinear W against the exact posterior: gap vs L'"),
        Check("model", prop2_trained_models,
              "trained bilinear and key-norm models against BMA on several training seeds: gap vs L'",
              reading="reproduction"),
        Check("model", prop2_ffn_closes_gap,
              "the paper's open question 3: a trained gated (SwiGLU) FFN before query-key attention against BMA "
              "and the best bilinear W, gap vs L'", reading="stronger"),
    ),
)
