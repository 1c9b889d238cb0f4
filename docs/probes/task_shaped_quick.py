"""Probe (not part of the package): exp-robustness's quick-tier task-shaped run with changes, on the training
seed of a report seed R (``CheckContext(seed=R).seed_for("model:robustness")``).

Prints parent accuracy and L_pa against BMA's at the end, and the L_pa gap every 100 steps. Fields of the run
(its TrainConfig or its TaskShapedOptions, ``model.train_config.with_changes``) are changed with the second
argument; changes that are not fields come as the third:
``lr_scale={"q2": 3, "k2": 3}`` (the learning rate of every parameter whose name holds the key, times the value),
``qk2_gain=3`` (layer 2's W_Q and W_K drawn that many times larger) and ``rel_example_gain=1.5`` (the example-offset
biases drawn that many times larger); ``heads=1`` prints each layer-1 head's mass per example offset
(``model.analysis.task_shaped_head_summary``).

    PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python docs/probes/task_shaped_quick.py 0
    PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python docs/probes/task_shaped_quick.py 2 "example_weight_power=0,ema=0" "heads=1"
    PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python docs/probes/task_shaped_quick.py 0 "steps=600" "lr_scale={'q2': 3, 'k2': 3}"
"""
from __future__ import annotations

import sys
import time
import numpy as np
import torch

import bma_verify.model.training as training
from bma_verify.model.analysis import task_shaped_head_summary
from bma_verify.model.seeds import require_dev_seeds
from bma_verify.model.train_config import with_changes
from bma_verify.reports.core import CheckContext
from bma_verify.reports.plans import preset_configs


def main(report_seed: int, changes: dict, extra: dict) -> None:
    build, groups = training.build_model, training.param_groups

    def build_scaled(config, generator=None):
        model = build(config, generator)
        with torch.no_grad():
            model.q2.weight.mul_(extra.get("qk2_gain", 1.0))
            model.k2.weight.mul_(extra.get("qk2_gain", 1.0))
            model.rel_example.mul_(extra.get("rel_example_gain", 1.0))
        return model

    def groups_scaled(model, config):
        scales, names = extra.get("lr_scale", {}), {id(p): n for n, p in model.named_parameters()}
        split = []
        for group in groups(model, config):
            rest = []
            for p in group["params"]:
                hit = [key for key in scales if key in names[id(p)]]
                if hit:
                    split.append(dict(group, params=[p], lr_scale=group["lr_scale"] * scales[hit[0]]))
                else:
                    rest.append(p)
            if rest:
                split.append(dict(group, params=rest))
        return split

    training.build_model, training.param_groups = build_scaled, groups_scaled
    # the training seed the report used before report seeds moved below 1000: now a development seed
    seed = require_dev_seeds([CheckContext(seed=report_seed).seed_for("model:robustness")])[0]
    config = with_changes(preset_configs("robustness", tier="quick", seed=seed)["task-shaped"], **changes)
    start = time.time()
    run = training.train(config)
    m = run.metrics
    print(f"R{report_seed} {changes} {extra}: parent accuracy {m['parent_accuracy']:.3f} vs BMA "
          f"{m['bma_parent_accuracy']:.3f}, L_pa {m['parent_loss'] - m['bma_parent_loss']:+.3f}, "
          f"{time.time() - start:.0f} s")
    curve = m["curves"]
    print("  L_pa gap by step", [(s, round(p - m["bma_parent_loss"], 3))
                                 for s, p in zip(curve["step"], curve["parent_loss"]) if s % 100 == 0])
    if extra.get("heads"):
        summary = task_shaped_head_summary(run.model, training.eval_batch(config, run.kernel, config.L))
        print("  covered", summary["covered"])
        for k, mass in enumerate(np.asarray(summary["example_mass"])):
            print(f"  head {k}: mass by example offset 0..L {np.round(mass, 2)}, same position "
                  f"{float(summary['same_position_mass'][k]):.2f}")


if __name__ == "__main__":
    args = sys.argv[1:] + ["", ""]
    main(int(args[0]), eval(f"dict({args[1]})"), eval(f"dict({args[2]})"))
