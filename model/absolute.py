"""A disentangled two-layer transformer with absolute position embeddings (Appendix G; ``exp-robustness``).

Every token carries p(l, h) = [e_l; e_h], the one-hot example index and position. Layer 1 has K content-free heads
with logit p(L, h)ᵀ Q^k p(l', h') from the query example's row h to the key (l', h') (keys of the query example at
h' >= h are masked, as in the structured model); the value is the key's one-hot token. The residual stream is the
concatenation z_h = [x_h, e_h, v_h]. Layer 2 is one bilinear head over h' < h with score
[x_{h'}, e_{h'}, v_{h'}]ᵀ W_KQ [e_h, v_h]: the query side leaves x_h out, so x^{L+1}_h never reaches its own
prediction. Output rules as in :func:`model.two_layer.output_log_probs`. Example indices are absolute, so a context
may hold at most ``max_L`` examples (a longer one raises ``ValueError``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bma_verify.model.two_layer import (TwoLayerModel, causal_softmax, check_int_fields, check_output_rule,
                                        output_log_probs)


@dataclass
class AbsoluteConfig:
    """d, max_H, max_L (largest L), K heads, output rule, init_std of the random layer-1 weights."""

    d: int
    max_H: int
    max_L: int
    K: int
    output: str = "mixture"
    init_std: float = 1.0

    def __post_init__(self) -> None:
        check_int_fields(self, (("d", 2), ("max_H", 2), ("max_L", 1), ("K", 1)))
        check_output_rule(self.output)


class AbsolutePETransformer(TwoLayerModel):
    """Two-layer disentangled transformer, absolute position embeddings, bilinear selector (Appendix G)."""

    def __init__(self, config: AbsoluteConfig, *, generator: torch.Generator | None = None):
        super().__init__()
        self.config = config
        c = config
        self.d, self.K = c.d, c.K
        P = c.max_L + 1 + c.max_H  # width of p(l, h) = [e_l; e_h]
        self.Q = nn.Parameter(torch.randn(c.K, P, P, generator=generator) * c.init_std)  # layer-1 logits
        key_width, query_width = c.d + c.max_H + c.K * c.d, c.max_H + c.K * c.d
        self.W_KQ = nn.Parameter(torch.zeros(key_width, query_width))  # [key feature, query feature]
        self.W_OV = nn.Parameter(torch.zeros(c.d, c.d))

    def copier_attention(self, L: int, H: int) -> torch.Tensor:
        """Layer-1 attention (K, H, (L+1)·H) of the query example's rows (content-free: one for the batch)."""
        c = self.config
        if L > c.max_L or H > c.max_H:
            raise ValueError(f"context must have L <= max_L = {c.max_L} and H <= max_H = {c.max_H} "
                             f"(absolute embeddings), got L = {L}, H = {H}")
        dev = self.Q.device
        l_idx = torch.arange(L + 1, device=dev)  # example rows of Q
        h_idx = c.max_L + 1 + torch.arange(H, device=dev)  # position rows of Q
        q_l, q_h = l_idx[L], h_idx  # the query example's rows h
        # logit[k, h, l', h'] = Q[L, l'] + Q[L, h'] + Q[h, l'] + Q[h, h'] (bilinear form of one-hot concatenations)
        Qk = self.Q
        logits = (Qk[:, q_l, l_idx][:, None, :, None] + Qk[:, q_l, h_idx][:, None, None, :]
                  + Qk[:, q_h][:, :, l_idx][:, :, :, None] + Qk[:, q_h][:, :, h_idx][:, :, None, :])  # (K, H, L+1, H)
        h = torch.arange(H, device=dev)
        own = torch.zeros(L + 1, dtype=torch.bool, device=dev)
        own[L] = True
        masked = own[None, :, None] & (h[None, :] >= h[:, None])[:, None, :]  # (H, L+1, H)
        logits = logits.masked_fill(masked, float("-inf"))
        return F.softmax(logits.reshape(c.K, H, (L + 1) * H), dim=-1)  # (K, H, (L+1)H)

    def forward(self, context, query) -> tuple[torch.Tensor, torch.Tensor]:
        context, query = self.checked_tokens(context, query)
        B, L, H = context.shape
        c = self.config
        dtype = self.Q.dtype
        tokens = torch.cat([context, query[:, None, :]], dim=1).reshape(B, (L + 1) * H)  # (B, (L+1)H)
        onehot = F.one_hot(tokens, self.d).to(dtype)  # (B, (L+1)H, d)
        v = torch.einsum("khn,bnd->bhkd", self.copier_attention(L, H), onehot).reshape(B, H, self.K * self.d)
        pos = torch.eye(c.max_H, dtype=dtype, device=v.device)[:H].expand(B, H, c.max_H)  # (B, H, max_H)
        x = F.one_hot(query, self.d).to(dtype)  # (B, H, d)
        key_feat = torch.cat([x, pos, v], dim=-1)  # (B, H, d + max_H + Kd)
        query_feat = torch.cat([pos, v], dim=-1)  # (B, H, max_H + Kd): no x_h
        scores = query_feat @ (key_feat @ self.W_KQ).transpose(1, 2)  # (B, H[h], H[h'])
        log_att = causal_softmax(scores)  # (B, H, H)
        return log_att, output_log_probs(log_att, query, self.W_OV, c.output)
