"""Tests of model/continuation.py: a finished run continued to twice its steps (warm start, schedule restarted, the
batches after the run's), and the test that decides whether its miss stands.

References: the run's own weights and data (`step_batch` of the steps the continuation must see), the learning-rate
schedule of a fresh run (`learning_rate`), and the miss rule's arithmetic by hand.
"""
from __future__ import annotations

import pytest
import torch

from bma_verify.model import continuation, training
from bma_verify.model.continuation import continuation_test, continue_run
from bma_verify.model.train_config import GPTOptions, StructuredOptions, TrainConfig

SMALL = dict(d=3, H=5, L=2, K=3, steps=6, batch_size=8, eval_every=2, eval_contexts=32, warmup=2, seed=1003)


def _record_steps(monkeypatch, module) -> list[int]:
    seen: list[int] = []
    original = training.step_batch

    def recording(config, kernel, step, L=None):
        seen.append(step)
        return original(config, kernel, step, L)
    monkeypatch.setattr(module, "step_batch", recording)
    return seen


def test_a_continuation_sees_the_batches_after_its_run_from_the_runs_weights(monkeypatch):
    config = TrainConfig(**SMALL, model=StructuredOptions())
    run = training.train(config)
    seen = _record_steps(monkeypatch, training)
    more = continue_run(run)
    # the data steps after the run's own 0 … 5, and curves on the same step axis
    assert seen == list(range(6, 12)) and more.metrics["curves"]["step"] == [8, 10, 12]
    assert more.metrics["step_offset"] == 6 and more.config.steps == (continuation.FACTOR - 1) * config.steps
    # seeded: continuing the same run twice gives the same numbers
    assert continue_run(run).metrics["curves"]["query_loss"] == more.metrics["curves"]["query_loss"]
    # at learning rate 0 a continuation leaves the run's weights, hence its held-out metrics, exactly as they were
    monkeypatch.setattr(training, "learning_rate", lambda c, step: 0.0)
    frozen = continue_run(run)
    for name, p in run.model.state_dict().items():
        assert torch.equal(p, frozen.model.state_dict()[name])
    assert frozen.metrics["query_loss"] == run.metrics["query_loss"]


def test_a_continuation_restarts_the_learning_rate_schedule(monkeypatch):
    # reference: the learning rates a fresh run of the continuation's length takes, step by step
    config = TrainConfig(**SMALL, model=StructuredOptions())
    run = training.train(config)
    rates = {}  # step -> rate (the loop asks once per parameter group)
    original = training.learning_rate
    monkeypatch.setattr(training, "learning_rate",
                        lambda c, step: rates.setdefault(step, original(c, step)))
    continue_run(run)
    assert rates == {step: original(config, step) for step in range(config.steps)}
    assert rates[0] < rates[config.warmup]  # warm-up again, from the run's final weights


def test_a_gpt_run_continues_through_its_own_loop(monkeypatch):
    from bma_verify.model import gpt_training
    config = TrainConfig(model=GPTOptions(depth=1, width=16, heads=2), d=3, H=3, L=2, batch_size=8, steps=4,
                         eval_every=2, eval_contexts=16, warmup=1, seed=1004)
    run = gpt_training.train_gpt(config)
    seen = _record_steps(monkeypatch, gpt_training)
    more = continue_run(run)
    assert seen == [4, 5, 6, 7] and more.metrics["curves"]["step"] == [6, 8] and "kl" in more.metrics


@pytest.mark.parametrize("before, after, threshold, upper, confirmed", [
    (0.10, 0.10, 0.03, True, True),  # did not move
    (0.10, 0.0935, 0.03, True, True),  # moved 9.3% of the distance 0.07
    (0.10, 0.09, 0.03, True, False),  # moved 1/7 of it: still learning
    (0.10, 0.12, 0.03, True, True),  # moved away
    (0.50, 0.56, 0.80, False, False),  # a lower bound: moved 20% of the distance 0.3 towards it
    (0.50, 0.51, 0.80, False, True),
])
def test_a_miss_stands_when_the_continuation_moves_it_less_than_a_tenth_of_the_way(before, after, threshold, upper,
                                                                                   confirmed):
    # reference: (move towards the threshold) / (distance to it) by hand, against MAX_MOVE = 0.1
    record = continuation_test(before, after, threshold, upper=upper)
    distance = (before - threshold) if upper else (threshold - before)
    assert record["moved_fraction"] == pytest.approx(((before - after) if upper else (after - before)) / distance)
    assert record["confirmed"] is confirmed


def test_only_a_miss_can_be_confirmed():
    with pytest.raises(ValueError, match="before must miss the threshold"):
        continuation_test(0.01, 0.01, 0.03)
    with pytest.raises(ValueError, match="step_offset"):
        training.train(TrainConfig(**SMALL, model=StructuredOptions()), step_offset=-1)


def _records():
    from bma_verify.model.attention_only import AttentionOnlyConfig, train_attention_only
    from bma_verify.model.dag_training import DagTrainConfig, train_dag
    from bma_verify.model.selective_training import SelectiveTrainConfig, train_selective
    return {
        "selective-induction": (train_selective(SelectiveTrainConfig(steps=20, batch_size=16, eval_contexts=50,
                                                                     eval_every=10, seed=1000)), "lag_gap"),
        "dag": (train_dag(DagTrainConfig(steps=20, batch_size=16, eval_contexts=50, eval_every=10, seed=1000)),
                "lpa_gap"),
        "attention-only": (train_attention_only(AttentionOnlyConfig(steps=20, batch_size=16, eval_sequences=50,
                                                                    eval_every=10, seed=1000)), None),
    }


def test_a_run_record_continues_from_its_weights_on_the_data_steps_after_its_own():
    # reference: the record's own final evaluation (the continuation's first evaluation is of the same weights) and
    # its step count (the continuation's curve runs from step 20 to 40, twice the run's budget in all)
    for kind, (run, key) in _records().items():
        assert run["kind"] == kind
        more = continue_run(run)
        assert more["kind"] == kind and more["step_offset"] == 20, kind
        assert [p[0] for p in more["curve"]] == [20, 30, 40], kind
        assert more["curve"][0][1] == pytest.approx(run["curve"][-1][1], abs=1e-12), kind
        if key is not None:
            assert more["init"][key] == pytest.approx(run["final"][key], abs=1e-12), kind
        assert not all(torch.equal(a, b) for a, b in zip(run["model"].parameters(), more["model"].parameters()))
    with pytest.raises(ValueError, match="run record of a kind"):
        continue_run({"kind": "unknown", "config": {}, "model": None})


def test_a_ds_experiment_continues_copies_of_its_models_on_a_stream_of_its_own():
    # reference: the run's models (left as they were: the continuation trains copies) and its evaluation contexts
    from bma_verify.model.ds import DSExperiment, DSTrainConfig, run_ds_experiment
    exp = DSExperiment(d=3, H=4, L=3, selectors=("bilinear", "key-norm"), copier="exact", L_values=(1, 3), n_eval=50,
                       train=DSTrainConfig(steps=12, batch_size=8, seed=1000))
    run = run_ds_experiment(exp, device="cpu")
    before = {s: [p.detach().clone() for p in m.parameters()] for s, m in run["models"].items()}
    more = continue_run(run)
    assert more["kind"] == "ds-experiment" and more["step_offset"] == 12 and more["config"]["train"]["steps"] == 12
    for s, model in run["models"].items():
        assert all(torch.equal(a, b) for a, b in zip(before[s], model.parameters()))  # the run's models untouched
        assert not all(torch.equal(a, b) for a, b in zip(before[s], more["models"][s].parameters()))
        assert len(more["metrics"][s]["history"]["loss"]) == 12
    assert [p[0] for p in more["curve"]] == [22]  # data steps after the run's, every 10 steps


def test_a_ds_continuation_draws_batches_the_run_never_saw():
    # reference: the same model copied and trained one step on the run's stream (step_offset 0) and on the
    # continuation's (step_offset 12): the batches, hence the losses, differ; the same offset twice gives one loss
    import copy
    from bma_verify.model.ds import DSModel, DSModelConfig, DSTrainConfig, train_ds_models
    from bma_verify.numerics.ds import random_orthogonal
    import numpy as np
    cfg = DSModelConfig(d=3, H=4, L=3, selector="bilinear", copier="exact")
    model, A, train = DSModel(cfg), random_orthogonal(3, rng=np.random.default_rng(0)), DSTrainConfig(steps=1, seed=5)
    first = {off: train_ds_models([cfg], A, 0.5, train, models=[copy.deepcopy(model)], step_offset=off)[1][0]["loss"]
             for off in (0, 12)}
    again = train_ds_models([cfg], A, 0.5, train, models=[copy.deepcopy(model)], step_offset=12)[1][0]["loss"]
    assert first[0] != first[12] and again == first[12]
