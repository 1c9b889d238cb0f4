"""The 2-simplicial (trilinear) construction for k-parent DAGs (claim ``ext-dag-construction``, ours).

Layer 1 is the tree model's copier, reused as it is (:class:`model.structured.StructuredTransformer`'s
``copier_attention`` and ``copies``): K heads, each copying one context example's token at the query's position.
Layer 2 attends over candidate parent *sets* S_c = (s_1 < … < s_k) (the colex list of
:func:`numerics.dag_candidate_sets`; row h reads the first C(h, k) of them) with the (k+1)-linear score

    score[h, c] = Σ_slot Σ_{i_1..i_k, j} v_{s_1}[slot, i_1] ⋯ v_{s_k}[slot, i_k] · T[row(i_1..i_k), j] · v_h[slot, j],

T a (d**k, d) table (rows encoded first-parent-most-significant, as :func:`numerics.encode_parent_values`). With
exact one-hot copies this is Σ_l T[row(x^l_{S_c}), x^l_h]; with T = log π_k it is the log-likelihood of S_c, and the
softmax over c is the exact set posterior. For k = 2 this is softmax over pairs (a, b) of Σ_l T[x^l_a, x^l_b, x^l_h]
(2-simplicial attention). A bilinear selector (score v_aᵀ W v_h, or a sum over the k parents of bilinear terms)
cannot express it: the trilinear term couples the two parents' values.

Output (``mixture``): f_h = Σ_c A[h, c] softmax(W_OV)[row(x^{L+1}_{S_c})], W_OV of shape (d**k, d); rows h < k have
no choice and are uniform (excluded from the comparison, like row 0 of the tree model).

k = 1 is the tree model: with T = W (one block shared by all slots) the score is the tree selector's with a
block-diagonal W_KQ = diag(W, …, W) (tests/test_pair_attention.py checks it against
:func:`model.construction.bma_construction`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bma_verify.model.structured import StructuredConfig, StructuredTransformer
from bma_verify.numerics.dag import check_dag_kernels, dag_bma_predictive, dag_candidate_sets, dag_parent_posterior


@dataclass
class PairAttentionConfig:
    """Sizes of a :class:`PairAttentionTransformer`: the tree model's copier sizes plus the order k."""
    d: int
    k: int
    max_H: int
    max_L: int
    K: int
    beta: float = 1.0
    init_std: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or isinstance(self.k, bool) or self.k < 1:
            raise ValueError(f"k must be an integer >= 1, got {self.k!r}")
        self.copier()  # validates d, max_H, max_L, K, beta

    def copier(self) -> StructuredConfig:
        return StructuredConfig(d=self.d, max_H=self.max_H, max_L=self.max_L, K=self.K, output="mixture",
                                beta=self.beta, init_std=self.init_std)


class PairAttentionTransformer(StructuredTransformer):
    """The tree model's copier, then (k+1)-linear attention over candidate parent sets (module docstring)."""
    def __init__(self, config: PairAttentionConfig, *, generator: torch.Generator | None = None):
        super().__init__(config.copier(), generator=generator)
        self.pair_config = config
        self.k = config.k
        del self.W_KQ  # the bilinear selector is replaced by the table T
        self.T = nn.Parameter(torch.zeros(config.d ** config.k, config.d))
        self.W_OV = nn.Parameter(torch.zeros(config.d ** config.k, config.d))

    def candidate_sets(self, H: int) -> torch.Tensor:
        if self.k > H - 1:
            raise ValueError(f"H must be at least k + 1 = {self.k + 1}, got {H}")
        return torch.as_tensor(dag_candidate_sets(H, self.k), device=self.T.device)

    def set_copies(self, v: torch.Tensor, sets: torch.Tensor) -> torch.Tensor:
        """The outer product of the k key copies of each candidate set: (B, C, K, d**k), first parent most
        significant (one-hot copies give the one-hot of the encoded parent values)."""
        out = v[:, sets[:, 0]]  # (B, C, K, d)
        for i in range(1, self.k):
            nxt = v[:, sets[:, i]]  # (B, C, K, d)
            out = (out[..., :, None] * nxt[..., None, :]).flatten(-2)  # (B, C, K, d**(i+1))
        return out

    def set_scores(self, v: torch.Tensor, H: int) -> torch.Tensor:
        """score[b, h, c] of the module docstring, (B, H, C(H, k)) before the mask."""
        sets = self.candidate_sets(H)
        keys = self.set_copies(v, sets) @ self.T  # (B, C, K, d)
        return torch.einsum("bcsj,bhsj->bhc", keys, v)  # (B, H, C)

    def attend_and_output(self, scores: torch.Tensor, query: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Masked softmax over the live candidates of each row h >= k, and the mixture output."""
        B, H, C = scores.shape
        live = torch.arange(C, device=scores.device)[None, :] < torch.tensor(
            [math.comb(h, self.k) if h >= self.k else 0 for h in range(H)], device=scores.device)[:, None]  # (H, C)
        log_att = torch.full_like(scores, float("-inf"))  # (B, H, C)
        rows = scores[:, self.k:].masked_fill(~live[self.k:], float("-inf"))  # (B, H-k, C)
        log_att[:, self.k:] = F.log_softmax(rows, dim=-1)
        sets = self.candidate_sets(H)  # (C, k)
        code = query[:, sets[:, 0]]  # (B, C)
        for i in range(1, self.k):
            code = code * self.d + query[:, sets[:, i]]  # (B, C)
        out_rows = F.softmax(self.W_OV, dim=-1)[code]  # (B, C, d)
        mixed = log_att[:, self.k:].exp() @ out_rows  # (B, H-k, d)
        mixed = torch.log(mixed.clamp_min(torch.finfo(mixed.dtype).tiny))  # (B, H-k, d)
        first = torch.full((B, self.k, self.d), -float(np.log(self.d)), dtype=mixed.dtype,
                           device=mixed.device)  # (B, k, d): rows h < k uniform
        return log_att, torch.cat([first, mixed], dim=1)  # (B, H, C), (B, H, d)

    def forward(self, context, query) -> tuple[torch.Tensor, torch.Tensor]:
        """(log A (B, H, C(H, k)), log f (B, H, d)); row h of A is a law over the first C(h, k) sets (h >= k)."""
        context, query = self.checked_tokens(context, query)
        v = self.copies(context, query)  # (B, H, K, d): the tree model's copier
        return self.attend_and_output(self.set_scores(v, context.shape[2]), query)

    def loss(self, context, query) -> torch.Tensor:
        """Mean over h >= k and batch of −log f_h(x^{L+1}_h)."""
        log_probs = self(context, query)[1]  # (B, H, d)
        query = torch.as_tensor(query, device=log_probs.device)  # (B, H)
        picked = log_probs.gather(-1, query[..., None].long())[..., 0]  # (B, H)
        return -picked[:, self.k:].mean()


def pair_construction(kernels, L: int, beta: float, *, max_H: int = 16, table=None,
                      dtype: torch.dtype = torch.float64) -> PairAttentionTransformer:
    """The constructed model: the tree construction's copier (K = L heads, head k copies the example at offset
    k + 1: w_L[k, k+1] = w_H[0] = 1), T = log π_k (or ``table``, e.g. a wrong one for a control) and
    W_OV = log π_k, so σ(W_OV) = π_k.

    Parameters
    ----------
    kernels : (π_1, ..., π_k), π_k strictly positive; L : int >= 1; beta : copier scale; max_H : longest chain;
    table : optional (d**k, d) real table used as T in place of log π_k.
    """
    kernels = check_dag_kernels(kernels)
    top = kernels[-1]
    if np.any(top <= 0):
        raise ValueError("kernels[-1] must be strictly positive (T = log π_k must be finite); draw it with eps > 0")
    if not isinstance(L, (int, np.integer)) or L < 1:
        raise ValueError(f"L must be an integer >= 1 (K = L copier heads), got {L!r}")
    d, k, L = top.shape[1], len(kernels), int(L)
    config = PairAttentionConfig(d=d, k=k, max_H=max_H, max_L=L, K=L, beta=float(beta), init_std=0.0)
    model = PairAttentionTransformer(config).to(dtype)
    T = np.log(top) if table is None else np.asarray(table, dtype=np.float64)
    if T.shape != top.shape:
        raise ValueError(f"table must have shape {top.shape}, got {T.shape}")
    with torch.no_grad():
        model.w_L.zero_()
        model.w_H.zero_()
        heads = torch.arange(L)
        model.w_L[heads, heads + 1] = 1.0
        model.w_H[:, max_H - 1] = 1.0
        model.T.copy_(torch.as_tensor(T, dtype=dtype))
        model.W_OV.copy_(torch.as_tensor(np.log(top), dtype=dtype))
    return model.eval()


def construction_errors(kernels, context, query, betas, init=None, *, table=None) -> dict:
    """max |A − posterior| and max |f − BMA predictive| (rows h >= k) of :func:`pair_construction` at each β.

    Returns {"beta": [...], "posterior_error": [...], "predictive_error": [...]} (floats)."""
    kernels = check_dag_kernels(kernels)
    k = len(kernels)
    context, query = np.asarray(context), np.asarray(query)
    posterior = dag_parent_posterior(kernels, context)
    predictive = dag_bma_predictive(kernels, context, query, init)
    out = {"beta": [], "posterior_error": [], "predictive_error": []}
    for beta in betas:
        model = pair_construction(kernels, context.shape[-2], beta, max_H=context.shape[-1], table=table)
        with torch.no_grad():
            log_att, log_f = model(context, query)
        att, f = log_att.exp().numpy(), log_f.exp().numpy()
        out["beta"].append(float(beta))
        out["posterior_error"].append(float(np.abs(att[:, k:] - posterior[:, k:]).max()))
        out["predictive_error"].append(float(np.abs(f[:, k:] - predictive[:, k:]).max()))
    return out
