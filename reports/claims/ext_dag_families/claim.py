"""Claim ext-dag-families (ours, k-parent DAGs, the paper's open question 1): what standard attention can reach.

No member of the standard families, (a) k bilinear heads multiplied, (b) product of experts over single parents
with one W, (b') one W per slot, reproduces the k = 2 set posterior: at every L' <= 5 the best member's in-sample
KL gap (a lower estimate of the family's optimum) exceeds 3 standard errors over contexts and the fit's
resolution. The 2-simplicial family (c), which contains BMA, must fit to within the resolution at every L' (the
fitter's control). Negative control: the same rule on a planted target that lies in every family (softmax of
Σ_{a∈S} Σ_l W[x^l_a, x^l_h], W = log π_1); a rule that finds a gap there is not discriminating. Families are
defined in :mod:`model.dag_families`. History of the values: docs/notes/ext-dag-families.md.
"""
from __future__ import annotations

import numpy as np

from bma_verify.model.dag_families import FAMILIES, FAMILY_LABELS, family_gap_curve, planted_poe_log_posterior
from bma_verify.numerics.dag import random_dag_kernels
from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.core import (CheckContext, CheckOutcome, Control, ControlMargin, Finding, PositiveControl,
                                     Table, new_figure, save_figure)

SIZES = {
    "quick": {"d": 3, "H": 6, "L_values": [1, 2, 3, 5, 8, 12, 20], "n_fit": 200, "n_eval": 200,
              "control_L_values": [1, 2, 3, 5], "control_n": 100},
    "full": {"d": 3, "H": 6, "L_values": [1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20], "n_fit": 1000, "n_eval": 1000,
             "control_L_values": [1, 2, 3, 4, 5], "control_n": 400},
}
SMALL_L = 5  # the rule reads "a gap" only at L' <= 5 (as Proposition 2's check for DS)
FIT_RESOLUTION = 1e-8  # nats per position: far above the 2-simplicial fit's residual, far below every family gap
STANDARD = ("heads", "poe", "poe_slots")
KERNEL_EPS = 0.01  # entrywise floor of the task's kernels (T = log π_k finite)
# float64 fits that stop at FIT_RESOLUTION: their values move with the CPU path by up to 4.2e-11 nats (heads, L' =
# 5, OMP 1|2 x ATEN default|avx2|avx512, quick tier, seed 0; docs/notes/trained-checks.md), so they are compared at
# the fit's own resolution (> 200x that spread), far below every family gap (>= 0.04 nats)
TOLERANCES = {f"families.{fam}.{key}": {"abs": FIT_RESOLUTION}
              for fam in STANDARD for key in ("gap_fit", "gap_eval", "gap_fit_se", "gap_eval_se")}


def _sizes(ctx: CheckContext) -> dict:
    return SIZES["full" if ctx.full else "quick"]


# ------------------------------------------------------------------------------------------------ compute

def family_curves(ctx: CheckContext) -> dict:
    """The real curve (the exact set posterior) and the control curve (the planted product of experts), cached
    per context."""
    key = ("ext-dag-families", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        s = _sizes(ctx)
        kernels = random_dag_kernels(s["d"], 2, eps=KERNEL_EPS, rng=ctx.rng("ext-dag-families:kernels"))
        real = family_gap_curve(kernels, s["H"], s["L_values"], n_fit=s["n_fit"], n_eval=s["n_eval"],
                                rng=ctx.rng("ext-dag-families:fit"))
        with np.errstate(divide="ignore"):
            planted = planted_poe_log_posterior(np.log(kernels[0]), 2)
        control = family_gap_curve(kernels, s["H"], s["control_L_values"], n_fit=s["control_n"],
                                   n_eval=s["control_n"], rng=ctx.rng("ext-dag-families:control"), target=planted)
        ctx.cache[key] = {"real": real, "control": control}
    return ctx.cache[key]


# ------------------------------------------------------------------------------------------------- decide

def decide_families(curve: dict, standard=STANDARD) -> dict:
    """The rule, on one :func:`model.dag_families.family_gap_curve` result (real target or control alike).

    gap found (family F): at every L' <= SMALL_L, F's fit converged and its in-sample gap > max(3 SE,
    FIT_RESOLUTION). fitter ok: the 2-simplicial fit (it contains the target when the target is a k-set
    posterior or a product of experts) converged with in-sample gap <= FIT_RESOLUTION at every L'.
    pass = gap found for every standard family and fitter ok; inconclusive when the fitter is not ok (a gap is
    then no evidence); fail otherwise.
    """
    small = [i for i, L in enumerate(curve["L"]) if L <= SMALL_L]
    found = {}
    for fam in standard:
        r = curve["families"][fam]
        found[fam] = bool(small) and all(r["converged"][i] and r["gap_fit"][i] > max(3 * r["gap_fit_se"][i],
                                                                                      FIT_RESOLUTION)
                                         for i in small)
    s = curve["families"]["simplicial"]
    fitter_ok = all(s["converged"]) and max(s["gap_fit"]) <= FIT_RESOLUTION
    if not fitter_ok:
        verdict = "inconclusive"
    else:
        verdict = "pass" if all(found.values()) else "fail"
    return {"verdict": verdict, "gap_found": found, "fitter_ok": bool(fitter_ok),
            "simplicial_max_gap": float(max(s["gap_fit"]))}


def no_gap_margin(curve: dict) -> ControlMargin:
    """The control's margin under :func:`decide_families`: a standard family without a gap at one L' <= SMALL_L rejects
    it, so the in-sample gap furthest below its bar max(3 SE, FIT_RESOLUTION), over the families and small L'."""
    small = [i for i, L in enumerate(curve["L"]) if L <= SMALL_L]
    return max((ControlMargin(f"{fam}.gap_fit", curve["families"][fam]["gap_fit"][i],
                              max(3 * curve["families"][fam]["gap_fit_se"][i], FIT_RESOLUTION), passes_below=False,
                              units="nats") for fam in STANDARD for i in small), key=lambda m: m.distance)


def simplicial_positive(real: dict, decided: dict) -> PositiveControl:
    """The rule's fitter half on its ideal: the 2-simplicial family contains the exact set posterior (BMA), so the
    same fitter must reach it (in-sample gap <= FIT_RESOLUTION, converged, at every L'). The gap half has no ideal:
    only an impossibility proof would give a target known to lie outside every standard family. It fails when the
    fitter misses a member it contains (then no family gap is evidence)."""
    s = real["families"]["simplicial"]
    return PositiveControl("the same fitter on the 2-simplicial family, which contains the exact set posterior: "
                           f"in-sample gap <= {FIT_RESOLUTION:g} nats and converged at every L'",
                           {"max_in_sample_gap": decided["simplicial_max_gap"], "converged": s["converged"]},
                           decided["fitter_ok"])


def _growth_findings(real: dict, s: dict) -> list[Finding]:
    """Per standard family, the finding "the held-out gap is larger at the largest L' than at the smallest":
    holds when the lower 3-SE bound at the largest L' exceeds the upper 3-SE bound at the smallest."""
    findings = []
    for fam in STANDARD:
        r = real["families"][fam]
        first_hi = r["gap_eval"][0] + 3 * r["gap_eval_se"][0]
        last_lo = r["gap_eval"][-1] - 3 * r["gap_eval_se"][-1]
        grows = last_lo > first_hi
        findings.append(Finding(
            f"the best member of {FAMILY_LABELS[fam]} leaves a larger held-out gap at L' = {real['L'][-1]} than at "
            f"L' = {real['L'][0]} (the gap does not close as L' grows)", "holds" if grows else "refuted",
            instance=None if grows else {"family": fam, "L": real["L"], "gap_eval": r["gap_eval"]},
            evidence=f"held-out gap {r['gap_eval'][0]:.4f} ± {r['gap_eval_se'][0]:.4f} at L' = {real['L'][0]}, "
                     f"{r['gap_eval'][-1]:.4f} ± {r['gap_eval_se'][-1]:.4f} at L' = {real['L'][-1]} "
                     f"({s['n_eval']} contexts, d = {s['d']}, H = {s['H']})"))
    return findings


# ------------------------------------------------------------------------------------------------- render

def _gap_figure(ctx: CheckContext, curve: dict) -> str:
    fig, ax = new_figure(figsize=(6.4, 4.2))
    floor = 1e-17
    for fam, marker in zip(FAMILIES, "osd^"):
        r = curve["families"][fam]
        ev, se = np.maximum(np.asarray(r["gap_eval"]), floor), np.asarray(r["gap_eval_se"])
        ax.errorbar(curve["L"], ev, yerr=np.minimum(se, ev * 0.999), marker=marker, capsize=3,
                    label=f"{FAMILY_LABELS[fam]}, held out")
        ax.plot(curve["L"], np.maximum(np.asarray(r["gap_fit"]), floor), ls=":", color=ax.lines[-1].get_color())
    ax.set_yscale("log")
    ax.set_xlabel("test context size L' (examples)")
    ax.set_ylabel("KL gap to set posterior (nats per position)")
    ax.set_title("Best member of each family vs BMA, k = 2 (dotted: in-sample)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    filename = "ext_dag_family_gaps.png"
    save_figure(fig, ctx.figure_path(filename))
    return filename


def _gap_table(real: dict) -> Table:
    rows = []
    for i, L in enumerate(real["L"]):
        row = [L]
        for fam in FAMILIES:
            r = real["families"][fam]
            row.append(f"{r['gap_fit'][i]:.3g} ± {r['gap_fit_se'][i]:.2g} / {r['gap_eval'][i]:.3g} ± "
                       f"{r['gap_eval_se'][i]:.2g}")
        rows.append(row)
    return Table("In-sample / held-out KL gap to the set posterior (nats per position h >= 2, ± SE over contexts)",
                 ["L'"] + [FAMILY_LABELS[f] for f in FAMILIES], rows)


def _summary(s: dict, real: dict, decided: dict, control_max: float, control_rejected: bool) -> str:
    small = [i for i, L in enumerate(real["L"]) if L <= SMALL_L]
    min_z = min(real["families"][f]["gap_fit"][i] / real["families"][f]["gap_fit_se"][i]
                for f in STANDARD for i in small)
    return (f"k = 2, d = {s['d']}, H = {s['H']}: at every L' <= {SMALL_L} the best member of each standard family "
            f"keeps an in-sample KL gap of at least {min_z:.0f} SE (smallest z over families and L'); the "
            f"2-simplicial family fits to {decided['simplicial_max_gap']:.1e} nats; control (a target inside "
            f"every family) fits to {control_max:.1e} nats and is {'rejected' if control_rejected else 'NOT rejected'}")


# -------------------------------------------------------------------------------------------------- check

def ext_dag_families(ctx: CheckContext) -> CheckOutcome:
    """Exact fit: best member of each family vs the exact k = 2 set posterior, gap vs L' (rule:
    :func:`decide_families`; control: the same rule on a planted target inside every family)."""
    s = _sizes(ctx)
    curves = family_curves(ctx)
    real, control = curves["real"], curves["control"]
    decided, control_decided = decide_families(real), decide_families(control)
    control_max = max(max(control["families"][f]["gap_fit"]) for f in STANDARD)
    measured = {"L": real["L"], "gap_found": decided["gap_found"], "fitter_ok": decided["fitter_ok"],
                "simplicial_max_gap": decided["simplicial_max_gap"],
                "families": {fam: {key: real["families"][fam][key] for key in
                                   ("gap_fit", "gap_fit_se", "gap_eval", "gap_eval_se", "converged")}
                             for fam in STANDARD}}
    control_rejected = control_decided["verdict"] != "pass"
    return CheckOutcome(
        verdict=decided["verdict"], measured=measured,
        threshold={"small_L": SMALL_L, "z": 3.0, "fit_resolution": FIT_RESOLUTION},
        summary=_summary(s, real, decided, control_max, control_rejected), tables=[_gap_table(real)],
        figures=[_gap_figure(ctx, real)] if ctx.figures_dir is not None else [], tolerances=dict(TOLERANCES),
        control=Control(
            description="the same rule on a planted product-of-experts target (W = log π_1), which lies in every "
                        "standard family",
            measured={"gap_found": control_decided["gap_found"], "max_in_sample_gap": control_max,
                      "verdict": control_decided["verdict"]},
            rejected=control_rejected, margin=no_gap_margin(control)),
        positive_control=simplicial_positive(real, decided),
        findings=_growth_findings(real, s),
        reason="the 2-simplicial fit did not reach the target: the fitter is not trusted" if
        decided["verdict"] == "inconclusive" else "",
    )


CLAIM = Claim("ext-dag-families",
      "Ours: standard attention (k bilinear heads, products of experts over single parents) cannot implement "
      "k-parent BMA; 2-simplicial attention can.",
      "k = 2: for each family, (a) k bilinear heads multiplied, Q({a,b}) ∝ α₁(a)α₂(b) + α₁(b)α₂(a) over a ≠ b; "
      "(b) score(S) = Σ_{a∈S} Σ_l W[x^l_a, x^l_h], one W or one per slot; (c) Σ_l T[x^l_a, x^l_b, x^l_h], the best "
      "member fitted to the exact set posterior leaves an in-sample KL gap > 3 SE at every L' ≤ 5 for (a) and (b), "
      "while (c) fits to the fitter's resolution; gap vs L' reported.",
      (Check("exact", ext_dag_families,
             "L-BFGS fits of each family vs the exact set posterior, gap vs L' in-sample and held out"),),
      section="beyond")
