"""Tests of model/training.py and model/train_config.py: a run's configuration (shared fields and each model's
options), the schedule, the optimiser groups, the weight average, resuming, and the per-L' evaluation.

References are independent of the code under test: the run's own seeded initialisation, hand-computed schedules,
iterates averaged here, scipy's standard error.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from bma_verify.model.construction import bma_construction
from bma_verify.model.task_shaped import TaskShapedTransformer
from bma_verify.model.train_config import (AbsoluteOptions, StructuredOptions, TaskShapedOptions, TrainConfig,
                                           config_record)
from bma_verify.model.training import (build_model, config_differences, eval_batch, evaluate, learning_rate,
                                       param_groups, run_kernel, train)
from bma_verify.model.loop import update_average

SMALL = dict(d=3, H=5, L=2, K=3)
TASK_SHAPED_SMALL = dict(d=3, H=4, L=2, K=2)


@pytest.mark.parametrize("kwargs, word", [({"L": 0}, "L"), ({"K": 0}, "K"), ({"d": 1}, "d"),
                                          ({"model": "mlp"}, "model"),
                                          ({"model": lambda: StructuredOptions(output="sum")}, "output"),
                                          ({"model": lambda: TaskShapedOptions(layer1_init="oracle")}, "layer1_init"),
                                          ({"device": "tpu"}, "device")])
def test_bad_train_config_names_the_argument(kwargs, word):
    with pytest.raises(ValueError, match=word):
        TrainConfig(**{k: v() if callable(v) else v for k, v in kwargs.items()})


@pytest.mark.parametrize("bad", [{"ema": 1.0}, {"ema": -0.1}, {"model": lambda: StructuredOptions(w_L_delay=-1)},
                                 {"model": lambda: StructuredOptions(selector_weight_decay=-0.1)},
                                 {"model": lambda: TaskShapedOptions(position="alibi")},
                                 {"model": lambda: TaskShapedOptions(example_weight_power=-0.5)},
                                 {"model": lambda: TaskShapedOptions(example_weight_power="3")}])
def test_bad_values_are_refused_where_they_are_declared(bad):
    # a model's own options are checked when they are made, the shared fields when the run is
    with pytest.raises(ValueError):
        TrainConfig(**{k: v() if callable(v) else v for k, v in bad.items()})


def test_offset_range_is_checked_against_the_run_it_belongs_to():
    # the offset table must reach the training L: a check across the run's L and the structured model's options
    for bad in (1, 2.5, True):
        with pytest.raises(ValueError, match="offset_range"):
            TrainConfig(**SMALL, model=StructuredOptions(offset_range=bad))
    assert TrainConfig(**SMALL, model=StructuredOptions(offset_range=2)).model.offset_range == 2


def test_config_record_is_flat_and_names_the_model_kind():
    # reference: the fields written out by hand; the record is what metrics.json and checkpoints store
    structured = config_record(TrainConfig(**SMALL, model=StructuredOptions(w_L_delay=4)))
    assert structured["model"] == "structured" and structured["w_L_delay"] == 4 and structured["L"] == 2
    assert "width" not in structured
    shaped = config_record(TrainConfig(**TASK_SHAPED_SMALL, model=TaskShapedOptions(width=8, position="relative")))
    assert (shaped["model"], shaped["width"], shaped["position"]) == ("task-shaped", 8, "relative")
    assert "beta" not in shaped and "selector_lr_scale" not in shaped
    assert config_record(TrainConfig(model=AbsoluteOptions()))["selector_lr_scale"] == 0.3


def test_config_differences_name_the_changed_fields_of_any_model():
    config = TrainConfig(**SMALL, model=StructuredOptions(w_L_delay=4))
    stored = config_record(config)
    assert config_differences(stored, replace(config, steps=99)) == []  # a resumed run may be extended
    assert config_differences(stored, replace(config, model=StructuredOptions(w_L_delay=5))) == [
        "w_L_delay: checkpoint 4, now 5"]
    old = {k: v for k, v in stored.items() if k != "w_L_delay"}  # a checkpoint that predates a field: its default
    assert config_differences(old, replace(config, model=StructuredOptions())) == []
    assert any(d.startswith("model:") for d in config_differences(stored, replace(config, model=AbsoluteOptions())))


def test_a_checkpoint_of_the_task_shaped_model_under_its_former_kind_name_still_resumes():
    # reference: a record as written before the rename, "model": "standard" (the task-shaped model's former kind)
    config = TrainConfig(**TASK_SHAPED_SMALL, model=TaskShapedOptions(width=8))
    stored = config_record(config) | {"model": "standard"}
    assert config_differences(stored, config) == []
    assert any(d.startswith("model:") for d in config_differences(stored | {"model": "structured"}, config))


def test_checkpoint_resume_gives_identical_metrics(tmp_path):
    config = TrainConfig(**SMALL, steps=8, batch_size=16, eval_every=2, checkpoint_every=2, eval_contexts=64,
                         warmup=2)
    whole = train(config, out=tmp_path / "whole").metrics
    train(config, out=tmp_path / "split", stop_at=4)
    resumed = train(config, out=tmp_path / "split", resume=True).metrics
    for key in ("query_loss", "parent_loss", "parent_accuracy", "bma_loss", "steps"):
        assert resumed[key] == whole[key], key
    for key in ("step", "query_loss", "parent_loss", "train_loss"):
        assert resumed["curves"][key] == whole["curves"][key], key
    assert whole["config"] == config_record(config)
    with pytest.raises(ValueError, match="different configuration"):
        train(replace(config, lr=0.01), out=tmp_path / "split", resume=True)


def test_models_are_reproducible_from_the_seed():
    config = TrainConfig(**TASK_SHAPED_SMALL, model=TaskShapedOptions(width=8))
    a, b = build_model(config, torch.Generator().manual_seed(3)), build_model(config, torch.Generator().manual_seed(3))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_learning_rate_schedule_by_hand():
    # reference: warm-up (step + 1)/warmup · lr, then lr·(0.1 + 0.9(1 + cos πt)/2) from the warm-up's end
    c = TrainConfig(lr=0.1, steps=110, warmup=10)
    assert learning_rate(c, 0) == pytest.approx(0.01)
    assert learning_rate(c, 9) == pytest.approx(0.1)
    assert learning_rate(c, 60) == pytest.approx(0.1 * (0.1 + 0.9 * 0.5))
    assert learning_rate(c, 110) == pytest.approx(0.01)


def test_w_L_stays_at_its_initial_value_during_the_delay_and_learns_after():
    # reference: the run's own seeded initialisation (build_model with the run's generator seed)
    config = TrainConfig(**SMALL, steps=6, batch_size=16, eval_contexts=32, warmup=1,
                         model=StructuredOptions(w_L_delay=3))
    initial = build_model(config, torch.Generator().manual_seed(config.seed))
    held = train(config, stop_at=3).model
    assert torch.equal(held.w_L, initial.w_L)
    assert not torch.equal(held.w_H, initial.w_H) and not torch.equal(held.W_KQ, initial.W_KQ)
    assert not torch.equal(train(config).model.w_L, initial.w_L)


def test_relative_example_biases_stay_during_the_delay_and_learn_after():
    # reference: the run's own seeded initialisation; the position biases and every other weight learn throughout
    config = TrainConfig(**TASK_SHAPED_SMALL, steps=6, batch_size=8, eval_contexts=16, warmup=1,
                         model=TaskShapedOptions(position="relative", width=8, rel_example_delay=3))
    initial = build_model(config, torch.Generator().manual_seed(config.seed))
    held = train(config, stop_at=3).model
    assert torch.equal(held.rel_example, initial.rel_example)
    assert not torch.equal(held.rel_position, initial.rel_position) and not torch.equal(held.q2.weight,
                                                                                          initial.q2.weight)
    assert not torch.equal(train(config).model.rel_example, initial.rel_example)


def test_selector_weight_decay_applies_to_W_KQ_only():
    # the optimiser groups train() builds, read back by parameter name: W_KQ alone gets its own decay and lr scale,
    # w_L alone its delayed start; the others keep the optimiser's defaults
    model = build_model(TrainConfig(**SMALL))
    groups = param_groups(model, TrainConfig(**SMALL, weight_decay=0.01,
                                             model=StructuredOptions(selector_weight_decay=0.2, w_L_delay=4)))
    by_name = {name: g for g in groups for name, p in model.named_parameters() if any(p is q for q in g["params"])}
    assert by_name["W_KQ"]["weight_decay"] == 0.2 and by_name["W_KQ"]["lr_scale"] == 0.3
    assert "weight_decay" not in by_name["W_OV"] and "weight_decay" not in by_name["w_L"]  # the optimiser default
    assert by_name["w_L"]["start"] == 4 and by_name["w_H"]["start"] == 0 and by_name["W_OV"]["start"] == 0
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_training_hands_the_example_weight_power_to_the_loss(monkeypatch):
    # the recorded keyword of the loss each step (the plain objective's call passes none)
    seen = []
    real = TaskShapedTransformer.loss

    def spy(self, context, query, **kw):
        seen.append(kw)
        return real(self, context, query, **kw)

    monkeypatch.setattr(TaskShapedTransformer, "loss", spy)
    small = dict(TASK_SHAPED_SMALL, batch_size=4, steps=2, eval_every=2, eval_contexts=8, device="cpu")
    train(TrainConfig(**small, model=TaskShapedOptions(width=8, position="relative", example_weight_power=2.5)))
    train(TrainConfig(**small, model=TaskShapedOptions(width=8, position="relative")))
    assert seen == [{"example_weight_power": 2.5}] * 2 + [{}] * 2


def test_weight_average_is_the_moving_average_of_the_iterates():
    # reference: the last iterates of the same run without the average (stopped after each step), averaged here
    # with the decay min(ema, k/(k+9)) after step k
    config = TrainConfig(**SMALL, steps=5, batch_size=16, eval_contexts=32, warmup=1, ema=0.5, dtype="float64")
    plain = replace(config, ema=0.0)
    average = build_model(plain, torch.Generator().manual_seed(plain.seed)).double()
    for k in range(1, 6):
        update_average(average, train(plain, stop_at=k).model, min(0.5, k / (k + 9)))
    averaged = train(config)
    for p, q in zip(averaged.model.parameters(), average.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-12)
    # the metrics are those of the average, not of the last iterate
    held = eval_batch(config, averaged.kernel, config.L)
    assert averaged.metrics["query_loss"] == pytest.approx(evaluate(average, averaged.kernel, held)["query_loss"],
                                                           rel=0, abs=1e-12)
    assert averaged.metrics["query_loss"] != evaluate(train(plain).model, averaged.kernel, held)["query_loss"]


def test_resume_across_the_delay_with_a_weight_average_is_exact(tmp_path):
    config = TrainConfig(**SMALL, steps=8, batch_size=16, eval_every=2, checkpoint_every=2, eval_contexts=64,
                         warmup=2, ema=0.9, model=StructuredOptions(w_L_delay=3))
    whole = train(config, out=tmp_path / "whole")
    train(config, out=tmp_path / "split", stop_at=2)
    resumed = train(config, out=tmp_path / "split", resume=True)
    assert resumed.metrics["curves"]["query_loss"] == whole.metrics["curves"]["query_loss"]
    assert all(torch.equal(p, q) for p, q in zip(resumed.model.parameters(), whole.model.parameters()))


def test_test_L_rows_carry_standard_errors_over_contexts():
    # reference: the Theorem 1 construction at β = 40 is BMA, so its paired gap has ~0 spread while its own L_pa
    # varies from context to context; the standard error is scipy's sem of the per-context values
    from scipy.stats import sem

    from bma_verify import numerics
    from bma_verify.model.training import evaluate_test_L, model_outputs

    config = TrainConfig(d=3, H=5, L=2, K=2, eval_contexts=64, test_L=(3,), dtype="float64")
    kernel = run_kernel(config)
    model = bma_construction(kernel, L=3, beta=40.0)
    rows = evaluate_test_L(model, kernel, config)
    for L_test in (3,):  # the construction has one head per example of L' = 3
        row = rows[str(L_test)]
        batch = eval_batch(config, kernel, L_test)
        attention, _ = model_outputs(model, batch.context, batch.query)
        per = numerics.parent_loss_by_context(np.clip(attention, 1e-300, None), batch.parents)
        assert row["parent_loss_se"] == pytest.approx(sem(per), rel=1e-9) and row["parent_loss_se"] > 1e-3
        assert row["parent_loss_gap_se"] < 1e-6


def test_offsets_never_seen_in_training_keep_their_initial_values():
    # fig5's reading R2. Reference: the run's own seeded initialisation; at training L = 2 only example offsets
    # 0..2 are ever used, so w_L[:, 3:] (offsets up to offset_range = 5) gets no gradient and AdamW (weight decay 0)
    # leaves it as it was
    config = TrainConfig(**SMALL, steps=8, batch_size=16, eval_contexts=32, warmup=1, test_L=(1, 5),
                         model=StructuredOptions(offset_range=5))
    initial = build_model(config, torch.Generator().manual_seed(config.seed))
    run = train(config)
    assert run.model.w_L.shape == (3, 6)
    assert torch.equal(run.model.w_L[:, 3:], initial.w_L[:, 3:])
    assert not torch.equal(run.model.w_L[:, :3], initial.w_L[:, :3])
    # R1 (offset_range None): the table stops at the training L and offsets beyond it share w_L[L]
    assert build_model(replace(config, model=StructuredOptions())).w_L.shape == (3, 3)


def test_a_model_kind_train_does_not_build_is_refused_by_name():
    # issue 41: the isinstance chain built the task-shaped model for any kind nobody wired in (a GPT config included)
    from bma_verify.model.train_config import GPTOptions
    with pytest.raises(ValueError, match="'gpt' model, which train\\(\\) does not build; it builds structured, "
                                         "absolute, task-shaped"):
        build_model(TrainConfig(model=GPTOptions(), d=3, H=4, L=2))
    for sizes, options in ((SMALL, StructuredOptions()), (SMALL, AbsoluteOptions()),
                           (TASK_SHAPED_SMALL, TaskShapedOptions(width=8))):
        model = build_model(TrainConfig(**sizes, model=options), torch.Generator().manual_seed(0))
        assert type(model).__name__.startswith({"structured": "Structured", "absolute": "AbsolutePE",
                                                "task-shaped": "TaskShaped"}[options.kind])
