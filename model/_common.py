"""What the three two-layer models share: token checks, the causal selector softmax, the two output rules.

Every model reads ``context`` (B, L, H) and ``query`` (B, H) integer tokens and returns, from ``forward``, the
second-layer attention A^(2) (B, H, H) (row h a law over h' < h, row 0 zero) and log-probabilities (B, H, d)
for x^{L+1}_h. Claim ids served: ``thm1-construction``, ``exp-*`` (docs/claims.md).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bma_verify.numerics.atomic import write_atomic, write_text_atomic

OUTPUT_RULES = ("logit", "mixture")


def check_output_rule(output: str) -> str:
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

    def _tokens(self, context, query) -> tuple[torch.Tensor, torch.Tensor]:
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


def prepare_run_dir(out, *, resume: bool, force: bool):
    """The folder a preset trains into: refused when it already holds files, unless resuming or ``force``.

    Output files are never silently overwritten (``--resume`` continues the run there, ``--force`` replaces it).
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out must be a folder, but {out} is a file")
    if out.exists() and any(out.iterdir()) and not (resume or force):
        raise FileExistsError(f"{out} already holds a run; pass --resume to continue it or --force to replace it")
    out.mkdir(parents=True, exist_ok=True)
    return out


def write_json_atomic(path, data) -> None:
    """Write ``data`` as JSON through a temporary file and an atomic rename."""
    write_text_atomic(path, json.dumps(data, indent=1, default=float))


def torch_save_atomic(obj, path) -> None:
    """torch.save through a temporary file and an atomic rename (an interrupted save keeps the old file)."""
    write_atomic(path, lambda tmp: torch.save(obj, tmp))


def check_int_fields(config, minimums: tuple[tuple[str, int], ...]) -> None:
    """Raise ValueError unless every named field of ``config`` is an integer (NumPy's included) at or above its
    minimum."""
    for name, minimum in minimums:
        value = getattr(config, name)
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def warmup_cosine_lr(lr: float, warmup: int, steps: int, step: int) -> float:
    """Learning rate of ``step``: linear warm-up over ``warmup`` steps, then cosine decay to zero at ``steps``."""
    if step < warmup:
        return lr * (step + 1) / warmup
    span = max(1, steps - warmup)
    return lr * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / span)))


def plateaued(trace, tol: float = 0.01) -> bool:
    """Training losses ``trace`` (one per step) count as converged: the mean of the last quarter is within ``tol``
    nats of the quarter before (a plateau)."""
    q = max(1, len(trace) // 4)
    return bool(len(trace) >= 2 * q and abs(np.mean(trace[-q:]) - np.mean(trace[-2 * q:-q])) < tol)


def train_steps(model: nn.Module, groups: list[dict], config, step_loss, *, record_every: int = 50
                ) -> tuple[list, bool]:
    """The online loop the small ``ext``/footnote training runs share: AdamW (no weight decay) over ``groups``
    (each with a ``scale`` of the learning rate), :func:`warmup_cosine_lr` from ``config.lr``, ``config.warmup``,
    ``config.steps``, gradient clipping at ``config.grad_clip``; ``step_loss(step)`` gives the loss of a step (its
    batch a function of the step, so the run is reproducible).

    Returns ``losses`` ([step, mean training loss since the last record]) and ``converged`` (:func:`plateaued`).
    """
    opt = torch.optim.AdamW(groups, lr=config.lr, weight_decay=0.0)
    losses, window, trace = [], [], []
    for step in range(config.steps):
        for g in opt.param_groups:
            g["lr"] = warmup_cosine_lr(config.lr, config.warmup, config.steps, step) * g["scale"]
        loss = step_loss(step)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        opt.step()
        window.append(float(loss.detach()))
        trace.append(window[-1])
        if (step + 1) % record_every == 0 or step + 1 == config.steps:
            losses.append([step + 1, float(np.mean(window))])
            window = []
    return losses, plateaued(trace)
