"""Online training against BMA (SPEC.md §2–3; ``exp-*`` claims).

π is drawn once per run from the run's seed. Every step draws a fresh batch of contexts with NumPy from a
generator seeded by (seed, step), so a resumed run sees exactly the batches an uninterrupted one would. The
held-out evaluation set is fixed per seed; on it the model is compared with BMA (and the oracle that knows the
tree) on the same contexts. AdamW with a linear warm-up and a cosine decay computed from the step index (no
scheduler state to restore); optionally an exponential moving average of the weights is what is evaluated.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from bma_verify import numerics
from bma_verify.model._common import TwoLayerModel, check_output_rule, torch_save_atomic, write_json_atomic
from bma_verify.model.absolute import AbsoluteConfig, AbsolutePETransformer
from bma_verify.model.construction import bma_construction
from bma_verify.model.standard import LAYER1_INITS, POSITIONS, StandardConfig, StandardTransformer
from bma_verify.model.structured import StructuredConfig, StructuredTransformer

MODEL_KINDS = ("structured", "absolute", "standard")

#: RPE scale of the Theorem 1 model that gives the logit-rule floor (its copies are exact to float64).
FLOOR_BETA = 50.0


@dataclass
class TrainConfig:
    """One training run. Sizes follow SPEC.md §1 (d, H, L, K); ``test_L`` adds evaluations at other L'."""

    model: str = "structured"
    d: int = 5
    H: int = 10
    L: int = 10
    K: int = 24  # more heads than L: a spare head covers an example no other head locked onto
    output: str = "mixture"
    beta: float = 10.0  # RPE logit scale of the structured copier
    init_std: float = 0.1  # small random layer-1 weights: heads start near uniform and specialise together
    width: int = 64  # standard transformer only
    layer1_init: str = "mimetic"  # standard transformer only: "mimetic" or the diagnostic "copy" (model/standard.py)
    position: str = "absolute"  # standard transformer only: "absolute" embeddings or "relative" biases per head
    alpha: float = 1.0  # Dirichlet concentration of π's rows
    eps: float = 0.0  # entrywise floor of π
    batch_size: int = 256
    steps: int = 2000
    lr: float = 0.03
    weight_decay: float = 0.0
    selector_lr_scale: float = 0.3  # W_KQ moves slower than the copier: a fast selector can saturate on a wrong
    # feature before the copier heads settle on same-position copies (seen across seeds at lr 0.03)
    selector_weight_decay: float | None = None  # AdamW weight decay of W_KQ (None: weight_decay)
    grad_clip: float = 1.0  # max gradient norm: an early burst in W_KQ can saturate the selector for good
    offset_range: int | None = None  # structured model: largest example offset with its own w_L weight (None: L,
    # and offsets beyond L share w_L[L], fig5's reading R1); larger (fig5's reading R2) gives offsets never seen in
    # training weights of their own, which keep their initial values (no gradient reaches them; weight decay 0)
    w_L_delay: int = 0  # steps during which the weights that say which example a layer-1 head reads stay at their
    # initial values while the rest learns: the structured copier's w_L (see the fig2 preset), the standard model's
    # example-offset biases with relative positions (rel_example); no effect on other models
    example_weight_power: float = 0.0  # standard transformer only: the loss weighs example l by l^p
    # (StandardTransformer.loss; 0: the plain language-model objective, every term alike)
    warmup: int = 50
    ema: float = 0.0  # decay of an exponential moving average of the weights; when > 0 the average, not the last
    # iterate, is what is evaluated, returned and checkpointed as the model (0: the last iterate)
    eval_contexts: int = 2048
    eval_every: int = 100
    checkpoint_every: int = 500
    test_L: tuple[int, ...] = ()
    seed: int = 0
    device: str = "auto"
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.model not in MODEL_KINDS:
            raise ValueError(f"model must be one of {MODEL_KINDS}, got {self.model!r}")
        for name, minimum in (("d", 2), ("H", 2), ("L", 1), ("K", 1), ("batch_size", 1), ("steps", 0),
                              ("eval_contexts", 1), ("eval_every", 1), ("checkpoint_every", 1), ("width", 1),
                              ("warmup", 0), ("w_L_delay", 0), ("seed", 0)):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
                raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
        check_output_rule(self.output)
        if self.layer1_init not in LAYER1_INITS:
            raise ValueError(f"layer1_init must be one of {LAYER1_INITS}, got {self.layer1_init!r}")
        if self.position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}, got {self.position!r}")
        if self.position != "absolute" and self.model != "standard":
            raise ValueError(f"position applies to the standard transformer only, got {self.position!r} for "
                             f"model {self.model!r}")
        self.test_L = tuple(int(x) for x in self.test_L)
        if any(x < 1 for x in self.test_L):
            raise ValueError(f"test_L must hold integers >= 1 (test-time context sizes L'), got {self.test_L}")
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")
        if not (self.lr > 0 and self.beta > 0 and self.alpha > 0 and self.weight_decay >= 0 and self.grad_clip > 0
                and self.selector_lr_scale > 0):
            raise ValueError("lr, beta, alpha and grad_clip must be positive and weight_decay non-negative")
        if self.offset_range is not None and (isinstance(self.offset_range, bool)
                                              or not isinstance(self.offset_range, (int, np.integer))
                                              or self.offset_range < self.L):
            raise ValueError(f"offset_range must be None or an integer >= L = {self.L}, got {self.offset_range!r}")
        if self.offset_range is not None and self.model != "structured":
            raise ValueError("offset_range applies to the structured model only")
        if self.selector_weight_decay is not None and not self.selector_weight_decay >= 0:
            raise ValueError(f"selector_weight_decay must be >= 0 or None, got {self.selector_weight_decay!r}")
        if isinstance(self.example_weight_power, bool) or not (isinstance(self.example_weight_power, (int, float))
                                                                and self.example_weight_power >= 0):
            raise ValueError(f"example_weight_power must be a number >= 0, got {self.example_weight_power!r}")
        if self.example_weight_power and self.model != "standard":
            raise ValueError(f"example_weight_power applies to the standard transformer only (its all-examples "
                             f"loss), got {self.example_weight_power!r} for model {self.model!r}")
        if not 0 <= self.ema < 1:
            raise ValueError(f"ema must be a decay in [0, 1) (0: no weight average), got {self.ema!r}")
        resolve_device(self.device)


def resolve_device(device: str) -> torch.device:
    """'auto' → CUDA when present, else CPU; 'cuda' on a machine without CUDA raises ValueError."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device 'cuda' was asked for but no CUDA device is present; use --device cpu or auto")
        return torch.device("cuda")
    raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")


def config_differences(stored: dict, config: TrainConfig) -> list[str]:
    """The fields in which a checkpoint's stored configuration differs from ``config``, as ``name: stored X, now Y``.

    ``steps`` may differ (a resumed run can be extended); devices are compared after resolving ``auto`` (a run on
    CPU stored with ``auto`` resumes with ``--device cpu`` and vice versa); a field the checkpoint predates
    counts as its default.
    """
    now, defaults = asdict(config), asdict(TrainConfig())
    differing = []
    for name, value in now.items():
        before = stored.get(name, defaults[name])
        if name == "steps":
            continue
        if name == "device":
            before, value = str(resolve_device(before)), str(resolve_device(value))
        elif isinstance(value, tuple) and isinstance(before, list):
            before = tuple(before)
        if before != value:
            differing.append(f"{name}: checkpoint {before!r}, now {value!r}")
    return differing


def build_model(config: TrainConfig, generator: torch.Generator | None = None) -> TwoLayerModel:
    """The model named by ``config.model``, randomly initialised from ``generator``."""
    c = config
    max_L = max((c.L,) + c.test_L)
    if c.model == "structured":
        # offsets beyond max_L share w_L[max_L]: by default max_L is the training L, not the largest test L'
        offsets = c.L if c.offset_range is None else c.offset_range
        return StructuredTransformer(StructuredConfig(d=c.d, max_H=c.H, max_L=offsets, K=c.K, output=c.output,
                                                      beta=c.beta, init_std=c.init_std), generator=generator)
    if c.model == "absolute":
        return AbsolutePETransformer(AbsoluteConfig(d=c.d, max_H=c.H, max_L=max_L, K=c.K, output=c.output,
                                                   init_std=c.init_std),
                                     generator=generator)
    return StandardTransformer(StandardConfig(d=c.d, max_H=c.H, max_L=max_L, K=c.K, width=c.width,
                                              layer1_init=c.layer1_init, position=c.position), generator=generator)


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
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def training_loss(model: TwoLayerModel, config: TrainConfig, context: torch.Tensor, query: torch.Tensor
                  ) -> torch.Tensor:
    """The objective ``train`` minimises on a batch: ``model.loss``, with the standard transformer's example
    weighting when ``config.example_weight_power`` is set."""
    if config.example_weight_power:
        return model.loss(context, query, example_weight_power=config.example_weight_power)
    return model.loss(context, query)


def param_groups(model: TwoLayerModel, config: TrainConfig) -> list[dict]:
    """AdamW groups: W_KQ at ``selector_lr_scale`` (and ``selector_weight_decay``); the structured copier's w_L and
    the relative standard model's rel_example from step ``w_L_delay`` on.

    Each group carries ``lr_scale`` and ``start`` (the first step at which its learning rate is non-zero); the
    learning rate of a step is a function of the step index only, so a resumed run is exact.
    """
    named = dict(model.named_parameters())
    special = {"W_KQ": (config.selector_lr_scale, 0)}
    if config.model == "structured":
        special["w_L"] = (1.0, config.w_L_delay)
    elif config.model == "standard":
        special["rel_example"] = (1.0, config.w_L_delay)
    groups = [{"params": [p for name, p in named.items() if name not in special], "lr_scale": 1.0, "start": 0}]
    for name, (scale, start) in special.items():
        if name in named:
            groups.append({"params": [named[name]], "lr_scale": scale, "start": start})
            if name == "W_KQ" and config.selector_weight_decay is not None:
                groups[-1]["weight_decay"] = config.selector_weight_decay
    return groups


@torch.no_grad()
def update_average(average: TwoLayerModel, model: TwoLayerModel, decay: float) -> None:
    """average ← decay · average + (1 − decay) · model, parameter by parameter."""
    for avg, p in zip(average.parameters(), model.parameters()):
        avg.lerp_(p, 1.0 - decay)


@dataclass
class TrainRun:
    """A finished run: the trained model, π, the config and the metrics written to ``metrics.json``."""

    model: TwoLayerModel
    kernel: np.ndarray
    config: TrainConfig
    metrics: dict = field(default_factory=dict)


def _checkpoint_path(out: Path | None) -> Path | None:
    return None if out is None else Path(out) / "checkpoint.pt"


def train(config: TrainConfig, *, out: str | Path | None = None, quiet: bool = True, resume: bool = False,
          stop_at: int | None = None) -> TrainRun:
    """Train ``config`` online; write ``out/metrics.json`` and ``out/checkpoint.pt`` when ``out`` is given.

    Parameters
    ----------
    config : TrainConfig
    out : folder for metrics.json and checkpoint.pt (None: keep everything in memory)
    quiet : hide the progress bar
    resume : continue from ``out/checkpoint.pt`` when it exists (exactly: data are seeded per step)
    stop_at : stop after this many steps (a checkpoint is written there; ``resume`` continues the same run)

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
    optimizer = torch.optim.AdamW(param_groups(model, config), lr=config.lr, weight_decay=config.weight_decay)
    average = copy.deepcopy(model) if config.ema > 0 else None
    evaluated = model if average is None else average
    held_out = eval_batch(config, kernel, config.L)
    reference = bma_reference(kernel, held_out)
    curves: dict[str, list] = {"step": [], "seconds": [], "query_loss": [], "parent_loss": [],
                               "parent_accuracy": [], "train_loss": []}
    start_step, seconds = 0, 0.0
    ckpt = _checkpoint_path(out)
    if resume and ckpt is not None and ckpt.exists():
        state = torch.load(ckpt, map_location=device, weights_only=False)
        differing = config_differences(state["config"], config)
        if differing:
            raise ValueError(f"checkpoint {ckpt} was written by a different configuration ({'; '.join(differing)});"
                             " pass the same options to resume, or use another --out")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if average is not None:
            average.load_state_dict(state["average"])
        start_step, seconds, curves = state["step"], state["seconds"], state["curves"]

    def save(step: int) -> None:
        if ckpt is not None:
            ckpt.parent.mkdir(parents=True, exist_ok=True)
            torch_save_atomic({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                               "average": None if average is None else average.state_dict(),
                               "seconds": seconds, "curves": curves, "config": asdict(config), "kernel": kernel},
                              ckpt)

    model.train()
    last = config.steps if stop_at is None else min(config.steps, int(stop_at))
    bar = tqdm(range(start_step, last), disable=quiet, desc=f"train {config.model}", initial=start_step,
               total=config.steps)
    t0 = time.perf_counter()
    for step in bar:
        batch = step_batch(config, kernel, step)
        context = torch.from_numpy(batch.context).to(device)  # (B, L, H)
        query = torch.from_numpy(batch.query).to(device)  # (B, H)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(config, step) * group["lr_scale"] * (step >= group["start"])
        loss = training_loss(model, config, context, query)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        if average is not None:
            update_average(average, model, min(config.ema, (step + 1) / (step + 10)))
        done = step + 1
        if done % config.eval_every == 0 or done == config.steps:
            seconds += time.perf_counter() - t0
            metrics = evaluate(evaluated, kernel, held_out)
            curves["step"].append(done)
            curves["seconds"].append(seconds)
            curves["train_loss"].append(float(loss.detach()))
            for key in ("query_loss", "parent_loss", "parent_accuracy"):
                curves[key].append(metrics[key])
            bar.set_postfix(gap=f"{metrics['query_loss'] - reference['bma_loss']:.4f}",
                            acc=f"{metrics['parent_accuracy']:.3f}")
            t0 = time.perf_counter()
        if done % config.checkpoint_every == 0 or done == last:
            seconds += time.perf_counter() - t0
            save(done)
            t0 = time.perf_counter()
    seconds += time.perf_counter() - t0
    bar.close()

    final = evaluate(evaluated, kernel, held_out)
    metrics = {**final, **reference, "steps": max(last, start_step), "seconds": seconds, "curves": curves,
               "config": asdict(config), "kernel": kernel.tolist()}
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
