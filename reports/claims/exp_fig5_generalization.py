"""Claim exp-fig5-generalization: models trained at L reach L_pa^{L'} near BMA for many test L', and smaller
training L generalizes better (Figure 5).

The check reads fig5's preset runs under named readings of what the model does with example offsets beyond the
training L (R1 end to end, R2 with one head budget at the full tier, R3 the selector alone on exact copies). The
end-to-end readings decide, once every run's held-out curve has plateaued: the claim is reproduced when R1 or R2
reproduces it, not reproduced when both fail; R3 is a diagnostic of the selector and never decides. Its control is
the grid of an ideal reader of min(L, L') examples, for which larger L generalizes better. How the runs were chosen:
docs/notes/exp-fig5-generalization.md.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from bma_verify.model import analysis, figures
from bma_verify.model.convergence import RULE as PLATEAU_RULE
from bma_verify.model.convergence import runs_plateau
from bma_verify.model.generalization import (end_to_end_grid, held_out_batches, selector_only_grid,
                                             truncated_reader_grid)
from bma_verify.model.presets import FIG5_R2_PREFIX, fig5_readings
from bma_verify.reports.checks.trained import (combine_sides, draw_figure, run_convergence, trained_runs,
                                               trained_verdict)
from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.core import CheckContext, CheckOutcome, Control, Table

#: L_pa^{L'} within this of BMA's (nats) counts as "near BMA": the control (BMA reading only min(L, L') of the L'
#: examples) is 0.22-1.5 nats above BMA at every L' > L on fig5's contexts. The same at both tiers.
NEAR_BMA = 0.10
#: Run-to-run noise (range over CPU kernels, quick tier, seeds 0-1): of one entry of the grid (≤ 0.036; a run
#: that stalls under one CPU setting moves its row by up to 0.33) and of a row's mean over L' (≤ 0.0098).
GAP_BAND = 0.04
MEAN_GAP_BAND = 0.015
#: Regression tolerances (the reference: quick tier, seed 0). The L = 5 run stalls under avx2, hence the wide
#: grid tolerance; R3 reads the same runs and R2 (full tier only) has no reference, so both take R1's.
MEAN_GAP_TOL, GAP_TOL, OWN_GAP_TOL = {"abs": 0.01}, {"abs": 0.35}, {"abs": 0.16}
TOLERANCES = {
    "mean_parent_loss_gap": MEAN_GAP_TOL, "grid": GAP_TOL, "own_L_parent_loss_gap": OWN_GAP_TOL,
    # the L = 5 run is near BMA at 1 L' under default and 0 under avx2 (seed 0); ρ is −1 under both
    "test_L_near_bma": {"abs": 1}, "spearman_train_L_vs_mean_gap": {"abs": 0.0},
    "R3_selector_only.mean_parent_loss_gap": MEAN_GAP_TOL, "R3_selector_only.grid": GAP_TOL,
    "R3_selector_only.test_L_near_bma": {"abs": 1},
    "R2_shared_budget.mean_parent_loss_gap": MEAN_GAP_TOL, "R2_shared_budget.grid": GAP_TOL,
    "R2_shared_budget.test_L_near_bma": {"abs": 1}, "R2_shared_budget.own_L_parent_loss_gap": OWN_GAP_TOL,
    "R2_shared_budget.spearman_train_L_vs_mean_gap": {"abs": 0.0}}
#: The readings that decide: the end-to-end runs. R3 (the trained selector on exact copies) is a diagnostic.
DECIDING_READINGS = ("R1", "R2")
#: The fewest training L values that can decide "smaller L generalizes better": over two, Spearman ρ is ±1
#: whatever the runs do.
MIN_TRAIN_L = 3
#: Training seeds of fig5 at the full tier (the report seed's and one more); the quick tier trains one.
FIG5_FULL_SEEDS = 2

#: The reading fig5 is run under: what our model does with example offsets beyond the training L.
FIG5_READING = ("reading R1: example offsets beyond the training L share the weight of offset L (clipped relative "
                "positions, Shaw et al. 2018), with K = 2L + 4 copier heads; the paper does not state its rule for "
                "offsets beyond the training range")
FIG5_READING_R2 = ("reading R2 (full tier): every run gets the same head budget (K = 2·max L + 4) and an "
                   "example-offset table covering every test L' (w_L up to offset max L'); offsets never seen in "
                   "training keep their random initial values (no gradient reaches them, weight decay 0)")
FIG5_READING_R3 = ("reading R3: selector only, each trained W_tf (read from W_KQ and the copier heads) applied to "
                   "exact copies of the L' examples, as in Theorem 1's construction (how well the learned selector is "
                   "calibrated, whatever the copier does at L' ≠ L)")


def _reading_word(status: str) -> str:
    return {"pass": "reproduced", "fail": "not reproduced"}.get(status, "undecided (within noise)")


def _fig5_rule(train_L: list, L_test: list, grid: dict) -> dict:
    """Both halves of fig5's claim on a grid {training L: [L_pa^{L'} − BMA's for L' in L_test]}.

    "Near BMA for many L'": some training L is within ``NEAR_BMA`` nats of BMA at ≥ half of the tested L' (pass when
    below ``NEAR_BMA`` minus the noise band there, fail when not even below ``NEAR_BMA`` plus the band, else noise;
    ``near_count`` counts the former).
    "Smaller training L generalizes better": Spearman's ρ(training L, mean gap over L') > 0 at every shift of the
    mean gaps within their noise band.
    """
    many = math.ceil(len(L_test) / 2)
    clearly = {L: int(sum(g < NEAR_BMA - GAP_BAND for g in grid[L])) for L in train_L}
    possibly = {L: int(sum(g <= NEAR_BMA + GAP_BAND for g in grid[L])) for L in train_L}
    mean_gap = [float(np.mean(grid[L])) for L in train_L]
    rank = analysis.spearman_range(train_L, mean_gap, MEAN_GAP_BAND)
    sides = {"near_bma_for_many_L": ("pass" if max(clearly.values()) >= many
                                     else "fail" if max(possibly.values()) < many else "noise"),
             "smaller_L_generalizes_better": ("pass" if rank["low"] > 0 else "fail" if rank["high"] < 0 else "noise")}
    return {"sides": sides, "near_count": clearly, "many": many, "mean_gap": mean_gap, "spearman": rank}


def _deciding(readings: dict) -> dict:
    """The end-to-end readings (R1, R2 where trained), which decide; R3 is left out."""
    return {f"reading {k}": v for k, v in readings.items() if k in DECIDING_READINGS}


def _decide_readings(readings: dict) -> str:
    """Reproduced when an end-to-end reading (R1, R2) reproduces the claim, not reproduced when every one fails,
    else undecided. R3 never decides."""
    deciding = list(_deciding(readings).values())
    return "pass" if "pass" in deciding else "fail" if all(v == "fail" for v in deciding) else "noise"


# ---------------------------------------------------------------------------------------------------------------
# The check: every seed's runs, then the seeds combined.

def exp_fig5_generalization(ctx: CheckContext) -> CheckOutcome:
    """fig5 under named readings (R1 end to end, R2 with one head budget at the full tier, R3 selector only):
    L_pa^{L'} − BMA's for each training L; near BMA for many L'? smaller L better? Reproduced when R1 or R2
    reproduces it, not reproduced when both fail (R3 is shown, never decides). The full tier trains every run on
    FIG5_FULL_SEEDS seeds: a reading reproduces the claim when it does on every seed, fails it when it fails on
    every seed, and is undecided otherwise (figures and tables show the report seed's runs; each seed's ρ is in
    ``by_seed``)."""
    outcome, info = _fig5_one_seed(ctx, trained_runs(ctx, "fig5"))
    if not ctx.full:
        return outcome
    infos = [info] + [_fig5_one_seed(replace(ctx, figures_dir=None), trained_runs(ctx, "fig5", replicate=r))[1]
                      for r in range(1, FIG5_FULL_SEEDS)]
    return _combine_seeds(ctx, outcome, infos)


def _combine_seeds(ctx: CheckContext, outcome: CheckOutcome, infos: list[dict]) -> CheckOutcome:
    """The report seed's outcome with its verdict taken over every seed: a reading counts when it holds on all."""
    readings = {name: ("pass" if all(i["readings"][name] == "pass" for i in infos)
                       else "fail" if all(i["readings"][name] == "fail" for i in infos) else "noise")
                for name in infos[0]["readings"]}
    converged = runs_plateau({f"seed {i['seed']} {label}": test for i in infos
                                  for label, test in i["converged"]["runs"].items()})
    verdict, reason = trained_verdict(_decide_readings(readings), converged, _deciding(readings))
    by_seed = [{"seed": i["seed"], "converged": i["converged"]["plateaued"],
                "own_L_parent_loss_gap": i["own_L_parent_loss_gap"],
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
    grids = _compute_grids(runs_all)
    decided = _decide(ctx, grids)
    info = {"seed": grids["first"].config.seed, "readings": decided["readings"], "converged": decided["converged"],
            "own_L_parent_loss_gap": {**grids["own_gap"],
                                      **{FIG5_R2_PREFIX + k: g for k, g in grids["own_gap_r2"].items()}},
            "rules": {"R1": decided["rule"], **({"R2": decided["rule_r2"]} if grids["r2"] else {}),
                      "R3": decided["rule_r3"]}}
    return _render(ctx, grids, decided), info


# ---------------------------------------------------------------------------------------------------------------
# compute, decide, render

def _compute_grids(runs_all: dict) -> dict:
    """Every grid of one seed's runs (keyed by training L), with the labels, sizes and own-L gaps they come from."""
    by_reading = fig5_readings(runs_all)
    runs = by_reading["R1"]
    labels = sorted(runs, key=lambda s: runs[s].config.L)
    L_test = sorted(int(k) for k in runs[labels[0]].metrics["by_test_L"])
    r2 = by_reading.get("R2", {})
    first = runs[labels[0]]
    batches = held_out_batches(first, L_test)  # the contexts every run is tested on
    return {"runs": runs, "r2": r2, "labels": labels, "train_L": [runs[k].config.L for k in labels],
            "L_test": L_test, "first": first,
            "trained": {**{k: runs[k] for k in labels}, **{FIG5_R2_PREFIX + k: r2[k] for k in labels if r2}},
            "own_gap": {k: runs[k].metrics["parent_loss_gap"] for k in labels},  # each run's L_pa gap at its own L
            "own_gap_r2": {k: r2[k].metrics["parent_loss_gap"] for k in labels} if r2 else {},
            "grid": end_to_end_grid([runs[k] for k in labels], L_test),
            "grid_r2": end_to_end_grid([r2[k] for k in labels], L_test) if r2 else None,
            "grid_r3": selector_only_grid([runs[k] for k in labels], first.kernel, batches),
            "control_grid": truncated_reader_grid(first.kernel, batches, [runs[k].config.L for k in labels])}


def _decide(ctx: CheckContext, g: dict) -> dict:
    """fig5's rule on each reading's grid and on the control's; the verdict of one seed."""
    train_L, L_test = g["train_L"], g["L_test"]
    rule, rule_r3 = _fig5_rule(train_L, L_test, g["grid"]), _fig5_rule(train_L, L_test, g["grid_r3"])
    rule_r2 = _fig5_rule(train_L, L_test, g["grid_r2"]) if g["r2"] else None
    readings = {"R1": combine_sides(rule["sides"]), **({"R2": combine_sides(rule_r2["sides"])} if g["r2"] else {}),
                "R3": combine_sides(rule_r3["sides"])}
    converged = runs_plateau({label: run_convergence(r.metrics) for label, r in g["trained"].items()})
    verdict, reason = trained_verdict(_decide_readings(readings), converged, _deciding(readings))
    if len(train_L) < MIN_TRAIN_L:
        verdict, reason = "inconclusive", (f"cannot decide: {len(train_L)} training L values (over two, Spearman ρ "
                                           "is ±1 whatever the runs do)")
    # the control grid is larger-L-better, so the "smaller L generalizes better" half must reject it
    control_rule = _fig5_rule(train_L, L_test, g["control_grid"])
    control = Control("the grid of BMA reading only the last min(L, L') of the L' examples (an ideal reader of its "
                      "training L examples: larger L generalizes better)",
                      {"mean_gap": control_rule["mean_gap"], "spearman": control_rule["spearman"],
                       "near_count": control_rule["near_count"], "rule": control_rule["sides"]},
                      combine_sides(control_rule["sides"]) == "fail")
    return {"rule": rule, "rule_r2": rule_r2, "rule_r3": rule_r3, "readings": readings, "converged": converged,
            "verdict": verdict, "reason": reason, "control_rule": control_rule, "control": control}


def _render(ctx: CheckContext, g: dict, d: dict) -> CheckOutcome:
    """The outcome of one seed: measured grids and rules, figures, tables, summary and assumptions."""
    runs, labels = g["runs"], g["labels"]
    figs = draw_figure(ctx, "fig5_grid.png",
                       lambda p: figures.generalization_grid({k: runs[k].metrics for k in labels}, p))
    if g["r2"]:
        figs += draw_figure(ctx, "fig5_grid_R2.png", lambda p: figures.generalization_grid(
            {k: g["r2"][k].metrics for k in labels}, p))
    first = g["first"]
    return CheckOutcome(
        verdict=d["verdict"], measured=_measured(g, d), threshold=_threshold(ctx, g, d), summary=_summary(g, d),
        tables=_tables(g), figures=figs, control=d["control"], reason=d["reason"], converged=d["converged"],
        assumptions=_assumptions(g, d),
        instance=None if d["verdict"] != "fail" else {
            "mean_parent_loss_gap": dict(zip(labels, d["rule"]["mean_gap"])), "kernel": first.kernel.tolist(),
            "reproduce": f"bma-verify train --preset fig5 --tier {ctx.tier} --seed {first.config.seed}"},
        tolerances=TOLERANCES)


def _rule_measured(rule: dict, labels: list, grid: dict, runs: dict) -> dict:
    """A reading's mean gaps, near-BMA counts, ρ and grid, keyed as the reference report keys them."""
    return {"mean_parent_loss_gap": dict(zip(labels, rule["mean_gap"])),
            "test_L_near_bma": {f"L{L}": n for L, n in rule["near_count"].items()},
            "spearman_train_L_vs_mean_gap": rule["spearman"]["rho"],
            "grid": {k: grid[runs[k].config.L] for k in labels}}


def _measured(g: dict, d: dict) -> dict:
    runs, labels = g["runs"], g["labels"]
    r2 = {} if not g["r2"] else {"R2_shared_budget": {
        **_rule_measured(d["rule_r2"], labels, g["grid_r2"], runs), "own_L_parent_loss_gap": g["own_gap_r2"],
        "rule": d["rule_r2"]["sides"]}}
    r1 = _rule_measured(d["rule"], labels, g["grid"], runs)
    return {"readings": d["readings"], **r2,
            "R3_selector_only": {**_rule_measured(d["rule_r3"], labels, g["grid_r3"], runs),
                                 "rule": d["rule_r3"]["sides"]},
            "mean_parent_loss_gap": r1["mean_parent_loss_gap"], "test_L_near_bma": r1["test_L_near_bma"],
            "spearman_train_L_vs_mean_gap": r1["spearman_train_L_vs_mean_gap"],
            "own_L_parent_loss_gap": g["own_gap"], "grid": r1["grid"], "L_test": g["L_test"]}


def _threshold(ctx: CheckContext, g: dict, d: dict) -> dict:
    return {"near_bma": f"L_pa^{{L'}} − BMA's < {NEAR_BMA} nats (band ±{GAP_BAND})",
            "many": f"at least {d['rule']['many']} of the {len(g['L_test'])} tested L' (half), for some training L",
            "smaller_L_generalizes_better": "Spearman ρ(training L, mean gap over L') > 0 at every shift of "
                                            f"the mean gaps by ±{MEAN_GAP_BAND} (the ideal "
                                            f"reader of min(L, L'): {d['control_rule']['spearman']['rho']:+.2f})",
            "decides": "the end-to-end readings R1 and R2 (R2 at the full tier); R3 is a diagnostic",
            "converged": PLATEAU_RULE}


def _reading_text(rule: dict, train_L: list) -> str:
    """'mean gap L = 1: 0.123, ..., Spearman ρ = +0.50, near BMA (clear of the band) at 3, 1 L'. '"""
    return ("mean gap " + ", ".join(f"L = {L}: {g:.3f}" for L, g in zip(train_L, rule["mean_gap"]))
            + f", Spearman ρ = {rule['spearman']['rho']:+.2f}, near BMA (clear of the band) at "
            + ", ".join(f"{n}" for n in rule["near_count"].values()) + " L'. ")


def _summary(g: dict, d: dict) -> str:
    readings, rule, train_L, L_test = d["readings"], d["rule"], g["train_L"], g["L_test"]
    sp = rule["spearman"]
    r2_text = (f"R2 (shared head budget, untrained offsets beyond L) {_reading_word(readings['R2'])}: "
               + _reading_text(d["rule_r2"], train_L)) if g["r2"] else ""
    return (f"Readings that decide: R1 (end to end, clipped offsets) {_reading_word(readings['R1'])}"
            + (f"; R2 (shared head budget) {_reading_word(readings['R2'])}" if g["r2"] else "")
            + f". Diagnostic, never decides: R3 (selector only: each trained W_tf on exact copies of the L' "
              f"examples) {_reading_word(readings['R3'])}. " + r2_text + "R3: " + _reading_text(d["rule_r3"], train_L)
            + f"R1 in detail: run under {FIG5_READING.split(':')[0]} (clipped offsets, K = 2L + 4 heads). Near BMA "
              f"(below {NEAR_BMA} nats by more than the noise band {GAP_BAND}) at "
            + ", ".join(f"{n} of {len(L_test)} L' for L = {L}" for L, n in rule["near_count"].items())
            + f" ('many' = {rule['many']}): {rule['sides']['near_bma_for_many_L']}. Mean gap over L' ∈ {{"
            + ", ".join(map(str, L_test)) + "}: "
            + ", ".join(f"L = {L}: {gap:.3f}" for L, gap in zip(train_L, rule["mean_gap"]))
            + f"; Spearman ρ(L, mean gap) = {sp['rho']:+.2f} (range {sp['low']:+.2f}..{sp['high']:+.2f} within "
              f"noise; the claim needs > 0): {rule['sides']['smaller_L_generalizes_better']}."
            + ("" if d["converged"]["plateaued"] else " Still improving (not converged): "
               + ", ".join(d["converged"]["not_plateaued"]) + ".")
            + f" Control: an ideal reader of min(L, L') examples (ρ = {d['control_rule']['spearman']['rho']:+.2f}) "
              f"is {'rejected' if d['control'].rejected else 'NOT rejected'}. Each copier head copies one example, "
              "so a model trained at L cannot use more than L examples at L' > L under R1, and its heads for "
              "offsets beyond L' read the wrong examples at L' < L.")


def _tables(g: dict) -> list[Table]:
    runs, labels = g["runs"], g["labels"]
    columns = ["train L"] + [f"L'={L}" for L in g["L_test"]]

    def rows(grid: dict) -> list:
        return [[k] + grid[runs[k].config.L] for k in labels]

    r2 = [Table("reading R2 (shared head budget, untrained offsets beyond L): L_pa^{L'} − BMA (nats)", columns,
                rows(g["grid_r2"]))] if g["r2"] else []
    return [Table("reading R1 (end to end): L_pa^{L'} − BMA (nats)", columns, rows(g["grid"])), *r2,
            Table("reading R3 (selector only, exact copies): L_pa^{L'} − BMA (nats)", columns, rows(g["grid_r3"])),
            Table("control: BMA reading min(L, L') of L' examples, L_pa − BMA", columns,
                  [[f"L{L}"] + g["control_grid"][L] for L in g["train_L"]])]


def _assumptions(g: dict, d: dict) -> list[str]:
    readings = d["readings"]
    return [f"{FIG5_READING}: {_reading_word(readings['R1'])}",
            *([f"{FIG5_READING_R2}: {_reading_word(readings['R2'])}"] if g["r2"] else []),
            f"{FIG5_READING_R3}, a diagnostic that never decides: {_reading_word(readings['R3'])}",
            f"'near BMA' = L_pa^{{L'}} within {NEAR_BMA} nats of BMA's; 'many' = at least half of the tested L', "
            "for at least one training L (the lenient reading)",
            "'smaller training L generalizes better' = the mean of L_pa^{L'} − BMA's over the tested L' rises with "
            "the training L (Spearman ρ > 0)"]


CLAIM = Claim(
    "exp-fig5-generalization",
    "Figure 5 (d=10, H=15): models trained at L ∈ {1..20} reach L_pa^{L'} near BMA for many test L'; "
    "smaller training L generalizes better.",
    "d=10, H=15, train L ∈ {1, 2, 5, 10, 20}: L_pa^{L'} near BMA for many L'; smaller training L "
    "generalizes better.",
    (Check("model", exp_fig5_generalization, "L_pa^{L'} grid under named readings",
           reading="reproduction"),),
)
