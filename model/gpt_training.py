"""Training the standard GPT on the flattened task stream and judging it per token against BMA in KL
(``exp-robustness``).

A context of L examples and the query example (each H tokens) is one stream of (L + 1)·H tokens; the model reads
BOS and the first (L + 1)·H − 1 tokens and predicts every token (next-token loss on all of them). It is judged on
the query example: the mean over positions h ≥ 1 of KL(BMA predictive ‖ model) on the run's held-out contexts
(nats). In the same units and on the same contexts, reference levels: the uniform-parent mixture (BMA reading no
example), BMA reading the last ⌈L/2⌉ and the last L − 1 examples, and the true-parent predictor.

Data, π, the learning-rate schedule and the weight average are those of ``bma_verify.model.training`` (a GPT run is
a :class:`TrainConfig` whose ``model`` is :class:`GPTOptions`), so a GPT sees exactly the batches the other models
of the same seed see.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import xlogy
from torch.nn import functional as F

from bma_verify import numerics
from bma_verify.model.gpt import GPT, GPTConfig
from bma_verify.model.train_config import GPTOptions, TrainConfig, config_record, resolve_device
from bma_verify.model.loop import Trainee, evaluated_model, run
from bma_verify.model.training import TrainRun, eval_batch, run_kernel, schedule, step_batch

#: The GPT readings of exp-robustness: label -> (depth, position reading). Depth 2 is the paper's; depth 3 a second
#: reading (two attention-only layers were found too few for a related task, selective induction).
GPT_READINGS = {"gpt-d2-absolute": (2, "absolute"), "gpt-d2-rope": (2, "rope"),
                "gpt-d3-absolute": (3, "absolute"), "gpt-d3-rope": (3, "rope")}
#: The setting shared by every reading's development run (width 64, 4 heads, lr 3e-3, batch 64).
GPT_SHARED = {"width": 64, "heads": 4, "lr": 3e-3, "batch_size": 64}
#: A held-out KL curve whose drop over the plateau window is at most this (nats) is flat whatever its noise: a
#: tenth of what BMA reading L − 1 of the L examples costs at the quick scale (0.010 nats, development seed 1000).
KL_RESOLUTION = 0.001


def gpt_config(config: TrainConfig) -> GPTConfig:
    """The :class:`GPTConfig` of a GPT run: (L + 1)·H stream positions, the run's depth, width, heads, positions."""
    o = config.model
    if not isinstance(o, GPTOptions):
        raise ValueError(f"config.model must be GPTOptions for a GPT run, got {type(o).__name__}")
    return GPTConfig(d=config.d, n_tokens=(config.L + 1) * config.H, depth=o.depth, width=o.width, heads=o.heads,
                     position=o.position)


def gpt_runs(scale: dict, settings: dict[str, dict], schedule: dict) -> dict[str, TrainConfig]:
    """The GPT runs of exp-robustness: every reading of :data:`GPT_READINGS` at its setting, AdamW with nanoGPT's
    weight decay 0.1 on matrices (seed 0 and device "auto"; the report's plan sets them).

    Parameters
    ----------
    scale : the task's sizes, ``{"d", "H", "L"}``
    settings : reading -> ``{"width", "heads", "lr", "batch_size"}``
    schedule : ``{"contexts", "evaluations", "eval_contexts"}``: contexts trained on (steps = contexts / batch),
        held-out evaluations per run and held-out contexts
    """
    runs = {}
    for reading, (depth, position) in GPT_READINGS.items():
        s = settings[reading]
        steps = schedule["contexts"] // s["batch_size"]
        runs[reading] = TrainConfig(model=GPTOptions(depth=depth, position=position, width=s["width"],
                                                     heads=s["heads"]), **scale, lr=s["lr"],
                                    batch_size=s["batch_size"], weight_decay=0.1, steps=steps,
                                    eval_every=steps // schedule["evaluations"],
                                    eval_contexts=schedule["eval_contexts"])
    return runs


def gpt_multiply_adds(config: TrainConfig) -> float:
    """The multiply-adds of a GPT run's forward passes over its training steps, their dominant terms: per token and
    layer 12·w² in the projections and the FFN and 2·T·w in attention (width w, T stream tokens). A size, to order
    runs by cost; not a timing."""
    g = gpt_config(config)
    return config.steps * config.batch_size * g.n_tokens * g.depth * (12 * g.width ** 2 + 2 * g.n_tokens * g.width)


def stream_tokens(context, query, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets), each (B, (L + 1)·H) int64: the examples laid end to end, the query last; inputs are BOS
    (token ``d``) and the stream shifted right by one, so input position t predicts stream token t."""
    context, query = torch.as_tensor(np.asarray(context)), torch.as_tensor(np.asarray(query))
    stream = torch.cat((context.reshape(len(context), -1), query), dim=1)
    bos = torch.full((len(stream), 1), d, dtype=stream.dtype)
    return torch.cat((bos, stream[:, :-1]), dim=1), stream


def gpt_loss(model: GPT, context, query) -> torch.Tensor:
    """Mean next-token cross-entropy over every token of the stream (nats/token)."""
    inputs, targets = stream_tokens(context, query, model.config.d)
    device = next(model.parameters()).device
    logits = model(inputs.to(device))
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.to(device).reshape(-1))


@torch.no_grad()
def query_predictive(model: GPT, context, query, chunk: int = 1024) -> np.ndarray:
    """The model's predictive for each position of the query example, (B, H, d) float64 (row h given everything
    before x_h in the stream)."""
    was_training = model.training
    model.eval()
    H, device = np.asarray(query).shape[1], next(model.parameters()).device
    out = []
    for start in range(0, len(query), chunk):
        inputs, _ = stream_tokens(context[start:start + chunk], query[start:start + chunk], model.config.d)
        logits = model(inputs.to(device))[:, -H:]
        out.append(logits.double().log_softmax(-1).exp().cpu().numpy())
    model.train(was_training)
    return np.concatenate(out)


def kl_per_context(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Mean over positions h ≥ 1 of KL(p_h ‖ q_h) per context: p, q (B, H, d) laws → (B,) nats (0 log 0 = 0)."""
    p, q = p[:, 1:], q[:, 1:]
    with np.errstate(divide="ignore"):
        terms = xlogy(p, p) - xlogy(p, q)
    return terms.sum(-1).mean(-1)


def uniform_parent_predictive(kernel, query) -> np.ndarray:
    """Σ_{h' < h} π(· | x_{h'}) / h for each query position h ≥ 1 (row 0: π's stationary law), (B, H, d)."""
    rows = np.asarray(kernel)[np.asarray(query)]  # (B, H, d): π(· | x_{h'})
    out = np.cumsum(rows, axis=1)[:, :-1] / np.arange(1, rows.shape[1])[None, :, None]
    first = np.broadcast_to(numerics.stationary_distribution(kernel), (len(rows), 1, rows.shape[-1]))
    return np.concatenate((first, out), axis=1)


def bma_reading(kernel, batch: numerics.TaskBatch, m: int) -> np.ndarray:
    """BMA's predictive reading only the last ``m`` of the L context examples (m = 0: the uniform-parent mixture)."""
    if m == 0:
        return uniform_parent_predictive(kernel, batch.query)
    return numerics.bma_predictive(kernel, batch.context[:, batch.context.shape[1] - m:], batch.query)


def true_parent_predictive(kernel, batch: numerics.TaskBatch) -> np.ndarray:
    """π(· | x_{pa(h)}) at each query position h ≥ 1 (row 0: BMA's, the stationary law), (B, H, d)."""
    parents = np.asarray(batch.parents)
    rows = np.asarray(kernel)[np.take_along_axis(batch.query, np.maximum(parents, 0), axis=1)]
    rows[:, 0] = bma_reading(kernel, batch, 0)[:, 0]
    return rows


def kl_references(kernel, batch: numerics.TaskBatch) -> dict:
    """The reference levels, each the mean KL(BMA ‖ predictor) over query positions h ≥ 1 (nats), and the curve
    over m = 0 … L examples read (index m; m = L is BMA itself, 0)."""
    L = batch.context.shape[1]
    bma = bma_reading(kernel, batch, L)
    by_m = [float(kl_per_context(bma, bma_reading(kernel, batch, m)).mean()) for m in range(L + 1)]
    return {"kl_uniform_parent": by_m[0], "kl_bma_half": by_m[math.ceil(L / 2)], "kl_bma_minus_one": by_m[L - 1],
            "kl_true_parent": float(kl_per_context(bma, true_parent_predictive(kernel, batch)).mean()),
            "kl_by_examples": by_m, "half_examples": math.ceil(L / 2)}


def bma_reading_levels(kernel, batch: numerics.TaskBatch) -> list[dict]:
    """For m = 0 … L examples read: ``kl`` = mean KL(BMA ‖ BMA reading the last m) over query positions h ≥ 1,
    and ``gap_se``, the standard error (over the held-out contexts) of its difference from BMA reading L − 1."""
    L = batch.context.shape[1]
    bma = bma_reading(kernel, batch, L)
    per_m = [kl_per_context(bma, bma_reading(kernel, batch, m)) for m in range(L + 1)]
    near = per_m[L - 1]
    return [{"m": m, "kl": float(v.mean()), "gap_se": float(np.std(v - near, ddof=1) / np.sqrt(len(v)))}
            for m, v in enumerate(per_m)]


def evaluate_gpt(model: GPT, kernel, batch: numerics.TaskBatch) -> dict:
    """``kl`` (mean KL(BMA ‖ model) over query positions h ≥ 1, nats), ``kl_gap_se`` (its standard error paired with
    BMA reading L − 1, over the held-out contexts), ``query_loss`` (the model's NLL of the query tokens h ≥ 1)."""
    L = batch.context.shape[1]
    probs = query_predictive(model, batch.context, batch.query)
    bma = bma_reading(kernel, batch, L)
    per_context = kl_per_context(bma, probs)
    near = kl_per_context(bma, bma_reading(kernel, batch, L - 1))
    taken = np.take_along_axis(probs, batch.query[..., None], axis=-1)[:, 1:, 0]
    return {"kl": float(per_context.mean()), "kl_gap_se": float(np.std(per_context - near, ddof=1)
                                                                 / np.sqrt(len(near))),
            "query_loss": float(-np.log(taken).mean())}


def query_attention_summary(model: GPT, batch: numerics.TaskBatch, kernel) -> list[dict]:
    """Which query-example position each layer's heads attend to from the row that predicts x_h, h ≥ 1, against
    the parent posterior: per layer, every head's ``query_mass`` (attention on x_0 … x_{h−1} of the query
    example), ``parent_accuracy`` (argmax over those positions is the true parent) and ``bma_agreement`` (it is
    BMA's most probable parent); ``best_head`` is the head with the highest parent accuracy."""
    L, H = batch.context.shape[1], batch.query.shape[1]
    inputs, _ = stream_tokens(batch.context, batch.query, model.config.d)
    att = model.attention_weights(inputs.to(next(model.parameters()).device)).double().cpu().numpy()
    rows, start = L * H + np.arange(1, H), L * H + 1  # row predicting x_h; key of query x_{h'} is start + h'
    block = att[..., rows, start:start + H - 1]  # (depth, B, heads, H − 1, H − 1): [h − 1, h']
    allowed = np.tril(np.ones((H - 1, H - 1), dtype=bool))
    block = np.where(allowed, block, -1.0)
    posterior = numerics.parent_posterior(kernel, batch.context)[:, 1:, :H - 1]  # (B, H − 1, H − 1)
    picked = block.argmax(-1)  # (depth, B, heads, H − 1)
    parent = batch.parents[:, 1:][None, :, None, :]
    favourite = posterior.argmax(-1)[None, :, None, :]
    summary = []
    for layer in range(att.shape[0]):
        heads = [{"query_mass": float(np.clip(block[layer, :, k], 0, None).sum(-1).mean()),
                  "parent_accuracy": float((picked[layer, :, k] == parent[0, :, 0]).mean()),
                  "bma_agreement": float((picked[layer, :, k] == favourite[0, :, 0]).mean())}
                 for k in range(att.shape[2])]
        best = int(np.argmax([h["parent_accuracy"] for h in heads]))
        summary.append({"layer": layer + 1, "heads": heads, "best_head": best} | heads[best])
    return summary


def gpt_param_groups(model: GPT, weight_decay: float) -> list[dict]:
    """AdamW groups as nanoGPT forms them: weight decay on matrices and embeddings, none on biases and norms."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def train_gpt(config: TrainConfig, *, quiet: bool = True, warm_start: GPT | None = None,
              step_offset: int = 0) -> TrainRun:
    """Train a GPT run online (no checkpoints: a run is minutes) and return it with its metrics: ``kl`` and the
    reference levels of :func:`kl_references`, ``query_loss``, ``steps``, ``seconds``, ``seconds_per_step``,
    ``curves`` (``step``, ``kl``, ``query_loss``, ``train_loss``) and ``attention`` (:func:`query_attention_summary`).
    With ``config.ema > 0`` the weight average is what is evaluated and returned. ``warm_start`` and
    ``step_offset``: a continuation (``model.continuation``), as in :func:`bma_verify.model.training.train`."""
    device = resolve_device(config.device)
    kernel = run_kernel(config)
    model = GPT(gpt_config(config), generator=torch.Generator().manual_seed(config.seed)).to(device)
    if warm_start is not None:
        model.load_state_dict(warm_start.state_dict())
    optimizer = torch.optim.AdamW(gpt_param_groups(model, config.weight_decay), lr=config.lr, betas=(0.9, 0.95))
    held_out = eval_batch(config, kernel, config.L)
    trainee = Trainee(model=model, optimizer=optimizer, batch=lambda step: step_batch(config, kernel, step),
                      loss=lambda m, b: gpt_loss(m, b.context, b.query),
                      evaluate=lambda m: evaluate_gpt(m, kernel, held_out), curve_keys=("kl", "query_loss"))
    progress = run(trainee, schedule(config), step_offset=step_offset, quiet=quiet,
                   desc="train gpt")
    evaluated = evaluated_model(trainee, progress)
    seconds = progress.seconds
    metrics = (evaluate_gpt(evaluated, kernel, held_out) | kl_references(kernel, held_out)
               | {"steps": config.steps, "seconds": seconds, "seconds_per_step": seconds / max(1, config.steps),
                  "curves": progress.curves, "config": config_record(config), "kernel": kernel.tolist(),
                  "attention": query_attention_summary(evaluated, held_out, kernel)})
    return TrainRun(model=evaluated, kernel=kernel, config=config, metrics=metrics)
