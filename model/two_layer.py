"""What the two-layer models share: token checks, the causal selector softmax and the two output rules; and the
integer-field check that every model's config runs (``check_int_fields``, the attention-only and selective-induction
models' included).

Every model reads ``context`` (B, L, H) and ``query`` (B, H) integer tokens and returns, from ``forward``, the
second-layer attention A^(2) (B, H, H) (row h a law over h' < h, row 0 zero) and log-probabilities (B, H, d)
for x^{L+1}_h. Claim ids served: ``thm1-construction``, ``exp-*`` (docs/claims.md).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

#: The two output rules of :func:`output_log_probs`.
OUTPUT_RULES = ("logit", "mixture")


def check_output_rule(output: str) -> str:
    """``output`` itself, if it is one of ``OUTPUT_RULES``; ``ValueError`` otherwise."""
    if output not in OUTPUT_RULES:
        raise ValueError(f"output must be one of {OUTPUT_RULES}, got {output!r}")
    return output


def as_tokens(x, d: int, name: str, device, ndim: int) -> torch.Tensor:
    """``x`` as an int64 tensor on ``device`` with ``ndim`` axes and entries in 0..d-1 (NumPy accepted)."""
    if isinstance(x, np.ndarray):
        if not np.issubdtype(x.dtype, np.integer):
            raise ValueError(f"{name} must hold integer tokens, got dtype {x.dtype}")
        x = torch.from_numpy(np.ascontiguousarray(x, dtype=np.int64))
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor or numpy array of tokens, got {type(x).__name__}")
    if x.dtype.is_floating_point or x.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer tokens, got dtype {x.dtype}")
    if x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} axes, got shape {tuple(x.shape)}")
    if x.numel() and (int(x.min()) < 0 or int(x.max()) >= d):
        raise ValueError(f"{name} must hold tokens in 0..{d - 1}, got range {int(x.min())}..{int(x.max())}")
    return x.to(device=device, dtype=torch.long)


def causal_softmax(scores: torch.Tensor) -> torch.Tensor:
    """Row h: softmax of ``scores[..., h, :]`` over h' < h; entries h' >= h and row 0 are zero.

    Returns log-attention (−inf where masked, row 0 all −inf): L_pa is −log A, read without underflow.
    """
    H = scores.shape[-1]
    allowed = torch.ones(H, H, dtype=torch.bool, device=scores.device).tril(-1)  # (H, H), h' < h
    log_att = torch.full_like(scores, float("-inf"))
    rows = scores[..., 1:, :].masked_fill(~allowed[1:], float("-inf"))  # (B, H-1, H)
    log_att[..., 1:, :] = F.log_softmax(rows, dim=-1)
    return log_att


def output_log_probs(log_att: torch.Tensor, query: torch.Tensor, W_OV: torch.Tensor, output: str) -> torch.Tensor:
    """Log-probabilities (B, H, d) of x^{L+1}_h from A^(2) and the query tokens (the two output rules).

    ``logit``:   f_h = softmax(Σ_{h'} A_{h→h'} W_OV[x_{h'}])            (a geometric mixture of the rows)
    ``mixture``: f_h = Σ_{h'} A_{h→h'} softmax(W_OV)[x_{h'}]           (an arithmetic mixture; BMA's form)
    Row 0 has no candidate parent and is uniform under both rules (it is excluded from every loss).
    """
    d = W_OV.shape[0]
    if output == "logit":
        att = log_att.exp()  # (B, H, H), row 0 zero
        logits = att @ W_OV[query]  # (B, H, H) @ (B, H, d) -> (B, H, d)
        return F.log_softmax(logits, dim=-1)
    rows = F.softmax(W_OV, dim=-1)[query]  # (B, H, d): σ(W_OV)[x_{h'}], strictly positive
    mixed = log_att[:, 1:].exp() @ rows  # (B, H-1, H) @ (B, H, d) -> (B, H-1, d), each row a law
    mixed = torch.log(mixed.clamp_min(torch.finfo(mixed.dtype).tiny))  # clamp only guards underflow
    first = torch.full_like(mixed[:, :1], -float(np.log(d)))  # (B, 1, d) uniform row 0
    return torch.cat([first, mixed], dim=1)  # (B, H, d)


class TwoLayerModel(nn.Module):
    """Base class: subclasses implement ``forward(context, query) -> (log_att (B,H,H), log_probs (B,H,d))``."""
    d: int

    def checked_tokens(self, context, query) -> tuple[torch.Tensor, torch.Tensor]:
        """``context`` (B, L, H) and ``query`` (B, H) as int64 tensors on the model's device, checked against each
        other (B and H agree, L >= 1, H >= 2) and against d; the first step of every subclass's ``forward``."""
        device = next(self.parameters()).device
        context = as_tokens(context, self.d, "context", device, 3)
        query = as_tokens(query, self.d, "query", device, 2)
        if context.shape[0] != query.shape[0] or context.shape[2] != query.shape[1]:
            raise ValueError(f"query must have shape (B, H) = ({context.shape[0]}, {context.shape[2]}) to match "
                             f"context (B, L, H) = {tuple(context.shape)}; got {tuple(query.shape)}")
        if context.shape[1] < 1:
            raise ValueError("context must hold at least one example (L >= 1)")
        if context.shape[2] < 2:
            raise ValueError(f"context must have H >= 2 positions, got {context.shape[2]}")
        return context, query

    def predict(self, context, query) -> torch.Tensor:
        """Probabilities (B, H, d) of x^{L+1}_h given the context and the query prefix x^{L+1}_{<h}."""
        return self(context, query)[1].exp()

    def parent_attention(self, context, query) -> torch.Tensor:
        """A^(2) (B, H, H): row h is the layer-2 attention over h' < h (row 0 and h' >= h zero)."""
        return self(context, query)[0].exp()

    def loss(self, context, query) -> torch.Tensor:
        """Mean over h >= 1 and batch of −log f_h(x^{L+1}_h), nats per token (the training objective)."""
        log_probs = self(context, query)[1]  # (B, H, d)
        query = as_tokens(query, self.d, "query", log_probs.device, 2)
        picked = log_probs.gather(-1, query[..., None])[..., 0]  # (B, H)
        return -picked[:, 1:].mean()


def check_int_fields(config, minimums: tuple[tuple[str, int], ...]) -> None:
    """Raise ValueError unless every named field of ``config`` is an integer (NumPy's included) at or above its
    minimum."""
    for name, minimum in minimums:
        value = getattr(config, name)
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
