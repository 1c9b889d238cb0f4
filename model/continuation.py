"""A miss counts only if more training would not change it: continue a finished run and see whether it moves.

The continuation of a run of S steps trains S more steps (twice the run's budget in all) from the run's final
evaluated weights (the weight average where the run keeps one), with a fresh optimiser and the learning-rate schedule
restarted (warm-up, then the same decay over S steps), on the batches that follow the run's own (data steps
S … 2S − 1). A restarted schedule is the point: a run whose plateau test passed only because the decay had cut its
learning rate gets its full learning rate back.

:func:`continuation_test` judges it: a value that missed its threshold stands when the continuation moves it
towards the threshold by less than ``MAX_MOVE`` of the distance; otherwise the run was still learning at twice its
budget and its miss does not count (``reports.checks.trained.count_verdict``).
"""
from __future__ import annotations

import copy
import dataclasses

import numpy as np

from bma_verify.model.attention_only import AttentionOnlyConfig, train_attention_only
from bma_verify.model.dag_training import DagTrainConfig, train_dag
from bma_verify.model.ds import DSExperiment, DSTrainConfig, evaluate_ds_model, evaluation_rng, train_ds_models
from bma_verify.model.selective_training import SelectiveTrainConfig, train_selective
from bma_verify.model.train_config import GPTOptions
from bma_verify.model.training import TrainRun, train

#: A continued run trains this many times the run's steps in all.
FACTOR = 2
#: A miss stands when the continuation moves the value towards its threshold by less than this fraction of the
#: distance between them.
MAX_MOVE = 0.1
RULE = (f"a converged miss counts only when a continuation to {FACTOR}× the run's steps (schedule restarted: "
        f"warm-up, then the same decay; fresh optimiser; the batches after the run's) moves each missed value "
        f"towards its threshold by less than {MAX_MOVE:.0%} of the distance; otherwise the run was still learning")


#: The run records (dicts) a continuation knows, by their ``"kind"``: their config type and training function.
RECORD_KINDS = {"selective-induction": (SelectiveTrainConfig, train_selective), "dag": (DagTrainConfig, train_dag),
                "attention-only": (AttentionOnlyConfig, train_attention_only)}


def continue_run(run: TrainRun | dict, *, quiet: bool = True) -> TrainRun | dict:
    """The continuation of ``run``: ``run``'s config with ``(FACTOR − 1) × steps`` steps, from its final weights, on
    the batches after its own. ``run`` is a :func:`bma_verify.model.training.train` or ``train_gpt`` run, a run
    record of a kind in :data:`RECORD_KINDS` that still holds its ``"model"``, or a DS experiment
    (:func:`continue_ds_experiment`)."""
    if isinstance(run, dict) and run.get("kind") == "ds-experiment":
        return continue_ds_experiment(run, quiet=quiet)
    if isinstance(run, dict):
        if run.get("kind") not in RECORD_KINDS or "model" not in run:
            raise ValueError(f"run must be a TrainRun or a run record of a kind in {', '.join(RECORD_KINDS)} holding "
                             f"its model, got a record of kind {run.get('kind')!r} with keys {sorted(run)}")
        config_type, trainer = RECORD_KINDS[run["kind"]]
        config = config_type(**run["config"])
        offset = int(run.get("step_offset", 0)) + config.steps
        continued = trainer(dataclasses.replace(config, steps=(FACTOR - 1) * config.steps), warm_start=run["model"],
                            step_offset=offset)
        continued["step_offset"] = offset
        return continued
    extra = (FACTOR - 1) * run.config.steps
    config = dataclasses.replace(run.config, steps=extra)
    offset = int(run.metrics.get("step_offset", 0)) + run.config.steps
    if isinstance(run.config.model, GPTOptions):
        from bma_verify.model.gpt_training import train_gpt  # imports training: kept out of this module's top
        continued = train_gpt(config, quiet=quiet, warm_start=run.model, step_offset=offset)
    else:
        continued = train(config, quiet=quiet, warm_start=run.model, step_offset=offset)
    continued.metrics["step_offset"] = offset
    return continued


def continue_ds_experiment(run: dict, *, quiet: bool = True) -> dict:
    """The continuation of a :func:`bma_verify.model.ds.run_ds_experiment` record: copies of its models trained
    ``(FACTOR − 1) × steps`` more together (Adam afresh, the cosine restarted), on batches of a stream of their own
    (the DS batches come from one stream per run, not per step: ``train_ds_models``' ``step_offset``), then evaluated
    on the run's evaluation contexts."""
    config = run["config"]
    exp = DSExperiment(**{**config, "train": DSTrainConfig(**config["train"]), "selectors": tuple(config["selectors"]),
                          "L_values": tuple(config["L_values"])})
    offset = int(run.get("step_offset", 0)) + exp.train.steps
    train = dataclasses.replace(exp.train, steps=(FACTOR - 1) * exp.train.steps)
    A = np.asarray(run["A"])
    models = [copy.deepcopy(run["models"][s]) for s in exp.selectors]
    models, histories = train_ds_models([m.cfg for m in models], A, exp.rho, train, models=models,
                                        step_offset=offset, quiet=quiet)
    metrics = {s: {"history": h, "eval": evaluate_ds_model(m, A, exp.rho, exp.L_values, n_eval=exp.n_eval,
                                                           rng=evaluation_rng(exp.train.seed))}
               for s, m, h in zip(exp.selectors, models, histories)}
    loss = histories[0]["loss"]  # the first selector's online loss (fresh batches: held out), every 10 steps
    return {"kind": "ds-experiment", "config": dataclasses.asdict(dataclasses.replace(exp, train=train)),
            "A": run["A"], "models": dict(zip(exp.selectors, models)), "metrics": metrics, "step_offset": offset,
            "curve": [[offset + s, float(loss[s - 1])] for s in range(10, len(loss) + 1, 10)]}


def continuation_test(before: float, after: float, threshold: float, *, upper: bool = True,
                      max_move: float = MAX_MOVE) -> dict:
    """Whether a missed value stands after the continuation.

    Parameters
    ----------
    before, after : the value at the end of the run and at the end of its continuation
    threshold : the rule's threshold; ``upper``: the rule is value ≤ threshold (else value ≥ threshold)
    max_move : the largest fraction of the distance to the threshold a standing miss may move towards it

    Returns
    -------
    dict with ``confirmed`` (the miss stands), ``moved_fraction`` (the move towards the threshold over the
    distance; negative: it moved away), ``before``, ``after``, ``threshold``.
    """
    distance = (before - threshold) if upper else (threshold - before)
    if not distance > 0:
        raise ValueError(f"before must miss the threshold ({'above' if upper else 'below'} {threshold}), "
                         f"got {before}")
    moved = (before - after) if upper else (after - before)
    fraction = float(moved / distance)
    return {"confirmed": bool(fraction < max_move), "moved_fraction": fraction, "before": float(before),
            "after": float(after), "threshold": float(threshold), "max_move": float(max_move)}
