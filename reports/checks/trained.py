"""What every trained check shares: the trained runs of a report, how a trained value is judged against its
threshold with its noise band, and fig2's rule (exp-fig2-attention; exp-robustness applies it to other models).

Trained runs are shared through ``ctx.cache``: fig2's run serves exp-fig2-attention, exp-fig3-parameters and
thm2-consistency; fig6's serves exp-fig6-column-alignment, which prop1-invariance cites. A value within its noise
band (``NOISE_BAND``, measured) of its threshold reads "within run-to-run noise of the threshold". A run is
converged when its own held-out curve has plateaued (``bma_verify.model.convergence``), never judged by the target:
a converged run that misses the rule fails the claim, a run still improving reads inconclusive (not converged).
How the thresholds and bands were measured: docs/notes/trained-checks.md.
"""
from __future__ import annotations

import math

import numpy as np

from bma_verify import numerics
from bma_verify.model import analysis
from bma_verify.model.convergence import RULE as PLATEAU_RULE
from bma_verify.model.convergence import run_plateau
from bma_verify.model.presets import train_preset_runs
from bma_verify.model.training import eval_batch
from bma_verify.reports.core import CheckContext

#: Thresholds shared by the trained checks, per tier; each separates a control (quick tier, fig2's contexts).
THRESHOLDS = {
    "quick": {
        # L_pa − BMA's L_pa (nats) at the run's own L: BMA reading 5 of 10 examples reads +0.331, 9 of 10 +0.049
        "parent_loss_gap": 0.05,
        # query-loss gap to BMA (nats/token): BMA reading 7 of 10 examples reads +0.018, converged runs ≤ 0.005
        "gap": 0.015,
        # BMA's parent accuracy minus the run's: BMA reading 5 of 10 falls short by 0.133, converged runs ≤ 0.016
        "accuracy_shortfall": 0.05,
    },
    # the paper's sizes: tighter where a converged run has room below the threshold plus its band
    "full": {"parent_loss_gap": 0.05, "gap": 0.008, "accuracy_shortfall": 0.02},
}
#: Run-to-run noise of a decided value: its range over CPU kernels (ATEN_CPU_CAPABILITY) for a converged run,
#: rounded up. A value within this of its threshold is undecided.
NOISE_BAND = {
    "gap_to_bma": 0.003,  # converged runs: ≤ 0.0013
    "accuracy": 0.01,  # parent accuracy, also per L' (thm2): converged runs ≤ 0.0055
    "parent_loss_gap": 0.003,  # L_pa and its gap: range 0.0007 (TRAINED_TOL), rounded up as gap_to_bma's
}
#: Regression tolerances of fig2's run (quick tier, seed 0): about three times its range over CPU settings.
TRAINED_TOL = {
    "gap_to_bma": {"abs": 0.003},  # query loss and its gap: range 0.00076
    "parent_loss_gap": {"abs": 0.01},  # L_pa and its gap: range 0.0007
    "parent_accuracy": {"abs": 0.01},  # range 0.0023
}
#: The columns of ``loss_split_rows``.
LOSS_COLUMNS = ["run", "query loss", "BMA loss", "gap", "L_pa", "BMA L_pa", "logit-rule floor",
                "floor − BMA (output-rule part)", "parent acc.", "BMA acc.", "oracle loss"]


# ---------------------------------------------------------------------------------------------------------------
# Runs, kernels, figures.

def trained_runs(ctx: CheckContext, name: str, output: str = "mixture", replicate: int = 0) -> dict:
    """The preset's trained runs {label: TrainRun} for this report, trained once on ``ctx.device`` and then taken
    from ``ctx.cache``; ``replicate`` r > 0 trains the same runs on a further seed derived from the report seed."""
    name = "fig2" if name == "fig3" else name  # fig3 reads the parameters of fig2's run
    key = (f"model.presets:{name}:{output}:{ctx.tier}:{ctx.seed}:{ctx.device}"
           + (f":replicate{replicate}" if replicate else ""))
    if key not in ctx.cache:
        seed = ctx.seed_for(f"model:{name}" + (f":replicate{replicate}" if replicate else ""))
        ctx.cache[key] = train_preset_runs(name, tier=ctx.tier, seed=seed, device=ctx.device, quiet=ctx.quiet,
                                           output=output)
    return ctx.cache[key]


def draw_figure(ctx: CheckContext, filename: str, draw) -> list[str]:
    """``[filename]`` after ``draw(path)`` wrote it under ``ctx.figures_dir``; ``[]`` when the report has none."""
    if ctx.figures_dir is None:
        return []
    draw(ctx.figure_path(filename))
    return [filename]


def seeded_kernel(ctx: CheckContext, name: str, d: int) -> np.ndarray:
    """A random d×d kernel π (Dirichlet(1) rows, entries ≥ 0.01) from the report's generator ``name``."""
    return numerics.random_kernel(d, alpha=1.0, eps=0.01, rng=ctx.rng(name))


def half_examples(L: int) -> int:
    """ceil(L/2): how many of the last examples the half-BMA controls read."""
    return math.ceil(L / 2)


def run_assumptions(ctx: CheckContext, run) -> list[str]:
    """The choices of a structured run that the paper leaves open (a reproduction names them)."""
    c = run.config
    return [f"structured transformer (RPE copier, bilinear selector) with K = {c.K} copier heads for L = {c.L} "
            f"examples and the {c.model.output} output rule",
            f"{c.steps} steps at batch {c.batch_size}, π with Dirichlet({c.alpha:g}) rows ({ctx.tier} tier; "
            "thresholds and noise bands stated for this size)",
            f"converged = {PLATEAU_RULE}, or at most {NOISE_BAND['gap_to_bma']} nats (the query loss's "
            "run-to-run noise)"]


# ---------------------------------------------------------------------------------------------------------------
# How a trained value is judged: against its threshold, with its noise band.

def threshold_side(value: float, threshold: float, band: float, *, upper: bool = True) -> str:
    """'pass' when ``value`` is on the claimed side of ``threshold`` (below it when ``upper``) by more than
    ``band``, 'fail' when on the other side by more than ``band``, 'noise' in between. NaN (nothing to measure)
    fails."""
    if value is None or not math.isfinite(value):
        return "fail"
    margin = (threshold - value) if upper else (value - threshold)
    return "pass" if margin > band else ("fail" if margin < -band else "noise")


def combine_sides(sides: dict) -> str:
    """One 'fail' fails the rule, else one 'noise' leaves it undecided, else it passes."""
    values = list(sides.values())
    return "fail" if "fail" in values else ("noise" if "noise" in values else "pass")


def rule_text(sides: dict) -> str:
    """'rule: gap_to_bma pass, accuracy_shortfall fail' (what each decided quantity read)."""
    return "rule: " + ", ".join(f"{k} {v}" for k, v in sides.items())


def noise_reason(sides: dict) -> str:
    """The reason of an undecided rule: the quantities that read within their noise band."""
    return "within run-to-run noise of the threshold: " + ", ".join(k for k, v in sides.items() if v == "noise")


def run_convergence(metrics: dict) -> dict:
    """A run's plateau test on its held-out query loss (what ``CheckOutcome.converged`` records). A drop within
    the query loss's run-to-run noise (``NOISE_BAND["gap_to_bma"]``) counts as flat: the weight-averaged curves are
    so smooth that 3 SE of their own jitter is 0.0007 nats, and a drop the CPU kernels alone move could not change a
    decided value."""
    return run_plateau(metrics, min_drop=NOISE_BAND["gap_to_bma"])


def not_converged_reason(converged: dict) -> str:
    """The reason of a run (or runs) still improving: the drop its held-out curve made over the window."""
    if "runs" in converged:
        return "not converged: held-out loss still improving in " + ", ".join(converged["not_plateaued"])
    if converged["improvement"] is None:
        return f"not converged: {converged['rule'].rsplit('; ', 1)[-1]}"
    w = converged["window"]
    return (f"not converged: held-out loss still falling, {converged['improvement']:.4f} nats over steps "
            f"{w['from_step']}–{w['to_step']} (plateau ≤ 3 × {converged['noise_se']:.4f})")


def trained_verdict(status: str, converged: dict, sides: dict) -> tuple[str, str]:
    """(verdict, reason) of a trained check from its rule's status: a rule that fails on a converged run fails
    the claim; on a run still improving it is inconclusive (an optimisation shortfall of ours is not evidence
    against the paper), and so is a pass (settle withholds it)."""
    if status == "pass":
        return "pass", ""
    if status == "fail" and converged["plateaued"]:
        return "fail", ""
    return "inconclusive", (not_converged_reason(converged) if not converged["plateaued"] else noise_reason(sides))


def parent_gap_side(ctx: CheckContext, metrics: dict) -> str:
    """L_pa − BMA's L_pa at the run's own L against its threshold: the run learned BMA's parent posterior."""
    return threshold_side(metrics["parent_loss_gap"], THRESHOLDS[ctx.tier]["parent_loss_gap"],
                          NOISE_BAND["parent_loss_gap"])


# ---------------------------------------------------------------------------------------------------------------
# fig2's rule, its half-BMA control and its loss table (exp-fig2-attention and exp-robustness).

def fig2_sides(ctx: CheckContext, metrics: dict) -> dict:
    """Each quantity fig2 decides, against its threshold with its noise band: the query-loss gap, the parent
    accuracy's shortfall and L_pa's gap to BMA's (a converged run that cannot represent BMA fails on it)."""
    t = THRESHOLDS[ctx.tier]
    return {"gap_to_bma": threshold_side(metrics["gap_to_bma"], t["gap"], NOISE_BAND["gap_to_bma"]),
            "accuracy_shortfall": threshold_side(metrics["bma_parent_accuracy"] - metrics["parent_accuracy"],
                                                 t["accuracy_shortfall"], NOISE_BAND["accuracy"]),
            "parent_loss_gap": parent_gap_side(ctx, metrics)}


def half_bma_control(ctx: CheckContext, run) -> tuple[dict, dict]:
    """BMA reading the last ceil(L/2) examples of the run's held-out contexts, and fig2's rule on it."""
    batch = eval_batch(run.config, run.kernel, run.config.L)  # the contexts run.metrics were measured on
    half = analysis.truncated_bma_metrics(run.kernel, batch, half_examples(run.config.L))
    return half, fig2_sides(ctx, half)


def control_measured(metrics: dict, sides: dict) -> dict:
    """What a half-BMA control reports: its examples, losses, accuracies and fig2's rule on it."""
    return {k: metrics[k] for k in ("examples", "L", "gap_to_bma", "parent_loss_gap", "parent_accuracy",
                                    "bma_parent_accuracy")} | {"rule": sides}


def loss_split_rows(metrics: dict, label: str) -> list:
    """``[row]``: the loss-table row (``LOSS_COLUMNS``) of a run's metrics, as a list to concatenate."""
    return [[label, metrics["query_loss"], metrics["bma_loss"], metrics["gap_to_bma"], metrics["parent_loss"],
             metrics["bma_parent_loss"], metrics.get("logit_floor_loss"), metrics.get("output_rule_gap"),
             metrics["parent_accuracy"], metrics["bma_parent_accuracy"], metrics["oracle_loss"]]]


def fig2_threshold(ctx: CheckContext, half: dict) -> dict:
    """fig2's thresholds, each with its band and what the control (``half``, BMA reading half the examples) read."""
    t, control = THRESHOLDS[ctx.tier], f"BMA reading {half['examples']} of {half['L']}"
    return {"parent_loss_gap": f"L_pa − BMA's ≤ {t['parent_loss_gap']} ± {NOISE_BAND['parent_loss_gap']} "
                               f"({control}: {half['parent_loss_gap']:+.3f})", "converged": PLATEAU_RULE,
            "gap_to_bma": f"≤ {t['gap']} ± {NOISE_BAND['gap_to_bma']} ({control}: {half['gap_to_bma']:.3f})",
            "accuracy_shortfall": f"≤ {t['accuracy_shortfall']} ± {NOISE_BAND['accuracy']} ({control}: "
                                  f"{half['bma_parent_accuracy'] - half['parent_accuracy']:.3f})",
            "tier": ctx.tier}
