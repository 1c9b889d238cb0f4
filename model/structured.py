"""The structured two-layer transformer (the paper's Eq. 7 as this package reads it; docs/claims.md).

Layer 1 (the copier): K heads with relative-position logits only, β·(w_L[l − l'] + w_H[h − h']); value = the
key's one-hot token. Residual stream: concatenation z_h = [x_h, v_h], v_h = [head_1, …, head_K] ∈ R^{Kd}.
Layer 2 (the selector): one head over keys h' < h of the query example with score v_{h'}ᵀ W_KQ v_h.
Output: ``logit`` or ``mixture`` (see :func:`model.two_layer.output_log_probs`).

Only the query example's rows are computed: the selector reads nothing else. Claim ids served:
``thm1-construction``, ``bma-score-identity``, ``thm3-init-gradient``, ``exp-fig2-attention``,
``exp-fig3-parameters``, ``exp-fig5-generalization``, ``exp-fig6-column-alignment``.

No leakage: the copier's row h of the query example masks the query example's keys h' >= h, and the selector's
query side is v_h alone (the x_h block of W_KQ is fixed at zero), so x^{L+1}_h and every later query token never
reach the prediction for h.

Offsets beyond the training range: example offsets l − l' larger than ``max_L`` (the training L) share the
weight of offset ``max_L`` (clipped relative positions, as in Shaw et al. 2018). Position offsets are defined for
|h − h'| < ``max_H`` and a longer chain raises ``ValueError``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bma_verify.model.two_layer import (TwoLayerModel, causal_softmax, check_int_fields, check_output_rule,
                                        output_log_probs)


@dataclass
class StructuredConfig:
    """Sizes of a :class:`StructuredTransformer`.

    d : vocabulary size; max_H : longest chain; max_L : training L (range of learned example offsets);
    K : copier heads (independent of L); output : "logit" | "mixture"; beta : RPE logit scale β (fixed);
    init_std : standard deviation of the random initial w_L, w_H (W_KQ and W_OV start at zero, as in Thm 3).
    """

    d: int
    max_H: int
    max_L: int
    K: int
    output: str = "mixture"
    beta: float = 1.0
    init_std: float = 1.0

    def __post_init__(self) -> None:
        check_int_fields(self, (("d", 2), ("max_H", 2), ("max_L", 1), ("K", 1)))
        check_output_rule(self.output)
        if not (self.beta > 0):
            raise ValueError(f"beta must be a positive RPE logit scale, got {self.beta!r}")


class StructuredTransformer(TwoLayerModel):
    """Two-layer disentangled transformer with an RPE copier and a bilinear parent selector (Eq. 7)."""

    def __init__(self, config: StructuredConfig, *, generator: torch.Generator | None = None):
        super().__init__()
        self.config = config
        c = config
        self.d, self.K = c.d, c.K
        self.beta = float(c.beta)
        self.w_L = nn.Parameter(torch.randn(c.K, c.max_L + 1, generator=generator) * c.init_std)  # offsets 0..max_L
        # w_H[:, o + max_H - 1] is the weight of offset o = h - h' in -(max_H-1)..(max_H-1)
        self.w_H = nn.Parameter(torch.randn(c.K, 2 * c.max_H - 1, generator=generator) * c.init_std)
        self.W_KQ = nn.Parameter(torch.zeros(c.K * c.d, c.K * c.d))  # [key slot, query slot]
        self.W_OV = nn.Parameter(torch.zeros(c.d, c.d))  # row = the key's token, column = the predicted token

    def copier_attention(self, L: int, H: int) -> torch.Tensor:
        """Layer-1 attention (K, H, (L+1)·H) of the query example's rows over all tokens in raster order.

        Content-free, so one pattern serves the whole batch. Keys of the query example at h' >= h are masked.
        """
        c = self.config
        if H > c.max_H:
            raise ValueError(f"H must be at most max_H = {c.max_H} (the learned position offsets), got {H}")
        dev = self.w_L.device
        l_offset = (L - torch.arange(L + 1, device=dev)).clamp(max=c.max_L)  # (L+1,), query example = offset 0
        h = torch.arange(H, device=dev)
        h_offset = h[:, None] - h[None, :] + c.max_H - 1  # (H, H) [query h, key h']
        logits = self.w_L[:, l_offset][:, None, :, None] + self.w_H[:, h_offset][:, :, None, :]  # (K, H, L+1, H)
        logits = self.beta * logits
        own = torch.zeros(L + 1, dtype=torch.bool, device=dev)
        own[L] = True
        future = h[None, :] >= h[:, None]  # (H, H): key h' >= query h
        masked = own[None, :, None] & future[:, None, :]  # (H, L+1, H)
        logits = logits.masked_fill(masked, float("-inf"))
        return F.softmax(logits.reshape(c.K, H, (L + 1) * H), dim=-1)  # (K, H, (L+1)H)

    def copies(self, context: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """v (B, H, K, d): head k's copy at each position of the query example."""
        B, L, H = context.shape
        tokens = torch.cat([context, query[:, None, :]], dim=1).reshape(B, (L + 1) * H)  # (B, (L+1)H)
        onehot = F.one_hot(tokens, self.d).to(self.w_L.dtype)  # (B, (L+1)H, d)
        att = self.copier_attention(L, H)  # (K, H, (L+1)H)
        return torch.einsum("khn,bnd->bhkd", att, onehot)  # (B, H, K, d)

    def selector_scores(self, v: torch.Tensor) -> torch.Tensor:
        """score[b, h, h'] = v_{h'}ᵀ W_KQ v_h over the copied slots, (B, H, H) before the causal mask."""
        B, H = v.shape[:2]
        flat = v.reshape(B, H, self.K * self.d)  # (B, H, Kd)
        keys = flat @ self.W_KQ  # (B, H, Kd): v_{h'}ᵀ W_KQ
        return flat @ keys.transpose(1, 2)  # (B, H[query h], H[key h'])

    def attend_and_output(self, scores: torch.Tensor, query: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """From scores[b, h, h'] (query h, key h') to (log A^(2), log f); used by Thm 3 with p̂ = scores."""
        log_att = causal_softmax(scores)  # (B, H, H)
        return log_att, output_log_probs(log_att, query, self.W_OV, self.config.output)

    def forward(self, context, query) -> tuple[torch.Tensor, torch.Tensor]:
        context, query = self.checked_tokens(context, query)
        v = self.copies(context, query)  # (B, H, K, d)
        scores = self.selector_scores(v)  # (B, H, H)
        return self.attend_and_output(scores, query)
