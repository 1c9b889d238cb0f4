"""Claim exp-robustness (Appendix G): a standard transformer with FFN, and absolute position embeddings, learn the
same mechanism as the structured model (attention that selects parents, predictions near BMA).

The standard-transformer part is decided by a GPT (nanoGPT's decoder on the flattened (L + 1)·H token stream;
model/gpt.py), judged per token against BMA in KL: mean KL(BMA ‖ model) over the query example's positions h ≥ 1 on
held-out contexts. A converged GPT reproduces when its KL is below that of BMA reading L − 1 of the L examples (the
bar; the near-miss control is BMA reading L − 2, strictly beyond it, with the rule's power over m examples read). The absolute-PE part is the disentangled transformer with
absolute PE, judged by fig2's rule. The two-stream model of model/task_shaped.py is a diagnostic, "task-shaped (ours)",
and never decides. Both tiers train every GPT reading (depth 2 and 3, absolute and rotary positions): the deciding
one on the tier's seeds, the others on 2 seeds as diagnostics, each with its own verdict by the count rule. Tuning
and budgets: docs/notes/exp-robustness.md.
"""
from __future__ import annotations

from dataclasses import replace

from bma_verify.model import analysis
from bma_verify.model.convergence import run_plateau
from bma_verify.model.gpt_training import GPT_READINGS, GPT_SHARED, KL_RESOLUTION, bma_reading_levels
from bma_verify.model.presets import train_config
from bma_verify.model.training import eval_batch
from bma_verify.reports.checks.trained import (NOISE_BAND, THRESHOLDS, combine_sides, confirm_misses, count_rule_text,
                                               count_verdict, fig2_judge, fig2_near_miss_margin, fig2_sides,
                                               half_examples, ideal_control, near_miss_control, power_text,
                                               run_convergence, seeds_record, seeds_text, threshold_side,
                                               train_in_workers, training_seeds, why_unconfirmed)
from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.core import CheckContext, CheckOutcome, Control, ControlMargin, PositiveControl, Table
from bma_verify.reports.plans import preset_configs
from bma_verify.reports.protocol import run_plan
from bma_verify.reports.claims.exp_robustness.plan import GPT_DECIDING, GPT_TUNED

#: What each reading is, as the report names it.
READING_NAMES = {"gpt-d2-absolute": "GPT, depth 2, learned absolute positions",
                 "gpt-d2-rope": "GPT, depth 2, rotary positions",
                 "gpt-d3-absolute": "GPT, depth 3, learned absolute positions",
                 "gpt-d3-rope": "GPT, depth 3, rotary positions",
                 "absolute": "disentangled transformer with absolute PE",
                 "task-shaped": "task-shaped (ours): two streams, relative biases",
                 "task-shaped-copy-init": "task-shaped (ours), layer 1 started as the copier"}
#: The GPT reading that decides the standard-transformer part, per tier (``GPT_DECIDING``, which gives its setting
#: too); the others are diagnostics.
DECIDING_GPT = {tier: reading for tier, (reading, _) in GPT_DECIDING.items()}
#: Training seeds per reading and tier (the first n of the report's robustness seeds): the deciding GPT reading on
#: the tier's count of seeds, each other GPT reading on 2 as a diagnostic (the budget rules of the notes).
SEED_PLAN = {"quick": {**{r: 2 for r in GPT_READINGS}, DECIDING_GPT["quick"]: 3},
             "full": {**{r: 2 for r in GPT_READINGS}, DECIDING_GPT["full"]: 5, "absolute": 5, "task-shaped": 1,
                      "task-shaped-copy-init": 1}}
#: Why a reading is not trained at the quick tier.
QUICK_SKIPPED = {"absolute": "its run at the fig2 setting (1500 steps at batch 512, 44 s on one core) on 3 seeds "
                             "does not fit the quick tier's budget beside the four GPT readings (`make test` within 9 "
                             "minutes; docs/notes/exp-robustness.md)",
                 "task-shaped": "a diagnostic trained at the full tier only",
                 "task-shaped-copy-init": "a diagnostic trained at the full tier only"}
#: Standard errors by which a GPT's KL must sit below (above) BMA reading L − 1 to meet (miss) the rule.
KL_Z = 2.0
#: The attention diagnostics' keys in ``measured``: one parent accuracy per layer of the deepest GPT reading.
ACCURACY_KEYS = [f"layer{i}_parent_accuracy" for i in range(1, max(depth for depth, _ in GPT_READINGS.values()) + 1)]
#: Regression tolerances of the deciding reading's first seed (quick tier). ATEN_CPU_CAPABILITY default against avx2
#: moved KL and query loss by < 1e-7, OMP_NUM_THREADS=2 by < 1e-9, and no parent accuracy moved
#: (docs/notes/exp-robustness.md). Another CPU moves them further: KL and query loss within about 1/25 of the first
#: seed's distance to its bar (0.051 nats); a parent accuracy within 0.01 (a near-tied attention argmax that flips
#: moves it by 1/1536).
RUN_TOLERANCES = {"kl": {"abs": 0.002}, "query_loss": {"abs": 0.002}, **{k: {"abs": 0.01} for k in ACCURACY_KEYS}}
#: Regression tolerances of a diagnostic GPT reading (shared setting, lr 3e-3: its curve is noisier). Across
#: OMP_NUM_THREADS=1|2 and ATEN_CPU_CAPABILITY=default|avx2|avx512 the quick tier's first seeds moved KL by up to
#: 2.4e-3, query loss 2.3e-3 and a layer's parent accuracy 9.8e-3; the tolerances are 4× that. Its verdict moved:
#: gpt-d2-rope's seed 548 sits at its plateau bound and reads not converged under one path, so a diagnostic's
#: verdict and reason are declared to move (docs/notes/exp-robustness.md).
DIAGNOSTIC_TOLERANCES = {"kl": {"abs": 0.01}, "query_loss": {"abs": 0.01},
                         **{k: {"abs": 0.04} for k in ACCURACY_KEYS},
                         **{key: {"moves": "a diagnostic GPT's seed can sit at its plateau bound: gpt-d2-rope's "
                                           "seed 548 reads not converged under OMP_NUM_THREADS=2 with "
                                           "ATEN_CPU_CAPABILITY=default (docs/notes/exp-robustness.md)"}
                            for key in ("verdict", "reason")}}


def protocol(tier: str) -> dict:
    """What exp-robustness's verdict is decided by at ``tier`` (its pre-registered protocol, ``reports.protocol``):
    every reading's run, the seed plan, the deciding readings, the KL rule and fig2's rule for the absolute model."""
    return {"runs": {label: run_plan(c) for label, c in preset_configs("robustness", tier=tier).items()},
            "seed_plan": SEED_PLAN[tier], "skipped": sorted(QUICK_SKIPPED) if tier == "quick" else [],
            "decides": decides(tier), "kl_z": KL_Z, "kl_plateau_min_drop": KL_RESOLUTION,
            "fig2_rule": {"thresholds": THRESHOLDS[tier], "noise_band": NOISE_BAND},
            "rule": "a GPT reading meets the rule when its KL from BMA sits KL_Z standard errors below BMA reading "
                    "L − 1 of the L examples",
            "control": "BMA reading L − 2 of the L examples, rejected when KL_Z standard errors above the bar"}

def decides(tier: str) -> dict[str, str]:
    """Which part of the claim each deciding reading decides at ``tier``."""
    return {DECIDING_GPT[tier]: "standard transformer", "absolute": "absolute position embeddings"}


def _run_key(ctx: CheckContext, label: str, seed: int) -> str:
    return f"exp-robustness:{label}:{ctx.tier}:{seed}:{ctx.device}"


def train_reading(ctx: CheckContext, label: str, seed: int):
    """Reading ``label``'s run on training seed ``seed`` (the robustness preset's config), trained once per report."""
    key = _run_key(ctx, label, seed)
    if key not in ctx.cache:
        ctx.cache[key] = train_config(_config(ctx, label, seed), quiet=ctx.quiet)
    return ctx.cache[key]


def _config(ctx: CheckContext, label: str, seed: int):
    return preset_configs("robustness", tier=ctx.tier, seed=seed, device=ctx.device)[label]


def train_in_parallel(ctx: CheckContext, tasks: list[tuple[str, int]]) -> None:
    """Cache the (label, seed) runs not yet cached, trained by ``train_in_workers`` (how the full tier fits its 60
    minutes on 2 cores); with one job nothing happens here and :func:`train_reading` trains each where it is read."""
    missing = [t for t in tasks if _run_key(ctx, *t) not in ctx.cache]
    runs = train_in_workers(ctx, [_config(ctx, *t) for t in missing])
    if runs is not None:
        ctx.cache.update({_run_key(ctx, *t): run for t, run in zip(missing, runs)})


def kl_side(kl: float, bar: float, se: float) -> str:
    """The rule on one run: 'pass' when its KL is below ``bar`` (BMA reading L − 1) by more than KL_Z standard
    errors of the paired difference, 'fail' when it is not below ``bar`` by less than that (a predictor no better
    than the control fails), 'noise' in between."""
    margin = bar - kl
    return "pass" if margin > KL_Z * se else ("fail" if margin <= -KL_Z * se else "noise")


# ---------------------------------------------------------------------------------------------------------------
# Compute: each reading over its seeds.

def _gpt_seed(run) -> dict:
    m = run.metrics
    values = {k: m[k] for k in ("kl", "kl_uniform_parent", "kl_bma_half", "kl_bma_minus_one", "kl_true_parent",
                                "query_loss")}
    values |= {f"layer{a['layer']}_parent_accuracy": a["parent_accuracy"] for a in m["attention"]}
    return {"status": kl_side(m["kl"], m["kl_bma_minus_one"], m["kl_gap_se"]),
            "test": run_plateau(m, "kl", min_drop=KL_RESOLUTION), "values": values}


def _disentangled_seed(ctx: CheckContext, run) -> dict:
    """fig2's rule, and no better than BMA reading the last ceil(L/2) examples fails."""
    m = run.metrics
    half = analysis.truncated_bma_metrics(run.kernel, eval_batch(run.config, run.kernel, run.config.L),
                                          half_examples(run.config.L))
    below = threshold_side(m["parent_accuracy"], half["parent_accuracy"], NOISE_BAND["accuracy"], upper=False)
    status = "fail" if below == "fail" else combine_sides(fig2_sides(ctx, m))
    values = {k: m[k] for k in ("query_loss", "gap_to_bma", "parent_loss_gap", "parent_accuracy",
                                "bma_parent_accuracy")}
    return {"status": status, "test": run_convergence(m), "values": values}


def _judge(ctx: CheckContext, gpt: bool):
    """A reading's rule as a continuation judge (``reports.checks.trained.confirm_misses``): a run's status and its
    scalar values with their thresholds (upper bounds): the GPT's KL against BMA reading L − 1's, or fig2's values."""
    fig2 = fig2_judge(ctx)

    def on(run) -> tuple[str, dict]:
        if gpt:
            m = run.metrics
            return _gpt_seed(run)["status"], {"kl": (m["kl"], m["kl_bma_minus_one"], True)}
        return _disentangled_seed(ctx, run)["status"], fig2(run)[1]
    return on


def gpt_control(run) -> Control:
    """The near miss strictly on the false side of the KL rule: BMA reading L − 2 of the run's L examples (BMA
    reading L − 1 is the rule's bar itself, so it cannot be a control), rejected only when the rule reads it
    ``fail`` (at least KL_Z standard errors above the bar, the margin recorded in SE units); with the rule's power
    over m = 0 … L examples read."""
    levels = bma_reading_levels(run.kernel, eval_batch(run.config, run.kernel, run.config.L))
    L, bar = run.config.L, levels[-2]["kl"]
    power = [{"x": p["m"], "label": f"BMA reading {p['m']} of {L}", "value": p["kl"],
              "rejected": kl_side(p["kl"], bar, p["gap_se"]) == "fail"} for p in levels]
    near = levels[max(L - 2, 0)]
    margin = (near["kl"] - bar) / near["gap_se"] if near["gap_se"] > 0 else float("inf")
    return Control(f"BMA reading only the last {near['m']} of {L} examples on the same contexts (two examples "
                   f"ignored), judged by the KL rule against its bar, BMA reading {L - 1}: rejected when at least "
                   f"{KL_Z:g} standard errors above the bar", {"examples": near["m"], "L": L, "kl": near["kl"],
                                                                 "bar": bar, "margin_se": margin},
                   power[near["m"]]["rejected"], power=power,
                   # kl_side fails a KL at least KL_Z standard errors above the bar: that edge is the margin's bar
                   margin=ControlMargin.beyond_band("kl", near["kl"], bar, KL_Z * near["gap_se"], units="nats"))


def _reading(ctx: CheckContext, label: str, seeds: list[int]) -> dict:
    """One reading on its seeds: per-seed status and plateau test, the count rule, the seeds record, the first
    seed's run and its near-miss control."""
    runs = [train_reading(ctx, label, s) for s in seeds]
    gpt = label in GPT_READINGS
    per_seed = [_gpt_seed(r) if gpt else _disentangled_seed(ctx, r) for r in runs]
    statuses, tests = [p["status"] for p in per_seed], [p["test"] for p in per_seed]
    more = confirm_misses(ctx, "robustness", runs, statuses, tests, _judge(ctx, gpt), [f"{s}:{label}" for s in seeds],
                          objective="kl" if gpt else "query_loss")
    verdict, reason, converged = count_verdict(statuses, tests, more,
                                               why_unconfirmed=why_unconfirmed(ctx, "robustness"))
    record = seeds_record(seeds, statuses, tests, [p["values"] for p in per_seed], more)
    if verdict == "fail":
        reason = f"converged seeds miss the rule, each confirmed by its continuation: {seeds_text(record)}"
    if gpt:
        control = gpt_control(runs[0])
    else:
        control = near_miss_control(ctx, runs[0], fig2_sides)
        control = replace(control, margin=fig2_near_miss_margin(ctx, control.measured))
    return {"label": label, "verdict": verdict, "reason": reason, "converged": converged, "control": control,
            "seeds": record, "run": runs[0],
            "first": per_seed[0]["values"]}


def _skipped(label: str, tier: str) -> dict:
    return {"label": label, "verdict": "inconclusive", "reason": f"{tier} tier cannot decide: {QUICK_SKIPPED[label]}",
            "converged": None, "control": None, "seeds": None, "run": None, "first": None}


# ---------------------------------------------------------------------------------------------------------------
# The check: compute (each planned reading), decide (the deciding readings), render.

def exp_robustness(ctx: CheckContext) -> CheckOutcome:
    """Appendix G: the standard GPT (deciding reading and diagnostics) and the absolute-PE disentangled model."""
    seeds = training_seeds(ctx, "robustness")
    plan = SEED_PLAN[ctx.tier]
    train_in_parallel(ctx, [(label, s) for label in plan for s in seeds[:plan[label]]])
    readings = {label: _reading(ctx, label, seeds[:plan[label]]) if label in plan else _skipped(label, ctx.tier)
                for label in READING_NAMES}
    return _render(ctx, readings, _decide(readings, ctx.tier))


def _decide(readings: dict, tier: str) -> dict:
    """The claim fails when a deciding reading fails, passes when every one passes, else is inconclusive."""
    parts = decides(tier)
    deciding = [readings[label] for label in parts]
    verdicts = [r["verdict"] for r in deciding]
    verdict = "fail" if "fail" in verdicts else ("pass" if all(v == "pass" for v in verdicts) else "inconclusive")
    reason = "" if verdict == "pass" else "; ".join(
        f"{parts[r['label']]} ({r['label']}): {r['reason'] or r['verdict']}" for r in deciding
        if r["verdict"] == verdict)
    controls = {r["label"]: r["control"] for r in deciding if r["control"] is not None}
    main = controls.get(DECIDING_GPT[tier]) or next(iter(controls.values()), None)
    ideals = {label: ideal_control(c, "BMA itself (reading all L examples) on the same contexts")
              for label, c in controls.items()}
    positive = None if not ideals else PositiveControl(
        "for each deciding reading, BMA itself (reading all L examples) on the same contexts, judged by that "
        "reading's rule", {label: {"measured": p.measured, "passed": p.passed} for label, p in ideals.items()},
        all(p.passed for p in ideals.values()))
    control = None if main is None else Control(
        "for each deciding reading, its near miss judged by that reading's rule (the GPT: BMA reading L − 2 of its L "
        "examples, strictly beyond the bar BMA reading L − 1; the absolute-PE model: BMA reading L − 1 against fig2's "
        "thresholds)", {label: {"measured": c.measured, "rejected": c.rejected,
                                "margin": None if c.margin is None else c.margin.as_dict()}
                        for label, c in controls.items()},
        all(c.rejected for c in controls.values()), power=main.power, margin=main.margin)
    tested = [r for r in deciding if r["converged"] is not None]
    diagnostics = {label: r["converged"] for label, r in readings.items()  # recorded, never gating the verdict
                   if label not in parts and r["converged"] is not None}
    converged = {"plateaued": bool(tested) and all(r["converged"]["plateaued"] for r in tested),
                 "readings": {r["label"]: r["converged"] for r in tested},
                 **({"diagnostics": diagnostics} if diagnostics else {})} if tested else None
    return {"verdict": verdict, "reason": reason, "control": control, "converged": converged, "positive": positive}


def _measured(r: dict, tier: str) -> dict:
    run = r["run"]
    out = {"name": READING_NAMES[r["label"]], "decides": decides(tier).get(r["label"]), "verdict": r["verdict"],
           "reason": r["reason"]}
    if run is None:
        return out
    c = run.config
    return out | r["first"] | {"scale": {"d": c.d, "H": c.H, "L": c.L}, "steps": c.steps, "seeds": r["seeds"]["n"]}


def _table(readings: dict) -> Table:
    rows = []
    for label, r in readings.items():
        if r["seeds"] is None or label not in GPT_READINGS:
            continue
        med = {k: v["median"] for k, v in r["seeds"]["metrics"].items()}
        kl = r["seeds"]["metrics"]["kl"]
        rows.append([label, r["seeds"]["n"], med["kl"], kl["min"], kl["max"], med["kl_uniform_parent"],
                     med["kl_bma_half"], med["kl_bma_minus_one"], med["kl_true_parent"], r["verdict"]])
    return Table("KL(BMA ‖ predictor), nats, query positions h ≥ 1 (median and range over seeds)",
                 ["reading", "seeds", "model (median)", "min", "max", "uniform parent", "BMA ceil(L/2)",
                  "BMA L − 1", "true parent", "verdict"], rows)


def _render(ctx: CheckContext, readings: dict, d: dict) -> CheckOutcome:
    trained = {label: r for label, r in readings.items() if r["seeds"] is not None}
    return CheckOutcome(
        verdict=d["verdict"], reason=d["reason"], converged=d["converged"], control=d["control"],
        positive_control=d["positive"],
        measured={label: _measured(r, ctx.tier) for label, r in readings.items()},
        threshold={"gpt": f"KL(BMA ‖ model) below KL(BMA ‖ BMA reading L − 1) by more than {KL_Z:g} standard "
                          "errors of the paired difference over held-out contexts; not below it by less: fail",
                   "absolute": "fig2's rule, and parent accuracy above BMA reading ceil(L/2) examples",
                   "count_rule": count_rule_text(SEED_PLAN[ctx.tier][DECIDING_GPT[ctx.tier]]), "tier": ctx.tier},
        summary=_summary(readings, d, ctx.tier), assumptions=_assumptions(ctx, readings), tables=[_table(readings)],
        seeds=_seeds(trained, DECIDING_GPT[ctx.tier]),
        tolerances={f"{label}.{key}": tol for label in trained if label in GPT_READINGS
                    for key, tol in (RUN_TOLERANCES if label == DECIDING_GPT[ctx.tier]
                                     else DIAGNOSTIC_TOLERANCES).items()})


def _seeds(trained: dict, deciding: str) -> dict | None:
    """The deciding GPT reading's seeds record, with every other trained reading's under ``readings``."""
    if deciding not in trained:
        return None
    others = {label: r["seeds"] for label, r in trained.items() if label != deciding}
    return trained[deciding]["seeds"] | ({"readings": others} if others else {})


def _reading_text(r: dict, tier: str) -> str:
    label, name, parts = r["label"], READING_NAMES[r["label"]], decides(tier)
    head = name if name.startswith(label) else f"{label} ({name})"  # "task-shaped (ours): …" names itself
    role = f"decides the {parts[label]} part" if label in parts else "diagnostic"
    if r["seeds"] is None:
        return f"{head}, {role}: {r['reason']}"
    m, c = r["seeds"]["metrics"], r["run"].config
    scale = f"d = {c.d}, H = {c.H}, L = {c.L}"
    if label in GPT_READINGS:
        numbers = (f"KL {m['kl']['median']:.4f} nats (range {m['kl']['min']:.4f}–{m['kl']['max']:.4f}) against "
                   f"{m['kl_bma_minus_one']['median']:.4f} for BMA reading {c.L - 1} of {c.L} examples, "
                   f"{m['kl_uniform_parent']['median']:.4f} for the uniform-parent mixture")
    else:
        numbers = (f"L_pa gap {m['parent_loss_gap']['median']:+.3f} (range {m['parent_loss_gap']['min']:+.3f} to "
                   f"{m['parent_loss_gap']['max']:+.3f})")
    return (f"{head}, {role}, {scale}: {numbers}; {seeds_text(r['seeds'])}; {r['verdict']}"
            + (f" ({r['reason']})" if r["reason"] and r["verdict"] != "fail" else ""))


def _summary(readings: dict, d: dict, tier: str) -> str:
    control = d["control"]
    return ("; ".join(_reading_text(r, tier) for r in readings.values())
            + (f". Control: {control.description}: {'rejected' if control.rejected else 'NOT rejected'}; "
               f"{power_text(control.power)}." if control is not None else "."))


def _assumptions(ctx: CheckContext, readings: dict) -> list[str]:
    deciding = readings[DECIDING_GPT[ctx.tier]]["run"]  # the setting named is the deciding reading's
    shared = [r for r in GPT_READINGS if r != DECIDING_GPT[ctx.tier] and GPT_TUNED[ctx.tier][r] == GPT_SHARED
              and readings[r]["seeds"] is not None]
    gpt = None if deciding is None else deciding.config
    setting = ("" if gpt is None else f" (width {gpt.model.width}, {gpt.model.heads} heads, lr {gpt.lr:g}, batch "
               f"{gpt.batch_size}, {gpt.steps} steps, AdamW with weight decay {gpt.weight_decay:g})")
    return [f"the standard transformer is a GPT on the flattened stream of (L + 1)·H tokens with BOS, pre-LN blocks "
            f"with causal attention and a 4× GELU FFN, GPT-2's N(0, 0.02) initialisation, next-token loss on every "
            f"token, no other mask{setting}; the setting of each reading was chosen on development seeds only",
            f"{DECIDING_GPT[ctx.tier]} decides the standard-transformer part (the strongest reading on the "
            f"{ctx.tier} tier's development {'seed' if ctx.tier == 'quick' else 'seeds'}); "
            "the other GPT readings and the task-shaped model (ours) are diagnostics"
            + (f", {', '.join(shared)} at the shared setting (width {GPT_SHARED['width']}, {GPT_SHARED['heads']} "
               f"heads, lr {GPT_SHARED['lr']:g}, batch {GPT_SHARED['batch_size']}): their best grid settings do not "
               f"fit the {ctx.tier} tier's budget" if shared else ""),
            f"the {ctx.tier} tier trains each reading on the seeds named with it; a reading whose converged seeds "
            "split reads inconclusive by the count rule"]


CLAIM = Claim(
    "exp-robustness",
    "Appendix G: a standard transformer with FFN, and absolute position embeddings, learn the same mechanism: "
    "parent-selecting attention and predictions near BMA.",
    "A standard GPT (decoder on the flattened token stream, depth 2; learned absolute positions in the quick tier, "
    "rotary positions in the full tier: the strongest reading on each tier's development seeds) reaches a per-token "
    "KL(BMA ‖ model) below that of BMA reading L − 1 of the L examples, and the disentangled transformer with "
    "absolute PE meets fig2's rule; at the fig2 setting (d = 5, H = 10, L = 10) in the full tier, at a declared "
    "reduced scale (d = 5, H = 4, L = 3, GPT only) in the quick tier.",
    (Check("model", exp_robustness, "KL against BMA per reading and seeds", reading="reproduction"),),
)
