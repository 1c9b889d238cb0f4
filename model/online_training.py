"""The online training loop of the small ``ext``/footnote runs, with its learning-rate schedule (linear warm-up,
cosine decay) and its plateau test. Claim ids served: ``footnote1-selective-induction``, ``ext-*``.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn


def warmup_cosine_lr(lr: float, warmup: int, steps: int, step: int) -> float:
    """Learning rate of ``step``: linear warm-up over ``warmup`` steps, then cosine decay to zero at ``steps``."""
    if step < warmup:
        return lr * (step + 1) / warmup
    span = max(1, steps - warmup)
    return lr * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / span)))


def plateaued(trace, tol: float = 0.01) -> bool:
    """Training losses ``trace`` (one per step) count as converged: the mean of the last quarter is within ``tol``
    nats of the quarter before (a plateau)."""
    q = max(1, len(trace) // 4)
    return bool(len(trace) >= 2 * q and abs(np.mean(trace[-q:]) - np.mean(trace[-2 * q:-q])) < tol)


def train_steps(model: nn.Module, groups: list[dict], config, step_loss, *, record_every: int = 50
                ) -> tuple[list, bool]:
    """The online loop the small ``ext``/footnote training runs share: AdamW (no weight decay) over ``groups``
    (each with a ``scale`` of the learning rate), :func:`warmup_cosine_lr` from ``config.lr``, ``config.warmup``,
    ``config.steps``, gradient clipping at ``config.grad_clip``; ``step_loss(step)`` gives the loss of a step (its
    batch a function of the step, so the run is reproducible).

    Returns ``losses`` ([step, mean training loss since the last record]) and ``converged`` (:func:`plateaued`).
    """
    opt = torch.optim.AdamW(groups, lr=config.lr, weight_decay=0.0)
    losses, window, trace = [], [], []
    for step in range(config.steps):
        for g in opt.param_groups:
            g["lr"] = warmup_cosine_lr(config.lr, config.warmup, config.steps, step) * g["scale"]
        loss = step_loss(step)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        opt.step()
        window.append(float(loss.detach()))
        trace.append(window[-1])
        if (step + 1) % record_every == 0 or step + 1 == config.steps:
            losses.append([step + 1, float(np.mean(window))])
            window = []
    return losses, plateaued(trace)
