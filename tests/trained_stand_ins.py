"""Stand-in runs for the tests of trained checks: the Theorem 1 construction is a converged run (it is BMA, with a
flat held-out curve), ``train(steps=0)`` an unconverged one (a falling curve); the construction with its selector
frozen at another kernel's log π, or an untrained model, with a flat curve, is a converged run that cannot
represent BMA (it must fail). ``patch_runs`` makes ``reports.checks.trained.trained_runs`` return them."""
from __future__ import annotations

import numpy as np
import torch

import bma_verify.reports.checks.trained as trained
from bma_verify import numerics
from bma_verify.model.construction import bma_construction
from bma_verify.model.train_config import StructuredOptions, TaskShapedOptions, TrainConfig, config_record
from bma_verify.model.training import TrainRun, bma_reference, eval_batch, evaluate, evaluate_test_L, run_kernel, train
from bma_verify.reports.core import CheckContext


#: The evaluation steps of a stand-in's held-out curve (ten evaluations, as fig2's quick run records).
CURVE_STEPS = np.arange(100, 1001, 100)


def held_out_curve(final: float, shape: str) -> list[float]:
    """A held-out loss curve ending at ``final``: "flat" (noise of 0.001 nats around it, a plateau) or "falling"
    (still dropping 0.2 nats over the last 20% of steps)."""
    noise = np.random.default_rng(0).normal(scale=0.001, size=len(CURVE_STEPS))
    if shape == "flat":
        return (final + noise - noise[-1]).tolist()
    return (final + 1.0 * (CURVE_STEPS[-1] / CURVE_STEPS - 1.0)).tolist()


def with_curve(run: TrainRun, shape: str) -> TrainRun:
    """``run`` whose metrics carry a held-out curve of ``shape`` (see :func:`held_out_curve`)."""
    curves = {"step": CURVE_STEPS.tolist(), "query_loss": held_out_curve(run.metrics["query_loss"], shape)}
    return TrainRun(run.model, run.kernel, run.config, run.metrics | {"curves": curves})


def stand_in_run(*, L=5, H=6, d=4, test_L=(), model_kind="structured", K=None, construction=False,
                 column_shift=False, wrong_selector=False, layer1_init="mimetic", seed=2, curve=None) -> TrainRun:
    """A TrainRun with the metrics a trained preset run has: the construction (``construction=True``, optionally
    with W + 1aᵀ in W_KQ, or ``wrong_selector``: its selector frozen at log π' of another kernel π') or an
    untrained model; its held-out curve is ``curve`` ("flat" or "falling"; default flat for the construction,
    falling for an untrained model)."""
    options = (TaskShapedOptions(width=40, layer1_init=layer1_init) if model_kind == "task-shaped"
               else StructuredOptions())
    config = TrainConfig(model=options, d=d, H=H, L=L, K=K or L, steps=0, eval_contexts=512, seed=seed, device="cpu",
                         test_L=test_L)
    kernel = run_kernel(config)
    if construction:
        model_ = bma_construction(kernel, L, 40.0, max_H=H)
        if column_shift:  # W + 1aᵀ: the same A^(2) (Prop. 1), a different row softmax, as training leaves it
            a = np.random.default_rng(0).normal(size=d)
            with torch.no_grad():
                model_.W_KQ.copy_(torch.block_diag(*([torch.as_tensor(np.log(kernel) + a[None, :])] * L)))
        if wrong_selector:
            other = np.log(numerics.random_kernel(d, alpha=1.0, eps=0.01, rng=np.random.default_rng(1)))
            with torch.no_grad():
                model_.W_KQ.copy_(torch.block_diag(*([torch.as_tensor(other)] * L)))
    else:
        model_ = train(config).model
    batch = eval_batch(config, kernel, L)
    reference = bma_reference(kernel, batch)
    metrics = evaluate(model_, kernel, batch) | reference | {"steps": 0, "config": config_record(config),
                                                            "kernel": kernel.tolist()}
    metrics["gap_to_bma"] = metrics["query_loss"] - reference["bma_loss"]
    metrics["parent_loss_gap"] = metrics["parent_loss"] - reference["bma_parent_loss"]
    metrics["output_rule_gap"] = reference["logit_floor_loss"] - reference["bma_loss"]
    if test_L:
        metrics["by_test_L"] = evaluate_test_L(model_, kernel, config)
    run = TrainRun(model=model_, kernel=kernel, config=config, metrics=metrics)
    return with_curve(run, curve or ("flat" if construction else "falling"))


def patch_runs(monkeypatch, runs_by_preset: dict, continued=None) -> None:
    """Make every preset ``name`` train to ``runs_by_preset[name]`` instead: {run label: TrainRun} on every training
    seed, or a list of them, one per training seed of report seed 0 (in ``training_seeds`` order). A continuation
    (the miss rule, ``model.continuation``) of a stand-in returns ``continued(run)``: by default the run itself, a
    model that more training does not move (a stand-in that cannot represent BMA stays where it is)."""
    monkeypatch.setattr(trained, "continue_run", lambda run, quiet=True: (continued or (lambda r: r))(run))
    def fake(name, *, tier, seed, device, quiet, output):
        runs = runs_by_preset[name]
        if isinstance(runs, dict):
            return runs
        return runs[trained.training_seeds(CheckContext(tier=tier, seed=0), name).index(seed)]

    monkeypatch.setattr(trained, "train_preset_runs", fake)
