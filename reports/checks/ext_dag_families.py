"""Checks of issue 15 §3, "what standard attention can reach" and "does gradient descent find it" (ours).

* ``ext-dag-families`` (exact fit, as-stated claim of ours): no member of the standard families (a) k bilinear
  heads multiplied, (b) product of experts over single parents with one W, (b') one W per slot, reproduces the
  k = 2 set posterior: at every L' <= 5 the best member's in-sample KL gap (a lower estimate of the family's
  optimum) exceeds 3 standard errors over contexts and the fit's resolution. The 2-simplicial family (c), which
  contains BMA, must fit to within the resolution at every L' (the fitter's control). Negative control: the same
  rule on a planted target that lies in every family (softmax of Σ_{a∈S} Σ_l W[x^l_a, x^l_h], W = log π_1); a rule
  that finds a gap there is not discriminating. Families are defined in :mod:`model.dag_families`.
* ``ext-dag-training`` (model, reproduction): the pair-attention model trained from a random initialisation reaches
  BMA (L_pa and query-loss gaps, upper 3-SE bounds, under ``LPA_TOL`` and ``QUERY_TOL``); the best standard
  alternative (family (a) as a model, :class:`model.dag_training.KHeadSelector`) is trained alike and reported as
  a finding. Negative control: the same rule on the pair model at its initialisation.

Regression tolerances: the fits are float64 (torch autograd + scipy L-BFGS-B) and the training float32 on one
seeded stream; see the comment next to each ``tolerances`` entry for the spread measured.
"""
from __future__ import annotations

import numpy as np

from bma_verify.model.dag_families import FAMILIES, FAMILY_LABELS, family_gap_curve, planted_poe_log_posterior
from bma_verify.numerics.dag import random_dag_kernels
from bma_verify.reports.core import CheckContext, CheckOutcome, Control, Finding, Table, new_figure, save_figure

SIZES = {
    "quick": {"d": 3, "H": 6, "L_values": [1, 2, 3, 5, 8, 12, 20], "n_fit": 200, "n_eval": 200,
              "control_L_values": [1, 2, 3, 5], "control_n": 100, "pair_steps": 3000, "heads_steps": 3000,
              "eval_contexts": 1000},
    "full": {"d": 3, "H": 6, "L_values": [1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20], "n_fit": 1000, "n_eval": 1000,
             "control_L_values": [1, 2, 3, 4, 5], "control_n": 400, "pair_steps": 4000, "heads_steps": 4000,
             "eval_contexts": 4000},
}
#: The rule reads "a gap" only at L' <= SMALL_L (as Proposition 2's check for DS).
SMALL_L = 5
#: Smallest in-sample gap (nats per position) that reads as a gap: the 2-simplicial fit, which contains the target,
#: reaches <= 2e-15 at every L' (quick tier, seed 0), so 1e-8 is far above the fitter's resolution and far below
#: the smallest standard-family gap (2.6e-2 at L' = 1).
FIT_RESOLUTION = 1e-8
STANDARD = ("heads", "poe", "poe_slots")
KERNEL_EPS = 0.01  # entrywise floor of the task's kernels (T = log π_k finite)

#: Training rule: the trained pair model is "at BMA" when the upper 3-SE bounds of its held-out L_pa gap and
#: query-loss gap are below these (nats per position h >= k). At initialisation (K = 10, report seed 0) the upper
#: bounds are 0.21 and 0.17 (the control).
LPA_TOL = 0.1
QUERY_TOL = 0.02
#: Training hyper-parameters (model.dag_training.DagTrainConfig) per model, both with K = 10 copier heads for L = 5.
#: The pair model's L_pa gap to BMA (held-out, quick sizes, report seeds 0 / 1, one thread; rerun with
#: ``train_dag(DagTrainConfig(model="pair", d=3, k=2, H=6, L=5, eval_contexts=1000, seed=CheckContext(seed=S)
#: .seed_for("ext-dag-training:pair") % 2**31, ...))``): lr 0.1 (the earlier setting, K = 6) plateaus at 0.13-0.15
#: after 600-1500 steps, and 0.20 with K = 10; lr 0.03 with K = 10 reaches 0.050 (seed 0) at 1500 steps, 0.018 /
#: 0.0016 at 2000 and 0.012 / 0.0008 at 3000 (K = 6 at 3000: 0.041). Across ATEN_CPU_CAPABILITY=default|avx2|
#: avx512 the seed-0 run ends at 0.086 / 0.022 / 0.018 after 2000 steps and 0.029 / 0.018 / 0.012 after 3000,
#: seed 1 at 0.0008-0.0016: hence 3000 steps (quick), 4000 (full). The heads model diverges in L_pa at lr 0.1 (both
#: heads on one position), so it gets the tree training's rate (lr 0.03, selector at 0.3) and the same steps.
TRAIN_SETTINGS = {"pair": {"lr": 0.03, "selector_lr_scale": 1.0, "K": 10},
                  "heads": {"lr": 0.03, "selector_lr_scale": 0.3, "K": 10}}


def _sizes(ctx: CheckContext) -> dict:
    return SIZES["full" if ctx.full else "quick"]


# ----------------------------------------------------------------------------------------------------------
# ext-dag-families


def _decide_families(curve: dict, standard=STANDARD) -> dict:
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


def _task_kernels(ctx: CheckContext, d: int):
    return random_dag_kernels(d, 2, eps=KERNEL_EPS, rng=ctx.rng("ext-dag-families:kernels"))


def family_curves(ctx: CheckContext) -> dict:
    """The real curve and the control curve (cached per context)."""
    key = ("ext-dag-families", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        s = _sizes(ctx)
        kernels = _task_kernels(ctx, s["d"])
        real = family_gap_curve(kernels, s["H"], s["L_values"], n_fit=s["n_fit"], n_eval=s["n_eval"],
                                rng=ctx.rng("ext-dag-families:fit"))
        with np.errstate(divide="ignore"):
            planted = planted_poe_log_posterior(np.log(kernels[0]), 2)
        control = family_gap_curve(kernels, s["H"], s["control_L_values"], n_fit=s["control_n"],
                                   n_eval=s["control_n"], rng=ctx.rng("ext-dag-families:control"), target=planted)
        ctx.cache[key] = {"real": real, "control": control}
    return ctx.cache[key]


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


def ext_dag_families(ctx: CheckContext) -> CheckOutcome:
    """Exact fit of ``ext-dag-families``: best member of each family vs the exact k = 2 set posterior, gap vs L'."""
    s = _sizes(ctx)
    curves = family_curves(ctx)
    real, control = curves["real"], curves["control"]
    decided = _decide_families(real)
    control_decided = _decide_families(control)
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
    rows = []
    for i, L in enumerate(real["L"]):
        row = [L]
        for fam in FAMILIES:
            r = real["families"][fam]
            row.append(f"{r['gap_fit'][i]:.3g} ± {r['gap_fit_se'][i]:.2g} / {r['gap_eval'][i]:.3g} ± "
                       f"{r['gap_eval_se'][i]:.2g}")
        rows.append(row)
    figures = [_gap_figure(ctx, real)] if ctx.figures_dir is not None else []
    measured = {"L": real["L"], "gap_found": decided["gap_found"], "fitter_ok": decided["fitter_ok"],
                "simplicial_max_gap": decided["simplicial_max_gap"],
                "families": {fam: {key: real["families"][fam][key] for key in
                                   ("gap_fit", "gap_fit_se", "gap_eval", "gap_eval_se", "converged")}
                             for fam in STANDARD}}
    small = [i for i, L in enumerate(real["L"]) if L <= SMALL_L]
    min_z = min(real["families"][f]["gap_fit"][i] / real["families"][f]["gap_fit_se"][i]
                for f in STANDARD for i in small)
    control_max = max(max(control["families"][f]["gap_fit"]) for f in STANDARD)
    tolerances = {}
    for fam in STANDARD:
        # measured spread <= 1.4e-16 abs / 3.1e-14 rel over OMP_NUM_THREADS=1|2 x ATEN_CPU_CAPABILITY=default|avx2
        # (quick, seed 0); 1e-9 relative leaves a margin > x1e4 and is far below every gap it guards (>= 2e-2)
        for key in ("gap_fit", "gap_eval", "gap_fit_se", "gap_eval_se"):
            tolerances[f"families.{fam}.{key}"] = {"rel": 1e-9}
    return CheckOutcome(
        verdict=decided["verdict"],
        measured=measured,
        threshold={"small_L": SMALL_L, "z": 3.0, "fit_resolution": FIT_RESOLUTION},
        summary=(f"k = 2, d = {s['d']}, H = {s['H']}: at every L' <= {SMALL_L} the best member of each standard family "
                 f"keeps an in-sample KL gap of at least {min_z:.0f} SE (smallest z over families and L'); the "
                 f"2-simplicial family fits to {decided['simplicial_max_gap']:.1e} nats; control (a target inside "
                 f"every family) fits to {control_max:.1e} nats and is "
                 f"{'rejected' if control_decided['verdict'] != 'pass' else 'NOT rejected'}"),
        tables=[Table("In-sample / held-out KL gap to the set posterior (nats per position h >= 2, ± SE over "
                      "contexts)", ["L'"] + [FAMILY_LABELS[f] for f in FAMILIES], rows)],
        figures=figures,
        tolerances=tolerances,
        control=Control(
            description="the same rule on a planted product-of-experts target (W = log π_1), which lies in every "
                        "standard family",
            measured={"gap_found": control_decided["gap_found"], "max_in_sample_gap": control_max,
                      "verdict": control_decided["verdict"]},
            rejected=control_decided["verdict"] != "pass"),
        findings=findings,
        reason="the 2-simplicial fit did not reach the target: the fitter is not trusted" if
        decided["verdict"] == "inconclusive" else "",
    )


# ----------------------------------------------------------------------------------------------------------
# ext-dag-training


def _decide_training(evaluation: dict) -> dict:
    """The rule on one :func:`model.dag_training.evaluate_dag_model` result (the trained model or its control).

    at BMA: upper 3-SE bounds of the held-out L_pa gap <= LPA_TOL and of the query-loss gap <= QUERY_TOL.
    """
    lpa_upper = evaluation["lpa_gap"] + 3 * evaluation["lpa_gap_se"]
    query_upper = evaluation["query_gap"] + 3 * evaluation["query_gap_se"]
    ok = lpa_upper <= LPA_TOL and query_upper <= QUERY_TOL
    return {"verdict": "pass" if ok else "fail", "lpa_upper": float(lpa_upper), "query_upper": float(query_upper)}


def training_runs(ctx: CheckContext) -> dict:
    """Both trained runs (cached per context); model objects dropped."""
    from bma_verify.model.dag_training import DagTrainConfig, train_dag

    key = ("ext-dag-training", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        s = _sizes(ctx)
        runs = {}
        for name in ("pair", "heads"):
            config = DagTrainConfig(model=name, d=s["d"], k=2, H=s["H"], L=5, steps=s[f"{name}_steps"],
                                    eval_contexts=s["eval_contexts"], seed=ctx.seed_for(f"ext-dag-training:{name}")
                                    % (2**31), **TRAIN_SETTINGS[name])
            run = train_dag(config)
            run.pop("model")
            runs[name] = run
        ctx.cache[key] = runs
    return ctx.cache[key]


def ext_dag_training(ctx: CheckContext) -> CheckOutcome:
    """Model check of ``ext-dag-training``: pair attention and the best standard alternative, trained from random
    initialisations; how close each gets to BMA."""
    runs = training_runs(ctx)
    pair, heads = runs["pair"], runs["heads"]
    decided = _decide_training(pair["final"])
    control = _decide_training(pair["init"])
    heads_decided = _decide_training(heads["final"])
    hf, pf = heads["final"], pair["final"]
    further = hf["query_gap"] - 3 * hf["query_gap_se"] > pf["query_gap"] + 3 * pf["query_gap_se"]
    findings = [
        Finding("trained from a random initialisation, the standard alternative (family (a): two bilinear heads, "
                "multiplied readout) stays further from BMA in query loss than the pair-attention model",
                "holds" if further else "refuted",
                instance=None if further else {"heads": hf, "pair": pf},
                evidence=f"query-loss gap {hf['query_gap']:.4f} ± {hf['query_gap_se']:.4f} (heads) vs "
                         f"{pf['query_gap']:.4f} ± {pf['query_gap_se']:.4f} (pair) nats, "
                         f"{pair['config']['eval_contexts']} held-out contexts"),
        Finding("the trained standard alternative reaches BMA by the same rule (L_pa and query gaps within "
                f"{LPA_TOL} and {QUERY_TOL} nats)", "holds" if heads_decided["verdict"] == "pass" else "refuted",
                instance=None if heads_decided["verdict"] == "pass" else {"final": hf},
                evidence=f"L_pa gap {hf['lpa_gap']:.3f} ± {hf['lpa_gap_se']:.3f}, query gap {hf['query_gap']:.4f} "
                         f"± {hf['query_gap_se']:.4f}"),
    ]
    c = pair["config"]
    rows = [[name, phase, f"{r[phase]['lpa_gap']:.4f} ± {r[phase]['lpa_gap_se']:.4f}",
             f"{r[phase]['query_gap']:.4f} ± {r[phase]['query_gap_se']:.4f}", f"{r[phase]['lpa_model']:.4f}",
             f"{r[phase]['lpa_bma']:.4f}"]
            for name, r in runs.items() for phase in ("init", "final")]
    measured = {name: {"init": r["init"], "final": r["final"], "converged": r["converged"],
                       "steps": r["config"]["steps"]} for name, r in runs.items()}
    # float32 training: a different SIMD path changes the rounding of every step, and training is chaotic in it.
    # Measured spread over ATEN_CPU_CAPABILITY=default|avx2|avx512 (quick, report seed 0, TRAIN_SETTINGS' notes;
    # the report trains with one torch thread whatever OMP_NUM_THREADS says): pair lpa_gap 0.012-0.029 (spread
    # 0.017), query_gap within 2e-4; heads lpa_gap 0.259-0.314 (0.056), query_gap 0.0126-0.0159 (0.0033). Every one
    # of these moves with the CPU path, so another machine's CPU can move it further: the tolerances are about three
    # times the spread, the pair's L_pa tolerance (0.05) is half of LPA_TOL, and the verdict has margin (the worst
    # path ends at 0.029 against 0.1).
    spread = {"pair": {"lpa": 0.05, "query": 0.002}, "heads": {"lpa": 0.15, "query": 0.01}}
    tolerances = {}
    for name in runs:
        for key, which in (("lpa_gap", "lpa"), ("lpa_model", "lpa"), ("query_gap", "query"), ("loss_model", "query")):
            tolerances[f"{name}.final.{key}"] = {"abs": spread[name][which]}
    return CheckOutcome(
        verdict=decided["verdict"],
        measured=measured,
        threshold={"lpa_tol": LPA_TOL, "query_tol": QUERY_TOL, "z": 3.0},
        summary=(f"k = 2, d = {c['d']}, H = {c['H']}, L = {c['L']}: pair attention trained {c['steps']} steps from a "
                 f"random initialisation reaches L_pa gap {pf['lpa_gap']:.3f} ± {pf['lpa_gap_se']:.3f} and query gap "
                 f"{pf['query_gap']:.4f} ± {pf['query_gap_se']:.4f} nats (two bilinear heads: {hf['lpa_gap']:.3f} and "
                 f"{hf['query_gap']:.4f}); control (the model at initialisation: {control['lpa_upper']:.3f}, "
                 f"{control['query_upper']:.3f}) {'rejected' if control['verdict'] != 'pass' else 'NOT rejected'}"),
        tables=[Table("Held-out gaps to BMA (nats per position h >= 2, ± SE over contexts)",
                      ["model", "when", "L_pa gap", "query-loss gap", "L_pa model", "L_pa BMA"], rows)],
        tolerances=tolerances,
        control=Control(description="the pair model at its random initialisation",
                        measured={"lpa_gap_upper": control["lpa_upper"], "query_gap_upper": control["query_upper"]},
                        rejected=control["verdict"] != "pass"),
        findings=findings,
        converged=bool(pair["converged"]),
        assumptions=[f"sizes d = {c['d']}, H = {c['H']}, L = {c['L']}, K = {c['K']} copier heads, batch "
                     f"{c['batch_size']}, {c['steps']} steps, AdamW lr {c['lr']} (warm-up {c['warmup']}, cosine)",
                     "kernels: rows Dirichlet(1) with floor ε = 0.01, one family per run",
                     "the standard alternative is family (a) as a model: two bilinear heads and a multiplicative "
                     "readout through one d² × d table (lr 0.03, its selector at 0.3×; at lr 0.1 it diverges)"],
    )
