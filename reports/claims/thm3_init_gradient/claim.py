"""Claim thm3-init-gradient: at initialisation the selector's gradient points at the true parent (χ²-MI).

Checks: the derivative at p̂ = 0 and J(pa) = I_χ² (symbolic); the J form by exact enumeration on the Theorem 3
sweep (exact); the exact π̄ form, one finding per μ₀ (exact, stronger); what holds instead, the J form under a
stationary μ₀ proved step by step, its weaker sufficient condition and its boundary in TV(μ₀, μ) and depth
(exact, stronger; the boundary: thm3_init_gradient_boundary); the J form beyond enumeration (Monte Carlo); autograd
through the real model against the closed form (model). Negative controls: P(x_h) replaced by the mean of π's rows
(symbolic), a shuffled parent label (exact, Monte Carlo), each proof step perturbed (stationary), the approximate
form taken as exact (model).

Measured values behind the tolerances and close calls, per seed: docs/notes/thm3-init-gradient.md.
"""
import math
from functools import partial

import numpy as np

from bma_verify import numerics
from bma_verify.model import analysis
from bma_verify.numerics.claim_sweeps import INIT_KINDS, merge_sweeps
from bma_verify.numerics.init_gradient_sweep import (THM3_RANGES, thm3_check_position, thm3_monte_carlo,
                                                     thm3_sweep_chunk)
from bma_verify.numerics.task import random_kernel, random_parents
from bma_verify.numerics.thm3_stationary import proof_chain, stationary_chain_sweep
from bma_verify.reports.checks.numeric_common import (IDENTITY_ATOL, Z_AGREE, chunks, combine_verdicts, decide_interval,
                                                      ideal_estimate_verdict, ideal_estimates_control,
                                                      save_check_figure, smallest_instance, stored_counterexamples,
                                                      z_scores)
from bma_verify.reports.checks.symbolic import SymbolicCheck, run_symbolic, symbolic_outcome
from bma_verify.reports.checks.trained import seeded_kernel
from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.claims.thm3_init_gradient.boundary import (boundary_evidence, boundary_figure, boundary_holds,
                                                                   boundary_measured, boundary_sentence,
                                                                   boundary_tables, closest_violation)
from bma_verify.reports.core import (CheckContext, CheckOutcome, Control, ControlMargin, Finding, HoldsInstead,
                                     PositiveControl, Table, jsonable, new_figure)
from bma_verify.reports.search import check_instance
from bma_verify.theory.gradient import (derive_thm3_init_gradient, kernel_mean_for_marginal, perturb_thm3_init_gradient,
                                        verify_thm3_init_gradient)
from bma_verify.theory.thm3_stationary import (candidate_law_for_parent_law, derive_thm3_stationary,
                                               perturb_thm3_stationary, verify_thm3_stationary)

SYMBOLIC = SymbolicCheck(
    claim="thm3-init-gradient",
    derive=derive_thm3_init_gradient, perturb=perturb_thm3_init_gradient, verify=verify_thm3_init_gradient,
    perturbation=kernel_mean_for_marginal,
    control="J(pa) with P(x_h) replaced by the unweighted mean of π's rows",
    sizes={"quick": {"n_points": 12}, "full": {"n_points": 60}},
)


def symbolic_check(ctx: CheckContext) -> CheckOutcome:
    """sympy.diff of ℓ(p̂) at 0 for both output rules; J(pa) = I_χ²."""
    run = run_symbolic(ctx, SYMBOLIC, [()])
    return symbolic_outcome(ctx, SYMBOLIC, run,
                            "Mixture output: −∂ℓ/∂p̂_j at 0 = (1/h)(r_j/r̄ − 1) (h = 2, 3, 4); with P(x_h) for r̄ "
                            "the parent's expected term J(pa) = I_χ²(x_pa; x_h) (d = 2, 3), while J(h') is not "
                            "I_χ²(x_h'; x_h). Logit output: the gradient is a log-likelihood contrast "
                            "(1/h)[(λ_j − λ̄)(x_h) − E_softmax(λ̄)(λ_j − λ̄)], not χ²-MI. Compared with "
                            "complex-step derivatives, exact enumeration vs numerics.gradient.init_gradient, and "
                            "chi2_gain.",
                            {"logit_variant": "log-likelihood contrast, not chi2-MI"})


#: Sizes of the exact sweep (instances, and instances per work item) and of the Monte Carlo samples per case.
SWEEP_SIZES = {"quick": {"thm3_instances": 60, "thm3_chunk": 30, "thm3_mc_samples": 100_000},
               "full": {"thm3_instances": 1000, "thm3_chunk": 50, "thm3_mc_samples": 1_000_000}}
#: Chains per μ₀ of the model check (autograd through the real model).
MODEL_SAMPLES = {"quick": 20_000, "full": 200_000}
#: Theorem 3's Monte Carlo close call at d = 5, h = 11: a fixed random kernel K (seed below) mixed with the uniform
#: kernel, (1 − t)/d + t K. J(pa) − J(h') is ∝ t² and its standard error ∝ t/√n, so t = 0.04·√(100 000/n) keeps the
#: smallest margin near 5 standard errors in every tier.
THM3_CLOSE_CALL = {"seed": 2026, "t_at_100000": 0.04, "d": 5, "H": 12}


def _thm3_task(seed: int, chunk: tuple[int, int]):
    return thm3_sweep_chunk(seed, *chunk)


def thm3_sweep(ctx: CheckContext):
    """The exact Theorem 3 sweep (both forms, both μ₀, with the shuffled-label control), shared through the cache."""
    key = ("numeric", "thm3_sweep", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        parts = chunks(SWEEP_SIZES[ctx.tier]["thm3_instances"], SWEEP_SIZES[ctx.tier]["thm3_chunk"])
        ctx.cache[key] = merge_sweeps(ctx.map(partial(_thm3_task, ctx.seed_for("thm3-sweep")), parts,
                                              desc="thm3 sweep"))
    return ctx.cache[key]


def _decide_argmax(violations: int, identity_errors) -> str:
    """Theorem 3's exact rule: the claimed parent is the strict argmax in every (non-tie) case, and the identities
    hold to IDENTITY_ATOL."""
    return "pass" if violations == 0 and max(identity_errors) <= IDENTITY_ATOL else "fail"


def _thm3_bars(ax, out: dict, forms: dict, title: str) -> None:
    positions = np.arange(out["exact"].size)
    width = 0.8 / len(forms)
    for k, (key, label) in enumerate(forms.items()):
        ax.bar(positions + (k - (len(forms) - 1) / 2) * width, out[key], width, label=label)
    ax.axvline(out["parent"], color="k", lw=0.8, ls="--")
    ax.axhline(0.0, color="k", lw=0.5)
    ax.set_xlabel("candidate h' (dashed: true parent)")
    ax.set_xticks(positions)  # candidates are integers
    ax.set_title(title, fontsize=9)


def _j_form_figure(ctx: CheckContext) -> str:
    """One example: the J form at h = 6 on a random kernel, both μ₀."""
    rng = ctx.rng("thm3-init-gradient/figure")
    kernel = random_kernel(3, eps=0.05, rng=rng)
    parents = np.array([-1, 0, 1, 1, 0, 2, 4])
    init = rng.dirichlet(np.ones(3))
    fig, axes = new_figure(1, 2, figsize=(8, 3.2), sharey=True)
    forms = {"approximate": "(1/h) J, pairwise joints", "enumerated_approximate": "enumerated with P(x_h)"}
    for ax, (name, mu0) in zip(axes, (("stationary μ₀", None), ("non-stationary μ₀", init))):
        _thm3_bars(ax, thm3_check_position(kernel, parents, 6, mu0), forms, name)
    for ax in axes:  # both panels labelled (the y axis is shared)
        ax.set_ylabel("E[−∂ℓ/∂p̂_h'] (approximate form)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return save_check_figure(fig, ctx, "thm3_init_gradient.png")


def _j_form_outcome(violations: int, swept: int, stored: list) -> str:
    """'J(pa) is the strict largest in every non-tie case', or the violations: the violating stored instances first,
    then what the sweep found, then the stored instances that hold."""
    if not violations:
        return "J(pa) is the strict largest in every non-tie case"
    failing = [f"μ₀ = {i['init']}, h = {i['h']}: margin {k['margin_approximate']:+.4f}" for i, k in stored
               if not k["holds"]]
    holding = [f"μ₀ = {i['init']}, h = {i['h']}: {k['margin_approximate']:+.4f}" for i, k in stored if k["holds"]]
    text = f"{violations} violation{'s' if violations > 1 else ''} of J(pa) > J(h')"
    if failing:
        text += f", on the stored instance{'s' if len(failing) > 1 else ''} {'; '.join(failing)}"
    text += f"; the sweep found {swept}" if swept else "; the sweep found none"
    return text + (f"; the other stored instances hold ({'; '.join(holding)})" if holding else "")


def stationary_j_form_control(counts: dict, identity_errors) -> PositiveControl:
    """The J form's argmax rule on the input the theorem covers (proved: ``stationary_check``): the sweep's own cases
    under a stationary μ₀. It fails if a single stationary case puts another candidate above pa(h)."""
    violations = counts.get("stationary/violations/approximate", 0)
    cases = counts.get("stationary/positions", 0) - counts.get("stationary/ties/approximate", 0)
    return PositiveControl("the sweep's stationary-μ₀ cases alone (where the J form is proved, see the stationary "
                           "check), judged by the same argmax rule", {"violations": violations, "cases": cases},
                           _decide_argmax(violations, identity_errors) == "pass" and cases > 0)


def exact_check(ctx: CheckContext) -> CheckOutcome:
    """Theorem 3 as the paper writes it ('≈'): with the marginal P(x_h) in place of π̄, E = (1/h) J(h') (enumeration
    over sequences against pairwise joints), J(pa) = I_χ² and J(pa) > J(h') for every other h', stationary and
    non-stationary μ₀, by exact enumeration on the sweep and on the stored instance.

    Control: a shuffled parent label (a uniformly drawn other candidate claimed to be the parent at every position),
    judged by the same argmax rule. Positive control: the stationary-μ₀ cases of the same sweep (proved).
    """
    result = thm3_sweep(ctx)
    counts = result.counts
    identities = {"chi2": result.worst["chi2_identity_error"].value, "j": result.worst["j_identity_error"].value}
    stored = [(i, check_instance(dict(i, form="approximate"))) for i in stored_counterexamples("thm3")]
    violations = counts.get("violations/approximate", 0) + sum(not k["holds"] for _, k in stored)
    verdict = _decide_argmax(violations, identities.values())
    control_violations = counts.get("control/violations/approximate", 0)
    control_cases = counts.get("positions", 0) - counts.get("control/ties/approximate", 0)
    control = Control("a shuffled parent label: at every position a uniformly drawn other candidate is claimed to be "
                      "the parent, judged by the same argmax rule",
                      {"violations": control_violations, "cases": control_cases},
                      rejected=_decide_argmax(control_violations, identities.values()) != "pass",
                      margin=ControlMargin("violations", control_violations, 0, units="positions"))
    instance = None
    if verdict == "fail":
        failing = [i for i, k in stored if not k["holds"]]
        instance = (result.worst["negative_margin/approximate"].instance if counts.get("violations/approximate", 0)
                    else failing[0] if failing else result.worst["chi2_identity_error"].instance)
    figure = (_instance_figure(ctx, instance, {"approximate": "(1/h) J, pairwise joints",
                                               "enumerated_approximate": "enumerated with P(x_h)"},
                               "thm3_init_gradient.png") if verdict == "fail" and instance.get("init") is not None
              else _j_form_figure(ctx))
    per_kind = {kind: {"positions": counts.get(f"{kind}/positions", 0),
                       "violations": counts.get(f"{kind}/violations/approximate", 0),
                       "ties": counts.get(f"{kind}/ties/approximate", 0)} for kind in INIT_KINDS}
    smallest = -result.worst["negative_margin/approximate"].value
    measured = {"positions": counts.get("positions", 0), "violations": violations,
                "ties": counts.get("ties/approximate", 0), "by_init": per_kind, "smallest_margin": smallest,
                "smallest_margin_instance": result.worst["negative_margin/approximate"].instance,
                "max_chi2_identity_error": identities["chi2"], "max_j_identity_error": identities["j"],
                "stored_instance_margins": [k["margin_approximate"] for _, k in stored], "ranges": THM3_RANGES}
    return CheckOutcome(
        verdict=verdict, measured=jsonable(measured),
        threshold={"violations": 0, "|J(pa) − I_χ²|, |E − (1/h)J|": IDENTITY_ATOL},
        summary=f"J form ('≈', P(x_h) in place of π̄) on {counts.get('positions', 0)} (instance, μ₀, h) cases of the "
                f"sweep, stationary and non-stationary μ₀, enumerated exactly, and on the {len(stored)} stored "
                f"non-stationary instances: {_j_form_outcome(violations, counts.get('violations/approximate', 0), stored)} "
                f"({counts.get('ties/approximate', 0)} ties from zero-information kernels; smallest sweep margin "
                f"{smallest:.2e}); |J(pa) − I_χ²| ≤ {identities['chi2']:.1e}, |E − (1/h)J| ≤ {identities['j']:.1e}. "
                f"A shuffled parent label fails the same rule in {control_violations} of {control_cases} cases "
                "(control).",
        figures=[figure], instance=instance, control=control,
        positive_control=stationary_j_form_control(counts, identities.values()),
        # exact float64 values, spread 0 over threads/CPU capability (seed 0). smallest_margin (1.1e-4) is a
        # difference of exact sums: rel 1e-6. The identity errors are rounding (≤ 1e-15): 1e-13, far below 1e-10
        tolerances={"smallest_margin": {"rel": 1e-6}, "max_chi2_identity_error": {"abs": 1e-13},
                    "max_j_identity_error": {"abs": 1e-13}, "stored_instance_margins": {"abs": 1e-12}})


def _pibar_findings(result, stored: list) -> list[Finding]:
    """One finding per μ₀ kind: refuted by a stored instance of that kind or the sweep's worst case, else holds."""
    counts = result.counts
    findings = []
    for kind in INIT_KINDS:
        swept = counts.get(f"{kind}/violations/exact", 0)
        cases = counts.get(f"{kind}/positions", 0) - counts.get(f"{kind}/ties/exact", 0)
        refuting = [i for i, k in stored if not k["holds"] and (i["init"] is None) == (kind == "stationary")]
        if swept and not refuting:
            refuting = [result.worst[f"{kind}/negative_margin/exact"].instance]
        statement = f"the exact π̄ form of the expected init gradient has its largest entry at pa(h) under a {kind} μ₀"
        mine = [(i, k) for i, k in stored if (i["init"] is None) == (kind == "stationary")]
        violating = [f"violated on the stored instance (chain, μ₀ = {i['init']}, h = {i['h']}): {k['summary']}"
                     for i, k in mine if not k["holds"]]
        swept_note = (f"the sweep found {swept} violations in {cases} non-tie cases" if swept else
                      f"the sweep's {cases} non-tie cases found none")
        others = [f"the other stored instance (μ₀ = {i['init']}, h = {i['h']}, a J-form counterexample) holds here: "
                  f"{k['summary']}" for i, k in mine if k["holds"]]
        evidence = "; ".join(violating + [swept_note] + others)
        findings.append(Finding(statement, "refuted" if refuting else "holds",
                                smallest_instance(refuting) if refuting else None, evidence))
    return findings


def _instance_figure(ctx: CheckContext, shown: dict, forms: dict, filename: str) -> str:
    """The instance a refuted statement is about, under its μ₀ (left) and under the stationary law (right)."""
    kernel, parents = np.array(shown["kernel"]), np.array(shown["parents"])
    fig, axes = new_figure(1, 2, figsize=(8, 3.2), sharey=True)
    for ax, (name, mu0) in zip(axes, ((f"μ₀ = {shown['init']}", np.array(shown["init"])),
                                      ("stationary μ₀", None))):
        _thm3_bars(ax, thm3_check_position(kernel, parents, shown["h"], mu0), forms, name)
    for ax in axes:  # both panels labelled (the y axis is shared)
        ax.set_ylabel("E[−∂ℓ/∂p̂_h']")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return save_check_figure(fig, ctx, filename)


def _pibar_figure(ctx: CheckContext, shown: dict) -> str:
    """The instance the refuted finding is about: the stored counterexample, both μ₀."""
    return _instance_figure(ctx, shown, {"exact": "exact (π̄)", "approximate": "(1/h) J"},
                            "thm3_init_gradient_pibar.png")


def _pibar_measured(result, stored: list) -> dict:
    counts = result.counts
    per_kind = {kind: {"positions": counts.get(f"{kind}/positions", 0),
                       "violations": counts.get(f"{kind}/violations/exact", 0),
                       "ties": counts.get(f"{kind}/ties/exact", 0),
                       "smallest_margin": -result.worst[f"{kind}/negative_margin/exact"].value
                       if f"{kind}/negative_margin/exact" in result.worst else None}
                for kind in INIT_KINDS}
    return {"by_init": per_kind,
            "stored": [{"init": i["init"], "h": i["h"], "margin_exact": k["margin_exact"],
                        "margin_approximate": k["margin_approximate"], "exact": k["exact"]} for i, k in stored]}


def _pibar_summary(result, stored: list, findings: list, control_violations: int) -> str:
    summary = (f"Exact π̄ form on {result.counts.get('positions', 0)} sweep cases and the stored instance: "
               + "; ".join(f"{kind} μ₀: {f.status} ({f.evidence.split(';')[0]})"
                           for kind, f in zip(INIT_KINDS, findings)))
    if stored:
        shown, check = stored[0]
        summary += (f". Stored chain x_0 → x_1 → x_2 → x_3, μ₀ = {shown['init']}, h = {shown['h']}: exact gradients "
                    f"{np.round(check['exact'], 4).tolist()} with pa(h) = {check['parent']}, while the J form keeps "
                    f"the parent first (margin {check['margin_approximate']:.4f})")
    return summary + f". A shuffled parent label fails the same rule in {control_violations} cases (control)."


def pibar_check(ctx: CheckContext) -> CheckOutcome:
    """Ours (stronger): the exact expectation with π̄ has its largest entry at pa(h), under a stationary and under a
    non-stationary μ₀ (two findings), on the shared sweep and the stored search instance.

    Verdict: fail when a finding is refuted, else pass. Control: the shuffled parent label of the sweep, judged by
    the same argmax rule in the π̄ form. No positive control: no μ₀ is known (proved) under which the π̄ form's
    largest entry must sit at pa(h); under a stationary μ₀ it is observed only (see the stationary check).
    """
    result = thm3_sweep(ctx)
    counts = result.counts
    stored = [(i, check_instance(dict(i, form="exact"))) for i in stored_counterexamples("thm3")]
    findings = _pibar_findings(result, stored)
    control_violations = counts.get("control/violations/exact", 0)
    control = Control("a shuffled parent label (the sweep's uniformly drawn other candidate), same argmax rule in "
                      "the π̄ form", {"violations": control_violations,
                                      "cases": counts.get("positions", 0) - counts.get("control/ties/exact", 0)},
                      rejected=_decide_argmax(control_violations, [0.0]) != "pass",
                      margin=ControlMargin("violations", control_violations, 0, units="positions"))
    refuted = [f for f in findings if f.status == "refuted"]
    figures = [_pibar_figure(ctx, stored[0][0])] if stored else []
    return CheckOutcome(
        verdict="fail" if refuted else "pass", measured=jsonable(_pibar_measured(result, stored)),
        threshold={"violations": 0}, summary=_pibar_summary(result, stored, findings, control_violations),
        figures=figures, findings=findings, control=control,
        instance=refuted[0].instance if refuted else None,
        # exact float64 values, spread 0 over threads/CPU capability (seed 0); margins are differences of exact
        # sums: rel 1e-6; the stored instance's values: abs 1e-12
        tolerances={"by_init": {"rel": 1e-6}, "stored": {"abs": 1e-12}})


#: Sizes of the stationary proof check: random instances of the numeric chain, random points of the symbolic one.
STATIONARY_SIZES = {"quick": {"instances": 60, "points": 12}, "full": {"instances": 1000, "points": 60}}
#: An equality of the chain holds when its residual is at most this (rounding is ≤ 1e-15 on the sweep), an
#: inequality when its slack is at least minus this; each perturbed step misses by more than 1e-3.
CHAIN_ATOL = 1e-12


def _stationary_evidence(ctx: CheckContext) -> dict:
    """Compute: the symbolic steps (and their perturbed control), the numeric chain on random stationary instances,
    and the chain on the two stored non-stationary counterexamples."""
    sizes = STATIONARY_SIZES[ctx.tier]
    derivation = derive_thm3_stationary()
    verification = verify_thm3_stationary(ctx.rng("thm3-stationary/symbolic"), n_points=sizes["points"])
    control_derivation = perturb_thm3_stationary(perturbation=candidate_law_for_parent_law)
    control_verification = verify_thm3_stationary(ctx.rng("thm3-stationary/symbolic"), n_points=sizes["points"],
                                                  perturbation=candidate_law_for_parent_law)
    sweep = stationary_chain_sweep(ctx.rng("thm3-stationary/sweep"), sizes["instances"], tolerance=CHAIN_ATOL)
    breaks = []
    for stored in stored_counterexamples("thm3"):
        chain = proof_chain(np.array(stored["kernel"]), np.array(stored["parents"]), stored["h"],
                            np.array(stored["init"]))
        breaks.append({"form": stored["form"], "init": stored["init"], "h": stored["h"],
                       **{key: np.asarray(chain[key]).tolist() for key in (
                           "candidates", "J", "identity_error", "left_singular_residual", "pi_side_gap",
                           "gap_allowance", "cauchy_schwarz_slack", "sdpi_slack", "margin")},
                       "J_parent": chain["J_parent"]})
    return {"derivation": derivation, "verification": verification, "control_derivation": control_derivation,
            "control_verification": control_verification, "sweep": sweep, "breaks": breaks,
            "boundary": boundary_evidence(ctx)}


def _stationary_decision(evidence: dict) -> tuple[str, bool]:
    """Decide: every symbolic step holds and agrees with numerics; on the sweep every equality's residual is at most
    CHAIN_ATOL, every slack at least −CHAIN_ATOL, η < 1 and J(pa) > J(h'); the weaker sufficient condition holds on
    the boundary's sweep and hardest instances. The control is rejected when the perturbed symbolic step fails, every
    perturbed numeric step fails the same rule, and the condition's control (the known counterexample) is rejected."""
    sweep = evidence["sweep"]
    condition_holds, condition_control = boundary_holds(evidence["boundary"])
    holds = (evidence["derivation"].identities_hold and evidence["verification"].passed
             and max(sweep["max_residual"].values()) <= CHAIN_ATOL and sweep["max_top_singular_error"] <= CHAIN_ATOL
             and min(sweep["min_slack"][k] for k in ("cauchy_schwarz_slack", "sdpi_slack", "bound_slack"))
             >= -CHAIN_ATOL and sweep["min_slack"]["margin"] > CHAIN_ATOL and sweep["max_eta"] < 1
             and condition_holds)
    rejected = (not evidence["control_derivation"].identities_hold and not evidence["control_verification"].passed
                and max(sweep["min_control_slack"].values()) < -CHAIN_ATOL
                and sweep["control_identity"]["rejected_instances"] > 0
                and sweep["control_left_singular"]["rejected_instances"] > 0 and condition_control)
    return ("pass" if holds else "fail"), rejected


def _stationary_findings(evidence: dict, verdict: str) -> list[Finding]:
    sweep = evidence["sweep"]
    moved = sweep["non_stationary"]
    j_form = next(b for b in evidence["breaks"] if b["form"] == "approximate")
    pibar = next(b for b in evidence["breaks"] if b["form"] == "exact")
    return [
        Finding("J(pa) > J(h') for every other h' when μ₀ is the stationary law of π and π > 0 (ours: proved, "
                "J(h') ≤ √η_χ²·J(pa) with η_χ² < 1 the SDPI coefficient of x_pa → x_h'), with the proof steps "
                "checked", "holds" if verdict == "pass" else "refuted",
                None if verdict == "pass" else sweep["worst"],
                f"steps derived with SymPy (d = 2, 3; the SDPI at d = 2) and checked at random points; on "
                f"{sweep['cases']} stationary cases every equality within {CHAIN_ATOL:g} and every slack ≥ "
                f"−{CHAIN_ATOL:g} (largest η {sweep['max_eta']:.3f}). Without stationarity only step 2 breaks: on "
                f"the stored J-form counterexample ‖B‖² − I_χ²(x_pa; x_h) = {j_form['pi_side_gap'][0]:.3f}"),
        Finding("J(pa) > J(h') whenever ‖B‖² − I_χ²(x_pa; x_h) < J(pa)(1 − η)/η for that h', whatever μ₀ (ours: "
                "the same chain, a weaker condition than stationarity)",
                "holds" if moved["condition_violations"] == 0 else "refuted", None,
                f"{moved['condition_cases']} of {moved['cases']} non-stationary cases meet the condition, "
                f"{moved['condition_violations']} of them with J(h') ≥ J(pa); the stored J-form counterexample misses "
                f"it ({j_form['pi_side_gap'][0]:.3f} > {j_form['gap_allowance'][0]:.3f}). It does not cover the exact "
                f"π̄ form: on the stored π̄ instance x_0 meets it ({pibar['pi_side_gap'][0]:.4f} < "
                f"{pibar['gap_allowance'][0]:.4f}) yet the π̄ form ranks x_0 above pa(h)"),
    ]


#: The statement the repairs replace: Theorem 3's J form for every μ₀ (the paper: "stationarity is not needed").
J_FORM_AS_STATED = ("J(pa) > J(h') for every other h', for stationary and non-stationary μ₀ (Theorem 3's J form; the "
                    "paper: stationarity is not needed)")


def _proof_evidence(evidence: dict) -> list[str]:
    """The repaired J form's evidence, one sentence per kind, from the measured values."""
    sweep, verification, derivation = evidence["sweep"], evidence["verification"], evidence["derivation"]
    j_form = next(b for b in evidence["breaks"] if b["form"] == "approximate")
    k = int(np.argmin(j_form["margin"]))
    return [
        f"proof steps derived with SymPy: {sum(derivation.status().values())} of {len(derivation.status())} "
        f"identities hold (d = 2, 3; the SDPI at d = 2), checked at {verification.measured()['n_points']} random "
        f"points against independent numerics (largest error {verification.measured()['max_abs_error']:.1e})",
        f"every step evaluated on {sweep['cases']} random stationary cases ({sweep['instances']} instances): "
        f"equalities within {max(sweep['max_residual'].values()):.1e}, slacks ≥ "
        f"{min(sweep['min_slack'][k] for k in ('cauchy_schwarz_slack', 'sdpi_slack', 'bound_slack')):.1e} (rounding), largest "
        f"η_χ² {sweep['max_eta']:.3f}, smallest margin J(pa) − J(h') {sweep['min_slack']['margin']:.2e}",
        f"without stationarity only step 2 breaks: on the stored counterexample (μ₀ = {j_form['init']}, h = "
        f"{j_form['h']}) J(x_{j_form['candidates'][k]}) − J(pa) = {-j_form['margin'][k]:.4f} with π-side gap "
        f"‖B‖² − I_χ²(x_pa; x_h) = {j_form['pi_side_gap'][k]:.3f} (0 under a stationary μ₀)",
    ]


def _condition_evidence(evidence: dict) -> list[str]:
    moved, boundary = evidence["sweep"]["non_stationary"], evidence["boundary"]
    depth, control = boundary["depth"], boundary["control"]
    return [
        "proved by the same chain: J(h') ≤ √(η·J(pa)·(J(pa) + gap)) < J(pa) while gap < J(pa)(1 − η)/η",
        f"Dirichlet(1) μ₀ on the proof sweep: {moved['condition_cases']} of {moved['cases']} cases meet it, "
        f"{moved['condition_violations']} of them with J(h') ≥ J(pa); sparse kernels under Dirichlet(0.3) μ₀: "
        f"{depth['condition_cases']} of {depth['cases']} cases meet it, {depth['condition_violations']} violations "
        f"(smallest margin {depth['condition_smallest_margin']:.1e})",
        f"the search's hardest instances ({boundary['hardest']['instances']}: every violation it found and the "
        f"sweep's smallest margin): {boundary['hardest']['cases']} cases meet it, "
        f"{boundary['hardest']['violations']} violations",
        f"negative control, the known counterexample (TV(μ₀, μ) = {control['tv']:.3f}): its gap "
        f"{control['pi_side_gap']:.3f} exceeds its allowance "
        f"{control['gap_allowance']:.3f} (condition not met, J(pa) − J(h') = {control['margin']:.4f}); the allowance "
        f"widened to {control['widened_allowance']:.3f} admits it: rejected",
    ]


def _pibar_repair(ctx: CheckContext, boundary: dict) -> HoldsInstead:
    """The exact π̄ form under a stationary μ₀: observed (no proof), from the shared sweep and the search."""
    counts = thm3_sweep(ctx).counts
    cases = counts.get("stationary/positions", 0) - counts.get("stationary/ties/exact", 0)
    cell = closest_violation(boundary, "exact")
    return HoldsInstead(
        "the exact π̄ form of the expected init gradient has its largest entry at pa(h) under a non-stationary μ₀ "
        "(ours, stronger)",
        "the exact π̄ form has its largest entry at pa(h) under a stationary μ₀ (observed; it needs more than the J "
        "form's condition, and no proof is known here)", "observed",
        [f"the exact sweep: {counts.get('stationary/violations/exact', 0)} violations in {cases} non-tie stationary "
         "cases", "the J form's sufficient condition does not cover it: on the stored π̄ counterexample x_0 meets "
         "the condition yet the π̄ form ranks x_0 above pa(h)"],
        "the search's closest violation to μ: " + (f"TV(μ₀, μ) = {cell['smallest_tv']:.3f} (d = {cell['d']}, "
                                                   f"d·min π = {cell['d_min_pi']:g})" if cell else "none found")
        + " (figure above)")


def _holds_instead(ctx: CheckContext, evidence: dict, verdict: str, figure: str) -> list[HoldsInstead]:
    status = "proved" if verdict == "pass" else "observed"
    return [
        HoldsInstead(J_FORM_AS_STATED, "J(pa) > J(h') for every h' ≠ pa(h) when μ₀ is the stationary law of π and "
                     "π > 0: J(h') ≤ √η_χ²·J(pa), η_χ² < 1 the SDPI coefficient of the channel x_pa → x_h'",
                     status, _proof_evidence(evidence), boundary_sentence(evidence["boundary"]), [figure]),
        HoldsInstead(J_FORM_AS_STATED, "J(pa) > J(h') for that h' whatever μ₀, whenever the π-side gap "
                     "‖B‖² − I_χ²(x_pa; x_h) is below J(pa)(1 − η)/η (0 under a stationary μ₀)", status,
                     _condition_evidence(evidence)),
        _pibar_repair(ctx, evidence["boundary"]),
    ]


def stationary_check(ctx: CheckContext) -> CheckOutcome:
    """Ours (stronger, "what holds instead"): Theorem 3's J form under a stationary μ₀, proved by
    J(h') = ⟨A, B⟩_F ≤ ‖A‖‖B‖ = √(I_χ²(x_h'; x_h)·I_χ²(x_pa; x_h)) ≤ √η·J(pa), each step derived symbolically and
    evaluated on random stationary instances; the stored counterexamples show which step breaks without it.

    Control: each step perturbed (the π side under the parent's law in place of the candidate's, symbolically;
    Cauchy–Schwarz and the SDPI bound ×0.95, η in place of √η, the identity with π's stationary law under a
    Dirichlet μ₀, the singular-pair equation under a Dirichlet μ₀), judged by the same rule; the weaker sufficient
    condition with its allowance widened to admit the known J-form counterexample (which violates J(pa) > J(h')).
    No positive control: its input already is the ideal (random instances inside the proved statement's hypothesis,
    the steps of the proof itself), so a positive control would repeat the check.
    """
    evidence = _stationary_evidence(ctx)
    verdict, rejected = _stationary_decision(evidence)
    sweep, verification = evidence["sweep"], evidence["verification"]
    control = Control("each proof step perturbed: π side under the parent's law (symbolic), Cauchy–Schwarz and SDPI "
                      "bounds ×0.95, η for √η, the identity with π's stationary law and the singular-pair equation "
                      "under a Dirichlet μ₀; the sufficient condition's allowance widened to admit the known "
                      "J-form counterexample",
                      {"symbolic_identities_hold": evidence["control_derivation"].identities_hold,
                       "symbolic_errors_over_tolerance": evidence["control_verification"].errors_over_tolerance,
                       "min_slacks": sweep["min_control_slack"], "identity": sweep["control_identity"],
                       "left_singular": sweep["control_left_singular"],
                       "condition_on_counterexample": evidence["boundary"]["control"]}, rejected)
    measured = {"symbolic": {"identities": evidence["derivation"].status(), **verification.measured()},
                "instances": sweep["instances"], "cases": sweep["cases"], "max_residual": sweep["max_residual"],
                "min_slack": sweep["min_slack"], "max_eta": sweep["max_eta"],
                "max_top_singular_error": sweep["max_top_singular_error"], "non_stationary": sweep["non_stationary"],
                "counterexample_steps": evidence["breaks"], "boundary": boundary_measured(evidence["boundary"])}
    j_form = next(b for b in evidence["breaks"] if b["form"] == "approximate")
    return CheckOutcome(
        verdict=verdict, measured=jsonable(measured), threshold={"residuals": CHAIN_ATOL, "slacks": -CHAIN_ATOL},
        summary=f"Under a stationary μ₀ (π > 0) J(pa) > J(h') is proved: every step derived symbolically and, on "
                f"{sweep['cases']} random stationary cases, every equality within {CHAIN_ATOL:g}, every slack ≥ "
                f"−{CHAIN_ATOL:g}, η ≤ {sweep['max_eta']:.3f}, smallest margin {sweep['min_slack']['margin']:.2e}. "
                f"On the stored J-form counterexample steps 1, 3, 4 hold and step 2 fails (|√pᵀM_π − √P_hᵀ| = "
                f"{j_form['left_singular_residual'][0]:.3f}, ‖B‖² − I_χ²(x_pa; x_h) = {j_form['pi_side_gap'][0]:.3f}). "
                f"The weaker condition (π-side gap below J(pa)(1 − η)/η) holds on "
                f"{evidence['boundary']['depth']['condition_cases']} cases of the boundary sweep and on the search's "
                f"hardest instances; how far from μ the statement holds: 'What holds instead' below. "
                f"Control: every perturbed step is rejected: {rejected}.",
        derivation=evidence["derivation"].latex_steps(), findings=_stationary_findings(evidence, verdict),
        holds_instead=_holds_instead(ctx, evidence, verdict, boundary_figure(ctx, evidence["boundary"])),
        tables=boundary_tables(evidence["boundary"]),
        control=control, instance=None if verdict == "pass" else sweep["worst"],
        # exact float64 values of seeded instances; residuals and slacks are rounding (≤ 1e-15): abs 1e-13
        tolerances={"max_residual": {"abs": 1e-13}, "min_slack": {"rel": 1e-6, "abs": 1e-13},
                    "symbolic": {"abs": 1e-13}, "max_top_singular_error": {"abs": 1e-13},
                    "non_stationary": {"abs": 1e-13}, "counterexample_steps": {"abs": 1e-12},
                    # exact float64 values of seeded searches and sweeps (spread 0 on this machine, seed 0)
                    "boundary": {"abs": 1e-12}})


def _thm3_mc_case(label: str, kernel, parents, init, n: int, rng) -> dict:
    """The J form at h = H − 1 by Monte Carlo: z of every coordinate and margin against the exact (1/h) J, margins'
    intervals against 0; the same rule with the runner-up claimed to be the parent (the control)."""
    h = parents.size - 1
    out = thm3_monte_carlo(kernel, parents, h, n, rng=rng, init=init, form="approximate")
    exact = out["approximate"]
    parent = out["parent"]
    others = out["others"]
    z = np.concatenate([z_scores(out["gradient"], exact), z_scores(out["margins"], exact[parent] - exact[others])])
    margins = out["margins"]
    closest = int(np.argmin((exact[parent] - exact[others]) / margins.stderr))
    runner_up = int(others[np.argmax(exact[others])])
    shuffled = thm3_monte_carlo(kernel, parents, h, n, rng=rng, init=init, form="approximate", claimed=runner_up)
    z_shuffled = np.concatenate([z_scores(shuffled["gradient"], exact),
                                 z_scores(shuffled["margins"], exact[shuffled["claimed"]] - exact[shuffled["others"]])])
    return {"case": label, "h": h, "parent": parent, "closest": int(others[closest]),
            "margin": float(margins.value[closest]), "stderr": float(margins.stderr[closest]),
            "exact_margin": float(exact[parent] - exact[others][closest]),
            "margin_in_stderr": float((exact[parent] - exact[others][closest]) / margins.stderr[closest]),
            "max_abs_z": float(np.abs(z).max()),
            "verdict": decide_interval(z, margins.low, margins.high, 0.0, below=False),
            "runner_up": runner_up,
            "control_verdict": decide_interval(z_shuffled, shuffled["margins"].low, shuffled["margins"].high, 0.0,
                                                below=False),
            "ideal_verdict": ideal_estimate_verdict(exact[parent] - exact[others], margins.value, margins.low,
                                                    margins.high, 0.0, below=False)}


def monte_carlo_check(ctx: CheckContext) -> CheckOutcome:
    """Theorem 3's J form beyond enumeration (d = 5, h = 11: 5^12 configurations): Monte Carlo gradients with P(x_h)
    in place of π̄, each coordinate and paired margin judged against the exact (1/h) J from pairwise joints by z,
    and every margin's interval against 0; a random kernel under both μ₀ and a close call (margin ≈ 5 s.e.).

    Control: the runner-up candidate claimed to be the parent (a shuffled label), judged by the same rule.
    """
    rng = ctx.rng("thm3-init-gradient/monte-carlo")
    n = SWEEP_SIZES[ctx.tier]["thm3_mc_samples"]
    kernel = random_kernel(5, eps=0.02, rng=rng)
    parents = random_parents(12, rng=rng)
    cases = [_thm3_mc_case(kind, kernel, parents, None if kind == "stationary" else rng.dirichlet(np.ones(5)), n, rng)
             for kind in INIT_KINDS]
    cc = THM3_CLOSE_CALL
    fixed = np.random.default_rng(cc["seed"])  # a fixed instance: its closeness does not depend on the report seed
    t = cc["t_at_100000"] * np.sqrt(100_000 / n)
    weak = (1.0 - t) / cc["d"] + t * random_kernel(cc["d"], eps=0.02, rng=fixed)
    cases.append(_thm3_mc_case("close call", weak, random_parents(cc["H"], rng=fixed), None, n, rng))
    verdict = combine_verdicts(c["verdict"] for c in cases)
    control_verdict = combine_verdicts(c["control_verdict"] for c in cases)
    control = Control("the runner-up candidate (largest exact J among the others) claimed to be the parent, judged by "
                      "the same rule", {"verdicts": [c["control_verdict"] for c in cases]},
                      rejected=control_verdict != "pass")
    close = cases[-1]
    rows = [[c["case"], c["parent"], c["closest"], round(c["exact_margin"], 5), round(c["margin"], 5),
             round(c["stderr"], 5), round(c["max_abs_z"], 2), c["verdict"], c["control_verdict"]] for c in cases]
    max_z = max(c["max_abs_z"] for c in cases)
    # no listed tolerances (bit-reproducible); spread over seeds: docs/notes/thm3-init-gradient.md
    return CheckOutcome(
        verdict=verdict,
        measured={"samples": n, "kernel": kernel.tolist(), "parents": parents.tolist(), "max_abs_z": max_z,
                  "instance_verdicts": [c["verdict"] for c in cases],
                  "close_call": {"t": t, "exact_margin": close["exact_margin"],
                                 "margin_in_stderr": close["margin_in_stderr"]},
                  "smallest_margin": {c["case"]: c["margin"] for c in cases}},
        threshold=f"every estimate within {Z_AGREE:g} standard errors of the exact (1/h) J; 95% interval of every "
                  "margin J(pa) − J(h') above 0",
        summary=f"J form at d=5, h=11 (beyond enumeration), {n} samples per case (random kernel, both μ₀, and a close "
                f"call whose smallest margin is {close['margin_in_stderr']:.1f} standard errors): every estimate "
                f"within {max_z:.1f} standard errors of the exact (1/h) J; margins above 0: "
                f"{', '.join(c['verdict'] for c in cases)}; the runner-up claimed as parent: "
                f"{', '.join(c['control_verdict'] for c in cases)} (control).",
        tables=[Table("smallest margin", ["case", "pa(h)", "closest h'", "exact", "estimate", "stderr", "max |z|",
                                          "verdict", "runner-up as parent"], rows)],
        control=control, positive_control=ideal_estimates_control(cases, "the exact margins (1/h)(J(pa) − J(h'))"),
        reason="a margin interval straddles 0 or an estimate disagrees" if verdict == "inconclusive" else "")


#: Largest per-chain |autograd − closed form| of the model check's gradient that reads as equal.
CLOSED_FORM_ATOL = 1e-10


def _decide_gradient(result: dict) -> str:
    """fail when the per-chain closed form is off by > CLOSED_FORM_ATOL or the mean is > 6 standard errors from its
    exact expectation; pass when within 4; inconclusive in between."""
    if result["closed_form_max_error"] > CLOSED_FORM_ATOL or result["max_z"] > 6:
        return "fail"
    return "pass" if result["max_z"] <= 4 else "inconclusive"


def model_check(ctx: CheckContext) -> CheckOutcome:
    """Autograd gradient of StructuredTransformer at p̂ = 0 vs the closed form, and its mean vs init_gradient.

    Control: the marginal form taken as exact. Positive control: the closed form in the model's place (same chains).
    """
    d, H = 3, 6
    kernel = seeded_kernel(ctx, "thm3-model", d)
    parents = numerics.random_parents(H, rng=ctx.rng("thm3-model:tree"))
    inits = {"stationary": None, "non-stationary": ctx.rng("thm3-model:init").dirichlet(np.ones(d))}
    n = MODEL_SAMPLES[ctx.tier]

    def compare(form: str, reader: str = "autograd") -> dict:
        # the same chains (same generator seed) for both forms and readers: only the closed form or reader differs
        results = {label: analysis.init_gradient_comparison(kernel, parents, init, n, form=form, reader=reader,
                                                            rng=ctx.rng(f"thm3-model:{label}"))
                   for label, init in inits.items()}
        finite = [z for r in results.values() for row in r["rows"] for z in row["z"] if math.isfinite(z)]
        return {"results": results,
                "closed_form_max_error": max(r["closed_form_max_error"] for r in results.values()),
                "max_z": max(r["max_z"] for r in results.values()), "max_finite_z": max(finite, default=0.0)}

    real, wrong, ideal = compare("pibar"), compare("marginal"), compare("pibar", "closed-form")
    verdict = _decide_gradient(real)
    positive = PositiveControl("the closed form itself in the model's place (the ideal model) on the same chains, its "
                               "means against the exact expectation by the same rule",
                               {"closed_form_max_error": ideal["closed_form_max_error"], "max_z": ideal["max_z"]},
                               _decide_gradient(ideal) == "pass")
    control = Control("the paper's approximate form as if it were exact: π̄ replaced by the marginal P(x_h), "
                      "expectation (1/h) J(h')",
                      {"closed_form_max_error": wrong["closed_form_max_error"], "max_z": wrong["max_z"],
                       # h = 1 has one candidate: the gradient is exactly 0 there (z infinite against J ≠ 0)
                       "max_z_where_the_stderr_is_positive": wrong["max_finite_z"]},
                      _decide_gradient(wrong) == "fail",
                      margin=ControlMargin("closed_form_max_error", wrong["closed_form_max_error"], CLOSED_FORM_ATOL))
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
        threshold={"closed_form_max_error": CLOSED_FORM_ATOL, "max_z_pass": 4, "max_z_fail": 6},
        summary=f"Per context, autograd −∂ℓ/∂p̂ through the real model equals (1/h)(π(x_h|x_h')/π̄ − 1) to "
                f"{closed:.1e}; its mean over {n} chains matches numerics.init_gradient (exact) with largest "
                f"|z| = {z:.2f} over all h, h' and both μ₀. Control: with the marginal P(x_h) in place of π̄ the same "
                f"rule reads error {wrong['closed_form_max_error']:.2f}, |z| = {wrong['max_finite_z']:.3g} (h ≥ 2; "
                f"infinite at h = 1).",
        tables=[Table("mean autograd gradient vs exact expectation", ["μ₀", "h", "pa(h)", "autograd mean", "SE",
                                                                       "exact"], rows)],
        instance=None if verdict != "fail" else {"kernel": kernel.tolist(), "parents": parents.tolist()},
        control=control, positive_control=positive,
        # closed form: 3.3e-16 everywhere, spread 0 over OMP_NUM_THREADS=1|2 × ATEN_CPU_CAPABILITY=default|avx2
        # and against the reference; 1e-12 is a hundredth of its threshold. max_z is a statistic of seeded chains
        # that only rounding moves: spread 0 over those settings, 1.9e-14 against the reference; 1e-9
        tolerances={"closed_form_max_error": {"abs": 1e-12}, "max_z": {"abs": 1e-9}})


CLAIM = Claim(
    "thm3-init-gradient",
    "Theorem 3: at initialisation the gradient of the loss with respect to the selector scores already "
    "points at the true parent, through χ²-mutual information; stationarity is not needed.",
    "As stated (the paper's '≈'): with mixture output, σ(W_OV) = π and scores p̂ = 0, "
    "−∂ℓ/∂p̂_{h'} = (1/h)(π(x_h|x_{h'})/π̄(x_h) − 1), π̄ = mean over the h candidates; with the marginal "
    "P(x_h) in place of π̄, E = (1/h) J(h'), J(pa) = I_χ²(x_pa; x_h) exactly, and J(pa) > J(h') for every "
    "other h', for stationary and non-stationary μ₀. Stronger (ours, findings): the exact expectation with "
    "π̄ also has its largest entry at pa(h); under a stationary μ₀ the J form is proved (J(h') ≤ √η_χ²·J(pa)).",
    (
        Check("symbolic", symbolic_check,
              "symbolic derivative of ℓ(p̂) at 0; J(pa) = I_χ² for a symbolic joint"),
        Check("exact", exact_check,
              "J (χ²-MI) form, as the paper writes it ('≈'): exact enumeration for small d, h, stationary and "
              "non-stationary μ₀; J(pa) = I_χ² and J(pa) > J(h')"),
        Check("exact", pibar_check,
              "exact π̄ form (the expectation without the approximation), stationary and non-stationary μ₀",
              reading="stronger"),
        Check("exact", stationary_check,
              "J form under a stationary μ₀ (what holds instead): the proof steps derived symbolically and "
              "evaluated with their slacks; which step the counterexamples break", reading="stronger"),
        Check("monte-carlo", monte_carlo_check,
              "Monte Carlo beyond enumeration with confidence intervals, judged against the exact values"),
        Check("model", model_check,
              "autograd gradient of the real model at that initialisation equals the closed form"),
    ),
)
