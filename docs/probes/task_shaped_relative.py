"""Probe (not part of the package): the task-shaped transformer with relative positions
(``TaskShapedConfig(position="relative")``, model/task_shaped.py) from scratch, at a chosen scale.

Trained on the all-examples loss with AdamW (warm-up 50 steps, cosine to 0.1 lr), gradient clip 1, the example-
offset biases held for the first ``ex_delay`` steps (``query_only=N``: from step N on, the loss of the query
example's terms only); evaluated on 1024 held-out contexts against BMA's parent
accuracy; ``--heads`` prints, per example of the context, the largest same-position mass of any layer-1 head
(``model.analysis.task_shaped_head_summary``'s reading: an example is covered when one head puts most of its mass on
it at the same position). Default: d = 5, H = 6, L = 4, K = 16 heads, width 64, lr 0.01, batch 128, 1500 steps.

    PYTHONPATH=. .venv/bin/python docs/probes/task_shaped_relative.py "" 0 1 --heads
    PYTHONPATH=. .venv/bin/python docs/probes/task_shaped_relative.py "qk_gain=4.0" 1

Arguments: keyword overrides of :func:`run` as ``"name=value,..."`` ("" for none), then seeds. One thread.
Numbers it gave are in docs/notes/exp-robustness.md.
"""
from __future__ import annotations

import json
import math
import sys
import time

import numpy as np
import torch

from bma_verify import numerics
from bma_verify.model.analysis import task_shaped_head_summary
from bma_verify.model.task_shaped import TaskShapedConfig, TaskShapedTransformer
from bma_verify.model.training import bma_reference, evaluate


def run(seed: int, K=16, width=64, L=4, H=6, d=5, steps=1500, lr=0.01, batch=128, qk_gain=0.5, ex_std=4.0,
        pos_slope=4.0, ex_delay=0, query_only=0, eval_every=250, heads=False, device="cpu") -> dict:
    kernel = numerics.random_kernel(d, alpha=1.0, eps=0.0, rng=np.random.default_rng([seed, 0]))
    config = TaskShapedConfig(d=d, max_H=H, max_L=L, K=K, width=width, position="relative", qk_gain=qk_gain,
                              relative_example_std=ex_std, relative_position_slope=pos_slope)
    model = TaskShapedTransformer(config, generator=torch.Generator().manual_seed(seed)).to(device)
    held = numerics.sample_task(kernel, 1024, L, H, rng=np.random.default_rng([seed, 2]))
    reference = bma_reference(kernel, held)
    others = [p for n, p in model.named_parameters() if n != "rel_example"]
    opt = torch.optim.AdamW([{"params": others, "start": 0}, {"params": [model.rel_example], "start": ex_delay}],
                            lr=lr, weight_decay=0.0)
    curve, t0 = [], time.time()
    for step in range(steps):
        rate = lr * min(1, (step + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        for g in opt.param_groups:
            g["lr"] = rate * (step >= g["start"])
        b = numerics.sample_task(kernel, batch, L, H, rng=np.random.default_rng([seed, 1, step]))
        if step < query_only or not query_only:
            loss = model.loss(b.context, b.query)
        else:  # from step query_only on: the query example's terms only
            log_probs = model(b.context, b.query)[1]
            loss = -log_probs.gather(-1, torch.as_tensor(b.query)[..., None])[:, 1:, 0].mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            m = evaluate(model, kernel, held)
            curve.append([step + 1, round(m["parent_accuracy"], 3),
                          round(m["parent_loss"] - reference["bma_parent_loss"], 3)])
    out = {"seed": seed, "bma_accuracy": round(reference["bma_parent_accuracy"], 3), "curve": curve,
           "seconds": round(time.time() - t0)}
    if heads:
        sub = numerics.TaskBatch(*(np.asarray(x)[:256] for x in held))
        summary = task_shaped_head_summary(model, sub)
        # per example l' = 0..L-1 of the context: the largest same-position mass of a head reading it
        att = model.layer1_query_attention(torch.as_tensor(sub.context), torch.as_tensor(sub.query))
        att = att.double().mean(0).cpu().numpy().reshape(K, H, L + 1, H)
        same = np.stack([att[:, h, :, h] for h in range(1, H)]).mean(0)  # (K, L+1)
        out["best_same_position_mass"] = [round(float(same[:, l].max()), 2) for l in range(L)]
        out["covered_offsets"] = summary["covered"]
    return out


if __name__ == "__main__":
    torch.set_num_threads(1)
    args = [a for a in sys.argv[1:] if a != "--heads"]
    overrides = eval(f"dict({args[0]})")  # a probe's command line, e.g. "qk_gain=4.0,steps=3000"
    for s in args[1:]:
        print(args[0], json.dumps(run(int(s), heads="--heads" in sys.argv, **overrides)), flush=True)
