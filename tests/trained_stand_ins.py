"""Stand-in runs for the tests of trained checks: the Theorem 1 construction is a converged run (it is BMA),
``train(steps=0)`` an unconverged one; ``patch_runs`` makes ``reports.checks.trained.trained_runs`` return them."""
from __future__ import annotations

import numpy as np
import torch

import bma_verify.reports.checks.trained as trained
from bma_verify.model.construction import bma_construction
from bma_verify.model.train_config import StandardOptions, StructuredOptions, TrainConfig, config_record
from bma_verify.model.training import TrainRun, bma_reference, eval_batch, evaluate, evaluate_test_L, run_kernel, train


def stand_in_run(*, L=5, H=6, d=4, test_L=(), model_kind="structured", K=None, construction=False,
                 column_shift=False, layer1_init="mimetic", seed=2) -> TrainRun:
    """A TrainRun with the metrics a trained preset run has: the construction (``construction=True``, optionally
    with W + 1aᵀ in W_KQ) or an untrained model."""
    options = (StandardOptions(width=40, layer1_init=layer1_init) if model_kind == "standard"
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
    return TrainRun(model=model_, kernel=kernel, config=config, metrics=metrics)


def patch_runs(monkeypatch, runs_by_preset: dict) -> None:
    """Make every preset ``name`` train to ``runs_by_preset[name]`` ({run label: TrainRun}) instead."""
    def fake(name, *, tier, seed, device, quiet, output):
        return runs_by_preset[name]

    monkeypatch.setattr(trained, "train_preset_runs", fake)
