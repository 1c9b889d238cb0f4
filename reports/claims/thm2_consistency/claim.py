"""Claim thm2-consistency: the BMA posterior concentrates on the true parent as L → ∞.

The paper states the limit; the exponential (Hoeffding) rate is our reconstruction, so its checks read
"stronger". Checks: the argmax error falling towards 0 as L grows (Monte Carlo, as stated); the Hoeffding bound
from the Chernoff method (symbolic, stronger); empirical error rates against L beside the bound (Monte Carlo,
stronger, with the power of its rule against planted exponent factors); the trained fig2 model's parent accuracy
against L' beside BMA's (model, reproduction). Negative controls: a posterior that stops reading examples at a
quarter of the largest L (limit), the bound with its exponent ×4 (symbolic, Monte Carlo), BMA reading half the
examples (model).

Measured values behind the tolerances and close calls, per seed: docs/notes/thm2-consistency.md.
"""
import numpy as np
import sympy as sp

from bma_verify.model import analysis
from bma_verify.model.convergence import RULE as PLATEAU_RULE
from bma_verify.model.training import eval_batch
from bma_verify.numerics.consistency_rates import hoeffding_bound, thm2_error_rates, wilson_interval
from bma_verify.numerics.information import pairwise_joint
from bma_verify.numerics.task import random_kernel
from bma_verify.reports.checks.numeric_common import combine_verdicts, save_check_figure
from bma_verify.reports.checks.symbolic import SymbolicCheck, run_symbolic, symbolic_outcome
from bma_verify.reports.checks.trained import (NOISE_BAND, THRESHOLDS, combine_sides, confirm_misses, count_verdict,
                                               ideal_control, parent_gap_side, power_text, rule_text, run_assumptions,
                                               run_convergence, seed_keys, seeded_runs, seeds_record, seeds_text,
                                               threshold_side, training_seeds, why_unconfirmed)
from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.core import (CheckContext, CheckOutcome, Control, ControlMargin, PositiveControl, Table,
                                     jsonable, new_figure, verdict_from_interval)
from bma_verify.theory.consistency import (derive_thm2_consistency, exact_error_probability, exponent_times_four,
                                           perturb_thm2_consistency, verify_thm2_consistency)

SYMBOLIC = SymbolicCheck(
    claim="thm2-consistency",
    derive=derive_thm2_consistency, perturb=perturb_thm2_consistency, verify=verify_thm2_consistency,
    perturbation=exponent_times_four, control="the Hoeffding bound with its exponent x4",
    sizes={"quick": {"n_points": 12}, "full": {"n_points": 50}},
)


def protocol(tier: str) -> dict:
    """thm2's model check's part of the fig2 run set's protocol (it reads fig2's runs): the accuracy shortfall
    per test L' and the L_pa gap, with their bands."""
    t = THRESHOLDS[tier]
    return {"accuracy_shortfall": t["accuracy_shortfall"], "parent_loss_gap": t["parent_loss_gap"],
            "noise_band": {"accuracy": NOISE_BAND["accuracy"], "parent_loss_gap": NOISE_BAND["parent_loss_gap"]},
            "rule": "BMA's parent accuracy minus the model's at every test L' at most the shortfall"}

def symbolic_check(ctx: CheckContext) -> CheckOutcome:
    """exp(−L Δ² / (2 log²(1/ε))) from the Chernoff method with Hoeffding's lemma."""
    run = run_symbolic(ctx, SYMBOLIC, [()])
    derivation = run.derivations[0]
    return symbolic_outcome(ctx, SYMBOLIC, run,
                            "Minimising the Chernoff–Hoeffding exponent over s gives exp(−LΔ²/(2 log²(1/ε))) "
                            "exactly; compared with numerics.claims.hoeffding_bound, a numeric minimisation of the "
                            "exponent, and the exact P(S_L ≤ 0) on small instances (bound ≥ exact).",
                            {"bound": sp.sstr(derivation.results["bound"]),
                             "sufficient_L": sp.sstr(derivation.results["sufficient_L"])})



#: Contexts of the Monte Carlo check: blocks of 500 per L, per tier.
THM2_BLOCKS = {"quick": 6, "full": 40}
#: Theorem 2's instances: a random d = 3 kernel (Hoeffding is loose there) and the flip kernel ε = 0.1 (increments
#: ±log 9 or 0, nearly two-point), where the true error rate lies within a factor 4 of Hoeffding's exponent, so
#: that the bound with its exponent ×4 (the negative control) is violated, by 7 standard errors at L = 4 with
#: 3000 contexts (exact rate 0.052 against 0.023), while the real bound clears every judged interval (per seed:
#: docs/notes/thm2-consistency.md). The flip kernel's L stop at 24: beyond, its bound (5e-4 at L = 32) is below
#: what 3000 contexts resolve (no error seen gives an upper end of 1.3e-3); such cells are not judged
#: (``_decide_bound``).
THM2_INSTANCES = {"random": {"parents": [-1, 0, 1, 1, 2, 0], "L": [1, 2, 4, 8, 16, 32, 64]},
                  "flip": {"kernel": [[0.1, 0.9], [0.9, 0.1]], "parents": [-1, 0, 1, 1, 2],
                           "L": [1, 2, 3, 4, 6, 8, 12, 16, 24]}}
#: Planted exponent factors of the power curve: the bound exp(−f·LΔ²/(2 log²(1/ε))) judged by the same rule.
POWER_FACTORS = (1.5, 2.0, 2.5, 3.0, 4.0)
#: Regression tolerance of the trained model's accuracy per L' (fig2's run). It moves with the CPU path: by up to
#: 0.0059 over OMP 1|2 x ATEN default|avx2|avx512 (first training seed; docs/notes/trained-checks.md).
ACCURACY_BY_L_TOL = {"abs": 0.015}


def _decide_bound(low, high, bound, contexts: int) -> tuple[str, np.ndarray]:
    """Theorem 2's rule: each (L, pair) Wilson interval against its bound, the cells' verdicts combined. A cell whose
    bound lies below the upper end of the interval for zero errors in ``contexts`` cannot be decided at this sample
    size whatever the truth (``"unresolved"``) and does not enter the verdict."""
    floor = float(wilson_interval(0, contexts)[1])
    cells = np.array([verdict_from_interval(lo, hi, b) if b > floor else "unresolved" for lo, hi, b in
                      zip(np.ravel(low), np.ravel(high), np.ravel(bound))]).reshape(np.shape(bound))
    return combine_verdicts(cells[cells != "unresolved"]), cells


def _violated_cells(out: dict, cells: np.ndarray, planted: np.ndarray, L_values) -> dict:
    """The control's violated cells: how many, and the one whose interval lies furthest above the ×4 bound."""
    violated = np.argwhere(cells == "fail")
    if not violated.size:
        return {"cells_violated": 0}
    i, p = violated[np.argmax((out["pair_low"] - planted)[tuple(violated.T)])]
    return {"cells_violated": int(violated.shape[0]), "L": L_values[i], "pair": list(out["pairs"][p]),
            "rate": float(out["pair_rate"][i, p]), "low": float(out["pair_low"][i, p]),
            "bound_x4": float(planted[i, p])}


def _furthest_cell_margin(control_cells: dict) -> ControlMargin | None:
    """The bound check's control margin: the Wilson lower end of the violated cell furthest above the ×4 bound (a
    cell fails when its whole interval lies above the bound); None when no cell is violated."""
    violated = [(cells["low"] - cells["bound_x4"], name) for name, cells in control_cells.items()
                if cells["cells_violated"]]
    if not violated:
        return None
    name = max(violated)[1]
    return ControlMargin(f"{name}.low", control_cells[name]["low"], control_cells[name]["bound_x4"],
                         units="error rate")


def _error_rates(ctx: CheckContext) -> dict:
    """Each instance's (kernel, parents, L grid, error rates), sampled once per report (``ctx.cache``): the limit
    check and the bound check read the same contexts."""
    key = ("thm2-consistency", "error_rates", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        rng = ctx.rng("thm2-consistency/numeric")
        instances = {name: (np.array(spec["kernel"]) if "kernel" in spec else
                            random_kernel(3, alpha=0.5, eps=0.05, rng=rng), np.array(spec["parents"]), spec["L"])
                     for name, spec in THM2_INSTANCES.items()}
        ctx.cache[key] = {name: (kernel, parents, L_values,
                                 thm2_error_rates(ctx.seed_for(f"thm2-consistency/{name}"), kernel, parents, L_values,
                                                  THM2_BLOCKS[ctx.tier]))
                          for name, (kernel, parents, L_values) in instances.items()}
    return ctx.cache[key]


def _power(out: dict, L_values) -> dict:
    """The rule's outcome on the bound with its exponent ×f, for each planted factor f (the rule's power curve)."""
    return {f"x{f:g}": _decide_bound(out["pair_low"], out["pair_high"],
                                     hoeffding_bound(np.asarray(L_values)[:, None], out["gap"][None, :], out["eps"],
                                                     exponent_factor=f), out["contexts"])[0]
            for f in POWER_FACTORS}


def exact_rates(kernel, parents, L_values, out: dict) -> np.ndarray:
    """(L, pair) exact P(S_L ≤ 0), each pair's score difference convolved L times (cheap for d = 2 only)."""
    return np.array([[exact_error_probability(kernel, pairwise_joint(kernel, parents, hp, int(parents[h])), L)
                      for h, hp in out["pairs"]] for L in L_values])


def exact_rate_control(kernel, parents, L_values, out: dict) -> PositiveControl:
    """The bound rule on its ideal input, on the flip instance: rates equal to the exact P(S_L ≤ 0), each with its
    Wilson interval moved to centre on it (same shape: the same sample size)."""
    exact = exact_rates(kernel, parents, L_values, out)
    shift = exact - out["pair_rate"]
    verdict, cells = _decide_bound(out["pair_low"] + shift, out["pair_high"] + shift, out["bound"], out["contexts"])
    return PositiveControl("on the flip instance (d = 2, exact by convolution), error rates equal to the exact "
                           "P(S_L ≤ 0) with their own interval shapes, judged by the same interval rule against the "
                           "bound", {"verdict": verdict, "cells_judged": int((cells != "unresolved").sum()),
                                     "cells_failed": int((cells == "fail").sum())}, verdict == "pass")


def smallest_false_factor(kernel, parents, L_values, out: dict) -> dict:
    """The smallest exponent factor f whose bound exp(−f·LΔ²/(2 log²(1/ε))) the exact P(S_L ≤ 0) exceeds somewhere
    on the L grid, −log P / (LΔ²/(2 log²(1/ε))) minimised over (L, pair): a planted factor below it is a true bound
    on this instance, which no sample size can reject. Exact laws by convolution (d = 2: a lattice, cheap)."""
    exponent = -np.log(hoeffding_bound(np.asarray(L_values)[:, None], out["gap"][None, :], out["eps"]))
    exact = exact_rates(kernel, parents, L_values, out)
    factors = -np.log(exact) / exponent
    i, p = np.unravel_index(np.argmin(factors), factors.shape)
    return {"factor": float(factors[i, p]), "L": L_values[i], "pair": list(out["pairs"][p]),
            "exact_rate": float(exact[i, p])}


def _thm2_instance(name: str, kernel, parents, L_values, out: dict) -> dict:
    """The rule on the real bound, on the bound with exponent ×4 (the control) and on the planted factors."""
    planted = hoeffding_bound(np.asarray(L_values)[:, None], out["gap"][None, :], out["eps"], exponent_factor=4.0)
    verdict, real_cells = _decide_bound(out["pair_low"], out["pair_high"], out["bound"], out["contexts"])
    control_verdict, cells = _decide_bound(out["pair_low"], out["pair_high"], planted, out["contexts"])
    worst_argmax = out["argmax_rate"].max(axis=1)
    # the closest the real bound comes: its slack above the intervals' upper ends, in interval half-widths
    half = np.maximum((out["pair_high"] - out["pair_low"]) / 2, 1e-12)
    judged = real_cells != "unresolved"
    measured = {"L": L_values, "contexts_per_L": out["contexts"], "argmax_error": worst_argmax.tolist(),
                "max_pair_error": out["pair_rate"].max(axis=1).tolist(),
                "min_bound": out["bound"].min(axis=1).tolist(), "min_gap": float(out["gap"].min()),
                "min_slack_in_half_widths": float(((out["bound"] - out["pair_high"]) / half)[judged].min()),
                "cells_judged": int(judged.sum()), "cells_unresolved": int((~judged).sum()),
                "eps": out["eps"], "kernel": kernel.tolist(), "parents": parents.tolist(),
                "verdict": verdict, "control_verdict": control_verdict}
    rows = [[name, L, round(float(worst_argmax[i]), 4), round(float(out["pair_rate"][i].max()), 4),
             round(float(out["bound"][i].min()), 4), int((cells[i] == "fail").sum())]
            for i, L in enumerate(L_values)]
    control_cells = _violated_cells(out, cells, planted, L_values) | {"power": _power(out, L_values)}
    if kernel.shape[0] == 2:
        control_cells["smallest_false_factor_exact"] = smallest_false_factor(kernel, parents, L_values, out)
    return {"out": out, "planted": planted, "measured": measured, "rows": rows, "worst_argmax": worst_argmax,
            "control_cells": control_cells}


def _draw_instance(ax, name: str, kernel, parents, L_values, done: dict) -> None:
    """Worst argmax error, the smallest-gap pair's rate with its interval, the bound and the ×4 bound, against L."""
    out, planted = done["out"], done["planted"]
    p = int(np.argmin(out["gap"]))
    ax.plot(L_values, done["worst_argmax"], "o-", label="argmax ≠ pa (worst h)")
    ax.errorbar(L_values, out["pair_rate"][:, p], yerr=[out["pair_rate"][:, p] - out["pair_low"][:, p],
                                                     out["pair_high"][:, p] - out["pair_rate"][:, p]],
                fmt="s", ms=3, label=f"pair {out['pairs'][p]} (smallest Δ), 95% interval")
    ax.plot(L_values, out["bound"][:, p], "k--", label="Hoeffding bound")
    ax.plot(L_values, planted[:, p], "k:", label="exponent ×4 (control)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylim(1e-4, 1.5)
    ax.set_xlabel("context examples L")
    ax.set_ylabel("error probability (argmax ≠ pa; score(pa) ≤ score(h'))")
    ax.set_title(f"{name} (d={kernel.shape[0]}, H={parents.size})", fontsize=9)
    ax.legend(fontsize=6)


def _power_curve(control_cells: dict) -> dict:
    """Per planted factor, the rule's outcome over both instances, and the smallest factor it shows false."""
    outcomes = {key: combine_verdicts(c["power"][key] for c in control_cells.values())
                for key in next(iter(control_cells.values()))["power"]}
    failed = [f for f in POWER_FACTORS if outcomes[f"x{f:g}"] == "fail"]
    return {"outcomes": outcomes, "smallest_factor_rejected": min(failed) if failed else None,
            "factor_2": "inconclusive" if outcomes["x2"] != "fail" else "rejected"}


def _thm2_summary(measured: dict, control_cells: dict, blocks: int, verdict: str, control_verdict: str) -> str:
    flip = measured["flip"]
    power = _power_curve(control_cells)
    floor = control_cells["flip"]["smallest_false_factor_exact"]
    return (f"Random d=3 kernel (H=6) and flip kernel ε=0.1 (H=5), {blocks * 500} contexts per L: the worst argmax "
            f"error falls to {measured['random']['argmax_error'][-1]:.4f} (L=64) and "
            f"{flip['argmax_error'][-1]:.4f} (L=24); every pair's rate is below its Hoeffding bound ({verdict} on "
            f"{sum(m['cells_judged'] for m in measured.values())} (L, pair) cells; "
            f"{sum(m['cells_unresolved'] for m in measured.values())} cells whose bound is below what "
            f"{blocks * 500} contexts resolve are not judged; closest slack "
            f"{min(m['min_slack_in_half_widths'] for m in measured.values()):.1f} interval half-widths); the "
            f"bound with exponent ×4 is violated in {sum(c['cells_violated'] for c in control_cells.values())} "
            f"(L, pair) cells (control, {control_verdict}). Power: planted exponent factors "
            f"{', '.join(f'{k[1:]}→{v}' for k, v in power['outcomes'].items())}; the smallest rejected is "
            f"×{power['smallest_factor_rejected']}. This check cannot reject a ×2 exponent (a missing 2 in "
            f"Hoeffding's exponent): on the flip instance the ×{floor['factor']:.2f} bound is the first that the exact "
            f"P(S_L ≤ 0) exceeds on its L grid (L = {floor['L']}, exact rate {floor['exact_rate']:.1e}), so ×2 is "
            f"a true bound at every L of that grid, which no sample size rejects.")


def monte_carlo_check(ctx: CheckContext) -> CheckOutcome:
    """Empirical P(score(pa) ≤ score(h')) and argmax error against L, against the Hoeffding bound, on a random
    d = 3 kernel and on the flip kernel ε = 0.1 (where Hoeffding is within a factor 4 of the truth in exponent).

    Control: the bound with its exponent ×4, exp(−4LΔ²/(2 log²(1/ε))), judged by the same interval rule; beside
    it the rule's power curve over planted factors (POWER_FACTORS) and, on the flip instance, the smallest factor
    whose bound is false at all on the L grid (exact).
    """
    blocks = THM2_BLOCKS[ctx.tier]
    fig, axes = new_figure(1, 2, figsize=(9, 3.5), sharey=True)
    done = {}
    for ax, (name, (kernel, parents, L_values, out)) in zip(axes, _error_rates(ctx).items()):
        done[name] = _thm2_instance(name, kernel, parents, L_values, out)
        _draw_instance(ax, name, kernel, parents, L_values, done[name])
    fig.tight_layout()
    figure = save_check_figure(fig, ctx, "thm2_error_vs_L.png")
    measured = {name: d["measured"] for name, d in done.items()}
    control_cells = {name: d["control_cells"] for name, d in done.items()}
    verdict = combine_verdicts(m["verdict"] for m in measured.values())
    control_verdict = combine_verdicts(m["control_verdict"] for m in measured.values())
    control = Control("the Hoeffding bound with its exponent ×4, judged by the same interval rule (power: the "
                      "rule's outcome for planted exponent factors, and the smallest it rejects)",
                      control_cells | {"power": _power_curve(control_cells)}, rejected=control_verdict != "pass",
                      margin=_furthest_cell_margin(control_cells))
    # no listed tolerances (bit-reproducible: a rerun moves the rates by 0); per seed: docs/notes/thm2-consistency.md
    return CheckOutcome(
        verdict=verdict, measured=jsonable(measured),
        threshold="Wilson 95% interval of each pair's error rate below exp(−LΔ²/(2 log²(1/ε)))",
        summary=_thm2_summary(measured, control_cells, blocks, verdict, control_verdict),
        figures=[figure], control=control,
        positive_control=exact_rate_control(*_error_rates(ctx)["flip"]),
        tables=[Table("error vs L", ["instance", "L", "argmax error", "max pair error", "min bound",
                                     "cells violating ×4"], [row for d in done.values() for row in d["rows"]])])


def _worst_argmax_interval(out: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The worst position's argmax error against L, with its Wilson 95% interval."""
    worst = out["argmax_rate"].max(axis=1)
    low, high = wilson_interval(np.rint(worst * out["contexts"]), out["contexts"])
    return worst, low, high


def decide_limit(L_values, low, high) -> str:
    """Theorem 2's limit on a finite grid: pass when the error's interval at the largest L lies wholly below its
    interval at a quarter of that L (still falling at the top of the grid, not settled at a floor), fail when
    wholly above (it rose), else inconclusive."""
    q = L_values.index(L_values[-1] // 4)
    return "pass" if high[-1] < low[q] else ("fail" if low[-1] > high[q] else "inconclusive")


def capped_error(values: np.ndarray, L_values) -> np.ndarray:
    """A posterior that stops reading at a quarter of the largest L: its error at L ≥ that is the error there."""
    q = L_values.index(L_values[-1] // 4)
    return np.concatenate([values[:q], np.full(len(values) - q, values[q])])


def exact_limit_control(kernel, parents, L_values, out: dict) -> PositiveControl:
    """The limit rule on its ideal input, on the flip instance: the worst pair's exact P(S_L ≤ 0) (a closest
    competitor's error, which Theorem 2's argument sends to 0) in place of the sampled argmax error, with the Wilson
    interval of the same number of contexts. It fails if that exact error is not resolvably lower at the largest L
    than at a quarter of it (a grid too short, or too few contexts)."""
    exact = exact_rates(kernel, parents, L_values, out).max(axis=1)
    low, high = wilson_interval(np.rint(exact * out["contexts"]), out["contexts"])
    verdict = decide_limit(L_values, low, high)
    return PositiveControl("on the flip instance (d = 2, exact by convolution), the worst pair's exact P(S_L ≤ 0) "
                           "as the error curve, with the Wilson interval of the same number of contexts, judged by "
                           "the same rule", {"L": L_values, "exact_error": exact.tolist(), "verdict": verdict},
                           verdict == "pass")


def limit_check(ctx: CheckContext) -> CheckOutcome:
    """The posterior's argmax error against L falls towards 0 (Theorem 2 as stated: A^(2) → e_pa as L → ∞), on the
    samples of the bound check.

    Control: a posterior that stops reading examples at a quarter of the largest L (error frozen there), judged
    by the same rule: an error settled at a floor must not read as vanishing. Positive control:
    :func:`exact_limit_control`.
    """
    measured, control_measured, rows = {}, {}, []
    for name, (_, _, L_values, out) in _error_rates(ctx).items():
        worst, low, high = _worst_argmax_interval(out)
        verdict = decide_limit(L_values, low, high)
        capped = decide_limit(L_values, capped_error(low, L_values), capped_error(high, L_values))
        measured[name] = {"L": L_values, "argmax_error": worst.tolist(), "low": low.tolist(), "high": high.tolist(),
                          "verdict": verdict}
        control_measured[name] = {"reads_up_to_L": L_values[-1] // 4, "verdict": capped}
        rows += [[name, L, round(float(w), 4), round(float(lo), 4), round(float(hi), 4)]
                 for L, w, lo, hi in zip(L_values, worst, low, high)]
    verdict = combine_verdicts(m["verdict"] for m in measured.values())
    control = Control("a posterior that stops reading examples at a quarter of the largest L, judged by the same rule",
                      control_measured, rejected=all(c["verdict"] != "pass" for c in control_measured.values()))
    summary = "; ".join(f"{name}: the worst argmax error falls {m['argmax_error'][0]:.3f} → {m['argmax_error'][-1]:.4f} "
                        f"as L goes {m['L'][0]} → {m['L'][-1]} ({m['verdict']})" for name, m in measured.items())
    return CheckOutcome(
        verdict=verdict, measured=jsonable(measured),
        threshold="Wilson 95% interval of the worst argmax error at the largest L wholly below the one at a quarter "
                  "of it",
        summary=f"{summary}. Control: a posterior that stops reading at a quarter of the largest L is "
                f"{'rejected' if control.rejected else 'NOT rejected'}.",
        tables=[Table("argmax error vs L", ["instance", "L", "worst argmax error", "low", "high"], rows)],
        control=control, positive_control=exact_limit_control(*_error_rates(ctx)["flip"]))


def _thm2_rule(ctx: CheckContext, Ls: list, acc: list, bma: list, se: float) -> dict:
    """Accuracy near BMA's at every L' (shortfall within the threshold, with its band), rising with L' (within
    2 SE per step) and by more than 4 SE from the smallest L' to the largest."""
    t = THRESHOLDS[ctx.tier]
    sides = {f"accuracy_shortfall_L{L}": threshold_side(b - a, t["accuracy_shortfall"], NOISE_BAND["accuracy"])
             for L, a, b in zip(Ls, acc, bma)}
    sides["increasing"] = "pass" if analysis.is_monotone(acc, increasing=True, slack=2 * se) else "fail"
    sides["rise"] = "pass" if acc[-1] > acc[0] + 4 * se else "fail"
    return sides


def accuracy_rule(ctx: CheckContext, run) -> tuple[dict, dict]:
    """(values, sides) of one run: its parent accuracy against L' (up to the training L) beside BMA's, thm2's rule
    on it, and L_pa's gap to BMA's at the run's own L (a plateaued run that cannot represent BMA fails on it)."""
    by_L = run.metrics["by_test_L"]
    Ls = sorted(int(k) for k in by_L if int(k) <= run.config.L)
    acc = [by_L[str(L)]["parent_accuracy"] for L in Ls]
    bma = [by_L[str(L)]["bma_parent_accuracy"] for L in Ls]
    se = float(np.sqrt(0.25 / (run.config.eval_contexts * (run.config.H - 1))))  # largest binomial SE of an accuracy
    sides = _thm2_rule(ctx, Ls, acc, bma, se) | {"parent_loss_gap": parent_gap_side(ctx, run.metrics)}
    return {"L_test": Ls, "acc": acc, "bma": bma, "se": se}, sides


def ignoring_control(ctx: CheckContext, run, values: dict) -> Control:
    """BMA ignoring the k earliest examples at every L' (reading max(L' − k, 1)), judged by thm2's rule with L_pa at
    the run's own L: the power curve over k = L − 1 … 0, and the near-miss k = 1 it must reject."""
    Ls, L = values["L_test"], run.config.L
    batches = {n: eval_batch(run.config, run.kernel, n) for n in sorted(set(Ls) | {L})}
    power = []
    for k in range(L - 1, -1, -1):
        truncated = {n: analysis.truncated_bma_metrics(run.kernel, batches[n], max(n - k, 1)) for n in batches}
        acc = [truncated[n]["parent_accuracy"] for n in Ls]
        rule = (_thm2_rule(ctx, Ls, acc, values["bma"], values["se"])
                | {"parent_loss_gap": parent_gap_side(ctx, truncated[L])})
        power.append({"x": L - k, "label": f"BMA ignoring the {k} earliest examples", "rule": rule,
                      "value": truncated[L]["parent_loss_gap"], "accuracy": acc,
                      "rejected": combine_sides(rule) == "fail"})
    near = power[-2]
    return Control(f"BMA ignoring the earliest example at every L' (reading L' − 1 of L'; {L - 1} of {L} at the "
                   "run's own L)", {"L_test": Ls, "parent_accuracy": near["accuracy"],
                                    "parent_loss_gap": near["value"], "rule": near["rule"]},
                   near["rejected"], power=[{k: v for k, v in p.items() if k != "accuracy"} for p in power],
                   # L_pa's side fails beyond its threshold plus its noise band (trained.threshold_side)
                   margin=ControlMargin("parent_loss_gap", near["value"], THRESHOLDS[ctx.tier]["parent_loss_gap"]
                                        + NOISE_BAND["parent_loss_gap"], units="nats"))


def judge(ctx: CheckContext):
    """thm2's model rule as a continuation judge (``reports.checks.trained.confirm_misses``): a run's status and its
    scalar values with their thresholds (upper bounds): the largest accuracy shortfall over L' and L_pa's gap; the
    rise and monotone sides are judged by the status alone."""
    t = THRESHOLDS[ctx.tier]

    def on(run) -> tuple[str, dict]:
        v, sides = accuracy_rule(ctx, run)
        return combine_sides(sides), {
            "largest_shortfall": (max(b - a for a, b in zip(v["acc"], v["bma"])), t["accuracy_shortfall"], True),
            "parent_loss_gap": (run.metrics["parent_loss_gap"], t["parent_loss_gap"], True)}
    return on


def model_check(ctx: CheckContext) -> CheckOutcome:
    """Trained model's parent accuracy against L' (up to the training L) beside BMA's, on every training seed of
    fig2's run, decided by the count rule; near-miss control BMA ignoring the earliest example."""
    all_runs = [runs["fig2"] for runs in seeded_runs(ctx, "fig2")]
    per_seed = [accuracy_rule(ctx, run) for run in all_runs]
    statuses = [combine_sides(sides) for _, sides in per_seed]
    tests = [run_convergence(run.metrics) for run in all_runs]
    more = confirm_misses(ctx, "fig2", all_runs, statuses, tests, judge(ctx), seed_keys(ctx, "fig2", "fig2"))
    verdict, reason, converged = count_verdict(statuses, tests, more, why_unconfirmed=why_unconfirmed(ctx, "fig2"))
    seeds = seeds_record(training_seeds(ctx, "fig2"), statuses, tests,
                         [{"largest_shortfall": max(b - a for a, b in zip(v["acc"], v["bma"])),
                           "accuracy_at_L": v["acc"][-1], "parent_loss_gap": run.metrics["parent_loss_gap"]}
                          for run, (v, _) in zip(all_runs, per_seed)], more)
    run, (v, sides) = all_runs[0], per_seed[0]
    control = ignoring_control(ctx, run, v)
    t = THRESHOLDS[ctx.tier]
    near_acc = control.measured["parent_accuracy"]
    return CheckOutcome(
        verdict=verdict, seeds=seeds,
        measured={"L_test": v["L_test"], "parent_accuracy": v["acc"], "bma_parent_accuracy": v["bma"],
                  "accuracy_stderr_bound": v["se"]},
        threshold={"accuracy_shortfall_every_L": f"≤ {t['accuracy_shortfall']} ± {NOISE_BAND['accuracy']}",
                   "monotone_slack": 2 * v["se"], "min_rise": 4 * v["se"],
                   "parent_loss_gap": f"≤ {t['parent_loss_gap']} ± {NOISE_BAND['parent_loss_gap']} (BMA ignoring "
                                      f"one example: {control.measured['parent_loss_gap']:+.3f})",
                   "converged": PLATEAU_RULE, "count_rule": seeds["count_rule"]},
        summary=f"{seeds_text(seeds)}; largest accuracy shortfall median "
                f"{seeds['metrics']['largest_shortfall']['median']:.3f} (range "
                f"{seeds['metrics']['largest_shortfall']['min']:.3f}–{seeds['metrics']['largest_shortfall']['max']:.3f}"
                f", threshold {t['accuracy_shortfall']}). First seed: parent accuracy rises {v['acc'][0]:.3f} → "
                f"{v['acc'][-1]:.3f} as L' goes {v['L_test'][0]} → {v['L_test'][-1]} (BMA {v['bma'][0]:.3f} → "
                f"{v['bma'][-1]:.3f}); {rule_text(sides)}. Control: {control.description} is "
                f"{'rejected' if control.rejected else 'NOT rejected'}; {power_text(control.power)}.",
        tables=[Table("parent accuracy against L', first seed", ["L'", "model", "BMA", "BMA reading L' − 1"],
                      [[L, a, b, h] for L, a, b, h in zip(v["L_test"], v["acc"], v["bma"], near_acc)])],
        control=control, reason=reason, converged=converged, assumptions=run_assumptions(ctx, run),
        positive_control=ideal_control(control, "BMA itself (ignoring no example) on the same contexts"),
        tolerances={"parent_accuracy": ACCURACY_BY_L_TOL})


CLAIM = Claim(
    "thm2-consistency",
    "Theorem 2: the BMA posterior concentrates on the true parent as L → ∞.",
    "As stated: A^(2)_{h→·} → e_pa(h) as L → ∞ (the posterior's argmax error → 0). Stronger (ours, the rate): "
    "P(score(pa) ≤ score(h')) ≤ exp(−L Δ² / (2 log²(1/ε))) (Hoeffding; Δ = the Lemma 4 gap).",
    (
        Check("monte-carlo", limit_check, "the posterior's argmax error against L falls towards 0"),
        Check("symbolic", symbolic_check, "the Hoeffding bound as an expression in L, Δ, ε (our rate)",
              reading="stronger"),
        Check("monte-carlo", monte_carlo_check,
              "empirical error rate against L beside the bound (our rate), with the rule's power", reading="stronger"),
        Check("model", model_check, "trained model's parent accuracy against L'",
              reading="reproduction", shares="fig2-run"),
    ),
)
