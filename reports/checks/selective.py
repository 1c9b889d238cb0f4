"""The reproduction reading of ``footnote1-selective-induction``: does a trained structured model reach the
Bayes-optimal predictor of the selective-induction task? (issue 15 §4; the exact construction is checked by
:func:`reports.checks.ext_dag.footnote1_selective_induction`).

The tree task's structured model (:class:`model.structured.StructuredTransformer`, unchanged) is trained on the
window view of the task (:mod:`model.selective_training`) from a random initialisation, and judged on held-out
sequences: the layer-2 attention of the query's last row against the lag posterior P(κ | x_{<L}) (per-sequence
KL, upper 3-SE bound ≤ ``LAG_TOL``) and the prediction of x_L against the Bayes-optimal predictive over lags
(per-sequence excess −log f, upper 3-SE bound ≤ ``QUERY_TOL``).

Negative control, judged by the same rule in the same run: the predictor that knows the kernel but does not infer
the lag (uniform weights over K, its law over lags uniform). It is rejected only when the run's kernel makes the
lag matter; a kernel whose rows are alike leaves it within the tolerance and the pass is withheld (not
discriminating).

Choices the paper leaves open (named in the outcome's assumptions): the kernel law (rows Dirichlet(α) with a floor
ε), d, K, L, the lag set, and the training recipe (:class:`model.selective_training.SelectiveTrainConfig`).
"""
from __future__ import annotations

from bma_verify.reports.core import CheckContext, CheckOutcome, Control, Table, new_figure, save_figure

#: The rule: the trained model is "at the Bayes-optimal predictor" when the upper 3-SE bounds of its held-out
#: lag-posterior KL and query-loss gap are below these (nats). Across kernel seeds 0-9 (one thread) the trained
#: runs end at KL <= 0.062 and query gap <= 0.0104 ± 0.0025; the uniform-lag control's query gap is 0.083-0.33
#: on the informative kernels and 0.017 on the one whose rows are alike (seed 3).
LAG_TOL = 0.1
QUERY_TOL = 0.02
#: Runs per tier: each trains on its own kernel (seeds derived from the report seed).
RUNS = {"quick": 1, "full": 3}
SIZES = {"quick": {"steps": 3000, "eval_contexts": 2000}, "full": {"steps": 3000, "eval_contexts": 4000}}


def _decide(lag_gap, lag_se, query_gap, query_se) -> dict:
    lag_upper, query_upper = lag_gap + 3 * lag_se, query_gap + 3 * query_se
    ok = lag_upper <= LAG_TOL and query_upper <= QUERY_TOL
    return {"verdict": "pass" if ok else "fail", "lag_upper": float(lag_upper), "query_upper": float(query_upper)}


def decide_run(final: dict) -> dict:
    """The rule on one trained run's held-out evaluation."""
    return _decide(final["lag_gap"], final["lag_gap_se"], final["query_gap"], final["query_gap_se"])


def decide_control(final: dict) -> dict:
    """The same rule on the uniform-lag predictor evaluated on the same held-out sequences."""
    return _decide(final["uniform_lag_gap"], final["uniform_lag_gap_se"], final["uniform_lag_query_gap"],
                   final["uniform_lag_query_gap_se"])


def selective_runs(ctx: CheckContext) -> list[dict]:
    """The tier's trained runs (cached per context); model objects dropped."""
    from bma_verify.model.selective_training import SelectiveTrainConfig, train_selective

    key = ("footnote1-selective-training", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        runs = []
        for i in range(RUNS[ctx.tier]):
            config = SelectiveTrainConfig(seed=ctx.seed_for(f"footnote1-selective-induction:train:{i}") % (2**31),
                                          **SIZES[ctx.tier])
            run = train_selective(config)
            run.pop("model")
            runs.append(run)
        ctx.cache[key] = runs
    return ctx.cache[key]


def _figure(ctx: CheckContext, run: dict) -> str:
    fig, ax = new_figure(figsize=(5.2, 4.6))
    lags = run["config"]["lags"]
    posterior, attention = run["laws"]["posterior"], run["laws"]["attention"]
    for j, kappa in enumerate(lags):
        ax.scatter(posterior[:, j], attention[:, j], s=6, alpha=0.5, label=f"κ = {kappa}")
    ax.plot([0, 1], [0, 1], color="k", lw=0.8)
    ax.set_xlabel("Bayes lag posterior P(κ | x_<L)")
    ax.set_ylabel("trained layer-2 attention at h' = h − κ")
    ax.set_title(f"selective induction, trained (seed {run['config']['seed']}, {len(posterior)} held-out sequences)",
                 fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    filename = "footnote1_selective_training.png"
    save_figure(fig, ctx.figure_path(filename))
    return filename


def footnote1_selective_training(ctx: CheckContext) -> CheckOutcome:
    """Model check (reproduction) of ``footnote1-selective-induction``: the structured model trained on the task's
    windows reaches the lag posterior and the Bayes-optimal predictive (module docstring)."""
    runs = selective_runs(ctx)
    decided = [decide_run(r["final"]) for r in runs]
    controls = [decide_control(r["final"]) for r in runs]
    verdicts = [d["verdict"] for d in decided]
    verdict = verdicts[0] if len(set(verdicts)) == 1 else "inconclusive"
    reason = "" if verdict != "inconclusive" else (
        f"the runs disagree: {verdicts.count('pass')} of {len(runs)} kernels pass the rule (reproduced only when "
        "every run passes, not reproduced only when every run fails)")
    rows = []
    for r, d, c in zip(runs, decided, controls):
        f, i = r["final"], r["init"]
        rows.append([r["config"]["seed"], f"{i['lag_gap']:.3f}", f"{f['lag_gap']:.3f} ± {f['lag_gap_se']:.3f}",
                     f"{f['token_gap']:.3f}", f"{f['query_gap']:.4f} ± {f['query_gap_se']:.4f}",
                     f"{f['lag_lpa_model']:.3f} / {f['lag_lpa_bayes']:.3f}",
                     f"{f['uniform_lag_gap']:.3f} / {f['uniform_lag_query_gap']:.3f}", d["verdict"],
                     "rejected" if c["verdict"] != "pass" else "NOT rejected", r["converged"]])
    c0 = runs[0]["config"]
    measured = {"runs": [{"seed": r["config"]["seed"], "init": r["init"], "final": r["final"],
                          "converged": r["converged"], "verdict": d["verdict"], "lag_upper": d["lag_upper"],
                          "query_upper": d["query_upper"], "kernel": r["kernel"]}
                         for r, d in zip(runs, decided)]}
    # float32 training, one seeded stream: the trained values move with the CPU path (SIMD width changes every
    # step's rounding, and training amplifies it). Measured, quick tier, one torch thread (the report's setting
    # whatever OMP_NUM_THREADS says), ATEN_CPU_CAPABILITY=default|avx2|avx512: report seed 0 lag_gap
    # 0.027-0.030, query_gap 0.0018-0.0029, token_gap 0.013-0.015; seed 1 lag_gap 0.0416-0.0417, query_gap 0.0083,
    # token_gap 0.0243 (`ATEN_CPU_CAPABILITY=C bma-verify check footnote1-selective-induction --seed S --json`);
    # OMP_NUM_THREADS=2 gives seed 0's values bit for bit (the training runs on one torch thread either way).
    # Another machine's CPU moves them further: the tolerances are ten times the widest spread (0.0034 in lag_gap,
    # 0.0011 in query_gap), and the verdict's margin is the rule's (0.03 against 0.1, 0.003 against 0.02).
    tolerances = {"runs.0.final.lag_gap": {"abs": 0.05}, "runs.0.final.query_gap": {"abs": 0.01},
                  "runs.0.final.token_gap": {"abs": 0.03}}
    closest_control = min(controls, key=lambda c: c["query_upper"])  # the one nearest to passing the rule
    f0 = runs[0]["final"]
    lag_gaps = ", ".join(f"{r['final']['lag_gap']:.3f}" for r in runs)
    query_gaps = ", ".join(f"{r['final']['query_gap']:.4f}" for r in runs)
    summary = (f"The tree task's structured model on the windows (d = {c0['d']}, K = {c0['lags']}, L = {c0['L']}, "
               f"{c0['K']} copier heads), trained {c0['steps']} steps from a random initialisation on "
               f"{len(runs)} kernel(s): layer-2 attention vs the lag posterior KL "
               f"{lag_gaps}, query-loss gap to the Bayes-optimal "
               f"predictive {query_gaps} nats (rule: upper 3-SE "
               f"bounds ≤ {LAG_TOL} and ≤ {QUERY_TOL}). Control (the kernel known, the lag not inferred: uniform "
               f"weights over K; its query gap {f0['uniform_lag_query_gap']:.3f}) "
               f"{'rejected' if all(c['verdict'] != 'pass' for c in controls) else 'NOT rejected'} on every run"
               + ("" if len(runs) == 1 else "; the claim is reproduced only when every run passes") + ".")
    return CheckOutcome(
        verdict=verdict,
        reason=reason,
        measured=measured,
        threshold={"lag_tol": LAG_TOL, "query_tol": QUERY_TOL, "z": 3.0},
        summary=summary,
        tables=[Table("Held-out gaps (nats) per trained run; init = the model at its random initialisation",
                      ["seed", "lag KL init", "lag KL", "parent-token KL", "query-loss gap",
                       "lag L_pa model / Bayes", "uniform-lag control: KL / query gap", "rule", "control",
                       "converged"], rows)],
        figures=[_figure(ctx, runs[0])] if ctx.figures_dir is not None else [],
        tolerances=tolerances,
        control=Control(description="the uniform-lag predictor (kernel known, lag not inferred)",
                        measured={"lag_upper": closest_control["lag_upper"],
                                  "query_upper": closest_control["query_upper"]},
                        rejected=all(c["verdict"] != "pass" for c in controls)),
        converged=all(r["converged"] for r in runs),
        assumptions=[f"kernel P*: rows Dirichlet({c0['alpha']}) with floor ε = {c0['eps']}, d = {c0['d']}, one per "
                     f"run from the run's seed; lags K = {c0['lags']}, L = {c0['L']} windows of width κmax + 1",
                     f"model: StructuredTransformer on d + 1 tokens (pad = d), {c0['K']} copier heads, β = "
                     f"{c0['beta']}, mixture output; loss at the query's last row only",
                     f"training: AdamW lr {c0['lr']} (W_KQ at {c0['selector_lr_scale']}×), warm-up {c0['warmup']} "
                     f"and cosine, batch {c0['batch_size']}, {c0['steps']} steps, grad clip {c0['grad_clip']}; "
                     f"{c0['eval_contexts']} held-out sequences",
                     "the lag posterior is read as the attention at the candidates h' = h − κ, not renormalised "
                     "(mass elsewhere counts against the model)"],
    )
