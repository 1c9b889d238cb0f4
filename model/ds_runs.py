"""The DS models of the ``prop2-ds-quadratic`` model checks beyond plain training: BMA planted in the key-norm
selector, with its weights shrunk by a factor (the near-miss controls' power curve), one trained and evaluated model
(the FFN), and attention maps.

Each function builds or evaluates models of :mod:`model.ds`; the checks decide on what these return.
"""
from __future__ import annotations

import numpy as np
import torch

from bma_verify.model.ds import (DSModel, DSModelConfig, DSTrainConfig, evaluate_ds_model, evaluation_rng, model_outputs,
                                 train_ds_models)
from bma_verify.numerics.ds import check_orthogonal, check_rho, ds_parent_posterior
from bma_verify.numerics.ds_fit import exact_score_parameters


def exact_key_norm_model(A, rho, cfg: DSModelConfig, scale: float = 1.0) -> DSModel:
    """The key-norm selector at ``scale`` × the exact (W*, c*) with read-out ρA: BMA by construction at scale 1
    (no gap); a tempered posterior, off BMA, at any other scale.

    ``cfg.selector`` must be ``"key-norm"``; the weights are those of Proposition 2
    (:func:`numerics.ds_fit.exact_score_parameters`).
    """
    if cfg.selector != "key-norm":
        raise ValueError(f"cfg.selector must be 'key-norm', got {cfg.selector!r}")
    if not np.isfinite(scale) or scale < 0:
        raise ValueError(f"scale must be a finite number >= 0, got {scale!r}")
    A, rho = check_orthogonal(A), check_rho(rho)
    model = DSModel(cfg)
    W, c = exact_score_parameters(A, rho)
    with torch.no_grad():
        model.W.copy_(torch.as_tensor(scale * W))
        model.c.fill_(scale * c)
        model.W_O.copy_(torch.as_tensor(rho * A))  # row form of the BMA mean ρAᵀx
    return model


def shrunk_key_norm_evaluations(A, rho, cfg: DSModelConfig, scales, L_values, *, n_eval: int, seed: int) -> dict:
    """{scale: :func:`model.ds.evaluate_ds_model` of :func:`exact_key_norm_model` at that scale}, every scale on
    the same contexts (those of :func:`model.ds.evaluation_rng` of ``seed``)."""
    return {float(s): evaluate_ds_model(exact_key_norm_model(A, rho, cfg, s), A, rho, L_values, n_eval=n_eval,
                                        rng=evaluation_rng(seed)) for s in scales}


def train_and_evaluate(cfg: DSModelConfig, A, rho, train: DSTrainConfig, L_values, *, n_eval: int,
                       quiet: bool = True) -> dict:
    """Train one model (:func:`model.ds.train_ds_models`) and evaluate it (:func:`model.ds.evaluate_ds_model`) on
    the contexts of :func:`model.ds.evaluation_rng` (those of :func:`model.ds.run_ds_experiment` with the same
    seed). Returns ``{"model", "history", "eval"}``."""
    (model,), (history,) = train_ds_models([cfg], A, rho, train, quiet=quiet)
    return {"model": model, "history": history,
            "eval": evaluate_ds_model(model, A, rho, L_values, n_eval=n_eval, rng=evaluation_rng(train.seed))}


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

