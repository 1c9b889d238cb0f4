"""A standard attention-only transformer trained on D'Angelo et al.'s selective-induction task, at depth 2 and 3
(their App. B: two attention-only layers cannot solve the task, three can). Claim served: ``ext-selective-depth``.

The model (nanoGPT's shape without the MLP): token and learned absolute position embeddings, ``n_layers`` causal
multi-head self-attention layers with residual connections (no MLP, no layer norm), a linear read-out to |S|
logits at every position. Trained as a next-token predictor on their task (numerics.selective_induction) with a
fixed kernel per run; judged by the KL from the Bayes predictive over lags at the positions t ≥ k̂ (where the lag
matters), on held-out sequences. Convergence: the plateau test of :mod:`model.convergence` on the held-out KL
curve recorded every ``eval_every`` steps.
No global seeding: weights from a ``torch.Generator``, batches from NumPy generators seeded by (seed, step).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bma_verify.model.two_layer import check_int_fields
from bma_verify.model.convergence import plateau_test
from bma_verify.model.loop import Schedule, Trainee, run
from bma_verify.model.dag_families import mean_and_se
from bma_verify.numerics.selective_induction import bayes_at_last, check_lags, sample_selective_induction
from bma_verify.numerics.task import random_kernel


@dataclass
class AttentionOnlyConfig:
    """One run (defaults: a reduced scale of their runs, which use |S| = 5, T = 128, batch 256, Adam lr 1e-3,
    d_model 64, d_QK 32)."""

    d: int = 5  # |S|
    lags: tuple = (1, 2, 3)
    T: int = 32  # sequence length (theirs 128)
    n_layers: int = 3
    n_heads: int = 1  # one head per layer (their stated sizes name no more)
    d_model: int = 64
    d_qk: int = 32  # per head
    alpha: float = 1.0  # kernel rows Dirichlet(α)
    batch_size: int = 64  # theirs 256
    steps: int = 3000
    lr: float = 1e-3
    eval_every: int = 100
    eval_sequences: int = 500
    seed: int = 0

    def __post_init__(self) -> None:
        self.lags = tuple(int(k) for k in check_lags(self.lags))
        check_int_fields(self, (("d", 2), ("T", 2), ("n_layers", 1), ("n_heads", 1), ("d_model", 1), ("d_qk", 1),
                                ("batch_size", 1), ("steps", 0), ("eval_every", 1), ("eval_sequences", 2),
                                ("seed", 0)))
        if self.T <= max(self.lags) or not (self.lr > 0 and self.alpha > 0):
            raise ValueError(f"T must exceed max(K) = {max(self.lags)}; lr and alpha must be positive")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: queries and keys of width d_qk per head, values of width d_model."""

    def __init__(self, config: AttentionOnlyConfig):
        super().__init__()
        h = config.n_heads
        self.n_heads, self.d_qk = h, config.d_qk
        self.qk = nn.Linear(config.d_model, 2 * h * config.d_qk, bias=False)
        self.v = nn.Linear(config.d_model, h * config.d_model, bias=False)
        self.out = nn.Linear(h * config.d_model, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q, k = self.qk(x).view(B, T, 2, self.n_heads, self.d_qk).permute(2, 0, 3, 1, 4)
        v = self.v(x).view(B, T, self.n_heads, -1).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, heads, T, d_model)
        return self.out(y.transpose(1, 2).reshape(B, T, -1))


class AttentionOnlyTransformer(nn.Module):
    """Embeddings, ``n_layers`` residual attention layers, a linear read-out: log-probabilities (B, T, d) of the
    next token at every position."""

    def __init__(self, config: AttentionOnlyConfig, generator: torch.Generator | None = None):
        super().__init__()
        self.token = nn.Embedding(config.d, config.d_model)
        self.position = nn.Embedding(config.T, config.d_model)
        self.layers = nn.ModuleList(CausalSelfAttention(config) for _ in range(config.n_layers))
        self.readout = nn.Linear(config.d_model, config.d, bias=False)
        with torch.no_grad():  # N(0, 0.02²) as nanoGPT, drawn from the caller's generator
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        T = tokens.shape[1]
        x = self.token(tokens) + self.position(torch.arange(T, device=tokens.device))
        for layer in self.layers:
            x = x + layer(x)
        return F.log_softmax(self.readout(x), dim=-1)


def run_kernel(config: AttentionOnlyConfig) -> np.ndarray:
    """The run's kernel P* (|S| × |S|), fixed by the seed."""
    return random_kernel(config.d, alpha=config.alpha, rng=np.random.default_rng([config.seed, 0]))


def bayes_all_positions(kernel, lags, x) -> np.ndarray:
    """The Bayes predictive of x_t from x_{<t} for t = 1..T−1, (n, T − 1, d) (their task)."""
    return np.stack([bayes_at_last(kernel, lags, x[:, :t])["predictive"] for t in range(1, x.shape[1])], axis=1)


def held_out(config: AttentionOnlyConfig, kernel) -> dict:
    """Held-out sequences (fixed per seed), their Bayes predictive and the uniform-lag control's predictive."""
    x, _ = sample_selective_induction(kernel, config.lags, config.eval_sequences, config.T,
                                      rng=np.random.default_rng([config.seed, 2]))
    rows = [bayes_at_last(kernel, config.lags, x[:, :t])["lag_rows"].mean(1) for t in range(1, config.T)]
    return {"tokens": x, "bayes": bayes_all_positions(kernel, config.lags, x), "uniform_lag": np.stack(rows, axis=1)}


def kl_from_bayes(log_q, batch: dict, first: int) -> dict:
    """Per-sequence mean over targets t ≥ ``first`` of KL(Bayes_t ‖ q_t); mean and SE over sequences."""
    p = batch["bayes"][:, first - 1:]
    kl = (p * (np.log(p) - log_q[:, first - 1:])).sum(-1).mean(-1)
    mean, se = mean_and_se(kl)
    return {"kl": mean, "kl_se": se}


@torch.no_grad()
def evaluate(model, config: AttentionOnlyConfig, batch: dict) -> dict:
    """The model's and the uniform-lag control's KL from the Bayes predictive at t ≥ k̂ on ``batch``."""
    log_q = model(torch.as_tensor(batch["tokens"][:, :-1])).double().numpy()  # predicts x_1..x_{T−1}
    first = max(config.lags)
    control = kl_from_bayes(np.log(batch["uniform_lag"]), batch, first)
    return {**kl_from_bayes(log_q, batch, first), "uniform_lag_kl": control["kl"],
            "uniform_lag_kl_se": control["kl_se"]}


def train_attention_only(config: AttentionOnlyConfig, *, warm_start: AttentionOnlyTransformer | None = None,
                         step_offset: int = 0) -> dict:
    """Train one model with Adam at a constant learning rate on the next-token loss at every position (or continue
    ``warm_start``'s weights on the data steps from ``step_offset``: ``model.continuation``); a JSON-simple record:
    ``config``, ``kernel``, ``final`` (:func:`evaluate`), ``curve`` ([step, held-out KL]), ``converged`` (the
    plateau test, a dict with ``plateaued``), ``seconds``, ``model``."""
    start = time.perf_counter()
    kernel = run_kernel(config)
    model = AttentionOnlyTransformer(config, torch.Generator().manual_seed(int(config.seed)))
    if warm_start is not None:
        model.load_state_dict(warm_start.state_dict())
    batch = held_out(config, kernel)

    def step_tokens(step: int) -> torch.Tensor:
        x, _ = sample_selective_induction(kernel, config.lags, config.batch_size, config.T,
                                          rng=np.random.default_rng([config.seed, 1, step]))
        return torch.as_tensor(x)

    trainee = Trainee(model=model, optimizer=torch.optim.Adam(model.parameters(), lr=config.lr), batch=step_tokens,
                      loss=lambda m, x: -m(x[:, :-1]).gather(-1, x[:, 1:, None]).mean(),
                      evaluate=lambda m: evaluate(m, config, batch), curve_keys=("kl",))
    progress = run(trainee, Schedule(steps=config.steps, learning_rate=lambda step: config.lr,
                                     eval_every=config.eval_every, eval_at_start=True), step_offset=step_offset)
    final = evaluate(model, config, batch)
    curve = [list(point) for point in zip(progress.curves["step"], progress.curves["kl"])]
    out = asdict(config)
    out["lags"] = list(config.lags)
    return {"kind": "attention-only", "config": out, "kernel": kernel.tolist(), "final": final, "curve": curve,
            "converged": plateau_test([c[0] for c in curve], [c[1] for c in curve]),
            "seconds": time.perf_counter() - start, "model": model}
