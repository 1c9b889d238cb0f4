"""A standard two-layer pre-norm transformer with FFNs and a summed residual (Appendix G; ``exp-robustness``).

Embeddings are summed: token + example index + position. To predict x^{L+1}_h without seeing it the model keeps
two streams (the two-stream attention of XLNet, Yang et al. 2019): a *content* stream that holds the real tokens,
and a *query* stream whose row h holds a [MASK] token at (example L+1, position h). Layer 1 (K heads): query
row h attends to every context token and to query-example tokens h' < h; content row h' of the query example
attends to context tokens and query-example tokens <= h'. Layer 2 (one head, the parent selector A^(2)): query
row h attends to content rows h' < h. Each layer: x + Attn(LN(x)), then x + FFN(LN(x)); output through a final
LayerNorm and an unembedding (the usual logit output).

The architecture can express BMA's parent selection exactly: tests/test_model_standard.py sets weights by hand
(head k copies x^k_h from the same position h, layer 2 scores Σ_k log π(copy_k(h) | copy_k(h'))) and gets
A^(2) = the BMA posterior to 1e-4. Trained from its N(0, 0.02) initialisation at d=5, H=10, L=10 it stays on the
uniform-attention plateau (parent accuracy ≈ chance) within the preset budgets: a layer-1 head must pick one
example AND the same position before layer 2 gets any pairing signal (same-position copies averaged over examples
carry none), and even with exact copies forced the random value/selector path learns only at small lr
(1e-3) and large batches (256). A run stuck there is inconclusive for ``exp-robustness``, not a counterexample.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from model._common import TwoLayerModel, causal_softmax, check_int_fields


@dataclass
class StandardConfig:
    """d, max_H, max_L (largest L), K layer-1 heads, width (divisible by K), ffn_mult."""

    d: int
    max_H: int
    max_L: int
    K: int
    width: int = 64
    ffn_mult: int = 4

    def __post_init__(self) -> None:
        check_int_fields(self, (("d", 2), ("max_H", 2), ("max_L", 1), ("K", 1), ("width", 1), ("ffn_mult", 1)))
        if self.width % self.K:
            raise ValueError(f"width must be divisible by K = {self.K}, got {self.width}")


class FeedForward(nn.Module):
    def __init__(self, width: int, mult: int):
        super().__init__()
        self.up = nn.Linear(width, mult * width)
        self.down = nn.Linear(mult * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class StandardTransformer(TwoLayerModel):
    """Two-stream, two-layer pre-norm transformer; layer 2 is a single head so A^(2) is one matrix."""

    def __init__(self, config: StandardConfig, *, generator: torch.Generator | None = None):
        super().__init__()
        self.config = c = config
        self.d, self.K = c.d, c.K
        w = c.width
        self.tok = nn.Embedding(c.d + 1, w)  # token c.d is [MASK]
        self.ex = nn.Embedding(c.max_L + 1, w)
        self.pos = nn.Embedding(c.max_H, w)
        self.ln1, self.ln1_kv = nn.LayerNorm(w), nn.LayerNorm(w)
        self.q1, self.k1, self.v1, self.o1 = (nn.Linear(w, w) for _ in range(4))
        self.ln1_ffn, self.ffn1 = nn.LayerNorm(w), FeedForward(w, c.ffn_mult)
        self.ln2, self.ln2_kv = nn.LayerNorm(w), nn.LayerNorm(w)
        self.q2, self.k2, self.v2, self.o2 = (nn.Linear(w, w) for _ in range(4))
        self.ln2_ffn, self.ffn2 = nn.LayerNorm(w), FeedForward(w, c.ffn_mult)
        self.ln_f, self.unembed = nn.LayerNorm(w), nn.Linear(w, c.d)
        with torch.no_grad():  # GPT-2 style N(0, 0.02) from the caller's generator: reproducible, no global seed
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    m.weight.copy_(torch.randn(m.weight.shape, generator=generator) * 0.02)
                if isinstance(m, nn.Linear):
                    m.bias.zero_()

    def forward(self, context, query) -> tuple[torch.Tensor, torch.Tensor]:
        context, query = self._tokens(context, query)
        log_att, log_probs = self._examples(context, query, all_examples=False)
        return log_att[:, 0], log_probs[:, 0]  # (B, H, H), (B, H, d)

    def example_log_probs(self, context, query) -> tuple[torch.Tensor, torch.Tensor]:
        """(log A^(2) (B, L+1, H, H), log-probs (B, L+1, H, d)) of every example l, each read from examples < l and
        its own prefix x^l_{<h} only (index L is the query: equal to ``forward``)."""
        context, query = self._tokens(context, query)
        return self._examples(context, query, all_examples=True)

    def loss(self, context, query) -> torch.Tensor:
        """Mean of −log f(x^l_h) over every example l = 1..L+1, positions h >= 1 and the batch (nats per token).

        The standard language-model objective: example l is predicted from the examples before it, exactly as the
        query is from the context (example 1 from example 0 alone is an easy, strong signal for "copy the same
        position of an earlier example"). Evaluation (``forward``, query loss, A^(2)) reads the query only.
        """
        log_probs = self.example_log_probs(context, query)[1]  # (B, L+1, H, d)
        context, query = self._tokens(context, query)
        tokens = torch.cat([context, query[:, None, :]], dim=1)  # (B, L+1, H)
        picked = log_probs.gather(-1, tokens[..., None])[..., 0]  # (B, L+1, H)
        return -picked[..., 1:].mean()

    def _examples(self, context: torch.Tensor, query: torch.Tensor, *, all_examples: bool
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """(log A^(2) (B, E, H, H), log-probs (B, E, H, d)) of the last example (E = 1) or of all L+1 (E = L+1)."""
        B, L, H = context.shape
        c = self.config
        if L > c.max_L or H > c.max_H:
            raise ValueError(f"context must have L <= max_L = {c.max_L} and H <= max_H = {c.max_H}, "
                             f"got L = {L}, H = {H}")
        dev = context.device
        first = 0 if all_examples else L  # first predicted example
        E, N = L + 1 - first, (L + 1) * H
        tokens = torch.cat([context, query[:, None, :]], dim=1)  # (B, L+1, H)
        ex, pos = self.ex(torch.arange(L + 1, device=dev)), self.pos(torch.arange(H, device=dev))  # (L+1, w), (H, w)
        content = (self.tok(tokens) + ex[None, :, None] + pos[None, None]).reshape(B, N, -1)  # (B, N, w)
        qstream = (self.tok.weight[c.d] + ex[first:, None] + pos[None]).reshape(1, E * H, -1)  # (1, E*H, w)
        own = content[:, first * H:]  # (B, E*H, w): content rows of the predicted examples

        # layer 1 in raster order i = l*H + h: query row i sees content j < i, content row i sees j <= i
        # (examples before l, and its own example before h, resp. up to h)
        rows = torch.cat([qstream.expand(B, -1, -1), own], dim=1)  # (B, 2EH, w)
        i = torch.arange(first * H, N, device=dev)
        j = torch.arange(N, device=dev)
        allowed = torch.cat([j[None] < i[:, None], j[None] <= i[:, None]], dim=0)  # (2EH, N)
        rows = rows + self._attention1(self.ln1(rows), self.ln1_kv(content), allowed)
        rows = rows + self.ffn1(self.ln1_ffn(rows))
        g, kv = rows[:, :E * H].view(B, E, H, -1), rows[:, E * H:].view(B, E, H, -1)  # (B, E, H, w) each

        # layer 2: the parent selector, one head, query row (l, h) over content rows (l, h'), h' < h
        q = self.q2(self.ln2(g))  # (B, E, H, w)
        kv = self.ln2_kv(kv)
        k = self.k2(kv)  # (B, E, H, w)
        log_att = causal_softmax(q @ k.transpose(-1, -2) / math.sqrt(c.width))  # (B, E, H, H)
        g = g + self.o2(log_att.exp() @ self.v2(kv))  # row 0 attends to nothing: it only gets o2's bias
        g = g + self.ffn2(self.ln2_ffn(g))
        return log_att, F.log_softmax(self.unembed(self.ln_f(g)), dim=-1)  # (B, E, H, H), (B, E, H, d)

    def _attention1(self, x: torch.Tensor, kv: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        B, R, w = x.shape
        K, hs = self.K, w // self.K
        q = self.q1(x).view(B, R, K, hs).transpose(1, 2)  # (B, K, R, hs)
        k = self.k1(kv).view(B, -1, K, hs).transpose(1, 2)  # (B, K, N, hs)
        v = self.v1(kv).view(B, -1, K, hs).transpose(1, 2)  # (B, K, N, hs)
        # a row with no key (query row (0, 0), excluded from every loss) reads zero: unmask it, zero its output
        seen = allowed.any(-1, keepdim=True)  # (R, 1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed | ~seen) * seen  # (B, K, R, hs)
        return self.o1(y.transpose(1, 2).reshape(B, R, w))  # (B, R, w)
