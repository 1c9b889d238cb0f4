"""Online training against BMA (the task and models of docs/claims.md; ``exp-*`` claims).

π is drawn once per run from the run's seed. Every step draws a fresh batch of contexts with NumPy from a
generator seeded by (seed, step), so a resumed run sees exactly the batches an uninterrupted one would. The
held-out evaluation set is fixed per seed; on it the model is compared with BMA (and the oracle that knows the
tree) on the same contexts. AdamW with a linear warm-up and a cosine decay computed from the step index (no
scheduler state to restore); optionally an exponential moving average of the weights is what is evaluated.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import torch

from bma_verify import numerics
from bma_verify.model.run_files import torch_save_atomic, write_json_atomic
from bma_verify.model.two_layer import TwoLayerModel
from bma_verify.model.absolute import AbsoluteConfig, AbsolutePETransformer
from bma_verify.model.construction import bma_construction
from bma_verify.model.loop import Progress, Schedule, Trainee, evaluated_model, run, warmup_cosine
from bma_verify.model.structured import StructuredConfig, StructuredTransformer
from bma_verify.model.task_shaped import TaskShapedConfig, TaskShapedTransformer
from bma_verify.model.train_config import (MODEL_KIND_ALIASES, AbsoluteOptions, StructuredOptions, TaskShapedOptions,
                                           TrainConfig, config_record, resolve_device)

#: RPE scale of the Theorem 1 model that gives the logit-rule floor (its copies are exact to float64).
FLOOR_BETA = 50.0


def config_differences(stored: dict, config: TrainConfig) -> list[str]:
    """The fields in which a checkpoint's stored configuration (a :func:`config_record`) differs from ``config``,
    as ``name: stored X, now Y``.

    ``steps`` may differ (a resumed run can be extended); devices are compared after resolving ``auto`` (a run on
    CPU stored with ``auto`` resumes with ``--device cpu`` and vice versa); a field the checkpoint predates
    counts as its default.
    """
    now = config_record(config)
    defaults = config_record(TrainConfig(model=type(config.model)()))
    differing = []
    for name, value in now.items():
        before = stored.get(name, defaults[name])
        if name == "steps":
            continue
        if name == "model":  # a checkpoint written before a kind was renamed stores its former name
            before = MODEL_KIND_ALIASES.get(before, before)
        if name == "device":
            before, value = str(resolve_device(before)), str(resolve_device(value))
        elif isinstance(value, tuple) and isinstance(before, list):
            before = tuple(before)
        if before != value:
            differing.append(f"{name}: checkpoint {before!r}, now {value!r}")
    return differing


def _structured(config: TrainConfig, generator) -> TwoLayerModel:
    options = config.model
    # offsets beyond max_L share w_L[max_L]: by default max_L is the training L, not the largest test L'
    offsets = config.L if options.offset_range is None else options.offset_range
    return StructuredTransformer(StructuredConfig(d=config.d, max_H=config.H, max_L=offsets, K=config.K,
                                                  output=options.output, beta=options.beta,
                                                  init_std=options.init_std), generator=generator)


def _absolute(config: TrainConfig, generator) -> TwoLayerModel:
    options = config.model
    return AbsolutePETransformer(AbsoluteConfig(d=config.d, max_H=config.H, max_L=max((config.L,) + config.test_L),
                                                K=config.K, output=options.output, init_std=options.init_std),
                                 generator=generator)


def _task_shaped(config: TrainConfig, generator) -> TwoLayerModel:
    options = config.model
    return TaskShapedTransformer(TaskShapedConfig(d=config.d, max_H=config.H, max_L=max((config.L,) + config.test_L),
                                                  K=config.K, width=options.width, layer1_init=options.layer1_init,
                                                  position=options.position), generator=generator)


#: The models :func:`train` builds, by kind (a GPT trains through ``model.gpt_training.train_gpt``).
BUILDERS = {StructuredOptions.kind: _structured, AbsoluteOptions.kind: _absolute,
            TaskShapedOptions.kind: _task_shaped}


def build_model(config: TrainConfig, generator: torch.Generator | None = None) -> TwoLayerModel:
    """The model of ``config.model``'s kind, randomly initialised from ``generator``; a kind :func:`train` does not
    build raises ValueError naming those it does."""
    kind = config.model.kind
    if kind not in BUILDERS:
        raise ValueError(f"config.model is a {kind!r} model, which train() does not build; it builds "
                         f"{', '.join(BUILDERS)} (a GPT trains through model.gpt_training.train_gpt)")
    return BUILDERS[kind](config, generator)


def run_kernel(config: TrainConfig) -> np.ndarray:
    """π of the run: fixed by the seed (rows Dirichlet(α), floor ε)."""
    rng = np.random.default_rng([config.seed, 0])
    return numerics.random_kernel(config.d, alpha=config.alpha, eps=config.eps, rng=rng)


def step_batch(config: TrainConfig, kernel: np.ndarray, step: int, L: int | None = None) -> numerics.TaskBatch:
    """The training batch of ``step``: a function of (seed, step) only, so resuming is exact."""
    rng = np.random.default_rng([config.seed, 1, step])
    return numerics.sample_task(kernel, config.batch_size, config.L if L is None else L, config.H, rng=rng)


def eval_batch(config: TrainConfig, kernel: np.ndarray, L: int) -> numerics.TaskBatch:
    """The held-out contexts at L' = L (fixed per seed and L, never used for training)."""
    rng = np.random.default_rng([config.seed, 2, L])
    return numerics.sample_task(kernel, config.eval_contexts, L, config.H, rng=rng)


@torch.no_grad()
def model_outputs(model: TwoLayerModel, context, query, chunk: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """(A^(2) (B, H, H), probabilities (B, H, d)) as float64 NumPy, evaluated in chunks."""
    was_training = model.training
    model.eval()
    atts, probs = [], []
    for start in range(0, len(query), chunk):
        log_att, log_probs = model(context[start:start + chunk], query[start:start + chunk])
        atts.append(log_att.exp().double().cpu().numpy())
        probs.append(log_probs.exp().double().cpu().numpy())
    model.train(was_training)
    return np.concatenate(atts), np.concatenate(probs)


def bma_reference(kernel: np.ndarray, batch: numerics.TaskBatch, L: int | None = None) -> dict:
    """BMA, oracle and (for the logit rule) the floor of the Theorem 1 model on the same contexts."""
    posterior = numerics.parent_posterior(kernel, batch.context)  # (B, H, H)
    ref = {
        "bma_loss": numerics.bma_loss(kernel, batch.context, batch.query),
        "oracle_loss": numerics.oracle_loss(kernel, batch.parents, batch.query),
        "bma_parent_loss": numerics.parent_loss(posterior, batch.parents),
        "bma_parent_accuracy": numerics.parent_accuracy(posterior, batch.parents),
    }
    if np.all(kernel > 0):
        floor_model = bma_construction(kernel, batch.context.shape[1], FLOOR_BETA, "logit",
                                       max_H=batch.query.shape[1])
        _, probs = model_outputs(floor_model, batch.context, batch.query)
        ref["logit_floor_loss"] = numerics.query_loss(probs, batch.query)
    return ref


def evaluate(model: TwoLayerModel, kernel: np.ndarray, batch: numerics.TaskBatch) -> dict:
    """Query loss, L_pa and parent accuracy of ``model`` on ``batch`` (floats)."""
    attention, probs = model_outputs(model, batch.context, batch.query)
    return _metrics(attention, probs, batch)


def _metrics(attention: np.ndarray, probs: np.ndarray, batch: numerics.TaskBatch) -> dict:
    """Query loss, L_pa and parent accuracy from a model's outputs on ``batch``."""
    return {
        "query_loss": numerics.query_loss(probs, batch.query),
        "parent_loss": numerics.parent_loss(np.clip(attention, 1e-300, None), batch.parents),
        "parent_accuracy": numerics.parent_accuracy(attention, batch.parents),
    }


def learning_rate(config: TrainConfig, step: int) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay to 10% of ``lr`` at ``steps``."""
    return warmup_cosine(config.lr, config.warmup, config.steps, floor=0.1)(step)


def training_loss(model: TwoLayerModel, config: TrainConfig, context: torch.Tensor, query: torch.Tensor
                  ) -> torch.Tensor:
    """The objective ``train`` minimises on a batch: ``model.loss``, with the task-shaped transformer's example
    weighting when its ``example_weight_power`` is set."""
    power = config.model.example_weight_power if isinstance(config.model, TaskShapedOptions) else 0.0
    if power:
        return model.loss(context, query, example_weight_power=power)
    return model.loss(context, query)


def scheduled_parameters(options) -> dict[str, dict]:
    """The parameters a model's options train apart from the rest, with their AdamW settings: ``lr_scale``,
    ``start`` (the first step at which the learning rate is non-zero) and an optional ``weight_decay``."""
    if isinstance(options, TaskShapedOptions):  # the relative model's example-offset biases
        return {"rel_example": {"lr_scale": 1.0, "start": options.rel_example_delay}}
    selector = {"lr_scale": options.selector_lr_scale, "start": 0}
    if options.selector_weight_decay is not None:
        selector["weight_decay"] = options.selector_weight_decay
    if isinstance(options, StructuredOptions):
        return {"W_KQ": selector, "w_L": {"lr_scale": 1.0, "start": options.w_L_delay}}
    return {"W_KQ": selector}


def param_groups(model: TwoLayerModel, config: TrainConfig) -> list[dict]:
    """AdamW groups: every parameter at the run's learning rate, except those of :func:`scheduled_parameters`.

    Each group carries ``lr_scale`` and ``start``; the learning rate of a step is a function of the step index
    only, so a resumed run is exact.
    """
    named = dict(model.named_parameters())
    special = scheduled_parameters(config.model)
    groups = [{"params": [p for name, p in named.items() if name not in special], "lr_scale": 1.0, "start": 0}]
    groups += [{"params": [named[name]], **settings} for name, settings in special.items() if name in named]
    return groups


def schedule(config: TrainConfig) -> Schedule:
    """The loop's schedule of a tree-task run (every kind, the GPT's included)."""
    return Schedule(steps=config.steps, learning_rate=partial(learning_rate, config), grad_clip=config.grad_clip,
                    ema=config.ema, eval_every=config.eval_every, checkpoint_every=config.checkpoint_every)


@dataclass
class TrainRun:
    """A finished run: the trained model, π, the config and the metrics written to ``metrics.json``."""

    model: TwoLayerModel
    kernel: np.ndarray
    config: TrainConfig
    metrics: dict = field(default_factory=dict)


def _checkpoint_path(out: Path | None) -> Path | None:
    return None if out is None else Path(out) / "checkpoint.pt"


def two_layer_trainee(config: TrainConfig, kernel: np.ndarray, model: TwoLayerModel,
                      held_out: numerics.TaskBatch) -> Trainee:
    """The structured, absolute-PE and task-shaped kinds in the loop: batches of :func:`step_batch`, the loss of
    :func:`training_loss`, evaluation on ``held_out`` (:func:`evaluate`)."""
    device = next(model.parameters()).device

    def batch(step: int):
        b = step_batch(config, kernel, step)
        return torch.from_numpy(b.context).to(device), torch.from_numpy(b.query).to(device)  # (B, L, H), (B, H)

    optimizer = torch.optim.AdamW(param_groups(model, config), lr=config.lr, weight_decay=config.weight_decay)
    return Trainee(model=model, optimizer=optimizer, batch=batch,
                   loss=lambda m, b: training_loss(m, config, *b),
                   evaluate=lambda m: evaluate(m, kernel, held_out),
                   curve_keys=("query_loss", "parent_loss", "parent_accuracy"))


def train(config: TrainConfig, *, out: str | Path | None = None, quiet: bool = True, resume: bool = False,
          stop_at: int | None = None, warm_start: TwoLayerModel | None = None, step_offset: int = 0) -> TrainRun:
    """Train ``config`` online; write ``out/metrics.json`` and ``out/checkpoint.pt`` when ``out`` is given.

    Parameters
    ----------
    config : TrainConfig
    out : folder for metrics.json and checkpoint.pt (None: keep everything in memory)
    quiet : hide the progress bar
    resume : continue from ``out/checkpoint.pt`` when it exists (exactly: data are seeded per step)
    stop_at : stop after this many steps (a checkpoint is written there; ``resume`` continues the same run)
    warm_start : start from this model's weights instead of a random initialisation (a continuation, see
        ``model.continuation``); the optimiser and the learning-rate schedule start afresh
    step_offset : the data step of this run's first step (a continuation sees the batches after its run's);
        curves record data steps

    Returns
    -------
    TrainRun with metrics: final ``query_loss``, ``bma_loss``, ``oracle_loss``, ``parent_loss``,
    ``bma_parent_loss``, ``parent_accuracy``, ``bma_parent_accuracy``, ``logit_floor_loss`` (structured
    kernels with π > 0), ``steps``, ``seconds``, ``curves`` and, with ``test_L``, ``by_test_L``. With
    ``config.ema > 0`` the model (and every evaluation) is the moving average of the weights.
    """
    device = resolve_device(config.device)
    dtype = torch.float64 if config.dtype == "float64" else torch.float32
    kernel = run_kernel(config)
    generator = torch.Generator().manual_seed(config.seed)
    model = build_model(config, generator).to(device=device, dtype=dtype)
    if warm_start is not None:
        if resume:
            raise ValueError("resume and warm_start exclude each other: a continuation starts from a finished run")
        model.load_state_dict(warm_start.state_dict())
    held_out = eval_batch(config, kernel, config.L)
    reference = bma_reference(kernel, held_out)
    trainee = two_layer_trainee(config, kernel, model, held_out)
    ckpt = _checkpoint_path(out)
    state = None
    if resume and ckpt is not None and ckpt.exists():
        state = torch.load(ckpt, map_location=device, weights_only=False)
        differing = config_differences(state["config"], config)
        if differing:
            raise ValueError(f"checkpoint {ckpt} was written by a different configuration ({'; '.join(differing)});"
                             " pass the same options to resume, or use another --out")
        model.load_state_dict(state["model"])

    def save(progress: Progress) -> None:
        if ckpt is not None:
            ckpt.parent.mkdir(parents=True, exist_ok=True)
            torch_save_atomic({**progress.state(), "model": model.state_dict(), "config": config_record(config),
                               "kernel": kernel}, ckpt)

    start_step = 0 if state is None else state["step"]
    progress = run(trainee, schedule(config), resume=state, stop_at=stop_at, step_offset=step_offset, save=save,
                   quiet=quiet, desc=f"train {config.model.kind}")
    evaluated = evaluated_model(trainee, progress)
    last = config.steps if stop_at is None else min(config.steps, int(stop_at))
    final = evaluate(evaluated, kernel, held_out)
    metrics = {**final, **reference, "steps": max(last, start_step), "seconds": progress.seconds,
               "curves": progress.curves, "config": config_record(config), "kernel": kernel.tolist()}
    metrics["gap_to_bma"] = final["query_loss"] - reference["bma_loss"]
    metrics["parent_loss_gap"] = final["parent_loss"] - reference["bma_parent_loss"]
    if "logit_floor_loss" in reference:
        metrics["output_rule_gap"] = reference["logit_floor_loss"] - reference["bma_loss"]
    if config.test_L:
        metrics["by_test_L"] = evaluate_test_L(evaluated, kernel, config)
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        write_json_atomic(Path(out) / "metrics.json", metrics)
    return TrainRun(model=evaluated, kernel=kernel, config=config, metrics=metrics)


def evaluate_test_L(model: TwoLayerModel, kernel: np.ndarray, config: TrainConfig) -> dict:
    """L_pa^{L'} (model and BMA) and parent accuracy at every L' of ``config.test_L`` (fig5, thm2 model check)."""
    rows = {}
    for L_test in config.test_L:
        batch = eval_batch(config, kernel, L_test)
        posterior = numerics.parent_posterior(kernel, batch.context)
        attention, probs = model_outputs(model, batch.context, batch.query)  # once: fig5 evaluates 30 L'
        trained = numerics.parent_loss_by_context(np.clip(attention, 1e-300, None), batch.parents)  # (B,)
        bma = numerics.parent_loss_by_context(posterior, batch.parents)
        rows[str(L_test)] = {**_metrics(attention, probs, batch),
                             "bma_parent_loss": float(bma.mean()),  # every context has H − 1 positions
                             "bma_parent_accuracy": numerics.parent_accuracy(posterior, batch.parents),
                             "bma_loss": numerics.bma_loss(kernel, batch.context, batch.query),
                             # standard errors over the held-out contexts: of L_pa, and of L_pa − BMA's (paired)
                             "parent_loss_se": _standard_error(trained),
                             "parent_loss_gap_se": _standard_error(trained - bma)}
    return rows


def _standard_error(values: np.ndarray) -> float:
    """Standard error of the mean of ``values`` (sample standard deviation / √n; 0 for a single value)."""
    n = len(values)
    return float(np.std(values, ddof=1) / np.sqrt(n)) if n > 1 else 0.0
