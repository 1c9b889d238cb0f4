"""Probe (not part of the package): does a per-head example-offset bias make the task-shaped transformer's
layer-1 heads divide the examples? Reduced scale d = 5, H = 6, L = 4, K = 16 heads of width 4.

``model.task_shaped.TaskShapedTransformer`` with a T5-style bias per head over the example offset l − l' (0..L, the
query's own example at 0) added to every layer-1 logit, drawn N(0, bias_std²) from the run's generator; it learns
at ``bias_lr`` × lr from step ``delay`` on (``delay=10**9``: frozen). Optional curriculum: training contexts hold
min(L, 1 + step // grow) examples. Trained on the all-examples loss with AdamW (lr 0.01, warm-up 50, cosine to
0.1 lr), batch 128, gradient clip 1; evaluated on 1024 held-out contexts against BMA's parent accuracy.

Run from the repository root (one thread, ~0.15 s a step on this project's 2-core machine):

    PYTHONPATH=. .venv/bin/python docs/probes/task_shaped_offset_bias.py "delay=10**9" 1 0
    PYTHONPATH=. .venv/bin/python docs/probes/task_shaped_offset_bias.py "grow=250,delay=10**9" 1
    PYTHONPATH=. .venv/bin/python docs/probes/task_shaped_offset_bias.py "delay=10**9" 1 --heads

Arguments: keyword overrides of :func:`run` as ``"name=value,..."`` ("" for none), then seeds; ``--heads`` also
prints, per head, the query stream's mass on the same position of each example. Numbers it gave are in
docs/notes/exp-robustness.md.
"""
from __future__ import annotations

import json
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bma_verify import numerics
from bma_verify.model.task_shaped import TaskShapedConfig, TaskShapedTransformer
from bma_verify.model.training import bma_reference, evaluate


class OffsetBiased(TaskShapedTransformer):
    """The task-shaped model with a learned (or frozen) bias per layer-1 head over the example offset."""

    def __init__(self, config: TaskShapedConfig, *, generator: torch.Generator, bias_std: float):
        super().__init__(config, generator=generator)
        self.rel_ex = nn.Parameter(torch.randn(config.K, config.max_L + 1, generator=generator) * bias_std)

    def _offset_bias(self, L: int, H: int, first: int) -> torch.Tensor:
        """(K, rows, keys): the bias of every layer-1 row (query stream, then content) of examples first..L."""
        N = (L + 1) * H
        row_ex = (torch.arange(first * H, N) // H).repeat(2)
        offset = (row_ex[:, None] - (torch.arange(N) // H)[None, :]).clamp(0, self.config.max_L)
        return self.rel_ex[:, offset]

    def _examples(self, context, query, *, all_examples):
        L, H = context.shape[1], context.shape[2]
        self._bias = self._offset_bias(L, H, 0 if all_examples else L)
        return super()._examples(context, query, all_examples=all_examples)

    def _attention1(self, x, kv, allowed, bias=None):  # absolute positions: the model passes no bias
        B, R, w = x.shape
        K, hs = self.K, w // self.K
        q = self.q1(x).view(B, R, K, hs).transpose(1, 2)
        k = self.k1(kv).view(B, -1, K, hs).transpose(1, 2)
        v = self.v1(kv).view(B, -1, K, hs).transpose(1, 2)
        seen = allowed.any(-1, keepdim=True)
        mask = self._bias.masked_fill(~(allowed | ~seen), float("-inf"))[None]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask) * seen
        return self.o1(y.transpose(1, 2).reshape(B, R, w))

    @torch.no_grad()
    def same_position_mass(self, context, query) -> np.ndarray:
        """(K, L + 1): per head, the query stream's mean mass on position h of each example (rows h >= 1)."""
        B, L, H = context.shape
        c, N = self.config, (L + 1) * H
        tokens = torch.cat([context, query[:, None, :]], 1)
        ex, pos = self.ex(torch.arange(L + 1)), self.pos(torch.arange(H))
        content = (self.tok(tokens) + ex[None, :, None] + pos[None, None]).reshape(B, N, -1)
        rows = (self.tok.weight[c.d] + ex[L:, None] + pos[None]).reshape(1, H, -1).expand(B, -1, -1)
        x, kv = self.ln1(rows), self.ln1_kv(content)
        hs = x.shape[-1] // self.K
        q = self.q1(x).view(B, H, self.K, hs).transpose(1, 2)
        k = self.k1(kv).view(B, N, self.K, hs).transpose(1, 2)
        allowed = torch.arange(N)[None] < torch.arange(L * H, N)[:, None]
        logits = q @ k.transpose(-1, -2) / math.sqrt(hs) + self._offset_bias(L, H, L)[:, :H]
        att = torch.softmax(logits.masked_fill(~allowed, float("-inf")), -1).nan_to_num().mean(0).view(
            self.K, H, L + 1, H)
        return torch.stack([att[:, h, :, h] for h in range(1, H)]).mean(0).numpy()


def run(seed: int, K=16, width=64, L=4, H=6, d=5, steps=1500, lr=0.01, batch=128, bias_std=4.0, delay=0,
        bias_lr=0.3, grow=0, use_bias=True, eval_every=500, heads=False) -> dict:
    kernel = numerics.random_kernel(d, alpha=1.0, eps=0.0, rng=np.random.default_rng([seed, 0]))
    model = OffsetBiased(TaskShapedConfig(d=d, max_H=H, max_L=L, K=K, width=width),
                         generator=torch.Generator().manual_seed(seed), bias_std=bias_std if use_bias else 0.0)
    held = numerics.sample_task(kernel, 1024, L, H, rng=np.random.default_rng([seed, 2]))
    reference = bma_reference(kernel, held)
    others = [p for n, p in model.named_parameters() if n != "rel_ex"]
    groups = [{"params": others, "scale": 1.0, "start": 0}]
    if use_bias:
        groups.append({"params": [model.rel_ex], "scale": bias_lr, "start": delay})
    opt = torch.optim.AdamW(groups, lr=lr, weight_decay=0.0)
    curve = []
    for step in range(steps):
        rate = lr * min(1, (step + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        for g in opt.param_groups:
            g["lr"] = rate * g["scale"] * (step >= g["start"])
        n_examples = L if grow == 0 else min(L, 1 + step // grow)
        b = numerics.sample_task(kernel, batch, n_examples, H, rng=np.random.default_rng([seed, 1, step]))
        loss = model.loss(torch.from_numpy(b.context), torch.from_numpy(b.query))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % eval_every == 0:
            m = evaluate(model, kernel, held)
            curve.append([step + 1, round(m["parent_accuracy"], 3),
                          round(m["parent_loss"] - reference["bma_parent_loss"], 3)])
    out = {"seed": seed, "bma_accuracy": round(reference["bma_parent_accuracy"], 3), "curve": curve,
           "bias_peaks": sorted(model.rel_ex.detach().argmax(1).tolist())}
    if heads:
        mass = model.same_position_mass(torch.from_numpy(held.context[:256]), torch.from_numpy(held.query[:256]))
        out["same_position_mass"] = [[round(float(v), 2) for v in row] for row in mass]
    return out


if __name__ == "__main__":
    torch.set_num_threads(1)
    args = [a for a in sys.argv[1:] if a != "--heads"]
    overrides = eval(f"dict({args[0]})")  # a probe's command line, e.g. "delay=10**9,bias_std=8.0"
    for s in args[1:]:
        print(args[0], json.dumps(run(int(s), heads="--heads" in sys.argv, **overrides)), flush=True)
