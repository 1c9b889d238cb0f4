"""A standard decoder-only transformer (GPT) on the flattened token stream of a context (``exp-robustness``).

The model is nanoGPT's: token embedding plus a position reading, pre-LayerNorm blocks of causal multi-head
attention (``scaled_dot_product_attention(is_causal=True)``, no other mask) and a 4× GELU FFN, a final LayerNorm
and an unembedding, GPT-2's N(0, 0.02) initialisation (residual projections scaled by 1/√(2·depth)). Nothing in it
knows the task: the L + 1 examples of H tokens are one stream of (L + 1)·H tokens behind a BOS token, and every
token is predicted from the ones before it.

Two position readings: ``"absolute"`` (a learned embedding per stream position) and ``"rope"`` (rotary embeddings
on queries and keys, so "the same position k examples back" is the fixed offset k·H).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

#: The position readings of :class:`GPT`.
GPT_POSITIONS = ("absolute", "rope")
#: GPT-2's initialisation scale of every weight matrix and embedding.
INIT_STD = 0.02


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of a :class:`GPT`: ``d`` token values (the vocabulary is d + 1 with BOS), ``n_tokens`` stream positions,
    ``depth`` blocks of ``width`` channels split over ``heads`` heads, and the position reading."""

    d: int
    n_tokens: int
    depth: int = 2
    width: int = 64
    heads: int = 4
    position: str = "absolute"

    def __post_init__(self) -> None:
        for name, minimum in (("d", 2), ("n_tokens", 1), ("depth", 1), ("width", 1), ("heads", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
        if self.width % self.heads or (self.width // self.heads) % 2:
            raise ValueError(f"width must split into heads of an even size, got width {self.width} for "
                             f"{self.heads} heads")
        if self.position not in GPT_POSITIONS:
            raise ValueError(f"position must be one of {GPT_POSITIONS}, got {self.position!r}")


def rotary_tables(n_tokens: int, head_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each (n_tokens, head_size / 2): RoPE's angles t · 10000^(−2i/head_size)."""
    inv_freq = 10000.0 ** (-torch.arange(0, head_size, 2, dtype=torch.float64) / head_size)
    angles = torch.arange(n_tokens, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return angles.cos().float(), angles.sin().float()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x_i, x_{i + head_size/2}) of ``x`` (B, heads, T, head_size) by its position's angle."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with one fused q, k, v projection."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.heads, self.rope = config.heads, config.position == "rope"
        self.qkv = nn.Linear(config.width, 3 * config.width)
        self.proj = nn.Linear(config.width, config.width)

    def queries_keys_values(self, x: torch.Tensor, rotary) -> tuple[torch.Tensor, ...]:
        """q, k, v of ``x`` (B, T, width), each (B, heads, T, head_size), RoPE applied to q and k."""
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in self.qkv(x).split(C, dim=2))
        if self.rope:
            cos, sin = rotary
            q, k = apply_rotary(q, cos[:T], sin[:T]), apply_rotary(k, cos[:T], sin[:T])
        return q, k, v

    def forward(self, x: torch.Tensor, rotary=None) -> torch.Tensor:
        q, k, v = self.queries_keys_values(x, rotary)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, heads, T, head_size)
        return self.proj(y.transpose(1, 2).reshape(x.shape))

    def weights(self, x: torch.Tensor, rotary=None) -> torch.Tensor:
        """The attention weights (B, heads, T, T) that :meth:`forward` uses (for diagnostics, not training)."""
        q, k, _ = self.queries_keys_values(x, rotary)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        T = x.shape[1]
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        return scores.masked_fill(future, float("-inf")).softmax(dim=-1)


class MLP(nn.Module):
    """The 4× GELU feed-forward block."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(config.width, 4 * config.width)
        self.proj = nn.Linear(4 * config.width, config.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    """Pre-LayerNorm residual block: x + attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(config.width), nn.LayerNorm(config.width)
        self.attn, self.mlp = CausalSelfAttention(config), MLP(config)

    def forward(self, x: torch.Tensor, rotary=None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), rotary)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Decoder-only transformer: ``forward(tokens)`` (B, T) ints in 0..d (d is BOS) → next-token logits (B, T, d)."""

    def __init__(self, config: GPTConfig, generator: torch.Generator | None = None):
        super().__init__()
        self.config = config
        self.token_embedding = nn.Embedding(config.d + 1, config.width)  # the d values and BOS
        if config.position == "absolute":
            self.position_embedding = nn.Embedding(config.n_tokens, config.width)
        else:
            cos, sin = rotary_tables(config.n_tokens, config.width // config.heads)
            self.register_buffer("rotary_cos", cos, persistent=False)
            self.register_buffer("rotary_sin", sin, persistent=False)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.depth))
        self.ln_f = nn.LayerNorm(config.width)
        self.unembed = nn.Linear(config.width, config.d, bias=False)
        self._init_weights(generator)

    @torch.no_grad()
    def _init_weights(self, generator: torch.Generator | None) -> None:
        """GPT-2: N(0, 0.02) weights and embeddings, zero biases, residual projections N(0, 0.02/√(2·depth))."""
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif "ln_" in name:
                p.fill_(1.0)
            else:
                std = INIT_STD / math.sqrt(2 * self.config.depth) if name.endswith("proj.weight") else INIT_STD
                p.copy_(torch.randn(p.shape, generator=generator) * std)

    def _rotary(self):
        return (self.rotary_cos, self.rotary_sin) if self.config.position == "rope" else None

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        T = tokens.shape[1]
        if T > self.config.n_tokens:
            raise ValueError(f"tokens must hold at most n_tokens = {self.config.n_tokens} positions, got {T}")
        x = self.token_embedding(tokens)
        if self.config.position == "absolute":
            x = x + self.position_embedding(torch.arange(T, device=tokens.device))
        return x

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x, rotary = self._embed(tokens), self._rotary()
        for block in self.blocks:
            x = block(x, rotary)
        return self.unembed(self.ln_f(x))

    @torch.no_grad()
    def attention_weights(self, tokens: torch.Tensor) -> torch.Tensor:
        """Every layer's attention weights, (depth, B, heads, T, T)."""
        x, rotary, out = self._embed(tokens), self._rotary(), []
        for block in self.blocks:
            out.append(block.attn.weights(block.ln_1(x), rotary))
            x = block(x, rotary)
        return torch.stack(out)
