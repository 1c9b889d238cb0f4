"""The standard GPT of exp-robustness: its training step beside ``torch.nn.TransformerEncoder`` of the same size.

Both models train on the same batch of flattened streams with the same embedding, next-token loss and AdamW: the
GPT (model/gpt.py: fused qkv, ``scaled_dot_product_attention(is_causal=True)``) and a pre-LN
``nn.TransformerEncoder`` (GELU, 4× FFN, no dropout) with a causal mask. Target: GPT step / encoder step <= 1.2.
Printed at both tiers' scales (the quick tier's reduced scale, the full tier's fig2 setting), with steps per second.
"""
from __future__ import annotations

import time

import torch
from torch import nn
from torch.nn import functional as F

from bma_verify.model.gpt import GPT
from bma_verify.model.gpt_training import gpt_config, gpt_loss, stream_tokens
from bma_verify.model.training import run_kernel, step_batch
from bma_verify.reports.claims.exp_robustness.claim import DECIDING_GPT
from bma_verify.reports.plans import preset_configs

#: The largest GPT step / encoder step accepted.
TARGET_RATIO = 1.2


class EncoderLM(nn.Module):
    """Token + absolute position embedding, a causal pre-LN ``nn.TransformerEncoder``, final LN and unembedding."""

    def __init__(self, d: int, n_tokens: int, depth: int, width: int, heads: int):
        super().__init__()
        self.token_embedding = nn.Embedding(d + 1, width)
        self.position_embedding = nn.Embedding(n_tokens, width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(width)
        self.unembed = nn.Linear(width, d, bias=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(n_tokens))

    def loss(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        T = inputs.shape[1]
        x = self.token_embedding(inputs) + self.position_embedding(torch.arange(T))
        logits = self.unembed(self.ln_f(self.encoder(x, mask=self.mask[:T, :T], is_causal=True)))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _seconds_per_step(parameters, loss_fn, repeats: int) -> float:
    optimizer = torch.optim.AdamW(parameters, lr=1e-3)

    def step():
        loss = loss_fn()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    step()  # warm-up
    best = float("inf")
    for _ in range(3):  # the fastest of three blocks: the least disturbed by other load
        start = time.perf_counter()
        for _ in range(repeats):
            step()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def gpt_step_cost(tier: str, repeats: int) -> dict:
    """Seconds per training step of the deciding GPT reading at ``tier``'s scale and of the encoder of its size."""
    config = preset_configs("robustness", tier=tier, device="cpu")[DECIDING_GPT[tier]]
    batch = step_batch(config, run_kernel(config), 0)
    gpt = GPT(gpt_config(config), generator=torch.Generator().manual_seed(0))
    g = gpt.config
    encoder = EncoderLM(g.d, g.n_tokens, g.depth, g.width, g.heads)
    inputs, targets = stream_tokens(batch.context, batch.query, g.d)
    t_gpt = _seconds_per_step(gpt.parameters(), lambda: gpt_loss(gpt, batch.context, batch.query), repeats)
    t_encoder = _seconds_per_step(encoder.parameters(), lambda: encoder.loss(inputs, targets), repeats)
    return {"tier": tier, "gpt_step_s": t_gpt, "encoder_step_s": t_encoder, "ratio": t_gpt / t_encoder,
            "steps_per_s": 1 / t_gpt, "tokens": g.n_tokens, "batch": config.batch_size, "width": g.width,
            "heads": g.heads, "depth": g.depth, "d": config.d, "H": config.H, "L": config.L}


def main() -> None:
    for tier, repeats in (("quick", 20), ("full", 3)):
        c = gpt_step_cost(tier, repeats)
        print(f"GPT ({tier} tier: d = {c['d']}, H = {c['H']}, L = {c['L']}, {c['tokens']} tokens, batch {c['batch']}, "
              f"depth {c['depth']}, width {c['width']}, {c['heads']} heads): {c['gpt_step_s'] * 1e3:.1f} ms a step "
              f"({c['steps_per_s']:.1f} steps/s); nn.TransformerEncoder of the same size, causal mask: "
              f"{c['encoder_step_s'] * 1e3:.1f} ms; ratio {c['ratio']:.2f} (target <= {TARGET_RATIO})")
