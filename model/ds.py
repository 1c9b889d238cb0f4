"""Two-layer models for continuous tokens (the DS task of claim ``prop2-ds-quadratic``), in one file.

Input: ``x`` (B, L+1, H, d), examples in raster order, the query example last. Contexts with fewer examples
L' < L are given with the oldest L − L' examples set to zero: a zero copy adds nothing to a bilinear score
Σ_k v^{kᵀ}_{h'} W v^k_h nor to a key norm Σ_k ‖v^k_{h'}‖², so for the structured models padding is exactly the
same as having L' examples (one model serves every L' <= L).

* Layer 1, the **copier** on vectors: K = L heads, no content term; head k's logit from the query example's
  position h to token (l', h') is β (w_L[k, L − l'] + w_H[k, h − h']), with the query example's positions
  >= h masked (no leakage of x_h). Value = the key's vector. Output v_h = [v^1_h, …, v^K_h], (K, d).
  ``copier="learned"`` trains w_L, w_H from the construction (w_L[k, k+1] = w_H[0] = 1); ``copier="exact"``
  is its β → ∞ limit (v^k_h = x^{L+1−k}_h, no parameters), which the report's checks use (2 CPU cores):
  Proposition 2 is about the selector's score family, and the copier is exact in that limit either way. The
  ``ds`` preset trains the learned copier.
* Layer 2, the **selector** over h' < h of the query example, one of
  ``bilinear``: score = Σ_k v^{kᵀ}_{h'} W v^k_h (one d×d block W shared by the slots: the tree model's
  block-diagonal W_KQ);
  ``key-norm``: the same plus c Σ_k ‖v^k_{h'}‖², the key-only quadratic term of the exact posterior;
  ``ffn``: an FFN with residual, then standard query-key attention q·k/√d_head (q = u W_Q + b_Q,
  k = u W_K + b_K, full rank over the residual width). By default the FFN is LLaMA's gated FFN
  (SwiGLU, no biases) applied to each copied example v^k (zero-padded with ``ffn_spare`` spare residual
  dimensions: u^k = [v^k, 0] + FFN([v^k, 0])), and the score is Σ_k q(u^k_h)·k(u^k_{h'}), the weights shared by
  the K slots as the bilinear W is (variants ``ffn_per_slot``, ``ffn_kind``: docs/notes/prop2-ds-quadratic.md).
* **Read-out** of the mean: m_h = (Σ_{h'} A_{h→h'} x^{L+1}_{h'}) W_O, trained with squared error; the BMA
  mean is A = posterior, W_O = ρA (row-vector form of ρAᵀx).

The ``ffn`` model (the paper's open question: can an FFN let query-key attention form the key-only term?) keeps the
structured copier; history of its runs: docs/notes/prop2-ds-quadratic.md.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bma_verify.model.loop import Schedule, Trainee, run
from bma_verify.model.run_files import prepare_run_dir, torch_save_atomic, write_json_atomic
from bma_verify.numerics.bma import parent_accuracy, parent_loss
from bma_verify.numerics.ds import (check_orthogonal, check_rho, ds_log_parent_posterior, ds_predictive_mean,
                                    posterior_kl, random_orthogonal, sample_ds_task)
from bma_verify.numerics.ds_fit import mean_and_se

SELECTORS = ("bilinear", "key-norm", "ffn")
COPIERS = ("learned", "exact")
FFN_KINDS = ("gelu", "swiglu")


@dataclass
class DSModelConfig:
    """Sizes of a DS model. ``L`` is the largest number of context examples (K = L copier heads)."""
    d: int = 5
    H: int = 10
    L: int = 30
    selector: str = "bilinear"  # one of SELECTORS
    copier: str = "learned"  # "learned": RPE heads from the construction; "exact": the β → ∞ limit, v^k_h = x^{L+1−k}_h
    beta: float = 10.0  # copier inverse temperature; the learned copier starts at the construction
    # The FFN selector (the paper's open question 3): by default LLaMA's gated FFN on each copied example, with 2 spare residual
    # dimensions, query-key full rank over the residual width, weights shared by the K slots like the bilinear W.
    ffn_kind: str = "swiglu"  # "swiglu": W_down(SiLU(W_gate u) ⊙ W_up u), no biases; "gelu": nanoGPT's MLP
    ffn_per_slot: bool = True  # True: FFN and query-key act on each copied example (width d + spare), the scores
    # summed over the K slots; False: on the flattened copies (width K·d + spare), one query-key product
    ffn_spare: int = 2  # spare residual dimensions (zero on input) the FFN may write to
    ffn_hidden: int = 16
    d_head: int | None = None  # None: the residual width, full rank, so the FFN model contains the bilinear selector

    def __post_init__(self) -> None:
        if self.selector not in SELECTORS:
            raise ValueError(f"selector must be one of {SELECTORS}, got {self.selector!r}")
        if self.copier not in COPIERS:
            raise ValueError(f"copier must be one of {COPIERS}, got {self.copier!r}")
        if self.ffn_kind not in FFN_KINDS:
            raise ValueError(f"ffn_kind must be one of {FFN_KINDS}, got {self.ffn_kind!r}")
        if not isinstance(self.ffn_spare, int) or self.ffn_spare < 0:
            raise ValueError(f"ffn_spare must be an integer >= 0, got {self.ffn_spare!r}")
        if self.d_head is None:
            self.d_head = self.width
        for name in ("d", "H", "L", "ffn_hidden", "d_head"):
            value = getattr(self, name)
            minimum = 2 if name == "H" else 1
            if not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
        if not (self.beta > 0 and math.isfinite(self.beta)):
            raise ValueError(f"beta must be a positive finite number, got {self.beta!r}")


    @property
    def width(self) -> int:
        """Residual width of the FFN selector: d + spare per slot, or K·d + spare flattened."""
        return (self.d if self.ffn_per_slot else self.L * self.d) + self.ffn_spare


class VectorCopier(nn.Module):
    """Layer 1: K = L relative-position heads copying, for each query position h, one vector per head."""
    def __init__(self, cfg: DSModelConfig):
        super().__init__()
        L, H = cfg.L, cfg.H
        self.L, self.H, self.beta = L, H, cfg.beta
        # The construction: head k copies the example k+1 back at the same position (offset 0).
        w_L = torch.zeros(L, L + 1)  # (K, example offsets 0..L)
        w_L[torch.arange(L), torch.arange(1, L + 1)] = 1.0
        w_H = torch.zeros(L, 2 * H - 1)  # (K, position offsets −(H−1)..H−1)
        w_H[:, H - 1] = 1.0
        self.w_L = nn.Parameter(w_L)
        self.w_H = nn.Parameter(w_H)
        pos = torch.arange(H)
        self.register_buffer("pos_off", pos[:, None] - pos[None, :] + H - 1, persistent=False)  # (H, H)
        ex = torch.arange(L + 1)  # key example index l' (the query example is l' = L)
        leak = (ex[None, :, None] == L) & (pos[None, None, :] >= pos[:, None, None])  # (H, L+1, H)
        self.register_buffer("mask", leak, persistent=False)  # query-example positions >= h are never seen

    def attention(self) -> torch.Tensor:
        """(K, H, L+1, H) copier attention [k, h, l', h']; content-free, so the same for every input."""
        K, H = self.w_L.shape[0], self.H
        w_ex = self.w_L.flip(1)  # (K, L+1): [k, l'] = w_L[k, L − l']
        w_pos = self.w_H[:, self.pos_off]  # (K, H, H): [k, h, h'] = w_H[k, h − h' + H − 1]
        logits = self.beta * (w_ex[:, None, :, None] + w_pos[:, :, None, :])  # (K, H, L+1, H)
        logits = logits.masked_fill(self.mask, float("-inf"))
        return torch.softmax(logits.reshape(K, H, -1), dim=-1).reshape(logits.shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, Lp1, H, d = x.shape
        att = self.attention()  # (K, H, L+1, H)
        K = att.shape[0]
        tokens = x.permute(1, 2, 0, 3).reshape(Lp1 * H, B * d)  # (N, B·d), N = (L+1)·H in raster order
        v = att.reshape(K * H, Lp1 * H) @ tokens  # (K·H, B·d): one GEMM for every head and position
        return v.reshape(K, H, B, d).permute(2, 1, 0, 3)  # (B, H, K, d)


class FFN(nn.Module):
    """Two-layer GELU MLP applied per position (nanoGPT's MLP, without dropout)."""
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.fc = nn.Linear(width, hidden)
        self.proj = nn.Linear(hidden, width)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(u)))


class SwiGLU(nn.Module):
    """Gated FFN applied per position, as in LLaMA (Shazeer 2020, "GLU variants"): W_down(SiLU(W_gate u) ⊙ W_up u),
    no biases. Nothing in it is specific to the DS task: the product of two linear maps of u is what lets it
    form quadratic features of u (SiLU(z)·z + SiLU(−z)·(−z) = z²), which a GELU MLP can only approximate."""
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(width, hidden, bias=False)
        self.up = nn.Linear(width, hidden, bias=False)
        self.down = nn.Linear(hidden, width, bias=False)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(u)) * self.up(u))


def _causal_log_softmax(scores: torch.Tensor) -> torch.Tensor:
    """Row h: log-softmax over h' < h; −inf where h' >= h and on row 0. (B, H, H) -> (B, H, H)."""
    H = scores.shape[-1]
    allowed = torch.ones(H, H, dtype=torch.bool, device=scores.device).tril(-1)  # (H, H)
    out = torch.full_like(scores, float("-inf"))
    out[:, 1:] = F.log_softmax(scores[:, 1:].masked_fill(~allowed[1:], float("-inf")), dim=-1)
    return out


class DSModel(nn.Module):
    """Copier → selector (bilinear, key-norm or FFN + query-key) → linear read-out of the mean."""
    def __init__(self, cfg: DSModelConfig):
        super().__init__()
        self.cfg = cfg
        d, K = cfg.d, cfg.L
        self.copier = VectorCopier(cfg) if cfg.copier == "learned" else None
        if cfg.selector == "ffn":
            self.ffn = (FFN if cfg.ffn_kind == "gelu" else SwiGLU)(cfg.width, cfg.ffn_hidden)
            self.W_Q = nn.Linear(cfg.width, cfg.d_head, bias=True)
            self.W_K = nn.Linear(cfg.width, cfg.d_head, bias=True)
        else:
            self.W = nn.Parameter(torch.zeros(d, d))  # selector block, zero = uniform attention
            if cfg.selector == "key-norm":
                self.c = nn.Parameter(torch.zeros(()))
        self.W_O = nn.Parameter(torch.zeros(d, d))  # read-out of the mean

    def scores(self, v: torch.Tensor) -> torch.Tensor:
        """(B, H, K, d) copies -> (B, H, H) selector scores [h, h'] (unmasked)."""
        B, H, K, d = v.shape
        if self.cfg.selector == "ffn":
            u = v if self.cfg.ffn_per_slot else v.reshape(B, H, 1, K * d)  # (B, H, S, ·): S = K slots or 1
            if self.cfg.ffn_spare:
                u = F.pad(u, (0, self.cfg.ffn_spare))  # (B, H, S, width): spare dimensions start at zero
            u = u + self.ffn(u)  # (B, H, S, width)
            q, k = self.W_Q(u), self.W_K(u)  # (B, H, S, d_head) each
            return torch.einsum("bhsi,bgsi->bhg", q, k) / math.sqrt(self.cfg.d_head)  # (B, H, H)
        vq = v @ self.W.T  # (B, H, K, d): W v^k_h
        s = torch.einsum("bgkd,bhkd->bhg", v, vq)  # (B, H, H): Σ_k v^{kᵀ}_g W v^k_h
        if self.cfg.selector == "key-norm":
            s = s + self.c * (v * v).sum(dim=(2, 3))[:, None, :]  # + c Σ_k ‖v^k_g‖²
        return s

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` (B, L+1, H, d) -> (mean (B, H, d), log-attention A^(2) (B, H, H))."""
        if x.ndim != 4 or x.shape[1] != self.cfg.L + 1 or x.shape[2:] != (self.cfg.H, self.cfg.d):
            raise ValueError(f"x must have shape (B, L+1, H, d) = (B, {self.cfg.L + 1}, {self.cfg.H}, "
                             f"{self.cfg.d}), got {tuple(x.shape)}")
        if self.copier is None:
            v = x[:, :-1].flip(1).transpose(1, 2)  # (B, H, K, d): slot k holds x^{L+1−(k+1)}_h, exact copies
        else:
            v = self.copier(x)  # (B, H, K, d)
        log_att = _causal_log_softmax(self.scores(v))  # (B, H, H)
        mixed = torch.exp(log_att) @ x[:, -1]  # (B, H, d): Σ_{h'} A_{h→h'} x^{L+1}_{h'}
        return mixed @ self.W_O, log_att  # (B, H, d), (B, H, H)


# ------------------------------------------------------------------------------------------------ data

def pad_context(context: np.ndarray, query: np.ndarray, L_max: int) -> np.ndarray:
    """Stack (B, L', H, d) context and (B, H, d) query into (B, L_max+1, H, d), oldest slots zero."""
    B, L, H, d = context.shape
    if L > L_max:
        raise ValueError(f"context has L' = {L} examples, more than the model's L = {L_max}")
    x = np.zeros((B, L_max + 1, H, d))
    x[:, L_max - L:L_max] = context
    x[:, L_max] = query
    return x


def training_batch(A, rho, cfg: DSModelConfig, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """(B, L+1, H, d): contexts with L' ~ U{1..L} real examples each (the rest zero), then the query."""
    task = sample_ds_task(A, rho, batch_size, cfg.L, cfg.H, rng=rng)
    x = pad_context(task.context, task.query, cfg.L)
    L_prime = rng.integers(1, cfg.L + 1, size=batch_size)  # (B,)
    x[:, :cfg.L][np.arange(cfg.L)[None, :] < (cfg.L - L_prime)[:, None]] = 0.0  # drop the oldest L − L' examples
    return x


def resolve_device(device: str) -> torch.device:
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)


@contextmanager
def torch_threads(n: int | None):
    """Run a block with ``n`` torch intra-op threads (None: unchanged), restoring the previous number after.

    The DS models have at most ~10^5 weights: on a shared CPU extra threads only add wake-up latency.
    """
    previous = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@dataclass
class DSTrainConfig:
    """Optimisation of the DS models: Adam with cosine decay; the FFN selector has its own rate."""
    steps: int = 1500
    batch_size: int = 256
    lr: float = 0.02
    ffn_lr: float = 0.02
    seed: int = 0
    threads: int | None = 1  # torch intra-op threads while training (restored after); None keeps the current


def train_ds_models(cfgs: list[DSModelConfig], A, rho, train: DSTrainConfig, *, device="cpu", quiet: bool = True,
                    models: list[DSModel] | None = None, step_offset: int = 0) -> tuple[list[DSModel], list[dict]]:
    """Train several :class:`DSModel` side by side on the same batches (sampling is shared, the comparison
    is paired), each with squared error on the query (positions h >= 1), Adam, cosine decay.

    Returns the models and one history each: ``loss`` (training loss every step), ``steps``, ``seconds``,
    ``converged`` (mean loss over the last 10 % of steps within 1 % of the 10 % before).
    """
    A = check_orthogonal(A)
    rho = check_rho(rho)
    if not cfgs or any((c.d, c.H, c.L) != (cfgs[0].d, cfgs[0].H, cfgs[0].L) for c in cfgs):
        raise ValueError("cfgs must be a non-empty list of configs sharing d, H and L")
    if A.shape[0] != cfgs[0].d:
        raise ValueError(f"A must be ({cfgs[0].d}, {cfgs[0].d}) to match the configs' d, got {A.shape}")
    device = resolve_device(device) if isinstance(device, str) else device
    if not isinstance(step_offset, int) or step_offset < 0:
        raise ValueError(f"step_offset must be an integer >= 0, got {step_offset!r}")
    # the batches come from one stream per run, drawn in turn; a continuation (step_offset > 0: the run's steps so
    # far) draws from a stream of its own, which the run never saw
    rng = np.random.default_rng(np.random.SeedSequence([train.seed, 1] + ([step_offset] if step_offset else [])))
    gen = torch.Generator().manual_seed(train.seed)
    if models is None:
        models = []
        for cfg in cfgs:
            model = DSModel(cfg)
            with torch.no_grad():  # every weight of the FFN selector from our own generator (never torch's global
                for name, p in model.named_parameters():  # RNG, which made runs differ between processes)
                    if name.startswith(("ffn.", "W_Q", "W_K")):
                        if p.ndim == 2:
                            p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))
                        else:
                            p.zero_()  # biases start at zero
            models.append(model)
    models = [m.to(device) for m in models]
    losses = [[] for _ in models]
    with torch_threads(train.threads):
        seconds = run(ds_trainee(models, losses, A, rho, cfgs[0], train, rng),
                      Schedule(steps=train.steps, learning_rate=partial(ds_cosine, train.steps)),
                      quiet=quiet, desc="train ds models").seconds
    w = max(1, train.steps // 10)
    histories = []
    for record in losses:
        last, before = float(np.mean(record[-w:])), float(np.mean(record[-2 * w:-w] or record[-w:]))
        histories.append({"loss": record, "steps": train.steps, "seconds": seconds,
                          "converged": bool(abs(before - last) <= 0.01 * abs(before))})
    return models, histories


def ds_cosine(steps: int, step: int) -> float:
    """The DS runs' learning-rate factor: cosine decay from 1 to 0 over ``steps``, no warm-up (each model's rate
    is this times its own, ``DSTrainConfig.lr`` or ``ffn_lr``)."""
    return 0.5 * (1 + math.cos(math.pi * min(step, steps) / steps))


def ds_trainee(models, losses, A, rho, cfg: DSModelConfig, train: DSTrainConfig, rng: np.random.Generator) -> Trainee:
    """Several DS models in the loop on shared batches (drawn in turn from ``rng``: the comparison is paired): one
    Adam group per model at its own rate; the loss is the sum of the models' squared errors, whose gradient for
    each model is its own loss's (the models share no weight). Each model's loss of every step goes to
    ``losses``."""
    device = next(models[0].parameters()).device
    groups = [{"params": list(m.parameters()), "lr_scale": train.ffn_lr if m.cfg.selector == "ffn" else train.lr}
              for m in models]

    def batch(step: int) -> torch.Tensor:
        return torch.as_tensor(training_batch(A, rho, cfg, train.batch_size, rng), dtype=torch.float32,
                               device=device)  # (B, L+1, H, d)

    def loss(_, x: torch.Tensor) -> torch.Tensor:
        each = []
        for model, record in zip(models, losses):
            mean, _ = model(x)  # (B, H, d)
            each.append(((mean[:, 1:] - x[:, -1, 1:]) ** 2).sum(-1).mean())  # squared error, h >= 1
            record.append(float(each[-1].detach()))
        return torch.stack(each).sum()

    return Trainee(model=nn.ModuleList(models), optimizer=torch.optim.Adam(groups, lr=train.lr), batch=batch,
                   loss=loss)


@torch.no_grad()
def model_outputs(model: DSModel, context: np.ndarray, query: np.ndarray, *, batch: int = 2048):
    """Model mean (n, H, d) and log-attention (n, H, H) as float64 NumPy, for L' <= the model's L."""
    device = next(model.parameters()).device
    x = pad_context(context, query, model.cfg.L)
    means, logs = [], []
    for i in range(0, x.shape[0], batch):
        m, la = model(torch.as_tensor(x[i:i + batch], dtype=torch.float32, device=device))
        means.append(m.double().cpu().numpy())
        la = la.double()
        la[:, 1:] = torch.log_softmax(la[:, 1:], dim=-1)  # renormalise in float64; row 0 stays −inf
        logs.append(la.cpu().numpy())
    return np.concatenate(means), np.concatenate(logs)


def evaluate_ds_model(model: DSModel, A, rho, L_values, *, n_eval: int, rng: np.random.Generator,
                      threads: int | None = 1) -> dict:
    """For each L': the model's L_pa gap to BMA (E KL(posterior ‖ A^(2)), mean and SE), L_pa of both,
    parent accuracy of both, and the squared error of both with the SE of their paired difference.

    Claim ``prop2-ds-quadratic`` (model check). Lists aligned with ``L_values``.
    """
    A = check_orthogonal(A)
    rho = check_rho(rho)
    keys = ("L", "gap", "gap_se", "parent_loss", "bma_parent_loss", "parent_accuracy", "bma_parent_accuracy",
            "mse", "bma_mse", "mse_excess", "mse_excess_se")
    out = {k: [] for k in keys}
    for L in L_values:
        task = sample_ds_task(A, rho, n_eval, int(L), model.cfg.H, rng=rng)
        log_post = ds_log_parent_posterior(A, rho, task.context)  # (n, H, H)
        with torch_threads(threads):
            mean, log_att = model_outputs(model, task.context, task.query)
        gap, gap_se = mean_and_se(posterior_kl(log_post, log_att))
        post, att = np.exp(log_post), np.exp(log_att)
        bma_mean = ds_predictive_mean(post, A, rho, task.query)  # (n, H, d)
        se_model = np.sum((task.query[:, 1:] - mean[:, 1:]) ** 2, axis=-1).mean(-1)  # (n,)
        se_bma = np.sum((task.query[:, 1:] - bma_mean[:, 1:]) ** 2, axis=-1).mean(-1)  # (n,)
        excess, excess_se = mean_and_se(se_model - se_bma)
        row = (int(L), gap, gap_se, parent_loss(att, task.parents), parent_loss(post, task.parents),
               parent_accuracy(att, task.parents), parent_accuracy(post, task.parents), float(se_model.mean()),
               float(se_bma.mean()), excess, excess_se)
        for k, v in zip(keys, row):
            out[k].append(v)
    return out


# ---------------------------------------------------------------------------------------------- the preset

@dataclass
class DSExperiment:
    """The ``ds`` preset: d = 5, H = 10, ρ = 0.5, training L' ~ U{1..30} (L = 30 copier heads), A drawn from
    the seed; evaluated at L' = 1..30. ρ = 0.5 puts the best-bilinear gap's peak at small L' (≈ 3) and its
    closing near L' ≈ 20, the shape the paper reports."""
    d: int = 5
    H: int = 10
    L: int = 30
    rho: float = 0.5
    selectors: tuple = SELECTORS
    train: DSTrainConfig = field(default_factory=DSTrainConfig)
    L_values: tuple = tuple(range(1, 31))
    n_eval: int = 2000
    copier: str = "learned"
    ffn: dict = field(default_factory=dict)  # DSModelConfig overrides of the FFN selector (ffn_kind, ffn_hidden, ...)


def evaluation_rng(seed: int) -> np.random.Generator:
    """The evaluation contexts' stream of training seed ``seed``: every model evaluated with it sees the same
    contexts (a paired comparison)."""
    return np.random.default_rng(np.random.SeedSequence([seed, 7]))


def _model_config(exp: DSExperiment, selector: str) -> DSModelConfig:
    extra = dict(exp.ffn) if selector == "ffn" else {}
    return DSModelConfig(d=exp.d, H=exp.H, L=exp.L, selector=selector, copier=exp.copier, **extra)


def run_ds_experiment(exp: DSExperiment, *, A=None, device="auto", quiet: bool = True,
                      models: dict | None = None) -> dict:
    """Train (unless ``models`` holds all of them) and evaluate one model per selector of ``exp``.

    Returns ``{"config": ..., "A": (d, d) list, "models": {selector: DSModel}, "metrics": {selector:
    {"history": ..., "eval": ...}}}``. Unless given, A is drawn from ``exp.train.seed`` so every run of a seed
    sees the same task; the evaluation contexts come from their own seeded stream, the same for every selector.
    """
    if A is None:
        A = random_orthogonal(exp.d, rng=np.random.default_rng(np.random.SeedSequence([exp.train.seed, 6])))
    A = check_orthogonal(A)
    cfgs = [_model_config(exp, s) for s in exp.selectors]
    models = dict(models or {})
    histories = {s: None for s in exp.selectors}
    todo = [c for c in cfgs if c.selector not in models]
    if todo:
        trained, hist = train_ds_models(todo, A, exp.rho, exp.train, device=device, quiet=quiet)
        for cfg, model, h in zip(todo, trained, hist):
            models[cfg.selector], histories[cfg.selector] = model, h
    metrics = {}
    for selector in exp.selectors:
        metrics[selector] = {"history": histories[selector],
                             "eval": evaluate_ds_model(models[selector], A, exp.rho, exp.L_values,
                                                       n_eval=exp.n_eval, rng=evaluation_rng(exp.train.seed))}
    return {"kind": "ds-experiment", "config": asdict(exp), "A": A.tolist(), "models": models, "metrics": metrics}


def train_ds_preset(*, steps=None, seed=0, device="auto", out=None, quiet=False, resume=False,
                    n_eval: int = 2000, force: bool = False) -> dict:
    """``bma-verify train --preset ds``: train the bilinear, key-norm and FFN models on the DS task.

    Preset: d = 5, H = 10, ρ = 0.5, L = 30 (training L' ~ U{1..30}, zero-padded), batch 256, Adam lr 0.02 with
    cosine decay, ``steps`` (default 1500) per model; the FFN selector is the default of :class:`DSModelConfig`
    (SwiGLU on each copied example, hidden 16, 2 spare dimensions); evaluation at L' = 1..30 on 2000 contexts
    each. Writes ``DIR/metrics.json`` (config, A, per model the training curve and the evaluation table) and
    ``DIR/<selector>.pt`` (state dicts). With ``resume``, models whose checkpoint exists in ``out`` are
    loaded instead of retrained. A folder that already holds files is refused unless ``resume`` or ``force``.
    Returns the metrics dict.
    """
    if steps is not None and (not isinstance(steps, int) or steps < 1):
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    exp = DSExperiment(train=DSTrainConfig(steps=1500 if steps is None else steps, seed=int(seed)), n_eval=n_eval)
    out_dir = Path(out) if out is not None else Path("runs") / f"ds-seed{seed}"
    out_dir = prepare_run_dir(out_dir, resume=resume, force=force)
    models = {}
    if resume:
        for selector in exp.selectors:
            path = out_dir / f"{selector}.pt"
            if path.exists():
                model = DSModel(_model_config(exp, selector))
                model.load_state_dict(torch.load(path, map_location="cpu"))
                models[selector] = model.to(resolve_device(device))
    result = run_ds_experiment(exp, device=device, quiet=quiet, models=models)
    for selector, model in result["models"].items():
        torch_save_atomic(model.state_dict(), out_dir / f"{selector}.pt")
    metrics = {"preset": "ds", "seed": int(seed), "d": exp.d, "H": exp.H, "L": exp.L, "rho": exp.rho,
               "steps": exp.train.steps, "config": result["config"], "A": result["A"],
               "models": result["metrics"]}
    for selector, m in result["metrics"].items():
        metrics[f"{selector}_max_gap"] = float(max(m["eval"]["gap"]))
    write_json_atomic(out_dir / "metrics.json", metrics)
    return metrics
