"""The one training loop (model/loop.py), compared with the same steps written out by hand."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from bma_verify.model.loop import Schedule, Trainee, run, warmup_cosine, window_means


def _data(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)  # a batch is a function of its step
    x = torch.randn(16, 3, generator=g)
    return x, x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.1 * torch.randn(16, 1, generator=g)


def _trainee(model: nn.Module, *, scale: float = 0.5, start: int = 3, seen: list | None = None) -> Trainee:
    groups = [{"params": [model.weight], "lr_scale": 1.0}, {"params": [model.bias], "lr_scale": scale, "start": start}]

    def batch(step):
        if seen is not None:
            seen.append(step)
        return _data(step)

    return Trainee(model=model, optimizer=torch.optim.AdamW(groups, lr=0.1, weight_decay=0.01), batch=batch,
                   loss=lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(),
                   evaluate=lambda m: {"mse": float(((m(_data(-1)[0]) - _data(-1)[1]) ** 2).mean().detach())},
                   curve_keys=("mse",))


def _seeded_linear() -> nn.Linear:
    model = nn.Linear(3, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.1, 0.2, 0.3]]))
        model.bias.fill_(0.5)
    return model


def test_the_loop_takes_the_steps_written_out_by_hand():
    # reference: AdamW steps written out directly, the group's rate the schedule's × lr_scale from its start step
    rate = warmup_cosine(0.1, 4, 20, floor=0.1)
    model = _seeded_linear()
    progress = run(_trainee(model), Schedule(steps=20, learning_rate=rate, grad_clip=1.0, eval_every=5))
    by_hand = _seeded_linear()
    opt = torch.optim.AdamW([{"params": [by_hand.weight]}, {"params": [by_hand.bias]}], lr=0.1, weight_decay=0.01)
    losses = []
    for step in range(20):
        opt.param_groups[0]["lr"] = rate(step)
        opt.param_groups[1]["lr"] = rate(step) * 0.5 if step >= 3 else 0.0
        x, y = _data(step)
        loss = ((by_hand(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(by_hand.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    assert torch.equal(model.weight, by_hand.weight) and torch.equal(model.bias, by_hand.bias)
    assert progress.losses == losses and progress.step == 20
    assert progress.curves["step"] == [5, 10, 15, 20] and progress.curves["train_loss"] == losses[4::5]


def test_a_resumed_run_is_the_uninterrupted_one():
    rate = warmup_cosine(0.1, 4, 20)
    schedule = Schedule(steps=20, learning_rate=rate, ema=0.5, eval_every=5, checkpoint_every=7)
    whole = _seeded_linear()
    straight = run(_trainee(whole), schedule)
    saved = []
    first = _seeded_linear()
    run(_trainee(first), schedule, stop_at=7, save=lambda p: saved.append((copy.deepcopy(p.state()),
                                                                            copy.deepcopy(first.state_dict()))))
    state, weights = saved[-1]
    assert state["step"] == 7
    resumed_model = _seeded_linear()
    resumed_model.load_state_dict(weights)
    resumed = run(_trainee(resumed_model), schedule, resume=state)
    assert torch.equal(resumed_model.weight, whole.weight)
    assert resumed.losses == straight.losses and resumed.curves["mse"] == straight.curves["mse"]
    assert torch.equal(resumed.average.weight, straight.average.weight)  # the weight average resumes too


def test_a_continuation_reads_the_batches_after_the_run_and_records_data_steps():
    seen = []
    progress = run(_trainee(_seeded_linear(), seen=seen), Schedule(steps=6, learning_rate=lambda s: 0.01,
                                                                   eval_every=3, eval_at_start=True), step_offset=6)
    assert seen == list(range(6, 12)) and progress.curves["step"] == [6, 9, 12]
    assert progress.curves["train_loss"][0] is None  # the evaluation before the first step
    with pytest.raises(ValueError, match="step_offset"):
        run(_trainee(_seeded_linear()), Schedule(steps=1, learning_rate=lambda s: 0.01), step_offset=-1)


def test_window_means_and_schedule_checks():
    assert window_means([1.0, 3.0, 5.0, 7.0, 9.0], 2) == [[2, 2.0], [4, 6.0], [5, 9.0]]
    assert np.isclose(warmup_cosine(1.0, 0, 10)(5), 0.5) and warmup_cosine(1.0, 4, 10)(1) == 0.5
    with pytest.raises(ValueError, match="every"):
        window_means([1.0], 0)
    for bad in ({"steps": -1}, {"ema": 1.0}, {"eval_every": 0}, {"checkpoint_every": 1.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Schedule(**({"steps": 5, "learning_rate": lambda s: 0.1} | bad))


def test_there_is_one_training_loop_and_one_train_config():
    # reference: the package's source read as text (ast): an optimiser steps only in model/loop.py, and one class is
    # named TrainConfig (the DS runs' optimisation settings are DSTrainConfig)
    import ast
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    stepping, configs = [], []
    for folder in ("theory", "numerics", "model", "reports"):
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step"
                        and not node.args and not node.keywords):
                    stepping.append(str(path.relative_to(root)))
                if isinstance(node, ast.ClassDef) and node.name == "TrainConfig":
                    configs.append(str(path.relative_to(root)))
    assert sorted(set(stepping)) == ["model/loop.py"], stepping
    assert configs == ["model/train_config.py"], configs
