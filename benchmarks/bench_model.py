"""Model benchmarks (training to BMA and the cost of a step), each measured in one run on this machine:

1. fig2 to BMA: training steps and seconds (evaluation excluded) until the held-out query loss first comes within
   0.005 and within 0.002 nats/token of the same run's BMA loss on the same contexts, the time per step, and
   beside them the paper's logit-rule floor: the gap of the Theorem 1 model with the paper's logit output rule
   and exact BMA attention on the same contexts (the mixture rule trained here has no such floor; a trained
   logit-rule model can sit slightly below it by sharpening its attention).
2. Step cost: a training step (forward, backward, AdamW) of StructuredTransformer at the fig2 size against the same
   step of a plain two-layer ``torch.nn.MultiheadAttention`` model of the same width on the same (L+1)·H tokens.
   Target: ratio <= 2. (The plain model projects all (L+1)·H tokens; the structured one computes only the query
   example's rows, because its copier is content-free, so the ratio is far below one.) The plain step's GFLOP are
   counted and printed beside it, to show its time is compute, not a measurement error.
3. The task-shaped transformer's training step (ours; robustness preset, quick and full tier) in steps per second
   and as a ratio to the structured step.
"""
from __future__ import annotations

import json
import time
from dataclasses import replace

import numpy as np
import torch
from torch import nn

from bma_verify.model.training import build_model, run_kernel, step_batch, train, training_loss
from bma_verify.reports.plans import preset_configs


class PlainAttentionModel(nn.Module):
    """Two causal nn.MultiheadAttention layers over the raster-ordered tokens, embedding and unembedding."""

    def __init__(self, d: int, width: int, heads: int, n_tokens: int):
        super().__init__()
        self.embed = nn.Embedding(d, width)
        self.pos = nn.Parameter(torch.zeros(n_tokens, width))
        self.layers = nn.ModuleList(nn.MultiheadAttention(width, heads, batch_first=True) for _ in range(2))
        self.unembed = nn.Linear(width, d)
        self.register_buffer("mask", torch.ones(n_tokens, n_tokens, dtype=torch.bool).triu(1))

    def loss(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos  # (B, N, width)
        for layer in self.layers:
            x = x + layer(x, x, x, attn_mask=self.mask, need_weights=False)[0]  # (B, N, width)
        logits = self.unembed(x[:, :-1])  # (B, N-1, d): next-token prediction
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def _training_step(model, loss_fn):
    """One AdamW training step of ``model`` on ``loss_fn()``, as a callable to time."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        loss = loss_fn()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def _step_seconds(step, repeats: int) -> float:
    step()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    return (time.perf_counter() - start) / repeats


def step_cost_ratio(repeats: int = 5) -> dict:
    """Seconds per training step of both models at the fig2 size, measured back to back."""
    config = preset_configs("fig2", tier="full", device="cpu")["fig2"]
    kernel = run_kernel(config)
    batch = step_batch(config, kernel, 0)
    context, query = torch.from_numpy(batch.context), torch.from_numpy(batch.query)
    structured = build_model(config, torch.Generator().manual_seed(0))
    width = config.K * config.d  # the copied slots of the structured model's residual stream
    n_tokens = (config.L + 1) * config.H
    plain = PlainAttentionModel(config.d, width, 4, n_tokens)  # 4 heads of 30: a conventional head size
    tokens = torch.cat([context, query[:, None]], dim=1).reshape(len(query), n_tokens)  # (B, N)

    t_structured = _step_seconds(_training_step(structured, lambda: structured.loss(context, query)), repeats)
    t_plain = _step_seconds(_training_step(plain, lambda: plain.loss(tokens)), repeats)
    # the plain step's cost is real, not a measurement error: count its multiply-adds (forward; a training step
    # is about 3x): per layer the four width x width projections of every token and the two N x N attention products
    B = len(query)
    forward = 2 * (4 * B * n_tokens * width * width + 2 * B * n_tokens * n_tokens * width) * 2  # 2 flops per MAC
    plain_gflop = 3 * forward / 1e9
    return {"structured_step_s": t_structured, "plain_mha_step_s": t_plain, "ratio": t_structured / t_plain,
            "width": width, "plain_heads": 4, "tokens": n_tokens, "batch": B, "target_ratio": 2.0,
            "plain_gflop_per_step": plain_gflop, "plain_gflop_per_s": plain_gflop / t_plain}


def task_shaped_step_cost(repeats: int = 5, tier: str = "full") -> dict:
    """Seconds per training step of the robustness preset's task-shaped transformer (relative positions, from
    scratch; ``tier``: "full" = the fig2 setting, "quick" = the report's reduced scale) against the fig2 structured
    model's step, measured back to back; and the task-shaped model's steps per second."""
    def seconds(config):
        kernel = run_kernel(config)
        batch = step_batch(config, kernel, 0)
        context, query = torch.from_numpy(batch.context), torch.from_numpy(batch.query)
        model = build_model(config, torch.Generator().manual_seed(0))
        return _step_seconds(_training_step(model, lambda: training_loss(model, config, context, query)), repeats)

    shaped = preset_configs("robustness", tier=tier, device="cpu")["task-shaped"]
    t_shaped = seconds(shaped)
    t_structured = seconds(preset_configs("fig2", tier="full", device="cpu")["fig2"])
    return {"task_shaped_step_s": t_shaped, "task_shaped_steps_per_s": 1 / t_shaped,
            "structured_step_s": t_structured, "ratio": t_shaped / t_structured,
            "task_shaped": {"K": shaped.K, "width": shaped.model.width, "batch": shaped.batch_size,
                            "d": shaped.d, "H": shaped.H, "L": shaped.L, "tier": tier}}


#: Query-loss gaps to BMA (nats/token) whose first crossing is timed.
GAP_TARGETS = (0.005, 0.002)


def fig2_time_to_gap(seed: int = 0, eval_every: int = 50) -> dict:
    """Train the full-tier fig2 preset; when the gap to the same run's BMA first falls to each of GAP_TARGETS.

    Returns the run's ``ms_per_step`` (training only), per target the ``step``, training ``seconds`` and parent
    accuracy at the first evaluation at or below it (None when never reached), the final gap and accuracies, and
    ``logit_floor_gap`` = the paper's logit-rule floor minus BMA's loss on the same held-out contexts.
    """
    config = replace(preset_configs("fig2", tier="full", seed=seed, device="cpu")["fig2"], eval_every=eval_every)
    run = train(config, quiet=True)
    m, c = run.metrics, run.metrics["curves"]
    gaps = np.asarray(c["query_loss"]) - m["bma_loss"]
    reached = {}
    for target in GAP_TARGETS:
        hit = np.flatnonzero(gaps <= target)
        reached[str(target)] = None if not hit.size else {"step": c["step"][hit[0]], "seconds": c["seconds"][hit[0]],
                                                          "parent_accuracy": c["parent_accuracy"][hit[0]]}
    return {"seed": seed, "steps": m["steps"], "train_seconds": m["seconds"],
            "ms_per_step": 1e3 * m["seconds"] / m["steps"], "reached": reached, "final_gap": m["gap_to_bma"],
            "final_parent_accuracy": m["parent_accuracy"], "bma_parent_accuracy": m["bma_parent_accuracy"],
            "logit_floor_gap": m["output_rule_gap"], "target_seconds": 60.0}


def main() -> None:
    ratio = step_cost_ratio()
    print(f"step cost: structured {ratio['structured_step_s'] * 1e3:.1f} ms, plain MHA "
          f"{ratio['plain_mha_step_s'] * 1e3:.1f} ms, ratio {ratio['ratio']:.2f} (target <= 2); the plain step is "
          f"~{ratio['plain_gflop_per_step']:.1f} GFLOP ({ratio['plain_gflop_per_s']:.1f} GFLOP/s achieved): it "
          f"projects all {ratio['tokens']} tokens of {ratio['batch']} contexts, the structured model only the query")
    shaped = {tier: task_shaped_step_cost(tier=tier, repeats=5 if tier == "quick" else 2) for tier in ("quick", "full")}
    for tier, cost in shaped.items():
        c = cost["task_shaped"]
        print(f"task-shaped transformer (robustness, {tier} tier: d = {c['d']}, H = {c['H']}, L = {c['L']}, "
              f"K = {c['K']}, width {c['width']}, batch {c['batch']}): {cost['task_shaped_step_s'] * 1e3:.1f} ms a "
              f"step ({cost['task_shaped_steps_per_s']:.2f} steps/s), {cost['ratio']:.1f}x the fig2 structured step")
    fig2 = fig2_time_to_gap()
    parts = []
    for target, hit in fig2["reached"].items():
        parts.append(f"gap <= {target}: " + ("not reached" if hit is None else
                                             f"step {hit['step']}, {hit['seconds']:.1f} s"))
    floor = fig2["logit_floor_gap"]
    print(f"fig2 (seed {fig2['seed']}, {torch.get_num_threads()} thread(s)): {fig2['ms_per_step']:.1f} ms/step; "
          f"{'; '.join(parts)}; final gap {fig2['final_gap']:.4f} after {fig2['steps']} steps "
          f"({fig2['train_seconds']:.1f} s), accuracy {fig2['final_parent_accuracy']:.3f} vs BMA "
          f"{fig2['bma_parent_accuracy']:.3f}")
    print(f"  the paper's logit-rule floor on the same contexts: {floor:.4f} nats above BMA; final gap / floor = "
          f"{fig2['final_gap'] / floor:.3f}, target 0.002 / floor = {0.002 / floor:.3f}")
    print(json.dumps({"step_cost": ratio, "task_shaped_step": shaped, "fig2": fig2}, indent=1))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
