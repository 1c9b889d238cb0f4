"""The one online training loop every model kind trains through (nanoGPT's ``train.py``: one loop).

A kind plugs in through :class:`Trainee`: its model, its optimiser, the batch of a data step, the loss on a batch
and, where it has one, a held-out evaluation. The loop owns the rest: the learning rate of each step, gradient
clipping, the weight average, the evaluation and checkpoint cadence, the progress bar, resuming, and the
continuation of a finished run (``step_offset``: the data steps after the run's own).

Every kind draws the batch of a step from the step index alone, so a resumed or continued run sees exactly the
batches an uninterrupted one would; the learning rate is a function of the step index (no scheduler state).
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm


@dataclass
class Trainee:
    """What a model kind gives the loop.

    ``optimizer``'s parameter groups may carry ``lr_scale`` (the group's learning rate is the schedule's times this;
    default 1) and ``start`` (the first step at which the group's learning rate is non-zero; default 0).
    ``evaluate(model)`` returns held-out metrics (floats); ``curve_keys`` are those the loop records at each
    evaluation.
    """

    model: nn.Module
    optimizer: torch.optim.Optimizer
    batch: Callable[[int], Any]
    loss: Callable[[nn.Module, Any], torch.Tensor]
    evaluate: Callable[[nn.Module], dict] | None = None
    curve_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Schedule:
    """How long and how a run trains: ``learning_rate(step)`` (the kind's schedule), gradient clipping (None: none),
    the weight average's decay (0: the last iterate is the model), and the cadences (None: never). With
    ``eval_at_start`` the model is also evaluated before the first step."""

    steps: int
    learning_rate: Callable[[int], float]
    grad_clip: float | None = None
    ema: float = 0.0
    eval_every: int | None = None
    eval_at_start: bool = False
    checkpoint_every: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.steps, int) or self.steps < 0:
            raise ValueError(f"steps must be an integer >= 0, got {self.steps!r}")
        if not 0 <= self.ema < 1:
            raise ValueError(f"ema must be a decay in [0, 1) (0: no weight average), got {self.ema!r}")
        for name in ("eval_every", "checkpoint_every"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be None or an integer >= 1, got {value!r}")


@dataclass
class Progress:
    """Where a run stands: steps done, training seconds (evaluations and checkpoints excluded), the training loss
    of every step, and the curves recorded at each evaluation (``step``: the data step, ``seconds``, the kind's
    ``curve_keys``, ``train_loss``: the loss of the step before the evaluation, None at the start)."""

    step: int = 0
    seconds: float = 0.0
    losses: list = field(default_factory=list)
    curves: dict = field(default_factory=dict)
    average: nn.Module | None = None
    optimizer: torch.optim.Optimizer | None = None

    def state(self) -> dict:
        """What a checkpoint stores of the loop (the kind adds its model and config)."""
        return {"step": self.step, "seconds": self.seconds, "losses": self.losses, "curves": self.curves,
                "optimizer": self.optimizer.state_dict(),
                "average": None if self.average is None else self.average.state_dict()}


def warmup_cosine(lr: float, warmup: int, steps: int, floor: float = 0.0) -> Callable[[int], float]:
    """The learning rate of a step: linear warm-up over ``warmup`` steps, then a cosine decay to ``floor`` × ``lr``
    at ``steps`` (the tree runs decay to 10%, the selective-induction and DAG runs to zero)."""
    def learning_rate(step: int) -> float:
        if step < warmup:
            return lr * (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))
    return learning_rate


@torch.no_grad()
def update_average(average: nn.Module, model: nn.Module, decay: float) -> None:
    """average ← decay · average + (1 − decay) · model, parameter by parameter."""
    for avg, p in zip(average.parameters(), model.parameters()):
        avg.lerp_(p, 1.0 - decay)


def run(trainee: Trainee, schedule: Schedule, *, resume: dict | None = None, stop_at: int | None = None,
        step_offset: int = 0, save: Callable[[Progress], None] | None = None, quiet: bool = True,
        desc: str = "train") -> Progress:
    """Train ``trainee`` for ``schedule.steps`` steps (or up to ``stop_at``) and return its :class:`Progress`.

    Parameters
    ----------
    resume : a checkpoint's :meth:`Progress.state` to continue from (the kind has loaded its model's weights)
    stop_at : stop after this many steps (``save`` is called there; resuming continues the same run)
    step_offset : the data step of the run's first step (a continuation sees the batches after its run's); curves
        record data steps
    save : called with the progress every ``schedule.checkpoint_every`` steps and at the last step
    """
    if not isinstance(step_offset, int) or step_offset < 0:
        raise ValueError(f"step_offset must be an integer >= 0, got {step_offset!r}")
    model, optimizer = trainee.model, trainee.optimizer
    average = copy.deepcopy(model) if schedule.ema > 0 else None
    evaluated = model if average is None else average
    curves = {key: [] for key in ("step", "seconds", *trainee.curve_keys, "train_loss")}
    progress = Progress(curves=curves, average=average, optimizer=optimizer)
    if resume is not None:
        optimizer.load_state_dict(resume["optimizer"])
        if average is not None:
            average.load_state_dict(resume["average"])
        progress.step, progress.seconds = resume["step"], resume["seconds"]
        progress.losses, progress.curves = list(resume.get("losses", [])), resume["curves"]

    def record(done: int, loss: float | None) -> None:
        metrics = trainee.evaluate(evaluated)
        values = {"step": step_offset + done, "seconds": progress.seconds, "train_loss": loss}
        for key in progress.curves:
            progress.curves[key].append(values[key] if key in values else metrics[key])

    if schedule.eval_at_start and progress.step == 0:
        record(0, None)
    model.train()
    last = schedule.steps if stop_at is None else min(schedule.steps, int(stop_at))
    bar = tqdm(range(progress.step, last), disable=quiet, desc=desc, initial=progress.step, total=schedule.steps)
    pending = []  # this stretch's losses, still on the device: read back at an evaluation, a checkpoint or the end,
    # not every step (a per-step read is a device sync on a GPU)

    def flush() -> None:
        if pending:
            progress.losses.extend(torch.stack(pending).tolist())
            pending.clear()

    t0 = time.perf_counter()
    for step in bar:
        batch = trainee.batch(step_offset + step)
        rate = schedule.learning_rate(step)
        for group in optimizer.param_groups:
            group["lr"] = rate * group.get("lr_scale", 1.0) * (step >= group.get("start", 0))
        loss = trainee.loss(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if schedule.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), schedule.grad_clip)
        optimizer.step()
        if average is not None:
            update_average(average, model, min(schedule.ema, (step + 1) / (step + 10)))
        pending.append(loss.detach())
        done = progress.step = step + 1
        if schedule.eval_every is not None and (done % schedule.eval_every == 0 or done == schedule.steps):
            flush()
            progress.seconds += time.perf_counter() - t0
            record(done, progress.losses[-1])
            bar.set_postfix({key: f"{progress.curves[key][-1]:.4f}" for key in trainee.curve_keys[:2]})
            t0 = time.perf_counter()
        if save is not None and ((schedule.checkpoint_every and done % schedule.checkpoint_every == 0)
                                 or done == last):
            flush()
            progress.seconds += time.perf_counter() - t0
            save(progress)
            t0 = time.perf_counter()
    flush()
    progress.seconds += time.perf_counter() - t0
    bar.close()
    return progress


def evaluated_model(trainee: Trainee, progress: Progress) -> nn.Module:
    """The model a run evaluates and returns: the weight average where the run keeps one, else the last iterate."""
    return trainee.model if progress.average is None else progress.average


def window_means(losses: list, every: int) -> list:
    """``[step, mean training loss since the last record]`` every ``every`` steps and at the last step."""
    if not isinstance(every, int) or every < 1:
        raise ValueError(f"every must be an integer >= 1, got {every!r}")
    records, begin = [], 0
    for step in range(len(losses)):
        if (step + 1) % every == 0 or step + 1 == len(losses):
            records.append([step + 1, float(np.mean(losses[begin:step + 1]))])
            begin = step + 1
    return records
