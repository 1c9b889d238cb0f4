"""Claim footnote1-selective-induction: the BMA construction covers the selective-induction task of D'Angelo,
Croce and Flammarion (ICLR 2025), on their definition of the task (numerics.selective_induction).

The mapping checked: one tree example = one window (x_{s−k̂}, …, x_s) of the sequence with s = k̂..t−1 (every window
inside the sequence), the query = the window ending at t, the lag κ = the parent h' = k̂ − κ shared by all windows;
the first k̂ tokens enter only as the windows' earlier positions, their μ terms are common to every lag and
contribute nothing, and for t < k̂ the prediction is μ. The exact check compares this construction with their
Bayes-optimal predictive at every position; the model check trains the tree task's structured model on these
windows. History of both: docs/notes/footnote1-selective-induction.md.
"""
from __future__ import annotations

import numpy as np

from bma_verify.numerics.selective_induction import (bayes_predictive, construction_predictive,
                                                     sample_selective_induction)
from bma_verify.numerics.task import random_kernel
from bma_verify.model.convergence import RULE as PLATEAU_RULE
from bma_verify.model.selective_training import (SelectiveTrainConfig, eval_batch, run_kernel, train_selective,
                                                 truncated_bayes_evaluation)
from bma_verify.reports.checks.trained import (confirm_misses, count_verdict, ideal_control, power_text, seed_keys,
                                               seeds_record, seeds_text, training_seeds, why_unconfirmed)
from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.core import (CheckContext, CheckOutcome, Control, Finding, PositiveControl, Table, new_figure,
                                     save_figure)
from bma_verify.reports.core import ControlMargin
from bma_verify.reports.protocol import run_plan

#: Lag sets (theirs are small sets of lags; ours span contiguous and gapped sets).
LAG_SETS = ([1, 2, 3], [2, 5], [1, 4], [1, 2])
SIZES = {"quick": {"sequences": 3, "T": 12}, "full": {"sequences": 20, "T": 24}}
#: Two float64 computations of one predictive (sums in different orders) agree far below this.
EXACT_ATOL = 1e-10
MAPPING = ("one tree example = one window (x_{s−k̂}, …, x_s), s = k̂..t−1, query = the window ending at t, lag κ = "
           "parent h' = k̂ − κ; the first k̂ tokens (μ, common to every lag) enter only as earlier window positions; "
           "t < k̂ predicts μ")


def _max_gap(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


def sequence_errors(kernel, lags, x) -> dict:
    """On one sequence of their task: the construction, the lag read off by one (control), the weights without the
    first tokens' μ terms, and our per-lag construction (whole sequence, pad row μ), each against their Bayes."""
    exact = bayes_predictive(kernel, lags, x)
    built = construction_predictive(kernel, lags, x)
    return {"error": max(_max_gap(built["predictive"], exact["predictive"]),
                         _max_gap(built["lag_posterior"], exact["lag_posterior"])),
            "control": _max_gap(construction_predictive(kernel, lags, x, lag_shift=1)["predictive"],
                                exact["predictive"]),
            "dropped": _max_gap(bayes_predictive(kernel, lags, x, drop_first_tokens=True)["predictive"],
                                exact["predictive"]),
            "whole": _max_gap(construction_predictive(kernel, lags, x, task="per_lag")["predictive"],
                              exact["predictive"]),
            "posterior": exact["lag_posterior"][-1]}


def per_lag_errors(kernel, lags, x) -> dict:
    """On one sequence of our per-lag variant: its construction and its dropped-μ weights against its Bayes."""
    exact = bayes_predictive(kernel, lags, x, task="per_lag")["predictive"]
    return {"per_lag_error": _max_gap(construction_predictive(kernel, lags, x, task="per_lag")["predictive"], exact),
            "per_lag_dropped": _max_gap(
                bayes_predictive(kernel, lags, x, task="per_lag", drop_first_tokens=True)["predictive"], exact)}


def exact_records(ctx: CheckContext) -> list[dict]:
    """One record per sampled sequence: their task's errors, then our variant's on a sequence drawn alike."""
    rng = ctx.rng("footnote1-selective-induction")
    sizes = SIZES[ctx.tier]
    records = []
    for lags in LAG_SETS:
        d = int(rng.integers(2, 5))
        kernel = random_kernel(d, alpha=0.5, eps=0.02, rng=rng)
        theirs, kappas = sample_selective_induction(kernel, lags, sizes["sequences"], sizes["T"], rng=rng)
        ours, _ = sample_selective_induction(kernel, lags, sizes["sequences"], sizes["T"], rng=rng, task="per_lag")
        for x, y, kappa in zip(theirs, ours, kappas):
            records.append({"lags": list(lags), "d": d, "kappa": int(kappa), "kernel": kernel.tolist(),
                            "sequence": x.tolist(), "per_lag_sequence": y.tolist(),
                            **sequence_errors(kernel, lags, x),
                            **per_lag_errors(kernel, lags, y)})
    return records


def decide_exact(max_error: float) -> str:
    """pass iff the constructed predictor equals their Bayes-optimal predictive to EXACT_ATOL at every t."""
    return "pass" if max_error <= EXACT_ATOL else "fail"


#: Each finding's error key in the records, and the statement name its instance replays under (reports.replay).
REPLAY_STATEMENTS = {"dropped": "mu_terms_dropped", "whole": "every_window",
                     "per_lag_dropped": "per_lag_mu_terms_dropped"}


def _worst(records, key) -> dict:
    """The record with the largest error ``key``, as an instance that ``bma-verify check --instance`` replays."""
    r = max(records, key=lambda r: r[key])
    sequence = r["per_lag_sequence"] if key.startswith("per_lag") else r["sequence"]
    return {"target": "footnote1", "statement": REPLAY_STATEMENTS[key], "kernel": r["kernel"], "lags": r["lags"],
            "sequence": sequence, "error": r[key]}


def exact_findings(records) -> list[Finding]:
    """Three statements of ours, each decided on the same records."""
    dropped, whole = max(r["dropped"] for r in records), max(r["whole"] for r in records)
    per_lag = max(r["per_lag_dropped"] for r in records)
    return [
        Finding("on their task, lag weights without the first k̂ tokens' μ terms give the Bayes-optimal predictive",
                "holds" if dropped <= EXACT_ATOL else "refuted", None if dropped <= EXACT_ATOL else
                _worst(records, "dropped"), f"largest deviation {dropped:.1e} over {len(records)} sequences: the μ "
                "terms are the same for every lag and cancel"),
        Finding("on our per-lag variant (first κ tokens from μ; ours, not theirs), weights without the first κ tokens' "
                "μ terms give its Bayes-optimal predictive", "refuted" if per_lag > EXACT_ATOL else "holds",
                _worst(records, "per_lag_dropped") if per_lag > EXACT_ATOL else None,
                f"largest deviation {per_lag:.3f}: there the μ terms depend on κ"),
        Finding("the construction fed every window of the sequence (pad before it, pad row μ: our per-lag mapping) "
                "gives their Bayes-optimal predictive", "refuted" if whole > EXACT_ATOL else "holds",
                _worst(records, "whole") if whole > EXACT_ATOL else None,
                f"largest deviation {whole:.3f}: the windows ending before k̂ must be left out")]


def _exact_table(records) -> Table:
    return Table("constructed vs their Bayes-optimal predictive (max over positions)",
                 ["K", "d", "κ drawn", "max error", "lag off by one (control)", "μ terms dropped",
                  "every window (our mapping)", "posterior of κ at T"],
                 [[str(r["lags"]), r["d"], r["kappa"], f"{r['error']:.1e}", f"{r['control']:.3f}",
                   f"{r['dropped']:.1e}", f"{r['whole']:.3f}", f"{r['posterior'][r['lags'].index(r['kappa'])]:.3f}"]
                  for r in records])


def footnote1_selective_induction(ctx: CheckContext) -> CheckOutcome:
    """Exact check: the tree construction mapped onto their task (MAPPING) against their Bayes-optimal predictive
    over lags at every position, several lag sets. Control: the lag read off by one (h' = k̂ − κ − 1)."""
    records = exact_records(ctx)
    error, planted = max(r["error"] for r in records), [r["control"] for r in records]
    verdict = decide_exact(error)
    control = Control("the construction reading the lag off by one (candidate h' = k̂ − κ − 1)",
                      {"max_error": max(planted), "min_error": min(planted)},
                      rejected=decide_exact(max(planted)) != "pass",
                      margin=ControlMargin("max_error", max(planted), EXACT_ATOL))
    measured = {"sequences": len(records), "T": SIZES[ctx.tier]["T"], "max_error": error,
                "control_max_error": max(planted), "dropped_mu_max_error": max(r["dropped"] for r in records),
                "every_window_max_error": max(r["whole"] for r in records),
                "per_lag_max_error": max(r["per_lag_error"] for r in records),
                "per_lag_dropped_mu_max_error": max(r["per_lag_dropped"] for r in records)}
    summary = (f"On D'Angelo et al.'s task (first k̂ = max K tokens from μ, whatever the lag), mapping {MAPPING}: the "
               f"tree BMA selector equals their Bayes-optimal predictive to {error:.1e} at every position of "
               f"{len(records)} sequences (lag sets {', '.join(map(str, LAG_SETS))}); reading the lag off by one is "
               f"off by up to {max(planted):.3f} (control, {'rejected' if control.rejected else 'NOT rejected'}); "
               f"feeding every window (our per-lag mapping) is off by up to {measured['every_window_max_error']:.3f} "
               f"(finding); on our per-lag variant its own mapping is exact to {measured['per_lag_max_error']:.1e}.")
    positive = PositiveControl("the tree construction on our per-lag variant (first κ tokens from μ), with that "
                               "variant's own mapping, against its Bayes predictor (a case where the construction is "
                               "exact): the same rule, same kernels and lag sets",
                               {"max_error": measured["per_lag_max_error"]},
                               decide_exact(measured["per_lag_max_error"]) == "pass")
    return CheckOutcome(verdict=verdict, measured=measured, threshold={"max_error": EXACT_ATOL}, summary=summary,
                        tables=[_exact_table(records)], findings=exact_findings(records), control=control,
                        positive_control=positive,
                        # float64 sums in different orders (NumPy only): abs 1e-13 guards rounding
                        tolerances={"max_error": {"abs": 1e-13}, "dropped_mu_max_error": {"abs": 1e-13},
                                    "per_lag_max_error": {"abs": 1e-13}})


# --- the model check (reproduction) -------------------------------------------------------------------------

#: The rule per run: the trained model is "at the Bayes-optimal predictor" when the upper 3-SE bounds of its
#: held-out lag-posterior KL and query-loss gap are below these (nats). LAG_TOL: midway between the largest bound of
#: the recipe's development runs (0.0083) and the smallest lower bound of the one-window near miss on the same
#: sequences (0.0411), by the rule declared with the grid (docs/notes/footnote1-selective-induction.md).
LAG_TOL = 0.025
QUERY_TOL = 0.02
#: The run set these runs belong to (``reports.protocol.RUN_SETS``).
RUN_SET = "footnote1-selective-induction"
#: Run sizes per tier (the quick tier's are what its control is computed on and what the probe trains).
TRAIN_SIZES = {"quick": {"steps": 3000, "eval_contexts": 2000}, "full": {"steps": 3000, "eval_contexts": 4000}}


def protocol(tier: str) -> dict:
    """What footnote 1's trained check is decided by at ``tier`` (its pre-registered protocol,
    ``reports.protocol``): the run's config and the per-run rule's tolerances."""
    return {"run": run_plan(SelectiveTrainConfig(**TRAIN_SIZES[tier])), "lag_tol": LAG_TOL, "query_tol": QUERY_TOL,
            "rule": "upper 3-SE bounds of the held-out lag KL and query-loss gap below their tolerances",
            "control": "the Bayes predictor reading fewer windows"}

def _decide(lag_gap, lag_se, query_gap, query_se) -> dict:
    lag_upper, query_upper = lag_gap + 3 * lag_se, query_gap + 3 * query_se
    ok = lag_upper <= LAG_TOL and query_upper <= QUERY_TOL
    return {"verdict": "pass" if ok else "fail", "lag_upper": float(lag_upper), "query_upper": float(query_upper)}


def decide_run(final: dict) -> dict:
    """The rule on one held-out evaluation (a trained run's, or the Bayes predictor reading fewer windows)."""
    return _decide(final["lag_gap"], final["lag_gap_se"], final["query_gap"], final["query_gap_se"])


def selective_runs(ctx: CheckContext) -> list[dict]:
    """The tier's trained runs on their task, one per report training seed (cached per context; each record keeps
    its model for a continuation)."""
    seeds = training_seeds(ctx, RUN_SET)
    key = ("footnote1-selective-training", ctx.tier, tuple(seeds))
    if key not in ctx.cache:
        ctx.cache[key] = [train_selective(SelectiveTrainConfig(seed=seed, **TRAIN_SIZES[ctx.tier])) for seed in seeds]
    return ctx.cache[key]


def judge(run: dict) -> tuple[str, dict]:
    """The per-run rule as a continuation judge (``reports.checks.trained.confirm_misses``): the status and the two
    upper bounds with their tolerances."""
    decided = decide_run(run["final"])
    return decided["verdict"], {"lag_upper": (decided["lag_upper"], LAG_TOL, True),
                                "query_upper": (decided["query_upper"], QUERY_TOL, True)}


def reading_power(run: dict) -> list[dict]:
    """The rule on the Bayes predictor reading the last m of the run's L windows on its held-out sequences,
    m = 1 … L (m = L is the Bayes predictor): the near-miss control's power curve."""
    config = SelectiveTrainConfig(**run["config"])
    kernel = run_kernel(config)
    batch = eval_batch(config, kernel)
    points = []
    for m in range(1, config.L + 1):
        evaluation = truncated_bayes_evaluation(kernel, config, batch, m)
        decided = decide_run(evaluation)
        points.append({"x": m, "label": f"Bayes reading {m} of {config.L} windows", "value": evaluation["lag_gap"],
                       "rejected": decided["verdict"] != "pass", "lag_upper": decided["lag_upper"],
                       "query_upper": decided["query_upper"]})
    return points


def near_miss_control(run: dict) -> Control:
    """The Bayes predictor reading L − 1 of the first run's L windows (one ignored), with the power curve."""
    power = reading_power(run)
    near = power[-2]
    return Control(f"the Bayes predictor reading only the last {near['x']} of {power[-1]['x']} windows on the same "
                   "held-out sequences (one window ignored), judged by the same rule",
                   {"windows": near["x"], "lag_gap": near["value"], "lag_upper": near["lag_upper"],
                    "query_upper": near["query_upper"]}, near["rejected"], power=power,
                   # either upper bound above its tolerance fails the rule: the one furthest above it
                   margin=max(ControlMargin("lag_upper", near["lag_upper"], LAG_TOL, units="nats"),
                              ControlMargin("query_upper", near["query_upper"], QUERY_TOL, units="nats"),
                              key=lambda m: m.distance))


def _power_words(power: list[dict]) -> str:
    """:func:`reports.checks.trained.power_text` in this check's words (windows read by the Bayes predictor)."""
    return power_text(power).replace("examples read by BMA", "windows read by the Bayes predictor")


def _figure(ctx: CheckContext, run: dict) -> str:
    fig, ax = new_figure(figsize=(5.2, 4.6))
    posterior, attention = run["laws"]["posterior"], run["laws"]["attention"]
    for j, kappa in enumerate(run["config"]["lags"]):
        ax.scatter(posterior[:, j], attention[:, j], s=6, alpha=0.5, label=f"κ = {kappa}")
    ax.plot([0, 1], [0, 1], color="k", lw=0.8)
    ax.set_xlabel("Bayes lag posterior P(κ | x_<t)")
    ax.set_ylabel("trained layer-2 attention at h' = h − κ")
    ax.set_title(f"selective induction (their task), trained (seed {run['config']['seed']}, {len(posterior)} "
                 "held-out sequences)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    filename = "footnote1_selective_training.png"
    save_figure(fig, ctx.figure_path(filename))
    return filename


def _run_rows(runs, decided) -> list[list]:
    rows = []
    for r, d in zip(runs, decided):
        f, i = r["final"], r["init"]
        rows.append([r["config"]["seed"], f"{i['lag_gap']:.3f}", f"{f['lag_gap']:.3f} ± {f['lag_gap_se']:.3f}",
                     f"{f['token_gap']:.3f}", f"{f['query_gap']:.4f} ± {f['query_gap_se']:.4f}",
                     f"{f['lag_lpa_model']:.3f} / {f['lag_lpa_bayes']:.3f}",
                     f"{f['uniform_lag_gap']:.3f} / {f['uniform_lag_query_gap']:.3f}", d["verdict"],
                     r["converged"]["plateaued"]])
    return rows


def lags_never_found(runs) -> list[dict]:
    """The runs whose attention never found the lags: held-out lag KL no lower at the end than at initialisation
    (where the model reads about as the uniform-lag predictor does). Reported by name; each still counts by the
    count rule as what it is."""
    return [r for r in runs if r["final"]["lag_gap"] >= r["init"]["lag_gap"]]


def never_found_text(runs) -> list[str]:
    return [f"seed {r['config']['seed']} never found the lags (lag KL {r['final']['lag_gap']:.3g} at the end, "
            f"{r['init']['lag_gap']:.3g} at initialisation)" for r in lags_never_found(runs)]


def _training_summary(runs, record: dict, control: Control) -> str:
    c0, m = runs[0]["config"], record["metrics"]
    spread = {k: f"median {m[k]['median']:.4f} ({m[k]['min']:.4f} to {m[k]['max']:.4f})"
              for k in ("lag_gap", "query_gap")}
    return (f"The tree task's structured model on their task's windows (d = {c0['d']}, K = {c0['lags']}, "
            f"L = {c0['L']} windows ending at s ≥ k̂, {c0['K']} copier heads), trained {c0['steps']} steps from a "
            f"random initialisation: layer-2 attention vs the lag posterior KL {spread['lag_gap']}, query-loss gap to "
            f"the Bayes-optimal predictive {spread['query_gap']} nats (rule per run: upper 3-SE bounds ≤ {LAG_TOL} "
            f"and ≤ {QUERY_TOL}); {seeds_text(record)}"
            + "".join(f"; {phrase}" for phrase in never_found_text(runs))
            + f". Control ({control.description}: lag KL upper bound "
            f"{control.measured['lag_upper']:.3f}) {'rejected' if control.rejected else 'NOT rejected'}; "
            f"power: {_power_words(control.power)}.")


def _training_assumptions(c0: dict) -> list[str]:
    return [f"their task (first k̂ tokens from μ); kernel P*: rows Dirichlet({c0['alpha']}) with floor ε = "
            f"{c0['eps']}, d = {c0['d']}, one per run from the run's seed; lags K = {c0['lags']}, L = {c0['L']} "
            "windows of width k̂ + 1 ending at s = k̂..t−1",
            f"model: StructuredTransformer on d + 1 tokens (the pad unused), {c0['K']} copier heads, β = "
            f"{c0['beta']}, mixture output; loss at the query's last row only",
            f"training: AdamW lr {c0['lr']} (W_KQ at {c0['selector_lr_scale']}×), warm-up {c0['warmup']} and "
            f"cosine, batch {c0['batch_size']} (set on runs that are not the report's: RECIPE_SEEDS), "
            f"{c0['steps']} steps, grad clip {c0['grad_clip']}; {c0['eval_contexts']} held-out sequences; converged "
            f"by the {PLATEAU_RULE}, on the held-out query-loss gap evaluated every {c0['eval_every']} steps",
            "the lag posterior is read as the attention at the candidates h' = h − κ, not renormalised "
            "(mass elsewhere counts against the model)"]


def footnote1_selective_training(ctx: CheckContext) -> CheckOutcome:
    """Model check (reproduction): the structured model trained on their task's windows, on the report's training
    seeds, reaches the lag posterior and the Bayes-optimal predictive (count rule over :func:`decide_run`);
    near-miss control: :func:`near_miss_control`. Both tiers train (three runs of about 25 s at the quick tier)."""
    runs = selective_runs(ctx)
    decided = [decide_run(r["final"]) for r in runs]
    statuses, tests = [d["verdict"] for d in decided], [r["converged"] for r in runs]
    more = confirm_misses(ctx, RUN_SET, runs, statuses, tests, judge, seed_keys(ctx, RUN_SET, "selective"),
                          objective="query_gap")
    verdict, reason, converged = count_verdict(statuses, tests, more, why_unconfirmed=why_unconfirmed(ctx, RUN_SET))
    if reason and lags_never_found(runs):
        reason += "; " + "; ".join(never_found_text(runs))
    record = seeds_record([r["config"]["seed"] for r in runs], statuses, tests,
                          [{k: r["final"][k] for k in ("lag_gap", "query_gap", "token_gap")}
                           | {k: d[k] for k in ("lag_upper", "query_upper")} for r, d in zip(runs, decided)], more)
    control = near_miss_control(runs[0])
    # the first seed's run, as every trained check records it; each seed's values are under ``seeds``
    first, d0 = runs[0], decided[0]
    measured = {"first_run": {"seed": first["config"]["seed"], "init": first["init"], "final": first["final"],
                              "converged": first["converged"]["plateaued"], "verdict": d0["verdict"],
                              "lag_upper": d0["lag_upper"], "query_upper": d0["query_upper"],
                              "kernel": first["kernel"]},
                "passes": statuses.count("pass"),
                "never_found_lags": [r["config"]["seed"] for r in lags_never_found(runs)]}
    return CheckOutcome(
        verdict=verdict, reason=reason, measured=measured, converged=converged, seeds=record, control=control,
        positive_control=ideal_control(control, "the Bayes predictor reading every window on the same held-out "
                                                "sequences"),
        threshold={"lag_tol": LAG_TOL, "query_tol": QUERY_TOL, "z": 3.0, "count_rule": record["count_rule"]},
        summary=_training_summary(runs, record, control),
        tables=[Table("Held-out gaps (nats) per trained run; init = the model at its random initialisation",
                      ["seed", "lag KL init", "lag KL", "parent-token KL", "query-loss gap",
                       "lag L_pa model / Bayes", "uniform-lag predictor: KL / query gap", "rule", "converged"],
                      _run_rows(runs, decided))],
        figures=[_figure(ctx, runs[0])] if ctx.figures_dir is not None else [],
        # float32 training: the first run's values moved with the CPU path by at most 0.0019 over ATEN
        # default|avx2|avx512 and 1|2 threads (measured on the earlier seeds; docs/notes/footnote1-selective-
        # induction.md); another machine moves them further, hence about 5x that. Its init is exact. A stuck seed's
        # plateau statistic can sit at its bound (the earlier seed 568's did), so its status can move between "miss"
        # and "not converged": the reason's counts are declared to move; its words, the verdict and the passes are
        # still compared. The current seeds' spread is not yet measured.
        tolerances={"first_run.final": {"abs": 0.01}, "first_run.lag_upper": {"abs": 0.01},
                    "first_run.query_upper": {"abs": 0.01},
                    "reason": {"counts": "a stuck seed can move between 'miss' and 'not converged' with the CPU "
                                         "path (the earlier seed 568 did)"}},
        assumptions=_training_assumptions(runs[0]["config"]))


CLAIM = Claim(
    "footnote1-selective-induction",
    "Footnote 1 (a claim of the paper): the BMA construction covers the selective-induction task of D'Angelo, "
    "Croce and Flammarion (ICLR 2025).",
    "Their task: each sequence draws κ uniformly from K, its first k̂ = max K tokens are i.i.d. μ (stationary) "
    "whatever κ, then x_t ~ P*(·|x_{t−κ}); mapping " + MAPPING + ", the tree BMA selector equals their "
    "Bayes-optimal predictive over lags, weights Π_{k̂≤s<t} P*(x_s|x_{s−κ}).",
    (Check("exact", footnote1_selective_induction,
           "constructed vs their Bayes-optimal predictive at every position, several lag sets; findings: the first "
           "tokens' μ terms cancel on their task, not on our per-lag variant; feeding every window is not theirs"),
     Check("model", footnote1_selective_training,
           "the tree task's structured model trained on their task's windows from a random initialisation: layer-2 "
           "attention vs the lag posterior and prediction vs the Bayes-optimal predictive on held-out sequences, on "
           "several training seeds; near-miss control: the Bayes predictor reading L − 1 of the L windows, with the "
           "rule's power over m = 1 … L", reading="reproduction")),
    section="beyond")
