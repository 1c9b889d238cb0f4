"""The DS models of the ``prop2-ds-quadratic`` model checks beyond plain training: BMA planted in the key-norm
selector (the control), a model at the initial weights of its run (the FFN's control), and attention maps.

Each function builds or evaluates models of :mod:`model.ds`; the checks decide on what these return.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from bma_verify.model.ds import (DSModel, DSModelConfig, TrainConfig, evaluate_ds_model, evaluation_rng, model_outputs,
                                 train_ds_models)
from bma_verify.numerics.ds import check_orthogonal, check_rho, ds_parent_posterior
from bma_verify.numerics.ds_fit import exact_score_parameters


def exact_key_norm_model(A, rho, cfg: DSModelConfig) -> DSModel:
    """The key-norm selector at the exact (W*, c*) with read-out ρA: BMA by construction, so it has no gap.

    ``cfg.selector`` must be ``"key-norm"``; the weights are those of Proposition 2
    (:func:`numerics.ds_fit.exact_score_parameters`).
    """
    if cfg.selector != "key-norm":
        raise ValueError(f"cfg.selector must be 'key-norm', got {cfg.selector!r}")
    A, rho = check_orthogonal(A), check_rho(rho)
    model = DSModel(cfg)
    W, c = exact_score_parameters(A, rho)
    with torch.no_grad():
        model.W.copy_(torch.as_tensor(W))
        model.c.fill_(c)
        model.W_O.copy_(torch.as_tensor(rho * A))  # row form of the BMA mean ρAᵀx
    return model


def train_with_initial_weights(cfg: DSModelConfig, A, rho, train: TrainConfig, L_values, *, n_eval: int,
                               quiet: bool = True) -> dict:
    """Train one model and evaluate it beside the same model at its initial weights.

    The initial model is :func:`model.ds.train_ds_models` for one step at learning rate 0 with the same seed (the
    same draws, unchanged). Both are evaluated by :func:`model.ds.evaluate_ds_model` on the contexts of
    :func:`model.ds.evaluation_rng` (those of :func:`model.ds.run_ds_experiment` with the same seed).
    Returns ``{"model", "history", "eval", "init_eval"}``.
    """
    (model,), (history,) = train_ds_models([cfg], A, rho, train, quiet=quiet)
    at_init = replace(train, steps=1, batch_size=2, lr=0.0, ffn_lr=0.0)
    (init,), _ = train_ds_models([cfg], A, rho, at_init)
    evals = {name: evaluate_ds_model(m, A, rho, L_values, n_eval=n_eval, rng=evaluation_rng(train.seed))
             for name, m in (("trained", model), ("init", init))}
    return {"model": model, "history": history, "eval": evals["trained"], "init_eval": evals["init"]}


def attention_maps(models: dict, A, rho, context: np.ndarray, query: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """(title, (H, H) attention) of BMA and of each model of ``models`` on the first context of a batch."""
    panels = [("BMA (exact posterior)", ds_parent_posterior(A, rho, context)[0])]
    for name, model in models.items():
        _, log_att = model_outputs(model, context, query)
        panels.append((f"{name} model", np.exp(log_att[0])))
    return panels


def final_train_loss(history: dict) -> float:
    """Mean training loss over the last 10 % of steps of a :func:`model.ds.train_ds_models` history."""
    loss = history["loss"]
    return float(np.mean(loss[-max(1, len(loss) // 10):]))
