"""Does gradient descent find k-parent BMA? (claim ``ext-dag-training``, ours, a reproduction).

Two models share the tree model's copier (:class:`model.structured.StructuredTransformer`: K RPE heads, each copying
one context example's token at the query's position) and differ in the second layer:

* ``pair``: :class:`model.pair_attention.PairAttentionTransformer`, (k+1)-linear attention over candidate parent
  sets with a table T (d**k × d) and the mixture output over sets (it contains BMA: T = W_OV = log π_k).
* ``heads``: :class:`KHeadSelector`, the best *standard* alternative of :mod:`model.dag_families` (family (a)): k
  bilinear selector heads over single positions, head i with score v_aᵀ W_KQ^i v_h over the copied slots (the tree
  model's selector, one per head), and a multiplicative readout f_h = Σ_{a_1..a_k} Π_i α_i(a_i)
  σ(W_OV)[row(x^{L+1}_{a_1}, …, x^{L+1}_{a_k})], W_OV of shape (d**k, d) (the outer product of the heads' copied
  one-hots read through one table). Its law over sets is family (a)'s: Q({a, b}) ∝ α_1(a)α_2(b) + α_1(b)α_2(a)
  over a ≠ b (L_pa is measured on it). k = 1 is the tree model (one head, mixture output).

Training: a fixed kernel family per run (``random_dag_kernels`` from the run's seed), a fresh batch of DAG contexts
every step from a NumPy generator seeded by (seed, step), AdamW with a linear warm-up and cosine decay, gradient
clipping, the second layer's matrices at ``selector_lr_scale`` × lr (as the tree training). Initialisation: the
copier's w_L, w_H ~ N(0, init_std²) from a ``torch.Generator`` seeded by the run's seed; the second layer's
matrices start at zero (uniform attention, uniform output, as Theorem 3) except ``heads``' W_KQ^i, which start at
N(0, 0.01²) so the two heads can break their symmetry (two heads at exactly zero stay identical for ever).
No global seeding anywhere.

Evaluation on held-out contexts (fixed per seed) against the exact set posterior and the BMA predictive of
:mod:`numerics.dag`, rows h >= k: the L_pa gap (per-context mean KL(P_h ‖ Q_h), the expected excess −log Q of the
true set) and the query-loss gap (per-context mean −log f_h(x_h) + log P_BMA(x_h)), each with its standard error
over contexts.
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bma_verify.model.convergence import last_quarters_flat, plateau_test
from bma_verify.model.loop import Schedule, Trainee, run, warmup_cosine, window_means
from bma_verify.model.dag_families import mean_and_se, per_context_kl
from bma_verify.model.pair_attention import PairAttentionConfig, PairAttentionTransformer
from bma_verify.model.structured import StructuredTransformer
from bma_verify.numerics.dag import (dag_bma_predictive, dag_candidate_sets, dag_parent_posterior, parent_set_index,
                                     random_dag_kernels, sample_dag_task)

DAG_MODELS = ("pair", "heads")


class KHeadSelector(StructuredTransformer):
    """The tree copier, then k bilinear selector heads over single positions and a multiplicative readout."""

    def __init__(self, config: PairAttentionConfig, *, generator: torch.Generator | None = None,
                 head_init_std: float = 0.01):
        super().__init__(config.copier(), generator=generator)
        self.k = config.k
        Kd = config.K * config.d
        del self.W_KQ
        self.W_KQ_heads = nn.Parameter(torch.randn(config.k, Kd, Kd, generator=generator) * head_init_std)
        self.W_OV = nn.Parameter(torch.zeros(config.d ** config.k, config.d))

    def head_log_attention(self, v: torch.Tensor) -> torch.Tensor:
        """log α_i[b, h, a] over a < h for each head, (k, B, H-k, H) on rows h >= k (−1e30 where masked)."""
        B, H = v.shape[:2]
        flat = v.reshape(B, H, -1)  # (B, H, Kd)
        scores = torch.einsum("bgi,nij,bhj->nbhg", flat, self.W_KQ_heads, flat)[:, :, self.k:]  # (k, B, H-k, H)
        allowed = torch.ones(H, H, dtype=torch.bool, device=v.device).tril(-1)[self.k:]
        log_alpha = torch.log_softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        return log_alpha.masked_fill(~allowed, -1e30)  # finite floor: no NaN gradients through masked entries

    def set_log_law(self, log_alpha: torch.Tensor, H: int) -> torch.Tensor:
        """log Q_h(S_c), (B, H, C): Σ over orderings of Π_i α_i, normalised over the live sets (rows h >= k)."""
        sets = torch.as_tensor(dag_candidate_sets(H, self.k), device=log_alpha.device)
        terms = [sum(log_alpha[i][:, :, sets[:, perm[i]]] for i in range(self.k))
                 for perm in itertools.permutations(range(self.k))]
        raw = torch.logsumexp(torch.stack(terms), dim=0)  # (B, H-k, C)
        C = sets.shape[0]
        live = torch.arange(C, device=raw.device)[None, :] < torch.tensor(
            [math.comb(h, self.k) for h in range(self.k, H)], device=raw.device)[:, None]
        out = torch.full((raw.shape[0], H, C), float("-inf"), dtype=raw.dtype, device=raw.device)
        out[:, self.k:] = torch.log_softmax(raw.masked_fill(~live, float("-inf")), dim=-1)
        return out

    def forward(self, context, query) -> tuple[torch.Tensor, torch.Tensor]:
        """(log Q over candidate sets (B, H, C(H, k)), log f (B, H, d)); rows h < k uniform output."""
        context, query = self.checked_tokens(context, query)
        H = context.shape[2]
        v = self.copies(context, query)  # (B, H, K, d)
        log_alpha = self.head_log_attention(v)  # (k, B, H-k, H)
        onehot = F.one_hot(query, self.d).to(v.dtype)  # (B, H, d)
        u = torch.einsum("nbha,bai->nbhi", log_alpha.exp(), onehot)  # (k, B, H-k, d): copied one-hot per head
        joint = u[0]
        for i in range(1, self.k):
            joint = (joint[..., :, None] * u[i][..., None, :]).flatten(-2)  # (B, H-k, d**(i+1))
        mixed = joint @ F.softmax(self.W_OV, dim=-1)  # (B, H-k, d)
        mixed = torch.log(mixed.clamp_min(torch.finfo(mixed.dtype).tiny))
        first = torch.full((mixed.shape[0], self.k, self.d), -float(np.log(self.d)), dtype=mixed.dtype,
                           device=mixed.device)
        return self.set_log_law(log_alpha, H), torch.cat([first, mixed], dim=1)

    def loss(self, context, query) -> torch.Tensor:
        log_probs = self(context, query)[1]
        query = torch.as_tensor(query, device=log_probs.device)
        picked = log_probs.gather(-1, query[..., None].long())[..., 0]
        return -picked[:, self.k:].mean()


@dataclass
class DagTrainConfig:
    """One training run on the k-parent DAG task (sizes CPU-feasible by default)."""

    model: str = "pair"
    d: int = 3
    k: int = 2
    H: int = 6
    L: int = 5
    K: int = 10  # copier heads (more than L: a spare head covers an example no other head locked onto)
    beta: float = 10.0
    init_std: float = 0.1
    alpha: float = 1.0
    eps: float = 0.01
    batch_size: int = 128
    steps: int = 600
    lr: float = 0.03
    selector_lr_scale: float = 0.3
    grad_clip: float = 1.0
    warmup: int = 50
    eval_contexts: int = 1000
    eval_every: int = 100  # steps between points of the held-out curve that convergence is judged on
    seed: int = 0

    def __post_init__(self) -> None:
        if self.model not in DAG_MODELS:
            raise ValueError(f"model must be one of {DAG_MODELS}, got {self.model!r}")
        for name, minimum in (("d", 2), ("k", 1), ("H", 2), ("L", 1), ("K", 1), ("batch_size", 1), ("steps", 0),
                              ("warmup", 0), ("eval_contexts", 2), ("eval_every", 1),
                              ("seed", 0)):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
                raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
        if self.k > self.H - 1:
            raise ValueError(f"k must be at most H - 1 = {self.H - 1}, got {self.k}")
        if not (self.lr > 0 and self.beta > 0 and self.alpha > 0 and self.grad_clip > 0 and self.eps >= 0):
            raise ValueError("lr, beta, alpha and grad_clip must be positive and eps non-negative")


def run_kernels(config: DagTrainConfig) -> tuple[np.ndarray, ...]:
    """The run's kernel family, fixed by the seed."""
    return random_dag_kernels(config.d, config.k, alpha=config.alpha, eps=config.eps,
                              rng=np.random.default_rng([config.seed, 0]))


def build_dag_model(config: DagTrainConfig, generator: torch.Generator | None = None) -> nn.Module:
    pc = PairAttentionConfig(d=config.d, k=config.k, max_H=config.H, max_L=config.L, K=config.K,
                             beta=config.beta, init_std=config.init_std)
    if config.model == "pair":
        return PairAttentionTransformer(pc, generator=generator)
    return KHeadSelector(pc, generator=generator)


def eval_task(config: DagTrainConfig, kernels):
    """Held-out contexts (fixed per seed, never trained on)."""
    return sample_dag_task(kernels, config.eval_contexts, config.L, config.H,
                           rng=np.random.default_rng([config.seed, 2, config.L]))


def bma_laws(kernels, batch, examples: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(log set posterior (B, H, C), BMA predictive (B, H, d)) of ``batch`` reading its last ``examples`` context
    examples (all of them when None)."""
    context = batch.context if examples is None else batch.context[:, batch.context.shape[1] - examples:]
    with np.errstate(divide="ignore"):
        log_p = np.log(dag_parent_posterior(kernels, context))
    return log_p, dag_bma_predictive(kernels, context, batch.query)


def gaps_to_bma(log_q, log_f, reference, batch, k: int) -> dict:
    """L_pa and query-loss gaps of the laws (log Q (B, H, C), log f (B, H, d)) to BMA's ``reference``
    (:func:`bma_laws`) on ``batch`` (rows h >= k), per-context means ± SE."""
    log_p, predictive = reference
    kl = per_context_kl(log_p, log_q, k)  # (B,)
    q = batch.query[..., :, None]
    model_nll = -np.take_along_axis(log_f, q, -1)[..., 0][:, k:].mean(-1)  # (B,)
    bma_nll = -np.log(np.take_along_axis(predictive, q, -1)[..., 0][:, k:]).mean(-1)
    index = parent_set_index(batch.parent_sets)[:, k:]  # (B, H-k)
    pick = lambda lp: -np.take_along_axis(lp[:, k:], index[..., None], -1)[..., 0].mean()  # noqa: E731
    lpa_gap, lpa_gap_se = mean_and_se(kl)
    query_gap, query_gap_se = mean_and_se(model_nll - bma_nll)
    return {"lpa_gap": lpa_gap, "lpa_gap_se": lpa_gap_se, "query_gap": query_gap, "query_gap_se": query_gap_se,
            "lpa_model": float(pick(log_q)), "lpa_bma": float(pick(log_p)),
            "loss_model": float(model_nll.mean()), "loss_bma": float(bma_nll.mean())}


@torch.no_grad()
def evaluate_dag_model(model: nn.Module, kernels, batch, k: int, reference=None) -> dict:
    """L_pa and query-loss gaps of ``model`` to BMA on ``batch`` (rows h >= k), per-context means ± SE;
    ``reference`` is :func:`bma_laws` of the batch (computed when None)."""
    model.eval()
    log_q, log_f = model(batch.context, batch.query)
    model.train()
    reference = bma_laws(kernels, batch) if reference is None else reference
    return gaps_to_bma(log_q.double().numpy(), log_f.double().numpy(), reference, batch, k)


def truncated_bma_evaluation(kernels, batch, k: int, examples: int) -> dict:
    """:func:`evaluate_dag_model`'s gaps for BMA reading only the last ``examples`` of the batch's L context
    examples (the near miss of ``ext-dag-training``: ``examples = L`` is BMA itself, gap 0)."""
    L = batch.context.shape[1]
    if not isinstance(examples, (int, np.integer)) or not 1 <= examples <= L:
        raise ValueError(f"examples must be an integer in 1..{L}, got {examples!r}")
    log_p, predictive = bma_laws(kernels, batch, examples)
    return gaps_to_bma(log_p, np.log(predictive), bma_laws(kernels, batch), batch, k)


def train_dag(config: DagTrainConfig, *, record_every: int = 50, warm_start: nn.Module | None = None,
              step_offset: int = 0) -> dict:
    """Train one model from its random initialisation (or from ``warm_start``'s weights: a continuation,
    ``model.continuation``; its data steps start at ``step_offset``); returns a JSON-simple run record.

    Keys: ``config``, ``init`` and ``final`` (:func:`evaluate_dag_model` on the held-out contexts at
    initialisation and after training), ``losses`` ([step, mean training loss since the last record]),
    ``curve`` ([step, held-out query-loss gap] at the start, every ``eval_every`` steps and at the end), ``plateau``
    (:func:`model.convergence.plateau_test` on that curve), ``converged`` (the older flag:
    :func:`model.convergence.last_quarters_flat` of the training losses), ``seconds``.
    """
    start = time.perf_counter()
    kernels = run_kernels(config)
    generator = torch.Generator().manual_seed(int(config.seed))
    model = build_dag_model(config, generator)
    if warm_start is not None:
        model.load_state_dict(warm_start.state_dict())
    held_out = eval_task(config, kernels)
    reference = bma_laws(kernels, held_out)
    init = evaluate_dag_model(model, kernels, held_out, config.k, reference)
    selector = [p for n, p in model.named_parameters() if n.startswith(("T", "W_KQ"))]
    others = [p for n, p in model.named_parameters() if not n.startswith(("T", "W_KQ"))]
    groups = [{"params": others, "lr_scale": 1.0}, {"params": selector, "lr_scale": config.selector_lr_scale}]
    trainee = Trainee(model=model, optimizer=torch.optim.AdamW(groups, lr=config.lr, weight_decay=0.0),
                      batch=lambda step: sample_dag_task(kernels, config.batch_size, config.L, config.H,
                                                         rng=np.random.default_rng([config.seed, 1, step])),
                      loss=lambda m, b: m.loss(b.context, b.query),
                      evaluate=lambda m: evaluate_dag_model(m, kernels, held_out, config.k, reference),
                      curve_keys=("query_gap",))
    schedule = Schedule(steps=config.steps, learning_rate=warmup_cosine(config.lr, config.warmup, config.steps),
                        grad_clip=config.grad_clip, eval_every=config.eval_every, eval_at_start=True)
    progress = run(trainee, schedule, step_offset=step_offset)
    final = evaluate_dag_model(model, kernels, held_out, config.k, reference)
    curve = [list(point) for point in zip(progress.curves["step"], progress.curves["query_gap"])]
    plateau = plateau_test([c[0] for c in curve], [c[1] for c in curve]) | {"objective": "held-out query-loss gap"}
    return {"kind": "dag", "config": asdict(config), "init": init, "final": final,
            "losses": window_means(progress.losses, record_every), "curve": curve, "plateau": plateau,
            "converged": last_quarters_flat(progress.losses), "seconds": time.perf_counter() - start,
            "model": model}
