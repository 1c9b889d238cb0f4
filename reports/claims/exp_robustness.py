"""Claim exp-robustness (Appendix G): absolute position embeddings and a standard transformer with FFNs learn the
same parent-selecting attention as the structured model.

The check trains the robustness preset (an absolute-PE disentangled run and a standard transformer with relative
positions; model/presets.py) and judges each deciding run by fig2's rule, with BMA reading only the last ceil(L/2)
examples as the control and the bar a run must beat. How the runs were chosen: docs/notes/exp-robustness.md.
"""
from __future__ import annotations

from bma_verify.model import analysis, figures
from bma_verify.model.convergence import runs_plateau
from bma_verify.model.training import eval_batch
from bma_verify.reports.checks.trained import (LOSS_COLUMNS, NOISE_BAND, combine_sides, control_measured, draw_figure,
                                               fig2_sides, fig2_threshold, half_examples, loss_split_rows,
                                               not_converged_reason, run_convergence, threshold_side, trained_runs,
                                               trained_verdict)
from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.core import CheckContext, CheckOutcome, Control, Table

#: Regression tolerances of every run (the reference: quick tier, seed 0): about twice what another host's CPU
#: kernels moved the absolute-PE run (history: docs/notes/exp-robustness.md).
RUN_TOLERANCES = {"query_loss": {"abs": 0.004}, "gap_to_bma": {"abs": 0.004}, "parent_loss": {"abs": 0.02},
                  "parent_loss_gap": {"abs": 0.02}, "parent_accuracy": {"abs": 0.012},
                  "examples_equivalent": {"abs": 0.4}}


def _robustness_reading(ctx: CheckContext, run, half: dict) -> dict:
    """One run's reading, once its held-out curve has plateaued: fig2's rule, and a run no better than BMA reading
    half its examples fails. A run still improving reads inconclusive (not converged). A run with fewer layer-1
    heads than examples (under-provisioned: it cannot give each example its own copier head, which the hand-set
    standard model that equals BMA needs) is judged alike, and its reason says so."""
    m, c = run.metrics, run.config
    sides = fig2_sides(ctx, m)
    converged = run_convergence(m)
    under = c.K < c.L
    # better than the control by more than the band of an accuracy
    vs_control = threshold_side(m["parent_accuracy"], half["parent_accuracy"], NOISE_BAND["accuracy"], upper=False)
    below = vs_control == "fail"
    below_text = (f"ends no better than its control (parent accuracy {m['parent_accuracy']:.3f} vs "
                  f"{half['parent_accuracy']:.3f} for BMA reading the last {half['examples']} of {half['L']} examples)")
    under_text = (f"under-provisioned: K = {c.K} layer-1 heads for L = {c.L} examples (the hand-set standard model "
                  "that equals BMA gives each example its own head)")
    status = "fail" if below else combine_sides(sides)
    notes = "; ".join(text for text, flag in ((under_text, under), (f"it {below_text}", below)) if flag)
    verdict, reason = trained_verdict(status, converged, sides)
    if not converged["plateaued"]:  # a run's pass is withheld here, not only by settle: the claim names the run
        verdict, reason = "inconclusive", not_converged_reason(converged)
    if verdict != "pass" and notes:
        reason = f"{reason}; {notes}" if reason else notes
    return {"verdict": verdict, "reason": reason, "converged": converged, "under_provisioned": under,
            "below_control": below, "sides": sides}


def _is_standard(config) -> bool:
    return config.model.kind == "standard"


def _layer1_init(config) -> str:
    """How layer 1 starts: the standard run's ``layer1_init``; the disentangled models start it at random, which
    the report names "mimetic" as the standard model's random start."""
    return config.model.layer1_init if _is_standard(config) else "mimetic"


def _scale(config) -> dict:
    return {"d": config.d, "H": config.H, "L": config.L}


def _scale_text(config) -> str:
    position = f", {config.model.position} positions" if _is_standard(config) else ""
    return f"d = {config.d}, H = {config.H}, L = {config.L}{position}"


def _objective_assumptions(runs: dict, labels) -> list[str]:
    """The training objective of each deciding run whose loss weighs the examples (``example_weight_power``), a
    choice of ours that the claim's result rests on, named with the value each run used."""
    weighted = [label for label in labels
                if _is_standard(runs[label].config) and runs[label].config.model.example_weight_power]
    return [f"{label} trains on the language-model loss of every example with example l weighted by l^"
            f"{runs[label].config.model.example_weight_power:g} (our choice: an example offset of L exists only in "
            "the query example's terms, and the plain objective, every example alike, left the oldest example the "
            "worst copied and the report seed's quick run not converged; model.presets.standard_config)"
            + (f", evaluated as a {runs[label].config.ema:g} moving average of its weights"
               if runs[label].config.ema else "")
            for label in weighted]


# ---------------------------------------------------------------------------------------------------------------
# The check: compute (each run against BMA reading fewer examples), decide (fig2's rule per run), render.

def exp_robustness(ctx: CheckContext) -> CheckOutcome:
    """Appendix G: absolute-PE and standard (FFN, pre-norm) transformers at the fig2 setting (the quick tier's
    standard run at a declared reduced scale)."""
    runs = trained_runs(ctx, "robustness")
    per_run = {label: _compute_run(r) for label, r in runs.items()}
    decided = _decide(ctx, runs, per_run)
    return _render(ctx, runs, per_run, decided)


def _compute_run(run) -> dict:
    """How much evidence one run uses, on the held-out contexts its metrics were measured on: BMA's accuracy
    reading the last m examples, the m that matches the run, BMA reading half of them, and (standard runs) where
    its layer-1 heads go."""
    batch = eval_batch(run.config, run.kernel, run.config.L)
    by_examples = analysis.bma_accuracy_by_examples(run.kernel, batch.context, batch.parents)
    return {"batch": batch, "by_examples": by_examples,
            "equivalent": analysis.examples_equivalent(run.metrics["parent_accuracy"], by_examples),
            "half": analysis.truncated_bma_metrics(run.kernel, batch, half_examples(run.config.L)),
            "heads": analysis.standard_head_summary(run.model, batch) if _is_standard(run.config) else None}


def _decide(ctx: CheckContext, runs: dict, per_run: dict) -> dict:
    """Each run's reading, the verdict over the deciding runs (a run whose layer 1 starts as the copier is a
    diagnostic of the selector alone) and the control: fig2's rule on BMA reading half the examples."""
    readings = {label: _robustness_reading(ctx, r, per_run[label]["half"]) for label, r in runs.items()}
    diagnostic = {label for label, r in runs.items() if _layer1_init(r.config) == "copy"}
    deciding = [label for label in runs if label not in diagnostic]
    decided = [readings[label]["verdict"] for label in deciding]
    verdict = ("pass" if all(v == "pass" for v in decided) else "fail" if "fail" in decided else "inconclusive")
    reason = "" if verdict == "pass" else "; ".join(f"{label}: {readings[label]['reason']}" for label in deciding
                                                    if readings[label]["verdict"] == verdict)
    control_sides = {label: fig2_sides(ctx, per_run[label]["half"]) for label in deciding}
    control = Control(
        "BMA reading only the last ceil(L/2) examples of each deciding run's held-out contexts, judged by fig2's "
        "rule (and the bar a deciding run must beat)",
        {label: control_measured(per_run[label]["half"], control_sides[label]) for label in deciding},
        all(combine_sides(s) == "fail" for s in control_sides.values()))
    return {"readings": readings, "diagnostic": diagnostic, "deciding": deciding, "verdict": verdict,
            "reason": reason,
            "converged": runs_plateau({label: readings[label]["converged"] for label in deciding}),
            "control": control, "under": [label for label in deciding if readings[label]["under_provisioned"]],
            "chance": {label: analysis.chance_parent_accuracy(r.config.H) for label, r in runs.items()}}


def _render(ctx: CheckContext, runs: dict, per_run: dict, d: dict) -> CheckOutcome:
    failed = [label for label in d["deciding"] if d["readings"][label]["verdict"] == "fail"]
    return CheckOutcome(
        verdict=d["verdict"], reason=d["reason"], converged=d["converged"], control=d["control"],
        instance={label: {"config": runs[label].metrics["config"], "kernel": runs[label].kernel.tolist()}
                  for label in failed} or None,
        measured={label: _run_measured(r, per_run[label], d, label) for label, r in runs.items()},
        threshold=fig2_threshold(ctx, per_run[d["deciding"][0]]["half"])
        | {"fail": "a converged deciding run that misses fig2's rule, or whose parent accuracy is below that of BMA "
                   "reading the last ceil(L/2) examples by more than the band"},
        summary=_summary(runs, per_run, d), assumptions=_assumptions(runs, d),
        tables=[Table("losses (nats/token)", LOSS_COLUMNS,
                      sum((loss_split_rows(r.metrics, k) for k, r in runs.items()), []))],
        figures=_figures(ctx, runs, per_run),
        tolerances={f"{label}.{key}": tol for label in runs for key, tol in RUN_TOLERANCES.items()})


def _figures(ctx: CheckContext, runs: dict, per_run: dict) -> list[str]:
    """Each run's attention heatmaps and, for a standard run, where its layer-1 heads go."""
    figs = []
    for label, r in runs.items():
        batch, heads = per_run[label]["batch"], per_run[label]["heads"]
        figs += draw_figure(ctx, f"robustness_{label}_attention.png",
                            lambda p, r=r, batch=batch: figures.attention_heatmaps(r.model, r.kernel, batch, p))
        if heads is not None:
            figs += draw_figure(ctx, f"robustness_{label}_heads.png", lambda p, s=heads, label=label:
                                figures.standard_heads_figure(s, p, title=label))
    return figs


def _run_measured(r, computed: dict, d: dict, label: str) -> dict:
    reading, heads = d["readings"][label], computed["heads"]
    return ({k: r.metrics[k] for k in ("query_loss", "bma_loss", "gap_to_bma", "parent_loss", "bma_parent_loss",
                                       "parent_loss_gap", "parent_accuracy", "bma_parent_accuracy", "steps")}
            | {"heads": r.config.K, "layer1_init": _layer1_init(r.config), "scale": _scale(r.config),
               "position": r.config.model.position if _is_standard(r.config) else None,
               "chance_parent_accuracy": d["chance"][label],
               "counts_toward_verdict": label not in d["diagnostic"],
               "under_provisioned": reading["under_provisioned"], "below_control": reading["below_control"],
               "examples_equivalent": computed["equivalent"],
               **({"layer1_heads": {k: heads[k] for k in ("example_offset", "position_offset", "same_position_mass",
                                                          "covered")}} if heads is not None else {}),
               "bma_parent_accuracy_last_m_examples": computed["by_examples"].tolist(),
               "verdict": reading["verdict"]})


def _summary(runs: dict, per_run: dict, d: dict) -> str:
    readings, chance, under, diagnostic = d["readings"], d["chance"], d["under"], d["diagnostic"]

    def run_text(label: str, r) -> str:
        heads = per_run[label]["heads"]
        return (f"{label} ({_scale_text(r.config)}, {r.config.K} heads"
                + (", under-provisioned" if readings[label]["under_provisioned"] else "")
                + f"): parent accuracy {r.metrics['parent_accuracy']:.3f} vs BMA "
                f"{r.metrics['bma_parent_accuracy']:.3f}, L_pa {r.metrics['parent_loss_gap']:+.3f}, gap "
                f"{r.metrics['gap_to_bma']:.4f} ({readings[label]['verdict']}"
                + (f": {readings[label]['reason']}" if readings[label]["reason"] else "")
                + f"), the accuracy of BMA reading the last {per_run[label]['equivalent']:.1f} of {r.config.L} "
                  "examples"
                + (f"; its layer-1 heads copy examples {heads['covered'] or 'none'} at the same "
                   f"position (of 1..{r.config.L})" if heads is not None else ""))

    return ("; ".join(run_text(label, r) for label, r in runs.items())
            + "; chance (uniform over h' < h) " + ", ".join(sorted({f"{chance[label]:.3f} at H = {r.config.H}"
                                                                  for label, r in runs.items()}))
            + ". Control: BMA reading the last ceil(L/2) examples is "
              f"{'rejected' if d['control'].rejected else 'NOT rejected'} by fig2's rule."
            + (f" Under-provisioned (K < L, judged like any run): {', '.join(under)}." if under
               else "")
            + (f" Diagnostic, not counted in the verdict: {', '.join(sorted(diagnostic))} starts layer 1 as "
               "that copier (one head per example) and layer 2 at random, so it measures whether the standard "
               "selector learns BMA's parent selection once the copies exist." if diagnostic else ""))


def _assumptions(runs: dict, d: dict) -> list[str]:
    return [
        "deciding runs: " + ", ".join(f"{label} ({runs[label].config.model.kind}, {_scale_text(runs[label].config)}, "
                                      f"K = {runs[label].config.K}, {runs[label].config.steps} steps)"
                                      for label in d["deciding"])
        + "; each trained from a standard initialisation",
        *_objective_assumptions(runs, d["deciding"]),
        "the standard transformer reads positions through a learned bias per layer-1 head over the (example, "
        "position) offset (relative positions, as T5 and Swin do; model/standard.py), our choice: with absolute "
        "position embeddings its heads piled onto a few recent examples; the quick tier trains it at a reduced "
        "scale that two cores can afford (stated with each run above), the full tier at the paper's fig2 "
        "setting",
        "a run whose layer 1 starts as the BMA copier (layer1_init='copy') is a diagnostic and never decides",
        "a deciding run whose held-out curve has plateaued and that ends no better than BMA reading the last "
        "ceil(L/2) examples, or misses fig2's rule, fails its reading (one with K < L is named under-provisioned);"
        " a run still improving reads inconclusive",
        "fig2's thresholds and noise bands (measured on fig2's structured run) apply to every architecture"]


CLAIM = Claim(
    "exp-robustness",
    "Appendix G: absolute position embeddings and a standard transformer with FFN learn the same "
    "parent-selecting attention.",
    "At the fig2 setting, AbsolutePETransformer and StandardTransformer reach parent-selecting second-layer "
    "attention (parent accuracy and L_pa near BMA); the StandardTransformer (relative positions, our choice) "
    "at a declared reduced scale (d = 5, H = 6, L = 4) in the quick tier.",
    (Check("model", exp_robustness, "figures and numbers for both models", reading="reproduction"),),
)
