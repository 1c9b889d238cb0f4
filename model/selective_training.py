"""Does a trained structured model reach the Bayes-optimal predictor of the selective-induction task? (claim
``footnote1-selective-induction``, its reproduction reading).

The task and the mapping are :mod:`numerics.selective_induction`'s. On D'Angelo et al.'s task (the default) a
sequence x_0..x_{k̂+L} draws a lag κ from K (its first k̂ = max K tokens from μ), and the target x_t, t = k̂ + L, is
predicted from the L windows (x_{s−k̂}, …, x_s), s = k̂..t−1, with the query window ending at t (H = k̂ + 1
positions, no window reaches before the sequence). On our per-lag variant (``task="per_lag"``) the sequence is
x_0..x_L, the windows end at s = 0..L−1 and the pad token d stands before the sequence. The model is the tree
task's :class:`model.structured.StructuredTransformer` on d + 1 tokens (the pad is unused on their task),
unchanged: K RPE copier heads, the bilinear selector, the mixture output. Its loss is taken at the query's last
row h = k̂ only (the target x_t): the other rows of a window are not predictions of the selective-induction task.

What is judged (evaluation on held-out sequences, fixed per seed):

* the query-loss gap: per-sequence −log f_h(x_t) + log P(x_t | x_{<t}), P the Bayes-optimal predictive over lags
  (:func:`numerics.selective_induction.bayes_at_last`);
* the lag-posterior gap: per-sequence KL(P(κ | x_{<t}) ‖ A^(2)_{h, h−κ}), the layer-2 attention of the last row
  read at the candidates h' = h − κ (not renormalised: mass on a non-candidate counts against the model), and
  the lag L_pa, −log A^(2)_{h, h−κ*} of the drawn lag against −log P(κ* | x_{<t}).

Copies may be routed differently from the construction (windows overlap); the check judges the lag law only
(docs/notes/footnote1-selective-induction.md).

Training: a fixed kernel per run (``random_kernel`` from the run's seed), a fresh batch every step from a NumPy
generator seeded by (seed, step), AdamW with a linear warm-up and cosine decay, gradient clipping, the selector
W_KQ at ``selector_lr_scale`` × lr. Convergence is judged on the held-out query-loss gap recorded every
``eval_every`` steps (:func:`model.convergence.plateau_test`). Initialisation: w_L, w_H ~ N(0, init_std²) from a
``torch.Generator`` seeded by the run's seed, W_KQ and W_OV zero (uniform attention and output). No global
seeding anywhere.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from bma_verify.model.loop import Schedule, Trainee, run, warmup_cosine, window_means
from bma_verify.model.two_layer import check_int_fields
from bma_verify.model.convergence import plateau_test
from bma_verify.model.dag_families import mean_and_se
from bma_verify.model.structured import StructuredConfig, StructuredTransformer
from bma_verify.numerics.selective_induction import (bayes_at_last, check_lags, check_task, sample_selective_induction,
                                                     window_batch)
from bma_verify.numerics.task import random_kernel


#: Held-out sequences whose lag posterior and trained attention a run keeps for the check's figure.
FIGURE_SEQUENCES = 500
#: The runs the recipe was set on: batch 1024 on the five run seeds of an earlier full report (taken before
#: development seeds were kept apart, and never report training seeds now: those are below 1000); K = 16 by a
#: declared grid on development seeds 1000-1002 at the quick size (docs/notes/footnote1-selective-induction.md).
RECIPE_SEEDS = {"tuned_on": (2081840208, 1312501242, 1353313570, 1985430135, 1966898927),
                "checked_on": (1000, 1001, 1002), "grid_on": (1000, 1001, 1002)}


@dataclass
class SelectiveTrainConfig:
    """One training run on the selective-induction task (sizes CPU-feasible by default; the recipe the check
    trains). History of the recipe: docs/notes/footnote1-selective-induction.md."""

    d: int = 4
    lags: tuple = (1, 2, 3)
    L: int = 8
    K: int = 16  # copier heads, 2L: with K = L (the paper's K ≈ L) runs plateau above the one-window near miss
    beta: float = 5.0
    init_std: float = 0.1
    alpha: float = 0.3
    eps: float = 0.02
    batch_size: int = 1024  # 512 leaves the lag KL near 0.1 on their task; set on RECIPE_SEEDS (docs/notes)
    steps: int = 3000
    lr: float = 0.03
    selector_lr_scale: float = 0.3
    grad_clip: float = 1.0
    warmup: int = 50
    eval_contexts: int = 2000
    eval_every: int = 100  # steps between points of the held-out curve that convergence is judged on
    task: str = "dangelo"  # D'Angelo et al.'s task; "per_lag" is our variant
    seed: int = 0

    def __post_init__(self) -> None:
        self.lags = tuple(int(k) for k in check_lags(self.lags))
        check_task(self.task)
        check_int_fields(self, (("d", 2), ("L", 1), ("K", 1), ("batch_size", 1), ("steps", 0), ("warmup", 0),
                                ("eval_contexts", 2), ("eval_every", 1), ("seed", 0)))
        if self.task == "per_lag" and self.L < max(self.lags):
            raise ValueError(f"L must be at least the largest lag {max(self.lags)} (the query window then holds no "
                             f"pad), got {self.L}")
        if not (self.lr > 0 and self.beta > 0 and self.alpha > 0 and self.grad_clip > 0 and self.eps >= 0
                and self.selector_lr_scale > 0 and self.init_std >= 0):
            raise ValueError("lr, beta, alpha, grad_clip and selector_lr_scale must be positive, eps and init_std "
                             "non-negative")

    @property
    def width(self) -> int:
        """H = k̂ + 1 positions per window; the target sits at h = k̂."""
        return max(self.lags) + 1

    @property
    def first(self) -> int:
        """Where the first context window ends: k̂ on their task (every window inside the sequence), 0 on ours."""
        return max(self.lags) if self.task == "dangelo" else 0

    @property
    def target(self) -> int:
        """The target's position t = first + L in the sequence x_0..x_t."""
        return self.first + self.L


def run_kernel(config: SelectiveTrainConfig) -> np.ndarray:
    """The run's kernel P* (d × d), fixed by the seed."""
    return random_kernel(config.d, alpha=config.alpha, eps=config.eps, rng=np.random.default_rng([config.seed, 0]))


def make_batch(kernel, config: SelectiveTrainConfig, n: int, rng: np.random.Generator) -> dict:
    """n sequences x_0..x_t and their window view: context (n, L, H), query (n, H), drawn lags (n,)."""
    x, kappa = sample_selective_induction(kernel, config.lags, n, config.target + 1, rng=rng, task=config.task)
    context, query = window_batch(x, config.target, config.width, config.d, config.first)
    return {"sequences": x, "lags": kappa, "context": context, "query": query}


def build_selective_model(config: SelectiveTrainConfig, generator: torch.Generator | None = None):
    """The tree task's structured model on d + 1 tokens (the pad is token d), mixture output."""
    return StructuredTransformer(StructuredConfig(d=config.d + 1, max_H=config.width, max_L=config.L, K=config.K,
                                                  output="mixture", beta=config.beta, init_std=config.init_std),
                                 generator=generator)


def target_loss(model, context, query) -> torch.Tensor:
    """Mean −log f_h(x_t) at the query's last row h only (nats)."""
    log_probs = model(context, query)[1]  # (B, H, d + 1)
    q = torch.as_tensor(query, device=log_probs.device)
    return -log_probs[:, -1].gather(-1, q[:, -1:].long())[:, 0].mean()


def eval_batch(config: SelectiveTrainConfig, kernel) -> dict:
    """Held-out sequences (fixed per seed, never trained on) with their Bayes posterior and predictive."""
    batch = make_batch(kernel, config, config.eval_contexts, np.random.default_rng([config.seed, 2, config.L]))
    batch.update(bayes_at_last(kernel, config.lags, batch["sequences"][:, :config.target], task=config.task))
    return batch


@torch.no_grad()
def evaluate_selective_model(model, config: SelectiveTrainConfig, batch: dict, *, keep: int = 0) -> dict:
    """Gaps of ``model`` to the Bayes-optimal predictor on ``batch`` (module docstring), per-sequence means ± SE.

    ``keep`` > 0 adds ``"attention"``: the layer-2 attention at the candidates h' = h − κ of the first ``keep``
    sequences, (keep, |K|) (for a figure; not a JSON value).
    """
    was_training = model.training
    model.eval()
    log_att, log_f = model(batch["context"], batch["query"])
    h = config.width - 1
    lags = np.asarray(config.lags)
    log_a = log_att[:, h].double().numpy()[:, h - lags]  # (n, |K|): log A at h' = h − κ
    log_p = np.log(batch["lag_posterior"])
    p = batch["lag_posterior"]
    kl = np.where(p > 0, p * (log_p - log_a), 0.0).sum(1)  # (n,)
    # the same two laws pushed forward to the parent's token x_{L−κ} (what the prediction can depend on)
    parent = batch["sequences"][:, config.target - lags]  # (n, |K|)
    onehot = parent[..., None] == np.arange(config.d)  # (n, |K|, d)
    p_tok = np.einsum("nj,njd->nd", p, onehot)
    a_tok = np.einsum("nj,njd->nd", np.exp(log_a), onehot)
    with np.errstate(divide="ignore", invalid="ignore"):
        token_kl = np.where(p_tok > 0, p_tok * (np.log(p_tok) - np.log(a_tok)), 0.0).sum(1)
    drawn = np.searchsorted(lags, batch["lags"])  # index of κ* in lags
    rows = np.arange(len(drawn))
    target = batch["sequences"][:, config.target]
    model_nll = -log_f[:, h].double().numpy()[rows, target]
    bayes_nll = -np.log(batch["predictive"][rows, target])
    # control: the kernel known, the lag not inferred (uniform weights over K)
    uniform_nll = -np.log(batch["lag_rows"].mean(1)[rows, target])
    lag_gap, lag_gap_se = mean_and_se(kl)
    query_gap, query_gap_se = mean_and_se(model_nll - bayes_nll)
    token_gap, token_gap_se = mean_and_se(token_kl)
    uniform_gap, uniform_gap_se = mean_and_se(uniform_nll - bayes_nll)
    uniform_kl = np.where(p > 0, p * (log_p + np.log(lags.size)), 0.0).sum(1)  # KL(P ‖ uniform over K)
    uniform_lag_gap, uniform_lag_gap_se = mean_and_se(uniform_kl)
    model.train(was_training)
    kept = {"attention": np.exp(log_a[:keep])} if keep else {}
    return {**kept, "lag_gap": lag_gap, "lag_gap_se": lag_gap_se, "query_gap": query_gap, "query_gap_se": query_gap_se,
            "lag_lpa_model": float(-log_a[rows, drawn].mean()), "lag_lpa_bayes": float(-log_p[rows, drawn].mean()),
            "token_gap": token_gap, "token_gap_se": token_gap_se,
            "uniform_lag_gap": uniform_lag_gap, "uniform_lag_gap_se": uniform_lag_gap_se,
            "uniform_lag_query_gap": uniform_gap, "uniform_lag_query_gap_se": uniform_gap_se,
            "candidate_mass": float(np.exp(log_a).sum(1).mean()),
            "loss_model": float(model_nll.mean()), "loss_bayes": float(bayes_nll.mean())}


def truncated_bayes_evaluation(kernel, config: SelectiveTrainConfig, batch: dict, windows: int) -> dict:
    """Gaps of the Bayes predictor reading only the last ``windows`` of the L windows (the windows ending at
    s = t − windows..t − 1; on their task the tokens before them are the first k̂ and cancel) to the full one on
    ``batch`` (:func:`eval_batch`): the lag-posterior KL(P ‖ P_windows) and the query-loss gap, per-sequence means
    ± SE (the near miss of ``footnote1-selective-induction``; ``windows = L`` is the Bayes predictor, gap 0)."""
    if config.task != "dangelo":
        raise ValueError(f"config.task must be 'dangelo' (their task) to read fewer windows, got {config.task!r}")
    if not isinstance(windows, (int, np.integer)) or not 1 <= windows <= config.L:
        raise ValueError(f"windows must be an integer in 1..{config.L}, got {windows!r}")
    read = bayes_at_last(kernel, config.lags, batch["sequences"][:, config.L - windows:config.target])
    p, q = batch["lag_posterior"], read["lag_posterior"]
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(p > 0, p * (np.log(p) - np.log(q)), 0.0).sum(1)
    rows = np.arange(len(p))
    target = batch["sequences"][:, config.target]
    lag_gap, lag_gap_se = mean_and_se(kl)
    query_gap, query_gap_se = mean_and_se(np.log(batch["predictive"][rows, target])
                                          - np.log(read["predictive"][rows, target]))
    return {"lag_gap": lag_gap, "lag_gap_se": lag_gap_se, "query_gap": query_gap, "query_gap_se": query_gap_se}


def selective_trainee(config: SelectiveTrainConfig, kernel, model, held_out: dict) -> Trainee:
    """The selective-induction runs in the loop: the batch of a step from (seed, step), the target loss, the held-out
    query-loss gap as the curve, the selector W_KQ at ``selector_lr_scale`` × lr, no weight decay."""
    groups = [{"params": [p for n, p in model.named_parameters() if n != "W_KQ"], "lr_scale": 1.0},
              {"params": [model.W_KQ], "lr_scale": config.selector_lr_scale}]
    return Trainee(model=model, optimizer=torch.optim.AdamW(groups, lr=config.lr, weight_decay=0.0),
                   batch=lambda step: make_batch(kernel, config, config.batch_size,
                                                 np.random.default_rng([config.seed, 1, step])),
                   loss=lambda m, b: target_loss(m, b["context"], b["query"]),
                   evaluate=lambda m: evaluate_selective_model(m, config, held_out), curve_keys=("query_gap",))


def train_selective(config: SelectiveTrainConfig, *, record_every: int = 50, warm_start=None,
                    step_offset: int = 0) -> dict:
    """Train one structured model from its random initialisation (or from ``warm_start``'s weights: a continuation,
    ``model.continuation``; its data steps start at ``step_offset``); returns a JSON-simple run record.

    Keys: ``config``, ``init`` and ``final`` (:func:`evaluate_selective_model` on the held-out sequences at
    initialisation and after training), ``losses`` ([step, mean training loss since the last record]),
    ``curve`` ([step, held-out query-loss gap] at the start, every ``eval_every`` steps and at the end),
    ``converged`` (:func:`model.convergence.plateau_test` on that curve: a dict with ``plateaued``), ``seconds``,
    ``model``, ``laws`` (the lag posterior and the trained attention at the candidates on the first
    ``FIGURE_SEQUENCES`` held-out sequences, for a figure).
    """
    start = time.perf_counter()
    kernel = run_kernel(config)
    model = build_selective_model(config, torch.Generator().manual_seed(int(config.seed)))
    if warm_start is not None:
        model.load_state_dict(warm_start.state_dict())
    held_out = eval_batch(config, kernel)
    init = evaluate_selective_model(model, config, held_out)
    trainee = selective_trainee(config, kernel, model, held_out)
    schedule = Schedule(steps=config.steps, learning_rate=warmup_cosine(config.lr, config.warmup, config.steps),
                        grad_clip=config.grad_clip, eval_every=config.eval_every, eval_at_start=True)
    progress = run(trainee, schedule, step_offset=step_offset)
    final = evaluate_selective_model(model, config, held_out, keep=FIGURE_SEQUENCES)
    curve = [list(point) for point in zip(progress.curves["step"], progress.curves["query_gap"])]
    converged = plateau_test([c[0] for c in curve], [c[1] for c in curve])
    attention = final.pop("attention")
    out = asdict(config)
    out["lags"] = list(config.lags)
    return {"kind": "selective-induction", "config": out, "kernel": kernel.tolist(), "init": init, "final": final,
            "losses": window_means(progress.losses, record_every), "curve": curve, "converged": converged,
            "seconds": time.perf_counter() - start, "model": model,
            "laws": {"posterior": held_out["lag_posterior"][:len(attention)], "attention": attention}}
