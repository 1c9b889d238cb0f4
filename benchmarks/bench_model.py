"""Model benchmarks (issue 5), each measured in one run on this machine:

1. fig2 to BMA: training time until the held-out query loss is within 0.005 nats/token of BMA's (and parent
   accuracy within one point of BMA's), and training steps per second (evaluation time excluded).
2. Step cost: a training step (forward, backward, AdamW) of StructuredTransformer at the fig2 size against the same
   step of a plain two-layer ``torch.nn.MultiheadAttention`` model of the same width on the same (L+1)·H tokens.
   Target: ratio <= 2. (The plain model projects all (L+1)·H tokens; the structured one computes only the query
   example's rows, because its copier is content-free, so the ratio is far below one.)
"""
from __future__ import annotations

import json
import time

import numpy as np
import torch
from torch import nn

from model.presets import preset_configs
from model.training import build_model, run_kernel, step_batch, train


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

    def stepper(model, loss_fn):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step():
            loss = loss_fn()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step

    t_structured = _step_seconds(stepper(structured, lambda: structured.loss(context, query)), repeats)
    t_plain = _step_seconds(stepper(plain, lambda: plain.loss(tokens)), repeats)
    return {"structured_step_s": t_structured, "plain_mha_step_s": t_plain, "ratio": t_structured / t_plain,
            "width": width, "plain_heads": 4, "tokens": n_tokens, "batch": len(query), "target_ratio": 2.0}


def fig2_time_to_gap(steps: int = 2000, seed: int = 0, eval_every: int = 50) -> dict:
    """Train the fig2 preset; report when the query-loss gap first drops to 0.005 nats and steps per second."""
    config = preset_configs("fig2", tier="full", steps=steps, seed=seed, device="cpu")["fig2"]
    config.eval_every = eval_every
    run = train(config, quiet=True)
    m, c = run.metrics, run.metrics["curves"]
    gaps = np.asarray(c["query_loss"]) - m["bma_loss"]
    acc_ok = np.asarray(c["parent_accuracy"]) >= m["bma_parent_accuracy"] - 0.01
    reached = np.flatnonzero((gaps <= 0.005) & acc_ok)
    first = int(reached[0]) if reached.size else None
    return {"steps": m["steps"], "train_seconds": m["seconds"], "steps_per_second": m["steps"] / m["seconds"],
            "final_gap": m["gap_to_bma"], "final_parent_accuracy": m["parent_accuracy"],
            "bma_parent_accuracy": m["bma_parent_accuracy"], "logit_floor_gap": m["output_rule_gap"],
            "step_at_gap": None if first is None else c["step"][first],
            "seconds_to_gap": None if first is None else c["seconds"][first], "target_seconds": 120.0}


def main() -> None:
    ratio = step_cost_ratio()
    print(f"step cost: structured {ratio['structured_step_s'] * 1e3:.1f} ms, plain MHA "
          f"{ratio['plain_mha_step_s'] * 1e3:.1f} ms, ratio {ratio['ratio']:.2f} (target <= 2)")
    fig2 = fig2_time_to_gap()
    reach = ("not reached" if fig2["seconds_to_gap"] is None
             else f"{fig2['seconds_to_gap']:.1f} s (step {fig2['step_at_gap']})")
    print(f"fig2: {fig2['steps_per_second']:.1f} steps/s; gap <= 0.005 with accuracy within 1 point: {reach}; "
          f"final gap {fig2['final_gap']:.4f}, accuracy {fig2['final_parent_accuracy']:.3f} vs BMA "
          f"{fig2['bma_parent_accuracy']:.3f}")
    print(json.dumps({"step_cost": ratio, "fig2": fig2}, indent=1))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
